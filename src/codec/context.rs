//! Literal context models (FORMAT.md §2.4 and §3.5, version 4): in genome mode nearly every literal is one of
//! the bases A, C, G, T, and a base is more predictable from the bases before it than from the group's order-0
//! byte table. A [`CtxModel`] of order `k` holds one 4-symbol table (A, C, G, T) per context, the context of a
//! literal being the previous `k` literals of its rANS lane in its slice (reset where each lane starts), so a
//! lane still decodes on its own and a GPU thread keeps its context in a register.
//!
//! A 4-symbol table decodes by comparing the slot with three cumulative frequencies (no 4096-entry lookup per
//! context), so a model of order 8 (65 536 contexts) costs 384 KiB of host memory and no per-context build.
//!
//! The packer gathers statistics of every eligible slice (all literals are bases) of a chunk for each order up
//! to [`MAX_LIT_ORDER`] in one pass ([`CtxStats`]), and picks the order whose coded size, tables included, beats
//! the order-0 LIT table by the most ([`CtxStats::choose`]); or none.

use std::sync::Arc;

use rayon::prelude::*;

use crate::codec::rans::lane_split;
use crate::codec::tables::{normalise4, SCALE, SCALE_BITS};
use crate::codec::varint;
use crate::error::DecodeError;

/// The highest context order the format allows: 4^8 = 65 536 contexts.
pub const MAX_LIT_ORDER: u8 = 8;

/// The bytes a context model codes, by 2-bit code.
pub const BASES: [u8; 4] = *b"ACGT";

/// The 2-bit code of a base byte (uppercase A, C, G, T), or `None` for any other byte.
#[inline]
pub fn base_code(b: u8) -> Option<u8> {
    match b {
        b'A' => Some(0),
        b'C' => Some(1),
        b'G' => Some(2),
        b'T' => Some(3),
        _ => None,
    }
}

/// The 2-bit code of a byte known to be a base (any other byte maps to some code; callers check first).
#[inline(always)]
pub fn base_code_unchecked(b: u8) -> u32 {
    // A 0x41 → 0, C 0x43 → 1, G 0x47 → 2, T 0x54 → 3: bits 1-2 of the byte XOR bits 2-3 (A 00 ^ 00, C 01 ^ 00,
    // G 11 ^ 01, T 10 ^ 01). Three operations: the compare-per-base form was ~10 instructions a literal, 2.5 % of a
    // genome pack's (every literal of a context-coded slice goes through here twice, statistics and encode).
    (((b >> 1) ^ (b >> 2)) & 3) as u32
}

/// A context model of order `k ≥ 1`: for each of the `4^k` contexts the cumulative frequencies `[c1, c2, c3]` of
/// its table over A, C, G, T (`c0 = 0`, `c4 = 4096`; the frequency of code `s` is `c[s+1] − c[s]`, possibly 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CtxModel {
    order: u8,
    cum: Vec<[u16; 3]>,
    /// The same per context as one word for the decoder: `c1 | c2 << 16 | c3 << 32 | 4096 << 48`.
    packed: Vec<u64>,
}

/// A context's packed cumulative frequencies (see [`CtxModel`]).
fn pack_cum(c: &[u16; 3]) -> u64 {
    c[0] as u64 | (c[1] as u64) << 16 | (c[2] as u64) << 32 | (SCALE as u64) << 48
}

/// Decodes `slot` (`< 4096`) with a packed context entry `e`: `(code, freq, cum)`. The code is the number of
/// `c1, c2, c3` at or below the slot; its range `[cum, cum + freq)` lies between the neighbouring bounds.
#[inline(always)]
pub fn decode_packed(e: u64, slot: u32) -> (u32, u32, u32) {
    let (c1, c2, c3) = ((e & 0xFFFF) as u32, ((e >> 16) & 0xFFFF) as u32, ((e >> 32) & 0xFFFF) as u32);
    let (s1, s2, s3) = (slot >= c1, slot >= c2, slot >= c3);
    // Selects, not shifts by 16·s: variable shifts cost several micro-ops on x86 without BMI2.
    let lo = if s3 {
        c3
    } else if s2 {
        c2
    } else if s1 {
        c1
    } else {
        0
    };
    let hi = if s3 {
        SCALE
    } else if s2 {
        c3
    } else if s1 {
        c2
    } else {
        c1
    };
    (s1 as u32 + s2 as u32 + s3 as u32, hi - lo, lo)
}

