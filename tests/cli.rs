//! The `aceapex` binary end to end: pack → unpack reproduces the tree exactly (bytes, modes, mtimes, symlinks,
//! odd names); ls, cat, info and verify print what they should; exit codes follow the documented contract.

mod common;

use std::ffi::OsStr;
use std::io::Read;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::process::{Command, Stdio};

use common::{assert_exit, run};

fn pack_tree(input: &Path, out: &Path, extra: &[&str]) {
    let mut args: Vec<&OsStr> = vec![OsStr::new("pack"), input.as_os_str(), OsStr::new("-o"), out.as_os_str()];
    args.extend(extra.iter().map(OsStr::new));
    args.push(OsStr::new("--quiet"));
    let out = run(&args);
    assert_exit(&out, 0, "pack");
}

#[test]
fn pack_unpack_reproduces_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("edge");
    common::write_edge_cases(&input, 4096);
    let archive = dir.path().join("edge.acx");
    pack_tree(&input, &archive, &["--block-size", "4K", "--threads", "2"]);

    let dest = dir.path().join("out");
    let out = run(&[OsStr::new("unpack"), archive.as_os_str(), OsStr::new("-C"), dest.as_os_str()]);
    assert_exit(&out, 0, "unpack");
    common::assert_same_tree(&input, &dest.join("edge"));

    // Unpacking again into the same place must refuse to overwrite, not clobber.
    let again = run(&[OsStr::new("unpack"), archive.as_os_str(), OsStr::new("-C"), dest.as_os_str()]);
    assert_exit(&again, 1, "unpack over existing files");
    common::assert_same_tree(&input, &dest.join("edge"));

    // ls lists every entry once; -l shows modes and symlink targets.
    let ls = run(&[OsStr::new("ls"), archive.as_os_str()]);
    assert_exit(&ls, 0, "ls");
    let lines: Vec<&[u8]> = ls.stdout.split(|&b| b == b'\n').filter(|l| !l.is_empty()).collect();
    let original = common::snapshot(&input);
    // Generated sidecars are listed too (a random small file that happens to look like FASTA gets one).
    let long = run(&[OsStr::new("ls"), OsStr::new("-l"), archive.as_os_str()]);
    assert_exit(&long, 0, "ls -l");
    let text = String::from_utf8_lossy(&long.stdout);
    let generated = text.lines().filter(|l| l.ends_with("[generated]")).count();
    // A name with a newline spans two lines; every other entry is one line, plus the top directory.
    assert_eq!(lines.len(), original.len() + 1 + 1 + generated, "ls line count");
    assert!(text.contains("edge/links/to_dna -> ../dna"), "{text}");
    assert!(text.contains("dr-xr-xr-x"), "read-only directory mode missing");
    assert!(text.lines().any(|l| l.starts_with("-r--r--r--") && l.contains("edge/period_3")), "mode of period_3");

    // cat of a few files, whole and by range, and through a symlink inside the archive.
    for name in ["dna", "zeros", "empty", "one_byte", "period_larger_than_block"] {
        let want = std::fs::read(input.join(name)).unwrap();
        let path = format!("edge/{name}");
        let cat = run(&[OsStr::new("cat"), archive.as_os_str(), OsStr::new(&path)]);
        assert_exit(&cat, 0, "cat");
        assert!(cat.stdout == want, "cat {name}");
        let (off, len) = (want.len() / 3, 5000);
        let ranged = run(&[
            OsStr::new("cat"),
            archive.as_os_str(),
            OsStr::new(&path),
            OsStr::new("--offset"),
            OsStr::new(&off.to_string()),
            OsStr::new("--length"),
            OsStr::new(&len.to_string()),
        ]);
        assert_exit(&ranged, 0, "cat range");
        assert_eq!(ranged.stdout, want[off..(off + len).min(want.len())], "cat {name} range");
    }
    let via_link = run(&[OsStr::new("cat"), archive.as_os_str(), OsStr::new("edge/links/to_dna")]);
    assert_exit(&via_link, 0, "cat through a symlink");
    assert!(via_link.stdout == std::fs::read(input.join("dna")).unwrap());

    common::make_removable(dir.path());
}

