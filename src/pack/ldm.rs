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
//!
//! On bare bases the scan also finds reverse-complement repeats (FORMAT.md §1): a second rolling hash gives, at
//! every position, the hash of the reverse complement of the window there — the hash its source window was
//! inserted under, since the polynomial hash of a reversed window is the same sum with the powers of the base
//! reversed, and the base is odd so it can be divided out when the window rolls. Those sample points are only
//! looked up, never inserted, and the sampling by content still picks the same windows of both copies.

use crate::codec::block::COMPLEMENT;
use crate::pack::matcher::{common_len, common_len_back, rc_common_len};

/// A verified repeat: `len` bytes at `start` equal the bytes `back` earlier (forward), or, when `rc`, the reverse
/// complement of the `len` bytes ending at `start − back` (read backwards). A reverse-complement repeat continued
/// at `start + k` has distance `back + 2k` ([`LongMatch::back_at`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LongMatch {
    pub start: u64,
    pub back: u64,
    pub len: u64,
    pub rc: bool,
}

impl LongMatch {
    pub fn end(&self) -> u64 {
        self.start + self.len
    }

    /// The distance of the repeat's part that starts at `pos` (`start ≤ pos < end`).
    pub fn back_at(&self, pos: u64) -> u64 {
        if self.rc {
            self.back + 2 * (pos - self.start)
        } else {
            self.back
        }
    }

    /// What stays the same along the repeat: the diagonal `dst − src` of a forward repeat, the anti-diagonal
    /// `dst + src` of a reverse complement (as `2·start − back`).
    fn diagonal(&self) -> (bool, u64) {
        (self.rc, if self.rc { 2 * self.start - self.back } else { self.back })
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
    /// `2^bucket_log` entries per bucket (at most 5: a lookup's hits are a 32-bit mask).
    pub bucket_log: u32,
    /// On bare bases (a scan with `bases`): one forward window in `2^bases_sample_log` is a sample point, and one
    /// reverse-complement window in `2^rc_sample_log` (each at least `sample_log`, so that the sample points of
    /// bases are among those of other bytes: a repeat is found wherever its copies lie).
    pub bases_sample_log: u32,
    pub rc_sample_log: u32,
    /// On bare bases: repeats shorter than this are not reported (they still count as recently recorded).
    pub bases_min_len: u64,
}

impl LdmParams {
    /// Parameters that sample bare bases, forward and reverse complement, as densely as any other bytes and
    /// report every repeat.
    pub fn uniform(window: usize, sample_log: u32, table_log: u32, bucket_log: u32) -> LdmParams {
        let (bases_sample_log, rc_sample_log, bases_min_len) = (sample_log, sample_log, 0);
        LdmParams { window, sample_log, table_log, bucket_log, bases_sample_log, rc_sample_log, bases_min_len }
    }
}

/// Table entries hold `pos + 1` in the low 40 bits (0 = empty) and 24 check bits above ([`check_of`]).
const POS_BITS: u32 = 40;
const POS_MASK: u64 = (1 << POS_BITS) - 1;
/// Backward extension stops after this many bytes (the parser only needs the part inside the current block): a
/// repeat found at a window starting at `p` starts at `p − MAX_BACK_EXTEND` or later.
pub const MAX_BACK_EXTEND: u64 = 1 << 16;
/// Forward verification stops here; a longer repeat is found again by the next sample point.
const MAX_FORWARD: usize = 1 << 20;
/// How many sample points ahead of the one being visited have their buckets prefetched. Collecting sample
/// points [`STEP`] positions at a time and then visiting down to this many keeps about that many fetches in flight
/// at an even pace. Measured on atha_chr1's bases alone (the scan over 30 M positions, its 64 MiB table, min of 2):
/// STEP / AHEAD 8/16 0.63 s, 16/16 0.63, 4/12 0.66, 64/16 0.92, 8/64 0.92; the former batches of 32 points,
/// collected and then all visited, 0.91 (the fetches went out in bursts larger than the core can keep in flight).
const AHEAD: usize = 16;
/// Positions whose sample points are collected before the visits catch up (see [`AHEAD`]).
const STEP: usize = 8;
/// Slots of the ring of pending sample points: a power of two of at least [`AHEAD`] + 2 [`STEP`] (two points a
/// position).
const RING: usize = 64;
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

/// The check bits of a window's mixed hash, in place above the position: its low 24 bits, which neither the
/// bucket ([`Ldm::bucket_of`], bits 40 and up) nor the sampling (the top bits) use. (They were the bucket's own
/// bits once, so nearly every entry of a full bucket passed: on atha_chr1 6.5 M verifications of about two bytes
/// each, every one a cache miss far back in the stream, a tenth of the pack's CPU time.) A window equal to the
/// sample point's (forward, or its reverse complement) has the same hash and passes whatever the bits, so only
/// candidates that verification would reject are skipped: the matches found are the same.
#[inline]
fn check_of(mixed: u64) -> u64 {
    mixed << POS_BITS
}

/// The inverse of an odd `x` modulo 2^64 (Newton's iteration doubles the correct low bits each step).
const fn inverse_mod_2_64(x: u64) -> u64 {
    let mut y = x;
    let mut i = 0;
    while i < 6 {
        y = y.wrapping_mul(2u64.wrapping_sub(x.wrapping_mul(y)));
        i += 1;
    }
    y
}

/// `HASH_BASE^-1`: rolls the reverse-complement hash, whose newest byte has the lowest power.
const HASH_BASE_INV: u64 = inverse_mod_2_64(HASH_BASE);

pub struct Ldm {
    params: LdmParams,
    table: Vec<u64>,
    bytes: [u64; 256],
    /// `bytes` of each byte's complement.
    rc_bytes: [u64; 256],
    /// `HASH_BASE^(window-1)`: removes the outgoing byte.
    out_factor: u64,
    /// The last [`RECENT`] matches recorded and where the next goes: kept from one [`Ldm::scan`] call to the
    /// next, so that calls continuing each other find exactly what one call would.
    recent: [LongMatch; RECENT],
    recent_next: usize,
}

impl Ldm {
    pub fn new(params: LdmParams) -> Ldm {
        Self::zeroed_by(params, 1)
    }

