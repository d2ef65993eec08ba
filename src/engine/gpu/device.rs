//! The CUDA side of the GPU engine: context, NVRTC-compiled module, device-resident archive, scratch buffers and
//! the launch sequences of kernels/decode.cu.
//!
//! The kernels work on units (slices, see prep.rs): a seek request for blocks becomes a request for all their
//! slices, in order, so the results of requested block `k` are the `B/S` consecutive units at `k << block_log`.
//!
//! Nothing here is reached without a working driver: [`Device::open`] is the only entry and runs inside the
//! engine's panic guard. Every driver call's error is turned into [`Error::Gpu`]; a batch that fails leaves the
//! device in a state from which the next batch starts clean (the batch's last launches reset it).

//!
//! - `compile.rs`: the kernels through NVRTC, and their cache;
//! - `seek.rs`: batches of requested blocks (the seek path), captured as CUDA graphs;
//! - `full.rs`: the whole-archive decode and its stage breakdown, and the streamed whole-range reads;
//! - `resident.rs`: the resident parse the seeks chase through once it fits;
//! - here: the context, the device-resident archive, the kernels' shared arguments and what the paths share.

use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

use cudarc::driver::result;
use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaGraph, CudaModule, CudaSlice, CudaStream, DevicePtr, DeviceRepr,
    LaunchConfig, PinnedHostSlice, PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};

use super::kernel_cache;
use super::prep::{self, UnitMeta};
use crate::error::{Error, Result};
use crate::format::ArchiveData;
use compile::*;
use full::*;
use resident::ChaseMaps;
use seek::*;

pub use compile::{compile_check, kernel_source};
#[cfg(test)]
pub(super) use full::LEVEL_CAP;
pub use full::{FullRun, FullVariant, LevelReport, Resolve};
pub use resident::ResidentSeeks;

mod compile;
mod full;
mod resident;
mod seek;

/// Threads per CTA for the warp-per-item kernels.
const CTA_THREADS: u32 = 128;

/// Zero bytes after the uploaded payloads: the K = 1 literal phase reads the word stream by aligned 32-bit words,
/// and the last of a slice may reach up to 3 bytes past the payloads' end (kernels/words.cuh `WordReader1`).
const FILE_PAD: usize = 16;

/// Grid of the seek kernels whose work count lives on the device (see `Device::later_grid`), and the largest
/// grid of the first level.
const LEVEL_GRID: u32 = 1024;

/// Most blocks requested in one launch sequence; larger requests are split.
pub const MAX_BATCH: usize = 1024;

/// Decoded bytes the seek worklist may hold (requested units plus sources), bounding the scratch memory.
const WORKLIST_BYTES: u64 = 512 << 20;

/// u32 words of saved rANS state per seek worklist entry (kernels/common.cuh `RESUME_WORDS`: rANS lane 0's words
/// taken and state after the code phase).
const RESUME_WORDS: usize = 2;

/// Bytes of a deferred match per list entry of the full decode's resolve rounds (kernel RESOLVE_PIECE).
const RESOLVE_PIECE: u64 = 128;

/// A tuning knob read once from the environment (`name`), where a valid value replaces `default`: the variants
/// the H200 runs compare without a rebuild.
fn env_knob<T: std::str::FromStr + Copy + Send + Sync>(
    cell: &'static OnceLock<T>,
    name: &str,
    default: T,
    valid: impl Fn(T) -> bool,
) -> T {
    *cell.get_or_init(|| std::env::var(name).ok().and_then(|v| v.parse().ok()).filter(|&v| valid(v)).unwrap_or(default))
}

/// The `levels` key of a resident seek's launch sequence (resident.rs) in `run_seek` and its graphs.
const RESIDENT_LEVELS: u32 = u32::MAX;

/// The pinned buffer pair `stream_full` copies through, pinned when the device opens (8 MiB of pinned host
/// memory in all; a call with larger pieces pins a larger pair). 4 MiB copies at 50 GB/s take 80 µs, so larger
/// pieces would only cost pinning time.
const STREAM_PIN_MIN: usize = 4 << 20;

/// Error codes written by the kernels (kernels/common.cuh `E_*`).
fn describe(code: u32) -> &'static str {
    match code {
        1 => "slice header or block directory invalid",
        2 => "rANS symbol from a slot no symbol covers",
        3 => "rANS word stream ran out",
        4 => "rANS final state or word count wrong",
        5 => "extra-bits stream length or padding wrong",
        6 => "literal or length sums disagree with the block",
        7 => "match source before the stream start",
        8 => "reference depth exceeded",
        9 => "a needed source slice was not parsed",
        10 => "seek worklist or token pool full",
        11 => "seek range list full",
        12 => "length value out of range",
        _ => "unknown kernel error",
    }
}

