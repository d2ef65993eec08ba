//! The CUDA side of the GPU engine: context, NVRTC-compiled module, device-resident archive, scratch buffers and
//! the launch sequences of kernels/decode.cu.
//!
//! The kernels work on units (slices, see prep.rs): a seek request for blocks becomes a request for all their
//! slices, in order, so the results of requested block `k` are the `B/S` consecutive units at `k << block_log`.
//!
//! Nothing here is reached without a working driver: [`Device::open`] is the only entry and runs inside the
//! engine's panic guard. Every driver call's error is turned into [`Error::Gpu`]; a batch that fails leaves the
//! device in a state from which the next batch starts clean (the batch's last launches reset it).

use std::sync::{Arc, OnceLock};

use std::collections::HashMap;

use cudarc::driver::result;
use cudarc::driver::sys::{CUevent_flags, CUgraphInstantiate_flags, CUstreamCaptureMode};
use cudarc::driver::{
    CudaContext, CudaEvent, CudaFunction, CudaGraph, CudaSlice, CudaStream, DevicePtr, DeviceRepr, LaunchConfig,
    PinnedHostSlice, PushKernelArg,
};
use cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions, Ptx};

use super::kernel_cache;
use super::prep::{self, UnitMeta};
use resident::ChaseMaps;
pub use resident::ResidentSeeks;

mod resident;
use crate::error::{Error, Result};
use crate::format::ArchiveData;

/// The kernel source, embedded so that the binary is self-contained.
const KERNEL_SOURCE: &str = include_str!("../../../kernels/decode.cu");

/// Threads per CTA for the warp-per-item kernels.
const CTA_THREADS: u32 = 128;
/// The K = 1 parse's preferred shared-memory carveout (percent of the SM's) for a grid of at most one CTA an SM:
/// the 64 KB configuration on the H100/H200 (see [`Device::set_parse_carveout`]).
const K1_FEW_CTAS_CARVEOUT: i32 = 25;
/// Copies of a K = 1 CTA's context model in shared memory, log2 (kernels/decode.cu `K1_CTX_COPIES_LOG`, K1Rows).
const K1_CTX_COPIES_LOG: u32 = 3;

/// [`K1_FEW_CTAS_CARVEOUT`], or ACEAPEX_GPU_K1_CARVEOUT (0..=100, or -1 for the driver's choice; measurements).
fn few_ctas_carveout() -> i32 {
    static CARVEOUT: OnceLock<i32> = OnceLock::new();
    env_knob(&CARVEOUT, "ACEAPEX_GPU_K1_CARVEOUT", K1_FEW_CTAS_CARVEOUT, |p| (-1..=100).contains(&p))
}

/// The K = 1 parse's CTA size as ACEAPEX_GPU_K1_CTA sets it (32, 64, 128 or 256; measurements), or 0: chosen by
/// [`Device::k1_launch`].
fn k1_cta_knob() -> u32 {
    static THREADS: OnceLock<u32> = OnceLock::new();
    env_knob(&THREADS, "ACEAPEX_GPU_K1_CTA", 0, |t| matches!(t, 32 | 64 | 128 | 256))
}

/// The lanes of each warp that take a unit in the full decode's K = 1 parse as ACEAPEX_GPU_K1_WARP_LANES sets them
/// (1..=32; measurements), or 0: chosen by [`Device::k1_launch`].
fn k1_lanes_knob() -> u32 {
    static LANES: OnceLock<u32> = OnceLock::new();
    env_knob(&LANES, "ACEAPEX_GPU_K1_WARP_LANES", 0, |l| (1..=32).contains(&l))
}

/// [`K1_CTX_COPIES_LOG`], or ACEAPEX_GPU_CTX_COPIES_LOG (0..=3; measurements).
fn ctx_copies_log() -> u32 {
    static LOG: OnceLock<u32> = OnceLock::new();
    env_knob(&LOG, "ACEAPEX_GPU_CTX_COPIES_LOG", K1_CTX_COPIES_LOG, |l| l <= 3)
}
/// Zero bytes after the uploaded payloads: the K = 1 literal phase reads the word stream by aligned 32-bit words,
/// and the last of a slice may reach up to 3 bytes past the payloads' end (kernels/decode.cu `WordReader1`).
const FILE_PAD: usize = 16;
/// Grid of the seek kernels whose work count lives on the device (see `Device::later_grid`), and the largest
/// grid of the first level.
const LEVEL_GRID: u32 = 1024;
/// Most blocks requested in one launch sequence; larger requests are split.
pub const MAX_BATCH: usize = 1024;
/// Decoded bytes the seek worklist may hold (requested units plus sources), bounding the scratch memory.
const WORKLIST_BYTES: u64 = 512 << 20;
/// u32 words of saved rANS state per seek worklist entry (kernels/decode.cu `RESUME_WORDS`).
const RESUME_WORDS: usize = 65;
/// Bytes of a deferred match per list entry of the full decode's resolve rounds (kernel RESOLVE_PIECE).
const RESOLVE_PIECE: u64 = 128;
/// Threads of `copy_tail`'s one CTA (kernel TAIL_THREADS) and pieces a warp copies at once (TAIL_UNROLL).
const TAIL_THREADS: u32 = 512;
const TAIL_UNROLL: u32 = 4;
/// Level buckets of `Resolve::Levels` (kernel LEVELS; levels are u16 per token), and the level value of matches
/// over the cap (LEVEL_OVER).
const LEVELS: usize = 4096;
#[cfg(test)]
const LEVEL_OVER: u32 = 65535;
/// The level value of a match copied in an earlier epoch (kernel LEVEL_DONE).
#[cfg(test)]
const LEVEL_DONE: u32 = 65534;
/// Threads of the one CTA of `level_starts` (kernel LEVEL_SCAN_THREADS).
const LEVEL_SCAN_THREADS: u32 = 1024;
/// Epochs of the level search at most: each copies up to a cap's worth of levels above what earlier ones copied
/// (kernels/decode.cu, level_rebase); what the last one leaves is chased. ACEAPEX_GPU_LEVEL_EPOCHS=N (1 to 64)
/// sets it to compare (1: session 16's single search).
const LEVEL_EPOCHS: u32 = 8;

/// Pieces over the cap below which they are chased rather than searched again:
/// another epoch costs a search over every match plus a launch per level, and on small archives that lost to the
/// chase (session 17 run 3, H200: fly ×11 3.36 → 7.24 ms with 624 levels copied in epochs, atha genome 2.30 →
/// 2.49), while the 4.65 GB archive, whose chase had millions of pieces, gained (76.9 → 55.6 ms).
const EPOCH_MIN_PIECES: u64 = 1 << 16;

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

fn level_epochs() -> u32 {
    static EPOCHS: OnceLock<u32> = OnceLock::new();
    env_knob(&EPOCHS, "ACEAPEX_GPU_LEVEL_EPOCHS", LEVEL_EPOCHS, |e| (1..=64).contains(&e))
}
/// The highest level the default `Resolve::Levels` searches for (the most a u16 level and the buckets allow):
/// matches above it wait for the next epoch, or the chase. Match levels reach 100 and more (examples/levels:
/// match bytes above level 24 are 8 % of atha_chr1's, 1.5 % of a 185 MB generated genome's), and the 4.65 GB
/// generated archive copied 1802 levels over 8 epochs of a cap of 250 (session 17 run 3). On the 1.16 GB
/// generated archive a cap of 24 / 64 / 128 / 250 decoded in 11.9 / 10.3 / 9.9 / 9.5 ms (H200, session 16 run 4).
pub const LEVEL_CAP: u32 = LEVELS as u32 - 1;
/// Levels with at least this many pieces get a `copy_level` launch of their own; each run of consecutive levels
/// with fewer is copied by one `copy_tail` launch, one CTA whose warps take TAIL_UNROLL pieces each a round
/// (kernels/decode.cu): two rounds and a barrier cost less than a launch. ACEAPEX_GPU_TAIL_MAX=N sets it to
/// compare; 0 turns the tail off (a launch per level, session 17's copies). On the 4.65 GB generated archive
/// (session 18 run 3, four lanes a piece) 128 / 512 / 2048 decoded in 37.7 / 41.1 / 69.1 ms.
const TAIL_MAX_PIECES: u32 = 2 * TAIL_UNROLL * TAIL_THREADS / 32;

fn tail_max_pieces() -> u32 {
    static MAX: OnceLock<u32> = OnceLock::new();
    env_knob(&MAX, "ACEAPEX_GPU_TAIL_MAX", TAIL_MAX_PIECES, |_| true)
}

/// The copy launches of levels 1 ..= `max_level` from the pieces per level: `(first, last)` level pairs, a
/// single level of at least `tail_max` pieces or a run of consecutive sparser ones. `tail_max == 0`: a launch
/// per level.
fn copy_launches(hist: &[u32], max_level: u32, tail_max: u32) -> Vec<(u32, u32)> {
    let mut out: Vec<(u32, u32)> = Vec::new();
    let mut run: Option<u32> = None;
    for l in 1..=max_level {
        let pieces = hist.get(l as usize).copied().unwrap_or(0);
        if tail_max == 0 || pieces >= tail_max {
            if let Some(first) = run.take() {
                out.push((first, l - 1));
            }
            out.push((l, l));
        } else if run.is_none() {
            run = Some(l);
        }
    }
    if let Some(first) = run {
        out.push((first, max_level));
    }
    out
}

