//! The GPU engine: NVRTC-compiled seek kernels from `kernels/`, driven through cudarc.
//!
//! [`GpuEngine::try_new`] loads the driver and NVRTC at run time, compiles kernels/decode.cu once per process for
//! the GPU's own architecture, and uploads the archive's payloads, per-slice metadata (prep.rs) and decode
//! tables. The device works on slices (FORMAT.md §3): a group of K lanes (K = the archive's rANS lanes; a single
//! thread when K = 1) parses one slice. A batch of blocks is decoded by one launch sequence (see the kernel
//! file's overview): the requested blocks' slices are parsed, the source ranges their matches need are found
//! level by level (at most `max_depth` levels) and only the slices holding them are parsed too, and every
//! requested byte is resolved to a literal. Results come back through pinned memory and
//! are checked against the index's xxh3 before they are returned: this engine never hands out wrong bytes.
//!
//! Without a GPU, driver or NVRTC, `try_new` fails fast with a one-line reason (never a panic) and the caller
//! uses the CPU engine. A failed batch returns `Err` and the caller decodes it on the CPU.

mod device;
pub mod prep;

use std::sync::{Arc, Mutex};

use xxhash_rust::xxh3::xxh3_64;

use device::Device;
pub use device::{compile_check, FullRun, FullVariant, KernelFault};

use crate::engine::BlockEngine;
use crate::error::{Error, Result};
use crate::format::ArchiveData;

