//! Stream runs: a sequential reader is served by the backend's sequential decoder, running on its own thread
//! ahead of the reader, instead of by the random-access path.
//!
//! Why (measured on atha_chr1, 30.9 MB, 2 cores, `dd bs=1M` through a fresh mount): decoding a sequential
//! reader's blocks through the random-access path — batches of 128 blocks, each split into per-core runs —
//! served 66–90 MB/s, while the sequential decoder does ~200 MB/s on the same file. In a random-access batch
//! the second per-core run starts without the first run's bytes, so its sources are resolved through tokens,
//! and the closure planner parses source blocks that the sequential order would have had decoded already. The
//! sequential decoder instead runs the entropy stage of the next blocks on all cores while it copies the
//! current ones, with every near source a plain copy from its window.
//!
//! A [`Run`] is one call of [`Backend::decode_stream`] on a dedicated thread, over the blocks from the reader's
//! position to the end of its file. The decoder hands over runs of consecutive blocks (one block at a time from
//! the CPU's sequential decoder, a whole piece of views of shared windows from a GPU's), and each run goes into
//! the shared block cache under one lock acquisition (the backend's own,
//! [`Backend::block_cache`], so a run's blocks count against the one budget and serve random reads too),
//! ideally before the reader asks for them; a reader that needs a block the run is about to produce waits for
//! it. The run keeps at most `ahead` blocks in front of the furthest block the reader asked for (starting smaller and
//! growing with the bytes the reader has consumed, so that a false start costs little), and it stops when it is
//! cancelled: its handle released, or the reader jumped away.
//!
//! Where a run's time goes is counted in [`StreamStats`] (the stats file): the decoder's time between blocks,
//! the cache inserts, the time the run was held back by its pacing, and the time readers waited for it. With
//! the trace on ([`crate::fs::FsOptions::trace`]) each run also logs those per segment of [`TRACE_SEGMENT_BYTES`]
//! and once at its end, so that a slow sequential read shows whether the decoder, the pacing or the reader is
//! the bottleneck.

use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::Backend;
use crate::cache::{Block, BlockCache};

/// How a run paces itself against its readers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pacing {
    /// Blocks the run may get ahead of the furthest block a reader asked for, however little was consumed.
    pub min_ahead: u64,
    /// Blocks the run may get ahead at most (it may get as far ahead as the reader has consumed, in between).
    pub max_ahead: u64,
    /// A reader waits for the run when the block it needs is at most this many blocks beyond the run's
    /// progress; further away, it decodes the block itself.
    pub wait_lead: u64,
}

impl Pacing {
    /// A sequential reader's run: starts 64 blocks ahead and keeps up to `window` blocks in front of it.
    pub fn stream(window: u64) -> Pacing {
        let window = window.max(1);
        Pacing { min_ahead: window.min(64), max_ahead: window, wait_lead: window }
    }

    /// A run that fills a whole range without waiting for readers; readers wait for it up to `wait_lead`.
    pub fn fill(wait_lead: u64) -> Pacing {
        Pacing { min_ahead: u64::MAX, max_ahead: u64::MAX, wait_lead }
    }
}

/// Counters of the stream runs, for the stats file.
#[derive(Debug, Default)]
pub struct StreamStats {
    pub started: AtomicU64,
    /// Runs stopped before the end of their range (released handle, reader jumped away).
    pub cancelled: AtomicU64,
    /// Runs that ended on a decode error (the reads that need the bad block report it through the random path).
    pub failed: AtomicU64,
    /// Runs refused because the maximum number were already running.
    pub refused: AtomicU64,
    /// Blocks produced by runs.
    pub blocks: AtomicU64,
    /// Read requests that waited for a run to produce a block.
    pub waits: AtomicU64,
    /// Microseconds readers spent waiting for runs.
    pub wait_us: AtomicU64,
    /// Microseconds runs spent in their decoder (between handing out one block and the next).
    pub decode_us: AtomicU64,
    /// Microseconds runs spent putting blocks into the cache.
    pub insert_us: AtomicU64,
    /// Microseconds runs were held back because they were far enough ahead of their readers.
    pub paced_us: AtomicU64,
}

