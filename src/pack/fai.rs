//! FASTA `.fai` sidecars: the packer stores a samtools-compatible index for every file that is FASTA with
//! consistent line lengths, and the mount shows it as `NAME.fai`.
//!
//! Why a sidecar at all: `samtools faidx` on a read-only mount cannot write `NAME.fai` next to the FASTA, and
//! building it would read the whole (possibly 50 GB) file through the mount. Packing it in makes the first
//! region query as fast as every later one.
//!
//! The indexer is a transliteration of htslib's `fai_build_core` state machine (FASTA branch), so the bytes
//! we produce are exactly what `samtools faidx FILE` writes, including its quirks:
//!
//! - a record's name is its header up to the first whitespace (leading blanks skipped); the rest is ignored;
//! - `LINEWIDTH` counts every byte of a line including `\r` and `\n`, `LINEBASES` counts only graphic bytes,
//!   so CRLF files index with `LINEWIDTH = LINEBASES + 2`;
//! - every line of a record but the last must have the first line's width; a shorter line ends the record
//!   (only blank lines or a new header may follow), a longer one makes the file unindexable;
//! - a record without sequence lines is silently dropped, unless it is the last one, which fails the file;
//! - a duplicate name keeps the first record (samtools warns and ignores the later one).
//!
//! Anything samtools refuses (FASTQ, text that is not FASTA, a bare `\r`) gives `None`.

/// The `.fai` text for `bytes` if it is FASTA that samtools can index (consistent line lengths per record),
/// else `None`.
pub fn fasta_index(bytes: &[u8]) -> Option<Vec<u8>> {
    let records = index_records(bytes)?;
    Some(render(&records))
}

/// One `.fai` line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct FaiRecord {
    name: Vec<u8>,
    /// Number of bases (graphic bytes) in the sequence.
    length: u64,
    /// Byte offset of the first base.
    offset: u64,
    /// Bases per full line.
    line_bases: u32,
    /// Bytes per full line, terminator included.
    line_width: u32,
}

/// The states of htslib's `fai_build_core`, FASTA only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between records: only '>', blank lines (LF or CRLF) may come.
    OutRead,
    /// Just after '>': reading the header line.
    InName,
    /// Inside a record's sequence lines.
    InSeq,
}

/// A record being built: its name and the line geometry seen so far.
#[derive(Debug, Default)]
struct Pending {
    name: Vec<u8>,
    seq_len: u64,
    line_width: u64,
    line_bases: u64,
    seq_offset: u64,
}

/// Byte reader with C `getc` semantics (`None` at end of input).
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn getc(&mut self) -> Option<u8> {
        let c = self.bytes.get(self.pos).copied();
        if c.is_some() {
            self.pos += 1;
        }
        c
    }

    /// Consumes bytes up to and including the next '\n'; returns the last byte read (`None` at end).
    fn skip_line(&mut self) -> Option<u8> {
        loop {
            match self.getc() {
                Some(b'\n') => return Some(b'\n'),
                Some(_) => continue,
                None => return None,
            }
        }
    }
}

/// C locale `isspace`: space, \t, \n, \v, \f, \r.
fn is_c_space(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r')
}

/// C locale `isgraph`: printable and not a space.
fn is_c_graph(c: u8) -> bool {
    (0x21..=0x7e).contains(&c)
}

