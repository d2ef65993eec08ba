//! The packer.
