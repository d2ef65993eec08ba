//! The CPU reference decoder: resolves any range of the logical stream through absolute sources, within the
//! reference-depth bound (FORMAT.md §1, DESIGN-NOTES §3).
//!
//! Decoding block `b` runs the entropy stage of its slices ([`decode_block`] / [`decode_slice`]) and then writes
//! their tokens in order. A match whose source lies in `b` copies from `b`'s own output (already written, since
//! `src < dst`). A reverse-complement match (version 5) reads its source range `[e − len + 1, e]` (`e = dst −
//! back`) like any other range and then reverses and complements what it got: byte `dst + k` is the complement
//! of byte `e − k`, whose depth it extends by one, as a forward copy does. A chain of such hops composes
//! complements, each applied once at its own level, so the parity comes out right with no bookkeeping. A source in another block is copied from a decoded copy of that block when one is at hand
//! ([`DecodedBlocks`]: the block cache, or the blocks just decoded by a sequential run); otherwise it is resolved
//! *through the tokens that cover the source range*, recursively, following at most `max_depth` matches per
//! byte. The unit of that resolution is the **slice** (FORMAT.md §3, default 2 KiB): a source piece costs the
//! entropy stage of the one slice that holds it, not of its whole block. The prefix of the stream and whole
//! chains of blocks are never decoded, so a cold read of `n` bytes costs `O(n × max_depth)` copies plus the
//! entropy stage of the slices touched.
//!
//! Parsed slices are kept in an LRU keyed by global slice id ([`ParsedCache`]) so that repeated source lookups
//! into one slice do not re-run its entropy stage.

use std::collections::HashSet;
use std::num::NonZeroUsize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use lru::LruCache;
use xxhash_rust::xxh3::xxh3_64;

use crate::codec::block::{
    decode_block, decode_blocks, decode_slice, decode_slice_prefixes, ParsedBlock, SliceJob, Token, COMPLEMENT,
};
use crate::error::{DecodeError, Error};
use crate::format::ArchiveData;

mod shared_parse;
use shared_parse::SharedParse;

/// Decoded, verified copies of whole blocks that resolution may copy from instead of following tokens.
pub trait DecodedBlocks: Send + Sync {
    /// Copies `out.len()` bytes of block `id` starting at `offset` into `out` and returns true, or returns
    /// false (touching nothing) when no decoded copy of the block is at hand.
    fn copy_out(&self, id: u64, offset: usize, out: &mut [u8]) -> bool;

    /// Whether a decoded copy of block `id` is at hand (planning only; it may be gone by the time it is read).
    fn contains(&self, id: u64) -> bool;

    /// Block `id` parsed whole, when its tokens are at hand but its decoded copy may not be yet (a block of the
    /// sequential decoder's batch that another thread is still writing): resolution then follows these tokens
    /// instead of parsing the block's slices again. May wait for a parse another thread has started.
    fn parsed_block(&self, _id: u64) -> Option<&ParsedBlock> {
        None
    }

    /// Waits until the decode of block `id` (one that [`parsed_block`](Self::parsed_block) served) has finished,
    /// and returns whether [`copy_out`](Self::copy_out) now serves it: the fallback when following its tokens
    /// failed, so that a source in such a block ends up resolved exactly as a one-thread decoder would.
    fn wait_decoded(&self, _id: u64) -> bool {
        false
    }
}

/// No decoded blocks at all: every cross-block source is resolved through tokens.
pub struct NoDecodedBlocks;

impl DecodedBlocks for NoDecodedBlocks {
    fn copy_out(&self, _id: u64, _offset: usize, _out: &mut [u8]) -> bool {
        false
    }

    fn contains(&self, _id: u64) -> bool {
        false
    }
}

/// Tries `first`, then `second`.
pub struct ChainDecoded<'a>(pub &'a dyn DecodedBlocks, pub &'a dyn DecodedBlocks);

impl DecodedBlocks for ChainDecoded<'_> {
    fn copy_out(&self, id: u64, offset: usize, out: &mut [u8]) -> bool {
        self.0.copy_out(id, offset, out) || self.1.copy_out(id, offset, out)
    }

    fn contains(&self, id: u64) -> bool {
        self.0.contains(id) || self.1.contains(id)
    }

    fn parsed_block(&self, id: u64) -> Option<&ParsedBlock> {
        self.0.parsed_block(id).or_else(|| self.1.parsed_block(id))
    }

    fn wait_decoded(&self, id: u64) -> bool {
        self.0.wait_decoded(id) || self.1.wait_decoded(id)
    }
}

/// A decode failure attributed to one block (the one whose payload, tokens or hash were bad).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockFault {
    pub block: u64,
    pub error: DecodeError,
}

impl BlockFault {
    /// The fault as one of reading block `id`: a depth bound exceeded while following `id`'s sources is charged to
    /// `id`, whose chain it is (the block where the chain ran out decodes fine on its own, and the error keeps the
    /// stream position where it did); any other fault stays with the block whose data is bad.
    fn charged_to(self, id: u64) -> BlockFault {
        match self.error {
            DecodeError::DepthExceeded { .. } => BlockFault { block: id, ..self },
            _ => self,
        }
    }

    /// The crate error naming the archive path, the block and its payload offset.
    pub fn into_error(self, data: &ArchiveData) -> Error {
        let offset = if self.block < data.block_count() { data.payload_offset(self.block) } else { 0 };
        Error::CorruptBlock { path: data.path.clone(), block: self.block, offset, source: self.error }
    }
}

/// LRU of parsed (entropy-decoded) slices keyed by global slice id, shared by all threads of one engine.
///
/// Split into up to [`PARSED_SHARDS`] LRUs by slice id, each behind its own lock: every source piece that is
/// resolved through tokens looks a slice up here, and with one lock the threads of a parallel decode whose
/// sources lie far back queue on it. Consecutive slices fall in different shards, so one stretch of sources
/// spreads over all of them.
pub struct ParsedCache {
    shards: Vec<Mutex<LruCache<u64, Arc<ParsedBlock>>>>,
    /// Slice entropy-stage runs so far (a measure of the work a read caused).
    parses: AtomicU64,
}

