//! The short-range matcher: hash tables over a local window, for the short and medium matches the parser prices.
//!
//! Two tables are kept. The short chain hashes 5 bytes and is walked only a few steps (short matches pay only
//! when near). The long table hashes 12 bytes — on low-entropy data such as DNA (2 bits a base) that still
//! separates real repeats from chance hits — into rows of the most recent positions with 8-bit tags, so a lookup
//! costs one cache line and only tag hits touch the data. A row holds only as many positions as a lookup reads
//! (`long_depth`, at most [`ROW`]): on bare bases that is 2, and the whole table then stays in the core's cache.
//! Far sources beyond the window come from [`crate::pack::ldm`]. Short-chain positions are stored relative to the
//! window start as `u32 + 1` (0 = empty); a long-table entry packs that (24 bits) with its tag.
//!
//! Reverse-complement matches (FORMAT.md §1, version 5) need no table of their own: the reverse complement of
//! the 12 bytes at a position is hashed like any 12 bytes and looked up in the same long table, whose hits are
//! sources read backwards ([`ChainMatcher::find_rc`]). The parser asks for them only on bare bases.

use crate::codec::block::COMPLEMENT;
use crate::pack::mem::zeroed;

/// A match candidate at some position `pos`: `len` bytes from `back` bytes before it (forward), or, when `rc`,
/// the reverse complement of the `len` bytes ending at `e = pos − back`, read backwards (`back + len − 1 ≤ pos`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Candidate {
    pub back: u64,
    pub len: u32,
    pub rc: bool,
}

impl Candidate {
    pub fn forward(back: u64, len: u32) -> Candidate {
        Candidate { back, len, rc: false }
    }
}

/// Bytes hashed by the short chain.
const SHORT_HASH_LEN: usize = 5;
/// Bytes hashed by the long table: `long_hash` reads 8 + 4.
const LONG_HASH_LEN: usize = 12;
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
    /// The long table: rows of `row_len` recent positions, newest first, each entry `tag << 24 | (rel + 1)`
    /// (0 = empty), so a lookup costs one row and only tag hits touch the data — the walk is bound by memory
    /// latency otherwise. A row keeps only what a lookup reads (`long_depth` entries): the newest `long_depth`
    /// positions of a row are the same whatever its capacity, and a small table stays in cache.
    long_rows: Vec<u32>,
    row_len: usize,
    row_log: u32,
    span: usize,
    /// Reverse-complement hashes computed ahead (to prefetch their rows), by position modulo [`RC_AHEAD`]:
    /// `(pos + 1, row, tag)`, 0 = none.
    rc_ahead: [(u64, usize, u8); RC_AHEAD],
    /// Whether the CPU has SSSE3 ([`rc12_ssse3`]).
    #[cfg(target_arch = "x86_64")]
    ssse3: bool,
}

/// Slots of [`ChainMatcher::rc_ahead`] (a power of two above [`PREFETCH_AHEAD`]).
const RC_AHEAD: usize = 16;

/// How many positions ahead [`ChainMatcher::prefetch_row`] fetches.
const PREFETCH_AHEAD: usize = 8;
/// Most positions per row of the long table (a lookup reads at most this many).
const ROW: usize = 16;
/// Bits of a long-table entry that hold the position (`rel + 1`); the tag takes the 8 above.
const ENTRY_POS_BITS: u32 = 24;
const ENTRY_POS_MASK: u32 = (1 << ENTRY_POS_BITS) - 1;

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

/// Number of equal bytes just before `a` and just before `b` (`data[a − 1 − k] == data[b − 1 − k]` for every
/// `k` below it; `b < a`), up to `limit` bytes (at most `b`). Eight bytes at a time: the long-distance matcher
/// extends every repeat it verifies backwards over up to 64 KiB, byte by byte that was a tenth of its
/// instructions.
#[inline]
pub fn common_len_back(data: &[u8], a: usize, b: usize, limit: usize) -> usize {
    let limit = limit.min(b);
    let mut n = 0;
    while n + 8 <= limit {
        let x = read_u64(data, a - n - 8) ^ read_u64(data, b - n - 8);
        if x != 0 {
            // Little-endian: the byte nearest the end is the most significant.
            return n + (x.leading_zeros() / 8) as usize;
        }
        n += 8;
    }
    while n < limit && data[a - n - 1] == data[b - n - 1] {
        n += 1;
    }
    n
}

