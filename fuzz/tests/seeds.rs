//! Replays every seed (and any crash reproducer dropped next to them) through its target, and regenerates the
//! seed corpora: `cargo test --manifest-path fuzz/Cargo.toml --no-default-features -- --ignored write_seeds`
//! (codec targets) and `... -- --ignored write_archive_seeds` (archive and genome targets, packed from small
//! generated inputs with the crate's own packer).

use std::path::{Path, PathBuf};

use aceapex::codec::block::{self, reference_block_bytes, BlockShape, Token};
use aceapex::codec::rans;
use aceapex::codec::tables::{SymbolStats, Table, TableSet};

type Target = fn(&[u8]);

const TARGETS: [(&str, Target); 7] = [
    ("rans_decode", aceapex_fuzz::rans_decode),
    ("block_decode", aceapex_fuzz::block_decode),
    ("tables_read", aceapex_fuzz::tables_read),
    ("archive_open", aceapex_fuzz::archive_open),
    ("archive_read", aceapex_fuzz::archive_read),
    ("resolver", aceapex_fuzz::resolver),
    ("fasta_layout", aceapex_fuzz::fasta_layout),
];

fn seed_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds").join(target)
}

#[test]
fn replay_seeds() {
    for (name, target) in TARGETS {
        let dir = seed_dir(name);
        let mut count = 0;
        for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let path = entry.unwrap().path();
            target(&std::fs::read(&path).unwrap());
            count += 1;
        }
        assert!(count >= 4, "{name}: only {count} seeds");
    }
}

/// Mutations of each hand-made seed that a fuzzer would try first: truncations and single-byte flips. (The
/// `cmin-*` seeds, a campaign's minimised corpus, are replayed as they are: their mutations are what the
/// campaign already ran.)
#[test]
fn replay_seed_mutations() {
    for (name, target) in TARGETS {
        for entry in std::fs::read_dir(seed_dir(name)).unwrap() {
            let path = entry.unwrap().path();
            if path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("cmin-")) {
                continue;
            }
            let seed = std::fs::read(&path).unwrap();
            let step = (seed.len() / 64).max(1);
            for cut in (0..seed.len()).step_by(step) {
                target(&seed[..cut]);
            }
            for at in (1..seed.len()).step_by(step) {
                let mut flipped = seed.clone();
                flipped[at] ^= 0x5a;
                target(&flipped);
            }
        }
    }
}

/// The smoke run on the stable toolchain (CI has no nightly, so no libFuzzer there): each target gets
/// `FUZZ_SMOKE_SECS` seconds (default 3) of random stacked mutations of its seeds — bit flips, random and boundary
/// bytes and words, inserted, deleted and duplicated ranges, splices of two seeds. Blind where libFuzzer is
/// coverage-guided, but it runs every target's own oracle on thousands of inputs no seed holds, in every test run.
#[test]
fn smoke_random_mutations() {
    let secs: u64 = std::env::var("FUZZ_SMOKE_SECS").ok().and_then(|s| s.parse().ok()).unwrap_or(3);
    let mut rng = Mutator(0x243f_6a88_85a3_08d3);
    for (name, target) in TARGETS {
        let seeds: Vec<Vec<u8>> =
            std::fs::read_dir(seed_dir(name)).unwrap().map(|e| std::fs::read(e.unwrap().path()).unwrap()).collect();
        let started = std::time::Instant::now();
        let mut runs = 0u64;
        while started.elapsed().as_secs() < secs {
            let mut input = seeds[rng.below(seeds.len())].clone();
            for _ in 0..1 + rng.below(8) {
                rng.mutate(&mut input, &seeds);
            }
            target(&input);
            runs += 1;
        }
        println!("{name}: {runs} mutated inputs in {secs} s, no finding");
    }
}

/// xorshift64* with the mutations a fuzzer starts with.
struct Mutator(u64);

