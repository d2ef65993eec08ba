//! A genome-mode file's region of the logical stream (FORMAT.md §2.6): a head that points at its structure, then
//! its bases. The structures of all genome files lie together after every file's region.
//!
//! ```text
//! u64    structure_offset       little-endian, stream position of the structure; at or after the bases' end
//! u32    structure_len          little-endian, ≤ MAX_STRUCTURE_LEN
//! u8     bases[bases]           uppercase A C G T; `bases` is the structure's base count
//! ```
//!
//! The structure lives in the stream rather than in a section of its own so that it is compressed by the same LZ
//! and entropy stages as everything else, is covered by the block hashes, and costs nothing when the file is
//! never read. It lies apart from the bases, with the other files' structures, because the parse and the order-0
//! group tables do better that way: a structure between two files' bases shares a table group with them (both
//! code worse) and parts the bases LZ matches across files (fly-chr4's six assemblies packed as six files to a
//! ratio of 5.47, concatenated into one FASTA, with one structure at the end, to 5.70); together, one file's
//! structure also finds matches in another's (similar CDS headers). The tree entry keeps the original size; a
//! reader opens a genome file with three small stream reads (the head, then the structure's piece table in two:
//! its fixed prefix, then the rest) and checks that the structure lies in the stream after the file's bases and
//! agrees with the entry before it trusts any of it. A piece ([`super::pieces`]) is read and decoded when a read
//! first meets it, and kept until the caller drops it.

use std::sync::{Arc, Mutex};

use super::pieces::{self, PieceTable};
use super::read::{as_uninit, BaseChunks};
use super::Genome;
use crate::error::DecodeError;

/// Bytes of the head in front of the bases: `structure_offset` and `structure_len`.
pub const HEAD_LEN: u64 = 12;
/// Largest structure a reader accepts (all its pieces together; a reader holds the table and the pieces it
/// decoded). Real FASTA structures are a few hundred KB per chromosome; a header-heavy file that needed more
/// stays in general mode, see [`super::worthwhile`].
pub const MAX_STRUCTURE_LEN: u64 = 256 << 20;

/// The head of a region whose structure lies at `structure_offset` and is `structure_len` bytes long.
pub fn head(structure_offset: u64, structure_len: usize) -> [u8; HEAD_LEN as usize] {
    let mut out = [0u8; HEAD_LEN as usize];
    out[..8].copy_from_slice(&structure_offset.to_le_bytes());
    out[8..].copy_from_slice(&(structure_len as u32).to_le_bytes());
    out
}

/// Region length (head and bases) for `bases` bases; the structure is stored elsewhere.
pub fn region_len(bases: u64) -> u64 {
    HEAD_LEN + bases
}

/// One piece's slot: empty until the piece is decoded (and again after it is dropped to bound memory). Locked
/// while the piece is decoded, so that concurrent first readers of one piece decode it once.
type PieceSlot = Mutex<Option<Arc<Genome>>>;

/// A structure piece's slot as [`GenomeFile::piece_state`] finds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PieceState {
    /// Not decoded, and nobody decoding it.
    Empty,
    Held,
    /// A reader holds the slot while it decodes the piece.
    Decoding,
}

/// An opened genome-mode file: its piece table, where its bases start and where its structure lies in the
/// stream, and the pieces decoded so far.
#[derive(Debug)]
pub struct GenomeFile {
    pub table: PieceTable,
    /// Stream position of base 0.
    pub bases_start: u64,
    /// Stream position of the structure.
    pub structure_offset: u64,
    /// Bytes of the structure.
    pub structure_len: u64,
    pieces: Vec<PieceSlot>,
}

