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
//! reader opens a genome file with two small stream reads (the head, then the structure) and checks that the
//! structure lies in the stream after the file's bases and agrees with the entry before it trusts any of it.

use super::{serial, Genome};
use crate::error::DecodeError;

/// Bytes of the head in front of the bases: `structure_offset` and `structure_len`.
pub const HEAD_LEN: u64 = 12;
/// Largest structure a reader accepts: it is held in memory while the file is open. (Real FASTA structures are
/// a few hundred KB per chromosome; a header-heavy file that needed more stays in general mode, see
/// [`super::worthwhile`].)
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

/// An opened genome-mode file: its structure, where its bases start and where its structure lies in the stream.
#[derive(Debug)]
pub struct GenomeFile {
    pub genome: Genome,
    /// Stream position of base 0.
    pub bases_start: u64,
    /// Stream position of the structure.
    pub structure_offset: u64,
    /// Bytes of the structure.
    pub structure_len: u64,
}

impl GenomeFile {
    /// Opens the region at stream position `offset` of a file whose tree entry says `size` original bytes, in a
    /// stream of `total_len` bytes. `read(pos, buf)` fills `buf` with stream bytes; its errors pass through,
    /// and everything the region claims is checked against the stream length and the entry before use.
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
        let mut structure = vec![0u8; structure_len as usize];
        read(structure_offset, &mut structure)?;
        let genome = serial::decode(&structure)?;
        if genome.total_len() != size {
            let detail = format!("the structure describes {} bytes, the tree entry {size}", genome.total_len());
            return Err(DecodeError::Invalid { what: "genome file size", detail }.into());
        }
        // The bases lie between the head and the structure.
        let room = structure_offset - bases_start;
        if genome.bases() > room {
            let detail = format!(
                "the structure counts {} bases, {room} bytes lie between the head and the structure",
                genome.bases()
            );
            return Err(DecodeError::Invalid { what: "genome bases", detail }.into());
        }
        Ok(GenomeFile { genome, bases_start, structure_offset, structure_len })
    }

    /// Original bytes from `off` into `out` (short at the end of the file); `read` fetches stream bytes.
    pub fn read_at<E>(
        &self,
        off: u64,
        out: &mut [u8],
        read: impl FnOnce(u64, &mut [u8]) -> Result<(), E>,
    ) -> Result<usize, E> {
        self.genome.read_at(off, out, |base, buf| read(self.bases_start + base, buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stream of `prefix`, the region of `fasta`, `gap` filler bytes and the structure; and the file's size.
    fn stream(fasta: &[u8], prefix: usize, gap: usize) -> (Vec<u8>, u64) {
        let s = super::super::split(fasta).unwrap();
        let structure = serial::encode(&s.genome);
        let at = (prefix as u64 + region_len(s.bases.len() as u64)) + gap as u64;
        let mut out = vec![b'x'; prefix];
        out.extend_from_slice(&head(at, structure.len()));
        out.extend_from_slice(&s.bases);
        out.extend(std::iter::repeat_n(b'y', gap));
        out.extend_from_slice(&structure);
        (out, fasta.len() as u64)
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
        for (prefix, gap) in [(0, 0), (6, 0), (6, 100)] {
            let (stream, size) = stream(FASTA, prefix, gap);
            let total = stream.len() as u64;
            let file = GenomeFile::open(prefix as u64, size, total, reader(&stream)).unwrap();
            assert_eq!(file.structure_offset + file.structure_len, total);
            for off in 0..=FASTA.len() {
                for len in [0, 1, 5, 17, FASTA.len()] {
                    let mut out = vec![0u8; len];
                    let n = file.read_at(off as u64, &mut out, reader(&stream)).unwrap();
                    let want = &FASTA[off..(off + len).min(FASTA.len())];
                    assert_eq!(&out[..n], want, "off {off} len {len}");
                }
            }
        }
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
        // Lengths beyond the stream or the limit.
        assert!(open(&with_head(&stream, at, u32::MAX.into()), total).contains("structure_len"));
        assert!(open(&with_head(&stream, at, len + 1), total).contains("structure_len"));
        // Offsets before the bases, inside the head, past the stream, at u64::MAX.
        for lie in [0, 11, total + 1, u64::MAX] {
            assert!(open(&with_head(&stream, lie, len), total).contains("structure_offset"), "offset {lie}");
        }
        // A structure that overlaps the file's own bases: read from there it fails its checksum; placed there
        // (a valid structure inside the base range) the base count no longer fits before it.
        assert!(matches!(
            GenomeFile::open(0, size, total, reader(&with_head(&stream, at - 1, len))),
            Err(DecodeError::Checksum { .. })
        ));
        let mut early = with_head(&stream, HEAD_LEN + 2, len);
        let structure = stream[at as usize..].to_vec();
        early[HEAD_LEN as usize + 2..HEAD_LEN as usize + 2 + len as usize].copy_from_slice(&structure);
        assert!(open(&early, total).contains("genome bases"), "{}", open(&early, total));
        // No room for the head.
        let err = GenomeFile::open(total - 2, size, total, reader(&stream)).unwrap_err();
        assert!(matches!(err, DecodeError::Truncated { .. }), "{err}");
        // A flipped structure byte fails the structure's checksum.
        let mut flipped = stream.clone();
        let at = stream.len() - 20;
        flipped[at] ^= 0x40;
        assert!(matches!(GenomeFile::open(0, size, total, reader(&flipped)), Err(DecodeError::Checksum { .. })));
    }
}