/// Where each level's pieces start in the order, as `level_starts` computes them on the device: the
/// exclusive prefix sums of `hist` (bucket 0, the pieces over the cap, first), and the total at `[LEVELS]`.
fn level_starts_host(hist: &[u32]) -> Vec<u64> {
    let mut starts = Vec::with_capacity(LEVELS + 1);
    let mut at = 0u64;
    for l in 0..LEVELS {
        starts.push(at);
        at += u64::from(hist.get(l).copied().unwrap_or(0));
    }
    starts.push(at);
    starts
}

/// With CHASE_SHARE = N > 0, the levels above the lowest `l` whose higher levels hold at most 1/N of all pieces
/// (and at least MIN_CHASED) are chased with the matches over the cap instead of copied level by level. That paid
/// while every level was a launch (session 16). With the tail runs (session 18, H200 runs 4 and 5) copying every
/// level is the better default on the large archive: 4.65 GB generated 37.5 ms with 0 against 39.2 with 256
/// (whose chase took 2.6 ms); the small ones lose a little (atha genome 2.46 against 2.39 ms, atha general 2.62
/// / 2.57, fly ×11 4.53 / 4.42). ACEAPEX_GPU_CHASE_SHARE=N sets it to compare.
const CHASE_SHARE: u32 = 0;
/// The share session 16 and 17 chased (1/256 of the pieces), for the comparison and its test.
#[cfg(test)]
const CHASE_SHARE_SESSION16: u32 = 256;

fn chase_share() -> u32 {
    static SHARE: OnceLock<u32> = OnceLock::new();
    env_knob(&SHARE, "ACEAPEX_GPU_CHASE_SHARE", CHASE_SHARE, |_| true)
}
const MIN_CHASED: u64 = 1024;

/// Most passes ACEAPEX_GPU_RESOLVE=levels:PASSES may ask for (the lists' counts are sized for them).
const LEVEL_PASSES_MAX: u32 = 64;
/// The `levels` key of a resident seek's launch sequence (resident.rs) in `run_seek` and its graphs.
const RESIDENT_LEVELS: u32 = u32::MAX;
/// The pinned buffer pair `stream_full` copies through, pinned when the device opens (8 MiB of pinned host
/// memory in all; a call with larger pieces pins a larger pair). 4 MiB copies at 50 GB/s take 80 µs, so larger
/// pieces would only cost pinning time.
const STREAM_PIN_MIN: usize = 4 << 20;
/// Captured seek graphs kept (one per batch size and level count).
const MAX_GRAPHS: usize = 64;
/// Shared memory per warp of the seek's token levels (kernels/decode.cu `CODE_SMEM_BYTES`: a group's LL, ML
/// and OF tables) and of `literals_warp` (`LIT_SMEM_BYTES`, plus one slice of literals).
const CODE_SMEM_BYTES: u32 = 13536;
const LIT_SMEM_BYTES: u32 = 5120;
/// kernels/decode.cu `MODE_SMEM`: the parse loads its tables into the launch's dynamic shared memory.
const MODE_SMEM: u32 = 16;
/// kernels/decode.cu `MODE_K1_LANES_SHIFT`: where a K = 1 parse's mode holds the lanes a warp that take a unit.
const MODE_K1_LANES_SHIFT: u32 = 8;
/// Largest slice `literals_warp` buffers in shared memory (4 KiB); larger slices use `literals_k<K>`.
const LIT_WARP_MAX_UNIT_LOG: u32 = 12;
/// Largest request (in slices) whose literals run a warp per slice: a cold block's literal launch is the slowest
/// slice's serial chain, which shared-memory tables shorten (one block K = 1: 423 vs 963 µs), but a large request
/// parses tens of thousands of slices and `literals_k<K>` (K lanes per slice, 32 / K slices a warp) keeps more of
/// them in flight (1000 contiguous blocks: 1215 vs 877 µs).
const LIT_WARP_MAX_UNITS: usize = 2048;

/// Error codes written by the kernels (kernels/decode.cu `E_*`).
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

/// The kernels' shared arguments, field for field `struct Ctx` in kernels/decode.cu.
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
// struct `Ctx` (8-byte pointers first, then 32-bit fields, 224 bytes in all), so passing it by value as a
// kernel parameter matches the kernel's layout.
unsafe impl DeviceRepr for KernelCtx {}

/// Which stages a full decode runs, for the time breakdown (kernels/decode.cu `MODE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FullVariant {
    /// rANS decode of every symbol only.
    EntropyOnly,
    /// Entropy decode and token parse, literal bytes not written, no match copies.
    ParseNoLiterals,
    /// Entropy decode, parse and literal placement, no match copies.
    ParseOnly,
    /// Everything: the decoded stream is complete.
    Full,
}

/// Timing of one full decode.
#[derive(Debug, Clone)]
pub struct FullRun {
    /// Device time between events around the launches (entropy decoding included).
    pub device_ms: f32,
    /// Resolve launches that did work: round 0 plus the chase when round 0 left bytes, or (resolving by rounds)
    /// the rounds up to the one that found the fixpoint.
    pub rounds: u32,
    /// Pieces of matches left with unresolved bytes after each round.
    pub left: Vec<u32>,
    /// How the matches were resolved (the complete decode only; never `Auto`, which picks one of two).
    pub resolve: Option<Resolve>,
    /// Device ms of the chase alone: with `Resolve::Chase` the time breakdown's split of match resolution into
    /// round 0 and the chase of what round 0 left; with `Resolve::Maps` into the maps and the chase.
    pub chase_ms: Option<f32>,
    /// Device ms of match resolution alone (the complete decode only), from the end of the parse to the end.
    pub resolve_ms: Option<f32>,
    /// `Resolve::Levels`: what the copies did, and the device ms of the bucketing and the copies; `chase_ms` is
    /// then the chase of the unlevelled matches, and the rest of `resolve_ms` the level search (with one
    /// synchronisation).
    pub levels: Option<LevelReport>,
    pub copy_ms: Option<f32>,
    /// `Resolve::Levels`: the device ms of the first epoch's bucketing alone (`level_starts` and `level_order`),
    /// inside `copy_ms`.
    pub bucket_ms: Option<f32>,
}

/// What `Resolve::Levels` did in one complete decode: the shape the next optimisation is chosen by.
#[derive(Debug, Clone, Default)]
pub struct LevelReport {
    /// Levels copied, summed over the epochs (the rest was chased).
    pub copied: u32,
    /// Epochs run (searches).
    pub epochs: u32,
    /// Copy launches: `copy_level` (a dense level each) and `copy_tail` (a run of sparse levels each).
    pub level_launches: u32,
    pub tail_launches: u32,
    /// The first epoch's levels by pieces per level: `(lowest piece count of the band, levels, pieces)`.
    pub bands: Vec<(u32, u32, u64)>,
}

/// Lower bounds of [`LevelReport::bands`].
const LEVEL_BANDS: [u32; 6] = [1, 64, 128, 512, 4096, 65536];

/// The levels `1 ..= max_level` of `hist` by pieces per level, in [`LEVEL_BANDS`].
fn level_bands(hist: &[u32], max_level: u32) -> Vec<(u32, u32, u64)> {
    let mut bands: Vec<(u32, u32, u64)> = LEVEL_BANDS.iter().map(|&lo| (lo, 0, 0)).collect();
    for &pieces in hist.iter().take(max_level as usize + 1).skip(1) {
        if let Some(band) = bands.iter_mut().rev().find(|b| pieces >= b.0) {
            band.1 += 1;
            band.2 += u64::from(pieces);
        }
    }
    bands
}

/// How the complete decode resolves matches once every literal is in place (kernels/decode.cu).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolve {
    /// `resolve_round` round 0, then one `resolve_chase` launch for what round 0 left (ACEAPEX_GPU_RESOLVE=chase;
    /// the default up to session 15).
    Chase,
    /// `resolve_round` rounds, one more depth level each, up to max_depth + 1.
    Rounds,
    /// Match levels up to `cap` (at most [`LEVEL_CAP`]): found by `passes` launches of `level_pass` (the cap is then
    /// the pass count), or with `passes` = 0 by one launch of `level_ordered` (the default); then `level_order`, the
    /// copies (a `copy_level` launch per level of at least `tail_max` pieces, a `copy_tail` launch per run of sparser
    /// consecutive levels; `tail_max` 0: a launch per level), and `chase_unleveled` for the matches over the cap and
    /// the sparse high levels holding at most 1/`chase_share` of the pieces (0: none): every match byte copied once, no
    /// stamps. Unlike the others it does not check the depth bound (kernels/decode.cu). `epoch_min`: pieces over the
    /// cap after an epoch below which they are chased instead of searched again ([`EPOCH_MIN_PIECES`] by default; 0
    /// runs every epoch there is work for).
    Levels { passes: u32, cap: u32, epoch_min: u64, tail_max: u32, chase_share: u32 },
    /// The default since session 20: every match copied in one launch of `copy_flow`, tasks of 32 matches in
    /// stream order, a match copied as soon as the matches its source overlaps are. No levels, no buckets, no host
    /// synchronisation; like `Levels` it does not check the depth bound.
    Flow,
    /// Session 27: the resident seek's maps (token index, literal map, chase records) built over the parse, then
    /// every match byte chased to its literal in place, a thread per byte (`chase_matches`). No order between
    /// matches, so no chain of waits; each byte pays its own hops, and the depth bound is checked. The maps stay
    /// for later resident seeks.
    Maps,
    /// The default: [`Resolve::Maps`] for an archive whose matches produce at most [`MAP_CHASE_MAX_MATCH_BYTES`]
    /// (and whose token positions fit the maps), else [`Resolve::Flow`]. The chase costs each match byte its hops
    /// (20–50 µs a MB of match bytes on the H200, session 27), the flow a chain of waits that dominates small
    /// archives (0.4 ms on atha_chr1, 1.8 ms on fly x11) but copies 4.4 GB of match bytes in 10 ms.
    Auto,
}