impl GenomeFile {
    /// Opens the region at stream position `offset` of a file whose tree entry says `size` original bytes, in a
    /// stream of `total_len` bytes: reads the head, then the structure's piece table (no piece yet).
    /// `read(pos, buf)` fills `buf` with stream bytes; its errors pass through, and everything the region claims
    /// is checked against the stream length and the entry before use.
    pub fn open<E: From<DecodeError>>(
        offset: u64,
        size: u64,
        total_len: u64,
        mut read: impl FnMut(u64, &mut [u8]) -> Result<(), E>,
    ) -> Result<GenomeFile, E> {
        let room = total_len.saturating_sub(offset);
        if room < HEAD_LEN {
            return Err(DecodeError::Truncated { at: offset as usize, needed: (HEAD_LEN - room) as usize }.into());
        }
        let mut word = [0u8; HEAD_LEN as usize];
        read(offset, &mut word)?;
        let structure_offset = u64::from_le_bytes(word[..8].try_into().expect("8 bytes"));
        let structure_len = u64::from(u32::from_le_bytes(word[8..].try_into().expect("4 bytes")));
        let bases_start = offset + HEAD_LEN;
        if structure_offset < bases_start || structure_offset > total_len {
            let detail = format!("{structure_offset}: must lie in [{bases_start}, {total_len}], after the file's head");
            return Err(DecodeError::Invalid { what: "genome structure_offset", detail }.into());
        }
        let limit = MAX_STRUCTURE_LEN.min(total_len - structure_offset);
        if structure_len > limit {
            return Err(DecodeError::Limit { what: "genome structure_len", value: structure_len, limit }.into());
        }
        if structure_len < pieces::PREFIX_LEN {
            let detail = format!("{structure_len} bytes, shorter than a piece table's prefix");
            return Err(DecodeError::Invalid { what: "genome structure_len", detail }.into());
        }
        let mut prefix = [0u8; pieces::PREFIX_LEN as usize];
        read(structure_offset, &mut prefix)?;
        let table_len = pieces::table_len(&prefix, structure_len)?;
        let mut table = vec![0u8; (pieces::PREFIX_LEN + table_len) as usize];
        table[..prefix.len()].copy_from_slice(&prefix);
        read(structure_offset + pieces::PREFIX_LEN, &mut table[prefix.len()..])?;
        let table = PieceTable::decode(&table, structure_len)?;
        if table.total_len() != size {
            let detail = format!("the structure describes {} bytes, the tree entry {size}", table.total_len());
            return Err(DecodeError::Invalid { what: "genome file size", detail }.into());
        }
        // The bases lie between the head and the structure.
        let room = structure_offset - bases_start;
        if table.bases() > room {
            let detail = format!(
                "the structure counts {} bases, {room} bytes lie between the head and the structure",
                table.bases()
            );
            return Err(DecodeError::Invalid { what: "genome bases", detail }.into());
        }
        let pieces = (0..table.len()).map(|_| PieceSlot::default()).collect();
        Ok(GenomeFile { table, bases_start, structure_offset, structure_len, pieces })
    }

    /// The file's length in original bytes.
    pub fn total_len(&self) -> u64 {
        self.table.total_len()
    }

    /// The file's bases.
    pub fn bases(&self) -> u64 {
        self.table.bases()
    }

    /// Stream bytes of piece `i`'s code.
    pub fn piece_stream_range(&self, i: usize) -> std::ops::Range<u64> {
        let c = self.table.code(i);
        self.structure_offset + c.start..self.structure_offset + c.end
    }

    /// Piece `i`, decoded now (`true`) or earlier (`false`); `read` fetches its code from the stream. A failed
    /// decode leaves the slot empty: the next read tries again and reports the error again.
    pub fn piece<E: From<DecodeError>>(
        &self,
        i: usize,
        read: impl FnOnce(u64, &mut [u8]) -> Result<(), E>,
    ) -> Result<(Arc<Genome>, bool), E> {
        let mut slot = self.pieces[i].lock().unwrap_or_else(|p| p.into_inner());
        if let Some(g) = &*slot {
            return Ok((Arc::clone(g), false));
        }
        let r = self.piece_stream_range(i);
        let mut code = vec![0u8; (r.end - r.start) as usize];
        read(r.start, &mut code)?;
        let g = Arc::new(self.table.decode_piece(i, &code)?);
        *slot = Some(Arc::clone(&g));
        Ok((g, true))
    }

