//! The CPU engine: the reference decoder of [`crate::codec::resolve`] behind [`BlockEngine`], plus the fast
//! sequential decoder used by unpack, cat and verify.
//!
//! Two ways to decode:
//!
//! - **Random access** ([`BlockEngine::decode_blocks`]): a batch is split into runs of consecutive blocks that
//!   are decoded in parallel (rayon). Inside a run, blocks are decoded in order and later blocks copy from the
//!   earlier ones; everything else is resolved through the cache or through the tokens of the slices that hold
//!   the sources (one 2 KiB slice's entropy stage per source piece, not a whole block's), depth-bounded.
//! - **Sequential** ([`CpuEngine::decode_sequential`]): batches of blocks, each decoded by all cores — entropy
//!   stage and copies alike (`decode_batch` says how a block finds sources in blocks of its batch that are
//!   still being written). Sources inside a window of recently decoded blocks ([`SeqWindow`], which
//!   packs old blocks of bases to reach further back) are plain copies; older ones go through the random-access
//!   path, so memory stays bounded for any stream length.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};

use rayon::prelude::*;

use crate::cache::Block;
use crate::codec::block::ParsedBlock;
use crate::codec::resolve::{
    parse_blocks, BlockFault, ChainDecoded, ClosureStats, DecodedBlocks, NoDecodedBlocks, ParsedCache, Resolver,
};
use crate::engine::BlockEngine;
use crate::error::{DecodeError, Error, Result};
use crate::format::ArchiveData;

mod window;
pub use window::SeqWindow;

/// Bytes of parsed slices the engine keeps for source lookups, unless told otherwise.
pub const DEFAULT_PARSED_CACHE_BYTES: u64 = 64 << 20;
/// Decoded bytes the sequential decoder keeps so that near sources are plain copies.
pub const DEFAULT_WINDOW_BYTES: u64 = 64 << 20;
/// Blocks a thread of the sequential decoder claims at once: their entropy stages run together, and two blocks'
/// sixteen rANS lanes fill both vectors of the CPU's wide context rounds (codec/rans/wide.rs: 1.26 ns a literal
/// against 1.51 for eight lanes).
const CLAIM: usize = 2;

/// Blocks per thread in one batch of the sequential decoder: enough that the wait for the batch's last block
/// (threads idle while it finishes) costs little, few enough that a batch's memory stays small.
const BATCH_PER_THREAD: usize = 32;

/// Whether `ACEAPEX_TRACE` asks for the sequential decoder's trace (`seq`, or `all`): one line per batch, at info
/// level, with its wall time, the calling thread's waits for blocks and its time in the caller's sink (where a
/// batch's time goes on a machine with many cores: decoding, or handing out). Read once.
fn seq_trace() -> bool {
    static TRACE: OnceLock<bool> = OnceLock::new();
    *TRACE.get_or_init(|| std::env::var("ACEAPEX_TRACE").is_ok_and(|v| v.split(',').any(|w| w == "seq" || w == "all")))
}

/// What [`seq_trace`] reports of one batch.
struct BatchTrace {
    started: std::time::Instant,
    waited: std::time::Duration,
    sink: std::time::Duration,
}

impl BatchTrace {
    fn new() -> BatchTrace {
        BatchTrace {
            started: std::time::Instant::now(),
            waited: std::time::Duration::ZERO,
            sink: std::time::Duration::ZERO,
        }
    }

    /// Runs `f`, and when tracing adds its wall time to the duration `pick` chooses.
    fn time<R>(
        trace: &mut Option<BatchTrace>,
        pick: fn(&mut BatchTrace) -> &mut std::time::Duration,
        f: impl FnOnce() -> R,
    ) -> R {
        let Some(t) = trace else { return f() };
        let since = std::time::Instant::now();
        let r = f();
        *pick(t) += since.elapsed();
        r
    }
}

/// Decodes blocks on the CPU: the reference every other engine is checked against.
pub struct CpuEngine {
    data: Arc<ArchiveData>,
    parsed: Arc<ParsedCache>,
    /// Decoded blocks to copy sources from (the archive's block cache), or none.
    decoded: Arc<dyn DecodedBlocks>,
}

impl CpuEngine {
    /// An engine that resolves every cross-block source through tokens.
    pub fn new(data: Arc<ArchiveData>) -> CpuEngine {
        CpuEngine::with_decoded(data, Arc::new(NoDecodedBlocks), DEFAULT_PARSED_CACHE_BYTES)
    }

    /// An engine that copies cross-block sources from `decoded` (e.g. the block cache) when it holds them, and
    /// keeps about `parsed_cache_bytes` of parsed slices.
    pub fn with_decoded(data: Arc<ArchiveData>, decoded: Arc<dyn DecodedBlocks>, parsed_cache_bytes: u64) -> CpuEngine {
        let parsed = Arc::new(ParsedCache::with_budget(parsed_cache_bytes, data.header.slice_size()));
        CpuEngine { data, parsed, decoded }
    }

