//! Real-mount security tests: who may read the mount (allow_other, default_permissions).