#[test]
fn info_and_verify_on_a_good_archive() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("data.txt");
    std::fs::write(&input, common::dna_like(&mut common::Rng::new(3), 200_000)).unwrap();
    let archive = dir.path().join("d.acx");
    pack_tree(&input, &archive, &["--block-size", "16K"]);

    let info = run(&[OsStr::new("info"), OsStr::new("--json"), archive.as_os_str()]);
    assert_exit(&info, 0, "info --json");
    let json: serde_json::Value = serde_json::from_slice(&info.stdout).expect("info --json prints JSON");
    assert_eq!(json["block_size"], 16384);
    assert_eq!(json["blocks"], 13); // ceil(200000 / 16384)
    assert_eq!(json["slice_size"], 4096);
    assert_eq!(json["slices"], 49); // ceil(200000 / 4096)
    assert_eq!(json["original_bytes"], 200_000);
    assert_eq!(json["archive_bytes"], std::fs::metadata(&archive).unwrap().len());
    assert_eq!(json["entries"]["files"], 1);
    let ratio = json["ratio"].as_f64().unwrap();
    assert!(ratio > 1.5, "DNA-like text should compress, ratio {ratio}");
    let streams = &json["streams"];
    assert_eq!(streams["unreadable_blocks"], 0);
    // The per-stream split accounts for every payload byte (FORMAT.md §3: slice directories, then per slice
    // heads, states, words, extra bits).
    let parts: u64 = ["slice_directories", "block_headers", "rans_states", "rans_words", "extra_bits"]
        .iter()
        .map(|k| streams[k].as_u64().unwrap())
        .sum();
    assert_eq!(parts, json["sections"]["payloads"].as_u64().unwrap(), "stream sizes do not add up to the payloads");
    // Every stream byte is a literal or a match byte (the slice head's lit_field is 2·nlit + a flag).
    let literals = streams["literals"].as_u64().unwrap();
    assert!(literals > 0 && literals + 2 * streams["matches"].as_u64().unwrap() <= 200_000, "{streams}");
    let sections: u64 = ["header", "payloads", "tables", "tree", "index", "footer"]
        .iter()
        .map(|k| json["sections"][k].as_u64().unwrap())
        .sum();
    assert_eq!(sections, json["archive_bytes"].as_u64().unwrap(), "section sizes do not add up to the file");

    let text = run(&[OsStr::new("info"), archive.as_os_str()]);
    assert_exit(&text, 0, "info");
    assert!(String::from_utf8_lossy(&text.stdout).contains("ratio:"));

    let verify = run(&[OsStr::new("verify"), archive.as_os_str()]);
    assert_exit(&verify, 0, "verify");
    let sequential = run(&[OsStr::new("verify"), OsStr::new("--sequential-only"), archive.as_os_str()]);
    assert_exit(&sequential, 0, "verify --sequential-only");
    assert_eq!(sequential.stdout, verify.stdout);
}

