//! End-to-end checks of the packer's token pipeline (parse + depth bound) against a reference token replay, and
//! of whole archives.

use super::*;
use crate::codec::block::{Token, COMPLEMENT};
use proptest::prelude::*;

/// Replays tokens exactly as FORMAT.md §1 defines them; checks every structural rule on the way and returns the
/// decoded stream and the depth of each byte. (The depth pass's own tests replay through it too.)
pub(super) fn replay(blocks: &[BlockTokens], block_len: usize, total: usize) -> (Vec<u8>, Vec<u8>) {
    let mut out = vec![0u8; total];
    let mut depth = vec![0u8; total];
    for (i, b) in blocks.iter().enumerate() {
        let start = i * block_len;
        let end = (start + block_len).min(total);
        let mut pos = start;
        let mut lit = 0;
        let last = b.tokens.last().expect("a final token");
        assert_eq!((last.match_len, last.back), (0, 0), "block {i} must end with a literal-only token");
        for t in &b.tokens {
            for _ in 0..t.lit_len {
                out[pos] = b.literals[lit];
                depth[pos] = 0;
                pos += 1;
                lit += 1;
            }
            if t.match_len == 0 {
                continue;
            }
            assert!(t.match_len >= 2, "match shorter than 2");
            assert!(t.back >= 1 && t.back as usize <= pos, "source before the stream start");
            if t.rc {
                assert!(t.back + t.match_len as u64 - 1 <= pos as u64, "reverse complement before the stream start");
            }
            assert!(pos + t.match_len as usize <= end, "match crosses the end of block {i}");
            for k in 0..t.match_len as u64 {
                let src = parser::source_byte(pos as u64, t.back, t.rc, k) as usize;
                out[pos + k as usize] = if t.rc { COMPLEMENT[out[src] as usize] } else { out[src] };
                depth[pos + k as usize] = depth[src] + 1;
            }
            pos += t.match_len as usize;
        }
        assert_eq!(pos, end, "block {i} decodes to the wrong length");
        assert_eq!(lit, b.literals.len());
    }
    (out, depth)
}

fn tokens_for(data: &[u8], opts: &PackOptions) -> (Vec<BlockTokens>, u8) {
    let mut depth_map = vec![0u8; data.len()];
    let pool = rayon::ThreadPoolBuilder::new().num_threads(opts.threads).build().unwrap();
    pool.install(|| {
        let mut run = Packing::new(data, opts, level_params(opts.level, opts.block_log), &mut depth_map);
        let blocks = run.tokens(true);
        (blocks, run.depth.max_seen)
    })
}

fn check_roundtrip(data: &[u8], opts: &PackOptions) -> Vec<BlockTokens> {
    let (blocks, max_seen) = tokens_for(data, opts);
    assert_eq!(blocks.len(), data.len().div_ceil(1 << opts.block_log));
    let (out, depth) = replay(&blocks, 1 << opts.block_log, data.len());
    assert!(out == data, "tokens do not reproduce the input");
    let deepest = depth.iter().copied().max().unwrap_or(0);
    assert!(deepest <= opts.max_depth, "depth {deepest} > bound {}", opts.max_depth);
    assert_eq!(deepest, max_seen);
    blocks
}

fn xorshift(n: usize, seed: u64, alphabet: &[u8]) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            alphabet[(x % alphabet.len() as u64) as usize]
        })
        .collect()
}

/// DNA-like data with far repeats, mutations and runs: exercises every candidate source.
fn genome_like(n: usize, seed: u64) -> Vec<u8> {
    let base = xorshift(n / 3, seed, b"ACGT");
    let mut out = base.clone();
    let mut x = seed;
    while out.len() < n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let from = (x >> 33) as usize % base.len();
        let len = 50 + (x >> 20) as usize % 3000;
        let mut piece = base[from..(from + len).min(base.len())].to_vec();
        for k in (0..piece.len()).step_by(97) {
            piece[k] = b"ACGTN"[(k + (x as usize)) % 5];
        }
        out.extend_from_slice(&piece);
        out.extend(std::iter::repeat_n(b'N', (x >> 50) as usize % 300));
    }
    out.truncate(n);
    out
}

fn small_opts() -> PackOptions {
    PackOptions { block_log: 12, memory: 256 << 20, ..Default::default() }
}

