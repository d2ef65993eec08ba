//! aceapex: random-access compressed archives (`.acx`) served as a read-only filesystem.
//!
//! The data path, from the bottom up:
//!
//! - [`codec`]: the format stages of one block — varints, log codes, two-lane rANS, frequency tables, block
//!   payloads — and the CPU reference decoder that resolves absolute back-references.
//! - [`format`](mod@format): the archive container: header, footer, index, tables and tree sections.
//! - [`pack`]: the packer — global match search, parsing, the reference-depth bound, table groups, writing.
//! - [`engine`]: decode engines behind one trait: CPU and GPU (NVRTC-compiled kernels from `kernels/`).
//! - [`cache`]: the host LRU of decoded blocks, with a byte budget and single-flight misses.
//! - [`archive`]: an opened archive: file lookups and reads of any range through cache and engine.
//! - [`fs`]: the filesystem layer (inodes, attributes, directory listings, reads) with no FUSE types in it.
//! - [`fuse`]: the thin `fuser` adapter over [`fs`].
//!
//! - [`cli`]: the `aceapex` command's subcommands (argument parsing, listings, safe extraction).
//! - [`units`]: byte sizes as people write them (`16K`, `4G`).
//!
//! The binaries `aceapex` and `aceapex-mount` are thin layers over these.
//!
//! The docs are the architecture's notes as much as an API's: they link to the private constants and helpers
//! whose measured values explain a design (read them with `cargo doc --document-private-items`), so rustdoc's
//! warning about public docs that link private items is off.
#![allow(rustdoc::private_intra_doc_links)]

pub mod archive;
pub mod cache;
pub mod cli;
pub mod codec;
pub mod engine;
pub mod error;
pub mod format;
pub mod fs;
pub mod fuse;
pub mod genome;
pub mod pack;
pub mod units;

pub use error::{DecodeError, Error, Result};