/// Most shards a [`ParsedCache`] is split into.
pub const PARSED_SHARDS: usize = 16;
/// Fewest slices a shard holds, so that a small cache is not split into LRUs too small to keep a run of slices.
const MIN_SHARD_SLICES: usize = 64;

impl ParsedCache {
    /// Holds up to `capacity` parsed slices (rounded up to a multiple of the shard count).
    pub fn new(capacity: usize) -> ParsedCache {
        let capacity = capacity.max(1);
        let shards = (capacity / MIN_SHARD_SLICES).clamp(1, PARSED_SHARDS);
        let per_shard = NonZeroUsize::new(capacity.div_ceil(shards)).unwrap_or(NonZeroUsize::MIN);
        let shards = (0..shards).map(|_| Mutex::new(LruCache::new(per_shard))).collect();
        ParsedCache { shards, parses: AtomicU64::new(0) }
    }

    /// A capacity that keeps roughly `bytes` of parsed slices for slices of `slice_size` bytes (a parsed slice
    /// is about the size of its decoded bytes).
    pub fn with_budget(bytes: u64, slice_size: u64) -> ParsedCache {
        ParsedCache::new((bytes / slice_size.max(1)).clamp(16, 1 << 16) as usize)
    }

    /// Global slice `g`, parsed whole, from the LRU or by running its entropy stage (`g < global_slice_count`).
    pub fn get_or_parse(&self, data: &ArchiveData, g: u64) -> Result<Arc<ParsedBlock>, BlockFault> {
        self.get_serving(data, g, u32::MAX)
    }

    /// Global slice `g` parsed at least far enough to serve its bytes `[0, end)` ([`ParsedBlock::serves`]): the
    /// LRU's copy when it does (the closure planner may have parsed a prefix), else the slice parsed whole,
    /// which replaces it.
    pub fn get_serving(&self, data: &ArchiveData, g: u64, end: u32) -> Result<Arc<ParsedBlock>, BlockFault> {
        if let Some(hit) = self.lock(g).get(&g).filter(|p| p.serves(end)) {
            return Ok(hit.clone());
        }
        // Parse outside the lock; two threads racing on one slice both parse, which is only wasted work.
        self.parses.fetch_add(1, Ordering::Relaxed);
        let parsed = Arc::new(parse_slice(data, g)?);
        self.lock(g).put(g, parsed.clone());
        Ok(parsed)
    }

    /// Inserts slice `g` parsed elsewhere (the closure planner parses on all cores).
    pub fn insert(&self, g: u64, parsed: Arc<ParsedBlock>) {
        self.lock(g).put(g, parsed);
    }

    /// Whether slice `g` is held (does not refresh it).
    pub fn contains(&self, g: u64) -> bool {
        self.lock(g).contains(&g)
    }

    /// Whether slice `g` is held, parsed far enough to serve its bytes `[0, end)` (does not refresh it).
    pub fn serves(&self, g: u64, end: u32) -> bool {
        self.lock(g).peek(&g).is_some_and(|p| p.serves(end))
    }

    /// Slice `g` if held (does not refresh it).
    fn peek(&self, g: u64) -> Option<Arc<ParsedBlock>> {
        self.lock(g).peek(&g).cloned()
    }

    /// How many slices this cache can hold.
    pub fn capacity(&self) -> usize {
        self.shards.iter().map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).cap().get()).sum()
    }

    /// Slice entropy-stage runs done through this cache so far.
    pub fn parses(&self) -> u64 {
        self.parses.load(Ordering::Relaxed)
    }

    /// The shard of slice `g`, locked.
    fn lock(&self, g: u64) -> std::sync::MutexGuard<'_, LruCache<u64, Arc<ParsedBlock>>> {
        let shard = &self.shards[(g % self.shards.len() as u64) as usize];
        // A panic while holding the lock cannot leave the LRU inconsistent for our use; keep serving.
        shard.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// Runs the entropy stage of every slice of block `id` and checks the parsed form's invariants: one unit for the
/// whole block (the sequential decoder's unit).
pub fn parse_block(data: &ArchiveData, id: u64) -> Result<ParsedBlock, BlockFault> {
    if id >= data.block_count() {
        let error = DecodeError::Limit { what: "block id", value: id, limit: data.block_count().saturating_sub(1) };
        return Err(BlockFault { block: id, error });
    }
    let shape = data.block_shape(id);
    let fault = |error| BlockFault { block: id, error };
    let payload = data.payload(id).map_err(fault)?;
    let parsed = decode_block(&payload, data.tables_for(id), shape).map_err(fault)?;
    check_parsed(&parsed, shape.start, shape.len).map_err(|error| BlockFault { block: id, error })?;
    Ok(parsed)
}

/// [`parse_block`] of several blocks (a sequential decoder's worker takes two at a time), their entropy stages run
/// together ([`decode_blocks`]); each result as `parse_block` gives it: where anything fails, every block is parsed
/// again alone, so that each gets its own verdict and error.
pub fn parse_blocks(data: &ArchiveData, ids: &[u64]) -> Vec<Result<ParsedBlock, BlockFault>> {
    let together = || -> Option<Vec<ParsedBlock>> {
        if ids.iter().any(|&id| id >= data.block_count()) {
            return None;
        }
        let payloads = ids.iter().map(|&id| data.payload(id).ok()).collect::<Option<Vec<_>>>()?;
        let jobs: Vec<_> =
            ids.iter().zip(&payloads).map(|(&id, p)| (&p[..], data.tables_for(id), data.block_shape(id))).collect();
        let parsed = decode_blocks(&jobs).ok()?;
        let checked = parsed.iter().zip(&jobs).all(|(p, job)| check_parsed(p, job.2.start, job.2.len).is_ok());
        checked.then_some(parsed)
    };
    match together() {
        Some(parsed) => parsed.into_iter().map(Ok).collect(),
        None => ids.iter().map(|&id| parse_block(data, id)).collect(),
    }
}

