//! The byte encoding of a [`Genome`]'s structure (version 2), and its hostile-input decoder.
//!
//! ```text
//! u8[4]  magic "ACXG"
//! u8     version = 2
//! varint total_len          original file length (checked against the layout)
//! varint residues           checked against the layout
//! varint bases              residues − excluded; checked
//! varint header_count, varint run_count, varint case_count, varint exc_count
//! u8     run_tag[run_count]         kind (bit 0: 1 = header) | term << 1 (0 LF, 1 CRLF, 2 none)
//! u8     header_len[header_count]   codes (see below) of the header texts' lengths
//! u8     width[seq_runs]            codes of the sequence runs' widths (seq_runs = tags with bit 0 clear)
//! u8     count[seq_runs]            codes of count − 1
//! u8     case_gap[case_count]       codes of start − previous run's end (0 for the first run's start)
//! u8     case_len[case_count]       codes of length − 1
//! u8     exc_gap[exc_count], u8 exc_len[exc_count]   as for case
//! u8     exc_byte[exc_count]
//! varint extra_len
//! u8     extra[extra_len]           the codes' extra bits, LSB-first, in the order of the code bytes above
//! u8     header_text[Σ header_len]  texts without '>', back to back
//! u64    xxh3 of all preceding bytes
//! ```
//!
//! Every number is a code byte (its magnitude and the three bits below its leading one, [`super::columns`]) with
//! its remaining low bits in one bit column: what the archive's order-0 coder pays for is the byte histogram,
//! which code bytes keep skewed (atha_chr1's structure packs to 359 KB this way, 371 KB as varint columns, the
//! version-1 encoding). Columns of one kind of value (gaps, lengths, bytes) stay apart for the same
//! reason; header texts stay text, last, where LZ finds what they share with other files' headers. Decoding
//! checks the checksum first, then every count against the bytes left (each element needs at least one byte, so
//! no count can make it allocate more than the input's size), every value against its limit, every sum against
//! overflow and [`MAX_TOTAL_LEN`], and the redundant totals against what the layout and masks imply. Errors name
//! the field and the value seen.

use xxhash_rust::xxh3::xxh3_64;

use super::columns::{BitReader, ColumnWriter};
use super::layout::{Layout, LineKind, LineRun, Term, MAX_TOTAL_LEN};
use super::mask::{CaseMask, Exceptions, RunList};
use super::Genome;
use crate::codec::varint;
use crate::error::DecodeError;

pub const MAGIC: &[u8; 4] = b"ACXG";
pub const VERSION: u8 = 2;

/// Magic, version and checksum: the smallest valid encoding is this plus the varints.
const FIXED_BYTES: usize = 4 + 1 + 8;

/// Encodes `g`.
pub fn encode(g: &Genome) -> Vec<u8> {
    let mut out = Vec::new();
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    let layout = &g.layout;
    let (case, exc) = (&g.case.runs, &g.exceptions.runs);
    for v in [layout.total_len(), layout.residues(), g.bases()] {
        varint::write(v, &mut out);
    }
    for n in [layout.headers().len(), layout.runs().len(), case.len(), exc.len()] {
        varint::write(n as u64, &mut out);
    }
    for r in layout.runs() {
        let term = match r.term {
            Term::Lf => 0u8,
            Term::CrLf => 1,
            Term::None => 2,
        };
        out.push(u8::from(r.kind == LineKind::Header) | term << 1);
    }
    let mut bits = ColumnWriter::default();
    bits.column(layout.headers().iter().map(|h| h.len() as u64), &mut out);
    let seq = || layout.runs().iter().filter(|r| r.kind == LineKind::Sequence);
    bits.column(seq().map(|r| r.width), &mut out);
    bits.column(seq().map(|r| r.count - 1), &mut out);
    for runs in [case, exc] {
        bits.column(gaps(runs), &mut out);
        bits.column((0..runs.len()).map(|i| runs.get(i)).map(|(s, e)| e - s - 1), &mut out);
    }
    out.extend_from_slice(g.exceptions.bytes());
    let extra = bits.finish();
    varint::write(extra.len() as u64, &mut out);
    out.extend_from_slice(&extra);
    for h in layout.headers() {
        out.extend_from_slice(h);
    }
    let sum = xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// Each run's start minus the previous run's end (the first run's start).
fn gaps(runs: &RunList) -> impl Iterator<Item = u64> + '_ {
    (0..runs.len()).map(|i| runs.get(i).0 - if i == 0 { 0 } else { runs.get(i - 1).1 })
}

/// A bounds-checked reader over the body (checksum already verified and removed).
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A varint bounded by `limit`, named `what` in the error.
    fn bounded(&mut self, what: &'static str, limit: u64) -> Result<u64, DecodeError> {
        let value = varint::read_at(self.bytes, &mut self.pos)?;
        if value > limit {
            return Err(DecodeError::Limit { what, value, limit });
        }
        Ok(value)
    }

    /// A count of elements of at least one byte each: bounded by the bytes left.
    fn count(&mut self, what: &'static str) -> Result<usize, DecodeError> {
        let left = self.bytes.len() - self.pos;
        Ok(self.bounded(what, left as u64)? as usize)
    }

    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let left = self.bytes.len() - self.pos;
        if n > left {
            return Err(DecodeError::Invalid { what, detail: format!("needs {n} bytes, {left} left") });
        }
        let s = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
}