impl StreamStats {
    pub fn to_json(&self) -> serde_json::Value {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        serde_json::json!({
            "started": get(&self.started),
            "cancelled": get(&self.cancelled),
            "failed": get(&self.failed),
            "refused": get(&self.refused),
            "blocks": get(&self.blocks),
            "waits": get(&self.waits),
            "wait_us": get(&self.wait_us),
            "decode_us": get(&self.decode_us),
            "insert_us": get(&self.insert_us),
            "paced_us": get(&self.paced_us),
        })
    }
}

/// The block cache runs fill (shared with the backend's random path) and the bookkeeping of all runs.
pub struct StreamRuns {
    cache: Arc<BlockCache>,
    live: Arc<AtomicUsize>,
    max_live: usize,
    stats: Arc<StreamStats>,
    /// Log each run's segments (see the module's documentation).
    trace: bool,
    /// Runs started so far, to tell their trace lines apart.
    serial: AtomicU64,
}

impl StreamRuns {
    /// Runs put their blocks into `cache`; at most `max_live` run at once (0 disables runs). The bound on live
    /// runs is also a memory bound: each run's sequential decoder holds a window (see
    /// [`crate::fs::options::MemoryBudget`]).
    pub fn new(cache: Arc<BlockCache>, max_live: usize) -> StreamRuns {
        StreamRuns {
            cache,
            live: Arc::new(AtomicUsize::new(0)),
            max_live,
            stats: Arc::new(StreamStats::default()),
            trace: false,
            serial: AtomicU64::new(0),
        }
    }

    /// Turns the per-run trace on or off (see the module's documentation).
    pub fn with_trace(mut self, trace: bool) -> StreamRuns {
        self.trace = trace;
        self
    }

    pub fn enabled(&self) -> bool {
        self.max_live > 0
    }

    /// Whether some run's producer is still running (decoding, or paced between batches).
    pub fn decoding(&self) -> bool {
        self.live.load(Ordering::Acquire) > 0
    }

    /// Block `id` if it is cached (decoded by a run or by a random read), without refreshing it.
    pub fn cached(&self, id: u64) -> Option<Block> {
        self.cache.peek(id)
    }

    /// The first of blocks `ids` that is not cached (one lock acquisition for the whole range).
    pub fn first_missing(&self, ids: Range<u64>) -> Option<u64> {
        self.cache.first_missing(ids)
    }

    /// Block `id` if cached, for a read it serves: counts a hit and refreshes its LRU position, so that blocks
    /// readers come back to outlive those a run decoded once.
    pub fn serve(&self, id: u64) -> Option<Block> {
        self.cache.get(id)
    }

    pub fn stats(&self) -> &StreamStats {
        &self.stats
    }

    /// The counters of the cache the runs fill (bytes held, evictions): the archive's own when it has one.
    pub fn cache_json(&self) -> serde_json::Value {
        let s = self.cache.stats();
        serde_json::json!({ "bytes": s.bytes, "entries": s.entries, "evictions": s.evictions, "budget_bytes": s.budget_bytes })
    }