/// Match bytes up to which `Resolve::Auto` chases through the maps (session 27, H200: the chase resolves atha's 3.7
/// and 6.5 MB and fly x11's 11.8 MB in 0.11 to 0.28 ms where the flow takes 0.38 to 1.8 ms; at 94 MB the flow wins,
/// 0.63 against 0.99 ms, and at 4.4 GB 10.4 against 208 ms; docs/BENCH-GPU.md session 27 runs 1, 2 and 5).
pub const MAP_CHASE_MAX_MATCH_BYTES: u64 = 32 << 20;

impl Resolve {
    /// The default: [`Resolve::Auto`].
    pub const DEFAULT: Resolve = Resolve::Auto;

    /// Session 19's default, for comparison: match levels found in one launch, levels up to LEVEL_CAP.
    pub const LEVELS: Resolve = Resolve::Levels {
        passes: 0,
        cap: LEVEL_CAP,
        epoch_min: EPOCH_MIN_PIECES,
        tail_max: TAIL_MAX_PIECES,
        chase_share: CHASE_SHARE,
    };

    /// ACEAPEX_GPU_RESOLVE=maps, =flow, =chase, =rounds, =levels or =levels:PASSES for comparison
    /// (ACEAPEX_GPU_RESOLVE_ROUNDS=1 before session 14), ACEAPEX_GPU_LEVEL_CAP=C for the cap of `levels`; anything
    /// else keeps the default.
    fn from_env() -> Resolve {
        let passes = |v: &str| v.parse::<u32>().ok().filter(|p| (1..=LEVEL_PASSES_MAX).contains(p));
        match std::env::var("ACEAPEX_GPU_RESOLVE").as_deref() {
            Ok("chase") => Resolve::Chase,
            Ok("maps") => Resolve::Maps,
            Ok("flow") => Resolve::Flow,
            Ok("rounds") => Resolve::Rounds,
            Ok(v) if v.strip_prefix("levels:").and_then(passes).is_some() => {
                let p = v.strip_prefix("levels:").and_then(passes).unwrap_or(LEVEL_PASSES_MAX);
                Resolve::Levels {
                    passes: p,
                    cap: p,
                    epoch_min: EPOCH_MIN_PIECES,
                    tail_max: tail_max_pieces(),
                    chase_share: chase_share(),
                }
            }
            Ok("levels") => Resolve::Levels {
                passes: 0,
                epoch_min: EPOCH_MIN_PIECES,
                tail_max: tail_max_pieces(),
                chase_share: chase_share(),
                cap: std::env::var("ACEAPEX_GPU_LEVEL_CAP")
                    .ok()
                    .and_then(|v| v.parse().ok())
                    .filter(|c| (1..=LEVEL_CAP).contains(c))
                    .unwrap_or(LEVEL_CAP),
            },
            _ => Resolve::Auto,
        }
    }
}

/// Buffers of the device-resident full decode, allocated on first use.
struct FullBuffers {
    worklist: CudaSlice<u32>,
    tok_off: CudaSlice<u64>,
    tpos: CudaSlice<u32>,
    mpos: CudaSlice<u32>,
    lidx: CudaSlice<u32>,
    back: CudaSlice<u64>,
    bytes: CudaSlice<u8>,
    counters: CudaSlice<u32>,
    status: CudaSlice<u64>,
    /// Per stream byte: 0 unresolved, else 1 + its depth (see resolve_warp in kernels/decode.cu).
    stamps: CudaSlice<u8>,
    /// Matches left for the next round (unit << 32 | token), double-buffered, and the count per round,
    /// and the unresolved span (klo << 32 | khi) of each: [ids 0, ids 1, spans 0, spans 1].
    lists: [CudaSlice<u64>; 4],
    list_counts: CudaSlice<u32>,
    list_cap: u32,
    /// First copy task (32 matches) of each block, the block of each task, and the number of tasks.
    task_off: CudaSlice<u32>,
    task_unit: CudaSlice<u32>,
    ntasks: u32,
    counters_init: Vec<u32>,
    /// `Resolve::Levels`: the level of every token (0: none yet), pieces per level, where each level's pieces
    /// start in the order (`lists[2]`), and the next free slot of each while they are listed.
    level: CudaSlice<u16>,
    level_hist: CudaSlice<u32>,
    order_start: CudaSlice<u32>,
    order_cursor: CudaSlice<u32>,
}

/// Scratch of the seek path, sized at open.
struct SeekBuffers {
    worklist: CudaSlice<u32>,
    tok_off: CudaSlice<u64>,
    tpos: CudaSlice<u32>,
    mpos: CudaSlice<u32>,
    lidx: CudaSlice<u32>,
    /// Saved rANS state per worklist entry between the token parse and the literal launch (kernel RESUME_WORDS).
    resume: CudaSlice<u32>,
    back: CudaSlice<u64>,
    bytes: CudaSlice<u8>,
    slot_of_unit: CudaSlice<u32>,
    counters: CudaSlice<u32>,
    pool_used: CudaSlice<u64>,
    status: CudaSlice<u64>,
    rsrc: [CudaSlice<u64>; 2],
    rlen: [CudaSlice<u32>; 2],
    /// Resolution state of the parsed slots (see resolve_warp) and the deferred-match lists.
    stamps: CudaSlice<u8>,
    lists: [CudaSlice<u64>; 4],
    list_counts: CudaSlice<u32>,
    ids: CudaSlice<u32>,
    out: CudaSlice<u8>,
    host_ids: PinnedHostSlice<u32>,
    host_out: PinnedHostSlice<u8>,
    host_status: PinnedHostSlice<u64>,
    host_counters: PinnedHostSlice<u32>,
    wl_cap: u32,
    range_cap: u32,
    pool_cap: u64,
}