/// A failure reported by the kernels through the status word.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KernelFault {
    pub code: u32,
    /// The unit (global slice id) the kernel reported.
    pub unit: u64,
}

impl KernelFault {
    pub fn from_status(word: u64) -> Option<KernelFault> {
        (word != 0).then_some(KernelFault { code: (word >> 40) as u32, unit: word & 0xFF_FFFF_FFFF })
    }

    /// Capacity faults: the batch was too large for the scratch buffers, a smaller one may pass.
    pub fn is_capacity(&self) -> bool {
        matches!(self.code, 9..=11)
    }

    pub fn into_error(self) -> Error {
        Error::Gpu(format!("kernel fault {} ({}) at slice {}", self.code, describe(self.code), self.unit))
    }
}

/// The kernels' shared arguments, field for field `struct Ctx` in kernels/common.cuh.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
struct KernelCtx {
    file: u64,
    meta: u64,
    dtab: u64,
    worklist: u64,
    tok_off: u64,
    tpos: u64,
    mpos: u64,
    back: u64,
    bytes: u64,
    slot_of_unit: u64,
    counters: u64,
    pool_used: u64,
    status: u64,
    rsrc0: u64,
    rsrc1: u64,
    rlen0: u64,
    rlen1: u64,
    stamps: u64,
    lidx: u64,
    resume: u64,
    ctab: u64,
    xgrp: u64,
    xtab: u64,
    /// Two u32 per unit, the words each rANS lane took, when `parse_k1_linear` runs a K = 2 archive's lane 1 on
    /// threads of its own (`finish_linear_k1` checks their sum); 0 elsewhere.
    lane_end: u64,
    pool_cap: u64,
    nunits: u64,
    wl_cap: u32,
    range_cap: u32,
    lanes: u32,
    unit_log: u32,
    group_shift: u32,
    max_depth: u32,
}

// SAFETY: KernelCtx is #[repr(C)], made only of u64/u32 fields in the order and with the alignment of the CUDA
// struct `Ctx` (8-byte pointers first, then 32-bit fields, 232 bytes in all), so passing it by value as a
// kernel parameter matches the kernel's layout.
unsafe impl DeviceRepr for KernelCtx {}

struct Kernels {
    /// A thread a unit (`parse_k1`): the full decode of many units, and the fused seek levels.
    parse: CudaFunction,
    /// The parse with the word streams staged in shared memory (`parse_k1_staged`), which the full decode of few
    /// units runs (see `Device::k1_staged`).
    parse_staged: CudaFunction,
    /// `parse_k1_staged` writing the literals in literal order (`parse_k1_linear`; with K = 2 each unit's rANS
    /// lane 1 on a thread of its own; the codes left for later), and `finish_linear_k1`, which parses the tokens
    /// and moves the literals to their offsets after it (see `Device::k1_linear`).
    parse_linear: (CudaFunction, CudaFunction),
    /// The seek's token levels: a whole warp per slice (`parse_k32`: the code phase on one lane, the token parse
    /// on all 32), unless ACEAPEX_GPU_SEEK_GROUP=1 asks for a thread per slice (`parse_k1`).
    parse_seek: CudaFunction,
    literals: CudaFunction,
    /// The seek's literal launch, a warp per slice with shared-memory tables (see `Device::seek_smem`).
    literals_warp: CudaFunction,
    seed: CudaFunction,
    expand: CudaFunction,
    chase: CudaFunction,
    chase_resident: CudaFunction,
    index_tokens: CudaFunction,
    index_chase_maps: CudaFunction,
    /// The full decode's resolution through the chase maps (`Resolve::Maps`).
    chase_matches: CudaFunction,
    reset: CudaFunction,
    resolve_round: CudaFunction,
    resolve_chase: CudaFunction,
    seek_resolve: CudaFunction,
    level_pass: CudaFunction,
    level_ordered: CudaFunction,
    level_starts: CudaFunction,
    level_order: CudaFunction,
    level_rebase: CudaFunction,
    copy_level: CudaFunction,
    copy_tail: CudaFunction,
    chase_unleveled: CudaFunction,
    copy_flow: CudaFunction,
}

