//! The byte encoding of a [`Genome`]'s structure (version 3), and its hostile-input decoder.
//!
//! ```text
//! u8[4]  magic "ACXG"
//! u8     version = 3
//! varint total_len          original file length (checked against the layout)
//! varint residues           checked against the layout
//! varint bases              residues − excluded; checked
//! varint header_count, varint run_count, varint case_count, varint exc_count
//! varint coded_len
//! u8     coded[coded_len]           range-coded numbers (below), then zero padding
//! u8     header_text[Σ header_len]  texts without '>', back to back
//! u64    xxh3 of all preceding bytes
//! ```
//!
//! `coded` holds, through one adaptive binary range coder ([`super::range`]): for every line run its tag (kind
//! in bit 0, 1 = header; terminator in bits 1–2: 0 LF, 1 CRLF, 2 none) and then its header text's length, or its
//! width and line count − 1; then every lowercase run's gap (start − previous run's end; the first: its start)
//! and length − 1; then every exception run's gap, length − 1 and byte. Each kind of number has its own adaptive
//! model, so each column learns its own distribution: atha_chr1's structure, 99 % lowercase runs, takes ~324 KB
//! this way against 357 KB of archive for the version-2 code bytes, which the archive's LZ and order-0 table
//! coded (structure gaps and lengths are close to memoryless, so an order-0 model of each column is what
//! matters, and an adaptive binary one gets within 0.1 % of the columns' exact order-0 entropy). Header texts
//! stay plain text, last, where the archive's LZ finds what they share with other files' headers.
//!
//! Decoding checks the checksum first, then that the four counts together are at most the structure's length
//! (the encoder pads `coded` with zeros when needed, so the elements a reader allocates are bounded by the
//! input's size however well they compress), every value against its limit as it is decoded, every sum against
//! overflow and [`MAX_TOTAL_LEN`], that the range decoder used `coded` up to its padding and the padding is zero,
//! that the header texts fill the rest exactly, and the redundant totals against what the layout and masks
//! imply. Errors name the field and the value seen.

use xxhash_rust::xxh3::xxh3_64;

use super::layout::{Layout, LineKind, LineRun, Term, MAX_TOTAL_LEN};
use super::mask::{CaseMask, Exceptions, RunList, EXCEPTION_BYTES};
use super::range::{Bit, Decoder, Encoder, NumberModel};
use super::Genome;
use crate::codec::varint;
use crate::error::DecodeError;

pub const MAGIC: &[u8; 4] = b"ACXG";
pub const VERSION: u8 = 3;

/// Magic, version and checksum: the smallest valid encoding is this plus the varints.
const FIXED_BYTES: usize = 4 + 1 + 8;
/// The shortest structure that can decode: the fixed bytes and eight one-byte varints (a piece table refuses a
/// piece shorter than this before reading it).
pub const MIN_LEN: u64 = FIXED_BYTES as u64 + 8;

/// Run tags take 3 bits (values 0..=5 are valid); the tag model's context is the previous tag, or
/// [`FIRST_TAG`] for the first run.
const TAG_BITS: u32 = 3;
const FIRST_TAG: usize = 6;
/// Exception bytes are their index in [`EXCEPTION_BYTES`], 4 bits; the context is the previous run's index, or
/// [`FIRST_EXC`] for the first run.
const EXC_BITS: u32 = 4;
const FIRST_EXC: usize = EXCEPTION_BYTES.len();

/// Every adaptive model of a structure, in their initial state (probability ½, no updates).
#[derive(Default)]
struct Models {
    /// Indexed by the previous tag.
    tag: [[Bit; 1 << TAG_BITS]; FIRST_TAG + 1],
    header_len: NumberModel,
    /// Width and count − 1 of a sequence run, indexed by whether the run before it is a header (1) or not (0;
    /// also for the first run).
    width: [NumberModel; 2],
    count: [NumberModel; 2],
    case_gap: NumberModel,
    case_len: NumberModel,
    exc_gap: NumberModel,
    exc_len: NumberModel,
    /// Indexed by the previous exception byte's index.
    exc_byte: [[Bit; 1 << EXC_BITS]; FIRST_EXC + 1],
}

