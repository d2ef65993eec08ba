//! The fuser adapter.
