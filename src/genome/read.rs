//! Original bytes `[off, off + len)` from the structure and the bases the read covers.
//!
//! A read locates its first byte with one binary search over the line runs, finds the residue range it covers
//! and the base range behind that (one binary search in the exceptions), and then writes the original bytes
//! straight into the caller's buffer, front to back, line by line: header text; per sequence line its residues
//! in case, then its terminator. A line's residues are at known columns, so nothing is divided per line or per
//! run: the first line is found by one division and the rest by stepping. Nothing is staged in a residue buffer
//! and no buffer is zero-filled first. Every line holds at least one byte, so the work is
//! `O(len + log(structure))` wherever the read lands.
//!
//! The common line (bases only, no exception run in it, no wider than [`FAST_LINE_MAX`], and its bases in one
//! chunk) is copied in 16-byte moves inlined into the loop, not a `memcpy` call for the bases and another for the
//! terminator: the last move may run up to 15 bytes past the line, into output bytes the terminator and the next
//! line overwrite, and only where the output and the base chunk both have that much room. When lowercase runs
//! meet such a line (up to 128 wide), they become a bit mask of its columns and each 16 bytes are lowercased in
//! registers on their way from the bases to the output (SSE2 on x86-64, 8-byte words elsewhere). Any other line
//! (exception runs, cut by a chunk end, very wide) is written piecewise, exception runs as fills of their byte,
//! and its lowercase runs are lowercased in place afterwards.
//!
//! On a CPU with AVX2 the same lines go in 32-byte moves instead (two for a line of 60 residues, their mask bits
//! spread to bytes by one shuffle): the whole writer is compiled a second time for it ([`Genome::write_lines`]
//! inlined into a `#[target_feature]` function) and chosen per read. atha_chr1's rebuild alone: 5.68 → 6.15 GB per
//! CPU-second (`examples/serve_bench --rebuild-only`, medians of 15 passes, two runs each, 2-core AMD EPYC); the
//! same with AVX-512 (one 64-byte move a line, letters found by one compare into a mask) measured 6.4, but its
//! intrinsics need Rust 1.89, above this crate's `rust-version`.

use std::mem::MaybeUninit;
use std::ptr;

use super::layout::{LineKind, Term};
use super::mask::RunList;
use super::Genome;
use crate::error::DecodeError;

/// Widest line copied in inlined 16-byte moves ([`BaseCursor::padded_line`]); wider lines (rare in FASTA, up to a whole
/// sequence on one line) go through `memcpy`, whose call costs little against their length.
const FAST_LINE_MAX: usize = 256;

/// Bases `[start, start + len)` of the nucleotide stream as consecutive slices (any split, empty ones allowed).
#[derive(Debug, Clone, Copy)]
pub struct BaseChunks<'a> {
    start: u64,
    len: u64,
    chunks: &'a [&'a [u8]],
}

impl<'a> BaseChunks<'a> {
    /// The bases from base `start` on, in `chunks`.
    pub fn new(start: u64, chunks: &'a [&'a [u8]]) -> BaseChunks<'a> {
        let len = chunks.iter().map(|c| c.len() as u64).sum();
        BaseChunks { start, len, chunks }
    }

    /// Bases held.
    pub fn len(&self) -> u64 {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

/// The output of a read: possibly uninitialised bytes, written front to back. Invariant: `buf[..at]` is
/// initialised (every method writes the bytes it skips over), which is what lets the caller treat that prefix as
/// bytes. Bytes past `at` may have been written too (a line copy's last move runs past the line); they count as
/// uninitialised until `at` passes them.
struct Out<'a> {
    buf: &'a mut [MaybeUninit<u8>],
    at: usize,
}

impl Out<'_> {
    /// The next `n` output bytes (panics past the end: lengths come from the read's own arithmetic).
    fn next(&mut self, n: usize) -> &mut [MaybeUninit<u8>] {
        let at = self.at;
        self.at += n;
        &mut self.buf[at..at + n]
    }

    fn put(&mut self, src: &[u8]) {
        write_slice(self.next(src.len()), src);
    }

    /// Writes a line terminator.
    #[inline(always)]
    fn put_term(&mut self, term: Term) {
        match term {
            Term::Lf => {
                self.next(1)[0].write(b'\n');
            }
            Term::CrLf => {
                let d = self.next(2);
                d[0].write(b'\r');
                d[1].write(b'\n');
            }
            Term::None => {}
        }
    }

    /// Bytes `[from, to)` of what was written so far, to change in place.
    fn written_mut(&mut self, from: usize, to: usize) -> &mut [u8] {
        let written = &mut self.buf[..self.at];
        let part = &mut written[from..to];
        // SAFETY: `buf[..at]` is initialised (the invariant above) and `part` lies inside it; `MaybeUninit<u8>`
        // has the layout of `u8`.
        unsafe { &mut *(part as *mut [MaybeUninit<u8>] as *mut [u8]) }
    }

    fn fill(&mut self, byte: u8, n: usize) {
        for d in self.next(n) {
            d.write(byte);
        }
    }
}