    /// [`Ldm::new`], its table zeroed by up to `threads` threads ([`crate::pack::mem::zeroed_parallel`]).
    pub fn zeroed_by(params: LdmParams, threads: usize) -> Ldm {
        // The packer's own parameters (ldm_params), never input: a larger bucket is a packer bug.
        assert!(params.bucket_log <= 5, "long-distance bucket_log {} exceeds 5", params.bucket_log);
        let out_factor = (1..params.window).fold(1u64, |f, _| f.wrapping_mul(HASH_BASE));
        let bytes = byte_table();
        Ldm {
            params,
            table: crate::pack::mem::zeroed_parallel(1usize << (params.table_log + params.bucket_log), threads),
            bytes,
            rc_bytes: std::array::from_fn(|b| bytes[COMPLEMENT[b] as usize]),
            out_factor,
            recent: [LongMatch { start: 0, back: 0, len: 0, rc: false }; RECENT],
            recent_next: 0,
        }
    }

    /// Bytes of table memory for `params`.
    pub fn table_bytes(params: &LdmParams) -> u64 {
        8u64 << (params.table_log + params.bucket_log)
    }

    /// Scans windows starting in `[start, end)` of `data` (in order; successive calls must continue where the
    /// last stopped) and appends the repeats found, sorted by `(start, back, rc)`. With `bases` (the range is
    /// bare bases) it finds reverse-complement repeats too, sampled as [`LdmParams::rc_sample_log`] says, and
    /// reports repeats of at least [`LdmParams::bases_min_len`] only. Calls that continue each other find what
    /// one call over their union finds, given the same `bases` (a stable sort of their outputs by the same key
    /// gives its output).
    pub fn scan(&mut self, data: &[u8], start: u64, end: u64, bases: bool, out: &mut Vec<LongMatch>) {
        let rc = bases;
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
        // The forward hash of the window's reverse complement: the complement of byte m of the window weighs
        // HASH_BASE^m.
        let mut h_rc = 0u64;
        if rc {
            for &b in data[start as usize..start as usize + w].iter().rev() {
                h_rc = h_rc.wrapping_mul(HASH_BASE).wrapping_add(self.rc_bytes[b as usize]);
            }
        }
        let mut recent = self.recent;
        let mut recent_next = self.recent_next;
        // `mixed >> (64 − sample_log) == 0` as one comparison (every window when sample_log is 0): two tests a
        // position (and the branch between them) were 8 % of the scan's instructions.
        let sample_max = |log: u32| u64::MAX.checked_shr(log.max(self.params.sample_log)).unwrap_or(0);
        let (fw_max, rc_max) = match rc {
            true => (sample_max(self.params.bases_sample_log), sample_max(self.params.rc_sample_log)),
            false => (sample_max(self.params.sample_log), 0),
        };
        let min_len = if rc { self.params.bases_min_len } else { 0 };
        // Sample points are collected [`STEP`] positions at a time without a branch on the hash (which one in
        // four windows passes: every such branch was a likely misprediction), their buckets prefetched as they
        // are found, and visited in order once [`AHEAD`] later points are in flight (every visit is otherwise a
        // cache miss). A point is (position, mixed hash, reverse); `ring[queued % RING]` is the next free slot,
        // `ring[visited % RING]` the next point to visit.
        let mut ring = [(0u64, 0u64, false); RING];
        let (mut queued, mut visited) = (0usize, 0usize);
        let mut visit_next = |ldm: &mut Ldm, (at, mixed, reverse): (u64, u64, bool)| {
            let found = if reverse {
                [ldm.visit_rc(data, at, mixed, &recent), None]
            } else {
                ldm.visit(data, at, mixed, &recent)
            };
            for m in found.into_iter().flatten() {
                recent[recent_next % RECENT] = m;
                recent_next += 1;
                if m.len >= min_len {
                    out.push(m);
                }
            }
        };
        let mut p = start;
        loop {
            let stop = (p + STEP as u64).min(end);
            while p < stop {
                let mixed = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
                let take = mixed <= fw_max;
                ring[queued % RING] = (p, mixed, false);
                self.prefetch_bucket_if(mixed, take);
                queued += take as usize;
                if rc {
                    let mixed_rc = h_rc.wrapping_mul(0xff51_afd7_ed55_8ccd);
                    // A window that is its own reverse complement would find itself forward already.
                    let take = mixed_rc != mixed && mixed_rc <= rc_max;
                    ring[queued % RING] = (p, mixed_rc, true);
                    self.prefetch_bucket_if(mixed_rc, take);
                    queued += take as usize;
                }
                p += 1;
                if p < end {
                    let (old, new) = (data[p as usize - 1] as usize, data[p as usize + w - 1] as usize);
                    h = h
                        .wrapping_sub(self.bytes[old].wrapping_mul(self.out_factor))
                        .wrapping_mul(HASH_BASE)
                        .wrapping_add(self.bytes[new]);
                    if rc {
                        h_rc = h_rc
                            .wrapping_sub(self.rc_bytes[old])
                            .wrapping_mul(HASH_BASE_INV)
                            .wrapping_add(self.rc_bytes[new].wrapping_mul(self.out_factor));
                    }
                }
            }
            let keep = if p < end { AHEAD } else { 0 };
            while queued - visited > keep {
                visit_next(self, ring[visited % RING]);
                visited += 1;
            }
            if p >= end {
                break;
            }
        }
        self.recent = recent;
        self.recent_next = recent_next;
        out[first_len..].sort_by_key(|m| (m.start, m.back, m.rc));
    }