#[test]
fn edge_cases_roundtrip() {
    let opts = small_opts();
    let b = 1usize << opts.block_log;
    let cases: Vec<Vec<u8>> = vec![
        vec![],
        vec![7],
        xorshift(b, 1, b"ACGT"),
        xorshift(b + 1, 2, b"ACGT"),
        vec![0; 5 * b + 17],
        xorshift(3 * b, 3, &(0..=255).collect::<Vec<u8>>()),
        b"ab".iter().cycle().take(3 * b).copied().collect(),
        xorshift(997, 4, b"ACGT").iter().cycle().take(20 * b).copied().collect(),
        xorshift(3 * b + 5, 5, b"ACGT").iter().cycle().take(9 * b).copied().collect(),
    ];
    for (i, data) in cases.iter().enumerate() {
        let blocks = check_roundtrip(data, &opts);
        if i == 4 {
            let literals: usize = blocks.iter().map(|b| b.literals.len()).sum();
            assert!(literals < 100, "all zeros should be mostly periodic fills, got {literals} literals");
        }
    }
}

#[test]
fn depth_bound_holds_on_chains_of_copies() {
    // Each 2000-byte piece copies the previous one with a change: long copy chains.
    let mut data = xorshift(2000, 9, b"ACGT");
    for k in 0..60 {
        let mut next = data[data.len() - 2000..].to_vec();
        next[(k * 31) % 2000] ^= 0x20;
        data.extend(next);
    }
    for max_depth in [1, 3, 16] {
        let opts = PackOptions { max_depth, ..small_opts() };
        check_roundtrip(&data, &opts);
    }
}

#[test]
fn output_does_not_depend_on_threads() {
    let data = genome_like(3 << 20, 11);
    let one = tokens_for(&data, &PackOptions { threads: 1, ..small_opts() }).0;
    let two = tokens_for(&data, &PackOptions { threads: 3, ..small_opts() }).0;
    assert!(one == two);
    let (out, _) = replay(&one, 1 << 12, data.len());
    assert!(out == data);
}

#[test]
fn chunks_parsed_beside_their_scan_equal_parsed_after_it() {
    // A first chunk of bare bases (genome mode's stream) and a second of bases, then text, that long matches of the
    // first reach into: every segment of a chunk not scanned ahead is parsed while its long-match scan is still
    // running (one worker: after it), with the matches carried from the chunk before.
    let mut data: Vec<u8> =
        genome_like(18 << 20, 17).into_iter().map(|b| if b == b'N' || b == b'\n' { b'C' } else { b }).collect();
    data.extend(genome_like(3 << 20, 18));
    for threads in [1, 3] {
        let opts = PackOptions { threads, ..Default::default() };
        let level = level_params(opts.level, opts.block_log);
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let run = |streamed: bool, scan_ahead: bool| {
            let mut depth_map = vec![0u8; data.len()];
            pool.install(|| {
                let mut packing = Packing::new(&data, &opts, level, &mut depth_map);
                packing.streamed = streamed;
                packing.tokens(scan_ahead)
            })
        };
        let after = run(false, false);
        assert!(run(true, false) == after, "{threads} threads, every chunk streamed");
        assert!(run(true, true) == after, "{threads} threads, scanned ahead");
    }
}

#[test]
fn levels_roundtrip_and_far_repeats_are_found() {
    let data = genome_like(1 << 20, 12);
    for level in [1, 6, 9] {
        let blocks = check_roundtrip(&data, &PackOptions { level, ..small_opts() });
        let literals: usize = blocks.iter().map(|b| b.literals.len()).sum();
        // Two thirds of the data are copies of the first third.
        assert!(literals < data.len() / 2, "level {level}: {literals} literals of {}", data.len());
        let far = blocks.iter().flat_map(|b| &b.tokens).filter(|t: &&Token| t.back > 1 << 18).count();
        assert!(far > 0, "level {level} found no far match");
    }
}

#[test]
fn bare_bases_parse_lazily_roundtrip_and_find_far_repeats() {
    // Genome mode's base stream: no N runs, no line breaks (every level parses it lazily).
    let data: Vec<u8> = genome_like(1 << 20, 13).into_iter().map(|b| if b == b'N' { b'A' } else { b }).collect();
    assert!(is_bare_bases(&data));
    for level in [1, 3, 6] {
        let opts = PackOptions { level, ..small_opts() };
        let blocks = check_roundtrip(&data, &opts);
        let literals: usize = blocks.iter().map(|b| b.literals.len()).sum();
        assert!(literals < data.len() / 2, "level {level}: {literals} literals of {}", data.len());
        let far = blocks.iter().flat_map(|b| &b.tokens).filter(|t: &&Token| t.back > 1 << 18).count();
        assert!(far > 0, "level {level} found no far match");
        let threaded = tokens_for(&data, &PackOptions { threads: 3, ..opts }).0;
        assert!(threaded == blocks, "level {level}: output depends on the thread count");
    }
    // Looking ahead changes the parse (a greedy one takes the first match that saves anything).
    let opts = small_opts();
    let mut depth_map = vec![0u8; data.len()];
    let mut greedy_params = level_params(opts.level, opts.block_log);
    greedy_params.bases_lazy_steps = 0;
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build().unwrap();
    let greedy = pool.install(|| Packing::new(&data, &opts, greedy_params, &mut depth_map).tokens(true));
    assert!(greedy != tokens_for(&data, &opts).0);
}