    pub fn data(&self) -> &Arc<ArchiveData> {
        &self.data
    }

    fn resolver<'a>(&'a self, decoded: &'a dyn DecodedBlocks) -> Resolver<'a> {
        Resolver { data: &self.data, parsed: &self.parsed, decoded }
    }

    /// Decodes and verifies one block into `out` (sized to the block's length).
    pub fn decode_block(&self, id: u64, out: &mut [u8]) -> Result<()> {
        self.decode_block_stats(id, out).map(|_| ())
    }

    /// [`decode_block`](Self::decode_block), returning what its closure plan did and how long the resolution
    /// after it took (µs): where a cold read's time goes (`acxbench closure`).
    pub fn decode_block_stats(&self, id: u64, out: &mut [u8]) -> Result<(ClosureStats, f64)> {
        self.check_id(id)?;
        let resolver = self.resolver(&*self.decoded);
        let stats = resolver.parse_closure(&[id]);
        let started = std::time::Instant::now();
        resolver.decode_block(id, out).map_err(|f| f.into_error(&self.data))?;
        Ok((stats, started.elapsed().as_secs_f64() * 1e6))
    }

    /// Slice entropy-stage runs done by the random-access path so far.
    pub fn slices_parsed(&self) -> u64 {
        self.parsed.parses()
    }

    /// Stream bytes `[pos, pos + out.len())` resolved through tokens alone (no block hash is checked, since no
    /// whole block is decoded). For tests and diagnostics; reads go through whole verified blocks.
    pub fn resolve_unverified(&self, pos: u64, out: &mut [u8]) -> Result<()> {
        let end = pos.checked_add(out.len() as u64).filter(|&e| e <= self.data.footer.total_len);
        if end.is_none() {
            return Err(Error::InvalidArgument(format!("range {pos}+{} is outside the stream", out.len())));
        }
        let budget = self.data.header.max_depth;
        self.resolver(&NoDecodedBlocks).resolve_range(pos, out, budget).map_err(|f| f.into_error(&self.data))
    }

    fn check_id(&self, id: u64) -> Result<()> {
        if id >= self.data.block_count() {
            return Err(Error::InvalidArgument(format!("block {id} of {}", self.data.block_count())));
        }
        Ok(())
    }

    /// Decodes blocks `[first, end)` in order, calling `on_block(id, bytes or error)` for each. A failed block
    /// is reported and decoding goes on (later blocks that depend on it fail on their own); `on_block`
    /// returning an error stops the run. With `parallel`, the entropy stage of the next batch runs on all cores
    /// while the current batch is copied; without, everything runs on the calling thread.
    pub fn decode_sequential(
        &self,
        first: u64,
        end: u64,
        parallel: bool,
        window_bytes: u64,
        on_block: impl FnMut(u64, Result<&[u8]>) -> Result<()>,
    ) -> Result<()> {
        let mut window = SeqWindow::new(first, window_bytes >> self.data.header.block_log);
        self.decode_sequential_with(&mut window, first, end, parallel, on_block)
    }

    /// [`decode_sequential`](Self::decode_sequential) continuing from `window`, the recent blocks of an earlier
    /// run: blocks still in it are handed out without decoding, and a run that starts where the last one ended
    /// (the next file of an unpack) finds its near sources there instead of resolving them through tokens.
    pub fn decode_sequential_with(
        &self,
        window: &mut SeqWindow,
        first: u64,
        end: u64,
        parallel: bool,
        mut on_block: impl FnMut(u64, Result<&[u8]>) -> Result<()>,
    ) -> Result<()> {
        self.decode_sequential_blocks(window, first, end, parallel, |id, block| on_block(id, block.map(|b| &b[..])))
    }

    /// [`decode_sequential_with`](Self::decode_sequential_with) handing out each block as the [`Block`] the
    /// window keeps: a caller that keeps blocks (a stream run filling the block cache) shares them instead of
    /// copying them. Why: the copy ran on the thread that hands blocks out, one at a time, and into fresh
    /// memory: a second page fault per 4 KiB of every block (atha_chr1 through a fresh mount: 19,347 page faults
    /// against 11,500 for `cat`), serial work that capped the run once many cores decoded.
    pub fn decode_sequential_blocks(
        &self,
        window: &mut SeqWindow,
        first: u64,
        end: u64,
        parallel: bool,
        mut on_block: impl FnMut(u64, Result<&Block>) -> Result<()>,
    ) -> Result<()> {
        let end = end.min(self.data.block_count());
        if !(window.first_id()..=window.next_id()).contains(&first) {
            *window = SeqWindow::new(first, window.cap_blocks());
        }
        let mut start = first;
        while start < end && start < window.next_id() {
            let Some(block) = window.block(start) else { break };
            on_block(start, Ok(&block))?;
            start += 1;
        }
        if start < window.next_id() {
            // A failed block inside the window: decode again from there (and report it again).
            *window = SeqWindow::new(start, window.cap_blocks());
        }
        let threads = if parallel { rayon::current_num_threads().max(1) } else { 1 };
        let batch = (threads * BATCH_PER_THREAD) as u64;
        let threads = if parallel { threads } else { 0 };
        while start < end {
            let batch_end = (start + batch).min(end);
            self.decode_batch(window, start, batch_end, threads, &mut on_block)?;
            start = batch_end;
        }
        Ok(())
    }

