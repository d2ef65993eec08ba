//! The archive as a [`Backend`]: regular files' byte ranges mapped onto blocks of the logical stream, blocks
//! served from the shared cache and decoded by the CPU engine on a miss (batched for readahead).
//!
//! This is the filesystem's direct binding to the archive pieces ([`ArchiveData`], [`BlockCache`],
//! [`CpuEngine`]); it only needs what FORMAT.md §2.5 says about files (stored bytes at
//! `[offset, offset + size)` of the stream).

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use super::Backend;
use crate::cache::{Block, BlockCache};
use crate::engine::cpu::CpuEngine;
use crate::engine::BlockEngine;
use crate::error::{Error, Result};
use crate::format::tree::{EntryId, EntryKind, Tree};
use crate::format::ArchiveData;

/// An opened archive served through a block cache.
pub struct ArchiveBackend {
    data: Arc<ArchiveData>,
    cache: Arc<BlockCache>,
    engine: CpuEngine,
}

impl ArchiveBackend {
    /// Opens and validates the archive at `path` (every section checksum; block payloads are checked as they
    /// are decoded), with a decoded-block cache of `cache_bytes`.
    pub fn open(path: &Path, cache_bytes: u64) -> Result<ArchiveBackend> {
        let data = Arc::new(ArchiveData::open(path)?);
        let cache = Arc::new(BlockCache::new(cache_bytes));
        let engine = CpuEngine::with_decoded(Arc::clone(&data), Arc::clone(&cache) as _);
        Ok(ArchiveBackend { data, cache, engine })
    }

    pub fn data(&self) -> &Arc<ArchiveData> {
        &self.data
    }

    /// Stored-bytes stream range of file `id`, or an error for anything else.
    fn file_range(&self, id: EntryId) -> Result<(u64, u64)> {
        match self.data.tree.entry(id).map(|e| &e.kind) {
            Some(EntryKind::File { offset, size, transform: 0 }) => Ok((*offset, *size)),
            Some(EntryKind::File { transform, .. }) => {
                Err(Error::InvalidArgument(format!("entry {id}: file transform {transform} is not supported")))
            }
            Some(_) => Err(Error::IsDirectory(format!("entry {id}"))),
            None => Err(Error::NotFound(format!("entry {id}"))),
        }
    }

    fn decode_one(&self, id: u64) -> Result<Block> {
        let mut out = vec![0u8; self.data.block_len(id) as usize];
        self.engine.decode_block(id, &mut out)?;
        self.cache.record_decodes(self.engine.name(), 1);
        Ok(out.into())
    }

    fn decode_batch(&self, ids: &[u64]) -> Vec<Result<Block>> {
        let mut bufs: Vec<Vec<u8>> = ids.iter().map(|&id| vec![0u8; self.data.block_len(id) as usize]).collect();
        let mut slices: Vec<&mut [u8]> = bufs.iter_mut().map(Vec::as_mut_slice).collect();
        match self.engine.decode_blocks(ids, &mut slices) {
            Ok(()) => {
                self.cache.record_decodes(self.engine.name(), ids.len() as u64);
                bufs.into_iter().map(|b| Ok(b.into())).collect()
            }
            // A batch fails as a whole; decode one by one so that good blocks still land in the cache.
            Err(_) => ids.iter().map(|&id| self.decode_one(id)).collect(),
        }
    }
}

impl Backend for ArchiveBackend {
    fn tree(&self) -> &Tree {
        &self.data.tree
    }

    fn read_file(&self, id: EntryId, offset: u64, buf: &mut [u8]) -> Result<usize> {
        let (start, size) = self.file_range(id)?;
        if offset >= size || buf.is_empty() {
            return Ok(0);
        }
        let len = (size - offset).min(buf.len() as u64) as usize;
        let block_log = self.data.header.block_log;
        let first = start + offset;
        let last = first + len as u64 - 1;
        let ids: Vec<u64> = ((first >> block_log)..=(last >> block_log)).collect();
        let blocks = self.cache.get_many(&ids, |missing| self.decode_batch(missing))?;
        let mut done = 0;
        for (id, block) in ids.iter().zip(&blocks) {
            let block_start = id << block_log;
            let from = (first + done as u64 - block_start) as usize;
            let take = (block.len().saturating_sub(from)).min(len - done);
            if take == 0 {
                return Err(Error::InvalidArgument(format!("block {id} is shorter than the file says")));
            }
            buf[done..done + take].copy_from_slice(&block[from..from + take]);
            done += take;
        }
        Ok(done)
    }

    fn blocks_for(&self, id: EntryId, range: Range<u64>) -> Range<u64> {
        let Ok((start, size)) = self.file_range(id) else { return 0..0 };
        let (from, to) = (range.start.min(size), range.end.min(size));
        if from >= to {
            return 0..0;
        }
        let block_log = self.data.header.block_log;
        ((start + from) >> block_log)..((start + to - 1) >> block_log) + 1
    }

    fn prefetch(&self, blocks: &[u64]) -> Result<()> {
        let ids: Vec<u64> = blocks.iter().copied().filter(|&b| b < self.data.block_count()).collect();
        self.cache.prefetch(&ids, |missing| self.decode_batch(missing));
        Ok(())
    }

    fn stats_json(&self) -> serde_json::Value {
        serde_json::json!({
            "engine": self.engine.name(),
            "block_size": self.data.header.block_size(),
            "blocks": self.data.block_count(),
            "cache": self.cache.stats(),
        })
    }

    fn source_name(&self) -> String {
        self.data.path.display().to_string()
    }

    fn total_len(&self) -> u64 {
        self.data.footer.total_len
    }

    fn block_size(&self) -> u32 {
        self.data.header.block_size() as u32
    }
}
