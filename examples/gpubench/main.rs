//! GPU engine benchmark and bit-exactness check (docs/BENCH-GPU.md has the results and the command lines).
//!
//! ```text
//! gpubench ARCHIVE [--runs N] [--ranges N] [--latency N] [--contig N] [--big-gib G [--big-keep PATH]]
//!          [--big-cpu-check] [--json PATH] [--clocks]
//! ```
//!
//! 1. Reference: the CPU engine decodes the whole stream (all cores).
//! 2. Full decode on the device, output poisoned first: every block must match the CPU bytes and the index xxh3.
//! 3. Throughput: full device-resident decode (entropy decoding inside the timer), `--runs` timed runs after
//!    warm-up, each one re-checked bit-exact; the median gives GB/s. Then the same for variants that leave
//!    stages out (entropy only; entropy + parse without literal writes; parse with literals, no match copies)
//!    and the device→host transfer of the whole stream: the time breakdown.
//! 4. Seek: `--ranges` random byte ranges (1 B … 64 KiB) through the seek path, each compared with the CPU
//!    bytes; `--latency` random single cold blocks, request→bytes in host memory (host wall clock, including
//!    the xxh3 check) and device events, p50/p99; `--contig` runs of 1000 contiguous blocks, device time. All of
//!    it twice: seeking from the compressed archive, then through the resident parse of the whole archive (its
//!    match bytes poisoned, so the seeks must produce them).
//! 5. With `--big-gib G`: writes an archive of at least G GiB by repeating whole table groups of ARCHIVE (back
//!    distances are relative and every source lies in the same copy, so each repeated block decodes to the same
//!    bytes), then repeats 2–4 on it, checking against the index hashes and CPU random access.
//! 6. With `--clocks` (and ACEAPEX_GPU_K1_CLOCKS=1): the linear parse's chains, timed one by one (clocks.rs).

mod clocks;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use aceapex::engine::cpu::CpuEngine;
use aceapex::engine::gpu::{FullVariant, GpuEngine, ResidentSeeks, Resolve};
use aceapex::format::testkit::{file_entry, root_entry};
use aceapex::format::tree::{Entry, Tree};
use aceapex::format::writer::ArchiveWriter;
use aceapex::format::ArchiveData;
use serde_json::{json, Value};
use xxhash_rust::xxh3::xxh3_64;

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

struct Options {
    archive: PathBuf,
    runs: usize,
    ranges: usize,
    latency: usize,
    contig: usize,
    big_gib: f64,
    /// Only write the big archive and verify it with the CPU engine (a check of the generator, no GPU needed).
    big_cpu_check: bool,
    /// Where to write the big archive, kept after the run (default: a temporary file, removed).
    big_keep: Option<PathBuf>,
    /// Skip the CPU's whole-stream reference decode (archives of many GB): the full decode is then checked
    /// against the index's xxh3 of every block, and the ranges against CPU random access.
    no_reference: bool,
    json: Option<PathBuf>,
    /// Print the linear parse's chain times (clocks.rs).
    clocks: bool,
}

fn parse_args() -> BoxResult<Options> {
    let mut args = std::env::args().skip(1);
    let mut o = Options {
        archive: PathBuf::new(),
        runs: 20,
        ranges: 10_000,
        latency: 1000,
        contig: 20,
        big_gib: 0.0,
        big_cpu_check: false,
        big_keep: None,
        no_reference: false,
        json: None,
        clocks: false,
    };
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--runs" => o.runs = value()?.parse()?,
            "--ranges" => o.ranges = value()?.parse()?,
            "--latency" => o.latency = value()?.parse()?,
            "--contig" => o.contig = value()?.parse()?,
            "--big-gib" => o.big_gib = value()?.parse()?,
            "--json" => o.json = Some(value()?.into()),
            "--big-keep" => o.big_keep = Some(value()?.into()),
            "--big-cpu-check" => o.big_cpu_check = true,
            "--no-reference" => o.no_reference = true,
            "--clocks" => o.clocks = true,
            _ if o.archive.as_os_str().is_empty() => o.archive = a.into(),
            _ => return Err(format!("unexpected argument {a}").into()),
        }
    }
    if o.archive.as_os_str().is_empty() {
        return Err(
            "usage: gpubench ARCHIVE [--runs N] [--ranges N] [--latency N] [--contig N] [--big-gib G] [--no-reference] [--clocks]"
                .into(),
        );
    }
    Ok(o)
}

