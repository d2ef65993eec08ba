//! Genome mode end to end (FORMAT.md §2.6): FASTA files packed as structure plus bases read back byte for byte
//! through the library (random ranges), `aceapex cat` (whole, ranges, sequential and random paths), `unpack` and
//! `verify`, beside files that stay in general mode; a proptest of random FASTA-like files; and the corpus
//! genomes when they are present.

mod common;

use std::path::Path;

use aceapex::archive::Archive;
use aceapex::format::tree::{EntryKind, TRANSFORM_GENOME};
use aceapex::pack::{pack, PackOptions};
use common::{wrap, Rng};
use proptest::prelude::*;

/// A genome-like sequence: random bases with repeats (so the LZ stage has matches), a soft-masked stretch, an N
/// run and a few IUPAC codes.
fn sequence(rng: &mut Rng, n: usize) -> Vec<u8> {
    let mut s: Vec<u8> = (0..n).map(|_| b"ACGT"[rng.below(4) as usize]).collect();
    for _ in 0..n / 2000 {
        let (from, to, len) = (rng.below(n as u64 / 2) as usize, rng.below(n as u64) as usize, 300usize);
        if to + len < n && from + len < n {
            let piece = s[from..from + len].to_vec();
            s[to..to + len].copy_from_slice(&piece);
        }
    }
    let lower = n / 3;
    s[lower..lower + n / 10].make_ascii_lowercase();
    s[n / 2..n / 2 + 500].fill(b'N');
    for (i, &code) in b"RYKMSWBDHVn".iter().enumerate() {
        s[n / 5 + 37 * i] = code;
    }
    s
}

/// FASTA files covering the byte-exactness rules, and two files that must stay in general mode.
fn write_inputs(dir: &Path) -> Vec<(String, Vec<u8>, bool)> {
    let mut rng = Rng::new(11);
    let mut files: Vec<(String, Vec<u8>, bool)> = Vec::new();
    let mut two = b">chr1 first record\n".to_vec();
    two.extend(wrap(&sequence(&mut rng, 60_000), 60, b"\n"));
    two.extend_from_slice(b">chr2\n");
    two.extend(wrap(&sequence(&mut rng, 40_000), 80, b"\n"));
    files.push(("two_records.fa".into(), two, true));
    let mut crlf = b">crlf\r\n".to_vec();
    crlf.extend(wrap(&sequence(&mut rng, 30_000), 70, b"\r\n"));
    files.push(("crlf.fa".into(), crlf, true));
    // No final newline, a last short line, a blank line between records, widths that change inside a record.
    let mut odd = b">odd\n".to_vec();
    let seq = sequence(&mut rng, 50_000);
    odd.extend(wrap(&seq[..20_000], 50, b"\n"));
    odd.extend(wrap(&seq[20_000..40_000], 61, b"\n"));
    odd.extend_from_slice(b"\n>next after a blank line\n");
    odd.extend(wrap(&seq[40_000..], 100, b"\n"));
    odd.pop();
    files.push(("odd_layout.fa".into(), odd, true));
    files.push(("notes.txt".into(), b"not a FASTA file\n".repeat(100), false));
    // A '>' file the model refuses (a residue byte outside the alphabet): general mode, still exact.
    files.push(("refused.fa".into(), b">x\nACGT*ACGT\n".repeat(200), false));
    for (name, bytes, _) in &files {
        std::fs::write(dir.join(name), bytes).unwrap();
    }
    files
}

#[test]
fn genome_files_read_back_exactly_through_every_path() {
    let work = tempfile::tempdir().unwrap();
    let inputs = work.path().join("in");
    std::fs::create_dir(&inputs).unwrap();
    let files = write_inputs(&inputs);
    let archive_path = work.path().join("g.acx");
    let report = pack(std::slice::from_ref(&inputs), &archive_path, &PackOptions::default()).unwrap();
    let original: u64 = files.iter().map(|f| f.1.len() as u64).sum();
    assert_eq!(report.input_bytes, original, "input bytes are the original sizes, sidecars not counted");

    let archive = Archive::open(&archive_path).unwrap();
    let tree = archive.tree();
    let mut rng = Rng::new(5);
    for (name, bytes, genome) in &files {
        let id = tree.resolve_path(format!("in/{name}").as_bytes()).unwrap();
        let is_genome = matches!(tree.entry(id).unwrap().kind, EntryKind::File { transform: TRANSFORM_GENOME, .. });
        assert_eq!(is_genome, *genome, "{name}: genome mode");
        assert_eq!(archive.is_genome_file(id), *genome);
        // Whole file, then random ranges (some crossing line ends and running past EOF).
        let mut whole = vec![0u8; bytes.len() + 10];
        let n = archive.read_file(id, 0, &mut whole).unwrap();
        assert_eq!(&whole[..n], &bytes[..], "{name} whole");
        for _ in 0..300 {
            let off = rng.below(bytes.len() as u64 + 3);
            let len = [1, 2, 61, 4096, 20_000][rng.below(5) as usize];
            let mut buf = vec![0u8; len];
            let n = archive.read_file(id, off, &mut buf).unwrap();
            let (a, b) = ((off as usize).min(bytes.len()), (off as usize + len).min(bytes.len()));
            assert_eq!(&buf[..n], &bytes[a..b], "{name} read {len} at {off}");
        }
    }
    assert!(archive.verify().is_empty());

    // The command line: cat (whole file: sequential path; small range: random path), unpack, verify.
    for (name, bytes, _) in &files {
        let path = format!("in/{name}");
        let out = common::run(&["cat", archive_path.to_str().unwrap(), &path]);
        assert_eq!(out.stdout, *bytes, "cat {name}");
        let (off, len) = (bytes.len() / 3, 5000.min(bytes.len() / 2));
        let (o, l) = (off.to_string(), len.to_string());
        let out = common::run(&["cat", archive_path.to_str().unwrap(), &path, "--offset", &o, "--length", &l]);
        assert_eq!(out.stdout, bytes[off..off + len], "cat range of {name}");
    }
    let dest = work.path().join("out");
    let out = common::run(&["unpack", archive_path.to_str().unwrap(), "-C", dest.to_str().unwrap()]);
    common::assert_exit(&out, 0, "unpack");
    for (name, bytes, _) in &files {
        assert_eq!(std::fs::read(dest.join("in").join(name)).unwrap(), *bytes, "unpacked {name}");
    }
    let out = common::run(&["verify", archive_path.to_str().unwrap()]);
    common::assert_exit(&out, 0, "verify");

    // Genome mode pays: the same inputs without it make a larger archive.
    let plain_path = work.path().join("plain.acx");
    let opts = PackOptions { genome: false, ..PackOptions::default() };
    let plain = pack(std::slice::from_ref(&inputs), &plain_path, &opts).unwrap();
    assert!(report.archive_bytes < plain.archive_bytes, "{} vs {}", report.archive_bytes, plain.archive_bytes);
}

