//! Seeds for the whole-archive and genome targets: real archives packed by the crate's own packer from small
//! generated inputs (DNA-like text with repeats, random bytes, periodic runs, many tiny files, odd names), kept
//! beside the files they were packed from (see `aceapex_fuzz::image`), and FASTA texts covering every layout
//! rule with their serialised structures.

use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use aceapex::format::tree::{EntryKind, FLAG_SIDECAR};
use aceapex::format::ArchiveData;
use aceapex::genome::{serial, split};
use aceapex::pack::{pack, PackOptions};
use aceapex_fuzz::image::{frame, Original, RESEAL};

use super::write;

/// SplitMix64, so the seeds are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// DNA-like text with copies of earlier stretches (matches near and far, across blocks).
fn dna_like(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        if out.len() > 200 && rng.below(2) == 0 {
            let from = rng.below(out.len() as u64 - 100) as usize;
            let n = (20 + rng.below(400) as usize).min(out.len() - from);
            for i in from..from + n {
                out.push(out[i]);
            }
        } else {
            for _ in 0..rng.below(60) {
                out.push(b"ACGT"[rng.below(4) as usize]);
            }
        }
    }
    out.truncate(len);
    out
}

/// One seed archive: the files to pack (relative path, bytes) and the packer's settings.
struct Input {
    name: &'static str,
    files: Vec<(Vec<u8>, Vec<u8>)>,
    opts: PackOptions,
}

fn opts(lanes: u8, max_depth: u8, group_log: u8, level: u8) -> PackOptions {
    PackOptions { block_log: 12, level, max_depth, threads: 1, rans_lanes: lanes, group_log, ..PackOptions::default() }
}

fn inputs() -> Vec<Input> {
    let mut rng = Rng(6);
    let dna = dna_like(&mut rng, 9000);
    let random: Vec<u8> = (0..1200).map(|_| rng.next() as u8).collect();
    let periodic: Vec<u8> = (0..5000u32).map(|i| b"GATTACA!"[(i % 8) as usize]).collect();
    let mixed = vec![
        (b"dna".to_vec(), dna.clone()),
        (b"random".to_vec(), random),
        (b"sub/periodic".to_vec(), periodic.clone()),
        (b"sub/empty".to_vec(), Vec::new()),
    ];
    let tiny: Vec<(Vec<u8>, Vec<u8>)> = (0..12u8)
        .map(|i| (format!("f{i:02}").into_bytes(), dna_like(&mut Rng(i as u64), 10 + 13 * i as usize)))
        .collect();
    let odd_names = vec![
        (b"caf\xe9\xff".to_vec(), dna_like(&mut rng, 700)),
        (b"new\nline".to_vec(), b"x".repeat(300)),
        (vec![b'n'; 200], dna[..2000].to_vec()),
    ];
    vec![
        Input { name: "mixed_k1", files: mixed.clone(), opts: opts(1, 16, 1, 6) },
        Input { name: "mixed_k2_depth2", files: mixed, opts: opts(2, 2, 0, 9) },
        Input { name: "dna_k2_level1", files: vec![(b"dna".to_vec(), dna)], opts: opts(2, 4, 2, 1) },
        Input { name: "run_of_one_byte", files: vec![(b"run".to_vec(), vec![b'N'; 12000])], opts: opts(2, 16, 1, 6) },
        Input { name: "periodic_depth1", files: vec![(b"p".to_vec(), periodic)], opts: opts(1, 1, 0, 6) },
        Input { name: "tiny_files", files: tiny, opts: opts(1, 16, 1, 6) },
        Input { name: "odd_names", files: odd_names, opts: opts(2, 8, 3, 6) },
        Input { name: "empty_dir", files: Vec::new(), opts: opts(1, 16, 1, 6) },
        // FASTA that genome mode stores as structure plus bases (transform 1), beside a plain file.
        Input { name: "genome_mode", files: genome_files(), opts: opts(2, 16, 1, 6) },
        // FASTA whose bases have context structure: the packer gives them a literal context model (format
        // version 4), stored by the first group of the chunk and referred to by later ones (ctx_back), and flags
        // the slices whose literals are all bases.
        Input { name: "genome_ctx_k1", files: ctx_genome_files(1), opts: opts(1, 16, 0, 6) },
        Input { name: "genome_ctx_k2", files: ctx_genome_files(1), opts: opts(2, 4, 1, 6) },
        // FASTA with inverted repeats: the packer codes them as reverse-complement matches (format version 5),
        // explicit and continued, near and across blocks, some through chains of both kinds.
        Input { name: "genome_rc_k2", files: rc_genome_files(), opts: opts(2, 16, 1, 6) },
        Input { name: "genome_rc_k1_depth3", files: rc_genome_files(), opts: opts(1, 3, 0, 9) },
    ]
}

