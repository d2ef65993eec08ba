//! What the nucleotide stream does not say about residues: which are lowercase (soft-masking) and which are not
//! A/C/G/T at all (N runs, IUPAC codes).
//!
//! Both are sorted lists of disjoint residue ranges, so the ranges that meet a read are found by one binary search
//! (`O(log n)`) and then walked in order.
//!
//! - [`CaseMask`]: lowercase runs. Case applies to every residue, exceptions included (`n` is an `N` exception in
//!   a lowercase run).
//! - [`Exceptions`]: runs of one repeated non-ACGT byte, stored uppercase. Exception residues are left out of the
//!   nucleotide stream, so a long N run costs a few bytes of structure and no bases; [`Exceptions::bases_before`]
//!   turns a residue index into a base index with the prefix sum of excluded residues.

use crate::error::DecodeError;

/// Uppercase residue bytes that are not in the nucleotide stream: N and the IUPAC ambiguity codes.
pub const EXCEPTION_BYTES: &[u8] = b"NRYKMSWBDHV";

/// True for a byte an exception run may hold.
pub fn is_exception_byte(b: u8) -> bool {
    EXCEPTION_BYTES.contains(&b)
}

/// Sorted, disjoint, non-empty ranges `[start, end)` of residue indices.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunList {
    starts: Vec<u64>,
    ends: Vec<u64>,
}

impl RunList {
    /// Bytes these runs hold on the heap.
    pub fn heap_bytes(&self) -> u64 {
        ((self.starts.capacity() + self.ends.capacity()) * 8) as u64
    }

    /// Checks that the ranges are non-empty, in order, disjoint and end at or before `limit`.
    pub fn new(starts: Vec<u64>, ends: Vec<u64>, limit: u64, what: &'static str) -> Result<RunList, DecodeError> {
        if starts.len() != ends.len() {
            return Err(DecodeError::Invalid {
                what,
                detail: format!("{} starts for {} ends", starts.len(), ends.len()),
            });
        }
        let mut prev_end = 0u64;
        for (i, (&s, &e)) in starts.iter().zip(&ends).enumerate() {
            if s >= e || s < prev_end || e > limit {
                return Err(DecodeError::Invalid {
                    what,
                    detail: format!(
                        "run {i} is [{s}, {e}): runs must be non-empty, ordered, disjoint \
                         (previous ended at {prev_end}) and end by {limit}"
                    ),
                });
            }
            prev_end = e;
        }
        Ok(RunList { starts, ends })
    }

    pub fn len(&self) -> usize {
        self.starts.len()
    }

    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// Run `i` as `(start, end)`.
    pub fn get(&self, i: usize) -> (u64, u64) {
        (self.starts[i], self.ends[i])
    }

    pub fn starts(&self) -> &[u64] {
        &self.starts
    }

    pub fn ends(&self) -> &[u64] {
        &self.ends
    }

    /// Index of the first run that ends after `pos` (the run holding `pos`, or the next one); `len()` if none.
    pub fn first_ending_after(&self, pos: u64) -> usize {
        self.ends.partition_point(|&e| e <= pos)
    }

    /// Whether `pos` lies inside a run, and which.
    pub fn find(&self, pos: u64) -> Option<usize> {
        let i = self.first_ending_after(pos);
        (i < self.len() && self.starts[i] <= pos).then_some(i)
    }

    /// Residues covered by all runs.
    pub fn covered(&self) -> u64 {
        self.starts.iter().zip(&self.ends).map(|(s, e)| e - s).sum()
    }
}

/// Lowercase residue runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaseMask {
    pub runs: RunList,
}

impl CaseMask {
    pub fn is_lower(&self, residue: u64) -> bool {
        self.runs.find(residue).is_some()
    }
}

/// Runs of one non-ACGT byte, with the prefix sums that map residues to bases.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exceptions {
    pub runs: RunList,
    /// The uppercase byte of each run.
    bytes: Vec<u8>,
    /// Residues in runs before run `i`; one extra entry holds the total.
    excluded_before: Vec<u64>,
}

impl Exceptions {
    /// Bytes these runs and their prefix sums hold on the heap.
    pub fn heap_bytes(&self) -> u64 {
        self.runs.heap_bytes() + self.bytes.capacity() as u64 + self.excluded_before.capacity() as u64 * 8
    }

    /// Checks that every byte is an [`EXCEPTION_BYTES`] byte and builds the prefix sums.
    pub fn new(runs: RunList, bytes: Vec<u8>) -> Result<Exceptions, DecodeError> {
        if bytes.len() != runs.len() {
            return Err(DecodeError::Invalid {
                what: "genome exceptions",
                detail: format!("{} bytes for {} runs", bytes.len(), runs.len()),
            });
        }
        if let Some((i, &b)) = bytes.iter().enumerate().find(|(_, &b)| !is_exception_byte(b)) {
            return Err(DecodeError::Invalid {
                what: "genome exception byte",
                detail: format!(
                    "run {i} holds byte 0x{b:02x}, not one of {}",
                    String::from_utf8_lossy(EXCEPTION_BYTES)
                ),
            });
        }
        let mut excluded_before = Vec::with_capacity(runs.len() + 1);
        let mut total = 0u64;
        excluded_before.push(0);
        for i in 0..runs.len() {
            let (s, e) = runs.get(i);
            total += e - s;
            excluded_before.push(total);
        }
        Ok(Exceptions { runs, bytes, excluded_before })
    }

    /// The uppercase byte of run `i`.
    pub fn byte(&self, i: usize) -> u8 {
        self.bytes[i]
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Residues left out of the nucleotide stream.
    pub fn excluded(&self) -> u64 {
        *self.excluded_before.last().unwrap_or(&0)
    }

    /// The base index of residue `residue`: residues before it that are in the nucleotide stream.
    pub fn bases_before(&self, residue: u64) -> u64 {
        let i = self.runs.first_ending_after(residue);
        let mut excluded = self.excluded_before[i];
        if i < self.runs.len() {
            let (s, _) = self.runs.get(i);
            excluded += residue.saturating_sub(s);
        }
        residue - excluded
    }

    /// The base index of residue `residue` known to lie after run `i − 1` and before run `i` (or after the last
    /// run when `i = len()`): no search needed.
    pub fn bases_before_run(&self, i: usize, residue: u64) -> u64 {
        residue - self.excluded_before[i]
    }
}
