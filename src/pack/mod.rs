//! The packer: inputs → tree + logical stream → global matches → optimal parse → depth bound → table groups →
//! archive.
//!
//! - [`input`]: walks the inputs into tree entries and the pieces of the logical stream.
//! - [`stream`]: the logical stream as one mapped slice, and file-backed scratch space.
//! - [`ldm`]: the long-distance matcher (repeats at any distance, bounded table).
//! - [`matcher`]: hash tables over a local window (short and medium matches).
//! - [`cost`] and [`parser`]: the price model and the per-block optimal parse (or, for bare bases and the fast
//!   levels, a lazy one).
//! - [`mem`]: zeroed tables on huge pages (the hash tables are read at random).
//! - [`depth`]: the sequential pass that enforces the reference-depth bound.
//!
//! Work is split into fixed-size pieces that do not depend on the thread count — chunks of the stream processed
//! one after the other (memory stays bounded), segments inside a chunk parsed in parallel, table groups encoded
//! in parallel — and every sequential step (long-match search, depth pass, writing) runs in stream order, so the
//! archive is byte-identical for any `--threads`.

pub mod cost;
pub mod depth;
pub mod fai;
pub mod input;
pub mod ldm;
pub mod matcher;
pub mod mem;
pub mod parser;
pub mod stream;
#[cfg(test)]
mod tests;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Instant;

use rayon::prelude::*;
use xxhash_rust::xxh3::xxh3_64;

use crate::codec::block::{codes_with_contexts, count_slices, encode_slices};
use crate::codec::context::{CtxModel, CtxStats, LitContext};
use crate::codec::cut::{cut_slices, SliceTokens};
use crate::codec::tables::{SymbolStats, TableSet};
use crate::error::{Error, Result};
use crate::format::tree::Tree;
use crate::format::writer::ArchiveWriter;
use crate::format::Header;
use cost::PRICE_ONE;
use depth::DepthPass;
use ldm::{Ldm, LdmParams, LongMatch};
use matcher::{ChainMatcher, ChainParams};
use parser::{BlockTokens, ClosurePrice, DepthView, ParseParams, SegmentParser};

/// Packing options (the `aceapex pack` flags).
#[derive(Debug, Clone)]
pub struct PackOptions {
    /// Block size `2^block_log` (12..=20).
    pub block_log: u8,
    /// 1 (fast) ..= 9 (strongest).
    pub level: u8,
    /// Reference-depth bound written into the header (1..=255).
    pub max_depth: u8,
    /// Worker threads; 0 = all cores. Does not change the output.
    pub threads: usize,
    /// Bound on the packer's own working memory in bytes (tables, per-chunk buffers); the input itself is mapped.
    pub memory: u64,
    /// rANS lanes per slice: 1 or 2 (FORMAT.md §3.4).
    pub rans_lanes: u8,
    /// Blocks per table group: `2^group_log`.
    pub group_log: u8,
    /// Show a progress bar on a terminal.
    pub progress: bool,
    /// Store FASTA files in genome mode (structure plus bases, FORMAT.md §2.6) when the model is exact and pays.
    pub genome: bool,
    /// Look for reverse-complement matches (FORMAT.md §1) on bare bases (genome mode's base regions). The
    /// environment variable `ACEAPEX_NO_RC` turns them off as well (measurements).
    pub reverse_complements: bool,
}

impl Default for PackOptions {
    fn default() -> Self {
        PackOptions {
            block_log: 14,
            level: 6,
            max_depth: 16,
            threads: 0,
            memory: 1 << 30,
            rans_lanes: crate::format::header::DEFAULT_LANES,
            group_log: 6,
            progress: false,
            genome: true,
            reverse_complements: true,
        }
    }
}

/// What a pack did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PackReport {
    /// Bytes of the input files (original sizes; generated sidecars not counted).
    pub input_bytes: u64,
    pub archive_bytes: u64,
    pub files: u64,
    pub blocks: u64,
    pub matches: u64,
    pub literals: u64,
    pub max_depth_seen: u8,
    pub seconds: f64,
    /// Where the time went (wall time on the packing thread; the long-match scan of a chunk runs beside its own
    /// parse or, scanned ahead, beside the parse of the one before, and is counted there).
    pub stages: StageTimes,
}

/// Wall seconds per packing stage, and how often the depth pass sent a segment back to the parser.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StageTimes {
    pub long_matches: f64,
    /// Every parse of the chunks' segments, with the trial depth pass and the second parses of the levels that
    /// re-parse, which run beside the first parses.
    pub parse: f64,
    /// The final depth pass.
    pub depth: f64,
    pub encode: f64,
    pub segments: u64,
    pub reparsed_segments: u64,
}

/// Bytes parsed by one task: one chain matcher and one price model per segment.
const SEGMENT_BYTES: u64 = 4 << 20;
/// Segments per chunk (the unit of the sequential long-match scan and of buffered tokens).
const SEGMENTS_PER_CHUNK: u64 = 4;

/// Positions the lazy first parse of a segment that is parsed again looks ahead.
const SKETCH_LAZY_STEPS: u32 = 1;

/// A segment is parsed again when more than one byte in this many had to be forced to a literal.
const REPARSE_FORCED_RATIO: u64 = 2048;

/// Everything the level decides.
#[derive(Debug, Clone, Copy)]
struct LevelParams {
    chain: ChainParams,
    /// Bytes before a segment that its chain matcher indexes.
    window: u64,
    parse: ParseParams,
    /// Positions the lazy parse of bare bases looks ahead (see [`BASES_LONG_DEPTH`]).
    bases_lazy_steps: u32,
    ldm_window: usize,
    ldm_sample_log: u32,
    /// On bare bases: the long-distance matcher's sampling, forward and reverse complement, and shortest reported
    /// repeat (see [`BASES_LDM_MIN_LEN`]).
    ldm_bases_sample_log: u32,
    ldm_rc_sample_log: u32,
    ldm_bases_min_len: u64,
    /// Parse every segment of a chunk but the first a second time, knowing the depths the first parse gave the
    /// segments before it (and any segment where the depth pass forced many literals). Without it, sources in
    /// the segments parsed beside a segment look shallow to its closure price: on atha_chr1 a cold block at the
    /// end of the stream then parses about twice as many slices (for up to twice the parse time; the first
    /// segment of a chunk sees every depth before it already). The first parse of those segments is then only a
    /// sketch for the depth estimates: a lazy parse (text too), which costs about half of an optimal one.
    reparse: bool,
}

/// Longest match-finder chain in a segment of bare bases (genome mode) at any level. Why: on bare bases the deep
/// chains and the depth-aware second parse of levels 6+ buy almost nothing (atha_chr1 genome mode: 4.0452 with
/// them, 4.0449 without, for 17.7 against 7.9 s of CPU; fly ×6 5.3854 against 5.3869), while on FASTA text in
/// general mode they are worth 4 % (3.285 against 3.148), so only bare bases skip them.
///
/// Bare bases are also parsed lazily at every level (`parser::lazy`): on them the one-path-per-node optimal parse
/// loses to it. Default level, atha_chr1 genome mode / all eleven fly-chr4 files, ratio and pack CPU seconds on
/// 2 cores: optimal 4.1502 / 10.2191, 9.9 / 4.7 s; lazy two steps ahead 4.1555 / 10.2546, 5.8 / 2.6 s (one step
/// and greedy were within 0.1 % on atha). On FASTA text in general mode the optimal parse stays ahead (level 5:
/// 3.3349 against 3.3011 lazy), so text is parsed lazily only at levels 1-4.
const BASES_LONG_DEPTH: u32 = 2;

/// On bare bases the parser looks the hash tables up for forward matches at every fourth position only, and for
/// reverse complements at every second, at every level but 1. Why: the lookups were most of the parse's CPU (about
/// 20 ns a position each), and on bare bases they pay little at the positions between: a hash-table match is at
/// least 12 bases long, so one that starts at a skipped position is found a few positions on, and the lazy parse
/// extends it back over the literals before it (long repeats come from the long-distance matcher anyway, recent
/// distances and continuations are still tried at every position); fewer chance 12-base matches are taken, too.
/// Default level, ratio and pack user seconds (2 cores), forward / reverse-complement stride 1/1, 2/2, 4/2, 8/2,
/// 2/4, 4/4: atha_chr1 genome mode 4.3170 / 4.3181 / 4.3184 / 4.3179 / 4.3183 / 4.3186, 3.70-3.89 / 3.22-3.38 /
/// 3.09-3.22 / 3.01-3.14 / 3.09 / 3.03-3.09 s; all eleven fly-chr4 files 10.9934 / 10.9743 / 10.9789 / 10.9835 /
/// 10.9415 / 10.9486; yeast-chrI's six files 5.9085 / 5.9060 / 5.9100 / 5.9097 / 5.9049 / 5.9086 (reverse
/// complements every fourth position lose 0.3 % on fly).
const BASES_LOOKUP_EVERY: u64 = 4;
/// See [`BASES_LOOKUP_EVERY`].
const BASES_RC_LOOKUP_EVERY: u64 = 2;

