//! Genome mode: a FASTA file as exact structure plus a stream of A/C/G/T bases.
//!
//! FASTA is mostly a four-letter alphabet wrapped in text. Stored as bytes, every base costs a byte before
//! compression and the line breaks, case and rare codes disturb the match finder and the literal model. Split,
//! the bases form a pure nucleotide stream (one byte per base here, `A C G T`; the codec downstream decides how
//! many bits it takes) and everything else is a small structure that gives back the original bytes exactly.
//!
//! - [`layout`]: headers and line runs (width, count, LF/CRLF/none) with prefix sums for offset lookups.
//! - [`mask`]: lowercase runs and exception runs (N, IUPAC codes), sorted, with `O(log n)` lookups; exception
//!   residues are left out of the nucleotide stream.
//! - [`model`](mod@model): FASTA bytes → [`Genome`] + bases, or `None` for anything not modelled exactly.
//! - [`serial`]: the versioned, checksummed structure encoding and its hostile-input decoder.
//! - [`pieces`]: a file's structure as a piece table and independently decodable pieces of ~2 MiB of original
//!   bytes (each a [`serial`] structure), so that a read decodes only the pieces it meets.
//! - [`range`]: the adaptive binary range coder and number models `serial` codes the structure's numbers with.
//! - [`read`]: original bytes at any offset from the structure and a base fetcher, in `O(len + log n)`.
//! - [`region`]: a genome-mode file's region of the archive's logical stream (a head that points at its structure, then
//!   its bases).
//!
//! Three coordinate systems, all starting at 0: **original bytes** (the file as the user sees it), **residues**
//! (bytes of sequence lines, i.e. original bytes minus headers and terminators) and **bases** (residues minus
//! exceptions: positions in the nucleotide stream). The layout maps bytes to residues, the exceptions map
//! residues to bases.

pub mod layout;
pub mod mask;
pub mod model;
pub mod pieces;
mod range;
pub mod read;
pub mod region;
pub mod serial;

use crate::error::DecodeError;
use layout::Layout;
use mask::{CaseMask, Exceptions};

pub use model::{split, split_into, Split};

/// The structure of a FASTA file: everything but its A/C/G/T bases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Genome {
    pub layout: Layout,
    pub case: CaseMask,
    pub exceptions: Exceptions,
}

impl Genome {
    /// Bytes this structure holds on the heap: what keeping a genome file open costs.
    pub fn heap_bytes(&self) -> u64 {
        self.layout.heap_bytes() + self.case.runs.heap_bytes() + self.exceptions.heap_bytes()
    }

    /// Checks that the masks lie inside the layout's residues.
    pub fn new(layout: Layout, case: CaseMask, exceptions: Exceptions) -> Result<Genome, DecodeError> {
        let residues = layout.residues();
        for (what, runs) in [("genome case runs", &case.runs), ("genome exception runs", &exceptions.runs)] {
            if let Some(end) = runs.last_end() {
                if end > residues {
                    return Err(DecodeError::Limit { what, value: end, limit: residues });
                }
            }
        }
        Ok(Genome { layout, case, exceptions })
    }

    /// Original file length.
    pub fn total_len(&self) -> u64 {
        self.layout.total_len()
    }

    /// Bases in the nucleotide stream.
    pub fn bases(&self) -> u64 {
        self.layout.residues() - self.exceptions.excluded()
    }
}

/// Whether genome mode pays for a file whose split has `structure_bytes` of structure ([`pays`] for its bases).
///
/// The gain of the split is roughly 6 bits per base (a byte coded as bases needs at most 2 bits); the structure
/// is stored on top. Genome mode is chosen when the structure costs at most a quarter of that gain, which keeps
/// exception-heavy files (IUPAC codes everywhere, a few bases per line, huge headers) in general mode.
pub fn worthwhile(genome: &Genome, structure_bytes: u64) -> bool {
    pays(genome.bases(), structure_bytes)
}

/// [`worthwhile`] for a file of `bases` bases (the packer sees a file's pieces, not one [`Genome`]).
pub fn pays(bases: u64, structure_bytes: u64) -> bool {
    let gain = bases * 6 / 8;
    structure_bytes.saturating_mul(4) <= gain
}

/// [`split`], then [`worthwhile`]: the split to store, or `None` for general mode. Also returns the encoded
/// structure, which the caller stores anyway.
pub fn model(bytes: &[u8]) -> Option<(Split, Vec<u8>)> {
    let s = split(bytes)?;
    let structure = serial::encode(&s.genome);
    worthwhile(&s.genome, structure.len() as u64).then_some((s, structure))
}
