//! The optimal parser: per block, a price-based shortest path over byte positions (zstd btopt / lzma style).
//!
//! Node `i` of a block holds the cheapest known way to code the block's first `i` bytes, *including* the price of
//! the literal-run code of the token still open at `i`. From each node the parser tries one literal (the run code's
//! price changes from `LL(l)` to `LL(l+1)`) and every candidate match: all lengths from the class minimum up to the
//! candidate's length, each length with the cheapest source that reaches it. Candidates come from three places:
//!
//! - the hash tables of [`crate::pack::matcher`] (the recent window);
//! - the repeats of [`crate::pack::ldm`] that cover the position (any distance);
//! - recently seen distances and their neighbours `±1`: a FASTA line break or a one-base indel shifts an alignment
//!   by one;
//! - the continuations of the path's previous match (its `back` plus each delta of
//!   [`crate::codec::tables::OF_CONTINUATION_DELTAS`], for a reverse complement along its anti-diagonal).
//!
//! On bare bases ([`ParseParams::reverse`]) the hash tables and the long repeats also give reverse-complement
//! candidates (FORMAT.md §1, version 5): a source read backwards and complemented. They are priced with their
//! own explicit distance codes and continue only a previous reverse complement, and their depth is that of the
//! byte they read (`e − k` for byte `k`, `e = pos − back`).
//!
//! A source's price is its distance code plus its [`ClosurePrice`]: what it adds to a cold read of the block
//! (one more slice to decode, and the levels of depth behind it). The distance code depends on the path: a match
//! whose `back` continues the previous match's (same distance after a substitution, a few bytes off after an
//! indel) takes a continuation code with no extra bits (FORMAT.md §3.2), so every node carries the `back` of the
//! last match on its cheapest path (zstd btopt style: one path per node, not every history) and prices its
//! candidates against it. Continuations may be as short as 3 bytes whatever their distance class: their price is
//! a few bits, not the distance's extra bits that the class minimum guards against.
//!
//! Candidates are shortened to the bytes whose sources keep the reference depth within the bound, using the
//! depths this segment has produced so far (estimated for the block being parsed) and the final depths before
//! the current chunk. A match of at least `sufficient_len` bytes is taken at once (the classic cut that keeps long
//! repeats linear).
//! Matches are capped at the block end, so none crosses a block boundary. After each block the symbols it chose
//! are folded into the price model, so prices track the data.
//!
//! Bare bases (genome mode) at every level, text at the fast levels, and the sketch parse of the segments that
//! are parsed twice take the cheaper lazy parse of `parser/lazy.rs` instead ([`ParseParams::lazy_steps`]): the same
//! candidates and prices, one decision per position.

use crate::codec::block::{continuation_index, continued_back, PrevMatch, Token, COMPLEMENT};
use crate::codec::tables::OF_CONTINUATION_DELTAS;
use crate::pack::cost::{Counts, Prices, PRICE_ONE};
use crate::pack::ldm::LongMatch;
use crate::pack::matcher::{common_len, prefetch_byte, rc_common_len, Candidate, ChainMatcher};

mod lazy;

/// The parser's knobs, derived from the level.
#[derive(Debug, Clone, Copy)]
pub struct ParseParams {
    pub sufficient_len: u32,
    /// Shortest match per distance class (FORMAT.md §1).
    pub min_match: [u8; 8],
    /// Distances remembered for the `±1` neighbour search.
    pub rep_count: usize,
    /// What a source outside the block adds to a cold read (see [`ClosurePrice`]).
    pub closure: ClosurePrice,
    /// log2 of the slice size the blocks are cut into (FORMAT.md §3): a continuation code cannot refer to a
    /// match in an earlier slice, so the first match of a slice is priced with an explicit distance.
    pub slice_log: u8,
    /// `Some(steps)`: the fast levels' lazy parse (`parser/lazy.rs`), looking `steps` positions ahead for a better
    /// match; `None`: the optimal parse.
    pub lazy_steps: Option<u32>,
    /// Lazy parse only: after `2^skip_log` literals in a row, look up every second position, then every third, …
    /// (`None`: every position).
    pub skip_log: Option<u32>,
    /// Look for reverse-complement matches too (bare bases: genome mode's base regions).
    pub reverse: bool,
    /// The hash tables are looked up for forward matches only at positions that are a multiple of this (a power
    /// of two; 1: every position), and for reverse complements at multiples of `rc_lookup_every`. Every position
    /// is still indexed. For the lazy parse of bare bases, which extends a match found a few positions late back
    /// over the literals before it (see [`ParseParams::lazy_steps`]).
    pub lookup_every: u64,
    pub rc_lookup_every: u64,
}

