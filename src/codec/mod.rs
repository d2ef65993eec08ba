//! The codec: the stages that turn one block's LZ77 tokens into bytes and back (FORMAT.md §3).
//!
//! - [`varint`]: LEB128 integers used by every header-like structure.
//! - [`logcode`]: the log code shared by literal-run, match-length and distance fields (§3.2).
//! - [`rans`]: rANS with 12-bit tables and 16-bit words, a slice's symbols split between two independent lanes
//!   that read one word stream from its two ends (§3.4).
//! - [`tables`]: symbol statistics, normalisation to 4096 and the table-set serialisation (§2.4).
//! - [`context`]: literal context models (version 4): 4-symbol base tables conditioned on the lane's previous
//!   bases.
//! - [`cut`]: cutting a block's parse at slice boundaries without changing a byte or deepening a reference.
//! - [`block`]: a block payload: slice directory + independently coded slices <-> tokens + literals (§3), and the
//!   parsed form (one slice, or a whole block) that decoding works from.
//! - [`resolve`]: the CPU reference decoder: resolves any stream range through absolute sources, depth-bounded.
//!
//! Each stage returns a [`crate::error::DecodeError`] naming what it saw; none panics on any input.

pub mod block;
pub mod context;
pub mod cut;
pub mod logcode;
pub mod rans;
pub mod resolve;
pub mod tables;
pub mod varint;
