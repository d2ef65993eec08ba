//! The packer.

pub mod fai;
