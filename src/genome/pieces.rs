//! A genome file's structure as independently decodable **pieces** (structure version 4): a small piece table,
//! then one version-3 structure ([`super::serial`]) per piece.
//!
//! ```text
//! u8[4]  magic "ACXG"
//! u8     version = 4
//! u32    table_len                  little-endian: bytes of the table that follow, its checksum included
//! varint total_len, varint residues, varint bases        the file's totals
//! varint piece_count
//! piece_count × (varint bytes, varint residues, varint bases, varint len)
//! u64    xxh3 of every preceding byte of the structure (magic to the last piece entry)
//! u8     piece[len] ...             each piece's version-3 structure, in file order, back to back
//! ```
//!
//! A piece covers a contiguous range of the file's original bytes that starts at a line start; piece `i` starts
//! where piece `i − 1` ends. Each is modelled as a file of its own (its own line runs, case and exception runs,
//! header texts; residues and bases counted from 0 within it), so a reader decodes only the pieces its byte range
//! meets: the table's prefix sums give, by binary search, the piece of any original byte, where its bases start
//! in the nucleotide stream and where its code lies in the structure.
//!
//! Why: the whole structure of a chromosome took ~50 ms to decode (atha_chr1's 31 MB) and a 1.16 GB file's
//! 1.2 s, all paid by the first read of the file, whatever it asked for. A piece of ~2 MiB of original bytes
//! decodes in a few ms; cutting costs each piece its own models' learning and a few bytes of head (0.03 % of
//! atha_chr1's archive at 2 MiB pieces, see [`PIECE_BYTES`]).
//!
//! The writer's cut ([`cut`]): a piece ends at the first line start at or after `PIECE_BYTES` bytes from its own
//! start (so a line is never split; the last piece takes the rest). Readers accept any cut at line starts: a
//! piece other than the last must end with a line terminator.

use std::ops::Range;

use xxhash_rust::xxh3::xxh3_64;

use super::layout::{Term, MAX_TOTAL_LEN};
use super::{serial, split_into, Genome};
use crate::codec::varint;
use crate::error::DecodeError;

pub const MAGIC: &[u8; 4] = serial::MAGIC;
/// The structure version of a piece table (its pieces are [`serial::VERSION`]).
pub const VERSION: u8 = 4;
/// Magic, version and `table_len`: what a reader reads before it knows the table's length.
pub const PREFIX_LEN: u64 = 4 + 1 + 4;
/// The smallest table: four one-byte varints and the checksum.
const MIN_TABLE_LEN: u64 = 4 + 8;
/// Bytes of a piece entry at least (four one-byte varints): bounds `piece_count` by the table's length.
const MIN_ENTRY_LEN: u64 = 4;

/// Original bytes per piece the packer aims at (a piece ends at the first line start from here on).
///
/// Each piece costs ~145 bytes of archive on atha_chr1 (its models learn again from their initial state, and its
/// head and checksum), and a cold read decodes a whole piece. Measured on atha_chr1 (`aceapex pack`, default
/// options; one structure at 6b4c30f: 7,164,033 bytes): pieces of 512 KiB 7,172,089 (+0.112 %), 1 MiB 7,168,386
/// (+0.061 %), 2 MiB 7,166,359 (+0.032 %), 4 MiB 7,165,340 (+0.018 %). 2 MiB keeps the cost under 0.05 % and a
/// fresh process's 4 KiB read at ~6 ms (the whole structure: ~50–60 ms).
pub const PIECE_BYTES: u64 = 2 << 20;

/// The packer's piece size: [`PIECE_BYTES`], or `ACEAPEX_GENOME_PIECE_BYTES` (measurements and tests of the
/// reader on many pieces; any value ≥ 1 gives a valid archive).
pub fn piece_bytes() -> u64 {
    static BYTES: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *BYTES.get_or_init(|| {
        std::env::var("ACEAPEX_GENOME_PIECE_BYTES")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .filter(|&v| v >= 1)
            .unwrap_or(PIECE_BYTES)
    })
}