/// The price of a match's source in work for a cold read, added to its price in bits (both in 1/256 bit).
///
/// A cold read of a block decodes its slices, then every slice its cross-block sources lie in, then every slice
/// *their* sources lie in, up to `max_depth` levels (FORMAT.md §1, §3). With global matching and no price for
/// that, sources late in a stream scatter over the whole earlier stream and chain through many levels: on
/// atha_chr1 a cold 16 KiB block at the end parsed about 2,200 slices against 68 at the start. So a source
/// outside the block pays `enter` (late in a stream nearly every one lies in a slice of its own) and `per_level`
/// for every level of depth of the bytes it copies (each level of a chain is one more slice to decode). Waiving
/// `enter` for the last two slices a path entered changed nothing measurable, so the price is per source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClosurePrice {
    pub enter: u32,
    pub per_level: u32,
}

/// One block's parse: tokens (the literal-only one last) and its literal bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BlockTokens {
    pub tokens: Vec<Token>,
    pub literals: Vec<u8>,
}

/// Index of the first byte of `depths` that is at least `max`, eight bytes at a time: candidates are checked at
/// nearly every position, over up to a few hundred source bytes each.
#[inline]
fn first_deep(depths: &[u8], max: u8) -> Option<usize> {
    if max > 128 {
        return depths.iter().position(|&d| d >= max);
    }
    const LOW: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    // A byte > n (n <= 127) sets its high bit in `(x + (127 - n) * LOW) | x`.
    let add = (127 - (max as u64 - 1)) * LOW;
    let mut chunks = depths.chunks_exact(8);
    let mut at = 0;
    for c in &mut chunks {
        let x = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        if ((x.wrapping_add(add)) | x) & HIGH != 0 {
            return c.iter().position(|&d| d >= max).map(|k| at + k);
        }
        at += 8;
    }
    chunks.remainder().iter().position(|&d| d >= max).map(|k| at + k)
}

/// The stream position that byte `k` of a match at `pos` with distance `back` copies: `pos − back + (k mod back)`
/// forward, `pos − back − k` for a reverse complement (FORMAT.md §1).
#[inline]
pub fn source_byte(pos: u64, back: u64, rc: bool, k: u64) -> u64 {
    if rc {
        pos - back - k
    } else {
        pos - back + k % back
    }
}

/// Index of the last byte of `depths` that is at least `max` (the mirror of [`first_deep`], for the sources of
/// reverse-complement matches, which are read backwards).
#[inline]
fn last_deep(depths: &[u8], max: u8) -> Option<usize> {
    if max > 128 {
        return depths.iter().rposition(|&d| d >= max);
    }
    const LOW: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGH: u64 = u64::from_le_bytes([0x80; 8]);
    let add = (127 - (max as u64 - 1)) * LOW;
    let mut chunks = depths.rchunks_exact(8);
    let mut end = depths.len();
    for c in &mut chunks {
        end -= 8;
        let x = u64::from_le_bytes(c.try_into().expect("8 bytes"));
        if ((x.wrapping_add(add)) | x) & HIGH != 0 {
            return c.iter().rposition(|&d| d >= max).map(|k| end + k);
        }
    }
    chunks.remainder().iter().rposition(|&d| d >= max)
}

/// Distance class of a back distance (FORMAT.md §1): `< 2^12, 2^16, … , 2^36`, then the rest.
#[inline]
pub fn distance_class(back: u64) -> usize {
    let bits = 64 - back.leading_zeros() as usize;
    if bits <= 12 {
        0
    } else {
        ((bits - 13) / 4 + 1).min(7)
    }
}

/// The distances [`SegmentParser::collect_reps`] tries, in its order: every recent one, the first two also `±1`
/// (a FASTA line break or a one-base indel shifts an alignment by one).
fn rep_tries(reps: &[u64]) -> impl Iterator<Item = i64> + '_ {
    reps.iter().enumerate().flat_map(|(k, &r)| {
        let shifts: &[i64] = if k < 2 { &[0, -1, 1] } else { &[0] };
        shifts.iter().map(move |&s| r as i64 + s)
    })
}

/// Positions one mask of [`SegmentParser::rep_may_hit`] covers.
const REP_SPAN: u64 = 64;
/// Bytes [`word_hits`] reads from each of its two positions.
const WORD_HITS_READ: usize = 80;

