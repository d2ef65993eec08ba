//! End-to-end tests of the reader: hand-built archives (token programs → `encode_block` → writer → open) read
//! back through every path, against the reference bytes; hostile images; corrupt blocks; depth bounds.

use std::path::{Path, PathBuf};

use super::*;
use crate::engine::cpu::CpuEngine;
use crate::format::sections::parse_archive;
use crate::format::testkit::{small_header, Plan, Rng};
use crate::format::{Footer, FOOTER_LEN};

fn cpu_options(cache_bytes: u64) -> ArchiveOptions {
    ArchiveOptions { cache_bytes, decoder: DecoderChoice::Cpu, ..ArchiveOptions::default() }
}

fn write_plan(dir: &Path, name: &str, plan: &Plan) -> PathBuf {
    let path = dir.join(name);
    plan.write(&path);
    path
}

/// Reads random ranges through `read_stream` and compares with the reference.
fn check_random_reads(archive: &Archive, reference: &[u8], rng: &mut Rng, reads: usize) {
    let total = reference.len() as u64;
    for _ in 0..reads {
        let pos = rng.range(0, total);
        let len = rng.range(0, (total - pos).min(20_000)) as usize;
        let mut buf = vec![0u8; len];
        archive.read_stream(pos, &mut buf).unwrap();
        assert!(buf == reference[pos as usize..pos as usize + len], "read {pos}+{len} differs");
    }
}