/// Runs the entropy stage of global slice `g` alone and checks the parsed form's invariants (random access's
/// unit). Errors name the slice's block.
pub fn parse_slice(data: &ArchiveData, g: u64) -> Result<ParsedBlock, BlockFault> {
    let (id, j) = data.slice_block(g);
    if g >= data.global_slice_count() || id >= data.block_count() {
        let limit = data.global_slice_count().saturating_sub(1);
        let error = DecodeError::Limit { what: "slice id", value: g, limit };
        return Err(BlockFault { block: id.min(data.block_count().saturating_sub(1)), error });
    }
    let shape = data.block_shape(id);
    let fault = |error| BlockFault { block: id, error };
    let payload = data.payload(id).map_err(fault)?;
    let parsed = decode_slice(&payload, data.tables_for(id), shape, j as usize).map_err(fault)?;
    check_parsed(&parsed, data.slice_start(g), data.slice_len(g)).map_err(fault)?;
    Ok(parsed)
}

/// Parses the global slices `gs`, each on its own, with their entropy stages four at a time in lock step
/// ([`decode_slices`](crate::codec::block::decode_slices)): the closure planner's unit of work. Slice `g` of `(g, end)`
/// is parsed as far as its bytes `[0, end)` need ([`decode_slice_prefixes`]; `u32::MAX`: whole).
pub fn parse_slices(data: &ArchiveData, gs: &[(u64, u32)]) -> Vec<(u64, Result<ParsedBlock, BlockFault>)> {
    let valid = |g: u64| g < data.global_slice_count() && data.slice_block(g).0 < data.block_count();
    let (good, bad): (Vec<_>, Vec<_>) = gs.iter().partition(|&&(g, _)| valid(g));
    let mut out: Vec<(u64, Result<ParsedBlock, BlockFault>)> =
        bad.into_iter().map(|(g, _)| (g, parse_slice(data, g))).collect();
    // Each block's payload is read once however many of its slices a chunk holds, and the last one read is kept
    // for the next chunk: the slices come sorted, so a block's slices are adjacent (a block being decoded has all
    // of its slices in the first level of a closure).
    let mut payloads: Vec<(u64, std::borrow::Cow<'_, [u8]>)> = Vec::with_capacity(4);
    for now in good.chunks(4) {
        // Payloads first (a read can fail if the file changed under us), then the entropy stages in lock step.
        let keep = now.first().map(|&(g, _)| data.slice_block(g).0);
        payloads.retain(|(b, _)| Some(*b) == keep);
        let mut ready = Vec::with_capacity(now.len());
        let mut ends = Vec::with_capacity(now.len());
        for &(g, end) in now {
            let b = data.slice_block(g).0;
            if let Some(at) = payloads.iter().position(|(pb, _)| *pb == b) {
                ready.push((g, at));
                ends.push(end);
                continue;
            }
            match data.payload(b) {
                Ok(payload) => {
                    ready.push((g, payloads.len()));
                    ends.push(end);
                    payloads.push((b, payload));
                }
                Err(error) => out.push((g, Err(BlockFault { block: b, error }))),
            }
        }
        let jobs: Vec<SliceJob> = ready
            .iter()
            .map(|&(g, at)| {
                let (b, j) = data.slice_block(g);
                (&payloads[at].1[..], data.block_shape(b), j as usize, data.tables_for(b))
            })
            .collect();
        for ((g, _), result) in ready.iter().zip(decode_slice_prefixes(&jobs, &ends)) {
            let g = *g;
            let (b, _) = data.slice_block(g);
            let fault = |error| BlockFault { block: b, error };
            let checked = result.map_err(fault).and_then(|p| {
                check_parsed_prefix(&p, data.slice_start(g), data.slice_len(g)).map(|()| p).map_err(fault)
            });
            out.push((g, checked));
        }
    }
    out
}

/// Verifies what the resolver relies on, so that a codec bug becomes an error rather than a panic: prefix sums
/// consistent with the tokens, literals in range, every match source at or after stream position 0.
fn check_parsed(p: &ParsedBlock, start: u64, len: u32) -> Result<(), DecodeError> {
    check_parsed_prefix(p, start, len)?;
    if !p.is_complete() {
        let detail = format!("{} of {} literals", p.literals.len(), p.literal_count());
        return Err(DecodeError::Invalid { what: "parsed unit", detail });
    }
    Ok(())
}

/// [`check_parsed`] for a unit that may have been parsed as a prefix: it may hold fewer literals than its tokens
/// use ([`ParsedBlock::serves`] says which bytes it can give; the resolver checks every literal run it reads).
fn check_parsed_prefix(p: &ParsedBlock, start: u64, len: u32) -> Result<(), DecodeError> {
    let bad = |detail: String| DecodeError::Invalid { what: "parsed unit", detail };
    if p.start != start || p.len != len {
        return Err(bad(format!("start/len {}/{} (expected {start}/{len})", p.start, p.len)));
    }
    if p.tokens.is_empty() || p.token_pos.len() != p.tokens.len() + 1 || p.lit_pos.len() < p.tokens.len() {
        return Err(bad(format!(
            "{} tokens, {} token positions, {} literal positions",
            p.tokens.len(),
            p.token_pos.len(),
            p.lit_pos.len()
        )));
    }
    let (mut pos, mut lit) = (0u64, 0u64);
    for (t, tok) in p.tokens.iter().enumerate() {
        if u64::from(p.token_pos[t]) != pos || u64::from(p.lit_pos[t]) != lit {
            return Err(bad(format!("token {t}: prefix sums disagree with the token lengths")));
        }
        pos += u64::from(tok.lit_len);
        lit += u64::from(tok.lit_len);
        if tok.match_len > 0 && (tok.back == 0 || source_start(tok, start + pos).is_none()) {
            let kind = if tok.rc { "reverse-complement " } else { "" };
            let detail = format!(
                "token {t}: {kind}back {} length {} at stream position {}",
                tok.back,
                tok.match_len,
                start + pos
            );
            return Err(bad(detail));
        }
        pos += u64::from(tok.match_len);
    }
    if pos != u64::from(len) || u64::from(p.token_pos[p.tokens.len()]) != pos || lit < p.literals.len() as u64 {
        return Err(bad(format!("tokens cover {pos} bytes and {lit} literals; the unit has {len} bytes")));
    }
    Ok(())
}

/// What [`Resolver::parse_closure`] did, level by level: where a cold read's entropy work goes.
#[derive(Debug, Clone, Default)]
pub struct ClosureStats {
    pub levels: Vec<LevelStats>,
    /// The plan stopped before the LRU would overflow (the resolution parses the rest as it reaches it).
    pub stopped: bool,
}

impl ClosureStats {
    /// Slices parsed over all levels.
    pub fn slices(&self) -> usize {
        self.levels.iter().map(|l| l.slices).sum()
    }
}

/// One level of a closure plan.
#[derive(Debug, Clone, Copy, Default)]
pub struct LevelStats {
    /// Source ranges (merged) the level covers, and their bytes.
    pub ranges: usize,
    pub bytes: u64,
    /// Slices the level parsed (those the parsed LRU lacked).
    pub slices: usize,
    /// Chunks of slices that pool helpers parsed (the rest ran on the calling thread).
    pub helped_chunks: usize,
    /// Wall time of the level: planning, parsing, and finding the next level's sources.
    pub micros: f64,
}

/// Resolves stream bytes for one archive: the entropy stage through `parsed`, decoded copies through `decoded`.
/// The archive and the parsed LRU are shared (`Arc`) so that pool threads can help plan a closure without the
/// caller waiting for them to start.
pub struct Resolver<'a> {
    pub data: &'a Arc<ArchiveData>,
    pub parsed: &'a Arc<ParsedCache>,
    pub decoded: &'a dyn DecodedBlocks,
}