/// Decodes blocks on an NVIDIA GPU. Construction fails (with a message for one log line) when there is no GPU,
/// no driver or no NVRTC; callers then use the CPU engine.
pub struct GpuEngine {
    data: Arc<ArchiveData>,
    device: Mutex<Device>,
    description: String,
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
        Ok(GpuEngine { data, device: Mutex::new(opened), description })
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
        let mut device = self.lock()?;
        let mut total_ms = 0.0f32;
        let batch = device.max_batch();
        for (ids, out) in ids.chunks(batch).zip(out.chunks_mut(batch)) {
            total_ms += self.decode_chunk(&mut device, ids, out)?;
        }
        Ok(BatchTiming { device_ms: total_ms })
    }

    /// One launch sequence; a capacity fault (too many source blocks for the scratch) splits the chunk in two.
    fn decode_chunk(&self, device: &mut Device, ids: &[u64], out: &mut [&mut [u8]]) -> Result<f32> {
        let block_log = self.data.header.block_log as u32;
        match device.seek_batch(ids)? {
            Ok((bytes, ms)) => {
                for (e, (&id, buf)) in ids.iter().zip(out.iter_mut()).enumerate() {
                    let start = e << block_log;
                    let decoded = &bytes[start..start + buf.len()];
                    let expected = self.data.block_hash[id as usize];
                    let actual = xxh3_64(decoded);
                    if actual != expected {
                        return Err(Error::Gpu(format!(
                            "block {id}: GPU bytes fail the checksum (expected {expected:016x}, got {actual:016x})"
                        )));
                    }
                    buf.copy_from_slice(decoded);
                }
                Ok(ms)
            }
            Err(fault) if fault.is_capacity() && ids.len() > 1 => {
                let mid = ids.len() / 2;
                let (out_a, out_b) = out.split_at_mut(mid);
                Ok(self.decode_chunk(device, &ids[..mid], out_a)? + self.decode_chunk(device, &ids[mid..], out_b)?)
            }
            Err(fault) => Err(fault.into_error()),
        }
    }

    /// Decodes the whole archive on the device (entropy decoding included), up to the stages `variant` names.
    /// `poison` pre-fills the output so that unwritten bytes cannot pass a later check.
    pub fn full_decode(&self, variant: FullVariant, poison: Option<u8>) -> Result<FullRun> {
        self.lock()?.full_decode(variant, poison)?.map_err(KernelFault::into_error)
    }

    /// With ACEAPEX_GPU_SEEK_PROFILE=1 in the environment at engine start: the average device µs per seek
    /// sequence spent in each stage since the last reset (a diagnostic; seeks then run without CUDA graphs).
    pub fn seek_profile(&self, reset: bool) -> Result<Option<Vec<(&'static str, f64)>>> {
        Ok(self.lock()?.seek_profile(reset))
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
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel source compiles for the H200's architecture wherever NVRTC can be loaded (set
    /// LD_LIBRARY_PATH to an NVRTC 13 library); elsewhere the test says so and passes.
    #[test]
    fn kernels_compile_with_nvrtc_when_available() {
        // SAFETY: only probes whether the library can be opened.
        if !unsafe { cudarc::nvrtc::sys::is_culib_present() } {
            eprintln!("NVRTC not found: kernel compile check skipped");
            return;
        }
        match compile_check("sm_90") {
            Ok(len) => assert!(len > 1000, "PTX suspiciously short ({len} bytes)"),
            Err(log) => panic!("kernels/decode.cu does not compile:\n{log}"),
        }
    }

    /// A random archive (every FORMAT feature: periodic fills, far and cross-block sources, depth up to the bound)
    /// with K rANS lanes and slices of `2^slice_log` bytes (4 KiB blocks), and its reference stream.
    fn random_archive(dir: &std::path::Path, seed: u64, lanes: u8, slice_log: u8) -> (Arc<ArchiveData>, Vec<u8>) {
        use crate::format::testkit::{small_header, Plan, Rng};
        let header = crate::format::Header { slice_log, ..small_header(6, lanes) };
        let plan = Plan::random(header, 200_000 + seed as usize * 777, &mut Rng(seed));
        let path = dir.join(format!("random-{seed}-{lanes}-{slice_log}.acx"));
        plan.write(&path);
        (Arc::new(ArchiveData::open(&path).unwrap()), plan.stream)
    }

    /// Without a driver (CI) the engine refuses in one line, never panics; with one, it opens.
    #[test]
    fn try_new_fails_cleanly_or_opens() {
        let dir = tempfile::tempdir().unwrap();
        let (data, _) = random_archive(dir.path(), 1, 32, 11);
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
        for (seed, lanes, slice_log) in [(5, 1, 9), (6, 4, 11), (7, 32, 12)] {
            let (data, stream) = random_archive(dir.path(), seed, lanes, slice_log);
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
        let (data, _) = random_archive(dir.path(), 8, 2, 10);
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

    /// On a machine with a GPU: every block through the seek path and the full device decode equal the reference
    /// stream, for every lane count the format allows and several slice sizes. Elsewhere the test has nothing to
    /// run and passes.
    #[test]
    fn gpu_bytes_equal_the_reference_when_a_gpu_is_present() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [(2, 32, 11), (3, 8, 9), (4, 1, 11), (9, 2, 10), (10, 4, 12), (11, 16, 11), (12, 1, 9), (13, 4, 9)];
        for (seed, lanes, slice_log) in cases {
            let (data, stream) = random_archive(dir.path(), seed, lanes, slice_log);
            let Ok(engine) = GpuEngine::try_new(data.clone()) else {
                eprintln!("no GPU: GPU bit-exactness test skipped");
                return;
            };
            let what = format!("lanes {lanes}, slice_log {slice_log}");
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
                assert_eq!(bufs.concat(), stream[start..start + bufs.iter().map(Vec::len).sum::<usize>()], "{what}");
            }
            for variant in [FullVariant::EntropyOnly, FullVariant::ParseNoLiterals, FullVariant::ParseOnly] {
                engine.full_decode(variant, None).unwrap();
            }
            engine.full_decode(FullVariant::Full, Some(0xA5)).unwrap();
            let mut full = vec![0u8; stream.len()];
            engine.full_output(&mut full).unwrap();
            assert_eq!(full, stream, "full decode, {what}");
        }
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