/// Random FASTA-like files (records, widths, case, N and IUPAC runs, CRLF, blank lines, final newline or not):
/// whatever mode the packer picks, every range reads back exactly.
fn fasta_file() -> impl Strategy<Value = Vec<u8>> {
    let residue = prop_oneof![
        60 => prop::sample::select(b"ACGT".to_vec()),
        10 => prop::sample::select(b"acgt".to_vec()),
        2 => prop::sample::select(b"Nn".to_vec()),
        1 => prop::sample::select(b"RYKMSWBDHVrykmswbdhv".to_vec()),
    ];
    let record = (prop::collection::vec(0x20u8..0x7f, 0..20), prop::collection::vec(residue, 0..3000), 1usize..120);
    (prop::collection::vec(record, 1..4), any::<bool>(), any::<bool>()).prop_map(|(records, crlf, final_nl)| {
        let term: &[u8] = if crlf { b"\r\n" } else { b"\n" };
        let mut out = Vec::new();
        for (header, seq, width) in records {
            out.push(b'>');
            out.extend_from_slice(&header);
            out.extend_from_slice(term);
            out.extend(wrap(&seq, width, term));
        }
        if !final_nl {
            while matches!(out.last(), Some(b'\n' | b'\r')) {
                out.pop();
            }
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_fasta_reads_back_exactly(input in fasta_file(), reads in prop::collection::vec((any::<u64>(), 1usize..500), 24)) {
        let work = tempfile::tempdir().unwrap();
        let file = work.path().join("r.fa");
        std::fs::write(&file, &input).unwrap();
        let archive_path = work.path().join("r.acx");
        pack(std::slice::from_ref(&file), &archive_path, &PackOptions { threads: 1, ..PackOptions::default() }).unwrap();
        let archive = Archive::open(&archive_path).unwrap();
        let id = archive.tree().resolve_path(b"r.fa").unwrap();
        let mut whole = vec![0u8; input.len()];
        let n = archive.read_file(id, 0, &mut whole).unwrap();
        prop_assert_eq!(&whole[..n], &input[..]);
        let len = input.len() as u64;
        for (off, want) in reads {
            let off = off % (len + 2);
            let mut buf = vec![0u8; want];
            let n = archive.read_file(id, off, &mut buf).unwrap();
            let (a, b) = (off.min(len) as usize, (off + want as u64).min(len) as usize);
            prop_assert_eq!(&buf[..n], &input[a..b]);
        }
    }
}

/// The corpus genomes, when ../shared/corpus is present: the six fly assemblies packed together in genome mode
/// read back exactly, and beat general mode.
#[test]
fn corpus_fly_genomes_when_present() {
    let Some(corpus) = common::corpus_dir() else {
        eprintln!("SKIP: no corpus");
        return;
    };
    let work = tempfile::tempdir().unwrap();
    let fly = common::unpack_corpus(&corpus.join("fly-chr4"), work.path(), |p| {
        p.file_name().is_some_and(|n| n.to_string_lossy().contains("_genomic"))
    });
    if fly.is_empty() {
        eprintln!("SKIP: no fly genomic files in the corpus");
        return;
    }
    let archive_path = work.path().join("fly.acx");
    let genome = pack(&fly, &archive_path, &PackOptions::default()).unwrap();
    let archive = Archive::open(&archive_path).unwrap();
    for path in &fly {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let id = archive.tree().resolve_path(name.as_bytes()).unwrap();
        let want = std::fs::read(path).unwrap();
        let mut got = vec![0u8; want.len()];
        assert_eq!(archive.read_file(id, 0, &mut got).unwrap(), want.len());
        assert!(got == want, "{name} differs");
    }
    let plain =
        pack(&fly, &work.path().join("plain.acx"), &PackOptions { genome: false, ..PackOptions::default() }).unwrap();
    eprintln!(
        "fly genomic x{}: genome mode ratio {:.3}, general mode {:.3}",
        fly.len(),
        genome.input_bytes as f64 / genome.archive_bytes as f64,
        plain.input_bytes as f64 / plain.archive_bytes as f64
    );
    assert!(genome.archive_bytes < plain.archive_bytes);
}