/// Bit `i` (of 64) set where the four bytes at `a + i` equal those at `b + i`. Reads [`WORD_HITS_READ`] bytes
/// from `a` and from `b` (the caller checks that they exist).
#[inline]
fn word_hits(data: &[u8], a: usize, b: usize) -> u64 {
    let (x, y) = (&data[a..a + WORD_HITS_READ], &data[b..b + WORD_HITS_READ]);
    let mut eq = 0u128;
    #[cfg(target_arch = "x86_64")]
    for j in 0..WORD_HITS_READ / 16 {
        use std::arch::x86_64::{__m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_movemask_epi8};
        // SAFETY: `x` and `y` hold WORD_HITS_READ bytes, so both 16-byte loads at 16·j stay inside them; SSE2 is
        // part of x86_64.
        let m = unsafe {
            let u = _mm_loadu_si128(x.as_ptr().add(16 * j) as *const __m128i);
            let v = _mm_loadu_si128(y.as_ptr().add(16 * j) as *const __m128i);
            _mm_movemask_epi8(_mm_cmpeq_epi8(u, v)) as u16
        };
        eq |= (m as u128) << (16 * j);
    }
    #[cfg(not(target_arch = "x86_64"))]
    for (j, (u, v)) in x.iter().zip(y).enumerate() {
        eq |= ((u == v) as u128) << j;
    }
    (eq & (eq >> 1) & (eq >> 2) & (eq >> 3)) as u64
}

#[derive(Debug, Clone, Copy)]
struct Node {
    /// Total price in 1/256 bit (u64: a 1 MiB block of 12-bit literals would overflow u32).
    price: u64,
    lit_len: u32,
    match_len: u32,
    back: u64,
    rc: bool,
    /// The last match on the cheapest path into this node (`None`: none yet; `dst` absolute), what a
    /// continuation code of the next match continues.
    prev: Option<PrevMatch>,
}

const UNREACHED: Node = Node { price: u64::MAX, lit_len: 0, match_len: 0, back: 0, rc: false, prev: None };
/// Most literals between a match and the next one for which continuations of the first are tried. Default
/// level, ratio of atha_chr1 / fly-chr4 ×6 / ×11 and pack CPU seconds of atha: no limit 4.1033 / 6.1153 / 9.6825,
/// 11.1-12.4 s; 16: 4.1040 / 6.1155 / 9.6737, 9.7 s; 40: 4.1085 / 6.1192 / 9.6938, 9.7 s; 64: 4.1091 / 6.1353 /
/// 9.6927, 8.3 s (the machine was busy and the times are noisy; 6.8 s without continuations at that time).
const CONTINUATION_GAP: u32 = 64;
/// Added to the price of every match (1/256 bit). The model prices a match a little below what it costs in the
/// end (one static table per group, slice cuts and the depth pass split a few), so break-even matches lose:
/// general mode atha_chr1 at the default level, ratio for 0 / 0.5 / 1 / 1.5 / 3 bits: 3.3293 / 3.3337 / 3.3341 /
/// 3.3339 / 3.3289.
const MATCH_BIAS: u64 = PRICE_ONE as u64;
/// Shortest continuation tried (whatever the distance class): a 2-byte continuation after a chance match is
/// itself mostly chance. General mode atha_chr1: 3.3293 with 2, 3.3327 with 3 (3.3341 → 3.3344 beside
/// [`MATCH_BIAS`]; 4: 3.3319); fly ×11 10.2177 → 10.2191 with both; genome atha unchanged (4.1502).
const MIN_CONTINUATION: u32 = 3;
/// Most candidates kept per position after pruning.
const MAX_CANDIDATES: usize = 16;
/// Halve the adaptive counts once this many literals have been counted, so prices follow recent data.
const DECAY_LITERALS: u32 = 1 << 17;

/// Parses the blocks of one segment in order, carrying the price model from block to block.
pub struct SegmentParser<'a> {
    data: &'a [u8],
    params: ParseParams,
    chain: ChainMatcher<'a>,
    counts: Counts,
    nodes: Vec<Node>,
    cands: Vec<Candidate>,
    /// Long matches overlapping the segment, sorted by start; `ldm_next` is the first not yet activated. A
    /// parse that starts before the long-match scan has finished gets them as it goes ([`Self::add_long`]).
    ldm: Vec<LongMatch>,
    ldm_next: usize,
    active: Vec<LongMatch>,
    reps: Vec<u64>,
    /// Bit `i`: some distance [`Self::collect_reps`] tries has its first four bytes equal at `rep_mask_at + i`
    /// ([`Self::rep_may_hit`]); `rep_mask_at` is `u64::MAX` when the distances changed since it was computed.
    rep_mask: u64,
    rep_mask_at: u64,
    first_block: bool,
    /// `local_depth[p - local_start]` is the depth of byte `p` from `local_start` on: the segment's own as parsed,
    /// after those of the bytes before it that were given ([`SegmentParser::new`]'s `known`).
    local_start: u64,
    local_depth: Vec<u8>,
    /// Final depths of everything before the current chunk (read-only while the chunk is parsed); bytes past its
    /// end that `local_depth` does not hold count as 0.
    outer_depth: &'a [u8],
    max_depth: u8,
    /// First stream position of the block being parsed: sources at or after it cost a cold read nothing extra.
    block_start: u64,
    /// Candidates with their full source price (distance plus closure), the front the parser relaxes.
    priced: Vec<Priced>,
    /// The lazy parse's literal prices of the block being parsed, summed: `lit_sums[i]` is the price of its
    /// first `i` bytes ([`Self::literal_price`]).
    lit_sums: Vec<u64>,
}