    /// Drops decoded piece `i` (to bound memory); its next reader decodes it again. Returns whether it was held.
    pub fn drop_piece(&self, i: usize) -> bool {
        self.pieces.get(i).is_some_and(|s| s.lock().unwrap_or_else(|p| p.into_inner()).take().is_some())
    }

    /// The file's bases behind original bytes `[from, end)` (`from < end`), from their first and last pieces
    /// (`first` = the piece of `from` and `last` = the piece of `end − 1`, each with its decoded structure): the
    /// first base at or after `from` up to the first at or after `end` (a piece's last base + 1 when `end` is its
    /// end). File-relative: base 0 is the region's first base.
    pub fn base_span(
        &self,
        first: (usize, &Genome),
        last: (usize, &Genome),
        from: u64,
        end: u64,
    ) -> std::ops::Range<u64> {
        let base_at = |(i, g): (usize, &Genome), at: u64| {
            let b = self.table.bytes(i);
            self.table.bases_of(i).start + g.base_range(at - b.start, b.end - at).0
        };
        let b0 = base_at(first, from);
        let b1 = if end == self.table.bytes(last.0).end { self.table.bases_of(last.0).end } else { base_at(last, end) };
        b0..b1.max(b0)
    }

    /// What piece `i`'s slot holds now, without waiting for a decode under way (unlike
    /// [`GenomeFile::holds_piece`]); `None` past the last piece.
    pub fn piece_state(&self, i: usize) -> Option<PieceState> {
        let held = |slot: &Option<Arc<Genome>>| if slot.is_some() { PieceState::Held } else { PieceState::Empty };
        match self.pieces.get(i)?.try_lock() {
            Ok(slot) => Some(held(&slot)),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(held(&p.into_inner())),
            Err(std::sync::TryLockError::WouldBlock) => Some(PieceState::Decoding),
        }
    }

    /// Whether piece `i` is decoded and held now.
    pub fn holds_piece(&self, i: usize) -> bool {
        self.pieces.get(i).is_some_and(|s| s.lock().unwrap_or_else(|p| p.into_inner()).is_some())
    }

    /// Pieces decoded and held now.
    pub fn pieces_held(&self) -> usize {
        self.pieces.iter().filter(|s| s.lock().unwrap_or_else(|p| p.into_inner()).is_some()).count()
    }

    /// The pieces original bytes `[off, off + len)` meet (empty past the end or for `len = 0`).
    pub fn pieces_of(&self, off: u64, len: u64) -> std::ops::Range<usize> {
        let end = off.saturating_add(len).min(self.total_len());
        match self.table.piece_of(off) {
            Some(first) if off < end => first..self.table.piece_of(end - 1).map_or(first, |p| p) + 1,
            _ => 0..0,
        }
    }

