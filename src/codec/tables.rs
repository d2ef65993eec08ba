//! Frequency tables (FORMAT.md §2.4): statistics, normalisation to 4096, serialisation, decode lookup, and the
//! bit costs the packer prices its parse with.
//!
//! A [`Table`] is `nsym` frequencies that sum to exactly `2^12` (or nothing, when the group never uses the table).
//! Normalisation rounds the counts down, lifts every present symbol to at least 1, then spends or reclaims the
//! last few units greedily where they change the coded size the most; the coded size is convex in each
//! frequency, so the greedy fix-up is optimal for the starting point it is given.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::codec::context::{CtxModel, LitContext, MAX_LIT_ORDER};
use crate::codec::rans::DecodeLookup;
use crate::codec::{logcode, varint};
use crate::error::DecodeError;

/// Table alphabets, in serialisation order.
pub const LL_ALPHABET: usize = 64;
pub const ML_ALPHABET: usize = 64;
pub const OF_ALPHABET: usize = 184;
/// OF codes below this are explicit forward distances: the log code of `back − 1` (FORMAT.md §3.2), which
/// reaches `back = 2^40`, the longest stream (§1). The next [`OF_CONTINUATION_DELTAS`]`.len()` codes are
/// continuations, and the codes from [`OF_REVERSE_BASE`] to [`OF_ALPHABET`] explicit reverse-complement
/// distances (version 5).
pub const OF_EXPLICIT_CODES: usize = 88;
/// OF code `OF_REVERSE_BASE + c` (`c < OF_EXPLICIT_CODES`) is an explicit reverse-complement match whose
/// `back − 1` has log code `c` (FORMAT.md §1, §3.2).
pub const OF_REVERSE_BASE: usize = OF_EXPLICIT_CODES + OF_CONTINUATION_DELTAS.len();
/// Continuation code `OF_EXPLICIT_CODES + k` means `back = b + OF_CONTINUATION_DELTAS[k]`, where `b` is the
/// (absolute) `back` of the previous match token of the same slice: after a substitution the alignment goes on
/// at the same distance, after a small indel it goes on a few bytes nearer or further. No extra bits.
///
/// Each delta pays (packed at the default level, archive ratio with the codes for deltas up to the one named):
/// `0`: fly-chr4 ×6 6.0065, ×11 9.5090, atha_chr1 4.0956; `±1`: 6.0606, 9.5881, 4.1008; `±2`: 6.0850, 9.6278,
/// 4.1021; all eight: 6.1153, 9.6825, 4.1033 (without continuations: 5.4675, 8.6163, 4.0520). They live in the
/// codes 88 … 95, which explicit distances never reach (a stream is at most 2^40 bytes).
pub const OF_CONTINUATION_DELTAS: [i64; 8] = [0, 1, -1, 2, -2, 3, -3, 4];
pub const LIT_ALPHABET: usize = 256;
pub const SCALE_BITS: u32 = 12;
/// The sum of a used table's frequencies: `2^SCALE_BITS`.
pub const SCALE: u32 = 1 << SCALE_BITS;

/// The price [`Table::bits`] and [`Table::costs`] give a symbol the table does not hold. Finite, so a packer that
/// prices with last pass's tables can still choose it (its next tables will then hold it), but dearer than any
/// held symbol (at most 12 bits).
pub const ABSENT_COST_BITS: u32 = 16;

/// Symbol counts of one table group, per alphabet.
#[derive(Debug, Clone)]
pub struct SymbolStats {
    pub ll: [u64; LL_ALPHABET],
    pub ml: [u64; ML_ALPHABET],
    pub of: [u64; OF_ALPHABET],
    pub lit: [u64; LIT_ALPHABET],
}

impl Default for SymbolStats {
    fn default() -> Self {
        SymbolStats { ll: [0; LL_ALPHABET], ml: [0; ML_ALPHABET], of: [0; OF_ALPHABET], lit: [0; LIT_ALPHABET] }
    }
}