/// The pieces of `bytes`: each ends at the first line start at or after `piece_bytes` (≥ 1) bytes from its
/// start, the last at the end. Empty input: no pieces.
pub fn cut(bytes: &[u8], piece_bytes: u64) -> Vec<Range<usize>> {
    let step = usize::try_from(piece_bytes.max(1)).unwrap_or(usize::MAX);
    let mut out = Vec::new();
    let mut start = 0usize;
    while start < bytes.len() {
        let want = start.saturating_add(step);
        // A line start at `x > 0` follows a '\n' at `x − 1`: the first at or after `want` ends at the first '\n'
        // at or after `want − 1`.
        let end = if want >= bytes.len() {
            bytes.len()
        } else {
            bytes[want - 1..].iter().position(|&c| c == b'\n').map_or(bytes.len(), |i| want + i)
        };
        out.push(start..end);
        start = end;
    }
    out
}

/// One piece's entry in the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PieceEntry {
    /// Original bytes.
    pub bytes: u64,
    pub residues: u64,
    pub bases: u64,
    /// Bytes of the piece's version-3 structure.
    pub len: u64,
}

/// A file's structure, encoded: the bytes to store and the file's base count.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Encoded {
    pub structure: Vec<u8>,
    pub bases: u64,
    pub pieces: usize,
}

/// Splits `bytes` into pieces ([`cut`]), models and encodes each; the bases go to `sink` in file order (in pieces of
/// about 64 KiB). `None` if the file is not FASTA the model represents exactly (see
/// [`super::model`](mod@super::model)).
pub fn encode_file(bytes: &[u8], piece_bytes: u64, mut sink: impl FnMut(&[u8])) -> Option<Encoded> {
    if bytes.len() as u64 > MAX_TOTAL_LEN {
        return None;
    }
    let mut entries = Vec::new();
    let mut codes = Vec::new();
    for r in cut(bytes, piece_bytes) {
        let g = split_into(&bytes[r], &mut sink)?;
        let code = serial::encode(&g);
        entries.push(entry_of(&g, &code));
        codes.push(code);
    }
    Some(assemble(&entries, &codes))
}

/// [`encode_file`] without the bases, the pieces modelled in parallel (the packer's first look at a file).
pub fn encode_file_parallel(bytes: &[u8], piece_bytes: u64) -> Option<Encoded> {
    encode_file_parallel_keeping(bytes, piece_bytes, false).map(|(e, _)| e)
}

/// [`encode_file_parallel`] that, with `keep`, also returns the bases, a vector per piece in file order (empty
/// vectors without `keep`). Why: the packer keeps a small file's bases from its first look instead of modelling
/// the file a second time when it builds its stream.
pub fn encode_file_parallel_keeping(bytes: &[u8], piece_bytes: u64, keep: bool) -> Option<(Encoded, Vec<Vec<u8>>)> {
    use rayon::prelude::*;
    if bytes.len() as u64 > MAX_TOTAL_LEN {
        return None;
    }
    let parts: Option<Vec<ModelledPiece>> = cut(bytes, piece_bytes)
        .into_par_iter()
        .map(|r| {
            // Room for every byte of the piece (its bases are fewer): growing the vector copied it about twice.
            let mut bases = if keep { Vec::with_capacity(r.len()) } else { Vec::new() };
            let g = if keep {
                split_into(&bytes[r], |b| bases.extend_from_slice(b))?
            } else {
                split_into(&bytes[r], |_| {})?
            };
            let code = serial::encode(&g);
            Some((entry_of(&g, &code), code, bases))
        })
        .collect();
    let mut entries = Vec::new();
    let mut codes = Vec::new();
    let mut kept = Vec::new();
    for (entry, code, bases) in parts? {
        entries.push(entry);
        codes.push(code);
        kept.push(bases);
    }
    Some((assemble(&entries, &codes), kept))
}