impl Mutator {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn mutate(&mut self, input: &mut Vec<u8>, seeds: &[Vec<u8>]) {
        const BOUNDARY: [u64; 8] = [0, 1, 0x7f, 0xff, 0xffff, 0x7fff_ffff, 0xffff_ffff, u64::MAX];
        let len = input.len();
        match self.below(7) {
            0 if len > 0 => {
                let at = self.below(len);
                input[at] ^= 1 << self.below(8);
            }
            1 if len > 0 => {
                let at = self.below(len);
                input[at] = self.next() as u8;
            }
            2 if len > 0 => {
                // A boundary value written over 1, 2, 4 or 8 bytes (lengths, counts and offsets that lie).
                let word = BOUNDARY[self.below(BOUNDARY.len())].to_le_bytes();
                let width = (1 << self.below(4)).min(len);
                let at = self.below(len - width + 1);
                input[at..at + width].copy_from_slice(&word[..width]);
            }
            3 if len > 0 => {
                let at = self.below(len);
                let cut = 1 + self.below((len - at).min(256));
                input.drain(at..at + cut);
            }
            4 => {
                let at = self.below(len + 1);
                let n = 1 + self.below(64);
                let bytes: Vec<u8> = (0..n).map(|_| self.next() as u8).collect();
                input.splice(at..at, bytes);
            }
            5 if len > 0 => {
                let at = self.below(len);
                let n = 1 + self.below((len - at).min(1024));
                let copy = input[at..at + n].to_vec();
                let to = self.below(len + 1);
                input.splice(to..to, copy);
            }
            _ => {
                // Splice: this input's head, another seed's tail.
                let other = &seeds[self.below(seeds.len())];
                let (a, b) = (self.below(len + 1), self.below(other.len() + 1));
                input.truncate(a);
                input.extend_from_slice(&other[b..]);
            }
        }
    }
}

fn dna(n: usize, salt: usize) -> Vec<u8> {
    (0..n).map(|i| b"ACGTTGCAAC"[(i * 7 + salt + i / 13) % 10]).collect()
}

pub(crate) fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = seed_dir(target);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), bytes).unwrap();
}

/// A block's decoded bytes by the byte-wise definition of FORMAT.md §1 (sources before it: a fixed pattern).
fn block_bytes(start: u64, tokens: &[Token], literals: &[u8]) -> Vec<u8> {
    reference_block_bytes(start, tokens, literals, |from| b"ACGT"[(from % 4) as usize])
}

/// A hostile-mode `block_decode` input holding a valid block: header fields (slice_log selector `slice_sel`:
/// `slice_log = 9 + slice_sel`), its tables, its payload.
fn block_seed(lanes_log: u8, start: u64, slice_sel: u8, tokens: &[Token], literals: &[u8]) -> Vec<u8> {
    let bytes = block_bytes(start, tokens, literals);
    let slice_log = 9 + slice_sel;
    let slice_len = 1usize << slice_log;
    let mut stats = SymbolStats::default();
    block::count_symbols(tokens, literals, &bytes, slice_len, &mut stats);
    let tables = TableSet::from_stats(&stats);
    let mut table_bytes = Vec::new();
    tables.write(&mut table_bytes);
    assert!(table_bytes.len() < 256);
    let len = bytes.len() as u32;
    let mut out = vec![lanes_log];
    out.extend_from_slice(&len.to_le_bytes()[..3]);
    assert_eq!(start % 256, 0);
    out.extend_from_slice(&((start >> 8) as u32).to_le_bytes());
    out.push(slice_sel);
    out.push(table_bytes.len() as u8);
    out.extend_from_slice(&table_bytes);
    let lanes = 1u32 << lanes_log;
    let header_len = out.len();
    block::encode_block(tokens, literals, &bytes, slice_len, &tables, lanes, &mut out);
    // The seed must decode in hostile mode.
    let shape = BlockShape { start, len, slice_log, lanes };
    assert!(block::decode_block(&out[header_len..], &tables, shape).is_ok());
    out
}