#[path = "../support/rng.rs"]
mod rng;
use rng::Rng;

fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn sorted(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(|a, b| a.total_cmp(b));
    v
}

/// The whole stream decoded by the CPU engine.
fn cpu_reference(data: &Arc<ArchiveData>) -> BoxResult<Vec<u8>> {
    let cpu = CpuEngine::new(data.clone());
    let mut stream = vec![0u8; data.footer.total_len as usize];
    let block = data.header.block_size() as usize;
    cpu.decode_sequential(0, data.block_count(), true, 64 << 20, |id, bytes| {
        let bytes = bytes?;
        let start = id as usize * block;
        stream[start..start + bytes.len()].copy_from_slice(bytes);
        Ok(())
    })?;
    Ok(stream)
}

/// Blocks whose bytes differ between `a` and the index hash (and `reference`, when given).
fn count_bad_blocks(data: &ArchiveData, a: &[u8], reference: Option<&[u8]>) -> u64 {
    let block = data.header.block_size() as usize;
    let mut bad = 0;
    for id in 0..data.block_count() {
        let start = id as usize * block;
        let end = start + data.block_len(id) as usize;
        let hash_ok = xxh3_64(&a[start..end]) == data.block_hash[id as usize];
        let ref_ok = reference.is_none_or(|r| r[start..end] == a[start..end]);
        if !hash_ok || !ref_ok {
            bad += 1;
        }
    }
    bad
}

