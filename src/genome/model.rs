//! Splitting FASTA bytes into a [`Genome`] (layout, case mask, exceptions) and the nucleotide stream.
//!
//! One pass over the lines. A line starting with `>` is a header (any bytes but `\n`); every other line is a
//! sequence line whose bytes must all be residues: A C G T, N, or an IUPAC code R Y K M S W B D H V, in either
//! case. A `\r` is allowed only right before a `\n` (a CRLF terminator) — and in header text, which is kept as
//! is. Anything else (a `>` inside a line, FASTQ, protein letters, a bare `\r`, binary bytes) cannot be
//! modelled and gives `None`: the packer then stores the file in general mode.

use super::layout::{Layout, LineKind, LineRun, Term};
use super::mask::{is_exception_byte, CaseMask, Exceptions, RunList};
use super::Genome;
use crate::pack::matcher::all_acgt;

/// A modelled file: its structure and its A/C/G/T stream (uppercase ASCII, one byte per base).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Split {
    pub genome: Genome,
    pub bases: Vec<u8>,
}

/// Bases are handed to the sink in pieces of about this size, so memory does not grow with the file.
const SINK_CHUNK: usize = 64 << 10;

/// Accumulates runs while scanning, merging equal neighbours so the result is canonical.
#[derive(Default)]
struct Builder {
    runs: Vec<LineRun>,
    headers: Vec<Vec<u8>>,
    residue: u64,
    case_starts: Vec<u64>,
    case_ends: Vec<u64>,
    exc_starts: Vec<u64>,
    exc_ends: Vec<u64>,
    exc_bytes: Vec<u8>,
    /// Bases not yet handed to the sink.
    bases: Vec<u8>,
    /// Bases handed to the sink so far.
    sunk: u64,
}

impl Builder {
    fn push_line(&mut self, kind: LineKind, width: u64, term: Term) {
        if let Some(last) = self.runs.last_mut() {
            if kind == LineKind::Sequence && last.kind == kind && last.width == width && last.term == term {
                last.count += 1;
                return;
            }
        }
        self.runs.push(LineRun { kind, width, count: 1, term });
    }

    /// Adds the residues of one sequence line; `false` if a byte is not a residue.
    fn push_residues(&mut self, line: &[u8]) -> bool {
        // Eight bytes at a time while they are all upper-case bases, or all lower-case ones (one case run);
        // byte by byte where they mix with each other or with anything else. Every file is split twice (its
        // first look and the stream build), a byte at a time that was ~3 % of a genome pack's CPU.
        const LOWER: u64 = u64::from_le_bytes([0x20; 8]);
        let mut words = line.chunks_exact(8);
        for word in &mut words {
            let w = u64::from_le_bytes(word.try_into().expect("8 bytes"));
            let r = self.residue;
            if all_acgt(w) {
                self.bases.extend_from_slice(word);
            } else if w & LOWER == LOWER && all_acgt(w & !LOWER) {
                self.bases.extend_from_slice(&(w & !LOWER).to_le_bytes());
                if self.case_ends.last() == Some(&r) {
                    *self.case_ends.last_mut().expect("checked non-empty") += 8;
                } else {
                    self.case_starts.push(r);
                    self.case_ends.push(r + 8);
                }
            } else if !self.push_residue_bytes(word) {
                return false;
            } else {
                continue;
            }
            self.residue += 8;
        }
        self.push_residue_bytes(words.remainder())
    }

    /// [`Self::push_residues`] a byte at a time.
    fn push_residue_bytes(&mut self, line: &[u8]) -> bool {
        for &b in line {
            let upper = b.to_ascii_uppercase();
            let r = self.residue;
            match upper {
                b'A' | b'C' | b'G' | b'T' => self.bases.push(upper),
                _ if is_exception_byte(upper) => {
                    if self.exc_ends.last() == Some(&r) && self.exc_bytes.last() == Some(&upper) {
                        *self.exc_ends.last_mut().expect("checked non-empty") += 1;
                    } else {
                        self.exc_starts.push(r);
                        self.exc_ends.push(r + 1);
                        self.exc_bytes.push(upper);
                    }
                }
                _ => return false,
            }
            if b.is_ascii_lowercase() {
                if self.case_ends.last() == Some(&r) {
                    *self.case_ends.last_mut().expect("checked non-empty") += 1;
                } else {
                    self.case_starts.push(r);
                    self.case_ends.push(r + 1);
                }
            }
            self.residue += 1;
        }
        true
    }
}