/// A hostile-mode `rans_decode` input holding a valid stream: `n_a` symbols with a table from `counts`.
fn rans_seed(lanes_log: u8, counts: &[u8], symbols: &[u8]) -> Vec<u8> {
    let table = Table::from_counts(&counts.iter().map(|&c| c as u64).collect::<Vec<_>>());
    let encoded = rans::encode(symbols, &[(symbols.len(), &table)], 1 << lanes_log);
    let mut out = vec![lanes_log];
    out.extend_from_slice(&(symbols.len() as u16).to_le_bytes());
    out.extend_from_slice(&0u16.to_le_bytes());
    out.push(counts.len() as u8);
    out.extend_from_slice(counts);
    rans::write_stream(&encoded, &mut out);
    out
}

#[test]
#[ignore = "regenerates fuzz/seeds"]
fn write_seeds() {
    // rans_decode: valid hostile-mode streams for several lane counts and skews, and round-trip inputs.
    let counts = [30u8, 20, 20, 30];
    let symbols: Vec<u8> = dna(3000, 1).iter().map(|&b| (b >> 1) & 3).collect();
    for lanes_log in [0u8, 2, 5] {
        write("rans_decode", &format!("dna_k{}", 1 << lanes_log), &rans_seed(lanes_log, &counts, &symbols));
    }
    let skewed: Vec<u8> = (0..2000).map(|i| if i % 17 == 0 { 1 } else { 0 }).collect();
    write("rans_decode", "skewed_k8", &rans_seed(3, &[200, 12], &skewed));
    let mut round_trip = vec![0x80 | 5, 100];
    round_trip.extend(dna(700, 3));
    write("rans_decode", "round_trip_k32", &round_trip);
    let mut round_trip = vec![0x80 | 1, 3];
    round_trip.extend((0..=255u8).chain(0..=255));
    write("rans_decode", "round_trip_all_bytes_k2", &round_trip);

    // block_decode: valid blocks (literal-only, periodic fills, far matches), then round-trip shapes.
    write(
        "block_decode",
        "literals_k1",
        &block_seed(0, 0, 0, &[Token { lit_len: 40, match_len: 0, back: 0 }], &dna(40, 0)),
    );
    // Several slices: a long literal run and matches crossing 512-byte slice boundaries (K = 1 and 2).
    let crossing = [
        Token { lit_len: 700, match_len: 900, back: 1 },
        Token { lit_len: 3, match_len: 1100, back: 7 },
        Token { lit_len: 10, match_len: 800, back: 1500 },
        Token { lit_len: 1, match_len: 0, back: 0 },
    ];
    write("block_decode", "slices_k1", &block_seed(0, 1 << 20, 0, &crossing, &dna(714, 9)));
    write("block_decode", "slices_k2", &block_seed(1, 1 << 20, 1, &crossing, &dna(714, 9)));
    let tokens = [
        Token { lit_len: 3, match_len: 50, back: 3 },
        Token { lit_len: 20, match_len: 19, back: 1 },
        Token { lit_len: 0, match_len: 300, back: 1 << 30 },
        Token { lit_len: 5, match_len: 0, back: 0 },
    ];
    write("block_decode", "periodic_far_k32", &block_seed(5, 1 << 32, 2, &tokens, &dna(28, 2)));
    let mut tokens = Vec::new();
    let mut lits = 0;
    for i in 0..200u32 {
        tokens.push(Token { lit_len: i % 9, match_len: 2 + i % 40, back: 1 + (i as u64 * 7919) % 5000 });
        lits += i % 9;
    }
    tokens.push(Token { lit_len: 1, match_len: 0, back: 0 });
    write("block_decode", "many_tokens_k4", &block_seed(2, 8192, 0, &tokens, &dna(lits as usize + 1, 5)));
    let mut shapes = vec![0x80 | 4, 0, 16, 0, 0, 0];
    for i in 0..40u8 {
        shapes.extend_from_slice(&[i % 7, i, 0, i.wrapping_mul(37), i % 3]);
    }
    write("block_decode", "round_trip_k16", &shapes);
    // Single-lane slices (the lock-step decoder), long matches crossing 512-byte slices.
    let mut shapes = vec![0x80, 0, 0, 1, 0, 0];
    for i in 0..24u8 {
        shapes.extend_from_slice(&[i % 5, 200 + i, i % 2, i.wrapping_mul(91), i % 4]);
    }
    write("block_decode", "round_trip_k1", &shapes);

    // tables_read: serialised sets (typical, single-symbol, all unused, maximal alphabets) and count vectors.
    let mut stats = SymbolStats::default();
    let literals = dna(lits as usize + 1, 5);
    let bytes = block_bytes(8192, &tokens, &literals);
    block::count_symbols(&tokens, &literals, &bytes, 512, &mut stats);
    let mut bytes = Vec::new();
    TableSet::from_stats(&stats).write(&mut bytes);
    write("tables_read", "typical", &bytes);
    write("tables_read", "unused", &[0, 0, 0, 0]);
    let mut single = SymbolStats::default();
    single.ll[0] = 1;
    single.lit[b'A' as usize] = 9;
    let mut bytes = Vec::new();
    TableSet::from_stats(&single).write(&mut bytes);
    write("tables_read", "single_symbol", &bytes);
    let mut full = SymbolStats::default();
    full.ll
        .iter_mut()
        .chain(full.ml.iter_mut())
        .chain(full.of.iter_mut())
        .chain(full.lit.iter_mut())
        .for_each(|c| *c = 1);
    let mut bytes = Vec::new();
    TableSet::from_stats(&full).write(&mut bytes);
    write("tables_read", "full_alphabets", &bytes);
    let mut counts = vec![0x80];
    for s in 0..256u32 {
        counts.extend_from_slice(&((s * s) as u16).to_le_bytes());
    }
    write("tables_read", "round_trip_counts", &counts);
}