/// Full device decode: correctness, throughput and the stage breakdown.
fn bench_full(gpu: &GpuEngine, data: &ArchiveData, reference: Option<&[u8]>, runs: usize) -> BoxResult<Value> {
    let total = data.footer.total_len as usize;
    let mut host = vec![0u8; total];
    let first = gpu.full_decode(FullVariant::Full, Some(0xA5))?;
    gpu.full_output(&mut host)?;
    let bad = count_bad_blocks(data, &host, reference);
    println!(
        "full decode: {} blocks, {bad} wrong, resolved by {:?}, {} resolve rounds (matches left after each: {:?}){}",
        data.block_count(),
        first.resolve.unwrap_or(Resolve::DEFAULT),
        first.rounds,
        first.left,
        first.levels.as_ref().map(|l| format!(", match levels copied: {}", l.copied)).unwrap_or_default()
    );
    if let Some(l) = &first.levels {
        let bands: Vec<String> = l.bands.iter().map(|(lo, n, p)| format!("{lo}+: {n} ({p})")).collect();
        println!(
            "  levels: {} epochs, {} copy_level + {} copy_tail launches; first epoch's levels (pieces) by pieces a \
             level: {}",
            l.epochs,
            l.level_launches,
            l.tail_launches,
            bands.join(", ")
        );
    }
    if bad != 0 {
        return Err(format!("{bad} blocks decoded wrong on the device").into());
    }
    let mut result = json!({ "blocks": data.block_count(), "bytes": total, "rounds": first.rounds });
    let variants = [
        ("entropy_only", FullVariant::EntropyOnly),
        ("parse_no_literal_writes", FullVariant::ParseNoLiterals),
        ("parse_with_literals", FullVariant::ParseOnly),
        ("full", FullVariant::Full),
    ];
    for (name, variant) in variants {
        for _ in 0..3 {
            gpu.full_decode(variant, None)?;
        }
        let mut times = Vec::with_capacity(runs);
        let (mut chase, mut resolve, mut copy, mut bucket) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for run in 0..runs {
            // Poison, decode, and (for the full variant) re-check every timed run bit-exact.
            let r = gpu.full_decode(variant, Some((run as u8).wrapping_mul(37) ^ 0x5A))?;
            times.push(r.device_ms as f64);
            chase.extend(r.chase_ms.map(f64::from));
            resolve.extend(r.resolve_ms.map(f64::from));
            copy.extend(r.copy_ms.map(f64::from));
            bucket.extend(r.bucket_ms.map(f64::from));
            if variant == FullVariant::Full {
                gpu.full_output(&mut host)?;
                let bad = count_bad_blocks(data, &host, reference);
                if bad != 0 {
                    return Err(format!("timed run {run}: {bad} blocks wrong").into());
                }
            }
        }
        let t = sorted(times);
        let median = percentile(&t, 0.5);
        if !resolve.is_empty() {
            let c = percentile(&sorted(resolve), 0.5);
            println!("  {:<24} median {c:9.3} ms  (match resolution alone, inside {name})", "resolve");
            result["resolve_median_ms"] = json!(c);
        }
        let levels = !copy.is_empty();
        if levels {
            let c = percentile(&sorted(copy), 0.5);
            println!("  {:<24} median {c:9.3} ms  (bucketing and per-level copies, inside {name})", "copy");
            result["copy_median_ms"] = json!(c);
        }
        if !bucket.is_empty() {
            let c = percentile(&sorted(bucket), 0.5);
            println!("  {:<24} median {c:9.3} ms  (of which the bucketing: level_starts, level_order)", "bucketing");
            result["bucket_median_ms"] = json!(c);
        }
        if !chase.is_empty() {
            let c = percentile(&sorted(chase), 0.5);
            let what = match (levels, first.resolve) {
                (true, _) => "the unlevelled matches",
                (false, Some(Resolve::Maps)) => "every match byte, after the maps",
                (false, _) => "what round 0 left",
            };
            println!("  {:<24} median {c:9.3} ms  (the chase of {what}, inside {name})", "chase");
            result["chase_median_ms"] = json!(c);
        }
        let gbps = total as f64 / (median * 1e-3) / 1e9;
        println!(
            "  {name:<24} median {median:9.3} ms  min {:9.3} ms  max {:9.3} ms  {gbps:8.1} GB/s",
            t[0],
            t[t.len() - 1]
        );
        result[name] = json!({ "median_ms": median, "min_ms": t[0], "max_ms": t[t.len() - 1], "gb_per_s": gbps });
    }
    let mut xfer = Vec::new();
    for _ in 0..5 {
        xfer.push(gpu.full_output(&mut host)? as f64);
    }
    let x = percentile(&sorted(xfer), 0.5);
    println!(
        "  {:<24} median {x:9.3} ms  {:8.1} GB/s (device->pinned host)",
        "transfer_to_host",
        total as f64 / (x * 1e-3) / 1e9
    );
    result["transfer_to_host"] = json!({ "median_ms": x, "gb_per_s": total as f64 / (x * 1e-3) / 1e9 });
    Ok(result)
}

/// Decodes the blocks covering `[pos, pos + len)` on the GPU and returns those bytes.
fn gpu_range(gpu: &GpuEngine, data: &ArchiveData, pos: u64, len: u64) -> BoxResult<(Vec<u8>, f32)> {
    let log = data.header.block_log;
    let (first, last) = (pos >> log, (pos + len - 1) >> log);
    let ids: Vec<u64> = (first..=last).collect();
    let mut bufs: Vec<Vec<u8>> = ids.iter().map(|&id| vec![0u8; data.block_len(id) as usize]).collect();
    let mut outs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
    let timing = gpu.decode_blocks_timed(&ids, &mut outs)?;
    let joined: Vec<u8> = bufs.concat();
    let skip = (pos - (first << log)) as usize;
    Ok((joined[skip..skip + len as usize].to_vec(), timing.device_ms))
}