#[test]
fn random_archives_read_back_exactly_through_every_path() {
    let dir = tempfile::tempdir().unwrap();
    let lanes = [1u8, 2];
    let depths = [1u8, 2, 3, 8, 255];
    // Seeds 12 and up mix reverse-complement matches into the program (format version 5).
    for seed in 0..18u64 {
        let mut rng = Rng(seed);
        let header = small_header(depths[seed as usize % depths.len()], lanes[seed as usize % lanes.len()]);
        let total = match seed {
            0 => 0,
            1 => 4096,
            2 => 3 * 4096 + 1,
            _ => rng.range(1, 60_000) as usize,
        };
        let plan =
            if seed >= 12 { Plan::random_rc(header, total, &mut rng) } else { Plan::random(header, total, &mut rng) };
        if seed >= 12 {
            let rc = plan.blocks.iter().flat_map(|b| &b.tokens).filter(|t| t.rc).count();
            assert!(rc * 5 > plan.blocks.len(), "seed {seed}: {rc} RC matches in {} blocks", plan.blocks.len());
        }
        let path = write_plan(dir.path(), &format!("r{seed}.acx"), &plan);

        // Cold: no cache, every cross-block source resolved through tokens.
        let cold = Archive::open_with(&path, cpu_options(0)).unwrap();
        check_random_reads(&cold, &plan.stream, &mut rng, 40);
        // Warm: a cache larger than the stream.
        let warm = Archive::open_with(&path, cpu_options(1 << 24)).unwrap();
        check_random_reads(&warm, &plan.stream, &mut rng, 40);
        assert_eq!(warm.engine_name(), "cpu");

        // Every block alone, in reverse (nothing useful cached before it).
        for id in (0..cold.data().block_count()).rev() {
            let start = cold.data().block_start(id) as usize;
            let block = cold.block(id).unwrap();
            assert_eq!(&block[..], &plan.stream[start..start + block.len()], "block {id}");
        }

        // Sequential decode of the whole stream and of an inner range.
        let mut seq = Vec::new();
        cold.decode_range_sequential(0, total as u64, |b| {
            seq.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
        assert!(seq == plan.stream, "sequential decode differs (seed {seed})");
        if total > 10 {
            let (a, b) = (total / 3, total - total / 4);
            let mut part = Vec::new();
            cold.decode_range_sequential(a as u64, (b - a) as u64, |x| {
                part.extend_from_slice(x);
                Ok(())
            })
            .unwrap();
            assert!(part == plan.stream[a..b]);
        }

        // Token-level resolution of arbitrary ranges, no block decoded whole.
        let engine = CpuEngine::new(cold.data().clone());
        for _ in 0..20 {
            let pos = rng.range(0, total as u64);
            let len = rng.range(0, (total as u64 - pos).min(5000)) as usize;
            let mut buf = vec![0u8; len];
            engine.resolve_unverified(pos, &mut buf).unwrap();
            assert!(buf == plan.stream[pos as usize..pos as usize + len]);
        }

        assert!(cold.verify().is_empty(), "verify found errors in a good archive (seed {seed})");
    }
}

#[test]
fn engine_batches_of_scattered_blocks_match_the_reference() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(77);
    let plan = Plan::random(small_header(6, 2), 100_000, &mut rng);
    let path = write_plan(dir.path(), "b.acx", &plan);
    let data = Arc::new(ArchiveData::open(&path).unwrap());
    let engine = CpuEngine::new(data.clone());
    let ids = [0u64, 3, 4, 5, 6, 7, 8, 12, 20, 21, 24];
    let mut bufs: Vec<Vec<u8>> = ids.iter().map(|&id| vec![0u8; data.block_len(id) as usize]).collect();
    let mut outs: Vec<&mut [u8]> = bufs.iter_mut().map(|b| b.as_mut_slice()).collect();
    engine.decode_blocks(&ids, &mut outs).unwrap();
    for (&id, buf) in ids.iter().zip(&bufs) {
        let start = data.block_start(id) as usize;
        assert_eq!(&buf[..], &plan.stream[start..start + buf.len()]);
    }
    // Wrongly sized outputs and out-of-range ids are errors, not panics.
    let mut short = vec![0u8; 10];
    assert!(engine.decode_blocks(&[1], &mut [short.as_mut_slice()]).is_err());
    assert!(engine.decode_blocks(&[999], &mut [short.as_mut_slice()]).is_err());
}

#[test]
fn consecutive_sequential_runs_continue_one_window() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Plan::random(small_header(3, 2), 60_000, &mut Rng(8));
    let path = write_plan(dir.path(), "s.acx", &plan);
    let archive = Archive::open_with(&path, cpu_options(0)).unwrap();
    let read = |start: usize, len: usize| {
        let mut out = Vec::new();
        archive
            .decode_range_sequential(start as u64, len as u64, |b| {
                out.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
        assert!(out == plan.stream[start..start + len], "range {start}+{len}");
    };
    // Three consecutive files: the blocks they share at their boundaries are decoded once.
    read(0, 10_000);
    read(10_000, 15_000);
    read(25_000, 35_000);
    assert_eq!(archive.stats().decodes.get("cpu"), Some(&15));
    // A fresh archive reading mid-stream decodes only the range's own blocks (never the stream before it): its
    // older sources are resolved through tokens.
    let fresh = Archive::open_with(&path, cpu_options(0)).unwrap();
    let mut out = Vec::new();
    fresh
        .decode_range_sequential(40_000, 10_000, |b| {
            out.extend_from_slice(b);
            Ok(())
        })
        .unwrap();
    assert!(out == plan.stream[40_000..50_000]);
    assert_eq!(fresh.stats().decodes.get("cpu"), Some(&4)); // blocks 9 ..= 12

    // Going back, repeating, and jumping all still give the right bytes.
    for (start, len) in [(5, 100), (30_000, 30_000), (30_000, 30_000), (59_999, 1), (0, 60_000), (4096, 0)] {
        read(start, len);
    }
}

#[test]
fn sequential_decoding_with_a_tiny_window_gathers_evicted_sources() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Plan::random(small_header(6, 2), 150_000, &mut Rng(31));
    let path = write_plan(dir.path(), "w.acx", &plan);
    let data = Arc::new(ArchiveData::open(&path).unwrap());
    for (window_blocks, parallel, first) in [(1u64, true, 0u64), (2, true, 5), (3, false, 0), (64, true, 20)] {
        let engine = CpuEngine::new(data.clone());
        let mut out = Vec::new();
        engine
            .decode_sequential(first, data.block_count(), parallel, window_blocks * 4096, |_, b| {
                out.extend_from_slice(b?);
                Ok(())
            })
            .unwrap();
        assert!(out == plan.stream[first as usize * 4096..], "window {window_blocks}, parallel {parallel}");
    }
}

/// Block 0 literals; block k (1..=levels) copies block k−1 from 4096 + 5 bytes back (sources straddle two
/// blocks), so the bytes of block k have depth k.
fn chain_plan(max_depth: u8, levels: usize) -> Plan {
    let mut plan = Plan::new(small_header(max_depth, 2));
    let mut rng = Rng(5);
    let first: Vec<u8> = (0..4096).map(|_| rng.next_u64() as u8).collect();
    plan.literals(&first[..5]);
    plan.literals(&first[5..]);
    for _ in 0..levels {
        plan.literals(&[0x55; 5]);
        plan.fill(4096, 4091);
    }
    plan
}

#[test]
fn deep_chains_resolve_within_the_bound() {
    let dir = tempfile::tempdir().unwrap();
    let plan = chain_plan(10, 10);
    assert_eq!(plan.depth.iter().max(), Some(&10));
    let path = write_plan(dir.path(), "chain.acx", &plan);
    let archive = Archive::open_with(&path, cpu_options(0)).unwrap();
    let last = archive.block(10).unwrap();
    assert_eq!(&last[..], &plan.stream[10 * 4096..]);
    let mut buf = vec![0u8; 300];
    archive.read_stream(9 * 4096 - 100, &mut buf).unwrap();
    assert_eq!(&buf[..], &plan.stream[9 * 4096 - 100..9 * 4096 + 200]);
}

#[test]
fn a_closure_plan_ends_at_a_level_held_before_it_began() {
    let dir = tempfile::tempdir().unwrap();
    let plan = chain_plan(10, 10);
    let path = write_plan(dir.path(), "chain.acx", &plan);
    let engine = CpuEngine::new(Arc::new(ArchiveData::open(&path).unwrap()));
    let mut first = vec![0u8; 4096];
    let (cold, _) = engine.decode_block_stats(10, &mut first).unwrap();
    assert!(cold.levels.len() >= 10 && cold.slices() >= 10, "{cold:?}");
    // The same block again: its slices and every source slice are held, so the plan ends after level 0 (and
    // parses nothing); the resolution finds every slice in the LRU.
    let mut again = vec![0u8; 4096];
    let (warm, _) = engine.decode_block_stats(10, &mut again).unwrap();
    assert_eq!((warm.levels.len(), warm.slices()), (1, 0), "{warm:?}");
    assert_eq!(engine.slices_parsed(), cold.slices() as u64);
    assert_eq!(&again[..], &plan.stream[10 * 4096..]);
    assert_eq!(first, again);
}

#[test]
fn exceeding_the_depth_bound_is_a_corrupt_block() {
    let dir = tempfile::tempdir().unwrap();
    // The program needs depth 10 but the header promises 9.
    let plan = chain_plan(9, 10);
    assert_block_10_exceeds_depth_9(dir.path(), "deep.acx", &plan);
}

/// Blocks 0..10 of `plan` (4 KiB blocks, header depth 9) read; block 10 needs depth 10 and is refused, both as a
/// block and by token-level resolution.
fn assert_block_10_exceeds_depth_9(dir: &std::path::Path, name: &str, plan: &Plan) {
    let path = write_plan(dir, name, plan);
    let archive = Archive::open_with(&path, cpu_options(0)).unwrap();
    for id in 0..10 {
        assert!(archive.block(id).is_ok(), "block {id} is within the bound");
    }
    match archive.block(10) {
        Err(Error::CorruptBlock { source: DecodeError::DepthExceeded { bound: 9, .. }, .. }) => {}
        other => panic!("expected DepthExceeded, got {other:?}"),
    }
    // Token-level resolution refuses too.
    let engine = CpuEngine::new(archive.data().clone());
    let mut buf = vec![0u8; 100];
    assert!(engine.resolve_unverified(10 * 4096 + 100, &mut buf).is_err());
}

/// Block 0 random bases; block k (1..=levels) is the reverse complement of block k − 1 (`rc_at(k)`) or a copy
/// of it, each reading its source from block k − 1 and the first bytes of block k (five literals, then a match
/// whose source ends at the block's third byte), so the bytes of block k have depth k.
fn rc_chain_plan(max_depth: u8, levels: usize, rc_at: impl Fn(usize) -> bool) -> Plan {
    let mut plan = Plan::new(small_header(max_depth, 2));
    let mut rng = Rng(6);
    let first: Vec<u8> = (0..4096).map(|_| b"ACGT"[rng.range(0, 3) as usize]).collect();
    plan.literals(&first);
    for k in 1..=levels {
        plan.literals(b"GATTA");
        if rc_at(k) {
            plan.fill_rc(3, 4091);
        } else {
            plan.fill(4096, 4091);
        }
    }
    plan
}

/// Reads every block cold (no cache: cross-block sources through tokens), the whole stream, and ranges through
/// token resolution, against the program's reference bytes.
fn check_cold_reads(plan: &Plan, path: &Path) {
    let archive = Archive::open_with(path, cpu_options(0)).unwrap();
    for id in (0..archive.data().block_count()).rev() {
        let start = archive.data().block_start(id) as usize;
        assert_eq!(&archive.block(id).unwrap()[..], &plan.stream[start..start + 4096], "block {id}");
    }
    let mut all = vec![0u8; plan.stream.len()];
    archive.read_stream(0, &mut all).unwrap();
    assert!(all == plan.stream);
    let engine = CpuEngine::new(archive.data().clone());
    let total = plan.stream.len() as u64;
    for (pos, len) in [(4096, 10), (4099, 7), (5000, 3000), (total - 4096, 4096), (total - 3, 3), (8190, 4)] {
        let mut buf = vec![0u8; len];
        engine.resolve_unverified(pos, &mut buf).unwrap();
        assert_eq!(&buf[..], &plan.stream[pos as usize..pos as usize + len], "range {pos}+{len}");
    }
}

#[test]
fn rc_chains_compose_complements_within_the_depth_bound() {
    let dir = tempfile::tempdir().unwrap();
    // Whole blocks as reverse complements of the block before (source ends at its last byte): two hops give the
    // original back, three its reverse complement — checked on the bytes the archive returns, not only against
    // the program.
    let mut plan = Plan::new(small_header(4, 2));
    let mut rng = Rng(9);
    let first: Vec<u8> = (0..4096).map(|_| b"ACGTN"[rng.range(0, 4) as usize]).collect();
    plan.literals(&first);
    for _ in 0..3 {
        plan.fill_rc(1, 4096);
    }
    let path = write_plan(dir.path(), "rc3.acx", &plan);
    let archive = Archive::open_with(&path, cpu_options(0)).unwrap();
    let rc_first: Vec<u8> = first.iter().rev().map(|&b| crate::codec::block::COMPLEMENT[b as usize]).collect();
    assert_eq!(&archive.block(1).unwrap()[..], &rc_first[..]);
    assert_eq!(&archive.block(2).unwrap()[..], &first[..]);
    assert_eq!(&archive.block(3).unwrap()[..], &rc_first[..]);
    let mut piece = vec![0u8; 100];
    archive.read_stream(3 * 4096 + 1000, &mut piece).unwrap();
    assert_eq!(piece, rc_first[1000..1100]);
    check_cold_reads(&plan, &path);

    // Chains of straddling sources mixing both kinds, depth 10 under a bound of 10.
    for (name, rc_at) in [("all", (|_| true) as fn(usize) -> bool), ("odd", |k| k % 2 == 1), ("third", |k| k % 3 == 0)]
    {
        let plan = rc_chain_plan(10, 10, rc_at);
        assert_eq!(plan.depth.iter().max(), Some(&10), "{name}");
        let path = write_plan(dir.path(), &format!("chain-{name}.acx"), &plan);
        check_cold_reads(&plan, &path);
        assert!(Archive::open_with(&path, cpu_options(0)).unwrap().verify().is_empty(), "{name}");
    }
}

#[test]
fn rc_chains_past_the_depth_bound_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    // The program needs depth 10 but the header promises 9.
    let plan = rc_chain_plan(9, 10, |k| k % 2 == 0);
    assert_block_10_exceeds_depth_9(dir.path(), "deep-rc.acx", &plan);
}

