//! A fresh mount's sequential read without FUSE: the filesystem layer opened exactly as `aceapex-mount` opens it
//! (same `-o` options, budget split and settings), read the way the kernel reads a file that `cat` or `dd` reads:
//! requests of `--chunk` bytes (the kernel's readahead requests: 128 KiB to 1 MiB) in file order, taken by
//! `--threads` workers at once (FUSE worker threads serving concurrent readahead requests, so they arrive a
//! little out of order), with at most `--window` bytes requested ahead of the oldest unanswered request (the
//! kernel's readahead window).
//!
//! Prints MB/s of the first pass (fresh: decodes), optionally of a second pass (served from the daemon's cache),
//! the read-latency percentiles and the stream runs' counters (where a run's time went: decoder, cache
//! inserts, pacing, readers waiting), and checks the bytes against the original when one is given. With
//! `-o trace` (or `ACEAPEX_TRACE=stream`) each run logs its segments to stderr.
//!
//! With `--random N` it reads instead N requests of `--chunk` bytes at pseudo-random offsets, one at a time on a
//! fresh filesystem (what `samtools faidx` sends for N regions: one or two 64 KiB requests each; the first
//! random read starts a fill of the file, which later reads wait for), and prints the total time.
//!
//! Usage: cargo run --release --example stream_bench -- ARCHIVE PATH_IN_ARCHIVE [ORIGINAL] [-o OPTIONS]
//!        [--threads N] [--chunk BYTES] [--window BYTES] [--passes N] [--random N]

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;

use aceapex::archive::Archive;
use aceapex::fs::options::{parse_size, MemoryBudget, MountOptions};
use aceapex::fs::AcxFs;

/// CPU seconds the whole process has used (all threads: readers, the run, the decode pool).
fn process_cpu_s() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct it is given; RUSAGE_SELF needs nothing else.
    let usage = unsafe {
        let mut usage: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut usage);
        usage
    };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
}

struct Args {
    archive: String,
    inner: String,
    original: Option<String>,
    options: MountOptions,
    threads: usize,
    chunk: u64,
    window: u64,
    passes: usize,
    random: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut positional = Vec::new();
    let mut options = MountOptions::default();
    let (mut threads, mut chunk, mut window, mut passes, mut random) = (4usize, 1u64 << 20, 4u64 << 20, 1usize, 0);
    let mut it = std::env::args().skip(1);
    while let Some(a) = it.next() {
        let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "-o" => options.parse_into(&value("-o")?)?,
            "--threads" => threads = value("--threads")?.parse().map_err(|e| format!("--threads: {e}"))?,
            "--chunk" => chunk = parse_size(&value("--chunk")?)?,
            "--window" => window = parse_size(&value("--window")?)?,
            "--passes" => passes = value("--passes")?.parse().map_err(|e| format!("--passes: {e}"))?,
            "--random" => random = value("--random")?.parse().map_err(|e| format!("--random: {e}"))?,
            _ => positional.push(a),
        }
    }
    let mut positional = positional.into_iter();
    let (Some(archive), Some(inner)) = (positional.next(), positional.next()) else {
        return Err("usage: stream_bench ARCHIVE PATH_IN_ARCHIVE [ORIGINAL] [-o OPTIONS] [--threads N] \
                    [--chunk BYTES] [--window BYTES] [--passes N] [--random N]"
            .to_string());
    };
    if threads == 0 || chunk == 0 || chunk > u64::from(u32::MAX) {
        return Err("--threads and --chunk must be positive (chunk below 4 GiB)".to_string());
    }
    let window = window.max(chunk);
    Ok(Args { archive, inner, original: positional.next(), options, threads, chunk, window, passes, random })
}

/// Requests handed out in file order, at most `window` bytes beyond the oldest one not yet answered.
struct Requests {
    size: u64,
    chunk: u64,
    window: u64,
    state: Mutex<(u64, std::collections::BTreeSet<u64>)>,
    answered: Condvar,
}

impl Requests {
    /// The next request's offset, or `None` at the end of the file.
    fn next(&self) -> Option<u64> {
        let mut state = self.state.lock().unwrap();
        loop {
            let (next, pending) = &mut *state;
            if *next >= self.size {
                return None;
            }
            let oldest = pending.first().copied().unwrap_or(*next);
            if *next + self.chunk <= oldest + self.window {
                let at = *next;
                *next += self.chunk;
                pending.insert(at);
                return Some(at);
            }
            state = self.answered.wait(state).unwrap();
        }
    }

    fn done(&self, at: u64) {
        self.state.lock().unwrap().1.remove(&at);
        self.answered.notify_all();
    }
}