/// Seeds whose archives must hold reverse-complement matches.
pub(crate) const RC_SEEDS: [&str; 2] = ["genome_rc_k2", "genome_rc_k1_depth3"];

/// A FASTA whose sequence repeats earlier stretches as their reverse complements (one base in 40 substituted,
/// so the matches continue across substitutions), some of them of stretches that are copies themselves.
fn rc_genome_files() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut rng = Rng(33);
    let mut seq: Vec<u8> = (0..3000).map(|_| b"ACGT"[rng.below(4) as usize]).collect();
    while seq.len() < 30_000 {
        let len = 200 + rng.below(1500) as usize;
        let from = rng.below((seq.len() - len) as u64) as usize;
        let mut piece: Vec<u8> = seq[from..from + len].to_vec();
        if rng.below(3) > 0 {
            piece.reverse();
            piece.iter_mut().for_each(|b| *b = aceapex::codec::block::COMPLEMENT[*b as usize]);
        }
        for (i, b) in piece.iter_mut().enumerate() {
            if i % 40 == 39 {
                *b = b"ACGT"[rng.below(4) as usize];
            }
        }
        seq.extend_from_slice(&piece);
        seq.extend((0..rng.below(50)).map(|_| b"ACGT"[rng.below(4) as usize]));
    }
    let mut fasta = b">inverted repeats\n".to_vec();
    for line in seq.chunks(70) {
        fasta.extend_from_slice(line);
        fasta.push(b'\n');
    }
    vec![(b"rc.fa".to_vec(), fasta)]
}

/// Seeds that must reach the context decoder: their archives hold a context model.
const CONTEXT_SEEDS: [&str; 2] = ["genome_ctx_k1", "genome_ctx_k2"];

/// A FASTA of context-structured bases (upper and lower case, an N run) with a copied stretch. Each base depends
/// on the bases `lag` and `2·lag` before it.
fn ctx_genome_files(lag: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut fasta = Vec::new();
    for (name, len, salt) in [("chrA", 20000usize, 7u64), ("chrB", 5000, 8)] {
        fasta.extend_from_slice(format!(">{name}\n").as_bytes());
        let mut seq = super::markov_bases(len, salt, lag);
        let copy = seq[1000..1600].to_vec();
        seq[len - 1000..len - 400].copy_from_slice(&copy);
        seq[3000..3050].fill(b'N');
        seq[4000..4300].make_ascii_lowercase();
        for line in seq.chunks(60) {
            fasta.extend_from_slice(line);
            fasta.push(b'\n');
        }
    }
    vec![(b"ctx.fa".to_vec(), fasta)]
}

/// A soft-masked FASTA with N runs, long enough for genome mode to pay, and a plain text file.
fn genome_files() -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut rng = Rng(21);
    let mut fasta = Vec::new();
    for (name, len) in [("chr1", 9000usize), ("chrM", 2500)] {
        fasta.extend_from_slice(format!(">{name} test\n").as_bytes());
        let mut seq = dna_like(&mut rng, len);
        seq[100..160].fill(b'N');
        seq[400..700].make_ascii_lowercase();
        for line in seq.chunks(60) {
            fasta.extend_from_slice(line);
            fasta.push(b'\n');
        }
    }
    vec![(b"g.fa".to_vec(), fasta), (b"notes.txt".to_vec(), b"plain text beside the genome\n".repeat(20))]
}

/// Packs `input` under `dir/in` and returns the archive and the originals named as the archive's tree names
/// them.
fn pack_input(dir: &Path, input: &Input) -> (Vec<u8>, Vec<Original>) {
    let root = dir.join(input.name).join("in");
    std::fs::create_dir_all(&root).unwrap();
    for (rel, bytes) in &input.files {
        let path = root.join(std::ffi::OsStr::from_bytes(rel));
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, bytes).unwrap();
    }
    let archive = dir.join(input.name).join("seed.acx");
    pack(&[root], &archive, &input.opts).unwrap();
    let data = ArchiveData::open(&archive).unwrap();
    let base = dir.join(input.name);
    let originals = (0..data.tree.entries.len() as u32)
        // Generated sidecars (a FASTA's `.fai`) have no file on disk: they are read but not compared.
        .filter(|&id| {
            let e = &data.tree.entries[id as usize];
            matches!(e.kind, EntryKind::File { .. }) && e.flags & FLAG_SIDECAR == 0
        })
        .map(|id| {
            let path = data.tree.path_of(id);
            let bytes = std::fs::read(base.join(std::ffi::OsStr::from_bytes(&path))).unwrap();
            Original { path, bytes }
        })
        .collect();
    (std::fs::read(&archive).unwrap(), originals)
}