/// Where a read takes its bases from: the chunks, consumed strictly in order (a read's bases are contiguous
/// and its residues are written in order, so the cursor never seeks).
struct BaseCursor<'a> {
    chunks: &'a [&'a [u8]],
    /// Current chunk and position in it.
    chunk: usize,
    pos: usize,
}

impl<'a> BaseCursor<'a> {
    /// The next run of at most `max` (> 0) bases, in one chunk, consumed. The read checked up front that the
    /// chunks hold every base it needs.
    fn next_run(&mut self, max: usize) -> &'a [u8] {
        loop {
            let here = &self.chunks[self.chunk][self.pos..];
            if here.is_empty() {
                self.chunk += 1;
                self.pos = 0;
                continue;
            }
            let m = max.min(here.len());
            self.pos += m;
            return &here[..m];
        }
    }

    /// Writes the next `n` bases.
    fn take(&mut self, mut n: usize, out: &mut Out<'_>) {
        while n > 0 {
            let run = self.next_run(n);
            out.put(run);
            n -= run.len();
        }
    }

    /// The next `n` (> 0) bases, one line's, and as many more as make `n` a multiple of `step` (16, or 32 for the
    /// AVX2 copies), if they are all in the current chunk, `n` is at most [`FAST_LINE_MAX`] and the output has
    /// that much room too: what the line copies below may read and write in whole words (their excess lands in
    /// output bytes written next, and is read from bases that exist). Not consumed (see [`BaseCursor::skip`]).
    #[inline(always)]
    fn padded_line(&self, n: usize, step: usize, out: &Out<'_>) -> Option<&'a [u8]> {
        let padded = n.next_multiple_of(step);
        let chunk = *self.chunks.get(self.chunk)?;
        (n <= FAST_LINE_MAX && out.buf.len() - out.at >= padded).then_some(())?;
        chunk.get(self.pos..self.pos + padded)
    }

    /// Consumes `n` bases of the current chunk (what [`BaseCursor::padded_line`] handed out).
    #[inline(always)]
    fn skip(&mut self, n: usize) {
        self.pos += n;
    }
}

/// Copies the first `n` bytes of `src` (`n` rounded up to 16 bytes long) to the output at `out.at` in 16-byte
/// moves, the last of which may write up to 15 bytes past them, and moves `out.at` past the `n`.
#[inline(always)]
fn copy_line(src: &[u8], n: usize, out: &mut Out<'_>) {
    let padded = n.next_multiple_of(16);
    assert!(src.len() >= padded && out.buf.len() - out.at >= padded);
    // SAFETY: `src` and `out.buf[at..]` both have `padded` bytes (asserted just above; `at ≤ buf.len()` by
    // `Out`'s invariant); one is a `&` and the other a `&mut`, so they do not overlap; `MaybeUninit<u8>` has the
    // layout of `u8`.
    unsafe {
        let dst = out.buf.as_mut_ptr().add(out.at).cast::<u8>();
        let mut j = 0;
        while j < n {
            ptr::copy_nonoverlapping(src.as_ptr().add(j), dst.add(j), 16);
            j += 16;
        }
    }
    out.at += n;
}

/// Bits of a line up to 128 bytes wide: byte `i`'s is bit `i % 64` of word `i / 64`.
type LineMask = [u64; 2];

/// [`copy_line`], with byte `i < n ≤ 128` ASCII-lowercased where bit `i` of `mask` is set (no bit is set at or
/// past `n`). Why a mask for the line and not a pass per lowercase run over the bytes written: the runs are short
/// (a median of 24 bytes in atha_chr1) and cut at line ends, and a pass per run, with its length-dependent
/// branches, cost as much as the whole copy; a pass over bytes just stored also waits for those stores (a word
/// loaded across two 16-byte stores is not forwarded from them). Here each 16 bytes are loaded once from the
/// bases, lowercased in registers where the mask says and they are uppercase letters, and stored once.
#[inline(always)]
fn copy_line_lowercase(src: &[u8], n: usize, mask: LineMask, out: &mut Out<'_>) {
    #[cfg(target_arch = "x86_64")]
    copy_line_lowercase_sse2(src, n, mask, out);
    #[cfg(not(target_arch = "x86_64"))]
    copy_line_lowercase_words(src, n, mask, out);
}

