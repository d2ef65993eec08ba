//! One level of the closure planner's slice parses, shared between the calling thread and pool helpers that
//! never hold it up.
//!
//! A cold read plans its closure level by level, each level a list of slices to entropy-decode. Handing a level
//! to rayon (`par_chunks` and `collect`) puts the calling thread to sleep until pool threads have run it; on a
//! loaded machine a sleeping pool thread wakes milliseconds late, and a cold read crosses up to `max_depth + 1`
//! levels. Here the calling thread claims and parses chunks itself, and the helpers it asks for claim chunks
//! from the same counter when (if) they start: one that starts after the last chunk was claimed does nothing.
//! The caller never waits for a helper either: once every chunk is claimed, it parses again the chunks that
//! helpers claimed but have not finished (a helper on a loaded machine can be preempted in the middle of one),
//! so a level costs the caller at most its share of the work plus one chunk per helper, never a wake-up.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;

use super::{parse_slices, ParsedCache};
use crate::format::ArchiveData;

/// Slices parsed per claim: their entropy stages run four at a time in lock step ([`parse_slices`]).
pub(super) const CHUNK: usize = 4;

/// Fewest slices in a level before pool threads are asked to help. Waking one has a price beyond the wake-up
/// call: on a loaded machine the woken thread tends to preempt the caller, which then waits a scheduler slice
/// (milliseconds, measured with `acxbench closure` at load 6-8 on 2 cores) for its CPU back; only a level long
/// enough to gain more than that on an idle machine (about 0.5 ms of parsing) is shared.
pub(super) const HELP_MIN_SLICES: usize = 64;

/// A chunk nobody has finished yet, and one whose slices are in the LRU (or failed to parse).
const PENDING: u8 = 0;
const DONE: u8 = 1;

/// The slices of one level, parsed into `parsed` by whichever threads claim them.
pub(super) struct SharedParse {
    data: Arc<ArchiveData>,
    parsed: Arc<ParsedCache>,
    /// `(slice, end)`: parse slice as far as its bytes `[0, end)` need.
    slices: Vec<(u64, u32)>,
    /// The next chunk to claim (it runs past the chunk count as late claimers give up).
    next: AtomicUsize,
    /// Per chunk: [`PENDING`] or [`DONE`].
    state: Vec<AtomicU8>,
}

impl SharedParse {
    /// Parses `slices` (sorted by global slice id, each with the end of the bytes it must serve) into `parsed` on the calling thread and on up to `helpers` pool
    /// threads, and returns how many chunks the helpers finished first. Parse failures are not inserted (the
    /// resolution that follows reports them).
    pub(super) fn run(
        data: &Arc<ArchiveData>,
        parsed: &Arc<ParsedCache>,
        slices: Vec<(u64, u32)>,
        helpers: usize,
    ) -> usize {
        let chunks = slices.len().div_ceil(CHUNK);
        let helpers = if slices.len() < HELP_MIN_SLICES { 0 } else { helpers.min(chunks - 1) };
        if helpers == 0 {
            // All at once: parse_slices keeps a block's payload from one chunk of slices to the next.
            parse_into(data, parsed, &slices);
            return 0;
        }
        let job = Arc::new(SharedParse {
            data: data.clone(),
            parsed: parsed.clone(),
            slices,
            next: AtomicUsize::new(0),
            state: (0..chunks).map(|_| AtomicU8::new(PENDING)).collect(),
        });
        for _ in 0..helpers {
            let job = job.clone();
            rayon::spawn(move || {
                job.work();
            });
        }
        let own = job.work();
        // Whatever a helper claimed and has not finished, the caller parses too (the LRU keeps one copy).
        let mut redone = 0;
        for c in 0..chunks {
            if job.state[c].load(Ordering::Acquire) == PENDING {
                job.parse_chunk(c);
                redone += 1;
            }
        }
        chunks - own - redone
    }

    /// Claims and parses chunks until none is left; returns how many this thread parsed.
    fn work(&self) -> usize {
        let chunks = self.state.len();
        let mut own = 0;
        loop {
            let c = self.next.fetch_add(1, Ordering::Relaxed);
            if c >= chunks {
                return own;
            }
            self.parse_chunk(c);
            own += 1;
        }
    }

    /// Parses chunk `c` into the LRU and marks it done.
    fn parse_chunk(&self, c: usize) {
        let gs = &self.slices[c * CHUNK..((c + 1) * CHUNK).min(self.slices.len())];
        parse_into(&self.data, &self.parsed, gs);
        self.state[c].store(DONE, Ordering::Release);
    }
}

/// Parses the slices `gs` and inserts the good ones into `parsed`.
fn parse_into(data: &ArchiveData, parsed: &ParsedCache, gs: &[(u64, u32)]) {
    for (g, p) in parse_slices(data, gs) {
        if let Ok(p) = p {
            parsed.parses.fetch_add(1, Ordering::Relaxed);
            parsed.insert(g, Arc::new(p));
        }
    }
}
