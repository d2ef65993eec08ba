//! The codec: the stages that turn one block's LZ77 tokens into bytes and back (FORMAT.md §3).
//!
//! - [`varint`]: LEB128 integers used by every header-like structure.
//! - [`logcode`]: the log code shared by literal-run, match-length and distance fields (§3.2).
//! - [`rans`]: K-lane interleaved rANS with 12-bit tables and 16-bit words, the layout a warp decodes (§3.4).
//! - [`tables`]: symbol statistics, normalisation to 4096 and the table-set serialisation (§2.4).
//! - [`block`]: a block payload: tokens + literals <-> bytes (§3), and the parsed form random access uses.
//! - [`resolve`]: the CPU reference decoder: resolves any stream range through absolute sources, depth-bounded.
//!
//! Each stage returns a [`crate::error::DecodeError`] naming what it saw; none panics on any input.

pub mod block;
pub mod logcode;
pub mod rans;
pub mod resolve;
pub mod tables;
pub mod varint;