impl Resolver<'_> {
    /// Decodes block `id` into `out` (sized to the block's length) slice by slice, each slice through the parsed
    /// LRU, and checks it against its `block_hash`.
    pub fn decode_block(&self, id: u64, out: &mut [u8]) -> Result<(), BlockFault> {
        let expected = self.expected_hash(id)?;
        check_out_len(id, out, self.data.block_len(id))?;
        let first = id << (self.data.header.block_log - self.data.header.slice_log);
        let mut memo = SliceMemo::new();
        for g in first..first + u64::from(self.data.slice_count(id)) {
            let parsed = self.parsed.get_or_parse(self.data, g)?;
            check_parsed(&parsed, self.data.slice_start(g), self.data.slice_len(g))
                .map_err(|error| BlockFault { block: id, error })?;
            self.write_tokens(id, &parsed, out, &mut memo).map_err(|f| f.charged_to(id))?;
        }
        check_hash(id, out, expected)
    }

    /// Block `id`'s `block_hash`, or the fault of an id past the end.
    fn expected_hash(&self, id: u64) -> Result<u64, BlockFault> {
        self.data.block_hash.get(id as usize).copied().ok_or_else(|| {
            let limit = self.data.block_count().saturating_sub(1);
            BlockFault { block: id, error: DecodeError::Limit { what: "block id", value: id, limit } }
        })
    }

    /// Writes the tokens of an already-parsed block `id` into `out` and checks its `block_hash`.
    pub fn decode_parsed(&self, id: u64, parsed: &ParsedBlock, out: &mut [u8]) -> Result<(), BlockFault> {
        let fault = |error| BlockFault { block: id, error };
        let expected = self.expected_hash(id)?;
        check_out_len(id, out, parsed.len)?;
        // Cheap next to the copies, and it makes this public entry point safe for any ParsedBlock.
        check_parsed(parsed, self.data.block_start(id), self.data.block_len(id)).map_err(fault)?;
        self.write_tokens(id, parsed, out, &mut SliceMemo::new()).map_err(|f| f.charged_to(id))?;
        check_hash(id, out, expected)
    }

    /// The tokens of a unit of block `id` (the whole block, or one of its slices, checked by the caller) in
    /// order into `out`, the whole block's buffer: literals, then each match from `out` itself (in-block source)
    /// or from resolution (cross-block sources).
    fn write_tokens(&self, id: u64, p: &ParsedBlock, out: &mut [u8], memo: &mut SliceMemo) -> Result<(), BlockFault> {
        // Bytes of a cross-block source have depth ≤ max_depth − 1: the match that copies them is one level.
        let source_budget = self.data.header.max_depth - 1;
        let block_start = self.data.block_start(id);
        let base = match p.start.checked_sub(block_start) {
            Some(base) if base + u64::from(p.len) <= out.len() as u64 => base as usize,
            _ => {
                let detail = format!("unit at {} (+{}) is not inside block {id}", p.start, p.len);
                return Err(BlockFault { block: id, error: DecodeError::Invalid { what: "parsed unit", detail } });
            }
        };
        for (t, tok) in p.tokens.iter().enumerate() {
            let lit_at = base + p.token_pos[t] as usize;
            let lit_len = tok.lit_len as usize;
            let lit_src = p.lit_pos[t] as usize;
            out[lit_at..lit_at + lit_len].copy_from_slice(&p.literals[lit_src..lit_src + lit_len]);
            if tok.match_len == 0 {
                continue;
            }
            let dst = lit_at + lit_len;
            let len = tok.match_len as usize;
            let back = tok.back;
            if tok.rc {
                self.write_rc_match(block_start, out, dst, len, back, source_budget, memo)?;
                continue;
            }
            let period = back.min(len as u64) as usize;
            if back as usize <= dst {
                // Source inside this block, already written.
                periodic_copy_within(out, dst - back as usize, dst, len);
                continue;
            }
            // The period starts in an earlier block; part of it may run into this block's written bytes.
            let src = block_start + dst as u64 - back;
            let outside = ((block_start - src) as usize).min(period);
            self.resolve_range_in(src, &mut out[dst..dst + outside], source_budget, memo)?;
            if outside < period {
                out.copy_within(0..period - outside, dst + outside);
            }
            extend_period(&mut out[dst..dst + len], period);
        }
        Ok(())
    }

    /// Writes a reverse-complement match of `len` bytes at offset `dst` of block buffer `out` (the block starts
    /// at stream position `block_start`; `check_parsed` guaranteed `back + len − 1 ≤ block_start + dst`): its
    /// source range in stream order into `out[dst..dst + len]` — from earlier blocks by resolution, from this
    /// block's written bytes by a copy (the whole range lies before `dst`, so it never overlaps) — then reversed
    /// and complemented in place.
    #[allow(clippy::too_many_arguments)]
    fn write_rc_match(
        &self,
        block_start: u64,
        out: &mut [u8],
        dst: usize,
        len: usize,
        back: u64,
        source_budget: u8,
        memo: &mut SliceMemo,
    ) -> Result<(), BlockFault> {
        let lo = block_start + dst as u64 - back - (len as u64 - 1);
        let outside = (block_start.saturating_sub(lo) as usize).min(len);
        if outside > 0 {
            self.resolve_range_in(lo, &mut out[dst..dst + outside], source_budget, memo)?;
        }
        if outside < len {
            let from = (lo + outside as u64 - block_start) as usize;
            out.copy_within(from..from + (len - outside), dst + outside);
        }
        reverse_complement(&mut out[dst..dst + len]);
        Ok(())
    }

    /// Fills `out` with stream bytes `[pos, pos + out.len())`, following at most `budget` matches per byte. Each
    /// block's part comes from a decoded copy of the block when one is at hand, else from the tokens of the
    /// slices that cover it (only those slices are parsed). A depth fault names the block read whose part
    /// exceeded the bound ([`BlockFault::charged_to`]).
    pub fn resolve_range(&self, pos: u64, out: &mut [u8], budget: u8) -> Result<(), BlockFault> {
        let block_log = self.data.header.block_log;
        let mut memo = SliceMemo::new();
        let mut done = 0usize;
        while done < out.len() {
            let cur = pos + done as u64;
            let id = cur >> block_log;
            let n = (((id + 1) << block_log) - cur).min((out.len() - done) as u64) as usize;
            self.resolve_range_in(cur, &mut out[done..done + n], budget, &mut memo).map_err(|f| f.charged_to(id))?;
            done += n;
        }
        Ok(())
    }

    /// [`resolve_range`](Self::resolve_range), looking slices up in `memo` before the parsed LRU.
    fn resolve_range_in(&self, pos: u64, out: &mut [u8], budget: u8, memo: &mut SliceMemo) -> Result<(), BlockFault> {
        let block_log = self.data.header.block_log;
        let slice_log = self.data.header.slice_log;
        let mut cur = pos;
        let mut done = 0usize;
        while done < out.len() {
            let id = cur >> block_log;
            if id >= self.data.block_count() {
                let error = DecodeError::Invalid {
                    what: "match source",
                    detail: format!("stream position {cur} is past the end {}", self.data.footer.total_len),
                };
                return Err(BlockFault { block: id.min(self.data.block_count().saturating_sub(1)), error });
            }
            let offset = (cur - (id << block_log)) as usize;
            let take = (out.len() - done).min(self.data.block_len(id) as usize - offset);
            if self.decoded.copy_out(id, offset, &mut out[done..done + take]) {
                done += take;
                cur += take as u64;
                continue;
            }
            if let Some(p) = self.decoded.parsed_block(id) {
                // A block another thread is still writing: its tokens are at hand, so no wait and no slice parse.
                // Should they fail (a corrupt block, the depth bound), take the block as a one-thread decoder
                // would see it once written: its bytes when good, else its slices below.
                let piece = &mut out[done..done + take];
                if self.resolve_in_unit(id, p, offset, piece, budget, memo).is_ok()
                    || (self.decoded.wait_decoded(id) && self.decoded.copy_out(id, offset, piece))
                {
                    done += take;
                    cur += take as u64;
                    continue;
                }
            }
            let block_end = done + take;
            while done < block_end {
                let g = cur >> slice_log;
                let slice_off = (cur - (g << slice_log)) as usize;
                let n = (block_end - done).min(self.data.slice_len(g) as usize - slice_off);
                let parsed = memo.get_serving(self.parsed, self.data, g, (slice_off + n) as u32)?;
                self.resolve_in_unit(id, &parsed, slice_off, &mut out[done..done + n], budget, memo)?;
                done += n;
                cur += n as u64;
            }
        }
        Ok(())
    }

    /// Fills `out` with bytes `[offset, offset + out.len())` of parsed unit `p` (a slice of block `id`) through
    /// its tokens.
    fn resolve_in_unit(
        &self,
        id: u64,
        p: &ParsedBlock,
        offset: usize,
        out: &mut [u8],
        budget: u8,
        memo: &mut SliceMemo,
    ) -> Result<(), BlockFault> {
        let end = offset + out.len();
        let mut cur = offset;
        let mut t = p.token_at(offset as u32);
        while cur < end {
            let tok = p.tokens[t];
            let lit_at = p.token_pos[t] as usize;
            let match_at = lit_at + tok.lit_len as usize;
            let token_end = p.token_pos[t + 1] as usize;
            if cur < match_at {
                let stop = end.min(match_at);
                let from = p.lit_pos[t] as usize + (cur - lit_at);
                // A unit parsed as a prefix holds only its first literals; the caller asked for one that serves
                // these bytes, so this only refuses a unit that lies about it.
                let Some(literals) = p.literals.get(from..from + (stop - cur)) else {
                    let detail = format!("literal {} of a unit holding {}", from + (stop - cur), p.literals.len());
                    return Err(BlockFault { block: id, error: DecodeError::Invalid { what: "parsed unit", detail } });
                };
                out[cur - offset..stop - offset].copy_from_slice(literals);
                cur = stop;
            }
            if cur < end && cur < token_end {
                let stop = end.min(token_end);
                if budget == 0 {
                    let error =
                        DecodeError::DepthExceeded { bound: self.data.header.max_depth, pos: p.start + cur as u64 };
                    return Err(BlockFault { block: id, error });
                }
                let src = p.start + match_at as u64 - tok.back;
                let k0 = (cur - match_at) as u64;
                let piece = &mut out[cur - offset..stop - offset];
                if tok.rc {
                    // Bytes k0 .. k0 + n of the match are the complements of e − k0 down to e − k0 − n + 1.
                    let lo = src - k0 - (piece.len() as u64 - 1);
                    self.resolve_range_in(lo, piece, budget - 1, memo)?;
                    reverse_complement(piece);
                } else {
                    self.fill_match_piece(src, tok.back, k0, piece, budget - 1, memo)?;
                }
                cur = stop;
            }
            t += 1;
        }
        Ok(())
    }

    /// Fills `out[i] = stream[src + (k0 + i) mod back]`: the part of a periodic fill starting at phase `k0`.
    /// At most one period is resolved; the rest is replicated.
    fn fill_match_piece(
        &self,
        src: u64,
        back: u64,
        k0: u64,
        out: &mut [u8],
        budget: u8,
        memo: &mut SliceMemo,
    ) -> Result<(), BlockFault> {
        let n = out.len() as u64;
        let phase = k0 % back;
        let first = n.min(back - phase) as usize;
        self.resolve_range_in(src + phase, &mut out[..first], budget, memo)?;
        let period = n.min(back) as usize;
        if first < period {
            self.resolve_range_in(src, &mut out[first..period], budget, memo)?;
        }
        extend_period(out, period);
        Ok(())
    }
}