/// A candidate with its source's price: the distance code plus what the source adds to a cold read.
#[derive(Debug, Clone, Copy)]
struct Priced {
    back: u64,
    len: u32,
    rc: bool,
    price: u32,
    /// Coded as a continuation of the path's previous match (so any length from 2 is worth trying).
    continues: bool,
}

/// What the parser knows about reference depth: the bound and the final depths before the current chunk.
/// Sources between the chunk start and the segment start count as depth 0 (they are being parsed in parallel);
/// the depth pass catches what that misses, and at the levels that re-parse a second parse sees them.
#[derive(Clone, Copy)]
pub struct DepthView<'a> {
    pub max_depth: u8,
    pub outer: &'a [u8],
}

impl<'a> SegmentParser<'a> {
    /// The parser of `segment`. `known`: the depths of the `known.len()` bytes just before the segment, read in
    /// place of `depth.outer`'s (a second parse of a segment: the trial depths of the chunk's segments before
    /// it, which `outer` does not reach).
    pub fn new(
        data: &'a [u8],
        params: ParseParams,
        chain: ChainMatcher<'a>,
        ldm: &[LongMatch],
        segment: (u64, u64),
        depth: DepthView<'a>,
        known: &[u8],
    ) -> Self {
        let local_start = segment.0 - known.len() as u64;
        let local_depth = crate::pack::mem::zeroed_after(known, (segment.1 - local_start) as usize);
        SegmentParser {
            local_start,
            local_depth,
            outer_depth: depth.outer,
            max_depth: depth.max_depth.max(1),
            data,
            params,
            chain,
            counts: Counts::prior(),
            nodes: Vec::new(),
            cands: Vec::with_capacity(64),
            ldm: ldm.to_vec(),
            ldm_next: 0,
            active: Vec::new(),
            reps: Vec::new(),
            rep_mask: 0,
            rep_mask_at: u64::MAX,
            first_block: true,
            block_start: 0,
            priced: Vec::with_capacity(64),
            lit_sums: Vec::new(),
        }
    }

    /// Appends long matches (sorted by start, none starting before the last one given): those that start in a
    /// block must be given before the block is parsed.
    pub fn add_long(&mut self, more: impl IntoIterator<Item = LongMatch>) {
        self.ldm.extend(more);
    }

    /// Parses the block `[start, end)`; blocks must be given in stream order.
    pub fn parse_block(&mut self, start: u64, end: u64) -> BlockTokens {
        if self.params.lazy_steps.is_some() {
            return self.parse_block_lazy(start, end);
        }
        if self.first_block {
            self.counts.set_literals_from(&self.data[start as usize..end as usize]);
            self.first_block = false;
        }
        let prices = Prices::from_counts(&self.counts);
        self.block_start = start;
        let n = (end - start) as usize;
        self.nodes.clear();
        self.nodes.resize(n + 1, UNREACHED);
        self.nodes[0] = Node { price: prices.lit_run(0) as u64, ..UNREACHED };
        let mut i = 0;
        while i < n {
            i = self.expand(start, i, n, &prices);
        }
        let out = self.backtrack(start, n);
        self.record_depths(start, &out);
        self.counts.add_tokens(&out.tokens, &out.literals);
        if self.counts.lit.iter().sum::<u32>() > DECAY_LITERALS {
            self.counts.decay();
        }
        out
    }