/// The GPU with one archive resident on it.
pub struct Device {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    /// The kernels' module (its functions are in `kernels`; kept for its globals, see `k1_clocks`).
    module: Arc<CudaModule>,
    kernels: Kernels,
    file: CudaSlice<u8>,
    meta: CudaSlice<u32>,
    dtab: CudaSlice<u32>,
    ctab: CudaSlice<u32>,
    /// Literal context models: per group (order, first context), per context two u32 (prep::ContextTables).
    xgrp: CudaSlice<u32>,
    xtab: CudaSlice<u32>,
    meta_host: UnitMeta,
    nunits: u64,
    lanes: u32,
    block_log: u32,
    unit_log: u32,
    group_shift: u32,
    max_depth: u32,
    seek: SeekBuffers,
    full: Option<FullBuffers>,
    /// The two pinned buffers `stream_full` copies pieces through, pinned at open and kept (a mount streams a file
    /// one window at a time, and pinning costs milliseconds every time), grown when a larger piece comes.
    stream_bufs: Option<[PinnedHostSlice<u8>; 2]>,
    /// The stages of the last full decode, if it succeeded. `Full`: `full.bytes` holds the whole stream (its
    /// blocks still unverified; readers check each against the index), see [`Device::full_ready`]. `ParseOnly` or
    /// `Full`: `full` holds every unit's tokens and every literal at its stream position, which is all
    /// `chase_resident` reads, see [`Device::resident`].
    last_full: Option<FullVariant>,
    /// Seeks may resolve through the resident parse (resident.rs): whether, and whether it was tried.
    resident_seeks: ResidentSeeks,
    resident_tried: bool,
    /// The resident parse's token index (kernel `index_tokens`), built with the first resident seek. It depends
    /// only on the tokens, which every full decode of this archive rewrites with the same values.
    token_index: Option<CudaSlice<u32>>,
    /// The resident chase's maps, built from the tokens with the first resident seek after a parse (resident.rs),
    /// beside the token index: the literal map (a bit per stream byte, set for a literal) and the chase records (16
    /// bytes a token), all three by kernel `index_chase_maps` (or `finish_linear_k1`, in a full decode).
    chase_maps: Option<ChaseMaps>,
    /// `token_index` and `chase_maps` hold the maps of the current resident tokens.
    chase_maps_ready: bool,
    events: (CudaEvent, CudaEvent),
    /// Grid of the seek kernels whose work count lives on the device (later levels, literals, resolve rounds),
    /// which stride over it: LEVEL_GRID, or ACEAPEX_GPU_LEVEL_GRID. (Two CTAs per SM was measured slower: a
    /// depth-16 seek parses thousands of slices and expands thousands of ranges per level even for one block.)
    later_grid: u32,
    /// The GPU's SM count, and the preferred shared-memory carveout the parse function has now (percent; -1: the
    /// driver's choice; see [`Device::set_parse_carveout`]).
    sm_count: u32,
    parse_carveout: i32,
    /// The shared-memory limits of `parse_k1_staged` and `parse_k1_linear` (full::prepare_staged_parse) and the
    /// carveouts they have now.
    staged: [full::StagedParse; 2],
    /// Expansions drop source pieces inside the requested units (kernels/seek.cuh `piece_needed`), unless
    /// ACEAPEX_GPU_EXPAND_ALL=1 (for comparison).
    skip_requested: bool,
    /// Source levels the seek path launches first (grows to the deepest level a batch needed).
    depth_hint: u32,
    /// Captured seek sequences by (batch size, levels), and whether capturing works here.
    graphs: HashMap<(usize, u32), SeekGraph>,
    use_graphs: bool,
    /// Resolve seeks byte by byte (chase_bytes, the default: faster on the H200 for 1 to 1000 blocks) or by
    /// resolve rounds over all parsed slots (ACEAPEX_GPU_SEEK_ROUNDS=1, for comparison).
    seek_by_chase: bool,
    /// Seek levels parse tokens only and one launch after the last level decodes every parsed slice's literals
    /// (the default), or each level parses whole slices (ACEAPEX_GPU_SEEK_FUSED=1, for comparison).
    seek_split: bool,
    /// The seek's token levels and literal launch keep the slice's decode tables in shared memory, a warp per
    /// slice (the default, with the literals split off and slices of at most 4 KiB), or read them from global
    /// memory (ACEAPEX_GPU_SEEK_GLOBAL_TABLES=1, for comparison).
    seek_smem: bool,
    /// Deferred matches carry only their unresolved span to the next resolve round (the default), or their whole
    /// length (ACEAPEX_GPU_RESOLVE_WHOLE=1, for comparison).
    resolve_trim: bool,
    /// How the complete decode resolves matches ([`Resolve`], ACEAPEX_GPU_RESOLVE).
    pub(super) resolve: Resolve,
    /// The full decode's chase finds tokens through a token index built after the parse (the default), or by
    /// binary search (ACEAPEX_GPU_CHASE_INDEX=0, for comparison).
    chase_index: bool,
    /// ACEAPEX_GPU_SEEK_PROFILE=1: seeks are launched without graphs, with an event after every stage, and the
    /// time between events is summed here by stage (total ms, batches); `marks` holds the current batch's events.
    profile: Option<SeekProfile>,
    /// Name and compute capability, for the log line.
    pub description: String,
}

