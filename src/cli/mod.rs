//! The `aceapex` command line: pack, unpack, cat, ls, info, verify.

pub mod args;
pub mod extract;
pub mod info;
pub mod listing;
pub mod output;
pub mod resolve;
pub mod size;