    /// Relaxes the edges out of node `i` and returns the next node to expand.
    fn expand(&mut self, start: u64, i: usize, n: usize, prices: &Prices) -> usize {
        let here = self.nodes[i];
        let pos = start + i as u64;
        if here.match_len > 0 {
            // The best path into node i is final now: estimate the depth of the byte before it.
            let first = pos - here.match_len as u64;
            let src = source_byte(first, here.back, here.rc, here.match_len as u64 - 1);
            self.set_depth(pos - 1, self.depth_at(src) + 1);
        } else if i > 0 {
            self.set_depth(pos - 1, 0);
        }
        let lit = here.price - prices.lit_run(here.lit_len) as u64
            + prices.lit_run(here.lit_len + 1) as u64
            + prices.lit[self.data[pos as usize] as usize] as u64;
        if lit < self.nodes[i + 1].price {
            self.nodes[i + 1] =
                Node { price: lit, lit_len: here.lit_len + 1, match_len: 0, back: 0, rc: false, prev: here.prev };
        }
        // Candidates are measured to the block end, not cut at a few sufficient lengths: a long match is taken
        // at once, so which source it comes from decides where the next one must start. Between related genomes
        // the nearest source that reaches a cap often diverges right after it while another continues for
        // kilobytes; with a cap of 4 sufficient lengths the fly-chr4 set packed 8 % larger (7.955 against
        // 8.619) for about the same time, because every early divergence costs another far source.
        let limit = (n - i) as u32;
        // Continuations are tried only within CONTINUATION_GAP literals of the path's last match (the substituted
        // or inserted bases between two pieces of one alignment). Further on they are chance matches of a few
        // bytes, each try a read far back in the stream, and taking them misleads the one-path-per-node parse.
        // A continuation also needs the last match in this slice: one that ended at or before the slice's start
        // leaves the next match to code its distance explicitly (the encoder does, and so prices the parser).
        let slice_start = pos >> self.params.slice_log << self.params.slice_log;
        let last_end = pos - u64::from(here.lit_len);
        let prev = if here.lit_len <= CONTINUATION_GAP && last_end > slice_start { here.prev } else { None };
        self.gather(pos, limit, prices, prev);
        if self.priced.is_empty() {
            return i + 1;
        }
        let base = here.price + prices.lit_run(0) as u64 + MATCH_BIAS;
        // A source that reaches the sufficient length is taken at once: of those, the one cheapest per byte.
        let per_byte = |c: &Priced| (c.price as u64 + prices.match_len(c.len) as u64, c.len as u64);
        let sufficient = self.priced.iter().filter(|c| c.len >= self.params.sufficient_len).copied().reduce(|a, b| {
            let ((pa, la), (pb, lb)) = (per_byte(&a), per_byte(&b));
            if pb * la < pa * lb {
                b
            } else {
                a
            }
        });
        if let Some(c) = sufficient {
            self.relax(i, c, base, prices);
            self.copy_depths(pos, c.back, c.rc, c.len);
            return i + c.len as usize;
        }
        let mut from_len = 2;
        for k in 0..self.priced.len() {
            let c = self.priced[k];
            let class_min =
                if c.continues { MIN_CONTINUATION } else { self.params.min_match[distance_class(c.back)] as u32 };
            let min_len = class_min.max(from_len);
            let dist = base + c.price as u64;
            for len in min_len..=c.len {
                let price = dist + prices.match_len(len) as u64;
                let node = &mut self.nodes[i + len as usize];
                if price < node.price {
                    let prev = Some(PrevMatch { back: c.back, dst: pos, rc: c.rc });
                    *node = Node { price, lit_len: 0, match_len: len, back: c.back, rc: c.rc, prev };
                }
            }
            from_len = from_len.max(c.len + 1);
        }
        i + 1
    }

    fn relax(&mut self, i: usize, c: Priced, base: u64, prices: &Prices) {
        let price = base + c.price as u64 + prices.match_len(c.len) as u64;
        let prev = Some(PrevMatch { back: c.back, dst: self.block_start + i as u64, rc: c.rc });
        let node = &mut self.nodes[i + c.len as usize];
        if price < node.price {
            *node = Node { price, lit_len: 0, match_len: c.len, back: c.back, rc: c.rc, prev };
        }
    }

    /// Writes the depths of a match of `len` bytes at `pos` (each 1 + that of the byte it copies).
    fn copy_depths(&mut self, pos: u64, back: u64, rc: bool, len: u32) {
        for k in 0..len as u64 {
            let d = self.depth_at(source_byte(pos, back, rc, k)).saturating_add(1);
            self.set_depth(pos + k, d);
        }
    }

    #[inline]
    fn depth_at(&self, p: u64) -> u8 {
        if p >= self.local_start {
            self.local_depth[(p - self.local_start) as usize]
        } else {
            self.outer_depth.get(p as usize).copied().unwrap_or(0)
        }
    }

    #[inline]
    fn set_depth(&mut self, p: u64, d: u8) {
        self.local_depth[(p - self.local_start) as usize] = d;
    }