fn main() {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ACEAPEX_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    let cache_bytes = args.options.cache_bytes_or_default();
    let budget = MemoryBudget::split(cache_bytes);
    let opened = Instant::now();
    let archive = Archive::open_with(&args.archive, budget.archive_options(args.options.decoder)).expect("open");
    let fs_options = args.options.fs_options(cache_bytes, &budget);
    println!(
        "archive opened in {:.1} ms, engine {}, block {} B, readahead {} KiB, max streams {}",
        opened.elapsed().as_secs_f64() * 1e3,
        archive.engine_name(),
        archive.data().header.block_size(),
        fs_options.readahead_bytes >> 10,
        fs_options.max_streams
    );
    let fs = AcxFs::new(Arc::new(archive), fs_options);
    let mut ino = 1u64;
    for part in args.inner.split('/').filter(|p| !p.is_empty()) {
        ino = fs.lookup(ino, part.as_bytes()).expect("path in the archive").ino;
    }
    let size = fs.getattr(ino).expect("getattr").size;
    let want = args.original.as_ref().map(|p| std::fs::read(p).expect("read the original"));
    if let Some(want) = &want {
        assert_eq!(want.len() as u64, size, "the original's size differs");
    }

    if args.random > 0 {
        random_reads(&fs, ino, size, &args, want.as_deref());
        return;
    }
    for pass in 0..args.passes {
        let requests = Requests {
            size,
            chunk: args.chunk,
            window: args.window,
            state: Mutex::new((0, Default::default())),
            answered: Condvar::new(),
        };
        let fh = fs.open(ino, libc::O_RDONLY).expect("open").fh;
        let mismatches = AtomicU64::new(0);
        let (started, cpu) = (Instant::now(), process_cpu_s());
        std::thread::scope(|s| {
            for _ in 0..args.threads {
                s.spawn(|| {
                    let mut buf = Vec::new();
                    while let Some(at) = requests.next() {
                        fs.read(ino, fh, at, args.chunk as u32, &mut buf).expect("read");
                        let expected_len = args.chunk.min(size - at) as usize;
                        let good = buf.len() == expected_len
                            && want.as_ref().is_none_or(|w| w[at as usize..at as usize + expected_len] == buf[..]);
                        if !good {
                            mismatches.fetch_add(1, Ordering::Relaxed);
                        }
                        requests.done(at);
                    }
                });
            }
        });
        let (wall, cpu) = (started.elapsed().as_secs_f64(), process_cpu_s() - cpu);
        fs.release(fh);
        let stats: serde_json::Value = serde_json::from_slice(&fs.stats_snapshot()).expect("stats");
        println!(
            "pass {pass}: {size} bytes in {:.1} ms = {:.0} MB/s, {:.1} CPU-ms ({} threads, chunk {} KiB, window {} KiB){}",
            wall * 1e3,
            size as f64 / wall / 1e6,
            cpu * 1e3,
            args.threads,
            args.chunk >> 10,
            args.window >> 10,
            match (&want, mismatches.load(Ordering::Relaxed)) {
                (None, _) => String::new(),
                (Some(_), 0) => ", bytes identical".to_string(),
                (Some(_), n) => format!(", {n} READS DIFFER"),
            }
        );
        println!("  read latency: {}", stats["fs"]["read_latency"]);
        println!("  runs: {}", stats["streams"]["runs"]);
        if mismatches.load(Ordering::Relaxed) > 0 {
            std::process::exit(1);
        }
    }
}

/// `args.random` reads of `args.chunk` bytes at pseudo-random offsets, one after the other, through one handle.
fn random_reads<B: aceapex::fs::Backend>(fs: &AcxFs<B>, ino: u64, size: u64, args: &Args, want: Option<&[u8]>) {
    let fh = fs.open(ino, libc::O_RDONLY).expect("open").fh;
    let mut buf = Vec::new();
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let (started, cpu) = (Instant::now(), process_cpu_s());
    for _ in 0..args.random {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let at = (x % size) & !4095;
        fs.read(ino, fh, at, args.chunk as u32, &mut buf).expect("read");
        if let Some(w) = want {
            let end = (at + args.chunk).min(size) as usize;
            assert!(w[at as usize..end] == buf[..], "bytes differ at {at}");
        }
    }
    let (wall, cpu) = (started.elapsed().as_secs_f64(), process_cpu_s() - cpu);
    fs.release(fh);
    let stats: serde_json::Value = serde_json::from_slice(&fs.stats_snapshot()).expect("stats");
    println!(
        "{} random reads of {} KiB: {:.1} ms, {:.1} CPU-ms (including the fill's decoding){}",
        args.random,
        args.chunk >> 10,
        wall * 1e3,
        cpu * 1e3,
        if want.is_some() { ", bytes identical" } else { "" }
    );
    println!("  read latency: {}", stats["fs"]["read_latency"]);
    println!("  runs: {}", stats["streams"]["runs"]);
}
