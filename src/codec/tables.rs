//! Frequency tables (FORMAT.md §2.4): statistics, normalisation to 4096, serialisation, decode lookup, and the
//! bit costs the packer prices its parse with.
//!
//! A [`Table`] is `nsym` frequencies that sum to exactly `2^12` (or nothing, when the group never uses the table).
//! Normalisation rounds the counts down, lifts every present symbol to at least 1, then spends or reclaims the
//! last few units greedily where they change the coded size the most; the coded size is convex in each
//! frequency, so the greedy fix-up is optimal for the starting point it is given.
//!
//! Literals may be **context-conditioned** (FORMAT.md §2.4): a group of literal order `c > 0` holds `4^c` LIT
//! tables and codes each literal with the table of its context, the 2-bit hashes ([`lit_hash`]) of the previous
//! `c` literals of the same rANS lane. [`TableSet::from_stats`] picks the order by exact cost (coded bits under
//! each order's normalised tables plus the tables' serialised bytes), so order 0 is kept whenever contexts do
//! not pay for their tables.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use crate::codec::rans::DecodeLookup;
use crate::codec::{logcode, varint};
use crate::error::DecodeError;

/// Table alphabets, in serialisation order.
pub const LL_ALPHABET: usize = 64;
pub const ML_ALPHABET: usize = 64;
pub const OF_ALPHABET: usize = 96;
pub const LIT_ALPHABET: usize = 256;
pub const SCALE_BITS: u32 = 12;
/// The sum of a used table's frequencies: `2^SCALE_BITS`.
pub const SCALE: u32 = 1 << SCALE_BITS;

/// The highest literal context order a table set may declare: `4^4 = 256` LIT tables.
pub const MAX_LIT_ORDER: u8 = 4;
/// Contexts counted by [`SymbolStats::lit_ctx`]: every order-[`MAX_LIT_ORDER`] context.
pub const LIT_CONTEXTS: usize = 1 << (2 * MAX_LIT_ORDER as usize);

/// The 2-bit hash of a literal byte that context selection uses: bits 1..3, which separate the bases
/// (`A` 0, `C` 1, `T` 2, `G` 3, either case). Every other byte maps to one of the four too; it only decides the
/// table, never what can be coded.
#[inline(always)]
pub fn lit_hash(b: u8) -> usize {
    ((b >> 1) & 3) as usize
}

/// The context after `b` in a lane whose context was `ctx`, at order `order`: the most recent literal's hash in
/// the low two bits, older ones above, truncated to `2·order` bits (FORMAT.md §3.1).
#[inline(always)]
pub fn next_lit_context(ctx: usize, b: u8, order: u8) -> usize {
    ((ctx << 2) | lit_hash(b)) & ((1usize << (2 * order as usize)) - 1)
}

/// The context of every literal of a slice: literal `l` is symbol `first + l` of the slice's stream, on lane
/// `(first + l) mod lanes`; its context comes from literals `l − lanes, l − 2·lanes, …` (0 where they do not exist).
/// `lanes` must be a power of two; `order` at most [`MAX_LIT_ORDER`].
pub fn lit_contexts(literals: &[u8], lanes: usize, order: u8, out: &mut Vec<usize>) {
    out.clear();
    let mut ctx = [0usize; 32];
    let lanes = lanes.clamp(1, 32);
    for (l, &b) in literals.iter().enumerate() {
        // Lanes are counted from the first literal: a fixed rotation of the rANS lanes, so contexts still
        // follow the same-lane predecessors.
        let lane = l % lanes;
        out.push(ctx[lane]);
        ctx[lane] = next_lit_context(ctx[lane], b, order);
    }
}

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
    /// Literal counts per order-[`MAX_LIT_ORDER`] context (see [`lit_contexts`]): `lit_ctx[ctx][byte]`, either
    /// empty (no context statistics: only order 0 is considered) or [`LIT_CONTEXTS`] rows.
    pub lit_ctx: Vec<[u64; LIT_ALPHABET]>,
}

impl Default for SymbolStats {
    fn default() -> Self {
        SymbolStats {
            ll: [0; LL_ALPHABET],
            ml: [0; ML_ALPHABET],
            of: [0; OF_ALPHABET],
            lit: [0; LIT_ALPHABET],
            lit_ctx: Vec::new(),
        }
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
        if !other.lit_ctx.is_empty() {
            self.lit_ctx.resize(LIT_CONTEXTS, [0; LIT_ALPHABET]);
            for (a, b) in self.lit_ctx.iter_mut().zip(&other.lit_ctx) {
                add(a, b);
            }
        }
    }