impl Resolver<'_> {
    /// Parses the slices of the blocks `ids` and the slices that decoding them will resolve sources through,
    /// level by level (at most `max_depth` levels), so that the resolution that follows finds them in the parsed
    /// LRU instead of running their entropy stages one after another. Each level runs on the calling thread,
    /// with pool threads helping on levels of several chunks without ever being waited for ([`SharedParse`]).
    /// Blocks with a decoded copy at hand are not entered. Parse failures are left for the resolution to report.
    /// Stops early rather than overflow the LRU, and at a level whose slices were all held before it began.
    /// `ids` must be sorted. Returns what each level did.
    pub fn parse_closure(&self, ids: &[u64]) -> ClosureStats {
        let log = self.data.header.block_log;
        let helpers = rayon::current_num_threads().saturating_sub(1).max(1);
        let mut stats = ClosureStats::default();
        let mut budget = self.parsed.capacity() / 2;
        // Slices this plan has parsed.
        let mut planned = HashSet::new();
        let mut ranges: Vec<(u64, u64)> =
            ids.iter().map(|&id| (self.data.block_start(id), u64::from(self.data.block_len(id)))).collect();
        for level in 0..=usize::from(self.data.header.max_depth) {
            let started = Instant::now();
            ranges = merge_ranges(ranges);
            // Sources in a block with a decoded copy, or in one of the blocks being decoded (a run copies from its
            // earlier blocks), need no tokens.
            ranges.retain(|&(pos, _)| {
                let id = pos >> log;
                level == 0 || !(self.decoded.contains(id) || ids.binary_search(&id).is_ok())
            });
            let missing = self.unparsed_slices(&ranges);
            if missing.len() > budget {
                stats.stopped = true;
                return stats;
            }
            budget -= missing.len();
            // A level whose slices were all parsed before this plan began (by earlier reads, whose plans went on
            // to their sources) ends the plan: a mount's LRU holds most closures after a while, and walking their
            // remaining levels (a lookup per slice and per source range) cost more than the few slices it found
            // (1500 reads at random through one archive, atha_chr1 general mode: 12 % less CPU in all). What the
            // plan leaves, the resolution parses as it reaches it.
            if level > 0 && missing.is_empty() && !self.touches(&ranges, &planned) {
                return stats;
            }
            planned.extend(missing.iter().map(|m| m.0));
            let mut level_stats = LevelStats {
                ranges: ranges.len(),
                bytes: ranges.iter().map(|r| r.1).sum(),
                slices: missing.len(),
                ..LevelStats::default()
            };
            level_stats.helped_chunks = SharedParse::run(self.data, self.parsed, missing, helpers);
            ranges = self.source_ranges(&ranges, level == 0);
            level_stats.micros = started.elapsed().as_secs_f64() * 1e6;
            stats.levels.push(level_stats);
            if ranges.is_empty() {
                return stats;
            }
        }
        stats
    }

    /// Parses the slices that resolving block `p`'s cross-block sources (`p` parsed whole) will go through and
    /// that the parsed LRU lacks, level by level, four slices at a time with their entropy stages in lock step —
    /// on this thread: the sequential decoder's workers call it, and they must not wait on rayon. Resolving a
    /// far source otherwise parses each slice alone as it reaches it, one dependency chain at a time. Sources in
    /// blocks that `decoded` has at hand (planning: [`DecodedBlocks::contains`]) need none. Stops at the first
    /// level whose slices are all held (their sources most likely are too), and rather than overflow the LRU.
    pub fn prefetch_sources(&self, p: &ParsedBlock) {
        let log = self.data.header.block_log;
        let mut ranges = Vec::new();
        for (t, tok) in p.tokens.iter().enumerate() {
            let dst = u64::from(p.token_pos[t]) + u64::from(tok.lit_len);
            let Some(src) = source_start(tok, p.start + dst) else { continue };
            if tok.match_len > 0 && src < p.start {
                // Most sources are at hand: skip them here, before any sorting.
                if !self.decoded.contains(src >> log) {
                    let read = if tok.rc { u64::from(tok.match_len) } else { tok.back.min(u64::from(tok.match_len)) };
                    ranges.push((src, (p.start - src).min(read)));
                }
            }
        }
        if ranges.is_empty() {
            return;
        }
        let mut budget = self.parsed.capacity() / 8;
        for _ in 0..usize::from(self.data.header.max_depth) {
            ranges = merge_ranges(ranges);
            ranges.retain(|&(pos, _)| !self.decoded.contains(pos >> log));
            let missing = self.unparsed_slices(&ranges);
            if missing.is_empty() || missing.len() > budget {
                return;
            }
            budget -= missing.len();
            for gs in missing.chunks(4) {
                for (g, parsed) in parse_slices(self.data, gs) {
                    if let Ok(parsed) = parsed {
                        self.parsed.parses.fetch_add(1, Ordering::Relaxed);
                        self.parsed.insert(g, Arc::new(parsed));
                    }
                }
            }
            ranges = self.source_ranges(&ranges, false);
        }
    }

    /// Whether any byte of `ranges` lies in one of the slices `planned`.
    fn touches(&self, ranges: &[(u64, u64)], planned: &HashSet<u64>) -> bool {
        let slice_log = self.data.header.slice_log;
        !planned.is_empty()
            && ranges
                .iter()
                .any(|&(pos, len)| ((pos >> slice_log)..=((pos + len - 1) >> slice_log)).any(|g| planned.contains(&g)))
    }

    /// The slices that hold bytes of `ranges` and that the parsed LRU cannot serve, each once with the end of the
    /// bytes it must serve (its offset just past the last byte of `ranges` it holds), sorted by slice.
    fn unparsed_slices(&self, ranges: &[(u64, u64)]) -> Vec<(u64, u32)> {
        let slice_log = self.data.header.slice_log;
        let slices = self.data.global_slice_count();
        let mut needs: Vec<(u64, u32)> = ranges
            .iter()
            .flat_map(|&(pos, len)| {
                let end = pos + len;
                ((pos >> slice_log)..=((end - 1) >> slice_log)).map(move |g| {
                    let slice_end = (end - (g << slice_log)).min(1 << slice_log);
                    (g, slice_end as u32)
                })
            })
            .filter(|&(g, _)| g < slices)
            .collect();
        needs.sort_unstable();
        // Sorted by slice, then end: the last of each slice's run has the largest end.
        let mut merged: Vec<(u64, u32)> = Vec::with_capacity(needs.len());
        for (g, end) in needs {
            match merged.last_mut() {
                Some(last) if last.0 == g => last.1 = end,
                _ => merged.push((g, end)),
            }
        }
        // A slice held as a prefix too short for this level is parsed whole: a second prefix could be too short
        // again at the next level.
        merged.retain_mut(|(g, end)| match self.parsed.peek(*g) {
            Some(p) if p.serves(*end) => false,
            Some(_) => {
                *end = u32::MAX;
                true
            }
            None => true,
        });
        merged
    }

    /// The stream ranges that the matches covering `ranges` copy from, in one vector (a cold read's closure has
    /// hundreds of ranges per level). With `top`, each range is a whole block being decoded, whose in-block
    /// sources come from its own output and need nothing.
    fn source_ranges(&self, ranges: &[(u64, u64)], top: bool) -> Vec<(u64, u64)> {
        let mut out = Vec::with_capacity(ranges.len() * 2);
        for &(pos, len) in ranges {
            self.sources_into(pos, len, top, &mut out);
        }
        out
    }

    /// Appends to `out` the stream ranges that the matches covering `[pos, pos + len)` copy from.
    fn sources_into(&self, pos: u64, len: u64, top: bool, out: &mut Vec<(u64, u64)>) {
        let log = self.data.header.block_log;
        let slice_log = self.data.header.slice_log;
        let (mut cur, end) = (pos, pos + len);
        while cur < end {
            let g = cur >> slice_log;
            let slice_start = g << slice_log;
            let block_start = (cur >> log) << log;
            let Some(p) = self.parsed.peek(g) else { break };
            let stop = end.min(slice_start + u64::from(p.len));
            if stop <= cur {
                break;
            }
            let (from, to) = ((cur - slice_start) as u32, (stop - slice_start) as u32);
            let mut t = p.token_at(from);
            while t < p.tokens.len() && p.token_pos[t] < to {
                let tok = p.tokens[t];
                let match_at = p.token_pos[t] + tok.lit_len;
                let (k0, k1) = (from.max(match_at), to.min(p.token_pos[t + 1]));
                if tok.match_len > 0 && k0 < k1 {
                    let src = slice_start + u64::from(match_at) - tok.back;
                    let (a, b) = (u64::from(k0 - match_at), u64::from(k1 - match_at));
                    // A periodic fill reads one period at most; bytes a .. b of a reverse complement read the
                    // source bytes e − b + 1 ..= e − a.
                    let (s, n) = if tok.rc {
                        (src + 1 - b, b - a)
                    } else if b <= tok.back {
                        (src + a, b - a)
                    } else {
                        (src, tok.back)
                    };
                    let n = if top { n.min(block_start.saturating_sub(s)) } else { n };
                    if n > 0 {
                        out.push((s, n));
                    }
                }
                t += 1;
            }
            cur = stop;
        }
    }
}