fn tag_of(r: &LineRun) -> u32 {
    let term = match r.term {
        Term::Lf => 0,
        Term::CrLf => 1,
        Term::None => 2,
    };
    u32::from(r.kind == LineKind::Header) | term << 1
}

/// Encodes `g`.
pub fn encode(g: &Genome) -> Vec<u8> {
    let layout = &g.layout;
    let (case, exc) = (&g.case.runs, &g.exceptions.runs);
    let mut m = Models::default();
    let mut enc = Encoder::default();
    let (mut prev_tag, mut after_header, mut headers) = (FIRST_TAG, 0usize, layout.headers().iter());
    for r in layout.runs() {
        let tag = tag_of(r);
        enc.tree(&mut m.tag[prev_tag], tag, TAG_BITS);
        prev_tag = tag as usize;
        if r.kind == LineKind::Header {
            let len = headers.next().map_or(0, |h| h.len() as u64);
            m.header_len.encode(&mut enc, len);
            after_header = 1;
        } else {
            m.width[after_header].encode(&mut enc, r.width);
            m.count[after_header].encode(&mut enc, r.count - 1);
            after_header = 0;
        }
    }
    for (i, (s, e)) in runs(case).enumerate() {
        m.case_gap.encode(&mut enc, s - if i == 0 { 0 } else { case.get(i - 1).1 });
        m.case_len.encode(&mut enc, e - s - 1);
    }
    let mut prev_byte = FIRST_EXC;
    for (i, (s, e)) in runs(exc).enumerate() {
        m.exc_gap.encode(&mut enc, s - if i == 0 { 0 } else { exc.get(i - 1).1 });
        m.exc_len.encode(&mut enc, e - s - 1);
        let index = EXCEPTION_BYTES.iter().position(|&b| b == g.exceptions.byte(i)).unwrap_or(0);
        enc.tree(&mut m.exc_byte[prev_byte], index as u32, EXC_BITS);
        prev_byte = index;
    }
    let mut coded = enc.finish();

    let mut head = Vec::new();
    head.extend_from_slice(MAGIC);
    head.push(VERSION);
    for v in [layout.total_len(), layout.residues(), g.bases()] {
        varint::write(v, &mut head);
    }
    let counts = [layout.headers().len(), layout.runs().len(), case.len(), exc.len()];
    for n in counts {
        varint::write(n as u64, &mut head);
    }
    let header_bytes: usize = layout.headers().iter().map(Vec::len).sum();
    // Pad until the structure is at least as long as its element count (see `decode`). Padding can lengthen
    // the coded_len varint, which only helps.
    let elements: usize = counts.iter().sum();
    let pad = padding(coded.len(), elements, |coded| head.len() + varint_len(coded as u64) + coded + header_bytes + 8);
    coded.resize(coded.len() + pad, 0);
    let mut out = head;
    varint::write(coded.len() as u64, &mut out);
    out.extend_from_slice(&coded);
    for h in layout.headers() {
        out.extend_from_slice(h);
    }
    let sum = xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    out
}

/// The fewest zero bytes to append to `coded` range-coder bytes so that the structure's length, `len(coded
/// bytes in all)`, is at least `elements`. Padding may lengthen the `coded_len` varint, so the structure can end up
/// one byte longer than `elements`; the reader checks that one padding byte less would not do.
fn padding(coded: usize, elements: usize, len: impl Fn(usize) -> usize) -> usize {
    let mut pad = elements.saturating_sub(len(coded));
    while pad > 0 && len(coded + pad - 1) >= elements {
        pad -= 1;
    }
    pad
}

fn varint_len(v: u64) -> usize {
    let mut buf = Vec::new();
    varint::write(v, &mut buf);
    buf.len()
}

