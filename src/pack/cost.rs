//! The parser's price model: what a literal, a literal-run length, a match length and a distance cost in bits,
//! estimated from the statistics of the data being packed.
//!
//! Prices are fixed point in 1/256 bit (the same unit as [`crate::codec::logcode::cost`]). Code prices come from
//! adaptive counts: the parser starts a segment from a prior (literal counts of the block's own bytes, generic
//! shapes for the codes) and folds in the symbols of every block it has parsed, with decay, so the prices follow
//! the data the way the group's rANS tables will.

use crate::codec::block::{continuation_index, distance_code, PrevMatch, Token};
use crate::codec::logcode;
use crate::codec::tables::{OF_ALPHABET, OF_EXPLICIT_CODES, OF_REVERSE_BASE};

pub const PRICE_ONE: u32 = 1 << logcode::COST_FRAC_BITS;
const LL_CODES: usize = 64;
const ML_CODES: usize = 64;
const OF_CODES: usize = OF_ALPHABET;
/// Prior count of each explicit reverse-complement distance code (forward codes start at 4). None: the forward
/// prices stay what they were before version 5 (text and general mode never have a reverse complement, and a
/// prior of 1 each moved them enough to change parses), and on bases the counts of the first block with reverse
/// complements price them (until then they cost the 12 bits of the rarest symbol).
const RC_PRIOR: u32 = 0;

/// Adaptive symbol counts (code level) for the four alphabets.
#[derive(Debug, Clone)]
pub struct Counts {
    pub lit: [u32; 256],
    pub ll: [u32; LL_CODES],
    pub ml: [u32; ML_CODES],
    pub of: [u32; OF_CODES],
}

impl Counts {
    /// A prior with no knowledge of the data's matches: short runs and lengths likely, distances flat-ish.
    pub fn prior() -> Counts {
        let mut c = Counts { lit: [1; 256], ll: [1; LL_CODES], ml: [1; ML_CODES], of: [4; OF_CODES] };
        c.of[OF_REVERSE_BASE..].fill(RC_PRIOR);
        for (i, v) in c.ll.iter_mut().enumerate() {
            *v = (64 >> (i / 2).min(6)).max(1);
        }
        for (i, v) in c.ml.iter_mut().enumerate() {
            *v = (64 >> (i / 3).min(6)).max(1);
        }
        c
    }

    /// Replaces the literal counts with a histogram of `bytes` (plus one so every byte stays codable).
    pub fn set_literals_from(&mut self, bytes: &[u8]) {
        self.lit = [1; 256];
        for &b in bytes {
            self.lit[b as usize] += 1;
        }
    }

    /// Adds a parsed block's symbols. Distances are counted as the slice encoder codes them, a continuation
    /// code where one applies, except that the block is taken as one slice (the encoder codes the first match
    /// of each slice explicitly: one match in a few dozen on genomes).
    pub fn add_tokens(&mut self, tokens: &[Token], literals: &[u8]) {
        // Destinations relative to the block start: only their differences count.
        let (mut prev, mut dst) = (None, 0u64);
        for t in tokens {
            self.ll[logcode::code_of(t.lit_len as u64) as usize] += 1;
            dst += t.lit_len as u64;
            if t.match_len > 0 {
                self.ml[logcode::code_of(t.match_len as u64 - 2) as usize] += 1;
                self.of[(distance_code(t.back, t.rc, dst, prev).0 as usize).min(OF_CODES - 1)] += 1;
                prev = Some(PrevMatch { back: t.back, dst, rc: t.rc });
                dst += t.match_len as u64;
            }
        }
        for &b in literals {
            self.lit[b as usize] += 1;
        }
    }

    /// Halves every count (keeps at least 1) so recent blocks weigh more than old ones.
    pub fn decay(&mut self) {
        let halve = |s: &mut [u32]| s.iter_mut().for_each(|v| *v = (*v / 2).max(1));
        halve(&mut self.lit);
        halve(&mut self.ll);
        halve(&mut self.ml);
        halve(&mut self.of[..OF_REVERSE_BASE]);
        // Reverse-complement codes never seen stay at 0 (see RC_PRIOR); seen ones stay above it.
        self.of[OF_REVERSE_BASE..].iter_mut().for_each(|v| *v = v.div_ceil(2));
    }
}

