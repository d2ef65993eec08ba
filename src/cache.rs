//! The host LRU of decoded blocks, with a byte budget and single-flight misses.
//!
//! Every read goes through [`BlockCache`]. A hit is an `Arc` clone. A miss makes the caller the *leader* for
//! that block: it decodes, inserts and wakes everyone else who asked for the same block in the meantime, so
//! concurrent readers of one cold block cause exactly one decode. Batched misses ([`BlockCache::get_many`],
//! [`BlockCache::prefetch`]) claim all their missing blocks at once and hand them to the engine as one batch.
//!
//! Leadership is held through a guard: if a decoder panics, the guard publishes an error so that waiters never
//! hang.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use lru::LruCache;
use serde::Serialize;

use crate::codec::resolve::DecodedBlocks;
use crate::error::{Error, Result};

/// A decoded block.
pub type Block = Arc<[u8]>;

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
                return outcome.as_ref().map(Arc::clone).map_err(clone_error);
            }
            slot = self.ready.wait(slot).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// The LRU and its byte count, under one lock.
struct Store {
    lru: LruCache<u64, Block>,
    bytes: u64,
}

/// Decoded blocks by id, within a byte budget.
pub struct BlockCache {
    budget: u64,
    store: Mutex<Store>,
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
            store: Mutex::new(Store { lru: LruCache::unbounded(), bytes: 0 }),
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

    /// Block `id` if cached, without counting or refreshing (for source lookups by the decoder).
    pub fn peek(&self, id: u64) -> Option<Block> {
        lock(&self.store).lru.peek(&id).cloned()
    }

    /// Inserts a decoded block, evicting least-recently-used blocks to stay within the budget. A block larger
    /// than the whole budget is not kept.
    pub fn insert(&self, id: u64, block: Block) {
        let size = block.len() as u64;
        if size > self.budget {
            return;
        }
        let mut store = lock(&self.store);
        if let Some(old) = store.lru.put(id, block) {
            store.bytes -= old.len() as u64;
        }
        store.bytes += size;
        while store.bytes > self.budget {
            let Some((_, evicted)) = store.lru.pop_lru() else { break };
            store.bytes -= evicted.len() as u64;
            self.evictions.fetch_add(1, Ordering::Relaxed);
        }
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
        let mut found: Vec<Option<Block>> = ids.iter().map(|&id| self.get(id)).collect();
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

impl DecodedBlocks for BlockCache {
    fn copy_out(&self, id: u64, offset: usize, out: &mut [u8]) -> bool {
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
        lock(&self.store).lru.contains(&id)
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
        self.flight.publish(outcome.as_ref().map(Arc::clone).map_err(clone_error));
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
}