    /// Decodes blocks `[first, end)` (the ones after `window`) on the calling thread and `threads` rayon tasks
    /// (0 for no others), hands them to `on_block` in order, and appends them to `window`.
    ///
    /// Each thread claims the next block in order, runs its entropy stage, publishes the tokens, writes the
    /// block and publishes it. A source in an earlier block of the batch is copied when that block is written,
    /// and otherwise resolved through its published tokens, so no thread waits for another to finish a block
    /// (a thread only waits for a parse another thread has started, or where following tokens failed). The
    /// window does not change during a batch, so every thread reads it without locks; memory is the window plus
    /// one batch. The calling thread also hands out blocks in order as they finish, and works whenever the next
    /// one is not finished yet, so the batch completes even when no pool thread is free.
    fn decode_batch(
        &self,
        window: &mut SeqWindow,
        first: u64,
        end: u64,
        threads: usize,
        on_block: &mut impl FnMut(u64, Result<&Block>) -> Result<()>,
    ) -> Result<()> {
        let count = (end - first) as usize;
        let mut trace = seq_trace().then(BatchTrace::new);
        let spare = window.take_spare(count);
        let batch = Batch::new(first, count, &*window, spare);
        let mut handed = 0usize;
        let result = rayon::in_place_scope(|scope| {
            // One task per pool thread: the calling thread works too, but it also hands blocks to `on_block`
            // (a write to a pipe or a file), during which the pool carries on.
            for _ in 0..threads.min(count) {
                scope.spawn(|_| while self.work_one(&batch) {});
            }
            batch.allocate(|id| self.data.block_len(id) as usize);
            for i in 0..count {
                let slot = &batch.slots[i];
                let finished = loop {
                    if let Some(done) = slot.done.get() {
                        break done;
                    }
                    if !self.work_one(&batch) {
                        // Every block is claimed: the one we need is being decoded by another thread.
                        break BatchTrace::time(&mut trace, |t| &mut t.waited, || batch.wait(&slot.done));
                    }
                };
                let block = finished.as_ref().map_err(|fault| fault.clone().into_error(&self.data));
                let sunk = BatchTrace::time(&mut trace, |t| &mut t.sink, || on_block(first + i as u64, block));
                if let Err(e) = sunk {
                    batch.stop.store(true, Ordering::Relaxed);
                    return Err(e);
                }
                handed += 1;
            }
            Ok(())
        });
        let blocks = batch.slots.into_iter().take(handed).map(|slot| slot.done.into_inner().and_then(|done| done.ok()));
        window.push_all(first, blocks, threads > 0);
        if let Some(t) = trace {
            tracing::info!(
                "sequential batch {first}..{end} ({threads} pool tasks and the calling thread): {:.2} ms, of which the \
                 calling thread waited {:.2} ms for blocks other threads were decoding and spent {:.2} ms handing \
                 blocks out",
                t.started.elapsed().as_secs_f64() * 1e3,
                t.waited.as_secs_f64() * 1e3,
                t.sink.as_secs_f64() * 1e3
            );
        }
        result
    }

    /// Claims the next [`CLAIM`] blocks of `batch` (fewer at its end) and decodes them; false when none is left.
    fn work_one(&self, batch: &Batch<'_>) -> bool {
        if batch.stop.load(Ordering::Relaxed) {
            return false;
        }
        let i = batch.next.fetch_add(CLAIM, Ordering::Relaxed);
        let claimed = batch.slots.get(i..(i + CLAIM).min(batch.slots.len())).unwrap_or_default();
        if claimed.is_empty() {
            return false;
        }
        let ids: Vec<u64> = (0..claimed.len()).map(|k| batch.first + (i + k) as u64).collect();
        // Should anything below panic, the guards publish failures so that no other thread waits forever.
        let guards: Vec<PublishOnUnwind> =
            claimed.iter().zip(&ids).map(|(slot, &id)| PublishOnUnwind { batch, slot, id }).collect();
        // Only the claiming thread sets a slot's parse and its block, so each slot takes the parse made here.
        let parsed: Vec<_> =
            claimed.iter().zip(parse_blocks(&self.data, &ids)).map(|(slot, p)| slot.parsed.get_or_init(|| p)).collect();
        batch.publish();
        for ((slot, &id), parsed) in claimed.iter().zip(&ids).zip(parsed) {
            let mut buf = batch.take_buffer(slot);
            buf.resize(self.data.block_len(id) as usize, 0);
            let decoded = parsed.as_ref().map_err(Clone::clone).and_then(|p| {
                let sources = ChainDecoded(batch, &*self.decoded);
                let resolver = self.resolver(&sources);
                resolver.prefetch_sources(p);
                resolver.decode_parsed(id, p, &mut buf)
            });
            let _ = slot.done.set(decoded.map(|()| Block::from(buf)));
            batch.publish();
        }
        guards.into_iter().for_each(std::mem::forget);
        true
    }