/// Price tables derived from [`Counts`].
#[derive(Debug, Clone)]
pub struct Prices {
    pub lit: [u32; 256],
    pub ll: [u32; LL_CODES],
    pub ml: [u32; ML_CODES],
    pub of: [u32; OF_CODES],
    /// `ll_len[l]`: price of a literal run of length `l` for small `l` (the common case, precomputed).
    ll_len: Vec<u32>,
    /// `ml_len[len]`: price of a match length for `len < ml_len.len()`.
    ml_len: Vec<u32>,
}

/// Literal-run lengths with a precomputed price.
const LL_CACHE: usize = 1024;
/// Match lengths with a precomputed price.
const ML_CACHE: usize = 4096;

fn entropy_prices<const N: usize>(counts: &[u32; N]) -> [u32; N] {
    let total: u64 = counts.iter().map(|&c| c as u64).sum();
    let mut out = [0u32; N];
    for (o, &c) in out.iter_mut().zip(counts) {
        // A 12-bit rANS table cannot give a symbol less than 1/4096, so no price exceeds 12 bits.
        let p = (c.max(1) as f64 / total.max(1) as f64).max(1.0 / 4096.0);
        *o = ((-p.log2()) * PRICE_ONE as f64).round().max(PRICE_ONE as f64 / 16.0) as u32;
    }
    out
}

/// `logcode::cost(v - offset, costs)` for every `v < n` (`u32::MAX` below `offset`), filled a code's whole range
/// of values at a time: the same values as a call per value, which was 1.5 % of a genome pack's instructions
/// (the tables are built again for every block parsed).
fn code_costs(offset: usize, n: usize, costs: &[u32]) -> Vec<u32> {
    let mut out = vec![u32::MAX; offset.min(n)];
    let mut code = 0;
    while out.len() < n {
        let end = if (code as usize) + 1 < logcode::CODE_COUNT {
            (logcode::base(code + 1) as usize).saturating_add(offset).min(n)
        } else {
            n
        };
        let price = match costs.get(code as usize) {
            Some(&c) => c.saturating_add(logcode::extra_bits(code) << logcode::COST_FRAC_BITS),
            None => u32::MAX,
        };
        out.resize(end, price);
        code += 1;
    }
    out
}

impl Prices {
    pub fn from_counts(c: &Counts) -> Prices {
        let mut p = Prices {
            lit: entropy_prices(&c.lit),
            ll: entropy_prices(&c.ll),
            ml: entropy_prices(&c.ml),
            of: entropy_prices(&c.of),
            ll_len: Vec::new(),
            ml_len: Vec::new(),
        };
        p.ll_len = code_costs(0, LL_CACHE, &p.ll);
        p.ml_len = code_costs(2, ML_CACHE, &p.ml);
        p
    }

    #[inline]
    pub fn lit_run(&self, len: u32) -> u32 {
        match self.ll_len.get(len as usize) {
            Some(&c) => c,
            None => logcode::cost(len as u64, &self.ll),
        }
    }

    #[inline]
    pub fn match_len(&self, len: u32) -> u32 {
        match self.ml_len.get(len as usize) {
            Some(&c) => c,
            None => logcode::cost(len as u64 - 2, &self.ml),
        }
    }

    /// Price of an explicit distance code (the first match of a slice, or one no continuation reaches): codes
    /// `0 … 87` for a forward match, `96 … 183` for a reverse complement (`rc`), with the same extra bits.
    #[inline]
    pub fn distance(&self, back: u64, rc: bool) -> u32 {
        let base = if rc { OF_REVERSE_BASE } else { 0 };
        logcode::cost(back - 1, &self.of[base..base + OF_EXPLICIT_CODES])
    }

    /// Price of the distance of a match of kind `rc` and distance `back` at `dst` after the match `prev` (`None`:
    /// none): its continuation code when one applies (no extra bits), else the explicit code.
    #[inline]
    pub fn distance_after(&self, back: u64, rc: bool, dst: u64, prev: Option<PrevMatch>) -> u32 {
        self.distance_coded(back, rc, continuation_index(back, rc, dst, prev))
    }