/// A piece modelled by [`encode_file_batched`]: its entry, its code and its bases.
type ModelledPiece = (PieceEntry, Vec<u8>, Vec<u8>);

/// [`encode_file`] with up to `batch` (≥ 1) pieces modelled at once in parallel: the same structure, and the same
/// bases to `sink` in file order (a piece's bases in one call each), with at most `batch` pieces' bases held in
/// memory. Why: the packer builds its stream with this (the bases of a genome file, checked against the
/// structure its first look found); one piece after another, that was a serial stage of ~0.25 s on atha_chr1
/// with the other cores idle.
pub fn encode_file_batched(
    bytes: &[u8],
    piece_bytes: u64,
    batch: usize,
    mut sink: impl FnMut(&[u8]),
) -> Option<Encoded> {
    use rayon::prelude::*;
    if bytes.len() as u64 > MAX_TOTAL_LEN {
        return None;
    }
    let mut entries = Vec::new();
    let mut codes = Vec::new();
    for ranges in cut(bytes, piece_bytes).chunks(batch.max(1)) {
        let parts: Option<Vec<ModelledPiece>> = ranges
            .par_iter()
            .map(|r| {
                let mut bases = Vec::new();
                let g = split_into(&bytes[r.clone()], |b| bases.extend_from_slice(b))?;
                let code = serial::encode(&g);
                Some((entry_of(&g, &code), code, bases))
            })
            .collect();
        for (entry, code, bases) in parts? {
            sink(&bases);
            entries.push(entry);
            codes.push(code);
        }
    }
    Some(assemble(&entries, &codes))
}

fn entry_of(g: &Genome, code: &[u8]) -> PieceEntry {
    PieceEntry { bytes: g.total_len(), residues: g.layout.residues(), bases: g.bases(), len: code.len() as u64 }
}

/// The structure of pieces `codes` (version-3 structures) described by `entries`.
pub fn assemble(entries: &[PieceEntry], codes: &[Vec<u8>]) -> Encoded {
    let sum = |f: fn(&PieceEntry) -> u64| entries.iter().map(f).sum::<u64>();
    let (bytes, residues, bases) = (sum(|e| e.bytes), sum(|e| e.residues), sum(|e| e.bases));
    let mut body = Vec::new();
    for v in [bytes, residues, bases, entries.len() as u64] {
        varint::write(v, &mut body);
    }
    for e in entries {
        for v in [e.bytes, e.residues, e.bases, e.len] {
            varint::write(v, &mut body);
        }
    }
    let mut out = Vec::with_capacity(PREFIX_LEN as usize + body.len() + 8 + codes.iter().map(Vec::len).sum::<usize>());
    out.extend_from_slice(MAGIC);
    out.push(VERSION);
    out.extend_from_slice(&((body.len() + 8) as u32).to_le_bytes());
    out.extend_from_slice(&body);
    let sum = xxh3_64(&out);
    out.extend_from_slice(&sum.to_le_bytes());
    for c in codes {
        out.extend_from_slice(c);
    }
    Encoded { structure: out, bases, pieces: entries.len() }
}