    /// Reads every block cold, as a random read does: each source through the tokens of the slices that hold it,
    /// never from a decoded copy, within the header's depth bound. Returns every failure, sorted by the block it
    /// names. Why beside [`verify_all`](Self::verify_all): the sequential decode copies sources from the
    /// blocks it has just decoded, which carry no depths, so a header that understates the bound passed it while
    /// the random reads of the same archive failed; and this is the path a mount's random reads take.
    pub fn verify_cold_reads(&self) -> Vec<Error> {
        let mut failed: Vec<Error> = (0..self.data.block_count())
            .into_par_iter()
            .map_init(Vec::new, |buf, id| {
                buf.resize(self.data.block_len(id) as usize, 0);
                let fault = self.resolver(&NoDecodedBlocks).decode_block(id, buf).err()?;
                Some(fault.into_error(&self.data))
            })
            .flatten()
            .collect();
        failed.sort_by_key(Error::block);
        failed
    }

    /// Decodes every block and returns every failure (sorted by block). One sequential run with the entropy
    /// stage on all cores: splitting the stream into independent chunks would make every chunk resolve its
    /// far sources through tokens, which measured 10× slower than one run with a large window.
    pub fn verify_all(&self) -> Vec<Error> {
        let mut errors = Vec::new();
        let window = DEFAULT_WINDOW_BYTES.max(256 << 20);
        let _ = self.decode_sequential(0, self.data.block_count(), true, window, |_, r| {
            if let Err(e) = r {
                errors.push(e);
            }
            Ok(())
        });
        errors
    }

    /// Decodes one run of consecutive blocks in order; each block may copy from the ones before it in the run.
    fn decode_run(&self, ids: &[u64], outs: &mut [&mut [u8]]) -> Result<()> {
        for i in 0..ids.len() {
            let (done, rest) = outs.split_at_mut(i);
            let earlier = RunWindow { first: ids[0], bufs: done };
            let sources = ChainDecoded(&earlier, &*self.decoded);
            self.resolver(&sources).decode_block(ids[i], rest[0]).map_err(|f| f.into_error(&self.data))?;
        }
        Ok(())
    }
}

impl CpuEngine {
    /// Checks a batch against the engine contract: one buffer per id, each id in range and its buffer sized to
    /// the block.
    fn check_batch(&self, ids: &[u64], out: &[&mut [u8]]) -> Result<()> {
        if ids.len() != out.len() {
            return Err(Error::InvalidArgument(format!("{} block ids, {} output buffers", ids.len(), out.len())));
        }
        for (&id, buf) in ids.iter().zip(out.iter()) {
            self.check_id(id)?;
            if buf.len() != self.data.block_len(id) as usize {
                return Err(Error::InvalidArgument(format!("output for block {id} has {} bytes", buf.len())));
            }
        }
        // Sorted ids: the closure planner binary-searches them. The engine contract already asks for ascending ids.
        if ids.windows(2).all(|w| w[0] < w[1]) {
            self.resolver(&*self.decoded).parse_closure(ids);
        }
        Ok(())
    }

    /// [`BlockEngine::decode_blocks`] on the calling thread (the closure plan may still take pool helpers on its
    /// large levels, without waiting for them): each run of consecutive blocks whole and in order, later blocks
    /// copying from the earlier ones, as the closure plan assumed. For a cold read of a few blocks (one that
    /// crosses a block boundary): the batch path splits even a two-block run into pieces for the pool and sleeps
    /// until pool threads have run them, and the second piece then resolves through tokens the sources that the
    /// plan left to the first block's bytes.
    pub fn decode_blocks_here(&self, ids: &[u64], out: &mut [&mut [u8]]) -> Result<()> {
        self.check_batch(ids, out)?;
        for (ids, outs) in split_runs(ids, out, 1) {
            self.decode_run(ids, outs)?;
        }
        Ok(())
    }
}

impl BlockEngine for CpuEngine {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn decode_blocks(&self, ids: &[u64], out: &mut [&mut [u8]]) -> Result<()> {
        self.check_batch(ids, out)?;
        let runs = split_runs(ids, out, rayon::current_num_threads());
        runs.into_par_iter().map(|(ids, outs)| self.decode_run(ids, outs)).collect::<Result<Vec<()>>>()?;
        Ok(())
    }
}

