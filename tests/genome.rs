//! Genome mode's model: generated FASTA edge cases for every byte-exactness rule (case, N and IUPAC codes,
//! headers, varying line widths, blank lines, CRLF, a missing final newline), rejections, proptests of random
//! FASTA-like input (split → reconstruct, random range reads, structure round trip, corrupt structure → error),
//! and the shared corpus when it is present.

mod common;

use aceapex::genome::layout::{LineKind, Term};
use aceapex::genome::{model, serial, split, worthwhile, Genome, Split};
use common::wrap;
use proptest::prelude::*;

/// Reads `[off, off + len)` through [`Genome::read_at`], checking that the fetch asks for exactly the bases the
/// read covers and never more bases than bytes read.
fn read(s: &Split, off: u64, len: usize) -> Vec<u8> {
    let mut out = vec![0u8; len];
    let mut asked = None;
    let n = s
        .genome
        .read_at(off, &mut out, |a, buf: &mut [u8]| {
            asked = Some((a, buf.len()));
            buf.copy_from_slice(&s.bases[a as usize..a as usize + buf.len()]);
            Ok::<(), ()>(())
        })
        .unwrap();
    if let Some((a, n_bases)) = asked {
        assert!(n_bases <= len, "read of {len} bytes at {off} fetched {n_bases} bases");
        assert_eq!(s.genome.base_range(off, len as u64), (a, a + n_bases as u64));
    }
    out.truncate(n);
    out
}

/// Every property the model promises, on one input: split succeeds, the bases are pure ACGT, the whole file and
/// every range (exhaustively for small inputs) read back, and the structure survives its encoding.
fn check_exact(input: &[u8]) -> Split {
    let s = split(input).unwrap_or_else(|| panic!("not modelled: {:?}", String::from_utf8_lossy(input)));
    assert!(s.bases.iter().all(|b| b"ACGT".contains(b)));
    assert_eq!(s.genome.bases(), s.bases.len() as u64);
    assert_eq!(s.genome.total_len(), input.len() as u64);
    assert_eq!(s.genome.reconstruct(&s.bases).as_deref(), Some(input));
    let n = input.len();
    let step = if n <= 200 { 1 } else { n / 97 };
    for off in (0..=n).step_by(step) {
        for len in [0, 1, 2, 3, 7, 61, 62, 200, n + 5] {
            let end = (off + len).min(n);
            assert_eq!(read(&s, off as u64, len), &input[off..end], "read {len} at {off}");
        }
    }
    let bytes = serial::encode(&s.genome);
    assert_eq!(serial::decode(&bytes).unwrap(), s.genome);
    s
}

/// Deterministic pseudo-random bases (xorshift) so tests need no fixtures.
fn bases(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            b"ACGT"[(x >> 32) as usize & 3]
        })
        .collect()
}

#[test]
fn regular_record_is_three_runs() {
    let mut input = b">chr1 test\n".to_vec();
    input.extend(wrap(&bases(1000, 1), 60, b"\n"));
    let s = check_exact(&input);
    let runs = s.genome.layout.runs();
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert_eq!((runs[1].width, runs[1].count), (60, 16));
    assert_eq!((runs[2].width, runs[2].count), (40, 1));
    assert_eq!(s.genome.layout.headers(), &[b"chr1 test".to_vec()]);
    assert!(s.genome.case.runs.is_empty() && s.genome.exceptions.runs.is_empty());
}

#[test]
fn soft_masking_and_mixed_case() {
    let mut seq = bases(500, 2);
    seq[10..70].make_ascii_lowercase();
    seq[100..101].make_ascii_lowercase();
    seq[499..].make_ascii_lowercase();
    let input = [b">m\n".to_vec(), wrap(&seq, 60, b"\n")].concat();
    let s = check_exact(&input);
    assert_eq!(s.genome.case.runs.len(), 3);
    assert!(s.genome.case.is_lower(10) && !s.genome.case.is_lower(70) && s.genome.case.is_lower(499));
}

#[test]
fn n_runs_and_every_iupac_code_in_both_cases() {
    let mut seq = b"NNNNNNNNNNnnnnnACGT".to_vec();
    seq.extend_from_slice(b"RYKMSWBDHVryskmwbdhvN");
    seq.extend(bases(100, 3));
    seq.extend_from_slice(b"nNnNRRrr");
    let input = [b">iupac\n".to_vec(), wrap(&seq, 13, b"\n")].concat();
    let s = check_exact(&input);
    assert_eq!(s.bases.len(), 4 + 100);
    // A case change does not split an exception run: "NNNNNNNNNNnnnnn" is one N run, half lowercase.
    assert_eq!(s.genome.exceptions.runs.get(0), (0, 15));
}

