//! The byte encoding of a [`Genome`]'s structure (version 1), and its hostile-input decoder.
//!
//! ```text
//! u8[4]  magic "ACXG"
//! u8     version = 1
//! varint total_len          original file length (checked against the layout)
//! varint residues           checked against the layout
//! varint bases              residues − excluded; checked
//! varint header_count
//! varint header_len[header_count]
//! u8     header_text[Σ header_len]          texts without '>', back to back
//! varint run_count
//! run[run_count]:  u8 tag = kind (bit 0: 1 = header) | term << 1 (0 LF, 1 CRLF, 2 none);
//!                  sequence runs only: varint width, varint count − 1
//! varint case_count
//! varint case_gap[case_count]       start − previous run's end (0 for the first run's start)
//! varint case_len[case_count]       length − 1
//! varint exc_count
//! varint exc_gap[exc_count], varint exc_len[exc_count] (as for case), u8 exc_byte[exc_count]
//! u64    xxh3 of all preceding bytes
//! ```
//!
//! Columns rather than records: a gap column, a length column and a byte column each hold values of one kind,
//! which an entropy coder downstream models better. Decoding checks the checksum first, then every count
//! against the bytes left (each element needs at least one byte, so no count can make it allocate more than
//! the input's size), every sum against overflow and [`MAX_TOTAL_LEN`], and the redundant totals against what
//! the layout and masks imply. Errors name the field and the value seen.

use xxhash_rust::xxh3::xxh3_64;

use super::layout::{Layout, LineKind, LineRun, Term, MAX_TOTAL_LEN};
use super::mask::{CaseMask, Exceptions, RunList};
use super::Genome;
use crate::codec::varint;
use crate::error::DecodeError;

pub const MAGIC: &[u8; 4] = b"ACXG";
pub const VERSION: u8 = 1;

/// Magic, version and checksum: the smallest valid encoding is this plus the varints.
const FIXED_BYTES: usize = 4 + 1 + 8;

/// Encodes `g`.
pub fn encode(g: &Genome) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    let layout = &g.layout;
    varint::write(layout.total_len(), &mut out);
    varint::write(layout.residues(), &mut out);
    varint::write(g.bases(), &mut out);
    varint::write(layout.headers().len() as u64, &mut out);
    for h in layout.headers() {
        varint::write(h.len() as u64, &mut out);
    }
    for h in layout.headers() {
        out.extend_from_slice(h);
    }
    varint::write(layout.runs().len() as u64, &mut out);
    for r in layout.runs() {
        let term = match r.term {
            Term::Lf => 0u8,
            Term::CrLf => 1,
            Term::None => 2,
        };
        out.push(u8::from(r.kind == LineKind::Header) | term << 1);
        if r.kind == LineKind::Sequence {
            varint::write(r.width, &mut out);
            varint::write(r.count - 1, &mut out);
        }
    }
    write_runs(&g.case.runs, &mut out);
    write_runs(&g.exceptions.runs, &mut out);
    out.extend_from_slice(g.exceptions.bytes());
    let sum = xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

fn write_runs(runs: &RunList, out: &mut Vec<u8>) {
    varint::write(runs.len() as u64, out);
    let mut prev_end = 0;
    for i in 0..runs.len() {
        let (s, _) = runs.get(i);
        varint::write(s - prev_end, out);
        prev_end = runs.get(i).1;
    }
    for i in 0..runs.len() {
        let (s, e) = runs.get(i);
        varint::write(e - s - 1, out);
    }
}

/// A bounds-checked reader over the body (checksum already verified and removed).
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn varint(&mut self) -> Result<u64, DecodeError> {
        varint::read_at(self.bytes, &mut self.pos)
    }

    /// A varint bounded by `limit`, named `what` in the error.
    fn bounded(&mut self, what: &'static str, limit: u64) -> Result<u64, DecodeError> {
        let value = self.varint()?;
        if value > limit {
            return Err(DecodeError::Limit { what, value, limit });
        }
        Ok(value)
    }

    /// A count of elements of at least `min_bytes` each: bounded by the bytes left.
    fn count(&mut self, what: &'static str, min_bytes: usize) -> Result<usize, DecodeError> {
        let left = (self.bytes.len() - self.pos) / min_bytes;
        Ok(self.bounded(what, left as u64)? as usize)
    }

    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        let left = self.bytes.len() - self.pos;
        if n > left {
            return Err(DecodeError::Truncated { at: self.bytes.len(), needed: n - left });
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
}