/// On bare bases at levels 6 and up the long-distance matcher reports repeats of at least 20 bases only, and
/// samples one window in eight, forward and reverse complement, where other bytes have one in four. Why: a repeat
/// found there is a candidate at every position it covers, priced and depth-capped each time, and a far repeat
/// of 16-19 bases rarely pays for its distance code (near ones come from the chain matcher). This pays for the
/// reverse-complement lookups on every piece of bare bases ([`scan_long`]), which the scan used to skip in a
/// chunk that also held a genome's structure. Default level, archive bytes of atha_chr1 genome mode / eleven
/// fly-chr4 files / six yeast-chrI files, and atha_chr1's pack on 2 cores (wall, medians of 5-8 alternating runs):
/// - lookups per chunk, every repeat, one in four: 7,186,214 / 1,400,461 / 205,085, 1.19-1.23 s;
/// - lookups per piece: 7,165,835 / 1,345,096 / 198,061, ~1.4 s;
/// - per piece, 20 bases, reverse complements one in eight: 7,168,710 / 1,345,037 / 198,051, 1.10 s;
/// - and forward windows one in eight: 7,171,586 / 1,354,012 / 198,086, 1.05 s.
///
/// Alone, on the lookups per chunk: 20 bases 1.14 s and +489 bytes on atha, reverse complements one in eight 1.17
/// s and +1,184. In general mode (text) a 16-byte repeat pays: there nothing changes (20 bytes would cost
/// atha_chr1 0.27 %).
const BASES_LDM_MIN_LEN: u64 = 20;

/// Shortest match per distance class (`< 2^12, 2^16, …`): a far source costs its distance's extra bits, so
/// short far matches never pay; the parser prices every candidate anyway, these only prune.
const MIN_MATCH: [u8; 8] = [3, 4, 6, 8, 10, 12, 14, 16];

/// The closure price of every level (see [`ClosurePrice`]): 6 bits per source outside the block, 3 bits per level
/// of its depth. Measured at level 6 (cold 16 KiB block at the end of the stream, slices parsed, p50 of 30,
/// before → after): atha_chr1 2,223 → 505 with a 0.7 % smaller archive (deep sources made the depth pass force
/// literals; shallow ones do not); the six fly-chr4 genomes 2,059 → 817 for 0.7 % larger. Twice these prices
/// reached 379 and 643 for 0.3 % smaller and 1.4 % larger.
const CLOSURE_PRICE: ClosurePrice = ClosurePrice { enter: 6 * PRICE_ONE, per_level: 3 * PRICE_ONE };

/// The slice size (log2) of a block of `2^block_log` bytes: the format's default, or ACEAPEX_SLICE_LOG where that
/// is in the legal range (a measurement knob: session 37 packed atha_chr1 with 2 KiB slices to see what twice the
/// rANS chains, half as long, would give the GPU's entropy stage before building more lanes).
fn slice_log(block_log: u8) -> u8 {
    std::env::var("ACEAPEX_SLICE_LOG")
        .ok()
        .and_then(|v| v.parse::<u8>().ok())
        .filter(|l| Header::slice_log_range(block_log).contains(l))
        .unwrap_or_else(|| Header::default_slice_log(block_log))
}

fn level_params(level: u8, block_log: u8) -> LevelParams {
    // Level 7 is the former default. Level 6 takes 32-byte matches at once (10 % faster, 0.01 % larger); level 5
    // also samples the long-distance matcher a quarter as densely and parses once (its sources' depths are then
    // estimated less well, so cold reads late in a stream parse more slices). Levels 1-4 parse text lazily.
    let (short_depth, long_depth, sufficient_len, window, rep_count, ldm_sample_log, reparse, text_lazy) = match level {
        0..=2 => (1, 1, 32, 256 << 10, 2, 5, false, Some(1)),
        3..=4 => (1, 2, 48, 512 << 10, 2, 4, false, Some(2)),
        5 => (1, 16, 32, 1 << 20, 4, 4, false, None),
        6 => (1, 16, 32, 1 << 20, 4, 2, true, None),
        7 => (1, 16, 64, 1 << 20, 4, 2, true, None),
        8 => (4, 16, 128, 2 << 20, 4, 2, true, None),
        _ => (16, 48, 256, 4 << 20, 4, 2, true, None),
    };
    LevelParams {
        chain: ChainParams { short_depth, long_depth, hash_log: 20 },
        window,
        parse: ParseParams {
            sufficient_len,
            min_match: MIN_MATCH,
            rep_count,
            closure: CLOSURE_PRICE,
            slice_log: slice_log(block_log),
            lazy_steps: text_lazy,
            // Level 1 looks up ever fewer positions in a long run of literals (atha_chr1 genome mode, level 6:
            // 4.1555 -> 4.1323 with 2^6, 4.0934 with 2^4, for a third less CPU).
            skip_log: (level <= 1).then_some(6),
            // Set per segment: on bare bases only (see `reverse_complements`).
            reverse: false,
            // Set per segment: BASES_LOOKUP_EVERY and BASES_RC_LOOKUP_EVERY on bare bases.
            lookup_every: 1,
            rc_lookup_every: 1,
        },
        bases_lazy_steps: if level <= 5 { 1 } else { 2 },
        ldm_window: 16,
        ldm_sample_log,
        ldm_bases_sample_log: if level >= 6 { ldm_sample_log + 1 } else { ldm_sample_log },
        ldm_rc_sample_log: if level >= 6 { ldm_sample_log + 1 } else { ldm_sample_log },
        ldm_bases_min_len: if level >= 6 { BASES_LDM_MIN_LEN } else { 0 },
        reparse,
    }
}

/// `(hits, total)` over every seventh byte of `bytes`: how many of the sampled bytes are in `set`. A table lookup
/// per sample: segments are sampled several times each (a `contains` per byte was ~2 % of a genome pack).
fn sampled_share(bytes: &[u8], set: &[u8]) -> (usize, usize) {
    let mut table = [false; 256];
    for &b in set {
        table[b as usize] = true;
    }
    let hits = bytes.iter().step_by(7).filter(|&&b| table[b as usize]).count();
    (hits, bytes.len().div_ceil(7))
}

/// The stream ranges of the bytes the packer generated (`.fai` sidecars, genome-mode structures and the zero
/// padding before them), in order, adjacent ones merged.
fn generated_ranges(pieces: &[input::Piece]) -> Vec<(u64, u64)> {
    let mut out: Vec<(u64, u64)> = Vec::new();
    let mut at = 0;
    for piece in pieces {
        let end = at + piece.len();
        if matches!(piece, input::Piece::Generated(_) | input::Piece::Zeros(_)) && end > at {
            match out.last_mut() {
                Some(last) if last.1 == at => last.1 = end,
                _ => out.push((at, end)),
            }
        }
        at = end;
    }
    out
}

/// Whether at least half of `[s, e)` lies in the sorted, disjoint `ranges`. Segments of generated bytes are
/// parsed lazily (two steps ahead at the default level), not optimally. Why: genome-mode structures (range-coded
/// line and case runs, then the records' header texts) and `.fai` sidecars pack smaller that way, and faster.
/// Default level, archive bytes: eleven fly-chr4 files 1,353,772 -> 1,347,203 (pack 1.65 -> 1.47 s on 2 cores),
/// six yeast-chrI files 177,979 -> 177,359, atha_chr1 7,171,586 -> 7,171,593. Files of the user's own that are
/// not bare bases keep the optimal parse (on FASTA text in general mode it is worth 5 %: 3.361 against 3.190 at
/// level 4).
fn mostly_generated(ranges: &[(u64, u64)], s: u64, e: u64) -> bool {
    let first = ranges.partition_point(|r| r.1 <= s);
    let covered: u64 = ranges[first..].iter().take_while(|r| r.0 < e).map(|r| r.1.min(e) - r.0.max(s)).sum();
    covered * 2 >= e - s
}