/// Splits a batch into runs of consecutive ids, and long runs into about `threads` pieces, so that the pieces
/// can be decoded in parallel while blocks inside a piece reuse each other's bytes.
fn split_runs<'a, 'b>(
    ids: &'a [u64],
    mut out: &'a mut [&'b mut [u8]],
    threads: usize,
) -> Vec<(&'a [u64], &'a mut [&'b mut [u8]])> {
    let max_piece = ids.len().div_ceil(threads.max(1)).max(1);
    let mut runs = Vec::new();
    let mut rest_ids = ids;
    while !rest_ids.is_empty() {
        let mut len = 1;
        while len < rest_ids.len() && len < max_piece && rest_ids[len] == rest_ids[len - 1] + 1 {
            len += 1;
        }
        let (run_ids, more_ids) = rest_ids.split_at(len);
        let (run_out, more_out) = std::mem::take(&mut out).split_at_mut(len);
        runs.push((run_ids, run_out));
        rest_ids = more_ids;
        out = more_out;
    }
    runs
}

/// The earlier blocks of a run being decoded (ids `first ..`).
struct RunWindow<'a, 'b> {
    first: u64,
    bufs: &'a [&'b mut [u8]],
}

impl DecodedBlocks for RunWindow<'_, '_> {
    fn copy_out(&self, id: u64, offset: usize, out: &mut [u8]) -> bool {
        let Some(buf) = id.checked_sub(self.first).and_then(|i| self.bufs.get(i as usize)) else {
            return false;
        };
        copy_from(buf, offset, out)
    }

    fn contains(&self, id: u64) -> bool {
        id.checked_sub(self.first).is_some_and(|i| (i as usize) < self.bufs.len())
    }
}

/// One block of a sequential batch: its entropy stage, then its decoded bytes, each set once by the thread that
/// claimed the block.
#[derive(Default)]
struct Slot {
    parsed: OnceLock<std::result::Result<ParsedBlock, BlockFault>>,
    done: OnceLock<std::result::Result<Block, BlockFault>>,
    /// The buffer the block is decoded into (see [`Batch::allocate`]).
    buffer: Mutex<SlotBuffer>,
}

/// Where a slot's buffer stands.
#[derive(Default)]
enum SlotBuffer {
    /// Not allocated yet: the thread that claims the block allocates its own.
    #[default]
    Later,
    Ready(Vec<u8>),
    /// Taken by the thread that claimed the block.
    Taken,
}

/// The blocks `first ..` of the sequential decoder being decoded by several threads, and the window before them.
struct Batch<'w> {
    first: u64,
    slots: Vec<Slot>,
    /// The next slot to claim: claims go in block order, so every block before a claimed one is claimed too,
    /// and the lowest unfinished block never waits on another (no thread can deadlock).
    next: AtomicUsize,
    /// Set when `on_block` failed: nothing more is claimed.
    stop: AtomicBool,
    window: &'w SeqWindow,
    /// Wakes the threads waiting for a slot (`publish` after each parse and each block).
    lock: Mutex<()>,
    changed: Condvar,
}

impl<'w> Batch<'w> {
    /// The batch of blocks `first..first + count`, the first slots given the evicted window buffers of `spare`
    /// (the others get theirs from [`Batch::allocate`]).
    fn new(first: u64, count: usize, window: &'w SeqWindow, spare: Vec<Vec<u8>>) -> Batch<'w> {
        let mut spare = spare.into_iter();
        let slots = (0..count)
            .map(|_| {
                let buffer = spare.next().map_or(SlotBuffer::Later, |mut buf| {
                    buf.clear();
                    SlotBuffer::Ready(buf)
                });
                Slot { buffer: Mutex::new(buffer), ..Slot::default() }
            })
            .collect();
        Batch {
            first,
            slots,
            next: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            window,
            lock: Mutex::new(()),
            changed: Condvar::new(),
        }
    }

    /// Allocates, in block order on the calling thread, the buffers of the slots that have none and that no
    /// thread has claimed yet (`block_len(id)` bytes' capacity each); the decoding threads fault the pages in as
    /// they write them. Why not each decoding thread for the block it claims: blocks allocated by whichever pool
    /// thread decoded them lie in that thread's allocator arena, consecutive blocks far apart, and rebuilding a
    /// genome file from such blocks (a mount serving it from its cache, which keeps them) ran 4 % slower than
    /// from blocks allocated in order (`examples/serve_bench`, MB per CPU-second, medians of 10 alternating
    /// runs: 5148 against 5377). Why after the pool tasks have started rather than before: growing an arena
    /// takes a system call per 16 KiB block (glibc extends a thread's heap by exactly what it needs), 0.1–0.4 ms
    /// per batch of 64 during which every decoding thread waited (`ACEAPEX_TRACE=seq`, 2-core machine).
    fn allocate(&self, block_len: impl Fn(u64) -> usize) {
        for (i, slot) in self.slots.iter().enumerate() {
            if self.next.load(Ordering::Relaxed) > i || self.stop.load(Ordering::Relaxed) {
                continue;
            }
            let mut buffer = slot.buffer.lock().unwrap_or_else(|p| p.into_inner());
            if matches!(*buffer, SlotBuffer::Later) {
                *buffer = SlotBuffer::Ready(Vec::with_capacity(block_len(self.first + i as u64)));
            }
        }
    }

    /// The buffer for slot `slot`, whose block the calling thread just claimed: the one allocated for it, or a
    /// new one.
    fn take_buffer(&self, slot: &Slot) -> Vec<u8> {
        let mut buffer = slot.buffer.lock().unwrap_or_else(|p| p.into_inner());
        match std::mem::replace(&mut *buffer, SlotBuffer::Taken) {
            SlotBuffer::Ready(buf) => buf,
            SlotBuffer::Later | SlotBuffer::Taken => Vec::new(),
        }
    }

    fn slot(&self, id: u64) -> Option<&Slot> {
        id.checked_sub(self.first).and_then(|i| self.slots.get(usize::try_from(i).ok()?))
    }

    /// Wakes the waiters after a slot was set. Taking the lock after the set means a waiter that saw the slot
    /// empty (under the lock) is already waiting, so the wake-up is not lost.
    fn publish(&self) {
        drop(self.lock.lock().unwrap_or_else(|p| p.into_inner()));
        self.changed.notify_all();
    }

    /// Waits until `cell` (a slot of this batch, claimed by some thread) is set.
    fn wait<'a, T>(&self, cell: &'a OnceLock<T>) -> &'a T {
        let mut guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(value) = cell.get() {
                return value;
            }
            guard = self.changed.wait(guard).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Sources for a block of the batch: the batch's earlier blocks (finished ones copied, the others through
/// their tokens), then the window.
impl DecodedBlocks for Batch<'_> {
    fn copy_out(&self, id: u64, offset: usize, out: &mut [u8]) -> bool {
        match self.slot(id) {
            Some(slot) => matches!(slot.done.get(), Some(Ok(buf)) if copy_from(buf, offset, out)),
            None => self.window.copy_out(id, offset, out),
        }
    }

