//! The CPU engine: the reference decoder of [`crate::codec::resolve`] behind [`BlockEngine`], plus the fast
//! sequential decoder used by unpack, cat and verify.
//!
//! Two ways to decode:
//!
//! - **Random access** ([`BlockEngine::decode_blocks`]): a batch is split into runs of consecutive blocks that
//!   are decoded in parallel (rayon). Inside a run, blocks are decoded in order and later blocks copy from the
//!   earlier ones; everything else is resolved through the cache or through the tokens of the slices that hold
//!   the sources (one 2 KiB slice's entropy stage per source piece, not a whole block's), depth-bounded.
//! - **Sequential** ([`CpuEngine::decode_sequential`]): the entropy stage of the next batch of blocks runs on
//!   all cores while the current batch is copied. Sources inside a window of recently decoded blocks are plain
//!   copies; older ones go through the random-access path, so memory stays bounded for any stream length.

use std::collections::VecDeque;
use std::sync::Arc;

use rayon::prelude::*;

use crate::codec::block::ParsedBlock;
use crate::codec::resolve::{
    parse_block, BlockFault, ChainDecoded, DecodedBlocks, FarSources, NoDecodedBlocks, ParsedCache, Resolver,
};
use crate::engine::BlockEngine;
use crate::error::{Error, Result};
use crate::format::ArchiveData;

/// Bytes of parsed slices the engine keeps for source lookups, unless told otherwise.
pub const DEFAULT_PARSED_CACHE_BYTES: u64 = 64 << 20;
/// Decoded bytes the sequential decoder keeps so that near sources are plain copies.
pub const DEFAULT_WINDOW_BYTES: u64 = 64 << 20;
/// Blocks whose entropy stage runs ahead of the copy stage, per batch, per core.
const PARSE_AHEAD_PER_CORE: usize = 8;

