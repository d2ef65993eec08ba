//! The seek path: a batch of requested blocks decoded from the device-resident archive into pinned host memory, one
//! launch sequence (parse levels, source expansion, literals, ranges, copies) or, once the whole archive's parse
//! is resident (`resident.rs`), one chase launch; captured as CUDA graphs by batch size.

use super::*;

/// Captured seek graphs kept (one per batch size and level count).
const MAX_GRAPHS: usize = 64;

/// Shared memory per warp of the seek's token levels (kernels/common.cuh `CODE_SMEM_BYTES`: a group's LL, ML
/// and OF tables) and of `literals_warp` (`LIT_SMEM_BYTES`, plus one slice of literals).
pub(super) const CODE_SMEM_BYTES: u32 = 13536;
pub(super) const LIT_SMEM_BYTES: u32 = 5120;

/// kernels/common.cuh `MODE_SMEM`: the parse loads its tables into the launch's dynamic shared memory.
pub(super) const MODE_SMEM: u32 = 16;

/// Largest slice `literals_warp` buffers in shared memory (4 KiB); larger slices use `literals_k1`.
const LIT_WARP_MAX_UNIT_LOG: u32 = 12;

/// Largest request (in slices) whose literals run a warp per slice: a cold block's literal launch is the slowest
/// slice's serial chain, which shared-memory tables shorten (one block K = 1: 423 vs 963 µs), but a large request
/// parses tens of thousands of slices and `literals_k1` (a thread per slice, 32 slices a warp) keeps more of
/// them in flight (1000 contiguous blocks: 1215 vs 877 µs).
const LIT_WARP_MAX_UNITS: usize = 2048;

/// Scratch of the seek path, sized at open.
pub(super) struct SeekBuffers {
    pub(super) worklist: CudaSlice<u32>,
    pub(super) tok_off: CudaSlice<u64>,
    pub(super) tpos: CudaSlice<u32>,
    pub(super) mpos: CudaSlice<u32>,
    pub(super) lidx: CudaSlice<u32>,
    /// Saved rANS state per worklist entry between the token parse and the literal launch (kernel RESUME_WORDS).
    pub(super) resume: CudaSlice<u32>,
    pub(super) back: CudaSlice<u64>,
    pub(super) bytes: CudaSlice<u8>,
    pub(super) slot_of_unit: CudaSlice<u32>,
    pub(super) counters: CudaSlice<u32>,
    pub(super) pool_used: CudaSlice<u64>,
    pub(super) status: CudaSlice<u64>,
    pub(super) rsrc: [CudaSlice<u64>; 2],
    pub(super) rlen: [CudaSlice<u32>; 2],
    /// Resolution state of the parsed slots (see resolve_warp) and the deferred-match lists.
    pub(super) stamps: CudaSlice<u8>,
    pub(super) lists: [CudaSlice<u64>; 4],
    pub(super) list_counts: CudaSlice<u32>,
    pub(super) ids: CudaSlice<u32>,
    pub(super) out: CudaSlice<u8>,
    pub(super) host_ids: PinnedHostSlice<u32>,
    pub(super) host_out: PinnedHostSlice<u8>,
    pub(super) host_status: PinnedHostSlice<u64>,
    pub(super) host_counters: PinnedHostSlice<u32>,
    pub(super) wl_cap: u32,
    pub(super) range_cap: u32,
    pub(super) pool_cap: u64,
}

/// A captured seek sequence.
pub(super) struct SeekGraph(CudaGraph);