    /// Looks reverse-complement sample point `p` up (its `mixed` hash is that of the window's reverse
    /// complement) without inserting it. Returns the longest verified reverse-complement repeat not already
    /// covered by a recently recorded one.
    fn visit_rc(&self, data: &[u8], p: u64, mixed: u64, recent: &[LongMatch; RECENT]) -> Option<LongMatch> {
        let bucket = self.bucket_of(mixed);
        let check = check_of(mixed);
        let w = self.params.window as u64;
        let mut best: Option<LongMatch> = None;
        let (_, mut hits) = self.probe(bucket, check);
        while hits != 0 {
            let slot = bucket + hits.trailing_zeros() as usize;
            hits &= hits - 1;
            let e = self.table[slot];
            // The source window is [src, src + w): the match reads it backwards from its last byte.
            let last = (e & POS_MASK) - 1 + w - 1;
            if last >= p {
                continue;
            }
            let diagonal = (true, p + last);
            if recent.iter().any(|r| r.diagonal() == diagonal && r.start <= p && r.end() >= p + w) {
                continue;
            }
            if let Some(m) = self.verify_rc(data, p, last) {
                if best.is_none_or(|b| m.len > b.len) {
                    best = Some(m);
                }
            }
        }
        best
    }

    /// The reverse-complement repeat at `p` whose source ends at `last < p`, extended both ways (backwards in
    /// `p` means forwards in the source, up to where the two would meet), if it is at least one window long.
    fn verify_rc(&self, data: &[u8], p: u64, last: u64) -> Option<LongMatch> {
        let fwd = rc_common_len(data, p as usize, last as usize, MAX_FORWARD) as u64;
        if fwd < self.params.window as u64 {
            return None;
        }
        // Byte `bwd` before `p` against byte `bwd` after `last` while the two stay apart (`p − bwd − 1 >
        // last + bwd + 1`): complements agree both ways round, so this is a reverse-complement match at
        // `last + 1` whose source ends at `p − 1`.
        let apart = (p - last - 1) / 2;
        let bwd = rc_common_len(data, last as usize + 1, p as usize - 1, MAX_BACK_EXTEND.min(apart) as usize) as u64;
        Some(LongMatch { start: p - bwd, back: p - last - 2 * bwd, len: fwd + bwd, rc: true })
    }