/// A FASTA of inverted repeats (format version 5): `info` counts the reverse-complement matches the packer made
/// (text and JSON), and the archive verifies and reads back.
#[test]
fn info_counts_reverse_complement_matches() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = common::Rng::new(17);
    let mut seq: Vec<u8> = (0..5000).map(|_| b"ACGT"[rng.below(4) as usize]).collect();
    while seq.len() < 120_000 {
        let len = 300 + rng.below(2000) as usize;
        let from = rng.below((seq.len() - len) as u64) as usize;
        let piece: Vec<u8> = seq[from..from + len]
            .iter()
            .rev()
            .map(|&b| match b {
                b'A' => b'T',
                b'C' => b'G',
                b'G' => b'C',
                _ => b'A',
            })
            .collect();
        seq.extend_from_slice(&piece);
        seq.extend((0..rng.below(30)).map(|_| b"ACGT"[rng.below(4) as usize]));
    }
    let mut fasta = b">inverted\n".to_vec();
    fasta.extend(common::wrap(&seq, 60, b"\n"));
    let input = dir.path().join("rc.fa");
    std::fs::write(&input, &fasta).unwrap();
    let archive = dir.path().join("rc.acx");
    pack_tree(&input, &archive, &[]);

    let info = run(&[OsStr::new("info"), OsStr::new("--json"), archive.as_os_str()]);
    assert_exit(&info, 0, "info --json");
    let json: serde_json::Value = serde_json::from_slice(&info.stdout).expect("info --json prints JSON");
    assert_eq!(json["format_version"], u64::from(aceapex::format::VERSION));
    let streams = &json["streams"];
    let (rc, matches) = (streams["rc_matches"].as_u64().unwrap(), streams["matches"].as_u64().unwrap());
    assert!(rc >= 20 && rc <= matches, "{rc} reverse-complement matches of {matches}");
    assert_eq!(streams["unreadable_blocks"], 0);
    let text = run(&[OsStr::new("info"), archive.as_os_str()]);
    assert_exit(&text, 0, "info");
    let text = String::from_utf8_lossy(&text.stdout).into_owned();
    assert!(text.contains(&format!("{matches} matches ({rc} reverse-complement)")), "{text}");

    assert_exit(&run(&[OsStr::new("verify"), archive.as_os_str()]), 0, "verify");
    let cat = run(&[OsStr::new("cat"), archive.as_os_str(), OsStr::new("rc.fa")]);
    assert_exit(&cat, 0, "cat");
    assert!(cat.stdout == fasta, "cat gives other bytes");
}

#[test]
fn usage_errors_exit_2_and_runtime_errors_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    for args in [
        &["frobnicate"][..],
        &["pack"],
        &["pack", "x", "-o", "y.acx", "--block-size", "3K"],
        &["pack", "x", "-o", "y.acx", "--level", "99"],
        &["cat", "x.acx", "p", "--decoder", "tpu"],
        &["ls"],
    ] {
        assert_exit(&run(args), 2, &format!("{args:?}"));
    }
    let missing = dir.path().join("missing.acx");
    for args in [vec!["ls"], vec!["info"], vec!["verify"], vec!["cat"]] {
        let mut argv: Vec<&OsStr> = args.iter().map(OsStr::new).collect();
        argv.push(missing.as_os_str());
        if args[0] == "cat" {
            argv.push(OsStr::new("f"));
        }
        let out = run(&argv);
        assert_exit(&out, 1, &format!("{args:?} on a missing archive"));
        assert!(!out.stderr.is_empty(), "an error message is printed");
    }
    // A file that is not an archive.
    let junk = dir.path().join("junk.acx");
    std::fs::write(&junk, b"not an archive at all, just text that is long enough to have a header.....").unwrap();
    assert_exit(&run(&[OsStr::new("info"), junk.as_os_str()]), 1, "info on junk");

    // A path that is not in the archive, and a directory.
    let input = dir.path().join("f");
    std::fs::write(&input, b"hello").unwrap();
    let archive = dir.path().join("f.acx");
    pack_tree(&input, &archive, &[]);
    assert_exit(&run(&[OsStr::new("cat"), archive.as_os_str(), OsStr::new("nope")]), 1, "cat missing path");
    assert_exit(&run(&[OsStr::new("cat"), archive.as_os_str(), OsStr::new("/")]), 1, "cat a directory");

    let help = run(&["--help"]);
    assert_exit(&help, 0, "--help");
    assert!(String::from_utf8_lossy(&help.stdout).contains("Exit status"));
}