/// Whether the bytes (sampled) are bare A/C/G/T, as genome mode's base stream is (at least 99 %).
fn is_bare_bases(bytes: &[u8]) -> bool {
    let (bases, total) = sampled_share(bytes, b"ACGT");
    total > 0 && bases * 100 >= total * 99
}

/// Whether the matchers look for reverse-complement matches (FORMAT.md §1) in `data[start..end)`: only on bare
/// bases (genome mode's base regions), where they pay; general mode and text never pay for the lookups.
/// [`PackOptions::reverse_complements`] or `ACEAPEX_NO_RC` turn them off (to measure what they gain and cost).
fn reverse_complements(enabled: bool, data: &[u8], start: u64, end: u64) -> bool {
    enabled && std::env::var_os("ACEAPEX_NO_RC").is_none() && is_bare_bases(&data[start as usize..end as usize])
}

/// Shortest run of bare bases that is parsed as a segment of its own when the segment around it is not bare bases
/// as a whole ([`segments_of`]); shorter runs are parsed with the bytes around them.
const MIN_BASES_RUN: u64 = 256 << 10;

/// The segments of the chunk `[start, end)`: [`SEGMENT_BYTES`] each, except that a segment which is not bare
/// bases as a whole is cut into its runs of whole `block`s that are bare bases (at least [`MIN_BASES_RUN`]
/// long) and the runs between them. Why: parsed as one, the bases of such a segment took the slow optimal parse,
/// deep chains, no reverse complements and a second parse. In genome mode that is where a genome's bases give
/// way to its structure (atha_chr1: 1.0 MB of bases before the 0.3 MB structure, the last segment of the stream,
/// which then ran alone after the others), and where a file of many records lies between genomes with the
/// generated `.fai` of the one before (eleven fly-chr4 files: a 20 KB index among 4 MiB of bases).
fn segments_of(data: &[u8], start: u64, end: u64, block: u64) -> Vec<(u64, u64)> {
    let bytes = |a: u64, b: u64| &data[a as usize..b as usize];
    // Appends `[a, b)` of class `bare` to `runs`, extending the last run if it has the same class.
    let push = |runs: &mut Vec<(u64, u64, bool)>, (a, b, bare): (u64, u64, bool)| match runs.last_mut() {
        Some(last) if last.2 == bare => last.1 = b,
        _ => runs.push((a, b, bare)),
    };
    let mut out = Vec::new();
    for s in (start..end).step_by(SEGMENT_BYTES as usize) {
        let e = (s + SEGMENT_BYTES).min(end);
        if is_bare_bases(bytes(s, e)) {
            out.push((s, e));
            continue;
        }
        let mut runs = Vec::new();
        for b in (s..e).step_by(block as usize) {
            let b_end = (b + block).min(e);
            push(&mut runs, (b, b_end, is_bare_bases(bytes(b, b_end))));
        }
        let mut merged = Vec::new();
        for (a, b, bare) in runs {
            push(&mut merged, (a, b, bare && b - a >= MIN_BASES_RUN));
        }
        out.extend(merged.into_iter().map(|(a, b, _)| (a, b)));
    }
    out
}

/// Whether at least 90 % of the bytes (sampled) are nucleotide letters or line breaks.
fn looks_like_nucleotides(bytes: &[u8]) -> bool {
    let (dna, total) = sampled_share(bytes, b"ACGTNacgtn\n");
    total > 0 && dna * 10 >= total * 9
}

/// Checks the options against the format's limits.
fn validate(opts: &PackOptions) -> Result<()> {
    let bad = |what: String| Err(Error::InvalidArgument(what));
    if !(12..=20).contains(&opts.block_log) {
        return bad(format!("block_log {} is outside 12..=20", opts.block_log));
    }
    if !(1..=9).contains(&opts.level) {
        return bad(format!("level {} is outside 1..=9", opts.level));
    }
    if opts.max_depth == 0 {
        return bad("max_depth must be at least 1".into());
    }
    if !crate::format::header::LEGAL_LANES.contains(&opts.rans_lanes) {
        return bad(format!("rans_lanes {} is neither 1 nor 2", opts.rans_lanes));
    }
    if opts.group_log > 12 {
        return bad(format!("group_log {} exceeds 12", opts.group_log));
    }
    // A chunk's tokens, literals and payloads are buffered: about four bytes of memory per chunk byte.
    if chunk_bytes(opts) * 4 > opts.memory {
        return bad(format!(
            "a chunk of {} bytes (at least one table group, 2^(block_log + group_log)) does not fit the memory bound {}",
            chunk_bytes(opts),
            opts.memory
        ));
    }
    Ok(())
}

/// The unit of sequential processing: whole segments and whole table groups.
fn chunk_bytes(opts: &PackOptions) -> u64 {
    let group_bytes = 1u64 << (opts.block_log + opts.group_log);
    (SEGMENT_BYTES * SEGMENTS_PER_CHUNK).max(group_bytes)
}

/// Whether a chunk may be encoded while the next is parsed: the buffers of two chunks (about four bytes per
/// chunk byte each, see [`validate`]) must fit in the quarter of the memory bound that neither the workers nor the
/// long-distance table take.
fn overlap_encode(opts: &PackOptions) -> bool {
    2 * 4 * chunk_bytes(opts) <= opts.memory / 4
}

/// The long-distance table: a quarter of the memory bound, no bigger than the input needs.
fn ldm_params(opts: &PackOptions, level: &LevelParams, total_len: u64) -> LdmParams {
    let bucket_log = 2;
    let budget_entries = (opts.memory / 4 / 8).max(1 << 12);
    let needed_entries = (total_len >> level.ldm_sample_log).max(1 << 12) * 2;
    let entries = budget_entries.min(needed_entries);
    let table_log = (63 - entries.leading_zeros()).saturating_sub(bucket_log).clamp(8, 36);
    LdmParams {
        window: level.ldm_window,
        sample_log: level.ldm_sample_log,
        table_log,
        bucket_log,
        bases_sample_log: level.ldm_bases_sample_log,
        rc_sample_log: level.ldm_rc_sample_log,
        bases_min_len: level.ldm_bases_min_len,
    }
}

/// Threads to use: `--threads` (0 = all cores), but no more than the memory bound allows — each worker holds a
/// matcher and a segment's depth estimates. The output does not depend on it.
fn worker_threads(opts: &PackOptions, level: &LevelParams) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let wanted = if opts.threads == 0 { cores } else { opts.threads };
    let rows = 5u64 << level.chain.hash_log;
    let chain = if level.chain.short_depth > 0 {
        (4u64 << level.chain.hash_log) + 4 * (SEGMENT_BYTES + level.window)
    } else {
        0
    };
    let per_worker = rows + chain + SEGMENT_BYTES;
    // Half the budget is for workers; the rest holds the long-match table and the chunk's buffers.
    let fits = (opts.memory / 2 / per_worker).max(1) as usize;
    wanted.min(fits)
}

/// Packs `inputs` into the archive `output`.
pub fn pack(inputs: &[PathBuf], output: &Path, opts: &PackOptions) -> Result<PackReport> {
    validate(opts)?;
    let started = Instant::now();
    // Genome-mode structures start on a table-group boundary when that is cheap (input::place_structures).
    let group_bytes = 1u64 << (opts.block_log + opts.group_log);
    // Genome-mode bases up to a quarter of the memory bound are kept from the first look at their files: they are
    // dropped once the stream is built, before the workers' tables and the chunks' buffers exist.
    let examine =
        input::Examine { index: &fai::fasta_index, genome: opts.genome, group_bytes, keep_bases: opts.memory / 4 };
    let gathered = input::gather(inputs, examine)?;
    let files =
        gathered.entries.iter().filter(|e| matches!(e.kind, crate::format::tree::EntryKind::File { .. })).count();
    let total_len = gathered.total_len;
    if total_len > crate::format::MAX_TOTAL_LEN {
        return Err(Error::InvalidArgument(format!("inputs total {total_len} bytes, more than the format's 2^40")));
    }
    let tree = Tree::from_entries(gathered.entries).map_err(|e| Error::InvalidArgument(format!("input tree: {e}")))?;
    let scratch_dir = match output.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let level = level_params(opts.level, opts.block_log);
    // The long-distance table (up to a quarter of the memory bound) is zeroed while the stream is built: its
    // pages are faulted in and cleared one by one, a serial ~0.2 s for atha_chr1's 64 MiB, which ran alone
    // before the first chunk's scan. The workers' threads share it (the stream takes a fraction of that).
    let threads = worker_threads(opts, &level);
    let (stream, ldm) = std::thread::scope(|s| {
        let table = s.spawn(|| Ldm::zeroed_by(ldm_params(opts, &level, total_len), threads));
        let stream = stream::LogicalStream::build(&gathered.pieces, total_len, &scratch_dir);
        (stream, table.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic)))
    });
    let stream = stream?;
    let header = Header {
        block_log: opts.block_log,
        max_depth: opts.max_depth,
        rans_lanes: opts.rans_lanes,
        group_log: opts.group_log,
        min_match: level.parse.min_match,
        slice_log: level.parse.slice_log,
    };
    let mut writer = ArchiveWriter::create(output, header)?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| Error::InvalidArgument(format!("thread pool: {e}")))?;
    let mut depth_map = stream::ScratchBytes::new(total_len, &scratch_dir)?;
    // Input bytes are the files as the user has them (genome-mode files count their original size, generated
    // sidecars do not count), so ratio and speed mean the same whatever the stream holds.
    let input_bytes = tree
        .entries
        .iter()
        .filter(|e| e.flags & input::FLAG_SIDECAR == 0)
        .map(|e| match e.kind {
            crate::format::tree::EntryKind::File { size, .. } => size,
            _ => 0,
        })
        .sum();
    let mut report = PackReport { input_bytes, files: files as u64, ..Default::default() };
    let tables = pool.install(|| {
        let mut run = Packing::with_ldm(stream.bytes(), opts, level, depth_map.bytes_mut(), ldm);
        run.generated = generated_ranges(&gathered.pieces);
        run.run(&mut writer, &mut report)
    })?;
    report.archive_bytes = writer.finish(total_len, &tables, &tree)?;
    report.seconds = started.elapsed().as_secs_f64();
    tracing::debug!(seconds = report.seconds, stages = ?report.stages, "pack stages");
    Ok(report)
}