/// The table's length from the structure's first [`PREFIX_LEN`] bytes, checked against the structure's length
/// (`structure_len`): the table must fit after the prefix.
pub fn table_len(prefix: &[u8], structure_len: u64) -> Result<u64, DecodeError> {
    if (prefix.len() as u64) < PREFIX_LEN || structure_len < PREFIX_LEN {
        let have = prefix.len().min(structure_len as usize);
        return Err(DecodeError::Truncated { at: have, needed: PREFIX_LEN as usize - have });
    }
    if &prefix[..4] != MAGIC {
        return Err(DecodeError::Invalid { what: "genome structure magic", detail: format!("{:02x?}", &prefix[..4]) });
    }
    if prefix[4] != VERSION {
        return Err(DecodeError::Invalid {
            what: "genome structure version",
            detail: format!("{} (this reader knows {VERSION}: a piece table)", prefix[4]),
        });
    }
    let len = u64::from(u32::from_le_bytes(prefix[5..9].try_into().expect("4 bytes")));
    let limit = structure_len - PREFIX_LEN;
    if len > limit {
        return Err(DecodeError::Limit { what: "genome piece table_len", value: len, limit });
    }
    if len < MIN_TABLE_LEN {
        let detail = format!("{len} bytes, a table takes at least {MIN_TABLE_LEN}");
        return Err(DecodeError::Invalid { what: "genome piece table_len", detail });
    }
    Ok(len)
}

/// A validated piece table: prefix sums over the pieces, so that any original byte finds its piece by one binary
/// search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PieceTable {
    /// Original byte where piece `i` starts; one extra entry holds the file's length.
    byte_start: Vec<u64>,
    /// Residue where piece `i` starts; one extra entry holds the file's residues.
    residue_start: Vec<u64>,
    /// Base (position in the nucleotide stream) where piece `i` starts; one extra entry holds the file's bases.
    base_start: Vec<u64>,
    /// Offset in the structure where piece `i`'s code starts; one extra entry holds the structure's length.
    code_start: Vec<u64>,
}

/// A bounds-checked varint reader.
struct Reader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn bounded(&mut self, what: &'static str, limit: u64) -> Result<u64, DecodeError> {
        let value = varint::read_at(self.bytes, &mut self.pos)?;
        if value > limit {
            return Err(DecodeError::Limit { what, value, limit });
        }
        Ok(value)
    }
}

impl PieceTable {
    /// Decodes a piece table: `table` is the structure's first `PREFIX_LEN + table_len` bytes (see
    /// [`table_len`]) of a `structure_len`-byte structure. Checks the checksum, every count and length against the
    /// table's and the structure's length before allocating, every sum against overflow and the declared totals,
    /// and that the pieces' codes fill the structure exactly after the table.
    pub fn decode(table: &[u8], structure_len: u64) -> Result<PieceTable, DecodeError> {
        let len = table_len(table, structure_len)?;
        if table.len() as u64 != PREFIX_LEN + len {
            let detail = format!("{} bytes given, the prefix says {}", table.len(), PREFIX_LEN + len);
            return Err(DecodeError::Invalid { what: "genome piece table", detail });
        }
        let (body, sum) = table.split_at(table.len() - 8);
        let expected = u64::from_le_bytes(sum.try_into().expect("8 bytes"));
        let actual = xxh3_64(body);
        if expected != actual {
            return Err(DecodeError::Checksum { expected, actual });
        }
        let mut r = Reader { bytes: body, pos: PREFIX_LEN as usize };
        let total_len = r.bounded("genome total_len", MAX_TOTAL_LEN)?;
        let residues = r.bounded("genome residues", total_len)?;
        let bases = r.bounded("genome bases", residues)?;
        // Every entry takes at least MIN_ENTRY_LEN bytes of the table and every piece at least serial::MIN_LEN
        // bytes of code: the allocations below (and a reader's per-piece slots) are bounded by both.
        let codes_at = PREFIX_LEN + len;
        let codes_len = structure_len - codes_at;
        let left = (body.len() - r.pos) as u64;
        let count = r.bounded("genome piece_count", (left / MIN_ENTRY_LEN).min(codes_len / serial::MIN_LEN))? as usize;
        if (count == 0) != (total_len == 0) {
            let detail =
                format!("{count} pieces for {total_len} bytes (a file has pieces if and only if it has bytes)");
            return Err(DecodeError::Invalid { what: "genome piece_count", detail });
        }
        let mut t = PieceTable {
            byte_start: Vec::with_capacity(count + 1),
            residue_start: Vec::with_capacity(count + 1),
            base_start: Vec::with_capacity(count + 1),
            code_start: Vec::with_capacity(count + 1),
        };
        let (mut at_byte, mut at_residue, mut at_base, mut at_code) = (0u64, 0u64, 0u64, codes_at);
        for i in 0..count {
            t.byte_start.push(at_byte);
            t.residue_start.push(at_residue);
            t.base_start.push(at_base);
            t.code_start.push(at_code);
            // Each bounded by what is left of its total, so the running sums never pass the totals.
            let bytes = r.bounded("genome piece bytes", total_len - at_byte)?;
            let piece_residues = r.bounded("genome piece residues", (residues - at_residue).min(bytes))?;
            let piece_bases = r.bounded("genome piece bases", (bases - at_base).min(piece_residues))?;
            let code = r.bounded("genome piece len", structure_len - at_code)?;
            if bytes == 0 || code < serial::MIN_LEN {
                let detail =
                    format!("piece {i}: {bytes} bytes, {code} bytes of code (at least 1 and {})", serial::MIN_LEN);
                return Err(DecodeError::Invalid { what: "genome piece", detail });
            }
            at_byte += bytes;
            at_residue += piece_residues;
            at_base += piece_bases;
            at_code += code;
        }
        t.byte_start.push(at_byte);
        t.residue_start.push(at_residue);
        t.base_start.push(at_base);
        t.code_start.push(at_code);
        if r.pos != body.len() {
            let detail = format!("{} bytes left after the {count} piece entries", body.len() - r.pos);
            return Err(DecodeError::Invalid { what: "genome piece table", detail });
        }
        for (what, declared, sum) in [
            ("genome total_len", total_len, at_byte),
            ("genome residues", residues, at_residue),
            ("genome bases", bases, at_base),
            ("genome piece codes", codes_len, at_code - codes_at),
        ] {
            if declared != sum {
                let detail = format!("declared {declared}, the pieces sum to {sum}");
                return Err(DecodeError::Invalid { what, detail });
            }
        }
        Ok(t)
    }