fn runs(r: &RunList) -> impl Iterator<Item = (u64, u64)> + '_ {
    (0..r.len()).map(|i| r.get(i))
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

    /// A count of bytes: bounded by the bytes left.
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

/// A range decoder with the models, decoding numbers against their limits.
struct Numbers<'a> {
    dec: Decoder<'a>,
    m: Box<Models>,
}

impl Numbers<'_> {
    /// The next number of `model` (picked from the models by `pick`), at most `limit`.
    fn value(
        &mut self,
        pick: impl FnOnce(&mut Models) -> &mut NumberModel,
        what: &'static str,
        limit: u64,
    ) -> Result<u64, DecodeError> {
        let value = pick(&mut self.m)
            .decode(&mut self.dec)
            .ok_or_else(|| DecodeError::Invalid { what, detail: "number class above 44".into() })?;
        limited(value, what, limit)
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
    // Each count is at most the structure's length, so the sum cannot overflow; then the sum is, too.
    let structure_len = bytes.len() as u64;
    let nheader = r.bounded("genome header_count", structure_len)? as usize;
    let nrun = r.bounded("genome run_count", structure_len)? as usize;
    let ncase = r.bounded("genome case_count", structure_len)? as usize;
    let nexc = r.bounded("genome exc_count", structure_len)? as usize;
    let elements = (nheader + nrun + ncase + nexc) as u64;
    if elements > bytes.len() as u64 {
        return Err(DecodeError::Limit {
            what: "genome element count (header, run, case and exception counts)",
            value: elements,
            limit: bytes.len() as u64,
        });
    }
    let coded_len = r.count("genome coded_len")?;
    let coded = r.take(coded_len, "genome coded numbers")?;
    let header_bytes = (body.len() - r.pos) as u64;
    let mut n = Numbers { dec: Decoder::new(coded), m: Box::default() };

    let (runs, header_lens) = read_line_runs(&mut n, nrun, nheader, total_len, header_bytes)?;
    let case_runs = read_runs(&mut n, ncase, residues, "genome case runs", |m| (&mut m.case_gap, &mut m.case_len))?;
    let (exc_runs, exc_bytes) = read_exceptions(&mut n, nexc, residues)?;
    check_coded_end(&n.dec, coded, elements, bytes.len())?;

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
    let genome = Genome::new(layout, CaseMask { runs: case_runs }, exceptions)?;
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

/// Checks that the range decoder ended where its encoder did: `code = 0` (the encoder's last bytes are its
/// `low`, exactly), every byte it read inside `coded`, and the rest zero padding, no longer than needed to make
/// the `structure_len`-byte structure hold `elements` bytes.
fn check_coded_end(dec: &Decoder<'_>, coded: &[u8], elements: u64, structure_len: usize) -> Result<(), DecodeError> {
    let what = "genome coded numbers";
    if dec.code() != 0 {
        return Err(DecodeError::Invalid { what, detail: "the range decoder did not end on its last byte".into() });
    }
    let used = dec.used();
    let Some(pad) = coded.get(used..) else {
        let detail = format!("the range decoder read {used} bytes, {} were coded", coded.len());
        return Err(DecodeError::Invalid { what, detail });
    };
    if pad.iter().any(|&b| b != 0) {
        return Err(DecodeError::Invalid { what, detail: "padding bytes are not zero".into() });
    }
    if !pad.is_empty() {
        // One padding byte less (and the coded_len varint perhaps a byte shorter) must leave too few bytes.
        let shorter = structure_len - 1 - varint_len(coded.len() as u64) + varint_len(coded.len() as u64 - 1);
        if shorter as u64 >= elements {
            let detail = format!("{} padding bytes, more than the {elements} elements need", pad.len());
            return Err(DecodeError::Invalid { what, detail });
        }
    }
    Ok(())
}

/// `nrun` line runs and the lengths of their header texts, which must fit in `header_bytes` together. A header's
/// width follows from its text length; there must be exactly `nheader` header runs.
fn read_line_runs(
    n: &mut Numbers<'_>,
    nrun: usize,
    nheader: usize,
    total_len: u64,
    header_bytes: u64,
) -> Result<(Vec<LineRun>, Vec<usize>), DecodeError> {
    let mut runs = Vec::with_capacity(nrun);
    let mut header_lens = Vec::with_capacity(nheader);
    let (mut prev_tag, mut after_header, mut header_left) = (FIRST_TAG, 0usize, header_bytes);
    for i in 0..nrun {
        let tag = n.dec.tree(&mut n.m.tag[prev_tag], TAG_BITS);
        let term = match tag >> 1 {
            0 => Term::Lf,
            1 => Term::CrLf,
            2 => Term::None,
            _ => return Err(DecodeError::Invalid { what: "genome run tag", detail: format!("run {i}: tag {tag}") }),
        };
        // A valid tag (≤ 5) is the next run's context.
        prev_tag = tag as usize;
        let run = if tag & 1 == 1 {
            if header_lens.len() == nheader {
                let detail = format!("run {i} is header run {} of {nheader}", nheader + 1);
                return Err(DecodeError::Invalid { what: "genome line runs", detail });
            }
            let len = n.value(|m| &mut m.header_len, "genome header_len", header_left)?;
            header_left -= len;
            header_lens.push(len as usize);
            after_header = 1;
            LineRun { kind: LineKind::Header, width: len + 1, count: 1, term }
        } else {
            let width = n.value(|m| &mut m.width[after_header], "genome line width", total_len)?;
            let count = n.value(|m| &mut m.count[after_header], "genome line count", total_len)?;
            after_header = 0;
            LineRun { kind: LineKind::Sequence, width, count: count + 1, term }
        };
        runs.push(run);
    }
    if header_lens.len() != nheader {
        let detail = format!("{} header runs, header_count is {nheader}", header_lens.len());
        return Err(DecodeError::Invalid { what: "genome line runs", detail });
    }
    Ok((runs, header_lens))
}

fn limited(value: u64, what: &'static str, limit: u64) -> Result<u64, DecodeError> {
    if value > limit {
        return Err(DecodeError::Limit { what, value, limit });
    }
    Ok(value)
}

/// `count` runs of gaps and lengths − 1 from the two models `pick` selects; ends are accumulated with overflow
/// checks and bounded by `limit` (in [`RunList::new`]).
fn read_runs(
    n: &mut Numbers<'_>,
    count: usize,
    limit: u64,
    what: &'static str,
    pick: impl Fn(&mut Models) -> (&mut NumberModel, &mut NumberModel),
) -> Result<RunList, DecodeError> {
    let mut starts = Vec::with_capacity(count);
    let mut ends = Vec::with_capacity(count);
    let mut prev_end = 0u64;
    for _ in 0..count {
        let gap = n.value(|m| pick(m).0, what, limit)?;
        let len = n.value(|m| pick(m).1, what, limit)? + 1;
        // Saturating: a sum past the limit is refused by RunList::new, and limit ≤ 2^40 keeps exact sums exact.
        let start = prev_end.saturating_add(gap);
        prev_end = start.saturating_add(len);
        starts.push(start);
        ends.push(prev_end);
    }
    RunList::new(starts, ends, limit, what)
}

/// `count` exception runs and their bytes.
fn read_exceptions(n: &mut Numbers<'_>, count: usize, limit: u64) -> Result<(RunList, Vec<u8>), DecodeError> {
    let what = "genome exception runs";
    let mut starts = Vec::with_capacity(count);
    let mut ends = Vec::with_capacity(count);
    let mut bytes = Vec::with_capacity(count);
    let (mut prev_end, mut prev_byte) = (0u64, FIRST_EXC);
    for i in 0..count {
        let gap = n.value(|m| &mut m.exc_gap, what, limit)?;
        let len = n.value(|m| &mut m.exc_len, what, limit)? + 1;
        let start = prev_end.saturating_add(gap);
        prev_end = start.saturating_add(len);
        starts.push(start);
        ends.push(prev_end);
        let index = n.dec.tree(&mut n.m.exc_byte[prev_byte], EXC_BITS) as usize;
        let Some(&byte) = EXCEPTION_BYTES.get(index) else {
            let detail = format!("run {i}: byte index {index}, {} bytes exist", EXCEPTION_BYTES.len());
            return Err(DecodeError::Invalid { what: "genome exception byte", detail });
        };
        bytes.push(byte);
        prev_byte = index;
    }
    Ok((RunList::new(starts, ends, limit, what)?, bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn seq(width: u64, count: u64, term: Term) -> LineRun {
        LineRun { kind: LineKind::Sequence, width, count, term }
    }

    fn header(text: &[u8]) -> LineRun {
        LineRun { kind: LineKind::Header, width: text.len() as u64 + 1, count: 1, term: Term::Lf }
    }

    /// A structure with values up to 2^40 in every column, built without a file of that size.
    fn huge() -> Genome {
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

    /// One line of `n` residues alternating lowercase and uppercase: `n / 2` lowercase runs that code to almost
    /// nothing, so the encoder must pad.
    fn cheap_runs(n: u64) -> Genome {
        let layout = Layout::new(vec![seq(n, 1, Term::Lf)], Vec::new()).unwrap();
        let starts: Vec<u64> = (0..n / 2).map(|i| 2 * i).collect();
        let ends = starts.iter().map(|s| s + 1).collect();
        let case = RunList::new(starts, ends, n, "c").unwrap();
        let exceptions = Exceptions::new(RunList::default(), Vec::new()).unwrap();
        Genome::new(layout, CaseMask { runs: case }, exceptions).unwrap()
    }

    fn reseal(body: &[u8]) -> Vec<u8> {
        let mut v = body.to_vec();
        v.extend_from_slice(&xxh3_64(body).to_le_bytes());
        v
    }

    /// The body's position after the magic, version and the first `skip` varints.
    fn after_varints(body: &[u8], skip: usize) -> usize {
        let mut pos = 5;
        for _ in 0..skip {
            varint::read_at(body, &mut pos).unwrap();
        }
        pos
    }

    /// `body` with its varint number `index` (0: total_len, … 7: coded_len) replaced by `value`, resealed.
    fn with_varint(body: &[u8], index: usize, value: u64) -> Vec<u8> {
        let (at, end) = (after_varints(body, index), after_varints(body, index + 1));
        let mut out = body[..at].to_vec();
        varint::write(value, &mut out);
        out.extend_from_slice(&body[end..]);
        reseal(&out)
    }

    #[test]
    fn large_values_round_trip() {
        let g = huge();
        let bytes = encode(&g);
        assert_eq!(decode(&bytes).unwrap(), g);
        assert_eq!(bytes[4], VERSION);
    }

    #[test]
    fn fasta_edge_cases_round_trip() {
        let files: [&[u8]; 9] = [
            b"",
            b">only a header",
            b">a\r\nACGT\r\nAC\r\n",
            b">a\nACGTNNNN\nAC",
            b">a\nACGT\nACG\nACGTACGT\n\n\n>b\n\nAC\n",
            b">x\nacgtnnnnRYKMswbdhvACGT\nnnNNacgT\n",
            b"ACGT\nACGT\n",
            b">a\n>b\n>c\nA\n",
            b">a\r\nACGT\nACGT\r\nAC",
        ];
        for fasta in files {
            let Some(s) = super::super::split(fasta) else { continue };
            let bytes = encode(&s.genome);
            assert_eq!(decode(&bytes).unwrap(), s.genome, "{}", String::from_utf8_lossy(fasta));
        }
        // Many runs of every kind.
        let mut fasta = Vec::new();
        for i in 0..2000u32 {
            if i % 100 == 0 {
                fasta.extend_from_slice(format!(">rec{i} some description\n").as_bytes());
            }
            let line: Vec<u8> = (0..(60 + i % 7)).map(|j| b"ACGTacgtNnRy"[((i * 7 + j * 13) % 12) as usize]).collect();
            fasta.extend_from_slice(&line);
            fasta.extend_from_slice(if i % 333 == 0 { b"\r\n" } else { b"\n" });
        }
        let s = super::super::split(&fasta).expect("modelled");
        assert!(s.genome.case.runs.len() > 1000 && s.genome.exceptions.runs.len() > 1000);
        assert_eq!(decode(&encode(&s.genome)).unwrap(), s.genome);
    }

    #[test]
    fn encoding_is_deterministic_and_canonical_for_what_it_writes() {
        for g in [huge(), cheap_runs(10_000), cheap_runs(0)] {
            let bytes = encode(&g);
            assert_eq!(encode(&g), bytes);
            assert_eq!(encode(&decode(&bytes).unwrap()), bytes);
        }
    }

    #[test]
    fn cheap_elements_are_padded_to_one_byte_each_and_the_padding_is_checked() {
        let g = cheap_runs(20_000);
        let bytes = encode(&g);
        // 10,000 case runs and one line run: the structure holds at least one byte per element.
        assert!(bytes.len() >= 10_001 && bytes.len() < 10_020, "{} bytes", bytes.len());
        assert_eq!(decode(&bytes).unwrap(), g);
        let body = &bytes[..bytes.len() - 8];
        let mut dirty = body.to_vec();
        // No header texts: the padding ends the body.
        *dirty.last_mut().unwrap() = 1;
        let err = decode(&reseal(&dirty)).unwrap_err().to_string();
        assert!(err.contains("padding bytes are not zero"), "{err}");
        // One zero byte more than needed is refused too.
        let pos = after_varints(body, 7);
        let mut longer = body[..pos].to_vec();
        varint::write((body.len() - after_varints(body, 8)) as u64 + 1, &mut longer);
        longer.extend_from_slice(&body[after_varints(body, 8)..]);
        longer.push(0);
        let err = decode(&reseal(&longer)).unwrap_err().to_string();
        assert!(err.contains("more than the"), "{err}");
        // Without the padding, the counts claim more elements than the structure has bytes.
        let pos = after_varints(body, 8);
        let coded_len = body.len() - pos;
        let mut short = body[..after_varints(body, 7)].to_vec();
        varint::write(coded_len as u64 - 1, &mut short);
        short.extend_from_slice(&body[pos..body.len() - 1]);
        let err = decode(&reseal(&short)).unwrap_err().to_string();
        assert!(err.contains("element count"), "{err}");
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
                // A changed header text byte or coded bit may still describe a valid, different file; anything
                // accepted must pass every check Genome::new and the totals make.
                if let Ok(other) = decode(&reseal(&bad)) {
                    assert_ne!(other, g, "change at {at} decoded to the same structure");
                }
            }
        }
    }

    #[test]
    fn lying_counts_and_lengths_name_their_field() {
        let g = huge();
        let bytes = encode(&g);
        let body = bytes[..bytes.len() - 8].to_vec();
        // The header count is varint 3, after the three totals.
        let err = decode(&with_varint(&body, 3, u64::MAX >> 1)).unwrap_err().to_string();
        assert!(err.contains("genome header_count"), "{err}");
        // Each count alone below the bytes left, but the four together above the structure's length.
        let half = body.len() as u64 / 2 + 10;
        let one = with_varint(&body, 3, half);
        let lie = with_varint(&one[..one.len() - 8], 5, half);
        let err = decode(&lie).unwrap_err().to_string();
        assert!(err.contains("element count"), "{err}");
        // A header text one byte short: the last header's length no longer fits in the bytes left.
        let err = decode(&reseal(&body[..body.len() - 1])).unwrap_err().to_string();
        assert!(err.contains("genome header_len"), "{err}");
        // A coded_len beyond the bytes left.
        let err = decode(&with_varint(&body, 7, body.len() as u64)).unwrap_err().to_string();
        assert!(err.contains("genome coded_len"), "{err}");
    }

    #[test]
    fn hostile_coded_bytes_are_refused_without_panicking() {
        // Valid counts in front of arbitrary coded bytes: every decode ends in an error or a valid structure.
        let g = huge();
        let bytes = encode(&g);
        let body = &bytes[..bytes.len() - 8];
        let pos = after_varints(body, 7);
        let headers = &body[body.len() - 308..];
        let mut accepted = 0;
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for len in [0usize, 1, 4, 5, 40, 200] {
            for _ in 0..50 {
                let coded: Vec<u8> = (0..len)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect();
                let mut hostile = body[..pos].to_vec();
                varint::write(len as u64, &mut hostile);
                hostile.extend_from_slice(&coded);
                hostile.extend_from_slice(headers);
                if let Ok(other) = decode(&reseal(&hostile)) {
                    assert_eq!(decode(&encode(&other)).unwrap(), other);
                    accepted += 1;
                }
            }
        }
        // Random bytes almost never satisfy every check.
        assert!(accepted < 5, "{accepted} random coded streams accepted");
    }

    /// Random structures, with values far beyond what small test files reach.
    fn genome_strategy() -> impl Strategy<Value = Genome> {
        let line = (any::<bool>(), 0u64..200, 1u64..5000, 0u8..2, prop::collection::vec(32u8..127, 0..20));
        let mask = prop::collection::vec((0u64..3000, 0u64..3000), 0..40);
        let exc = prop::collection::vec((0u64..2000, 0u64..3000, 0usize..EXCEPTION_BYTES.len()), 0..20);
        (prop::collection::vec(line, 0..30), any::<bool>(), mask, exc, 1u64..10_000).prop_map(
            |(lines, unterminated, mask, exc, scale)| {
                let (mut runs, mut headers) = (Vec::new(), Vec::new());
                for (is_header, width, count, crlf, text) in lines {
                    let term = if crlf == 1 { Term::CrLf } else { Term::Lf };
                    if is_header {
                        runs.push(LineRun { term, ..header(&text) });
                        headers.push(text);
                    } else {
                        runs.push(seq(width * scale, count, term));
                    }
                }
                if unterminated {
                    runs.push(seq(7, 1, Term::None));
                }
                let layout = Layout::new(runs, headers).expect("valid layout");
                let residues = layout.residues();
                let place = |pairs: &mut dyn Iterator<Item = (u64, u64)>| {
                    let (mut starts, mut ends, mut end) = (Vec::new(), Vec::new(), 0u64);
                    for (gap, len) in pairs {
                        let (s, e) = (end + gap * scale, end + gap * scale + 1 + len * scale);
                        if e > residues {
                            break;
                        }
                        starts.push(s);
                        ends.push(e);
                        end = e;
                    }
                    RunList::new(starts, ends, residues, "test").expect("valid runs")
                };
                let case = place(&mut mask.into_iter());
                let exc_runs = place(&mut exc.iter().map(|&(g, l, _)| (g, l)));
                let bytes = exc.iter().take(exc_runs.len()).map(|&(_, _, b)| EXCEPTION_BYTES[b]).collect();
                let exceptions = Exceptions::new(exc_runs, bytes).expect("valid exceptions");
                Genome::new(layout, CaseMask { runs: case }, exceptions).expect("valid genome")
            },
        )
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

        #[test]
        fn random_structures_round_trip(g in genome_strategy(), cut in any::<usize>(), at in any::<usize>()) {
            let bytes = encode(&g);
            prop_assert_eq!(&decode(&bytes).unwrap(), &g);
            prop_assert_eq!(&encode(&g), &bytes);
            let body = &bytes[..bytes.len() - 8];
            prop_assert!(decode(&reseal(&body[..cut % body.len()])).is_err());
            let mut bad = body.to_vec();
            bad[at % body.len()] ^= 0x10;
            if let Ok(other) = decode(&reseal(&bad)) {
                prop_assert_ne!(other, g);
            }
        }
    }
}
