//! The reference-depth bound (FORMAT.md §1): a sequential pass in stream order that gives every byte its depth
//! (0 for a literal, 1 + the depth of the byte it copies) and turns the bytes of any match that would exceed
//! `max_depth` into literals — the forced-literal approach. The match around a forced literal is split into
//! pieces that copy the same source bytes (the same distance forward; a reverse complement's later piece
//! `j` bytes on has distance `back + 2j`); pieces too short to pay for a token become literals too.
//!
//! The pass is O(n) over the stream, touches one depth byte per stream byte (a file-backed map for large inputs)
//! and is deterministic, so the archive does not depend on how parsing was spread over threads.
//!
//! A pass can be split at a position ([`DepthPass::split_at`]): the final depths before it, shared read-only
//! (what the parsers of a chunk read), and a pass over the rest (the trial pass of a chunk, run beside them).

use crate::codec::block::Token;
use crate::pack::parser::{source_byte, BlockTokens};

/// Match pieces shorter than this after a split are coded as literals (a token costs more than it saves).
const MIN_PIECE: u32 = 4;

/// Saved statistics of a [`DepthPass`] (see [`DepthPass::rewind`]).
#[derive(Debug, Clone, Copy)]
pub struct Checkpoint {
    max_seen: u8,
    forced: u64,
}

/// Depth bookkeeping over the stream from `base` on.
pub struct DepthPass<'a> {
    data: &'a [u8],
    /// The final depths of the bytes before `base` (read only; empty when `base` is 0).
    before: &'a [u8],
    /// The depths of the bytes from `base` on: `depth[p - base]` is byte `p`'s.
    depth: &'a mut [u8],
    base: usize,
    max_depth: u8,
    pub max_seen: u8,
    /// Bytes forced to be literals so far.
    pub forced: u64,
}

impl<'a> DepthPass<'a> {
    /// `depth` must be as long as `data`; blocks are then passed in stream order.
    pub fn new(data: &'a [u8], depth: &'a mut [u8], max_depth: u8) -> Self {
        debug_assert_eq!(data.len(), depth.len());
        DepthPass { data, before: &[], depth, base: 0, max_depth: max_depth.max(1), max_seen: 0, forced: 0 }
    }

    /// The final depths of the bytes before `at` (every block before it must have been applied), and a pass over
    /// the bytes from `at` on with the same statistics, which reads them as the depths of earlier sources. Why:
    /// a chunk's trial pass runs while its segments' parsers read the depths before the chunk.
    pub fn split_at(&mut self, at: u64) -> (&[u8], DepthPass<'_>) {
        debug_assert!(self.base == 0 && self.before.is_empty(), "a pass over the whole stream splits");
        let (before, depth) = self.depth.split_at_mut(at as usize);
        let before: &[u8] = before;
        let tail = DepthPass {
            data: self.data,
            before,
            depth,
            base: at as usize,
            max_depth: self.max_depth,
            max_seen: self.max_seen,
            forced: self.forced,
        };
        (before, tail)
    }

    /// The depths of the bytes from `from` (at least the pass's start) to `to`, as the pass has left them.
    pub fn depths(&self, from: u64, to: u64) -> &[u8] {
        &self.depth[from as usize - self.base..to as usize - self.base]
    }

    /// The depth of byte `p` (before the pass's start: the final one it was given).
    #[inline]
    fn depth_at(&self, p: usize) -> u8 {
        if p < self.base {
            self.before[p]
        } else {
            self.depth[p - self.base]
        }
    }

    /// The statistics to restore when a chunk's depth pass is run again.
    pub fn checkpoint(&self) -> Checkpoint {
        Checkpoint { max_seen: self.max_seen, forced: self.forced }
    }

    /// Restores the statistics saved before a chunk so its blocks can be applied again (they overwrite their own
    /// depths; bytes before the chunk are untouched).
    pub fn rewind(&mut self, checkpoint: Checkpoint) {
        self.max_seen = checkpoint.max_seen;
        self.forced = checkpoint.forced;
    }

    /// The final depths of the stream's first `end` bytes (all blocks before `end` must have been applied).
    pub fn finished(&self, end: u64) -> &[u8] {
        debug_assert_eq!(self.base, 0, "a pass over the whole stream");
        &self.depth[..end as usize]
    }