impl SymbolStats {
    /// Adds another group's (or block's) counts to these.
    pub fn merge(&mut self, other: &SymbolStats) {
        fn add(a: &mut [u64], b: &[u64]) {
            a.iter_mut().zip(b).for_each(|(x, y)| *x = x.saturating_add(*y));
        }
        add(&mut self.ll, &other.ll);
        add(&mut self.ml, &other.ml);
        add(&mut self.of, &other.of);
        add(&mut self.lit, &other.lit);
    }
}

/// One normalised table, ready for encoding and decoding. Build it with [`Table::from_counts`],
/// [`Table::from_freqs`] or [`Table::default`] (unused); `cum` must stay the prefix sum of `freq`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Table {
    /// Normalised frequencies (sum 4096), or empty when unused. `freq.len()` is the serialised `nsym`.
    pub freq: Vec<u16>,
    /// `cum[s] = Σ_{r<s} freq[r]`, same length as `freq`.
    pub cum: Vec<u16>,
}

impl Table {
    /// Takes frequencies as serialised: empty, or summing to exactly 4096.
    pub fn from_freqs(freq: Vec<u16>) -> Result<Table, DecodeError> {
        let sum: u32 = freq.iter().map(|&f| f as u32).sum();
        if !freq.is_empty() && sum != SCALE {
            return Err(DecodeError::Invalid {
                what: "frequency table",
                detail: format!("{} frequencies sum to {sum}, expected {SCALE}", freq.len()),
            });
        }
        Ok(Self::from_valid_freqs(freq))
    }

    /// Builds the cumulative frequencies of a checked frequency vector.
    fn from_valid_freqs(freq: Vec<u16>) -> Table {
        let mut running = 0u16;
        let cum = freq
            .iter()
            .map(|&f| {
                let c = running;
                running = running.wrapping_add(f);
                c
            })
            .collect();
        Table { freq, cum }
    }

    /// Normalises symbol counts to 4096 (see the module notes). No counts at all gives the unused table.
    pub fn from_counts(counts: &[u64]) -> Table {
        let nsym = counts.iter().rposition(|&c| c != 0).map_or(0, |last| last + 1);
        Self::from_valid_freqs(normalise(&counts[..nsym]))
    }

    /// True when the table is unused (`nsym = 0`).
    pub fn is_empty(&self) -> bool {
        self.freq.is_empty()
    }

    /// The serialised alphabet size.
    pub fn nsym(&self) -> usize {
        self.freq.len()
    }

    /// Frequency of `s`, 0 when the table does not hold it.
    pub fn freq_of(&self, s: usize) -> u32 {
        self.freq.get(s).map_or(0, |&f| f as u32)
    }

    /// Builds the decoder's slot lookup. The rANS decoder keeps recently used ones in a small per-thread cache
    /// ([`crate::codec::rans`]), so an archive with thousands of table groups does not keep 16 KiB per table.
    pub fn decode_lookup(&self) -> DecodeLookup {
        DecodeLookup::build(&self.freq)
    }

    /// Estimated cost of coding `s` with this table: `12 − log2(freq)` bits, or [`ABSENT_COST_BITS`].
    pub fn bits(&self, s: usize) -> f32 {
        match self.freq_of(s) {
            0 => ABSENT_COST_BITS as f32,
            f => SCALE_BITS as f32 - (f as f32).log2(),
        }
    }

    /// Costs of every symbol of an alphabet of `alphabet` symbols in 1/256 bit ([`logcode::COST_FRAC_BITS`]),
    /// ready for [`logcode::cost`].
    pub fn costs(&self, alphabet: usize) -> Vec<u32> {
        let one_bit = (1u32 << logcode::COST_FRAC_BITS) as f32;
        (0..alphabet).map(|s| (self.bits(s) * one_bit).round() as u32).collect()
    }

    /// Appends `varint nsym, varint freq[nsym]`.
    pub fn write(&self, out: &mut Vec<u8>) {
        varint::write(self.freq.len() as u64, out);
        for &f in &self.freq {
            varint::write(f as u64, out);
        }
    }

