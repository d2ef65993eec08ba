//! The mount's serving path without FUSE: how fast the filesystem layer hands out a file's bytes once its blocks
//! are decoded and cached (for a genome-mode FASTA: rebuilding the original bytes from the cached bases).
//!
//! Opens the archive as the mount does (decoder=cpu, a 2 GiB cache), reads the file once to decode and cache it,
//! checks the bytes against the original when one is given, then times passes of sequential reads of `--chunk`
//! bytes (the FUSE request size) through [`AcxFs::read`] and prints MB/s per pass, by the wall clock and by the
//! thread's CPU time (which a machine shared with builds disturbs less). Also times 1000 reads of 64 KiB at
//! random offsets (what `samtools faidx` sends).
//!
//! With an ORIGINAL that genome mode models, it then times the rebuild alone ([`Genome::write_at`] over the
//! whole file in `--chunk` reads, its bases in 16 KiB slices as the cache hands them out), with no archive, cache
//! or filesystem around it: the per-read FASTA rebuild's own speed. `--rebuild-only` skips the archive part
//! (ARCHIVE and PATH_IN_ARCHIVE are still named, and ignored).
//!
//! Usage: cargo run --release --example serve_bench -- ARCHIVE PATH_IN_ARCHIVE [ORIGINAL] [--chunk BYTES]
//! [--passes N] [--rebuild-only]

use std::sync::Arc;
use std::time::Instant;

use aceapex::archive::{Archive, ArchiveOptions};
use aceapex::engine::DecoderChoice;
use aceapex::fs::{AcxFs, FsOptions};
use aceapex::genome::read::BaseChunks;

/// CPU seconds the calling thread has used.
fn thread_cpu_s() -> f64 {
    let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `t` is a valid, writable timespec; CLOCK_THREAD_CPUTIME_ID needs nothing else.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut positional = Vec::new();
    let (mut chunk, mut passes, mut rebuild_only) = (1usize << 20, 5usize, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--chunk" => chunk = it.next().and_then(|v| v.parse().ok()).expect("--chunk BYTES"),
            "--passes" => passes = it.next().and_then(|v| v.parse().ok()).expect("--passes N"),
            "--rebuild-only" => rebuild_only = true,
            _ => positional.push(a.clone()),
        }
    }
    let [archive_path, inner, rest @ ..] = positional.as_slice() else {
        eprintln!(
            "usage: serve_bench ARCHIVE PATH_IN_ARCHIVE [ORIGINAL] [--chunk BYTES] [--passes N] [--rebuild-only]"
        );
        std::process::exit(2);
    };
    if !rebuild_only {
        serve(archive_path, inner, rest.first(), chunk, passes);
    }
    if let Some(original) = rest.first() {
        rebuild_alone(original, chunk, passes);
    }
}

/// Times [`aceapex::genome::Genome::write_at`] alone over `original` (split in memory), in reads of `chunk`.
fn rebuild_alone(original: &str, chunk: usize, passes: usize) {
    let want = std::fs::read(original).expect("read the original");
    let Some(split) = aceapex::genome::split(&want) else {
        println!("rebuild alone: {original} is not modelled by genome mode");
        return;
    };
    let genome = &split.genome;
    let size = genome.total_len();
    // The bases cut into 16 KiB slices, as a read finds them in the block cache.
    const SLICE: usize = 16 << 10;
    let mut out: Vec<u8> = Vec::with_capacity(chunk);
    let mut whole = Vec::with_capacity(want.len());
    // GB per CPU-second of each pass after the first (which checks the bytes and faults its pages in).
    let mut speeds = Vec::new();
    for pass in 0..passes.max(1) {
        let (t, cpu) = (Instant::now(), thread_cpu_s());
        let mut off = 0u64;
        while off < size {
            let (b0, b1) = genome.base_range(off, chunk as u64);
            let (first, last) = (b0 as usize / SLICE, (b1 as usize).div_ceil(SLICE));
            let slices: Vec<&[u8]> = (first..last.max(first))
                .map(|k| &split.bases[(k * SLICE).max(b0 as usize)..((k + 1) * SLICE).min(b1 as usize)])
                .collect();
            out.clear();
            let n = genome
                .write_at(off, &mut out.spare_capacity_mut()[..chunk], BaseChunks::new(b0, &slices))
                .expect("rebuild");
            // SAFETY: `write_at` initialised the first `n` bytes of the spare capacity.
            unsafe { out.set_len(n) };
            if pass == 0 {
                whole.extend_from_slice(&out);
            }
            off += n as u64;
        }
        let (wall, cpu) = (t.elapsed().as_secs_f64(), thread_cpu_s() - cpu);
        if pass == 0 {
            assert!(whole == want, "the rebuilt bytes differ from {original}");
        } else {
            speeds.push(size as f64 / cpu / 1e9);
        }
        if passes <= 10 {
            println!(
                "rebuild alone pass {pass}: {:.2} GB/s wall, {:.2} GB/CPU-s (chunk {chunk})",
                size as f64 / wall / 1e9,
                size as f64 / cpu / 1e9
            );
        }
    }
    // The best pass is the one least disturbed by whatever else shares the machine.
    speeds.sort_by(f64::total_cmp);
    if let (Some(best), Some(median)) = (speeds.last(), speeds.get(speeds.len() / 2)) {
        println!("rebuild alone: best {best:.2}, median {median:.2} GB/CPU-s over {} passes", speeds.len());
    }
}