/// Bare bases whose later stretches are reverse complements of earlier ones (read backwards from anywhere before,
/// earlier copies included, so the copies chain), with a substituted base every 101.
fn inverted_repeats(n: usize, seed: u64) -> Vec<u8> {
    let mut out = xorshift(n / 4, seed, b"ACGT");
    let mut x = seed | 1;
    while out.len() < n {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let last = (x >> 33) as usize % out.len();
        let len = (100 + (x >> 20) as usize % 2000).min(last + 1);
        let mut piece: Vec<u8> = (0..len).map(|k| COMPLEMENT[out[last - k] as usize]).collect();
        for k in (50..piece.len()).step_by(101) {
            piece[k] = b"ACGT"[(k + x as usize) % 4];
        }
        out.extend(piece);
    }
    out.truncate(n);
    out
}

#[test]
fn reverse_complements_are_found_and_round_trip() {
    let data = inverted_repeats(1 << 20, 21);
    assert!(is_bare_bases(&data));
    for level in [1, 6] {
        let opts = PackOptions { level, ..small_opts() };
        let blocks = check_roundtrip(&data, &opts);
        let rc_bytes: u64 = blocks.iter().flat_map(|b| &b.tokens).filter(|t| t.rc).map(|t| t.match_len as u64).sum();
        // Three quarters of the stream are reverse complements of what came before.
        assert!(rc_bytes * 2 > data.len() as u64, "level {level}: {rc_bytes} bytes in reverse complements");
        // The blocks and their slices decode by the reference transcription of FORMAT.md §1.
        let block_len = 1usize << opts.block_log;
        let slice_len = 1usize << level_params(level, opts.block_log).parse.slice_log;
        for (i, b) in blocks.iter().enumerate() {
            let start = i * block_len;
            let bytes = &data[start..(start + block_len).min(data.len())];
            let outside = |p: u64| data[p as usize];
            let decoded = crate::codec::block::reference_block_bytes(start as u64, &b.tokens, &b.literals, outside);
            assert!(decoded == bytes, "level {level}: block {i} differs");
            for (j, sl) in cut_slices(&b.tokens, &b.literals, bytes, slice_len).iter().enumerate() {
                let at = start + j * slice_len;
                let decoded = crate::codec::block::reference_block_bytes(at as u64, &sl.tokens, &sl.literals, outside);
                assert!(decoded == data[at..at + decoded.len()], "level {level}: block {i} slice {j} differs");
            }
        }
        let threaded = tokens_for(&data, &PackOptions { threads: 3, ..opts }).0;
        assert!(threaded == blocks, "level {level}: output depends on the thread count");
    }
}

#[test]
fn optimal_parse_takes_reverse_complements_and_their_continuations() {
    // Bare bases always take the lazy parse in the packer; the optimal parse must handle them all the same.
    let data = inverted_repeats(1 << 18, 24);
    let opts = small_opts();
    let mut level = level_params(opts.level, opts.block_log);
    level.parse.lazy_steps = None;
    level.parse.reverse = true;
    let chain = ChainMatcher::new(&data, 0, data.len() as u64, level.chain);
    let view = DepthView { max_depth: opts.max_depth, outer: &[] };
    let mut parser = SegmentParser::new(&data, level.parse, chain, &[], (0, data.len() as u64), view, &[]);
    let (block, total) = (1u64 << opts.block_log, data.len() as u64);
    let blocks: Vec<BlockTokens> =
        (0..total).step_by(block as usize).map(|b| parser.parse_block(b, (b + block).min(total))).collect();
    let (out, depth) = replay(&blocks, block as usize, data.len());
    assert!(out == data, "tokens do not reproduce the input");
    assert!(depth.iter().all(|&d| d <= opts.max_depth));
    // Reverse complements after a substituted base continue the previous one (anti-diagonal, δ = 0 mostly).
    let (mut rc, mut continued) = (0, 0);
    for b in &blocks {
        let (mut prev, mut dst) = (None, 0u64);
        for t in b.tokens.iter().filter(|t| t.match_len > 0 || t.lit_len > 0) {
            dst += t.lit_len as u64;
            if t.match_len == 0 {
                continue;
            }
            let continues = crate::codec::block::continuation_index(t.back, t.rc, dst, prev).is_some();
            rc += t.rc as usize;
            continued += (t.rc && continues) as usize;
            prev = Some(crate::codec::block::PrevMatch { back: t.back, dst, rc: t.rc });
            dst += t.match_len as u64;
        }
    }
    assert!(rc > 100 && continued * 4 > rc, "{rc} reverse complements, {continued} continued");
}

