//! Opening an archive and reading any byte range of any file (the random-access contract, DESIGN-NOTES §3).
//!
//! [`Archive`] ties the pieces together: the validated file ([`ArchiveData`]), the host LRU of decoded blocks
//! ([`BlockCache`]) and the engines. Every read maps its range to block ids, takes the cached ones and decodes
//! the missing ones in one engine batch (single-flight, so concurrent readers of a cold block share a decode).
//!
//! Engines: the CPU engine always exists; a GPU engine is tried when asked for (`Gpu` or `Auto`) and, when it
//! cannot start, the archive says so in one warning and serves from the CPU. Bytes from an engine other than
//! the CPU reference are checked against the block hashes here, and a block the GPU got wrong or failed on is
//! decoded again on the CPU — so a read returns correct bytes or a `CorruptBlock` error for that block only.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use xxhash_rust::xxh3::xxh3_64;

use crate::cache::{Block, BlockCache, CacheStats};
use crate::engine::auto::{AutoChooser, Pick};
use crate::engine::cpu::{CpuEngine, SeqWindow, DEFAULT_PARSED_CACHE_BYTES, DEFAULT_WINDOW_BYTES};
use crate::engine::gpu::GpuEngine;
use crate::engine::{BlockEngine, DecoderChoice};
use crate::error::{DecodeError, Error, Result};
use crate::format::tree::{EntryId, EntryKind, Tree, TRANSFORM_GENOME, TRANSFORM_STORED};
use crate::format::ArchiveData;

/// CPU batches of at most this many blocks (a random read of a few blocks) are decoded on the calling thread
/// ([`CpuEngine::decode_blocks_here`]), not handed to the pool.
pub const CALLING_THREAD_MAX_BLOCKS: usize = 4;
/// Blocks decoded per batch by a long `read_stream`, so memory stays bounded for any read size.
const READ_BATCH_BLOCKS: usize = 1024;

/// How long [`Archive::open_with`] waits for a GPU engine started in the background
/// ([`ArchiveOptions::gpu_in_background`]) before it returns with the CPU serving.
pub const GPU_START_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

/// How to open an archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ArchiveOptions {
    /// Byte budget of the decoded-block cache.
    pub cache_bytes: u64,
    pub decoder: DecoderChoice,
    /// Decoded bytes each sequential run keeps so that near sources are plain copies (see
    /// [`Archive::decode_range_sequential`]). Every concurrent run holds its own window, so a long-running
    /// process with a memory budget (the mount) sizes it from that budget.
    pub seq_window_bytes: u64,
    /// Bytes of parsed slices (entropy-stage output) the CPU engine keeps for source lookups, so that a cold
    /// read's closure does not parse the same source slices again. Like the window, a long-running process
    /// sizes it from its memory budget.
    pub parsed_cache_bytes: u64,
    /// Start the GPU engine on a thread of its own, wait for it at most [`GPU_START_WAIT`], and serve from the CPU
    /// until it is ready, instead of waiting for it however long it takes. A long-running process (the mount)
    /// wants this: on a machine that has not built this build's kernels yet, the GPU start is ~35–42 s of NVRTC
    /// and module loading (H200, session 35), and a mount must not wait for it; where the kernels are cached the
    /// engine is ready in ~0.4 s, within the wait, so a fresh mount's first reader still gets the GPU. A one-shot
    /// command (`aceapex cat --decoder gpu`) keeps the default and decodes on the GPU from its first block.
    pub gpu_in_background: bool,
}

impl Default for ArchiveOptions {
    fn default() -> Self {
        ArchiveOptions {
            cache_bytes: 256 << 20,
            decoder: DecoderChoice::Auto,
            seq_window_bytes: DEFAULT_WINDOW_BYTES,
            parsed_cache_bytes: DEFAULT_PARSED_CACHE_BYTES,
            gpu_in_background: false,
        }
    }
}

