//! Original bytes `[off, off + len)` from the structure and the bases the read covers.
//!
//! A read locates its first byte with one binary search over the line runs, finds the residue range it covers
//! and the base range behind that (one binary search in the exceptions), and then writes the original bytes
//! straight into the caller's buffer, front to back: header text; per sequence line its residues in uppercase
//! (a `memcpy` out of the caller's base chunks, cut only where an exception run starts or ends, which is
//! written as a fill of its byte) and its terminator, by line arithmetic. The lowercase runs are then applied by
//! range over the bytes just written (still in cache): line arithmetic maps a run's first and last residue to
//! their bytes and one vectorised pass lowercases what lies between, which leaves terminators alone. Nothing is
//! staged in a residue buffer and no buffer is zero-filled first. Every line holds at least one byte, so the
//! work is `O(len + log(structure))` wherever the read lands.
//!
//! The bases come as [`BaseChunks`]: consecutive slices, e.g. decoded blocks shared out of a cache, so that a
//! read copies every byte once, from the cached block into the reply. The output may be uninitialised memory
//! (a reply buffer's spare capacity): the writer only ever writes it, front to back, and reports how far.

use std::mem::MaybeUninit;
use std::ptr;

use super::layout::LineKind;
use super::Genome;
use crate::error::DecodeError;

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
/// bytes.
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

    fn put_byte(&mut self, byte: u8) {
        self.next(1)[0].write(byte);
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

    /// Writes `lines` whole lines: `width` bases, then `term`, each (the caller checked that no exception run
    /// meets them).
    fn full_lines(&mut self, lines: usize, width: usize, term: &[u8], out: &mut Out<'_>) {
        let dst = out.next(lines * (width + term.len()));
        let mut at = 0;
        for _ in 0..lines {
            let mut need = width;
            while need > 0 {
                let run = self.next_run(need);
                write_slice(&mut dst[at..at + run.len()], run);
                at += run.len();
                need -= run.len();
            }
            write_slice(&mut dst[at..at + term.len()], term);
            at += term.len();
        }
    }
}

/// Copies `src` into `dst` (of the same length). (Inline 16-byte moves for line-sized copies instead of `memcpy`
/// measured no faster in examples/serve_bench.)
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
/// last) and the next lowercase run, all moving forward only.
struct ResidueWriter<'g, 'b> {
    genome: &'g Genome,
    bases: BaseCursor<'b>,
    exc: usize,
    exc_span: (u64, u64),
    case: usize,
}

const NONE: (u64, u64) = (u64::MAX, u64::MAX);

impl ResidueWriter<'_, '_> {
    fn exc_span(&self) -> (u64, u64) {
        let runs = &self.genome.exceptions.runs;
        if self.exc < runs.len() {
            runs.get(self.exc)
        } else {
            NONE
        }
    }