#[test]
fn depth_bound_holds_on_reverse_complement_chains() {
    let data = inverted_repeats(300_000, 22);
    for max_depth in [1, 2, 5, 16] {
        let opts = PackOptions { max_depth, ..small_opts() };
        let blocks = check_roundtrip(&data, &opts);
        assert!(blocks.iter().flat_map(|b| &b.tokens).any(|t| t.rc), "max_depth {max_depth}: no reverse complement");
    }
}

#[test]
fn reverse_complement_archive_reads_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut fasta = b">inverted\n".to_vec();
    for line in inverted_repeats(400_000, 23).chunks(70) {
        fasta.extend_from_slice(line);
        fasta.push(b'\n');
    }
    let path = dir.path().join("inv.fa");
    std::fs::write(&path, &fasta).unwrap();
    let out = dir.path().join("inv.acx");
    let opts = PackOptions { block_log: 12, group_log: 2, memory: 256 << 20, ..Default::default() };
    let report = pack(std::slice::from_ref(&path), &out, &opts).unwrap();
    // Genome mode with reverse complements: far below 2 bits a base.
    assert!(report.archive_bytes * 8 < fasta.len() as u64, "{} bytes", report.archive_bytes);
    let archive = crate::archive::Archive::open(&out).unwrap();
    let id = archive.tree().resolve_path(b"inv.fa").expect("entry exists");
    let mut buf = vec![0u8; fasta.len() + 10];
    let n = archive.read_file(id, 0, &mut buf).unwrap();
    assert!(buf[..n] == fasta[..], "inv.fa differs");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn random_inputs_roundtrip(
        seed in any::<u64>(),
        len in 0usize..40_000,
        alphabet in 1usize..6,
        period in 1usize..300,
        max_depth in 1u8..5,
    ) {
        let mut data = xorshift(len / 2, seed, &b"ACGTN"[..alphabet]);
        let tail: Vec<u8> = data.iter().take(period).cycle().take(len - len / 2).copied().collect();
        data.extend(tail);
        check_roundtrip(&data, &PackOptions { max_depth, ..small_opts() });
    }
}

/// A whole archive: tree, file contents through the archive reader, a FASTA sidecar, the report.
#[test]
fn archive_roundtrip_through_the_reader() {
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("sub/deeper")).unwrap();
    let genome = genome_like(300_000, 5);
    let mut fasta = b">chr1 test\n".to_vec();
    for line in genome.chunks(60) {
        fasta.extend_from_slice(line);
        fasta.push(b'\n');
    }
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("a.fa", fasta),
        ("sub/empty", Vec::new()),
        ("sub/one", vec![42]),
        ("sub/deeper/text", b"the quick brown fox jumps over the lazy dog; ".repeat(500)),
        ("sub/deeper/noise", xorshift(50_000, 7, &(0..=255).collect::<Vec<u8>>())),
    ];
    for (name, bytes) in &files {
        std::fs::write(src.join(name), bytes).unwrap();
    }
    std::os::unix::fs::symlink("../a.fa", src.join("sub/link")).unwrap();
    let out = dir.path().join("t.acx");
    let opts = PackOptions { block_log: 12, group_log: 2, memory: 256 << 20, ..Default::default() };
    let report = pack(&[src], &out, &opts).unwrap();
    assert_eq!(report.archive_bytes, std::fs::metadata(&out).unwrap().len());
    assert!(report.max_depth_seen <= opts.max_depth);
    let archive = crate::archive::Archive::open(&out).unwrap();
    for (name, bytes) in &files {
        let id = archive.tree().resolve_path(format!("src/{name}").as_bytes()).expect("entry exists");
        let mut buf = vec![0u8; bytes.len() + 10];
        let n = archive.read_file(id, 0, &mut buf).unwrap();
        assert!(buf[..n] == bytes[..], "{name} differs");
    }
    let link = archive.tree().resolve_path(b"src/sub/link").unwrap();
    let link_kind = &archive.tree().entry(link).unwrap().kind;
    assert_eq!(*link_kind, crate::format::tree::EntryKind::Symlink { target: b"../a.fa".to_vec() });
    let fai = archive.tree().resolve_path(b"src/a.fa.fai").expect("sidecar index");
    assert_eq!(archive.tree().entry(fai).unwrap().flags, input::FLAG_SIDECAR);
    // Input bytes are the files as given: the generated sidecar does not count.
    assert_eq!(report.input_bytes, files.iter().map(|f| f.1.len() as u64).sum::<u64>());
}

