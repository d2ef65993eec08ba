//! Sequential-access detection per open file and a small background pool that decodes the blocks ahead of a
//! sequential reader, so that `cat`, `cp` and `md5sum` find their next blocks already in the cache.
//!
//! The kernel already reads ahead (up to `max_readahead`), but it asks for those pages one request at a time
//! and waits for each; decoding a few MiB ahead in batches (which the GPU engine wants anyway) hides the
//! decode latency behind the reader's own work. The pool is bounded: when it is saturated a batch is dropped,
//! never queued without limit, and those blocks are simply decoded on demand.

use std::ops::Range;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// How close (in bytes) a read must start to where the previous one ended to count as sequential. The kernel
/// issues readahead requests concurrently and several FUSE threads serve them, so consecutive requests of one
/// stream can arrive slightly out of order.
const SEQUENTIAL_SLACK: u64 = 2 << 20;

/// Per-open-file state of the sequential detector.
#[derive(Debug, Default)]
pub struct SequentialState {
    /// End of the furthest read so far.
    furthest_end: u64,
    /// Consecutive near-sequential reads.
    streak: u32,
    /// File offset up to which readahead has been requested.
    ahead_until: u64,
}

impl SequentialState {
    /// Records a read of `[offset, offset + len)` and returns the file range to read ahead, if any: once two
    /// reads in a row are sequential, keep `window` bytes ahead of the reader, topping up in steps of at least
    /// half a window so that batches stay large.
    pub fn on_read(&mut self, offset: u64, len: u64, window: u64, file_size: u64) -> Option<Range<u64>> {
        let end = offset.saturating_add(len).min(file_size);
        if offset.abs_diff(self.furthest_end) <= SEQUENTIAL_SLACK {
            self.streak = self.streak.saturating_add(1);
            self.furthest_end = self.furthest_end.max(end);
        } else {
            // A jump: start over from here.
            self.streak = 0;
            self.furthest_end = end;
            self.ahead_until = end;
            return None;
        }
        if self.streak < 2 || window == 0 {
            return None;
        }
        let target = self.furthest_end.saturating_add(window).min(file_size);
        let from = self.ahead_until.max(self.furthest_end);
        if target <= from || target - from < window / 2 && target < file_size {
            return None;
        }
        self.ahead_until = target;
        Some(from..target)
    }
}

impl SequentialState {
    /// True once the reads of this handle look like a sequential stream.
    pub fn is_sequential(&self) -> bool {
        self.streak >= 2
    }
}

/// Where a sequential stream has been decoded up to: the next block to decode, in stream order.
///
/// Why in order: a block's matches copy from anywhere earlier in the stream. If the earlier blocks are in the
/// cache that is a plain copy; if not, the bytes are resolved through the earlier blocks' tokens, several
/// levels deep, which costs many times more. The kernel sends a sequential reader's requests concurrently to
/// several workers, and readahead runs beside them; without this cursor they would decode neighbouring
/// ranges at the same time, each missing the other's blocks. With it, whoever gets the cursor decodes
/// everything from the cursor up to what it needs, in order, and the others find their blocks cached.
#[derive(Debug, Default)]
pub struct StreamCursor {
    next: Mutex<Option<u64>>,
}

impl StreamCursor {
    /// Makes sure blocks `[from, to)` have been decoded, continuing in order from the cursor when it is within
    /// `max_gap` blocks before `from` (else starting at `from`), one `batch` per call of `decode`. The lock is
    /// released between batches so that readers who need only the first blocks go on early.
    pub fn advance_to(&self, from: u64, to: u64, batch: u64, max_gap: u64, mut decode: impl FnMut(Range<u64>)) {
        loop {
            let mut next = self.next.lock().unwrap_or_else(|p| p.into_inner());
            let start = match *next {
                // Already decoded past what is asked.
                Some(n) if n >= to && n <= to.saturating_add(max_gap) => return,
                Some(n) if n < to && n.saturating_add(max_gap) >= from => n,
                // Unset, or the reader jumped away from the cursor: restart where the reader is.
                _ => from,
            };
            if start >= to {
                return;
            }
            let end = start.saturating_add(batch.max(1)).min(to);
            decode(start..end);
            *next = Some(end);
        }
    }
}

/// A unit of background work: decode these blocks into the cache.
pub type Job = Box<dyn FnOnce() + Send + 'static>;

/// A fixed set of threads taking jobs from a bounded queue.
pub struct ReadaheadPool {
    sender: Option<SyncSender<Job>>,
    workers: Vec<JoinHandle<()>>,
}

impl ReadaheadPool {
    /// `threads` workers (0 disables readahead) and room for `queue` waiting jobs.
    pub fn new(threads: usize, queue: usize) -> ReadaheadPool {
        if threads == 0 {
            return ReadaheadPool { sender: None, workers: Vec::new() };
        }
        let (sender, receiver) = sync_channel::<Job>(queue.max(1));
        let receiver = Arc::new(Mutex::new(receiver));
        let workers = (0..threads)
            .filter_map(|i| {
                let receiver = Arc::clone(&receiver);
                std::thread::Builder::new()
                    .name(format!("acx-readahead-{i}"))
                    .spawn(move || worker_loop(&receiver))
                    .ok()
            })
            .collect();
        ReadaheadPool { sender: Some(sender), workers }
    }

