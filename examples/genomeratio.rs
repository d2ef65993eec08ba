//! genomeratio: the measurements that decide genome mode's nucleotide codec.
//!
//! ```text
//! cargo run --release --example genomeratio [-- CORPUS_DIR [SCRATCH_DIR]]
//! ```
//!
//! For three sets of the shared corpus — `atha_chr1.fa`; the six fly chromosome-4 `_genomic` assemblies packed
//! together (`cds` files left out, 7.9 MB); and all eleven fly `*_genomic.fna` files, cds included (15.2 MB: the
//! set the corpus README's fly anchors were measured on) — it splits every file with [`aceapex::genome::split`]
//! and prints:
//!
//! - the structure: raw encoded bytes, and `xz -9` of them (a stand-in for what an entropy stage gets);
//! - the nucleotide stream packed by the existing general packer (`aceapex::pack`, default options, bases as
//!   ASCII `ACGT` in a temp file), with the structure beside it, and the original files packed in general mode;
//! - the entropy of the bases in bits per base: order 0 and order k = 2, 4, 8, 11, 16 — static (empirical, model
//!   cost excluded: a lower bound), adaptive over the whole stream (sequential: no random access), adaptive reset
//!   every 16 Ki bases (what a random-access block could use), and static tables per group of 2^20 bases with
//!   the tables' cost included (what per-table-group rANS tables give);
//! - an LZ on the bases (global, 16-mer seeds, priced lazy parse cut at 2 Ki-base slices) in three variants —
//!   forward matches; plus reverse-complement matches; plus substitutions inside matches — with its literals'
//!   entropies and the ratio it implies, tokens priced with the format's log codes (an estimate of a codec,
//!   not a codec: no depth bound, no rANS quantisation);
//! - the anchors side by side: `xz -9` whole file, `zstd -19` per 16 KiB block, `bgzip` (each when the command
//!   is installed).
//!
//! Every ratio is original bytes divided by (nucleotide cost + structure cost), the structure counted at its
//! `xz -9` size unless the line says otherwise.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use aceapex::genome::{serial, split};
use aceapex::pack::{pack, PackOptions};

/// Block size of the random-access anchors and of the per-block adaptive model.
const BLOCK: usize = 16 << 10;
/// Bases per table group for the per-group static model (64 blocks of 16 Ki bases).
const GROUP_BASES: usize = 1 << 20;
const ORDERS: [u32; 5] = [2, 4, 8, 11, 16];

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let corpus = PathBuf::from(args.get(1).map_or("/work/shared/corpus", String::as_str));
    let scratch = PathBuf::from(args.get(2).map_or("/tmp/genomeratio", String::as_str));
    std::fs::create_dir_all(&scratch).expect("scratch dir");

    let atha = vec![corpus.join("atha_chr1.fa.gz")];
    let mut fly: Vec<PathBuf> =
        std::fs::read_dir(corpus.join("fly-chr4")).map(|d| d.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    fly.retain(|p| {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        name.contains("_genomic.fna") && !name.contains("cds_from") && !name.contains("rna_from")
    });
    fly.sort();
    // The corpus README's fly anchors (15.2 MB, xz -9 8.885) were measured on everything `*_genomic.fna`
    // matches, cds files included; the six assemblies alone are 7.9 MB. Both sets are measured.
    let fly_all: Vec<PathBuf> = std::fs::read_dir(corpus.join("fly-chr4"))
        .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.to_string_lossy().ends_with(".fna.gz")).collect())
        .unwrap_or_default();
    let mut fly_all = fly_all;
    fly_all.sort();
    for (name, files) in
        [("atha_chr1", atha), ("fly-chr4 x6 genomic", fly), ("fly-chr4 all 11 (genomic + cds)", fly_all)]
    {
        if files.is_empty() || !files.iter().all(|f| f.exists()) {
            println!("== {name}: corpus files missing under {}, skipped", corpus.display());
            continue;
        }
        measure(name, &files, &scratch.join(name.replace([' ', '(', ')', '+'], "_")));
    }
}

/// Decompresses `path` (gzip) or reads it as is.
fn load(path: &Path) -> Vec<u8> {
    if path.extension().is_some_and(|e| e == "gz") {
        let out = Command::new("gzip").arg("-dc").arg(path).output().expect("gzip");
        assert!(out.status.success(), "gzip -dc {}", path.display());
        out.stdout
    } else {
        std::fs::read(path).expect("read input")
    }
}

