//! Cutting a block's parse at slice boundaries (FORMAT.md §3): no token of a slice may reach into the next one,
//! so that every slice decodes on its own.
//!
//! The packer parses whole blocks; the codec re-cuts that parse here, without changing any byte and without
//! deepening any byte's reference depth (FORMAT.md §1), since the packer's depth bound was enforced on the
//! uncut parse:
//!
//! - a literal run is split at the boundary;
//! - the part of a match before the boundary keeps its source (it is the same match, shorter);
//! - a later part whose bytes all copy from the match's original source range keeps that source by keeping its
//!   phase: a plain copy from `src + (k mod back)` with a distance that is a multiple of `back`, one piece per
//!   period it spans. Its bytes copy exactly the bytes they copied before, so their depth is unchanged;
//! - a later part of a periodic fill (`back` < its length) cannot do that in one piece: a fill reads the `back`
//!   bytes right before it, which are the previous part's (one level deeper). When one piece per period would
//!   cost more than `back` literals, its first `back` bytes become literals (depth 0) and the rest a fill that
//!   copies them (depth 1, never more than the original byte's depth, which was at least 1);
//! - a later part of a reverse-complement match (FORMAT.md §1, version 5) `j` bytes after its start reads on
//!   from `e − j`: it becomes a reverse complement at distance `back + 2j`, every byte reading the source byte it
//!   read before (all of them lie before the match, so there is no periodic case);
//! - any piece shorter than 2 bytes becomes literals (taken from the block's bytes, so no decoding is needed).

use crate::codec::block::Token;

/// One slice's tokens (ending with the literal-only token) and literals, ready for the slice encoder.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SliceTokens {
    pub tokens: Vec<Token>,
    pub literals: Vec<u8>,
}

/// Cuts the parse of a block (`tokens`, ending with a literal-only token, and `literals`) into slices of
/// `slice_len` bytes. `block` is the block's decoded bytes. Returns `ceil(block.len() / slice_len)` slices.
///
/// # Panics
/// When the tokens do not cover `block` exactly or use more literals than given: bugs in the packer.
pub fn cut_slices(tokens: &[Token], literals: &[u8], block: &[u8], slice_len: usize) -> Vec<SliceTokens> {
    assert!(slice_len > 0, "cut_slices: zero slice length");
    let mut cutter = Cutter {
        block,
        slice_len,
        pos: 0,
        run: 0,
        current: SliceTokens::default(),
        out: Vec::with_capacity(block.len().div_ceil(slice_len)),
    };
    let mut lit_at = 0usize;
    for t in tokens {
        let n = t.lit_len as usize;
        cutter.literals(&literals[lit_at..lit_at + n]);
        lit_at += n;
        if t.match_len > 0 && t.rc {
            cutter.copy_rc(t.match_len as usize, t.back);
        } else if t.match_len > 0 {
            cutter.copy(t.match_len as usize, t.back);
        }
    }
    assert_eq!(cutter.pos, block.len(), "cut_slices: tokens cover {} of {} bytes", cutter.pos, block.len());
    cutter.finish()
}

/// Cost model for a later part of a periodic fill: a token is worth about this many literals.
const TOKEN_COST_IN_LITERALS: usize = 8;

struct Cutter<'a> {
    block: &'a [u8],
    slice_len: usize,
    /// Block offset of the next byte.
    pos: usize,
    /// Literals of the current slice not yet attached to a token.
    run: u32,
    current: SliceTokens,
    out: Vec<SliceTokens>,
}