/// The base byte of code `s < 4`: `"ACGT"[s]` without a table.
#[inline(always)]
pub fn base_byte(s: u32) -> u8 {
    (0x5447_4341u32 >> (8 * s)) as u8
}

/// A group's context model as its table set stores it: its own tables (`back = 0`), or those of the group
/// `back` groups earlier (FORMAT.md §2.4), which a reader resolves when it parses the table section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LitContext {
    pub back: u32,
    pub model: Arc<CtxModel>,
}

impl CtxModel {
    /// The order `k` (`1 ..= MAX_LIT_ORDER`).
    pub fn order(&self) -> u8 {
        self.order
    }

    /// `4^k − 1`: contexts are `ctx & mask`.
    #[inline(always)]
    pub fn mask(&self) -> u32 {
        (1u32 << (2 * self.order)) - 1
    }

    /// Number of contexts, `4^k`.
    pub fn contexts(&self) -> usize {
        self.cum.len()
    }

    /// The three cumulative frequencies of every context, context 0 first.
    pub fn cumulative(&self) -> &[[u16; 3]] {
        &self.cum
    }

    /// Normalises per-context counts (`counts.len() == 4^order`) to 4096 each; a context never seen gets the
    /// uniform table. Every base counted in a context keeps a frequency of at least 1.
    ///
    /// # Panics
    /// When the order is outside `1 ..= MAX_LIT_ORDER` or the count table has the wrong length (packer bugs).
    pub fn from_counts(order: u8, counts: &[[u64; 4]]) -> CtxModel {
        assert!((1..=MAX_LIT_ORDER).contains(&order), "context order {order}");
        assert_eq!(counts.len(), 1 << (2 * order), "context counts for order {order}");
        let cum: Vec<[u16; 3]> = counts.iter().map(|c| cum_of(&freqs_of(c))).collect();
        let packed = cum.iter().map(pack_cum).collect();
        CtxModel { order, cum, packed }
    }

    /// `(freq, cum)` of code `s < 4` in context `ctx`.
    #[inline(always)]
    pub fn freq_cum(&self, ctx: u32, s: u32) -> (u32, u32) {
        let c = &self.cum[(ctx & self.mask()) as usize];
        let full = [0, c[0] as u32, c[1] as u32, c[2] as u32, SCALE];
        (full[s as usize + 1] - full[s as usize], full[s as usize])
    }

    /// The code whose slot range holds `slot` (`< 4096`) in context `ctx`, with its frequency and cumulative
    /// frequency: three comparisons ([`decode_packed`]). A code of frequency 0 is never chosen (its range is
    /// empty).
    #[inline(always)]
    pub fn decode_slot(&self, ctx: u32, slot: u32) -> (u32, u32, u32) {
        decode_packed(self.packed[(ctx & self.mask()) as usize], slot)
    }

    /// The packed entries of every context (see [`decode_packed`]), context 0 first.
    #[inline(always)]
    pub fn packed(&self) -> &[u64] {
        &self.packed
    }

    /// Estimated cost in bits of code `s` in context `ctx` (16 for a code of frequency 0).
    pub fn bits(&self, ctx: u32, s: u32) -> f64 {
        match self.freq_cum(ctx, s).0 {
            0 => 16.0,
            f => SCALE_BITS as f64 - (f as f64).log2(),
        }
    }

    /// Appends the `4^k × 3` frequencies (A, C, G of each context; T is what is left of 4096) as varints.
    pub fn write(&self, out: &mut Vec<u8>) {
        for c in &self.cum {
            varint::write(c[0] as u64, out);
            varint::write((c[1] - c[0]) as u64, out);
            varint::write((c[2] - c[1]) as u64, out);
        }
    }

