//! The whole-archive decode: every slice parsed in one launch (entropy decoding inside the timer), then the matches
//! resolved by the map chase (small archives), the one-launch copy flow (large ones) or the older level, round and
//! chase variants kept for measurements; the stage variants that stop early (`FullVariant`) give the time
//! breakdown, and `stream_full` serves `cat`/`unpack` and the mount's sequential readers from it.

use super::*;

/// The K = 1 parse's preferred shared-memory carveout (percent of the SM's) for a grid of at most one CTA an SM:
/// the 64 KB configuration on the H100/H200 (see [`Device::set_parse_carveout`]).
const K1_FEW_CTAS_CARVEOUT: i32 = 25;

/// [`K1_FEW_CTAS_CARVEOUT`], or ACEAPEX_GPU_K1_CARVEOUT (0..=100, or -1 for the driver's choice; measurements).
fn few_ctas_carveout() -> i32 {
    static CARVEOUT: OnceLock<i32> = OnceLock::new();
    env_knob(&CARVEOUT, "ACEAPEX_GPU_K1_CARVEOUT", K1_FEW_CTAS_CARVEOUT, |p| (-1..=100).contains(&p))
}

/// CTAs an SM a staged parse's carveout leaves shared memory for: 1, or ACEAPEX_GPU_K1_STAGED_CTAS (1..=4;
/// measurements, session 37: two CTAs of 2 KiB slices on an SM).
fn k1_staged_ctas_knob() -> u32 {
    static CTAS: OnceLock<u32> = OnceLock::new();
    env_knob(&CTAS, "ACEAPEX_GPU_K1_STAGED_CTAS", 1, |c| (1..=4).contains(&c))
}

/// The K = 1 parse's CTA size as ACEAPEX_GPU_K1_CTA sets it (32, 64, 128 or 256; measurements), or 0: chosen by
/// [`Device::k1_launch`].
fn k1_cta_knob() -> u32 {
    static THREADS: OnceLock<u32> = OnceLock::new();
    env_knob(&THREADS, "ACEAPEX_GPU_K1_CTA", 0, |t| matches!(t, 32 | 64 | 128 | 256))
}

/// Units an SM that still count as few for [`Device::k1_launch`]: 64, or ACEAPEX_GPU_K1_FEW_UNITS (1..=1024;
/// measurements).
fn k1_few_units_knob() -> u32 {
    static UNITS: OnceLock<u32> = OnceLock::new();
    env_knob(&UNITS, "ACEAPEX_GPU_K1_FEW_UNITS", 64, |u| (1..=1024).contains(&u))
}

/// Lanes a warp that take a unit when a full decode has few units ([`Device::k1_launch`]): eight on an archive of
/// one rANS lane a slice, all 32 on one of two.
const K1_FEW_LANES: u32 = 8;
const K1_FEW_LANES_TWO: u32 = 32;

/// The lanes of each warp that take a unit in the full decode's K = 1 parse as ACEAPEX_GPU_K1_WARP_LANES sets them
/// (1..=32; measurements), or 0: chosen by [`Device::k1_launch`].
fn k1_lanes_knob() -> u32 {
    static LANES: OnceLock<u32> = OnceLock::new();
    env_knob(&LANES, "ACEAPEX_GPU_K1_WARP_LANES", 0, |l| (1..=32).contains(&l))
}

/// Bytes of shared memory a unit's word-stream ring takes in `parse_k1_staged` (kernel K1_RING_BYTES; see
/// `compile::k1_ring_bytes`); a launch gives (units a CTA + 1) rings' worth, since the kernel aligns the rings to
/// their size.
pub(super) const K1_RING_BYTES: u32 = 1024;

/// Most units a CTA of `parse_k1_staged` may hold (the few-unit launches of [`Device::k1_launch`] hold 8 to 64).
const K1_STAGED_UNITS_MAX: u32 = 64;

/// Warps a CTA of `finish_linear_k1` (kernel PLACE_WARPS), and the largest unit it places, log2 (PLACE_MAX_UNIT).
pub(super) const PLACE_WARPS: u32 = 4;
pub(super) const PLACE_MAX_UNIT_LOG: u32 = 12;
/// `finish_linear_k1`'s stages (kernels/parse.cuh FINISH_*): the token values, the literals to their offsets, the
/// chase maps.
pub(super) const FINISH_TOKENS: u32 = 1;
pub(super) const FINISH_PLACE: u32 = 2;
pub(super) const FINISH_MAPS: u32 = 4;
/// Shared memory a warp of `chase_matches` takes for its batch (kernels/chase.cuh CHASE_BATCH_BYTES).
pub(super) const CHASE_BATCH_BYTES: u32 = 256;

/// Whether a staged full decode writes its literals in literal order for `finish_linear_k1` to move (the
/// default), or places them in the chain (ACEAPEX_GPU_K1_LINEAR=0; measurements); see [`Device::k1_linear`].
fn k1_linear_knob() -> bool {
    static LINEAR: OnceLock<u32> = OnceLock::new();
    env_knob(&LINEAR, "ACEAPEX_GPU_K1_LINEAR", 1, |v| v <= 1) == 1
}