    /// Queues `job`; returns false (and drops it) if the pool is disabled or saturated.
    pub fn try_submit(&self, job: Job) -> bool {
        match &self.sender {
            Some(sender) => match sender.try_send(job) {
                Ok(()) => true,
                Err(TrySendError::Full(_)) | Err(TrySendError::Disconnected(_)) => false,
            },
            None => false,
        }
    }

    pub fn enabled(&self) -> bool {
        self.sender.is_some()
    }
}

fn worker_loop(receiver: &Mutex<Receiver<Job>>) {
    loop {
        // Hold the lock only while taking a job, not while running it.
        let job = match receiver.lock() {
            Ok(guard) => guard.recv(),
            Err(_) => return,
        };
        match job {
            Ok(job) => job(),
            Err(_) => return, // the pool was dropped
        }
    }
}

impl Drop for ReadaheadPool {
    fn drop(&mut self) {
        // Closing the channel ends the workers once they finish their current job.
        self.sender = None;
        for worker in self.workers.drain(..) {
            let _ = worker.join();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    const MIB: u64 = 1 << 20;

    #[test]
    fn sequential_reads_trigger_readahead_in_large_steps() {
        let mut s = SequentialState::default();
        let size = 100 * MIB;
        assert_eq!(s.on_read(0, 128 << 10, 4 * MIB, size), None);
        let first = s.on_read(128 << 10, 128 << 10, 4 * MIB, size).expect("second sequential read reads ahead");
        assert_eq!(first, (256 << 10)..(256 << 10) + 4 * MIB);
        // The next few reads are covered by the window: nothing new until half of it is consumed.
        let mut requested = vec![first];
        let mut off = 256 << 10;
        while off < 20 * MIB {
            if let Some(r) = s.on_read(off, 128 << 10, 4 * MIB, size) {
                assert!(r.end - r.start >= 2 * MIB, "batches stay large: {r:?}");
                requested.push(r);
            }
            off += 128 << 10;
        }
        // Requests are contiguous and never overlap.
        for pair in requested.windows(2) {
            assert_eq!(pair[0].end, pair[1].start);
        }
        assert!(requested.last().unwrap().end >= 20 * MIB);
    }

    #[test]
    fn random_reads_do_not_read_ahead() {
        let mut s = SequentialState::default();
        let size = 1 << 40;
        let mut x = 12345u64;
        for _ in 0..1000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let off = (x >> 20) % size;
            assert_eq!(s.on_read(off, 4096, 4 * MIB, size), None, "random read at {off}");
        }
    }

    #[test]
    fn readahead_stops_at_end_of_file() {
        let mut s = SequentialState::default();
        let size = 3 * MIB;
        let mut all = Vec::new();
        let mut off = 0;
        while off < size {
            all.extend(s.on_read(off, 128 << 10, 4 * MIB, size));
            off += 128 << 10;
        }
        assert!(all.iter().all(|r| r.end <= size));
        assert_eq!(all.last().map(|r| r.end), Some(size));
    }

    #[test]
    fn cursor_decodes_in_order_without_repeats() {
        let cursor = StreamCursor::default();
        let mut decoded = Vec::new();
        // Out-of-order requests, as concurrent kernel requests arrive.
        for (from, to) in [(0, 4), (8, 12), (4, 8), (12, 14), (13, 20)] {
            cursor.advance_to(from, to, 3, 100, |r| decoded.push(r));
        }
        let blocks: Vec<u64> = decoded.iter().flat_map(|r| r.clone()).collect();
        assert_eq!(blocks, (0..20).collect::<Vec<_>>(), "every block once, in order: {decoded:?}");
        assert!(decoded.iter().all(|r| r.end - r.start <= 3));
        // A far jump restarts at the reader; a jump back restarts too.
        decoded.clear();
        cursor.advance_to(1000, 1002, 8, 100, |r| decoded.push(r));
        cursor.advance_to(10, 11, 8, 100, |r| decoded.push(r));
        assert_eq!(decoded, vec![1000..1002, 10..11]);
    }

    #[test]
    fn cursor_is_shared_between_threads() {
        let cursor = Arc::new(StreamCursor::default());
        let decoded = Arc::new(Mutex::new(Vec::new()));
        std::thread::scope(|s| {
            for t in 0..4u64 {
                let (cursor, decoded) = (Arc::clone(&cursor), Arc::clone(&decoded));
                s.spawn(move || {
                    for i in 0..25u64 {
                        let from = (i * 4 + t) * 2;
                        cursor.advance_to(from, from + 2, 4, 1000, |r| decoded.lock().unwrap().extend(r));
                    }
                });
            }
        });
        let mut all = decoded.lock().unwrap().clone();
        let len = all.len();
        all.sort_unstable();
        all.dedup();
        assert_eq!(all.len(), len, "no block decoded twice");
    }

    #[test]
    fn pool_runs_jobs_and_refuses_when_full() {
        let pool = ReadaheadPool::new(2, 4);
        let done = Arc::new(AtomicUsize::new(0));
        let mut accepted = 0;
        for _ in 0..64 {
            let done = Arc::clone(&done);
            if pool.try_submit(Box::new(move || {
                std::thread::sleep(std::time::Duration::from_millis(1));
                done.fetch_add(1, Ordering::SeqCst);
            })) {
                accepted += 1;
            }
        }
        assert!((4..64).contains(&accepted), "accepted {accepted}");
        drop(pool);
        assert_eq!(done.load(Ordering::SeqCst), accepted);
        assert!(!ReadaheadPool::new(0, 4).try_submit(Box::new(|| {})));
    }
}