/// An opened archive. `Send + Sync`: one instance serves every thread of a filesystem.
///
/// Call it from ordinary threads, not from inside rayon tasks: a reader waiting for another reader's decode
/// blocks its thread, and the CPU engine decodes on the global rayon pool, whose workers could otherwise end up
/// waiting on each other.
pub struct Archive {
    data: Arc<ArchiveData>,
    cache: Arc<BlockCache>,
    cpu: CpuEngine,
    /// The GPU engine once it has started (set at most once: at open, or by the thread that starts it in the
    /// background, see [`ArchiveOptions::gpu_in_background`]); until then every batch goes to the CPU.
    gpu: Arc<OnceLock<Box<dyn BlockEngine>>>,
    choice: DecoderChoice,
    /// With `DecoderChoice::Auto` and a GPU: which engine has been faster for each batch size (engine/auto.rs).
    auto: AutoChooser,
    /// Set once a GPU failure has been logged, so a failing GPU does not flood the log.
    gpu_failure_logged: AtomicBool,
    /// Blocks the GPU failed on or got wrong, decoded again on the CPU.
    gpu_fallbacks: AtomicU64,
    /// The recent blocks of the last sequential run, so that the next one (the next file of an unpack) continues
    /// it. Taken out while a run uses it; concurrent runs start their own.
    seq_window: Mutex<Option<SeqWindow>>,
    seq_window_bytes: u64,
    /// Genome-mode files opened so far: their piece tables, and the structure pieces decoded recently.
    genomes: genome_files::GenomeFiles,
}

impl Archive {
    /// Opens with the default options (256 MiB cache, decoder `auto`).
    pub fn open(path: impl AsRef<std::path::Path>) -> Result<Archive> {
        Archive::open_with(path, ArchiveOptions::default())
    }

    pub fn open_with(path: impl AsRef<std::path::Path>, options: ArchiveOptions) -> Result<Archive> {
        let data = Arc::new(ArchiveData::open(path)?);
        if options.decoder == DecoderChoice::Cpu {
            return Ok(Archive::with_engines(data, options, None));
        }
        if !options.gpu_in_background {
            let gpu = start_gpu(&data, options.decoder);
            return Ok(Archive::with_engines(data, options, gpu));
        }
        let archive = Archive::with_engines(data.clone(), options, None);
        let slot = archive.gpu.clone();
        let (done, finished) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new().name("gpu-start".into()).spawn(move || {
            let started = std::time::Instant::now();
            if let Some(gpu) = start_gpu(&data, options.decoder) {
                let secs = started.elapsed().as_secs_f64();
                tracing::info!("the GPU engine is ready after {secs:.1} s; batches go to it from now on");
                // Nothing else sets the slot of an archive opened in the background.
                let _ = slot.set(gpu);
            }
            let _ = done.send(());
        });
        match spawned {
            // Ready (or failed) within the wait, or still starting: either way the archive serves now.
            Ok(_) => drop(finished.recv_timeout(GPU_START_WAIT)),
            Err(e) => tracing::warn!("the GPU engine could not be started ({e}); decoding on the CPU"),
        }
        Ok(archive)
    }

    /// An archive over `data` whose non-reference engine is `gpu` (used as `options.decoder` says; `None`
    /// serves everything from the CPU). [`Archive::open_with`] passes the real GPU engine; tests pass engines
    /// that fail or lie, to check that every read still returns the CPU reference's bytes.
    #[doc(hidden)]
    pub fn with_engines(data: Arc<ArchiveData>, options: ArchiveOptions, gpu: Option<Box<dyn BlockEngine>>) -> Archive {
        let cache = Arc::new(BlockCache::new(options.cache_bytes));
        let cpu = CpuEngine::with_decoded(data.clone(), cache.clone(), options.parsed_cache_bytes);
        let slot = OnceLock::new();
        if let (Some(gpu), false) = (gpu, options.decoder == DecoderChoice::Cpu) {
            let _ = slot.set(gpu);
        }
        let gpu = Arc::new(slot);
        Archive {
            data,
            cache,
            cpu,
            gpu,
            choice: options.decoder,
            auto: AutoChooser::new(),
            gpu_failure_logged: AtomicBool::new(false),
            gpu_fallbacks: AtomicU64::new(0),
            seq_window_bytes: options.seq_window_bytes,
            seq_window: Mutex::new(None),
            genomes: genome_files::GenomeFiles::default(),
        }
    }

    pub fn data(&self) -> &Arc<ArchiveData> {
        &self.data
    }

    pub fn tree(&self) -> &Tree {
        &self.data.tree
    }

    /// Logical stream length.
    pub fn total_len(&self) -> u64 {
        self.data.footer.total_len
    }

    /// Whether large ranges are better read as batches through the engine (a GPU is in use) than with the
    /// CPU's sequential decoder.
    pub fn prefers_batches(&self) -> bool {
        self.gpu.get().is_some()
    }