#[test]
fn periodic_fills_across_block_boundaries() {
    let dir = tempfile::tempdir().unwrap();
    let mut plan = Plan::new(small_header(4, 2));
    let lits: Vec<u8> = (0..4096u32).map(|i| (i * 7 % 251) as u8).collect();
    plan.literals(&lits);
    // Block 1: the period is the last 3 bytes of block 0, repeated.
    plan.fill(3, 1000);
    // Period of 1500 bytes starting in block 0 and running into block 1.
    plan.fill(1500, 3000);
    plan.literals(b"xy");
    plan.fill(1, 94); // run of 'y'
                      // Block 2: a period straddling blocks 0/1, one byte.
    plan.fill(4096 + 2, 4096);
    // Block 3: short tail from far back.
    plan.fill(3 * 4096 - 10, 50);
    let path = write_plan(dir.path(), "p.acx", &plan);
    let archive = Archive::open_with(&path, cpu_options(0)).unwrap();
    let mut all = vec![0u8; plan.stream.len()];
    archive.read_stream(0, &mut all).unwrap();
    assert!(all == plan.stream);
    let engine = CpuEngine::new(archive.data().clone());
    for (pos, len) in [(4096, 10), (4099, 7), (5096, 3000), (8192, 4096), (8190, 4), (3 * 4096, 50)] {
        let mut buf = vec![0u8; len];
        engine.resolve_unverified(pos, &mut buf).unwrap();
        assert_eq!(&buf[..], &plan.stream[pos as usize..pos as usize + len], "range {pos}+{len}");
    }
}

#[test]
fn read_file_semantics() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Plan::random(small_header(8, 2), 20_000, &mut Rng(9));
    let path = write_plan(dir.path(), "f.acx", &plan);
    let archive = Archive::open(&path).unwrap(); // Auto: no GPU here, so the CPU serves.
    let tree = archive.tree();
    let rest = tree.resolve_path(b"d/rest").unwrap();
    let third = 20_000 / 3;
    let mut buf = vec![0u8; 100];
    assert_eq!(archive.read_file(rest, 0, &mut buf).unwrap(), 100);
    assert_eq!(&buf[..], &plan.stream[third..third + 100]);
    // Short read at the end, 0 past it.
    let size = 20_000 - third as u64;
    assert_eq!(archive.read_file(rest, size - 30, &mut buf).unwrap(), 30);
    assert_eq!(&buf[..30], &plan.stream[20_000 - 30..]);
    assert_eq!(archive.read_file(rest, size, &mut buf).unwrap(), 0);
    assert_eq!(archive.read_file(rest, u64::MAX, &mut buf).unwrap(), 0);
    let empty = tree.resolve_path(b"d/empty").unwrap();
    assert_eq!(archive.read_file(empty, 0, &mut buf).unwrap(), 0);
    assert!(matches!(archive.read_file(0, 0, &mut buf), Err(Error::IsDirectory(_))));
    assert!(matches!(archive.read_file(999, 0, &mut buf), Err(Error::NotFound(_))));
    let link = tree.resolve_path(b"d/link").unwrap();
    assert!(archive.read_file(link, 0, &mut buf).is_err());
    assert!(archive.read_stream(19_990, &mut buf).is_err(), "range past the stream");
    assert!(archive.block(archive.data().block_count()).is_err());
}

#[test]
fn prefetch_decodes_once_and_reads_hit() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Plan::random(small_header(8, 2), 40_000, &mut Rng(3));
    let path = write_plan(dir.path(), "c.acx", &plan);
    let archive = Archive::open_with(&path, cpu_options(1 << 24)).unwrap();
    archive.prefetch(&[2, 3, 4, 4, 999]);
    assert_eq!(archive.stats().decodes.get("cpu"), Some(&3));
    for id in [2, 3, 4] {
        archive.block(id).unwrap();
    }
    let stats = archive.stats();
    assert_eq!((stats.hits, stats.decodes.get("cpu").copied()), (3, Some(3)));
    assert_eq!(stats.entries, 3);
}