/// The read-only inputs of the parallel segment parse.
///
/// `'a`: the stream; `'d`: the view of the depth map (the final depths before the chunk).
struct SegmentJob<'a, 'd> {
    data: &'a [u8],
    level: LevelParams,
    block_log: u8,
    max_depth: u8,
    outer_depth: &'d [u8],
    /// [`PackOptions::reverse_complements`].
    reverse: bool,
    /// [`Packing::generated`].
    generated: &'a [(u64, u64)],
}

/// What the parse of a chunk does, decided before it starts: each segment's first parse (a sketch, or final),
/// and at the levels that re-parse the trial depth pass and the segments it sends back to the parser
/// ([`LevelParams::reparse`], [`SegmentJob::parse_phase`]).
struct ChunkPlan {
    segments: Vec<(u64, u64)>,
    /// Whose first parse is only a sketch for the depth estimates (a lazy one).
    sketch: Vec<bool>,
    /// Segments `[0, first)` are parsed a first time; a last segment past them is parsed only once the trial
    /// pass has reached it (its sketch would feed nothing).
    first: usize,
    /// Segments `[0, tried)` go through the trial depth pass, which stops after the last segment that may be
    /// parsed again (0: no second round).
    tried: usize,
    /// Segments parsed again whatever the trial pass finds (every one after the first that is not bare bases).
    again: Vec<bool>,
    /// Whether the first segment is parsed again when the trial pass forces more than one literal in
    /// [`REPARSE_FORCED_RATIO`] bytes of it (not bare bases, and some segment may be parsed again).
    first_may_again: bool,
    /// Build the last segment's matcher ahead of its parse ([`SegmentJob::indexed_chain`]).
    prebuild: bool,
}

impl ChunkPlan {
    /// The plan for `segments` (bare bases or not: `bare`) at a level that re-parses or not, for `workers`
    /// workers.
    fn new(segments: Vec<(u64, u64)>, bare: &[bool], reparse: bool, workers: usize) -> ChunkPlan {
        let n = segments.len();
        // At the levels that re-parse, every segment but the first is parsed again, so its first parse only has
        // to give the depth estimates that the second parses of the segments after it start from.
        let sketch: Vec<bool> = (0..n).map(|k| k > 0 && reparse).collect();
        // Only segments that are not bare bases are parsed again (bare bases' sketch is final), so the trial
        // pass stops after the last one that is not, and does not run at all when none is (a chunk of bare
        // bases: a serial pass over the whole chunk that fed nothing).
        let last = bare.iter().rposition(|&b| !b).filter(|_| reparse);
        // The last segment's sketch would only feed segments after it: a last segment that is parsed again is
        // parsed once, after the trial pass.
        let skip_last = n > 1 && last == Some(n - 1);
        let first = n - skip_last as usize;
        let tried = last.map_or(0, |l| l + 1 - skip_last as usize);
        let again = (0..n).map(|k| k > 0 && last.is_some_and(|l| k <= l) && !bare[k]).collect();
        ChunkPlan {
            segments,
            sketch,
            first,
            tried,
            again,
            first_may_again: last.is_some() && !bare[0],
            // With one worker it would change nothing but memory.
            prebuild: skip_last && workers > 1,
        }
    }

    /// The tasks of the chunk's parse, in the order they are handed out ([`TaskBoard`]): a segment's second
    /// parse (if it may have one) before the first parse of the segment after it — it is ready as soon as the
    /// first parses before it are in, and is the longer of the two (an optimal parse against a lazy sketch), so
    /// it is the one to start first (all eleven fly-chr4 files: the third segment's second parse started once the
    /// scan was over, 0.1 s later, and ended alone) — except the first segment's, which waits for its own first
    /// parse; the prebuilt matcher just before the last segment's second parse; then `filler`, which nothing
    /// waits for (as the last task its internal parallelism fills the cores as the parses finish). With a single
    /// worker every task is ready when its turn comes.
    fn tasks(&self) -> Vec<Task> {
        let n = self.segments.len();
        let second = |k: usize| self.again[k] || (k == 0 && self.first_may_again);
        let mut tasks = Vec::new();
        for k in 0..n {
            if k > 0 && second(k) {
                if self.prebuild && k == n - 1 {
                    tasks.push(Task::Prebuild);
                }
                tasks.push(Task::Second(k));
            }
            if k < self.first {
                tasks.push(Task::First(k));
            }
            if k == 0 && second(0) {
                tasks.push(Task::Second(0));
            }
        }
        tasks.push(Task::Filler);
        tasks
    }
}

/// One task of a chunk's parse ([`ChunkPlan::tasks`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Task {
    First(usize),
    Prebuild,
    Second(usize),
    Filler,
}

/// The trial depth pass of a chunk: its segments' first parses through the depth pass, in order, as they come in
/// ([`SegmentJob::parse_phase`]). It decides which segments are parsed again and gives their second parses the
/// depths of the segments before them.
struct Trial<'d> {
    pass: DepthPass<'d>,
    /// Segments `[0, next)` have been through it.
    next: usize,
    /// Its output for the segments before the first one parsed again: the final pass's output too (the same
    /// tokens over the same depths before them).
    kept: Vec<Vec<BlockTokens>>,
    /// The pass's statistics after the kept segments.
    checkpoint: depth::Checkpoint,
}

/// What the parse of a chunk returns ([`SegmentJob::parse_phase`]).
struct Parsed<R> {
    /// Every segment's final parse (before the final depth pass).
    segments: Vec<Vec<BlockTokens>>,
    /// How many segments were parsed a second time.
    reparsed: u64,
    /// The trial pass's output for the first segments, which the final pass need not run again, and its
    /// statistics after them (`None`: no trial pass).
    kept: Vec<Vec<BlockTokens>>,
    checkpoint: Option<depth::Checkpoint>,
    filled: R,
}

/// Where a chunk's first parses get the long matches from when they run beside the chunk's scan: the matches
/// carried into the chunk, and the scan's progress ([`SegmentJob::parse_streamed_segment`]).
type Streamed<'s> = (&'s [LongMatch], &'s ScanProgress);

