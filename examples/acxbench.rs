//! Measurements for `bench/run.sh`, printed as tab-separated values.
//!
//! - `acxbench decode ARCHIVE [--runs N] [--window SIZE] [--stats]`: decodes the whole logical stream with the
//!   sequential CPU decoder (all cores unless `RAYON_NUM_THREADS=1`; window default 64M), checks every block's
//!   hash, prints `bytes<TAB>best seconds`. `--stats` prints to stderr how many slices the random-access path
//!   parsed for sources older than the window.
//! - `acxbench parse ARCHIVE [--runs N]`: the entropy stage alone (every block's slices decoded to tokens and
//!   literals, no copies) on one thread; prints `bytes<TAB>best seconds<TAB>best CPU seconds`. What the rANS
//!   lane count and the slice layout change, isolated from the copy stage.
//! - `acxbench randread ARCHIVE [--reads N] [--size S] [--seed X]`: cold random reads. For each read the
//!   archive is opened afresh (no decoded or parsed block survives from the previous read), then `S` bytes at a
//!   random position near the start, the middle or the end of the stream are read with `Archive::read_stream`
//!   (block cache, engine batch, hash check: the path a filesystem read takes) and timed. `--decoder` picks the
//!   engine (default cpu). Two more columns say why a read costs what it does: the median and the largest
//!   number of slices whose entropy stage a cold CPU read of the same range ran (the slices of the blocks read
//!   plus every slice their sources lead to, within the depth bound). Prints one line per region:
//!   `region<TAB>reads<TAB>p50 µs<TAB>p99 µs<TAB>max µs<TAB>p50 slices parsed<TAB>max slices parsed`. With
//!   `--repeat R`, each position is read R times, each cold, and the fastest counts (on a loaded machine: the
//!   read's cost rather than the scheduler's interruptions). With `--shared`, one archive serves every read, at
//!   distinct 4 KiB-aligned positions over the whole stream (a mount with readahead=0,fill=0 under random reads:
//!   caches fill as the reads go); one line, `shared<TAB>reads<TAB>p50<TAB>p99<TAB>max µs<TAB>slices parsed per
//!   read<TAB>slices parsed in all`.
//!
//! - `acxbench closure ARCHIVE [--reads N] [--size S] [--seed X] [--worst K]`: where a cold read's time goes,
//!   without the archive layer. The archive is opened once (as a mount does); each read gets a fresh CPU engine
//!   (empty parsed-slice LRU, no decoded blocks) and decodes the blocks covering `S` bytes at random positions of
//!   the same three regions. Prints one line per region: `region<TAB>reads<TAB>p50 µs<TAB>p99 µs<TAB>max
//!   µs<TAB>p50 slices<TAB>p99 slices<TAB>p50 levels<TAB>max levels<TAB>µs per slice (median)<TAB>share of the
//!   time in the closure plan (the rest: the copies and hash after it)<TAB>p50 CPU µs<TAB>p99 CPU µs` (process
//!   CPU time, all threads: steadier than wall time on a loaded machine); then, for the `K` slowest reads of all,
//!   the closure level by level (`level<TAB>ranges<TAB>bytes<TAB>slices<TAB>chunks parsed by helpers<TAB>µs`).
//!
//! With `--cpu-time`, both also print the process CPU time (all threads) next to the wall time: on a shared,
//! loaded machine wall time measures the scheduler as much as the decoder. `decode` then prints
//! `bytes<TAB>best seconds<TAB>best CPU seconds`, `randread` adds `p50 CPU µs<TAB>p99 CPU µs`.
//!
//! The OS page cache is not dropped (that needs privileges): "cold" means cold in the process.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use aceapex::archive::{Archive, ArchiveOptions};
use aceapex::codec::resolve::{parse_block, LevelStats};
use aceapex::engine::cpu::{CpuEngine, DEFAULT_WINDOW_BYTES};
use aceapex::engine::DecoderChoice;
use aceapex::format::ArchiveData;
use clap::{Parser, Subcommand};