    /// Reads one serialised table at `*pos`, refusing an `nsym` above `alphabet`, a frequency above 4096 or a
    /// sum other than 4096. `what` names the table in errors.
    pub fn read_at(bytes: &[u8], pos: &mut usize, alphabet: usize, what: &'static str) -> Result<Table, DecodeError> {
        let nsym = varint::read_at(bytes, pos)?;
        if nsym > alphabet as u64 {
            return Err(DecodeError::Limit { what, value: nsym, limit: alphabet as u64 });
        }
        let mut freq = Vec::with_capacity(nsym as usize);
        for _ in 0..nsym {
            let f = varint::read_at(bytes, pos)?;
            if f > SCALE as u64 {
                return Err(DecodeError::Limit { what: "symbol frequency", value: f, limit: SCALE as u64 });
            }
            freq.push(f as u16);
        }
        Table::from_freqs(freq)
            .map_err(|_| DecodeError::Invalid { what, detail: "frequencies do not sum to 4096".to_string() })
    }
}

/// Normalises counts (the last one non-zero, or none) to frequencies summing to 4096.
fn normalise(counts: &[u64]) -> Vec<u16> {
    let present = counts.iter().filter(|&&c| c != 0).count();
    if present == 0 {
        return Vec::new();
    }
    let total: u128 = counts.iter().map(|&c| c as u128).sum();
    let mut freq: Vec<u32> =
        counts.iter().map(|&c| if c == 0 { 0 } else { ((c as u128 * SCALE as u128 / total) as u32).max(1) }).collect();
    let mut sum: u32 = freq.iter().sum();
    if sum < SCALE {
        grow_to_scale(counts, &mut freq, SCALE - sum);
    } else if sum > SCALE {
        shrink_to_scale(counts, &mut freq, sum - SCALE);
    }
    sum = freq.iter().sum();
    debug_assert_eq!(sum, SCALE);
    freq.into_iter().map(|f| f as u16).collect()
}

/// [`normalise`] of four counts (unused symbols get 0; all zero gives all 0), without allocating. Why: the
/// literal context model's choice normalises ~87 Ki four-symbol tables a chunk ([`crate::codec::context`]), and
/// the general function's vectors and heaps made that ~1,700 instructions a table. A heap of at most four
/// entries always pops the symbol with the largest (smallest, when shrinking) `(key, symbol)` among those it
/// holds, which is what the scans below pick, so the frequencies are the same.
pub fn normalise4(counts: &[u64; 4]) -> [u32; 4] {
    let total: u128 = counts.iter().map(|&c| c as u128).sum();
    if total == 0 {
        return [0; 4];
    }
    let mut freq = counts.map(|c| if c == 0 { 0 } else { ((c as u128 * SCALE as u128 / total) as u32).max(1) });
    let sum: u32 = freq.iter().sum();
    if sum < SCALE {
        // grow_to_scale: every present symbol is in the heap, keyed by what one more unit saves.
        for _ in 0..SCALE - sum {
            let best = (0..4)
                .filter(|&s| counts[s] != 0)
                .map(|s| (order_key(gain_of_raise(counts[s], freq[s])), s))
                .max()
                .expect("a present symbol");
            freq[best.1] += 1;
        }
    } else if sum > SCALE {
        // shrink_to_scale: the symbols above 1, keyed by what taking a unit back costs.
        for _ in 0..sum - SCALE {
            let Some((_, s)) =
                (0..4).filter(|&s| freq[s] > 1).map(|s| (order_key(gain_of_raise(counts[s], freq[s] - 1)), s)).min()
            else {
                break;
            };
            freq[s] -= 1;
        }
    }
    freq
}

/// Non-negative `f64`s order like their bit patterns, which gives the heaps a total order.
fn order_key(x: f64) -> u64 {
    x.max(0.0).to_bits()
}

