//! The long-distance matcher: finds repeats anywhere earlier in the stream with memory bounded by a table size.
//!
//! A polynomial rolling hash runs over every `window`-byte window. Windows whose hash falls in a
//! `1 / 2^sample_log` slice are *sample points*, chosen by content, so two copies of a repeat sample the same
//! windows wherever they lie. Each sample point is looked up in a bucketed table (`2^bucket_log` entries of
//! position + check bits, the oldest entry replaced), candidates are verified against the data and extended both
//! ways, and the best one is recorded; then the point is inserted. A repeat of `window + 2^sample_log` bytes or
//! more is found with high probability at any distance.
//!
//! Lookups and inserts run in stream order, so the result depends only on the data and the parameters — never on
//! how the caller splits work across threads.

use crate::pack::matcher::common_len;

/// A verified repeat: `len` bytes at `start` equal the bytes `back` earlier.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongMatch {
    pub start: u64,
    pub back: u64,
    pub len: u64,
}

impl LongMatch {
    pub fn end(&self) -> u64 {
        self.start + self.len
    }
}

#[derive(Debug, Clone, Copy)]
pub struct LdmParams {
    /// Bytes per hashed window (the shortest repeat a sample point can witness).
    pub window: usize,
    /// One window in `2^sample_log` is a sample point.
    pub sample_log: u32,
    /// `2^table_log` buckets.
    pub table_log: u32,
    /// `2^bucket_log` entries per bucket.
    pub bucket_log: u32,
}

/// Table entries hold `pos + 1` in the low 40 bits (0 = empty) and 24 check bits above.
const POS_BITS: u32 = 40;
const POS_MASK: u64 = (1 << POS_BITS) - 1;
/// Backward extension stops after this many bytes (the parser only needs the part inside the current block).
const MAX_BACK_EXTEND: u64 = 1 << 16;
/// Forward verification stops here; a longer repeat is found again by the next sample point.
const MAX_FORWARD: usize = 1 << 20;
/// Sample points collected (and their buckets prefetched) before they are visited.
const BATCH: usize = 32;
/// Recently recorded matches remembered to skip re-verifying the same alignment.
const RECENT: usize = 8;

/// Per-byte multipliers of the rolling hash: a fixed pseudo-random table (splitmix64 of the byte value).
fn byte_table() -> [u64; 256] {
    let mut t = [0u64; 256];
    for (i, v) in t.iter_mut().enumerate() {
        let mut z = (i as u64 + 1).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        *v = z ^ (z >> 31);
    }
    t
}

const HASH_BASE: u64 = 0x100_0000_01b3;

pub struct Ldm {
    params: LdmParams,
    table: Vec<u64>,
    bytes: [u64; 256],
    /// `HASH_BASE^(window-1)`: removes the outgoing byte.
    out_factor: u64,
}

impl Ldm {
    pub fn new(params: LdmParams) -> Ldm {
        let out_factor = (1..params.window).fold(1u64, |f, _| f.wrapping_mul(HASH_BASE));
        Ldm {
            params,
            table: crate::pack::mem::zeroed(1usize << (params.table_log + params.bucket_log)),
            bytes: byte_table(),
            out_factor,
        }
    }

    /// Bytes of table memory for `params`.
    pub fn table_bytes(params: &LdmParams) -> u64 {
        8u64 << (params.table_log + params.bucket_log)
    }

    /// Scans windows starting in `[start, end)` of `data` (in order; successive calls must continue where the
    /// last stopped) and appends the repeats found, sorted by start.
    pub fn scan(&mut self, data: &[u8], start: u64, end: u64, out: &mut Vec<LongMatch>) {
        let w = self.params.window;
        let first_len = out.len();
        if data.len() < w {
            return;
        }
        let last_window = (data.len() - w) as u64;
        let end = end.min(last_window + 1);
        if start >= end {
            return;
        }
        let mut h = 0u64;
        for &b in &data[start as usize..start as usize + w] {
            h = h.wrapping_mul(HASH_BASE).wrapping_add(self.bytes[b as usize]);
        }
        let mut recent = [LongMatch { start: 0, back: 0, len: 0 }; RECENT];
        let mut recent_next = 0;
        let sample_shift = 64 - self.params.sample_log;
        // Sample points are visited in batches, in order; collecting a batch first lets the buckets be
        // prefetched, since every visit is otherwise a cache miss.
        let mut batch: Vec<(u64, u64)> = Vec::with_capacity(BATCH);
        let mut p = start;
        loop {
            let mixed = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
            if self.params.sample_log == 0 || mixed >> sample_shift == 0 {
                self.prefetch_bucket(mixed);
                batch.push((p, mixed));
            }
            p += 1;
            if batch.len() == BATCH || p >= end {
                for &(at, mixed) in &batch {
                    for m in self.visit(data, at, mixed, &recent).into_iter().flatten() {
                        recent[recent_next % RECENT] = m;
                        recent_next += 1;
                        out.push(m);
                    }
                }
                batch.clear();
            }
            if p >= end {
                break;
            }
            let old = self.bytes[data[p as usize - 1] as usize];
            let new = self.bytes[data[p as usize + w - 1] as usize];
            h = h.wrapping_sub(old.wrapping_mul(self.out_factor)).wrapping_mul(HASH_BASE).wrapping_add(new);
        }
        out[first_len..].sort_by_key(|m| (m.start, m.back));
    }