fn gpu<E: std::fmt::Debug>(what: &'static str) -> impl FnOnce(E) -> Error {
    move |e| Error::Gpu(format!("{what}: {e:?}"))
}

/// Copies the archive's payload region (`[0, payload_end)` of the file) to the device in 64 MiB pieces read
/// with `pread`, so host memory stays bounded for any archive size.
fn upload_payloads(stream: &Arc<CudaStream>, data: &ArchiveData, payload_end: usize) -> Result<CudaSlice<u8>> {
    const PIECE: usize = 64 << 20;
    let mut file = stream.alloc_zeros::<u8>(payload_end + FILE_PAD).map_err(gpu("allocating payloads"))?;
    let mut host = vec![0u8; PIECE.min(payload_end)];
    let mut at = 0usize;
    while at < payload_end {
        let n = PIECE.min(payload_end - at);
        data.read_exact_at(at as u64, &mut host[..n])
            .map_err(|e| Error::Gpu(format!("reading payloads for the upload: {e}")))?;
        stream.memcpy_htod(&host[..n], &mut file.slice_mut(at..at + n)).map_err(gpu("uploading payloads"))?;
        at += n;
    }
    Ok(file)
}

fn grid_for(items: u64, per_cta: u64, cap: u32) -> u32 {
    items.div_ceil(per_cta).clamp(1, cap as u64) as u32
}