    /// Reads the tables of a model of order `order` (already checked against [`MAX_LIT_ORDER`]) at `*pos`:
    /// every frequency at most 4096 and the three of a context summing to at most 4096.
    pub fn read_at(bytes: &[u8], pos: &mut usize, order: u8) -> Result<CtxModel, DecodeError> {
        if !(1..=MAX_LIT_ORDER).contains(&order) {
            return Err(DecodeError::Limit { what: "lit_order", value: order as u64, limit: MAX_LIT_ORDER as u64 });
        }
        let n = 1usize << (2 * order);
        // Each context takes at least 3 bytes: refuse a count the bytes cannot hold before allocating for it.
        let left = bytes.len().saturating_sub(*pos);
        if 3 * n > left {
            return Err(DecodeError::Truncated { at: bytes.len(), needed: 3 * n - left });
        }
        let mut cum = Vec::with_capacity(n);
        for ctx in 0..n {
            let mut running = 0u64;
            let mut c = [0u16; 3];
            for slot in c.iter_mut() {
                let f = varint::read_at(bytes, pos)?;
                running = running.saturating_add(f);
                if running > SCALE as u64 {
                    return Err(DecodeError::Invalid {
                        what: "context table",
                        detail: format!("context {ctx}: frequencies sum past {SCALE}"),
                    });
                }
                *slot = running as u16;
            }
            cum.push(c);
        }
        let packed = cum.iter().map(pack_cum).collect();
        Ok(CtxModel { order, cum, packed })
    }
}

/// Normalised frequencies of four counts (uniform when all are zero).
fn freqs_of(counts: &[u64; 4]) -> [u32; 4] {
    if counts.iter().all(|&c| c == 0) {
        return [SCALE / 4; 4];
    }
    normalise4(counts)
}

fn cum_of(f: &[u32; 4]) -> [u16; 3] {
    [f[0] as u16, (f[0] + f[1]) as u16, (f[0] + f[1] + f[2]) as u16]
}

/// The context of the next literal of a lane after code `s`: the previous context shifted by one base.
#[inline(always)]
pub fn next_context(ctx: u32, s: u32, mask: u32) -> u32 {
    ((ctx << 2) | s) & mask
}

/// The context of every literal of a slice whose literals are all bases, coded with `lanes` rANS lanes: a
/// literal's context is made of the literals before it in its lane, starting at 0 at literal 0 and, with two
/// lanes, again at the split where lane 1 begins ([`lane_split`]; `first = 3·nmatch + 1`, the slice's codes).
/// Calls `f(j, ctx, code)` for every literal in order.
pub fn for_each_context(literals: &[u8], first: usize, lanes: usize, mask: u32, mut f: impl FnMut(usize, u32, u32)) {
    let split = lane_split(first, literals.len(), lanes);
    let mut ctx = 0u32;
    for (j, &b) in literals.iter().enumerate() {
        if j == split {
            ctx = 0;
        }
        let s = base_code_unchecked(b);
        f(j, ctx, s);
        ctx = next_context(ctx, s, mask);
    }
}

/// Statistics of the eligible slices of a chunk for every order `1 ..= MAX_LIT_ORDER`, and their order-0
/// counts per table group, from which [`CtxStats::choose`] picks the model.
pub struct CtxStats {
    /// `counts[ctx][s]` of the highest order ([`MAX_LIT_ORDER`]): a lower order's context is the low bits of
    /// the highest's, so its counts are sums of these ([`CtxStats::choose`] adds them up, once per chunk,
    /// instead of eight counters per literal).
    counts: Vec<[u64; 4]>,
    /// Base counts of the eligible slices, per group of the chunk (what the LIT table would code).
    order0: Vec<[u64; 4]>,
    lanes: usize,
}

impl CtxStats {
    /// Empty statistics for a chunk of `groups` table groups coded with `lanes` rANS lanes.
    pub fn new(groups: usize, lanes: usize) -> CtxStats {
        CtxStats { counts: vec![[0u64; 4]; 1 << (2 * MAX_LIT_ORDER)], order0: vec![[0; 4]; groups], lanes }
    }

    /// Adds one eligible slice (its literals all bases; `first = 3·nmatch + 1`) of group `group`.
    pub fn add_slice(&mut self, group: usize, literals: &[u8], first: usize) {
        let top = (1u32 << (2 * MAX_LIT_ORDER)) - 1;
        let o0 = &mut self.order0[group];
        let counts = &mut self.counts;
        for_each_context(literals, first, self.lanes, top, |_, ctx, s| {
            o0[s as usize] += 1;
            counts[ctx as usize][s as usize] += 1;
        });
    }