#[test]
fn concurrent_readers_get_correct_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Plan::random(small_header(12, 2), 200_000, &mut Rng(11));
    let path = write_plan(dir.path(), "t.acx", &plan);
    // A small cache so that threads race on misses and evictions.
    let archive = Archive::open_with(&path, cpu_options(5 * 4096)).unwrap();
    std::thread::scope(|s| {
        for t in 0..6 {
            let (archive, plan) = (&archive, &plan);
            s.spawn(move || check_random_reads(archive, &plan.stream, &mut Rng(100 + t), 60));
        }
    });
}

/// Blocks 0..5, each literals and in-block matches only, so a bad block affects nobody else.
fn independent_blocks_plan() -> Plan {
    let mut plan = Plan::new(small_header(4, 2));
    let mut rng = Rng(21);
    for _ in 0..6 {
        let lits: Vec<u8> = (0..100).map(|_| rng.next_u64() as u8).collect();
        plan.literals(&lits);
        for _ in 0..20 {
            plan.fill(rng.range(1, 100), 150);
            plan.literals(&[rng.next_u64() as u8; 3]);
        }
        let room = plan.room();
        plan.fill(50, room);
    }
    plan
}

#[test]
fn a_corrupt_block_fails_alone() {
    let dir = tempfile::tempdir().unwrap();
    let plan = independent_blocks_plan();
    let path = write_plan(dir.path(), "bad.acx", &plan);
    let data = ArchiveData::open(&path).unwrap();
    let (from, to) = (data.payload_offset(2) as usize, data.payload_end[2] as usize);
    drop(data);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[(from + to) / 2] ^= 0x24;
    std::fs::write(&path, &bytes).unwrap();

    let archive = Archive::open_with(&path, cpu_options(1 << 20)).unwrap();
    match archive.block(2) {
        Err(Error::CorruptBlock { block: 2, offset, path: p, .. }) => {
            assert_eq!((offset, p), (from as u64, path.clone()));
        }
        other => panic!("expected CorruptBlock for block 2, got {other:?}"),
    }
    for id in [0, 1, 3, 4, 5] {
        let start = id as usize * 4096;
        assert_eq!(&archive.block(id).unwrap()[..], &plan.stream[start..start + 4096]);
    }
    let mut buf = vec![0u8; 3 * 4096];
    assert!(matches!(archive.read_stream(4096, &mut buf), Err(Error::CorruptBlock { block: 2, .. })));
    // A batch containing the bad block still delivers its neighbours.
    archive.prefetch(&[1, 2, 3]);
    let errors = archive.verify();
    assert_eq!(errors.len(), 1, "{errors:?}");
    assert!(matches!(errors[0], Error::CorruptBlock { block: 2, .. }));
    let mut seq_err = None;
    let r = archive.decode_range_sequential(0, plan.stream.len() as u64, |_| Ok(()));
    if let Err(e) = r {
        seq_err = Some(e);
    }
    assert!(matches!(seq_err, Some(Error::CorruptBlock { block: 2, .. })));
}

/// A valid archive image and its reference stream, for the hostile-input tests.
fn sample_image(dir: &Path) -> (Vec<u8>, Plan) {
    let plan = Plan::random(small_header(5, 2), 30_000, &mut Rng(42));
    let path = write_plan(dir, "img.acx", &plan);
    (std::fs::read(path).unwrap(), plan)
}

#[test]
fn truncated_or_extended_images_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (image, _) = sample_image(dir.path());
    assert!(parse_archive(&image).is_ok());
    for cut in 0..image.len() {
        assert!(parse_archive(&image[..cut]).is_err(), "truncation to {cut} accepted");
    }
    let mut longer = image.clone();
    longer.push(0);
    assert!(parse_archive(&longer).is_err());
    // Through the file API too.
    let path = dir.path().join("short.acx");
    std::fs::write(&path, &image[..image.len() - 1]).unwrap();
    assert!(matches!(Archive::open(&path), Err(Error::Format { .. })));
    assert!(matches!(Archive::open(dir.path().join("missing.acx")), Err(Error::Io { .. })));
}

#[test]
fn flipped_metadata_bytes_are_refused_and_flipped_payloads_never_yield_wrong_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let (image, plan) = sample_image(dir.path());
    let parsed = parse_archive(&image).unwrap();
    let tables_offset = parsed.footer.tables_offset as usize;
    let path = dir.path().join("flip.acx");
    for pos in 0..image.len() {
        let in_payloads = (64..tables_offset).contains(&pos);
        // Every metadata byte, every 13th payload byte (each payload test decodes the whole archive).
        if in_payloads && pos % 13 != 0 {
            continue;
        }
        let mut bad = image.clone();
        bad[pos] ^= 1 << (pos % 8);
        let result = parse_archive(&bad);
        if !in_payloads {
            assert!(result.is_err(), "flip at metadata byte {pos} accepted");
            continue;
        }
        assert!(result.is_ok(), "payloads are checked at decode time, not at open");
        std::fs::write(&path, &bad).unwrap();
        let archive = Archive::open_with(&path, cpu_options(0)).unwrap();
        for id in 0..archive.data().block_count() {
            if let Ok(block) = archive.block(id) {
                let start = id as usize * 4096;
                assert_eq!(&block[..], &plan.stream[start..start + block.len()], "flip at {pos}, block {id}");
            }
        }
    }
}

/// Rewrites the footer of `image` with `edit` applied and a valid checksum.
fn with_footer(image: &[u8], edit: impl FnOnce(&mut Footer)) -> Vec<u8> {
    let mut out = image.to_vec();
    let at = out.len() - FOOTER_LEN;
    let mut footer = parse_archive(image).unwrap().footer;
    edit(&mut footer);
    out[at..].copy_from_slice(&footer.to_bytes());
    out
}

/// Rewrites the index section with `edit` applied to its u64 words and a valid checksum.
fn with_index(image: &[u8], edit: impl FnOnce(&mut Vec<u64>)) -> Vec<u8> {
    let footer = parse_archive(image).unwrap().footer;
    let (from, to) = (footer.index_offset as usize, image.len() - FOOTER_LEN - 8);
    let mut words: Vec<u64> = image[from..to].chunks(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())).collect();
    edit(&mut words);
    let mut section: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    let sum = xxhash_rust::xxh3::xxh3_64(&section);
    section.extend_from_slice(&sum.to_le_bytes());
    let mut out = image[..from].to_vec();
    out.extend_from_slice(&section);
    out.extend_from_slice(&image[image.len() - FOOTER_LEN..]);
    out
}