/// A launch of 256-thread CTAs, a thread an item, that strides over `items` with at most 16 CTAs for each of the
/// H200's 132 SMs (the map kernels, the resident chase and the map chase).
fn grid_stride(items: u64) -> LaunchConfig {
    LaunchConfig { grid_dim: (grid_for(items, 256, 132 * 16), 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 }
}

impl Device {
    /// Creates the context, compiles and loads the kernels, uploads the archive and allocates the seek scratch.
    pub fn open(data: &ArchiveData) -> Result<Device> {
        // FORMAT.md §3.4: one or two rANS lanes (the header parse refuses anything else; the kernels rely on it).
        if !matches!(data.header.rans_lanes, 1 | 2) {
            return Err(Error::Gpu(format!("rans_lanes {}: the GPU engine decodes 1 or 2", data.header.rans_lanes)));
        }
        let ctx = CudaContext::new(0).map_err(gpu("no CUDA device"))?;
        // SAFETY: event tracking only matters with several streams; this engine uses one stream, in order, and
        // disables tracking before allocating anything.
        unsafe { ctx.disable_event_tracking() };
        let (major, minor) = ctx.compute_capability().map_err(gpu("compute capability"))?;
        let name = ctx.name().unwrap_or_else(|_| "unknown GPU".into());
        let arch = arch_for(major, minor)?;
        let (ptx, cached) = compiled_ptx(arch)?;
        let module = match ctx.load_module(ptx) {
            Ok(module) => module,
            // A cached PTX this driver refuses (written by another NVRTC, say): compile it again, and replace it.
            Err(e) if cached => {
                tracing::warn!("GPU: the cached kernels did not load ({e:?}); compiling them again");
                let fresh = compile_fresh(arch, kernel_cache_file(arch).as_deref()).map_err(Error::Gpu)?;
                ctx.load_module(fresh).map_err(gpu("loading the kernels"))?
            }
            Err(e) => return Err(gpu("loading the kernels")(e)),
        };
        let load = |n: &str| module.load_function(n).map_err(gpu("kernel missing"));
        let kernels = Kernels {
            parse: load("parse_k1")?,
            parse_staged: load("parse_k1_staged")?,
            parse_linear: (load("parse_k1_linear")?, load("finish_linear_k1")?),
            parse_seek: match std::env::var_os("ACEAPEX_GPU_SEEK_GROUP") {
                Some(_) => load("parse_k1")?,
                None => load("parse_k32")?,
            },
            literals: load("literals_k1")?,
            literals_warp: load("literals_warp")?,
            seed: load("seed_batch")?,
            expand: load("expand_ranges")?,
            chase: load("chase_bytes")?,
            chase_resident: load("chase_resident")?,
            index_tokens: load("index_tokens")?,
            index_chase_maps: load("index_chase_maps")?,
            chase_matches: load("chase_matches")?,
            reset: load("reset_batch")?,
            resolve_round: load("resolve_round")?,
            resolve_chase: load("resolve_chase")?,
            seek_resolve: load("seek_resolve")?,
            level_pass: load("level_pass")?,
            level_ordered: load("level_ordered")?,
            level_starts: load("level_starts")?,
            level_order: load("level_order")?,
            level_rebase: load("level_rebase")?,
            copy_level: load("copy_level")?,
            copy_tail: load("copy_tail")?,
            chase_unleveled: load("chase_unleveled")?,
            copy_flow: load("copy_flow")?,
        };
        // A stream of our own: graphs cannot be captured on the legacy default stream.
        let stream = ctx.new_stream().map_err(gpu("stream"))?;

        let meta_host = prep::unit_meta(data);
        let payload_end = data.footer.tables_offset as usize;
        let file = upload_payloads(&stream, data, payload_end)?;
        let meta = stream.clone_htod(&meta_host.words).map_err(gpu("uploading block metadata"))?;
        let dtab = stream.clone_htod(&prep::decode_tables(&data.tables)).map_err(gpu("uploading tables"))?;
        let ctab = stream.clone_htod(&prep::compact_tables(&data.tables)).map_err(gpu("uploading tables"))?;
        let contexts = prep::context_tables(&data.tables);
        let xgrp = stream.clone_htod(&contexts.groups).map_err(gpu("uploading context tables"))?;
        let xtab = stream.clone_htod(&contexts.contexts).map_err(gpu("uploading context tables"))?;
        // The seek's token levels run 4 warps a CTA with CODE_SMEM_BYTES each: above the 48 KB default.
        kernels
            .parse_seek
            .set_attribute(
                cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                (CODE_SMEM_BYTES * (CTA_THREADS / 32)) as i32,
            )
            .map_err(gpu("shared memory attribute"))?;
        let staged = [
            full::prepare_staged_parse(&ctx, &kernels.parse_staged, 1)?,
            full::prepare_staged_parse(&ctx, &kernels.parse_linear.0, u32::from(data.header.rans_lanes))?,
        ];
        let nunits = data.global_slice_count();
        if nunits > u32::MAX as u64 / 2 {
            return Err(Error::Gpu("too many slices for the GPU engine".into()));
        }
        let header = &data.header;
        if header.slice_log > header.block_log {
            return Err(Error::Gpu("slice_log above block_log".into()));
        }
        let seek_by_chase = std::env::var_os("ACEAPEX_GPU_SEEK_ROUNDS").is_none();
        let seek = SeekBuffers::new(&ctx, &stream, data, &meta_host, !seek_by_chase)?;
        let events = (
            ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(gpu("event"))?,
            ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(gpu("event"))?,
        );
        stream.synchronize().map_err(gpu("upload"))?;
        let later_grid = std::env::var("ACEAPEX_GPU_LEVEL_GRID")
            .ok()
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(LEVEL_GRID)
            .clamp(1, 65535);
        let sm_count = ctx
            .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
            .map_err(gpu("device attribute"))?
            .max(1) as u32;
        // The streamed copies' pinned pair, pinned now: pinning took 19 ms for 2 × 16 MiB on the H200 (session
        // 15, run 2), which a mount's first sequential read used to wait for.
        // SAFETY: as in `alloc_host`: device copies write these buffers before the host reads them.
        let pin = || unsafe { ctx.alloc_pinned_with_flags::<u8>(STREAM_PIN_MIN, 0) }.map_err(gpu("pinned alloc"));
        let stream_bufs = Some([pin()?, pin()?]);
        Ok(Device {
            description: format!("{name} (sm_{major}{minor})"),
            ctx,
            stream,
            module,
            kernels,
            file,
            meta,
            dtab,
            ctab,
            xgrp,
            xtab,
            meta_host,
            nunits,
            lanes: header.rans_lanes as u32,
            block_log: header.block_log as u32,
            unit_log: header.slice_log as u32,
            group_shift: (header.block_log - header.slice_log + header.group_log) as u32,
            max_depth: header.max_depth as u32,
            seek,
            full: None,
            stream_bufs,
            last_full: None,
            resident_seeks: ResidentSeeks::from_env(),
            resident_tried: false,
            token_index: None,
            chase_maps: None,
            chase_maps_ready: false,
            events,
            later_grid,
            sm_count,
            parse_carveout: -1,
            staged,
            skip_requested: std::env::var_os("ACEAPEX_GPU_EXPAND_ALL").is_none(),
            depth_hint: 2,
            graphs: HashMap::new(),
            use_graphs: std::env::var_os("ACEAPEX_GPU_NO_GRAPHS").is_none()
                && std::env::var_os("ACEAPEX_GPU_SEEK_PROFILE").is_none(),
            seek_by_chase,
            seek_split: std::env::var_os("ACEAPEX_GPU_SEEK_FUSED").is_none(),
            seek_smem: std::env::var_os("ACEAPEX_GPU_SEEK_GLOBAL_TABLES").is_none()
                && std::env::var_os("ACEAPEX_GPU_SEEK_FUSED").is_none()
                && std::env::var_os("ACEAPEX_GPU_SEEK_GROUP").is_none(),
            resolve_trim: std::env::var_os("ACEAPEX_GPU_RESOLVE_WHOLE").is_none(),
            resolve: Resolve::from_env(),
            chase_index: std::env::var("ACEAPEX_GPU_CHASE_INDEX").as_deref() != Ok("0"),
            profile: std::env::var_os("ACEAPEX_GPU_SEEK_PROFILE").map(|_| SeekProfile::default()),
        })
    }

    fn base_ctx(&self) -> KernelCtx {
        KernelCtx {
            file: self.ptr(&self.file),
            meta: self.ptr(&self.meta),
            dtab: self.ptr(&self.dtab),
            ctab: self.ptr(&self.ctab),
            xgrp: self.ptr(&self.xgrp),
            xtab: self.ptr(&self.xtab),
            nunits: self.nunits,
            lanes: self.lanes,
            unit_log: self.unit_log,
            group_shift: self.group_shift,
            max_depth: self.max_depth,
            ..Default::default()
        }
    }

    fn ptr<T>(&self, s: &CudaSlice<T>) -> u64 {
        let (p, _sync) = s.device_ptr(&self.stream);
        p
    }

    fn counters_len(&self) -> usize {
        2 + 2 * (self.max_depth as usize + 2)
    }

    /// The chain times the last linear parse recorded (kernels/parse.cuh `k1_clocks`: per unit and rANS lane,
    /// record 2 unit + lane: cycles, start and end in globaltimer ns, SM), when the kernels were compiled with them
    /// (ACEAPEX_GPU_K1_CLOCKS=1); None otherwise. A measurement, for `gpubench --clocks`.
    pub fn k1_clocks(&self) -> Result<Option<Vec<[u64; 4]>>> {
        let n = k1_clock_records() as usize;
        if n == 0 {
            return Ok(None);
        }
        let records = (2 * self.nunits as usize).min(n);
        let global = self.module.get_global("k1_clocks", &self.stream).map_err(gpu("k1_clocks"))?;
        // Only this archive's records (the array holds `n`).
        let used = global.try_slice(..records * 32).ok_or_else(|| Error::Gpu("k1_clocks is smaller".into()))?;
        let mut raw = vec![0u8; records * 32];
        self.stream.memcpy_dtoh(&used, &mut raw).map_err(gpu("k1_clocks"))?;
        self.stream.synchronize().map_err(gpu("k1_clocks"))?;
        let word = |i: usize| u64::from_le_bytes(raw[8 * i..8 * i + 8].try_into().expect("8 bytes"));
        Ok(Some((0..records).map(|r| std::array::from_fn(|k| word(4 * r + k))).collect()))
    }

    /// Page-locked host memory for results (not write-combined: the host reads it).
    pub fn alloc_host(&self, len: usize) -> Result<PinnedHostSlice<u8>> {
        // SAFETY: the buffer is written by device copies before the host reads it (callers synchronise).
        unsafe { self.ctx.alloc_pinned_with_flags::<u8>(len.max(1), 0) }.map_err(gpu("pinned alloc"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of `#define NAME value` in the kernels (kernels/*.cuh): decimal, or hexadecimal with a `u`.
    fn kernel_define(name: &str) -> u64 {
        let line = kernel_source()
            .lines()
            .find_map(|l| l.strip_prefix("#define ")?.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("the kernels have no #define {name}"));
        let value = line.split_whitespace().next().unwrap();
        match value.strip_prefix("0x") {
            Some(hex) => u64::from_str_radix(hex.trim_end_matches('u'), 16).unwrap(),
            None => value.parse().unwrap(),
        }
    }

    /// The levels copied: sparse high levels are left to the chase, a heavy one is not.
    #[test]
    fn sparse_high_levels_are_chased() {
        // 1000 pieces over the cap, 100,000 at level 1, 50,000 at 2, then 10 levels of 100.
        let mut hist = vec![0u32; LEVELS];
        hist[0] = 1000;
        hist[1] = 100_000;
        hist[2] = 50_000;
        for h in &mut hist[3..13] {
            *h = 100;
        }
        // 152,000 pieces: at most max(593, 1024) chased above the copied levels: levels 3..=12 (1,000 pieces).
        assert_eq!(copied_levels(&hist, 12, CHASE_SHARE_SESSION16), 2);
        assert_eq!(copied_levels(&hist, 0, CHASE_SHARE_SESSION16), 0);
        hist[12] = 5000;
        assert_eq!(copied_levels(&hist, 12, CHASE_SHARE_SESSION16), 12, "a heavy top level is copied");
        assert_eq!(copied_levels(&hist, 12, 0), 12, "share 0: every level is copied");
    }

    /// A compile stores its PTX in the kernel cache, and the cache gives back exactly that PTX.
    #[test]
    fn compiled_kernels_go_to_the_cache_and_come_back() {
        if !super::super::tests::nvrtc_loadable("kernel cache check") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = kernel_cache::file_for(dir.path(), kernel_source(), &compile_options(), "sm_90");
        let ptx = compile_fresh("sm_90", Some(&path)).unwrap();
        assert_eq!(kernel_cache::read(&path).as_deref(), Some(ptx.to_src().as_str()));
    }

    /// Levels fall in the band of their piece count; levels past the highest are not counted.
    #[test]
    fn level_bands_count_levels_and_pieces() {
        let mut hist = vec![0u32; LEVELS];
        hist[0] = 7; // over the cap: not a level
        hist[1..=5].copy_from_slice(&[100_000, 600, 100, 5, 1]);
        hist[6] = 9; // past max_level
        let bands = level_bands(&hist, 5);
        assert_eq!(bands, vec![(1, 2, 6), (64, 1, 100), (128, 0, 0), (512, 1, 600), (4096, 0, 0), (65536, 1, 100_000)]);
    }

    /// Dense levels get a launch each; the sparse levels between them are copied a run per launch.
    #[test]
    fn copy_launches_group_sparse_levels_into_runs() {
        let mut hist = vec![0u32; LEVELS];
        hist[1..=8].copy_from_slice(&[900, 500, 40, 30, 700, 10, 5, 1]);
        assert_eq!(copy_launches(&hist, 8, 100), vec![(1, 1), (2, 2), (3, 4), (5, 5), (6, 8)]);
        assert_eq!(copy_launches(&hist, 8, 0), (1..=8).map(|l| (l, l)).collect::<Vec<_>>(), "runs off");
        assert_eq!(copy_launches(&hist, 8, u32::MAX), vec![(1, 8)], "one run");
        assert_eq!(copy_launches(&hist, 0, 100), vec![], "no levels");
    }

    #[test]
    fn parse_order_takes_each_group_most_first() {
        // Six units in groups of four (group_shift 2): symbols 3 nmatch + 1 + nlit = 4, 11, 2, 11 | 9, 1.
        let rows = [(1, 0), (2, 4), (0, 1), (3, 1), (2, 2), (0, 0)];
        let mut meta = vec![0u32; rows.len() * prep::META_WORDS];
        for (u, (nmatch, nlit)) in rows.into_iter().enumerate() {
            meta[u * prep::META_WORDS + 2] = nmatch;
            meta[u * prep::META_WORDS + 3] = nlit;
        }
        // Ties keep stream order (a stable sort); no unit leaves its group.
        let mut ids: Vec<u32> = (0..6).collect();
        sort_groups_most_first(&mut ids, &meta, 2, unit_symbols);
        assert_eq!(ids, vec![1, 3, 0, 2, 4, 5]);
        // By matches (codes): 1, 2, 0, 3 | 2, 0.
        let mut ids: Vec<u32> = (0..6).collect();
        sort_groups_most_first(&mut ids, &meta, 2, unit_matches);
        assert_eq!(ids, vec![3, 1, 0, 2, 4, 5]);
        // Few units (the staged parse) take the most codes first; more keep stream order. (No unit here is
        // context-coded, so no group mixes the literal kinds.)
        let few = Some(FewUnits { cta_units: 4, warp_units: 2, max_ctas: 132, table_warp_units: 2 });
        assert_eq!(parse_order(&meta, 2, few), vec![3, 1, 0, 2, 4, 5]);
        assert_eq!(parse_order(&meta, 2, None), (0..6).collect::<Vec<u32>>());
    }

    /// Table-coded units go to CTAs of their own at the end, each group's from a CTA boundary: a group of both
    /// kinds keeps its entries, a group of table-coded units only gives them up; fewer a warp where asked, more
    /// where the CTAs would not fit.
    #[test]
    fn literal_kinds_go_to_warps_of_their_own() {
        // Groups of four (group_shift 2): context-coded (c) or table-coded (t): c t c c | t t t t | c c c c | c c t.
        let kinds = [true, false, true, true, false, false, false, false, true, true, true, true, true, true, false];
        let mut meta = vec![0u32; kinds.len() * prep::META_WORDS];
        for (u, ctx) in kinds.into_iter().enumerate() {
            meta[u * prep::META_WORDS + 6] = if ctx { prep::META_CTX } else { 0 };
        }
        let ids: Vec<u32> = (0..kinds.len() as u32).collect();
        let x = NO_UNIT;
        let few = FewUnits { cta_units: 4, warp_units: 2, max_ctas: 132, table_warp_units: 2 };
        let apart = literal_kinds_apart(ids.clone(), &meta, 2, few);
        assert_eq!(apart, vec![0, 2, 3, x, 8, 9, 10, 11, 12, 13, x, x, 1, x, x, x, 4, 5, 6, 7, 14]);
        // One table-coded unit a warp.
        let one = literal_kinds_apart(ids.clone(), &meta, 2, FewUnits { table_warp_units: 1, ..few });
        assert_eq!(&one[12..], &[1, x, x, x, 4, x, 5, x, 6, x, 7, x, 14]);
        // Seven CTAs do not fit in six: two a warp then (six CTAs).
        let fit = literal_kinds_apart(ids.clone(), &meta, 2, FewUnits { table_warp_units: 1, max_ctas: 6, ..few });
        assert_eq!(fit, apart);
        // Too many CTAs to run at once even so: as it was.
        assert_eq!(literal_kinds_apart(ids.clone(), &meta, 2, FewUnits { max_ctas: 4, ..few }), ids);
        // One kind everywhere: as it was.
        let all_table = vec![0u32; kinds.len() * prep::META_WORDS];
        assert_eq!(literal_kinds_apart(ids.clone(), &all_table, 2, few), ids);
    }

    #[test]
    fn level_starts_are_the_kernels_prefix_sums() {
        let mut hist = vec![0u32; LEVELS];
        hist[0] = 7;
        hist[1] = 3;
        hist[5] = u32::MAX;
        let starts = level_starts_host(&hist);
        assert_eq!(starts.len(), LEVELS + 1);
        assert_eq!(&starts[..7], &[0, 7, 10, 10, 10, 10, 10 + u64::from(u32::MAX)]);
        assert_eq!(starts[LEVELS], 10 + u64::from(u32::MAX), "the total, without wrapping");
    }

    /// Constants the host sizes buffers and launches by must be the kernel's own.
    #[test]
    fn host_constants_mirror_the_kernel_defines() {
        assert_eq!(kernel_define("RESUME_WORDS"), RESUME_WORDS as u64);
        assert_eq!(kernel_define("RESOLVE_PIECE"), RESOLVE_PIECE);
        assert_eq!(kernel_define("LEVELS"), LEVELS as u64);
        assert_eq!(kernel_define("LEVEL_SCAN_THREADS"), u64::from(LEVEL_SCAN_THREADS));
        assert_eq!(kernel_define("TAIL_THREADS"), u64::from(TAIL_THREADS));
        assert_eq!(kernel_define("TAIL_UNROLL"), u64::from(TAIL_UNROLL));
        assert_eq!(kernel_define("LEVEL_OVER"), u64::from(LEVEL_OVER));
        assert_eq!(kernel_define("LEVEL_DONE"), u64::from(LEVEL_DONE));
        assert_eq!(kernel_define("CODE_SMEM_BYTES"), u64::from(CODE_SMEM_BYTES));
        assert_eq!(kernel_define("LIT_SMEM_BYTES"), u64::from(LIT_SMEM_BYTES));
        assert_eq!(kernel_define("MODE_SMEM"), u64::from(MODE_SMEM));
        assert_eq!(kernel_define("MODE_K1_LANES_SHIFT"), u64::from(MODE_K1_LANES_SHIFT));
        assert_eq!(kernel_define("K1_RING_BYTES"), u64::from(full::K1_RING_BYTES));
        assert_eq!(kernel_define("PLACE_WARPS"), u64::from(full::PLACE_WARPS));
        assert_eq!(kernel_define("PLACE_MAX_UNIT"), 1u64 << full::PLACE_MAX_UNIT_LOG);
        assert_eq!(kernel_define("FINISH_TOKENS"), u64::from(full::FINISH_TOKENS));
        assert_eq!(kernel_define("FINISH_PLACE"), u64::from(full::FINISH_PLACE));
        assert_eq!(kernel_define("FINISH_MAPS"), u64::from(full::FINISH_MAPS));
        assert_eq!(kernel_define("CHASE_BATCH_BYTES"), u64::from(full::CHASE_BATCH_BYTES));
        assert_eq!(kernel_define("TOKEN_BUCKET_LOG"), u64::from(resident::TOKEN_BUCKET_LOG));
        assert_eq!(kernel_define("CT_WORDS"), super::super::prep::CT_WORDS as u64);
        assert_eq!(kernel_define("CT_FC"), super::super::prep::CT_FC as u64);
        assert_eq!(kernel_define("CT_LIT_FC"), super::super::prep::CT_LIT_FC as u64);
        assert_eq!(kernel_define("NO_UNIT"), u64::from(full::NO_UNIT));
        use crate::codec::tables::{OF_ALPHABET, OF_EXPLICIT_CODES, OF_REVERSE_BASE};
        assert_eq!(kernel_define("OF_EXPLICIT"), OF_EXPLICIT_CODES as u64);
        assert_eq!(kernel_define("OF_REVERSE"), OF_REVERSE_BASE as u64);
        assert_eq!(kernel_define("OF_ALPHABET"), OF_ALPHABET as u64);
    }
}