    /// Counts the literals of one slice: order 0 and every order-[`MAX_LIT_ORDER`] context (`lanes` is the
    /// header's `rans_lanes`).
    pub fn add_literals(&mut self, literals: &[u8], lanes: usize) {
        self.lit_ctx.resize(LIT_CONTEXTS, [0; LIT_ALPHABET]);
        let mut contexts = Vec::with_capacity(literals.len());
        lit_contexts(literals, lanes, MAX_LIT_ORDER, &mut contexts);
        for (&b, &ctx) in literals.iter().zip(&contexts) {
            self.lit[b as usize] += 1;
            self.lit_ctx[ctx][b as usize] += 1;
        }
    }

    /// Literal counts per context at `order` (`4^order` rows), summed from the order-4 counts; `None` without
    /// context statistics (literals counted into `lit` alone) or for an order above [`MAX_LIT_ORDER`].
    pub fn lit_counts_at(&self, order: u8) -> Option<Vec<[u64; LIT_ALPHABET]>> {
        let no_literals = self.lit_ctx.is_empty() && self.lit.iter().all(|&c| c == 0);
        if (self.lit_ctx.len() != LIT_CONTEXTS && !no_literals) || order > MAX_LIT_ORDER {
            return None;
        }
        let n = 1usize << (2 * order as usize);
        let mut rows = vec![[0u64; LIT_ALPHABET]; n];
        for (ctx, row) in self.lit_ctx.iter().enumerate() {
            // The low 2·order bits are the `order` most recent literals.
            let into = &mut rows[ctx & (n - 1)];
            into.iter_mut().zip(row).for_each(|(x, y)| *x = x.saturating_add(*y));
        }
        Some(rows)
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

    /// Appends the sparse form LIT tables use (FORMAT.md §2.4): `varint n` present symbols, their `n` symbol gaps
    /// (`symbol − previous symbol − 1`, the first from −1), then their `n` frequencies.
    pub fn write_sparse(&self, out: &mut Vec<u8>) {
        let present: Vec<(usize, u16)> = self.freq.iter().copied().enumerate().filter(|&(_, f)| f != 0).collect();
        varint::write(present.len() as u64, out);
        let mut next = 0usize;
        for &(s, _) in &present {
            varint::write((s - next) as u64, out);
            next = s + 1;
        }
        for &(_, f) in &present {
            varint::write(f as u64, out);
        }
    }

    /// Reads a sparse table ([`Table::write_sparse`]) at `*pos`: at most 256 present symbols, each below 256,
    /// frequencies 1 … 4096 summing to 4096 (unless none is present).
    pub fn read_sparse_at(bytes: &[u8], pos: &mut usize, what: &'static str) -> Result<Table, DecodeError> {
        let n = varint::read_at(bytes, pos)?;
        if n > LIT_ALPHABET as u64 {
            return Err(DecodeError::Limit { what, value: n, limit: LIT_ALPHABET as u64 });
        }
        let mut symbols = Vec::with_capacity(n as usize);
        let mut next = 0u64;
        for _ in 0..n {
            let gap = varint::read_at(bytes, pos)?;
            let s = next.saturating_add(gap);
            if s >= LIT_ALPHABET as u64 {
                return Err(DecodeError::Limit { what: "LIT table symbol", value: s, limit: LIT_ALPHABET as u64 - 1 });
            }
            symbols.push(s as usize);
            next = s + 1;
        }
        let mut freq = vec![0u16; symbols.last().map_or(0, |&s| s + 1)];
        for &s in &symbols {
            let f = varint::read_at(bytes, pos)?;
            if f == 0 || f > SCALE as u64 {
                return Err(DecodeError::Invalid {
                    what,
                    detail: format!("symbol {s} has frequency {f}, expected 1 … {SCALE}"),
                });
            }
            freq[s] = f as u16;
        }
        Table::from_freqs(freq)
            .map_err(|_| DecodeError::Invalid { what, detail: "frequencies do not sum to 4096".to_string() })
    }

    /// Bits that coding `counts` with this table takes (every counted symbol must be held).
    pub fn coded_bits(&self, counts: &[u64]) -> f64 {
        counts
            .iter()
            .enumerate()
            .filter(|&(_, &c)| c != 0)
            .map(|(s, &c)| c as f64 * (SCALE_BITS as f64 - (self.freq_of(s).max(1) as f64).log2()))
            .sum()
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

/// The tables of a group: LL, ML, OF, and the `4^lit_order` LIT tables indexed by literal context.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableSet {
    pub ll: Table,
    pub ml: Table,
    pub of: Table,
    /// Literal context order `c` (0 … [`MAX_LIT_ORDER`]).
    pub lit_order: u8,
    /// `4^lit_order` LIT tables; table `ctx` codes the literals of context `ctx` (see [`lit_contexts`]).
    pub lit: Vec<Table>,
}

impl Default for TableSet {
    /// Four unused tables at literal order 0.
    fn default() -> Self {
        TableSet {
            ll: Table::default(),
            ml: Table::default(),
            of: Table::default(),
            lit_order: 0,
            lit: vec![Table::default()],
        }
    }
}

/// Per-symbol costs of a [`TableSet`] in 1/256 bit, full alphabets, for [`logcode::cost`]. Literal costs are
/// the order-0 view (the parser prices literals without their context).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableCosts {
    pub ll: Vec<u32>,
    pub ml: Vec<u32>,
    pub of: Vec<u32>,
    pub lit: Vec<u32>,
}

impl TableSet {
    /// Builds normalised tables from a group's statistics, with the literal order of least total cost.
    pub fn from_stats(stats: &SymbolStats) -> TableSet {
        Self::from_stats_max_order(stats, MAX_LIT_ORDER)
    }

