//! The one-pass writer ([`Genome::write_at`]) against the simplest reference there is: the original bytes.
//!
//! Every input is split by the model, then read back at offsets and lengths that start and end anywhere (in
//! headers, terminators, CRLF pairs, exception and lowercase runs), with the bases handed over cut into random
//! chunks (as decoded blocks cut them), into uninitialised memory and into a buffer full of garbage.

use std::mem::MaybeUninit;

use proptest::prelude::*;

use super::{as_uninit, copy_line_lowercase, copy_line_lowercase_words, lowercase, write_slice, BaseChunks, Out};
use crate::genome::{split, Genome, Split};

/// Reads `[off, off + len)` with the bases of `s` cut at `cuts` (positions relative to the read's first base,
/// taken modulo its base count), into spare capacity; returns the bytes. Reads both with the AVX2 line copies
/// (where the CPU has them) and without, and checks that both give the same bytes.
fn read_chunked(s: &Split, off: u64, len: usize, cuts: &[usize]) -> Vec<u8> {
    let narrow = read_chunked_with(s, off, len, cuts, false);
    assert_eq!(read_chunked_with(s, off, len, cuts, true), narrow, "wide and narrow copies differ: {len} at {off}");
    narrow
}

fn read_chunked_with(s: &Split, off: u64, len: usize, cuts: &[usize], wide: bool) -> Vec<u8> {
    let (b0, b1) = s.genome.base_range(off, len as u64);
    let bases = &s.bases[b0 as usize..b1 as usize];
    let mut at: Vec<usize> = cuts.iter().map(|&c| if bases.is_empty() { 0 } else { c % (bases.len() + 1) }).collect();
    at.push(0);
    at.push(bases.len());
    at.sort_unstable();
    let chunks: Vec<&[u8]> = at.windows(2).map(|w| &bases[w[0]..w[1]]).collect();
    let mut out: Vec<u8> = Vec::with_capacity(len);
    let n =
        s.genome.write_at_with(off, &mut out.spare_capacity_mut()[..len], BaseChunks::new(b0, &chunks), wide).unwrap();
    assert!(n <= len);
    // SAFETY: `write_at` initialised the first `n` bytes of the spare capacity.
    unsafe { out.set_len(n) };
    out
}

/// The same read into an initialised buffer full of a byte no FASTA has: nothing beyond `n` may change, and
/// everything before it must be overwritten (both with and without the AVX2 line copies).
fn read_over_garbage(g: &Genome, bases: &[u8], off: u64, len: usize) -> Vec<u8> {
    let (b0, b1) = g.base_range(off, len as u64);
    let chunks = [&bases[b0 as usize..b1 as usize]];
    let mut outs = Vec::new();
    for wide in [false, true] {
        let mut out = vec![0xffu8; len + 3];
        let n = g.write_at_with(off, as_uninit(&mut out[..len]), BaseChunks::new(b0, &chunks), wide).unwrap();
        assert!(out[n..].iter().all(|&b| b == 0xff), "bytes past the read changed (wide: {wide})");
        out.truncate(n);
        outs.push(out);
    }
    assert_eq!(outs[0], outs[1], "wide and narrow copies differ: {len} at {off}");
    outs.pop().unwrap_or_default()
}

fn check_all_ranges(input: &[u8]) {
    let s = split(input).unwrap_or_else(|| panic!("not modelled: {:?}", String::from_utf8_lossy(input)));
    assert_eq!(s.genome.reconstruct(&s.bases).as_deref(), Some(input));
    let n = input.len();
    for off in 0..=n {
        for len in 0..=(n - off + 2) {
            let want = &input[off..(off + len).min(n)];
            assert_eq!(read_chunked(&s, off as u64, len, &[off, len, 3]), want, "read {len} at {off}");
            assert_eq!(read_over_garbage(&s.genome, &s.bases, off as u64, len), want, "read {len} at {off}");
        }
    }
}