#[test]
fn headers_with_any_text() {
    let input = b">\nACGT\n>  spaces\tand tabs \nAC\n>cr\rinside\nGG\n>trailing cr\r\r\nTT\n>\xff\x00bin\nA\n";
    let s = check_exact(input);
    assert_eq!(s.genome.layout.headers().len(), 5);
    assert_eq!(s.genome.layout.headers()[3], b"trailing cr\r");
}

#[test]
fn line_widths_vary_between_and_within_records() {
    let mut input = b">a\n".to_vec();
    input.extend(wrap(&bases(300, 4), 60, b"\n"));
    input.extend_from_slice(b">b\n");
    input.extend(wrap(&bases(300, 5), 80, b"\n"));
    input.extend_from_slice(b">c\nACGTACGT\nACG\nACGTACGTACGTACGT\nA\nACGTAC\n");
    check_exact(&input);
}

#[test]
fn blank_lines_anywhere() {
    check_exact(b"\n\n>a\n\nACGT\n\nAC\n\n\n>b\nGG\n\n");
    check_exact(b"\r\n>a\r\n\r\nACGT\r\n\n");
    let s = check_exact(b"\n");
    assert_eq!(s.genome.layout.runs()[0].kind, LineKind::Sequence);
}

#[test]
fn crlf_whole_file_and_mixed_per_line() {
    let mut input = b">crlf\r\n".to_vec();
    input.extend(wrap(&bases(500, 6), 70, b"\r\n"));
    let s = check_exact(&input);
    assert!(s.genome.layout.runs().iter().all(|r| r.term == Term::CrLf));
    check_exact(b">mixed\r\nACGT\nACGT\r\nACGT\nAC\r\n>x\nA\r\n");
}

#[test]
fn missing_final_newline() {
    check_exact(b">a\nACGT\nAC");
    check_exact(b">a\r\nACGT\r\nAC");
    check_exact(b">only a header");
    check_exact(b">a\nACGT\n>b");
    let s = check_exact(b">a\nACGTacgtNN");
    assert_eq!(s.genome.layout.runs().last().unwrap().term, Term::None);
}

#[test]
fn degenerate_inputs() {
    let s = check_exact(b"");
    assert_eq!(s.genome.total_len(), 0);
    check_exact(b"ACGT\nAC\n"); // sequence without a header
    check_exact(b">\n");
    check_exact(b">a\n>b\n>c\n"); // headers without sequence
    check_exact(b"NNNN\nnnnn\n"); // no bases at all
}

#[test]
fn not_modelled_gives_none() {
    for bad in [
        &b">a\nACG>T\n"[..], // '>' inside a sequence line
        b">a\nAC\rGT\n",     // bare CR
        b">a\nACGT\r",       // CR at end of file
        b"@read\nACGT\n+\nIIII\n",
        b">prot\nMKVLEFQ\n",
        b">a\nAC GT\n",
        b">a\nAC-GT\n",
        b">a\nACGU\n",
        b">a\nAC\x00GT\n",
        b">a\n\xffACGT\n",
    ] {
        assert!(split(bad).is_none(), "{:?} was modelled", String::from_utf8_lossy(bad));
    }
}

#[test]
fn worthwhile_only_when_structure_is_small() {
    let mut good = b">chr\n".to_vec();
    good.extend(wrap(&bases(100_000, 7), 60, b"\n"));
    let (s, structure) = model(&good).expect("a plain chromosome is worth genome mode");
    assert!(structure.len() < 64, "structure {} bytes", structure.len());
    assert_eq!(s.genome.reconstruct(&s.bases).unwrap(), good);

    // Every other residue an IUPAC code: each costs structure, the gain is small.
    let seq: Vec<u8> = bases(100_000, 8).iter().enumerate().map(|(i, &b)| if i % 2 == 0 { b'R' } else { b }).collect();
    let bad = [b">iupac\n".to_vec(), wrap(&seq, 60, b"\n")].concat();
    let s = split(&bad).expect("modelled exactly");
    assert!(!worthwhile(&s.genome, serial::encode(&s.genome).len() as u64));
    assert!(model(&bad).is_none());

    // Tiny files never pay for their structure.
    assert!(model(b">a\nACGT\n").is_none());
}

