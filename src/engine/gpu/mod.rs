//! The GPU engine: NVRTC-compiled seek kernels from `kernels/`, driven through cudarc.
//!
//! [`GpuEngine::try_new`] loads the driver and NVRTC at run time, compiles kernels/decode.cu once per process for
//! the GPU's own architecture, and uploads the archive's payloads, per-slice metadata (prep.rs) and decode
//! tables. The device works on slices (FORMAT.md §3): a thread (or, for the seek's token parse, a warp) parses
//! one slice, and each of its one or two rANS lanes (FORMAT.md §3.4) decodes its literals on a thread, the two at
//! once in the full decode of few slices. A batch of blocks is decoded by one launch sequence (see the kernel
//! file's overview): the requested blocks' slices are parsed, the source ranges their matches need are found
//! level by level (at most `max_depth` levels) and only the slices holding them are parsed too, and every
//! requested byte is resolved to a literal. Results come back through pinned memory and
//! are checked against the index's xxh3 before they are returned: this engine never hands out wrong bytes.
//!
//! Resident seeks (device/resident.rs): on the first seek, when it fits in device memory, every slice of the
//! archive is parsed once (tokens and literals stay device-resident, about a millisecond for a 31 MB archive);
//! from then on a batch resolves its requested bytes through those tokens in one launch, with no parse levels.
//!
//! Without a GPU, driver or NVRTC, `try_new` fails fast with a one-line reason (never a panic) and the caller
//! uses the CPU engine. A failed batch returns `Err` and the caller decodes it on the CPU.
//!
//! Large ranges (`cat`/`unpack` of big files) take [`GpuEngine::stream_blocks`] instead: the whole stream is
//! decoded device-resident once, then streamed out through two pinned buffers, every block checked against the
//! index and any block that fails decoded again by the caller's CPU fallback.
//!
//! Fault injection (testing the fallbacks on a real GPU): `ACEAPEX_GPU_FAULT=fail:N` makes every Nth batch (a
//! seek batch, or a 4 MiB piece of a streamed range) fail as a driver error would, `corrupt:N` flips a byte of
//! every Nth batch's device output before the checksum check. Read once at engine start and logged.

mod device;
mod kernel_cache;
pub mod prep;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_64;

use device::Device;
pub use device::{
    compile_check, kernel_source, FullRun, FullVariant, KernelFault, LevelReport, ResidentSeeks, Resolve,
};

use crate::engine::{BlockEngine, BytesSink, Redo};
use crate::error::{Error, Result};
use crate::format::ArchiveData;

/// Decodes blocks on an NVIDIA GPU. Construction fails (with a message for one log line) when there is no GPU,
/// no driver or no NVRTC; callers then use the CPU engine. Clones share the one device.
#[derive(Clone)]
pub struct GpuEngine {
    data: Arc<ArchiveData>,
    device: Arc<Mutex<Device>>,
    description: String,
    fault: Option<InjectedFault>,
    /// Batches started (seek batches and streamed pieces), for the fault injection's "every Nth".
    batches: Arc<AtomicU64>,
    /// Set once a streamed range's GPU failure was logged (the archive logs the seek batches' own).
    stream_failure_logged: Arc<AtomicBool>,
}

/// Runs `op` (parallel work done while the device lock is held: checking blocks copied out of the device, a
/// stream's sink copying them into cache windows) on a rayon pool of its own, so that its parallel iterators use
/// that pool's threads. Why not the global pool: its threads may themselves be waiting for the device lock (a
/// mount's read-ahead decoding genome structure pieces through the GPU), and work the lock's holder queued
/// behind them would never run. The mount hung that way on the H200 (session 17, run 1: `dd` of the 1.16 GB
/// file stopped after 126 reads). Without that pool (it could not be built), `op` runs on the calling thread's
/// pool.
pub fn on_device_pool<R: Send>(op: impl FnOnce() -> R + Send) -> R {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    let pool = POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism().map_or(4, |n| n.get());
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .thread_name(|i| format!("acx-device-{i}"))
            .build()
            .inspect_err(|e| tracing::debug!("no pool of its own for the device's parallel work: {e}"))
            .ok()
    });
    match pool {
        Some(pool) => pool.install(op),
        None => op(),
    }
}

/// Seek batches of at least this many blocks are copied out and checked on all cores.
const PARALLEL_CHECK_BLOCKS: usize = 16;

/// Bytes of a streamed range copied out per piece (a multiple of every block size the format allows): the size of
/// the device's pinned pair (device.rs `STREAM_PIN_MIN`), so no stream pins more.
const STREAM_PIECE: usize = 4 << 20;

/// A fault injected into every Nth GPU batch (`ACEAPEX_GPU_FAULT`), to show on a real GPU that a failing or
/// lying device never makes wrong bytes reach a reader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum InjectedFault {
    /// The batch fails as a launch or copy error would (`fail:N`).
    Fail(u64),
    /// One byte of the batch's device output is flipped before the checksum check (`corrupt:N`).
    Corrupt(u64),
}

impl InjectedFault {
    /// Parses `fail:N` or `corrupt:N` (N >= 1).
    pub fn parse(spec: &str) -> std::result::Result<InjectedFault, String> {
        let (kind, n) = spec.split_once(':').ok_or_else(|| format!("{spec:?}: expected fail:N or corrupt:N"))?;
        let n: u64 = n.parse().ok().filter(|&n| n >= 1).ok_or_else(|| format!("{spec:?}: N must be >= 1"))?;
        match kind {
            "fail" => Ok(InjectedFault::Fail(n)),
            "corrupt" => Ok(InjectedFault::Corrupt(n)),
            _ => Err(format!("{spec:?}: expected fail:N or corrupt:N")),
        }
    }

    fn every(&self) -> u64 {
        match *self {
            InjectedFault::Fail(n) | InjectedFault::Corrupt(n) => n,
        }
    }

    /// The fault to inject into batch number `batch` (counted from 1), if any.
    fn at(self, batch: u64) -> Option<InjectedFault> {
        (batch % self.every() == 0).then_some(self)
    }
}

/// Reads `ACEAPEX_GPU_FAULT` once (at engine start) and logs what it injects.
fn injected_fault_from_env() -> Option<InjectedFault> {
    let spec = std::env::var("ACEAPEX_GPU_FAULT").ok()?;
    match InjectedFault::parse(&spec) {
        Ok(fault) => {
            tracing::warn!("ACEAPEX_GPU_FAULT={spec}: injecting {fault:?} into every Nth GPU batch (testing only)");
            Some(fault)
        }
        Err(e) => {
            tracing::warn!("ACEAPEX_GPU_FAULT ignored: {e}");
            None
        }
    }
}