fn measure(name: &str, files: &[PathBuf], dir: &Path) {
    std::fs::create_dir_all(dir).expect("scratch");
    println!("== {name}: {} file(s)", files.len());
    let mut plain_paths = Vec::new();
    let mut all = Vec::new();
    let mut structure = Vec::new();
    let mut bases = Vec::new();
    let (mut case_runs, mut exc_runs, mut exc_res, mut headers, mut runs) = (0, 0, 0, 0, 0);
    for f in files {
        let bytes = load(f);
        let Some(s) = split(&bytes) else {
            println!("  {}: not modelled by genome mode", f.display());
            return;
        };
        assert_eq!(s.genome.reconstruct(&s.bases).as_deref(), Some(&bytes[..]), "round trip of {}", f.display());
        case_runs += s.genome.case.runs.len();
        exc_runs += s.genome.exceptions.runs.len();
        exc_res += s.genome.exceptions.excluded();
        headers += s.genome.layout.headers().len();
        runs += s.genome.layout.runs().len();
        structure.extend(serial::encode(&s.genome));
        bases.extend_from_slice(&s.bases);
        let plain = dir.join(f.file_name().unwrap().to_string_lossy().trim_end_matches(".gz"));
        std::fs::write(&plain, &bytes).expect("write plain copy");
        plain_paths.push(plain);
        all.extend(bytes);
    }
    let orig = all.len() as f64;
    let nb = bases.len();
    let structure_xz = xz(&structure).unwrap_or(structure.len());
    println!(
        "  original {} bytes; {nb} bases; {exc_res} residues in {exc_runs} exception runs; {case_runs} lowercase runs; \
         {headers} headers; {runs} line runs",
        all.len()
    );
    println!("  structure: {} bytes raw, {} bytes xz -9", structure.len(), structure_xz);
    let ratio = |nucleotide_bytes: f64| orig / (nucleotide_bytes + structure_xz as f64);
    let bits = |bpb: f64| ratio(bpb * nb as f64 / 8.0);

    println!("  -- packers");
    let bases_path = dir.join("bases.txt");
    let structure_path = dir.join("structure.bin");
    std::fs::write(&bases_path, &bases).expect("write bases");
    std::fs::write(&structure_path, &structure).expect("write structure");
    let opts = PackOptions::default();
    let packed = |inputs: &[PathBuf], tag: &str| {
        let out = dir.join(format!("{tag}.acx"));
        let r = pack(inputs, &out, &opts).expect("pack");
        let _ = std::fs::remove_file(&out);
        r
    };
    let r = packed(std::slice::from_ref(&bases_path), "bases");
    println!(
        "  aceapex pack, bases only: {} bytes ({:.3} bits/base, {} matches, {} literals) → ratio {:.3} with structure xz",
        r.archive_bytes,
        r.archive_bytes as f64 * 8.0 / nb as f64,
        r.matches,
        r.literals,
        ratio(r.archive_bytes as f64)
    );
    let r = packed(&[structure_path, bases_path], "split");
    println!(
        "  aceapex pack, structure + bases as two files: {} bytes → ratio {:.3}",
        r.archive_bytes,
        orig / r.archive_bytes as f64
    );
    let r = packed(&plain_paths, "general");
    println!(
        "  aceapex pack, original files (general mode): {} bytes → ratio {:.3}",
        r.archive_bytes,
        orig / r.archive_bytes as f64
    );
    println!("  2-bit packing alone: {} bytes → ratio {:.3}", nb.div_ceil(4), ratio(nb.div_ceil(4) as f64));

    let codes: Vec<u8> = bases.iter().map(|&b| code(b)).collect();
    println!("  -- entropy of the bases, bits/base (→ ratio with structure xz)");
    let h0 = static_entropy(&codes, 0);
    println!("  order 0 static: {h0:.4} ({:.3})", bits(h0));
    for k in ORDERS {
        let st = static_entropy(&codes, k);
        let ad = adaptive_entropy(&codes, k, None);
        let blk = adaptive_entropy(&codes, k, Some(BLOCK));
        println!(
            "  order {k:2}: static {st:.4} ({:.3}) | adaptive whole {ad:.4} ({:.3}) | adaptive reset per 16 Ki bases {blk:.4} ({:.3})",
            bits(st),
            bits(ad),
            bits(blk)
        );
    }
    for k in [2, 3, 4] {
        let g = group_entropy(&codes, k);
        println!("  order {k} static tables per group of 2^20 bases, tables included: {g:.4} ({:.3})", bits(g));
    }

    println!("  -- LZ on bases: 16-mer seeds, 4 candidates, one-step lazy, cut at 2 Ki-base slices; tokens priced");
    println!("     with the format's log codes (order-0 entropy of LL/ML/OF codes + extra bits + direction flag)");
    for (rc, subs) in [(false, false), (true, false), (true, true)] {
        let lz = lz_bases(&codes, rc, subs);
        let lit = &lz.literals;
        let lit0 = group_entropy(lit, 0);
        let lit2 = group_entropy(lit, 2);
        let tok_bytes = lz.token_bits / 8.0;
        println!(
            "  {}: {} matches ({} reverse-complement), {:.1}% of bases matched; tokens {:.0} bytes; literals \
             order-0/group {lit0:.4}, order-2/group {lit2:.4} bits/base",
            match (rc, subs) {
                (false, _) => "forward only".to_string(),
                (true, false) => "forward + reverse-complement".to_string(),
                (true, true) => format!("fwd + rc + substitutions ({} substituted bases)", lz.subs),
            },
            lz.matches,
            lz.rc_matches,
            100.0 * (nb - lit.len()) as f64 / nb as f64,
            tok_bytes
        );
        let lit_bytes = lit2 * lit.len() as f64 / 8.0;
        println!(
            "     → ratio: 2-bit literals {:.3}; order-2/group literals {:.3} ({:.4} bits/base all in)",
            ratio(tok_bytes + lit.len() as f64 / 4.0),
            ratio(tok_bytes + lit_bytes),
            (tok_bytes + lit_bytes) * 8.0 / nb as f64
        );
    }

    println!("  -- anchors on the original bytes");
    match xz(&all) {
        Some(n) => println!("  xz -9 whole: {n} bytes → {:.3}", orig / n as f64),
        None => println!("  xz: not installed"),
    }
    match zstd_blocks(&all, dir) {
        Some(n) => println!("  zstd -19 per 16 KiB block: {n} bytes → {:.3}", orig / n as f64),
        None => println!("  zstd: not installed"),
    }
    match pipe("bgzip", &["-c"], &all) {
        Some(n) => println!("  bgzip: {} bytes → {:.3}", n.len(), orig / n.len() as f64),
        None => println!("  bgzip: not installed"),
    }
    let _ = std::fs::remove_dir_all(dir);
}