#[test]
fn mask_lookups() {
    let s = check_exact(b">a\nAAnnNNaaRYTT\n");
    let ex = &s.genome.exceptions;
    // Residues: A A n n N N a a R Y T T; exceptions: [2,6) N, [8,9) R, [9,10) Y.
    assert_eq!(ex.runs.len(), 3);
    let expect_bases = [0, 1, 2, 2, 2, 2, 2, 3, 4, 4, 4, 5, 6];
    for (r, &b) in expect_bases.iter().enumerate() {
        assert_eq!(ex.bases_before(r as u64), b, "residue {r}");
    }
    assert_eq!(ex.runs.find(5), Some(0));
    assert_eq!(ex.runs.find(6), None);
    assert!(s.genome.case.is_lower(2) && s.genome.case.is_lower(7) && !s.genome.case.is_lower(4));
}

#[test]
fn serial_rejects_corruption_with_typed_errors() {
    let s = check_exact(b">a b\nACGTNNacgt\nAC\n\n>c\r\nRY\r\nA");
    let good = serial::encode(&s.genome);
    assert!(serial::decode(&good[..good.len() - 1]).is_err());
    assert!(serial::decode(&[]).is_err());
    for i in 0..good.len() {
        let mut bad = good.clone();
        bad[i] ^= 0x40;
        assert!(serial::decode(&bad).is_err(), "flip at {i} accepted");
    }
    // A wrong version (the earlier varint encoding, 1, the one before this, or an unknown one) is named even with
    // a valid checksum.
    assert_eq!(good[4], serial::VERSION);
    for version in [1u8, serial::VERSION - 1, serial::VERSION + 1] {
        let mut other = good[..good.len() - 8].to_vec();
        other[4] = version;
        let err = serial::decode(&reseal(&other)).unwrap_err().to_string();
        assert!(err.contains("version") && err.contains(&version.to_string()), "{err}");
    }
}