    /// Adds `other`'s statistics (of other slices of the same chunk) to these: counts add exactly, so slices
    /// can be counted in parallel and merged in any order.
    pub fn merge(mut self, other: CtxStats) -> CtxStats {
        for (a, b) in self.counts.iter_mut().zip(&other.counts).chain(self.order0.iter_mut().zip(&other.order0)) {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
        self
    }

    /// Picks the order whose model codes the eligible literals in the fewest bytes, tables included, if that
    /// beats the groups' order-0 tables by more than `min_gain` bytes; and builds its model.
    pub fn choose(&self, min_gain: f64) -> Option<Arc<CtxModel>> {
        let order0: f64 = self.order0.iter().map(|c| coded_bits_with(c, freqs_of(c)) / 8.0).sum();
        // by_order[k − 1][ctx][s], each order summed from the one above.
        let mut by_order: Vec<Vec<[u64; 4]>> = vec![self.counts.clone()];
        for k in (1..MAX_LIT_ORDER).rev() {
            let above = by_order.last().expect("the highest order");
            let mut counts = vec![[0u64; 4]; 1 << (2 * k)];
            for (ctx, c) in above.iter().enumerate() {
                let low = &mut counts[ctx & ((1 << (2 * k)) - 1)];
                for (l, v) in low.iter_mut().zip(c) {
                    *l += v;
                }
            }
            by_order.push(counts);
        }
        by_order.reverse();
        let mut best: Option<(f64, u8)> = None;
        for k in 1..=MAX_LIT_ORDER {
            let counts = &by_order[k as usize - 1];
            // Each context's coded bits and table bytes (three varints, two bytes each for a frequency of 128 or
            // more) from one normalisation, the contexts in parallel, then summed in context order as before (the
            // same sums to the bit). Why: the 87 Ki normalisations of every order, twice each, were a serial
            // ~0.03 s at the end of every chunk's encode, with the other core idle after the last chunk.
            let per_context: Vec<(f64, f64)> = counts
                .par_iter()
                .with_min_len(CHOOSE_CONTEXTS_PER_TASK)
                .map(|c| {
                    let f = freqs_of(c);
                    let table = f[..3].iter().map(|&x| varint::encoded_len(x as u64) as f64).sum::<f64>();
                    (coded_bits_with(c, f), table)
                })
                .collect();
            let bits: f64 = per_context.iter().map(|&(bits, _)| bits).sum();
            let table: f64 = per_context.iter().map(|&(_, table)| table).sum();
            let size = bits / 8.0 + table + 2.0;
            if best.is_none_or(|(b, _)| size < b) {
                best = Some((size, k));
            }
        }
        let (size, k) = best?;
        (order0 - size > min_gain).then(|| Arc::new(CtxModel::from_counts(k, &by_order[k as usize - 1])))
    }
}

/// Contexts per task of [`CtxStats::choose`]'s parallel normalisations.
const CHOOSE_CONTEXTS_PER_TASK: usize = 4096;

/// Bits of coding `counts` with their own normalised 4-symbol table `f` ([`freqs_of`]).
fn coded_bits_with(counts: &[u64; 4], f: [u32; 4]) -> f64 {
    counts
        .iter()
        .zip(f)
        .filter(|(&c, _)| c != 0)
        .map(|(&c, f)| c as f64 * (SCALE_BITS as f64 - (f as f64).log2()))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn base_codes_agree() {
        for (s, &b) in BASES.iter().enumerate() {
            assert_eq!(base_code(b), Some(s as u8));
            assert_eq!(base_code_unchecked(b), s as u32);
        }
        assert_eq!(base_code(b'N'), None);
        assert_eq!(base_code(b'a'), None);
    }

    #[test]
    fn decode_slot_inverts_freq_cum() {
        let mut counts = vec![[0u64; 4]; 16];
        counts[3] = [10, 0, 5, 1];
        counts[7] = [0, 0, 0, 9];
        let m = CtxModel::from_counts(2, &counts);
        for ctx in 0..16 {
            let mut covered = 0;
            for s in 0..4 {
                let (f, c) = m.freq_cum(ctx, s);
                for slot in c..c + f {
                    assert_eq!(m.decode_slot(ctx, slot), (s, f, c));
                }
                covered += f;
            }
            assert_eq!(covered, SCALE);
        }
        assert_eq!(m.freq_cum(3, 1).0, 0);
        assert_eq!(m.freq_cum(7, 3).0, SCALE);
        assert_eq!(m.freq_cum(0, 2), (1024, 2048));
    }

    #[test]
    fn serialisation_round_trip_and_refusals() {
        let counts: Vec<[u64; 4]> = (0..64u64).map(|i| [i, 2 * i + 1, 0, i % 5]).collect();
        let m = CtxModel::from_counts(3, &counts);
        let mut bytes = Vec::new();
        m.write(&mut bytes);
        let mut pos = 0;
        assert_eq!(CtxModel::read_at(&bytes, &mut pos, 3).unwrap(), m);
        assert_eq!(pos, bytes.len());
        // Truncated, a sum above 4096, an order outside the format.
        let mut pos = 0;
        assert!(CtxModel::read_at(&bytes[..bytes.len() - 1], &mut pos, 3).is_err());
        let mut bad = Vec::new();
        for f in [4000u64, 97, 0] {
            varint::write(f, &mut bad);
        }
        bad.extend_from_slice(&[0; 9]);
        let mut pos = 0;
        assert!(matches!(CtxModel::read_at(&bad, &mut pos, 1), Err(DecodeError::Invalid { .. })));
        for order in [0, MAX_LIT_ORDER + 1] {
            let mut pos = 0;
            assert!(matches!(CtxModel::read_at(&bytes, &mut pos, order), Err(DecodeError::Limit { .. })));
        }
        // An order whose tables need more bytes than there are is refused before allocating.
        let mut pos = 0;
        assert!(matches!(CtxModel::read_at(&[0; 10], &mut pos, 8), Err(DecodeError::Truncated { .. })));
    }

    #[test]
    fn contexts_follow_lanes() {
        // One code symbol and 20 literals over two lanes: the split is 8·ceil((20 − 10)/16) = 8, where lane 1's
        // context starts again at 0.
        let lits = b"ACGTTGCAACGTTGCAGTCA";
        let mut seen = Vec::new();
        for_each_context(lits, 1, 2, 15, |j, ctx, s| seen.push((j, ctx, s)));
        let codes: Vec<u32> = lits.iter().map(|&b| base_code(b).unwrap() as u32).collect();
        for (j, &(at, ctx, s)) in seen.iter().enumerate() {
            assert_eq!((at, s), (j, codes[j]));
            let want = match j {
                0 | 8 => 0,
                1 | 9 => codes[j - 1],
                _ => (codes[j - 2] << 2 | codes[j - 1]) & 15,
            };
            assert_eq!(ctx, want, "literal {j}");
        }
        // One lane: no restart.
        let mut one = Vec::new();
        for_each_context(lits, 1, 1, 15, |_, ctx, _| one.push(ctx));
        assert_eq!(one[8], (codes[6] << 2 | codes[7]) & 15);
    }

    #[test]
    fn choose_prefers_contexts_only_when_they_pay() {
        // A period-4 sequence: order 1 predicts every base; order 0 is uniform (2 bits a base).
        let lits: Vec<u8> = b"ACGT".iter().cycle().take(50_000).copied().collect();
        let mut stats = CtxStats::new(1, 1);
        stats.add_slice(0, &lits, 1);
        let m = stats.choose(0.0).expect("contexts pay on a periodic sequence");
        assert!(m.order() >= 1);
        // Uniform random bases: no order pays for its tables.
        let mut x = 12345u64;
        let random: Vec<u8> = (0..50_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                BASES[(x >> 60) as usize & 3]
            })
            .collect();
        let mut stats = CtxStats::new(1, 1);
        stats.add_slice(0, &random, 1);
        assert!(stats.choose(0.0).is_none());
    }

    proptest! {
        #[test]
        fn read_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..300), order in 0u8..10) {
            let mut pos = 0;
            if let Ok(m) = CtxModel::read_at(&bytes, &mut pos, order) {
                let mut again = Vec::new();
                m.write(&mut again);
                let mut p2 = 0;
                prop_assert_eq!(CtxModel::read_at(&again, &mut p2, order).unwrap(), m);
            }
        }
    }
}