/// FASTA texts, one per layout rule: regular records, soft-masking with N runs and IUPAC codes, CRLF, no final
/// newline, blank lines, widths changing inside a record, a header-only file.
fn fasta_texts() -> Vec<(&'static str, Vec<u8>)> {
    let mut rng = Rng(9);
    let seq = dna_like(&mut rng, 700);
    let wrap = |s: &[u8], w: usize, term: &[u8]| -> Vec<u8> {
        s.chunks(w).flat_map(|l| l.iter().chain(term.iter()).copied()).collect()
    };
    let mut regular = b">chr1 test\n".to_vec();
    regular.extend(wrap(&seq[..500], 60, b"\n"));
    regular.extend(b">chr2\n");
    regular.extend(wrap(&seq[500..], 70, b"\n"));
    let mut masked = b">m\n".to_vec();
    let mut body = seq[..400].to_vec();
    body[50..90].make_ascii_lowercase();
    body[120..180].fill(b'N');
    body[200..205].copy_from_slice(b"RYKMn");
    masked.extend(wrap(&body, 50, b"\n"));
    let mut crlf = b">c\r\n".to_vec();
    crlf.extend(wrap(&seq[..300], 80, b"\r\n"));
    let mut no_newline = b">x\n".to_vec();
    no_newline.extend(wrap(&seq[..130], 60, b"\n"));
    no_newline.pop();
    let mut ragged = b">r\n\n".to_vec();
    ragged.extend(wrap(&seq[..200], 60, b"\n"));
    ragged.extend(b"\n");
    ragged.extend(wrap(&seq[200..320], 33, b"\n"));
    vec![
        ("regular", regular),
        ("masked", masked),
        ("crlf", crlf),
        ("no_final_newline", no_newline),
        ("blank_and_ragged", ragged),
        ("header_only", b">only a header".to_vec()),
    ]
}

#[test]
#[ignore = "regenerates fuzz/seeds/{archive_open,archive_read,resolver,fasta_layout}"]
fn write_archive_seeds() {
    let dir = tempfile::tempdir().unwrap();
    for (i, input) in inputs().iter().enumerate() {
        let (archive, originals) = pack_input(dir.path(), input);
        if CONTEXT_SEEDS.contains(&input.name) {
            let data = ArchiveData::open(dir.path().join(input.name).join("seed.acx")).unwrap();
            let models = data.tables.iter().filter(|t| t.ctx.as_ref().is_some_and(|c| c.back == 0)).count();
            let refs = data.tables.iter().filter(|t| t.ctx.as_ref().is_some_and(|c| c.back > 0)).count();
            eprintln!("{}: {} groups, {models} context models, {refs} references", input.name, data.tables.len());
            assert!(models > 0, "{}: no context model", input.name);
        }
        // Alternate resealed and plain modes; the fuzzer flips the bit itself.
        let mode = if i % 2 == 0 { RESEAL } else { 0 };
        let mut open = vec![mode];
        open.extend_from_slice(&archive);
        write("archive_open", input.name, &open);
        write("archive_read", input.name, &frame(mode, &originals, &archive));
        write("resolver", input.name, &frame(mode, &originals, &archive));
    }
    for (name, text) in fasta_texts() {
        let mut fasta = vec![0u8];
        fasta.extend_from_slice(&text);
        write("fasta_layout", name, &fasta);
        let genome = split(&text).unwrap_or_else(|| panic!("{name}: not modelled")).genome;
        let mut structure = vec![1u8 | 2];
        structure.extend(serial::encode(&genome));
        write("fasta_layout", &format!("{name}.structure"), &structure);
        // The same file as a piece table over pieces of ~40 original bytes (structure version 4).
        let mut table = vec![1u8 | 2 | 4];
        table.extend(aceapex::genome::pieces::encode_file(&text, 40, |_| {}).unwrap().structure);
        write("fasta_layout", &format!("{name}.pieces"), &table);
    }
}

/// The archive seeds must reach the strong checks: each frames its originals and is intact, so the targets
/// compare every read with the truth and require every read to succeed. (`regress-*` and `cmin-*` seeds come
/// from campaigns, kept as they were found.)
#[test]
fn archive_seeds_are_intact_and_carry_their_originals() {
    for target in ["archive_read", "resolver"] {
        let dir = super::seed_dir(target);
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if name.starts_with("regress-") || name.starts_with("cmin-") {
                continue;
            }
            let bytes = std::fs::read(&path).unwrap();
            let framed = aceapex_fuzz::image::unframe(&bytes);
            let (_, intact) = aceapex_fuzz::image::prepare(&framed);
            assert!(intact, "{}: not intact", path.display());
            let originals = framed.originals.unwrap_or_else(|| panic!("{}: no originals", path.display()));
            let is_empty_dir = path.file_name().is_some_and(|n| n == "empty_dir");
            assert!(is_empty_dir || !originals.is_empty(), "{}: no files", path.display());
        }
    }
}