const BYTES_01: u64 = u64::from_le_bytes([0x01; 8]);
const BYTES_7F: u64 = u64::from_le_bytes([0x7f; 8]);
const BYTES_80: u64 = u64::from_le_bytes([0x80; 8]);

/// The high bit of every byte of `v` that is zero (exact per byte: no borrow crosses bytes).
#[inline]
fn zero_bytes(v: u64) -> u64 {
    !(((v & BYTES_7F).wrapping_add(BYTES_7F)) | v) & BYTES_80
}

/// Whether all eight bytes of `w` are upper-case `A`, `C`, `G` or `T`.
#[inline]
pub fn all_acgt(w: u64) -> bool {
    let is = |c: u8| zero_bytes(w ^ (c as u64 * BYTES_01));
    is(b'A') | is(b'C') | is(b'G') | is(b'T') == BYTES_80
}

/// [`COMPLEMENT`] of eight upper-case bases at once (other bytes come out wrong): `A ↔ T` is `^ 0x15` and
/// `C ↔ G` is `^ 0x04`, and bit 1 tells the pairs apart.
#[inline]
fn complement_acgt(w: u64) -> u64 {
    w ^ ((0x15 * BYTES_01) ^ (((w >> 1) & BYTES_01) * 0x11))
}

/// Number of bytes `k < limit` from `a` on with `data[a + k] == COMPLEMENT[data[e − k]]`: the length of a
/// reverse-complement match at `a` whose source ends at `e < a`. It stops at the stream start (`k ≤ e`).
///
/// Eight bytes at a time while the source's bytes are upper-case bases (the bare bases that reverse complements
/// are looked for on; long inverted repeats are verified over kilobytes), byte by byte from the first word that
/// holds anything else.
#[inline]
pub fn rc_common_len(data: &[u8], a: usize, e: usize, limit: usize) -> usize {
    let limit = limit.min(data.len() - a).min(e + 1);
    let mut n = 0;
    while n + 8 <= limit {
        // Source bytes e − n, e − n − 1, …, e − n − 7 (n + 8 ≤ e + 1 keeps the read in the stream).
        let src = read_u64(data, e - n - 7).swap_bytes();
        if !all_acgt(src) {
            break;
        }
        let x = read_u64(data, a + n) ^ complement_acgt(src);
        if x != 0 {
            return n + (x.trailing_zeros() / 8) as usize;
        }
        n += 8;
    }
    while n < limit && data[a + n] == COMPLEMENT[data[e - n] as usize] {
        n += 1;
    }
    n
}