#[test]
fn empty_inputs_make_valid_archives() {
    let dir = tempfile::tempdir().unwrap();
    let empty_dir = dir.path().join("nothing");
    std::fs::create_dir(&empty_dir).unwrap();
    let empty_file = dir.path().join("zero");
    std::fs::write(&empty_file, b"").unwrap();
    let out = dir.path().join("e.acx");
    let report = pack(&[empty_dir, empty_file], &out, &PackOptions::default()).unwrap();
    assert_eq!((report.input_bytes, report.blocks, report.files), (0, 0, 1));
    let archive = crate::archive::Archive::open(&out).unwrap();
    assert!(archive.tree().resolve_path(b"nothing").is_some());
    let zero = archive.tree().resolve_path(b"zero").unwrap();
    assert_eq!(archive.read_file(zero, 0, &mut [0u8; 4]).unwrap(), 0);
}

#[test]
fn bad_options_and_inputs_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("x.acx");
    let missing = dir.path().join("missing");
    assert!(matches!(pack(&[missing], &out, &PackOptions::default()), Err(Error::Io { .. })));
    let file = dir.path().join("f");
    std::fs::write(&file, b"data").unwrap();
    for opts in [
        PackOptions { block_log: 11, ..Default::default() },
        PackOptions { level: 0, ..Default::default() },
        PackOptions { rans_lanes: 3, ..Default::default() },
        PackOptions { max_depth: 0, ..Default::default() },
        PackOptions { memory: 1 << 20, ..Default::default() },
    ] {
        assert!(matches!(pack(std::slice::from_ref(&file), &out, &opts), Err(Error::InvalidArgument(_))), "{opts:?}");
    }
    assert!(!out.exists());
}

/// Packs the files named in `ACEAPEX_MEASURE` (space-separated) at `ACEAPEX_LEVEL` (default 6) and prints the
/// report: `ACEAPEX_MEASURE="a.fa b.fa" cargo test --release --lib pack::tests::measure -- --ignored --nocapture`.
#[test]
#[ignore]
fn measure() {
    let Ok(list) = std::env::var("ACEAPEX_MEASURE") else { return };
    let inputs: Vec<PathBuf> = list.split_whitespace().map(PathBuf::from).collect();
    let level = std::env::var("ACEAPEX_LEVEL").ok().and_then(|l| l.parse().ok()).unwrap_or(6);
    let threads = std::env::var("ACEAPEX_THREADS").ok().and_then(|l| l.parse().ok()).unwrap_or(0);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("m.acx");
    let env = |k: &str, d: u8| std::env::var(k).ok().and_then(|l| l.parse().ok()).unwrap_or(d);
    let opts = PackOptions {
        level,
        threads,
        group_log: env("ACEAPEX_GROUP_LOG", 6),
        rans_lanes: env("ACEAPEX_LANES", PackOptions::default().rans_lanes),
        block_log: env("ACEAPEX_BLOCK_LOG", 14),
        max_depth: env("ACEAPEX_DEPTH", 16),
        ..Default::default()
    };
    let r = pack(&inputs, &out, &opts).unwrap();
    println!(
        "level {level}: {} -> {} bytes, ratio {:.4}, {:.2} s, {:.1} MB/s, {} matches, {} literals, depth {}",
        r.input_bytes,
        r.archive_bytes,
        r.input_bytes as f64 / r.archive_bytes as f64,
        r.seconds,
        r.input_bytes as f64 / r.seconds / 1e6,
        r.matches,
        r.literals,
        r.max_depth_seen
    );
    println!("stages: {:?}", r.stages);
}

/// A repeat family: copies of one element, each with its own point mutations, scattered through random
/// background. A later copy matches pieces of many earlier ones, so without a closure price its sources scatter
/// and chain, the way repeats do late in a genome.
fn repeat_family(n: usize, seed: u64) -> Vec<u8> {
    let element = xorshift(1500, seed, b"ACGT");
    let background = xorshift(n, seed ^ 0x5555, b"ACGT");
    let mut x = seed | 1;
    let mut next = |m: u64| {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (x >> 33) % m
    };
    let mut out = Vec::with_capacity(n + element.len());
    while out.len() < n {
        let gap = 1000 + next(6000) as usize;
        let at = out.len();
        out.extend_from_slice(&background[at..(at + gap).min(n)]);
        out.extend(element.iter().map(|&b| if next(100) < 3 { b"ACGT"[next(4) as usize] } else { b }));
    }
    out.truncate(n);
    out
}

