//! Resident seeks: every slice of the archive parsed once and kept on the device, so that a request resolves its
//! bytes in one launch (`chase_resident` in kernels/chase.cuh) instead of parsing slices level by level.
//!
//! Why: a seek from the compressed archive parses the requested slices, then the slices their sources lie in, up
//! to `max_depth` dependent levels, each a serial rANS decode of whole slices (one thread per slice with K = 1):
//! 0.5–0.9 ms for one cold 16 KiB block on the H200, however few bytes the request needs. The full decode's parse
//! stage decodes every slice of the archive at once (about a millisecond for a 31 MB archive, 8.5 ms for 4.4 GB)
//! and leaves every unit's tokens and every literal device-resident. After it a request costs a byte-parallel
//! chase of at most `max_depth` hops per byte through those tokens: its own bytes, nothing else, so the random
//! access contract (work ∝ bytes × depth) holds per request. No match byte is produced ahead of a request.
//!
//! After the parse, the first seek builds the chase's maps over its tokens: the token index, a literal map (a bit
//! a stream byte) and a 16-byte record a token (`build_chase_maps`), so that a literal costs one round of loads
//! and a match hop two (docs/BENCH-GPU.md session 26).
//!
//! The parse runs once, on the first seek, when the full decode's buffers fit in half of the device's free
//! memory; a complete full decode (a streamed range) leaves the same state. Otherwise, after any fault, and with
//! `ACEAPEX_GPU_SEEK_RESIDENT=0`, seeks parse from the compressed archive as before. The bytes are checked
//! against the index like every seek's (GpuEngine::decode_chunk).

use std::sync::OnceLock;

use cudarc::driver::{result, CudaSlice, DeviceRepr, PushKernelArg};

use super::{gpu, grid_stride, Device, FullVariant, KernelCtx, KernelFault, RESIDENT_LEVELS, RESOLVE_PIECE};
use crate::error::{Error, Result};

/// Bytes per token-index bucket, log2, by default (kernels/chase.cuh `TOKEN_BUCKET_LOG`; slices are at least 2^9
/// bytes). The index costs 4 bytes a bucket: 1/16 of the stream at 6.
pub(super) const TOKEN_BUCKET_LOG: u32 = 6;

/// The bucket log the kernels are compiled with: TOKEN_BUCKET_LOG, or ACEAPEX_GPU_TOKEN_BUCKET_LOG (3 ..= 9) to
/// compare (`compile_options` passes it to NVRTC).
pub(super) fn token_bucket_log() -> u32 {
    static LOG: OnceLock<u32> = OnceLock::new();
    super::env_knob(&LOG, "ACEAPEX_GPU_TOKEN_BUCKET_LOG", TOKEN_BUCKET_LOG, |l| (3..=9).contains(&l))
}

/// Whether seeks may use the resident parse (`ACEAPEX_GPU_SEEK_RESIDENT=0` turns it off, for comparison).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResidentSeeks {
    /// Parse the whole archive on the first seek when it fits in device memory, then chase through it.
    Auto,
    /// Always seek from the compressed archive.
    Off,
}

impl ResidentSeeks {
    pub(super) fn from_env() -> ResidentSeeks {
        match std::env::var("ACEAPEX_GPU_SEEK_RESIDENT").as_deref() {
            Ok("0") | Ok("off") => ResidentSeeks::Off,
            _ => ResidentSeeks::Auto,
        }
    }
}

/// The resident chase's maps (see `Device::chase_maps`) beside the token index: a bit per stream byte, and a record
/// of 4 words per token.
pub(super) struct ChaseMaps {
    literals: CudaSlice<u32>,
    records: CudaSlice<u32>,
}

/// Device addresses of the chase's maps ([`Device::chase_map_ptrs`]), one kernel argument: kernels/common.cuh
/// `Maps`. All zero where a kernel takes them but does not use them.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub(super) struct ChaseMapPtrs {
    pub index: u64,
    pub literals: u64,
    pub records: u64,
}

// SAFETY: #[repr(C)], three u64 device addresses in the order of the CUDA struct `Maps` (three 8-byte pointers), so
// passing it by value as a kernel parameter matches the kernel's layout.
unsafe impl DeviceRepr for ChaseMapPtrs {}