/// The code columns of a structure, located but not yet decoded (their values need the bit column, which comes
/// after them).
struct Codes<'a> {
    tags: &'a [u8],
    header_len: &'a [u8],
    width: &'a [u8],
    count: &'a [u8],
    case_gap: &'a [u8],
    case_len: &'a [u8],
    exc_gap: &'a [u8],
    exc_len: &'a [u8],
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
    let nheader = r.count("genome header_count")?;
    let nrun = r.count("genome run_count")?;
    let ncase = r.count("genome case_count")?;
    let nexc = r.count("genome exc_count")?;

    let tags = r.take(nrun, "genome run tags")?;
    let nseq = tags.iter().filter(|&&t| t & 1 == 0).count();
    let codes = Codes {
        tags,
        header_len: r.take(nheader, "genome header_len codes")?,
        width: r.take(nseq, "genome line width codes")?,
        count: r.take(nseq, "genome line count codes")?,
        case_gap: r.take(ncase, "genome case gap codes")?,
        case_len: r.take(ncase, "genome case length codes")?,
        exc_gap: r.take(nexc, "genome exception gap codes")?,
        exc_len: r.take(nexc, "genome exception length codes")?,
    };
    let exc_bytes = r.take(nexc, "genome exception bytes")?.to_vec();
    let extra_len = r.count("genome extra_len")?;
    let mut bits = BitReader::new(r.take(extra_len, "genome extra bits")?);
    let header_bytes_left = (body.len() - r.pos) as u64;

    let mut header_lens = Vec::with_capacity(nheader);
    for &c in codes.header_len {
        let len = bits.value(c, "genome header_len")?;
        if len > header_bytes_left {
            return Err(DecodeError::Limit { what: "genome header_len", value: len, limit: header_bytes_left });
        }
        header_lens.push(len as usize);
    }
    let runs = read_line_runs(&codes, &header_lens, total_len, &mut bits)?;
    let case = CaseMask { runs: read_runs(codes.case_gap, codes.case_len, residues, "genome case runs", &mut bits)? };
    let exc_runs = read_runs(codes.exc_gap, codes.exc_len, residues, "genome exception runs", &mut bits)?;
    bits.finish("genome extra bits")?;

    let mut headers = Vec::with_capacity(nheader);
    for len in header_lens {
        headers.push(r.take(len, "genome header text")?.to_vec());
    }
    if r.pos != body.len() {
        return Err(DecodeError::Invalid {
            what: "genome structure",
            detail: format!("{} bytes left after the header texts", body.len() - r.pos),
        });
    }
    let layout = Layout::new(runs, headers)?;
    let exceptions = Exceptions::new(exc_runs, exc_bytes)?;
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

/// The line runs from their tags and code columns. A header's width follows from its text length; a missing
/// text is reported by [`Layout::new`].
fn read_line_runs(
    codes: &Codes<'_>,
    header_lens: &[usize],
    total_len: u64,
    bits: &mut BitReader<'_>,
) -> Result<Vec<LineRun>, DecodeError> {
    // Extra bits come in column order: every width's, then every count's.
    let widths = codes
        .width
        .iter()
        .map(|&c| limited(bits.value(c, "genome line width")?, "genome line width", total_len))
        .collect::<Result<Vec<u64>, _>>()?;
    let counts = codes
        .count
        .iter()
        .map(|&c| limited(bits.value(c, "genome line count")?, "genome line count", total_len))
        .collect::<Result<Vec<u64>, _>>()?;
    let mut runs = Vec::with_capacity(codes.tags.len());
    let mut header_iter = header_lens.iter();
    let mut seq = widths.into_iter().zip(counts);
    for (i, &tag) in codes.tags.iter().enumerate() {
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
            let width = header_iter.next().map_or(0, |&len| len as u64 + 1);
            LineRun { kind: LineKind::Header, width, count: 1, term }
        } else {
            // The code columns hold one width and one count per tag with bit 0 clear.
            let Some((width, count)) = seq.next() else {
                return Err(DecodeError::Invalid { what: "genome line runs", detail: format!("run {i}: no width") });
            };
            LineRun { kind: LineKind::Sequence, width, count: count + 1, term }
        };
        runs.push(run);
    }
    Ok(runs)
}

fn limited(value: u64, what: &'static str, limit: u64) -> Result<u64, DecodeError> {
    if value > limit {
        return Err(DecodeError::Limit { what, value, limit });
    }
    Ok(value)
}