    /// [`Self::distance_after`] given the match's `continuation_index` (the parsers look it up once per
    /// candidate, for its shortest length as well).
    #[inline]
    pub fn distance_coded(&self, back: u64, rc: bool, continuation: Option<usize>) -> u32 {
        match continuation {
            Some(k) => self.of[OF_EXPLICIT_CODES + k],
            None => self.distance(back, rc),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_follow_counts() {
        let mut c = Counts::prior();
        c.set_literals_from(&[b'A'; 100_000]);
        let p = Prices::from_counts(&c);
        assert!(p.lit[b'A' as usize] < PRICE_ONE / 4);
        assert!(p.lit[b'C' as usize] > 9 * PRICE_ONE);
        // Distances: far sources cost their extra bits.
        assert!(p.distance(1 << 30, false) > p.distance(100, false) + 20 * PRICE_ONE);
        assert!(p.match_len(3) < p.match_len(5000));
        // Continuations: a code without extra bits, whatever the distance; an unrelated distance stays explicit.
        let fwd = |back| Some(PrevMatch { back, dst: 100, rc: false });
        assert_eq!(p.distance_after(1 << 30, false, 200, fwd(1 << 30)), p.of[OF_EXPLICIT_CODES]);
        assert_eq!(p.distance_after((1 << 30) + 1, false, 200, fwd(1 << 30)), p.of[OF_EXPLICIT_CODES + 1]);
        assert!(p.distance_after((1 << 30) - 1, false, 200, fwd(1 << 30)) < 13 * PRICE_ONE);
        assert_eq!(p.distance_after(1 << 30, false, 200, None), p.distance(1 << 30, false));
        assert_eq!(p.distance_after(1 << 30, false, 200, fwd(5000)), p.distance(1 << 30, false));
        // Reverse complements: their own explicit codes; a continuation keeps the anti-diagonal, so 100 bytes
        // further on the distance is 200 more; a forward match never continues a reverse complement.
        let rc = Some(PrevMatch { back: 1 << 30, dst: 100, rc: true });
        assert_eq!(p.distance_after((1 << 30) + 200, true, 200, rc), p.of[OF_EXPLICIT_CODES]);
        assert_eq!(p.distance_after((1 << 30) + 199, true, 200, rc), p.of[OF_EXPLICIT_CODES + 1]);
        assert_eq!(p.distance_after((1 << 30) + 200, false, 200, rc), p.distance((1 << 30) + 200, false));
        assert_eq!(p.distance_after(1 << 30, true, 200, fwd(1 << 30)), p.distance(1 << 30, true));
        // Before any is counted, a reverse complement is dearer than a forward match of the same distance.
        assert!(p.distance(1 << 20, true) > p.distance(1 << 20, false));
    }

    #[test]
    fn continuations_are_counted_as_coded() {
        let mut c = Counts::prior();
        let before = c.of;
        let tokens = [
            Token { lit_len: 1, match_len: 30, back: 1 << 30, rc: false },
            Token { lit_len: 1, match_len: 30, back: 1 << 30, rc: false },
            Token { lit_len: 1, match_len: 30, back: (1 << 30) - 1, rc: false },
            Token { lit_len: 1, match_len: 30, back: 5000, rc: true },
            // 3 bytes on: the anti-diagonal kept, back + 2 * 33.
            Token { lit_len: 3, match_len: 30, back: 5066, rc: true },
            Token { lit_len: 4, match_len: 0, back: 0, rc: false },
        ];
        c.add_tokens(&tokens, &[b'A'; 11]);
        assert_eq!(
            c.of[logcode::code_of((1 << 30) - 1) as usize],
            before[logcode::code_of((1 << 30) - 1) as usize] + 1
        );
        assert_eq!(c.of[OF_EXPLICIT_CODES], before[OF_EXPLICIT_CODES] + 2);
        let rc_code = OF_REVERSE_BASE + logcode::code_of(4999) as usize;
        assert_eq!(c.of[rc_code], before[rc_code] + 1);
        assert_eq!(c.of[OF_EXPLICIT_CODES + 2], before[OF_EXPLICIT_CODES + 2] + 1);
    }

    #[test]
    fn code_cost_tables_equal_a_cost_per_value() {
        // Costs near u32::MAX (saturation), a table shorter than the codes the values reach, and both offsets.
        let costs: Vec<u32> = (0..40u32).map(|c| if c == 21 { u32::MAX - 700 } else { 100 + 37 * c }).collect();
        for (offset, n) in [(0, 1024), (2, 4096), (2, 1), (0, 0), (5, 70_000)] {
            let want: Vec<u32> = (0..n)
                .map(|v| if v < offset { u32::MAX } else { logcode::cost((v - offset) as u64, &costs) })
                .collect();
            assert_eq!(code_costs(offset, n, &costs), want, "offset {offset}, n {n}");
        }
    }
}
