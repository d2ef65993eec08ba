//! What the context model's precision costs: the ideal coded size of a FASTA file's bases under an order-k context
//! model (FORMAT.md §3.5; counts over the whole file, no table cost), with the probabilities exact, quantized to
//! 2^12 (the format's scale) and to 2^10, each present base at least 1 (`--all4`: every base at least 1, so that
//! the three cumulative frequencies of a context stay under 2^10 and fit 10 bits each).
//!
//! `cargo run --release --example ctxquant -- FILE.fa [--all4]`
//!
//! Why: a context row is two words today (cumulative frequencies up to 4096 need 13 bits), and the GPU's literal
//! step loads the four successor rows of a context, 32 bytes a literal, which keeps the SM's shared-memory pipe
//! busy when more chains run (docs/BENCH-GPU.md sessions 37 and 38). Rows of three 10-bit values would be one word,
//! 16 bytes a literal. Session 38 measured their cost here on atha_chr1: ~25 bytes in 5.7 MB for orders 4 to 8.

use std::process::ExitCode;

/// Frequencies of four symbol counts quantized to 2^bits (each counted symbol, or with `all` every one, at least
/// 1), summing to 2^bits.
fn quantize(counts: &[u64; 4], bits: u32, all: bool) -> [u64; 4] {
    let scale = 1u64 << bits;
    let total: u64 = counts.iter().sum();
    let mut f = [0u64; 4];
    for (fs, &c) in f.iter_mut().zip(counts) {
        if c > 0 || all {
            *fs = (u128::from(c) * u128::from(scale) / u128::from(total)).max(1) as u64;
        }
    }
    let sum: u64 = f.iter().sum();
    let largest = (0..4).max_by_key(|&s| f[s]).unwrap_or(0);
    f[largest] = f[largest] + scale - sum;
    f
}

/// Bits to code `counts` with frequencies `f` of scale 2^bits.
fn cost(counts: &[u64; 4], f: &[u64; 4], bits: u32) -> f64 {
    counts
        .iter()
        .zip(f)
        .filter(|(&c, _)| c > 0)
        .map(|(&c, &fs)| -(c as f64) * (fs as f64 / (1u64 << bits) as f64).log2())
        .sum()
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(path) = args.iter().find(|a| !a.starts_with("--")) else {
        eprintln!("usage: ctxquant FILE.fa [--all4]");
        return ExitCode::FAILURE;
    };
    let all = args.iter().any(|a| a == "--all4");
    let text = match std::fs::read(path) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("{path}: {e}");
            return ExitCode::FAILURE;
        }
    };
    let bases: Vec<u8> = text
        .split(|&b| b == b'\n')
        .filter(|line| !line.starts_with(b">"))
        .flatten()
        .filter_map(|b| b"ACGT".iter().position(|x| x == b).map(|s| s as u8))
        .collect();
    println!("{path}: {} bases (A, C, G, T in upper case){}", bases.len(), if all { ", every base >= 1" } else { "" });
    for order in [2u32, 4, 6, 8] {
        let contexts = 1usize << (2 * order);
        let mut counts = vec![[0u64; 4]; contexts];
        let mut ctx = 0usize;
        for &b in &bases {
            counts[ctx][b as usize] += 1;
            ctx = ((ctx << 2) | b as usize) & (contexts - 1);
        }
        let (mut exact, mut q12, mut q10) = (0f64, 0f64, 0f64);
        for c in counts.iter().filter(|c| c.iter().sum::<u64>() > 0) {
            let total = c.iter().sum::<u64>() as f64;
            exact += c.iter().filter(|&&x| x > 0).map(|&x| -(x as f64) * (x as f64 / total).log2()).sum::<f64>();
            q12 += cost(c, &quantize(c, 12, all), 12);
            q10 += cost(c, &quantize(c, 10, all), 10);
        }
        println!(
            "order {order}: exact {:.0} B, scale 2^12 {:.0} B (+{:.0}), scale 2^10 {:.0} B (+{:.0})",
            exact / 8.0,
            q12 / 8.0,
            (q12 - exact) / 8.0,
            q10 / 8.0,
            (q10 - exact) / 8.0
        );
    }
    ExitCode::SUCCESS
}