    /// Starts a run decoding `blocks` in order on a new thread, paced by `pacing`. `None` when runs are
    /// disabled, too many are running, or the thread cannot be started.
    pub fn start<B: Backend>(&self, backend: &Arc<B>, blocks: Range<u64>, pacing: Pacing) -> Option<Arc<Run>> {
        if blocks.start >= blocks.end || !self.enabled() {
            return None;
        }
        // Blocks at the front that are cached already (a file read again after the kernel dropped its pages) are
        // not decoded again: the run starts at the first one missing, and is done at once if none is. Looked up
        // under one cache lock per STARTUP_LOOKUP_BLOCKS, not a lock and a block clone each: with every block
        // cached, that was 1.5 % of the daemon's CPU serving atha_chr1 from its cache (`BlockCache::peek`, perf).
        let decode_from = (blocks.start..blocks.end)
            .step_by(STARTUP_LOOKUP_BLOCKS)
            .find_map(|from| self.cache.first_missing(from..(from + STARTUP_LOOKUP_BLOCKS as u64).min(blocks.end)))
            .unwrap_or(blocks.end);
        if decode_from == blocks.end {
            let done = RunState::new(blocks.end, blocks.start, true);
            return Some(Arc::new(Run { shared: Arc::new(RunShared::new(done, blocks, pacing)) }));
        }
        let claimed =
            self.live.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < self.max_live).then_some(n + 1));
        if claimed.is_err() {
            StreamStats::add(&self.stats.refused);
            return None;
        }
        let shared = Arc::new(RunShared::new(RunState::new(decode_from, blocks.start, false), blocks.clone(), pacing));
        let serial = self.serial.fetch_add(1, Ordering::Relaxed);
        let producer = Producer {
            trace: self.trace.then_some(serial),
            decode: decode_from..blocks.end,
            backend: Arc::clone(backend),
            shared: Arc::clone(&shared),
            cache: Arc::clone(&self.cache),
            live: Arc::clone(&self.live),
            stats: Arc::clone(&self.stats),
        };
        let spawned = std::thread::Builder::new().name("acx-stream".to_string()).spawn(move || producer.run());
        match spawned {
            Ok(_) => {
                StreamStats::add(&self.stats.started);
                Some(Arc::new(Run { shared }))
            }
            Err(e) => {
                tracing::debug!("cannot start a stream thread: {e}");
                self.live.fetch_sub(1, Ordering::AcqRel);
                None
            }
        }
    }
}

impl StreamStats {
    fn add(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }

    fn add_time(counter: &AtomicU64, d: Duration) {
        counter.fetch_add(u64::try_from(d.as_micros()).unwrap_or(u64::MAX), Ordering::Relaxed);
    }
}

/// Where a run stands; shared by its producer thread and its readers.
struct RunState {
    /// The next block the run will produce.
    next: u64,
    /// One past the furthest block a reader asked for.
    reader: u64,
    /// The producer has returned (end of range, error, or cancellation).
    finished: bool,
    /// It returned on a decode error.
    failed: bool,
    cancelled: bool,
    /// The readers waiting: the block each waits for and its own condition variable (one entry per waiting
    /// read: as many as FUSE workers at most), so that the producer wakes exactly the readers whose block is
    /// in, not every waiting reader for each one (16 readers of 128 KiB each, all woken for every read
    /// completed, spent 112 ms of a 430 ms read in the hand-over).
    waiting: Vec<(u64, Arc<Condvar>)>,
    /// The producer is held back by the pacing, waiting for `reader` to move.
    paced: bool,
}

impl RunState {
    fn new(next: u64, reader: u64, finished: bool) -> RunState {
        RunState { next, reader, finished, failed: false, cancelled: false, waiting: Vec::new(), paced: false }
    }

    /// Wakes every waiting reader (the run stopped: each sees why and returns).
    fn wake_all_readers(&self) {
        for (_, wake) in &self.waiting {
            wake.notify_one();
        }
    }
}

struct RunShared {
    state: Mutex<RunState>,
    /// Signalled when the paced producer may go on: a reader moved far enough, or the run was cancelled.
    for_producer: Condvar,
    blocks: Range<u64>,
    pacing: Pacing,
    /// Nanoseconds readers waited for this run, and how many reads waited (for the trace).
    reader_wait_ns: AtomicU64,
    reader_waits: AtomicU64,
}

impl RunShared {
    fn new(state: RunState, blocks: Range<u64>, pacing: Pacing) -> RunShared {
        RunShared {
            state: Mutex::new(state),
            for_producer: Condvar::new(),
            blocks,
            pacing,
            reader_wait_ns: AtomicU64::new(0),
            reader_waits: AtomicU64::new(0),
        }
    }

    fn lock(&self) -> MutexGuard<'_, RunState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// How far the producer may get: in front of the reader by as much as the reader has consumed, between
    /// the pacing's `min_ahead` and `max_ahead`.
    fn limit(&self, state: &RunState) -> u64 {
        let Pacing { min_ahead, max_ahead, .. } = self.pacing;
        let consumed = state.reader - self.blocks.start;
        state.reader.saturating_add(consumed.max(min_ahead).min(max_ahead).max(1))
    }

    /// Records that a reader asked for block `id`, waking the paced producer if that lets it go on.
    fn asked(&self, state: &mut RunState, id: u64) {
        if id >= state.reader {
            state.reader = id + 1;
            if state.paced && state.next < self.limit(state) {
                self.for_producer.notify_one();
            }
        }
    }
}

