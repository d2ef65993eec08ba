//! Block payloads (FORMAT.md §3): one block's tokens and literals encoded as a single interleaved rANS stream plus
//! an extra-bits stream, and the parsed form that random access works from.

use crate::codec::tables::{SymbolStats, TableSet};
use crate::error::DecodeError;

/// One LZ77 token as the packer produces it: `lit_len` literals, then a match of `match_len` bytes copied from
/// `back` bytes before the match's destination (a periodic fill when `back < match_len`). The last token of a
/// block is literal-only: `match_len == 0` and `back == 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Token {
    pub lit_len: u32,
    pub match_len: u32,
    pub back: u64,
}

/// A decoded block payload: what the tokens say, before any match is resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedBlock {
    /// Absolute stream position of the block's first byte.
    pub start: u64,
    /// Decoded length of the block.
    pub len: u32,
    /// All tokens, the literal-only one last.
    pub tokens: Vec<Token>,
    /// `token_pos[t]`: offset within the block where token t's literals begin (prefix sum); one extra entry = len.
    pub token_pos: Vec<u32>,
    /// `lit_pos[t]`: index into `literals` of token t's first literal (prefix sum).
    pub lit_pos: Vec<u32>,
    pub literals: Vec<u8>,
}

impl ParsedBlock {
    /// Index of the token whose span (literals + match) contains block offset `off` (`off < len`).
    pub fn token_at(&self, off: u32) -> usize {
        // token_pos is non-decreasing; the last entry equals len.
        self.token_pos.partition_point(|&p| p <= off).saturating_sub(1)
    }

    /// Heap bytes held, for cache accounting.
    pub fn heap_bytes(&self) -> usize {
        self.tokens.len() * std::mem::size_of::<Token>()
            + (self.token_pos.len() + self.lit_pos.len()) * 4
            + self.literals.len()
    }
}

/// Adds one block's symbols to a group's statistics (the packer calls this for every block of a group before
/// building the group's [`TableSet`]).
pub fn count_symbols(tokens: &[Token], literals: &[u8], stats: &mut SymbolStats) {
    let _ = (tokens, literals, stats);
    todo!("codec helper")
}

/// Encodes one block. `tokens` must end with a literal-only token; `Σ lit_len == literals.len()`.
/// `lanes` is the header's `rans_lanes`. Appends the payload to `out`.
pub fn encode_block(tokens: &[Token], literals: &[u8], tables: &TableSet, lanes: u32, out: &mut Vec<u8>) {
    let _ = (tokens, literals, tables, lanes, out);
    todo!("codec helper")
}

/// Decodes one block payload (entropy stage + parse by prefix sums). `block_start` is the block's absolute
/// position and `block_len` its decoded length; every length, count and distance is validated (§3.3).
pub fn decode_block(
    payload: &[u8],
    tables: &TableSet,
    lanes: u32,
    block_start: u64,
    block_len: u32,
) -> Result<ParsedBlock, DecodeError> {
    let _ = (payload, tables, lanes, block_start, block_len);
    todo!("codec helper")
}