/// [`copy_line_lowercase`] in SSE2 (every x86-64 has it): per 16 bytes, the mask's 16 bits are spread to
/// bytes (each bit's byte broadcast, then tested against its own bit), and ANDed with the bytes that are `A..=Z`
/// and with 0x20.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn copy_line_lowercase_sse2(src: &[u8], n: usize, mask: LineMask, out: &mut Out<'_>) {
    use std::arch::x86_64::*;
    let padded = n.next_multiple_of(16);
    assert!(n <= 128 && src.len() >= padded && out.buf.len() - out.at >= padded);
    // SAFETY: SSE2 is part of x86-64, so these intrinsics are available on every x86-64 CPU. `src` and
    // `out.buf[at..]` both have `padded` bytes (asserted just above; `at ≤ buf.len()` by `Out`'s invariant), and
    // every load and store is 16 bytes at `j < padded`, `j` a multiple of 16; one is a `&` and the other a `&mut`,
    // so they do not overlap; `MaybeUninit<u8>` has the layout of `u8`; the loads and stores are unaligned ones.
    unsafe {
        let dst = out.buf.as_mut_ptr().add(out.at).cast::<u8>();
        let bit_of_byte = _mm_set_epi8(-128, 64, 32, 16, 8, 4, 2, 1, -128, 64, 32, 16, 8, 4, 2, 1);
        let case_bit = _mm_set1_epi8(0x20);
        // Signed compares: bytes of 0x80 and above are negative, below 'A'.
        let (below_a, above_z) = (_mm_set1_epi8(b'A' as i8 - 1), _mm_set1_epi8(b'Z' as i8 + 1));
        let mut j = 0;
        while j < n {
            let x = _mm_loadu_si128(src.as_ptr().add(j).cast());
            // The 16 mask bits as bytes: low byte in bytes 0..8, high byte in bytes 8..16, then each byte's own bit.
            let m = _mm_cvtsi32_si128(((mask[j / 64] >> (j % 64)) & 0xffff) as i32);
            let m = _mm_unpacklo_epi8(m, m);
            let m = _mm_unpacklo_epi16(m, m);
            let m = _mm_unpacklo_epi32(m, m);
            let lower = _mm_cmpeq_epi8(_mm_and_si128(m, bit_of_byte), bit_of_byte);
            let upper = _mm_and_si128(_mm_cmpgt_epi8(x, below_a), _mm_cmpgt_epi8(above_z, x));
            let add = _mm_and_si128(_mm_and_si128(lower, upper), case_bit);
            _mm_storeu_si128(dst.add(j).cast(), _mm_or_si128(x, add));
            j += 16;
        }
    }
    out.at += n;
}

/// [`copy_line`] in 32-byte AVX2 moves: `src` holds `n` rounded up to 32 bytes, and so does the output from
/// `out.at`; the last move may write up to 31 bytes past the line, into output bytes written next.
///
/// # Safety
/// The CPU must have AVX2 (see [`wide_lines`]).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn copy_line_avx2(src: &[u8], n: usize, out: &mut Out<'_>) {
    use std::arch::x86_64::*;
    let padded = n.next_multiple_of(32);
    assert!(src.len() >= padded && out.buf.len() - out.at >= padded);
    // SAFETY: the caller guarantees AVX2. `src` and `out.buf[at..]` both have `padded` bytes (asserted just
    // above; `at ≤ buf.len()` by `Out`'s invariant), and every load and store is 32 bytes at `j < padded`, `j` a
    // multiple of 32; one is a `&` and the other a `&mut`, so they do not overlap; `MaybeUninit<u8>` has the
    // layout of `u8`; the loads and stores are unaligned ones.
    unsafe {
        let dst = out.buf.as_mut_ptr().add(out.at).cast::<u8>();
        let mut j = 0;
        while j < n {
            _mm256_storeu_si256(dst.add(j).cast(), _mm256_loadu_si256(src.as_ptr().add(j).cast()));
            j += 32;
        }
    }
    out.at += n;
}