/// Runs from a gap code column and a length code column. Ends are accumulated with overflow checks and bounded
/// by `limit`.
fn read_runs(
    gap_codes: &[u8],
    len_codes: &[u8],
    limit: u64,
    what: &'static str,
    bits: &mut BitReader<'_>,
) -> Result<RunList, DecodeError> {
    let mut starts = Vec::with_capacity(gap_codes.len());
    let mut prev_end = 0u64;
    for &c in gap_codes {
        let gap = limited(bits.value(c, what)?, what, limit)?;
        // Provisional: the lengths are added below; a start past the limit fails in RunList::new.
        prev_end = prev_end.saturating_add(gap);
        starts.push(prev_end);
    }
    let mut ends = Vec::with_capacity(len_codes.len());
    let mut shift = 0u64;
    for (start, &c) in starts.iter_mut().zip(len_codes) {
        let len = limited(bits.value(c, what)?, what, limit)?.saturating_add(1);
        // Starts were accumulated from gaps only; every earlier run's length moves this one along.
        *start = start.saturating_add(shift);
        ends.push(start.saturating_add(len));
        shift = shift.saturating_add(len);
    }
    RunList::new(starts, ends, limit, what)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A structure with values up to 2^40 in every column, built without a file of that size.
    fn huge() -> Genome {
        let seq = |width, count, term| LineRun { kind: LineKind::Sequence, width, count, term };
        let header =
            |text: &[u8]| LineRun { kind: LineKind::Header, width: text.len() as u64 + 1, count: 1, term: Term::Lf };
        let headers = vec![b"chr1 big".to_vec(), Vec::new(), vec![b'h'; 300]];
        let runs = vec![
            header(&headers[0]),
            seq(1 << 20, (1 << 18) - 1, Term::Lf),
            seq(17, 1, Term::CrLf),
            header(&headers[1]),
            seq(0, 3, Term::Lf),
            header(&headers[2]),
            seq(60, 5, Term::Lf),
            seq(33, 1, Term::None),
        ];
        let layout = Layout::new(runs, headers).unwrap();
        let residues = layout.residues();
        let case =
            RunList::new(vec![0, 1 << 30, residues - 40], vec![5, (1 << 37) + 3, residues], residues, "c").unwrap();
        let exc = RunList::new(vec![7, 1 << 36], vec![8, (1 << 36) + 1000], residues, "e").unwrap();
        let exceptions = Exceptions::new(exc, b"NR".to_vec()).unwrap();
        Genome::new(layout, CaseMask { runs: case }, exceptions).unwrap()
    }

    fn reseal(body: &[u8]) -> Vec<u8> {
        let mut v = body.to_vec();
        v.extend_from_slice(&xxh3_64(body).to_le_bytes());
        v
    }

    #[test]
    fn large_values_round_trip() {
        let g = huge();
        let bytes = encode(&g);
        assert_eq!(decode(&bytes).unwrap(), g);
        assert_eq!(bytes[4], VERSION);
    }

    #[test]
    fn every_resealed_truncation_and_extension_is_refused() {
        let bytes = encode(&huge());
        let body = &bytes[..bytes.len() - 8];
        for cut in 0..body.len() {
            assert!(decode(&reseal(&body[..cut])).is_err(), "cut at {cut} accepted");
        }
        let mut longer = body.to_vec();
        longer.push(b'x');
        let err = decode(&reseal(&longer)).unwrap_err().to_string();
        assert!(err.contains("left after"), "{err}");
    }

    #[test]
    fn resealed_byte_changes_are_refused_or_decode_to_a_valid_structure() {
        let g = huge();
        let bytes = encode(&g);
        let body = &bytes[..bytes.len() - 8];
        for at in 0..body.len() {
            for x in [0x01, 0x80, 0xff] {
                let mut bad = body.to_vec();
                bad[at] ^= x;
                // A changed header text byte or a changed low bit may still describe a valid, different file;
                // anything accepted must pass every check Genome::new and the totals make.
                if let Ok(other) = decode(&reseal(&bad)) {
                    assert_ne!(other, g, "change at {at} decoded to the same structure");
                }
            }
        }
    }

    #[test]
    fn lying_counts_and_codes_name_their_field() {
        let g = huge();
        let bytes = encode(&g);
        let body = bytes[..bytes.len() - 8].to_vec();
        // The header count sits right after the three totals.
        let mut pos = 5;
        for _ in 0..3 {
            varint::read_at(&body, &mut pos).unwrap();
        }
        let mut lie = body[..pos].to_vec();
        varint::write(u64::MAX >> 1, &mut lie);
        lie.extend_from_slice(&body[pos + 1..]);
        let err = decode(&reseal(&lie)).unwrap_err().to_string();
        assert!(err.contains("genome header_count"), "{err}");
        // The first header length's code (after the 8 tags) made huge: more extra bits than the column holds or a
        // length beyond the bytes left, named either way.
        let mut counts_end = pos;
        for _ in 0..4 {
            varint::read_at(&body, &mut counts_end).unwrap();
        }
        for code in [200, 255] {
            let mut bad = body.clone();
            bad[counts_end + 8] = code;
            let err = decode(&reseal(&bad)).unwrap_err().to_string();
            assert!(err.contains("genome header_len"), "{err}");
        }
    }
}
