//! The short-range matcher: hash tables over a local window, for the short and medium matches the parser prices.
//!
//! Two tables are kept. The short chain hashes 5 bytes and is walked only a few steps (short matches pay only
//! when near). The long table hashes 12 bytes — on low-entropy data such as DNA (2 bits a base) that still
//! separates real repeats from chance hits — into rows of the most recent positions with 8-bit tags, so a lookup
//! costs one cache line and only tag hits touch the data. Far sources beyond the window come from
//! [`crate::pack::ldm`]. Positions are stored relative to the window start as `u32 + 1` (0 = empty).

use crate::pack::mem::zeroed;

/// A match candidate at some position: `len` bytes from `back` bytes before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub back: u64,
    pub len: u32,
}

/// Bytes hashed by the short chain.
const SHORT_HASH_LEN: usize = 5;
// The long chain hashes 12 bytes: `long_hash` reads 8 + 4.
/// Positions closer than this to the end of the stream are not indexed (every hash read stays in bounds).
const TAIL_GUARD: usize = 16;

/// How hard the matcher looks.
#[derive(Debug, Clone, Copy)]
pub struct ChainParams {
    pub short_depth: u32,
    pub long_depth: u32,
    pub hash_log: u32,
}

pub struct ChainMatcher<'a> {
    data: &'a [u8],
    base: u64,
    next_insert: u64,
    params: ChainParams,
    short_head: Vec<u32>,
    short_chain: Vec<u32>,
    /// The long table: rows of [`ROW`] recent positions (`rel + 1`, 0 = empty) with an 8-bit tag each, so a
    /// lookup costs one row and only tag hits touch the data — the walk is bound by memory latency otherwise.
    long_rows: Vec<u32>,
    long_tags: Vec<u8>,
    /// Slot the next insert of each row goes to (rows are rings).
    long_next: Vec<u8>,
    row_log: u32,
    span: usize,
}

/// How many positions ahead [`ChainMatcher::prefetch_row`] fetches.
const PREFETCH_AHEAD: usize = 8;
/// Positions per row of the long table.
const ROW: usize = 16;

#[inline]
fn read_u64(data: &[u8], p: usize) -> u64 {
    u64::from_le_bytes(data[p..p + 8].try_into().expect("8 bytes"))
}

#[inline]
fn read_u32(data: &[u8], p: usize) -> u32 {
    u32::from_le_bytes(data[p..p + 4].try_into().expect("4 bytes"))
}

/// Asks the CPU to bring in the cache line holding `data[p]` (nothing when `p` is out of range): a source that the
/// parser will compare at the next position is often a cache miss far back in the stream.
#[inline]
pub fn prefetch_byte(data: &[u8], p: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(b) = data.get(p) {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        // SAFETY: `b` is a live element of `data`; a prefetch has no architectural side effects.
        unsafe { _mm_prefetch(b as *const u8 as *const i8, _MM_HINT_T0) };
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, p);
}