/// Splits `bytes` into structure and nucleotide stream, or `None` if the file is not FASTA that the model
/// represents exactly (see the module docs). Does not judge whether genome mode pays; see [`super::worthwhile`].
pub fn split(bytes: &[u8]) -> Option<Split> {
    let mut bases = Vec::with_capacity(bytes.len());
    let genome = split_into(bytes, |piece| bases.extend_from_slice(piece))?;
    Some(Split { genome, bases })
}

/// [`split`] for files of any size: the bases go to `sink` in order, in pieces of about 64 KiB, and only the
/// structure is kept in memory. On `None` the sink may already have received bases; the caller discards them.
pub fn split_into(bytes: &[u8], mut sink: impl FnMut(&[u8])) -> Option<Genome> {
    if bytes.len() as u64 > super::layout::MAX_TOTAL_LEN {
        return None;
    }
    let mut b = Builder { bases: Vec::with_capacity(2 * SINK_CHUNK), ..Builder::default() };
    let mut rest = bytes;
    while !rest.is_empty() {
        let (content, term, next) = match rest.iter().position(|&c| c == b'\n') {
            Some(nl) if nl > 0 && rest[nl - 1] == b'\r' => (&rest[..nl - 1], Term::CrLf, &rest[nl + 1..]),
            Some(nl) => (&rest[..nl], Term::Lf, &rest[nl + 1..]),
            None => (rest, Term::None, &rest[rest.len()..]),
        };
        rest = next;
        if let Some(text) = content.strip_prefix(b">") {
            b.headers.push(text.to_vec());
            b.push_line(LineKind::Header, content.len() as u64, term);
        } else {
            // A '\r' in a sequence line is a bare CR (or a CR before end of file): not modelled.
            if !b.push_residues(content) {
                return None;
            }
            if b.bases.len() >= SINK_CHUNK {
                sink(&b.bases);
                b.sunk += b.bases.len() as u64;
                b.bases.clear();
            }
            b.push_line(LineKind::Sequence, content.len() as u64, term);
        }
    }
    sink(&b.bases);
    let sunk = b.sunk + b.bases.len() as u64;
    let residues = b.residue;
    let layout = Layout::new(b.runs, b.headers).ok()?;
    let case = CaseMask { runs: RunList::new(b.case_starts, b.case_ends, residues, "genome case runs").ok()? };
    let exc_runs = RunList::new(b.exc_starts, b.exc_ends, residues, "genome exception runs").ok()?;
    let exceptions = Exceptions::new(exc_runs, b.exc_bytes).ok()?;
    let genome = Genome::new(layout, case, exceptions).ok()?;
    debug_assert_eq!(genome.bases(), sunk);
    Some(genome)
}

#[cfg(test)]
mod tests {
    use super::Builder;

    /// The word-at-a-time path of `push_residues` builds what the byte path builds, on lines that mix cases,
    /// N and IUPAC runs at every offset within a word.
    #[test]
    fn residues_by_words_match_residues_by_bytes() {
        let mut x = 3u64;
        let mut words = Builder::default();
        let mut bytes = Builder::default();
        for _ in 0..400 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let len = (x % 90) as usize;
            let line: Vec<u8> = (0..len)
                .map(|k| {
                    // Runs of 11 residues of one kind: upper-case or lower-case bases (the word paths), N, or
                    // an IUPAC code, so words are whole runs, or straddle two.
                    let run = (x >> ((k / 11) % 60)) as usize;
                    match run % 23 {
                        0 => b'N',
                        1 => b'r',
                        2..=10 => b"acgt"[(run + k) % 4],
                        _ => b"ACGT"[(run + k) % 4],
                    }
                })
                .collect();
            assert!(words.push_residues(&line));
            assert!(bytes.push_residue_bytes(&line));
        }
        assert_eq!(words.bases, bytes.bases);
        assert_eq!(words.residue, bytes.residue);
        assert_eq!((words.case_starts, words.case_ends), (bytes.case_starts, bytes.case_ends));
        assert_eq!(
            (words.exc_starts, words.exc_ends, words.exc_bytes),
            (bytes.exc_starts, bytes.exc_ends, bytes.exc_bytes)
        );
        assert!(!Builder::default().push_residues(b"ACGTACGTACGT>CGT"));
    }
}