fn code(b: u8) -> u8 {
    match b {
        b'A' => 0,
        b'C' => 1,
        b'G' => 2,
        _ => 3,
    }
}

/// Runs `cmd args` with `input` on stdin; its stdout, or `None` if it is not installed or fails.
fn pipe(cmd: &str, args: &[&str], input: &[u8]) -> Option<Vec<u8>> {
    let mut child =
        Command::new(cmd).args(args).stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().ok()?;
    let mut stdin = child.stdin.take()?;
    let data = input.to_vec();
    let writer = std::thread::spawn(move || stdin.write_all(&data));
    let out = child.wait_with_output().ok()?;
    writer.join().ok()?.ok()?;
    out.status.success().then_some(out.stdout)
}

fn xz(bytes: &[u8]) -> Option<usize> {
    pipe("xz", &["-9", "-c", "-T1"], bytes).map(|o| o.len())
}

/// `zstd -19` on every 16 KiB block as its own frame: one zstd process over a directory of block files.
fn zstd_blocks(bytes: &[u8], dir: &Path) -> Option<usize> {
    let blocks = dir.join("zstd-blocks");
    std::fs::create_dir_all(&blocks).ok()?;
    let mut names = Vec::new();
    for (i, chunk) in bytes.chunks(BLOCK).enumerate() {
        let p = blocks.join(format!("{i:07}"));
        std::fs::write(&p, chunk).ok()?;
        names.push(p);
    }
    let status = Command::new("zstd").args(["-19", "-q", "-f"]).args(&names).status().ok()?;
    let mut total = 0;
    if status.success() {
        for p in &names {
            total += std::fs::metadata(p.with_extension("zst")).ok()?.len() as usize;
        }
    }
    let _ = std::fs::remove_dir_all(&blocks);
    status.success().then_some(total)
}

/// `Σ c·log2(n/c)` over one context's counts.
fn counts_bits(c: &[u32]) -> f64 {
    let n: u32 = c.iter().sum();
    c.iter().filter(|&&x| x > 0).map(|&x| x as f64 * (n as f64 / x as f64).log2()).sum()
}