/// Bits saved by raising symbol `s` from `f` to `f + 1`: `count · log2((f+1)/f)`.
fn gain_of_raise(count: u64, f: u32) -> f64 {
    count as f64 * ((f + 1) as f64 / f as f64).log2()
}

/// Gives `deficit` more units, one at a time, to the symbol whose coded size shrinks the most.
fn grow_to_scale(counts: &[u64], freq: &mut [u32], deficit: u32) {
    let mut heap: BinaryHeap<(u64, usize)> = (0..counts.len())
        .filter(|&s| counts[s] != 0)
        .map(|s| (order_key(gain_of_raise(counts[s], freq[s])), s))
        .collect();
    for _ in 0..deficit {
        let Some((_, s)) = heap.pop() else { return };
        freq[s] += 1;
        heap.push((order_key(gain_of_raise(counts[s], freq[s])), s));
    }
}

/// Takes back `excess` units, one at a time, from the symbol whose coded size grows the least (never below 1).
fn shrink_to_scale(counts: &[u64], freq: &mut [u32], excess: u32) {
    let loss = |s: usize, f: u32| Reverse((order_key(gain_of_raise(counts[s], f - 1)), s));
    let mut heap: BinaryHeap<Reverse<(u64, usize)>> =
        (0..counts.len()).filter(|&s| freq[s] > 1).map(|s| loss(s, freq[s])).collect();
    for _ in 0..excess {
        // There is always a symbol above 1: the sum exceeds 4096 while at most 256 symbols are present.
        let Some(Reverse((_, s))) = heap.pop() else { return };
        freq[s] -= 1;
        if freq[s] > 1 {
            heap.push(loss(s, freq[s]));
        }
    }
}

/// The four tables of a group: LL, ML, OF, LIT; and its literal context model, if it has one (FORMAT.md §2.4,
/// version 4): the slices that flag it code their literals with the model instead of the LIT table.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TableSet {
    pub ll: Table,
    pub ml: Table,
    pub of: Table,
    pub lit: Table,
    pub ctx: Option<LitContext>,
}

/// Per-symbol costs of a [`TableSet`] in 1/256 bit, full alphabets, for [`logcode::cost`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableCosts {
    pub ll: Vec<u32>,
    pub ml: Vec<u32>,
    pub of: Vec<u32>,
    pub lit: Vec<u32>,
}

impl TableSet {
    /// Tables in which every symbol of every alphabet is present with the same frequency: what tests and fuzz
    /// targets write or decode hostile payloads with when the payload's own tables are not the point.
    pub fn every_symbol() -> TableSet {
        let mut stats = SymbolStats::default();
        stats.ll.iter_mut().for_each(|c| *c = 1);
        stats.ml.iter_mut().for_each(|c| *c = 1);
        stats.of.iter_mut().for_each(|c| *c = 1);
        stats.lit.iter_mut().for_each(|c| *c = 1);
        TableSet::from_stats(&stats)
    }

    /// Builds normalised tables from a group's statistics.
    pub fn from_stats(stats: &SymbolStats) -> TableSet {
        TableSet {
            ll: Table::from_counts(&stats.ll),
            ml: Table::from_counts(&stats.ml),
            of: Table::from_counts(&stats.of),
            lit: Table::from_counts(&stats.lit),
            ctx: None,
        }
    }

    /// The group's context model, if any.
    pub fn ctx_model(&self) -> Option<&CtxModel> {
        self.ctx.as_ref().map(|c| &*c.model)
    }

    /// Appends the serialised table set (§2.4) to `out`: the four tables, `varint lit_order`, and for a context
    /// model `varint ctx_back` followed by the model's tables when `ctx_back = 0`.
    pub fn write(&self, out: &mut Vec<u8>) {
        for table in [&self.ll, &self.ml, &self.of, &self.lit] {
            table.write(out);
        }
        match &self.ctx {
            None => varint::write(0, out),
            Some(c) => {
                varint::write(c.model.order() as u64, out);
                varint::write(c.back as u64, out);
                if c.back == 0 {
                    c.model.write(out);
                }
            }
        }
    }

