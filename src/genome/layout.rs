//! The line layout of a FASTA file: every line as a header or a sequence line, with its width and terminator.
//!
//! A file is a list of **line runs**. A run is `count` consecutive lines of one kind, one content width (bytes
//! before the terminator) and one terminator. A regular record of `L` bases at width `W` is three runs — its header,
//! `floor(L/W)` full lines, one short line — however long it is. Everything irregular is still exact, just more
//! runs: a line width that changes inside a record starts a new run, a blank line is a sequence line of width 0,
//! a CRLF line in an LF file is a run of its own, and a last line without a newline has [`Term::None`].
//!
//! Header lines always form runs of one line; their text (without the leading `>`) is kept in order in
//! [`Layout::headers`]. Residues (the bytes of sequence lines) are numbered from 0 across the whole file.
//!
//! The per-run prefix sums (`byte_start`, `residue_start`, `header_start`) make an original byte offset map to
//! its run by one binary search and to its line and column by one division, so locating a read costs
//! `O(log runs)` wherever it lands.

use crate::error::DecodeError;

/// Largest original file the model describes (the archive's `total_len` bound, FORMAT.md §1).
pub const MAX_TOTAL_LEN: u64 = 1 << 40;

/// How a line ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Term {
    /// `\n`.
    Lf,
    /// `\r\n`.
    CrLf,
    /// Nothing: the file's last line has no newline. Only the last run may have it, with one line.
    None,
}

impl Term {
    /// Bytes the terminator occupies.
    pub fn byte_len(self) -> u64 {
        match self {
            Term::Lf => 1,
            Term::CrLf => 2,
            Term::None => 0,
        }
    }

    /// The terminator's bytes.
    pub fn bytes(self) -> &'static [u8] {
        match self {
            Term::Lf => b"\n",
            Term::CrLf => b"\r\n",
            Term::None => b"",
        }
    }
}

/// What the lines of a run hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LineKind {
    /// A `>` line; its text is the next entry of [`Layout::headers`].
    Header,
    /// Residues (possibly none: a blank line).
    Sequence,
}

/// `count` consecutive lines of the same kind, content width and terminator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LineRun {
    pub kind: LineKind,
    /// Content bytes per line, terminator excluded. For a header: 1 (`>`) plus its text length.
    pub width: u64,
    /// Lines in the run, at least 1 (exactly 1 for a header).
    pub count: u64,
    pub term: Term,
}

impl LineRun {
    /// Bytes per line, terminator included.
    pub fn line_bytes(&self) -> u64 {
        self.width + self.term.byte_len()
    }
}

/// Where an original byte offset lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Position {
    /// Index of the run.
    pub run: usize,
    /// Line inside the run.
    pub line: u64,
    /// Byte inside the line (`width ≤ col` means inside the terminator).
    pub col: u64,
}

/// A validated line layout with its prefix sums.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    runs: Vec<LineRun>,
    headers: Vec<Vec<u8>>,
    /// Original byte offset where run `i` starts; one extra entry holds the total length.
    byte_start: Vec<u64>,
    /// Residue index where run `i` starts; one extra entry holds the residue count.
    residue_start: Vec<u64>,
    /// Header index of run `i` if it is a header (count of header runs before it).
    header_start: Vec<u64>,
}

impl Layout {
    /// Bytes this layout holds on the heap (what keeping it open costs).
    pub fn heap_bytes(&self) -> u64 {
        let headers: usize = self.headers.iter().map(|h| h.capacity() + std::mem::size_of::<Vec<u8>>()).sum();
        let words = self.byte_start.capacity() + self.residue_start.capacity() + self.header_start.capacity();
        (self.runs.capacity() * std::mem::size_of::<LineRun>() + headers + words * 8) as u64
    }