    /// Pieces.
    pub fn len(&self) -> usize {
        self.byte_start.len() - 1
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The file's length in original bytes.
    pub fn total_len(&self) -> u64 {
        *self.byte_start.last().expect("n + 1 entries")
    }

    /// The file's bases.
    pub fn bases(&self) -> u64 {
        *self.base_start.last().expect("n + 1 entries")
    }

    /// The piece that holds original byte `off`; `None` at or past the end.
    pub fn piece_of(&self, off: u64) -> Option<usize> {
        if off >= self.total_len() {
            return None;
        }
        // The last piece whose start is ≤ off; pieces are never empty.
        Some(self.byte_start.partition_point(|&s| s <= off) - 1)
    }

    /// Original bytes of piece `i`.
    pub fn bytes(&self, i: usize) -> Range<u64> {
        self.byte_start[i]..self.byte_start[i + 1]
    }

    /// Bases of piece `i` (positions in the file's nucleotide stream).
    pub fn bases_of(&self, i: usize) -> Range<u64> {
        self.base_start[i]..self.base_start[i + 1]
    }

    /// Where piece `i`'s code lies in the structure.
    pub fn code(&self, i: usize) -> Range<u64> {
        self.code_start[i]..self.code_start[i + 1]
    }

    /// Bytes this table holds on the heap.
    pub fn heap_bytes(&self) -> u64 {
        let words = self.byte_start.capacity()
            + self.residue_start.capacity()
            + self.base_start.capacity()
            + self.code_start.capacity();
        words as u64 * 8
    }

    /// Decodes piece `i` from its code (the structure's bytes [`PieceTable::code`]`(i)`) and checks it against
    /// the table: its totals, and that a piece before the last ends with a line terminator (the next piece starts
    /// a line). Errors name the piece, its original bytes and where its code lies in the structure.
    pub fn decode_piece(&self, i: usize, code: &[u8]) -> Result<Genome, DecodeError> {
        let name = |e: DecodeError| {
            let (b, c) = (self.bytes(i), self.code(i));
            DecodeError::Invalid {
                what: "genome structure piece",
                detail: format!(
                    "piece {i} of {} (original bytes {}..{}, structure bytes {}..{}): {e}",
                    self.len(),
                    b.start,
                    b.end,
                    c.start,
                    c.end
                ),
            }
        };
        if code.len() as u64 != self.code(i).end - self.code(i).start {
            let detail = format!("{} bytes given", code.len());
            return Err(name(DecodeError::Invalid { what: "genome piece code", detail }));
        }
        let g = serial::decode(code).map_err(name)?;
        let check = |what: &'static str, table: u64, piece: u64| {
            if table == piece {
                Ok(())
            } else {
                Err(name(DecodeError::Invalid { what, detail: format!("the table says {table}, the piece {piece}") }))
            }
        };
        let b = self.bytes(i);
        check("genome piece bytes", b.end - b.start, g.total_len())?;
        check("genome piece residues", self.residue_start[i + 1] - self.residue_start[i], g.layout.residues())?;
        let bases = self.bases_of(i);
        check("genome piece bases", bases.end - bases.start, g.bases())?;
        if i + 1 < self.len() && g.layout.runs().last().is_some_and(|r| r.term == Term::None) {
            let detail = "a piece before the last ends inside a line".to_string();
            return Err(name(DecodeError::Invalid { what: "genome piece", detail }));
        }
        Ok(g)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fasta(lines: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        for i in 0..lines {
            if i % 37 == 0 {
                out.extend_from_slice(format!(">rec{i} test record\n").as_bytes());
            }
            for j in 0..(50 + i % 13) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let b = b"ACGTACGTacgtNNRy"[(x % 16) as usize];
                out.push(if j < 3 && i % 5 == 0 { b'n' } else { b });
            }
            out.extend_from_slice(if i % 101 == 7 { b"\r\n" } else { b"\n" });
        }
        out.extend_from_slice(b"ACGTT");
        out
    }