/// The reverse complement of the first 12 of `bytes` (16 bytes), as its first 8 bytes (little-endian) and last 4,
/// if those 12 are all upper-case bases; `None` otherwise. Three byte shuffles: a class check by the low nibble
/// (A, C, G and T have four different ones), the complement by the same index, and the reversal. On bare bases the
/// reverse-complement hash runs at every second position, and the word version of the check and complement was
/// most of its cost.
///
/// # Safety
///
/// The CPU must have SSSE3.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "ssse3")]
unsafe fn rc12_ssse3(bytes: &[u8]) -> Option<(u64, u64)> {
    use std::arch::x86_64::*;
    let bytes: &[u8; 16] = bytes.try_into().ok()?;
    // Indexed by a byte's low nibble: the base with that nibble (A 0x41, C 0x43, T 0x54, G 0x47); for every
    // other nibble a byte that does not have it, so nothing else compares equal.
    const CLASS: [u8; 16] =
        [0xff, 0x41, 0xff, 0x43, 0x54, 0xff, 0xff, 0x47, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0];
    // The complement of the base with that nibble.
    const COMP: [u8; 16] = [0, 0x54, 0, 0x47, 0x41, 0, 0, 0x43, 0, 0, 0, 0, 0, 0, 0, 0];
    // Byte k of the result is byte 11 − k (0x80: zero).
    const REVERSE: [u8; 16] = [11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0, 0x80, 0x80, 0x80, 0x80];
    // SAFETY: every load reads 16 bytes from a 16-byte array; the caller guarantees SSSE3.
    unsafe {
        let v = _mm_loadu_si128(bytes.as_ptr() as *const __m128i);
        let nibble = _mm_and_si128(v, _mm_set1_epi8(0x0f));
        let class = _mm_shuffle_epi8(_mm_loadu_si128(CLASS.as_ptr() as *const __m128i), nibble);
        if _mm_movemask_epi8(_mm_cmpeq_epi8(class, v)) & 0x0fff != 0x0fff {
            return None;
        }
        let comp = _mm_shuffle_epi8(_mm_loadu_si128(COMP.as_ptr() as *const __m128i), nibble);
        let rc = _mm_shuffle_epi8(comp, _mm_loadu_si128(REVERSE.as_ptr() as *const __m128i));
        let a = _mm_cvtsi128_si64(rc) as u64;
        let b = _mm_cvtsi128_si64(_mm_srli_si128(rc, 8)) as u64;
        Some((a, b))
    }
}

/// The long table's hash of 12 bytes given as their first 8 (little-endian) and last 4.
#[inline]
fn hash12(a: u64, b: u64, row_log: u32) -> (usize, u8) {
    let v = a.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ b.wrapping_mul(0xc2b2_ae3d_27d4_eb4f).rotate_left(31);
    let v = v.wrapping_mul(0xff51_afd7_ed55_8ccd);
    ((v >> (64 - row_log)) as usize, (v >> 8) as u8)
}