/// What [`GpuEngine::stream_blocks`] did.
#[derive(Debug, Clone, Copy, Default)]
pub struct StreamReport {
    /// Device time of the complete decode (0 when an earlier call left it resident).
    pub decode_ms: f32,
    /// Blocks whose GPU bytes failed (an injected fault or a checksum mismatch) and were decoded by the fallback.
    pub blocks_redone: u64,
    /// Wall time of the call: waiting for the engine's lock, the complete decode (allocation included), the
    /// copies, the checks and the sink (where the mount's stream time goes; logged at debug level).
    pub lock_ms: f64,
    pub full_ms: f64,
    pub copy_ms: f64,
    pub check_ms: f64,
    pub sink_ms: f64,
}

/// Device-side timing of one seek batch.
#[derive(Debug, Clone, Copy)]
pub struct BatchTiming {
    /// From the id upload to the results in pinned host memory, by device events.
    pub device_ms: f32,
}

/// Checks that the CUDA driver and NVRTC libraries can be loaded, so that cudarc's loaders (which panic when a
/// library is missing) are only reached when they will succeed.
fn libraries_present() -> Result<()> {
    // SAFETY: these only try to dlopen the libraries by name and drop the handles; no symbol is called.
    let (driver, nvrtc) = unsafe { (cudarc::driver::sys::is_culib_present(), cudarc::nvrtc::sys::is_culib_present()) };
    match (driver, nvrtc) {
        (true, true) => Ok(()),
        (false, _) => Err(Error::Gpu("the CUDA driver library (libcuda.so) is not installed".into())),
        (true, false) => Err(Error::Gpu("NVRTC (libnvrtc.so) is not installed".into())),
    }
}

/// Whether the CUDA driver and NVRTC libraries are there: a GPU engine may start (a cheap check, no driver call;
/// the mount sizes its readahead for the GPU's whole-range pieces before its engine, started in the background,
/// is ready).
pub fn libraries_available() -> bool {
    libraries_present().is_ok()
}