    /// The whole file back from the structure: every piece decoded and reconstructed from its bases.
    fn reconstruct(structure: &[u8], bases: &[u8]) -> Vec<u8> {
        let len = table_len(structure, structure.len() as u64).unwrap();
        let t = PieceTable::decode(&structure[..(PREFIX_LEN + len) as usize], structure.len() as u64).unwrap();
        let mut out = Vec::new();
        for i in 0..t.len() {
            let c = t.code(i);
            let g = t.decode_piece(i, &structure[c.start as usize..c.end as usize]).unwrap();
            let b = t.bases_of(i);
            out.extend(g.reconstruct(&bases[b.start as usize..b.end as usize]).unwrap());
        }
        out
    }

    #[test]
    fn cuts_fall_on_line_starts_at_or_after_the_piece_size() {
        let f = fasta(300);
        for size in [1u64, 7, 100, 1000, 1 << 20] {
            let pieces = cut(&f, size);
            assert_eq!(pieces.first().map(|r| r.start), Some(0));
            assert_eq!(pieces.last().map(|r| r.end), Some(f.len()));
            for w in pieces.windows(2) {
                assert_eq!(w[0].end, w[1].start);
                assert_eq!(f[w[0].end - 1], b'\n', "size {size}: a cut not at a line start");
                assert!((w[0].end - w[0].start) as u64 >= size);
                // The first line start at or after the size: no '\n' in between.
                let first = w[0].start + size as usize - 1;
                assert!(!f[first..w[0].end - 1].contains(&b'\n'));
            }
        }
        assert!(cut(b"", 10).is_empty());
        assert_eq!(cut(b"ACGT", 2), vec![0..4]);
    }