#[test]
fn broken_pipe_is_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("big");
    std::fs::write(&input, common::dna_like(&mut common::Rng::new(5), 3 << 20)).unwrap();
    let archive = dir.path().join("big.acx");
    pack_tree(&input, &archive, &[]);
    let mut child = Command::new(common::bin())
        .arg("cat")
        .arg("--decoder")
        .arg("cpu")
        .arg(&archive)
        .arg("big")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 10];
    child.stdout.as_mut().unwrap().read_exact(&mut first).unwrap();
    drop(child.stdout.take()); // The reader goes away, like `| head -c 10`.
    let mut stderr = String::new();
    child.stderr.take().unwrap().read_to_string(&mut stderr).unwrap();
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "stderr: {stderr}");
    assert!(stderr.is_empty(), "a closed pipe is not an error: {stderr}");
}

#[test]
fn unpack_refuses_to_write_through_existing_symlinks() {
    // The target directory already contains a symlink named like an archive entry, pointing outside: unpack
    // must fail on it rather than write through it.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("top");
    std::fs::create_dir(&input).unwrap();
    std::fs::write(input.join("file"), b"payload").unwrap();
    let archive = dir.path().join("t.acx");
    pack_tree(&input, &archive, &[]);
    let outside = dir.path().join("outside");
    std::fs::create_dir(&outside).unwrap();
    let dest = dir.path().join("dest");
    std::fs::create_dir(&dest).unwrap();
    std::os::unix::fs::symlink(&outside, dest.join("top")).unwrap();
    let out = run(&[OsStr::new("unpack"), archive.as_os_str(), OsStr::new("-C"), dest.as_os_str()]);
    assert_exit(&out, 1, "unpack through a planted symlink");
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0, "wrote outside the target directory");
}

#[test]
fn non_utf8_paths_round_trip_through_cat() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("n");
    std::fs::create_dir(&input).unwrap();
    let name = OsStr::from_bytes(b"caf\xe9.txt");
    std::fs::write(input.join(name), b"bytes").unwrap();
    let archive = dir.path().join("n.acx");
    pack_tree(&input, &archive, &[]);
    let mut path = b"n/".to_vec();
    path.extend_from_slice(name.as_bytes());
    let out = run(&[OsStr::new("cat"), archive.as_os_str(), OsStr::from_bytes(&path)]);
    assert_exit(&out, 0, "cat non-UTF-8 path");
    assert_eq!(out.stdout, b"bytes");
}

#[test]
fn generated_fai_is_left_out_unless_asked() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("g");
    std::fs::create_dir(&input).unwrap();
    let mut fasta = b">r1 description\n".to_vec();
    for _ in 0..3 {
        fasta.extend_from_slice(&[b'A'; 60]);
        fasta.push(b'\n');
    }
    fasta.extend_from_slice(b"ACGT\n");
    std::fs::write(input.join("x.fa"), &fasta).unwrap();
    let archive = dir.path().join("g.acx");
    pack_tree(&input, &archive, &[]);

    let plain = dir.path().join("plain");
    let out = run(&[OsStr::new("unpack"), archive.as_os_str(), OsStr::new("-C"), plain.as_os_str()]);
    assert_exit(&out, 0, "unpack");
    assert!(!plain.join("g/x.fa.fai").exists(), "a generated sidecar was unpacked by default");
    common::assert_same_tree(&input, &plain.join("g"));

    let with = dir.path().join("with");
    let out = run(&[
        OsStr::new("unpack"),
        archive.as_os_str(),
        OsStr::new("-C"),
        with.as_os_str(),
        OsStr::new("--with-generated"),
    ]);
    assert_exit(&out, 0, "unpack --with-generated");
    // samtools faidx's index: name, length, offset of the first base, bases per line, bytes per line.
    assert_eq!(std::fs::read(with.join("g/x.fa.fai")).unwrap(), b"r1\t184\t16\t60\t61\n");
}
