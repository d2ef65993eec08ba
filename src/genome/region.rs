//! A genome-mode file's region of the logical stream (FORMAT.md §2.6): its bases, then its structure.
//!
//! ```text
//! u32    structure_len          little-endian, ≤ MAX_STRUCTURE_LEN
//! u64    bases                  little-endian, the structure's base count
//! u8     bases[bases]           uppercase A C G T
//! u8     structure[structure_len]   serial.rs encoding (own magic, version and xxh3)
//! ```
//!
//! The structure lives in the stream rather than in a section of its own so that it is compressed by the same LZ
//! and entropy stages as everything else, is covered by the block hashes, and costs nothing when the file is
//! never read. It comes after the bases because the parse and the group tables do better that way: atha's bases
//! with its case-run columns after them packed to 7.75 MB, with them before to 8.00 MB. The tree entry keeps the
//! original size; a reader opens a genome file with two small stream reads (the head, then the structure) and
//! checks that the region fits the stream and agrees with the structure before it trusts any of it.

use super::{serial, Genome};
use crate::error::DecodeError;

/// Bytes of the head in front of the bases: `structure_len` and the base count.
pub const HEAD_LEN: u64 = 12;
/// Largest structure a reader accepts: it is held in memory while the file is open. (Real FASTA structures are
/// a few hundred KB per chromosome; a header-heavy file that needed more stays in general mode, see
/// [`super::worthwhile`].)
pub const MAX_STRUCTURE_LEN: u64 = 256 << 20;

/// The head for a structure of `structure_len` bytes and `bases` bases.
pub fn head(structure_len: usize, bases: u64) -> [u8; HEAD_LEN as usize] {
    let mut out = [0u8; HEAD_LEN as usize];
    out[..4].copy_from_slice(&(structure_len as u32).to_le_bytes());
    out[4..].copy_from_slice(&bases.to_le_bytes());
    out
}

/// Total region length for a structure of `structure_len` bytes and `bases` bases.
pub fn region_len(structure_len: u64, bases: u64) -> u64 {
    HEAD_LEN + bases + structure_len
}

/// An opened genome-mode file: its structure and where its bases start in the logical stream.
#[derive(Debug)]
pub struct GenomeFile {
    pub genome: Genome,
    /// Stream position of base 0.
    pub bases_start: u64,
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
        let structure_len = u64::from(u32::from_le_bytes(word[..4].try_into().expect("4 bytes")));
        let bases = u64::from_le_bytes(word[4..].try_into().expect("8 bytes"));
        let room = room - HEAD_LEN;
        if bases > room {
            return Err(DecodeError::Limit { what: "genome bases", value: bases, limit: room }.into());
        }
        let room = room - bases;
        if structure_len > MAX_STRUCTURE_LEN || structure_len > room {
            let limit = MAX_STRUCTURE_LEN.min(room);
            return Err(DecodeError::Limit { what: "genome structure_len", value: structure_len, limit }.into());
        }
        let bases_start = offset + HEAD_LEN;
        let mut structure = vec![0u8; structure_len as usize];
        read(bases_start + bases, &mut structure)?;
        let genome = serial::decode(&structure)?;
        if genome.total_len() != size {
            let detail = format!("the structure describes {} bytes, the tree entry {size}", genome.total_len());
            return Err(DecodeError::Invalid { what: "genome file size", detail }.into());
        }
        if genome.bases() != bases {
            let detail = format!("the structure counts {} bases, the region head {bases}", genome.bases());
            return Err(DecodeError::Invalid { what: "genome bases", detail }.into());
        }
        Ok(GenomeFile { genome, bases_start })
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

    /// The region of `fasta`, its size, and where its structure starts in the region.
    fn region(fasta: &[u8]) -> (Vec<u8>, u64) {
        let s = super::super::split(fasta).unwrap();
        let structure = serial::encode(&s.genome);
        let mut out = head(structure.len(), s.bases.len() as u64).to_vec();
        out.extend_from_slice(&s.bases);
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
        let (mut stream, size) = region(FASTA);
        // Put the region after some unrelated bytes, as in a real stream.
        stream.splice(0..0, b"prefix".iter().copied());
        let total = stream.len() as u64;
        let file = GenomeFile::open(6, size, total, reader(&stream)).unwrap();
        for off in 0..=FASTA.len() {
            for len in [0, 1, 5, 17, FASTA.len()] {
                let mut out = vec![0u8; len];
                let n = file.read_at(off as u64, &mut out, reader(&stream)).unwrap();
                let want = &FASTA[off..(off + len).min(FASTA.len())];
                assert_eq!(&out[..n], want, "off {off} len {len}");
            }
        }
    }

    #[test]
    fn refuses_regions_that_lie() {
        let (stream, size) = region(FASTA);
        let total = stream.len() as u64;
        // The size in the tree entry disagrees with the structure.
        let err = GenomeFile::open(0, size + 1, total, reader(&stream)).unwrap_err();
        assert!(err.to_string().contains("genome file size"), "{err}");
        // The stream ends inside the structure.
        let err = GenomeFile::open(0, size, total - 1, reader(&stream[..stream.len() - 1])).unwrap_err();
        assert!(err.to_string().contains("genome structure_len"), "{err}");
        // A length word beyond the stream.
        let mut lying = stream.clone();
        lying[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = GenomeFile::open(0, size, total, reader(&lying)).unwrap_err();
        assert!(err.to_string().contains("structure_len"), "{err}");
        // A base count beyond the stream, and one that disagrees with the structure (the structure then starts
        // elsewhere: it is read from the wrong place and fails its checksum, or its count disagrees).
        let mut lying = stream.clone();
        lying[4..12].copy_from_slice(&u64::MAX.to_le_bytes());
        let err = GenomeFile::open(0, size, total, reader(&lying)).unwrap_err();
        assert!(err.to_string().contains("genome bases"), "{err}");
        let mut lying = stream.clone();
        let bases = u64::from_le_bytes(lying[4..12].try_into().unwrap());
        lying[4..12].copy_from_slice(&(bases - 1).to_le_bytes());
        assert!(GenomeFile::open(0, size, total - 1, reader(&lying[..stream.len() - 1])).is_err());
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