/// Whether the full decode of few K = 1 units runs `parse_k1_staged` (the default) or `parse_k1` as before
/// (ACEAPEX_GPU_K1_STAGED=0; measurements).
fn k1_staged_knob() -> bool {
    static STAGED: OnceLock<u32> = OnceLock::new();
    env_knob(&STAGED, "ACEAPEX_GPU_K1_STAGED", 1, |v| v <= 1) == 1
}

/// Units a K = 1 parse CTA of `threads` threads holds when `lanes` of each warp take one (kernel parse_units).
fn k1_units_per_cta(threads: u32, lanes: u32) -> u32 {
    threads / 32 * lanes
}

/// Lets a staged parse (`parse_k1_staged`, `parse_k1_linear`) take its rings beyond the 48 KB of dynamic shared
/// memory a launch gets by default: up to the rings of [`K1_STAGED_UNITS_MAX`] units (`rings_per_unit`: 1, or 2 for
/// `parse_k1_linear` on a K = 2 archive, a ring for each rANS lane's thread, see [`Device::k1_linear`]) or what the
/// device allows a CTA beside the function's tables, whichever is less (`max_rings`: a launch that would need more
/// runs another parse). The limits are read from the driver here, once, so that a launch's carveout
/// ([`StagedParse::set_carveout`]) costs no driver call unless it changes.
pub(super) fn prepare_staged_parse(ctx: &CudaContext, f: &CudaFunction, rings_per_unit: u32) -> Result<StagedParse> {
    use cudarc::driver::sys::{CUdevice_attribute, CUfunction_attribute};
    let tables =
        f.get_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES).map_err(gpu("attribute"))?;
    let optin = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        .map_err(gpu("device attribute"))?;
    let per_sm = ctx
        .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)
        .map_err(gpu("device attribute"))?
        .max(1);
    let max_rings = ((K1_STAGED_UNITS_MAX * rings_per_unit + 1) * k1_ring_bytes()).min((optin - tables).max(0) as u32);
    f.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, max_rings as i32)
        .map_err(gpu("shared memory attribute"))?;
    Ok(StagedParse { max_rings, tables, per_sm, carveout: -1 })
}

/// A staged parse function's shared-memory limits ([`prepare_staged_parse`]) and the carveout it has now.
pub(super) struct StagedParse {
    /// The dynamic shared memory (rings) a launch may take.
    pub(super) max_rings: u32,
    /// The function's static shared memory (its tables) and the SM's shared memory, in bytes.
    tables: i32,
    per_sm: i32,
    /// The carveout percentage last asked for (-1: the driver's choice).
    carveout: i32,
}

impl StagedParse {
    /// Asks for a shared-memory carveout of `f` (this parse's function) that holds one CTA's tables and `rings`
    /// bytes of rings (a launch's): the rest of the SM's 256 KB stays L1, for the word streams the parse
    /// prefetches.
    pub(super) fn set_carveout(&mut self, f: &CudaFunction, rings: u32) -> Result<()> {
        use cudarc::driver::sys::CUfunction_attribute;
        // CTAs an SM (1 unless measuring), each more with the 1 KB the driver keeps a CTA.
        let ctas = k1_staged_ctas_knob() as i32;
        let bytes = ctas * (self.tables + rings as i32) + (ctas - 1) * 1024;
        let percent = ((100 * bytes + self.per_sm - 1) / self.per_sm).min(100);
        if percent != self.carveout {
            f.set_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, percent)
                .map_err(gpu("shared memory carveout"))?;
            self.carveout = percent;
        }
        Ok(())
    }
}

/// Threads of `copy_tail`'s one CTA (kernel TAIL_THREADS) and pieces a warp copies at once (TAIL_UNROLL).
pub(super) const TAIL_THREADS: u32 = 512;
pub(super) const TAIL_UNROLL: u32 = 4;

/// Level buckets of `Resolve::Levels` (kernel LEVELS; levels are u16 per token), and the level value of matches
/// over the cap (LEVEL_OVER).
pub(super) const LEVELS: usize = 4096;

#[cfg(test)]
pub(super) const LEVEL_OVER: u32 = 65535;

/// The level value of a match copied in an earlier epoch (kernel LEVEL_DONE).
#[cfg(test)]
pub(super) const LEVEL_DONE: u32 = 65534;

/// Threads of the one CTA of `level_starts` (kernel LEVEL_SCAN_THREADS).
pub(super) const LEVEL_SCAN_THREADS: u32 = 1024;

/// Epochs of the level search at most: each copies up to a cap's worth of levels above what earlier ones copied
/// (kernels/levels.cuh, level_rebase); what the last one leaves is chased. ACEAPEX_GPU_LEVEL_EPOCHS=N (1 to 64)
/// sets it to compare (1: session 16's single search).
const LEVEL_EPOCHS: u32 = 8;