#[test]
fn lying_counts_sizes_and_offsets_with_valid_checksums_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (image, _) = sample_image(dir.path());
    let blocks = parse_archive(&image).unwrap().payload_end.len();
    let lies: Vec<(&str, Vec<u8>)> = vec![
        ("one block more", with_footer(&image, |f| f.total_len += 4096)),
        ("one block less", with_footer(&image, |f| f.total_len -= 4096)),
        ("huge total_len", with_footer(&image, |f| f.total_len = u64::MAX)),
        ("tables_offset shifted", with_footer(&image, |f| f.tables_offset -= 1)),
        ("tree_offset shifted", with_footer(&image, |f| f.tree_offset += 1)),
        ("index_offset shifted", with_footer(&image, |f| f.index_offset -= 8)),
        ("offsets reversed", with_footer(&image, |f| std::mem::swap(&mut f.tree_offset, &mut f.index_offset))),
        ("file_len lies", with_footer(&image, |f| f.file_len -= 1)),
        ("payload_end decreasing", with_index(&image, |w| w.swap(1, 2))),
        ("payload too large", with_index(&image, |w| w[0] = 64 + 2 * 4096 + 4097)),
        ("last payload_end", with_index(&image, |w| w[blocks - 1] -= 1)),
        ("payload_end past the file", with_index(&image, |w| w[0] = u64::MAX)),
    ];
    for (what, bad) in lies {
        assert!(parse_archive(&bad).is_err(), "{what}: accepted");
    }
}

#[test]
fn lying_table_section_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let (image, _) = sample_image(dir.path());
    let footer = parse_archive(&image).unwrap().footer;
    let (from, to) = (footer.tables_offset as usize, footer.tree_offset as usize - 8);
    let reseal = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut body = image[from..to].to_vec();
        edit(&mut body);
        let mut out = image.clone();
        out[from..to].copy_from_slice(&body);
        let sum = xxhash_rust::xxh3::xxh3_64(&body);
        out[to..to + 8].copy_from_slice(&sum.to_le_bytes());
        out
    };
    // group_table_end[0] past the section, and equal to 0 (a group with an empty table set).
    assert!(parse_archive(&reseal(&|b| b[0..4].copy_from_slice(&u32::MAX.to_le_bytes()))).is_err());
    assert!(parse_archive(&reseal(&|b| b[0..4].copy_from_slice(&0u32.to_le_bytes()))).is_err());
    // A frequency byte changed: the set no longer sums to 4096 (or no longer parses).
    let groups = parse_archive(&image).unwrap().tables.len();
    assert!(parse_archive(&reseal(&|b| b[4 * groups + 2] ^= 0x01)).is_err());
}

/// Measurement, not a check: `ACX=path cargo test --lib cold_read_closure -- --ignored --nocapture` prints how
/// many slices a cold one-block read parses (the entropy work of the random-access contract) and its time.
#[test]
#[ignore]
fn cold_read_closure() {
    let Ok(path) = std::env::var("ACX") else { return };
    let data = Arc::new(ArchiveData::open(&path).unwrap());
    let count = data.block_count();
    let mut rng = Rng(1);
    for _ in 0..10 {
        let id = rng.range(0, count - 1);
        let engine = CpuEngine::new(data.clone());
        let mut buf = vec![0u8; data.block_len(id) as usize];
        let started = std::time::Instant::now();
        engine.decode_block(id, &mut buf).unwrap();
        let took = started.elapsed();
        println!(
            "block {id:>6}/{count}: {:>6} slices parsed, {:>8.2} ms",
            engine.slices_parsed(),
            took.as_secs_f64() * 1e3
        );
    }
}

/// Measurement: `ACX=path cargo test --lib mid_stream_sequential -- --ignored --nocapture` decodes 512 blocks
/// starting in the middle of the stream and prints the token-level work it caused.
#[test]
#[ignore]
fn mid_stream_sequential() {
    let Ok(path) = std::env::var("ACX") else { return };
    let data = Arc::new(ArchiveData::open(&path).unwrap());
    let first = data.block_count() / 2;
    for warmup in [0, 512, 2048] {
        let engine = CpuEngine::new(data.clone());
        let started = std::time::Instant::now();
        engine.decode_sequential(first - warmup, first + 512, true, 64 << 20, |_, b| b.map(|_| ())).unwrap();
        let ms = started.elapsed().as_secs_f64() * 1e3;
        println!(
            "512 blocks from {first}, warm-up {warmup}: {} source slices parsed, {ms:.1} ms",
            engine.slices_parsed()
        );
    }
}

#[test]
fn archive_is_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Archive>();
    assert_send_sync::<ArchiveData>();
    assert_send_sync::<BlockCache>();
}

mod hostile {
    use super::*;
    use proptest::prelude::*;

    fn image() -> &'static (Vec<u8>, Plan) {
        static IMAGE: std::sync::OnceLock<(Vec<u8>, Plan)> = std::sync::OnceLock::new();
        IMAGE.get_or_init(|| {
            let dir = tempfile::tempdir().unwrap();
            sample_image(dir.path())
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

        /// Arbitrary bytes are never accepted as an archive and never panic the parser.
        #[test]
        fn garbage_is_refused(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            prop_assert!(parse_archive(&bytes).is_err());
        }

        /// Several random byte changes anywhere: opening and reading every block either fails cleanly or
        /// returns exactly the original bytes.
        #[test]
        fn mutated_images_never_panic_or_lie(edits in proptest::collection::vec((any::<usize>(), any::<u8>()), 1..6)) {
            let (good, plan) = image();
            let mut bad = good.clone();
            for (pos, byte) in edits {
                let pos = pos % bad.len();
                bad[pos] = byte;
            }
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("m.acx");
            std::fs::write(&path, &bad).unwrap();
            if let Ok(archive) = Archive::open_with(&path, cpu_options(1 << 20)) {
                for id in 0..archive.data().block_count() {
                    if let Ok(block) = archive.block(id) {
                        let start = id as usize * 4096;
                        prop_assert_eq!(&block[..], &plan.stream[start..start + block.len()]);
                    }
                }
                let mut all = Vec::new();
                let r = archive.decode_range_sequential(0, archive.total_len(), |b| { all.extend_from_slice(b); Ok(()) });
                if r.is_ok() {
                    prop_assert!(all == plan.stream);
                }
            }
        }
    }
}

/// What an injected engine does with one batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Decodes correctly.
    None,
    /// Fails the whole batch with `Error::Gpu`.
    Fail,
    /// Decodes, then flips a byte of one block (a silent wrong answer).
    WrongBytes,
}

/// Which fault an injected engine applies to its n-th batch.
type Schedule = fn(u64) -> Fault;

/// A stand-in for the GPU engine: the CPU reference decoder underneath, with a fault chosen per batch by
/// `schedule(batch_number)`. Counts batches and faults so the test can tell the faults really happened.
struct FaultyEngine {
    inner: CpuEngine,
    schedule: Schedule,
    batches: std::sync::atomic::AtomicU64,
    faults: std::sync::atomic::AtomicU64,
}