/// [`copy_line_lowercase`] in AVX2, 32 bytes at a time: the mask's 32 bits broadcast and spread to bytes by one
/// shuffle (byte `i` takes mask byte `i / 8`), each byte tested against its own bit, and ANDed with the bytes that
/// are `A..=Z` and with 0x20. `src` holds `n` (≤ 128) rounded up to 32 bytes, and so does the output from
/// `out.at`.
///
/// # Safety
/// The CPU must have AVX2 (see [`wide_lines`]).
#[cfg(target_arch = "x86_64")]
#[inline(always)]
unsafe fn copy_line_lowercase_avx2(src: &[u8], n: usize, mask: LineMask, out: &mut Out<'_>) {
    use std::arch::x86_64::*;
    let padded = n.next_multiple_of(32);
    assert!(n <= 128 && src.len() >= padded && out.buf.len() - out.at >= padded);
    // SAFETY: the caller guarantees AVX2. `src` and `out.buf[at..]` both have `padded` bytes (asserted just
    // above; `at ≤ buf.len()` by `Out`'s invariant), and every load and store is 32 bytes at `j < padded`, `j` a
    // multiple of 32 (so `j / 64 < 2` indexes `mask`, and `j % 64` is 0 or 32); one is a `&` and the other a
    // `&mut`, so they do not overlap; `MaybeUninit<u8>` has the layout of `u8`; the loads and stores are
    // unaligned ones.
    unsafe {
        let dst = out.buf.as_mut_ptr().add(out.at).cast::<u8>();
        // Within each 128-bit lane (the shuffle's reach) the broadcast holds all four mask bytes: lane 0 takes
        // bytes 0 and 1, lane 1 bytes 2 and 3.
        let spread = _mm256_setr_epi8(
            0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3,
        );
        let bit_of_byte = _mm256_set1_epi64x(i64::from_le_bytes([1, 2, 4, 8, 16, 32, 64, 128]));
        let case_bit = _mm256_set1_epi8(0x20);
        // Signed compares: bytes of 0x80 and above are negative, below 'A'.
        let (below_a, above_z) = (_mm256_set1_epi8(b'A' as i8 - 1), _mm256_set1_epi8(b'Z' as i8 + 1));
        let mut j = 0;
        while j < n {
            let x = _mm256_loadu_si256(src.as_ptr().add(j).cast());
            let m = _mm256_set1_epi32((mask[j / 64] >> (j % 64)) as u32 as i32);
            let m = _mm256_shuffle_epi8(m, spread);
            let lower = _mm256_cmpeq_epi8(_mm256_and_si256(m, bit_of_byte), bit_of_byte);
            let upper = _mm256_and_si256(_mm256_cmpgt_epi8(x, below_a), _mm256_cmpgt_epi8(above_z, x));
            let add = _mm256_and_si256(_mm256_and_si256(lower, upper), case_bit);
            _mm256_storeu_si256(dst.add(j).cast(), _mm256_or_si256(x, add));
            j += 32;
        }
    }
    out.at += n;
}

/// Whether this CPU has what [`Genome::write_lines_avx2`] uses (AVX2), detected once.
#[cfg(target_arch = "x86_64")]
fn wide_lines() -> bool {
    std::is_x86_feature_detected!("avx2")
}

#[cfg(not(target_arch = "x86_64"))]
fn wide_lines() -> bool {
    false
}

/// Per value `b` of eight bits of a line's lowercase mask, the word with 0x20 in byte `i` where bit `i` of `b` is
/// set: what [`copy_line_lowercase_words`] adds to the uppercase letters among those eight bytes.
static CASE_BYTES: [u64; 256] = {
    let mut table = [0u64; 256];
    let mut b = 0;
    while b < 256 {
        let mut i = 0;
        while i < 8 {
            if (b >> i) & 1 == 1 {
                table[b] |= 0x20 << (8 * i);
            }
            i += 1;
        }
        b += 1;
    }
    table
};

/// [`copy_line_lowercase`] in 8-byte words, for any target: each word's uppercase letters ([`upper_bits`]) under
/// the mask's eight bits ([`CASE_BYTES`]) get 0x20.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
#[inline(always)]
fn copy_line_lowercase_words(src: &[u8], n: usize, mask: LineMask, out: &mut Out<'_>) {
    let words = n.div_ceil(8);
    assert!(n <= 128 && src.len() >= words * 8 && out.buf.len() - out.at >= words * 8);
    // SAFETY: `src` and `out.buf[at..]` both have `words · 8` bytes (asserted just above; `at ≤ buf.len()` by
    // `Out`'s invariant); one is a `&` and the other a `&mut`, so they do not overlap; `MaybeUninit<u8>` has the
    // layout of `u8`; the reads and writes are unaligned ones.
    unsafe {
        let dst = out.buf.as_mut_ptr().add(out.at).cast::<u8>();
        for k in 0..words {
            let x = u64::from_le(ptr::read_unaligned(src.as_ptr().add(8 * k).cast::<u64>()));
            let bits = (mask[k / 8] >> (8 * (k % 8))) & 0xff;
            let lower = x | (upper_bits(x) & CASE_BYTES[bits as usize]);
            ptr::write_unaligned(dst.add(8 * k).cast::<u64>(), lower.to_le());
        }
    }
    out.at += n;
}