impl<'a> ChainMatcher<'a> {
    /// A matcher that can index positions `[base, end)` of `data`.
    pub fn new(data: &'a [u8], base: u64, end: u64, params: ChainParams) -> Self {
        let span = (end - base) as usize;
        // Segments and windows are a few MiB (mod.rs); a span that does not fit an entry is a packer bug.
        assert!(span < ENTRY_POS_MASK as usize, "chain matcher span {span} exceeds 2^{ENTRY_POS_BITS} - 1");
        let row_log = params.hash_log.saturating_sub(4).max(4);
        let row_len = (params.long_depth as usize).clamp(1, ROW);
        let short = params.short_depth > 0;
        ChainMatcher {
            data,
            base,
            next_insert: base,
            params,
            short_head: if short { zeroed(1 << params.hash_log) } else { Vec::new() },
            short_chain: if short { zeroed(span) } else { Vec::new() },
            long_rows: zeroed(row_len << row_log),
            row_len,
            row_log,
            span,
            rc_ahead: [(0, 0, 0); RC_AHEAD],
            #[cfg(target_arch = "x86_64")]
            ssse3: std::arch::is_x86_feature_detected!("ssse3"),
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
        hash12(read_u64(self.data, p), read_u32(self.data, p + 8) as u64, self.row_log)
    }

    /// Row and tag of the reverse complement of the 12 bytes at `p`: the hash a source of a reverse-complement
    /// match at `p` was indexed under. Its first 8 bytes are the last 8 at `p` reversed and complemented, its
    /// last 4 the first 4: a word operation each when they are all upper-case bases.
    #[inline]
    fn long_hash_rc(&self, p: usize) -> (usize, u8) {
        #[cfg(target_arch = "x86_64")]
        if self.ssse3 {
            // SAFETY: `ssse3` is set only where the CPU has SSSE3; `rc12_ssse3` reads data[p..p + 16], which the
            // callers guarantee (p + TAIL_GUARD <= data.len()), and checks it with a slice index.
            if let Some((a, b)) = unsafe { rc12_ssse3(&self.data[p..p + 16]) } {
                return hash12(a, b, self.row_log);
            }
        }
        let (head, tail) = (read_u64(self.data, p + 4).swap_bytes(), read_u32(self.data, p).swap_bytes() as u64);
        if all_acgt(head) && all_acgt(tail | (u64::from_le_bytes(*b"\0\0\0\0AAAA"))) {
            let mask = u64::from(u32::MAX);
            return hash12(complement_acgt(head), complement_acgt(tail) & mask, self.row_log);
        }
        let mut rc = [0u8; LONG_HASH_LEN];
        for (k, r) in rc.iter_mut().enumerate() {
            *r = COMPLEMENT[self.data[p + LONG_HASH_LEN - 1 - k] as usize];
        }
        let a = u64::from_le_bytes(rc[..8].try_into().expect("8 bytes"));
        let b = u32::from_le_bytes(rc[8..].try_into().expect("4 bytes")) as u64;
        hash12(a, b, self.row_log)
    }

    /// Indexes every position before `pos` not indexed yet.
    // Inlined: called at every lookup (every second position on bare bases), nearly always to index one or two
    // positions; the loops stay out of line.
    #[inline]
    pub fn insert_until(&mut self, pos: u64) {
        let stop = pos.min((self.data.len().saturating_sub(TAIL_GUARD)) as u64).min(self.base + self.span as u64);
        if self.next_insert >= stop {
            return;
        }
        if self.params.short_depth == 0 && self.row_len == 2 {
            self.insert_pairs(stop);
        } else {
            self.insert_rows(stop);
        }
    }

    /// [`Self::insert_until`] of bare bases (no short chain, rows of two): the same entries as
    /// [`Self::insert_rows`] writes, with the loop's state in locals and one bounds check per read. Why: the
    /// general loop kept `next_insert` in memory and re-checked the short chain, the row length and every read,
    /// about 80 instructions a position, and every position of a segment and of its window is indexed.
    fn insert_pairs(&mut self, stop: u64) {
        let (data, base, row_log) = (self.data, self.base, self.row_log);
        let rows = &mut self.long_rows;
        for at in self.next_insert..stop {
            let p = at as usize;
            // `stop` keeps TAIL_GUARD (16) bytes after every indexed position.
            let w: &[u8; 16] = data[p..p + 16].try_into().expect("16 bytes");
            let a = u64::from_le_bytes(w[..8].try_into().expect("8 bytes"));
            let b = u32::from_le_bytes(w[8..12].try_into().expect("4 bytes")) as u64;
            let (row, check) = hash12(a, b, row_log);
            let tag = (at - base) as u32 + 1;
            let entries: &mut [u32; 2] = (&mut rows[2 * row..2 * row + 2]).try_into().expect("a row of two");
            *entries = [((check as u32) << ENTRY_POS_BITS) | tag, entries[0]];
        }
        self.next_insert = stop;
    }

    /// [`Self::insert_until`] at any depth: both tables, rows of any length.
    fn insert_rows(&mut self, stop: u64) {
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
            let len = self.row_len;
            let entries = &mut self.long_rows[row * len..row * len + len];
            // The two row lengths the levels use get a fixed-size shift (a runtime-length one is a memmove
            // call per position).
            if let Ok(row) = <&mut [u32; 2]>::try_from(&mut *entries) {
                row[1] = row[0];
            } else if let Ok(row) = <&mut [u32; ROW]>::try_from(&mut *entries) {
                let old = *row;
                *row = std::array::from_fn(|k| if k == 0 { 0 } else { old[k - 1] });
            } else {
                entries.copy_within(..len - 1, 1);
            }
            entries[0] = ((check as u32) << ENTRY_POS_BITS) | tag;
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

    /// Appends to `out` the reverse-complement candidates at `pos` (after [`Self::find`] at the same position):
    /// indexed 12-byte windows equal to the reverse complement of the 12 bytes at `pos`, each measured from its
    /// last byte backwards, newest first; only candidates longer than every earlier one, at most `limit` bytes.
    pub fn find_rc(&mut self, pos: u64, limit: u32, out: &mut Vec<Candidate>) {
        self.insert_until(pos);
        let p = pos as usize;
        if p + TAIL_GUARD > self.data.len() || pos < self.base || limit < LONG_HASH_LEN as u32 {
            return;
        }
        // Lookups run at nearly every position and each row is a cache miss: hash a few positions ahead and
        // fetch that row now, keeping its hash for when the lookup gets there.
        let ahead = p + PREFETCH_AHEAD;
        if ahead + TAIL_GUARD <= self.data.len() {
            let (row, check) = self.long_hash_rc(ahead);
            self.prefetch_rows(row);
            self.rc_ahead[ahead % RC_AHEAD] = (ahead as u64 + 1, row, check);
        }
        let (row, check) = match self.rc_ahead[p % RC_AHEAD] {
            (at, row, check) if at == pos + 1 => (row, check),
            _ => self.long_hash_rc(p),
        };
        let mut best = LONG_HASH_LEN as u32 - 1;
        let last = |tag: u32| self.base as usize + tag as usize - 1 + LONG_HASH_LEN - 1;
        self.with_row_tags(row, check, |tags| {
            if tags.len() > 1 {
                for &tag in tags {
                    prefetch_byte(self.data, last(tag));
                }
            }
            for &tag in tags {
                let e = last(tag);
                if e >= p {
                    continue;
                }
                let len = rc_common_len(self.data, p, e, limit as usize) as u32;
                if len > best {
                    best = len;
                    out.push(Candidate { back: (p - e) as u64, len, rc: true });
                    if len >= limit {
                        break;
                    }
                }
            }
        });
    }

    /// Asks the CPU to bring in the row that the lookup at `p` will read: lookups run at nearly every position
    /// and each row is a cache miss, so fetching a few positions ahead hides most of the latency.
    #[inline]
    fn prefetch_row(&self, p: usize) {
        if p + TAIL_GUARD > self.data.len() {
            return;
        }
        let (row, _) = self.long_hash(p);
        self.prefetch_rows(row);
    }

    /// Asks the CPU to bring in row `row` of the long table.
    #[inline]
    fn prefetch_rows(&self, row: usize) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            let entries = self.long_rows[row * self.row_len..].as_ptr() as *const i8;
            // SAFETY: the pointer points into the live table (row < 2^row_log); prefetching has no side effects.
            unsafe { _mm_prefetch(entries, _MM_HINT_T0) };
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
            out.push(Candidate::forward((p - src) as u64, len));
        }
        len >= limit
    }