    /// Shortens a candidate to the bytes whose sources are shallow enough to stay within the depth bound.
    fn cap_by_depth(&self, pos: u64, c: Candidate) -> u32 {
        if c.rc {
            return self.cap_rc_by_depth(pos, c);
        }
        let src = pos - c.back;
        let span = (c.len as u64).min(c.back);
        let end = src + span;
        // Sources before the segment read the final depths (bytes past them count as 0), the rest this
        // segment's own estimates.
        let split = self.local_start.clamp(src, end);
        if split > src {
            let outer_end = (split as usize).min(self.outer_depth.len());
            if (src as usize) < outer_end {
                if let Some(k) = first_deep(&self.outer_depth[src as usize..outer_end], self.max_depth) {
                    return k as u32;
                }
            }
        }
        if end > split {
            let local = &self.local_depth[(split - self.local_start) as usize..(end - self.local_start) as usize];
            if let Some(k) = first_deep(local, self.max_depth) {
                return (split - src) as u32 + k as u32;
            }
        }
        c.len
    }

    /// [`Self::cap_by_depth`] of a reverse complement: byte `k` reads `e − k`, so the first byte too deep is the
    /// last deep one of the source range `[e − len + 1, e]` — searched from its end, this segment's estimates
    /// (the higher positions) before the final depths of the bytes before the segment.
    fn cap_rc_by_depth(&self, pos: u64, c: Candidate) -> u32 {
        let last = pos - c.back;
        let first = last + 1 - c.len as u64;
        let split = self.local_start.clamp(first, last + 1);
        if last + 1 > split {
            let local = &self.local_depth[(split - self.local_start) as usize..(last + 1 - self.local_start) as usize];
            if let Some(i) = last_deep(local, self.max_depth) {
                return (last - (split + i as u64)) as u32;
            }
        }
        let outer_end = (split as usize).min(self.outer_depth.len());
        if (first as usize) < outer_end {
            if let Some(i) = last_deep(&self.outer_depth[first as usize..outer_end], self.max_depth) {
                return (last - (first + i as u64)) as u32;
            }
        }
        c.len
    }

    /// Replaces the block's estimated depths with those of its final tokens.
    fn record_depths(&mut self, start: u64, block: &BlockTokens) {
        let mut pos = start;
        for t in &block.tokens {
            for _ in 0..t.lit_len {
                self.set_depth(pos, 0);
                pos += 1;
            }
            self.copy_depths(pos, t.back, t.rc, t.match_len);
            pos += t.match_len as u64;
        }
    }

    /// Gathers the raw candidates at `pos` into `self.cands`: hash tables (and their reverse complements on bare
    /// bases), long repeats, recent distances and the continuations of `prev`.
    fn collect(&mut self, pos: u64, limit: u32, prev: Option<PrevMatch>) {
        self.cands.clear();
        // A skipped position is indexed by the next lookup (which indexes everything before its position).
        if pos & (self.params.lookup_every - 1) == 0 {
            self.chain.find(pos, limit, &mut self.cands);
        }
        if self.params.reverse && pos & (self.params.rc_lookup_every - 1) == 0 {
            self.chain.find_rc(pos, limit, &mut self.cands);
        }
        self.collect_long(pos, limit);
        self.collect_reps(pos, limit, prev);
        self.collect_continuations(pos, limit, prev);
    }

    /// Collects the candidates at `pos` into `self.priced`, each priced against `prev` (the last match on the
    /// cheapest path to `pos`): increasing price and increasing length, so that every length is served by the
    /// cheapest source that reaches it.
    fn gather(&mut self, pos: u64, limit: u32, prices: &Prices, prev: Option<PrevMatch>) {
        self.priced.clear();
        self.collect(pos, limit, prev);
        if self.cands.is_empty() {
            return;
        }
        for k in 0..self.cands.len() {
            let c = self.cands[k];
            let len = self.cap_by_depth(pos, c);
            if len >= 2 {
                let continuation = continuation_index(c.back, c.rc, pos, prev);
                let continues = continuation.is_some();
                let price = prices.distance_coded(c.back, c.rc, continuation)
                    + self.closure_price(pos, Candidate { len, ..c }, continues);
                self.priced.push(Priced { back: c.back, len, rc: c.rc, price, continues });
            }
        }
        if self.priced.is_empty() {
            return;
        }
        // Keep the cheapest source for every length: increasing price with strictly increasing length.
        self.priced.sort_unstable_by_key(|c| (c.price, std::cmp::Reverse(c.len), c.back, c.rc));
        let mut best = 0;
        self.priced.retain(|c| {
            let keep = c.len > best;
            best = best.max(c.len);
            keep
        });
        if self.priced.len() > MAX_CANDIDATES {
            let drop = self.priced.len() - MAX_CANDIDATES;
            self.priced.drain(..drop);
        }
        // Recent distances are forward ones: a reverse complement's distance changes along the match.
        let longest = *self.priced.last().expect("non-empty");
        if longest.rc {
            return;
        }
        let longest = longest.back;
        self.remember_rep(longest);
        // The next position compares its bytes against every rep's source: fetch the new one's line now.
        if let Some(src) = (pos + 1).checked_sub(longest) {
            prefetch_byte(self.data, src as usize);
        }
    }