    /// Checks the block starting at `start` and rewrites its tokens where a match would go too deep.
    pub fn apply(&mut self, start: u64, block: &BlockTokens) -> BlockTokens {
        let mut out = BlockTokens {
            tokens: Vec::with_capacity(block.tokens.len()),
            literals: Vec::with_capacity(block.literals.len()),
        };
        let mut pos = start as usize;
        let mut run = 0u32;
        let mut lit_at = 0usize;
        for t in &block.tokens {
            let lits = t.lit_len as usize;
            out.literals.extend_from_slice(&block.literals[lit_at..lit_at + lits]);
            self.depth[pos - self.base..pos - self.base + lits].fill(0);
            lit_at += lits;
            pos += lits;
            run += t.lit_len;
            if t.match_len > 0 {
                self.place_match(pos, *t, &mut run, &mut out);
                pos += t.match_len as usize;
            }
        }
        out.tokens.push(Token { lit_len: run, match_len: 0, back: 0, rc: false });
        out
    }

    /// Writes the depths of the match of `t` at `dst` and emits it as one or more pieces plus forced literals. A
    /// byte that would go too deep becomes a literal; the rest of the match continues as a new piece copying the
    /// same source bytes. (Re-pointing the rest to the source's own, shallower source was measured: it saved
    /// nothing, because the parser already avoids most deep sources and a re-pointed piece costs a full token.)
    fn place_match(&mut self, dst: usize, t: Token, run: &mut u32, out: &mut BlockTokens) {
        let end = dst + t.match_len as usize;
        let mut piece = dst;
        let mut x = dst;
        // The distance of the piece starting at `at`: forward pieces keep `back` (their period restarts at the
        // piece start); a reverse complement's piece j bytes on reads on from `e − j`, at distance back + 2j.
        let piece_back = |at: usize| if t.rc { t.back + 2 * (at - dst) as u64 } else { t.back };
        while x < end {
            let src = source_byte(piece as u64, piece_back(piece), t.rc, (x - piece) as u64) as usize;
            let d = self.depth_at(src) as u32 + 1;
            if d <= self.max_depth as u32 {
                self.depth[x - self.base] = d as u8;
                x += 1;
                continue;
            }
            self.close_piece(piece, x, (piece_back(piece), t.rc), piece == dst && x == end, run, out);
            self.depth[x - self.base] = 0;
            out.literals.push(self.data[x]);
            *run += 1;
            self.forced += 1;
            x += 1;
            piece = x;
        }
        self.close_piece(piece, end, (piece_back(piece), t.rc), piece == dst, run, out);
    }

