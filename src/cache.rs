//! The host LRU of decoded blocks, with a byte budget and single-flight misses.
//!
//! Every read goes through [`BlockCache`]. A hit is a [`Block`] clone (a reference count). A miss makes the
//! caller the *leader* for that block: it decodes, inserts and wakes everyone else who asked for the same block in
//! the meantime, so concurrent readers of one cold block cause exactly one decode. Batched misses
//! ([`BlockCache::get_many`], [`BlockCache::prefetch`]) claim all their missing blocks at once and hand them to
//! the engine as one batch.
//!
//! Leadership is held through a guard: if a decoder panics, the guard publishes an error so that waiters never
//! hang.
//!
//! Blocks are views into shared [`Window`]s. A block decoded alone owns its window; a stream run's piece (the
//! GPU's whole-range decode) is copied out once into windows of up to [`WINDOW_BYTES`] of consecutive blocks
//! and its blocks are views into them, inserted under one lock acquisition ([`BlockCache::insert_run`]). Why:
//! one allocation, copy and lock round trip per 16 KiB block cost ~10 ms per 16 MB on the H200 (the stream's
//! sink time), and a first read's fresh 16 KiB allocations fault their pages one by one (medians of 24 ms per
//! 16 MB on the loaded 2-core machine against 6 ms for 4 MiB windows; in a full, evicting cache 5.9 against
//! 3.9 ms: `cache::tests::insert_a_16_mb_piece`). A view also lets a read that falls inside one window be
//! answered from the window's bytes without copying ([`Block::following`]).
//!
//! The budget stays honest: a window is charged whole from its first block in the LRU until its last one
//! leaves, and a window whose blocks in the LRU fall to a quarter of it or less is compacted (those blocks
//! copied into windows of their own), so that a few hot blocks cannot keep many windows alive. A window larger
//! than an eighth of the budget is not shared at all: its blocks go in as copies.

use std::collections::{BTreeMap, HashMap};
use std::ops::{Deref, Range};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use lru::LruCache;
use serde::Serialize;

use crate::codec::resolve::DecodedBlocks;
use crate::error::{Error, Result};

/// The largest window of consecutive blocks that a stream run's decoded bytes are copied into (and that views
/// share). Large enough that a 1 MiB read usually falls inside one, small enough that compacting a sparse one
/// copies little (at most a quarter of it, under the LRU's lock).
pub const WINDOW_BYTES: usize = 4 << 20;
/// Window buffers of [`WINDOW_BYTES`] kept for reuse once their blocks are gone (outside the budget: 16 MiB at
/// most), so that a run that keeps evicting writes into pages that are already resident.
const POOLED_WINDOWS: usize = 4;

static WINDOW_POOL: Mutex<Vec<Vec<u8>>> = Mutex::new(Vec::new());

/// Decoded bytes of one or more consecutive blocks of the stream, shared by the [`Block`]s that view them.
pub struct Window {
    bytes: Vec<u8>,
}

impl Window {
    /// An empty buffer for a window of `len` bytes: for a full [`WINDOW_BYTES`] a pooled one when one is free
    /// (its pages already resident), else a new one of exactly `len` (so that what the budget charges, the
    /// window's length, is what it holds).
    pub fn buffer(len: usize) -> Vec<u8> {
        if len == WINDOW_BYTES {
            if let Some(mut buf) = lock(&WINDOW_POOL).pop() {
                buf.clear();
                return buf;
            }
        }
        Vec::with_capacity(len)
    }

    /// The blocks of `bytes` (consecutive blocks of the stream, each `block_len(k)` bytes for its index `k` in
    /// the window) as views of one shared window. Errors if the lengths do not add up to `bytes.len()`.
    pub fn split(bytes: Vec<u8>, mut block_len: impl FnMut(usize) -> usize) -> Result<Vec<Block>> {
        let window = Arc::new(Window { bytes });
        let total = window.bytes.len();
        let mut blocks = Vec::new();
        let mut at = 0usize;
        while at < total {
            let len = block_len(blocks.len());
            if len == 0 || len > total - at {
                return Err(Error::InvalidArgument(format!(
                    "a window of {total} bytes does not split into whole blocks at byte {at} (block of {len})"
                )));
            }
            blocks.push(Block { window: Arc::clone(&window), start: at, len });
            at += len;
        }
        Ok(blocks)
    }

    /// The blocks of `bytes` (as for [`Window::split`]) as views of one window holding a copy of them: one
    /// allocation (a recycled buffer when one is free) and one copy, spread over the cores when large (a first
    /// read's copy into fresh memory is mostly page faults, which the cores take in parallel).
    pub fn copy_of(bytes: &[u8], block_len: impl FnMut(usize) -> usize) -> Result<Vec<Block>> {
        let mut buf = Window::buffer(bytes.len());
        if bytes.len() < PARALLEL_COPY_BYTES {
            buf.extend_from_slice(bytes);
        } else {
            use rayon::prelude::*;
            let spare = &mut buf.spare_capacity_mut()[..bytes.len()];
            spare.par_chunks_mut(PARALLEL_COPY_CHUNK).zip(bytes.par_chunks(PARALLEL_COPY_CHUNK)).for_each(
                |(dst, src)| {
                    // SAFETY: `dst` and `src` are chunks at the same index of equally long slices, so they have
                    // the same length; `dst` is spare capacity of `buf`, which `bytes` cannot overlap.
                    unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), dst.as_mut_ptr().cast::<u8>(), src.len()) }
                },
            );
            // SAFETY: the chunks above wrote every byte of `spare`, the first `bytes.len()` bytes of the spare
            // capacity of the empty `buf` (the slicing did not panic, so the capacity holds them).
            unsafe { buf.set_len(bytes.len()) };
        }
        Window::split(buf, block_len)
    }
}