    /// Bytes of decoded blocks a sequential decode may hold ahead of its consumer (the sequential window).
    pub fn seq_window_bytes(&self) -> u64 {
        self.seq_window_bytes
    }

    /// "cpu", "gpu", or "gpu+cpu" (auto with a working GPU: each batch to the engine measured faster for its size);
    /// "cpu" while a GPU engine is still starting in the background.
    pub fn engine_name(&self) -> &'static str {
        match (self.gpu.get(), self.choice) {
            (None, _) | (Some(_), DecoderChoice::Cpu) => "cpu",
            (Some(_), DecoderChoice::Auto) => "gpu+cpu",
            (Some(_), DecoderChoice::Gpu) => "gpu",
        }
    }

    pub fn stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// The decoded-block cache. Whoever decodes blocks of this archive by other means (the mount's stream runs)
    /// puts them here, so that they serve random reads and sources too, within the one byte budget.
    pub fn cache(&self) -> &Arc<BlockCache> {
        &self.cache
    }

    /// Slice entropy-stage runs the CPU engine's random-access path has done so far (the work cold reads caused:
    /// the slices of the blocks they decoded and of every source their closures reached).
    pub fn slices_parsed(&self) -> u64 {
        self.cpu.slices_parsed()
    }

    /// Blocks a non-reference engine failed on or got wrong and the CPU decoded again.
    pub fn gpu_fallbacks(&self) -> u64 {
        self.gpu_fallbacks.load(Ordering::Relaxed)
    }

    /// Fills `buf` with stream bytes `[pos, pos + buf.len())`, which must lie inside the stream.
    pub fn read_stream(&self, pos: u64, buf: &mut [u8]) -> Result<()> {
        self.read_stream_by(pos, buf, |missing| self.decode_batch(missing))
    }

    /// [`Archive::read_stream`] with the blocks not cached decoded on the CPU, whatever the decoder: for a
    /// thread that a GPU stream's sink may be waiting for, while that stream holds the device.
    fn read_stream_on_cpu(&self, pos: u64, buf: &mut [u8]) -> Result<()> {
        self.read_stream_by(pos, buf, |missing| missing.iter().map(|&id| self.decode_on_cpu(id)).collect())
    }

    fn read_stream_by(&self, pos: u64, buf: &mut [u8], decode: impl Fn(&[u64]) -> Vec<Result<Block>>) -> Result<()> {
        let end = self.checked_end(pos, buf.len() as u64)?;
        if buf.is_empty() {
            return Ok(());
        }
        let log = self.data.header.block_log;
        let ids: Vec<u64> = ((pos >> log)..=((end - 1) >> log)).collect();
        let mut written = 0usize;
        for chunk in ids.chunks(READ_BATCH_BLOCKS) {
            let blocks = self.cache.get_many(chunk, &decode)?;
            for (&id, block) in chunk.iter().zip(&blocks) {
                let block_start = self.data.block_start(id);
                let from = (pos + written as u64 - block_start) as usize;
                let take = (buf.len() - written).min(block.len() - from);
                buf[written..written + take].copy_from_slice(&block[from..from + take]);
                written += take;
            }
        }
        Ok(())
    }

    /// Reads file `id` at `offset` into `buf`: the number of bytes read (short at end of file, 0 past it).
    pub fn read_file(&self, id: EntryId, offset: u64, buf: &mut [u8]) -> Result<usize> {
        if let Some(EntryKind::File { offset: at, size, transform: TRANSFORM_GENOME }) =
            self.tree().entry(id).map(|e| &e.kind)
        {
            return self.read_genome_file(id, *at, *size, offset, buf);
        }
        let (start, size) = self.file_range(id)?;
        if offset >= size {
            return Ok(0);
        }
        let n = (size - offset).min(buf.len() as u64) as usize;
        self.read_stream(start + offset, &mut buf[..n])?;
        Ok(n)
    }

    /// The stream range `(offset, size)` of regular file `id`, whose bytes are stored as they are (transform 0;
    /// a genome-mode file has no such range: read it with [`Archive::read_file`] or
    /// [`Archive::stream_genome_file`]).
    pub fn file_range(&self, id: EntryId) -> Result<(u64, u64)> {
        let tree = self.tree();
        let entry = tree.entry(id).ok_or_else(|| Error::NotFound(format!("entry {id}")))?;
        let name = || String::from_utf8_lossy(&tree.path_of(id)).into_owned();
        match entry.kind {
            EntryKind::File { offset, size, transform: TRANSFORM_STORED } => Ok((offset, size)),
            EntryKind::File { .. } => {
                Err(Error::InvalidArgument(format!("{}: a transformed file has no stream range", name())))
            }
            EntryKind::Dir => Err(Error::IsDirectory(name())),
            EntryKind::Symlink { .. } => Err(Error::InvalidArgument(format!("{}: is a symlink", name()))),
        }
    }

    /// Decoded block `id`, through the cache.
    pub fn block(&self, id: u64) -> Result<Block> {
        self.check_block_id(id)?;
        self.cache.get_or_decode(id, || {
            self.decode_batch(&[id]).pop().unwrap_or_else(|| Err(Error::InvalidArgument("empty batch".into())))
        })
    }

    /// Decodes the blocks of `ids` that are not cached in ONE engine batch and caches them (readahead). Ids
    /// past the end are ignored; failures are not reported here (the read that needs the block reports them).
    pub fn prefetch(&self, ids: &[u64]) {
        let mut ids: Vec<u64> = ids.iter().copied().filter(|&id| id < self.data.block_count()).collect();
        ids.sort_unstable();
        ids.dedup();
        self.cache.prefetch(&ids, |missing| self.decode_batch(missing));
    }

    /// Decodes every block (on all cores) twice, in stream order and as cold random reads within the depth bound
    /// ([`CpuEngine::verify_cold_reads`]), checks every genome-mode file's structure, and returns every failure
    /// (the blocks' sorted by block).
    pub fn verify(&self) -> Vec<Error> {
        self.verify_with(true)
    }

    /// [`Archive::verify`], with the cold reads only when `cold_reads` (`aceapex verify --sequential-only` skips
    /// them). On 2 cores they take 1.4 times the stream-order pass on atha_chr1 genome mode, 4.6 times in general
    /// mode, 11.6 times on 1.1 GB of generated related genomes (2.3 against 27 s): a cold read there follows
    /// chains of copies far back, and a parsed-slice cache 32 times larger took only 13 % off.
    pub fn verify_with(&self, cold_reads: bool) -> Vec<Error> {
        let mut errors = self.cpu.verify_all();
        if cold_reads {
            // Cold reads fail on the blocks the sequential pass named already (and on the blocks whose sources
            // lie in them, naming them again): only what names another block is new, once per block.
            let mut named: std::collections::HashSet<u64> = errors.iter().filter_map(Error::block).collect();
            for error in self.cpu.verify_cold_reads() {
                if error.block().is_some_and(|block| named.insert(block)) {
                    errors.push(error);
                }
            }
            errors.sort_by_key(|e| e.block().unwrap_or(u64::MAX));
        }
        errors.extend(self.verify_genome_files());
        errors
    }

    /// Streams bytes `[start, start + len)` to `sink` in order, with the sequential decoder (entropy stage on
    /// all cores ahead of the copy stage). For unpack and cat of large files; bypasses the block cache.
    ///
    /// A range that does not continue the previous run starts decoding at its own first block, never before:
    /// its sources older than the window are resolved through the tokens of the slices that hold them (the
    /// random-access path, within the depth bound), so the work is proportional to the range, not to where it
    /// lies in the stream. (Format v1 decoded up to 256 MiB of stream prefix instead, because resolving a source
    /// then cost the entropy stage of a whole block.)
    pub fn decode_range_sequential(
        &self,
        start: u64,
        len: u64,
        mut sink: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let end = self.checked_end(start, len)?;
        if len == 0 {
            return Ok(());
        }
        let log = self.data.header.block_log;
        let (first, last) = (start >> log, (end - 1) >> log);
        self.decode_blocks_sequential(first, last + 1, |id, block| {
            let block = block?;
            let block_start = self.data.block_start(id);
            let from = start.saturating_sub(block_start) as usize;
            let to = (end - block_start).min(block.len() as u64) as usize;
            sink(&block[from..to])
        })
    }

    /// Hands blocks `first..end` (whole, in order) to `on_block` from the CPU's sequential decoder, continuing
    /// the archive's window as [`Archive::decode_range_sequential`] does; each block is the one the window keeps
    /// (see [`CpuEngine::decode_sequential_blocks`]), so a caller that keeps it shares it rather than copying.
    pub fn decode_blocks_sequential(
        &self,
        first: u64,
        end: u64,
        on_block: impl FnMut(u64, Result<&Block>) -> Result<()>,
    ) -> Result<()> {
        let end = end.min(self.data.block_count());
        if first >= end {
            return Ok(());
        }
        let log = self.data.header.block_log;
        let taken = self.seq_window.lock().unwrap_or_else(|p| p.into_inner()).take();
        // A window that does not reach `first` is replaced by the decoder itself (it starts at `first`).
        let mut window = taken.unwrap_or_else(|| SeqWindow::new(first, (self.seq_window_bytes >> log).max(1)));
        // Blocks still in the window are handed out again, not decoded.
        let reused = match window.get(first) {
            Some(_) => window.next_id().min(end) - first,
            None => 0,
        };
        let mut handed = 0u64;
        let mut on_block = on_block;
        let parsed_before = self.cpu.slices_parsed();
        let result = self.cpu.decode_sequential_blocks(&mut window, first, end, true, |id, block| {
            handed += 1;
            on_block(id, block)
        });
        // Sources older than the window cost slice parses: how many says how much of the run went through tokens.
        tracing::debug!(
            "sequential run {first}..{end}: {handed} blocks, {} slices parsed for sources older than the window",
            self.cpu.slices_parsed() - parsed_before
        );
        *self.seq_window.lock().unwrap_or_else(|p| p.into_inner()) = Some(window);
        self.cache.record_decodes(self.cpu.name(), handed.saturating_sub(reused));
        result
    }

    /// Hands blocks `first..end` to `sink` in order, whole, from the GPU's whole-range decode (the stream
    /// decoded device-resident once, then copied out) when a GPU decodes this archive's batches; `None` when no
    /// engine here has a whole-range path, and the caller decodes sequentially on the CPU instead. A block the
    /// GPU got wrong is decoded again on the CPU first; an `Err` means the GPU could not go on (logged once, and
    /// the caller carries on from the blocks it has) or `sink` failed.
    pub fn stream_blocks(&self, first: u64, end: u64, sink: &mut dyn FnMut(&[u8]) -> Result<()>) -> Option<Result<()>> {
        let gpu = self.gpu.get()?;
        let redo = |id: u64, out: &mut [u8]| self.cpu.decode_block(id, out);
        let mut handed = 0u64;
        let block_log = self.data.header.block_log;
        let result = gpu.stream_blocks(first, end, &redo, &mut |bytes| {
            handed += (bytes.len() as u64).div_ceil(1 << block_log);
            sink(bytes)
        })?;
        self.cache.record_decodes(gpu.name(), handed);
        if let Err(e @ Error::Gpu(_)) = &result {
            self.log_gpu_failure(e);
        }
        Some(result)
    }

    fn checked_end(&self, pos: u64, len: u64) -> Result<u64> {
        pos.checked_add(len).filter(|&end| end <= self.total_len()).ok_or_else(|| {
            Error::InvalidArgument(format!("range {pos}+{len} is outside the stream of {} bytes", self.total_len()))
        })
    }

    fn check_block_id(&self, id: u64) -> Result<()> {
        if id >= self.data.block_count() {
            return Err(Error::InvalidArgument(format!("block {id} of {}", self.data.block_count())));
        }
        Ok(())
    }

    /// The engine for a batch of `n` blocks, whether it is the CPU reference, and (decoder `auto` with a GPU) the
    /// choice to report the batch's time to.
    fn engine_for(&self, n: usize) -> (&dyn BlockEngine, bool, Option<Pick>) {
        match (self.gpu.get(), self.choice) {
            (Some(gpu), DecoderChoice::Gpu) => (gpu.as_ref(), false, None),
            (Some(gpu), DecoderChoice::Auto) => match self.auto.pick(n) {
                Pick::Gpu => (gpu.as_ref(), false, Some(Pick::Gpu)),
                Pick::Cpu => (&self.cpu, true, Some(Pick::Cpu)),
            },
            _ => (&self.cpu, true, None),
        }
    }

    /// Which engine `auto` has measured faster for each batch size (empty unless decoder `auto` has a GPU).
    pub fn auto_choices(&self) -> Vec<crate::engine::auto::ClassSnapshot> {
        match (self.gpu.get(), self.choice) {
            (Some(_), DecoderChoice::Auto) => self.auto.snapshot(),
            _ => Vec::new(),
        }
    }

    /// Decodes `ids` (each `< block_count`) in one engine batch: one outcome per id. If the batch fails, each
    /// block is decoded alone on the CPU, so one bad block does not fail its neighbours.
    fn decode_batch(&self, ids: &[u64]) -> Vec<Result<Block>> {
        let (engine, is_cpu, pick) = self.engine_for(ids.len());
        let started = std::time::Instant::now();
        // `auto` learns from every batch an engine answered in full (a failed batch's time says nothing).
        let learn = |ok: bool| {
            if let (Some(pick), true) = (pick, ok) {
                self.auto.record(ids.len(), pick, started.elapsed());
            }
        };
        if let ([id], true) = (ids, is_cpu) {
            // One block (a cold random read): decoded on the calling thread. The batch path hands its one run to
            // the rayon pool and sleeps until a pool thread has run it, two thread wake-ups per cold read.
            let block = self.decode_on_cpu(*id);
            learn(block.is_ok());
            return vec![block];
        }
        let mut bufs: Vec<Vec<u8>> = ids.iter().map(|&id| vec![0u8; self.data.block_len(id) as usize]).collect();
        let mut outs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
        let result = if is_cpu && ids.len() <= CALLING_THREAD_MAX_BLOCKS {
            self.cpu.decode_blocks_here(ids, &mut outs)
        } else {
            engine.decode_blocks(ids, &mut outs)
        };
        match result {
            Ok(()) => {
                learn(true);
                self.cache.record_decodes(engine.name(), ids.len() as u64);
                ids.iter().zip(bufs).map(|(&id, buf)| self.checked_engine_output(id, buf, is_cpu)).collect()
            }
            Err(e) if is_cpu && ids.len() == 1 => vec![Err(e)],
            Err(e) => {
                // A corrupt block fails a batch on any engine; only an engine failure is worth a warning.
                if matches!(e, Error::Gpu(_)) {
                    self.log_gpu_failure(&e);
                }
                if !is_cpu {
                    self.gpu_fallbacks.fetch_add(ids.len() as u64, Ordering::Relaxed);
                }
                ids.iter().map(|&id| self.decode_on_cpu(id)).collect()
            }
        }
    }

    /// Checks a non-reference engine's block against its hash; a mismatch is decoded again on the CPU.
    fn checked_engine_output(&self, id: u64, buf: Vec<u8>, is_cpu: bool) -> Result<Block> {
        if is_cpu {
            return Ok(buf.into());
        }
        let expected = self.data.block_hash[id as usize];
        let actual = xxh3_64(&buf);
        if expected == actual {
            return Ok(buf.into());
        }
        self.gpu_fallbacks.fetch_add(1, Ordering::Relaxed);
        let redone = self.decode_on_cpu(id);
        if redone.is_ok() {
            // The CPU reference got the right bytes, so the other engine was wrong.
            let detail = format!("block {id}: {}", DecodeError::Checksum { expected, actual });
            self.log_gpu_failure(&Error::Gpu(detail));
        }
        redone
    }

    fn decode_on_cpu(&self, id: u64) -> Result<Block> {
        let mut buf = vec![0u8; self.data.block_len(id) as usize];
        self.cpu.decode_block(id, &mut buf)?;
        self.cache.record_decodes(self.cpu.name(), 1);
        Ok(buf.into())
    }

    fn log_gpu_failure(&self, error: &Error) {
        if !self.gpu_failure_logged.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                archive = %self.data.path.display(),
                "GPU engine failed ({error}); decoding on the CPU instead (further GPU failures are not logged)"
            );
        }
    }
}

/// Tries to start the GPU engine; on failure logs one warning and returns `None` (the CPU engine serves).
fn start_gpu(data: &Arc<ArchiveData>, choice: DecoderChoice) -> Option<Box<dyn BlockEngine>> {
    match GpuEngine::try_new(data.clone()) {
        Ok(gpu) => Some(Box::new(gpu)),
        Err(e) => {
            let asked = if choice == DecoderChoice::Gpu { "decoder=gpu was requested but " } else { "" };
            tracing::warn!("{asked}the GPU engine is unavailable ({e}); decoding on the CPU");
            None
        }
    }
}

mod genome_files;
mod streaming;
pub use genome_files::OPEN_STRUCTURE_BYTES;
#[cfg(test)]
mod tests;