/// Number of equal bytes at `a` and `b` (`b < a`), up to `limit` bytes.
#[inline]
pub fn common_len(data: &[u8], a: usize, b: usize, limit: usize) -> usize {
    let limit = limit.min(data.len() - a);
    let mut n = 0;
    while n + 8 <= limit {
        let x = read_u64(data, a + n) ^ read_u64(data, b + n);
        if x != 0 {
            return n + (x.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    while n < limit && data[a + n] == data[b + n] {
        n += 1;
    }
    n
}

impl<'a> ChainMatcher<'a> {
    /// A matcher that can index positions `[base, end)` of `data`.
    pub fn new(data: &'a [u8], base: u64, end: u64, params: ChainParams) -> Self {
        let span = (end - base) as usize;
        let row_log = params.hash_log.saturating_sub(4).max(4);
        let short = params.short_depth > 0;
        ChainMatcher {
            data,
            base,
            next_insert: base,
            params,
            short_head: if short { zeroed(1 << params.hash_log) } else { Vec::new() },
            short_chain: if short { zeroed(span) } else { Vec::new() },
            long_rows: zeroed(ROW << row_log),
            long_tags: zeroed(ROW << row_log),
            long_next: vec![0; 1 << row_log],
            row_log,
            span,
        }
    }

    #[inline]
    fn short_hash(&self, p: usize) -> usize {
        let v = read_u64(self.data, p) << (64 - 8 * SHORT_HASH_LEN);
        (v.wrapping_mul(0xcf1b_bcdc_b7a5_6463) >> (64 - self.params.hash_log)) as usize
    }

    /// Row and tag of the 12 bytes at `p`.
    #[inline]
    fn long_hash(&self, p: usize) -> (usize, u8) {
        let a = read_u64(self.data, p);
        let b = read_u32(self.data, p + 8) as u64;
        let v = a.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ b.wrapping_mul(0xc2b2_ae3d_27d4_eb4f).rotate_left(31);
        let v = v.wrapping_mul(0xff51_afd7_ed55_8ccd);
        ((v >> (64 - self.row_log)) as usize, (v >> 8) as u8)
    }

    /// Indexes every position before `pos` not indexed yet.
    pub fn insert_until(&mut self, pos: u64) {
        let stop = pos.min((self.data.len().saturating_sub(TAIL_GUARD)) as u64).min(self.base + self.span as u64);
        while self.next_insert < stop {
            let p = self.next_insert as usize;
            let rel = (self.next_insert - self.base) as usize;
            let tag = rel as u32 + 1;
            if self.params.short_depth > 0 {
                let hs = self.short_hash(p);
                self.short_chain[rel] = self.short_head[hs];
                self.short_head[hs] = tag;
            }
            let (row, check) = self.long_hash(p);
            let slot = self.long_next[row] as usize;
            self.long_rows[row * ROW + slot] = tag;
            self.long_tags[row * ROW + slot] = check;
            self.long_next[row] = ((slot + 1) % ROW) as u8;
            self.next_insert += 1;
        }
    }

    /// Appends to `out` the candidates at `pos` (which must not be indexed yet) whose length beats every closer
    /// candidate, each at most `limit` bytes long. Candidates come out with strictly increasing length.
    pub fn find(&mut self, pos: u64, limit: u32, out: &mut Vec<Candidate>) {
        self.insert_until(pos);
        let p = pos as usize;
        if p + TAIL_GUARD > self.data.len() || pos < self.base || limit < 4 {
            return;
        }
        self.prefetch_row(p + PREFETCH_AHEAD);
        let mut best = 3u32;
        self.walk_row(pos, limit, &mut best, out);
        if self.params.short_depth > 0 {
            let first = self.short_head[self.short_hash(p)];
            self.walk(first, pos, limit, &mut best, out);
        }
        // Both walks share `best` and push only longer candidates, so `out` is already sorted by length.
    }

    /// Asks the CPU to bring in the row that the lookup at `p` will read: lookups run at nearly every position
    /// and each row is a cache miss, so fetching a few positions ahead hides most of the latency.
    #[inline]
    fn prefetch_row(&self, p: usize) {
        if p + TAIL_GUARD > self.data.len() {
            return;
        }
        let (row, _) = self.long_hash(p);
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let rows = self.long_rows[row * ROW..].as_ptr() as *const i8;
            let tags = self.long_tags[row * ROW..].as_ptr() as *const i8;
            // SAFETY: both pointers point into live slices (row < 2^row_log); prefetching has no side effects.
            unsafe {
                _mm_prefetch(rows, _MM_HINT_T0);
                _mm_prefetch(tags, _MM_HINT_T0);
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = row;
    }

    /// Measures the match at `p` against the indexed position `tag` and records it when it beats `best`.
    /// Returns true once a match reaches `limit`: no later candidate can do better.
    #[inline]
    fn try_source(&self, p: usize, tag: u32, limit: u32, best: &mut u32, out: &mut Vec<Candidate>) -> bool {
        let src = self.base as usize + tag as usize - 1;
        let len = common_len(self.data, p, src, limit as usize) as u32;
        if len > *best {
            *best = len;
            out.push(Candidate { back: (p - src) as u64, len });
        }
        len >= limit
    }

    /// Tries the long table's row for `pos`, newest position first (so distances increase).
    fn walk_row(&self, pos: u64, limit: u32, best: &mut u32, out: &mut Vec<Candidate>) {
        let p = pos as usize;
        let (row, check) = self.long_hash(p);
        let newest = self.long_next[row] as usize + ROW - 1;
        for i in 0..(self.params.long_depth as usize).min(ROW) {
            let slot = row * ROW + (newest - i) % ROW;
            let tag = self.long_rows[slot];
            if tag == 0 {
                break;
            }
            if self.long_tags[slot] != check {
                continue;
            }
            if self.try_source(p, tag, limit, best, out) {
                break;
            }
        }
    }

    fn walk(&self, mut tag: u32, pos: u64, limit: u32, best: &mut u32, out: &mut Vec<Candidate>) {
        let (depth, chain) = (self.params.short_depth, &self.short_chain);
        let p = pos as usize;
        for _ in 0..depth {
            if tag == 0 {
                break;
            }
            if self.try_source(p, tag, limit, best, out) {
                break;
            }
            tag = chain[tag as usize - 1];
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PARAMS: ChainParams = ChainParams { short_depth: 4, long_depth: 16, hash_log: 12 };

    #[test]
    fn finds_repeats_with_increasing_lengths() {
        let mut data = b"the quick brown fox jumps; the quick brown cat; the quick brown fox jumps over".to_vec();
        data.extend_from_slice(&[0u8; 32]);
        let mut m = ChainMatcher::new(&data, 0, data.len() as u64, PARAMS);
        let pos = data.windows(9).rposition(|w| w == b"the quick").unwrap() as u64;
        let mut out = Vec::new();
        m.find(pos, 1000, &mut out);
        let best = out.last().unwrap();
        assert_eq!(best.back, pos);
        assert_eq!(best.len as usize, "the quick brown fox jumps".len());
        assert!(out.windows(2).all(|w| w[0].len < w[1].len));
        for c in &out {
            let s = (pos - c.back) as usize;
            assert_eq!(data[s..s + c.len as usize], data[pos as usize..pos as usize + c.len as usize]);
        }
    }

    #[test]
    fn common_len_limits() {
        let data = [1u8, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2];
        assert_eq!(common_len(&data, 1, 0, 100), 10);
        assert_eq!(common_len(&data, 1, 0, 3), 3);
    }
}