/// Copies into a window below this many bytes run on the calling thread (spreading them costs more than it
/// saves); larger ones go in chunks of [`PARALLEL_COPY_CHUNK`] to the rayon pool.
const PARALLEL_COPY_BYTES: usize = 1 << 20;
const PARALLEL_COPY_CHUNK: usize = 256 << 10;

impl Drop for Window {
    fn drop(&mut self) {
        if self.bytes.capacity() == WINDOW_BYTES {
            let mut pool = lock(&WINDOW_POOL);
            if pool.len() < POOLED_WINDOWS {
                pool.push(std::mem::take(&mut self.bytes));
            }
        }
    }
}

/// A decoded block: a view of `len` bytes at `start` in a shared [`Window`]. Cloning it is a reference count.
#[derive(Clone)]
pub struct Block {
    window: Arc<Window>,
    start: usize,
    len: usize,
}

impl Block {
    /// The bytes of the window from this block's start to the window's end: this block's and those of the
    /// blocks decoded after it in the same window, which are the stream bytes that follow it (a window holds
    /// consecutive blocks only). Just this block for a block decoded alone.
    pub fn following(&self) -> &[u8] {
        &self.window.bytes[self.start..]
    }

    /// A view of `following()[range]` that shares the window (`None` if out of bounds).
    pub fn view(&self, range: Range<usize>) -> Option<Block> {
        let following = self.window.bytes.len() - self.start;
        if range.start > range.end || range.end > following {
            return None;
        }
        Some(Block { window: Arc::clone(&self.window), start: self.start + range.start, len: range.end - range.start })
    }

    /// Whether other blocks share this block's window (it was decoded as part of a stream run's piece).
    fn is_shared(&self) -> bool {
        self.len < self.window.bytes.len()
    }

    fn window_len(&self) -> u64 {
        self.window.bytes.len() as u64
    }

    /// Identifies the window while a block of it is alive.
    fn window_key(&self) -> usize {
        Arc::as_ptr(&self.window) as usize
    }

    /// The buffer of a block that owns its window alone (no other view of it alive), for reuse; the block
    /// itself otherwise. The sequential decoder recycles its window's blocks with this once a stream run's cache
    /// has let them go.
    pub fn into_buffer(self) -> std::result::Result<Vec<u8>, Block> {
        if self.start != 0 || self.len != self.window.bytes.len() {
            return Err(self);
        }
        match Arc::try_unwrap(self.window) {
            Ok(mut window) => Ok(std::mem::take(&mut window.bytes)),
            Err(window) => Err(Block { len: window.bytes.len(), window, start: 0 }),
        }
    }

    /// A copy of this block in a window of its own.
    fn copied(&self) -> Block {
        Block::from(&self[..])
    }
}

impl Deref for Block {
    type Target = [u8];
    fn deref(&self) -> &[u8] {
        &self.window.bytes[self.start..self.start + self.len]
    }
}

impl AsRef<[u8]> for Block {
    fn as_ref(&self) -> &[u8] {
        self
    }
}

impl std::fmt::Debug for Block {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Block({} bytes at {} of a {}-byte window)", self.len, self.start, self.window.bytes.len())
    }
}

impl From<Vec<u8>> for Block {
    fn from(bytes: Vec<u8>) -> Block {
        let len = bytes.len();
        Block { window: Arc::new(Window { bytes }), start: 0, len }
    }
}

impl From<&[u8]> for Block {
    fn from(bytes: &[u8]) -> Block {
        Block::from(bytes.to_vec())
    }
}

/// Counters of one cache, for `stats` output and tests.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct CacheStats {
    /// Lookups answered from the cache.
    pub hits: u64,
    /// Lookups that had to decode (or wait for another reader's decode).
    pub misses: u64,
    /// Misses that waited for a decode already in flight instead of starting their own.
    pub shared_waits: u64,
    /// Blocks dropped to stay within the budget.
    pub evictions: u64,
    /// Decoded bytes held now.
    pub bytes: u64,
    /// Blocks held now.
    pub entries: u64,
    /// The byte budget.
    pub budget_bytes: u64,
    /// Blocks decoded, per engine name ("cpu", "gpu").
    pub decodes: BTreeMap<String, u64>,
}

/// What a leader publishes to the readers waiting on its decode.
type Outcome = std::result::Result<Block, Error>;

/// One decode in progress; waiters block on `ready` until `outcome` is set.
#[derive(Default)]
struct Flight {
    outcome: Mutex<Option<Outcome>>,
    ready: Condvar,
}