    #[test]
    fn files_round_trip_through_many_pieces() {
        let f = fasta(400);
        let mut all_bases = Vec::new();
        let one = encode_file(&f, u64::MAX, |b| all_bases.extend_from_slice(b)).unwrap();
        assert_eq!(one.pieces, 1);
        for size in [1u64, 60, 997, 4096, 1 << 20] {
            let mut bases = Vec::new();
            let e = encode_file(&f, size, |b| bases.extend_from_slice(b)).unwrap();
            assert_eq!(bases, all_bases);
            assert_eq!(e.bases, bases.len() as u64);
            assert_eq!(encode_file_parallel(&f, size).unwrap(), e);
            for batch in [1, 3, 64] {
                let mut batched = Vec::new();
                assert_eq!(encode_file_batched(&f, size, batch, |b| batched.extend_from_slice(b)).unwrap(), e);
                assert_eq!(batched, bases, "size {size} batch {batch}");
            }
            assert_eq!(reconstruct(&e.structure, &bases), f, "size {size}");
        }
        assert!(encode_file(b">a\nAC\rGT\n", 1, |_| {}).is_none());
        assert!(encode_file_batched(b">a\nAC\rGT\n", 1, 4, |_| {}).is_none());
    }

    fn sample() -> (Vec<u8>, u64) {
        let e = encode_file(&fasta(200), 2000, |_| {}).unwrap();
        assert!(e.pieces > 3);
        let len = table_len(&e.structure, e.structure.len() as u64).unwrap();
        (e.structure, PREFIX_LEN + len)
    }

    fn reseal(table: &mut [u8]) {
        let n = table.len() - 8;
        let sum = xxh3_64(&table[..n]);
        table[n..].copy_from_slice(&sum.to_le_bytes());
    }

    /// The table of `s` with its varints rewritten by `edit` (values in order: totals, count, then 4 per piece),
    /// its length and checksum fixed.
    fn edited(s: &[u8], table_end: u64, edit: impl FnOnce(&mut Vec<u64>)) -> Vec<u8> {
        let body = &s[PREFIX_LEN as usize..table_end as usize - 8];
        let mut values = Vec::new();
        let mut pos = 0;
        while pos < body.len() {
            values.push(varint::read_at(body, &mut pos).unwrap());
        }
        edit(&mut values);
        let mut t = s[..PREFIX_LEN as usize].to_vec();
        for v in values {
            varint::write(v, &mut t);
        }
        let len = (t.len() - PREFIX_LEN as usize + 8) as u32;
        t[5..9].copy_from_slice(&len.to_le_bytes());
        t.extend_from_slice(&[0; 8]);
        reseal(&mut t);
        t
    }