    /// What a source outside the current block adds to a cold read of it ([`ClosurePrice`]). The depth of the
    /// source is sampled at its first, middle and last byte (a full scan per candidate would double the parse).
    /// A continuation's source lies a few bytes after the previous match's source, nearly always in a slice that
    /// read decodes anyway, so it pays only for its depth.
    fn closure_price(&self, pos: u64, c: Candidate, continues: bool) -> u32 {
        // The source range [src, src + span): a reverse complement reads [e − len + 1, e].
        let (src, span) = if c.rc {
            (pos - c.back + 1 - c.len as u64, c.len as u64)
        } else {
            (pos - c.back, (c.len as u64).min(c.back))
        };
        if src >= self.block_start {
            return 0;
        }
        let d = self.depth_at(src).max(self.depth_at(src + span / 2)).max(self.depth_at(src + span - 1));
        let enter = if continues { 0 } else { self.params.closure.enter };
        enter + self.params.closure.per_level * d as u32
    }

    /// Adds the long repeats covering `pos`.
    fn collect_long(&mut self, pos: u64, limit: u32) {
        while let Some(m) = self.ldm.get(self.ldm_next) {
            if m.start > pos {
                break;
            }
            self.active.push(*m);
            self.ldm_next += 1;
        }
        self.active.retain(|m| m.end() > pos);
        for m in &self.active {
            if m.start <= pos {
                let len = (m.end() - pos).min(limit as u64) as u32;
                if len >= 4 {
                    self.cands.push(Candidate { back: m.back_at(pos), len, rc: m.rc });
                }
            }
        }
    }

    /// Tries recently used (forward) distances and their `±1` neighbours, except those that are continuations of
    /// `prev`: [`Self::collect_continuations`] measures those anyway (the same candidate twice changes nothing but
    /// time).
    fn collect_reps(&mut self, pos: u64, limit: u32, prev: Option<PrevMatch>) {
        let p = pos as usize;
        if p + 4 > self.data.len() || !self.rep_may_hit(pos) {
            return;
        }
        // The first four bytes as words, compared before anything else: nearly every try fails there.
        let word = |at: usize| u32::from_le_bytes(self.data[at..at + 4].try_into().expect("4 bytes"));
        let head = word(p);
        for back in rep_tries(&self.reps) {
            if back < 1 || back as u64 > pos {
                continue;
            }
            let src = p - back as usize;
            if word(src) != head || continuation_index(back as u64, false, pos, prev).is_some() {
                continue;
            }
            let len = common_len(self.data, p, src, limit as usize) as u32;
            if len >= 4 {
                self.cands.push(Candidate::forward(back as u64, len));
            }
        }
    }

    /// Puts `back` first among the recent distances.
    fn remember_rep(&mut self, back: u64) {
        if self.reps.first() == Some(&back) {
            return;
        }
        if let Some(at) = self.reps.iter().position(|&r| r == back) {
            self.reps.remove(at);
        }
        self.reps.insert(0, back);
        self.reps.truncate(self.params.rep_count);
        self.rep_mask_at = u64::MAX;
    }

    /// Whether some distance [`Self::collect_reps`] tries may have its first four bytes equal at `pos`: false
    /// only when none has. On bare bases nearly every position is a literal and every try fails on its first
    /// word; the lazy parse asks here instead, from one bit mask per [`REP_SPAN`] positions (per change of the
    /// distances), which compares the next positions of every distance 16 at a time.
    fn rep_may_hit(&mut self, pos: u64) -> bool {
        // The optimal parse changes its distances at nearly every position: there a mask would rarely be read
        // twice.
        if self.params.lazy_steps.is_none() {
            return true;
        }
        if pos < self.rep_mask_at || pos - self.rep_mask_at >= REP_SPAN {
            self.rep_mask_at = pos;
            self.rep_mask = self.rep_hit_mask(pos);
        }
        (self.rep_mask >> (pos - self.rep_mask_at)) & 1 != 0
    }