impl Flight {
    fn publish(&self, outcome: Outcome) {
        *lock(&self.outcome) = Some(outcome);
        self.ready.notify_all();
    }

    fn wait(&self) -> Result<Block> {
        let mut slot = lock(&self.outcome);
        loop {
            if let Some(outcome) = slot.as_ref() {
                return outcome.as_ref().cloned().map_err(clone_error);
            }
            slot = self.ready.wait(slot).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// The LRU and its byte count, under one lock.
struct Store {
    lru: LruCache<u64, Block>,
    /// Bytes charged: blocks in windows of their own, plus every shared window that has a block in the LRU,
    /// whole.
    bytes: u64,
    /// The shared windows with blocks in the LRU, by [`Block::window_key`].
    windows: HashMap<usize, WindowUse>,
}

/// A shared window's blocks in the LRU.
struct WindowUse {
    /// The window's length (what it is charged).
    len: u64,
    entries: u32,
    /// Their bytes.
    held: u64,
    /// The ids they were inserted under (ascending within one run; compaction looks for them there).
    ids: Range<u64>,
}

impl Store {
    /// Charges `block`, just put into the LRU under `id`.
    fn charge(&mut self, id: u64, block: &Block) {
        if !block.is_shared() {
            self.bytes += block.len() as u64;
            return;
        }
        let window_len = block.window_len();
        let usage = self.windows.entry(block.window_key()).or_insert(WindowUse {
            len: window_len,
            entries: 0,
            held: 0,
            ids: id..id + 1,
        });
        if usage.entries == 0 {
            self.bytes += window_len;
        }
        usage.entries += 1;
        usage.held += block.len() as u64;
        usage.ids = usage.ids.start.min(id)..usage.ids.end.max(id + 1);
    }

    /// Releases `block`, just taken out of the LRU; returns its window's key when the window is now sparse
    /// (its blocks in the LRU a quarter of it or less) and should be compacted.
    fn discharge(&mut self, block: &Block) -> Option<usize> {
        if !block.is_shared() {
            self.bytes -= block.len() as u64;
            return None;
        }
        let key = block.window_key();
        let usage = self.windows.get_mut(&key)?;
        usage.entries -= 1;
        usage.held -= block.len() as u64;
        if usage.entries == 0 {
            self.windows.remove(&key);
            self.bytes -= block.window_len();
            return None;
        }
        (usage.held * 4 <= block.window_len()).then_some(key)
    }

    /// Copies the blocks of sparse window `key` that are still in the LRU into windows of their own (keeping
    /// their LRU positions), so that the window is no longer charged (and is freed once no reader holds it).
    fn compact(&mut self, key: usize) {
        let Some(usage) = self.windows.remove(&key) else { return };
        for id in usage.ids {
            if let Some(block) = self.lru.peek_mut(&id) {
                if block.is_shared() && block.window_key() == key {
                    *block = block.copied();
                    self.bytes += block.len() as u64;
                }
            }
        }
        self.bytes -= usage.len;
    }

    /// Puts `block` under `id`, releasing what it replaces; counts a new id in `present`.
    fn put(&mut self, id: u64, block: Block, present: &[AtomicU32]) {
        self.charge(id, &block);
        match self.lru.put(id, block) {
            Some(old) => {
                if let Some(key) = self.discharge(&old) {
                    self.compact(key);
                }
            }
            None => {
                present[present_slot(id)].fetch_add(1, Ordering::Relaxed);
            }
        }
    }

    /// Evicts least-recently-used blocks until `budget` holds; returns how many. A window being drained in LRU
    /// order (a stream's blocks, oldest first: its next block is the next to go) is not compacted on the way.
    fn evict_to(&mut self, budget: u64, present: &[AtomicU32]) -> u64 {
        let mut evicted = 0;
        while self.bytes > budget {
            let Some((id, block)) = self.lru.pop_lru() else { break };
            present[present_slot(id)].fetch_sub(1, Ordering::Relaxed);
            evicted += 1;
            if let Some(key) = self.discharge(&block) {
                let draining =
                    self.lru.peek_lru().is_some_and(|(_, next)| next.is_shared() && next.window_key() == key);
                if !draining {
                    self.compact(key);
                }
            }
        }
        evicted
    }
}

/// Slots of [`BlockCache::present`]: block `id` counts in slot `id % PRESENT_SLOTS`.
const PRESENT_SLOTS: usize = 1 << 15;

/// Decoded blocks by id, within a byte budget.
pub struct BlockCache {
    budget: u64,
    store: Mutex<Store>,
    /// How many cached blocks map to each slot (changed under the store's lock, read without it): a decoder
    /// that looks for a source block finds most of them absent here without taking the lock. Why: the CPU
    /// decoders ask the cache for every source piece outside their batch and window, at every level of a
    /// resolution through tokens (sources one genome back and further: the blocks are never cached), and every
    /// decoding thread took the one store lock for each: 1.4 % of `cat` of a generated genome's fourth file on 2
    /// cores inside it (`BlockCache::peek`, `contains`, `lock_contended` in `perf`), serialised across 16.
    present: Box<[AtomicU32]>,
    in_flight: Mutex<HashMap<u64, Arc<Flight>>>,
    hits: AtomicU64,
    misses: AtomicU64,
    shared_waits: AtomicU64,
    evictions: AtomicU64,
    decodes: Mutex<BTreeMap<String, u64>>,
}

/// Locks a mutex, ignoring poisoning: every critical section here leaves its data consistent.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl BlockCache {
    /// A cache holding at most `budget_bytes` of decoded blocks (0 disables caching, single-flight remains).
    pub fn new(budget_bytes: u64) -> BlockCache {
        BlockCache {
            budget: budget_bytes,
            store: Mutex::new(Store { lru: LruCache::unbounded(), bytes: 0, windows: HashMap::new() }),
            present: (0..PRESENT_SLOTS).map(|_| AtomicU32::new(0)).collect(),
            in_flight: Mutex::new(HashMap::new()),
            hits: AtomicU64::new(0),
            misses: AtomicU64::new(0),
            shared_waits: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
            decodes: Mutex::new(BTreeMap::new()),
        }
    }

    /// Block `id` if cached (counts a hit, refreshes its LRU position).
    pub fn get(&self, id: u64) -> Option<Block> {
        let hit = lock(&self.store).lru.get(&id).cloned();
        if hit.is_some() {
            self.hits.fetch_add(1, Ordering::Relaxed);
        }
        hit
    }

    /// Blocks `ids` as far as cached, under one lock acquisition (counts the hits, refreshes them).
    pub fn get_all(&self, ids: &[u64]) -> Vec<Option<Block>> {
        let found: Vec<Option<Block>> = {
            let mut store = lock(&self.store);
            ids.iter().map(|id| store.lru.get(id).cloned()).collect()
        };
        let hits = found.iter().filter(|b| b.is_some()).count() as u64;
        self.hits.fetch_add(hits, Ordering::Relaxed);
        found
    }

    /// Block `id` if cached, without counting or refreshing (for source lookups by the decoder).
    pub fn peek(&self, id: u64) -> Option<Block> {
        lock(&self.store).lru.peek(&id).cloned()
    }

    /// The first of blocks `ids` that is not cached, under one lock acquisition (no counting, no refreshing).
    pub fn first_missing(&self, ids: Range<u64>) -> Option<u64> {
        let store = lock(&self.store);
        ids.into_iter().find(|id| !store.lru.contains(id))
    }

    /// Inserts a decoded block, evicting least-recently-used blocks to stay within the budget. A block larger
    /// than the whole budget is not kept.
    pub fn insert(&self, id: u64, block: Block) {
        self.insert_run(id, std::slice::from_ref(&block));
    }

    /// Inserts consecutive blocks `first, first + 1, …` (a stream run's piece, usually views of shared
    /// windows) under one lock acquisition, then evicts least-recently-used blocks to stay within the budget.
    /// Blocks of a window larger than an eighth of the budget go in as copies (a few of them could otherwise
    /// pin more than the budget); a block larger than the whole budget is not kept.
    pub fn insert_run(&self, first: u64, blocks: &[Block]) {
        let mut store = lock(&self.store);
        for (id, block) in (first..).zip(blocks) {
            let size = block.len() as u64;
            if size > self.budget {
                continue;
            }
            let block =
                if block.is_shared() && block.window_len() > self.budget / 8 { block.copied() } else { block.clone() };
            store.put(id, block, &self.present);
        }
        let evicted = store.evict_to(self.budget, &self.present);
        drop(store);
        self.evictions.fetch_add(evicted, Ordering::Relaxed);
    }

    /// Adds `n` to the count of blocks decoded by `engine`.
    pub fn record_decodes(&self, engine: &str, n: u64) {
        *lock(&self.decodes).entry(engine.to_string()).or_default() += n;
    }

    /// Block `id` from the cache, or decoded by `decode` — once, however many threads ask at the same time.
    pub fn get_or_decode(&self, id: u64, decode: impl FnOnce() -> Result<Block>) -> Result<Block> {
        if let Some(hit) = self.get(id) {
            return Ok(hit);
        }
        self.misses.fetch_add(1, Ordering::Relaxed);
        match self.claim(id) {
            Claim::Cached(block) => Ok(block),
            Claim::Wait(flight) => {
                self.shared_waits.fetch_add(1, Ordering::Relaxed);
                flight.wait()
            }
            Claim::Lead(lead) => {
                let outcome = decode();
                lead.finish(outcome)
            }
        }
    }

    /// Blocks `ids`, in order: hits from the cache, the missing ones decoded by ONE call of `decode_batch`
    /// (which returns one outcome per id it is given, in order), blocks already being decoded by another
    /// reader waited for. A failed block fails the whole call with that block's error.
    pub fn get_many(&self, ids: &[u64], decode_batch: impl FnOnce(&[u64]) -> Vec<Result<Block>>) -> Result<Vec<Block>> {
        let mut found = self.get_all(ids);
        let mut leads = Vec::new();
        let mut lead_slots = Vec::new();
        let mut waits = Vec::new();
        for (slot, &id) in ids.iter().enumerate() {
            if found[slot].is_some() {
                continue;
            }
            self.misses.fetch_add(1, Ordering::Relaxed);
            match self.claim(id) {
                Claim::Cached(block) => found[slot] = Some(block),
                Claim::Wait(flight) => waits.push((slot, flight)),
                Claim::Lead(lead) => {
                    leads.push((id, lead));
                    lead_slots.push(slot);
                }
            }
        }
        // Finish every block this call leads before waiting on anyone else's: two readers each leading a block
        // the other waits for can then never deadlock.
        let mut first_error = None;
        for (slot, outcome) in lead_slots.into_iter().zip(self.lead_batch(leads, decode_batch)) {
            match outcome {
                Ok(block) => found[slot] = Some(block),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        for (slot, flight) in waits {
            self.shared_waits.fetch_add(1, Ordering::Relaxed);
            match flight.wait() {
                Ok(block) => found[slot] = Some(block),
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        if let Some(e) = first_error {
            return Err(e);
        }
        found
            .into_iter()
            .zip(ids)
            .map(|(block, id)| block.ok_or_else(|| Error::InvalidArgument(format!("block {id} was not decoded"))))
            .collect()
    }

    /// Decodes the blocks of `ids` that are neither cached nor already in flight, in ONE call of
    /// `decode_batch`, and caches them. Does not wait for other readers' decodes; errors are dropped (a later
    /// read of a bad block reports it).
    pub fn prefetch(&self, ids: &[u64], decode_batch: impl FnOnce(&[u64]) -> Vec<Result<Block>>) {
        let leads: Vec<(u64, Lead<'_>)> = ids
            .iter()
            .filter(|&&id| self.peek(id).is_none())
            .filter_map(|&id| match self.claim(id) {
                Claim::Lead(lead) => Some((id, lead)),
                _ => None,
            })
            .collect();
        self.lead_batch(leads, decode_batch);
    }

    /// Runs `decode_batch` for the claimed blocks and publishes each outcome; returns them in order.
    fn lead_batch(
        &self,
        leads: Vec<(u64, Lead<'_>)>,
        decode_batch: impl FnOnce(&[u64]) -> Vec<Result<Block>>,
    ) -> Vec<Result<Block>> {
        if leads.is_empty() {
            return Vec::new();
        }
        let ids: Vec<u64> = leads.iter().map(|(id, _)| *id).collect();
        let mut outcomes = decode_batch(&ids).into_iter();
        leads
            .into_iter()
            .map(|(id, lead)| {
                let outcome = outcomes.next().unwrap_or_else(|| {
                    Err(Error::InvalidArgument(format!("decoder returned no outcome for block {id}")))
                });
                lead.finish(outcome)
            })
            .collect()
    }

    /// Makes the caller the leader for `id`, or hands it the flight to wait on, or the block if a leader
    /// finished in the meantime.
    fn claim(&self, id: u64) -> Claim<'_> {
        let mut in_flight = lock(&self.in_flight);
        // Checked under the in-flight lock: a leader inserts into the store before leaving the table, so a
        // block is always in one of the two (or neither, if it was never decoded or was evicted).
        if let Some(block) = self.peek(id) {
            return Claim::Cached(block);
        }
        if let Some(flight) = in_flight.get(&id) {
            return Claim::Wait(flight.clone());
        }
        let flight = Arc::new(Flight::default());
        in_flight.insert(id, flight.clone());
        Claim::Lead(Lead { cache: self, id, flight, done: false })
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> CacheStats {
        let (bytes, entries) = {
            let store = lock(&self.store);
            (store.bytes, store.lru.len() as u64)
        };
        CacheStats {
            hits: self.hits.load(Ordering::Relaxed),
            misses: self.misses.load(Ordering::Relaxed),
            shared_waits: self.shared_waits.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
            bytes,
            entries,
            budget_bytes: self.budget,
            decodes: lock(&self.decodes).clone(),
        }
    }
}

impl BlockCache {
    /// False when block `id` is surely not cached (no cached block maps to its slot), without the lock; true
    /// when it may be. A block inserted or evicted meanwhile may be answered either way: the callers (source
    /// lookups) then resolve it through its tokens, which give the same bytes.
    fn may_hold(&self, id: u64) -> bool {
        self.present[present_slot(id)].load(Ordering::Relaxed) > 0
    }
}

/// The slot of block `id` in [`BlockCache::present`].
fn present_slot(id: u64) -> usize {
    (id % PRESENT_SLOTS as u64) as usize
}

impl DecodedBlocks for BlockCache {
    fn copy_out(&self, id: u64, offset: usize, out: &mut [u8]) -> bool {
        if !self.may_hold(id) {
            return false;
        }
        let Some(block) = self.peek(id) else { return false };
        match offset.checked_add(out.len()).and_then(|end| block.get(offset..end)) {
            Some(src) => {
                out.copy_from_slice(src);
                true
            }
            None => false,
        }
    }

    fn contains(&self, id: u64) -> bool {
        self.may_hold(id) && lock(&self.store).lru.contains(&id)
    }
}

enum Claim<'a> {
    Cached(Block),
    Wait(Arc<Flight>),
    Lead(Lead<'a>),
}

/// The duty to decode one block and publish the outcome. Dropping it unfinished (a panic in the decoder)
/// publishes an error so that waiters wake up.
struct Lead<'a> {
    cache: &'a BlockCache,
    id: u64,
    flight: Arc<Flight>,
    done: bool,
}

impl Lead<'_> {
    /// Caches a success, wakes the waiters, and returns the outcome to the leader.
    fn finish(mut self, outcome: Outcome) -> Result<Block> {
        self.done = true;
        self.publish(&outcome);
        outcome
    }

    fn publish(&self, outcome: &Outcome) {
        if let Ok(block) = outcome {
            self.cache.insert(self.id, block.clone());
        }
        lock(&self.cache.in_flight).remove(&self.id);
        self.flight.publish(outcome.as_ref().cloned().map_err(clone_error));
    }
}

impl Drop for Lead<'_> {
    fn drop(&mut self) {
        if !self.done {
            let id = self.id;
            self.publish(&Err(Error::InvalidArgument(format!("decoding block {id} was abandoned (decoder panic)"))));
        }
    }
}

/// A copy of an error for the readers that waited on a failed decode (`Error` holds an `io::Error`, which is not
/// `Clone`; its kind and message are kept).
pub fn clone_error(e: &Error) -> Error {
    match e {
        Error::Io { path, source } => {
            Error::Io { path: path.clone(), source: std::io::Error::new(source.kind(), source.to_string()) }
        }
        Error::Format { path, detail } => Error::Format { path: path.clone(), detail: detail.clone() },
        Error::CorruptBlock { path, block, offset, source } => {
            Error::CorruptBlock { path: path.clone(), block: *block, offset: *offset, source: source.clone() }
        }
        Error::NotFound(s) => Error::NotFound(s.clone()),
        Error::IsDirectory(s) => Error::IsDirectory(s.clone()),
        Error::NotDirectory(s) => Error::NotDirectory(s.clone()),
        Error::InvalidArgument(s) => Error::InvalidArgument(s.clone()),
        Error::Input { path, detail } => Error::Input { path: path.clone(), detail: detail.clone() },
        Error::Gpu(s) => Error::Gpu(s.clone()),
        Error::Decode(d) => Error::Decode(d.clone()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicUsize;
    use std::sync::Barrier;
    use std::time::Duration;

    fn block(byte: u8, len: usize) -> Block {
        vec![byte; len].into()
    }

    #[test]
    fn source_lookups_see_inserts_and_evictions_of_aliased_ids() {
        // Ids a whole number of slots apart share a presence count: each must still answer for itself.
        let cache = BlockCache::new(300);
        let (a, b) = (7u64, 7 + PRESENT_SLOTS as u64);
        let mut out = [0u8; 2];
        assert!(!cache.contains(a) && !cache.copy_out(a, 0, &mut out));
        cache.insert(a, block(1, 100));
        assert!(cache.contains(a) && !cache.contains(b), "the count says maybe; the store says which");
        assert!(cache.copy_out(a, 98, &mut out) && out == [1, 1]);
        cache.insert(b, block(2, 100));
        cache.insert(a, block(3, 100)); // replaced: still one entry under `a`
        assert_eq!(cache.present[present_slot(a)].load(Ordering::Relaxed), 2);
        // Two more blocks push both out of the 300-byte budget.
        cache.insert(1, block(4, 100));
        cache.insert(2, block(5, 100));
        cache.insert(3, block(6, 100));
        assert!(!cache.contains(a) && !cache.contains(b) && !cache.copy_out(b, 0, &mut out));
        assert_eq!(cache.present[present_slot(a)].load(Ordering::Relaxed), 0);
        assert!(cache.contains(3) && cache.copy_out(3, 0, &mut out) && out == [6, 6]);
    }

    #[test]
    fn lru_respects_the_byte_budget() {
        let cache = BlockCache::new(300);
        for id in 0..5 {
            cache.insert(id, block(id as u8, 100));
        }
        let s = cache.stats();
        assert_eq!((s.bytes, s.entries, s.evictions), (300, 3, 2));
        assert!(cache.get(0).is_none() && cache.get(1).is_none());
        // Touch 2 so that 3 is the least recent, then insert: 3 goes.
        assert_eq!(cache.get(2).unwrap()[0], 2);
        cache.insert(9, block(9, 100));
        assert!(cache.peek(3).is_none());
        assert!(cache.peek(2).is_some());
        // Larger than the whole budget: not kept, nothing evicted.
        cache.insert(10, block(1, 301));
        assert!(cache.peek(10).is_none());
        assert_eq!(cache.stats().entries, 3);
    }

    #[test]
    fn concurrent_misses_of_one_block_decode_once() {
        let cache = BlockCache::new(1 << 20);
        let decodes = AtomicUsize::new(0);
        let threads = 8;
        let barrier = Barrier::new(threads);
        std::thread::scope(|s| {
            for _ in 0..threads {
                s.spawn(|| {
                    barrier.wait();
                    let got = cache
                        .get_or_decode(7, || {
                            decodes.fetch_add(1, Ordering::SeqCst);
                            // Long enough that every other thread arrives while this decode is in flight.
                            std::thread::sleep(Duration::from_millis(100));
                            Ok(block(7, 64))
                        })
                        .unwrap();
                    assert_eq!(&*got, &[7u8; 64][..]);
                });
            }
        });
        assert_eq!(decodes.load(Ordering::SeqCst), 1);
        let s = cache.stats();
        assert_eq!(s.misses + s.hits, threads as u64);
        assert_eq!(s.shared_waits + s.hits + 1, threads as u64);
    }

    #[test]
    fn waiters_see_the_leaders_error_and_a_later_read_retries() {
        let cache = BlockCache::new(1 << 20);
        let barrier = Barrier::new(4);
        std::thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    barrier.wait();
                    let r = cache.get_or_decode(3, || {
                        std::thread::sleep(Duration::from_millis(50));
                        Err(Error::InvalidArgument("bad block".into()))
                    });
                    assert!(matches!(r, Err(Error::InvalidArgument(m)) if m == "bad block"));
                });
            }
        });
        // The failure is not cached.
        assert_eq!(&*cache.get_or_decode(3, || Ok(block(3, 8))).unwrap(), &[3u8; 8][..]);
    }

    #[test]
    fn a_panicking_decoder_does_not_hang_waiters() {
        let cache = BlockCache::new(1 << 20);
        let started = std::sync::atomic::AtomicBool::new(false);
        std::thread::scope(|s| {
            let leader = s.spawn(|| {
                let _ = cache.get_or_decode(1, || {
                    started.store(true, Ordering::SeqCst);
                    std::thread::sleep(Duration::from_millis(100));
                    panic!("decoder bug")
                });
            });
            while !started.load(Ordering::SeqCst) {
                std::thread::yield_now();
            }
            // The leader is in flight, so this waits for it and gets the abandonment error.
            let waiter = cache.get_or_decode(1, || Ok(block(1, 1)));
            assert!(matches!(waiter, Err(Error::InvalidArgument(m)) if m.contains("abandoned")));
            assert!(leader.join().is_err());
        });
        assert!(cache.get_or_decode(1, || Ok(block(1, 1))).is_ok());
    }

    #[test]
    fn get_many_decodes_missing_blocks_in_one_batch() {
        let cache = BlockCache::new(1 << 20);
        cache.insert(2, block(2, 4));
        let mut batches = Vec::new();
        let got = cache
            .get_many(&[1, 2, 3, 1], |ids| {
                batches.push(ids.to_vec());
                ids.iter().map(|&id| Ok(block(id as u8, 4))).collect()
            })
            .unwrap();
        assert_eq!(batches, vec![vec![1, 3]]);
        assert_eq!(got.iter().map(|b| b[0]).collect::<Vec<_>>(), vec![1, 2, 3, 1]);
        // A failing block fails the call but the good ones of the batch are cached.
        let r = cache.get_many(&[4, 5], |ids| {
            ids.iter()
                .map(|&id| if id == 5 { Err(Error::InvalidArgument("5".into())) } else { Ok(block(4, 4)) })
                .collect()
        });
        assert!(r.is_err());
        assert!(cache.peek(4).is_some() && cache.peek(5).is_none());
    }

    #[test]
    fn prefetch_skips_cached_blocks_and_counts_nothing_as_a_hit() {
        let cache = BlockCache::new(1 << 20);
        cache.insert(1, block(1, 4));
        let mut asked = Vec::new();
        cache.prefetch(&[0, 1, 2], |ids| {
            asked = ids.to_vec();
            ids.iter().map(|&id| Ok(block(id as u8, 4))).collect()
        });
        assert_eq!(asked, vec![0, 2]);
        assert!(cache.peek(0).is_some() && cache.peek(2).is_some());
        assert_eq!(cache.stats().hits, 0);
        let mut out = [0u8; 2];
        assert!(cache.copy_out(2, 1, &mut out));
        assert_eq!(out, [2, 2]);
        assert!(!cache.copy_out(2, 3, &mut out));
    }

    /// Blocks `first..first + n` of `len` bytes each (byte `id` repeated), as views of one window.
    fn window_of(first: u64, n: usize, len: usize) -> Vec<Block> {
        let bytes: Vec<u8> = (0..n).flat_map(|k| std::iter::repeat_n((first as usize + k) as u8, len)).collect();
        Window::copy_of(&bytes, |_| len).unwrap()
    }

    #[test]
    fn a_window_is_charged_whole_until_its_last_block_leaves() {
        let cache = BlockCache::new(10_000);
        let run = window_of(0, 8, 100);
        assert_eq!(run.len(), 8);
        assert_eq!(&run[3].following()[..100], &[3u8; 100][..]);
        assert_eq!(run[3].following().len(), 500, "blocks 3..8 follow block 3 in its window");
        cache.insert_run(0, &run);
        drop(run);
        let s = cache.stats();
        assert_eq!((s.bytes, s.entries), (800, 8));
        // A block decoded alone next to it is charged its own length.
        cache.insert(100, block(9, 50));
        assert_eq!(cache.stats().bytes, 850);
        // Evicting some of the window's blocks frees nothing while more than a quarter of it stays.
        let mut store = lock(&cache.store);
        for _ in 0..5 {
            let (_, b) = store.lru.pop_lru().unwrap();
            if let Some(key) = store.discharge(&b) {
                store.compact(key);
            }
        }
        // Blocks 0..5 left; 3 of 8 remain (more than a quarter): still charged whole.
        assert_eq!(store.bytes, 850);
        let (_, b) = store.lru.pop_lru().unwrap();
        // 2 of 8 remain: a quarter, compacted into copies of their own.
        let key = store.discharge(&b).expect("the window is sparse now");
        store.compact(key);
        assert_eq!(store.bytes, 50 + 200);
        assert!(store.windows.is_empty());
        assert!(!store.lru.peek(&6).unwrap().is_shared() && !store.lru.peek(&7).unwrap().is_shared());
        assert_eq!(&store.lru.peek(&7).unwrap()[..], &[7u8; 100][..]);
        drop(store);
        assert_eq!(cache.get(7).unwrap().following().len(), 100, "a compacted block is alone in its window");
    }

    #[test]
    fn windows_evict_in_lru_order_within_the_budget() {
        // Budget for two windows of 800 bytes (each at most an eighth of it: 6,400).
        let cache = BlockCache::new(6_400);
        for w in 0..20u64 {
            cache.insert_run(w * 8, &window_of(w * 8, 8, 100));
            let s = cache.stats();
            assert!(s.bytes <= 6_400, "window {w}: {s:?}");
        }
        let s = cache.stats();
        assert_eq!((s.bytes, s.entries), (6_400, 64), "the last 8 windows, whole");
        assert!(cache.peek(159).is_some() && cache.peek(96).is_some() && cache.peek(95).is_none());
        // Re-inserting a cached block (another decode of it) releases the one it replaces; its window (the
        // oldest, 96..104), still charged whole, is drained in LRU order (not compacted on the way).
        cache.insert(100, block(100, 100));
        assert!(!cache.peek(100).unwrap().is_shared());
        let s = cache.stats();
        assert_eq!((s.bytes, s.entries), (6_400 + 100 - 800, 57), "{s:?}");
        assert!((96..104).all(|id| id == 100 || cache.peek(id).is_none()));
        // Touching one block of the next window keeps it alive while the others go: compacted, not pinned.
        assert!(cache.get(105).is_some());
        for w in 20..27u64 {
            cache.insert_run(w * 8, &window_of(w * 8, 8, 100));
        }
        let s = cache.stats();
        assert!(s.bytes <= 6_400, "{s:?}");
        assert_eq!(&cache.peek(105).unwrap()[..], &[105u8; 100][..]);
        assert!(!cache.peek(105).unwrap().is_shared(), "copied out of its sparse window");
    }

    #[test]
    fn a_window_larger_than_an_eighth_of_the_budget_goes_in_as_copies() {
        let cache = BlockCache::new(4_000);
        let run = window_of(0, 8, 100);
        cache.insert_run(0, &run);
        assert!((0..8).all(|id| !cache.peek(id).unwrap().is_shared()));
        assert_eq!(cache.stats().bytes, 800);
        // And a view of a block covers the bytes after it in its window only.
        assert_eq!(&run[6].view(50..150).unwrap()[..], &[[6u8; 50], [7u8; 50]].concat()[..]);
        assert!(run[6].view(0..201).is_none() && run[7].view(101..101).is_none());
        assert!(Window::split(vec![0u8; 250], |_| 100).is_err(), "250 bytes are not whole blocks of 100");
    }

    /// Inserting a 16 MB piece of 16 KiB blocks: as the stream sink did before (a block of its own per 16 KiB,
    /// one lock round trip each) and with windows (4 MiB copies, one lock for the piece). Prints µs per piece:
    /// `cargo test --release --lib cache::tests::insert_a_16_mb_piece -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement; run it on its own"]
    fn insert_a_16_mb_piece() {
        const BLOCK: usize = 16 << 10;
        const PIECE: usize = 16 << 20;
        let src: Vec<u8> = (0..PIECE).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let per_piece = (PIECE / BLOCK) as u64;
        // Each way in a fresh cache that holds every piece (a first read: fresh memory), then in one that evicts
        // (a steady stream in a full cache: memory freed by the evictions is reused).
        for (what, budget) in [("fresh memory", 1u64 << 40), ("full cache, evicting", 64 << 20)] {
            for way in ["per block", "windows", "256 KiB windows"] {
                let cache = BlockCache::new(budget);
                let pieces = 24u64;
                let mut times = Vec::new();
                for p in 0..pieces {
                    let t = std::time::Instant::now();
                    let first = p * per_piece;
                    if way == "per block" {
                        for (k, chunk) in src.chunks(BLOCK).enumerate() {
                            cache.insert(first + k as u64, Block::from(chunk));
                        }
                    } else {
                        let mut piece = Vec::new();
                        let window_bytes = if way == "windows" { WINDOW_BYTES } else { 256 << 10 };
                        for window in src.chunks(window_bytes) {
                            piece.extend(Window::copy_of(window, |_| BLOCK).unwrap());
                        }
                        cache.insert_run(first, &piece);
                    }
                    times.push(t.elapsed().as_secs_f64() * 1e6);
                }
                times.sort_by(f64::total_cmp);
                println!(
                    "insert a 16 MB piece, {what}, {way}: median {:.0} µs, min {:.0} µs ({} pieces)",
                    times[times.len() / 2],
                    times[0],
                    pieces
                );
            }
        }
    }
}
