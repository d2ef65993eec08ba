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
///
/// Held as `u32` when every index fits (a structure piece covers ~2 MiB of original bytes, so all but pieces of
/// giant lines do), else as `u64`: a decoded piece of a soft-masked genome is mostly its lowercase runs, and at
/// half the bytes twice as many pieces stay decoded within the archive's bound on them (the 340 MB generated
/// genome's 163 pieces took ~200 KB each and did not fit in 32 MiB: every pass over the file decoded ~60 again).
#[derive(Debug, Clone)]
pub struct RunList {
    bounds: Bounds,
}

#[derive(Debug, Clone)]
enum Bounds {
    Narrow { starts: Vec<u32>, ends: Vec<u32> },
    Wide { starts: Vec<u64>, ends: Vec<u64> },
}

impl Default for RunList {
    fn default() -> Self {
        RunList { bounds: Bounds::Narrow { starts: Vec::new(), ends: Vec::new() } }
    }
}

/// Equal runs, however they are held.
impl PartialEq for RunList {
    fn eq(&self, other: &Self) -> bool {
        self.len() == other.len() && (0..self.len()).all(|i| self.get(i) == other.get(i))
    }
}

impl Eq for RunList {}

impl RunList {
    /// Bytes these runs hold on the heap.
    pub fn heap_bytes(&self) -> u64 {
        match &self.bounds {
            Bounds::Narrow { starts, ends } => ((starts.capacity() + ends.capacity()) * 4) as u64,
            Bounds::Wide { starts, ends } => ((starts.capacity() + ends.capacity()) * 8) as u64,
        }
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
        // Every index is at most the last end, checked against `limit` above.
        let bounds = if prev_end <= u64::from(u32::MAX) {
            let narrow = |v: Vec<u64>| v.into_iter().map(|x| x as u32).collect();
            Bounds::Narrow { starts: narrow(starts), ends: narrow(ends) }
        } else {
            Bounds::Wide { starts, ends }
        };
        Ok(RunList { bounds })
    }

    pub fn len(&self) -> usize {
        match &self.bounds {
            Bounds::Narrow { starts, .. } => starts.len(),
            Bounds::Wide { starts, .. } => starts.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Run `i` as `(start, end)`.
    #[inline]
    pub fn get(&self, i: usize) -> (u64, u64) {
        match &self.bounds {
            Bounds::Narrow { starts, ends } => (u64::from(starts[i]), u64::from(ends[i])),
            Bounds::Wide { starts, ends } => (starts[i], ends[i]),
        }
    }

    /// The end of the last run, if any.
    pub fn last_end(&self) -> Option<u64> {
        self.len().checked_sub(1).map(|i| self.get(i).1)
    }

    /// Index of the first run that ends after `pos` (the run holding `pos`, or the next one); `len()` if none.
    pub fn first_ending_after(&self, pos: u64) -> usize {
        match &self.bounds {
            Bounds::Narrow { ends, .. } => ends.partition_point(|&e| u64::from(e) <= pos),
            Bounds::Wide { ends, .. } => ends.partition_point(|&e| e <= pos),
        }
    }

    /// Whether `pos` lies inside a run, and which.
    pub fn find(&self, pos: u64) -> Option<usize> {
        let i = self.first_ending_after(pos);
        (i < self.len() && self.get(i).0 <= pos).then_some(i)
    }

    /// Residues covered by all runs.
    pub fn covered(&self) -> u64 {
        (0..self.len()).map(|i| self.get(i)).map(|(s, e)| e - s).sum()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The same runs, shifted by `by`: held narrow while the last end fits in `u32`, wide past it, and answering
    /// every query the same either way.
    #[test]
    fn narrow_and_wide_runs_answer_alike() {
        let max = u64::from(u32::MAX);
        for (by, narrow) in [(0, true), (max - 40, true), (max - 39, false), (1 << 36, false)] {
            let starts = vec![by, by + 10, by + 25];
            let ends = vec![by + 3, by + 20, by + 40];
            let runs = RunList::new(starts.clone(), ends.clone(), by + 40, "test").unwrap();
            assert_eq!(matches!(runs.bounds, Bounds::Narrow { .. }), narrow, "shifted by {by}");
            assert_eq!(runs.heap_bytes(), if narrow { 24 } else { 48 });
            assert_eq!((runs.len(), runs.last_end(), runs.covered()), (3, Some(by + 40), 28));
            for i in 0..3 {
                assert_eq!(runs.get(i), (starts[i], ends[i]));
            }
            for (at, first, found) in
                [(0u64, 0, Some(0)), (3, 1, None), (10, 1, Some(1)), (39, 2, Some(2)), (40, 3, None)]
            {
                assert_eq!(runs.first_ending_after(by + at), first, "{by} + {at}");
                assert_eq!(runs.find(by + at), found, "{by} + {at}");
            }
            // Equal to the same runs held the other way (built against a limit that forces it).
            let wide = RunList { bounds: Bounds::Wide { starts, ends } };
            assert_eq!(runs, wide);
            assert_ne!(runs, RunList::default());
        }
        // A run past the limit is refused whichever way it would be held.
        assert!(RunList::new(vec![max], vec![max + 2], max + 1, "test").is_err());
    }
}