/// Slots of a [`SliceMemo`] (a power of two).
const MEMO_SLOTS: usize = 64;

/// The parsed slices one decode has looked up most recently, by slice id (direct-mapped, [`MEMO_SLOTS`] slots),
/// in front of the parsed LRU. Resolving a block's sources looks up a slice once per source piece, and in deep
/// closures (FASTA text in general mode) the pieces are a dozen bytes long and keep returning to the same
/// slices: each LRU lookup takes a shard lock, hashes and moves the entry to the front. A slot holds its slice
/// only for the one decode, so it never outlives the archive; a slot parsed as a prefix too short for a later
/// piece is looked up again.
struct SliceMemo {
    slots: [Option<(u64, Arc<ParsedBlock>)>; MEMO_SLOTS],
}

impl SliceMemo {
    fn new() -> SliceMemo {
        SliceMemo { slots: std::array::from_fn(|_| None) }
    }

    /// [`ParsedCache::get_serving`], answered from the memo when it holds slice `g` parsed far enough.
    fn get_serving(
        &mut self,
        parsed: &ParsedCache,
        data: &ArchiveData,
        g: u64,
        end: u32,
    ) -> Result<Arc<ParsedBlock>, BlockFault> {
        let slot = &mut self.slots[(g as usize) & (MEMO_SLOTS - 1)];
        if let Some((held, p)) = slot {
            if *held == g && p.serves(end) {
                return Ok(p.clone());
            }
        }
        let p = parsed.get_serving(data, g, end)?;
        *slot = Some((g, p.clone()));
        Ok(p)
    }
}