    /// Parses a serialised table set that must fill `bytes` exactly, on its own: a set that takes its context
    /// model from an earlier group is refused (see [`TableSet::read_in`]).
    pub fn read(bytes: &[u8]) -> Result<TableSet, DecodeError> {
        Self::read_in(bytes, &[])
    }

    /// Parses the table set of group `earlier.len()`, whose context model may be that of an earlier group
    /// (`ctx_back` groups back, which must have a model of the same order).
    pub fn read_in(bytes: &[u8], earlier: &[TableSet]) -> Result<TableSet, DecodeError> {
        let mut pos = 0;
        let mut set = TableSet {
            ll: Table::read_at(bytes, &mut pos, LL_ALPHABET, "LL table nsym")?,
            ml: Table::read_at(bytes, &mut pos, ML_ALPHABET, "ML table nsym")?,
            of: Table::read_at(bytes, &mut pos, OF_ALPHABET, "OF table nsym")?,
            lit: Table::read_at(bytes, &mut pos, LIT_ALPHABET, "LIT table nsym")?,
            ctx: None,
        };
        let order = varint::read_at(bytes, &mut pos)?;
        if order > MAX_LIT_ORDER as u64 {
            return Err(DecodeError::Limit { what: "lit_order", value: order, limit: MAX_LIT_ORDER as u64 });
        }
        if order > 0 {
            let back = varint::read_at(bytes, &mut pos)?;
            let group = earlier.len() as u64;
            if back > group {
                return Err(DecodeError::Limit { what: "ctx_back", value: back, limit: group });
            }
            let model = if back == 0 {
                std::sync::Arc::new(CtxModel::read_at(bytes, &mut pos, order as u8)?)
            } else {
                match earlier[(group - back) as usize].ctx.as_ref() {
                    Some(c) if c.model.order() as u64 == order => c.model.clone(),
                    _ => {
                        return Err(DecodeError::Invalid {
                            what: "ctx_back",
                            detail: format!("group {} has no context model of order {order}", group - back),
                        })
                    }
                }
            };
            set.ctx = Some(LitContext { back: back as u32, model });
        }
        if pos != bytes.len() {
            return Err(DecodeError::Invalid {
                what: "table set",
                detail: format!("{} trailing bytes after the tables", bytes.len() - pos),
            });
        }
        Ok(set)
    }