/// Runs the state machine over `bytes`; `None` wherever samtools would fail.
fn index_records(bytes: &[u8]) -> Option<Vec<FaiRecord>> {
    let mut reader = Reader { bytes, pos: 0 };
    let mut state = State::OutRead;
    let mut records: Vec<FaiRecord> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut cur = Pending::default();
    // True once the current record has at least one sequence line (htslib's `read_done`).
    let mut read_done = false;

    while let Some(c) = reader.getc() {
        match state {
            State::OutRead => match c {
                b'>' => state = State::InName,
                b'\r' => {
                    // A blank CRLF line; a bare CR is a format error for samtools.
                    if reader.getc() != Some(b'\n') {
                        return None;
                    }
                }
                b'\n' => {}
                // '@' would make it FASTQ, anything else is not FASTA: either way no FASTA index.
                _ => return None,
            },
            State::InName => {
                if read_done {
                    insert_record(&mut records, &mut seen, &cur)?;
                    read_done = false;
                }
                let last = read_header_name(&mut reader, c, &mut cur.name)?;
                if last != b'\n' && reader.skip_line().is_none() {
                    // Header without a newline at end of file: the record has no sequence, and the final
                    // check below fails the whole file, as in samtools.
                    cur.seq_offset = bytes.len() as u64;
                    break;
                }
                state = State::InSeq;
                cur.seq_len = 0;
                cur.line_bases = 0;
                cur.line_width = 0;
                cur.seq_offset = reader.pos as u64;
            }
            State::InSeq => {
                if c == b'\n' {
                    state = State::OutRead;
                    continue;
                }
                if c == b'>' {
                    state = State::InName;
                    continue;
                }
                read_done = true;
                let (width, bases) = read_sequence_line(&mut reader, c);
                cur.seq_len += bases;
                if cur.line_width == 0 {
                    cur.line_width = width;
                    cur.line_bases = bases;
                } else if cur.line_width > width {
                    // A short line is the record's last: only blank lines or a header may follow.
                    state = State::OutRead;
                } else if cur.line_width < width {
                    return None;
                }
            }
        }
    }

    if !read_done {
        return None;
    }
    insert_record(&mut records, &mut seen, &cur)?;
    Some(records)
}

/// Reads a header's name starting at byte `first`: leading blanks skipped, ends at whitespace. Returns the
/// byte that ended it (`'\n'` or another space), or `None` if the input ended inside the name (samtools: "the
/// last entry has no sequence").
fn read_header_name(reader: &mut Reader<'_>, first: u8, name: &mut Vec<u8>) -> Option<u8> {
    name.clear();
    let mut c = first;
    loop {
        if !is_c_space(c) {
            name.push(c);
        } else if !name.is_empty() || c == b'\n' {
            return Some(c);
        }
        c = reader.getc()?;
    }
}

/// Reads one sequence line starting at byte `first`; returns (bytes including the terminator, graphic bytes).
/// Like htslib, a final line without '\n' still counts one terminator byte.
fn read_sequence_line(reader: &mut Reader<'_>, first: u8) -> (u64, u64) {
    let mut width = 0u64;
    let mut bases = 0u64;
    let mut c = Some(first);
    while let Some(b) = c {
        if b == b'\n' {
            break;
        }
        width += 1;
        bases += u64::from(is_c_graph(b));
        c = reader.getc();
    }
    (width + 1, bases)
}

/// Appends the finished record unless its name was already indexed (samtools keeps the first). Names with a
/// NUL byte, or line geometry beyond the `.fai` columns' 32 bits, cannot be represented: no index.
fn insert_record(
    records: &mut Vec<FaiRecord>,
    seen: &mut std::collections::HashSet<Vec<u8>>,
    cur: &Pending,
) -> Option<()> {
    if cur.name.contains(&0) {
        return None;
    }
    if !seen.insert(cur.name.clone()) {
        return Some(());
    }
    records.push(FaiRecord {
        name: cur.name.clone(),
        length: cur.seq_len,
        offset: cur.seq_offset,
        line_bases: u32::try_from(cur.line_bases).ok()?,
        line_width: u32::try_from(cur.line_width).ok()?,
    });
    Some(())
}