impl FaultyEngine {
    fn new(data: Arc<ArchiveData>, schedule: Schedule) -> FaultyEngine {
        FaultyEngine { inner: CpuEngine::new(data), schedule, batches: Default::default(), faults: Default::default() }
    }
}

impl BlockEngine for FaultyEngine {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn decode_blocks(&self, ids: &[u64], out: &mut [&mut [u8]]) -> Result<()> {
        let batch = self.batches.fetch_add(1, Ordering::SeqCst);
        let fault = (self.schedule)(batch);
        if fault == Fault::Fail {
            self.faults.fetch_add(1, Ordering::SeqCst);
            return Err(Error::Gpu(format!("injected failure of batch {batch}")));
        }
        self.inner.decode_blocks(ids, out)?;
        if fault == Fault::WrongBytes {
            // The middle block of the batch, in its middle: not something a length check would notice.
            if let Some(buf) = out.get_mut(ids.len() / 2).filter(|b| !b.is_empty()) {
                let at = buf.len() / 2;
                buf[at] ^= 0x40;
                self.faults.fetch_add(1, Ordering::SeqCst);
            }
        }
        Ok(())
    }
}

/// The archive owns its engine; the test keeps a handle on the same one to read its counters.
struct SharedEngine(Arc<FaultyEngine>);

impl BlockEngine for SharedEngine {
    fn name(&self) -> &'static str {
        self.0.name()
    }

    fn decode_blocks(&self, ids: &[u64], out: &mut [&mut [u8]]) -> Result<()> {
        self.0.decode_blocks(ids, out)
    }
}