/// Pieces over the cap below which they are chased rather than searched again:
/// another epoch costs a search over every match plus a launch per level, and on small archives that lost to the
/// chase (session 17 run 3, H200: fly ×11 3.36 → 7.24 ms with 624 levels copied in epochs, atha genome 2.30 →
/// 2.49), while the 4.65 GB archive, whose chase had millions of pieces, gained (76.9 → 55.6 ms).
const EPOCH_MIN_PIECES: u64 = 1 << 16;

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
/// (kernels/levels.cuh): two rounds and a barrier cost less than a launch. ACEAPEX_GPU_TAIL_MAX=N sets it to
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
pub(super) fn copy_launches(hist: &[u32], max_level: u32, tail_max: u32) -> Vec<(u32, u32)> {
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
pub(super) fn level_starts_host(hist: &[u32]) -> Vec<u64> {
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
pub(super) const CHASE_SHARE_SESSION16: u32 = 256;

fn chase_share() -> u32 {
    static SHARE: OnceLock<u32> = OnceLock::new();
    env_knob(&SHARE, "ACEAPEX_GPU_CHASE_SHARE", CHASE_SHARE, |_| true)
}
const MIN_CHASED: u64 = 1024;

/// Most passes ACEAPEX_GPU_RESOLVE=levels:PASSES may ask for (the lists' counts are sized for them).
const LEVEL_PASSES_MAX: u32 = 64;

/// kernels/common.cuh `MODE_K1_LANES_SHIFT`: where a K = 1 parse's mode holds the lanes a warp that take a unit.
pub(super) const MODE_K1_LANES_SHIFT: u32 = 8;

/// Which stages a full decode runs, for the time breakdown (kernels/common.cuh `MODE_*`).
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
pub(super) fn level_bands(hist: &[u32], max_level: u32) -> Vec<(u32, u32, u64)> {
    let mut bands: Vec<(u32, u32, u64)> = LEVEL_BANDS.iter().map(|&lo| (lo, 0, 0)).collect();
    for &pieces in hist.iter().take(max_level as usize + 1).skip(1) {
        if let Some(band) = bands.iter_mut().rev().find(|b| pieces >= b.0) {
            band.1 += 1;
            band.2 += u64::from(pieces);
        }
    }
    bands
}

/// How the complete decode resolves matches once every literal is in place (kernels/chase.cuh, flow.cuh,
/// levels.cuh, resolve.cuh).
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
    /// stamps. Unlike the others it does not check the depth bound (kernels/levels.cuh). `epoch_min`: pieces over the
    /// cap after an epoch below which they are chased instead of searched again ([`EPOCH_MIN_PIECES`] by default; 0
    /// runs every epoch there is work for).
    Levels { passes: u32, cap: u32, epoch_min: u64, tail_max: u32, chase_share: u32 },
    /// The default since session 20: every match copied in one launch of `copy_flow`, tasks of 32 matches in
    /// stream order, a match copied as soon as the matches its source overlaps are. No levels, no buckets, no host
    /// synchronisation; like `Levels` it does not check the depth bound.
    Flow,
    /// Session 27: the resident seek's maps (token index, literal map, chase records) built over the parse, then
    /// every match byte chased to its literal in place, a lane a byte of a window that holds one (`chase_matches`).
    /// No order between matches, so no chain of waits; each byte pays its own hops, and the depth bound is checked.
    /// The maps stay for later resident seeks.
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
    pub(super) fn from_env() -> Resolve {
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
pub(super) struct FullBuffers {
    /// The parse's order of the units ([`parse_order`]): the units, and places kept by NO_UNIT (at most u32::MAX
    /// entries, see [`FullBuffers::entries`]).
    pub(super) worklist: CudaSlice<u32>,
    pub(super) tok_off: CudaSlice<u64>,
    pub(super) tpos: CudaSlice<u32>,
    pub(super) mpos: CudaSlice<u32>,
    pub(super) lidx: CudaSlice<u32>,
    pub(super) back: CudaSlice<u64>,
    pub(super) bytes: CudaSlice<u8>,
    pub(super) counters: CudaSlice<u32>,
    pub(super) status: CudaSlice<u64>,
    /// Per stream byte: 0 unresolved, else 1 + its depth (see resolve_warp in kernels/resolve.cuh).
    pub(super) stamps: CudaSlice<u8>,
    /// Matches left for the next round (unit << 32 | token), double-buffered, and the count per round,
    /// and the unresolved span (klo << 32 | khi) of each: [ids 0, ids 1, spans 0, spans 1].
    pub(super) lists: [CudaSlice<u64>; 4],
    pub(super) list_counts: CudaSlice<u32>,
    pub(super) list_cap: u32,
    /// First copy task (32 matches) of each block, the block of each task, and the number of tasks.
    pub(super) task_off: CudaSlice<u32>,
    pub(super) task_unit: CudaSlice<u32>,
    pub(super) ntasks: u32,
    pub(super) counters_init: Vec<u32>,
    /// `Resolve::Levels`: the level of every token (0: none yet), pieces per level, where each level's pieces
    /// start in the order (`lists[2]`), and the next free slot of each while they are listed.
    pub(super) level: CudaSlice<u16>,
    pub(super) level_hist: CudaSlice<u32>,
    pub(super) order_start: CudaSlice<u32>,
    pub(super) order_cursor: CudaSlice<u32>,
    /// Two u32 per unit: the words each rANS lane took, written by `parse_k1_linear` when it decodes a K = 2
    /// archive's lane 1 on threads of its own, for `finish_linear_k1` to check their sum.
    pub(super) lane_end: CudaSlice<u32>,
}

impl FullBuffers {
    /// The worklist's entries (checked to fit a u32 when it was made, in `ensure_full`).
    pub(super) fn entries(&self) -> u32 {
        self.worklist.len() as u32
    }
}

/// A worklist entry that holds no unit (kernels/common.cuh `NO_UNIT`): [`parse_order`] keeps places with it.
pub(super) const NO_UNIT: u32 = u32::MAX;

/// How a full decode of few units launches its parse ([`Device::k1_launch`]): the units a CTA takes (consecutive
/// worklist entries, which share the tables of the first one's group) and the CTAs that run at once.
#[derive(Clone, Copy, Debug)]
pub(super) struct FewUnits {
    pub(super) cta_units: usize,
    /// Units a warp takes (the lanes of each warp that take one).
    pub(super) warp_units: usize,
    pub(super) max_ctas: usize,
    /// Table-coded units a warp takes once moved ([`literal_kinds_apart`]).
    pub(super) table_warp_units: usize,
}

/// The order in which the full decode's parse takes the units (its worklist): within each table group (so that a
/// CTA's units still share its tables), the units with the most of something first, or stream order. A warp of
/// the parse runs as long as its longest thread, and a lane-0 thread's code phase and its literals are two loops
/// that diverge between the warp's threads and run one after the other; so:
/// - the default for `few` units (the staged parse of one CTA an SM, [`Device::k1_few_units`]): the most codes
///   (matches) first, so that a warp's lane-0 threads run code phases of about one length. H200, session 37 run 8, full
///   decode against stream order, two rounds: atha genome 0.415 / 0.411 -> 0.402 / 0.403 ms, general 0.588 / 0.588 ->
///   0.567 / 0.567, fly x11 0.478 / 0.475 -> 0.486 / 0.487. And in an archive that also has context-coded units, the
///   units whose literals are coded by the literal table (FORMAT.md §3.5: no context model) go to CTAs of their own at
///   the end ([`literal_kinds_apart`]): in a warp with both kinds the two literal loops run one after the other.
///   (Session 39 run 1 timed the chains: on atha genome, 160 of 7,504 units are table-coded, and the warps that hold
///   one ended last, 215 us after the parse began against 117 us for the median lane-1 warp. Run 7, full decode against
///   session 38's order, two rounds: atha genome 0.389 / 0.392 -> 0.325 / 0.331 ms, general 0.556 / 0.557 -> 0.556 /
///   0.558 and fly x11 0.479 / 0.480 -> 0.483 / 0.481, which it leaves as they were: general has no context-coded
///   units, fly x11 too many table-coded ones for the CTAs.)
/// - stream order for more units (the big archives' `parse_k1`, where sorting by symbols cost session 20's 4.65 GB
///   archive 4 %: 20.57 against 19.72 ms, its literal and token stores losing their order);
/// - ACEAPEX_GPU_PARSE_ORDER=stream, =codes (the most codes first, literal kinds mixed) or =grouped (the most rANS
///   symbols first) picks one (measurements).
pub(super) fn parse_order(meta: &[u32], group_shift: u32, few: Option<FewUnits>) -> Vec<u32> {
    let mut ids: Vec<u32> = (0..(meta.len() / prep::META_WORDS) as u32).collect();
    match std::env::var("ACEAPEX_GPU_PARSE_ORDER").as_deref() {
        Ok("grouped") => sort_groups_most_first(&mut ids, meta, group_shift, unit_symbols),
        Ok("codes") => sort_groups_most_first(&mut ids, meta, group_shift, unit_matches),
        Ok("stream") => {}
        _ => {
            if let Some(few) = few {
                sort_groups_most_first(&mut ids, meta, group_shift, unit_matches);
                return literal_kinds_apart(ids, meta, group_shift, few);
            }
        }
    }
    ids
}

/// Table-coded units a warp of the full decode's parse takes once [`literal_kinds_apart`] has moved them (the
/// warp's other lanes idle): 8 (H200, session 39 run 3, atha genome with its table-coded units moved: entropy
/// alone 0.222 ms at 32 a warp, 0.197 at 16, 0.179 at 8; their slot-table loads with fewer lanes a warp), or
/// ACEAPEX_GPU_TABLE_WARP_UNITS (1..=32, a measurement).
fn table_warp_units() -> u32 {
    static UNITS: OnceLock<u32> = OnceLock::new();
    env_knob(&UNITS, "ACEAPEX_GPU_TABLE_WARP_UNITS", 8, |u| (1..=32).contains(&u))
}

/// `ids` (grouped by table group, the most codes first within each, as [`sort_groups_most_first`] leaves them)
/// with the table-coded units moved out of the CTAs of context-coded ones, when the archive has both: a group of
/// both kinds keeps its place with a [`NO_UNIT`] for each unit it gives up (so that its CTAs still hold one
/// group's units), a group of table-coded units only gives up its place. The moved units follow, each group's
/// from a CTA's boundary (so that its CTAs load that group's tables: a code step through global memory took ~500
/// cycles, session 39 run 3), `few.table_warp_units` a warp, or twice or four times that many where the CTAs
/// would otherwise not all run at once. As it was when no group is context-coded or none table-coded, or when even
/// that does not fit.
pub(super) fn literal_kinds_apart(ids: Vec<u32>, meta: &[u32], group_shift: u32, few: FewUnits) -> Vec<u32> {
    let table_coded = |u: u32| meta[u as usize * prep::META_WORDS + 6] & prep::META_CTX == 0;
    let per_group = 1usize << group_shift.min(31);
    let mut kept = Vec::with_capacity(ids.len());
    let mut moved: Vec<u32> = Vec::new();
    for group in ids.chunks(per_group) {
        let tables = group.iter().filter(|&&u| table_coded(u)).count();
        if tables == 0 {
            kept.extend_from_slice(group);
        } else if tables == group.len() {
            moved.extend_from_slice(group);
        } else {
            kept.extend(group.iter().filter(|&&u| !table_coded(u)));
            kept.extend(std::iter::repeat_n(NO_UNIT, tables));
            moved.extend(group.iter().filter(|&&u| table_coded(u)));
        }
    }
    if moved.is_empty() || moved.len() == ids.len() {
        return ids;
    }
    let cta = few.cta_units.max(1);
    let warp = few.warp_units.clamp(1, cta);
    let take = few.table_warp_units.clamp(1, warp);
    for take in [take, 2 * take, 4 * take] {
        let mut out = kept.clone();
        for group in moved.chunk_by(|a, b| a >> group_shift == b >> group_shift) {
            out.resize(out.len().next_multiple_of(cta), NO_UNIT);
            for units in group.chunks(take.min(warp)) {
                out.resize(out.len().next_multiple_of(warp), NO_UNIT);
                out.extend_from_slice(units);
            }
        }
        if out.len().div_ceil(cta) <= few.max_ctas {
            return out;
        }
    }
    ids
}

/// A unit's match tokens, from its metadata row (each brings three codes to rANS lane 0).
pub(super) fn unit_matches(row: &[u32]) -> u64 {
    u64::from(row[2])
}

/// A unit's rANS symbols, from its metadata row: 3 nmatch + 1 codes and nlit literals (FORMAT.md §3.1).
pub(super) fn unit_symbols(row: &[u32]) -> u64 {
    3 * u64::from(row[2]) + 1 + u64::from(row[3])
}

/// Sorts `ids` (every unit, in stream order) within each table group by `key` of the unit's metadata row, most
/// first (a stable sort: ties keep stream order).
pub(super) fn sort_groups_most_first(ids: &mut [u32], meta: &[u32], group_shift: u32, key: impl Fn(&[u32]) -> u64) {
    let per_group = 1usize << group_shift.min(31);
    for group in ids.chunks_mut(per_group) {
        group.sort_by_key(|&u| std::cmp::Reverse(key(&meta[u as usize * prep::META_WORDS..][..prep::META_WORDS])));
    }
}

/// The highest level `Resolve::Levels` copies, from the pieces per level (`hist[0]`: over the cap): the lowest
/// whose higher levels hold at most 1/`share` of all pieces, or MIN_CHASED; with `share` 0 the highest.
/// (Copying at most 64 levels was tried: fly ×11, whose pieces sit in 208 levels, 3.32 → 2.93 ms, but the 1.16
/// GB archive 10.2 → 12.0 ms, its chase of the levels above taking 3.9 ms; H200, session 16 runs 5 and 6.)
pub(super) fn copied_levels(hist: &[u32], max_level: u32, share: u32) -> u32 {
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

impl Device {
    /// The kernels' context over the full decode's buffers (every unit, worklist = identity); `stamps` only when
    /// the match bytes are to be resolved.
    pub(super) fn full_ctx(&self, full: &FullBuffers, stamps: bool) -> KernelCtx {
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
            lane_end: self.ptr(&full.lane_end),
            wl_cap: full.entries(),
            ..self.base_ctx()
        }
    }

    pub(super) fn ensure_full(&mut self) -> Result<()> {
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
        let few = self.k1_few_units(n as u64).then(|| {
            let (threads, lanes) = self.k1_launch(n as u64);
            FewUnits {
                cta_units: k1_units_per_cta(threads, lanes) as usize,
                warp_units: lanes as usize,
                max_ctas: self.sm_count as usize,
                table_warp_units: table_warp_units() as usize,
            }
        });
        let ids = parse_order(&self.meta_host.words, self.group_shift, few);
        let entries = u32::try_from(ids.len()).map_err(|_| Error::Gpu("too many units for one full decode".into()))?;
        let mut counters_init = vec![0u32; self.counters_len()];
        counters_init[0] = entries;
        let tokens = acc.max(1) as usize;
        let matches = acc.saturating_sub(n as u64).max(1);
        // A deferred match is listed in pieces of at most RESOLVE_PIECE bytes (kernels/common.cuh): at most one
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
            lane_end: stream.alloc_zeros::<u32>(2 * n.max(1)).map_err(gpu("alloc"))?,
        });
        Ok(())
    }

    /// How the full decode's parse of `n` units is launched: threads a CTA (those that take a unit's code phase
    /// and lane 0), and the lanes of each warp that take a unit (kernels/parse.cuh `parse_units`).
    ///
    /// Few units (at most 64 an SM): one CTA an SM holding the fewest units, a power of two, that fit the units
    /// on the SMs, eight lanes a warp with one rANS lane a slice. Fewer slices a warp, because a warp's loads (its
    /// lanes' word streams and context rows, another slice each) then serve fewer lanes; a power of two, so that a
    /// CTA's units lie in one table group, whose tables it holds in shared memory. atha_chr1's 7,504 slices: 64 a CTA,
    /// 118 CTAs of eight warps; fly x11's 3,768: 32, 118 CTAs of four warps. H200, session 30 run 2, full decode
    /// against session 29's launch (32 lanes in 64-thread CTAs, two warps an SM): atha genome 1.05 -> 0.91 ms,
    /// general 1.54 -> 1.25, fly x11 1.36 -> 1.11; 16 lanes in four warps: 0.92, 1.30, 1.34 (fly in two-warp
    /// CTAs); 15 lanes, whose CTAs straddle table groups, 1.40 on atha genome (run 1's Nsight Compute, atha genome
    /// at 16 lanes against 32: long-scoreboard stall 0.66 -> 0.40 cycles an instruction, L1 hit 85.9 -> 92.5 %).
    /// With two rANS lanes a slice (format v7's default) all 32 lanes of a warp take a unit: since the token parse
    /// left the chain (`finish_linear_k1`), each thread's chain is only its lane's symbols, and fuller warps won.
    /// H200, session 36 run 1, full decode at 8 lanes / 16 lanes in 128-thread CTAs / 32 lanes in 64-thread CTAs:
    /// atha genome 0.520 / 0.475 / 0.465 ms, general 0.637 / 0.616 / 0.619, fly x11 0.511 / 0.534 / 0.513 (fly's
    /// 32 lanes in 64-thread CTAs: 59 CTAs; the launch here gives it 118 of one warp).
    /// More units: 128 threads of 32 lanes, so that the SMs hold as many as their shared memory allows.
    fn k1_launch(&self, n: u64) -> (u32, u32) {
        let sms = u64::from(self.sm_count.max(1));
        let (auto_threads, auto_lanes) = match self.k1_few_units(n) {
            true => {
                let units = n.div_ceil(sms).next_power_of_two().clamp(8, 64) as u32;
                let lanes = match self.lanes {
                    2 => K1_FEW_LANES_TWO,
                    _ => K1_FEW_LANES,
                }
                .min(units);
                (units / lanes * 32, lanes)
            }
            false => (CTA_THREADS, 32),
        };
        let lanes = match k1_lanes_knob() {
            0 => auto_lanes,
            l => l,
        };
        let threads = match k1_cta_knob() {
            0 => auto_threads,
            t => t,
        };
        (threads, lanes)
    }

    /// Whether a full decode of `n` units has few of them: at most 64 an SM ([`Self::k1_launch`]), or as many as
    /// ACEAPEX_GPU_K1_FEW_UNITS sets (a measurement knob: session 37 ran atha_chr1 packed with 2 KiB slices, 114 an
    /// SM, through the staged parse to see what twice the chains would give).
    fn k1_few_units(&self, n: u64) -> bool {
        n <= u64::from(k1_few_units_knob()) * u64::from(self.sm_count.max(1))
    }

    /// Whether the full decode's parse of `n` units in CTAs of `threads` threads, `lanes` of each warp taking a
    /// unit, runs `parse_k1_staged`: few units (at most 64 an SM, as in [`Self::k1_launch`]) and at most
    /// [`K1_STAGED_UNITS_MAX`] a CTA, unless ACEAPEX_GPU_K1_STAGED=0. Its word streams come from a ring in shared
    /// memory a unit (kernels/words.cuh WordRing1): ~5 instructions a renormalisation instead of WordReader1's
    /// ~19 and no global load on the chain; the K = 1 context-coded literal loop's SASS goes from 60 to 47
    /// instructions a literal (scripts/kernel-sass.py). H200, session 31 run 2, full decode against `parse_k1`
    /// (entropy alone in brackets): atha genome 0.915 -> 0.775 ms (0.62 -> 0.41), general 1.24 -> 1.18, fly x11
    /// 1.116 -> 0.970; run 3: a 512-byte ring or the word stream left out of the L1 prefetch no better. More units
    /// keep `parse_k1`, whose CTAs share the SMs.
    fn k1_staged(&self, n: u64, threads: u32, lanes: u32) -> bool {
        let units = k1_units_per_cta(threads, lanes);
        k1_staged_knob()
            && self.k1_few_units(n)
            && units <= K1_STAGED_UNITS_MAX
            && (units + 1) * k1_ring_bytes() <= self.staged[0].max_rings
    }

    /// Whether a staged parse (see [`Self::k1_staged`]) writes its literals in literal order, eight to an aligned
    /// word with no token walk in the chain (`parse_k1_linear`), and `finish_linear_k1` parses the tokens (a warp
    /// a unit, off the chain) and moves the literals to their offsets after it: when the parse writes no stamps and
    /// slices are at most 4 KiB, unless ACEAPEX_GPU_K1_LINEAR=0. A kernel entry of its own, so that the other
    /// parses' code stays as it is (session 30 put the same placement into `parse_k1` as a mode, and all of
    /// `parse_k1` got slower). H200, session 31 run 3,
    /// full decode against the placement in the staged chain: atha genome 0.772 -> 0.716 ms, general 1.174 ->
    /// 1.070, fly x11 0.964 -> 0.893.
    ///
    /// On a K = 2 archive (FORMAT.md §3.4, version 7) its CTAs have twice `threads`: the second half runs each
    /// unit's rANS lane 1 on a thread of its own, at the same time as lane 0 (the serial chain a thread about
    /// halves), with a ring each; so only while that stays within 1024 threads a CTA and the shared memory a CTA
    /// may have.
    fn k1_linear(&self, staged: bool, stamps: bool, threads: u32, lanes: u32) -> bool {
        staged
            && !stamps
            && self.unit_log <= PLACE_MAX_UNIT_LOG
            && k1_linear_knob()
            && threads * self.lanes <= 1024
            && (k1_units_per_cta(threads, lanes) * self.lanes + 1) * k1_ring_bytes() <= self.staged[1].max_rings
    }

    /// Sets the parse function's preferred shared-memory carveout for a launch of `grid` CTAs. A K = 1 parse CTA
    /// holds ~47 KB of tables, and for it the driver configures ~200 KB of shared memory (room for its occupancy),
    /// which leaves L1 ~55 KB for the word streams the CTA's threads prefetch (~1 KB each). When the grid has at
    /// most one CTA an SM (atha_chr1's 7,504 slices are 118 CTAs, see [`Device::k1_launch`]), that
    /// shared memory is never used: the 64 KB configuration leaves L1 ~190 KB. H200, session 29 run 1 (128-thread
    /// CTAs): atha genome's full decode 1.125 -> 1.078 ms, general 1.660 -> 1.571, fly x11 1.427 -> 1.387. A
    /// larger grid keeps the driver's choice (one CTA an SM would cut its occupancy to a warp a scheduler).
    pub(super) fn set_parse_carveout(&mut self, grid: u32) -> Result<()> {
        let want = if grid <= self.sm_count { few_ctas_carveout() } else { -1 };
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
        let entries = self.full.as_ref().expect("ensured above").entries();
        let cta_units = u64::from(k1_units_per_cta(parse_threads, k1_lanes));
        let parse_grid = grid_for(entries as u64, cta_units, 1 << 20);
        // The kernel skips a NO_UNIT entry only as a thread's one entry (kernels/parse.cuh parse_units): the order
        // that has them (literal_kinds_apart) is made for this launch, which gives every entry a thread.
        if entries as u64 > self.nunits && u64::from(parse_grid) * cta_units < u64::from(entries) {
            return Err(Error::Gpu("the parse order has more entries than the launch has threads".into()));
        }
        let staged = self.k1_staged(n as u64, parse_threads, k1_lanes);
        // Levels, the flow and the map chase resolve without stamps, so the parse does not write them.
        let stamps = variant == FullVariant::Full && !levels && !flow && map_chase.is_none();
        let linear = self.k1_linear(staged, stamps, parse_threads, k1_lanes);
        // parse_k1_linear on a K = 2 archive: a second half of each CTA runs the units' rANS lane 1, a ring a thread.
        let lane_threads = if linear { self.lanes } else { 1 };
        let rings = (k1_units_per_cta(parse_threads, k1_lanes) * lane_threads + 1) * k1_ring_bytes();
        if linear {
            self.staged[1].set_carveout(&self.kernels.parse_linear.0, rings)?;
        } else if staged {
            self.staged[0].set_carveout(&self.kernels.parse_staged, rings)?;
        } else {
            self.set_parse_carveout(parse_grid)?;
        }
        let full = self.full.as_ref().expect("ensured above");
        let c = self.full_ctx(full, stamps);
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
        } | k1_lanes << MODE_K1_LANES_SHIFT;
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
        // SAFETY: arguments match parse_k1(Ctx, u32, u32), parse_k1_staged and parse_k1_linear (the same, given
        // the shared memory for their threads' K1_RING_BYTES-aligned rings, allowed by prepare_staged_parse; with
        // K = 2, parse_k1_linear's CTA is twice the lane-0 threads, each half with its rings, and `c.lane_end` holds
        // two words a unit), finish_linear_k1(Ctx, u32, u32, Maps) (n: every unit, each at its own 2^unit_log <= 4096
        // bytes, its tokens at tok_off), resolve_round(Ctx, u32, u32*, u32, u32, u64*, u64*, u64*, u64*, u32*, u32,
        // u32), index_tokens(Ctx, u32*), resolve_chase(Ctx,
        // u64*, u64*, u32*, u32, const u32*) and chase_matches(Ctx, Maps); `c`
        // points at the full-decode buffers sized for all units and tokens (tok_off is their exact prefix sum), the
        // four lists hold every deferred piece (list_cap), the stamps every stream byte, the token index (when
        // used) nunits << (unit_log - TOKEN_BUCKET_LOG) entries, and the chase maps (chase_map_ptrs) a bit per
        // stream byte and a record per token entry.
        unsafe {
            let warps_per_cta = (CTA_THREADS / 32) as u64;
            let cfg =
                LaunchConfig { grid_dim: (parse_grid, 1, 1), block_dim: (CTA_THREADS, 1, 1), shared_mem_bytes: 0 };
            let level = 0u32;
            let (parse, rings, finish) = if linear {
                (&self.kernels.parse_linear.0, rings, Some(&self.kernels.parse_linear.1))
            } else if staged {
                (&self.kernels.parse_staged, rings, None)
            } else {
                (&self.kernels.parse, 0, None)
            };
            stream
                .launch_builder(parse)
                .arg(&c)
                .arg(&level)
                .arg(&mode)
                .launch(LaunchConfig {
                    block_dim: (parse_threads * lane_threads, 1, 1),
                    shared_mem_bytes: rings,
                    ..cfg
                })
                .map_err(gpu("parse launch"))?;
            // After a linear parse: the token values (every variant that parses tokens), the literals to their
            // offsets (the variants that place them), and with K = 2 the check of the two lanes' word counts (every
            // variant: the parse cannot finish it, see finish_linear_k1).
            // With the map chase to follow (a full variant), the same warps build its maps from the tokens they have
            // just parsed.
            let finish_maps = map_chase.as_ref().filter(|_| finish.is_some());
            let stages = match variant {
                FullVariant::EntropyOnly => 0,
                FullVariant::ParseNoLiterals => FINISH_TOKENS,
                FullVariant::ParseOnly => FINISH_TOKENS | FINISH_PLACE,
                FullVariant::Full => FINISH_TOKENS | FINISH_PLACE | if finish_maps.is_some() { FINISH_MAPS } else { 0 },
            };
            if let Some(finish) = finish.filter(|_| stages != 0 || self.lanes == 2) {
                let cfg = LaunchConfig {
                    grid_dim: (grid_for(n as u64, u64::from(PLACE_WARPS), 1 << 20), 1, 1),
                    block_dim: (PLACE_WARPS * 32, 1, 1),
                    shared_mem_bytes: 0,
                };
                let maps = finish_maps.copied().unwrap_or_default();
                stream
                    .launch_builder(finish)
                    .arg(&c)
                    .arg(&n)
                    .arg(&stages)
                    .arg(&maps)
                    .launch(cfg)
                    .map_err(gpu("finish parse"))?;
            }
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
            if let Some(maps) = map_chase.as_ref().filter(|_| finish_maps.is_none()) {
                self.enqueue_chase_maps(&c, *maps)?;
            }
            if let Some(event) = &chase_start {
                event.record(&stream).map_err(gpu("event"))?;
            }
            if let Some(maps) = &map_chase {
                // chase_matches over the maps just built from this parse's tokens, CHASE_BATCH_BYTES of shared
                // memory a warp; `c.bytes` holds the whole stream.
                let cfg = grid_stride(self.nunits << self.unit_log);
                let batches = cfg.block_dim.0 / 32 * CHASE_BATCH_BYTES;
                stream
                    .launch_builder(&self.kernels.chase_matches)
                    .arg(&c)
                    .arg(maps)
                    .launch(LaunchConfig { shared_mem_bytes: batches, ..cfg })
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
    pub(super) fn resident(&self) -> bool {
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
}