/// Slices a cold read of block `id` entropy-decodes, the way `Resolver::parse_closure` walks them: the block's
/// own slices, then the slices of its sources outside the block, level by level, at most `max_depth` levels.
fn cold_slices(src_of: &[u64], block_log: u8, slice_log: u8, max_depth: u8, id: u64) -> usize {
    let (start, end) = (id << block_log, ((id + 1) << block_log).min(src_of.len() as u64));
    let mut slices: std::collections::BTreeSet<u64> = (start..end).map(|p| p >> slice_log).collect();
    let mut level: Vec<u64> = (start..end).collect();
    for _ in 0..max_depth {
        let mut next: Vec<u64> = level
            .iter()
            .map(|&p| src_of[p as usize])
            .filter(|&s| s != u64::MAX && !(start..end).contains(&s))
            .collect();
        next.sort_unstable();
        next.dedup();
        slices.extend(next.iter().map(|&p| p >> slice_log));
        level = next;
    }
    slices.len()
}

/// Each byte's source (`u64::MAX` for a literal), from the tokens as FORMAT.md §1 defines them.
fn sources_of(blocks: &[BlockTokens], block_log: u8, total: usize) -> Vec<u64> {
    let mut src_of = vec![u64::MAX; total];
    for (i, b) in blocks.iter().enumerate() {
        let mut pos = (i as u64) << block_log;
        for t in &b.tokens {
            pos += t.lit_len as u64;
            for k in 0..t.match_len as u64 {
                src_of[(pos + k) as usize] = parser::source_byte(pos, t.back, t.rc, k);
            }
            pos += t.match_len as u64;
        }
    }
    src_of
}

#[test]
fn closure_price_keeps_late_cold_reads_small() {
    // Lowercase: nucleotide text as general mode sees it, parsed with the level's full chains and second parse
    // (bare uppercase bases, genome mode's stream, take the cheap parse: see `BASES_LONG_DEPTH`).
    let data = repeat_family(3 << 20, 11).to_ascii_lowercase();
    let opts = PackOptions { threads: 2, ..Default::default() };
    let closure = |price: ClosurePrice| {
        let mut level = level_params(opts.level, opts.block_log);
        level.parse.closure = price;
        let mut depth_map = vec![0u8; data.len()];
        let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
        let blocks = pool.install(|| Packing::new(&data, &opts, level, &mut depth_map).tokens(true));
        let (out, _) = replay(&blocks, 1 << opts.block_log, data.len());
        assert!(out == data);
        let src_of = sources_of(&blocks, opts.block_log, data.len());
        let slice_log = Header::default_slice_log(opts.block_log);
        let last = blocks.len() as u64;
        let late: usize =
            (last - 16..last).map(|id| cold_slices(&src_of, opts.block_log, slice_log, opts.max_depth, id)).sum();
        let literals: usize = blocks.iter().map(|b| b.literals.len()).sum();
        (late / 16, literals)
    };
    let (free, free_literals) = closure(ClosurePrice { enter: 0, per_level: 0 });
    let (priced, priced_literals) = closure(CLOSURE_PRICE);
    println!("late cold read: {free} slices ({free_literals} literals) unpriced, {priced} ({priced_literals}) priced");
    // Measured: 519 slices unpriced, 369 priced (809 and 396 before the parser's match bias and 3-byte shortest
    // continuation, which drop many chance sources on their own).
    assert!(priced * 4 < free * 3, "closure price: {priced} slices per late block, {free} without");
    // It is bought with literals where a far match saves little (3 % divergence leaves ~33-byte matches here),
    // but most repeat bytes must stay matches (measured: 1.32 MB unpriced, 0.84 MB priced).
    let (free_matched, priced_matched) = (data.len() - free_literals, data.len() - priced_literals);
    assert!(priced_matched * 2 > free_matched, "{priced_matched} matched bytes vs {free_matched}");
}

/// Copies of one random sequence, each with a substituted base every ~30 bytes and a 1-3 base insertion or
/// deletion now and then: what related genomes look like to the parser.
fn mutated_copies(n: usize, seed: u64) -> Vec<u8> {
    let original = xorshift(20_000, seed, b"ACGT");
    let mut out = original.clone();
    let mut x = seed | 1;
    let mut next = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    while out.len() < n {
        let mut at = 0;
        while at < original.len() && out.len() < n {
            let run = 10 + next(40) as usize;
            out.extend_from_slice(&original[at..(at + run).min(original.len())]);
            at += run;
            match next(10) {
                0 => out.extend((0..1 + next(3)).map(|_| b"ACGT"[next(4) as usize])), // insertion
                1 => at += 1 + next(3) as usize,                                      // deletion
                _ => {
                    out.push(b"ACGT"[next(4) as usize]); // substitution (or, a quarter of the time, none)
                    at += 1;
                }
            }
        }
    }
    out.truncate(n);
    out
}