    fn contains(&self, id: u64) -> bool {
        // Planning only: a block of the batch needs no slices parsed, written or not (see `parsed_block`).
        self.slot(id).is_some() || self.window.contains(id)
    }

    fn parsed_block(&self, id: u64) -> Option<&ParsedBlock> {
        // Only earlier blocks are asked for, and those are claimed: their parse finishes without waiting.
        let slot = self.slot(id)?;
        let parsed = match slot.parsed.get() {
            Some(parsed) => parsed,
            None => self.wait(&slot.parsed),
        };
        parsed.as_ref().ok()
    }

    fn wait_decoded(&self, id: u64) -> bool {
        self.slot(id).is_some_and(|slot| self.wait(&slot.done).is_ok())
    }
}

/// Armed while a thread decodes a claimed block: if it unwinds, the block is published as failed so that no
/// other thread waits for it forever (the panic itself surfaces when the batch's scope ends).
struct PublishOnUnwind<'a, 'w> {
    batch: &'a Batch<'w>,
    slot: &'a Slot,
    id: u64,
}

impl Drop for PublishOnUnwind<'_, '_> {
    fn drop(&mut self) {
        let fault = || BlockFault {
            block: self.id,
            error: DecodeError::Invalid { what: "block decode", detail: "the decoding thread panicked".into() },
        };
        let _ = self.slot.parsed.set(Err(fault()));
        let _ = self.slot.done.set(Err(fault()));
        self.batch.publish();
    }
}