/// Seek path (`path` names it in the output): random ranges against the reference, single-block latency,
/// 1000-block runs.
fn bench_seek(
    gpu: &GpuEngine,
    data: &Arc<ArchiveData>,
    reference: Option<&[u8]>,
    o: &Options,
    path: &str,
) -> BoxResult<Value> {
    let total = data.footer.total_len;
    let nblocks = data.block_count();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let cpu = CpuEngine::new(data.clone());
    // Ranges: compared with the reference stream, or (big archives) with CPU random access.
    let started = Instant::now();
    let mut checked_bytes = 0u64;
    for i in 0..o.ranges {
        let len = 1 + rng.below(if i % 4 == 0 { 65536 } else { 4096 }).min(total - 1);
        let pos = rng.below(total - len + 1);
        let (bytes, _) = gpu_range(gpu, data, pos, len)?;
        let expected = match reference {
            Some(r) => r[pos as usize..(pos + len) as usize].to_vec(),
            None => {
                let mut v = vec![0u8; len as usize];
                cpu.resolve_unverified(pos, &mut v)?;
                v
            }
        };
        if bytes != expected {
            return Err(format!("range {i} at {pos}+{len}: GPU bytes differ from the CPU's").into());
        }
        checked_bytes += len;
    }
    println!(
        "seek ({path}): {} random ranges ({checked_bytes} bytes) equal the CPU bytes ({:.1} s)",
        o.ranges,
        started.elapsed().as_secs_f64()
    );

    // Single cold blocks: request -> verified bytes in host memory.
    let mut wall = Vec::new();
    let mut dev = Vec::new();
    let mut buf = vec![0u8; data.header.block_size() as usize];
    for _ in 0..20 {
        let id = rng.below(nblocks);
        let len = data.block_len(id) as usize;
        gpu.decode_blocks_timed(&[id], &mut [&mut buf[..len]])?;
    }
    gpu.seek_profile(true)?;
    for _ in 0..o.latency {
        let id = rng.below(nblocks);
        let len = data.block_len(id) as usize;
        let t = Instant::now();
        let timing = gpu.decode_blocks_timed(&[id], &mut [&mut buf[..len]])?;
        wall.push(t.elapsed().as_secs_f64() * 1e6);
        dev.push(timing.device_ms as f64 * 1e3);
    }
    let (wall, dev) = (sorted(wall), sorted(dev));
    println!(
        "one block ({path}): host p50 {:.1} us p99 {:.1} us | device p50 {:.1} us p99 {:.1} us ({} cold random \
         blocks)",
        percentile(&wall, 0.5),
        percentile(&wall, 0.99),
        percentile(&dev, 0.5),
        percentile(&dev, 0.99),
        o.latency
    );
    print_profile(gpu, &format!("one block, {path}"))?;

    // 1000 contiguous blocks.
    let run = 1000.min(nblocks);
    let mut contig = Vec::new();
    let mut contig_wall = Vec::new();
    let mut bufs: Vec<Vec<u8>> = Vec::new();
    for _ in 0..o.contig {
        let first = rng.below(nblocks - run + 1);
        let ids: Vec<u64> = (first..first + run).collect();
        bufs.resize_with(ids.len(), Vec::new);
        for (b, &id) in bufs.iter_mut().zip(&ids) {
            b.resize(data.block_len(id) as usize, 0);
        }
        let mut outs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
        let t = Instant::now();
        let timing = gpu.decode_blocks_timed(&ids, &mut outs)?;
        contig_wall.push(t.elapsed().as_secs_f64() * 1e3);
        contig.push(timing.device_ms as f64);
        if let Some(r) = reference {
            let block = data.header.block_size() as usize;
            let start = first as usize * block;
            if bufs.concat() != r[start..start + bufs.iter().map(|b| b.len()).sum::<usize>()] {
                return Err("contiguous run differs from the CPU bytes".into());
            }
        }
    }
    print_profile(gpu, &format!("contiguous run, {path}"))?;
    let (contig, contig_wall) = (sorted(contig), sorted(contig_wall));
    println!(
        "{run} contiguous blocks ({path}): device median {:.3} ms (min {:.3}), host incl. verify {:.3} ms ({} runs)",
        percentile(&contig, 0.5),
        contig.first().copied().unwrap_or(f64::NAN),
        percentile(&contig_wall, 0.5),
        o.contig
    );
    Ok(json!({
        "ranges_checked": o.ranges,
        "range_bytes_checked": checked_bytes,
        "one_block_host_us": { "p50": percentile(&wall, 0.5), "p99": percentile(&wall, 0.99), "n": o.latency },
        "one_block_device_us": { "p50": percentile(&dev, 0.5), "p99": percentile(&dev, 0.99) },
        "contig_blocks": run,
        "contig_device_ms": { "median": percentile(&contig, 0.5), "min": contig.first() },
        "contig_host_ms_median": percentile(&contig_wall, 0.5),
    }))
}