/// `NAME\tLENGTH\tOFFSET\tLINEBASES\tLINEWIDTH\n` per record, in file order.
fn render(records: &[FaiRecord]) -> Vec<u8> {
    let mut out = Vec::new();
    for r in records {
        out.extend_from_slice(&r.name);
        out.extend_from_slice(format!("\t{}\t{}\t{}\t{}\n", r.length, r.offset, r.line_bases, r.line_width).as_bytes());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::fasta_index;
    use proptest::prelude::*;

    fn fai(s: &str) -> Option<String> {
        fasta_index(s.as_bytes()).map(|v| String::from_utf8(v).unwrap())
    }

    #[test]
    fn simple_records() {
        let text = ">chr1 some description\nACGTACGT\nACGTACGT\nACG\n>chr2\nAAAA\nCC\n";
        assert_eq!(fai(text).unwrap(), "chr1\t19\t23\t8\t9\nchr2\t6\t51\t4\t5\n");
    }

    #[test]
    fn crlf_counts_carriage_return_in_width() {
        let text = ">s\r\nACGT\r\nAC\r\n";
        assert_eq!(fai(text).unwrap(), "s\t6\t4\t4\t6\n");
    }

    #[test]
    fn no_final_newline() {
        assert_eq!(fai(">a\nACGT\nAC").unwrap(), "a\t6\t3\t4\t5\n");
    }

    #[test]
    fn blank_lines_between_records() {
        assert_eq!(fai(">a\nAC\n\n\r\n>b\nGG\n").unwrap(), "a\t2\t3\t2\t3\nb\t2\t12\t2\t3\n");
    }

    #[test]
    fn longer_line_is_inconsistent() {
        assert_eq!(fai(">a\nACG\nACGT\n"), None);
    }

    #[test]
    fn shorter_line_must_be_last() {
        assert_eq!(fai(">a\nACGT\nAC\nACGT\n"), None);
        assert!(fai(">a\nACGT\nAC\n>b\nA\n").is_some());
    }

    #[test]
    fn not_fasta() {
        assert_eq!(fai(""), None);
        assert_eq!(fai("hello world\n"), None);
        assert_eq!(fai("@r1\nACGT\n+\nIIII\n"), None);
        assert_eq!(fai(">a\rACGT\n"), None);
        assert_eq!(fai("\rx"), None);
        assert_eq!(fai(">only-a-header\n"), None);
        assert_eq!(fai(">no-newline"), None);
    }

    #[test]
    fn empty_middle_record_is_dropped_and_duplicates_keep_first() {
        assert_eq!(fai(">a\n>b\nAC\n>b\nGGGG\n").unwrap(), "b\t2\t6\t2\t3\n");
    }

    #[test]
    fn header_leading_spaces_and_tabs() {
        assert_eq!(fai(">  name\tx\nAC\n").unwrap(), "name\t2\t10\t2\t3\n");
    }

    /// Generates FASTA-ish text: records with a fixed width, optional CRLF, occasionally broken lines.
    fn fasta_text() -> impl Strategy<Value = Vec<u8>> {
        let record = (
            "[a-z0-9_]{0,6}",
            1usize..12,
            0usize..40,
            any::<bool>(),
            prop::collection::vec(prop::sample::select(b"ACGTNacgtn \r>".to_vec()), 0..4),
        );
        prop::collection::vec(record, 0..5).prop_map(|records| {
            let mut out = Vec::new();
            for (name, width, len, crlf, noise) in records {
                let eol: &[u8] = if crlf { b"\r\n" } else { b"\n" };
                out.push(b'>');
                out.extend_from_slice(name.as_bytes());
                out.extend_from_slice(eol);
                let bases: Vec<u8> = (0..len).map(|i| b"ACGT"[i % 4]).collect();
                for line in bases.chunks(width) {
                    out.extend_from_slice(line);
                    out.extend_from_slice(eol);
                }
                out.extend_from_slice(&noise);
            }
            out
        })
    }

    fn samtools_available() -> bool {
        std::process::Command::new("samtools").arg("--version").output().is_ok_and(|o| o.status.success())
    }

    /// What `samtools faidx` writes for `bytes`, or `None` when it refuses the file.
    fn samtools_fai(bytes: &[u8]) -> Option<Vec<u8>> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.fa");
        std::fs::write(&path, bytes).unwrap();
        let status = std::process::Command::new("samtools")
            .arg("faidx")
            .arg(&path)
            .stderr(std::process::Stdio::null())
            .status()
            .unwrap();
        if !status.success() {
            return None;
        }
        Some(std::fs::read(dir.path().join("x.fa.fai")).unwrap())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        /// The index equals samtools' own output on generated inputs, including ones samtools refuses.
        #[test]
        fn matches_samtools(text in fasta_text()) {
            if !samtools_available() {
                eprintln!("samtools not installed: skipping the comparison");
                return Ok(());
            }
            prop_assert_eq!(fasta_index(&text), samtools_fai(&text));
        }

        /// Never panics on arbitrary bytes.
        #[test]
        fn arbitrary_bytes_do_not_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
            let _ = fasta_index(&bytes);
        }
    }
}