struct Kernels {
    parse: CudaFunction,
    /// The seek's token levels: a whole warp per slice whatever K is (`parse_k32` runs K of its lanes' rANS
    /// states and uses all 32 for the token parse), unless ACEAPEX_GPU_SEEK_GROUP=1 asks for the K-lane group.
    parse_seek: CudaFunction,
    literals: CudaFunction,
    /// The seek's literal launch, a warp per slice with shared-memory tables (see `Device::seek_smem`).
    literals_warp: CudaFunction,
    seed: CudaFunction,
    expand: CudaFunction,
    chase: CudaFunction,
    chase_resident: CudaFunction,
    index_tokens: CudaFunction,
    index_literals: CudaFunction,
    index_chase_tokens: CudaFunction,
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

/// A captured seek sequence.
struct SeekGraph(CudaGraph);

/// Per-stage device time of the seek sequences (diagnostics, see `Device::profile`).
#[derive(Default)]
struct SeekProfile {
    stages: Vec<(&'static str, f64)>,
    batches: u64,
    marks: Vec<(&'static str, CudaEvent)>,
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

/// The GPU with one archive resident on it.
pub struct Device {
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
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
    /// beside the token index: the literal map (kernel `index_literals`, a bit per stream byte, set for a literal)
    /// and the chase records (kernel `index_chase_tokens`, 16 bytes a token).
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
    /// Expansions drop source pieces inside the requested units (kernels/decode.cu `piece_needed`), unless
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

/// The NVRTC architecture option for a compute capability (kernels need warp reductions: sm_80 or later).
fn arch_for(major: i32, minor: i32) -> Result<&'static str> {
    Ok(match (major, minor) {
        (8, 0) => "sm_80",
        (8, 6) => "sm_86",
        (8, 7) => "sm_87",
        (8, 9) => "sm_89",
        (9, 0) => "sm_90",
        (10, 0) => "sm_100",
        (12, 0) => "sm_120",
        _ => {
            return Err(Error::Gpu(format!("compute capability {major}.{minor} is not supported (need 8.x or newer)")))
        }
    })
}

/// NVRTC's options for the kernels.
fn compile_options() -> Vec<String> {
    let mut options = vec!["-std=c++17".to_string()];
    if resident::token_bucket_log() != resident::TOKEN_BUCKET_LOG {
        options.push(format!("-DTOKEN_BUCKET_LOG={}", resident::token_bucket_log()));
    }
    if ctx_copies_log() != K1_CTX_COPIES_LOG {
        options.push(format!("-DK1_CTX_COPIES_LOG={}u", ctx_copies_log()));
    }
    options
}

/// Compiles the kernels for `arch` with NVRTC, and stores the PTX in the kernel cache (best effort).
fn compile_fresh(arch: &'static str, cache: Option<&std::path::Path>) -> std::result::Result<Ptx, String> {
    let opts = CompileOptions { arch: Some(arch), options: compile_options(), ..Default::default() };
    let ptx = compile_ptx_with_opts(KERNEL_SOURCE, opts).map_err(|e| format!("NVRTC: {e}"))?;
    if let Some(path) = cache {
        if let Err(e) = kernel_cache::write(path, &ptx.to_src()) {
            tracing::debug!("kernel cache: not written to {} ({e})", path.display());
        }
    }
    Ok(ptx)
}

/// The kernel cache's file for `arch` (None when the cache is off or has no directory).
fn kernel_cache_file(arch: &str) -> Option<std::path::PathBuf> {
    kernel_cache::default_dir().map(|dir| kernel_cache::file_for(&dir, KERNEL_SOURCE, &compile_options(), arch))
}

/// The kernels for `arch`, once per process: from the kernel cache when an intact copy is there (the second
/// value is then true), else compiled by NVRTC (and stored for the next process).
fn compiled_ptx(arch: &'static str) -> Result<(Ptx, bool)> {
    static PTX: OnceLock<std::result::Result<(&'static str, Ptx, bool), String>> = OnceLock::new();
    let entry = PTX.get_or_init(|| {
        let cache = kernel_cache_file(arch);
        match cache.as_deref().and_then(kernel_cache::read) {
            Some(src) => Ok((arch, Ptx::from_src(src), true)),
            None => compile_fresh(arch, cache.as_deref()).map(|p| (arch, p, false)),
        }
    });
    match entry {
        Ok((a, ptx, cached)) if *a == arch => Ok((ptx.clone(), *cached)),
        Ok((a, ..)) => Err(Error::Gpu(format!("kernels were compiled for {a}, this GPU needs {arch}"))),
        Err(e) => Err(Error::Gpu(e.clone())),
    }
}

/// Compiles the kernel source for `arch` without a GPU (NVRTC only): lets tests check the .cu file.
pub fn compile_check(arch: &'static str) -> std::result::Result<usize, String> {
    compile_fresh(arch, None).map(|p| p.to_src().len())
}

/// The order in which the full decode's parse takes the units (its worklist): stream order, or with
/// ACEAPEX_GPU_PARSE_ORDER=grouped, within each table group the units with the most rANS symbols first (a warp
/// parses 32 units at once with K = 1 and runs as long as its longest one; session 20 run 2 saw 14 of 32 lanes
/// active). Measured in run 3 (9dd1d03, H200): grouped was 1-2 % faster on atha and fly ×11 but 4 % slower on
/// the 4.65 GB archive (20.57 against 19.72 ms: its entropy decode gained, its literal and token stores lost), so
/// stream order stays the default.
fn parse_order(meta: &[u32], group_shift: u32) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..(meta.len() / prep::META_WORDS) as u32).collect();
    if std::env::var("ACEAPEX_GPU_PARSE_ORDER").as_deref() != Ok("grouped") {
        return ids;
    }
    sort_groups_longest_first(&mut ids, meta, group_shift);
    ids
}

/// Sorts `ids` (every unit, in stream order) within each table group by rANS symbols, most first.
fn sort_groups_longest_first(ids: &mut [u32], meta: &[u32], group_shift: u32) {
    let symbols = |u: u32| {
        let row = &meta[u as usize * prep::META_WORDS..][..prep::META_WORDS];
        3 * u64::from(row[2]) + 1 + u64::from(row[3])
    };
    let per_group = 1usize << group_shift.min(31);
    for group in ids.chunks_mut(per_group) {
        group.sort_by_key(|&u| std::cmp::Reverse(symbols(u)));
    }
}

/// The highest level `Resolve::Levels` copies, from the pieces per level (`hist[0]`: over the cap): the lowest
/// whose higher levels hold at most 1/`share` of all pieces, or MIN_CHASED; with `share` 0 the highest.
/// (Copying at most 64 levels was tried: fly ×11, whose pieces sit in 208 levels, 3.32 → 2.93 ms, but the 1.16
/// GB archive 10.2 → 12.0 ms, its chase of the levels above taking 3.9 ms; H200, session 16 runs 5 and 6.)
fn copied_levels(hist: &[u32], max_level: u32, share: u32) -> u32 {
    if share == 0 {
        return max_level;
    }
    let total: u64 = hist.iter().map(|&h| h as u64).sum();
    let allowed = (total / u64::from(share)).max(MIN_CHASED);
    let mut above = 0u64;
    let mut copied = max_level;
    while copied > 0 {
        above += hist.get(copied as usize).copied().unwrap_or(0) as u64;
        if above > allowed {
            break;
        }
        copied -= 1;
    }
    copied
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
            parse: load(&format!("parse_k{}", data.header.rans_lanes))?,
            parse_seek: if std::env::var_os("ACEAPEX_GPU_SEEK_GROUP").is_some() {
                load(&format!("parse_k{}", data.header.rans_lanes))?
            } else {
                load("parse_k32")?
            },
            literals: load(&format!("literals_k{}", data.header.rans_lanes))?,
            literals_warp: load("literals_warp")?,
            seed: load("seed_batch")?,
            expand: load("expand_ranges")?,
            chase: load("chase_bytes")?,
            chase_resident: load("chase_resident")?,
            index_tokens: load("index_tokens")?,
            index_literals: load("index_literals")?,
            index_chase_tokens: load("index_chase_tokens")?,
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

    /// The kernels' context over the full decode's buffers (every unit, worklist = identity); `stamps` only when
    /// the match bytes are to be resolved.
    fn full_ctx(&self, full: &FullBuffers, stamps: bool) -> KernelCtx {
        KernelCtx {
            worklist: self.ptr(&full.worklist),
            tok_off: self.ptr(&full.tok_off),
            tpos: self.ptr(&full.tpos),
            mpos: self.ptr(&full.mpos),
            lidx: self.ptr(&full.lidx),
            back: self.ptr(&full.back),
            bytes: self.ptr(&full.bytes),
            counters: self.ptr(&full.counters),
            status: self.ptr(&full.status),
            stamps: if stamps { self.ptr(&full.stamps) } else { 0 },
            wl_cap: self.nunits as u32,
            ..self.base_ctx()
        }
    }

    fn counters_len(&self) -> usize {
        2 + 2 * (self.max_depth as usize + 2)
    }

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

    /// How many units one CTA of the parse kernel (`Kernels::parse`, launched without lane bits) parses at once.
    fn parse_groups_per_cta(&self) -> u64 {
        (CTA_THREADS / self.lanes) as u64
    }

    /// Lanes per unit of the seek's parse kernel (`Kernels::parse_seek`).
    fn seek_group_lanes(&self) -> u32 {
        if std::env::var_os("ACEAPEX_GPU_SEEK_GROUP").is_some() {
            self.lanes
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
    fn run_seek(&mut self, n: usize, levels: u32) -> Result<f32> {
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
    fn enqueue(&mut self, n: usize, levels: u32) -> Result<()> {
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
        let later_literals = LaunchConfig { grid_dim: (self.later_grid.min(128 * self.lanes), 1, 1), ..first_level };
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
        // kernels/decode.cu MODE_TOKENS (levels parse tokens, literals_k<K> places the literals) or MODE_FULL.
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
        // SAFETY (launches): the arguments match the kernels' signatures in kernels/decode.cu (a Ctx by value, then
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
                // kernel; fused, it parses whole slices in the K-lane groups.
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
    fn stage_marker<'a>(
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

    fn ensure_full(&mut self) -> Result<()> {
        if self.full.is_some() {
            return Ok(());
        }
        let n = self.nunits as usize;
        let stream = &self.stream;
        let mut tok_off = Vec::with_capacity(n);
        let mut task_off = Vec::with_capacity(n);
        let mut task_unit = Vec::new();
        let (mut acc, mut tasks) = (0u64, 0u64);
        for (unit, row) in self.meta_host.words.chunks_exact(prep::META_WORDS).enumerate() {
            tok_off.push(acc);
            task_off.push(tasks as u32);
            acc += row[2] as u64 + 1;
            let unit_tasks = (row[2] as u64).div_ceil(32);
            tasks += unit_tasks;
            if tasks > u64::from(u32::MAX) {
                return Err(Error::Gpu("too many matches for one full decode".into()));
            }
            task_unit.extend(std::iter::repeat_n(unit as u32, unit_tasks as usize));
        }
        let ntasks = u32::try_from(tasks).map_err(|_| Error::Gpu("too many matches for one full decode".into()))?;
        if task_unit.is_empty() {
            task_unit.push(0); // a buffer of one: no allocation of zero bytes
        }
        let ids = parse_order(&self.meta_host.words, self.group_shift);
        let mut counters_init = vec![0u32; self.counters_len()];
        counters_init[0] = n as u32;
        let tokens = acc.max(1) as usize;
        let matches = acc.saturating_sub(n as u64).max(1);
        // A deferred match is listed in pieces of at most RESOLVE_PIECE bytes (kernels/decode.cu): at most one
        // piece more per match than its bytes / RESOLVE_PIECE.
        let pieces = matches + ((n as u64) << self.unit_log) / RESOLVE_PIECE;
        let list_cap = u32::try_from(pieces).map_err(|_| Error::Gpu("too many matches for one full decode".into()))?;
        if self.max_depth > 253 {
            return Err(Error::Gpu("the full decode keeps 1 + depth in a byte: max_depth must be <= 253".into()));
        }
        // SAFETY: plain device allocations of plain integer types; every element the kernels read is written
        // first (tokens by parse, bytes and stamps by parse and the resolve rounds) or uploaded/zeroed here.
        let (tpos, mpos, lidx, back, bytes, stamps, lists) = unsafe {
            (
                stream.alloc::<u32>(tokens + 1).map_err(gpu("alloc tokens"))?,
                stream.alloc::<u32>(tokens + 1).map_err(gpu("alloc tokens"))?,
                stream.alloc::<u32>(tokens + 1).map_err(gpu("alloc tokens"))?,
                stream.alloc::<u64>(tokens + 1).map_err(gpu("alloc tokens"))?,
                stream.alloc::<u8>(n << self.unit_log).map_err(gpu("alloc output"))?,
                stream.alloc::<u8>(n << self.unit_log).map_err(gpu("alloc stamps"))?,
                [
                    stream.alloc::<u64>(list_cap as usize).map_err(gpu("alloc lists"))?,
                    stream.alloc::<u64>(list_cap as usize).map_err(gpu("alloc lists"))?,
                    stream.alloc::<u64>(list_cap as usize).map_err(gpu("alloc lists"))?,
                    stream.alloc::<u64>(list_cap as usize).map_err(gpu("alloc lists"))?,
                ],
            )
        };
        self.full = Some(FullBuffers {
            worklist: stream.clone_htod(&ids).map_err(gpu("upload"))?,
            tok_off: stream.clone_htod(&tok_off).map_err(gpu("upload"))?,
            tpos,
            mpos,
            lidx,
            back,
            bytes,
            counters: stream.clone_htod(&counters_init).map_err(gpu("upload"))?,
            status: stream.alloc_zeros::<u64>(1).map_err(gpu("alloc"))?,
            stamps,
            lists,
            list_counts: stream
                .alloc_zeros::<u32>((self.max_depth as usize + 2).max(LEVEL_PASSES_MAX as usize))
                .map_err(gpu("alloc"))?,
            list_cap,
            task_off: stream.clone_htod(&task_off).map_err(gpu("upload"))?,
            task_unit: stream.clone_htod(&task_unit).map_err(gpu("upload"))?,
            ntasks,
            counters_init,
            level: stream.alloc_zeros::<u16>(tokens + 1).map_err(gpu("alloc levels"))?,
            level_hist: stream.alloc_zeros::<u32>(LEVELS).map_err(gpu("alloc"))?,
            order_start: stream.alloc_zeros::<u32>(LEVELS + 1).map_err(gpu("alloc"))?,
            order_cursor: stream.alloc_zeros::<u32>(LEVELS + 1).map_err(gpu("alloc"))?,
        });
        Ok(())
    }

    /// How the full decode's parse of `n` units is launched: threads a CTA, and for K = 1 the lanes of each warp
    /// that take a unit (kernels/decode.cu `parse_units`; 32 for K > 1).
    ///
    /// K = 1 with few units (at most four full warps an SM): CTAs of four warps, one a scheduler, and the fewest
    /// lanes a warp (a power of two, at least 8) that still fit the units on the SMs; a power of two, so that a
    /// CTA's units lie in one table group (its tables in shared memory). atha_chr1's 7,504 slices: 16 a warp, 118
    /// CTAs; fly x11's 3,768: 8, 118 CTAs. H200,
    /// session 30 run 1, full decode against session 29's 32 lanes in 64-thread CTAs (118 CTAs, two warps an SM):
    /// 16 lanes in 128 threads, atha genome 1.045 -> 0.921 ms, general 1.537 -> 1.29, fly x11 1.366 -> 1.203: a
    /// warp's loads (its lanes' word streams and context rows, another slice each) serve fewer lanes, and the
    /// stall on them falls (long scoreboard 0.66 -> 0.40 cycles an instruction, L1 hit 85.9 -> 92.5 %). Many
    /// units: 128 threads of 32 lanes, so that the SMs hold as many as their shared memory allows.
    fn k1_launch(&self, n: u64) -> (u32, u32) {
        if self.lanes != 1 {
            return (CTA_THREADS, 32);
        }
        let sms = u64::from(self.sm_count.max(1));
        let auto_lanes = match n <= 4 * 32 * sms {
            true => n.div_ceil(4 * sms).next_power_of_two().clamp(8, 32) as u32,
            false => 32,
        };
        let lanes = match k1_lanes_knob() {
            0 => auto_lanes,
            l => l,
        };
        let threads = match k1_cta_knob() {
            0 => CTA_THREADS,
            t => t,
        };
        (threads, lanes)
    }

    /// Sets the parse function's preferred shared-memory carveout for a launch of `grid` CTAs. A K = 1 parse CTA
    /// holds ~47 KB of tables, and for it the driver configures ~200 KB of shared memory (room for its occupancy),
    /// which leaves L1 ~55 KB for the word streams the CTA's threads prefetch (~1 KB each). When the grid has at
    /// most one CTA an SM (atha_chr1's 7,504 slices are 118 CTAs, see [`Device::k1_launch`]), that
    /// shared memory is never used: the 64 KB configuration leaves L1 ~190 KB. H200, session 29 run 1 (128-thread
    /// CTAs): atha genome's full decode 1.125 -> 1.078 ms, general 1.660 -> 1.571, fly x11 1.427 -> 1.387. A
    /// larger grid keeps the driver's choice (one CTA an SM would cut its occupancy to a warp a scheduler).
    fn set_parse_carveout(&mut self, grid: u32) -> Result<()> {
        let want = if self.lanes == 1 && grid <= self.sm_count { few_ctas_carveout() } else { -1 };
        if want != self.parse_carveout {
            self.kernels
                .parse
                .set_attribute(
                    cudarc::driver::sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT,
                    want,
                )
                .map_err(gpu("shared memory carveout"))?;
            self.parse_carveout = want;
        }
        Ok(())
    }

    /// What `Resolve::Auto` stands for on this archive: the map chase while its match bytes are few enough (and
    /// its token positions fit the maps), else the flow.
    fn auto_resolve(&self) -> Resolve {
        match self.meta_host.match_bytes <= MAP_CHASE_MAX_MATCH_BYTES && self.token_ids_fit() {
            true => Resolve::Maps,
            false => Resolve::Flow,
        }
    }

    /// Decodes the whole archive device-resident (entropy decoding inside the timed region), stopping after the
    /// stages `variant` names. `poison` fills the output with a byte first, so unwritten bytes show up.
    pub fn full_decode(
        &mut self,
        variant: FullVariant,
        poison: Option<u8>,
    ) -> Result<std::result::Result<FullRun, KernelFault>> {
        self.last_full = None;
        self.chase_maps_ready = false;
        self.ensure_full()?;
        let resolve = match (variant, self.resolve) {
            (FullVariant::Full, Resolve::Auto) => Some(self.auto_resolve()),
            (FullVariant::Full, resolve) => Some(resolve),
            _ => None,
        };
        let chase = resolve == Some(Resolve::Chase);
        let level_passes = match resolve {
            Some(Resolve::Levels { passes, cap, epoch_min, tail_max, chase_share }) => {
                Some((passes.min(LEVEL_PASSES_MAX), cap.clamp(1, LEVEL_CAP), epoch_min, tail_max, chase_share))
            }
            _ => None,
        };
        let levels = level_passes.is_some();
        let flow = resolve == Some(Resolve::Flow);
        let map_chase = match resolve {
            Some(Resolve::Maps) if self.token_ids_fit() => Some(self.chase_map_ptrs()?),
            Some(Resolve::Maps) => return Err(Error::Gpu("more tokens than the chase maps address".into())),
            _ => None,
        };
        // The chase's token index is rebuilt from this decode's tokens inside the timed region (index_tokens);
        // only its buffer is kept between decodes.
        let index_ptr = match chase && self.chase_index && self.token_ids_fit() {
            true => self.token_index_ptr()?,
            false => 0u64,
        };

        let n = self.nunits as u32;
        let stream = self.stream.clone();
        let full = self.full.as_mut().expect("ensured above");
        stream.memcpy_htod(&full.counters_init, &mut full.counters).map_err(gpu("reset"))?;
        stream.memset_zeros(&mut full.status).map_err(gpu("reset"))?;
        stream.memset_zeros(&mut full.list_counts).map_err(gpu("reset"))?;
        if let Some(byte) = poison {
            let (p, _s) = full.bytes.device_ptr(&stream);
            // SAFETY: p is the start of `full.bytes`, which holds exactly num_bytes bytes.
            unsafe { cudarc::driver::result::memset_d8_async(p, byte, full.bytes.num_bytes(), stream.cu_stream()) }
                .map_err(gpu("poison"))?;
        }
        if levels || flow {
            stream.memset_zeros(&mut full.level).map_err(gpu("reset"))?;
            stream.memset_zeros(&mut full.level_hist).map_err(gpu("reset"))?;
        }
        let (parse_threads, k1_lanes) = self.k1_launch(n as u64);
        let parse_grid = grid_for(n as u64, u64::from(parse_threads / 32 * k1_lanes / self.lanes), 1 << 20);
        self.set_parse_carveout(parse_grid)?;
        let full = self.full.as_ref().expect("ensured above");
        // Levels, the flow and the map chase resolve without stamps, so the parse does not write them.
        let c = self.full_ctx(full, variant == FullVariant::Full && !levels && !flow && map_chase.is_none());
        let lists: Vec<u64> = full.lists.iter().map(|l| self.ptr(l)).collect();
        let trim = u32::from(self.resolve_trim);
        let counts_ptr = self.ptr(&full.list_counts);
        let list_cap = full.list_cap;
        let task_ptr = self.ptr(&full.task_off);
        let ntasks = full.ntasks;
        let mode: u32 = match variant {
            FullVariant::EntropyOnly => 1,
            FullVariant::ParseNoLiterals => 2,
            FullVariant::ParseOnly | FullVariant::Full => 0,
        } | if self.lanes == 1 { k1_lanes << MODE_K1_LANES_SHIFT } else { 0 };
        let rounds = match resolve {
            Some(Resolve::Chase) => 1,
            Some(Resolve::Rounds) => self.max_depth + 1,
            Some(Resolve::Levels { .. } | Resolve::Flow | Resolve::Maps | Resolve::Auto) | None => 0,
        };
        let new_event = || self.ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT)).map_err(gpu("event"));
        let chase_start = match chase || levels || flow || map_chase.is_some() {
            true => Some(new_event()?),
            false => None,
        };
        let resolve_start = match resolve {
            Some(_) => Some(new_event()?),
            None => None,
        };
        self.events.0.record(&stream).map_err(gpu("event"))?;
        // SAFETY: arguments match parse_k<K>(Ctx, u32, u32), resolve_round(Ctx, u32, u32*, u32, u32, u64*, u64*,
        // u64*, u64*, u32*, u32, u32), index_tokens(Ctx, u32*), resolve_chase(Ctx, u64*, u64*, u32*, u32,
        // const u32*) and chase_matches(Ctx, const u32*, const u32*, const uint4*); `c` points at the full-decode
        // buffers sized for all units and tokens (tok_off is their exact prefix sum), the four lists hold every
        // deferred piece (list_cap), the stamps every stream byte, the token index (when used) nunits <<
        // (unit_log - TOKEN_BUCKET_LOG) entries, and the chase maps (chase_map_ptrs) a bit per stream byte and a
        // record per token entry.
        unsafe {
            let warps_per_cta = (CTA_THREADS / 32) as u64;
            let cfg =
                LaunchConfig { grid_dim: (parse_grid, 1, 1), block_dim: (CTA_THREADS, 1, 1), shared_mem_bytes: 0 };
            let level = 0u32;
            stream
                .launch_builder(&self.kernels.parse)
                .arg(&c)
                .arg(&level)
                .arg(&mode)
                .launch(LaunchConfig { block_dim: (parse_threads, 1, 1), ..cfg })
                .map_err(gpu("parse launch"))?;
            if let Some(event) = &resolve_start {
                event.record(&stream).map_err(gpu("event"))?;
            }
            let first_round = LaunchConfig { grid_dim: (grid_for(ntasks as u64, warps_per_cta, 1 << 20), 1, 1), ..cfg };
            // Later rounds walk lists of unknown length: a grid that fills the GPU, striding over the list.
            let later_round = LaunchConfig { grid_dim: (132 * 16, 1, 1), ..cfg };
            for round in 0..rounds {
                let (list_in, list_out) = (lists[(round as usize + 1) % 2], lists[round as usize % 2]);
                let (klist_in, klist_out) = (lists[2 + (round as usize + 1) % 2], lists[2 + round as usize % 2]);
                stream
                    .launch_builder(&self.kernels.resolve_round)
                    .arg(&c)
                    .arg(&n)
                    .arg(&task_ptr)
                    .arg(&ntasks)
                    .arg(&round)
                    .arg(&list_in)
                    .arg(&list_out)
                    .arg(&klist_in)
                    .arg(&klist_out)
                    .arg(&counts_ptr)
                    .arg(&list_cap)
                    .arg(&trim)
                    .launch(if round == 0 { first_round } else { later_round })
                    .map_err(gpu("resolve launch"))?;
            }
            if index_ptr != 0 {
                self.enqueue_token_index(&c, index_ptr)?;
            }
            if let Some(maps) = map_chase {
                self.enqueue_chase_maps(&c, maps)?;
            }
            if let Some(event) = &chase_start {
                event.record(&stream).map_err(gpu("event"))?;
            }
            if let Some(maps) = map_chase {
                // chase_matches(Ctx, const u32*, const u32*, const uint4*) over the maps just built from this
                // parse's tokens; `c.bytes` holds the whole stream.
                stream
                    .launch_builder(&self.kernels.chase_matches)
                    .arg(&c)
                    .arg(&maps.index)
                    .arg(&maps.literals)
                    .arg(&maps.records)
                    .launch(grid_stride(self.nunits << self.unit_log))
                    .map_err(gpu("map chase"))?;
            }
            if chase {
                // Round 0 wrote its list to lists[0] (entries) and lists[2] (spans), counted in list_counts[0].
                stream
                    .launch_builder(&self.kernels.resolve_chase)
                    .arg(&c)
                    .arg(&lists[0])
                    .arg(&lists[2])
                    .arg(&counts_ptr)
                    .arg(&list_cap)
                    .arg(&index_ptr)
                    .launch(later_round)
                    .map_err(gpu("resolve launch"))?;
            }
        }
        let (copy_start, order_end) = match (levels, flow) {
            (true, _) => (Some(new_event()?), Some(new_event()?)),
            (false, true) => (Some(new_event()?), None),
            (false, false) => (None, None),
        };
        if let (true, Some(copy), Some(end)) = (flow, &copy_start, &chase_start) {
            copy.record(&stream).map_err(gpu("event"))?;
            let (task_unit, level, ticket) = (self.ptr(&full.task_unit), self.ptr(&full.level), counts_ptr);
            // Enough warps to fill every SM, striding over the tasks by ticket.
            let cfg = LaunchConfig { grid_dim: (132 * 16, 1, 1), block_dim: (CTA_THREADS, 1, 1), shared_mem_bytes: 0 };
            // SAFETY: arguments match copy_flow(Ctx, u32*, u32*, u32, u16*, u32*): task_unit and task_off hold
            // ntasks and nunits entries (ensure_full), `level` a u16 per token (zeroed above), the ticket is
            // list_counts[0] (zeroed above); `c` is the full decode's context.
            unsafe {
                stream
                    .launch_builder(&self.kernels.copy_flow)
                    .arg(&c)
                    .arg(&task_unit)
                    .arg(&task_ptr)
                    .arg(&ntasks)
                    .arg(&level)
                    .arg(&ticket)
                    .launch(cfg)
                    .map_err(gpu("flow copy"))?;
            }
            end.record(&stream).map_err(gpu("event"))?;
        }
        let level_report = match (&copy_start, &order_end, &chase_start) {
            (Some(copy), Some(order), Some(chase)) => Some(self.resolve_by_levels(
                &c,
                full,
                level_passes.unwrap_or((0, LEVEL_CAP, EPOCH_MIN_PIECES, TAIL_MAX_PIECES, CHASE_SHARE)),
                (copy, order, chase),
            )?),
            _ => None,
        };
        self.events.1.record(&stream).map_err(gpu("event"))?;
        stream.synchronize().map_err(gpu("full decode"))?;
        let device_ms = self.events.0.elapsed_ms(&self.events.1).map_err(gpu("event timing"))?;
        // Device ms from event `a` to event `b`, where both were recorded.
        let between = |a: Option<&CudaEvent>, b: Option<&CudaEvent>| match (a, b) {
            (Some(a), Some(b)) => a.elapsed_ms(b).map(Some).map_err(gpu("event timing")),
            _ => Ok(None),
        };
        let end = Some(&self.events.1);
        let (chase_ms, resolve_ms) = (between(chase_start.as_ref(), end)?, between(resolve_start.as_ref(), end)?);
        let copy_ms = between(copy_start.as_ref(), chase_start.as_ref())?;
        let bucket_ms = between(copy_start.as_ref(), order_end.as_ref())?;
        let status = stream.clone_dtoh(&full.status).map_err(gpu("status copy"))?[0];
        if let Some(fault) = KernelFault::from_status(status) {
            return Ok(Err(fault));
        }
        // list_counts[r]: pieces of matches still unresolved after round r. Without the chase, none may be
        // left after the last round; the chase resolves round 0's list or reports a fault.
        let mut left = stream.clone_dtoh(&full.list_counts).map_err(gpu("status copy"))?;
        if levels || flow {
            // The passes' lists: what each pass left without a level (the last pass marks it over the cap); the
            // flow keeps no lists.
            left.truncate(level_passes.map_or(0, |(p, ..)| p) as usize);
        } else {
            left.truncate(rounds as usize);
            if !chase && left.last().is_some_and(|&l| l != 0) {
                return Ok(Err(KernelFault { code: 8, unit: 0 }));
            }
        }
        // The launches that did work: round 0 (or the level search), then the chase or the rounds (passes) up to
        // the first that found nothing.
        let used = if rounds == 0 && !levels && !flow && map_chase.is_none() {
            0
        } else {
            left.iter().take_while(|&&c| c != 0).count() as u32 + 1
        };
        self.last_full = Some(variant);
        // The maps describe this parse's tokens: a resident seek may use them as they are.
        self.chase_maps_ready = map_chase.is_some();
        Ok(Ok(FullRun {
            device_ms,
            rounds: used,
            left,
            resolve,
            chase_ms,
            resolve_ms,
            levels: level_report,
            copy_ms,
            bucket_ms,
        }))
    }

    /// `Resolve::Levels` after the parse, in epochs (one-launch search: up to [`LEVEL_EPOCHS`]; passes: one): the
    /// level search, one synchronisation to learn the pieces per level, the bucketing, and the copies
    /// ([`copy_launches`]: a `copy_level` launch per dense level, a `copy_tail` launch per run of sparse ones);
    /// then, while many pieces are over the cap, `level_rebase` and the next epoch, and after the last one
    /// `chase_unleveled` for what is still left. `copy_start` is recorded before the bucketing, `order_end` after
    /// the first epoch's, `chase_start` before the chase.
    fn resolve_by_levels(
        &self,
        c: &KernelCtx,
        full: &FullBuffers,
        (passes, cap, epoch_min, tail_max, chase_share): (u32, u32, u64, u32, u32),
        (copy_start, order_end, chase_start): (&CudaEvent, &CudaEvent, &CudaEvent),
    ) -> Result<LevelReport> {
        if self.unit_log > 20 {
            return Err(Error::Gpu("match levels need slices of at most 2^20 bytes".into()));
        }
        let stream = &self.stream;
        let n = self.nunits as u32;
        let level = self.ptr(&full.level);
        let hist = self.ptr(&full.level_hist);
        let starts = self.ptr(&full.order_start);
        let cursor = self.ptr(&full.order_cursor);
        let counts = self.ptr(&full.list_counts);
        let task_off = self.ptr(&full.task_off);
        let lists: Vec<u64> = full.lists.iter().map(|l| self.ptr(l)).collect();
        let order = lists[2];
        let (ntasks, list_cap) = (full.ntasks, full.list_cap);
        let warps_per_cta = (CTA_THREADS / 32) as u64;
        let first = LaunchConfig {
            grid_dim: (grid_for(ntasks as u64, warps_per_cta, 1 << 20), 1, 1),
            block_dim: (CTA_THREADS, 1, 1),
            shared_mem_bytes: 0,
        };
        let later = LaunchConfig { grid_dim: (132 * 16, 1, 1), ..first };
        let tail = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (TAIL_THREADS, 1, 1), shared_mem_bytes: 0 };
        // SAFETY (every launch below): arguments match level_pass(Ctx, u32, u32*, u32, u32, u32, u32, u16*, u32*,
        // u64*, u64*, u32*, u32), level_ordered(Ctx, u32, u32*, u32, u32, u16*, u32*, u32*), level_starts(u32*,
        // u32*, u32*) (one CTA of LEVEL_SCAN_THREADS), level_order(Ctx, u32, u32*, u32, u16*, u32*, u64*, u32),
        // copy_level(Ctx, u64*, u32, u32), copy_tail(Ctx, u64*, u32*, u32, u32) (one CTA of TAIL_THREADS) and
        // chase_unleveled(Ctx, u64*, u32*, u16*, u32); `level` holds a u16 per token, the lists list_cap entries
        // each (at least one per match plus one per RESOLVE_PIECE stream bytes: every match's pieces),
        // list_counts LEVEL_PASSES_MAX entries (level_ordered's ticket is list_counts[0], zeroed before the
        // decode), the histogram LEVELS, the cursors LEVELS + 1 and the starts LEVELS + 1. Levels passed are at
        // most the cap < LEVELS, and copy_level's pieces lie below the total the host checked against list_cap.
        // Epochs (the one-launch search only): each searches the levels of the matches not copied yet, above
        // those that are (LEVEL_DONE), and copies its levels; what the last leaves is chased.
        let epochs = if passes == 0 { level_epochs() } else { 1 };
        let scan = LaunchConfig { grid_dim: (1, 1, 1), block_dim: (LEVEL_SCAN_THREADS, 1, 1), shared_mem_bytes: 0 };
        let mut report = LevelReport::default();
        for epoch in 0..epochs {
            report.epochs += 1;
            // SAFETY: as above; level_rebase(Ctx, u32, u32*, u32, u8*, u32, u32*, u32*) zeroes the histogram and
            // the ticket (list_counts[0]) for the next search.
            unsafe {
                if passes == 0 {
                    stream
                        .launch_builder(&self.kernels.level_ordered)
                        .arg(c)
                        .arg(&n)
                        .arg(&task_off)
                        .arg(&ntasks)
                        .arg(&cap)
                        .arg(&level)
                        .arg(&hist)
                        .arg(&counts)
                        .launch(later)
                        .map_err(gpu("level search"))?;
                }
                for pass in 0..passes {
                    let (list_in, list_out) = (lists[(pass as usize + 1) % 2], lists[pass as usize % 2]);
                    let last = u32::from(pass + 1 == passes);
                    stream
                        .launch_builder(&self.kernels.level_pass)
                        .arg(c)
                        .arg(&n)
                        .arg(&task_off)
                        .arg(&ntasks)
                        .arg(&pass)
                        .arg(&last)
                        .arg(&cap)
                        .arg(&level)
                        .arg(&hist)
                        .arg(&list_in)
                        .arg(&list_out)
                        .arg(&counts)
                        .arg(&list_cap)
                        .launch(if pass == 0 { first } else { later })
                        .map_err(gpu("level pass"))?;
                }
            }
            // The highest level decides the copy launches; bucket 0 (pieces over the cap) whether to go on.
            let hist_host = stream.clone_dtoh(&full.level_hist).map_err(gpu("level histogram"))?;
            let max_level = hist_host.iter().skip(1).rposition(|&h| h != 0).map_or(0, |i| i as u32 + 1);
            let starts_host = level_starts_host(&hist_host);
            // The sparse high levels are chased (unless chase_share is 0).
            let copied = copied_levels(&hist_host, max_level, chase_share);
            let over = hist_host.first().copied().unwrap_or(0) as u64;
            let left = over + hist_host.iter().skip(copied as usize + 1).map(|&h| h as u64).sum::<u64>();
            if epoch == 0 {
                copy_start.record(stream).map_err(gpu("event"))?;
                report.bands = level_bands(&hist_host, max_level);
            }
            // SAFETY: as above.
            unsafe {
                stream
                    .launch_builder(&self.kernels.level_starts)
                    .arg(&hist)
                    .arg(&starts)
                    .arg(&cursor)
                    .launch(scan)
                    .map_err(gpu("level starts"))?;
                stream
                    .launch_builder(&self.kernels.level_order)
                    .arg(c)
                    .arg(&n)
                    .arg(&task_off)
                    .arg(&ntasks)
                    .arg(&level)
                    .arg(&cursor)
                    .arg(&order)
                    .arg(&list_cap)
                    .launch(first)
                    .map_err(gpu("level order"))?;
            }
            if epoch == 0 {
                order_end.record(stream).map_err(gpu("event"))?;
            }
            // More pieces than the order holds: level_order reported it (E_WORKLIST), and nothing is copied.
            if starts_host[LEVELS] > u64::from(list_cap) {
                chase_start.record(stream).map_err(gpu("event"))?;
                return Ok(report);
            }
            for (la, lb) in copy_launches(&hist_host, copied, tail_max) {
                // SAFETY: as above.
                unsafe {
                    if la == lb && hist_host[la as usize] >= tail_max {
                        // A warp per piece: a level of few pieces launches few CTAs.
                        let (at, pieces) = (starts_host[la as usize] as u32, hist_host[la as usize]);
                        let grid = grid_for(u64::from(pieces), warps_per_cta, 132 * 16);
                        report.level_launches += 1;
                        stream
                            .launch_builder(&self.kernels.copy_level)
                            .arg(c)
                            .arg(&order)
                            .arg(&at)
                            .arg(&pieces)
                            .launch(LaunchConfig { grid_dim: (grid, 1, 1), ..first })
                            .map_err(gpu("level copy"))?;
                        continue;
                    }
                    // One CTA copies the run's levels in order.
                    report.tail_launches += 1;
                    stream
                        .launch_builder(&self.kernels.copy_tail)
                        .arg(c)
                        .arg(&order)
                        .arg(&starts)
                        .arg(&la)
                        .arg(&lb)
                        .launch(tail)
                        .map_err(gpu("level tail copy"))?;
                }
            }
            report.copied += copied;
            if left == 0 {
                break;
            }
            // Another epoch when this one copied something, one is left, and enough pieces are over the cap to be
            // worth a search; else the chase. The sparse high levels alone never are: they hold at most
            // 1/chase_share of the pieces (counting them cost the 4.65 GB generated archive a second epoch, 41.4
            // against 37.5 ms, session 18 run 4).
            if copied > 0 && epoch + 1 < epochs && over > epoch_min {
                let ticket = counts;
                // SAFETY: as above.
                unsafe {
                    stream
                        .launch_builder(&self.kernels.level_rebase)
                        .arg(c)
                        .arg(&n)
                        .arg(&task_off)
                        .arg(&ntasks)
                        .arg(&level)
                        .arg(&copied)
                        .arg(&hist)
                        .arg(&ticket)
                        .launch(later)
                        .map_err(gpu("level rebase"))?;
                }
                continue;
            }
            chase_start.record(stream).map_err(gpu("event"))?;
            // SAFETY: as above.
            unsafe {
                stream
                    .launch_builder(&self.kernels.chase_unleveled)
                    .arg(c)
                    .arg(&order)
                    .arg(&starts)
                    .arg(&level)
                    .arg(&copied)
                    .launch(later)
                    .map_err(gpu("level chase"))?;
            }
            return Ok(report);
        }
        chase_start.record(stream).map_err(gpu("event"))?;
        Ok(report)
    }

    /// Whether a complete full decode is resident (see [`Device::stream_full`]).
    pub fn full_ready(&self) -> bool {
        self.last_full == Some(FullVariant::Full)
    }

    /// Whether every unit's tokens and literals are resident from the last full decode (resident.rs).
    fn resident(&self) -> bool {
        matches!(self.last_full, Some(FullVariant::ParseOnly | FullVariant::Full))
    }

    /// Hands bytes `[start, end)` of the resident full decode to `f` in order, as pieces of at most `piece`
    /// bytes (`f` gets each piece's stream offset and its bytes, which it may change), copied out through two
    /// pinned buffers: piece i + 1's copy is in flight while `f` works on piece i.
    pub fn stream_full(
        &mut self,
        start: usize,
        end: usize,
        piece: usize,
        f: &mut dyn FnMut(usize, &mut [u8]) -> Result<()>,
    ) -> Result<()> {
        let full =
            self.full.as_ref().filter(|_| self.full_ready()).ok_or_else(|| Error::Gpu("no full decode".into()))?;
        if start > end || end > full.bytes.len() || piece == 0 {
            return Err(Error::InvalidArgument(format!("stream range {start}..{end} of {}", full.bytes.len())));
        }
        if start == end {
            return Ok(());
        }
        let src = self.ptr(&full.bytes);
        let cap = piece.min(end - start);
        if self.stream_bufs.as_ref().is_none_or(|b| b[0].len() < cap) {
            // At least STREAM_PIN_MIN even for a shorter range: pinning costs milliseconds per call, and the
            // mount's stream runs start small and double (1 MiB, 2, 4, … 16).
            let want = cap.max(STREAM_PIN_MIN).min(piece);
            self.stream_bufs = None; // the old pair is unpinned before a larger one is pinned
            self.stream_bufs = Some([self.alloc_host(want)?, self.alloc_host(want)?]);
        }
        let bufs = self.stream_bufs.as_mut().expect("allocated above");
        let ptrs = [
            bufs[0].as_mut_slice().map_err(gpu("pinned buffer"))?.as_mut_ptr(),
            bufs[1].as_mut_slice().map_err(gpu("pinned buffer"))?.as_mut_ptr(),
        ];
        let events = [self.ctx.new_event(None).map_err(gpu("event"))?, self.ctx.new_event(None).map_err(gpu("event"))?];
        let stream = self.stream.clone();
        let pieces = (end - start).div_ceil(piece);
        let len_of = |i: usize| piece.min(end - start - i * piece);
        let enqueue = |i: usize| -> Result<()> {
            // SAFETY: ptrs[i % 2] is a live pinned buffer of at least `cap >= len_of(i)` bytes (the buffers stay
            // in `self.stream_bufs`, and the stream is synchronised below before this call returns), and the
            // piece lies inside `full.bytes`.
            unsafe {
                let dst = std::slice::from_raw_parts_mut(ptrs[i % 2], len_of(i));
                result::memcpy_dtoh_async(dst, src + (start + i * piece) as u64, stream.cu_stream())
            }
            .map_err(gpu("streamed copy"))?;
            events[i % 2].record(&stream).map_err(gpu("event"))
        };
        let mut run = || -> Result<()> {
            enqueue(0)?;
            for i in 0..pieces {
                if i + 1 < pieces {
                    enqueue(i + 1)?;
                }
                events[i % 2].synchronize().map_err(gpu("streamed copy"))?;
                // SAFETY: the copy into this buffer has completed (its event), and the next copy into it is only
                // enqueued after `f` returns; nothing else aliases it.
                let host = unsafe { std::slice::from_raw_parts_mut(ptrs[i % 2], len_of(i)) };
                f(start + i * piece, host)?;
            }
            Ok(())
        };
        let result = run();
        // No copy may still be writing into the pinned buffers when they are reused or freed.
        let synced = stream.synchronize().map_err(gpu("streamed copy"));
        result.and(synced)
    }

    /// Copies the full decode's output (the whole stream) into `host` (pinned), returning the device→host ms.
    pub fn full_output(&mut self, host: &mut PinnedHostSlice<u8>, total_len: usize) -> Result<f32> {
        let full = self.full.as_ref().ok_or_else(|| Error::Gpu("no full decode has run".into()))?;
        if host.len() < total_len || full.bytes.len() < total_len {
            return Err(Error::Gpu("output buffer too small".into()));
        }
        self.events.0.record(&self.stream).map_err(gpu("event"))?;
        self.stream.memcpy_dtoh(&full.bytes.slice(..total_len), host).map_err(gpu("output copy"))?;
        self.events.1.record(&self.stream).map_err(gpu("event"))?;
        self.stream.synchronize().map_err(gpu("output copy"))?;
        self.events.0.elapsed_ms(&self.events.1).map_err(gpu("event timing"))
    }

    /// Page-locked host memory for results (not write-combined: the host reads it).
    pub fn alloc_host(&self, len: usize) -> Result<PinnedHostSlice<u8>> {
        // SAFETY: the buffer is written by device copies before the host reads it (callers synchronise).
        unsafe { self.ctx.alloc_pinned_with_flags::<u8>(len.max(1), 0) }.map_err(gpu("pinned alloc"))
    }
}

impl SeekBuffers {
    fn new(
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of `#define NAME value` in kernels/decode.cu.
    fn kernel_define(name: &str) -> u64 {
        let line = KERNEL_SOURCE
            .lines()
            .find_map(|l| l.strip_prefix("#define ")?.strip_prefix(name)?.strip_prefix(' '))
            .unwrap_or_else(|| panic!("kernels/decode.cu has no #define {name}"));
        line.split_whitespace().next().unwrap().parse().unwrap()
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
        let path = kernel_cache::file_for(dir.path(), KERNEL_SOURCE, &compile_options(), "sm_90");
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

    /// Constants the host sizes buffers and launches by must be the kernel's own.
    #[test]
    fn grouped_parse_order_takes_each_group_longest_first() {
        // Six units in groups of four (group_shift 2): symbols 3 nmatch + 1 + nlit = 4, 11, 2, 11 | 9, 1.
        let rows = [(1, 0), (2, 4), (0, 1), (3, 1), (2, 2), (0, 0)];
        let mut meta = vec![0u32; rows.len() * prep::META_WORDS];
        for (u, (nmatch, nlit)) in rows.into_iter().enumerate() {
            meta[u * prep::META_WORDS + 2] = nmatch;
            meta[u * prep::META_WORDS + 3] = nlit;
        }
        // Ties keep stream order (a stable sort); no unit leaves its group.
        let mut ids: Vec<u32> = (0..6).collect();
        sort_groups_longest_first(&mut ids, &meta, 2);
        assert_eq!(ids, vec![1, 3, 0, 2, 4, 5]);
        assert_eq!(parse_order(&meta, 2), (0..6).collect::<Vec<u32>>());
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
        assert_eq!(kernel_define("TOKEN_BUCKET_LOG"), u64::from(resident::TOKEN_BUCKET_LOG));
        assert_eq!(kernel_define("CT_WORDS"), super::super::prep::CT_WORDS as u64);
        assert_eq!(kernel_define("CT_FC"), super::super::prep::CT_FC as u64);
        assert_eq!(kernel_define("CT_LIT_FC"), super::super::prep::CT_LIT_FC as u64);
        use crate::codec::tables::{OF_ALPHABET, OF_EXPLICIT_CODES, OF_REVERSE_BASE};
        assert_eq!(kernel_define("OF_EXPLICIT"), OF_EXPLICIT_CODES as u64);
        assert_eq!(kernel_define("OF_REVERSE"), OF_REVERSE_BASE as u64);
        assert_eq!(kernel_define("OF_ALPHABET"), OF_ALPHABET as u64);
    }
}