/// A running (or finished) sequential decode of a block range. Dropping the last reference cancels it.
pub struct Run {
    shared: Arc<RunShared>,
}

impl Run {
    /// The blocks this run decodes.
    pub fn blocks(&self) -> Range<u64> {
        self.shared.blocks.clone()
    }

    /// Waits until the run has produced block `id` and returns true, or returns false at once when it will not:
    /// `id` is outside its range, the run has stopped, or `id` is more than the pacing's `wait_lead` blocks
    /// beyond what it has produced (the reader is better off decoding it itself). Also moves the run's
    /// backpressure limit.
    pub fn wait_for(&self, id: u64, stats: &StreamStats) -> bool {
        if !self.shared.blocks.contains(&id) {
            return false;
        }
        let mut state = self.shared.lock();
        self.shared.asked(&mut state, id);
        let mut waited: Option<Instant> = None;
        let produced = loop {
            if state.next > id {
                break true;
            }
            if state.finished || state.cancelled || id - state.next > self.shared.pacing.wait_lead {
                break false;
            }
            if waited.is_none() {
                waited = Some(Instant::now());
                StreamStats::add(&stats.waits);
            }
            // Woken only when the block is in or the run stops: with one wake-up per block for every waiting
            // reader, 4 readers on 2 cores took 30 % of the run's time from the decoder (`insert+hand-over` in
            // the trace).
            let wake = Arc::new(Condvar::new());
            state.waiting.push((id, Arc::clone(&wake)));
            state = wake.wait(state).unwrap_or_else(|p| p.into_inner());
            if let Some(at) = state.waiting.iter().position(|(_, w)| Arc::ptr_eq(w, &wake)) {
                state.waiting.swap_remove(at);
            }
        };
        drop(state);
        if let Some(since) = waited {
            let d = since.elapsed();
            StreamStats::add_time(&stats.wait_us, d);
            self.shared.reader_wait_ns.fetch_add(u64::try_from(d.as_nanos()).unwrap_or(u64::MAX), Ordering::Relaxed);
            self.shared.reader_waits.fetch_add(1, Ordering::Relaxed);
        }
        produced
    }

    /// Records that a reader got up to block `id` (served from the cache, without waiting), so that the run's
    /// pacing follows readers that never wait: a run's lead is measured from the furthest block asked for, and
    /// a reader whose blocks are all cached would otherwise hold the run at its limit until the reader caught
    /// up with it, stalling the decoder just when it should be decoding ahead.
    pub fn reached(&self, id: u64) {
        if !self.shared.blocks.contains(&id) {
            return;
        }
        let mut state = self.shared.lock();
        self.shared.asked(&mut state, id);
    }

    /// Whether block `id` is one this run has produced or will produce soon enough to wait for (within its
    /// range, not before its start by more than `behind` blocks, at most the pacing's `wait_lead` beyond its
    /// progress, or anywhere in its range once it has finished), while it is not cancelled.
    pub fn covers(&self, id: u64, behind: u64) -> bool {
        let blocks = &self.shared.blocks;
        if id < blocks.start.saturating_sub(behind) || id >= blocks.end {
            return false;
        }
        let state = self.shared.lock();
        // A finished run covers its whole range: the blocks it did not produce (it stopped on a bad block) go to
        // the random path, which reports the error, rather than to a new run that would stop there again.
        !state.cancelled && (id < state.next || state.finished || id - state.next <= self.shared.pacing.wait_lead)
    }

    /// True while the producer has not returned.
    pub fn is_running(&self) -> bool {
        !self.shared.lock().finished
    }

    /// True if the producer stopped on a decode error.
    pub fn failed(&self) -> bool {
        self.shared.lock().failed
    }