/// With ACEAPEX_GPU_SEEK_PROFILE=1: the average device µs per seek sequence by stage since the last call.
fn print_profile(gpu: &GpuEngine, what: &str) -> BoxResult<()> {
    if let Some(stages) = gpu.seek_profile(true)? {
        let total: f64 = stages.iter().map(|s| s.1).sum();
        // The decode on the device: every stage before the copy into pinned host memory ("to host", "reset").
        let on_device: f64 = stages.iter().take_while(|s| s.0 != "to host").map(|s| s.1).sum();
        let parts: Vec<String> = stages.iter().map(|(s, us)| format!("{s} {us:.1}")).collect();
        println!(
            "  seek stages, {what} (avg device us per sequence, no graphs): {} | sum {total:.1} | decoded on the \
             device (before the copy to host) {on_device:.1}",
            parts.join(", ")
        );
    }
    Ok(())
}

/// Writes an archive of at least `gib` GiB by repeating whole table groups of `src`.
fn write_big(src: &ArchiveData, gib: f64, path: &Path) -> BoxResult<u64> {
    let h = src.header;
    let group = 1u64 << h.group_log;
    let full_blocks = src.footer.total_len >> h.block_log;
    let span = full_blocks / group * group;
    if span == 0 {
        return Err("archive too small to repeat (needs one full table group of full blocks)".into());
    }
    let want_blocks = ((gib * (1u64 << 30) as f64) as u64).div_ceil(h.block_size());
    let copies = want_blocks.div_ceil(span);
    let mut writer = ArchiveWriter::create(path, h)?;
    for _ in 0..copies {
        for id in 0..span {
            writer.push_block(&src.payload(id)?, src.block_hash[id as usize])?;
        }
    }
    let total_len = copies * span * h.block_size();
    let tables: Vec<_> = (0..copies).flat_map(|_| src.tables[..(span / group) as usize].iter().cloned()).collect();
    let root = Entry { mtime_sec: 1_700_000_000, ..root_entry() };
    let file = Entry { mtime_sec: 1_700_000_000, ..file_entry("big.bin", 0, total_len) };
    let tree = Tree::from_entries(vec![root, file])?;
    writer.finish(total_len, &tables, &tree)?;
    Ok(total_len)
}