impl Device {
    /// Chooses whether later seeks may use the resident parse (benchmarks compare both paths).
    pub fn set_resident_seeks(&mut self, mode: ResidentSeeks) {
        self.resident_seeks = mode;
        self.resident_tried = false;
    }

    /// Device bytes the full decode's buffers take (`Device::ensure_full`), for the memory check.
    fn full_footprint(&self) -> u64 {
        let units = self.nunits;
        // ensure_full gives every unit nmatch + 1 tokens; a bad unit (not in total_tokens) has nmatch 0.
        let tokens = self.meta_host.total_tokens + units;
        let stream = units << self.unit_log;
        let pieces = tokens + stream / RESOLVE_PIECE;
        // bytes + stamps, four token arrays (u32 ×3, u64), four lists of u64, per-unit worklist/offsets/tasks,
        // the token index, the literal map and the chase records.
        2 * stream
            + (tokens + 1) * 36
            + pieces * 32
            + units * 16
            + (units << (self.unit_log - token_bucket_log())) * 4
            + stream / 8
    }

    /// True when this seek may go through the resident parse, running that parse first if it has not been tried.
    /// A failure to build it is logged and leaves seeks on the compressed path.
    pub(super) fn resident_ready(&mut self) -> bool {
        if self.resident_seeks == ResidentSeeks::Off {
            return false;
        }
        if !self.resident() && !self.resident_tried {
            self.resident_tried = true;
            self.build_resident();
        }
        if self.resident() && !self.token_ids_fit() {
            tracing::info!("GPU seeks parse from the compressed archive: more tokens than the token index addresses");
            self.resident_seeks = ResidentSeeks::Off;
            return false;
        }
        if self.resident() && !self.chase_maps_ready {
            if let Err(e) = self.build_chase_maps() {
                tracing::info!("GPU seeks parse from the compressed archive: the token maps failed ({e})");
                self.resident_seeks = ResidentSeeks::Off;
                return false;
            }
        }
        self.resident()
    }

    /// Runs the parse of every unit (the full decode's ParseOnly stage) when its buffers fit in half the free
    /// device memory (or are already allocated).
    fn build_resident(&mut self) {
        let need = self.full_footprint();
        let free = result::mem_get_info().map(|(free, _)| free as u64).unwrap_or(0);
        if self.full.is_none() && need > free / 2 {
            tracing::info!(
                "GPU seeks parse from the compressed archive: a resident parse needs {} MB of device memory, {} MB free",
                need >> 20,
                free >> 20
            );
            return;
        }
        let started = std::time::Instant::now();
        match self.full_decode(FullVariant::ParseOnly, None) {
            Ok(Ok(run)) => tracing::info!(
                "GPU seeks resolve through the resident parse of all {} slices ({:.2} ms device, {:.1} ms with \
                 allocation, {} MB of device memory)",
                self.nunits,
                run.device_ms,
                started.elapsed().as_secs_f64() * 1e3,
                need >> 20
            ),
            Ok(Err(fault)) => {
                tracing::info!("GPU seeks parse from the compressed archive: the resident parse failed ({fault:?})")
            }
            Err(e) => tracing::info!("GPU seeks parse from the compressed archive: the resident parse failed ({e})"),
        }
    }

    /// Whether every token position of the full decode's buffers fits the token index's 32 bits (kernels/chase.cuh
    /// `index_tokens`); beyond that nothing uses the index (4 billion tokens: 80 GB of token arrays).
    pub(super) fn token_ids_fit(&self) -> bool {
        self.full.as_ref().is_some_and(|f| f.tpos.len() as u64 <= u64::from(u32::MAX))
    }

    /// The device address of the token index's buffer (allocated on first use): nunits << (unit_log -
    /// TOKEN_BUCKET_LOG) entries.
    pub(super) fn token_index_ptr(&mut self) -> Result<u64> {
        if self.token_index.is_none() {
            let entries = (self.nunits << (self.unit_log - token_bucket_log())) as usize;
            // SAFETY: a device buffer of plain integers; index_tokens writes every entry before any is read (the
            // full decode runs it before its chase, build_chase_maps before a resident seek).
            let index = unsafe { self.stream.alloc::<u32>(entries.max(1)) }.map_err(gpu("alloc token index"))?;
            self.token_index = Some(index);
        }
        Ok(self.ptr(self.token_index.as_ref().expect("allocated above")))
    }