    /// The bucket at slot `bucket`: the index of its oldest entry (the first with the lowest position; an empty
    /// one counts as oldest), and a bit per entry that is not empty and has the check bits `check`, in slot order.
    /// Buckets of four, the size every level uses, without a branch (the loop's branches on hash bits were
    /// mispredicted about once a visit).
    #[inline]
    fn probe(&self, bucket: usize, check: u64) -> (usize, u32) {
        let hit = |e: u64| (e != 0 && e & !POS_MASK == check) as u32;
        let four = self.table.get(bucket..bucket + 4).and_then(|s| <&[u64; 4]>::try_from(s).ok());
        if let (2, Some(&[a, b, c, d])) = (self.params.bucket_log, four) {
            let pos = [a & POS_MASK, b & POS_MASK, c & POS_MASK, d & POS_MASK];
            let low = if pos[1] < pos[0] { 1 } else { 0 };
            let high = if pos[3] < pos[2] { 3 } else { 2 };
            let oldest = if pos[high] < pos[low] { high } else { low };
            return (oldest, hit(a) | hit(b) << 1 | hit(c) << 2 | hit(d) << 3);
        }
        let len = 1usize << self.params.bucket_log;
        let mut oldest = 0;
        let mut hits = 0;
        for k in 0..len {
            let e = self.table[bucket + k];
            if e & POS_MASK < self.table[bucket + oldest] & POS_MASK {
                oldest = k;
            }
            hits |= hit(e) << k;
        }
        (oldest, hits)
    }

    /// First table slot of the bucket for a mixed window hash: bits 40 and up (sample points have the top
    /// `sample_log` bits clear).
    #[inline]
    fn bucket_of(&self, mixed: u64) -> usize {
        ((mixed.rotate_left(24) & ((1 << self.params.table_log) - 1)) as usize) << self.params.bucket_log
    }