/// Copies `buf[offset..offset + out.len()]` into `out` when in range.
fn copy_from(buf: &[u8], offset: usize, out: &mut [u8]) -> bool {
    match offset.checked_add(out.len()).and_then(|end| buf.get(offset..end)) {
        Some(src) => {
            out.copy_from_slice(src);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::testkit::{small_header, Plan, Rng};

    /// Every block's outcome from [`CpuEngine::decode_sequential`] on a pool of `threads`: `Ok(bytes)` or the
    /// block the error names. Also checks that `on_block` sees the blocks in order.
    fn sequential_outcomes(
        data: &Arc<ArchiveData>,
        threads: usize,
        parallel: bool,
        window_bytes: u64,
    ) -> Vec<std::result::Result<Vec<u8>, u64>> {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let engine = CpuEngine::new(data.clone());
        let mut outcomes = Vec::new();
        pool.install(|| {
            engine.decode_sequential(0, data.block_count(), parallel, window_bytes, |id, block| {
                assert_eq!(id, outcomes.len() as u64, "blocks out of order");
                outcomes.push(match block {
                    Ok(bytes) => Ok(bytes.to_vec()),
                    Err(Error::CorruptBlock { block, .. }) => Err(block),
                    Err(e) => panic!("block {id}: unexpected error {e}"),
                });
                Ok(())
            })
        })
        .unwrap();
        assert_eq!(outcomes.len() as u64, data.block_count());
        outcomes
    }

    /// Checks that [`sequential_outcomes`] gives every block of `plan` exactly, for each `(threads, parallel,
    /// window_bytes)`.
    fn assert_sequential_decodes(data: &Arc<ArchiveData>, plan: &Plan, runs: &[(usize, bool, u64)]) {
        for &(threads, parallel, window) in runs {
            let outcomes = sequential_outcomes(data, threads, parallel, window);
            for (id, outcome) in outcomes.iter().enumerate() {
                let expected = plan.block_bytes(id as u64);
                assert!(outcome.as_deref() == Ok(expected), "block {id}, {threads} threads, window {window}");
            }
        }
    }

    /// A random program (near, far, cross-block and periodic sources) over `blocks` blocks of 4 KiB, written.
    fn random_archive(dir: &std::path::Path, seed: u64, blocks: usize) -> (Arc<ArchiveData>, Plan) {
        let plan = Plan::random(small_header(6, 2), blocks * 4096 - 777, &mut Rng(seed));
        let path = dir.join(format!("seq{seed}.acx"));
        plan.write(&path);
        (Arc::new(ArchiveData::open(&path).unwrap()), plan)
    }

    #[test]
    fn parallel_batches_decode_in_batch_far_and_self_overlapping_sources() {
        let dir = tempfile::tempdir().unwrap();
        // 300 blocks: several batches on every pool size below, so sources lie in the same batch, in the window,
        // and (with the one-block window) far behind it.
        let (data, plan) = random_archive(dir.path(), 7, 300);
        let tokens = plan.blocks.iter().flat_map(|b| &b.tokens);
        let (mut periodic, mut far) = (0, 0);
        for t in tokens.filter(|t| t.match_len > 0) {
            periodic += usize::from(t.back < u64::from(t.match_len));
            far += usize::from(t.back > 200 * 4096);
        }
        assert!(periodic > 100 && far > 100, "the program lacks periodic ({periodic}) or far ({far}) sources");
        assert_sequential_decodes(
            &data,
            &plan,
            &[(1, false, 4096), (3, true, 4096), (8, true, 4096), (4, true, 64 << 20)],
        );
    }

    #[test]
    fn reverse_complement_sources_decode_in_batch_in_the_window_and_far_behind() {
        // Format version 5: a third of the matches are reverse complements, near, far and cross-block.
        let dir = tempfile::tempdir().unwrap();
        let plan = Plan::random_rc(small_header(6, 2), 120 * 4096 - 333, &mut Rng(21));
        let rc = plan.blocks.iter().flat_map(|b| &b.tokens).filter(|t| t.rc);
        let far = rc.clone().filter(|t| t.back > 8 * 4096).count();
        assert!(rc.count() > 1000 && far > 100, "the program lacks RC sources ({far} far)");
        let path = dir.path().join("rc.acx");
        plan.write(&path);
        let data = Arc::new(ArchiveData::open(&path).unwrap());
        assert_sequential_decodes(&data, &plan, &[(1, false, 4096), (4, true, 4096), (3, true, 64 << 20)]);
    }

    #[test]
    fn small_batches_on_the_calling_thread_equal_the_pool_path() {
        let dir = tempfile::tempdir().unwrap();
        let (data, plan) = random_archive(dir.path(), 11, 120);
        let mut rng = Rng(3);
        for _ in 0..40 {
            // A few blocks, runs of consecutive ones with gaps, each batch on a cold engine.
            let mut ids: Vec<u64> = (0..rng.range(1, 4)).map(|_| rng.range(0, data.block_count() - 2)).collect();
            if rng.range(0, 1) == 1 {
                ids.push(ids[0] + 1);
            }
            ids.sort_unstable();
            ids.dedup();
            let expected: Vec<&[u8]> = ids.iter().map(|&id| plan.block_bytes(id)).collect();
            let mut bufs: Vec<Vec<u8>> = ids.iter().map(|&id| vec![0u8; data.block_len(id) as usize]).collect();
            let mut outs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
            CpuEngine::new(data.clone()).decode_blocks_here(&ids, &mut outs).unwrap();
            assert_eq!(bufs, expected, "blocks {ids:?}");
            let mut pool: Vec<Vec<u8>> = ids.iter().map(|&id| vec![0u8; data.block_len(id) as usize]).collect();
            let mut outs: Vec<&mut [u8]> = pool.iter_mut().map(|b| b.as_mut_slice()).collect();
            CpuEngine::new(data.clone()).decode_blocks(&ids, &mut outs).unwrap();
            assert_eq!(pool, bufs, "blocks {ids:?}");
        }
        // The contract's checks hold on this path too.
        let mut short = [0u8; 7];
        assert!(CpuEngine::new(data.clone()).decode_blocks_here(&[0], &mut [&mut short[..]]).is_err());
        assert!(CpuEngine::new(data.clone()).decode_blocks_here(&[data.block_count()], &mut [&mut short[..]]).is_err());
    }

    #[test]
    fn sources_in_packed_window_blocks_are_copied_exactly() {
        // Pure bases, so the window packs its older blocks: sources 2..26 blocks back come from packed blocks,
        // older ones through tokens.
        let mut plan = Plan::new(small_header(6, 2));
        let mut rng = Rng(5);
        while plan.stream.len() < 150 * 4096 {
            let room = plan.room();
            let lits: Vec<u8> =
                (0..rng.range(0, 12).min(room as u64)).map(|_| b"ACGT"[rng.range(0, 3) as usize]).collect();
            plan.literals(&lits);
            let (room, pos) = (plan.room(), plan.stream.len() as u64);
            if room < 2 || pos == 0 {
                continue;
            }
            let len = rng.range(2, room.min(300) as u64) as usize;
            let back = match rng.range(0, 2) {
                0 => rng.range(1, pos.min(12)),
                1 => rng.range(1, pos.min(30 * 4096)),
                _ => rng.range(1, pos),
            };
            if plan.source_depth(back, len) < plan.header.max_depth {
                plan.fill(back, len);
            }
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bases.acx");
        plan.write(&path);
        let data = Arc::new(ArchiveData::open(&path).unwrap());
        assert_sequential_decodes(&data, &plan, &[(1, false, 8 * 4096), (4, true, 8 * 4096)]);
    }

    #[test]
    fn a_corrupt_block_fails_with_the_blocks_that_depend_on_it_and_no_other() {
        let dir = tempfile::tempdir().unwrap();
        let (data, plan) = random_archive(dir.path(), 11, 200);
        let bad = 95;
        let (from, to) = (data.payload_offset(bad) as usize, data.payload_end[bad as usize] as usize);
        let path = data.path.clone();
        drop(data);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[(from + to) / 2] ^= 0x5a;
        std::fs::write(&path, &bytes).unwrap();
        let data = Arc::new(ArchiveData::open(&path).unwrap());

        // The reference: each block alone through the random-access path (every source through tokens).
        let reference = CpuEngine::new(data.clone());
        let expected: Vec<bool> = (0..data.block_count())
            .map(|id| {
                let mut out = vec![0u8; data.block_len(id) as usize];
                reference.decode_block(id, &mut out).is_ok()
            })
            .collect();
        assert!(!expected[bad as usize], "the flip left block {bad} decodable");
        assert!(expected[..bad as usize].iter().all(|&ok| ok));
        let failed_after = expected[bad as usize + 1..].iter().filter(|&&ok| !ok).count();
        assert!(failed_after > 0, "no block depends on block {bad}");
        assert!(failed_after < expected.len() - bad as usize - 1, "every later block failed");

        for (threads, parallel, window) in [(1, false, 64 << 20), (3, true, 64 << 20), (8, true, 4096)] {
            let outcomes = sequential_outcomes(&data, threads, parallel, window);
            for (id, outcome) in outcomes.iter().enumerate() {
                match outcome {
                    Ok(got) => {
                        assert!(expected[id], "block {id} decoded, {threads} threads");
                        assert!(got == plan.block_bytes(id as u64), "block {id} wrong bytes");
                    }
                    Err(_) => assert!(!expected[id], "block {id} failed, {threads} threads"),
                }
            }
            assert_eq!(outcomes[bad as usize], Err(bad));
        }
    }

    #[test]
    fn a_failing_sink_stops_the_run_and_keeps_the_window_consistent() {
        let dir = tempfile::tempdir().unwrap();
        let (data, plan) = random_archive(dir.path(), 3, 120);
        let engine = CpuEngine::new(data.clone());
        let pool = rayon::ThreadPoolBuilder::new().num_threads(4).build().unwrap();
        let mut window = SeqWindow::new(0, 1 << 10);
        let stop_at = 70;
        let r = pool.install(|| {
            engine.decode_sequential_with(&mut window, 0, data.block_count(), true, |id, block| {
                block?;
                if id == stop_at {
                    return Err(Error::InvalidArgument("sink full".into()));
                }
                Ok(())
            })
        });
        assert!(matches!(r, Err(Error::InvalidArgument(_))));
        // The window holds exactly the blocks handed out, and the next run continues from there.
        assert_eq!((window.first_id(), window.next_id()), (0, stop_at));
        let mut out = Vec::new();
        pool.install(|| {
            engine.decode_sequential_with(&mut window, stop_at, data.block_count(), true, |_, block| {
                out.extend_from_slice(block?);
                Ok(())
            })
        })
        .unwrap();
        assert!(out == plan.stream[stop_at as usize * 4096..]);
    }

    #[test]
    fn split_runs_respects_gaps_and_piece_size() {
        let ids = [1u64, 2, 3, 4, 5, 9, 10, 20];
        let mut bufs: Vec<Vec<u8>> = ids.iter().map(|&i| vec![i as u8]).collect();
        let mut outs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
        let runs = split_runs(&ids, &mut outs, 2);
        let shapes: Vec<Vec<u64>> = runs.iter().map(|(ids, _)| ids.to_vec()).collect();
        assert_eq!(shapes, vec![vec![1, 2, 3, 4], vec![5], vec![9, 10], vec![20]]);
        for (ids, outs) in runs {
            for (id, out) in ids.iter().zip(outs.iter()) {
                assert_eq!(out[0], *id as u8);
            }
        }
    }
}