fn xxhash_rust_sum(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// Re-seals a corrupted body with a valid checksum so decoding reaches the structural checks.
fn reseal(body: &[u8]) -> Vec<u8> {
    let mut v = body.to_vec();
    v.extend_from_slice(&xxhash_rust_sum(body).to_le_bytes());
    v
}

/// A decoded structure, however odd, must be safe to read from.
fn exercise(g: &Genome) {
    let n = g.bases();
    if n > 1 << 20 || g.total_len() > 1 << 20 {
        return;
    }
    let bases = vec![b'A'; n as usize];
    let out = g.reconstruct(&bases).unwrap();
    assert_eq!(out.len() as u64, g.total_len());
}

/// Random FASTA-like input: records with random headers, line widths that usually repeat, a weighted alphabet
/// (mostly ACGT, soft-masked stretches, N runs, rare IUPAC codes), LF/CRLF, blank lines, maybe no final newline.
fn fasta_like() -> impl Strategy<Value = Vec<u8>> {
    let residue = prop_oneof![
        40 => prop::sample::select(b"ACGT".to_vec()),
        15 => prop::sample::select(b"acgt".to_vec()),
        4 => prop::sample::select(b"Nn".to_vec()),
        1 => prop::sample::select(b"RYKMSWBDHVrykmswbdhv".to_vec()),
    ];
    let line = (
        prop::collection::vec(residue, 0..90),
        prop_oneof![6 => Just(false), 1 => Just(true)],
        prop_oneof![8 => Just(false), 1 => Just(true)],
    );
    let record = (
        prop::option::weighted(0.9, prop::collection::vec(prop_oneof![20 => 0x20u8..0x7f, 1 => any::<u8>()], 0..30)),
        prop::collection::vec(line, 0..12),
        1usize..4,
    );
    (prop::collection::vec(record, 0..6), any::<bool>(), any::<bool>()).prop_map(|(records, crlf, final_nl)| {
        let mut out = Vec::new();
        for (header, lines, repeat) in records {
            if let Some(h) = header {
                out.push(b'>');
                out.extend(h.into_iter().filter(|&b| b != b'\n'));
                out.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
            }
            for (residues, other_term, blank) in lines {
                // Repeating a line gives runs of equal width, as real files have.
                for _ in 0..repeat {
                    if !blank {
                        out.extend_from_slice(&residues);
                    }
                    out.extend_from_slice(if crlf != other_term { b"\r\n" } else { b"\n" });
                }
            }
        }
        if !final_nl {
            while out.last() == Some(&b'\n') || out.last() == Some(&b'\r') {
                out.pop();
            }
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn fasta_like_round_trips(input in fasta_like(), reads in prop::collection::vec((any::<u64>(), 0usize..300), 16)) {
        // The generator only writes what the model covers, so every input must split.
        let s = split(&input).expect("FASTA-like input not modelled");
        prop_assert_eq!(s.genome.reconstruct(&s.bases), Some(input.clone()));
        let n = input.len() as u64;
        for (off, len) in reads {
            let off = off % (n + 2);
            let got = read(&s, off, len);
            let (a, b) = (off.min(n) as usize, (off + len as u64).min(n) as usize);
            prop_assert_eq!(&got[..], &input[a..b]);
        }
        let bytes = serial::encode(&s.genome);
        prop_assert_eq!(&serial::decode(&bytes).unwrap(), &s.genome);
    }

    #[test]
    fn any_bytes_split_safely(input in prop::collection::vec(prop_oneof![
        8 => prop::sample::select(b"ACGTacgtNn>\n\r".to_vec()), 1 => any::<u8>()], 0..400)) {
        if let Some(s) = split(&input) {
            prop_assert_eq!(s.genome.reconstruct(&s.bases), Some(input.clone()));
        }
    }

    #[test]
    fn corrupt_structure_is_an_error_never_a_panic(input in fasta_like(), at in any::<usize>(),
                                                   byte in any::<u8>(), cut in any::<usize>()) {
        let Some(s) = split(&input) else { return Ok(()) };
        let good = serial::encode(&s.genome);
        // Truncation: always refused (the checksum moves).
        let cut = cut % good.len();
        prop_assert!(serial::decode(&good[..cut]).is_err());
        // A changed byte with the checksum left alone: refused.
        let mut bad = good.clone();
        let i = at % good.len();
        if bad[i] != byte {
            bad[i] = byte;
            prop_assert!(serial::decode(&bad).is_err());
        }
        // A changed body byte re-sealed with a valid checksum reaches the structural checks: an error, or a
        // structure that is consistent enough to read from.
        let body = &good[..good.len() - 8];
        let mut bad = body.to_vec();
        let i = at % body.len();
        bad[i] = byte;
        if let Ok(g) = serial::decode(&reseal(&bad)) { exercise(&g) }
        // And a truncated body, re-sealed.
        if let Ok(g) = serial::decode(&reseal(&body[..cut.min(body.len())])) { exercise(&g) }
    }
}

/// The shared corpus, when present: the real files split, read back and encode exactly.
#[test]
fn corpus_files_when_present() {
    let dir = std::path::Path::new("/work/shared/corpus");
    let Ok(entries) = std::fs::read_dir(dir.join("fly-chr4")) else { return };
    let mut files: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    files.sort();
    files.truncate(2);
    for gz in files {
        let Ok(out) = std::process::Command::new("gzip").arg("-dc").arg(&gz).output() else { return };
        if !out.status.success() {
            continue;
        }
        let s = split(&out.stdout).unwrap_or_else(|| panic!("{} not modelled", gz.display()));
        assert_eq!(s.genome.reconstruct(&s.bases).unwrap(), out.stdout, "{}", gz.display());
        let bytes = serial::encode(&s.genome);
        assert_eq!(serial::decode(&bytes).unwrap(), s.genome);
        for off in (0..out.stdout.len()).step_by(100_003) {
            assert_eq!(read(&s, off as u64, 16384), &out.stdout[off..(off + 16384).min(out.stdout.len())]);
        }
        assert!(model(&out.stdout).is_some(), "{} not worth genome mode", gz.display());
    }
}

#[test]
fn split_into_streams_the_same_bases_in_bounded_pieces() {
    let mut seq = bases(300_000, 9);
    seq[1000..5000].make_ascii_lowercase();
    seq[70_000..70_100].fill(b'N');
    let input = [b">big\n".to_vec(), wrap(&seq, 60, b"\n"), b">two\nACGTN\n".to_vec()].concat();
    let whole = split(&input).unwrap();
    let mut pieces = Vec::new();
    let genome = aceapex::genome::split_into(&input, |p| pieces.push(p.to_vec())).unwrap();
    assert_eq!(genome, whole.genome);
    assert!(pieces.len() > 2 && pieces.iter().all(|p| p.len() <= 2 * 64 * 1024), "{} pieces", pieces.len());
    assert_eq!(pieces.concat(), whole.bases);
}