    /// Emits match bytes `[from, to)` (depths already written) as a token of distance and kind `(back, rc)`, or as
    /// literals when the piece is too short to pay for a token (`whole`: the parser's own unsplit match, kept
    /// whenever legal).
    fn close_piece(
        &mut self,
        from: usize,
        to: usize,
        (back, rc): (u64, bool),
        whole: bool,
        run: &mut u32,
        out: &mut BlockTokens,
    ) {
        let n = (to - from) as u32;
        if n == 0 {
            return;
        }
        if n < MIN_PIECE && !(whole && n >= 2) {
            out.literals.extend_from_slice(&self.data[from..to]);
            self.depth[from - self.base..to - self.base].fill(0);
            *run += n;
            return;
        }
        let piece_max = self.depth[from - self.base..to - self.base].iter().copied().max().unwrap_or(0);
        self.max_seen = self.max_seen.max(piece_max);
        out.tokens.push(Token { lit_len: *run, match_len: n, back, rc });
        *run = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `block` as the one block of `data` (at position 0), replayed the way FORMAT.md §1 defines tokens by the
    /// packer tests' reference replay: the bytes and each byte's depth.
    fn replay(data: &[u8], block: BlockTokens) -> (Vec<u8>, Vec<u8>) {
        crate::pack::tests::replay(&[block], data.len(), data.len())
    }

    #[test]
    fn chains_of_copies_are_cut_at_the_bound() {
        // "abcd" then 40 tokens each copying the previous 4 bytes: depth grows by one per copy.
        let unit = b"abcdefgh";
        let data: Vec<u8> = unit.iter().cycle().take(8 * 41).copied().collect();
        let mut tokens = vec![Token { lit_len: 8, match_len: 8, back: 8, rc: false }];
        tokens.extend((0..39).map(|_| Token { lit_len: 0, match_len: 8, back: 8, rc: false }));
        tokens.push(Token::default());
        let block = BlockTokens { tokens, literals: unit.to_vec() };
        let mut depth = vec![0u8; data.len()];
        let mut pass = DepthPass::new(&data, &mut depth, 5);
        let fixed = pass.apply(0, &block);
        assert_eq!(pass.max_seen, 5);
        let (out, depth) = replay(&data, fixed);
        assert_eq!(out, data);
        assert!(depth.iter().all(|&d| d <= 5));
    }

    #[test]
    fn reverse_complement_chains_are_cut_at_the_bound() {
        // 8 literal bases, then 40 reverse complements each reading the 8 bytes before it backwards: every copy
        // is one level deeper. With the bound 5 the pass must force literals, and what it keeps must decode.
        let unit = b"AACGTTGC";
        let mut data = unit.to_vec();
        let mut tokens = Vec::new();
        for _ in 0..40 {
            let e = data.len() - 1;
            let piece: Vec<u8> = (0..8).map(|k| crate::codec::block::COMPLEMENT[data[e - k] as usize]).collect();
            data.extend(piece);
            tokens.push(Token { lit_len: if tokens.is_empty() { 8 } else { 0 }, match_len: 8, back: 1, rc: true });
        }
        tokens.push(Token::default());
        let block = BlockTokens { tokens, literals: unit.to_vec() };
        let (unbounded, d) = replay(&data, block.clone());
        assert_eq!(unbounded, data);
        assert_eq!(d.iter().max(), Some(&40));
        for max in [1u8, 2, 5, 16] {
            let mut depth = vec![0u8; data.len()];
            let mut pass = DepthPass::new(&data, &mut depth, max);
            let fixed = pass.apply(0, &block);
            assert!(pass.forced > 0);
            assert_eq!(pass.max_seen, max);
            assert!(fixed.tokens.iter().any(|t| t.rc && t.match_len > 0));
            let (out, depth) = replay(&data, fixed);
            assert_eq!(out, data, "max {max}");
            assert!(depth.iter().all(|&d| d <= max));
        }
    }

    #[test]
    fn split_reverse_complement_keeps_its_source() {
        // A block of one reverse complement over the 20 bytes before it, one of which (byte 10) is at the bound:
        // byte k reads 19 − k, so byte 9 of the match is forced, and the piece after it reads on from byte 9
        // (distance back + 2·10) with its bytes' depths unchanged.
        let mut data = b"ACGGTCAATTGCCAGTACGT".to_vec();
        let n = data.len();
        let copy: Vec<u8> = (0..n).map(|k| crate::codec::block::COMPLEMENT[data[n - 1 - k] as usize]).collect();
        data.extend(copy);
        let block = BlockTokens {
            tokens: vec![Token { lit_len: 0, match_len: n as u32, back: 1, rc: true }, Token::default()],
            literals: Vec::new(),
        };
        let mut depth = vec![0u8; data.len()];
        depth[10] = 3;
        let mut pass = DepthPass::new(&data, &mut depth, 3);
        let fixed = pass.apply(n as u64, &block);
        assert_eq!(pass.forced, 1);
        let expect = [
            Token { lit_len: 0, match_len: 9, back: 1, rc: true },
            Token { lit_len: 1, match_len: 10, back: 1 + 2 * 10, rc: true },
            Token { lit_len: 0, match_len: 0, back: 0, rc: false },
        ];
        assert_eq!(fixed.tokens, expect);
        assert_eq!(fixed.literals, [data[n + 9]]);
        assert!(depth[n..].iter().all(|&d| d <= 1));
    }

    #[test]
    fn periodic_fill_depth_uses_the_period() {
        // One literal 'N' then a periodic fill of 1000 bytes with back 1: every byte has depth 1.
        let data = vec![b'N'; 1001];
        let block = BlockTokens {
            tokens: vec![Token { lit_len: 1, match_len: 1000, back: 1, rc: false }, Token::default()],
            literals: vec![b'N'],
        };
        let mut depth = vec![0u8; data.len()];
        let mut pass = DepthPass::new(&data, &mut depth, 1);
        let fixed = pass.apply(0, &block);
        assert_eq!(fixed, block);
        assert_eq!(pass.forced, 0);
        assert_eq!(pass.max_seen, 1);
    }
}