    /// Bit `i` set where some distance that [`Self::collect_reps`] tries has its first four bytes equal at
    /// `pos + i` (every bit where that cannot be computed: near the stream's end, or a distance longer than
    /// `pos`, which becomes valid further on).
    fn rep_hit_mask(&self, pos: u64) -> u64 {
        let p = pos as usize;
        if p + WORD_HITS_READ > self.data.len() {
            return u64::MAX;
        }
        let mut mask = 0;
        for back in rep_tries(&self.reps) {
            if back < 1 {
                continue;
            }
            if back as u64 > pos {
                return u64::MAX;
            }
            mask |= word_hits(self.data, p, p - back as usize);
        }
        mask
    }

    /// Adds the continuations of `prev` (the path's previous match, `None`: none) that match at least 2 bytes: a
    /// continuation is cheap, so even a short one can beat literals. A reverse complement's continuations are
    /// reverse complements along its anti-diagonal.
    fn collect_continuations(&mut self, pos: u64, limit: u32, prev: Option<PrevMatch>) {
        let Some(prev) = prev else { return };
        if limit < 2 {
            return;
        }
        let p = pos as usize;
        for delta in OF_CONTINUATION_DELTAS {
            let Some(back) = continued_back(prev, pos, delta) else { continue };
            if back > pos {
                continue;
            }
            let src = p - back as usize;
            let len = if prev.rc {
                // Reads src, src − 1, …: at least two bytes must exist and agree.
                if src == 0
                    || self.data[p] != COMPLEMENT[self.data[src] as usize]
                    || self.data[p + 1] != COMPLEMENT[self.data[src - 1] as usize]
                {
                    continue;
                }
                rc_common_len(self.data, p, src, limit as usize) as u32
            } else {
                if self.data[src] != self.data[p] || self.data[src + 1] != self.data[p + 1] {
                    continue;
                }
                common_len(self.data, p, src, limit as usize) as u32
            };
            self.cands.push(Candidate { back, len, rc: prev.rc });
        }
    }

    /// Follows the cheapest path back from the block end and emits its tokens.
    fn backtrack(&self, start: u64, n: usize) -> BlockTokens {
        let mut steps = Vec::new();
        let mut j = n;
        while j > 0 {
            let node = self.nodes[j];
            if node.match_len == 0 {
                steps.push((0u32, 0u64, false));
                j -= 1;
            } else {
                steps.push((node.match_len, node.back, node.rc));
                j -= node.match_len as usize;
            }
        }
        let mut out = BlockTokens::default();
        let mut pos = start as usize;
        let mut run = 0u32;
        for &(len, back, rc) in steps.iter().rev() {
            if len == 0 {
                out.literals.push(self.data[pos]);
                run += 1;
                pos += 1;
            } else {
                out.tokens.push(Token { lit_len: run, match_len: len, back, rc });
                run = 0;
                pos += len as usize;
            }
        }
        out.tokens.push(Token { lit_len: run, match_len: 0, back: 0, rc: false });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::{first_deep, last_deep, word_hits};

    #[test]
    fn word_hits_matches_a_byte_scan() {
        let mut x = 11u64;
        let data: Vec<u8> = (0..4000)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b"ACGT"[(x % 4) as usize] // Four letters: four-byte agreements are common.
            })
            .collect();
        for a in (100..3900).step_by(37) {
            for back in [1usize, 2, 3, 5, 16, 63, 64, 65, 79, 80, 81, 99] {
                let b = a - back;
                let slow =
                    (0..64).filter(|&i| data[a + i..a + i + 4] == data[b + i..b + i + 4]).fold(0u64, |m, i| m | 1 << i);
                assert_eq!(word_hits(&data, a, b), slow, "a {a} back {back}");
            }
        }
    }

    #[test]
    fn first_deep_matches_a_byte_scan() {
        let mut x = 7u64;
        for len in 0..70 {
            let depths: Vec<u8> = (0..len)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    // Mostly shallow, sometimes deep, sometimes above 127 (the word trick must still hold).
                    [0, 1, 3, 15, 16, 17, 127, 128, 200, 255][(x % 10) as usize] * ((x >> 8) % 4 == 0) as u8
                })
                .collect();
            for max in [1u8, 2, 16, 17, 127, 128, 129, 255] {
                assert_eq!(first_deep(&depths, max), depths.iter().position(|&d| d >= max), "{depths:?} {max}");
                assert_eq!(last_deep(&depths, max), depths.iter().rposition(|&d| d >= max), "{depths:?} {max}");
            }
        }
    }
}