    /// Writes residues `[r, r + n)` in uppercase (the case runs are applied afterwards, by range); calls come
    /// in increasing, contiguous residue order.
    fn write(&mut self, r: u64, n: u64, out: &mut Out<'_>) {
        let end = r + n;
        if end <= self.exc_span.0 {
            // The common case: no exception run meets these residues, they are bases.
            self.bases.take(n as usize, out);
            return;
        }
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

    /// Lowercases the residues of `[r0, r1)` that lie in lowercase runs, in `out`, where they were written as
    /// lines of `place` (residues of one sequence run: the bytes in between are residues and terminators, and
    /// lowercasing leaves terminators alone).
    fn apply_case(&mut self, r0: u64, r1: u64, out: &mut Out<'_>, place: &LinePlacement) {
        let runs = &self.genome.case.runs;
        while self.case < runs.len() {
            let (s, e) = runs.get(self.case);
            if s >= r1 {
                break;
            }
            let (a, b) = (s.max(r0), e.min(r1));
            let (from, to) = place.span(a, b);
            lowercase(out.written_mut(from, to));
            if e > r1 {
                break;
            }
            self.case += 1;
        }
    }
}

/// Where the residues of one sequence run landed in a read's output: residue `run_residue + k` at byte
/// `k + (k / width) · term_len - skew` (`width > 0`).
struct LinePlacement {
    run_residue: u64,
    width: u64,
    term_len: u64,
    /// The run byte of the first byte written of this run, less its place in the output (modulo 2⁶⁴: the run
    /// may start after the read's first byte).
    skew: u64,
}

impl LinePlacement {
    /// The output bytes `[from, to)` from residue `a` to the residue before `b` (`a < b`, both in the run):
    /// one division, and none more when the range stays on one line (runs are short, lines tens of bytes).
    fn span(&self, a: u64, b: u64) -> (usize, usize) {
        let k = a - self.run_residue;
        let line = k / self.width;
        let col = k - line * self.width;
        let len = b - a;
        let lines_crossed = if col + len <= self.width { 0 } else { (col + len - 1) / self.width };
        let from = (k + line * self.term_len).wrapping_sub(self.skew);
        (from as usize, (from + len + lines_crossed * self.term_len) as usize)
    }
}

/// ASCII-lowercases `bytes` eight at a time (SWAR): the ranges are short (a median of 24 bytes in atha_chr1),
/// where the standard library's vector loop leaves almost everything to its byte-at-a-time tail.
fn lowercase(bytes: &mut [u8]) {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut words = bytes.chunks_exact_mut(8);
    for w in &mut words {
        let x = u64::from_le_bytes((&*w).try_into().expect("8 bytes"));
        let low7 = x & !HIGH;
        // High bit of each byte: ≥ 'A' and ≤ 'Z' on the low seven bits, and the byte itself below 0x80.
        let ge_a = low7 + ONES * (0x80 - u64::from(b'A'));
        let gt_z = low7 + ONES * (0x7f - u64::from(b'Z'));
        let upper = ge_a & !gt_z & !x & HIGH;
        w.copy_from_slice(&(x | (upper >> 2)).to_le_bytes());
    }
    words.into_remainder().make_ascii_lowercase();
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
        let len = len as usize;
        let r0 = self.layout.residue_at_or_after(off);
        let mut writer = ResidueWriter {
            genome: self,
            bases: BaseCursor { chunks: bases.chunks, chunk: 0, pos: 0 },
            exc: self.exceptions.runs.first_ending_after(r0),
            exc_span: NONE,
            case: self.case.runs.first_ending_after(r0),
        };
        writer.exc_span = writer.exc_span();
        let mut out = Out { buf: &mut out[..len], at: 0 };

        let runs = self.layout.runs();
        let (mut run, mut line, mut col) = (start.run, start.line, start.col);
        while out.at < len {
            let r = &runs[run];
            let want = (len - out.at) as u64;
            if r.kind == LineKind::Sequence {
                (line, col) = self.write_sequence_lines(run, line, col, want, &mut writer, &mut out);
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
        Ok(out.at)
    }

    /// Writes sequence run `run` from line `line`, column `col`, as much of it as fits in `want` bytes: each
    /// line's residues in uppercase through `writer`, then its terminator; then lowercases the case runs that
    /// meet those residues, by range (line arithmetic maps a residue to its byte). Returns the line and column
    /// after them (`line == count` at the end of the run).
    fn write_sequence_lines(
        &self,
        run: usize,
        mut line: u64,
        mut col: u64,
        want: u64,
        writer: &mut ResidueWriter<'_, '_>,
        out: &mut Out<'_>,
    ) -> (u64, u64) {
        let r = &self.layout.runs()[run];
        let term = r.term.bytes();
        // At least 1: the layout refuses a line without content and terminator.
        let line_bytes = r.line_bytes();
        let mut left = ((r.count - line) * line_bytes - col).min(want);
        let run_residue = self.layout.run_residue_start(run);
        let first = run_residue + line * r.width + col.min(r.width);
        // Where this call's first byte lies in the run, and in `out`.
        let (run_at, out_at) = (line * line_bytes + col, out.at);
        let mut residue = first;
        while left > 0 {
            if col == 0 && r.width > 0 && left >= line_bytes {
                // Whole lines up to the next exception run: bases and terminators, nothing else to look at.
                let clear = writer.exc_span.0.saturating_sub(residue) / r.width;
                let full = (left / line_bytes).min(clear);
                if full > 0 {
                    writer.bases.full_lines(full as usize, r.width as usize, term, out);
                    residue += full * r.width;
                    left -= full * line_bytes;
                    line += full;
                    continue;
                }
            }
            if col < r.width {
                let n = (r.width - col).min(left);
                writer.write(residue, n, out);
                residue += n;
                col += n;
                left -= n;
            }
            if left > 0 && col >= r.width {
                let t = (col - r.width) as usize;
                let n = (term.len() - t).min(left as usize);
                if n == 1 {
                    out.put_byte(term[t]);
                } else {
                    out.put(&term[t..t + n]);
                }
                col += n as u64;
                left -= n as u64;
                if col == line_bytes {
                    col = 0;
                    line += 1;
                }
            }
        }
        if residue > first {
            let width = r.width;
            let term_len = term.len() as u64;
            // `run_at` is the run byte of `out_at`: residue `k` of the run sits at run byte `k + (k / width) ·
            // term_len`.
            let place = LinePlacement { run_residue, width, term_len, skew: run_at.wrapping_sub(out_at as u64) };
            writer.apply_case(first, residue, out, &place);
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