/// Empirical order-`k` entropy (bits/base) of 2-bit codes: each context's symbol distribution is taken from the
/// whole stream, so model cost is not counted (a lower bound for any static order-`k` table).
fn static_entropy(codes: &[u8], k: u32) -> f64 {
    if codes.len() <= k as usize {
        return 0.0;
    }
    let mask = if k == 0 { 0 } else { (1u64 << (2 * k)) - 1 };
    let mut ctx = 0u64;
    let total_bits = if k <= 11 {
        let mut counts = vec![0u32; 4 << (2 * k)];
        for (i, &s) in codes.iter().enumerate() {
            if i >= k as usize {
                counts[(ctx as usize) << 2 | s as usize] += 1;
            }
            ctx = ((ctx << 2) | s as u64) & mask;
        }
        counts.chunks(4).map(counts_bits).sum::<f64>()
    } else {
        // Too many contexts for an array: sort (context, symbol) keys and count equal runs.
        let mut keys = Vec::with_capacity(codes.len());
        for (i, &s) in codes.iter().enumerate() {
            if i >= k as usize {
                keys.push(ctx << 2 | s as u64);
            }
            ctx = ((ctx << 2) | s as u64) & mask;
        }
        keys.sort_unstable();
        let mut bits = 0.0;
        let mut i = 0;
        while i < keys.len() {
            let c = keys[i] >> 2;
            let mut cnt = [0u32; 4];
            while i < keys.len() && keys[i] >> 2 == c {
                cnt[(keys[i] & 3) as usize] += 1;
                i += 1;
            }
            bits += counts_bits(&cnt);
        }
        bits
    };
    total_bits / (codes.len() - k as usize) as f64
}