/// Decodes structure bytes written by [`encode`]. Never panics and never allocates more than a small multiple of
/// `bytes.len()`, whatever the input.
pub fn decode(bytes: &[u8]) -> Result<Genome, DecodeError> {
    if bytes.len() < FIXED_BYTES {
        return Err(DecodeError::Truncated { at: bytes.len(), needed: FIXED_BYTES - bytes.len() });
    }
    let (body, sum) = bytes.split_at(bytes.len() - 8);
    let expected = u64::from_le_bytes(sum.try_into().expect("split_at gave 8 bytes"));
    let actual = xxh3_64(body);
    if expected != actual {
        return Err(DecodeError::Checksum { expected, actual });
    }
    if &body[..4] != MAGIC {
        return Err(DecodeError::Invalid { what: "genome structure magic", detail: format!("{:02x?}", &body[..4]) });
    }
    if body[4] != VERSION {
        return Err(DecodeError::Invalid {
            what: "genome structure version",
            detail: format!("{} (this reader knows {VERSION})", body[4]),
        });
    }
    let mut r = Reader { bytes: body, pos: 5 };
    let total_len = r.bounded("genome total_len", MAX_TOTAL_LEN)?;
    let residues = r.bounded("genome residues", total_len)?;
    let bases = r.bounded("genome bases", residues)?;

    let nheader = r.count("genome header_count", 1)?;
    let mut header_lens = Vec::with_capacity(nheader);
    for _ in 0..nheader {
        header_lens.push(r.bounded("genome header_len", (body.len() - r.pos) as u64)? as usize);
    }
    let mut headers = Vec::with_capacity(nheader);
    for len in header_lens {
        headers.push(r.take(len)?.to_vec());
    }

    let nrun = r.count("genome run_count", 1)?;
    let mut runs = Vec::with_capacity(nrun);
    let mut header_iter = headers.iter();
    for i in 0..nrun {
        let tag = r.u8()?;
        let term = match tag >> 1 {
            0 => Term::Lf,
            1 => Term::CrLf,
            2 => Term::None,
            _ => {
                return Err(DecodeError::Invalid {
                    what: "genome run tag",
                    detail: format!("run {i}: tag 0x{tag:02x}"),
                })
            }
        };
        let run = if tag & 1 == 1 {
            // A header's width follows from its text; a missing text is reported by Layout::new.
            let width = header_iter.next().map_or(0, |h| h.len() as u64 + 1);
            LineRun { kind: LineKind::Header, width, count: 1, term }
        } else {
            let width = r.bounded("genome line width", total_len)?;
            let count = r.bounded("genome line count", total_len)? + 1;
            LineRun { kind: LineKind::Sequence, width, count, term }
        };
        runs.push(run);
    }
    let layout = Layout::new(runs, headers)?;

    let case = CaseMask { runs: read_runs(&mut r, residues, "genome case runs")? };
    let exc_runs = read_runs(&mut r, residues, "genome exception runs")?;
    let exc_bytes = r.take(exc_runs.len())?.to_vec();
    let exceptions = Exceptions::new(exc_runs, exc_bytes)?;
    if r.pos != body.len() {
        return Err(DecodeError::Invalid {
            what: "genome structure",
            detail: format!("{} bytes left after the exception runs", body.len() - r.pos),
        });
    }
    let genome = Genome::new(layout, case, exceptions)?;
    let check = |what: &'static str, declared: u64, actual: u64| {
        if declared == actual {
            Ok(())
        } else {
            Err(DecodeError::Invalid { what, detail: format!("declared {declared}, the structure implies {actual}") })
        }
    };
    check("genome total_len", total_len, genome.total_len())?;
    check("genome residues", residues, genome.layout.residues())?;
    check("genome bases", bases, genome.bases())?;
    Ok(genome)
}

/// Reads a gap column and a length column. Ends are accumulated with overflow checks and bounded by `limit`.
fn read_runs(r: &mut Reader<'_>, limit: u64, what: &'static str) -> Result<RunList, DecodeError> {
    // Each run needs a gap and a length varint: at least 2 bytes.
    let n = r.count(what, 2)?;
    let mut starts = Vec::with_capacity(n);
    let mut prev_end = 0u64;
    for _ in 0..n {
        let gap = r.bounded(what, limit)?;
        // Provisional: the end is added below; a start past the limit fails in RunList::new.
        prev_end = prev_end.saturating_add(gap);
        starts.push(prev_end);
    }
    let mut ends = Vec::with_capacity(n);
    let mut shift = 0u64;
    for start in starts.iter_mut() {
        let len = r.bounded(what, limit)?.saturating_add(1);
        // Starts were accumulated from gaps only; every earlier run's length moves this one along.
        *start = start.saturating_add(shift);
        ends.push(start.saturating_add(len));
        shift = shift.saturating_add(len);
    }
    RunList::new(starts, ends, limit, what)
}