    /// [`TableSet::from_stats`] with the literal order limited to `max_order`: each order from 0 up is priced
    /// exactly (the literals' coded bits under that order's normalised tables plus its serialised tables), and
    /// the cheapest wins (the lowest order on a tie).
    pub fn from_stats_max_order(stats: &SymbolStats, max_order: u8) -> TableSet {
        let order0 = vec![Table::from_counts(&stats.lit)];
        let mut best = (lit_cost(&order0, std::slice::from_ref(&stats.lit)), 0u8, order0);
        for order in 1..=max_order.min(MAX_LIT_ORDER) {
            let Some(rows) = stats.lit_counts_at(order) else { break };
            let tables: Vec<Table> = rows.iter().map(|r| Table::from_counts(r)).collect();
            let cost = lit_cost(&tables, &rows);
            if cost < best.0 {
                best = (cost, order, tables);
            }
        }
        TableSet {
            ll: Table::from_counts(&stats.ll),
            ml: Table::from_counts(&stats.ml),
            of: Table::from_counts(&stats.of),
            lit_order: best.1,
            lit: best.2,
        }
    }

    /// The tables of `stats` at exactly literal order `order` (tests and measurements); `None` without context
    /// statistics or above [`MAX_LIT_ORDER`].
    pub fn with_lit_order(stats: &SymbolStats, order: u8) -> Option<TableSet> {
        let rows = stats.lit_counts_at(order)?;
        Some(TableSet {
            lit_order: order,
            lit: rows.iter().map(|r| Table::from_counts(r)).collect(),
            ..Self::from_stats_max_order(stats, 0)
        })
    }

    /// Appends the serialised table set (§2.4) to `out`.
    pub fn write(&self, out: &mut Vec<u8>) {
        for table in [&self.ll, &self.ml, &self.of] {
            table.write(out);
        }
        varint::write(self.lit_order as u64, out);
        for table in &self.lit {
            table.write_sparse(out);
        }
    }

    /// Parses a serialised table set that must fill `bytes` exactly. The literal order is checked before the
    /// `4^c` tables are allocated.
    pub fn read(bytes: &[u8]) -> Result<TableSet, DecodeError> {
        let mut pos = 0;
        let ll = Table::read_at(bytes, &mut pos, LL_ALPHABET, "LL table nsym")?;
        let ml = Table::read_at(bytes, &mut pos, ML_ALPHABET, "ML table nsym")?;
        let of = Table::read_at(bytes, &mut pos, OF_ALPHABET, "OF table nsym")?;
        let order = varint::read_at(bytes, &mut pos)?;
        if order > MAX_LIT_ORDER as u64 {
            return Err(DecodeError::Limit {
                what: "literal context order",
                value: order,
                limit: MAX_LIT_ORDER as u64,
            });
        }
        let count = 1usize << (2 * order as usize);
        let mut lit = Vec::with_capacity(count);
        for _ in 0..count {
            lit.push(Table::read_sparse_at(bytes, &mut pos, "LIT table symbols")?);
        }
        if pos != bytes.len() {
            return Err(DecodeError::Invalid {
                what: "table set",
                detail: format!("{} trailing bytes after the tables", bytes.len() - pos),
            });
        }
        Ok(TableSet { ll, ml, of, lit_order: order as u8, lit })
    }