/// The filesystem passes over `inner` of the archive at `archive_path` (see the module docs).
fn serve(archive_path: &str, inner: &str, original: Option<&String>, chunk: usize, passes: usize) {
    let options = ArchiveOptions { cache_bytes: 2 << 30, decoder: DecoderChoice::Cpu, ..ArchiveOptions::default() };
    let archive = Arc::new(Archive::open_with(archive_path, options).expect("open the archive"));
    // No fills: the random reads below are to be served from the cache, not race a fill decoding the file again.
    let fs = AcxFs::new(Arc::clone(&archive), FsOptions { fill_max_bytes: 0, ..FsOptions::default() });
    let mut ino = 1u64;
    for part in inner.split('/').filter(|p| !p.is_empty()) {
        ino = fs.lookup(ino, part.as_bytes()).expect("path in the archive").ino;
    }
    let size = fs.getattr(ino).expect("getattr").size;

    let read_all = |chunk: usize| -> Vec<u8> {
        let fh = fs.open(ino, libc::O_RDONLY).expect("open").fh;
        let mut whole = Vec::with_capacity(size as usize);
        let mut buf = Vec::new();
        let mut off = 0u64;
        while off < size {
            fs.read(ino, fh, off, chunk as u32, &mut buf).expect("read");
            assert!(!buf.is_empty(), "short file at {off}");
            whole.extend_from_slice(&buf);
            off += buf.len() as u64;
        }
        fs.release(fh);
        whole
    };
    let t = Instant::now();
    let first = read_all(chunk);
    println!(
        "first pass (decodes): {:.1} MB/s; genome structure pieces decoded {}, held {}",
        size as f64 / t.elapsed().as_secs_f64() / 1e6,
        archive.genome_pieces_decoded(),
        archive.genome_pieces_held()
    );
    if let Some(original) = original {
        let want = std::fs::read(original).expect("read the original");
        assert!(first == want, "the bytes read differ from {original}");
        println!("bytes identical to {original}");
    }
    drop(first);

    let fh = fs.open(ino, libc::O_RDONLY).expect("open").fh;
    let mut buf = Vec::new();
    for pass in 0..passes {
        let (t, cpu) = (Instant::now(), thread_cpu_s());
        let mut off = 0u64;
        while off < size {
            fs.read(ino, fh, off, chunk as u32, &mut buf).expect("read");
            off += buf.len() as u64;
        }
        let (wall, cpu) = (t.elapsed().as_secs_f64(), thread_cpu_s() - cpu);
        println!(
            "pass {pass}: {:.0} MB/s wall, {:.0} MB/CPU-s (chunk {chunk}); structure pieces decoded so far {}",
            size as f64 / wall / 1e6,
            size as f64 / cpu / 1e6,
            archive.genome_pieces_decoded()
        );
    }
    // 1000 reads of 64 KiB at pseudo-random offsets (xorshift).
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let (t, cpu) = (Instant::now(), thread_cpu_s());
    for _ in 0..1000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        fs.read(ino, fh, x % size, 64 << 10, &mut buf).expect("read");
    }
    let (wall, cpu) = (t.elapsed().as_secs_f64(), thread_cpu_s() - cpu);
    println!("1000 random 64 KiB reads: {:.1} ms wall, {:.1} ms CPU", wall * 1e3, cpu * 1e3);
    fs.release(fh);
}