    /// Builds the chase's maps over the resident tokens ([`Device::enqueue_chase_maps`]) and waits for them. A few
    /// µs once after a parse, so the index is rebuilt here even when the full decode's chase made one.
    fn build_chase_maps(&mut self) -> Result<()> {
        let maps = self.chase_map_ptrs()?;
        let full = self.full.as_ref().ok_or_else(|| Error::Gpu("no resident parse".into()))?;
        self.enqueue_chase_maps(&self.full_ctx(full, false), maps)?;
        self.stream.synchronize().map_err(gpu("chase maps"))?;
        self.chase_maps_ready = true;
        Ok(())
    }

    /// The device addresses of the token index, the literal map and the chase records, allocated on first use
    /// for the full decode's buffers (which must exist), once, like those buffers (captured seek graphs hold their
    /// addresses).
    pub(super) fn chase_map_ptrs(&mut self) -> Result<ChaseMapPtrs> {
        self.token_index_ptr()?;
        let full = self.full.as_ref().ok_or_else(|| Error::Gpu("no resident parse".into()))?;
        let words = (self.nunits << self.unit_log) / 32;
        let records = full.tpos.len();
        if self.chase_maps.is_none() {
            // SAFETY: device buffers of plain integers; index_chase_maps (or finish_linear_k1) writes every element
            // before any is read (`chase_maps_ready` says when they have).
            let maps = unsafe {
                ChaseMaps {
                    literals: self.stream.alloc::<u32>(words.max(1) as usize).map_err(gpu("alloc literal map"))?,
                    records: self.stream.alloc::<u32>(records * 4).map_err(gpu("alloc chase records"))?,
                }
            };
            self.chase_maps = Some(maps);
        }
        Ok(self.allocated_chase_maps().expect("allocated above"))
    }

    /// The device addresses of the chase maps where [`Device::chase_map_ptrs`] has allocated them, else None.
    fn allocated_chase_maps(&self) -> Option<ChaseMapPtrs> {
        let (index, maps) = (self.token_index.as_ref()?, self.chase_maps.as_ref()?);
        Some(ChaseMapPtrs {
            index: self.ptr(index),
            literals: self.ptr(&maps.literals),
            records: self.ptr(&maps.records),
        })
    }

    /// Enqueues the chase's maps over the parsed tokens of `c` (the full decode's context): the token index, the
    /// literal map and the chase records, one launch of kernels/chase.cuh `index_chase_maps` (a warp a unit), with
    /// no synchronisation.
    pub(super) fn enqueue_chase_maps(&self, c: &KernelCtx, maps: ChaseMapPtrs) -> Result<()> {
        // SAFETY: matches index_chase_maps(Ctx, Maps); `c` points at the full decode's buffers with every unit's
        // tokens (the parse before it succeeded or its fault is reported first); the index holds nunits <<
        // (unit_log - TOKEN_BUCKET_LOG) entries, the map (nunits << unit_log) / 32 words (unit_log >= 9) and the
        // records one per token entry (chase_map_ptrs: tpos's length, which covers tok_off's every unit).
        unsafe {
            self.stream
                .launch_builder(&self.kernels.index_chase_maps)
                .arg(c)
                .arg(&maps)
                .launch(grid_stride(self.nunits * 32))
        }
        .map(|_| ())
        .map_err(gpu("chase maps"))
    }

    /// Enqueues the token index (kernels/chase.cuh `index_tokens`) over the parsed tokens of `c` (the full
    /// decode's context) into `index`, with no synchronisation: the chase maps' first part, and the index
    /// `Resolve::Chase`'s chase reads.
    pub(super) fn enqueue_token_index(&self, c: &KernelCtx, index: u64) -> Result<()> {
        let entries = self.nunits << (self.unit_log - token_bucket_log());
        // SAFETY: matches index_tokens(Ctx, u32*); `c` points at the full decode's buffers with every unit's tokens
        // (tok_off their exact prefix sum) and `index` at token_index_ptr's nunits << (unit_log - TOKEN_BUCKET_LOG)
        // entries.
        unsafe {
            self.stream.launch_builder(&self.kernels.index_tokens).arg(c).arg(&index).launch(grid_stride(entries))
        }
        .map(|_| ())
        .map_err(gpu("token index"))
    }