    /// Checks the literal tables' shape: `4^lit_order` tables, order at most [`MAX_LIT_ORDER`], no table wider
    /// than the byte alphabet. [`TableSet::read`] only builds such sets; this guards hand-built ones.
    pub fn check_lit_shape(&self) -> Result<(), DecodeError> {
        if self.lit_order > MAX_LIT_ORDER {
            return Err(DecodeError::Limit {
                what: "literal context order",
                value: self.lit_order as u64,
                limit: MAX_LIT_ORDER as u64,
            });
        }
        let want = 1usize << (2 * self.lit_order as usize);
        if self.lit.len() != want {
            return Err(DecodeError::Invalid {
                what: "LIT tables",
                detail: format!("{} tables for literal order {}, expected {want}", self.lit.len(), self.lit_order),
            });
        }
        if let Some(t) = self.lit.iter().find(|t| t.nsym() > LIT_ALPHABET) {
            return Err(DecodeError::Limit {
                what: "LIT table nsym",
                value: t.nsym() as u64,
                limit: LIT_ALPHABET as u64,
            });
        }
        Ok(())
    }

    /// The order-0 view of the literal tables: the single table at order 0, else `None`.
    pub fn lit0(&self) -> Option<&Table> {
        match (self.lit_order, self.lit.as_slice()) {
            (0, [t]) => Some(t),
            _ => None,
        }
    }

    /// Costs of every symbol of every table, for pricing a parse. With context tables the literal costs are
    /// those of the contexts' counts merged back into one distribution (approximated by the tables' mean).
    pub fn costs(&self) -> TableCosts {
        let lit = match self.lit0() {
            Some(t) => t.costs(LIT_ALPHABET),
            None => {
                let mut merged = [0u64; LIT_ALPHABET];
                for t in &self.lit {
                    for (m, &f) in merged.iter_mut().zip(&t.freq) {
                        *m += f as u64;
                    }
                }
                Table::from_counts(&merged).costs(LIT_ALPHABET)
            }
        };
        TableCosts {
            ll: self.ll.costs(LL_ALPHABET),
            ml: self.ml.costs(ML_ALPHABET),
            of: self.of.costs(OF_ALPHABET),
            lit,
        }
    }
}

/// Total bits of coding literal counts `rows` (one per context) with `tables`, plus the tables' sparse form.
fn lit_cost(tables: &[Table], rows: &[[u64; LIT_ALPHABET]]) -> f64 {
    let mut bytes = Vec::new();
    let mut bits = 0.0;
    for (t, r) in tables.iter().zip(rows) {
        t.write_sparse(&mut bytes);
        bits += t.coded_bits(r);
    }
    bits + 8.0 * bytes.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

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
        assert!(set.lit0().is_some_and(|t| t.is_empty()));
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
        bytes.extend_from_slice(&[0, 0, 0, 0]);
        assert!(matches!(TableSet::read(&bytes), Err(DecodeError::Invalid { .. })));
        // A frequency above 4096, and a huge one that must not overflow the sum.
        for f in [4097, u64::MAX] {
            let mut bytes = vec![2];
            varint::write(f, &mut bytes);
            varint::write(f, &mut bytes);
            bytes.extend_from_slice(&[0, 0, 0, 0]);
            assert!(matches!(TableSet::read(&bytes), Err(DecodeError::Limit { .. })));
        }
        // nsym = 3 with all zero frequencies.
        assert!(TableSet::read(&[3, 0, 0, 0, 0, 0, 0, 0]).is_err());
        // All four tables unused, literal order 0.
        assert_eq!(TableSet::read(&[0, 0, 0, 0, 0]), Ok(TableSet::default()));
        // The old layout (no order varint) is refused.
        assert!(TableSet::read(&[0, 0, 0, 0]).is_err());
    }