#[derive(Parser)]
struct Args {
    #[command(subcommand)]
    command: Cmd,
}

// The random reads of `randread` and `closure`: `reads` reads of `size` bytes at positions drawn from `seed`
// (a plain comment: a doc comment would become both subcommands' help text).
#[derive(clap::Args)]
struct Reads {
    archive: PathBuf,
    #[arg(long, default_value_t = 200)]
    reads: usize,
    #[arg(long, default_value_t = 4096)]
    size: u64,
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Subcommand)]
enum Cmd {
    Decode {
        archive: PathBuf,
        #[arg(long, default_value_t = 1)]
        runs: u32,
        /// Also print the best process CPU time.
        #[arg(long)]
        cpu_time: bool,
        /// Decoded bytes the sequential decoder keeps for near sources (K/M/G suffixes allowed).
        #[arg(long, value_parser = parse_size, default_value_t = DEFAULT_WINDOW_BYTES)]
        window: u64,
        /// Print to stderr how many slices the random-access path parsed (far sources), per run.
        #[arg(long)]
        stats: bool,
    },
    Parse {
        archive: PathBuf,
        #[arg(long, default_value_t = 5)]
        runs: u32,
    },
    Randread {
        #[command(flatten)]
        at: Reads,
        /// Decoder for the reads: cpu, gpu or auto.
        #[arg(long, default_value = "cpu")]
        decoder: DecoderChoice,
        /// Also print CPU-time percentiles.
        #[arg(long)]
        cpu_time: bool,
        /// Read each position this many times (each cold, on a fresh archive) and keep the fastest: on a loaded
        /// machine, what the read costs rather than how often the scheduler interrupted it.
        #[arg(long, default_value_t = 1)]
        repeat: u32,
        /// One archive for all the reads, at distinct 4 KiB-aligned positions over the whole stream (what a mount
        /// with readahead=0,fill=0 serves to random reads: caches fill as the reads go); prints one line, `shared`.
        #[arg(long)]
        shared: bool,
    },
    Closure {
        #[command(flatten)]
        at: Reads,
        /// Print the closure level by level for this many of the slowest reads.
        #[arg(long, default_value_t = 3)]
        worst: usize,
    },
}