    #[test]
    fn lying_tables_are_refused_naming_the_field() {
        let (s, end) = sample();
        let n = s.len() as u64;
        let decode = |t: &[u8], n: u64| PieceTable::decode(t, n).unwrap_err().to_string();
        assert!(PieceTable::decode(&s[..end as usize], n).is_ok());
        // Prefix: magic, version, table_len past the structure or below the minimum.
        let mut bad = s.clone();
        bad[4] = 3;
        assert!(decode(&bad[..end as usize], n).contains("version"));
        assert!(table_len(&s, end - 1).unwrap_err().to_string().contains("table_len"));
        let mut small = s[..end as usize].to_vec();
        small[5..9].copy_from_slice(&3u32.to_le_bytes());
        assert!(table_len(&small, n).unwrap_err().to_string().contains("table_len"));
        assert!(matches!(table_len(&s[..5], n), Err(DecodeError::Truncated { .. })));
        // A flipped byte fails the checksum.
        let mut flipped = s[..end as usize].to_vec();
        flipped[12] ^= 1;
        assert!(matches!(PieceTable::decode(&flipped, n), Err(DecodeError::Checksum { .. })));
        // Resealed lies.
        type Edit = Box<dyn Fn(&mut Vec<u64>)>;
        let cases: [(&str, Edit); 9] = [
            ("piece_count", Box::new(|v| v[3] = 1 << 40)),
            ("truncated", Box::new(|v| v[3] += 1)),
            ("genome piece bytes", Box::new(|v| v[4] = v[0] + 1)),
            ("genome total_len", Box::new(|v| v[4] -= 1)),
            ("genome piece residues", Box::new(|v| v[5] = v[4] + 1)),
            ("genome piece bases", Box::new(|v| v[6] = v[5] + 1)),
            ("genome piece len", Box::new(|v| v[7] = u64::MAX >> 2)),
            ("genome piece codes", Box::new(|v| v[7] -= 1)),
            ("genome piece", Box::new(|v| v[7] = 3)),
        ];
        for (want, edit) in cases {
            let t = edited(&s, end, edit);
            let delta = t.len() as i64 - end as i64;
            let err = decode(&t, (n as i64 + delta) as u64);
            assert!(err.contains(want), "{want}: {err}");
        }
        // Zero pieces for a non-empty file, and trailing bytes in the table.
        let t = edited(&s, end, |v| {
            v[3] = 0;
            v.truncate(4);
        });
        assert!(decode(&t, n).contains("piece_count") || decode(&t, n).contains("codes"));
        let t = edited(&s, end, |v| v.push(0));
        assert!(decode(&t, n + 1).contains("left after"), "{}", decode(&t, n + 1));
    }

    #[test]
    fn pieces_that_disagree_with_the_table_are_refused_naming_the_piece() {
        let (s, end) = sample();
        let t = PieceTable::decode(&s[..end as usize], s.len() as u64).unwrap();
        let code = |i: usize| s[t.code(i).start as usize..t.code(i).end as usize].to_vec();
        // Another piece's code in piece 1's place: its totals differ from the table's (or its length does).
        let err = t.decode_piece(1, &code(2)).unwrap_err().to_string();
        assert!(err.contains("piece 1 of"), "{err}");
        let mut bad = code(1);
        let at = bad.len() / 2;
        bad[at] ^= 0x20;
        let err = t.decode_piece(1, &bad).unwrap_err().to_string();
        assert!(err.contains("piece 1 of") && err.contains("checksum"), "{err}");
    }

    #[test]
    fn an_unterminated_piece_before_the_last_is_refused() {
        // Two pieces cut by hand: the first ends inside a line.
        let a = split_into(b">a\nACGT\nAC", |_| {}).unwrap();
        let b = split_into(b"GT\nAAAA\n", |_| {}).unwrap();
        let codes = vec![serial::encode(&a), serial::encode(&b)];
        let entries: Vec<PieceEntry> = [&a, &b].iter().zip(&codes).map(|(g, c)| entry_of(g, c)).collect();
        let e = assemble(&entries, &codes);
        let end = PREFIX_LEN + table_len(&e.structure, e.structure.len() as u64).unwrap();
        let t = PieceTable::decode(&e.structure[..end as usize], e.structure.len() as u64).unwrap();
        let c = t.code(0);
        let err = t.decode_piece(0, &e.structure[c.start as usize..c.end as usize]).unwrap_err().to_string();
        assert!(err.contains("inside a line"), "{err}");
        let c = t.code(1);
        assert!(t.decode_piece(1, &e.structure[c.start as usize..c.end as usize]).is_ok());
    }

    #[test]
    fn piece_lookup_by_offset() {
        let (s, end) = sample();
        let t = PieceTable::decode(&s[..end as usize], s.len() as u64).unwrap();
        for i in 0..t.len() {
            let b = t.bytes(i);
            assert_eq!(t.piece_of(b.start), Some(i));
            assert_eq!(t.piece_of(b.end - 1), Some(i));
        }
        assert_eq!(t.piece_of(t.total_len()), None);
    }
}