/// Copies `src` into `dst` (of the same length).
#[inline(always)]
fn write_slice(dst: &mut [MaybeUninit<u8>], src: &[u8]) {
    assert_eq!(dst.len(), src.len());
    let n = src.len();
    let (d, s) = (dst.as_mut_ptr().cast::<u8>(), src.as_ptr());
    // SAFETY: `d` and `s` are valid for `n` bytes (checked just above) and do not overlap (a `&mut` and a `&`);
    // `MaybeUninit<u8>` has the layout of `u8`.
    unsafe { ptr::copy_nonoverlapping(s, d, n) }
}

/// The cursors of one read: bases, the next exception run (its index and `[start, end)`, `(MAX, MAX)` past the
/// last) and the next lowercase run (likewise), all moving forward only.
struct ResidueWriter<'g, 'b> {
    genome: &'g Genome,
    bases: BaseCursor<'b>,
    exc: usize,
    exc_span: (u64, u64),
    case: usize,
    case_span: (u64, u64),
}

const NONE: (u64, u64) = (u64::MAX, u64::MAX);

/// Run `k` of `runs`, or [`NONE`] past the last.
fn run_or_none(runs: &RunList, k: usize) -> (u64, u64) {
    if k < runs.len() {
        runs.get(k)
    } else {
        NONE
    }
}

impl ResidueWriter<'_, '_> {
    fn exc_span(&self) -> (u64, u64) {
        run_or_none(&self.genome.exceptions.runs, self.exc)
    }

    fn case_span(&self) -> (u64, u64) {
        run_or_none(&self.genome.case.runs, self.case)
    }

    /// Writes residues `[r, r + n)` (`n > 0`, all on one line) in case: the bases or exception bytes, then the
    /// lowercase runs that meet them. Calls come in increasing, contiguous residue order. With `WIDE` (only in
    /// [`Genome::write_lines_avx2`], on a CPU with AVX2) the common line goes in 32-byte moves.
    #[inline(always)]
    fn line<const WIDE: bool>(&mut self, r: u64, n: u64, out: &mut Out<'_>) {
        let at = out.at;
        let end = r + n;
        if end <= self.exc_span.0 {
            // The common case: no exception run meets these residues, they are bases.
            #[cfg(target_arch = "x86_64")]
            if WIDE {
                if let Some(src) = self.bases.padded_line(n as usize, 32, out) {
                    self.bases.skip(n as usize);
                    if self.case_span.0 < end && n <= 128 {
                        let mask = self.case_mask(r, end);
                        // SAFETY: `WIDE` is set only inside `write_lines_avx2`, which runs only where the CPU
                        // has AVX2 (`wide_lines`); `src` holds `n` rounded up to 32 bytes.
                        unsafe { copy_line_lowercase_avx2(src, n as usize, mask, out) };
                        return;
                    }
                    // SAFETY: as above.
                    unsafe { copy_line_avx2(src, n as usize, out) };
                    if self.case_span.0 < end {
                        self.apply_case(r, end, at, out);
                    }
                    return;
                }
            }
            if let Some(src) = self.bases.padded_line(n as usize, 16, out) {
                self.bases.skip(n as usize);
                if self.case_span.0 < end && n <= 128 {
                    let mask = self.case_mask(r, end);
                    copy_line_lowercase(src, n as usize, mask, out);
                    return;
                }
                // No lowercase run meets the line, or it is too wide for a mask: lowercased below.
                copy_line(src, n as usize, out);
            } else {
                self.bases.take(n as usize, out);
            }
        } else {
            self.with_exceptions(r, end, out);
        }
        if self.case_span.0 < end {
            self.apply_case(r, end, at, out);
        }
    }

    /// The lowercase residues of `[r0, r1)` (`r1 - r0 ≤ 128`) as bits `0..r1 - r0` of a [`LineMask`]; the cursor
    /// stays on a run that goes on past `r1`. Lines up to 64 residues wide (most FASTA) build it in one `u64`:
    /// `u128` shifts by a variable amount cost branches, and took a sixth of atha_chr1's rebuild time.
    #[inline(always)]
    fn case_mask(&mut self, r0: u64, r1: u64) -> LineMask {
        if r1 - r0 <= 64 {
            // Bits `[a, b)`, `0 ≤ a < b ≤ 64`.
            let m = self.case_bits(r0, r1, |a, b| (u64::MAX >> (64 - b)) & (u64::MAX << a));
            [m, 0]
        } else {
            // Bits `[a, b)`, `0 ≤ a < b ≤ 128`.
            let m = self.case_bits(r0, r1, |a, b| (u128::MAX >> (128 - b)) & (u128::MAX << a));
            [m as u64, (m >> 64) as u64]
        }
    }