    /// Stops the producer after the block it is decoding.
    pub fn cancel(&self) {
        let mut state = self.shared.lock();
        state.cancelled = true;
        state.wake_all_readers();
        self.shared.for_producer.notify_all();
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// The producer side of a run, moved onto its thread.
struct Producer<B: Backend> {
    /// The blocks it decodes: the run's, less those cached when it started.
    decode: Range<u64>,
    backend: Arc<B>,
    shared: Arc<RunShared>,
    cache: Arc<BlockCache>,
    live: Arc<AtomicUsize>,
    stats: Arc<StreamStats>,
    /// The run's serial number when its trace is on.
    trace: Option<u64>,
}

/// Blocks a run's start looks up under one cache lock when it skips the cached ones at its front: few enough that
/// the lock is held for tens of microseconds at most.
const STARTUP_LOOKUP_BLOCKS: usize = 1024;

/// Bytes of blocks per trace line of a run.
pub const TRACE_SEGMENT_BYTES: u64 = 8 << 20;

/// Where a run's time went, over a segment of blocks or the whole run.
#[derive(Debug, Clone, Copy, Default)]
struct Meter {
    blocks: u64,
    bytes: u64,
    /// In the decoder: from the run's start or the return of the previous block's sink to this block's.
    decode: Duration,
    /// Putting the block into the cache and handing it over to the readers.
    insert: Duration,
    /// Held back by the pacing.
    paced: Duration,
}

impl Meter {
    fn add(&mut self, other: &Meter) {
        self.blocks += other.blocks;
        self.bytes += other.bytes;
        self.decode += other.decode;
        self.insert += other.insert;
        self.paced += other.paced;
    }

    /// One trace line's numbers: MB/s over `wall`, the decoder's own MB/s, and the parts in ms.
    fn describe(&self, wall: Duration, reader_waits: u64, reader_wait_ns: u64) -> String {
        let mb_s = |d: Duration| self.bytes as f64 / d.as_secs_f64().max(1e-9) / 1e6;
        format!(
            "{} blocks, {:.1} MB in {:.1} ms = {:.0} MB/s; decoder {:.1} ms ({:.0} MB/s), insert+hand-over {:.1} ms, \
             paced {:.1} ms; readers waited {reader_waits}× {:.1} ms",
            self.blocks,
            self.bytes as f64 / 1e6,
            wall.as_secs_f64() * 1e3,
            mb_s(wall),
            self.decode.as_secs_f64() * 1e3,
            mb_s(self.decode),
            self.insert.as_secs_f64() * 1e3,
            self.paced.as_secs_f64() * 1e3,
            reader_wait_ns as f64 / 1e6,
        )
    }
}

/// A run's meters: the segment being measured and the whole run.
struct RunMeter {
    started: Instant,
    /// When the last sink call returned (the decoder's time runs from there).
    resumed: Instant,
    segment: Meter,
    segment_started: Instant,
    segment_first: u64,
    /// Reader waits at the segment's start (the shared counters keep running totals).
    segment_waits: (u64, u64),
    total: Meter,
}

impl RunMeter {
    fn new(first: u64) -> RunMeter {
        let now = Instant::now();
        RunMeter {
            started: now,
            resumed: now,
            segment: Meter::default(),
            segment_started: now,
            segment_first: first,
            segment_waits: (0, 0),
            total: Meter::default(),
        }
    }
}

impl<B: Backend> Producer<B> {
    fn run(self) {
        let mut meter = RunMeter::new(self.decode.start);
        if let Some(serial) = self.trace {
            tracing::info!(
                "stream run {serial}: blocks {:?} (decoding from {}), pacing {:?}",
                self.shared.blocks,
                self.decode.start,
                self.shared.pacing
            );
        }
        let result =
            self.backend.decode_stream(self.decode.clone(), &mut |first, run| self.produced(first, run, &mut meter));
        let (cancelled, next) = {
            let mut state = self.shared.lock();
            state.finished = true;
            state.failed = result.is_err();
            state.wake_all_readers();
            (state.cancelled && state.next < self.shared.blocks.end, state.next)
        };
        if let Some(serial) = self.trace {
            self.trace_segment(serial, &mut meter);
            let outcome = match (&result, cancelled) {
                (Err(_), _) => "failed",
                (Ok(()), true) => "cancelled",
                (Ok(()), false) => "finished",
            };
            tracing::info!(
                "stream run {serial} {outcome} at block {next}: {}",
                meter.total.describe(
                    meter.started.elapsed(),
                    self.shared.reader_waits.load(Ordering::Relaxed),
                    self.shared.reader_wait_ns.load(Ordering::Relaxed)
                )
            );
        }
        if let Err(e) = result {
            // The read that needs the bad block decodes it through the random path, which reports it.
            tracing::debug!("stream run over blocks {:?} stopped: {e}", self.shared.blocks);
            StreamStats::add(&self.stats.failed);
        } else if cancelled {
            StreamStats::add(&self.stats.cancelled);
        }
        self.live.fetch_sub(1, Ordering::AcqRel);
    }

    /// Keeps blocks `first, first + 1, …` (`run`, inserted under one cache lock), wakes their readers, then
    /// waits while the run is far enough ahead. False stops the run.
    fn produced(&self, first: u64, run: &[Block], meter: &mut RunMeter) -> bool {
        let decoded = Instant::now();
        let decode = decoded - meter.resumed;
        if run.is_empty() {
            return true;
        }
        let len = run.iter().map(|b| b.len() as u64).sum();
        self.cache.insert_run(first, run);
        self.stats.blocks.fetch_add(run.len() as u64, Ordering::Relaxed);
        let mut state = self.shared.lock();
        state.next = state.next.max(first + run.len() as u64);
        for (waited, wake) in &state.waiting {
            if *waited < state.next {
                wake.notify_one();
            }
        }
        let mut paced = Duration::ZERO;
        if !state.cancelled && state.next >= self.shared.limit(&state) {
            let since = Instant::now();
            state.paced = true;
            while !state.cancelled && state.next >= self.shared.limit(&state) {
                state = self.shared.for_producer.wait(state).unwrap_or_else(|p| p.into_inner());
            }
            state.paced = false;
            paced = since.elapsed();
        }
        let go_on = !state.cancelled;
        drop(state);
        meter.resumed = Instant::now();
        let m = Meter {
            blocks: run.len() as u64,
            bytes: len,
            decode,
            // The cache insert and the hand-over to readers (taking the run's lock, waking them).
            insert: meter.resumed - decoded - paced,
            paced,
        };
        StreamStats::add_time(&self.stats.decode_us, m.decode);
        StreamStats::add_time(&self.stats.insert_us, m.insert);
        StreamStats::add_time(&self.stats.paced_us, m.paced);
        meter.segment.add(&m);
        if let Some(serial) = self.trace {
            if meter.segment.bytes >= TRACE_SEGMENT_BYTES {
                self.trace_segment(serial, meter);
            }
        }
        go_on
    }

    /// Logs the segment measured so far and starts the next one.
    fn trace_segment(&self, serial: u64, meter: &mut RunMeter) {
        let segment = std::mem::take(&mut meter.segment);
        if segment.blocks == 0 {
            return;
        }
        let waits =
            (self.shared.reader_waits.load(Ordering::Relaxed), self.shared.reader_wait_ns.load(Ordering::Relaxed));
        let last = meter.segment_first + segment.blocks;
        tracing::info!(
            "stream run {serial} blocks {}..{last}: {}",
            meter.segment_first,
            segment.describe(
                meter.segment_started.elapsed(),
                waits.0 - meter.segment_waits.0,
                waits.1 - meter.segment_waits.1
            )
        );
        meter.total.add(&segment);
        meter.segment_first = last;
        meter.segment_started = Instant::now();
        meter.segment_waits = waits;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::memory::{Content, MemoryTreeBuilder};
    use std::time::Duration;

    fn runs_over(size: u64) -> (Arc<crate::fs::memory::MemoryBackend>, StreamRuns) {
        let pattern: Vec<u8> = (0..100_003u32).map(|i| (i % 251) as u8).collect();
        let mut b = MemoryTreeBuilder::new();
        b.file("f", Content::Repeat { pattern: Arc::new(pattern), size }, 0o644);
        (Arc::new(b.build()), StreamRuns::new(Arc::new(BlockCache::new(1 << 30)), 2))
    }

    /// Sleeps until `run`'s producer has returned.
    fn wait_done(run: &Run) {
        while run.is_running() {
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_run_produces_every_block_for_a_reader_that_follows() {
        let (backend, runs) = runs_over(10 << 20);
        let blocks = 0..(10u64 << 20).div_ceil(u64::from(backend.block_size()));
        let run = runs.start(&backend, blocks.clone(), Pacing::stream(4)).unwrap();
        for id in blocks.clone() {
            assert!(run.wait_for(id, runs.stats()), "block {id}");
            let block = runs.cached(id).unwrap();
            let mut want = vec![0u8; block.len()];
            backend.read_stream(id * u64::from(backend.block_size()), &mut want).unwrap();
            assert_eq!(&block[..], &want[..], "block {id}");
        }
        assert!(!run.wait_for(blocks.end, runs.stats()), "past the range");
        wait_done(&run);
        assert_eq!(runs.stats().blocks.load(Ordering::Relaxed), blocks.end);
        assert_eq!(runs.stats().cancelled.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_run_stays_a_bounded_distance_ahead_and_stops_when_dropped() {
        let (backend, runs) = runs_over(1 << 30);
        let run = runs.start(&backend, 0..16384, Pacing::stream(100)).unwrap();
        assert!(run.wait_for(0, runs.stats()));
        std::thread::sleep(Duration::from_millis(100));
        // The reader asked for block 0 only: the run may be 64 blocks in front, not more.
        let produced = runs.stats().blocks.load(Ordering::Relaxed);
        assert!((1..=65).contains(&produced), "produced {produced}");
        // A block far beyond what was produced is not waited for.
        assert!(!run.wait_for(10_000, runs.stats()));
        let shared = Arc::clone(&run.shared);
        drop(run);
        for _ in 0..1000 {
            if shared.lock().finished {
                break;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(shared.lock().finished, "the producer stopped");
        assert_eq!(runs.stats().cancelled.load(Ordering::Relaxed), 1);
        assert_eq!(runs.live.load(Ordering::Acquire), 0);
    }

    #[test]
    fn runs_are_limited_and_disabled_by_zero() {
        let (backend, runs) = runs_over(1 << 30);
        let pacing = Pacing::stream(4);
        let a = runs.start(&backend, 0..100, pacing);
        let b = runs.start(&backend, 0..100, pacing);
        assert!(a.is_some() && b.is_some());
        assert!(runs.start(&backend, 0..100, pacing).is_none(), "third run refused");
        assert_eq!(runs.stats().refused.load(Ordering::Relaxed), 1);
        assert!(StreamRuns::new(Arc::new(BlockCache::new(1 << 20)), 0).start(&backend, 0..100, pacing).is_none());
        assert!(runs.start(&backend, 5..5, pacing).is_none(), "empty range");
    }

    #[test]
    fn a_run_skips_the_blocks_cached_at_its_front() {
        let (backend, runs) = runs_over(4 << 20);
        let all = runs.start(&backend, 0..64, Pacing::fill(8)).unwrap();
        wait_done(&all);
        let decoded = runs.stats().blocks.load(Ordering::Relaxed);
        assert_eq!(decoded, 64);
        // Everything cached: done at once, no thread, every block there.
        let again = runs.start(&backend, 0..64, Pacing::stream(4)).unwrap();
        assert!(!again.is_running());
        assert!(again.wait_for(63, runs.stats()));
        assert_eq!(runs.stats().blocks.load(Ordering::Relaxed), decoded);
        // A hole: the run decodes from there on, and the blocks before it still count as produced.
        let holed = BlockCache::new(1 << 30);
        for id in 0..20 {
            holed.insert(id, runs.cache.peek(id).unwrap());
        }
        let runs = StreamRuns { cache: Arc::new(holed), ..runs };
        let tail = runs.start(&backend, 0..64, Pacing::fill(64)).unwrap();
        assert!(tail.wait_for(5, runs.stats()), "a cached block before the hole");
        wait_done(&tail);
        assert_eq!(runs.stats().blocks.load(Ordering::Relaxed), decoded + 44, "blocks 20..64 decoded");
        assert!((0..64).all(|id| runs.cached(id).is_some()));
    }

    #[test]
    fn a_fill_runs_to_the_end_without_a_reader() {
        let (backend, runs) = runs_over(4 << 20);
        let run = runs.start(&backend, 0..64, Pacing::fill(8)).unwrap();
        wait_done(&run);
        assert!((0..64).all(|id| runs.cached(id).is_some()));
        assert!(run.wait_for(63, runs.stats()));
    }
}