/// Decodes blocks on the CPU: the reference every other engine is checked against.
pub struct CpuEngine {
    data: Arc<ArchiveData>,
    parsed: ParsedCache,
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
        let parsed = ParsedCache::with_budget(parsed_cache_bytes, data.header.slice_size());
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
        self.check_id(id)?;
        let resolver = self.resolver(&*self.decoded);
        resolver.parse_closure(&[id]);
        resolver.decode_block(id, out).map_err(|f| f.into_error(&self.data))
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
        let end = end.min(self.data.block_count());
        if !(window.first..=window.next_id()).contains(&first) {
            *window = SeqWindow::new(first, window.cap as u64);
        }
        let mut start = first;
        while start < end && start < window.next_id() {
            let Some(block) = window.get(start) else { break };
            on_block(start, Ok(block))?;
            start += 1;
        }
        if start < window.next_id() {
            // A failed block inside the window: decode again from there (and report it again).
            *window = SeqWindow::new(start, window.cap as u64);
        }
        if start >= end {
            return Ok(());
        }
        let batch = if parallel { rayon::current_num_threads().max(1) * PARSE_AHEAD_PER_CORE } else { 1 } as u64;
        let mut parsed = self.parse_batch(start, (start + batch).min(end), parallel);
        let mut batch_start = start;
        while batch_start < end {
            let batch_end = (batch_start + batch).min(end);
            let next_end = (batch_end + batch).min(end);
            let current = std::mem::take(&mut parsed);
            if parallel && batch_end < end {
                // Parse the next batch on other cores while this thread copies the current one.
                std::thread::scope(|s| -> Result<()> {
                    let ahead = s.spawn(|| self.parse_batch(batch_end, next_end, true));
                    let copied = self.copy_batch(batch_start, current, window, parallel, &mut on_block);
                    parsed = ahead.join().map_err(|_| Error::InvalidArgument("entropy stage panicked".into()))?;
                    copied
                })?;
            } else {
                self.copy_batch(batch_start, current, window, parallel, &mut on_block)?;
                parsed = self.parse_batch(batch_end, next_end, parallel);
            }
            batch_start = batch_end;
        }
        Ok(())
    }

    /// The entropy stage of blocks `[first, end)`.
    fn parse_batch(&self, first: u64, end: u64, parallel: bool) -> Vec<Result<ParsedBlock, BlockFault>> {
        if parallel {
            (first..end).into_par_iter().map(|id| parse_block(&self.data, id)).collect()
        } else {
            (first..end).map(|id| parse_block(&self.data, id)).collect()
        }
    }

    /// The copy stage: writes each parsed block, verifies it, hands it to `on_block` and keeps it in `window`.
    /// With `parallel`, the sources that will not be in the window (older than it, or evicted while this batch
    /// is pushed) are first gathered for all blocks of the batch on all cores — resolving them can mean walking
    /// tokens through many blocks — and the sequential pass is left with plain copies.
    fn copy_batch(
        &self,
        first: u64,
        parsed: Vec<Result<ParsedBlock, BlockFault>>,
        window: &mut SeqWindow,
        parallel: bool,
        on_block: &mut impl FnMut(u64, Result<&[u8]>) -> Result<()>,
    ) -> Result<()> {
        let far: Vec<Result<FarSources, BlockFault>> = if parallel {
            // Blocks below this one may be evicted while the batch is pushed; everything from it on stays.
            let kept_from = window.first + (window.blocks.len() + parsed.len()).saturating_sub(window.cap) as u64;
            let boundary = self.data.block_start(kept_from.min(first));
            let sources = ChainDecoded(&*window, &*self.decoded);
            let resolver = self.resolver(&sources);
            parsed
                .par_iter()
                .map(|p| p.as_ref().map_err(Clone::clone).and_then(|p| resolver.gather_far(p, boundary)))
                .collect()
        } else {
            parsed.iter().map(|_| Ok(FarSources::default())).collect()
        };
        for (i, (parsed, far)) in parsed.into_iter().zip(far).enumerate() {
            let id = first + i as u64;
            let mut buf = window.recycle();
            buf.resize(self.data.block_len(id) as usize, 0);
            let decoded = parsed.and_then(|p| {
                let far = far?;
                let sources = ChainDecoded(&*window, &*self.decoded);
                self.resolver(&sources).decode_parsed_gathered(id, &p, &mut buf, &far)
            });
            match decoded {
                Ok(()) => {
                    on_block(id, Ok(&buf))?;
                    window.push(id, Some(buf));
                }
                Err(fault) => {
                    on_block(id, Err(fault.into_error(&self.data)))?;
                    window.push(id, None);
                }
            }
        }
        Ok(())
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

impl BlockEngine for CpuEngine {
    fn name(&self) -> &'static str {
        "cpu"
    }

    fn decode_blocks(&self, ids: &[u64], out: &mut [&mut [u8]]) -> Result<()> {
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

/// The most recent blocks of a sequential run (`None` for blocks that failed): near sources are plain copies
/// from here. Kept between runs by [`crate::archive::Archive`] so that consecutive files continue one window.
pub struct SeqWindow {
    first: u64,
    cap: usize,
    blocks: VecDeque<Option<Vec<u8>>>,
    spare: Option<Vec<u8>>,
}

impl SeqWindow {
    /// An empty window that will hold blocks `first ..`, at most `cap_blocks` of them.
    pub fn new(first: u64, cap_blocks: u64) -> SeqWindow {
        let cap = cap_blocks.clamp(1, 1 << 20) as usize;
        SeqWindow { first, cap, blocks: VecDeque::new(), spare: None }
    }

    /// The oldest block the window holds (or will hold first, when empty).
    pub fn first_id(&self) -> u64 {
        self.first
    }

    /// The id of the block the window expects next.
    pub fn next_id(&self) -> u64 {
        self.first + self.blocks.len() as u64
    }

    /// Block `id`'s bytes, if held and good.
    pub fn get(&self, id: u64) -> Option<&[u8]> {
        id.checked_sub(self.first).and_then(|i| self.blocks.get(i as usize)).and_then(|b| b.as_deref())
    }

    /// An empty buffer, reusing the allocation of the last evicted block.
    fn recycle(&mut self) -> Vec<u8> {
        let mut buf = self.spare.take().unwrap_or_default();
        buf.clear();
        buf
    }

    /// Appends block `id` (the next one in order).
    fn push(&mut self, id: u64, block: Option<Vec<u8>>) {
        debug_assert_eq!(id, self.next_id());
        if self.blocks.len() == self.cap {
            self.spare = self.blocks.pop_front().flatten();
            self.first += 1;
        }
        self.blocks.push_back(block);
    }
}

impl DecodedBlocks for SeqWindow {
    fn copy_out(&self, id: u64, offset: usize, out: &mut [u8]) -> bool {
        self.get(id).is_some_and(|buf| copy_from(buf, offset, out))
    }

    fn contains(&self, id: u64) -> bool {
        self.get(id).is_some()
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

    #[test]
    fn window_keeps_the_most_recent_blocks() {
        let mut w = SeqWindow::new(10, 2);
        w.push(10, Some(vec![1, 2, 3]));
        w.push(11, None);
        w.push(12, Some(vec![7, 8]));
        let mut out = [0u8; 2];
        assert!(!w.copy_out(10, 0, &mut out), "evicted");
        assert!(!w.copy_out(11, 0, &mut out), "failed block");
        assert!(w.copy_out(12, 0, &mut out));
        assert_eq!(out, [7, 8]);
        assert!(!w.copy_out(12, 1, &mut out), "out of range");
        assert!(w.recycle().capacity() >= 3);
    }
}