    /// The OR of `bits(a, b)` over the lowercase runs that meet `[r0, r1)`, each cut to `[r0 + a, r0 + b)`.
    #[inline(always)]
    fn case_bits<M: Default + std::ops::BitOrAssign>(&mut self, r0: u64, r1: u64, bits: impl Fn(u64, u64) -> M) -> M {
        let mut mask = M::default();
        while self.case_span.0 < r1 {
            let (s, e) = self.case_span;
            mask |= bits(s.max(r0) - r0, e.min(r1) - r0);
            if e > r1 {
                break;
            }
            self.case += 1;
            self.case_span = self.case_span();
        }
        mask
    }

    /// Writes residues `[r, end)` in uppercase, some of them in exception runs.
    fn with_exceptions(&mut self, r: u64, end: u64, out: &mut Out<'_>) {
        let mut pos = r;
        while pos < end {
            let (es, ee) = self.exc_span;
            if pos < es {
                let stop = end.min(es);
                self.bases.take((stop - pos) as usize, out);
                pos = stop;
            } else {
                let stop = end.min(ee);
                out.fill(self.genome.exceptions.byte(self.exc), (stop - pos) as usize);
                pos = stop;
                // Spans end on every run edge, so the cursor meets each run's end exactly.
                if pos == ee {
                    self.exc += 1;
                    self.exc_span = self.exc_span();
                }
            }
        }
    }

    /// Lowercases the residues of `[r0, r1)` (one line's, just written from output byte `at` on) that lie in
    /// lowercase runs; the cursor stays on a run that goes on past `r1`.
    fn apply_case(&mut self, r0: u64, r1: u64, at: usize, out: &mut Out<'_>) {
        while self.case_span.0 < r1 {
            let (s, e) = self.case_span;
            let (a, b) = (s.max(r0), e.min(r1));
            lowercase(out.written_mut(at + (a - r0) as usize, at + (b - r0) as usize));
            if e > r1 {
                break;
            }
            self.case += 1;
            self.case_span = self.case_span();
        }
    }
}

/// 0x20 in each byte of `x` that is an ASCII uppercase letter, 0 in the others (SWAR).
#[inline(always)]
fn upper_bits(x: u64) -> u64 {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let low7 = x & !HIGH;
    // High bit of each byte: ≥ 'A' and ≤ 'Z' on the low seven bits, and the byte itself below 0x80.
    let ge_a = low7 + ONES * (0x80 - u64::from(b'A'));
    let gt_z = low7 + ONES * (0x7f - u64::from(b'Z'));
    (ge_a & !gt_z & !x & HIGH) >> 2
}

/// ASCII-lowercases the bytes of one 64-bit word.
#[inline(always)]
fn lower_word(x: u64) -> u64 {
    x | upper_bits(x)
}

/// ASCII-lowercases `bytes` in place, eight at a time, with an overlapping last word instead of a byte-at-a-time
/// tail (the ranges are short: a median of 24 bytes in atha_chr1, cut further at line ends; lowercasing a byte
/// twice is lowercasing it once).
fn lowercase(bytes: &mut [u8]) {
    let n = bytes.len();
    if n >= 8 {
        let mut i = 0;
        while i + 8 < n {
            let w: &mut [u8; 8] = (&mut bytes[i..i + 8]).try_into().expect("8 bytes");
            *w = lower_word(u64::from_le_bytes(*w)).to_le_bytes();
            i += 8;
        }
        let w: &mut [u8; 8] = (&mut bytes[n - 8..]).try_into().expect("8 bytes");
        *w = lower_word(u64::from_le_bytes(*w)).to_le_bytes();
    } else {
        bytes.make_ascii_lowercase();
    }
}

impl Genome {
    /// Base range `[a, b)` of the nucleotide stream that original bytes `[off, off + len)` need.
    pub fn base_range(&self, off: u64, len: u64) -> (u64, u64) {
        let end = off.saturating_add(len).min(self.total_len());
        if off >= end {
            return (0, 0);
        }
        let r0 = self.layout.residue_at_or_after(off);
        let r1 = self.layout.residue_at_or_after(end);
        (self.exceptions.bases_before(r0), self.exceptions.bases_before(r1))
    }