impl<'a: 'd, 'd> SegmentJob<'a, 'd> {
    /// Parses the chunk's segments on the pool's workers, each with its own matcher and price model, and, at the
    /// levels that re-parse, the trial depth pass over their first parses and the segments it sends back, each
    /// parsed again knowing the depths the trial pass gave the segments before it. A second parse needs only
    /// those, so it starts as soon as the trial pass has passed the segments before it, beside the first parses
    /// of the segments after it ([`TaskBoard`]). Why: the second round waited for the whole first round, and its
    /// last parse then ran alone (all eleven fly-chr4 files: a 0.8 s parse of the third segment with the other
    /// core idle, a third of the pack).
    ///
    /// `long`: the chunk's long matches ([`merge_long`]); with `streamed` set by the scan beside the parse once it
    /// is done (which must then call [`TaskBoard::changed`] on `board`), the first parses reading them from the
    /// scan as it goes. `trial`: the depth pass over the chunk when the plan has a trial pass. `filler`: work
    /// that nothing here waits for, run as the last task.
    #[allow(clippy::too_many_arguments)]
    fn parse_phase<R: Send>(
        &self,
        plan: &ChunkPlan,
        streamed: Option<Streamed<'_>>,
        long: &std::sync::OnceLock<Vec<LongMatch>>,
        trial: Option<DepthPass<'_>>,
        board: &TaskBoard,
        filler: impl FnOnce() -> R + Send,
    ) -> Parsed<R> {
        use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
        use std::sync::Mutex;
        let n = plan.segments.len();
        let block = 1u64 << self.block_log;
        let tasks = plan.tasks();
        let first: Vec<Mutex<Option<Vec<BlockTokens>>>> = (0..n).map(|_| Mutex::new(None)).collect();
        let second: Vec<Mutex<Option<Vec<BlockTokens>>>> = (0..n).map(|_| Mutex::new(None)).collect();
        let trial = trial.filter(|_| plan.tried > 0).map(|pass| {
            let checkpoint = pass.checkpoint();
            Mutex::new(Trial { pass, next: 0, kept: Vec::new(), checkpoint })
        });
        // What the readiness of a second parse reads (under the board's lock, so without locks of their own):
        // how many segments the trial pass has passed, whether the first is parsed again, the prebuilt matcher.
        let tried = AtomicUsize::new(0);
        let first_again = AtomicBool::new(false);
        let prebuilt: Mutex<Option<ChainMatcher<'a>>> = Mutex::new(None);
        let prebuilt_done = AtomicBool::new(false);
        let filler = Mutex::new(Some(filler));
        let filled = Mutex::new(None);
        let last = plan.segments.len() - 1;
        let ready = |k: usize| match tasks[k] {
            Task::First(_) | Task::Prebuild | Task::Filler => true,
            Task::Second(s) => {
                long.get().is_some()
                    && tried.load(Ordering::Acquire) >= s.max(1)
                    && (!plan.prebuild || s != last || prebuilt_done.load(Ordering::Acquire))
            }
        };
        // Runs the trial pass over every segment whose first parse is in and whose predecessors have been through.
        let advance = |trial: &Mutex<Trial<'_>>| {
            let mut t = lock(trial);
            while t.next < plan.tried {
                let k = t.next;
                let parsed = lock(&first[k]);
                let Some(blocks) = parsed.as_ref() else { break };
                let (s, e) = plan.segments[k];
                let forced_before = t.pass.forced;
                let applied: Vec<BlockTokens> =
                    blocks.iter().enumerate().map(|(i, b)| t.pass.apply(s + i as u64 * block, b)).collect();
                let forced = t.pass.forced - forced_before;
                let again = plan.again[k] || (k == 0 && plan.first_may_again && forced * REPARSE_FORCED_RATIO > e - s);
                if k == 0 {
                    first_again.store(again, Ordering::Release);
                }
                if !again && t.kept.len() == k {
                    t.kept.push(applied);
                    t.checkpoint = t.pass.checkpoint();
                }
                t.next += 1;
                tried.store(t.next, Ordering::Release);
            }
        };
        let run = |k: usize| match tasks[k] {
            Task::First(s) => {
                let blocks = match streamed {
                    Some((carry, scan)) => self.parse_streamed_segment(plan, s, carry, scan),
                    None => self.parse_segment(plan.segments[s], plan.sketch[s], long_of(long), None, &[]),
                };
                *lock(&first[s]) = Some(blocks);
                if let Some(trial) = &trial {
                    advance(trial);
                }
            }
            Task::Prebuild => {
                *lock(&prebuilt) = Some(self.indexed_chain(plan.segments[last]));
                prebuilt_done.store(true, Ordering::Release);
            }
            Task::Second(s) => {
                if s == 0 && !first_again.load(Ordering::Acquire) {
                    return;
                }
                let (start, seg_start) = (plan.segments[0].0, plan.segments[s].0);
                let known = match &trial {
                    Some(trial) if s > 0 => lock(trial).pass.depths(start, seg_start).to_vec(),
                    _ => Vec::new(),
                };
                let chain = if s == last { lock(&prebuilt).take() } else { None };
                *lock(&second[s]) = Some(self.parse_segment(plan.segments[s], false, long_of(long), chain, &known));
            }
            Task::Filler => {
                let filler = lock(&filler).take().expect("the filler runs once");
                *lock(&filled) = Some(filler());
            }
        };
        board.run(&ready, &run);
        let take = |m: Mutex<Option<Vec<BlockTokens>>>| m.into_inner().unwrap_or_else(|p| p.into_inner());
        let mut reparsed = 0;
        let segments = first
            .into_iter()
            .zip(second)
            .map(|(a, b)| match take(b) {
                Some(again) => {
                    reparsed += 1;
                    again
                }
                None => take(a).expect("every segment is parsed"),
            })
            .collect();
        let (kept, checkpoint) = match trial {
            Some(trial) => {
                let t = trial.into_inner().unwrap_or_else(|p| p.into_inner());
                (t.kept, Some(t.checkpoint))
            }
            None => (Vec::new(), None),
        };
        let filled = filled.into_inner().unwrap_or_else(|p| p.into_inner()).expect("the filler ran");
        Parsed { segments, reparsed, kept, checkpoint, filled }
    }

    /// Parses segment `[s, e)` given the chunk's long matches (those overlapping it are its own), its matcher if
    /// built ahead, and the depths `known` of the bytes before it that the final depths before the chunk do not
    /// give ([`SegmentParser::new`]).
    fn parse_segment(
        &self,
        (s, e): (u64, u64),
        sketch: bool,
        long: &[LongMatch],
        chain: Option<ChainMatcher<'a>>,
        known: &[u8],
    ) -> Vec<BlockTokens> {
        let block = 1u64 << self.block_log;
        let seg_long: Vec<LongMatch> = long.iter().filter(|m| m.start < e && m.end() > s).copied().collect();
        let mut parser = self.parser((s, e), sketch, &seg_long, chain, known);
        (s..e).step_by(block as usize).map(|b| parser.parse_block(b, (b + block).min(e))).collect()
    }

    /// The chain matcher of segment `[s, e)` with the window before the segment already indexed: what
    /// [`Self::parser`] starts from, built ahead of the parse. Why: the last segment of a chunk that is not bare
    /// bases is parsed only after the trial pass has passed every other segment, and in genome mode about half of
    /// that parse was allocating its tables and indexing the 1 MiB of bases before it (atha_chr1: 0.13 s with the
    /// other core idle). The matcher's state depends on the data alone, so the parse is the same.
    fn indexed_chain(&self, (s, e): (u64, u64)) -> ChainMatcher<'a> {
        let mut chain = ChainMatcher::new(self.data, s.saturating_sub(self.level.window), e, self.params((s, e)).0);
        chain.insert_until(s);
        chain
    }

    /// The parser of segment `[s, e)`, given the long matches that overlap it (see [`Self::parse_segment`]), its
    /// matcher if built ahead ([`Self::indexed_chain`]), and the depths `known` just before it.
    fn parser(
        &self,
        (s, e): (u64, u64),
        sketch: bool,
        seg_long: &[LongMatch],
        chain: Option<ChainMatcher<'a>>,
        known: &[u8],
    ) -> SegmentParser<'d> {
        let (chain_params, mut parse_params) = self.params((s, e));
        if sketch {
            parse_params.lazy_steps = parse_params.lazy_steps.or(Some(SKETCH_LAZY_STEPS));
        }
        let chain =
            chain.unwrap_or_else(|| ChainMatcher::new(self.data, s.saturating_sub(self.level.window), e, chain_params));
        let view = DepthView { max_depth: self.max_depth, outer: self.outer_depth };
        SegmentParser::new(self.data, parse_params, chain, seg_long, (s, e), view, known)
    }

    /// The matcher's and the parser's parameters for segment `[s, e)` (its first parse, not a sketch).
    fn params(&self, (s, e): (u64, u64)) -> (ChainParams, ParseParams) {
        let (data, level) = (self.data, self.level);
        let mut chain_params = level.chain;
        if looks_like_nucleotides(&data[s as usize..e as usize]) {
            // Short matches never pay on 2-bit-a-base text; they only lengthen copy chains (depth).
            chain_params.short_depth = 0;
        }
        let mut parse_params = level.parse;
        if is_bare_bases(&data[s as usize..e as usize]) {
            chain_params.long_depth = chain_params.long_depth.min(BASES_LONG_DEPTH);
            parse_params.lazy_steps = Some(level.bases_lazy_steps);
            // Level 1 already skips positions in long literal runs (`skip_log`), which a fixed stride
            // could miss altogether.
            if parse_params.skip_log.is_none() {
                parse_params.lookup_every = BASES_LOOKUP_EVERY;
                parse_params.rc_lookup_every = BASES_RC_LOOKUP_EVERY;
            }
        } else if mostly_generated(self.generated, s, e) {
            parse_params.lazy_steps = parse_params.lazy_steps.or(Some(level.bases_lazy_steps));
        }
        parse_params.reverse = reverse_complements(self.reverse, data, s, e);
        (chain_params, parse_params)
    }
    /// The first parse of segment `k` of `plan` while the chunk is still being scanned (a chunk not scanned
    /// ahead): each block once the scan is [`ldm::MAX_BACK_EXTEND`] past its end, when no match found later can
    /// start in it. `carry`: the matches found in earlier chunks that reach into this one ([`merge_long`]'s). The
    /// segment gets the same matches in the same order as [`Self::parse_segment`] given [`merge_long`] of the
    /// whole scan.
    fn parse_streamed_segment(
        &self,
        plan: &ChunkPlan,
        k: usize,
        carry: &[LongMatch],
        scan: &ScanProgress,
    ) -> Vec<BlockTokens> {
        let block = 1u64 << self.block_log;
        let (s, e) = plan.segments[k];
        let mut parser = self.parser((s, e), plan.sketch[k], &[], None, &[]);
        // The matches that overlap the segment (carried, then published: `true`), from `taken` on not yet given
        // to the parser, in [`merge_long`]'s order: its stable sort by (start, back) puts the carried ones (in
        // their order) before the found ones, which the scan's own stable sort ordered by (start, back, rc).
        // `seen`: how many published ones were looked at.
        let overlaps = |m: &LongMatch| m.start < e && m.end() > s;
        let mut pending: Vec<(LongMatch, bool)> = carry.iter().filter(|m| overlaps(m)).map(|&m| (m, false)).collect();
        let (mut taken, mut seen) = (0, 0);
        let mut out = Vec::new();
        for b in (s..e).step_by(block as usize) {
            let b_end = (b + block).min(e);
            let before = pending.len();
            scan.wait_for(b_end + ldm::MAX_BACK_EXTEND, &mut seen, |m| {
                if overlaps(m) {
                    pending.push((*m, true));
                }
            });
            if pending.len() > before || b == s {
                pending.drain(..taken);
                taken = 0;
                pending.sort_by_key(|&(m, found)| (m.start, m.back, found, found && m.rc));
            }
            // Those starting before the block's end: no match found later can.
            let ready = taken + pending[taken..].partition_point(|(m, _)| m.start < b_end);
            parser.add_long(pending[taken..ready].iter().map(|&(m, _)| m));
            taken = ready;
            out.push(parser.parse_block(b, b_end));
        }
        out
    }
}

