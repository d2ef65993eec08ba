//! Bit-exact round trips through the library: generated edge cases at several block sizes, random inputs with
//! random reads (proptest), and every file of the shared corpus when it is present.

mod common;

use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use aceapex::archive::Archive;
use aceapex::format::tree::EntryKind;
use aceapex::pack::{pack, PackOptions};
use common::Rng;
use proptest::prelude::*;

fn options(block_log: u8) -> PackOptions {
    PackOptions { block_log, threads: 2, ..PackOptions::default() }
}

/// Checks that every regular file in the archive reads back as the file under `input_parent` it came from, in
/// one read and in uneven chunks, and that reads past the end return nothing.
fn assert_files_match(archive: &Archive, input_parent: &Path) -> u64 {
    let tree = archive.tree();
    let mut checked = 0;
    for (id, entry) in tree.entries.iter().enumerate() {
        let EntryKind::File { size, .. } = entry.kind else { continue };
        if entry.flags & 1 != 0 {
            continue; // A generated sidecar has no original on disk.
        }
        let rel = tree.path_of(id as u32);
        let path = input_parent.join(std::ffi::OsStr::from_bytes(&rel));
        let want = std::fs::read(&path).unwrap();
        assert_eq!(size, want.len() as u64, "{}", path.display());
        let mut got = vec![0u8; want.len()];
        let n = archive.read_file(id as u32, 0, &mut got).unwrap();
        assert_eq!(n, want.len(), "{}", path.display());
        assert!(got == want, "{}: bytes differ", path.display());

        // Uneven chunks crossing block boundaries.
        let mut pos = 0usize;
        let mut step = 1usize;
        while pos < want.len() {
            let len = step.min(want.len() - pos);
            let mut chunk = vec![0u8; len];
            let n = archive.read_file(id as u32, pos as u64, &mut chunk).unwrap();
            assert_eq!(n, len);
            assert!(chunk == want[pos..pos + len], "{} at {pos}+{len}", path.display());
            pos += len;
            step = step * 3 + 1;
        }
        let mut past = [0u8; 8];
        assert_eq!(archive.read_file(id as u32, want.len() as u64, &mut past).unwrap(), 0);
        checked += 1;
    }
    checked
}

fn pack_and_check(input: &Path, block_log: u8) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("t.acx");
    let report = pack(&[input.to_path_buf()], &out, &options(block_log)).unwrap();
    let archive = Archive::open(&out).unwrap();
    assert!(archive.verify().is_empty(), "verify reported errors");
    let checked = assert_files_match(&archive, input.parent().unwrap());
    assert!(checked >= 2000, "only {checked} files checked");
    assert_eq!(report.archive_bytes, std::fs::metadata(&out).unwrap().len());
}

#[test]
fn edge_cases_at_4k_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("edge");
    common::write_edge_cases(&input, 4096);
    pack_and_check(&input, 12);
    common::make_removable(dir.path());
}

#[test]
fn edge_cases_at_16k_blocks() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("edge");
    common::write_edge_cases(&input, 16384);
    pack_and_check(&input, 14);
    common::make_removable(dir.path());
}

#[test]
fn every_lane_count_round_trips() {
    // Matches crossing 2 KiB slice boundaries (long repeats, N runs, tandem repeats) for each K per slice.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    let mut rng = Rng::new(31);
    let mut bytes = common::dna_like(&mut rng, 50_000);
    bytes.extend(std::iter::repeat_n(b'N', 9_000));
    bytes.extend(common::periodic(&mut rng, 7, 6_000));
    let copy = bytes[1000..30_000].to_vec();
    bytes.extend(copy);
    std::fs::write(input.join("a.fa"), &bytes).unwrap();
    for lanes in [1u8, 2] {
        let out = dir.path().join(format!("k{lanes}.acx"));
        pack(std::slice::from_ref(&input), &out, &PackOptions { rans_lanes: lanes, ..options(14) }).unwrap();
        let archive = Archive::open(&out).unwrap();
        assert_eq!(archive.data().header.rans_lanes, lanes);
        assert!(archive.verify().is_empty(), "K = {lanes}: verify reported errors");
        let id = archive.tree().resolve_path(b"in/a.fa").unwrap();
        let mut got = vec![0u8; bytes.len()];
        assert_eq!(archive.read_file(id, 0, &mut got).unwrap(), bytes.len());
        assert!(got == bytes, "K = {lanes}: bytes differ");
        // A cold read in the middle, through slice-level random access.
        let cold = Archive::open(&out).unwrap();
        let mut mid = vec![0u8; 5000];
        cold.read_file(id, 60_000, &mut mid).unwrap();
        assert!(mid == bytes[60_000..65_000], "K = {lanes}: cold read differs");
    }
}

#[test]
fn single_empty_file_and_single_byte() {
    for content in [&b""[..], b"z"] {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("f");
        std::fs::write(&input, content).unwrap();
        let out = dir.path().join("t.acx");
        pack(std::slice::from_ref(&input), &out, &options(14)).unwrap();
        let archive = Archive::open(&out).unwrap();
        assert!(archive.verify().is_empty());
        let id = archive.tree().resolve_path(b"f").unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(archive.read_file(id, 0, &mut buf).unwrap(), content.len());
        assert_eq!(&buf[..content.len()], content);
    }
}