#[test]
fn mutated_copies_take_continuation_codes() {
    use crate::codec::block::{continuation_index, PrevMatch};
    let data = mutated_copies(200_000, 11);
    let opts = small_opts();
    let blocks = check_roundtrip(&data, &opts);
    let (mut matches, mut continuing) = (0, 0);
    for b in &blocks {
        let mut prev = 0;
        for t in b.tokens.iter().filter(|t| t.match_len > 0) {
            matches += 1;
            continuing += continuation_index(t.back, false, 0, PrevMatch::forward(prev)).is_some() as usize;
            prev = t.back;
        }
    }
    assert!(continuing * 10 > matches * 7, "{continuing} of {matches} matches continue the previous one");
    // Through the archive writer and reader: the slice encoder codes them, the decoder resolves them.
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("copies.bin");
    std::fs::write(&src, &data).unwrap();
    let out = dir.path().join("c.acx");
    let report = pack(&[src], &out, &opts).unwrap();
    assert!(report.archive_bytes * 5 < data.len() as u64, "{} bytes", report.archive_bytes);
    let archive = crate::archive::Archive::open(&out).unwrap();
    let id = archive.tree().resolve_path(b"copies.bin").expect("entry exists");
    let mut buf = vec![0u8; data.len() + 10];
    assert_eq!(archive.read_file(id, 0, &mut buf).unwrap(), data.len());
    assert!(buf[..data.len()] == data[..]);
}

#[test]
fn task_board_runs_every_task_once_after_what_it_waits_for() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    // Task k waits for task k / 2 (k > 0) to have run: a tree of dependencies, every one on a task before it,
    // handed out to more workers than can all be busy.
    for threads in [1, 2, 4] {
        let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
        let n = 40;
        let runs: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
        let order = std::sync::Mutex::new(Vec::new());
        let board = TaskBoard::new(n);
        pool.install(|| {
            board.run(&|k| k == 0 || runs[k / 2].load(Ordering::Acquire) > 0, &|k| {
                assert!(k == 0 || runs[k / 2].load(Ordering::Acquire) == 1, "task {k} ran before {}", k / 2);
                std::thread::sleep(std::time::Duration::from_micros(200 * (k % 3) as u64));
                order.lock().unwrap().push(k);
                runs[k].fetch_add(1, Ordering::AcqRel);
            })
        });
        assert!(runs.iter().all(|r| r.load(Ordering::Relaxed) == 1), "{threads} threads");
        if threads == 1 {
            assert_eq!(*order.lock().unwrap(), (0..n).collect::<Vec<_>>());
        }
    }
}

#[test]
fn task_board_stops_handing_out_after_a_panic() {
    // Task 1 panics; task 2 waits for it and would wait forever: the board stops and the panic propagates.
    let pool = rayon::ThreadPoolBuilder::new().num_threads(2).build().unwrap();
    let done = std::sync::atomic::AtomicBool::new(false);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        pool.install(|| {
            TaskBoard::new(3).run(&|k| k < 2 || done.load(std::sync::atomic::Ordering::Acquire), &|k| {
                if k == 1 {
                    panic!("task 1 fails");
                }
            })
        })
    }));
    assert!(result.is_err());
}

#[test]
fn chunk_plans_hand_out_tasks_in_an_order_one_worker_can_run() {
    // (bare per segment, reparse): the tasks run by one worker in list order must find what each waits for done.
    let cases: [(&[bool], bool); 6] = [
        (&[true, true, true, false], true),
        (&[false, false, false, false], true),
        (&[true, false, true, true, false], true),
        (&[false], true),
        (&[false, true, true], true),
        (&[false, false, false], false),
    ];
    for (bare, reparse) in cases {
        let segments: Vec<(u64, u64)> = (0..bare.len() as u64).map(|k| (k << 20, (k + 1) << 20)).collect();
        for workers in [1, 2] {
            let plan = ChunkPlan::new(segments.clone(), bare, reparse, workers);
            let tasks = plan.tasks();
            assert_eq!(tasks.last(), Some(&Task::Filler));
            let firsts = tasks.iter().filter(|t| matches!(t, Task::First(_))).count();
            assert_eq!(firsts, plan.first, "{bare:?}");
            let mut first_done = 0;
            for t in &tasks {
                match *t {
                    Task::First(k) => {
                        assert_eq!(k, first_done);
                        first_done += 1;
                    }
                    Task::Second(k) => {
                        assert!(reparse && first_done.min(plan.tried) >= k.max(1), "{bare:?}: {tasks:?}");
                        assert!(k == 0 || plan.again[k]);
                    }
                    Task::Prebuild => assert!(workers > 1 && plan.prebuild),
                    Task::Filler => {}
                }
            }
            // The last segment is parsed only once, after the trial pass, when it is parsed again anyway.
            let last = bare.len() - 1;
            assert_eq!(plan.first == last, bare.len() > 1 && reparse && !bare[last], "{bare:?}");
        }
    }
}