/// The chunk's long matches once they are all known ([`SegmentJob::parse_phase`] hands out the tasks that read
/// them only then).
fn long_of(long: &std::sync::OnceLock<Vec<LongMatch>>) -> &[LongMatch] {
    long.get().expect("the chunk's long matches are known")
}

/// Locks `m`, whether or not a panicking thread held it (a panic is propagated by the scope that ran it).
fn lock<X>(m: &std::sync::Mutex<X>) -> std::sync::MutexGuard<'_, X> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Hands tasks `0..n` out to the pool's workers ([`TaskBoard::run`]): each worker takes the first task not yet
/// taken that is ready, in index order, waits while none is, and stops once every task has been taken. What
/// makes a task ready is the caller's ([`SegmentJob::parse_phase`]: a second parse waits for the trial pass);
/// whoever changes it calls [`TaskBoard::changed`]. The results do not depend on which worker runs what, so
/// the archive does not depend on the thread count.
struct TaskBoard {
    /// Which tasks have been taken, and whether one panicked (then nothing more is handed out).
    state: std::sync::Mutex<(Vec<bool>, bool)>,
    changed: std::sync::Condvar,
}

impl TaskBoard {
    fn new(n: usize) -> TaskBoard {
        TaskBoard { state: std::sync::Mutex::new((vec![false; n], false)), changed: std::sync::Condvar::new() }
    }

    /// Wakes the workers waiting for a task to become ready (after a change of what `ready` reads).
    fn changed(&self) {
        let _state = lock(&self.state);
        self.changed.notify_all();
    }

    /// Stops handing out tasks (a task, or the work that readies them, panicked: what waits for it would wait
    /// forever; the panic itself propagates from where it ran).
    fn fail(&self) {
        lock(&self.state).1 = true;
        self.changed.notify_all();
    }

    /// Runs every task on the pool's workers (on a single worker: in index order, which must therefore be one in
    /// which every task is ready once those before it have run). `ready(k)` is called with the board locked, so
    /// it must not wait for anything a task holds.
    fn run(&self, ready: &(impl Fn(usize) -> bool + Sync), task: &(impl Fn(usize) + Sync)) {
        rayon::scope(|scope| {
            for _ in 0..rayon::current_num_threads() {
                scope.spawn(|_| {
                    while let Some(k) = self.next(ready) {
                        let guard = FailOnPanic(self);
                        task(k);
                        std::mem::forget(guard);
                        self.changed();
                    }
                });
            }
        });
    }

    /// The next task for a worker: the first one not taken that is ready, once there is one; `None` once every
    /// task has been taken (or one failed).
    fn next(&self, ready: &impl Fn(usize) -> bool) -> Option<usize> {
        let mut state = lock(&self.state);
        loop {
            let (taken, failed) = &mut *state;
            if *failed || taken.iter().all(|&t| t) {
                return None;
            }
            if let Some(k) = (0..taken.len()).find(|&k| !taken[k] && ready(k)) {
                taken[k] = true;
                return Some(k);
            }
            state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
    }
}

/// Fails its [`TaskBoard`] when dropped (by a panic: the work it guards forgets it when it completes).
struct FailOnPanic<'a>(&'a TaskBoard);

impl Drop for FailOnPanic<'_> {
    fn drop(&mut self) {
        self.0.fail();
    }
}

/// How far the long-match scan of a chunk that was not scanned ahead has got and what it has found, for the
/// parses that run beside it ([`SegmentJob::parse_streamed_segment`]).
#[derive(Default)]
struct ScanProgress {
    /// Every window starting before `.0` has been scanned; `.1`: the matches found, in the scan's order.
    state: std::sync::Mutex<(u64, Vec<LongMatch>)>,
    progress: std::sync::Condvar,
}

impl ScanProgress {
    /// The scan has covered every window starting before `to` and found `found` since the last call.
    fn publish(&self, to: u64, found: &[LongMatch]) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.0 = state.0.max(to);
        state.1.extend_from_slice(found);
        self.progress.notify_all();
    }

    /// Waits until the scan has covered the windows starting before `to`, then hands `each` the matches found
    /// since the first `seen` (and counts them into `seen`).
    fn wait_for(&self, to: u64, seen: &mut usize, mut each: impl FnMut(&LongMatch)) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        while state.0 < to {
            state = self.progress.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        state.1[*seen..].iter().for_each(&mut each);
        *seen = state.1.len();
    }
}

/// Publishes the end of the scan when dropped, so that a parse waiting on it never waits forever (if the scan
/// panicked, the join propagates the panic once the parses return).
struct ScanDone<'a>(&'a ScanProgress);

impl Drop for ScanDone<'_> {
    fn drop(&mut self) {
        self.0.publish(u64::MAX, &[]);
    }
}

/// Bytes the long-match scan of a chunk parsed beside it covers between two publications to the parses beside it.
const SCAN_STEP: u64 = 256 << 10;

/// Table groups per task of the parallel context statistics (each task's partial statistics take 2 MiB).
const CTX_GROUPS_PER_TASK: usize = 4;

/// A context model must save at least this many bytes over the LIT tables to be used.
const CTX_MIN_GAIN_BYTES: f64 = 64.0;

/// A table group ready to write: its tables and each block's payload with the xxh3 of its decoded bytes.
type EncodedGroup = (TableSet, Vec<(Vec<u8>, u64)>);

