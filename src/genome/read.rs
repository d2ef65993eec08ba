//! Original bytes `[off, off + len)` from the structure and a source of bases.
//!
//! A read locates its first byte with one binary search over the line runs, finds the residue range it covers
//! and the base range behind that (one binary search in the exceptions), asks the caller for exactly those bases
//! in one call, and then writes line by line: header text, residues (bases, exception bytes, lowercase runs
//! applied with cursors that only move forward), terminators. Every line holds at least one byte, so the work
//! is `O(len + log(structure))` wherever the read lands.

use super::layout::LineKind;
use super::Genome;

/// Where a read's residues come from: the exception and case cursors and the fetched bases.
struct ResidueWriter<'a> {
    genome: &'a Genome,
    /// Bases `[base0, base0 + bases.len())`, fetched up front.
    bases: &'a [u8],
    base0: u64,
    /// First exception run that may still meet the residues being written.
    exc: usize,
    /// First lowercase run that may still meet them.
    case: usize,
}

impl ResidueWriter<'_> {
    /// Writes residues `[r0, r0 + out.len())` into `out`. Calls come in increasing residue order.
    fn write(&mut self, r0: u64, out: &mut [u8]) {
        let r1 = r0 + out.len() as u64;
        let exc = &self.genome.exceptions;
        let mut pos = r0;
        while pos < r1 {
            let at = (pos - r0) as usize;
            let next = if self.exc < exc.runs.len() { exc.runs.get(self.exc) } else { (u64::MAX, u64::MAX) };
            if next.0 > pos {
                // Bases up to the next exception run (or the end of this piece).
                let end = next.0.min(r1);
                let b = exc.bases_before_run(self.exc, pos) - self.base0;
                let n = (end - pos) as usize;
                out[at..at + n].copy_from_slice(&self.bases[b as usize..b as usize + n]);
                pos = end;
            } else {
                let end = next.1.min(r1);
                out[at..(end - r0) as usize].fill(exc.byte(self.exc));
                pos = end;
                if next.1 <= r1 {
                    self.exc += 1;
                }
            }
        }
        let case = &self.genome.case.runs;
        while self.case < case.len() {
            let (s, e) = case.get(self.case);
            if s >= r1 {
                break;
            }
            let (a, b) = (s.max(r0), e.min(r1));
            out[(a - r0) as usize..(b - r0) as usize].make_ascii_lowercase();
            if e > r1 {
                break;
            }
            self.case += 1;
        }
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
        let total = self.total_len();
        let len = (out.len() as u64).min(total.saturating_sub(off)) as usize;
        let Some(start) = self.layout.locate(off).filter(|_| len > 0) else { return Ok(0) };
        let (b0, b1) = self.base_range(off, len as u64);
        let mut bases = vec![0u8; (b1 - b0) as usize];
        if !bases.is_empty() {
            fetch(b0, &mut bases)?;
        }
        let r0 = self.layout.residue_at_or_after(off);
        let mut writer = ResidueWriter {
            genome: self,
            bases: &bases,
            base0: b0,
            exc: self.exceptions.runs.first_ending_after(r0),
            case: self.case.runs.first_ending_after(r0),
        };

        let runs = self.layout.runs();
        let (mut run, mut line, mut col) = (start.run, start.line, start.col);
        let mut done = 0usize;
        let mut residues = Vec::new();
        while done < len {
            let r = &runs[run];
            if r.kind == LineKind::Sequence {
                let (n, at_line, at_col) =
                    self.write_sequence_lines(run, line, col, &mut out[done..len], &mut writer, &mut residues);
                done += n;
                (line, col) = (at_line, at_col);
                if line == r.count {
                    (line, col) = (0, 0);
                    run += 1;
                }
                continue;
            }
            let want = len - done;
            if col < r.width {
                // Column 0 is the '>', column c ≥ 1 is text byte c − 1.
                let n = ((r.width - col) as usize).min(want);
                let dst = &mut out[done..done + n];
                let text = self.layout.header_of(run);
                let mut k = 0;
                if col == 0 {
                    dst[0] = b'>';
                    k = 1;
                }
                let from = (col as usize + k).saturating_sub(1);
                dst[k..].copy_from_slice(&text[from..from + n - k]);
                done += n;
                col += n as u64;
                continue;
            }
            let term = r.term.bytes();
            let t = (col - r.width) as usize;
            let n = (term.len() - t).min(len - done);
            out[done..done + n].copy_from_slice(&term[t..t + n]);
            done += n;
            col = 0;
            line += 1;
            if line == r.count {
                line = 0;
                run += 1;
            }
        }
        Ok(len)
    }

    /// Writes sequence run `run` from line `line`, column `col` into `out`, as much of it as fits: the residues
    /// those bytes hold in one call of `writer` (into `residues`), so that the exception and case cursors run
    /// once per read rather than once per line, then line by line with the terminators. Returns the bytes
    /// written and the line and column after them (`line == count` at the end of the run).
    fn write_sequence_lines(
        &self,
        run: usize,
        line: u64,
        col: u64,
        out: &mut [u8],
        writer: &mut ResidueWriter<'_>,
        residues: &mut Vec<u8>,
    ) -> (usize, u64, u64) {
        let r = &self.layout.runs()[run];
        let term = r.term.bytes();
        // At least 1: the layout refuses a line without content and terminator.
        let line_bytes = r.width + term.len() as u64;
        let take = ((r.count - line) * line_bytes - col).min(out.len() as u64);
        let (end_line, end_col) = (line + (col + take) / line_bytes, (col + take) % line_bytes);
        let run_start = self.layout.run_residue_start(run);
        let first = run_start + line * r.width + col.min(r.width);
        let last = run_start + end_line * r.width + end_col.min(r.width);
        residues.clear();
        residues.resize((last - first) as usize, 0);
        writer.write(first, residues);

        let take = take as usize;
        let (mut done, mut used, mut line, mut col) = (0usize, 0usize, line, col);
        while done < take {
            if col < r.width {
                let n = ((r.width - col) as usize).min(take - done);
                out[done..done + n].copy_from_slice(&residues[used..used + n]);
                used += n;
                done += n;
                col += n as u64;
            } else {
                let t = (col - r.width) as usize;
                let n = (term.len() - t).min(take - done);
                out[done..done + n].copy_from_slice(&term[t..t + n]);
                done += n;
                col += n as u64;
                if col == line_bytes {
                    col = 0;
                    line += 1;
                }
            }
        }
        (done, line, col)
    }

    /// The whole original file from its nucleotide stream; `None` if `bases` is not [`Genome::bases`] long.
    pub fn reconstruct(&self, bases: &[u8]) -> Option<Vec<u8>> {
        if bases.len() as u64 != self.bases() {
            return None;
        }
        let mut out = vec![0u8; usize::try_from(self.total_len()).ok()?];
        let n = self
            .read_at(0, &mut out, |a, buf: &mut [u8]| {
                buf.copy_from_slice(&bases[a as usize..a as usize + buf.len()]);
                Ok::<(), ()>(())
            })
            .ok()?;
        out.truncate(n);
        Some(out)
    }
}
