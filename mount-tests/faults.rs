//! Real-mount fault tests: the archive truncated, overwritten or replaced under a live mount.