    /// Tries the long table's row for `pos`, newest position first (so distances increase).
    fn walk_row(&self, pos: u64, limit: u32, best: &mut u32, out: &mut Vec<Candidate>) {
        let p = pos as usize;
        let (row, check) = self.long_hash(p);
        self.with_row_tags(row, check, |tags| {
            // Every source is a likely cache miss far back in the window: ask for all of them before comparing
            // the first, so that the misses overlap instead of following one another.
            if tags.len() > 1 {
                for &tag in tags {
                    prefetch_byte(self.data, self.base as usize + tag as usize - 1);
                }
            }
            for &tag in tags {
                if self.try_source(p, tag, limit, best, out) {
                    break;
                }
            }
        });
    }

    /// Runs `f` on [`Self::row_tags`] of row `row`: of at most two for rows of two (bare bases, every lookup
    /// of which builds the list), else of at most [`ROW`]. Why: a 16-entry list was zeroed and returned
    /// through memory at every lookup, about a tenth of the matcher's instructions on bare bases.
    #[inline]
    fn with_row_tags<R>(&self, row: usize, check: u8, f: impl FnOnce(&[u32]) -> R) -> R {
        if self.row_len == 2 {
            let (tags, n) = self.row_tags::<2>(row, check);
            f(&tags[..n])
        } else {
            let (tags, n) = self.row_tags::<ROW>(row, check);
            f(&tags[..n])
        }
    }