    /// Costs of every symbol of every table, for pricing a parse.
    pub fn costs(&self) -> TableCosts {
        TableCosts {
            ll: self.ll.costs(LL_ALPHABET),
            ml: self.ml.costs(ML_ALPHABET),
            of: self.of.costs(OF_ALPHABET),
            lit: self.lit.costs(LIT_ALPHABET),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn normalise4_equals_normalise() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for i in 0..200_000 {
            // Small, large, zero and equal counts (ties), skewed so that both growing and shrinking happen.
            let counts: [u64; 4] = std::array::from_fn(|_| match next() % 6 {
                0 => 0,
                1 => next() % 4,
                2 => next() % 100,
                3 => next() % 100_000,
                4 => 7,
                _ => next() >> (next() % 64),
            });
            let counts = if i == 0 { [0; 4] } else { counts };
            let nsym = counts.iter().rposition(|&c| c != 0).map_or(0, |last| last + 1);
            let slow = normalise(&counts[..nsym]);
            let fast = normalise4(&counts);
            let slow: [u32; 4] = std::array::from_fn(|s| slow.get(s).map_or(0, |&f| f as u32));
            assert_eq!(fast, slow, "{counts:?}");
        }
    }

    fn coded_bits(counts: &[u64], freq: &[u16]) -> f64 {
        counts
            .iter()
            .zip(freq)
            .filter(|(&c, _)| c != 0)
            .map(|(&c, &f)| c as f64 * (SCALE_BITS as f64 - (f as f64).log2()))
            .sum()
    }

    fn entropy_bits(counts: &[u64]) -> f64 {
        let total: f64 = counts.iter().map(|&c| c as f64).sum();
        counts.iter().filter(|&&c| c != 0).map(|&c| c as f64 * (total / c as f64).log2()).sum()
    }

    fn assert_valid(counts: &[u64], table: &Table) {
        let nsym = counts.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
        assert_eq!(table.nsym(), nsym);
        if nsym == 0 {
            return;
        }
        assert_eq!(table.freq.iter().map(|&f| f as u32).sum::<u32>(), SCALE);
        for (s, &c) in counts[..nsym].iter().enumerate() {
            assert_eq!(c != 0, table.freq[s] != 0, "symbol {s} count {c} freq {}", table.freq[s]);
            assert_eq!(table.cum[s] as u32, table.freq[..s].iter().map(|&f| f as u32).sum::<u32>());
        }
    }

    #[test]
    fn empty_and_single_symbol() {
        assert!(Table::from_counts(&[0; 64]).is_empty());
        let mut counts = [0u64; 256];
        counts[65] = 7;
        let t = Table::from_counts(&counts);
        assert_eq!(t.nsym(), 66);
        assert_eq!(t.freq[65], 4096);
        assert_eq!(t.bits(65), 0.0);
    }

    #[test]
    fn all_symbols_one_count() {
        let t = Table::from_counts(&[1; 256]);
        assert!(t.freq.iter().all(|&f| f == 16));
    }

    #[test]
    fn rare_symbols_get_at_least_one() {
        let mut counts = vec![1u64; 256];
        counts[0] = 1 << 40;
        let t = Table::from_counts(&counts);
        assert_valid(&counts, &t);
        assert_eq!(t.freq[0], 4096 - 255);
    }

    #[test]
    fn precision_close_to_entropy() {
        // A skewed DNA-like literal distribution: the normalised code is within 0.1 % of the entropy.
        let mut counts = vec![0u64; 256];
        for (s, c) in
            [(b'A', 300_000), (b'C', 200_000), (b'G', 200_001), (b'T', 299_999), (b'N', 1_000), (b'\n', 16_000)]
        {
            counts[s as usize] = c;
        }
        let t = Table::from_counts(&counts);
        assert_valid(&counts, &t);
        let coded = coded_bits(&counts, &t.freq);
        let ideal = entropy_bits(&counts);
        assert!(coded <= ideal * 1.001, "coded {coded} ideal {ideal}");
    }

    #[test]
    fn serialisation_round_trip_and_exactness() {
        let mut stats = SymbolStats::default();
        stats.ll[0] = 10;
        stats.ll[63] = 1;
        stats.ml[5] = 3;
        stats.of[95] = 2;
        stats.of[20] = 9;
        let set = TableSet::from_stats(&stats);
        assert!(set.lit.is_empty());
        let mut bytes = Vec::new();
        set.write(&mut bytes);
        assert_eq!(TableSet::read(&bytes), Ok(set.clone()));
        // One byte more or less is refused.
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(matches!(TableSet::read(&longer), Err(DecodeError::Invalid { .. })));
        assert!(TableSet::read(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn read_refuses_limits_and_bad_sums() {
        // LL nsym 65.
        assert!(matches!(TableSet::read(&[65]), Err(DecodeError::Limit { value: 65, limit: 64, .. })));
        // LL: one symbol of frequency 4095.
        let mut bytes = vec![1];
        varint::write(4095, &mut bytes);
        bytes.extend_from_slice(&[0, 0, 0]);
        assert!(matches!(TableSet::read(&bytes), Err(DecodeError::Invalid { .. })));
        // A frequency above 4096, and a huge one that must not overflow the sum.
        for f in [4097, u64::MAX] {
            let mut bytes = vec![2];
            varint::write(f, &mut bytes);
            varint::write(f, &mut bytes);
            bytes.extend_from_slice(&[0, 0, 0]);
            assert!(matches!(TableSet::read(&bytes), Err(DecodeError::Limit { .. })));
        }
        // nsym = 3 with all zero frequencies.
        assert!(TableSet::read(&[3, 0, 0, 0, 0, 0, 0]).is_err());
        // All four tables unused, no context model; the lit_order byte may not be left out.
        assert_eq!(TableSet::read(&[0, 0, 0, 0, 0]), Ok(TableSet::default()));
        assert!(TableSet::read(&[0, 0, 0, 0]).is_err());
        // lit_order 9.
        assert!(matches!(TableSet::read(&[0, 0, 0, 0, 9]), Err(DecodeError::Limit { value: 9, .. })));
    }

    #[test]
    fn context_models_are_shared_by_reference() {
        use crate::codec::context::{CtxModel, LitContext};
        let counts: Vec<[u64; 4]> = (0..16u64).map(|i| [i, 1, 2 * i, 3]).collect();
        let model = std::sync::Arc::new(CtxModel::from_counts(2, &counts));
        let own = TableSet { ctx: Some(LitContext { back: 0, model: model.clone() }), ..TableSet::default() };
        let plain = TableSet::default();
        let shared = TableSet { ctx: Some(LitContext { back: 2, model: model.clone() }), ..TableSet::default() };
        let sets = [own.clone(), plain.clone(), shared.clone()];
        let mut parsed: Vec<TableSet> = Vec::new();
        for set in &sets {
            let mut bytes = Vec::new();
            set.write(&mut bytes);
            let read = TableSet::read_in(&bytes, &parsed).unwrap();
            assert_eq!(&read, set);
            parsed.push(read);
        }
        assert!(std::sync::Arc::ptr_eq(&parsed[0].ctx.as_ref().unwrap().model, &parsed[2].ctx.as_ref().unwrap().model));
        let mut bytes = Vec::new();
        shared.write(&mut bytes);
        // On its own, or pointing past group 0, or at a group without a model, or with another order: refused.
        assert!(matches!(TableSet::read(&bytes), Err(DecodeError::Limit { what: "ctx_back", .. })));
        assert!(matches!(TableSet::read_in(&bytes, &parsed[..1]), Err(DecodeError::Limit { .. })));
        assert!(matches!(TableSet::read_in(&bytes, &[plain.clone(), plain]), Err(DecodeError::Invalid { .. })));
        let mut other_order = bytes.clone();
        other_order[4] = 3;
        assert!(matches!(TableSet::read_in(&other_order, &parsed[..2]), Err(DecodeError::Invalid { .. })));
    }

    #[test]
    fn costs_follow_frequencies() {
        let t = Table::from_freqs(vec![2048, 1024, 0, 1024]).unwrap();
        let costs = t.costs(64);
        assert_eq!(costs[0], 256);
        assert_eq!(costs[1], 512);
        assert_eq!(costs[2], ABSENT_COST_BITS << 8);
        assert_eq!(costs[7], ABSENT_COST_BITS << 8);
        assert_eq!(logcode::cost(17, &costs), ABSENT_COST_BITS * 256 + 3 * 256);
    }

    proptest! {
        #[test]
        fn normalisation_is_valid_and_close(counts in proptest::collection::vec(
            prop_oneof![Just(0u64), 1u64..10, 1u64..1_000_000, 0u64..(1u64 << 50)], 1..257)) {
            let t = Table::from_counts(&counts);
            assert_valid(&counts, &t);
            if t.nsym() > 0 {
                // Against the ideal, the only losses are rounding and the floor of 1 per symbol.
                let total: f64 = counts.iter().map(|&c| c as f64).sum();
                let coded = coded_bits(&counts, &t.freq) / total;
                let ideal = entropy_bits(&counts) / total;
                prop_assert!(coded <= ideal + 0.25, "coded {} ideal {}", coded, ideal);
            }
        }

        #[test]
        fn read_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(set) = TableSet::read(&bytes) {
                let mut again = Vec::new();
                set.write(&mut again);
                prop_assert!(again.len() <= bytes.len());
            }
        }
    }
}