impl Cutter<'_> {
    /// Bytes left in the current slice, closing it first when it is full.
    fn room(&mut self) -> usize {
        let end = (self.out.len() + 1) * self.slice_len;
        if self.pos == end {
            self.close();
            return self.slice_len;
        }
        end - self.pos
    }

    fn close(&mut self) {
        let mut slice = std::mem::take(&mut self.current);
        slice.tokens.push(Token { lit_len: self.run, match_len: 0, back: 0, rc: false });
        self.run = 0;
        self.out.push(slice);
    }

    fn finish(mut self) -> Vec<SliceTokens> {
        if self.pos > self.out.len() * self.slice_len {
            self.close();
        }
        self.out
    }

    /// Appends literal bytes, splitting them at slice boundaries.
    fn literals(&mut self, mut bytes: &[u8]) {
        while !bytes.is_empty() {
            let take = self.room().min(bytes.len());
            self.current.literals.extend_from_slice(&bytes[..take]);
            self.run += take as u32;
            self.pos += take;
            bytes = &bytes[take..];
        }
    }

    /// Appends the block's own bytes `[pos, pos + n)` as literals (inside the current slice).
    fn own_literals(&mut self, n: usize) {
        let bytes = &self.block[self.pos..self.pos + n];
        self.current.literals.extend_from_slice(bytes);
        self.run += n as u32;
        self.pos += n;
    }

    /// Appends one match piece that fits the current slice (or literals when it is shorter than 2 bytes).
    fn piece(&mut self, len: usize, back: u64) {
        self.piece_of_kind(len, back, false);
    }

    /// [`Self::piece`] of either kind (`rc`: a reverse complement).
    fn piece_of_kind(&mut self, len: usize, back: u64, rc: bool) {
        if len < 2 {
            self.own_literals(len);
            return;
        }
        self.current.tokens.push(Token { lit_len: self.run, match_len: len as u32, back, rc });
        self.run = 0;
        self.pos += len;
    }

    /// Appends a reverse-complement match of `len` bytes at the current position whose source ends `back` bytes
    /// before it, cut at slice boundaries: the part `k` bytes on reads on from `e − k`, at distance `back + 2k`.
    fn copy_rc(&mut self, len: usize, back: u64) {
        let mut k = 0usize;
        while k < len {
            let m = self.room().min(len - k);
            self.piece_of_kind(m, back + 2 * k as u64, true);
            k += m;
        }
    }

    /// Appends a match of `len` bytes at the current position copying from `back` bytes before, cut at slice
    /// boundaries as the module notes describe.
    fn copy(&mut self, len: usize, back: u64) {
        let mut k = 0usize;
        while k < len {
            let m = self.room().min(len - k);
            if k == 0 {
                self.piece(m, back);
            } else {
                self.later_piece(k, m, back);
            }
            k += m;
        }
    }

    /// Part `[k, k + m)` (`k > 0`) of a match with distance `back`, inside the current slice.
    fn later_piece(&mut self, k: usize, m: usize, back: u64) {
        let b = back as usize;
        let phase = k % b;
        // Pieces needed to copy every byte from the original period, one per period wrap.
        let plain_pieces = (phase + m).div_ceil(b);
        if m > b && plain_pieces * TOKEN_COST_IN_LITERALS > b + TOKEN_COST_IN_LITERALS {
            self.own_literals(b);
            self.piece(m - b, back);
            return;
        }
        let (mut k, mut left) = (k, m);
        while left > 0 {
            let phase = k % b;
            let take = left.min(b - phase);
            // dst − distance = src + phase: the same period byte the original match copied.
            self.piece(take, back + (k - phase) as u64);
            k += take;
            left -= take;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Replays tokens by the byte-wise definition of FORMAT.md §1 over `stream` (which holds everything before
    /// `start`), returning the bytes and each byte's depth; `depth` holds the depths before `start`.
    fn replay(stream: &mut Vec<u8>, depth: &mut Vec<u8>, tokens: &[Token], literals: &[u8]) {
        let mut lit = 0;
        for t in tokens {
            for _ in 0..t.lit_len {
                stream.push(literals[lit]);
                depth.push(0);
                lit += 1;
            }
            let dst = stream.len();
            let src = dst - t.back as usize;
            if t.rc {
                assert!(t.back as usize + t.match_len as usize - 1 <= dst, "reverse complement before the start");
            }
            for k in 0..t.match_len as usize {
                let from = if t.rc { src - k } else { src + k % t.back as usize };
                let byte = stream[from];
                stream.push(if t.rc { crate::codec::block::COMPLEMENT[byte as usize] } else { byte });
                depth.push(depth[from] + 1);
            }
        }
        assert_eq!(lit, literals.len());
    }

    /// Cuts `tokens` (a block at stream offset `prefix.len()`) and checks bytes, depths and slice shapes.
    fn check_cut(prefix: &[u8], tokens: &[Token], literals: &[u8], slice_len: usize) -> Vec<SliceTokens> {
        let mut whole = prefix.to_vec();
        let mut whole_depth = vec![0u8; prefix.len()];
        replay(&mut whole, &mut whole_depth, tokens, literals);
        let block = whole[prefix.len()..].to_vec();
        let slices = cut_slices(tokens, literals, &block, slice_len);
        assert_eq!(slices.len(), block.len().div_ceil(slice_len));
        let mut cut = prefix.to_vec();
        let mut cut_depth = vec![0u8; prefix.len()];
        for (j, s) in slices.iter().enumerate() {
            let last = s.tokens.last().unwrap();
            assert_eq!((last.match_len, last.back), (0, 0), "slice {j} must end literal-only");
            assert!(s.tokens[..s.tokens.len() - 1].iter().all(|t| t.match_len >= 2 && t.back >= 1));
            let len: u32 = s.tokens.iter().map(|t| t.lit_len + t.match_len).sum();
            assert_eq!(len as usize, slice_len.min(block.len() - j * slice_len), "slice {j} length");
            replay(&mut cut, &mut cut_depth, &s.tokens, &s.literals);
        }
        assert_eq!(cut, whole, "bytes differ after cutting");
        for (i, (&c, &w)) in cut_depth.iter().zip(&whole_depth).enumerate() {
            assert!(c <= w, "byte {i}: depth {c} after cutting, {w} before");
        }
        slices
    }

    fn tok(lit_len: u32, match_len: u32, back: u64) -> Token {
        Token { lit_len, match_len, back, rc: false }
    }

    #[test]
    fn literal_runs_split_at_boundaries() {
        let literals: Vec<u8> = (0..100u8).collect();
        let slices = check_cut(b"", &[tok(100, 0, 0)], &literals, 32);
        assert_eq!(slices.len(), 4);
        assert_eq!(slices[3].literals, (96..100u8).collect::<Vec<_>>());
    }

    #[test]
    fn plain_copy_across_a_boundary_keeps_its_source() {
        let prefix: Vec<u8> = (0..200u8).collect();
        // A 40-byte copy from 150 bytes back crossing the boundary at 32: two matches, same distance.
        let slices = check_cut(&prefix, &[tok(10, 40, 150), tok(14, 0, 0)], &(0..24u8).collect::<Vec<_>>(), 32);
        assert_eq!(slices[0].tokens[0], tok(10, 22, 150));
        assert_eq!(slices[1].tokens[0], tok(0, 18, 150));
    }

    #[test]
    fn one_byte_remainders_become_literals() {
        let prefix: Vec<u8> = (0..64u8).collect();
        // Ends one byte into the next slice, and starts one byte before the boundary.
        let s = check_cut(&prefix, &[tok(20, 13, 50), tok(0, 0, 0)], &[7; 20], 32);
        assert_eq!(s[1].tokens, vec![tok(1, 0, 0)]);
        let s = check_cut(&prefix, &[tok(31, 10, 50), tok(23, 0, 0)], &[9; 54], 32);
        assert_eq!(s[0].tokens, vec![tok(32, 0, 0)]);
        assert_eq!(s[1].tokens[0], tok(0, 9, 50));
    }

    #[test]
    fn periodic_fills_across_many_boundaries_stay_shallow() {
        // An 'N' run with back 1 over five slices, and tandem repeats with periods 2, 7 and 30.
        for back in [1u64, 2, 7, 30] {
            let lits: Vec<u8> = (0..back as u8).map(|i| b"ACGT"[i as usize % 4] + i).collect();
            let tokens = [tok(back as u32, 150 - back as u32, back), tok(3, 0, 0)];
            let literals: Vec<u8> = lits.iter().copied().chain(*b"xyz").collect();
            let slices = check_cut(b"", &tokens, &literals, 32);
            assert_eq!(slices.len(), 5);
        }
        // Periods longer than a slice: later parts copy from the original period, piece by piece.
        let prefix: Vec<u8> = (0..=255u8).cycle().take(1000).collect();
        for back in [40u64, 63, 64, 65, 100] {
            check_cut(&prefix, &[tok(5, 300, back), tok(0, 0, 0)], &[1, 2, 3, 4, 5], 64);
        }
    }

    fn rc(lit_len: u32, match_len: u32, back: u64) -> Token {
        Token { lit_len, match_len, back, rc: true }
    }

    #[test]
    fn reverse_complements_across_boundaries_read_on_backwards() {
        let prefix: Vec<u8> = (0..200).map(|i| b"ACGT"[(i * 7 + i / 5) % 4]).collect();
        // 70 bytes whose source ends 100 bytes back (at stream 200 + 10 − 100 = 110) over slices of 32.
        let slices = check_cut(&prefix, &[rc(10, 70, 100), tok(4, 0, 0)], &(0..14u8).collect::<Vec<_>>(), 32);
        assert_eq!(slices[0].tokens[0], rc(10, 22, 100));
        assert_eq!(slices[1].tokens[0], rc(0, 32, 100 + 44));
        assert_eq!(slices[2].tokens[0], rc(0, 16, 100 + 108));
        // A one-byte remnant on either side becomes a literal; a two-byte one stays a match.
        let s = check_cut(&prefix, &[rc(31, 10, 100), tok(23, 0, 0)], &[9; 54], 32);
        assert_eq!(s[0].tokens, vec![tok(32, 0, 0)]);
        assert_eq!(s[1].tokens[0], rc(0, 9, 102));
        let s = check_cut(&prefix, &[rc(20, 13, 100), tok(0, 0, 0)], &[7; 20], 32);
        assert_eq!(s[1].tokens, vec![tok(1, 0, 0)]);
        let s = check_cut(&prefix, &[rc(30, 10, 100), tok(24, 0, 0)], &[7; 54], 32);
        assert_eq!(s[0].tokens[0], rc(30, 2, 100));
        assert_eq!(s[1].tokens[0], rc(0, 8, 104));
        // The source reaching back to the stream's first byte, cut at every 16 bytes.
        check_cut(&prefix, &[rc(0, 100, 101), tok(0, 0, 0)], &[], 16);
    }

    #[test]
    fn exact_fits_and_short_tails() {
        let prefix = b"ACGTACGTACGT";
        // A match ending exactly on a boundary, then one starting exactly on it.
        check_cut(prefix, &[tok(0, 32, 4), tok(0, 32, 12), tok(1, 0, 0)], &[5], 32);
        // A last slice of one byte.
        check_cut(prefix, &[tok(0, 64, 3), tok(1, 0, 0)], &[5], 32);
    }

    #[test]
    fn random_parses_keep_bytes_and_depths() {
        let mut seed = 0x1234_5678_9abc_def0u64;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n.max(1)
        };
        for round in 0..300 {
            let prefix: Vec<u8> = (0..next(300)).map(|_| b"ACGT"[next(4) as usize]).collect();
            let block_len = 1 + next(700) as usize;
            let slice_len = [16usize, 32, 64, 512][round % 4];
            let mut tokens = Vec::new();
            let mut literals = Vec::new();
            let mut pos = 0usize;
            while pos < block_len {
                let lit = (next(6) as usize).min(block_len - pos);
                literals.extend((0..lit).map(|_| b"ACGTN"[next(5) as usize]));
                pos += lit;
                let reach = prefix.len() + pos;
                let len = (2 + next(200) as usize).min(block_len - pos);
                if len < 2 || reach == 0 {
                    tokens.push(tok(lit as u32, 0, 0));
                    continue;
                }
                let back = 1 + if next(2) == 0 { next(8) } else { next(reach as u64) };
                if next(3) == 0 && len <= reach {
                    // A reverse complement: back + len − 1 ≤ reach.
                    let back = back.min((reach - len + 1) as u64);
                    tokens.push(rc(lit as u32, len as u32, back));
                } else {
                    tokens.push(tok(lit as u32, len as u32, back.min(reach as u64)));
                }
                pos += len;
            }
            // Merge into the token shape the packer emits: matches, then one literal-only token last.
            let mut shaped: Vec<Token> = Vec::new();
            let mut run = 0;
            for t in tokens {
                run += t.lit_len;
                if t.match_len > 0 {
                    shaped.push(Token { lit_len: run, ..t });
                    run = 0;
                }
            }
            shaped.push(tok(run, 0, 0));
            check_cut(&prefix, &shaped, &literals, slice_len);
        }
    }
}