    /// Fills `out` with original bytes from `off`; returns how many were written (fewer at the end of the file).
    ///
    /// `fetch(a, buf)` must fill `buf` with bases `[a, a + buf.len())` of the nucleotide stream (uppercase
    /// `A C G T`); it is called at most once per read, for exactly the bases the read needs. Its errors are
    /// passed through.
    pub fn read_at<E>(
        &self,
        off: u64,
        out: &mut [u8],
        fetch: impl FnOnce(u64, &mut [u8]) -> Result<(), E>,
    ) -> Result<usize, E> {
        let len = (out.len() as u64).min(self.total_len().saturating_sub(off));
        let (b0, b1) = self.base_range(off, len);
        let mut bases = vec![0u8; (b1 - b0) as usize];
        if !bases.is_empty() {
            fetch(b0, &mut bases)?;
        }
        let chunks = [&bases[..]];
        // The bases were fetched for exactly this read, so they always fit.
        Ok(self.write_at(off, as_uninit(out), BaseChunks::new(b0, &chunks)).unwrap_or(0))
    }

    /// Writes original bytes from `off` into `out` (initialised or not) in one pass, taking the bases from
    /// `bases`, which must hold exactly [`Genome::base_range`]`(off, out.len())`. Returns `n`, the bytes
    /// written: `out[..n]` is initialised (`n < out.len()` only at the end of the file). Refused, with nothing
    /// written, when `bases` is not that range.
    pub fn write_at(&self, off: u64, out: &mut [MaybeUninit<u8>], bases: BaseChunks<'_>) -> Result<usize, DecodeError> {
        self.write_at_with(off, out, bases, true)
    }

    /// [`Genome::write_at`], with the AVX2 line copies only if `wide` (and the CPU has them): the tests read every
    /// case both ways.
    pub(crate) fn write_at_with(
        &self,
        off: u64,
        out: &mut [MaybeUninit<u8>],
        bases: BaseChunks<'_>,
        wide: bool,
    ) -> Result<usize, DecodeError> {
        let len = (out.len() as u64).min(self.total_len().saturating_sub(off));
        let (b0, b1) = self.base_range(off, len);
        if bases.len() != b1 - b0 || (b1 > b0 && bases.start != b0) {
            return Err(DecodeError::Invalid {
                what: "genome read bases",
                detail: format!(
                    "bytes [{off}, +{len}) need bases [{b0}, {b1}), given {} from {}",
                    bases.len(),
                    bases.start
                ),
            });
        }
        let Some(start) = self.layout.locate(off).filter(|_| len > 0) else { return Ok(0) };
        let out = &mut out[..len as usize];
        #[cfg(target_arch = "x86_64")]
        if wide && wide_lines() {
            // SAFETY: `wide_lines` found AVX2 on this CPU.
            return Ok(unsafe { self.write_lines_avx2(off, start, out, bases) });
        }
        let _ = wide;
        Ok(self.write_lines::<false>(off, start, out, bases))
    }

    /// [`Genome::write_lines`] with the common line in 32-byte moves.
    ///
    /// # Safety
    /// The CPU must have AVX2 ([`wide_lines`]).
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn write_lines_avx2(
        &self,
        off: u64,
        start: super::layout::Position,
        out: &mut [MaybeUninit<u8>],
        bases: BaseChunks<'_>,
    ) -> usize {
        self.write_lines::<true>(off, start, out, bases)
    }

    /// Writes all of `out` (the read's bytes from `off`, which lies at `start`, up to the end of the file) from
    /// `bases` (checked by [`Genome::write_at`]); returns the bytes written. Inlined into each of its callers so
    /// that the line copies are compiled with their target's instructions.
    #[inline(always)]
    fn write_lines<const WIDE: bool>(
        &self,
        off: u64,
        start: super::layout::Position,
        out: &mut [MaybeUninit<u8>],
        bases: BaseChunks<'_>,
    ) -> usize {
        let len = out.len();
        let r0 = self.layout.residue_at_or_after(off);
        let mut writer = ResidueWriter {
            genome: self,
            bases: BaseCursor { chunks: bases.chunks, chunk: 0, pos: 0 },
            exc: self.exceptions.runs.first_ending_after(r0),
            exc_span: NONE,
            case: self.case.runs.first_ending_after(r0),
            case_span: NONE,
        };
        writer.exc_span = writer.exc_span();
        writer.case_span = writer.case_span();
        let mut out = Out { buf: out, at: 0 };

        let runs = self.layout.runs();
        let (mut run, mut line, mut col) = (start.run, start.line, start.col);
        while out.at < len {
            let r = &runs[run];
            let want = (len - out.at) as u64;
            if r.kind == LineKind::Sequence {
                (line, col) = self.write_sequence_lines::<WIDE>(run, line, col, want, &mut writer, &mut out);
            } else if col < r.width {
                // Column 0 is the '>', column c ≥ 1 is text byte c − 1.
                let n = (r.width - col).min(want);
                let text = self.layout.header_of(run);
                let mut from = col;
                if col == 0 {
                    out.put(b">");
                    from = 1;
                }
                out.put(&text[(from - 1) as usize..(col + n - 1) as usize]);
                col += n;
                continue;
            } else {
                let t = (col - r.width) as usize;
                let term = &r.term.bytes()[t..];
                let n = term.len().min(want as usize);
                out.put(&term[..n]);
                col += n as u64;
                if col == r.line_bytes() {
                    (line, col) = (line + 1, 0);
                }
            }
            if line == r.count {
                (run, line, col) = (run + 1, 0, 0);
            }
        }
        out.at
    }