/// A `Write` into a shared buffer, for capturing log lines.
#[derive(Clone, Default)]
struct LogCapture(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for LogCapture {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// Issue 6, faults: a GPU batch that fails, or returns wrong bytes, falls back to the CPU with correct bytes;
/// the failure is logged once, however many batches fail.
#[test]
fn injected_gpu_faults_fall_back_to_the_cpu_with_correct_bytes_and_one_log_line() {
    let dir = tempfile::tempdir().unwrap();
    let plan = Plan::random(small_header(8, 2), 150_000, &mut Rng(606));
    let path = write_plan(dir.path(), "g.acx", &plan);
    let schedules: [(&str, Schedule); 3] = [
        ("every batch fails", |_| Fault::Fail),
        ("every batch lies", |_| Fault::WrongBytes),
        ("mixed", |b| [Fault::None, Fault::Fail, Fault::WrongBytes][(b % 3) as usize]),
    ];
    for (what, schedule) in schedules {
        for decoder in [DecoderChoice::Gpu, DecoderChoice::Auto] {
            let data = Arc::new(ArchiveData::open(&path).unwrap());
            let engine = Arc::new(FaultyEngine::new(data.clone(), schedule));
            // No cache: every read goes to the engines again.
            let options = ArchiveOptions { cache_bytes: 0, decoder, ..ArchiveOptions::default() };
            let archive = Archive::with_engines(data, options, Some(Box::new(SharedEngine(Arc::clone(&engine)))));
            let log = LogCapture::default();
            let writer = log.clone();
            let subscriber = tracing_subscriber::fmt().with_writer(move || writer.clone()).with_ansi(false).finish();
            tracing::subscriber::with_default(subscriber, || {
                // Reads of many blocks (GPU batches under both choices) and single blocks, on this thread so the
                // thread-local subscriber sees every log line.
                check_random_reads(&archive, &plan.stream, &mut Rng(7), 60);
                let mut whole = vec![0u8; plan.stream.len()];
                archive.read_stream(0, &mut whole).unwrap();
                assert!(whole == plan.stream, "{what}, {decoder:?}: the whole stream differs");
                for id in 0..archive.data().block_count() {
                    let start = archive.data().block_start(id) as usize;
                    let block = archive.block(id).unwrap();
                    assert_eq!(&block[..], &plan.stream[start..start + block.len()], "{what}: block {id}");
                }
            });
            let faults = engine.faults.load(Ordering::SeqCst);
            assert!(faults > 0, "{what}, {decoder:?}: no fault was injected");
            assert!(
                archive.gpu_fallbacks() >= faults,
                "{what}: {} fallbacks for {faults} faults",
                archive.gpu_fallbacks()
            );
            let text = String::from_utf8(log.0.lock().unwrap().clone()).unwrap();
            let lines = text.lines().filter(|l| l.contains("GPU engine failed")).count();
            assert_eq!(lines, 1, "{what}, {decoder:?}: the failure is logged once:\n{text}");
            assert!(text.contains("g.acx"), "the line names the archive:\n{text}");
            assert!(archive.stats().decodes.get("cpu").copied().unwrap_or(0) >= faults);
        }
    }
}

/// Measurement, not a check: heap bytes of parsed blocks (the parsed-slice cache's entries) per decoded byte,
/// over the archive named by `ACX_MEASURE_ARCHIVE`. The mount's memory budget (`fs::options::MemoryBudget`)
/// documents this factor. `ACX_MEASURE_ARCHIVE=x.acx cargo test --lib parsed_bytes -- --ignored --nocapture`
#[test]
#[ignore]
fn parsed_bytes_per_decoded_byte() {
    let Some(path) = std::env::var_os("ACX_MEASURE_ARCHIVE") else { return };
    let data = ArchiveData::open(path).unwrap();
    let (mut heap, mut decoded, mut tokens) = (0u64, 0u64, 0u64);
    for id in (0..data.block_count()).step_by(7) {
        let parsed = crate::codec::resolve::parse_block(&data, id).unwrap();
        heap += parsed.heap_bytes() as u64;
        decoded += u64::from(parsed.len);
        tokens += parsed.tokens.len() as u64;
    }
    let slices = decoded as f64 / data.header.slice_size() as f64;
    println!(
        "parsed heap {:.3} bytes per decoded byte; {:.1} tokens per slice; {:.0} heap bytes per slice",
        heap as f64 / decoded as f64,
        tokens as f64 / slices,
        heap as f64 / slices
    );
}

/// An engine that answers like the CPU, `delay` later.
struct SlowEngine {
    inner: CpuEngine,
    delay: std::time::Duration,
    batches: Arc<std::sync::atomic::AtomicU64>,
}

impl BlockEngine for SlowEngine {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn decode_blocks(&self, ids: &[u64], out: &mut [&mut [u8]]) -> Result<()> {
        self.batches.fetch_add(1, Ordering::SeqCst);
        std::thread::sleep(self.delay);
        self.inner.decode_blocks(ids, out)
    }
}

/// Decoder `auto` measures: a "GPU" far slower than the CPU for single cold blocks gets only the warm-up batches
/// and the periodic probes, and every read is still exact.
#[test]
fn auto_sends_single_blocks_to_the_engine_measured_faster() {
    use crate::engine::auto::PROBE_EVERY;
    let dir = tempfile::tempdir().unwrap();
    let plan = Plan::random(small_header(8, 2), 60_000, &mut Rng(707));
    let path = write_plan(dir.path(), "a.acx", &plan);
    let data = Arc::new(ArchiveData::open(&path).unwrap());
    let batches = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let slow = SlowEngine {
        inner: CpuEngine::new(data.clone()),
        delay: std::time::Duration::from_millis(25),
        batches: batches.clone(),
    };
    let options = ArchiveOptions { cache_bytes: 0, decoder: DecoderChoice::Auto, ..ArchiveOptions::default() };
    let archive = Archive::with_engines(data, options, Some(Box::new(slow)));
    let reads = 160u64;
    let n = archive.data().block_count();
    for i in 0..reads {
        let id = (i * 7) % n;
        let start = archive.data().block_start(id) as usize;
        let block = archive.block(id).unwrap();
        assert_eq!(&block[..], &plan.stream[start..start + block.len()], "block {id}");
    }
    // Warm-up: four batches each (one not counted), then only the probes.
    let to_gpu = batches.load(Ordering::SeqCst);
    assert!(to_gpu <= 4 + reads / PROBE_EVERY + 1, "{to_gpu} of {reads} single blocks went to the slow engine");
    let classes = archive.auto_choices();
    let single = classes[0];
    assert!(single.gpu_us_per_block.unwrap() > single.cpu_us_per_block.unwrap(), "{single:?}");
}

// Genome-mode files whose structure is in many pieces (FORMAT.md §2.6, structure version 4).

/// A FASTA of `lines` lines of 60 bases: records every 40 lines, soft-masked stretches, N runs, a CRLF line now
/// and then, and an unterminated last line.
fn pieces_fasta(lines: usize, rng: &mut Rng) -> Vec<u8> {
    let mut out = Vec::new();
    for i in 0..lines {
        if i % 40 == 0 {
            out.extend_from_slice(format!(">chr{i} record {}\n", rng.range(0, 1000)).as_bytes());
        }
        let lower = rng.range(0, 2) == 0;
        for j in 0..60 {
            let b = b"ACGT"[rng.range(0, 3) as usize];
            let b = if i % 23 == 4 && j < 25 { b'N' } else { b };
            out.push(if lower && j % 17 > 3 { b.to_ascii_lowercase() } else { b });
        }
        out.extend_from_slice(if i % 71 == 9 { b"\r\n" } else { b"\n" });
    }
    out.extend_from_slice(b"ACGTAC");
    out
}

/// An archive of one genome-mode file `g.fa` whose structure is cut into pieces of `piece_bytes`, laid out as
/// the packer does (region, then the structure), each block stored as literals. Returns the archive's path.
fn genome_pieces_archive(dir: &Path, fasta: &[u8], piece_bytes: u64) -> PathBuf {
    use crate::format::testkit::{file_entry, literal_archive, root_entry};
    use crate::format::tree::{Entry, EntryKind, Tree, TRANSFORM_GENOME};
    use crate::genome::{pieces, region};

    let mut bases = Vec::new();
    let e = pieces::encode_file(fasta, piece_bytes, |b| bases.extend_from_slice(b)).unwrap();
    let at = region::region_len(bases.len() as u64);
    let mut stream = region::head(at, e.structure.len()).to_vec();
    stream.extend_from_slice(&bases);
    stream.extend_from_slice(&e.structure);
    let path = dir.join("pieces.acx");
    let kind = EntryKind::File { offset: 0, size: fasta.len() as u64, transform: TRANSFORM_GENOME };
    let file = Entry { kind, ..file_entry("g.fa", 0, 0) };
    literal_archive(&path, &stream, &Tree::from_entries(vec![root_entry(), file]).unwrap());
    path
}

#[test]
fn genome_files_in_many_pieces_read_back_exactly_and_decode_only_what_reads_meet() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(41);
    let fasta = pieces_fasta(3000, &mut rng);
    let path = genome_pieces_archive(dir.path(), &fasta, 4096);
    let size = fasta.len() as u64;

    // A fresh archive: ten bytes across the boundary of pieces 4 and 5 decode those two pieces, nothing else.
    let archive = Archive::open_with(&path, cpu_options(1 << 20)).unwrap();
    let cut = crate::genome::pieces::cut(&fasta, 4096)[4].end as u64;
    let mut buf = vec![0u8; 10];
    assert_eq!(archive.read_file(1, cut - 5, &mut buf).unwrap(), 10);
    assert_eq!(buf, &fasta[cut as usize - 5..cut as usize + 5]);
    assert_eq!(archive.genome_pieces_decoded(), 2);
    // Again: held, nothing decoded.
    archive.read_file(1, cut - 5, &mut buf).unwrap();
    assert_eq!(archive.genome_pieces_decoded(), 2);

    // Random reads anywhere, many crossing piece boundaries, through both read paths.
    for _ in 0..400 {
        let off = rng.range(0, size + 10);
        let len = rng.range(0, 30_000) as usize;
        let end = (off as usize + len).min(fasta.len());
        let want = &fasta[(off as usize).min(end)..end];
        let mut buf = vec![0u8; len];
        let n = archive.read_file(1, off, &mut buf).unwrap();
        assert!(&buf[..n] == want, "read_file {off}+{len}");
        let mut into = b"prefix".to_vec();
        let n = archive.read_genome_file_into(1, off, len, &mut into).unwrap().unwrap();
        assert!(n == want.len() && &into[6..] == want, "read_genome_file_into {off}+{len}");
    }
    let pieces = crate::genome::pieces::cut(&fasta, 4096).len() as u64;
    assert!(archive.genome_pieces_decoded() <= pieces, "each piece decoded once (the bound is not reached)");

    // Streams of the whole file and of ranges, and the spans the mount reads ahead with.
    let split = crate::genome::split(&fasta).unwrap();
    for (from, len) in [(0, size), (1, size), (cut - 3, 9000), (size - 4, 100), (7, 0), (size, 5)] {
        let mut got = Vec::new();
        archive
            .stream_genome_file(1, from, len, &mut |b| {
                got.extend_from_slice(b);
                Ok(())
            })
            .unwrap();
        let end = from.saturating_add(len).min(size) as usize;
        assert!(got == fasta[(from as usize).min(end)..end], "stream {from}+{len}");
        let (needed, all) = archive.genome_stream_span(1, from, len).unwrap().unwrap();
        assert_eq!(all, crate::genome::region::HEAD_LEN..crate::genome::region::HEAD_LEN + split.bases.len() as u64);
        let (b0, b1) = split.genome.base_range(from, len);
        if b1 > b0 {
            assert_eq!(needed, all.start + b0..all.start + b1, "span {from}+{len}");
        } else {
            assert!(needed.is_empty(), "span {from}+{len}: {needed:?}");
        }
    }
    assert!(archive.verify().is_empty());
}

#[test]
fn concurrent_first_readers_of_a_piece_decode_it_once() {
    let dir = tempfile::tempdir().unwrap();
    let fasta = pieces_fasta(2000, &mut Rng(5));
    let path = genome_pieces_archive(dir.path(), &fasta, 8192);
    let archive = Arc::new(Archive::open_with(&path, cpu_options(1 << 20)).unwrap());
    let cut = crate::genome::pieces::cut(&fasta, 8192)[2].end as u64;
    let threads: Vec<_> = (0..8)
        .map(|_| {
            let archive = Arc::clone(&archive);
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 200];
                archive.read_file(1, cut - 100, &mut buf).unwrap();
                buf
            })
        })
        .collect();
    for t in threads {
        assert_eq!(t.join().unwrap(), &fasta[cut as usize - 100..cut as usize + 100]);
    }
    assert_eq!(archive.genome_pieces_decoded(), 2);
}