    /// Prefetches the bucket of `mixed` when `take`, else the table's first line (already cached): a choice of
    /// address, not a branch.
    #[inline]
    fn prefetch_bucket_if(&self, mixed: u64, take: bool) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let slot = self.bucket_of(mixed) & (take as usize).wrapping_neg();
            let ptr = self.table[slot..].as_ptr() as *const i8;
            // SAFETY: `ptr` points into the live table; a prefetch has no architectural side effects.
            unsafe { _mm_prefetch(ptr, _MM_HINT_T0) };
        }
        #[cfg(not(target_arch = "x86_64"))]
        let _ = (mixed, take);
    }

    /// Looks sample point `p` up, then inserts it. Returns the two longest verified repeats with different
    /// sources not already covered by a recently recorded one: the second is often an older, shallower copy
    /// the parser can fall back to when the newest one is too deep (FORMAT.md §1 depth bound).
    fn visit(&mut self, data: &[u8], p: u64, mixed: u64, recent: &[LongMatch; RECENT]) -> [Option<LongMatch>; 2] {
        let bucket = self.bucket_of(mixed);
        let check = check_of(mixed);
        let mut best: [Option<LongMatch>; 2] = [None, None];
        let (oldest, mut hits) = self.probe(bucket, check);
        while hits != 0 {
            let slot = bucket + hits.trailing_zeros() as usize;
            hits &= hits - 1;
            let e = self.table[slot];
            let src = (e & POS_MASK) - 1;
            let back = p - src;
            if recent
                .iter()
                .any(|r| r.diagonal() == (false, back) && r.start <= p && r.end() >= p + self.params.window as u64)
            {
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
        self.table[bucket + oldest] = check | (p + 1);
        best
    }

    /// The repeat between `p` and `src`, extended both ways, if it is at least one window long.
    fn verify(&self, data: &[u8], p: u64, src: u64) -> Option<LongMatch> {
        let fwd = common_len(data, p as usize, src as usize, MAX_FORWARD) as u64;
        if fwd < self.params.window as u64 {
            return None;
        }
        let bwd = common_len_back(data, p as usize, src as usize, MAX_BACK_EXTEND as usize) as u64;
        Some(LongMatch { start: p - bwd, back: p - src, len: fwd + bwd, rc: false })
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
        let mut ldm = Ldm::new(LdmParams::uniform(24, 3, 16, 2));
        let mut out = Vec::new();
        // Two calls continuing each other behave like one.
        ldm.scan(&data, 0, 100_000, false, &mut out);
        ldm.scan(&data, 100_000, data.len() as u64, false, &mut out);
        let second = 5000 + 300 + 200_000;
        let hit = out.iter().find(|m| m.back == 300 + 200_000).expect("repeat found");
        assert!(hit.start <= second as u64 + 10 && hit.end() >= (second + 290) as u64, "{hit:?}");
        for m in &out {
            assert!(!m.rc);
            let (s, b, l) = (m.start as usize, m.back as usize, m.len as usize);
            assert_eq!(data[s..s + l], data[s - b..s - b + l]);
        }
    }

    #[test]
    fn hash_base_inverse() {
        assert_eq!(HASH_BASE.wrapping_mul(HASH_BASE_INV), 1);
    }

    #[test]
    fn finds_a_far_inverted_repeat() {
        let arm = noise(400, 5);
        let mut data = noise(3000, 6);
        let arm_at = data.len();
        data.extend_from_slice(&arm);
        data.extend(noise(150_000, 7));
        let copy_at = data.len();
        data.extend(arm.iter().rev().map(|&b| COMPLEMENT[b as usize]));
        data.extend(noise(1000, 8));
        for rc in [false, true] {
            let mut ldm = Ldm::new(LdmParams::uniform(16, 2, 16, 2));
            let mut out = Vec::new();
            ldm.scan(&data, 0, 70_000, rc, &mut out);
            ldm.scan(&data, 70_000, data.len() as u64, rc, &mut out);
            let hits: Vec<&LongMatch> = out.iter().filter(|m| m.rc).collect();
            assert_eq!(hits.is_empty(), !rc, "{hits:?}");
            for m in &hits {
                let last = m.start - m.back;
                assert!(last + 1 >= m.len, "{m:?} reads before the stream start");
                for k in 0..m.len {
                    assert_eq!(data[(m.start + k) as usize], COMPLEMENT[data[(last - k) as usize] as usize]);
                }
                assert_eq!(m.back_at(m.start + 10), m.back + 20);
            }
            if rc {
                // The copy's first byte reads the arm's last byte.
                let m = hits.iter().find(|m| m.start <= copy_at as u64 + 20 && m.end() >= copy_at as u64 + 380);
                let m = m.expect("the inverted repeat is found");
                assert_eq!(2 * m.start - m.back, (copy_at + arm_at + arm.len() - 1) as u64);
            }
        }
    }
}
