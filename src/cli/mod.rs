//! The `aceapex` command line: pack, unpack, cat, ls, info, verify.

pub mod extract;
pub mod listing;
pub mod size;