fn main() -> ExitCode {
    let args = Args::parse();
    let result = match args.command {
        Cmd::Decode { archive, runs, cpu_time, window, stats } => decode(&archive, runs, cpu_time, window, stats),
        Cmd::Parse { archive, runs } => parse(&archive, runs),
        Cmd::Randread { at, decoder, cpu_time, repeat: _, shared: true } => {
            randread_shared(&at.archive, at.reads, at.size, at.seed, decoder, cpu_time)
        }
        Cmd::Randread { at, decoder, cpu_time, repeat, shared: false } => {
            randread(&at.archive, at.reads, at.size, at.seed, decoder, cpu_time, repeat)
        }
        Cmd::Closure { at, worst } => closure(&at.archive, at.reads, at.size, at.seed, worst),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("acxbench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// CPU seconds used by this process so far, all threads.
fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_PROCESS_CPUTIME_ID is supported on Linux.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

/// `123`, `64K`, `512M`, `4G`.
fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, shift) = match s.as_bytes().last() {
        Some(b'K' | b'k') => (&s[..s.len() - 1], 10),
        Some(b'M' | b'm') => (&s[..s.len() - 1], 20),
        Some(b'G' | b'g') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    let n: u64 = digits.parse().map_err(|e| format!("{s:?}: {e}"))?;
    n.checked_mul(1 << shift).ok_or_else(|| format!("{s:?} is too large"))
}

fn decode(path: &PathBuf, runs: u32, cpu_time: bool, window: u64, stats: bool) -> aceapex::Result<()> {
    let data = Arc::new(ArchiveData::open(path)?);
    let total = data.footer.total_len;
    let parallel = rayon::current_num_threads() > 1;
    let mut best = f64::INFINITY;
    let mut best_cpu = f64::INFINITY;
    for _ in 0..runs.max(1) {
        // A fresh engine per run: nothing decoded in an earlier run helps a later one.
        let engine = CpuEngine::new(data.clone());
        let cpu_started = cpu_seconds();
        let started = Instant::now();
        let mut bytes = 0u64;
        engine.decode_sequential(0, data.block_count(), parallel, window, |_, block| {
            bytes += block?.len() as u64;
            Ok(())
        })?;
        if stats {
            eprintln!("slices parsed by the random-access path: {}", engine.slices_parsed());
        }
        best = best.min(started.elapsed().as_secs_f64());
        best_cpu = best_cpu.min(cpu_seconds() - cpu_started);
        if bytes != total {
            return Err(aceapex::Error::InvalidArgument(format!("decoded {bytes} of {total} bytes")));
        }
    }
    if cpu_time {
        println!("{total}\t{best:.6}\t{best_cpu:.6}");
    } else {
        println!("{total}\t{best:.6}");
    }
    Ok(())
}

fn parse(path: &PathBuf, runs: u32) -> aceapex::Result<()> {
    let data = ArchiveData::open(path)?;
    let mut best = f64::INFINITY;
    let mut best_cpu = f64::INFINITY;
    for _ in 0..runs.max(1) {
        let cpu_started = cpu_seconds();
        let started = Instant::now();
        for id in 0..data.block_count() {
            let parsed = parse_block(&data, id).map_err(|f| f.into_error(&data))?;
            std::hint::black_box(&parsed);
        }
        best = best.min(started.elapsed().as_secs_f64());
        best_cpu = best_cpu.min(cpu_seconds() - cpu_started);
    }
    println!("{}\t{best:.6}\t{best_cpu:.6}", data.footer.total_len);
    Ok(())
}

// The read positions are reproducible for a given seed.
#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

fn randread(
    path: &PathBuf,
    reads: usize,
    size: u64,
    seed: u64,
    decoder: DecoderChoice,
    cpu_time: bool,
    repeat: u32,
) -> aceapex::Result<()> {
    let total = ArchiveData::open(path)?.footer.total_len;
    if total < size {
        return Err(aceapex::Error::InvalidArgument(format!("stream of {total} bytes is shorter than one read")));
    }
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    // Each region is the 1% of the stream (at least 64 reads' worth) at the start, middle and end.
    let span = (total / 100).max(size * 64).min(total - size + 1);
    let regions = [("start", 0), ("middle", (total - span) / 2), ("end", total - span)];
    for (name, base) in regions {
        let mut micros = Vec::with_capacity(reads);
        let mut cpu_micros = Vec::with_capacity(reads);
        let mut parsed = Vec::with_capacity(reads);
        for _ in 0..reads {
            let pos = base + rng.below(span.saturating_sub(size) + 1);
            let (mut best, mut best_cpu) = (f64::INFINITY, f64::INFINITY);
            for _ in 0..repeat.max(1) {
                // A fresh archive: empty block cache, empty parsed-block cache, so the read is cold in-process.
                let archive = Archive::open_with(path, ArchiveOptions { decoder, ..ArchiveOptions::default() })?;
                let mut buf = vec![0u8; size as usize];
                let cpu_started = cpu_seconds();
                let started = Instant::now();
                archive.read_stream(pos, &mut buf)?;
                std::hint::black_box(&buf);
                best = best.min(started.elapsed().as_secs_f64() * 1e6);
                best_cpu = best_cpu.min((cpu_seconds() - cpu_started) * 1e6);
            }
            micros.push(best);
            cpu_micros.push(best_cpu);
            parsed.push(slices_parsed_by_cold_read(path, pos, size)? as f64);
        }
        let micros = Percentiles::new(micros);
        let parsed = Percentiles::new(parsed);
        let cpu = Percentiles::new(cpu_micros);
        println!(
            "{name}\t{reads}\t{}\t{:.0}\t{:.0}{}",
            latency_columns(&micros),
            parsed.at(0.5),
            parsed.at(1.0),
            cpu_columns(&cpu, cpu_time)
        );
    }
    Ok(())
}

/// `randread --shared`: `reads` reads of `size` bytes at distinct `4096`-aligned positions drawn over the whole
/// stream, all through one archive (its block cache and parsed-slice LRU fill as the reads go, as in a mount).
/// Prints `shared<TAB>reads<TAB>p50 µs<TAB>p99 µs<TAB>max µs<TAB>slices parsed per read (mean)<TAB>slices
/// parsed in all`, then the CPU-time percentiles with `--cpu-time`.
fn randread_shared(
    path: &PathBuf,
    reads: usize,
    size: u64,
    seed: u64,
    decoder: DecoderChoice,
    cpu_time: bool,
) -> aceapex::Result<()> {
    let archive = Archive::open_with(path, ArchiveOptions { decoder, ..ArchiveOptions::default() })?;
    let total = archive.total_len();
    let slots = total.saturating_sub(size) / 4096 + 1;
    if total < size || (reads as u64) > slots {
        return Err(aceapex::Error::InvalidArgument(format!("{reads} reads of {size} bytes in a stream of {total}")));
    }
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut seen = std::collections::HashSet::with_capacity(reads);
    let mut micros = Vec::with_capacity(reads);
    let mut cpu_micros = Vec::with_capacity(reads);
    let mut buf = vec![0u8; size as usize];
    while micros.len() < reads {
        let slot = rng.below(slots);
        if !seen.insert(slot) {
            continue;
        }
        let cpu_started = cpu_seconds();
        let started = Instant::now();
        archive.read_stream(slot * 4096, &mut buf)?;
        std::hint::black_box(&buf);
        micros.push(started.elapsed().as_secs_f64() * 1e6);
        cpu_micros.push((cpu_seconds() - cpu_started) * 1e6);
    }
    let parsed = archive.slices_parsed();
    let micros = Percentiles::new(micros);
    let cpu = Percentiles::new(cpu_micros);
    println!(
        "shared\t{reads}\t{}\t{:.1}\t{parsed}{}",
        latency_columns(&micros),
        parsed as f64 / reads as f64,
        cpu_columns(&cpu, cpu_time)
    );
    Ok(())
}

/// One cold read measured by `closure`: its region, position, wall µs, closure µs, and its levels.
struct ClosureRead {
    region: &'static str,
    pos: u64,
    micros: f64,
    cpu_micros: f64,
    plan_micros: f64,
    levels: Vec<LevelStats>,
}

fn closure(path: &PathBuf, reads: usize, size: u64, seed: u64, worst: usize) -> aceapex::Result<()> {
    let data = Arc::new(ArchiveData::open(path)?);
    let total = data.footer.total_len;
    if total < size || size == 0 {
        return Err(aceapex::Error::InvalidArgument(format!("stream of {total} bytes and reads of {size}")));
    }
    let log = data.header.block_log;
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let span = (total / 100).max(size * 64).min(total - size + 1);
    let regions = [("start", 0), ("middle", (total - span) / 2), ("end", total - span)];
    let mut all: Vec<ClosureRead> = Vec::new();
    for (name, base) in regions {
        let mut here = Vec::with_capacity(reads);
        for _ in 0..reads {
            let pos = base + rng.below(span.saturating_sub(size) + 1);
            let engine = CpuEngine::new(data.clone());
            let mut read =
                ClosureRead { region: name, pos, micros: 0.0, cpu_micros: 0.0, plan_micros: 0.0, levels: Vec::new() };
            let cpu_started = cpu_seconds();
            let started = Instant::now();
            for id in (pos >> log)..=((pos + size - 1) >> log) {
                let mut buf = vec![0u8; data.block_len(id) as usize];
                let (stats, _) = engine.decode_block_stats(id, &mut buf)?;
                std::hint::black_box(&buf);
                read.plan_micros += stats.levels.iter().map(|l| l.micros).sum::<f64>();
                read.levels.extend(stats.levels);
            }
            read.micros = started.elapsed().as_secs_f64() * 1e6;
            read.cpu_micros = (cpu_seconds() - cpu_started) * 1e6;
            here.push(read);
        }
        let micros = Percentiles::new(here.iter().map(|r| r.micros).collect());
        let slices =
            Percentiles::new(here.iter().map(|r| r.levels.iter().map(|l| l.slices).sum::<usize>() as f64).collect());
        let levels = Percentiles::new(here.iter().map(|r| r.levels.len() as f64).collect());
        let per_slice = Percentiles::new(
            here.iter()
                .map(|r| (r.micros, r.levels.iter().map(|l| l.slices).sum::<usize>()))
                .filter(|&(_, n)| n > 0)
                .map(|(us, n)| us / n as f64)
                .collect(),
        );
        let cpu = Percentiles::new(here.iter().map(|r| r.cpu_micros).collect());
        let plan_share = here.iter().map(|r| r.plan_micros).sum::<f64>() / here.iter().map(|r| r.micros).sum::<f64>();
        println!(
            "{name}\t{reads}\t{:.0}\t{:.0}\t{:.0}\t{:.0}\t{:.0}\t{:.0}\t{:.0}\t{:.1}\t{:.2}\t{:.0}\t{:.0}",
            micros.at(0.5),
            micros.at(0.99),
            micros.at(1.0),
            slices.at(0.5),
            slices.at(0.99),
            levels.at(0.5),
            levels.at(1.0),
            per_slice.at(0.5),
            plan_share,
            cpu.at(0.5),
            cpu.at(0.99)
        );
        all.extend(here);
    }
    all.sort_by(|a, b| b.micros.total_cmp(&a.micros));
    for read in all.iter().take(worst) {
        println!(
            "# {} read at {}: {:.0} µs, closure plan {:.0} µs",
            read.region, read.pos, read.micros, read.plan_micros
        );
        for (level, l) in read.levels.iter().enumerate() {
            println!("{level}\t{}\t{}\t{}\t{}\t{:.0}", l.ranges, l.bytes, l.slices, l.helped_chunks, l.micros);
        }
    }
    Ok(())
}

/// How many slices a cold CPU engine parses to decode the blocks covering `[pos, pos + size)`.
fn slices_parsed_by_cold_read(path: &PathBuf, pos: u64, size: u64) -> aceapex::Result<u64> {
    let data = Arc::new(ArchiveData::open(path)?);
    let engine = CpuEngine::new(data.clone());
    let log = data.header.block_log;
    let mut buf = Vec::new();
    for id in (pos >> log)..=((pos + size - 1) >> log) {
        buf.resize(data.block_len(id) as usize, 0);
        engine.decode_block(id, &mut buf)?;
    }
    Ok(engine.slices_parsed())
}

/// Sorted samples, read at a quantile.
struct Percentiles(Vec<f64>);

impl Percentiles {
    fn new(mut samples: Vec<f64>) -> Percentiles {
        samples.sort_by(f64::total_cmp);
        Percentiles(samples)
    }

    fn at(&self, q: f64) -> f64 {
        if self.0.is_empty() {
            return f64::NAN;
        }
        self.0[((self.0.len() - 1) as f64 * q).round() as usize]
    }
}

/// The p50, p99 and max columns of a randread row (µs).
fn latency_columns(micros: &Percentiles) -> String {
    format!("{:.0}\t{:.0}\t{:.0}", micros.at(0.5), micros.at(0.99), micros.at(1.0))
}

/// The two CPU-time columns (p50, p99 µs) that `--cpu-time` adds to a randread row, or nothing.
fn cpu_columns(cpu: &Percentiles, cpu_time: bool) -> String {
    match cpu_time {
        true => format!("\t{:.0}\t{:.0}", cpu.at(0.5), cpu.at(0.99)),
        false => String::new(),
    }
}