    /// Original bytes from `off` into `out` (short at the end of the file); `read` fetches stream bytes (the code
    /// of the pieces not decoded yet, and the bases). Decodes each piece the read meets that is not held yet.
    pub fn read_at<E: From<DecodeError>>(
        &self,
        off: u64,
        out: &mut [u8],
        mut read: impl FnMut(u64, &mut [u8]) -> Result<(), E>,
    ) -> Result<usize, E> {
        let mut at = 0usize;
        for i in self.pieces_of(off, out.len() as u64) {
            let (g, _) = self.piece(i, &mut read)?;
            let b = self.table.bytes(i);
            let pos = off + at as u64;
            let n = ((b.end - pos) as usize).min(out.len() - at);
            let (b0, b1) = g.base_range(pos - b.start, n as u64);
            let mut bases = vec![0u8; (b1 - b0) as usize];
            if b1 > b0 {
                read(self.bases_start + self.table.bases_of(i).start + b0, &mut bases)?;
            }
            let chunks = [&bases[..]];
            at += g.write_at(pos - b.start, as_uninit(&mut out[at..at + n]), BaseChunks::new(b0, &chunks))?;
        }
        Ok(at)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream of `prefix`, the region of `fasta`, `gap` filler bytes and the structure in pieces of
    /// `piece_bytes`; and the file's size.
    fn stream_in_pieces(fasta: &[u8], prefix: usize, gap: usize, piece_bytes: u64) -> (Vec<u8>, u64) {
        let mut bases = Vec::new();
        let e = pieces::encode_file(fasta, piece_bytes, |b| bases.extend_from_slice(b)).unwrap();
        let at = (prefix as u64 + region_len(bases.len() as u64)) + gap as u64;
        let mut out = vec![b'x'; prefix];
        out.extend_from_slice(&head(at, e.structure.len()));
        out.extend_from_slice(&bases);
        out.extend(std::iter::repeat_n(b'y', gap));
        out.extend_from_slice(&e.structure);
        (out, fasta.len() as u64)
    }

    fn stream(fasta: &[u8], prefix: usize, gap: usize) -> (Vec<u8>, u64) {
        stream_in_pieces(fasta, prefix, gap, pieces::PIECE_BYTES)
    }

    fn reader(stream: &[u8]) -> impl FnMut(u64, &mut [u8]) -> Result<(), DecodeError> + '_ {
        |pos, buf| {
            let end = pos as usize + buf.len();
            let src = stream.get(pos as usize..end).ok_or(DecodeError::Truncated { at: pos as usize, needed: 1 })?;
            buf.copy_from_slice(src);
            Ok(())
        }
    }

    const FASTA: &[u8] = b">chr1 test\nACGTNNNNacgtRYAC\nGGTT\n>chr2\nTTTTGGGGCCCCAAAA\n";

    #[test]
    fn opens_and_reads_every_range_exactly() {
        for (prefix, gap, piece_bytes) in [(0, 0, 1 << 20), (6, 0, 1 << 20), (6, 100, 1 << 20), (3, 5, 1), (0, 0, 12)] {
            let (stream, size) = stream_in_pieces(FASTA, prefix, gap, piece_bytes);
            let total = stream.len() as u64;
            let file = GenomeFile::open(prefix as u64, size, total, reader(&stream)).unwrap();
            assert_eq!(file.structure_offset + file.structure_len, total);
            assert_eq!(file.pieces_held(), 0, "opening reads the table only");
            for off in 0..=FASTA.len() {
                for len in [0, 1, 5, 17, FASTA.len()] {
                    let mut out = vec![0u8; len];
                    let n = file.read_at(off as u64, &mut out, reader(&stream)).unwrap();
                    let want = &FASTA[off..(off + len).min(FASTA.len())];
                    assert_eq!(&out[..n], want, "off {off} len {len} pieces of {piece_bytes}");
                }
            }
        }
    }