    /// The positions (tags, `rel + 1`) of long-table row `row` whose check matches, newest first, stopping at
    /// the first empty entry, and how many there are: what the forward and the reverse-complement lookups walk.
    /// `N` bounds the row's length ([`Self::with_row_tags`] picks it).
    #[inline]
    fn row_tags<const N: usize>(&self, row: usize, check: u8) -> ([u32; N], usize) {
        let mut tags = [0u32; N];
        let mut n = 0;
        let depth = (self.params.long_depth as usize).min(self.row_len).min(N);
        for &e in &self.long_rows[row * self.row_len..row * self.row_len + depth] {
            if e == 0 {
                break;
            }
            tags[n] = e & ENTRY_POS_MASK;
            n += (e >> ENTRY_POS_BITS == check as u32) as usize;
        }
        (tags, n)
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

    /// The reverse complement of `s`.
    fn revcomp(s: &[u8]) -> Vec<u8> {
        s.iter().rev().map(|&b| COMPLEMENT[b as usize]).collect()
    }

    /// The tests' pseudo-random numbers (xorshift64), from `seed`.
    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    #[test]
    fn finds_planted_inverted_repeats() {
        let mut next = xorshift(99);
        let mut bases = |n: usize| -> Vec<u8> { (0..n).map(|_| b"ACGT"[(next() & 3) as usize]).collect() };
        let arm = bases(300);
        let mut data = bases(1000);
        let src_start = data.len();
        data.extend_from_slice(&arm);
        data.extend(bases(5000));
        let pos = data.len();
        data.extend(revcomp(&arm));
        data.extend(bases(100));
        // Rows of 16 positions: a table of 2^8 rows would have dropped the source by the time the copy comes.
        let mut m = ChainMatcher::new(&data, 0, data.len() as u64, ChainParams { hash_log: 16, ..PARAMS });
        let mut fwd = Vec::new();
        m.find(pos as u64, 1000, &mut fwd);
        assert!(fwd.iter().all(|c| !c.rc && c.len < 12), "no forward repeat was planted: {fwd:?}");
        let mut out = Vec::new();
        m.find_rc(pos as u64, 1000, &mut out);
        let best = out.last().expect("the inverted repeat is found");
        assert!(best.rc);
        // The source's last byte is the arm's last byte; the match runs over the whole arm (and maybe a chance
        // byte or two beyond, which would then also agree).
        assert_eq!(pos as u64 - best.back, (src_start + arm.len() - 1) as u64);
        assert!(best.len >= 300, "{best:?}");
        for c in &out {
            let e = pos - c.back as usize;
            assert!(e + 1 >= c.len as usize);
            for k in 0..c.len as usize {
                assert_eq!(data[pos + k], COMPLEMENT[data[e - k] as usize]);
            }
        }
        // A palindrome-free stretch of random bases has no reverse-complement candidates of 12 bytes.
        let mut none = Vec::new();
        m.find_rc(200, 1000, &mut none);
        assert!(none.is_empty(), "{none:?}");
    }

    #[test]
    fn rc_common_len_stops_at_the_stream_start() {
        let data = b"ACGTTTCGT";
        // data[4..] = "TTCGT"... against the reverse complement of data[..=3] = "ACGT" -> "ACGT" reversed and
        // complemented is "ACGT": data[4] = 'T' vs complement(data[3] = 'T') = 'A' differs.
        assert_eq!(rc_common_len(data, 4, 3, 100), 0);
        // "ACGT" is its own reverse complement: at 0..4 against e = 3 all 4 agree, and the stream start stops it.
        let d2 = b"ACGTACGT";
        assert_eq!(rc_common_len(d2, 4, 3, 100), 4);
        assert_eq!(rc_common_len(d2, 4, 1, 100), 0);
        assert_eq!(rc_common_len(b"AATT", 2, 1, 100), 2);
    }

    #[test]
    fn rc_common_len_words_agree_with_bytes() {
        // Mostly bases (long agreeing runs), some lower case and other bytes, which the word path hands back
        // to the byte loop.
        let mut next = xorshift(5);
        let mut data: Vec<u8> = (0..4000).map(|_| b"ACGTACGTACGTacgN"[(next() % 16) as usize]).collect();
        // Plant inverted repeats so that long agreements occur.
        for _ in 0..40 {
            let (from, to, len) = ((next() % 1800) as usize, 2000 + (next() % 1800) as usize, (next() % 150) as usize);
            for k in 0..len {
                data[to + k] = COMPLEMENT[data[from + len - 1 - k] as usize];
            }
        }
        for _ in 0..20_000 {
            let a = 1 + (next() % 3999) as usize;
            let e = (next() % a as u64) as usize;
            let limit = (next() % 300) as usize;
            let slow = (0..limit.min(data.len() - a).min(e + 1))
                .take_while(|&k| data[a + k] == COMPLEMENT[data[e - k] as usize])
                .count();
            assert_eq!(rc_common_len(&data, a, e, limit), slow, "a {a} e {e} limit {limit}");
        }
        // All four bases and their complements, word by word.
        let bases = b"ACGTTGCAAACCGGTTACGT";
        let rc: Vec<u8> = bases.iter().rev().map(|&b| COMPLEMENT[b as usize]).collect();
        let mut both = bases.to_vec();
        both.extend_from_slice(&rc);
        assert_eq!(rc_common_len(&both, bases.len(), bases.len() - 1, 100), bases.len());
    }

    #[test]
    fn reverse_complement_hash_by_shuffles_matches_the_scalar_one() {
        let mut next = xorshift(17);
        // Mostly bases, some other bytes (lower case, N, 0x00, 0xff, high-bit bytes with a base's nibble).
        let data: Vec<u8> = (0..20_000)
            .map(|_| b"ACGTACGTACGTACGTACGTACGTACGTACGTacgtNn\x00\xff\xc1\x94\x01\x13\x17\x24"[(next() % 46) as usize])
            .collect();
        let m = ChainMatcher::new(&data, 0, data.len() as u64, PARAMS);
        let mut scalar = ChainMatcher::new(&data, 0, data.len() as u64, PARAMS);
        #[cfg(target_arch = "x86_64")]
        {
            scalar.ssse3 = false;
        }
        for p in 0..data.len() - TAIL_GUARD {
            assert_eq!(m.long_hash_rc(p), scalar.long_hash_rc(p), "at {p}");
        }
        // The scalar definition: the forward hash of the reverse complement.
        let rc: Vec<u8> = data[100..112].iter().rev().map(|&b| COMPLEMENT[b as usize]).collect();
        let mut both = rc.clone();
        both.extend_from_slice(&[b'A'; 16]);
        let fwd = ChainMatcher::new(&both, 0, both.len() as u64, PARAMS);
        assert_eq!(m.long_hash_rc(100), fwd.long_hash(0));
        let _ = &mut scalar;
    }

    #[test]
    fn common_len_back_agrees_with_bytes() {
        let mut next = xorshift(3);
        // Two letters: long agreements are common.
        let data: Vec<u8> = (0..3000).map(|_| b"AC"[(next() % 2) as usize]).collect();
        for _ in 0..20_000 {
            let a = 1 + (next() % 2999) as usize;
            let b = (next() % a as u64) as usize;
            let limit = (next() % 100) as usize;
            let slow = (0..limit.min(b)).take_while(|&k| data[a - 1 - k] == data[b - 1 - k]).count();
            assert_eq!(common_len_back(&data, a, b, limit), slow, "a {a} b {b} limit {limit}");
        }
        let same = [7u8; 40];
        assert_eq!(common_len_back(&same, 40, 30, 1000), 30);
        assert_eq!(common_len_back(&same, 40, 30, 17), 17);
    }

    #[test]
    fn common_len_limits() {
        let data = [1u8, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2];
        assert_eq!(common_len(&data, 1, 0, 100), 10);
        assert_eq!(common_len(&data, 1, 0, 3), 3);
    }
}