#[test]
fn every_range_of_the_edge_cases() {
    let cases: &[&[u8]] = &[
        // Lowercase runs across lines and across a header (residues are numbered through it).
        b">chr1 soft\nACGTacgt\nacgtacGT\nacgt\n>chr2\nacgTTT\n",
        // N and IUPAC runs across lines, in both cases, next to each other, inside lowercase runs.
        b">x\nNNNNACGTnnRYKM\nNNNNNNNNNNNNNN\nnnACGTsswwBDHV\nNNN\n",
        // CRLF everywhere, and mixed with LF.
        b">a b c\r\nACGTNNNN\r\nacgtnn\r\nAC\n>b\r\n\r\nGGGG\r\n",
        // Missing final newline, after a header-only record and a blank line.
        b">empty\n>h2\n\nACGTACGTAC\nACGT",
        // A header as the last line, without a newline.
        b">h\nACGT\n>last",
        // Line widths changing inside a record, blank lines between.
        b">w\nACGTACGTAC\nACG\nACGTACGTACGTA\n\n\nAC\nA\n",
        // No header at all, lowercase file.
        b"acgtnacgt\nacgtn\n",
        // Nothing but N.
        b">n\nNNNNNNNN\nNNNN\n",
        b"",
    ];
    for input in cases {
        check_all_ranges(input);
    }
}

#[test]
fn swar_lowercase_is_ascii_lowercase_for_every_byte_and_length() {
    let all: Vec<u8> = (0..=255u8).chain((0..=255u8).rev()).collect();
    for start in 0..16 {
        for len in 0..all.len() - start {
            let mut got = all[start..start + len].to_vec();
            lowercase(&mut got);
            assert_eq!(got, all[start..start + len].to_ascii_lowercase(), "{start}+{len}");
        }
    }
}

/// A deterministic stream of pseudo-random words (xorshift).
fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

