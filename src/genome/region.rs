//! A genome-mode file's region of the logical stream (FORMAT.md §2.6): its structure, then its bases.
//!
//! ```text
//! u32    structure_len          little-endian, ≤ MAX_STRUCTURE_LEN
//! u8     structure[structure_len]   serial.rs encoding (own magic, version and xxh3)
//! u8     bases[genome.bases()]      uppercase A C G T
//! ```
//!
//! The structure lives in the stream rather than in a section of its own so that it is compressed by the same LZ
//! and entropy stages as everything else, is covered by the block hashes, and costs nothing when the file is
//! never read. The tree entry keeps the original size; the region's length follows from the structure, so a
//! reader opens a genome file with two small stream reads (the length word, then the structure) and checks that
//! the region fits the stream before it trusts any of it.

use super::{serial, Genome};
use crate::error::DecodeError;

/// Bytes of the length word in front of the structure.
pub const HEAD_LEN: u64 = 4;
/// Largest structure a reader accepts: it is held in memory while the file is open. (Real FASTA structures are
/// a few hundred KB per chromosome; a header-heavy file that needed more stays in general mode, see
/// [`super::worthwhile`].)
pub const MAX_STRUCTURE_LEN: u64 = 256 << 20;

/// The length word for `structure`.
pub fn head(structure: &[u8]) -> [u8; HEAD_LEN as usize] {
    (structure.len() as u32).to_le_bytes()
}

/// Total region length for a structure of `structure_len` bytes and `bases` bases.
pub fn region_len(structure_len: u64, bases: u64) -> u64 {
    HEAD_LEN + structure_len + bases
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
        let structure_len = u64::from(u32::from_le_bytes(word));
        if structure_len > MAX_STRUCTURE_LEN || structure_len > room - HEAD_LEN {
            let limit = MAX_STRUCTURE_LEN.min(room - HEAD_LEN);
            return Err(DecodeError::Limit { what: "genome structure_len", value: structure_len, limit }.into());
        }
        let mut structure = vec![0u8; structure_len as usize];
        read(offset + HEAD_LEN, &mut structure)?;
        let genome = serial::decode(&structure)?;
        if genome.total_len() != size {
            let detail = format!("the structure describes {} bytes, the tree entry {size}", genome.total_len());
            return Err(DecodeError::Invalid { what: "genome file size", detail }.into());
        }
        let bases_start = offset + HEAD_LEN + structure_len;
        if genome.bases() > total_len - bases_start {
            let limit = total_len - bases_start;
            return Err(DecodeError::Limit { what: "genome bases", value: genome.bases(), limit }.into());
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

    fn region(fasta: &[u8]) -> (Vec<u8>, u64) {
        let s = super::super::split(fasta).unwrap();
        let structure = serial::encode(&s.genome);
        let mut out = head(&structure).to_vec();
        out.extend_from_slice(&structure);
        out.extend_from_slice(&s.bases);
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
        // The stream ends inside the bases.
        let err = GenomeFile::open(0, size, total - 1, reader(&stream[..stream.len() - 1])).unwrap_err();
        assert!(err.to_string().contains("genome bases"), "{err}");
        // A length word beyond the stream.
        let mut lying = stream.clone();
        lying[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        let err = GenomeFile::open(0, size, total, reader(&lying)).unwrap_err();
        assert!(err.to_string().contains("structure_len"), "{err}");
        // No room for the length word.
        let err = GenomeFile::open(total - 2, size, total, reader(&stream)).unwrap_err();
        assert!(matches!(err, DecodeError::Truncated { .. }), "{err}");
        // A flipped structure byte fails the structure's checksum.
        let mut flipped = stream.clone();
        flipped[10] ^= 0x40;
        assert!(matches!(GenomeFile::open(0, size, total, reader(&flipped)), Err(DecodeError::Checksum { .. })));
    }
}