/// One packing run over the logical stream.
struct Packing<'a> {
    data: &'a [u8],
    opts: &'a PackOptions,
    level: LevelParams,
    ldm: Ldm,
    /// Long matches found in earlier chunks that reach into the current one.
    carry: Vec<LongMatch>,
    /// The long-match scan of the next chunk, run while the current one is parsed: `(start, end, matches)`.
    ahead: Option<(u64, u64, Vec<LongMatch>)>,
    depth: depth::DepthPass<'a>,
    progress: Option<indicatif::ProgressBar>,
    /// Parse the segments of a chunk not scanned ahead beside its long-match scan ([`ScanProgress`]); tests turn
    /// it off to compare with the parse after the whole scan, which must give the same tokens.
    streamed: bool,
    /// The stream ranges of generated bytes ([`generated_ranges`]), in order.
    generated: Vec<(u64, u64)>,
}

impl<'a> Packing<'a> {
    #[cfg(test)]
    fn new(data: &'a [u8], opts: &'a PackOptions, level: LevelParams, depth_map: &'a mut [u8]) -> Self {
        let ldm = Ldm::new(ldm_params(opts, &level, data.len() as u64));
        Self::with_ldm(data, opts, level, depth_map, ldm)
    }

    /// A run with `ldm`, a fresh long-distance matcher for `data` ([`ldm_params`]).
    fn with_ldm(data: &'a [u8], opts: &'a PackOptions, level: LevelParams, depth_map: &'a mut [u8], ldm: Ldm) -> Self {
        let progress = (opts.progress && std::io::stderr().is_terminal()).then(|| {
            let bar = indicatif::ProgressBar::new(data.len() as u64);
            bar.set_style(
                indicatif::ProgressStyle::with_template("{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}")
                    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
            );
            bar
        });
        Packing {
            data,
            opts,
            level,
            ldm,
            carry: Vec::new(),
            ahead: None,
            depth: depth::DepthPass::new(data, depth_map, opts.max_depth),
            progress,
            streamed: true,
            generated: Vec::new(),
        }
    }

    /// Packs every chunk and returns the table sets, one per group. A chunk is encoded while the next one is
    /// parsed (when two chunks' buffers fit the memory bound, [`overlap_encode`]), as the filler of that parse
    /// ([`ChunkPlan::tasks`]): encoding never feeds the parse, so the archive is the same either way, and the
    /// encoder's groups fill the cores that the parse of uneven segments leaves idle.
    fn run(&mut self, writer: &mut ArchiveWriter, report: &mut PackReport) -> Result<Vec<TableSet>> {
        let total = self.data.len() as u64;
        let chunk = chunk_bytes(self.opts);
        let encoder = Encoder { data: self.data, opts: self.opts, slice_log: self.level.parse.slice_log };
        let overlap = overlap_encode(self.opts);
        let mut tables = Vec::new();
        // The parsed chunk waiting to be encoded: its start and blocks.
        let mut pending: Option<(u64, Vec<BlockTokens>)> = None;
        let mut start = 0;
        while start < total || pending.is_some() {
            let next = (start < total).then(|| (start, (start + chunk).min(total)));
            let encode = |job: Option<(u64, Vec<BlockTokens>)>| {
                job.map(|(s, blocks)| {
                    let t = Instant::now();
                    let groups = encoder.encode(s, &blocks);
                    (groups, t.elapsed().as_secs_f64())
                })
            };
            let stages = &mut report.stages;
            let (parsed, encoded) = if overlap {
                let job = pending.take();
                let scan_ahead = job.is_some();
                match next {
                    Some((s, e)) => {
                        let (blocks, encoded) = self.parse_chunk(s, e, scan_ahead, stages, || encode(job));
                        (Some(blocks), encoded)
                    }
                    None => (None, encode(job)),
                }
            } else {
                let encoded = encode(pending.take());
                (next.map(|(s, e)| self.parse_chunk(s, e, false, stages, || ()).0), encoded)
            };
            if let Some((groups, seconds)) = encoded {
                report.stages.encode += seconds;
                for (set, payloads) in groups {
                    for (payload, hash) in payloads {
                        writer.push_block(&payload, hash)?;
                    }
                    tables.push(set);
                }
            }
            if let (Some(blocks), Some((s, e))) = (parsed, next) {
                for b in &blocks {
                    report.matches += b.tokens.len() as u64 - 1;
                    report.literals += b.literals.len() as u64;
                }
                report.blocks += blocks.len() as u64;
                if let Some(bar) = &self.progress {
                    bar.set_position(e);
                }
                pending = Some((s, blocks));
                start = e;
            }
        }
        if let Some(bar) = &self.progress {
            bar.finish_and_clear();
        }
        report.max_depth_seen = self.depth.max_seen;
        Ok(tables)
    }

    /// Parses and depth-bounds the whole stream without encoding (tests and measurements); with `scan_ahead`,
    /// every chunk after the first is scanned beside the parse of the one before (as when packing).
    #[cfg(test)]
    fn tokens(&mut self, scan_ahead: bool) -> Vec<BlockTokens> {
        let total = self.data.len() as u64;
        let chunk = chunk_bytes(self.opts);
        let mut all = Vec::new();
        let mut start = 0;
        while start < total {
            let end = (start + chunk).min(total);
            all.extend(self.parse_chunk(start, end, scan_ahead && start > 0, &mut StageTimes::default(), || ()).0);
            start = end;
        }
        all
    }

    /// Parses the chunk and bounds its depth. Segments are parsed in parallel, each blind to the depths of the
    /// segments beside it; at the levels that re-parse, every segment but the first (and the first where the
    /// depth pass had to force many literals) is parsed again knowing the depths the trial depth pass gave the
    /// segments before it, so that its closure prices and depth caps see them, and the depth pass runs once more
    /// over the segments from the first one parsed again ([`SegmentJob::parse_phase`]). Every step is
    /// deterministic.
    ///
    /// With `scan_ahead`, the next chunk's long-match scan runs beside the parse (else beside the next chunk's
    /// own parse, [`ScanProgress`]): only where an encode runs beside this parse as well. Why: the scan is one
    /// sequential task, and the parse four segments of about equal length; the first chunk, with nothing else
    /// beside it, scanned two chunks while the other core parsed three segments, and then parsed the fourth
    /// while that core idled (atha_chr1 genome mode, 2 threads: 0.25 s of the 1.8 s pack).
    ///
    /// `filler`: work that runs beside the parses, as the last of their tasks ([`ChunkPlan::tasks`]); its result
    /// is returned with the chunk's blocks.
    fn parse_chunk<R: Send>(
        &mut self,
        start: u64,
        end: u64,
        scan_ahead: bool,
        times: &mut StageTimes,
        filler: impl FnOnce() -> R + Send,
    ) -> (Vec<BlockTokens>, R) {
        let mut t = Instant::now();
        let mut lap = |slot: &mut f64| {
            *slot += t.elapsed().as_secs_f64();
            t = Instant::now();
        };
        let data = self.data;
        let segments = segments_of(data, start, end, 1 << self.opts.block_log);
        let bare: Vec<bool> = segments.iter().map(|&(s, e)| is_bare_bases(&data[s as usize..e as usize])).collect();
        let plan = ChunkPlan::new(segments, &bare, self.level.reparse, rayon::current_num_threads());
        // The long-match scan is sequential: the next chunk's runs beside this chunk's parse.
        let next = (end < data.len() as u64).then(|| (end, (end + chunk_bytes(self.opts)).min(data.len() as u64)));
        // The final depths before the chunk, which the parsers read, and the trial pass over the chunk.
        let (outer_depth, trial) = self.depth.split_at(start);
        // Field by field, so that the long-match table can be borrowed beside it.
        let job = SegmentJob {
            data,
            level: self.level,
            block_log: self.opts.block_log,
            max_depth: self.opts.max_depth,
            outer_depth,
            reverse: self.opts.reverse_complements,
            generated: &self.generated,
        };
        let reverse = self.opts.reverse_complements;
        let scan_next = |ldm: &mut Ldm| {
            next.filter(|_| scan_ahead).map(|(s, e)| {
                let mut found = Vec::new();
                scan_long(ldm, data, (s, e), reverse, &mut found, |_, _| ());
                (s, e, found)
            })
        };
        let board = TaskBoard::new(plan.tasks().len());
        let long = std::sync::OnceLock::new();
        let ahead = self.ahead.take().filter(|&(s, e, _)| (s, e) == (start, end)).map(|(_, _, found)| found);
        let ldm = &mut self.ldm;
        // A chunk is scanned beside the parse before it only when that parse had an encode beside it too
        // (`scan_ahead`); the others are scanned beside their own parse.
        let (parsed, ahead) = match ahead {
            Some(found) => {
                let _ = long.set(merge_long(&mut self.carry, found, start, end));
                lap(&mut times.long_matches);
                rayon::join(|| job.parse_phase(&plan, None, &long, Some(trial), &board, filler), || scan_next(ldm))
            }
            None if self.streamed => {
                // A chunk not scanned ahead (the first one, at least): its segments are parsed block by block as
                // the scan gets past each (ScanProgress), beside the scan (which finds in pieces what one call over
                // the chunk finds, in the same order). The scan runs on this thread and the parses are the half of
                // the join that the other workers take: with a single worker they run after the scan, and never
                // wait. Second parses wait for the whole scan (`long`).
                let scan = ScanProgress::default();
                let carried: Vec<LongMatch> = self.carry.iter().filter(|m| m.end() > start).copied().collect();
                let carry = &mut self.carry;
                let (ahead, parsed) = rayon::join(
                    || {
                        let guard = FailOnPanic(&board);
                        let mut found = Vec::new();
                        {
                            let _done = ScanDone(&scan);
                            scan_long(ldm, data, (start, end), reverse, &mut found, |to, new| scan.publish(to, new));
                        }
                        let _ = long.set(merge_long(carry, found, start, end));
                        std::mem::forget(guard);
                        board.changed();
                        scan_next(ldm)
                    },
                    || job.parse_phase(&plan, Some((&carried, &scan)), &long, Some(trial), &board, filler),
                );
                (parsed, ahead)
            }
            None => {
                let mut found = Vec::new();
                scan_long(ldm, data, (start, end), reverse, &mut found, |_, _| ());
                let _ = long.set(merge_long(&mut self.carry, found, start, end));
                lap(&mut times.long_matches);
                rayon::join(|| job.parse_phase(&plan, None, &long, Some(trial), &board, filler), || scan_next(ldm))
            }
        };
        self.ahead = ahead;
        lap(&mut times.parse);
        times.segments += plan.segments.len() as u64;
        times.reparsed_segments += parsed.reparsed;
        // The segments whose trial depth pass was kept are final already; the pass continues after them.
        if let Some(checkpoint) = parsed.checkpoint {
            self.depth.rewind(checkpoint);
        }
        let block = 1u64 << self.opts.block_log;
        let done = parsed.kept;
        let first = start + done.iter().map(Vec::len).sum::<usize>() as u64 * block;
        let rest: Vec<BlockTokens> = parsed.segments.into_iter().skip(done.len()).flatten().collect();
        let rest = rest.iter().enumerate().map(|(i, b)| self.depth.apply(first + i as u64 * block, b));
        let blocks = done.into_iter().flatten().chain(rest).collect();
        lap(&mut times.depth);
        (blocks, parsed.filled)
    }
}