#[test]
fn pieces_dropped_under_a_small_bound_are_decoded_again_with_the_same_bytes_under_concurrent_reads() {
    let dir = tempfile::tempdir().unwrap();
    let fasta = Arc::new(pieces_fasta(3000, &mut Rng(77)));
    let path = genome_pieces_archive(dir.path(), &fasta, 2048);
    let archive = Arc::new(Archive::open_with(&path, cpu_options(1 << 20)).unwrap());
    // A bound below one piece: every decode drops the pieces decoded before it (never the one being decoded).
    archive.set_genome_piece_bound(1);
    let size = fasta.len() as u64;
    let threads: Vec<_> = (0..6u64)
        .map(|t| {
            let (archive, fasta) = (Arc::clone(&archive), Arc::clone(&fasta));
            std::thread::spawn(move || {
                let mut rng = Rng(1000 + t);
                for _ in 0..150 {
                    let off = rng.range(0, size - 1);
                    let len = rng.range(0, 9000) as usize;
                    let mut buf = vec![0u8; len];
                    let n = archive.read_file(1, off, &mut buf).unwrap();
                    let end = (off as usize + len).min(fasta.len());
                    assert!(buf[..n] == fasta[off as usize..end], "read {off}+{len}");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let pieces = crate::genome::pieces::cut(&fasta, 2048).len() as u64;
    assert!(archive.genome_pieces_decoded() > pieces, "pieces were dropped and decoded again");
    assert!(archive.genome_pieces_held() <= 1, "{} pieces held", archive.genome_pieces_held());
    // Piece 0 was dropped long ago: decoded again, it reads the same.
    let mut buf = vec![0u8; 100];
    assert_eq!(archive.read_file(1, 5, &mut buf).unwrap(), 100);
    assert_eq!(&buf[..], &fasta[5..105]);
}

/// `decode_genome_ahead` decodes exactly the pieces a range meets that are not held; through the filesystem
/// layer, a sequential reader gets the pieces ahead of it decoded off its read path, a random reader does not.
#[test]
fn pieces_ahead_of_a_sequential_reader_are_decoded_off_its_read_path() {
    use crate::fs::{AcxFs, FsOptions};
    let dir = tempfile::tempdir().unwrap();
    let fasta = pieces_fasta(3000, &mut Rng(23));
    let path = genome_pieces_archive(dir.path(), &fasta, 4096);
    let cuts = crate::genome::pieces::cut(&fasta, 4096);
    let pieces = cuts.len() as u64;
    assert!(pieces > 20, "{pieces} pieces");

    let archive = Archive::open_with(&path, cpu_options(8 << 20)).unwrap();
    assert_eq!(archive.decode_genome_ahead(1, cuts[3].start as u64, 10), 1);
    assert_eq!(archive.decode_genome_ahead(1, cuts[3].start as u64, 2 * 4096), 1, "piece 3 is held: piece 4 only");
    assert_eq!(archive.decode_genome_ahead(1, cuts[3].start as u64, 2 * 4096), 0);
    assert_eq!(archive.decode_genome_ahead(9, 0, 100), 0, "not a genome file");
    assert_eq!(archive.genome_pieces_decoded(), 2);

    let decoded_after_reads = |reads: &[(u64, u32)], wait: std::time::Duration| {
        let archive = Arc::new(Archive::open_with(&path, cpu_options(8 << 20)).unwrap());
        let fs = AcxFs::new(Arc::clone(&archive), FsOptions { fill_max_bytes: 0, ..FsOptions::default() });
        let ino = fs.lookup(1, b"g.fa").unwrap().ino;
        let fh = fs.open(ino, libc::O_RDONLY).unwrap().fh;
        let mut buf = Vec::new();
        for &(off, len) in reads {
            fs.read(ino, fh, off, len, &mut buf).unwrap();
            assert!(buf == fasta[off as usize..off as usize + len as usize], "read at {off}");
        }
        // The reads ahead run on the rayon pool: give them time to finish.
        let started = std::time::Instant::now();
        while archive.genome_pieces_decoded() < pieces && started.elapsed() < wait {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        archive.genome_pieces_decoded()
    };
    let secs = std::time::Duration::from_secs;
    // The handle's sequential detector sees a stream from a first read of 128 KiB at the start.
    let sequential = [(0, 128 << 10), (128 << 10, 1000)];
    assert_eq!(decoded_after_reads(&sequential, secs(20)), pieces, "a sequential reader: every piece ahead");
    let far = cuts[pieces as usize / 2].start as u64;
    let random = decoded_after_reads(&[(far, 1000), (5, 1000), (far / 2, 1000)], std::time::Duration::from_millis(300));
    assert!(random <= 6, "random reads: only the pieces they meet, not {random}");
}

#[test]
fn a_gpu_engine_starting_in_the_background_holds_up_no_read() {
    // The mount's way of opening (ArchiveOptions::gpu_in_background): reads are answered from the start, by the
    // CPU until a GPU engine is ready (without a GPU, as in CI, for good), and the bytes are the reference's.
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Rng(77);
    let plan = Plan::random(small_header(8, 2), 50_000, &mut rng);
    let path = write_plan(dir.path(), "bg.acx", &plan);
    for decoder in [DecoderChoice::Gpu, DecoderChoice::Auto] {
        let options = ArchiveOptions { decoder, gpu_in_background: true, ..ArchiveOptions::default() };
        let archive = Archive::open_with(&path, options).unwrap();
        check_random_reads(&archive, &plan.stream, &mut rng, 40);
        assert!(["cpu", "gpu", "gpu+cpu"].contains(&archive.engine_name()));
    }
}