    /// One resident seek over the `n` unit ids already in pinned memory: bytes of the requested units at
    /// `k << unit_log`, and the device ms. Faults (a chain deeper than max_depth) come back as `Ok(Err)`.
    pub(super) fn seek_resident(&mut self, n: usize) -> Result<std::result::Result<(&[u8], f32), KernelFault>> {
        let device_ms = self.run_seek(n, RESIDENT_LEVELS)?;
        let status = self.seek.host_status.as_slice().map_err(gpu("pinned status"))?[0];
        if let Some(fault) = KernelFault::from_status(status) {
            return Ok(Err(fault));
        }
        let out = self.seek.host_out.as_slice().map_err(gpu("pinned output"))?;
        Ok(Ok((&out[..n << self.unit_log], device_ms)))
    }

    /// Enqueues a resident seek (or records it into a graph): ids up, `chase_resident`, bytes and status down,
    /// status cleared. Uses the pinned buffers' raw pointers, so nothing here waits on the host.
    pub(super) fn enqueue_resident(&mut self, n: usize) -> Result<()> {
        let full = self.full.as_ref().ok_or_else(|| Error::Gpu("no resident parse".into()))?;
        let status = self.ptr(&self.seek.status);
        let c = KernelCtx { status, ..self.full_ctx(full, false) };
        let (ids_ptr, out_ptr) = (self.ptr(&self.seek.ids), self.ptr(&self.seek.out));
        let maps = self.allocated_chase_maps().ok_or_else(|| Error::Gpu("no chase maps".into()))?;
        let out_bytes = n << self.unit_log;
        let n32 = n as u32;
        let stream = self.stream.clone();
        let cu = stream.cu_stream();
        let s = &mut self.seek;
        let host_ids = s.host_ids.as_mut_slice().map_err(gpu("pinned ids"))?.as_ptr();
        let host_out = s.host_out.as_mut_slice().map_err(gpu("pinned output"))?.as_mut_ptr();
        let host_status = s.host_status.as_mut_slice().map_err(gpu("pinned status"))?.as_mut_ptr();
        let mut marks = Vec::new();
        let mut mark = self.stage_marker(&mut marks);
        let cfg = grid_stride(out_bytes as u64);
        // SAFETY: the pinned buffers hold at least n unit ids (seek_batch filled them, n <= the batch's units),
        // n << unit_log result bytes and one status word; the device buffers `ids` and `out` are as large; all
        // live as long as this Device, and run_seek synchronises before anything reads or reuses them. The launch
        // matches chase_resident(Ctx, const u32*, u32, u8*, Maps); `c` points at
        // the full decode's buffers, which hold every unit's tokens (tok_off is their exact prefix sum) and the
        // whole stream's bytes, and the token index and the chase maps cover every unit and token.
        unsafe {
            result::memcpy_htod_async(ids_ptr, std::slice::from_raw_parts(host_ids, n), cu)
                .map_err(gpu("ids upload"))?;
            stream
                .launch_builder(&self.kernels.chase_resident)
                .arg(&c)
                .arg(&ids_ptr)
                .arg(&n32)
                .arg(&out_ptr)
                .arg(&maps)
                .launch(cfg)
                .map_err(gpu("resident chase"))?;
            mark("ids + resident chase")?;
            result::memcpy_dtoh_async(std::slice::from_raw_parts_mut(host_out, out_bytes), out_ptr, cu)
                .map_err(gpu("result copy"))?;
            result::memcpy_dtoh_async(std::slice::from_raw_parts_mut(host_status, 1), status, cu)
                .map_err(gpu("status copy"))?;
            result::memset_d8_async(status, 0, 8, cu).map_err(gpu("reset"))?;
            mark("to host")?;
        }
        drop(mark); // ends its borrow of `marks`
        if let Some(profile) = self.profile.as_mut() {
            profile.marks = marks;
        }
        Ok(())
    }
}