/// Adaptive order-`k` code length (bits/base) with the KT estimator `(c + 1/2) / (n + 2)`, optionally forgetting
/// everything every `reset` bases. Orders above 12 use a hashed table of 2^24 contexts.
fn adaptive_entropy(codes: &[u8], k: u32, reset: Option<usize>) -> f64 {
    let slots_log = (2 * k).min(24);
    let mut counts = vec![0u16; 4 << slots_log];
    let mut touched: Vec<u32> = Vec::new();
    let mask = (1u64 << (2 * k)) - 1;
    let mut ctx = 0u64;
    let mut bits = 0.0f64;
    for (i, &s) in codes.iter().enumerate() {
        if let Some(r) = reset {
            if i % r == 0 {
                for &t in &touched {
                    counts[t as usize * 4..t as usize * 4 + 4].fill(0);
                }
                touched.clear();
                ctx = 0;
            }
        }
        let slot = if 2 * k <= 24 { ctx as usize } else { (ctx.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as usize };
        let c = &mut counts[slot * 4..slot * 4 + 4];
        let n: u32 = c.iter().map(|&x| x as u32).sum();
        if n == 0 && reset.is_some() {
            touched.push(slot as u32);
        }
        bits -= ((c[s as usize] as f64 + 0.5) / (n as f64 + 2.0)).log2();
        if c[s as usize] == u16::MAX {
            for x in c.iter_mut() {
                *x /= 2;
            }
        }
        c[s as usize] += 1;
        ctx = ((ctx << 2) | s as u64) & mask;
    }
    bits / codes.len().max(1) as f64
}

/// Static order-`k` tables per group of [`GROUP_BASES`] bases, each group coded with its own exact counts, plus
/// the tables' cost: 12 bits per frequency of every context the group uses (what a 4096-scale rANS table with
/// varint frequencies costs). Bits per base.
fn group_entropy(codes: &[u8], k: u32) -> f64 {
    let mask = (1usize << (2 * k)) - 1;
    let mut bits = 0.0;
    for g in codes.chunks(GROUP_BASES) {
        let mut counts = vec![0u32; 4 << (2 * k)];
        let mut ctx = 0usize;
        for &s in g {
            counts[ctx << 2 | s as usize] += 1;
            ctx = ((ctx << 2) | s as usize) & mask;
        }
        for c in counts.chunks(4) {
            if c.iter().any(|&x| x > 0) {
                bits += counts_bits(c) + 4.0 * 12.0;
            }
        }
    }
    bits / codes.len().max(1) as f64
}

struct LzResult {
    matches: usize,
    rc_matches: usize,
    /// Substituted bases inside matches.
    subs: u64,
    /// Bits of the token stream under the stated cost model.
    token_bits: f64,
    /// Bases not covered by matches, in order.
    literals: Vec<u8>,
}

/// FORMAT.md §3.2 log code of `v`: (code, extra bits).
fn log_code(v: u64) -> (usize, u32) {
    if v < 16 {
        return (v as usize, 0);
    }
    let h = 63 - v.leading_zeros();
    let m = (v >> (h - 1)) & 1;
    (16 + 2 * (h as usize - 4) + m as usize, h - 1)
}

/// Order-0 entropy in bits of a histogram.
fn hist_bits(h: &[u64]) -> f64 {
    let n: u64 = h.iter().sum();
    h.iter().filter(|&&c| c > 0).map(|&c| c as f64 * (n as f64 / c as f64).log2()).sum()
}

/// Bases per slice: a match may not cross a slice boundary (FORMAT.md §3), so the parse is cut there.
const SLICE: usize = 2048;
/// Seed length in bases and candidates kept per hash bucket.
const SEED: usize = 16;
const WAYS: usize = 4;
const TABLE_LOG: u32 = 22;
/// Price of a literal base and of a match's fixed part, in bits, for the parse's decisions.
const LIT_BITS: f64 = 1.93;
const MATCH_FIXED_BITS: f64 = 10.0;

/// A match candidate: length, distance to the source (for a reverse-complement match, to the source's last
/// base, which it reads backwards) and direction.
#[derive(Clone, Default)]
struct Cand {
    len: usize,
    back: usize,
    rc: bool,
    /// Offsets inside the match whose base differs from the source (substitutions patched in).
    subs: Vec<u32>,
}

impl Cand {
    /// Bits saved against coding the bases as literals.
    fn savings(&self) -> f64 {
        if self.len == 0 {
            return 0.0;
        }
        self.len as f64 * LIT_BITS
            - MATCH_FIXED_BITS
            - (self.back as f64).log2()
            - (self.len as f64).log2()
            - self.subs.len() as f64 * SUB_BITS
    }
}

/// A substitution is taken only when this many bases after it match again.
const SUB_RUN: usize = 12;
/// Price of one substitution for the parse: its offset's log code and the new base.
const SUB_BITS: f64 = 8.0;

/// Length of a match whose offset `m` agrees with its source when `same(m)`, for `m < max`; with `subs`, it
/// runs on through single mismatches that [`SUB_RUN`] agreeing bases follow, and lists their offsets.
fn extend(max: usize, same: impl Fn(usize) -> bool, subs: bool) -> (usize, Vec<u32>) {
    let mut l = 0;
    let mut at = Vec::new();
    loop {
        while l < max && same(l) {
            l += 1;
        }
        if !subs || l + 1 + SUB_RUN > max || !(l + 1..l + 1 + SUB_RUN).all(&same) {
            return (l, at);
        }
        at.push(l as u32);
        l += 1;
    }
}

/// The LZ stage of a genome codec, on 2-bit codes: at each position the best of the candidates sharing its
/// 16-mer (forward) or the 16-mer's reverse complement (when `rc`), priced by the bits it saves, with one step of
/// lazy matching. Sources lie wholly before the match. Returns matches, token cost and the literal stream.
fn lz_bases(codes: &[u8], rc: bool, subs: bool) -> LzResult {
    let n = codes.len();
    let kmer = |i: usize| codes[i..i + SEED].iter().fold(0u32, |a, &s| a << 2 | s as u32);
    let rc_kmer = |i: usize| codes[i..i + SEED].iter().rev().fold(0u32, |a, &s| a << 2 | (3 - s) as u32);
    let bucket = |x: u32| (x.wrapping_mul(0x9E37_79B1) >> (32 - TABLE_LOG)) as usize * WAYS;
    let mut table = vec![u32::MAX; WAYS << TABLE_LOG];
    let insert = |table: &mut Vec<u32>, p: usize| {
        let b = bucket(kmer(p));
        table.copy_within(b..b + WAYS - 1, b + 1);
        table[b] = p as u32;
    };
    let best_at = |table: &Vec<u32>, i: usize| -> Cand {
        let mut best = Cand::default();
        if i + SEED > n {
            return best;
        }
        let b = bucket(kmer(i));
        for &j in &table[b..b + WAYS] {
            if j == u32::MAX {
                break;
            }
            let j = j as usize;
            let (l, at) = extend(n - i, |m| codes[j + m] == codes[i + m], subs);
            let c = Cand { len: l, back: i - j, rc: false, subs: at };
            if l >= SEED && c.savings() > best.savings() {
                best = c;
            }
        }
        if rc {
            let b = bucket(rc_kmer(i));
            for &j in &table[b..b + WAYS] {
                if j == u32::MAX {
                    break;
                }
                let top = j as usize + SEED - 1;
                if top >= i {
                    continue;
                }
                let (l, at) = extend((n - i).min(top + 1), |m| codes[i + m] == 3 - codes[top - m], subs);
                let c = Cand { len: l, back: i - top, rc: true, subs: at };
                if l >= SEED && c.savings() > best.savings() {
                    best = c;
                }
            }
        }
        best
    };

    let (mut ll, mut ml, mut of) = (vec![0u64; 64], vec![0u64; 64], vec![0u64; 96]);
    let mut extra = 0u64;
    let mut r = LzResult { matches: 0, rc_matches: 0, subs: 0, token_bits: 0.0, literals: Vec::new() };
    let mut lit_run = 0u64;
    // Substitutions: a count per match and each one's offset from the previous (log codes), and the new base.
    let (mut sub_count, mut sub_gap, mut sub_extra, mut sub_total) = (vec![0u64; 64], vec![0u64; 64], 0u64, 0u64);
    let mut token = |lit_run: u64, m: Option<(usize, usize)>| {
        let (c, e) = log_code(lit_run);
        ll[c] += 1;
        extra += e as u64;
        if let Some((len, back)) = m {
            let (c, e) = log_code(len as u64 - 2);
            ml[c] += 1;
            extra += e as u64;
            let (c, e) = log_code(back as u64 - 1);
            of[c] += 1;
            extra += e as u64;
        }
    };
    let mut i = 0usize;
    let mut pending: Option<Cand> = None;
    while i < n {
        if i % SLICE == 0 && i > 0 {
            // Each slice ends with a literal-only token.
            token(lit_run, None);
            lit_run = 0;
        }
        let here = pending.take().unwrap_or_else(|| best_at(&table, i));
        if here.savings() > 0.0 {
            let next = if i + 1 < n { best_at(&table, i + 1) } else { Cand::default() };
            if next.savings() > here.savings() + LIT_BITS {
                // Lazy: a literal here and the better match one base later.
                r.literals.push(codes[i]);
                lit_run += 1;
                if i + SEED <= n {
                    insert(&mut table, i);
                }
                i += 1;
                pending = Some(next);
                continue;
            }
            r.matches += 1;
            r.rc_matches += usize::from(here.rc);
            if subs {
                let (c, e) = log_code(here.subs.len() as u64);
                sub_count[c] += 1;
                sub_extra += e as u64;
                let mut prev = 0;
                for &at in &here.subs {
                    let (c, e) = log_code((at - prev) as u64);
                    sub_gap[c] += 1;
                    sub_extra += e as u64;
                    prev = at;
                }
                sub_total += here.subs.len() as u64;
            }
            // The match, cut at slice boundaries into tokens.
            let end = i + here.len;
            let mut p = i;
            while p < end {
                let piece_end = end.min((p / SLICE + 1) * SLICE);
                if p > i && p % SLICE == 0 {
                    token(lit_run, None);
                    lit_run = 0;
                }
                token(lit_run, Some(((piece_end - p).max(2), here.back)));
                lit_run = 0;
                p = piece_end;
            }
            for q in i..end.min((n + 1).saturating_sub(SEED)) {
                insert(&mut table, q);
            }
            i = end;
        } else {
            r.literals.push(codes[i]);
            lit_run += 1;
            if i + SEED <= n {
                insert(&mut table, i);
            }
            i += 1;
        }
    }
    token(lit_run, None);
    let groups = n.div_ceil(GROUP_BASES) as f64;
    let p_rc = r.rc_matches as f64 / r.matches.max(1) as f64;
    let h_rc = if p_rc > 0.0 && p_rc < 1.0 { -(p_rc * p_rc.log2() + (1.0 - p_rc) * (1.0 - p_rc).log2()) } else { 0.0 };
    // Tables: 12 bits per frequency of the 224 length/distance codes, once per group.
    r.token_bits = hist_bits(&ll)
        + hist_bits(&ml)
        + hist_bits(&of)
        + extra as f64
        + h_rc * r.matches as f64
        + groups * 224.0 * 12.0
        + hist_bits(&sub_count)
        + hist_bits(&sub_gap)
        + sub_extra as f64
        + sub_total as f64 * 3f64.log2();
    r.subs = sub_total;
    r
}