#[test]
fn a_split_depth_pass_equals_the_whole_pass() {
    // Chains of copies across the split point: the pass over the tail reads the depths before it as given.
    let data = genome_like(1 << 16, 5);
    let block = 1usize << 12;
    let opts = PackOptions { threads: 1, max_depth: 3, ..small_opts() };
    let mut parsed_map = vec![0u8; data.len()];
    let blocks = Packing::new(&data, &opts, level_params(opts.level, opts.block_log), &mut parsed_map).tokens(false);
    let at = 5 * block;
    let mut whole_map = vec![0u8; data.len()];
    let mut whole = DepthPass::new(&data, &mut whole_map, 2);
    let expect: Vec<BlockTokens> = blocks.iter().enumerate().map(|(i, b)| whole.apply((i * block) as u64, b)).collect();
    let (max_seen, forced) = (whole.max_seen, whole.forced);
    assert!(forced > 0, "the bound must force literals for the test to mean anything");
    let mut split_map = vec![0u8; data.len()];
    let mut pass = DepthPass::new(&data, &mut split_map, 2);
    let mut got: Vec<BlockTokens> =
        blocks[..at / block].iter().enumerate().map(|(i, b)| pass.apply((i * block) as u64, b)).collect();
    let (before, mut tail) = pass.split_at(at as u64);
    assert_eq!(before, &whole_map[..at]);
    got.extend(blocks[at / block..].iter().enumerate().map(|(i, b)| tail.apply((at + i * block) as u64, b)));
    assert_eq!((tail.max_seen, tail.forced), (max_seen, forced));
    assert_eq!(tail.depths(at as u64, data.len() as u64), &whole_map[at..]);
    assert!(got == expect);
}

#[test]
fn segments_cut_bases_from_the_text_between_them() {
    const BLOCK: u64 = 16 << 10;
    let text = |n: usize, seed: u64| xorshift(n, seed, b"0123456789_.\tACGTchr\n");
    let bases = |n: usize, seed: u64| xorshift(n, seed, b"ACGT");
    // Bare bases as a whole (a little text among them): one segment.
    let mut data = bases(1 << 20, 1);
    data.extend(text(2000, 2));
    data.extend(bases(1 << 20, 3));
    assert_eq!(segments_of(&data, 0, data.len() as u64, BLOCK), vec![(0, data.len() as u64)]);
    // A generated index between two genomes' bases: bases, the text's blocks, bases. A short run of bases
    // (under MIN_BASES_RUN) stays with the text around it.
    let mut data = bases(20 * BLOCK as usize, 4);
    data.extend(text(3 * BLOCK as usize, 5));
    data.extend(bases(5 * BLOCK as usize, 6));
    data.extend(text(BLOCK as usize, 7));
    data.extend(bases(40 * BLOCK as usize, 8));
    let len = data.len() as u64;
    assert_eq!(segments_of(&data, 0, len, BLOCK), vec![(0, 20 * BLOCK), (20 * BLOCK, 29 * BLOCK), (29 * BLOCK, len)]);
    // Segments never span more than SEGMENT_BYTES, and cover the chunk in order.
    let mut data = text(8 * BLOCK as usize, 9);
    data.extend(bases(2 * SEGMENT_BYTES as usize, 10));
    let (len, seg) = (data.len() as u64, SEGMENT_BYTES);
    let segments = segments_of(&data, 0, len, BLOCK);
    assert_eq!(segments, vec![(0, 8 * BLOCK), (8 * BLOCK, seg), (seg, 2 * seg), (2 * seg, len)]);
}

#[test]
fn generated_ranges_merge_and_measure_what_a_segment_holds() {
    use input::Piece;
    let disk = |size| Piece::Disk { path: PathBuf::from("x"), size };
    let pieces = [disk(100), Piece::Generated(vec![1; 20]), Piece::Zeros(30), disk(50), Piece::Generated(vec![2; 10])];
    let ranges = generated_ranges(&pieces);
    assert_eq!(ranges, vec![(100, 150), (200, 210)]);
    // Half or more of the segment: (covered, length) below.
    for (s, e, mostly) in [
        (100, 150, true),  // 50 of 50
        (90, 160, true),   // 50 of 70
        (0, 150, false),   // 50 of 150
        (140, 210, false), // 10 + 10 of 70
        (195, 215, true),  // 10 of 20
        (150, 200, false), // none
    ] {
        assert_eq!(mostly_generated(&ranges, s, e), mostly, "[{s}, {e})");
    }
    assert!(!mostly_generated(&[], 0, 10));
}