#[test]
fn packing_is_deterministic_across_thread_counts() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::write(&input, common::dna_like(&mut Rng::new(9), 300_000)).unwrap();
    let mut outputs = Vec::new();
    for threads in [1, 2] {
        let out = dir.path().join(format!("t{threads}.acx"));
        pack(std::slice::from_ref(&input), &out, &PackOptions { threads, ..options(12) }).unwrap();
        outputs.push(std::fs::read(&out).unwrap());
    }
    assert!(outputs[0] == outputs[1], "archives differ between 1 and 2 threads");
}

/// Random inputs: a mix of random bytes, DNA-like text and repeats, so matches of every kind occur.
fn input_strategy() -> impl Strategy<Value = Vec<u8>> {
    (any::<u64>(), 0usize..120_000, 0u8..4).prop_map(|(seed, len, kind)| {
        let mut rng = Rng::new(seed);
        match kind {
            0 => rng.bytes(len),
            1 => common::periodic(&mut rng, 1 + (seed % 5000) as usize, len),
            _ => common::dna_like(&mut rng, len),
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn random_inputs_random_reads(
        data in input_strategy(),
        reads in proptest::collection::vec((any::<u64>(), 0usize..40_000), 1..12),
        block_log in 12u8..15,
    ) {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("data");
        std::fs::write(&input, &data).unwrap();
        let out = dir.path().join("t.acx");
        pack(&[input], &out, &PackOptions { level: 3, ..options(block_log) }).unwrap();
        let archive = Archive::open(&out).unwrap();
        let id = archive.tree().resolve_path(b"data").unwrap();
        for (offset, len) in reads {
            let offset = if data.is_empty() { offset % 4 } else { offset % (data.len() as u64 + 2) };
            let mut buf = vec![0u8; len];
            let n = archive.read_file(id, offset, &mut buf).unwrap();
            let start = (offset as usize).min(data.len());
            let want = &data[start..(start + len).min(data.len())];
            prop_assert_eq!(n, want.len());
            prop_assert!(&buf[..n] == want, "read {}+{} differs", offset, len);
        }
    }
}

/// Every file of the shared corpus in one archive (skipped, with a note, on a clone without it). Packed at a fast
/// level so the suite stays quick on 2 cores; the default level is covered on the small yeast files below and by
/// bench/run.sh on everything.
#[test]
fn corpus_round_trip() {
    let Some(corpus) = common::corpus_dir() else {
        eprintln!("shared corpus not found next to the repository: skipping the corpus round trip");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("corpus");
    let files = common::unpack_corpus(&corpus, &plain, |_| true);
    assert!(!files.is_empty(), "no .gz files in {}", corpus.display());
    let archive = pack_corpus(&plain, &dir.path().join("corpus.acx"), 2);
    let checked = assert_files_match(&archive, &plain);
    assert_eq!(checked, files.len() as u64);
    assert!(archive.verify().is_empty(), "verify reported errors on the corpus archive");

    // Random 4 KiB reads against the originals.
    let mut rng = Rng::new(1);
    for _ in 0..200 {
        let path = &files[rng.below(files.len() as u64) as usize];
        let want = std::fs::read(path).unwrap();
        let rel = path.strip_prefix(&plain).unwrap();
        let id = archive.tree().resolve_path(rel.as_os_str().as_bytes()).unwrap();
        let offset = rng.below(want.len() as u64 + 1) as usize;
        let mut buf = vec![0u8; 4096];
        let n = archive.read_file(id, offset as u64, &mut buf).unwrap();
        let end = (offset + 4096).min(want.len());
        assert_eq!(&buf[..n], &want[offset..end], "{} at {offset}", rel.display());
    }
}

/// The small yeast files at the default level: the parse and depth bound that users get, on real FASTA.
#[test]
fn corpus_yeast_at_default_level() {
    let Some(corpus) = common::corpus_dir() else {
        eprintln!("shared corpus not found next to the repository: skipping the yeast round trip");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("corpus");
    let files = common::unpack_corpus(&corpus, &plain, |p| p.to_string_lossy().contains("yeast-chrI"));
    if files.is_empty() {
        eprintln!("no yeast-chrI files in the corpus: skipping");
        return;
    }
    let archive = pack_corpus(&plain, &dir.path().join("yeast.acx"), PackOptions::default().level);
    assert_eq!(assert_files_match(&archive, &plain), files.len() as u64);
    assert!(archive.verify().is_empty());
}

fn pack_corpus(plain: &Path, out: &Path, level: u8) -> Archive {
    let inputs: Vec<PathBuf> = std::fs::read_dir(plain).unwrap().map(|e| e.unwrap().path()).collect();
    pack(&inputs, out, &PackOptions { level, threads: 0, ..PackOptions::default() }).unwrap();
    Archive::open(out).unwrap()
}