    /// First table slot of the bucket for a mixed window hash.
    #[inline]
    fn bucket_of(&self, mixed: u64) -> usize {
        ((mixed.rotate_left(24) & ((1 << self.params.table_log) - 1)) as usize) << self.params.bucket_log
    }

    #[inline]
    fn prefetch_bucket(&self, mixed: u64) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let ptr = self.table[self.bucket_of(mixed)..].as_ptr() as *const i8;
            // SAFETY: `ptr` points into the live table; a prefetch has no architectural side effects.
            unsafe { _mm_prefetch(ptr, _MM_HINT_T0) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = mixed;
    }

    /// Looks sample point `p` up, then inserts it. Returns the two longest verified repeats with different
    /// sources not already covered by a recently recorded one: the second is often an older, shallower copy
    /// the parser can fall back to when the newest one is too deep (FORMAT.md §1 depth bound).
    fn visit(&mut self, data: &[u8], p: u64, mixed: u64, recent: &[LongMatch; RECENT]) -> [Option<LongMatch>; 2] {
        let bucket_len = 1usize << self.params.bucket_log;
        let bucket = self.bucket_of(mixed);
        let check = (mixed >> POS_BITS) << POS_BITS;
        let mut best: [Option<LongMatch>; 2] = [None, None];
        let mut oldest = bucket;
        for slot in bucket..bucket + bucket_len {
            let e = self.table[slot];
            if e & POS_MASK < self.table[oldest] & POS_MASK {
                oldest = slot;
            }
            if e == 0 || e & !POS_MASK != check {
                continue;
            }
            let src = (e & POS_MASK) - 1;
            let back = p - src;
            if recent.iter().any(|r| r.back == back && r.start <= p && r.end() >= p + self.params.window as u64) {
                continue;
            }
            if let Some(m) = self.verify(data, p, src) {
                if best[0].is_none_or(|b| m.len > b.len) {
                    best = [Some(m), best[0]];
                } else if best[1].is_none_or(|b| m.len > b.len) {
                    best[1] = Some(m);
                }
            }
        }
        self.table[oldest] = check | (p + 1);
        best
    }

    /// The repeat between `p` and `src`, extended both ways, if it is at least one window long.
    fn verify(&self, data: &[u8], p: u64, src: u64) -> Option<LongMatch> {
        let fwd = common_len(data, p as usize, src as usize, MAX_FORWARD) as u64;
        if fwd < self.params.window as u64 {
            return None;
        }
        let mut bwd = 0u64;
        while bwd < MAX_BACK_EXTEND && bwd < src && data[(p - bwd - 1) as usize] == data[(src - bwd - 1) as usize] {
            bwd += 1;
        }
        Some(LongMatch { start: p - bwd, back: p - src, len: fwd + bwd })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut x = seed;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                b"ACGT"[(x & 3) as usize]
            })
            .collect()
    }

    #[test]
    fn finds_a_far_repeat_and_verifies_it() {
        let repeat = noise(300, 1);
        let mut data = noise(5000, 2);
        data.extend_from_slice(&repeat);
        data.extend(noise(200_000, 3));
        data.extend_from_slice(&repeat);
        data.extend(noise(1000, 4));
        let mut ldm = Ldm::new(LdmParams { window: 24, sample_log: 3, table_log: 16, bucket_log: 2 });
        let mut out = Vec::new();
        // Two calls continuing each other behave like one.
        ldm.scan(&data, 0, 100_000, &mut out);
        ldm.scan(&data, 100_000, data.len() as u64, &mut out);
        let second = 5000 + 300 + 200_000;
        let hit = out.iter().find(|m| m.back == 300 + 200_000).expect("repeat found");
        assert!(hit.start <= second as u64 + 10 && hit.end() >= (second + 290) as u64, "{hit:?}");
        for m in &out {
            let (s, b, l) = (m.start as usize, m.back as usize, m.len as usize);
            assert_eq!(data[s..s + l], data[s - b..s - b + l]);
        }
    }
}