/// Per-stage device time of the seek sequences (diagnostics, see `Device::profile`).
#[derive(Default)]
pub(super) struct SeekProfile {
    pub(super) stages: Vec<(&'static str, f64)>,
    pub(super) batches: u64,
    pub(super) marks: Vec<(&'static str, CudaEvent)>,
}

impl SeekProfile {
    fn add(&mut self, stage: &'static str, ms: f64) {
        match self.stages.iter_mut().find(|(s, _)| *s == stage) {
            Some(entry) => entry.1 += ms,
            None => self.stages.push((stage, ms)),
        }
    }
}

// SAFETY: a CUDA graph handle may be launched from any thread (cudarc binds the context first); the engine only
// touches its graphs while holding the Device mutex, so they are never used from two threads at once.
unsafe impl Send for SeekGraph {}

impl SeekBuffers {
    pub(super) fn new(
        ctx: &Arc<CudaContext>,
        stream: &Arc<CudaStream>,
        data: &ArchiveData,
        meta: &UnitMeta,
        by_rounds: bool,
    ) -> Result<SeekBuffers> {
        let nunits = data.global_slice_count();
        let unit_log = data.header.slice_log as u32;
        let shift = (data.header.block_log - data.header.slice_log) as u32;
        let wl_cap = nunits.min(WORKLIST_BYTES >> unit_log).max(1) as u32;
        // Units of the largest request: max_batch blocks of B/S slices each (Device::max_batch).
        let batch = MAX_BATCH.min((wl_cap as usize >> shift).max(1)) << shift;
        // Each level's ranges hold at most the requested bytes; a quarter of that is plenty in practice and an
        // overflow only splits the batch.
        let range_cap = ((batch << unit_log) / 4).max(1024) as u32;
        let pool_cap = meta.total_tokens.min(wl_cap as u64 * meta.max_tokens).max(meta.max_tokens).max(1);
        let counters_len = 2 + 2 * (data.header.max_depth as usize + 2);
        let g = gpu("seek scratch allocation");
        // SAFETY: device buffers of plain integers; the kernels write tokens/bytes/ranges before reading them, and
        // the counters, pool, status and slot map are initialised below.
        // The stamps and deferred lists are only used when seeks resolve by rounds.
        let (stamps_len, list_len) =
            if by_rounds { ((wl_cap as usize) << unit_log, pool_cap as usize) } else { (1, 1) };
        // SAFETY: as above — uninitialised device buffers of plain integers, written by the kernels before use.
        let (stamps, lists) = unsafe {
            (
                stream.alloc::<u8>(stamps_len).map_err(gpu("alloc"))?,
                [
                    stream.alloc::<u64>(list_len).map_err(gpu("alloc"))?,
                    stream.alloc::<u64>(list_len).map_err(gpu("alloc"))?,
                    stream.alloc::<u64>(list_len).map_err(gpu("alloc"))?,
                    stream.alloc::<u64>(list_len).map_err(gpu("alloc"))?,
                ],
            )
        };
        // SAFETY: as above — uninitialised device buffers of plain integers, written by the kernels before use.
        let (worklist, tok_off, tpos, mpos, lidx, resume, back, bytes, rsrc, rlen, ids, out) = unsafe {
            (
                stream.alloc::<u32>(wl_cap as usize).map_err(g)?,
                stream.alloc::<u64>(wl_cap as usize).map_err(gpu("alloc"))?,
                stream.alloc::<u32>(pool_cap as usize).map_err(gpu("alloc"))?,
                stream.alloc::<u32>(pool_cap as usize).map_err(gpu("alloc"))?,
                stream.alloc::<u32>(pool_cap as usize).map_err(gpu("alloc"))?,
                stream.alloc::<u32>(wl_cap as usize * RESUME_WORDS).map_err(gpu("alloc"))?,
                stream.alloc::<u64>(pool_cap as usize).map_err(gpu("alloc"))?,
                stream.alloc::<u8>((wl_cap as usize) << unit_log).map_err(gpu("alloc"))?,
                [
                    stream.alloc::<u64>(range_cap as usize).map_err(gpu("alloc"))?,
                    stream.alloc::<u64>(range_cap as usize).map_err(gpu("alloc"))?,
                ],
                [
                    stream.alloc::<u32>(range_cap as usize).map_err(gpu("alloc"))?,
                    stream.alloc::<u32>(range_cap as usize).map_err(gpu("alloc"))?,
                ],
                stream.alloc::<u32>(batch).map_err(gpu("alloc"))?,
                stream.alloc::<u8>(batch << unit_log).map_err(gpu("alloc"))?,
            )
        };
        let slot_of_unit = stream.clone_htod(&vec![u32::MAX; nunits.max(1) as usize]).map_err(gpu("alloc"))?;
        // SAFETY: pinned host buffers; ids are written by the host before upload, results by device copies
        // before the host reads them after a synchronize.
        let (host_ids, host_out, host_status, host_counters) = unsafe {
            (
                ctx.alloc_pinned_with_flags::<u32>(batch, 0).map_err(gpu("pinned alloc"))?,
                ctx.alloc_pinned_with_flags::<u8>(batch << unit_log, 0).map_err(gpu("pinned alloc"))?,
                ctx.alloc_pinned_with_flags::<u64>(1, 0).map_err(gpu("pinned alloc"))?,
                ctx.alloc_pinned_with_flags::<u32>(counters_len, 0).map_err(gpu("pinned alloc"))?,
            )
        };
        Ok(SeekBuffers {
            worklist,
            tok_off,
            tpos,
            mpos,
            lidx,
            resume,
            back,
            bytes,
            slot_of_unit,
            counters: stream.alloc_zeros::<u32>(counters_len).map_err(gpu("alloc"))?,
            pool_used: stream.alloc_zeros::<u64>(1).map_err(gpu("alloc"))?,
            status: stream.alloc_zeros::<u64>(1).map_err(gpu("alloc"))?,
            rsrc,
            rlen,
            stamps,
            lists,
            list_counts: stream.alloc_zeros::<u32>(data.header.max_depth as usize + 2).map_err(gpu("alloc"))?,
            ids,
            out,
            host_ids,
            host_out,
            host_status,
            host_counters,
            wl_cap,
            range_cap,
            pool_cap,
        })
    }
}

impl Device {
    fn seek_ctx(&self) -> KernelCtx {
        let s = &self.seek;
        KernelCtx {
            worklist: self.ptr(&s.worklist),
            tok_off: self.ptr(&s.tok_off),
            tpos: self.ptr(&s.tpos),
            mpos: self.ptr(&s.mpos),
            lidx: self.ptr(&s.lidx),
            resume: if self.seek_split { self.ptr(&s.resume) } else { 0 },
            back: self.ptr(&s.back),
            bytes: self.ptr(&s.bytes),
            slot_of_unit: self.ptr(&s.slot_of_unit),
            counters: self.ptr(&s.counters),
            pool_used: self.ptr(&s.pool_used),
            status: self.ptr(&s.status),
            rsrc0: self.ptr(&s.rsrc[0]),
            rsrc1: self.ptr(&s.rsrc[1]),
            rlen0: self.ptr(&s.rlen[0]),
            rlen1: self.ptr(&s.rlen[1]),
            // Stamps are only kept when the seek resolves by rounds (the chase does not read them).
            stamps: if self.seek_by_chase { 0 } else { self.ptr(&s.stamps) },
            pool_cap: s.pool_cap,
            wl_cap: s.wl_cap,
            range_cap: s.range_cap,
            ..self.base_ctx()
        }
    }

    /// Largest batch (in blocks) one seek sequence takes.
    pub fn max_batch(&self) -> usize {
        MAX_BATCH.min((self.seek.wl_cap as usize >> (self.block_log - self.unit_log)).max(1))
    }

    /// How many units one CTA of the parse kernel (`Kernels::parse`, a thread a unit, launched without lane bits)
    /// parses at once.
    fn parse_groups_per_cta(&self) -> u64 {
        CTA_THREADS as u64
    }

    /// Threads per unit of the seek's parse kernel (`Kernels::parse_seek`: a warp, or with ACEAPEX_GPU_SEEK_GROUP a
    /// thread).
    fn seek_group_lanes(&self) -> u32 {
        if std::env::var_os("ACEAPEX_GPU_SEEK_GROUP").is_some() {
            1
        } else {
            32
        }
    }

    /// Decodes blocks `ids` (distinct, ascending, at most [`Device::max_batch`]) through the seek path and returns
    /// their bytes, block `k` of the request at `k << block_log` of the returned slice, plus the device time of
    /// the sequence in ms. The bytes are not verified here.
    ///
    /// When the whole archive's parse is resident (resident.rs; built on the first seek when it fits), the batch
    /// is one `chase_resident` launch. Otherwise the sequence first runs only as many levels as batches so far
    /// needed (`depth_hint`); if the last level still produced source ranges, the batch is run again with all
    /// `max_depth` levels and the hint grows.
    pub fn seek_batch(&mut self, ids: &[u64]) -> Result<std::result::Result<(&[u8], f32), KernelFault>> {
        let n = ids.len();
        if n == 0 || n > self.max_batch() {
            return Err(Error::Gpu(format!("seek batch of {n} blocks (1..={} allowed)", self.max_batch())));
        }
        // The request in units: every slice of every requested block, in order. Only the last block of the
        // stream has fewer than B/S slices, and it can only be the last of an ascending request, so block k's
        // slices land at k << block_log.
        let per_block = 1u64 << (self.block_log - self.unit_log);
        let mut units = 0usize;
        {
            let nunits = self.nunits;
            let host_ids = self.seek.host_ids.as_mut_slice().map_err(gpu("pinned ids"))?;
            for (k, &id) in ids.iter().enumerate() {
                if k > 0 && id <= ids[k - 1] {
                    return Err(Error::InvalidArgument("block ids must be ascending and distinct".into()));
                }
                let first = id
                    .checked_mul(per_block)
                    .filter(|&u| u < nunits)
                    .ok_or_else(|| Error::InvalidArgument(format!("block {id} out of range ({nunits} slices)")))?;
                let last = (first + per_block).min(nunits);
                if last - first != per_block && k + 1 != n {
                    return Err(Error::InvalidArgument(format!("block {id}: a short block must come last")));
                }
                for u in first..last {
                    // first < nunits <= u32::MAX / 2 (checked at open).
                    host_ids[units] = u as u32;
                    units += 1;
                }
            }
        }
        let n = units;
        if self.resident_ready() {
            return self.seek_resident(n);
        }
        let mut levels = self.depth_hint.min(self.max_depth);
        let mut device_ms = self.run_seek(n, levels)?;
        let counters = self.seek.host_counters.as_slice().map_err(gpu("pinned counters"))?;
        let ranges_at = |d: u32| counters[2 + (self.max_depth as usize + 2) + d as usize];
        if levels < self.max_depth && ranges_at(levels + 1) != 0 {
            // Sources deeper than the hint: the chase ran short; run again with every level.
            levels = self.max_depth;
            device_ms += self.run_seek(n, levels)?;
        }
        let counters = self.seek.host_counters.as_slice().map_err(gpu("pinned counters"))?;
        let deepest = (1..=levels).rev().find(|&d| counters[2 + (self.max_depth as usize + 2) + d as usize] != 0);
        self.depth_hint = self.depth_hint.max(deepest.unwrap_or(0));
        let status = self.seek.host_status.as_slice().map_err(gpu("pinned status"))?[0];
        if let Some(fault) = KernelFault::from_status(status) {
            return Ok(Err(fault));
        }
        let out = self.seek.host_out.as_slice().map_err(gpu("pinned output"))?;
        Ok(Ok((&out[..n << self.unit_log], device_ms)))
    }

    /// One seek launch sequence over the `n` unit ids already in pinned memory, with `levels` source levels (the
    /// expansion of level `levels` runs too, unless it is the last, so the caller can see whether it sufficed).
    /// Results, status and counters land in pinned memory; the device state is reset for the next batch.
    ///
    /// The sequence (about 2·levels + 8 operations) is captured once per (batch size, levels) as a CUDA graph and
    /// replayed, which removes the per-launch host overhead; if capturing fails, it is launched directly.
    pub(super) fn run_seek(&mut self, n: usize, levels: u32) -> Result<f32> {
        let stream = self.stream.clone();
        self.events.0.record(&stream).map_err(gpu("event"))?;
        let key = (n, levels);
        if self.use_graphs && !self.graphs.contains_key(&key) {
            match self.capture_seek(n, levels) {
                Ok(graph) => {
                    if self.graphs.len() >= MAX_GRAPHS {
                        self.graphs.clear();
                    }
                    self.graphs.insert(key, SeekGraph(graph));
                }
                Err(e) => {
                    tracing::warn!("GPU seek: CUDA graph capture failed ({e}); launching kernels directly");
                    self.use_graphs = false;
                }
            }
        }
        match self.graphs.get(&key).filter(|_| self.use_graphs) {
            Some(graph) => graph.0.launch().map_err(gpu("graph launch"))?,
            None => self.enqueue(n, levels)?,
        }
        self.events.1.record(&stream).map_err(gpu("event"))?;
        stream.synchronize().map_err(gpu("seek batch"))?;
        if let Some(profile) = self.profile.as_mut() {
            let marks = std::mem::take(&mut profile.marks);
            let mut prev = &self.events.0;
            for (stage, event) in &marks {
                let ms = prev.elapsed_ms(event).map_err(gpu("event timing"))?;
                profile.add(stage, ms as f64);
                prev = event;
            }
            profile.batches += 1;
        }
        self.events.0.elapsed_ms(&self.events.1).map_err(gpu("event timing"))
    }

    /// Average device µs per seek sequence by stage, since the last reset (None unless
    /// ACEAPEX_GPU_SEEK_PROFILE is set).
    pub fn seek_profile(&mut self, reset: bool) -> Option<Vec<(&'static str, f64)>> {
        let profile = self.profile.as_mut()?;
        let n = profile.batches.max(1) as f64;
        let out = profile.stages.iter().map(|&(s, ms)| (s, ms * 1000.0 / n)).collect();
        if reset {
            profile.stages.clear();
            profile.batches = 0;
        }
        Some(out)
    }

    /// Records the seek sequence for (`n`, `levels`) into a graph.
    fn capture_seek(&mut self, n: usize, levels: u32) -> Result<CudaGraph> {
        let stream = self.stream.clone();
        stream.begin_capture(CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED).map_err(gpu("begin capture"))?;
        let enqueued = self.enqueue(n, levels);
        let graph = stream.end_capture(CUgraphInstantiate_flags(0)).map_err(gpu("end capture"));
        enqueued?;
        graph?.ok_or_else(|| Error::Gpu("capture produced no graph".into()))
    }

    /// Enqueues the sequence `levels` names: the resident chase ([`RESIDENT_LEVELS`]) or the seek's levels.
    pub(super) fn enqueue(&mut self, n: usize, levels: u32) -> Result<()> {
        if levels == RESIDENT_LEVELS {
            self.enqueue_resident(n)
        } else {
            self.enqueue_seek(n, levels)
        }
    }

    /// Enqueues the seek sequence on the stream (or into a capture): ids up, seed, levels, chase, results and
    /// status down, reset. Copies use the pinned buffers' raw pointers, so nothing here waits on the host.
    fn enqueue_seek(&mut self, n: usize, levels: u32) -> Result<()> {
        let c = self.seek_ctx();
        let stream = self.stream.clone();
        let cu = stream.cu_stream();
        let n32 = n as u32;
        let ids_ptr = self.ptr(&self.seek.ids);
        let out_ptr = self.ptr(&self.seek.out);
        let out_bytes = n << self.unit_log;
        let seek_lanes = self.seek_group_lanes();
        let first_level = LaunchConfig {
            grid_dim: (grid_for(n as u64, (CTA_THREADS / seek_lanes) as u64, LEVEL_GRID), 1, 1),
            block_dim: (CTA_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let later_level = LaunchConfig { grid_dim: (self.later_grid, 1, 1), ..first_level };
        // Later parse levels (and the literal launch) stride over a count that lives on the device: about 16k
        // parse groups (128 CTAs with K = 1) cover the levels seen in practice without launching idle CTAs.
        let later_parse = LaunchConfig { grid_dim: (self.later_grid.min(128 * seek_lanes), 1, 1), ..first_level };
        let later_literals = LaunchConfig { grid_dim: (self.later_grid.min(128), 1, 1), ..first_level };
        // Shared-memory tables (seek_smem): the token levels get CODE_SMEM_BYTES per warp, and the literals run
        // a warp per slice (literals_warp) with its table and one slice of literals per warp.
        let warps = CTA_THREADS / 32;
        let lit_warp = self.seek_smem && self.unit_log <= LIT_WARP_MAX_UNIT_LOG && n <= LIT_WARP_MAX_UNITS;
        let (first_level, later_parse) = if self.seek_smem {
            let smem = CODE_SMEM_BYTES * warps;
            (
                LaunchConfig { shared_mem_bytes: smem, ..first_level },
                LaunchConfig { shared_mem_bytes: smem, ..later_parse },
            )
        } else {
            (first_level, later_parse)
        };
        let later_literals = if lit_warp {
            LaunchConfig {
                grid_dim: (self.later_grid, 1, 1),
                shared_mem_bytes: (LIT_SMEM_BYTES + (1 << self.unit_log)) * warps,
                ..later_literals
            }
        } else {
            later_literals
        };
        // expand_ranges runs a warp per range; level 0's ranges are the requested units.
        let first_expand = LaunchConfig {
            grid_dim: (grid_for(n as u64, (CTA_THREADS / 32) as u64, LEVEL_GRID), 1, 1),
            shared_mem_bytes: 0,
            ..first_level
        };
        let threads = |items: u64, cap: u32| LaunchConfig {
            grid_dim: (grid_for(items, 256, cap), 1, 1),
            block_dim: (256, 1, 1),
            shared_mem_bytes: 0,
        };
        // kernels/common.cuh MODE_TOKENS (levels parse tokens, literals_k1 or literals_warp places the literals) or
        // MODE_FULL.
        let tables = if self.seek_smem { MODE_SMEM } else { 0 };
        let skip_requested = u32::from(self.skip_requested);
        let mode = if self.seek_split { 3u32 | tables } else { 0u32 };
        let s = &mut self.seek;
        let host_ids = s.host_ids.as_mut_slice().map_err(gpu("pinned ids"))?.as_ptr();
        let host_out = s.host_out.as_mut_slice().map_err(gpu("pinned output"))?.as_mut_ptr();
        let host_status = s.host_status.as_mut_slice().map_err(gpu("pinned status"))?.as_mut_ptr();
        let host_counters = s.host_counters.as_mut_slice().map_err(gpu("pinned counters"))?.as_mut_ptr();
        let counters_len = s.counters.len();
        let list_counts_len = s.list_counts.len();
        let list_cap = s.lists[0].len() as u32;
        let max_chunks = self.meta_host.max_tokens.saturating_sub(1).div_ceil(32).max(1) as u32;
        let lists: Vec<u64> = self.seek.lists.iter().map(|l| self.ptr(l)).collect();
        let list_counts = self.ptr(&self.seek.list_counts);
        let (counters, pool, status) =
            (self.ptr(&self.seek.counters), self.ptr(&self.seek.pool_used), self.ptr(&self.seek.status));
        let mut marks: Vec<(&'static str, CudaEvent)> = Vec::new();
        let mut mark = self.stage_marker(&mut marks);
        // SAFETY (copies): the pinned buffers hold at least max_batch << (block_log - unit_log) unit ids and
        // max_batch << block_log result bytes, one status word and counters_len counters; n is at most that many
        // units (seek_batch); the device buffers are at least as large. They live as long as this Device, which
        // outlives every enqueued operation (run_seek synchronises).
        // SAFETY (launches): the arguments match the kernels' signatures in kernels/*.cuh (a Ctx by value, then
        // the listed scalars and device pointers); every pointer in `c` refers to a live allocation of this Device
        // sized as the Ctx capacities say, and the kernels bound every index by those capacities.
        unsafe {
            result::memcpy_htod_async(ids_ptr, std::slice::from_raw_parts(host_ids, n), cu)
                .map_err(gpu("ids upload"))?;
            let k = &self.kernels;
            stream
                .launch_builder(&k.seed)
                .arg(&c)
                .arg(&ids_ptr)
                .arg(&n32)
                .launch(threads(n as u64, 65535))
                .map_err(gpu("seed"))?;
            mark("ids + seed")?;
            for level in 0..=levels {
                let cfg = if level == 0 { first_level } else { later_parse };
                // With the literals split off (the default) a level parses tokens only, in the seek's parse
                // kernel; fused, it parses whole slices, a thread each.
                let parse = if self.seek_split { &k.parse_seek } else { &k.parse };
                let cfg = if self.seek_split || level > 0 {
                    cfg
                } else {
                    LaunchConfig {
                        grid_dim: (grid_for(n as u64, self.parse_groups_per_cta(), LEVEL_GRID), 1, 1),
                        ..cfg
                    }
                };
                stream.launch_builder(parse).arg(&c).arg(&level).arg(&mode).launch(cfg).map_err(gpu("parse"))?;
                mark(if level == 0 { "parse level 0" } else { "parse levels 1+" })?;
                if level < self.max_depth {
                    let cfg = if level == 0 { first_expand } else { later_level };
                    stream
                        .launch_builder(&k.expand)
                        .arg(&c)
                        .arg(&level)
                        .arg(&skip_requested)
                        .launch(cfg)
                        .map_err(gpu("expand"))?;
                    mark(if level == 0 { "expand level 0" } else { "expand levels 1+" })?;
                }
            }
            if self.seek_split {
                let parsed_level = levels + 1;
                stream
                    .launch_builder(if lit_warp { &k.literals_warp } else { &k.literals })
                    .arg(&c)
                    .arg(&parsed_level)
                    .launch(later_literals)
                    .map_err(gpu("literals"))?;
                mark("literals")?;
            }
            // Resolve: by match-resolution rounds over every parsed slot (the requested blocks are slots 0..n, so
            // their bytes are then the first n << unit_log bytes of the pool), or byte by byte (the chase).
            let result_ptr = if self.seek_by_chase {
                let chase_cfg = threads(out_bytes as u64, 132 * 32);
                stream
                    .launch_builder(&k.chase)
                    .arg(&c)
                    .arg(&n32)
                    .arg(&out_ptr)
                    .launch(chase_cfg)
                    .map_err(gpu("chase"))?;
                mark("chase")?;
                out_ptr
            } else {
                let parsed_level = levels + 1;
                for round in 0..=levels {
                    let (list_in, list_out) = (lists[(round as usize + 1) % 2], lists[round as usize % 2]);
                    let (klist_in, klist_out) = (lists[2 + (round as usize + 1) % 2], lists[2 + round as usize % 2]);
                    stream
                        .launch_builder(&k.seek_resolve)
                        .arg(&c)
                        .arg(&parsed_level)
                        .arg(&max_chunks)
                        .arg(&round)
                        .arg(&list_in)
                        .arg(&list_out)
                        .arg(&klist_in)
                        .arg(&klist_out)
                        .arg(&list_counts)
                        .arg(&list_cap)
                        .launch(later_level)
                        .map_err(gpu("seek resolve"))?;
                }
                c.bytes
            };
            result::memcpy_dtoh_async(std::slice::from_raw_parts_mut(host_out, out_bytes), result_ptr, cu)
                .map_err(gpu("result copy"))?;
            result::memcpy_dtoh_async(std::slice::from_raw_parts_mut(host_status, 1), status, cu)
                .map_err(gpu("status copy"))?;
            result::memcpy_dtoh_async(std::slice::from_raw_parts_mut(host_counters, counters_len), counters, cu)
                .map_err(gpu("counter copy"))?;
            // The stages up to here are the decode on the device; this one its copy into pinned host memory.
            mark("to host")?;
            // Clean state for the next batch: claims, counters, pool and status.
            let cfg = LaunchConfig { grid_dim: (64, 1, 1), block_dim: (256, 1, 1), shared_mem_bytes: 0 };
            stream.launch_builder(&k.reset).arg(&c).launch(cfg).map_err(gpu("reset"))?;
            result::memset_d8_async(counters, 0, counters_len * 4, cu).map_err(gpu("reset"))?;
            result::memset_d8_async(pool, 0, 8, cu).map_err(gpu("reset"))?;
            result::memset_d8_async(status, 0, 8, cu).map_err(gpu("reset"))?;
            result::memset_d8_async(list_counts, 0, list_counts_len * 4, cu).map_err(gpu("reset"))?;
            mark("reset")?;
        }
        drop(mark); // ends its borrow of `marks`
        if let Some(profile) = self.profile.as_mut() {
            profile.marks = marks;
        }
        Ok(())
    }

    /// Records a stage event into `marks` for ACEAPEX_GPU_SEEK_PROFILE (a no-op otherwise; never while capturing
    /// a graph: profiling disables graphs). `run_seek` turns the events into per-stage times.
    pub(super) fn stage_marker<'a>(
        &self,
        marks: &'a mut Vec<(&'static str, CudaEvent)>,
    ) -> impl FnMut(&'static str) -> Result<()> + 'a {
        let profiling = self.profile.is_some();
        let (ctx, stream) = (self.ctx.clone(), self.stream.clone());
        move |stage| {
            if profiling {
                let event = ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(gpu("event"))?;
                event.record(&stream).map_err(gpu("event"))?;
                marks.push((stage, event));
            }
            Ok(())
        }
    }
}