    /// Checks `runs` against `headers` and builds the prefix sums.
    ///
    /// Refused: a run of 0 lines, a header run of more than one line or whose width is not `1 + text length`, a
    /// header count that differs from the header runs, [`Term::None`] anywhere but a one-line last run (or on an
    /// empty line, which could not be told from a missing line), and totals above [`MAX_TOTAL_LEN`].
    pub fn new(runs: Vec<LineRun>, headers: Vec<Vec<u8>>) -> Result<Layout, DecodeError> {
        let invalid = |detail: String| DecodeError::Invalid { what: "genome line run", detail };
        let mut byte_start = Vec::with_capacity(runs.len() + 1);
        let mut residue_start = Vec::with_capacity(runs.len() + 1);
        let mut header_start = Vec::with_capacity(runs.len() + 1);
        let (mut bytes, mut residues, mut nheader) = (0u64, 0u64, 0u64);
        for (i, run) in runs.iter().enumerate() {
            byte_start.push(bytes);
            residue_start.push(residues);
            header_start.push(nheader);
            if run.count == 0 {
                return Err(invalid(format!("run {i} has 0 lines")));
            }
            if run.term == Term::None && (i + 1 != runs.len() || run.count != 1 || run.width == 0) {
                return Err(invalid(format!(
                    "run {i} of {} ({} lines, width {}) has no terminator but is not one non-empty last line",
                    runs.len(),
                    run.count,
                    run.width
                )));
            }
            match run.kind {
                LineKind::Header => {
                    let text = headers.get(nheader as usize).ok_or_else(|| {
                        invalid(format!("header run {i} has no header text (only {} given)", headers.len()))
                    })?;
                    if run.count != 1 || run.width != text.len() as u64 + 1 {
                        return Err(invalid(format!(
                            "header run {i}: {} lines of width {}, header text is {} bytes",
                            run.count,
                            run.width,
                            text.len()
                        )));
                    }
                    nheader += 1;
                }
                LineKind::Sequence => {
                    residues = run
                        .width
                        .checked_mul(run.count)
                        .and_then(|r| r.checked_add(residues))
                        .filter(|&r| r <= MAX_TOTAL_LEN)
                        .ok_or_else(|| invalid(format!("run {i}: residue count overflows")))?;
                }
            }
            bytes = run
                .line_bytes()
                .checked_mul(run.count)
                .and_then(|b| b.checked_add(bytes))
                .filter(|&b| b <= MAX_TOTAL_LEN)
                .ok_or_else(|| invalid(format!("run {i}: original length passes {MAX_TOTAL_LEN}")))?;
        }
        if nheader != headers.len() as u64 {
            return Err(invalid(format!("{} header texts for {nheader} header runs", headers.len())));
        }
        byte_start.push(bytes);
        residue_start.push(residues);
        header_start.push(nheader);
        Ok(Layout { runs, headers, byte_start, residue_start, header_start })
    }

    pub fn runs(&self) -> &[LineRun] {
        &self.runs
    }

    /// Header texts without the leading `>`, in file order.
    pub fn headers(&self) -> &[Vec<u8>] {
        &self.headers
    }

    /// Length of the original file in bytes.
    pub fn total_len(&self) -> u64 {
        *self.byte_start.last().unwrap_or(&0)
    }

    /// Residues (bytes of sequence lines) in the whole file.
    pub fn residues(&self) -> u64 {
        *self.residue_start.last().unwrap_or(&0)
    }

    /// Original byte offset where run `run` starts (`run ≤ runs().len()`).
    pub fn run_byte_start(&self, run: usize) -> u64 {
        self.byte_start[run]
    }

    /// Residue index where run `run` starts (`run ≤ runs().len()`).
    pub fn run_residue_start(&self, run: usize) -> u64 {
        self.residue_start[run]
    }

    /// The header text of header run `run`.
    pub fn header_of(&self, run: usize) -> &[u8] {
        &self.headers[self.header_start[run] as usize]
    }

    /// The run, line and column of original byte `off`; `None` at or past the end.
    pub fn locate(&self, off: u64) -> Option<Position> {
        if off >= self.total_len() {
            return None;
        }
        // The last run whose start is ≤ off; runs are never empty, so it holds `off`.
        let run = self.byte_start.partition_point(|&s| s <= off) - 1;
        let r = &self.runs[run];
        let within = off - self.byte_start[run];
        let lb = r.line_bytes();
        Some(Position { run, line: within / lb, col: within % lb })
    }

    /// Residue index of the first residue at or after original byte `off` (the residue count at the end).
    pub fn residue_at_or_after(&self, off: u64) -> u64 {
        let Some(p) = self.locate(off) else { return self.residues() };
        let r = &self.runs[p.run];
        let base = self.residue_start[p.run];
        match r.kind {
            LineKind::Header => base,
            LineKind::Sequence => base + p.line * r.width + p.col.min(r.width),
        }
    }
}