    /// Writes sequence run `run` from line `line`, column `col`, as much of it as fits in `want` bytes, line by
    /// line: each line's residues in case through `writer`, then its terminator. Returns the line and column
    /// after them (`line == count` at the end of the run).
    #[inline(always)]
    fn write_sequence_lines<const WIDE: bool>(
        &self,
        run: usize,
        mut line: u64,
        mut col: u64,
        want: u64,
        writer: &mut ResidueWriter<'_, '_>,
        out: &mut Out<'_>,
    ) -> (u64, u64) {
        let r = &self.layout.runs()[run];
        let (width, term) = (r.width, r.term);
        // At least 1: the layout refuses a line without content and terminator.
        let line_bytes = r.line_bytes();
        let mut left = ((r.count - line) * line_bytes - col).min(want);
        let mut residue = self.layout.run_residue_start(run) + line * width + col.min(width);
        // A first line entered part way: the rest of its residues, then (what the read wants of) its terminator.
        if col > 0 {
            if col < width {
                let n = (width - col).min(left);
                writer.line::<WIDE>(residue, n, out);
                (residue, col, left) = (residue + n, col + n, left - n);
            }
            if left > 0 {
                let t = (col - width) as usize;
                let n = (term.byte_len() as usize - t).min(left as usize);
                out.put(&term.bytes()[t..t + n]);
                col += n as u64;
                left -= n as u64;
                if col == line_bytes {
                    (line, col) = (line + 1, 0);
                }
            }
        }
        // Whole lines (`col` is 0 here unless `left` is).
        let full = left / line_bytes;
        if full > 0 {
            if width > 0 {
                for _ in 0..full {
                    writer.line::<WIDE>(residue, width, out);
                    out.put_term(term);
                    residue += width;
                }
            } else {
                for _ in 0..full {
                    out.put_term(term);
                }
            }
            line += full;
            left -= full * line_bytes;
        }
        // A last line cut by the end of the read: some of its residues, maybe part of its terminator.
        if left > 0 {
            let n = width.min(left);
            if n > 0 {
                writer.line::<WIDE>(residue, n, out);
            }
            let t = (left - n) as usize;
            out.put(&term.bytes()[..t]);
            col = left;
        }
        (line, col)
    }

    /// The whole original file from its nucleotide stream; `None` if `bases` is not [`Genome::bases`] long.
    pub fn reconstruct(&self, bases: &[u8]) -> Option<Vec<u8>> {
        if bases.len() as u64 != self.bases() {
            return None;
        }
        let total = usize::try_from(self.total_len()).ok()?;
        let mut out = Vec::with_capacity(total);
        let chunks = [bases];
        let n = self.write_at(0, &mut out.spare_capacity_mut()[..total], BaseChunks::new(0, &chunks)).ok()?;
        // SAFETY: `write_at` initialised the first `n` bytes of the spare capacity (its contract), and
        // `n ≤ total ≤ capacity`.
        unsafe { out.set_len(n) };
        Some(out)
    }
}

/// `out` as possibly-uninitialised bytes, for [`Genome::write_at`].
pub fn as_uninit(out: &mut [u8]) -> &mut [MaybeUninit<u8>] {
    // SAFETY: `MaybeUninit<u8>` has the layout of `u8`; the writer only ever writes initialised bytes through
    // it, so `out` stays initialised for the caller.
    unsafe { &mut *(out as *mut [u8] as *mut [MaybeUninit<u8>]) }
}

#[cfg(test)]
#[path = "read_tests.rs"]
mod tests;