impl GpuEngine {
    /// Opens the GPU engine for `data`, or says in one line why not.
    pub fn try_new(data: Arc<ArchiveData>) -> Result<GpuEngine> {
        libraries_present()?;
        if data.block_count() > u32::MAX as u64 {
            return Err(Error::Gpu("too many blocks for the GPU engine".into()));
        }
        // Driver calls can still panic inside cudarc (a symbol missing from an old driver, say); contain that.
        let opened = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| Device::open(&data)))
            .map_err(|_| Error::Gpu("the CUDA driver failed while starting (panic contained)".into()))??;
        let description = opened.description.clone();
        Ok(GpuEngine {
            data,
            device: Arc::new(Mutex::new(opened)),
            description,
            fault: injected_fault_from_env(),
            batches: Arc::new(AtomicU64::new(0)),
            stream_failure_logged: Arc::new(AtomicBool::new(false)),
        })
    }

    /// Replaces the fault injection read from the environment (tests set it without touching the environment).
    #[doc(hidden)]
    pub fn with_injected_fault(mut self, fault: Option<InjectedFault>) -> GpuEngine {
        self.fault = fault;
        self
    }

    /// The fault to inject into the batch starting now, if `ACEAPEX_GPU_FAULT` asks for one.
    fn next_batch_fault(&self) -> Option<InjectedFault> {
        let fault = self.fault?;
        fault.at(self.batches.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// The GPU's name and architecture, for logs.
    pub fn description(&self) -> &str {
        &self.description
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, Device>> {
        self.device.lock().map_err(|_| Error::Gpu("a previous GPU batch panicked".into()))
    }

    /// Decodes `ids` in launch sequences of at most the device's batch size, copying each block into `out` and
    /// verifying it against the index. Returns the summed device time.
    pub fn decode_blocks_timed(&self, ids: &[u64], out: &mut [&mut [u8]]) -> Result<BatchTiming> {
        if ids.len() != out.len() {
            return Err(Error::InvalidArgument(format!("{} ids but {} output buffers", ids.len(), out.len())));
        }
        for (&id, buf) in ids.iter().zip(out.iter()) {
            if id >= self.data.block_count() || buf.len() != self.data.block_len(id) as usize {
                return Err(Error::InvalidArgument(format!("block {id}: bad id or output length {}", buf.len())));
            }
        }
        if ids.windows(2).any(|w| w[0] >= w[1]) {
            return Err(Error::InvalidArgument("block ids must be ascending and distinct".into()));
        }
        let injected = self.next_batch_fault();
        if let Some(InjectedFault::Fail(n)) = injected {
            return Err(Error::Gpu(format!("injected fault (ACEAPEX_GPU_FAULT=fail:{n})")));
        }
        let mut device = self.lock()?;
        let mut total_ms = 0.0f32;
        let batch = device.max_batch();
        let mut corrupt = matches!(injected, Some(InjectedFault::Corrupt(_)));
        for (ids, out) in ids.chunks(batch).zip(out.chunks_mut(batch)) {
            total_ms += self.decode_chunk(&mut device, ids, out, std::mem::take(&mut corrupt))?;
        }
        Ok(BatchTiming { device_ms: total_ms })
    }

    /// One launch sequence; a capacity fault (too many source blocks for the scratch) splits the chunk in two.
    /// `corrupt` (fault injection) flips the first byte the device returned before it is checked.
    fn decode_chunk(&self, device: &mut Device, ids: &[u64], out: &mut [&mut [u8]], corrupt: bool) -> Result<f32> {
        let block_log = self.data.header.block_log as u32;
        match device.seek_batch(ids)? {
            Ok((bytes, ms)) => {
                let check = |e: usize, id: u64, buf: &mut [u8]| -> Result<()> {
                    let start = e << block_log;
                    buf.copy_from_slice(&bytes[start..start + buf.len()]);
                    if corrupt && e == 0 && !buf.is_empty() {
                        buf[0] ^= 0x20;
                    }
                    let expected = self.data.block_hash[id as usize];
                    let actual = xxh3_64(buf);
                    if actual != expected {
                        return Err(Error::Gpu(format!(
                            "block {id}: GPU bytes fail the checksum (expected {expected:016x}, got {actual:016x})"
                        )));
                    }
                    Ok(())
                };
                // Copying out of pinned memory and hashing 16 MiB takes a core ~2 ms, more than the decode: large
                // batches do it on all cores.
                if ids.len() >= PARALLEL_CHECK_BLOCKS {
                    on_device_pool(|| {
                        out.par_iter_mut()
                            .zip(ids.par_iter())
                            .enumerate()
                            .try_for_each(|(e, (buf, &id))| check(e, id, buf))
                    })?;
                } else {
                    for (e, (&id, buf)) in ids.iter().zip(out.iter_mut()).enumerate() {
                        check(e, id, buf)?;
                    }
                }
                Ok(ms)
            }
            Err(fault) if fault.is_capacity() && ids.len() > 1 => {
                let mid = ids.len() / 2;
                let (out_a, out_b) = out.split_at_mut(mid);
                Ok(self.decode_chunk(device, &ids[..mid], out_a, corrupt)?
                    + self.decode_chunk(device, &ids[mid..], out_b, false)?)
            }
            Err(fault) => Err(fault.into_error()),
        }
    }

    /// Streams blocks `first..end` to `sink`, in order and whole (the caller trims the range's ends), from a
    /// complete device-resident decode of the stream (run on the first call, kept for later ones): pieces of
    /// 4 MiB are copied out through two pinned buffers, the next piece's copy overlapping the checks and the
    /// sink's work on this one. Every block is checked against the index xxh3 (on all cores); a block that fails,
    /// or every block of a piece whose batch failed, is handed to `redo` (the CPU decoder) to be decoded in place
    /// before the sink sees it. An error means the device could not decode the stream at all (nothing reached
    /// the sink) or the sink failed.
    pub fn stream_blocks(
        &self,
        first: u64,
        end: u64,
        redo: &(dyn Fn(u64, &mut [u8]) -> Result<()> + Sync),
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<StreamReport> {
        if first > end || end > self.data.block_count() {
            return Err(Error::InvalidArgument(format!("blocks {first}..{end} of {}", self.data.block_count())));
        }
        let block_log = self.data.header.block_log as u32;
        let block_size = 1usize << block_log;
        let total = self.data.footer.total_len;
        let start = (first << block_log).min(total) as usize;
        let stop = (end << block_log).min(total) as usize;
        let mut report = StreamReport::default();
        let ms_since = |t: Instant| t.elapsed().as_secs_f64() * 1e3;
        let called = Instant::now();
        let mut device = self.lock()?;
        report.lock_ms = ms_since(called);
        if !device.full_ready() {
            let t = Instant::now();
            report.decode_ms = device.full_decode(FullVariant::Full, None)?.map_err(KernelFault::into_error)?.device_ms;
            report.full_ms = ms_since(t);
        }
        let piece = STREAM_PIECE.max(block_size);
        let redone = AtomicU64::new(0);
        let (mut check_ms, mut sink_ms) = (0.0, 0.0);
        let streamed = Instant::now();
        device.stream_full(start, stop, piece, &mut |at, host| {
            let injected = self.next_batch_fault();
            if let Some(InjectedFault::Corrupt(_)) = injected {
                host[0] ^= 0x20;
            }
            let first_id = (at >> block_log) as u64;
            let failed = matches!(injected, Some(InjectedFault::Fail(_)));
            // Blocks are checked and, when wrong, decoded again on all cores; a failure names its block.
            let t = Instant::now();
            on_device_pool(|| {
                host.par_chunks_mut(block_size).enumerate().try_for_each(|(k, block)| {
                    let id = first_id + k as u64;
                    if !failed && xxh3_64(block) == self.data.block_hash[id as usize] {
                        return Ok(());
                    }
                    redone.fetch_add(1, Ordering::Relaxed);
                    redo(id, block)
                })
            })?;
            check_ms += ms_since(t);
            let t = Instant::now();
            let sunk = sink(host);
            sink_ms += ms_since(t);
            sunk
        })?;
        (report.check_ms, report.sink_ms) = (check_ms, sink_ms);
        report.copy_ms = ms_since(streamed) - check_ms - sink_ms;
        report.blocks_redone = redone.into_inner();
        if report.blocks_redone > 0 && !self.stream_failure_logged.swap(true, Ordering::Relaxed) {
            tracing::warn!(
                archive = %self.data.path.display(),
                "GPU engine failed on {} blocks of a streamed range (injected: {:?}); decoded them on the CPU instead \
                 (further GPU failures of streamed ranges are not logged)",
                report.blocks_redone,
                self.fault
            );
        }
        Ok(report)
    }

    /// Decodes the whole archive on the device (entropy decoding included), up to the stages `variant` names.
    /// `poison` pre-fills the output so that unwritten bytes cannot pass a later check.
    pub fn full_decode(&self, variant: FullVariant, poison: Option<u8>) -> Result<FullRun> {
        self.lock()?.full_decode(variant, poison)?.map_err(KernelFault::into_error)
    }

    /// Chooses how later complete decodes resolve matches (the default comes from ACEAPEX_GPU_RESOLVE).
    pub fn set_resolve(&self, resolve: Resolve) -> Result<()> {
        self.lock()?.resolve = resolve;
        Ok(())
    }

    /// Chooses whether later seeks may resolve through the resident parse of the whole archive (the default when
    /// it fits in device memory; see device/resident.rs) or always parse from the compressed archive.
    pub fn set_resident_seeks(&self, mode: ResidentSeeks) -> Result<()> {
        self.lock()?.set_resident_seeks(mode);
        Ok(())
    }

    /// With ACEAPEX_GPU_SEEK_PROFILE=1 in the environment at engine start: the average device µs per seek
    /// sequence spent in each stage since the last reset (a diagnostic; seeks then run without CUDA graphs).
    pub fn seek_profile(&self, reset: bool) -> Result<Option<Vec<(&'static str, f64)>>> {
        Ok(self.lock()?.seek_profile(reset))
    }

    /// The linear parse's chain times (see `Device::k1_clocks`): a measurement, None unless the kernels were
    /// compiled with them (ACEAPEX_GPU_K1_CLOCKS=1).
    pub fn k1_clocks(&self) -> Result<Option<Vec<[u64; 4]>>> {
        self.lock()?.k1_clocks()
    }

    /// Copies the last full decode's stream into `host`, returning the transfer's device ms.
    pub fn full_output(&self, host: &mut [u8]) -> Result<f32> {
        let total = self.data.footer.total_len as usize;
        if host.len() < total {
            return Err(Error::InvalidArgument("output shorter than the stream".into()));
        }
        let mut device = self.lock()?;
        let mut pinned = device.alloc_host(total)?;
        let ms = device.full_output(&mut pinned, total)?;
        let src = pinned.as_slice().map_err(|e| Error::Gpu(format!("pinned output: {e:?}")))?;
        host[..total].copy_from_slice(&src[..total]);
        Ok(ms)
    }
}

impl BlockEngine for GpuEngine {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn decode_blocks(&self, ids: &[u64], out: &mut [&mut [u8]]) -> Result<()> {
        self.decode_blocks_timed(ids, out).map(|_| ())
    }

    fn stream_blocks(&self, first: u64, end: u64, redo: Redo<'_>, sink: BytesSink<'_>) -> Option<Result<()>> {
        Some(GpuEngine::stream_blocks(self, first, end, redo, sink).map(|report| {
            tracing::debug!(
                decode_ms = report.decode_ms,
                blocks_redone = report.blocks_redone,
                lock_ms = report.lock_ms,
                full_ms = report.full_ms,
                copy_ms = report.copy_ms,
                check_ms = report.check_ms,
                sink_ms = report.sink_ms,
                "streamed blocks {first}..{end}"
            );
        }))
    }

    fn prepare_stream(&self) -> Result<()> {
        let mut device = self.lock()?;
        if !device.full_ready() {
            let run = device.full_decode(FullVariant::Full, None)?.map_err(KernelFault::into_error)?;
            tracing::debug!(device_ms = run.device_ms, "complete decode prepared for streams");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whether NVRTC can be loaded (LD_LIBRARY_PATH naming the directory of a libnvrtc.so:
    /// `scripts/fetch-nvrtc.sh` gets one from PyPI, and scripts/test.sh does so and sets ACEAPEX_REQUIRE_NVRTC).
    /// Without it a test that needs it says it skipped `what` and passes, unless ACEAPEX_REQUIRE_NVRTC is set.
    pub(super) fn nvrtc_loadable(what: &str) -> bool {
        // SAFETY: only probes whether the library can be opened.
        if unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            return true;
        }
        assert!(
            std::env::var_os("ACEAPEX_REQUIRE_NVRTC").is_none(),
            "ACEAPEX_REQUIRE_NVRTC is set but NVRTC cannot be loaded (LD_LIBRARY_PATH?)"
        );
        eprintln!("NVRTC not found: {what} skipped");
        false
    }

    /// The kernel source compiles for the H200's architecture wherever NVRTC can be loaded.
    #[test]
    fn kernels_compile_with_nvrtc_when_available() {
        if !nvrtc_loadable("kernel compile check") {
            return;
        }
        match compile_check("sm_90") {
            Ok(len) => assert!(len > 1000, "PTX suspiciously short ({len} bytes)"),
            Err(log) => panic!("kernels/decode.cu does not compile:\n{log}"),
        }
    }

    /// A random archive (every FORMAT feature: periodic fills, far and cross-block sources, depth up to the bound)
    /// with K rANS lanes and slices of `2^slice_log` bytes (4 KiB blocks), and its reference stream.
    /// The whole logical stream of `data`, decoded block by block on the CPU (the reference the GPU must equal).
    fn cpu_stream(data: &Arc<ArchiveData>) -> Vec<u8> {
        let cpu = crate::engine::cpu::CpuEngine::new(data.clone());
        let mut stream = vec![0u8; data.footer.total_len as usize];
        let ids: Vec<u64> = (0..data.block_count()).collect();
        let mut outs: Vec<&mut [u8]> = stream.chunks_mut(1 << data.header.block_log).collect();
        cpu.decode_blocks(&ids, &mut outs).unwrap();
        stream
    }

    /// A xorshift64 generator for the synthetic inputs (deterministic per seed).
    fn xorshift(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed | 1;
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// With `rc`, about a third of the matches are reverse complements (Plan::random_rc).
    fn random_archive(
        dir: &std::path::Path,
        seed: u64,
        lanes: u8,
        slice_log: u8,
        rc: bool,
    ) -> (Arc<ArchiveData>, Vec<u8>) {
        use crate::format::testkit::{small_header, Plan, Rng};
        let header = crate::format::Header { slice_log, ..small_header(6, lanes) };
        let (total, mut rng) = (200_000 + seed as usize * 777, Rng(seed));
        let plan = if rc { Plan::random_rc(header, total, &mut rng) } else { Plan::random(header, total, &mut rng) };
        let path = dir.join(format!("random-{seed}-{lanes}-{slice_log}-{rc}.acx"));
        plan.write(&path);
        (Arc::new(ArchiveData::open(&path).unwrap()), plan.stream)
    }

    /// An archive of mutated copies, as between related genomes: a random original, then copies of it with a
    /// substituted base every few dozen bytes and small indels, so most matches take continuation codes
    /// (FORMAT.md §3.2: same back as the slice's previous match, or a few bytes off), with an explicit jump
    /// back into the original whenever a copy of a copy would exceed the depth bound. Returns the archive, its
    /// reference stream, and how many of its matches continue their predecessor's back.
    fn mutated_archive(
        dir: &std::path::Path,
        seed: u64,
        lanes: u8,
        slice_log: u8,
    ) -> (Arc<ArchiveData>, Vec<u8>, usize) {
        use crate::codec::block::{continuation_index, PrevMatch};
        use crate::format::testkit::{small_header, Plan, Rng};
        let header = crate::format::Header { slice_log, ..small_header(6, lanes) };
        let mut plan = Plan::new(header);
        let mut rng = Rng(seed);
        let (origin, total) = (9_000usize, 150_000 + seed as usize * 777);
        let base = |rng: &mut Rng| b"ACGT"[rng.range(0, 3) as usize];
        while plan.stream.len() < origin {
            let n = plan.room().min(origin - plan.stream.len());
            let bytes: Vec<u8> = (0..n).map(|_| base(&mut rng)).collect();
            plan.literals(&bytes);
        }
        let mut back = origin as u64;
        while plan.stream.len() < total {
            let pos = plan.stream.len() as u64;
            match rng.range(0, 9) {
                0 => back += rng.range(1, 4),                            // an insertion in the copy
                1 => back = back.saturating_sub(rng.range(1, 3)).max(1), // a deletion
                _ => {}
            }
            let room = plan.room().min(total - plan.stream.len());
            let subst = rng.range(0, 3).min(room as u64) as usize;
            let bytes: Vec<u8> = (0..subst).map(|_| base(&mut rng)).collect();
            plan.literals(&bytes);
            let room = plan.room().min(total - plan.stream.len());
            if room < 2 {
                continue;
            }
            let len = rng.range(2, 60).min(room as u64) as usize;
            let pos = pos + subst as u64;
            if back > pos || plan.source_depth(back, len) >= plan.header.max_depth {
                back = pos - rng.range(0, origin as u64 - 100); // back into the original (depth 0)
            }
            plan.fill(back, len);
        }
        let mut continuing = 0;
        for b in &plan.blocks {
            let mut prev = 0;
            for t in b.tokens.iter().filter(|t| t.match_len > 0) {
                continuing += continuation_index(t.back, false, 0, PrevMatch::forward(prev)).is_some() as usize;
                prev = t.back;
            }
        }
        let path = dir.join(format!("mutated-{seed}-{lanes}-{slice_log}.acx"));
        plan.write(&path);
        (Arc::new(ArchiveData::open(&path).unwrap()), plan.stream, continuing)
    }

    /// The mutated-copy archives the GPU tests use really are made of continuations, and decode on the CPU.
    #[test]
    fn mutated_archives_use_continuations() {
        use crate::engine::cpu::CpuEngine;
        let dir = tempfile::tempdir().unwrap();
        let (data, stream, continuing) = mutated_archive(dir.path(), 21, 2, 10);
        let matches = stream.len() / 40;
        assert!(continuing * 2 > matches, "{continuing} continuations for about {matches} matches");
        let cpu = CpuEngine::new(data.clone());
        for id in 0..data.block_count() {
            let mut buf = vec![0u8; data.block_len(id) as usize];
            cpu.decode_block(id, &mut buf).unwrap();
            let start = (id << data.header.block_log) as usize;
            assert_eq!(buf, stream[start..start + buf.len()], "block {id}");
        }
    }

    /// Without a driver (CI) the engine refuses in one line, never panics; with one, it opens.
    #[test]
    fn try_new_fails_cleanly_or_opens() {
        let dir = tempfile::tempdir().unwrap();
        let (data, _) = random_archive(dir.path(), 1, 2, 11, false);
        match GpuEngine::try_new(data) {
            Ok(engine) => assert!(!engine.description().is_empty()),
            Err(Error::Gpu(reason)) => assert!(!reason.contains('\n'), "one line: {reason}"),
            Err(other) => panic!("unexpected error kind: {other}"),
        }
    }

    /// The host-side slice metadata of a random archive: one valid row per slice, lengths and counts that add
    /// up to the stream (CPU only, runs everywhere).
    #[test]
    fn unit_meta_covers_every_slice() {
        let dir = tempfile::tempdir().unwrap();
        for (seed, lanes, slice_log) in [(5, 1, 9), (6, 2, 11), (7, 2, 12)] {
            let (data, stream) = random_archive(dir.path(), seed, lanes, slice_log, false);
            let meta = prep::unit_meta(&data);
            assert_eq!(meta.units() as u64, data.global_slice_count());
            let mut total = 0u64;
            for (u, row) in meta.words.chunks_exact(prep::META_WORDS).enumerate() {
                assert_ne!(row[7], prep::BAD_BLOCK, "slice {u}");
                assert_eq!(row[7], data.slice_len(u as u64));
                assert!(2 * row[2] <= row[7] && row[3] <= row[7]);
                total += row[7] as u64;
            }
            assert_eq!(total, stream.len() as u64);
        }
    }

    /// A corrupt slice directory marks exactly that block's slices bad, so the device refuses them.
    #[test]
    fn corrupt_directory_marks_its_block_bad() {
        let dir = tempfile::tempdir().unwrap();
        let (data, _) = random_archive(dir.path(), 8, 2, 10, false);
        let mut bytes = std::fs::read(&data.path).unwrap();
        let at = data.payload_offset(1) as usize;
        bytes[at] = bytes[at].wrapping_add(1) & 0x7f; // first slice length off by one (stays a one-byte varint)
        let path = dir.path().join("corrupt.acx");
        std::fs::write(&path, &bytes).unwrap();
        let corrupt = ArchiveData::open(&path).unwrap();
        let meta = prep::unit_meta(&corrupt);
        let per_block = corrupt.header.slices_per_block() as usize;
        for (u, row) in meta.words.chunks_exact(prep::META_WORDS).enumerate() {
            assert_eq!(row[7] == prep::BAD_BLOCK, u / per_block == 1, "slice {u}");
        }
        // On a GPU, the corrupt block is refused (never wrong bytes); block 0, which needs nothing after it, still
        // decodes.
        let Ok(engine) = GpuEngine::try_new(Arc::new(corrupt)) else { return };
        let mut buf = vec![0u8; data.block_len(1) as usize];
        assert!(engine.decode_blocks(&[1], &mut [&mut buf[..]]).is_err());
        let mut buf = vec![0u8; data.block_len(0) as usize];
        engine.decode_blocks(&[0], &mut [&mut buf[..]]).unwrap();
        assert!(engine.full_decode(FullVariant::Full, None).is_err());
    }

    /// On a machine with a GPU: a byte deeper than the header's `max_depth` fails the full decode and the seek
    /// path, as it fails the CPU reference (FORMAT.md §1), even though the GPU could resolve it. Elsewhere the
    /// test has nothing to run and passes.
    #[test]
    fn a_chain_deeper_than_max_depth_is_refused() {
        use crate::engine::cpu::CpuEngine;
        use crate::format::testkit::{small_header, Plan};
        let dir = tempfile::tempdir().unwrap();
        let mut plan = Plan::new(small_header(2, 1));
        plan.literals(&b"ACGT".repeat(64));
        plan.fill(256, 4096 - 256); // the rest of block 0: depth 1
        plan.fill(4096, 4096); // block 1, a copy of block 0: depth 2
        plan.fill(4096, 4096); // block 2, a copy of block 1: depth 3 > max_depth 2
        assert_eq!(plan.depth.iter().copied().max(), Some(3), "the plan must exceed the bound");
        let path = dir.path().join("deep.acx");
        plan.write(&path);
        let data = Arc::new(ArchiveData::open(&path).unwrap());
        let last = data.block_count() - 1;
        let mut buf = vec![0u8; data.block_len(last) as usize];
        assert!(CpuEngine::new(data.clone()).decode_blocks(&[last], &mut [&mut buf[..]]).is_err());
        let Ok(engine) = GpuEngine::try_new(data.clone()) else {
            eprintln!("no GPU: GPU depth test skipped");
            return;
        };
        for resolve in [Resolve::Chase, Resolve::Rounds, Resolve::Maps, Resolve::Auto] {
            engine.set_resolve(resolve).unwrap();
            assert!(
                engine.full_decode(FullVariant::Full, None).is_err(),
                "full decode past the depth bound, {resolve:?}"
            );
        }
        // The first seek parses the archive resident (the parse does not follow sources) and chases through it.
        assert!(engine.decode_blocks(&[last], &mut [&mut buf[..]]).is_err(), "resident seek past the depth bound");
        engine.set_resident_seeks(ResidentSeeks::Off).unwrap();
        assert!(engine.decode_blocks(&[last], &mut [&mut buf[..]]).is_err(), "seek past the depth bound");
    }

    /// On a machine with a GPU: a slice the CPU decoder refuses after one flipped bit in its payload's last byte
    /// (an extra-bits stream's padding or value, or a rANS word where the slice has no extra bits) is refused by
    /// every GPU path, never decoded to other bytes: the full decode under each resolver (with the map chase the
    /// tokens are checked in `finish_linear_k1` after the parse, with the chase in the parse's own chain) and both
    /// seek paths. Elsewhere the test has nothing to run and passes.
    #[test]
    fn slices_the_cpu_refuses_fail_every_gpu_path() {
        let dir = tempfile::tempdir().unwrap();
        let block = 1;
        let mut refused = 0;
        for lanes in [1, 2] {
            let (data, _) = random_archive(dir.path(), 12, lanes, 10, false);
            refused += refuse_flipped_last_bytes(dir.path(), &data, block);
        }
        assert!(refused > 0, "no flipped bit the CPU refuses: the test checks nothing");
    }

    /// For each slice of `block`: flips the top bit of the slice payload's last byte, and where the CPU decoder
    /// then refuses the block, asserts that every GPU path does (see above). Returns how many the CPU refused.
    fn refuse_flipped_last_bytes(dir: &std::path::Path, data: &ArchiveData, block: u64) -> usize {
        use crate::engine::cpu::CpuEngine;
        let original = std::fs::read(&data.path).unwrap();
        let payload = data.payload(block).unwrap();
        let spans = prep::slice_spans(&payload, data.slice_count(block)).unwrap();
        let mut buf = vec![0u8; data.block_len(block) as usize];
        let mut refused = 0;
        for (j, &(_, end)) in spans.iter().enumerate() {
            let mut bytes = original.clone();
            bytes[data.payload_offset(block) as usize + end - 1] ^= 0x80;
            let path = dir.join(format!("slice-{j}.acx"));
            std::fs::write(&path, &bytes).unwrap();
            let corrupt = Arc::new(ArchiveData::open(&path).unwrap());
            if CpuEngine::new(corrupt.clone()).decode_blocks(&[block], &mut [&mut buf[..]]).is_ok() {
                continue;
            }
            refused += 1;
            let Ok(engine) = GpuEngine::try_new(corrupt) else { continue };
            for resolve in [Resolve::Chase, Resolve::Rounds, Resolve::Maps, Resolve::Auto] {
                engine.set_resolve(resolve).unwrap();
                for variant in [FullVariant::ParseOnly, FullVariant::Full] {
                    let run = engine.full_decode(variant, None);
                    assert!(run.is_err(), "slice {j}: {variant:?}, {resolve:?}");
                }
            }
            assert!(engine.decode_blocks(&[block], &mut [&mut buf[..]]).is_err(), "slice {j}: resident seek");
            engine.set_resident_seeks(ResidentSeeks::Off).unwrap();
            assert!(engine.decode_blocks(&[block], &mut [&mut buf[..]]).is_err(), "slice {j}: seek");
        }
        refused
    }

    /// On a machine with a GPU: every block through both seek paths (from the compressed archive, and through the
    /// resident parse) and the full device decode equal the reference stream, for every lane count the format
    /// allows and several slice sizes. Elsewhere the test has nothing to
    /// run and passes.
    #[test]
    fn gpu_bytes_equal_the_reference_when_a_gpu_is_present() {
        let dir = tempfile::tempdir().unwrap();
        // (seed, lanes, slice_log); the odd seeds' archives also hold reverse-complement matches.
        let cases = [(2, 2, 11), (3, 2, 9), (4, 1, 11), (9, 2, 10), (10, 1, 12), (11, 2, 12), (12, 1, 9), (13, 2, 9)];
        // Random archives, then mutated copies (continuation codes in nearly every slice) for every lane count.
        let mutated = [(21, 1, 9), (22, 2, 10), (23, 1, 11), (24, 2, 9), (25, 2, 12), (26, 1, 10)];
        let archives = cases.iter().map(|&(seed, lanes, slice_log)| (seed, lanes, slice_log, false));
        for (seed, lanes, slice_log, mutate) in archives.chain(mutated.iter().map(|&(s, l, k)| (s, l, k, true))) {
            let (data, stream) = if mutate {
                let (data, stream, _) = mutated_archive(dir.path(), seed, lanes, slice_log);
                (data, stream)
            } else {
                random_archive(dir.path(), seed, lanes, slice_log, seed % 2 == 1)
            };
            let Ok(engine) = GpuEngine::try_new(data.clone()) else {
                eprintln!("no GPU: GPU bit-exactness test skipped");
                return;
            };
            let what = format!("seed {seed}, lanes {lanes}, slice_log {slice_log}, mutated copies {mutate}");
            assert_gpu_bytes(&engine, &data, &stream, &what);
        }
    }

    /// Seeks (from the compressed archive, and through the resident parse with every match byte poisoned), the
    /// full-decode variants and the full decode with both resolvers equal the reference stream.
    fn assert_gpu_bytes(engine: &GpuEngine, data: &ArchiveData, stream: &[u8], what: &str) {
        {
            // Seeks from the compressed archive, then through the resident parse with every match byte of the
            // resident stream poisoned (only the literals are there: the chase must produce every other byte).
            for mode in [ResidentSeeks::Off, ResidentSeeks::Auto] {
                engine.set_resident_seeks(mode).unwrap();
                if mode == ResidentSeeks::Auto {
                    engine.full_decode(FullVariant::ParseOnly, Some(0xA5)).unwrap();
                }
                let what = format!("{what}, {mode:?}");
                let ids: Vec<u64> = (0..data.block_count()).collect();
                let mut bufs: Vec<Vec<u8>> = ids.iter().map(|&id| vec![0; data.block_len(id) as usize]).collect();
                let mut outs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
                engine.decode_blocks(&ids, &mut outs).unwrap();
                assert_eq!(bufs.concat(), stream, "seek path, all blocks, {what}");
                // Single blocks and short runs (cold: nothing is kept between batches), the last block included.
                let n = data.block_count();
                for first in [0, n / 3, n / 2, n - 1] {
                    let ids: Vec<u64> = (first..(first + 3).min(n)).collect();
                    let mut bufs: Vec<Vec<u8>> = ids.iter().map(|&id| vec![0; data.block_len(id) as usize]).collect();
                    let mut outs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
                    engine.decode_blocks(&ids, &mut outs).unwrap();
                    let start = (first << data.header.block_log) as usize;
                    let len = bufs.iter().map(Vec::len).sum::<usize>();
                    assert_eq!(bufs.concat(), stream[start..start + len], "{what}");
                }
            }
            for variant in [FullVariant::EntropyOnly, FullVariant::ParseNoLiterals, FullVariant::ParseOnly] {
                engine.full_decode(variant, None).unwrap();
            }
            // Levels: one pass (most matches chased), 24 passes, one ordered launch with a cap of 1 and of 2 in
            // epochs whatever is left (one or two levels each, up to LEVEL_EPOCHS, then the chase), a launch per
            // level with the sparse high ones chased (tail_max 0), every level copied by launches, levels of 64
            // pieces or more launched between tail runs of sparser ones, every level in one tail run, and the
            // default. (passes, cap, epoch_min, tail_max, chase_share):
            let cap = device::LEVEL_CAP;
            let levels = [
                (1, 1, u64::MAX, 0, 256),
                (24, 24, u64::MAX, 0, 256),
                (0, 1, 0, 128, 256),
                (0, 2, 0, 128, 0),
                (0, cap, 0, 0, 256),
                (0, cap, 0, 0, 0),
                (0, cap, 0, 64, 0),
                (0, cap, 0, u32::MAX, 0),
            ]
            .map(|(passes, cap, epoch_min, tail_max, chase_share)| Resolve::Levels {
                passes,
                cap,
                epoch_min,
                tail_max,
                chase_share,
            });
            let levels = levels.into_iter().chain([Resolve::LEVELS, Resolve::Flow, Resolve::Maps, Resolve::DEFAULT]);
            for resolve in [Resolve::Chase, Resolve::Rounds].into_iter().chain(levels) {
                engine.set_resolve(resolve).unwrap();
                engine.full_decode(FullVariant::Full, Some(0xA5)).unwrap();
                let mut full = vec![0u8; stream.len()];
                engine.full_output(&mut full).unwrap();
                assert_eq!(full, stream, "full decode, {what}, {resolve:?}");
            }
        }
    }

    /// Bases in noisy runs with mutated repeats and a non-base byte now and then: packed, its slices code their
    /// literals with a context model (FORMAT.md §3.5), and a few fall back to the LIT table.
    fn context_input(seed: u64, len: usize) -> Vec<u8> {
        let mut next = xorshift(seed);
        let mut out: Vec<u8> = Vec::with_capacity(len);
        let mut h = 0usize;
        while out.len() < len {
            let r = next();
            if r % 2000 == 0 && out.len() > 5000 {
                // A mutated copy of an earlier stretch.
                let from = (next() as usize) % (out.len() - 3000);
                for k in 0..(500 + next() as usize % 2000) {
                    let b = out[from + k % 2500];
                    out.push(if next() % 40 == 0 { b"ACGT"[next() as usize % 4] } else { b });
                }
            } else {
                // Noisy runs of one base: a base predicts the ones after it at any distance up to 32, so the
                // contexts of every lane count pay (a lane's context is its own previous literals).
                if r % 40 == 1 {
                    h = (r >> 8) as usize % 4;
                }
                let s = if r % 8 < 5 { h } else { (r >> 16) as usize % 4 };
                out.push(if r % 9973 == 1 { b'N' } else { b"ACGT"[s] });
            }
        }
        out.truncate(len);
        out
    }

    /// Archives whose literals are context-coded decode on the CPU and, with a GPU, bit-exactly on it too (seek,
    /// resident and full paths), for every lane count.
    #[test]
    fn context_coded_archives_decode_bit_exactly() {
        use crate::pack::{pack, PackOptions};
        let dir = tempfile::tempdir().unwrap();
        let mut archives = Vec::new();
        for (seed, lanes) in [(31u64, 1u8), (32, 2), (33, 1), (34, 2)] {
            let input = context_input(seed, 300_000);
            let src = dir.path().join(format!("bases-{seed}.txt"));
            std::fs::write(&src, &input).unwrap();
            let out = dir.path().join(format!("bases-{seed}.acx"));
            // Without reverse complements: they take the one-base runs of this input
            // (reverse_complement_archives_decode_bit_exactly covers them).
            let opts = PackOptions {
                block_log: 12,
                group_log: 3,
                rans_lanes: lanes,
                memory: 256 << 20,
                reverse_complements: false,
                ..Default::default()
            };
            pack(&[src], &out, &opts).unwrap();
            let data = Arc::new(ArchiveData::open(&out).unwrap());
            assert!(data.tables.iter().any(|t| t.ctx.is_some()), "lanes {lanes}: no context model");
            let shared = data.tables.iter().filter(|t| t.ctx.as_ref().is_some_and(|c| c.back > 0)).count();
            assert!(shared > 0, "lanes {lanes}: every group stores its own model");
            let stream = cpu_stream(&data);
            // The stream is the file's bytes (a plain file, not FASTA: no genome mode), plus nothing else.
            assert_eq!(stream[..input.len()], input[..], "lanes {lanes}: CPU decode");
            archives.push((data, stream, lanes));
        }
        for (data, stream, lanes) in archives {
            let Ok(engine) = GpuEngine::try_new(data.clone()) else {
                eprintln!("no GPU: context-coded GPU test skipped");
                return;
            };
            assert_gpu_bytes(&engine, &data, &stream, &format!("context-coded, lanes {lanes}"));
        }
    }

    /// A FASTA whose sequence holds mutated reverse complements of earlier stretches (inverted repeats, as
    /// transposons leave them), besides forward copies: packed in genome mode, its matches include reverse
    /// complements, explicit and continued across substitutions (FORMAT.md §1, §3.2, version 5).
    fn inverted_repeats_fasta(seed: u64, bases: usize) -> Vec<u8> {
        use crate::codec::block::COMPLEMENT;
        let mut next = xorshift(seed);
        let mut seq: Vec<u8> = Vec::with_capacity(bases);
        while seq.len() < bases {
            let r = next();
            if seq.len() > 20_000 && r % 3 == 0 {
                // A copy of an earlier stretch, reverse-complemented two times in three, a base substituted now
                // and then.
                let len = 300 + next() as usize % 3000;
                let from = next() as usize % (seq.len() - len);
                let rc = next() % 3 != 0;
                for k in 0..len {
                    let b = if rc { COMPLEMENT[seq[from + len - 1 - k] as usize] } else { seq[from + k] };
                    seq.push(if next() % 50 == 0 { b"ACGT"[next() as usize % 4] } else { b });
                }
            } else {
                for _ in 0..(200 + next() as usize % 800) {
                    seq.push(b"ACGT"[next() as usize % 4]);
                }
            }
        }
        seq.truncate(bases);
        let mut fasta = format!(">inverted-{seed}\n").into_bytes();
        for line in seq.chunks(60) {
            fasta.extend_from_slice(line);
            fasta.push(b'\n');
        }
        fasta
    }

    /// Archives with reverse-complement matches decode on the CPU to the original and, with a GPU, bit-exactly on
    /// it too (seeks from the compressed archive, the resident chase, the full decode with both resolvers), for
    /// several lane counts and slice sizes.
    #[test]
    fn reverse_complement_archives_decode_bit_exactly() {
        use crate::pack::{pack, PackOptions};
        let dir = tempfile::tempdir().unwrap();
        let mut archives = Vec::new();
        // Block sizes 4, 8 and 16 KiB: slices of 2^block_log / 4 (Header::default_slice_log), at least 1 KiB.
        for (seed, lanes, block_log) in [(41u64, 1u8, 14u8), (42, 2, 12), (43, 2, 13)] {
            let fasta = inverted_repeats_fasta(seed, 400_000);
            let src = dir.path().join(format!("inverted-{seed}.fa"));
            std::fs::write(&src, &fasta).unwrap();
            let out = dir.path().join(format!("inverted-{seed}.acx"));
            let opts =
                PackOptions { block_log, group_log: 3, rans_lanes: lanes, memory: 256 << 20, ..Default::default() };
            pack(&[src], &out, &opts).unwrap();
            let data = Arc::new(ArchiveData::open(&out).unwrap());
            let rc = crate::cli::info::gather(&data).streams.rc_matches;
            assert!(rc > 100, "seed {seed}: {rc} reverse-complement matches");
            let stream = cpu_stream(&data);
            archives.push((data, stream, lanes, block_log));
        }
        for (data, stream, lanes, block_log) in archives {
            let Ok(engine) = GpuEngine::try_new(data.clone()) else {
                eprintln!("no GPU: reverse-complement GPU test skipped");
                return;
            };
            assert_gpu_bytes(
                &engine,
                &data,
                &stream,
                &format!("reverse complements, lanes {lanes}, block_log {block_log}"),
            );
        }
    }

    /// The streaming tests' archive (random, seed 14) and its bytes, the GPU engine over it and the CPU engine
    /// that redoes failed blocks; None (the test `what` says it skipped) without a GPU.
    fn streaming_setup(
        dir: &std::path::Path,
        what: &str,
    ) -> Option<(Arc<ArchiveData>, Vec<u8>, GpuEngine, crate::engine::cpu::CpuEngine)> {
        let (data, stream) = random_archive(dir, 14, 1, 10, true);
        let Ok(engine) = GpuEngine::try_new(data.clone()) else {
            eprintln!("no GPU: {what} skipped");
            return None;
        };
        let cpu = crate::engine::cpu::CpuEngine::new(data.clone());
        Some((data, stream, engine, cpu))
    }

    /// On a machine with a GPU: streaming blocks from the resident decode equals the reference, also when the
    /// piece fails (the CPU fallback decodes its blocks) or is corrupted; injected faults fail seek batches.
    #[test]
    fn streamed_blocks_equal_the_reference_under_injected_faults() {
        let dir = tempfile::tempdir().unwrap();
        let Some((data, stream, engine, cpu)) = streaming_setup(dir.path(), "streamed-range test") else {
            return;
        };
        let redo = |id: u64, out: &mut [u8]| cpu.decode_block(id, out);
        let n = data.block_count();
        for fault in [None, Some(InjectedFault::Fail(1)), Some(InjectedFault::Corrupt(1))] {
            let engine = engine.clone().with_injected_fault(fault);
            let mut got = Vec::new();
            let report = engine
                .stream_blocks(1, n, &redo, &mut |b| {
                    got.extend_from_slice(b);
                    Ok(())
                })
                .unwrap();
            let from = 1usize << data.header.block_log;
            assert_eq!(got, stream[from..], "{fault:?}");
            assert_eq!(report.blocks_redone > 0, fault.is_some(), "{fault:?}");
            let mut buf = vec![0u8; data.block_len(0) as usize];
            let seek = engine.clone().with_injected_fault(fault.map(|_| InjectedFault::Corrupt(1)));
            assert_eq!(seek.decode_blocks(&[0], &mut [&mut buf[..]]).is_err(), fault.is_some(), "{fault:?}");
        }
    }

    /// On a machine with a GPU: `prepare_stream` runs the complete decode, so the first stream starts copying at
    /// once (no decode in its report), and its bytes equal the reference.
    #[test]
    fn a_prepared_stream_does_not_decode_again() {
        let dir = tempfile::tempdir().unwrap();
        let Some((data, stream, engine, cpu)) = streaming_setup(dir.path(), "prepared-stream test") else {
            return;
        };
        BlockEngine::prepare_stream(&engine).unwrap();
        BlockEngine::prepare_stream(&engine).unwrap();
        let redo = |id: u64, out: &mut [u8]| cpu.decode_block(id, out);
        let mut got = Vec::new();
        let report = engine
            .stream_blocks(0, data.block_count(), &redo, &mut |b| {
                got.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
        assert_eq!(got, stream);
        assert_eq!((report.decode_ms, report.full_ms), (0.0, 0.0), "decoded again: {report:?}");
    }

    #[test]
    fn injected_faults_parse_and_pick_every_nth_batch() {
        assert_eq!(InjectedFault::parse("fail:3"), Ok(InjectedFault::Fail(3)));
        assert_eq!(InjectedFault::parse("corrupt:1"), Ok(InjectedFault::Corrupt(1)));
        for bad in ["fail", "fail:0", "fail:x", "flip:2", ":2", "corrupt:-1"] {
            assert!(InjectedFault::parse(bad).is_err(), "{bad}");
        }
        let f = InjectedFault::Fail(3);
        let hit: Vec<u64> = (1..=9).filter(|&b| f.at(b).is_some()).collect();
        assert_eq!(hit, [3, 6, 9]);
    }

    #[test]
    fn fault_words_decode() {
        assert_eq!(KernelFault::from_status(0), None);
        let f = KernelFault::from_status((10u64 << 40) | 7).unwrap();
        assert_eq!((f.code, f.unit), (10, 7));
        assert!(f.is_capacity());
        assert!(!KernelFault::from_status(3u64 << 40).unwrap().is_capacity());
    }
}
