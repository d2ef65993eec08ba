//! Generates a large, realistic FASTA input for the packer's scale tests: mutated copies of a real genome.
//!
//! `cargo run --release --example gen_genomes -- SOURCE.fa OUT_DIR --files N --bytes SIZE [--seed S]`
//! writes `N` FASTA files of about `SIZE` bytes each (`SIZE` takes K/M/G suffixes). Every record is a copy of the
//! source's bases with point substitutions (0.5 %) and short insertions or deletions (0.05 %), drawn from one
//! deterministic generator per file, so the output is the same on every machine. Case (soft-masking) and N runs
//! follow the source; line widths alternate between 60 and 80 per file.
//!
//! Why mutated copies rather than random bases or plain repeats: the packer's long-distance matcher, its depth
//! bound and its memory bound only meet their real workload when the input is large *and* related to itself the way
//! a population of genomes is — long shared stretches broken every few hundred bases.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Substitutions per million bases.
const SUBST_PPM: u64 = 5_000;
/// Insertions plus deletions per million bases.
const INDEL_PPM: u64 = 500;

#[path = "support/rng.rs"]
mod rng;
use rng::Rng;

struct Args {
    source: PathBuf,
    out_dir: PathBuf,
    files: u64,
    bytes: u64,
    seed: u64,
}

fn parse_size(s: &str) -> Result<u64, String> {
    let (digits, mult) = match s.chars().last() {
        Some('K' | 'k') => (&s[..s.len() - 1], 1u64 << 10),
        Some('M' | 'm') => (&s[..s.len() - 1], 1 << 20),
        Some('G' | 'g') => (&s[..s.len() - 1], 1 << 30),
        _ => (s, 1),
    };
    let n: u64 = digits.parse().map_err(|_| format!("not a size: {s}"))?;
    n.checked_mul(mult).ok_or_else(|| format!("size too large: {s}"))
}

fn parse_args() -> Result<Args, String> {
    let mut it = std::env::args().skip(1);
    let mut positional = Vec::new();
    let (mut files, mut bytes, mut seed) = (1, 1 << 30, 1);
    while let Some(a) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{a} needs a value"));
        match a.as_str() {
            "--files" => files = value()?.parse().map_err(|_| "--files: not a number".to_string())?,
            "--bytes" => bytes = parse_size(&value()?)?,
            "--seed" => seed = value()?.parse().map_err(|_| "--seed: not a number".to_string())?,
            _ => positional.push(PathBuf::from(a)),
        }
    }
    let [source, out_dir]: [PathBuf; 2] = positional
        .try_into()
        .map_err(|_| "usage: gen_genomes SOURCE.fa OUT_DIR [--files N] [--bytes SIZE] [--seed S]".to_string())?;
    Ok(Args { source, out_dir, files, bytes, seed })
}

/// The source's bases (headers and line breaks dropped), case and N runs kept.
fn read_bases(path: &Path) -> std::io::Result<Vec<u8>> {
    let text = std::fs::read(path)?;
    let mut bases = Vec::with_capacity(text.len());
    for line in text.split(|&b| b == b'\n') {
        if line.first() != Some(&b'>') {
            bases.extend(line.iter().copied().filter(|&b| b != b'\r'));
        }
    }
    Ok(bases)
}

/// One mutated copy of `bases`, appended to `out`.
fn mutate_into(bases: &[u8], rng: &mut Rng, out: &mut Vec<u8>) {
    const ACGT: &[u8; 4] = b"ACGT";
    let mut i = 0;
    while i < bases.len() {
        let b = bases[i];
        let roll = rng.below(1_000_000);
        let lower = b.is_ascii_lowercase();
        let pick = |r: &mut Rng| {
            let c = ACGT[r.below(4) as usize];
            if lower {
                c.to_ascii_lowercase()
            } else {
                c
            }
        };
        if b.eq_ignore_ascii_case(&b'N') || roll >= SUBST_PPM + INDEL_PPM {
            out.push(b);
            i += 1;
        } else if roll < SUBST_PPM {
            out.push(pick(rng));
            i += 1;
        } else if roll % 2 == 0 {
            // Insertion of 1..=10 bases before this one.
            for _ in 0..1 + rng.below(10) {
                out.push(pick(rng));
            }
        } else {
            // Deletion of 1..=10 bases.
            i += 1 + rng.below(10) as usize;
        }
    }
}

fn write_file(path: &Path, bases: &[u8], target: u64, seed: u64, width: usize) -> std::io::Result<u64> {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut w = BufWriter::with_capacity(1 << 20, File::create(path)?);
    let (mut written, mut copy, mut seq) = (0u64, 0u64, Vec::with_capacity(bases.len() + bases.len() / 100));
    while written < target {
        seq.clear();
        mutate_into(bases, &mut rng, &mut seq);
        let header = format!(">copy{copy} seed={seed} mutated copy of the source genome\n");
        w.write_all(header.as_bytes())?;
        written += header.len() as u64;
        for line in seq.chunks(width) {
            w.write_all(line)?;
            w.write_all(b"\n")?;
            written += line.len() as u64 + 1;
        }
        copy += 1;
    }
    w.flush()?;
    Ok(written)
}

fn main() -> ExitCode {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("gen_genomes: {e}");
            return ExitCode::from(2);
        }
    };
    let bases = match read_bases(&args.source) {
        Ok(b) if !b.is_empty() => b,
        Ok(_) => {
            eprintln!("gen_genomes: {}: no bases", args.source.display());
            return ExitCode::FAILURE;
        }
        Err(e) => {
            eprintln!("gen_genomes: {}: {e}", args.source.display());
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = std::fs::create_dir_all(&args.out_dir) {
        eprintln!("gen_genomes: {}: {e}", args.out_dir.display());
        return ExitCode::FAILURE;
    }
    // One thread per file: the files are independent and the generator is CPU-bound.
    let results: Vec<std::io::Result<u64>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..args.files)
            .map(|f| {
                let path = args.out_dir.join(format!("genome{f:03}.fa"));
                let width = if f % 2 == 0 { 60 } else { 80 };
                let bases = &bases;
                let (target, seed) = (args.bytes, args.seed.wrapping_add(f));
                s.spawn(move || write_file(&path, bases, target, seed, width))
            })
            .collect();
        handles.into_iter().map(|h| h.join().expect("generator thread panicked")).collect()
    });
    let mut total = 0;
    for r in results {
        match r {
            Ok(n) => total += n,
            Err(e) => {
                eprintln!("gen_genomes: {e}");
                return ExitCode::FAILURE;
            }
        }
    }
    println!("wrote {} files, {total} bytes, into {}", args.files, args.out_dir.display());
    ExitCode::SUCCESS
}