/// Scans the windows starting in `[start, end)` for long matches ([`Ldm::scan`]) in pieces of [`SCAN_STEP`], each
/// looking for reverse complements where it is bare bases ([`reverse_complements`]), appends what it finds to
/// `found` (sorted as one call's output) and calls `each(to, new)` after each piece. Why piece by piece: a
/// chunk that ends a genome holds its structure and the next file too, and decided as a whole it was not bare
/// bases (atha_chr1's second chunk: 14.5 MB of bases without a reverse-complement lookup).
fn scan_long(
    ldm: &mut Ldm,
    data: &[u8],
    (start, end): (u64, u64),
    reverse: bool,
    found: &mut Vec<LongMatch>,
    mut each: impl FnMut(u64, &[LongMatch]),
) {
    let first = found.len();
    let mut at = start;
    while at < end {
        let to = (at + SCAN_STEP).min(end);
        let from = found.len();
        ldm.scan(data, at, to, reverse_complements(reverse, data, at, to), found);
        each(to, &found[from..]);
        at = to;
    }
    found[first..].sort_by_key(|m| (m.start, m.back, m.rc));
}

/// Long matches overlapping the chunk `[start, end)`: those carried from earlier chunks (`carry`, which becomes
/// the ones that reach past `end`) plus those the sequential scan `found` in this one.
fn merge_long(carry: &mut Vec<LongMatch>, found: Vec<LongMatch>, start: u64, end: u64) -> Vec<LongMatch> {
    let mut long = std::mem::take(carry);
    long.retain(|m| m.end() > start);
    long.extend(found);
    long.sort_by_key(|m| (m.start, m.back));
    *carry = long.iter().filter(|m| m.end() > end).copied().collect();
    long
}

/// What encoding a chunk needs (all read-only), apart from the packing run so it can run beside the next parse.
#[derive(Clone, Copy)]
struct Encoder<'a> {
    data: &'a [u8],
    opts: &'a PackOptions,
    slice_log: u8,
}

impl Encoder<'_> {
    /// Builds each group's tables and encodes and hashes its blocks (groups in parallel), in stream order.
    ///
    /// The chunk's blocks are cut into slices first, so that the literal context model (FORMAT.md §2.4) can be
    /// chosen from every slice whose literals are all bases: one model per chunk if one pays
    /// ([`CtxStats::choose`]), stored by the chunk's first group that uses it and referred to by the others.
    fn encode(&self, start: u64, blocks: &[BlockTokens]) -> Vec<EncodedGroup> {
        let block = 1usize << self.opts.block_log;
        let per_group = 1usize << self.opts.group_log;
        let lanes = self.opts.rans_lanes as u32;
        let slice = 1usize << self.slice_log;
        let data = self.data;
        let block_bytes = |i: usize| {
            let at = start as usize + i * block;
            &data[at..(at + block).min(data.len())]
        };
        let cut: Vec<Vec<SliceTokens>> = blocks
            .par_iter()
            .enumerate()
            .map(|(i, b)| cut_slices(&b.tokens, &b.literals, block_bytes(i), slice))
            .collect();
        let model = self.context_model(&cut, per_group);
        // Which groups code some slice with the model, and how far back each finds the group that stores it.
        let mut owner = None;
        let contexts: Vec<Option<LitContext>> = cut
            .chunks(per_group)
            .enumerate()
            .map(|(g, group)| {
                let model = model.as_ref()?;
                group.iter().flatten().any(|s| codes_with_contexts(&s.literals)).then(|| {
                    let first = *owner.get_or_insert(g);
                    LitContext { back: (g - first) as u32, model: model.clone() }
                })
            })
            .collect();
        cut.par_chunks(per_group)
            .zip(contexts)
            .enumerate()
            .map(|(g, (group, ctx))| {
                let mut stats = SymbolStats::default();
                for slices in group {
                    count_slices(slices, ctx.is_some(), &mut stats);
                }
                let set = TableSet { ctx, ..TableSet::from_stats(&stats) };
                let payloads = group
                    .par_iter()
                    .enumerate()
                    .map(|(k, slices)| {
                        let mut payload = Vec::new();
                        encode_slices(slices, &set, lanes, &mut payload);
                        (payload, xxh3_64(block_bytes(g * per_group + k)))
                    })
                    .collect();
                (set, payloads)
            })
            .collect()
    }

    /// The chunk's literal context model, if one pays: statistics, for every order at once, of every slice
    /// whose literals are all bases (one pass over the chunk's literals).
    fn context_model(&self, cut: &[Vec<SliceTokens>], per_group: usize) -> Option<std::sync::Arc<CtxModel>> {
        let lanes = self.opts.rans_lanes as usize;
        let groups = cut.len().div_ceil(per_group);
        let eligible = |s: &&SliceTokens| codes_with_contexts(&s.literals);
        // ACEAPEX_NO_LIT_CONTEXTS: pack without context models (measurements: the decode speed they cost).
        if std::env::var_os("ACEAPEX_NO_LIT_CONTEXTS").is_some() || !cut.iter().flatten().any(|s| eligible(&s)) {
            return None;
        }
        // Groups counted in parallel, a few partial statistics merged (each holds the highest order's 4^8
        // contexts: 2 MiB): one thread counting a whole chunk was a serial ~3 % of a genome pack, on the last
        // chunk with nothing beside it. Counts add exactly, so the model is the same.
        let stats = cut
            .par_chunks(per_group)
            .enumerate()
            .with_min_len(CTX_GROUPS_PER_TASK)
            .fold(
                || CtxStats::new(groups, lanes),
                |mut stats, (g, group)| {
                    for s in group.iter().flatten().filter(eligible) {
                        stats.add_slice(g, &s.literals, 3 * (s.tokens.len() - 1) + 1);
                    }
                    stats
                },
            )
            .reduce_with(CtxStats::merge)?;
        stats.choose(CTX_MIN_GAIN_BYTES)
    }
}