    /// A FASTA of `lines` lines with records, soft-masking, N runs and a CRLF line now and then.
    fn big_fasta(lines: usize) -> Vec<u8> {
        let mut out = Vec::new();
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        for i in 0..lines {
            if i % 50 == 0 {
                out.extend_from_slice(format!(">chr{i} a record\n").as_bytes());
            }
            for j in 0..60 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let b = b"ACGT"[(x % 4) as usize];
                let lower = (i / 3) % 4 == 1 && j > 10;
                let n = i % 41 == 5 && j < 30;
                out.push(if n {
                    b'N'
                } else if lower {
                    b.to_ascii_lowercase()
                } else {
                    b
                });
            }
            out.extend_from_slice(if i % 97 == 3 { b"\r\n" } else { b"\n" });
        }
        out
    }

    #[test]
    fn reads_across_many_pieces_decode_only_the_pieces_they_meet() {
        let fasta = big_fasta(2000);
        let (stream, size) = stream_in_pieces(&fasta, 3, 7, 4096);
        let total = stream.len() as u64;
        let file = GenomeFile::open(3, size, total, reader(&stream)).unwrap();
        let n = file.table.len();
        assert!(n > 20, "{n} pieces");
        let mut x = 7u64;
        for _ in 0..300 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let off = (x >> 20) % size;
            let len = ((x >> 8) % 20_000) as usize;
            let mut out = vec![0u8; len];
            let got = file.read_at(off, &mut out, reader(&stream)).unwrap();
            let end = (off as usize + len).min(fasta.len());
            assert_eq!(&out[..got], &fasta[off as usize..end], "off {off} len {len}");
        }
        // A fresh open: a read decodes exactly the pieces it meets, no more.
        let file = GenomeFile::open(3, size, total, reader(&stream)).unwrap();
        let b = file.table.bytes(5);
        let mut out = vec![0u8; 10];
        file.read_at(b.end - 4, &mut out, reader(&stream)).unwrap();
        assert_eq!(file.pieces_held(), 2);
        assert_eq!(file.pieces_of(b.end - 4, 10), 5..7);
        assert_eq!(&out[..], &fasta[(b.end - 4) as usize..(b.end + 6) as usize]);
        let mut decoded = 0;
        for i in 0..n {
            decoded += file.piece(i, reader(&stream)).unwrap().1 as usize;
        }
        assert_eq!(decoded, n - 2, "pieces 5 and 6 were decoded once");
        assert!(file.drop_piece(5) && !file.drop_piece(5));
        assert_eq!(file.pieces_held(), n - 1);
    }

    #[test]
    fn a_corrupt_piece_fails_its_reads_naming_the_piece_and_leaves_the_others_readable() {
        let fasta = big_fasta(600);
        let (stream, size) = stream_in_pieces(&fasta, 0, 0, 4096);
        let total = stream.len() as u64;
        let file = GenomeFile::open(0, size, total, reader(&stream)).unwrap();
        let r = file.piece_stream_range(3);
        let mut bad = stream.clone();
        bad[(r.start + r.end) as usize / 2] ^= 0x08;
        let file = GenomeFile::open(0, size, total, reader(&bad)).unwrap();
        let b = file.table.bytes(3);
        let mut out = vec![0u8; 100];
        let err = file.read_at(b.start + 1, &mut out, reader(&bad)).unwrap_err().to_string();
        assert!(
            err.contains("piece 3 of") && err.contains(&format!("structure bytes {}", r.start - file.structure_offset)),
            "{err}"
        );
        let b = file.table.bytes(1);
        let n = file.read_at(b.start, &mut out, reader(&bad)).unwrap();
        assert_eq!(&out[..n], &fasta[b.start as usize..b.start as usize + n]);
    }

    /// `stream` with the head's fields replaced.
    fn with_head(stream: &[u8], structure_offset: u64, structure_len: u64) -> Vec<u8> {
        let mut lying = stream.to_vec();
        lying[..8].copy_from_slice(&structure_offset.to_le_bytes());
        lying[8..12].copy_from_slice(&(structure_len as u32).to_le_bytes());
        lying
    }

    #[test]
    fn refuses_regions_that_lie() {
        let (stream, size) = stream(FASTA, 0, 0);
        let total = stream.len() as u64;
        let good = GenomeFile::open(0, size, total, reader(&stream)).unwrap();
        let (at, len) = (good.structure_offset, good.structure_len);
        let open = |s: &[u8], total: u64| GenomeFile::open(0, size, total, reader(s)).unwrap_err().to_string();
        // The size in the tree entry disagrees with the structure.
        let err = GenomeFile::open(0, size + 1, total, reader(&stream)).unwrap_err();
        assert!(err.to_string().contains("genome file size"), "{err}");
        // The stream ends inside the structure.
        assert!(open(&stream[..stream.len() - 1], total - 1).contains("genome structure_len"));
        // Lengths beyond the stream or the limit, or shorter than the table.
        assert!(open(&with_head(&stream, at, u32::MAX.into()), total).contains("structure_len"));
        assert!(open(&with_head(&stream, at, len + 1), total).contains("structure_len"));
        assert!(open(&with_head(&stream, at, 3), total).contains("structure_len"));
        assert!(open(&with_head(&stream, at, 20), total).contains("table_len"));
        // A structure one byte longer than its pieces.
        let mut longer = with_head(&stream, at, len + 1);
        longer.push(0);
        assert!(open(&longer, total + 1).contains("genome piece codes"), "{}", open(&longer, total + 1));
        // Offsets before the bases, inside the head, past the stream, at u64::MAX.
        for lie in [0, 11, total + 1, u64::MAX] {
            assert!(open(&with_head(&stream, lie, len), total).contains("structure_offset"), "offset {lie}");
        }
        // A structure that overlaps the file's own bases: read from there it is no piece table; placed there
        // (a valid structure inside the base range) the base count no longer fits before it.
        assert!(open(&with_head(&stream, at - 1, len), total).contains("magic"));
        let mut early = with_head(&stream, HEAD_LEN + 2, len);
        let structure = stream[at as usize..].to_vec();
        early[HEAD_LEN as usize + 2..HEAD_LEN as usize + 2 + len as usize].copy_from_slice(&structure);
        assert!(open(&early, total).contains("genome bases"), "{}", open(&early, total));
        // No room for the head.
        let err = GenomeFile::open(total - 2, size, total, reader(&stream)).unwrap_err();
        assert!(matches!(err, DecodeError::Truncated { .. }), "{err}");
        // A flipped table byte fails the table's checksum.
        let mut flipped = stream.clone();
        flipped[at as usize + 12] ^= 0x40;
        assert!(matches!(GenomeFile::open(0, size, total, reader(&flipped)), Err(DecodeError::Checksum { .. })));
    }

    /// FASTA-like files: headers, sequence lines of any width with soft-masking, N and IUPAC runs, blank lines,
    /// CRLF lines, maybe no final newline.
    fn fasta_strategy() -> impl proptest::strategy::Strategy<Value = Vec<u8>> {
        use proptest::prelude::*;
        let line = (0u8..8, 0usize..90, any::<u64>(), any::<bool>());
        (prop::collection::vec(line, 1..120), any::<bool>()).prop_map(|(lines, last_newline)| {
            let mut out = b">first\n".to_vec();
            for (kind, width, seed, crlf) in lines {
                if kind == 0 {
                    out.extend_from_slice(format!(">rec {seed}").as_bytes());
                } else {
                    let letters: &[u8] = if kind < 6 { b"ACGTACGTacgt" } else { b"ACGTNNnnRYkm" };
                    out.extend((0..width as u64).map(|j| letters[(seed.rotate_left(j as u32 * 7) % 12) as usize]));
                }
                out.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
            }
            if !last_newline {
                out.extend_from_slice(b"ACGTN");
            }
            out
        })
    }

    proptest::proptest! {
        #![proptest_config(proptest::test_runner::Config { cases: 64, ..Default::default() })]

        /// Any file, cut into pieces of any size, reads back exactly at any offset and length (reads cross piece
        /// boundaries), decoding only the pieces the reads meet.
        #[test]
        fn multi_piece_files_read_back_exactly_anywhere(
            fasta in fasta_strategy(),
            piece_bytes in 1u64..600,
            reads in proptest::collection::vec((proptest::prelude::any::<u64>(), 0usize..2500), 1..20),
        ) {
            let (stream, size) = stream_in_pieces(&fasta, 5, 3, piece_bytes);
            let file = GenomeFile::open(5, size, stream.len() as u64, reader(&stream)).unwrap();
            let mut met = std::collections::BTreeSet::new();
            for (off, len) in reads {
                let off = off % (size + 2);
                let mut out = vec![0u8; len];
                let n = file.read_at(off, &mut out, reader(&stream)).unwrap();
                let end = (off as usize + len).min(fasta.len());
                proptest::prop_assert_eq!(&out[..n], &fasta[(off as usize).min(end)..end]);
                met.extend(file.pieces_of(off, len as u64));
            }
            proptest::prop_assert_eq!(file.pieces_held(), met.len());
        }
    }
}