#[path = "seeds/archive_seeds.rs"]
mod archive_seeds;

/// Format version 3 (session 11) made the campaign-minimised archive seeds (`cmin-*`, version 2) stop at the
/// header's version check. This gives them version 3 (header resealed) so they reach the validators again. The
/// framed ones become bare archives (mode byte, then the image): their version-2 genome regions no longer read
/// back, so the framing's oracles ("while intact, every read succeeds") would not hold for them. Run once after a
/// version bump: `cargo test --manifest-path fuzz/Cargo.toml --no-default-features -- --ignored upgrade_seed_versions`.
#[test]
#[ignore]
fn upgrade_seed_versions() {
    let version = aceapex::format::VERSION;
    for target in ["archive_open", "archive_read", "resolver"] {
        let mut upgraded = 0;
        for entry in std::fs::read_dir(seed_dir(target)).unwrap() {
            let path = entry.unwrap().path();
            let data = std::fs::read(&path).unwrap();
            let (mode, image) = if target == "archive_open" {
                match data.split_first() {
                    Some((&mode, image)) => (mode, image.to_vec()),
                    None => continue,
                }
            } else {
                let framed = aceapex_fuzz::image::unframe(&data);
                (framed.mode, framed.archive.to_vec())
            };
            let mut image = image;
            if image.len() < 64 || &image[..8] != aceapex::format::MAGIC || image[8..10] == version.to_le_bytes() {
                continue;
            }
            image[8..10].copy_from_slice(&version.to_le_bytes());
            let sum = xxhash_rust::xxh3::xxh3_64(&image[..56]);
            image[56..64].copy_from_slice(&sum.to_le_bytes());
            let mut out = vec![mode];
            out.extend_from_slice(&image);
            std::fs::write(&path, out).unwrap();
            upgraded += 1;
        }
        eprintln!("{target}: {upgraded} seeds upgraded to version {version}");
    }
}