fn bench_archive(path: &Path, o: &Options, with_reference: bool) -> BoxResult<Value> {
    let t = Instant::now();
    let data = Arc::new(ArchiveData::open(path)?);
    let file_len = data.footer.file_len;
    println!(
        "archive {}: {} bytes -> {file_len} bytes, {} blocks of {} B, {} slices of {} B, K={}, max_depth={}, \
         group_log={}, {} match bytes",
        path.display(),
        data.footer.total_len,
        data.block_count(),
        data.header.block_size(),
        data.global_slice_count(),
        data.header.slice_size(),
        data.header.rans_lanes,
        data.header.max_depth,
        data.header.group_log,
        aceapex::engine::gpu::prep::unit_meta(&data).match_bytes
    );
    let reference = if with_reference {
        let t = Instant::now();
        let r = cpu_reference(&data)?;
        println!("cpu reference decode: {:.2} s", t.elapsed().as_secs_f64());
        Some(r)
    } else {
        None
    };
    let t_gpu = Instant::now();
    let gpu = GpuEngine::try_new(data.clone())?;
    println!(
        "gpu: {} (open + compile + upload {:.2} s; total setup {:.2} s)",
        gpu.description(),
        t_gpu.elapsed().as_secs_f64(),
        t.elapsed().as_secs_f64()
    );
    let full = bench_full(&gpu, &data, reference.as_deref(), o.runs)?;
    if o.clocks {
        clocks::report(&gpu, &data)?;
    }
    // Seeks from the compressed archive (parsing slices level by level), then through the resident parse of the
    // whole archive, made here with every match byte of the resident stream poisoned: only literals are there,
    // so every other byte a seek returns was produced by that seek's chase (and is checked).
    gpu.set_resident_seeks(ResidentSeeks::Off)?;
    let seek = bench_seek(&gpu, &data, reference.as_deref(), o, "from the compressed archive")?;
    gpu.set_resident_seeks(ResidentSeeks::Auto)?;
    let mut parses = Vec::new();
    for run in 0..5u8 {
        parses.push(gpu.full_decode(FullVariant::ParseOnly, Some(0xA5 ^ run))?.device_ms as f64);
    }
    let parse_ms = percentile(&sorted(parses), 0.5);
    println!("resident parse of every slice (made once, before the first resident seek): median {parse_ms:.3} ms");
    let resident = bench_seek(&gpu, &data, reference.as_deref(), o, "resident parse")?;
    Ok(json!({
        "archive": path.display().to_string(),
        "total_len": data.footer.total_len,
        "file_len": file_len,
        "blocks": data.block_count(),
        "block_size": data.header.block_size(),
        "slice_size": data.header.slice_size(),
        "rans_lanes": data.header.rans_lanes,
        "max_depth": data.header.max_depth,
        "gpu": gpu.description(),
        "full": full,
        "seek": seek,
        "resident_parse_ms": parse_ms,
        "seek_resident": resident,
    }))
}

fn main() {
    if let Err(e) = run() {
        eprintln!("gpubench: {e}");
        std::process::exit(1);
    }
}

fn run() -> BoxResult<()> {
    if std::env::args().nth(1).as_deref() == Some("--nvrtc-check") {
        // Compiles the kernels with NVRTC only (no GPU needed): a syntax check of kernels/decode.cu.
        let ptx = aceapex::engine::gpu::compile_check("sm_90")?;
        println!("kernels compile for sm_90: {ptx} bytes of PTX");
        return Ok(());
    }
    let o = parse_args()?;
    if o.big_cpu_check {
        let big = std::env::temp_dir().join("gpubench-big-check.acx");
        let total = write_big(&ArchiveData::open(&o.archive)?, o.big_gib.max(0.01), &big)?;
        let data = Arc::new(ArchiveData::open(&big)?);
        let errors = CpuEngine::new(data.clone()).verify_all();
        println!("big archive check: {total} bytes, {} blocks, {} CPU verify errors", data.block_count(), errors.len());
        let _ = std::fs::remove_file(&big);
        return if errors.is_empty() { Ok(()) } else { Err(format!("{}", errors[0]).into()) };
    }
    let mut report = json!({ "corpus": bench_archive(&o.archive, &o, !o.no_reference)? });
    if o.big_gib > 0.0 {
        let big = o.big_keep.clone().unwrap_or_else(|| std::env::temp_dir().join("gpubench-big.acx"));
        let t = Instant::now();
        let src = ArchiveData::open(&o.archive)?;
        let total = write_big(&src, o.big_gib, &big)?;
        println!("\nbig archive: {total} bytes written in {:.1} s", t.elapsed().as_secs_f64());
        // Fewer repetitions on the big archive: its ranges are checked against CPU random access, which is slow.
        let small = Options {
            ranges: o.ranges.min(500),
            runs: o.runs.min(5),
            latency: o.latency.min(300),
            contig: o.contig.min(5),
            ..o_clone(&o)
        };
        report["big"] = bench_archive(&big, &small, false)?;
        if o.big_keep.is_none() {
            let _ = std::fs::remove_file(&big);
        }
    }
    if let Some(path) = &o.json {
        std::fs::write(path, serde_json::to_string_pretty(&report)?)?;
    }
    Ok(())
}

fn o_clone(o: &Options) -> Options {
    Options { archive: o.archive.clone(), json: o.json.clone(), big_keep: o.big_keep.clone(), ..*o }
}