#[test]
fn line_copies_lowercase_exactly_the_masked_letters() {
    // Every byte value, at every line width up to 128, under masks with runs that start and end anywhere (both
    // 64-bit halves, the bits next to 64 and to the line's end), through the copy used here (SSE2 on x86-64) and
    // the portable one.
    let mut x = 0x1234_5678_9abc_def1u64;
    let src: Vec<u8> = (0..160).map(|_| xorshift(&mut x) as u8).collect();
    let letters: Vec<u8> = (0..160).map(|_| b"ACGTNRYKMSWBDHVacgt"[(xorshift(&mut x) % 19) as usize]).collect();
    for src in [&src, &letters] {
        for n in 1..=128usize {
            let line_bits = if n == 128 { u128::MAX } else { (1u128 << n) - 1 };
            let mut masks = vec![0u128, line_bits, 1, 1 << (n - 1), line_bits & !(1 << (n / 2))];
            masks.extend(
                (0..8).map(|_| (u128::from(xorshift(&mut x)) << 64 | u128::from(xorshift(&mut x))) & line_bits),
            );
            masks.extend((0..8).map(|_| {
                let (a, b) = ((xorshift(&mut x) % n as u64) as u32, (xorshift(&mut x) % n as u64) as u32);
                let (a, b) = (a.min(b), a.max(b) + 1);
                (u128::MAX >> (128 - b)) & (u128::MAX << a)
            }));
            for mask in masks {
                let want: Vec<u8> =
                    (0..n).map(|i| if mask >> i & 1 == 1 { src[i].to_ascii_lowercase() } else { src[i] }).collect();
                let halves = [mask as u64, (mask >> 64) as u64];
                let mut copies = vec![
                    ("dispatched", copy_line_lowercase as fn(&[u8], usize, [u64; 2], &mut Out<'_>)),
                    ("words", copy_line_lowercase_words),
                ];
                #[cfg(target_arch = "x86_64")]
                if super::wide_lines() {
                    copies.push(("avx2", avx2_copy));
                }
                for (which, copy) in copies {
                    let mut buf = vec![0u8; 144];
                    let mut out = Out { buf: as_uninit(&mut buf), at: 0 };
                    copy(&src[..n.next_multiple_of(64)], n, halves, &mut out);
                    assert_eq!(out.at, n);
                    assert_eq!(&buf[..n], &want[..], "{which}: width {n}, mask {mask:#x}");
                }
            }
        }
    }
}

/// [`super::copy_line_lowercase_avx2`] behind a safe signature, for a test that runs only where the CPU has it.
#[cfg(target_arch = "x86_64")]
fn avx2_copy(src: &[u8], n: usize, mask: [u64; 2], out: &mut Out<'_>) {
    assert!(super::wide_lines());
    // SAFETY: the CPU has AVX2 (asserted just above).
    unsafe { super::copy_line_lowercase_avx2(src, n, mask, out) }
}

/// Soft-masked FASTA with lines of every width around the copies' edges (16-byte moves, 64- and 128-bit masks,
/// [`super::FAST_LINE_MAX`]), lowercase runs that start and end at line edges and cross them, N runs inside and
/// across lowercase runs, LF and CRLF.
fn width_edge_cases() -> Vec<Vec<u8>> {
    let mut x = 0x0bad_cafe_f00d_d00du64;
    let mut files = Vec::new();
    for crlf in [false, true] {
        let term: &[u8] = if crlf { b"\r\n" } else { b"\n" };
        let mut out = Vec::new();
        for width in [1usize, 15, 16, 17, 31, 60, 63, 64, 65, 80, 127, 128, 129, 200, 256, 257, 300] {
            out.extend_from_slice(format!(">w{width}").as_bytes());
            out.extend_from_slice(term);
            let residues = width * 5 + (xorshift(&mut x) % width as u64) as usize;
            let mut lower = false;
            let mut seq = Vec::with_capacity(residues);
            while seq.len() < residues {
                // Runs of 1 to 2·width, so some end inside a line and some go on for lines.
                let run = 1 + (xorshift(&mut x) % (2 * width as u64)) as usize;
                let n_run = xorshift(&mut x) % 7 == 0;
                for _ in 0..run.min(residues - seq.len()) {
                    let b = if n_run { b'N' } else { b"ACGT"[(xorshift(&mut x) & 3) as usize] };
                    seq.push(if lower { b.to_ascii_lowercase() } else { b });
                }
                lower = !lower;
            }
            for line in seq.chunks(width) {
                out.extend_from_slice(line);
                out.extend_from_slice(term);
            }
        }
        files.push(out);
    }
    files
}

#[test]
fn lines_of_every_width_read_back_at_every_offset() {
    for input in width_edge_cases() {
        let s = split(&input).expect("modelled");
        assert_eq!(s.genome.reconstruct(&s.bases).as_deref(), Some(&input[..]));
        let n = input.len();
        let mut x = 7u64;
        for off in 0..n {
            let rest = if off % 97 == 0 { n } else { 1 };
            for len in [1, 17, 64, 129, 700, rest] {
                let want = &input[off..(off + len).min(n)];
                let cuts = [xorshift(&mut x) as usize, xorshift(&mut x) as usize, 16 << 10];
                assert_eq!(read_chunked(&s, off as u64, len, &cuts), want, "read {len} at {off}");
            }
        }
        // Whole reads with the bases cut every 16 KiB and every few bytes (the copies' chunk-end fallbacks).
        for piece in [3usize, 61, 16 << 10] {
            let cuts: Vec<usize> = (1..=s.bases.len() / piece).map(|k| k * piece).collect();
            assert_eq!(read_chunked(&s, 0, n, &cuts), input);
        }
    }
}

#[test]
fn write_slice_copies_every_length_and_nothing_else() {
    let src: Vec<u8> = (0..300u32).map(|i| (i * 7 + 1) as u8).collect();
    for len in 0..260 {
        for at in [0, 1, 5] {
            let mut dst = vec![0u8; len + at + 3];
            write_slice(&mut as_uninit(&mut dst)[at..at + len], &src[at..at + len]);
            assert!(dst[..at].iter().chain(&dst[at + len..]).all(|&b| b == 0), "{len} at {at}: outside changed");
            assert_eq!(&dst[at..at + len], &src[at..at + len], "{len} at {at}");
        }
    }
}

#[test]
fn bases_that_are_not_the_reads_range_are_refused() {
    let input = b">h\nACGTNNacgt\nACGT\n";
    let s = split(input).unwrap();
    let mut out = vec![0u8; 8];
    let (b0, b1) = s.genome.base_range(2, 8);
    let short = [&s.bases[b0 as usize..b1 as usize - 1]];
    assert!(s.genome.write_at(2, as_uninit(&mut out), BaseChunks::new(b0, &short)).is_err());
    let whole = [&s.bases[b0 as usize..b1 as usize]];
    assert!(s.genome.write_at(2, as_uninit(&mut out), BaseChunks::new(b0 + 1, &whole)).is_err());
    assert_eq!(s.genome.write_at(2, as_uninit(&mut out), BaseChunks::new(b0, &whole)).unwrap(), 8);
    assert_eq!(&out, &input[2..10]);
    // A read past the end needs no bases and writes nothing.
    let none: [&[u8]; 0] = [];
    let mut spare = [MaybeUninit::<u8>::uninit(); 4];
    assert_eq!(s.genome.write_at(input.len() as u64, &mut spare, BaseChunks::new(0, &none)).unwrap(), 0);
}

/// FASTA-like input: records with optional headers, repeated lines (runs of one width), a weighted alphabet
/// with soft-masked stretches, N runs and IUPAC codes, LF or CRLF per file with odd CRLF/LF lines, blank lines,
/// maybe no final newline.
fn fasta_like() -> impl Strategy<Value = Vec<u8>> {
    let stretch = (
        prop_oneof![
            30 => prop::sample::select(b"ACGT".to_vec()),
            6 => Just(b'N'),
            1 => prop::sample::select(b"RYKMSWBDHV".to_vec()),
        ],
        1usize..40,
        any::<bool>(),
        any::<bool>(),
    );
    let line = (prop::collection::vec(stretch, 0..5), 0u8..8, 1usize..5);
    let record = (prop::option::weighted(0.9, "[ -~]{0,20}"), prop::collection::vec(line, 0..8));
    (prop::collection::vec(record, 0..5), any::<bool>(), any::<bool>()).prop_map(|(records, crlf, final_nl)| {
        let mut out = Vec::new();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for (header, lines) in records {
            if let Some(h) = header {
                out.push(b'>');
                out.extend_from_slice(h.as_bytes());
                out.extend_from_slice(if crlf { b"\r\n" } else { b"\n" });
            }
            for (stretches, kind, repeat) in lines {
                let mut residues = Vec::new();
                for (byte, n, lower, random) in stretches {
                    for _ in 0..n {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        let b = if random && byte != b'N' { b"ACGT"[(x >> 40) as usize & 3] } else { byte };
                        residues.push(if lower { b.to_ascii_lowercase() } else { b });
                    }
                }
                for _ in 0..repeat {
                    if kind != 0 {
                        out.extend_from_slice(&residues);
                    }
                    out.extend_from_slice(if crlf != (kind == 1) { b"\r\n" } else { b"\n" });
                }
            }
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
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn chunked_reads_give_the_original_bytes(
        input in fasta_like(),
        reads in prop::collection::vec((any::<u64>(), 0usize..700, prop::collection::vec(any::<usize>(), 0..6)), 24),
    ) {
        let s = split(&input).expect("FASTA-like input not modelled");
        prop_assert_eq!(s.genome.reconstruct(&s.bases), Some(input.clone()));
        let n = input.len() as u64;
        for (off, len, cuts) in reads {
            let off = off % (n + 2);
            let (a, b) = (off.min(n) as usize, (off + len as u64).min(n) as usize);
            prop_assert_eq!(&read_chunked(&s, off, len, &cuts)[..], &input[a..b], "read {} at {}", len, off);
            prop_assert_eq!(&read_over_garbage(&s.genome, &s.bases, off, len)[..], &input[a..b]);
        }
    }
}