    /// Literals of a skewed order-`k` source over ACGT: each base mostly follows from the previous two.
    fn markov_bases(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed | 1;
        let mut out = Vec::with_capacity(n);
        for i in 0..n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let prev = if i >= 2 { lit_hash(out[i - 1]) * 4 + lit_hash(out[i - 2]) } else { 0 };
            let pick = if x % 8 < 6 { prev % 4 } else { (x >> 8) as usize % 4 };
            out.push(b"ACTG"[pick]);
        }
        out
    }

    #[test]
    fn lit_hash_separates_bases() {
        let h: Vec<usize> = b"ACTG".iter().map(|&b| lit_hash(b)).collect();
        assert_eq!(h, [0, 1, 2, 3]);
        assert_eq!(b"actg".map(lit_hash), [0, 1, 2, 3]);
        // Contexts: most recent in the low bits, truncated to the order.
        assert_eq!(next_lit_context(0, b'G', 2), 3);
        assert_eq!(next_lit_context(3, b'C', 2), 0b1101);
        assert_eq!(next_lit_context(0b1101, b'T', 2), 0b0110);
        let mut ctx = Vec::new();
        lit_contexts(b"GCTA", 2, 1, &mut ctx);
        // Lanes 0 and 1: G, T on lane 0; C, A on lane 1.
        assert_eq!(ctx, [0, 0, 3, 1]);
    }

    #[test]
    fn round_trip_every_order() {
        for order in 0..=MAX_LIT_ORDER {
            let mut stats = SymbolStats::default();
            stats.ll[1] = 5;
            stats.add_literals(&markov_bases(5000, order as u64 + 7), 1);
            stats.add_literals(b"NNNN\n>chr1", 1);
            let set = TableSet::from_stats_max_order(&stats, order);
            assert!(set.lit_order <= order);
            set.check_lit_shape().unwrap();
            let mut bytes = Vec::new();
            set.write(&mut bytes);
            assert_eq!(TableSet::read(&bytes), Ok(set.clone()), "order {order}");
            // Every literal is held by its context's table.
            let rows = stats.lit_counts_at(set.lit_order).unwrap();
            for (t, r) in set.lit.iter().zip(&rows) {
                for (s, &c) in r.iter().enumerate() {
                    assert_eq!(c != 0, t.freq_of(s) != 0);
                }
            }
        }
        // A skewed order-2 source picks a context order; a flat one keeps order 0.
        let mut stats = SymbolStats::default();
        stats.add_literals(&markov_bases(100_000, 3), 1);
        assert!(TableSet::from_stats(&stats).lit_order >= 2);
        let mut flat = SymbolStats::default();
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let random: Vec<u8> = (0..20_000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b"ACGT"[(x >> 40) as usize % 4]
            })
            .collect();
        flat.add_literals(&random, 1);
        assert_eq!(TableSet::from_stats(&flat).lit_order, 0);
    }

    #[test]
    fn read_refuses_hostile_literal_tables() {
        let head = [0u8, 0, 0];
        // Order 5 is refused before anything is allocated, and so is a huge one.
        for order in [5u64, u64::MAX] {
            let mut bytes = head.to_vec();
            varint::write(order, &mut bytes);
            assert!(matches!(TableSet::read(&bytes), Err(DecodeError::Limit { what: "literal context order", .. })));
        }
        // Order 1 needs four tables: three, or five, are refused.
        for count in [3, 5] {
            let mut bytes = head.to_vec();
            bytes.push(1);
            bytes.extend(std::iter::repeat_n(0u8, count));
            assert!(TableSet::read(&bytes).is_err(), "{count} tables");
        }
        let mut ok = head.to_vec();
        ok.extend_from_slice(&[1, 0, 0, 0, 0]);
        assert_eq!(TableSet::read(&ok).map(|s| s.lit.len()), Ok(4));
        // Sparse tables: a symbol past 255, a zero frequency, a bad sum, more than 256 symbols.
        let sparse = |t: &[u64]| {
            let mut bytes = head.to_vec();
            bytes.push(0);
            for &v in t {
                varint::write(v, &mut bytes);
            }
            TableSet::read(&bytes)
        };
        assert!(sparse(&[1, 65, 4096]).is_ok());
        assert!(matches!(sparse(&[1, 256, 4096]), Err(DecodeError::Limit { .. })));
        assert!(matches!(sparse(&[2, 200, 55, 4096, 1]), Err(DecodeError::Limit { .. })));
        assert!(sparse(&[2, 0, 0, 4096, 0]).is_err());
        assert!(sparse(&[2, 0, 0, 4000, 95]).is_err());
        assert!(matches!(sparse(&[257]), Err(DecodeError::Limit { .. })));
        assert!(sparse(&[1, u64::MAX, 4096]).is_err());
        // A hand-built set with the wrong number of tables fails the shape check.
        let bad = TableSet { lit_order: 2, lit: vec![Table::default(); 4], ..TableSet::default() };
        assert!(bad.check_lit_shape().is_err());
        let bad = TableSet { lit_order: 9, lit: vec![Table::default(); 4], ..TableSet::default() };
        assert!(bad.check_lit_shape().is_err());
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