/// Refuses an output buffer that is not exactly the block's length.
fn check_out_len(id: u64, out: &[u8], len: u32) -> Result<(), BlockFault> {
    if out.len() == len as usize {
        return Ok(());
    }
    let detail = format!("{} bytes for a block of {len}", out.len());
    Err(BlockFault { block: id, error: DecodeError::Invalid { what: "output buffer", detail } })
}

/// Checks a decoded block against its `block_hash`.
fn check_hash(id: u64, out: &[u8], expected: u64) -> Result<(), BlockFault> {
    let actual = xxh3_64(out);
    if expected != actual {
        return Err(BlockFault { block: id, error: DecodeError::Checksum { expected, actual } });
    }
    Ok(())
}

/// Sorts ranges and coalesces the ones that overlap or touch.
fn merge_ranges(mut ranges: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    ranges.retain(|&(_, len)| len > 0);
    ranges.sort_unstable();
    let mut merged: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for (pos, len) in ranges {
        match merged.last_mut() {
            Some((p, l)) if pos <= *p + *l => *l = (*l).max(pos + len - *p),
            _ => merged.push((pos, len)),
        }
    }
    merged
}

/// The first stream position a match at stream position `dst` reads: `dst − back` for a forward match,
/// `dst − back − (len − 1)` for a reverse complement; `None` when it would be before position 0 (FORMAT.md §3.3).
fn source_start(tok: &Token, dst: u64) -> Option<u64> {
    let reach = if tok.rc { tok.back.checked_add(u64::from(tok.match_len).saturating_sub(1))? } else { tok.back };
    dst.checked_sub(reach)
}

/// Reverses `buf` and complements every byte ([`COMPLEMENT`]): a reverse-complement match's bytes from its
/// source range read in stream order.
pub fn reverse_complement(buf: &mut [u8]) {
    buf.reverse();
    for b in buf.iter_mut() {
        *b = COMPLEMENT[*b as usize];
    }
}

/// `out[dst + k] = out[src + (k mod (dst − src))]` for `k < len`, inside one buffer (`src < dst`).
pub fn periodic_copy_within(out: &mut [u8], src: usize, dst: usize, len: usize) {
    let back = dst - src;
    if back >= len {
        out.copy_within(src..src + len, dst);
        return;
    }
    out.copy_within(src..dst, dst);
    extend_period(&mut out[dst..dst + len], back);
}

/// Given `buf[..period]` filled, sets `buf[i] = buf[i − period]` for the rest, doubling the copied span each
/// step so a long fill of a short period costs `O(len)` bytes in `O(log len)` copies.
pub fn extend_period(buf: &mut [u8], period: usize) {
    if period == 0 {
        return;
    }
    let mut filled = period.min(buf.len());
    while filled < buf.len() {
        // Copying a whole number of periods keeps the phase aligned.
        let chunk = (filled / period * period).min(buf.len() - filled);
        buf.copy_within(0..chunk, filled);
        filled += chunk;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periodic_copy_matches_the_bytewise_definition() {
        for back in 1..9 {
            for len in 0..40 {
                let mut fast: Vec<u8> = (0..60u8).collect();
                let mut slow = fast.clone();
                let dst = 10;
                periodic_copy_within(&mut fast, dst - back, dst, len);
                for k in 0..len {
                    slow[dst + k] = slow[dst - back + k % back];
                }
                assert_eq!(fast, slow, "back {back} len {len}");
            }
        }
    }

    #[test]
    fn parsed_cache_shards_hold_at_least_the_capacity_asked_for() {
        for (asked, shards) in [(1, 1), (16, 1), (100, 1), (1000, 15), (32768, 16), (1 << 16, 16)] {
            let cache = ParsedCache::new(asked);
            assert_eq!(cache.shards.len(), shards, "{asked}");
            assert!((asked..asked + shards).contains(&cache.capacity()), "{asked}: {}", cache.capacity());
        }
        // Every slice id lands in a shard and is found there again.
        let cache = ParsedCache::new(4096);
        let unit = Arc::new(ParsedBlock {
            start: 0,
            len: 1,
            tokens: vec![Default::default()],
            token_pos: vec![0, 1],
            lit_pos: vec![0],
            literals: vec![7],
        });
        for g in [0u64, 1, 15, 16, 17, u64::MAX] {
            cache.insert(g, unit.clone());
            assert!(cache.contains(g) && cache.peek(g).is_some(), "slice {g}");
        }
        assert!(!cache.contains(2));
    }

    #[test]
    fn merge_ranges_coalesces_overlapping_and_touching() {
        let merged = merge_ranges(vec![(10, 5), (0, 3), (3, 2), (12, 10), (30, 0), (40, 1)]);
        assert_eq!(merged, vec![(0, 5), (10, 12), (40, 1)]);
    }

    #[test]
    fn extend_period_handles_ragged_ends() {
        let mut buf = *b"abc__________";
        extend_period(&mut buf, 3);
        assert_eq!(&buf, b"abcabcabcabca");
        let mut one = [7u8, 0, 0];
        extend_period(&mut one, 5);
        assert_eq!(one, [7, 0, 0]);
    }
}
