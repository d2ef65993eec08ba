//! How long the full decode's serial rANS chains are (kernels/parse.cuh `parse_k1_linear`), counted on the CPU: for
//! every slice, its codes (`3·nmatch + 1`, all in rANS lane 0) and the literals of its two lanes (FORMAT.md §3.4's
//! split); then a model of the parse's warps, in which a warp of 32 slices runs as long as its slowest thread and a
//! lane-0 thread's code phase and its literals are two loops that its warp runs one after the other (the threads
//! diverge between them), for a few costs of a code step in literal steps and for the worklist orders
//! `Device::parse_order` knows (stream order, and each table group's units with the most codes first).
//!
//! `cargo run --release --example chainstats -- ARCHIVE.acx` (an archive of two rANS lanes, 4 KiB slices)
//!
//! Why: a device call is scarce. Session 37 found with it that atha genome's parse ran as long as its code-heavy
//! warps (a slice of up to 751 codes, p50 16), which a cheaper code step (`k1_code_run`) and the codes-first order
//! then shortened on the H200 (docs/BENCH-GPU.md "Session 37"). The model is rough: it predicts the direction of a
//! change, not its size.

use aceapex::codec::block::{decode_block_into, ParsedBlock};
use aceapex::codec::rans::{lane_split, SPLIT_CODE_WEIGHT};
use aceapex::format::ArchiveData;

/// One slice: its codes, and the literals of rANS lanes 0 and 1.
#[derive(Clone, Copy)]
struct Slice {
    codes: u64,
    lane0: u64,
    lane1: u64,
}

/// The model's cost of a set of slices in worklist order (warps of 32 consecutive ones), with a code step worth
/// `cost` literal steps: the slowest warp, the mean warp and the slowest single thread.
fn model(slices: &[Slice], cost: u64) -> (u64, u64, u64) {
    let (mut worst, mut sum, mut thread) = (0u64, 0u64, 0u64);
    let warps = slices.chunks(32);
    let n = warps.len() as u64;
    for w in warps {
        let max = |f: fn(&Slice) -> u64| w.iter().map(f).max().unwrap_or(0);
        let lane0 = max(|s| s.codes) * cost + max(|s| s.lane0);
        let lane1 = max(|s| s.lane1);
        worst = worst.max(lane0).max(lane1);
        sum += lane0 + lane1;
        thread = thread.max(w.iter().map(|s| (cost * s.codes + s.lane0).max(s.lane1)).max().unwrap_or(0));
    }
    (worst, sum / (2 * n.max(1)), thread)
}

fn percentiles(name: &str, mut v: Vec<u64>) {
    v.sort_unstable();
    let p = |q: f64| v[((v.len() - 1) as f64 * q) as usize];
    let mean = v.iter().sum::<u64>() as f64 / v.len() as f64;
    println!(
        "{name:>26}: mean {mean:.0}, p50 {}, p90 {}, p99 {}, p99.9 {}, max {}",
        p(0.5),
        p(0.9),
        p(0.99),
        p(0.999),
        v[v.len() - 1]
    );
}

fn main() {
    let path = std::env::args().nth(1).expect("usage: chainstats ARCHIVE.acx");
    let data = ArchiveData::open(&path).expect("open");
    let slice_log = u32::from(data.header.slice_log);
    // Units a table group holds: the codes-first order sorts within these.
    let per_group = 1usize << (data.header.group_log as u32 + data.header.block_log as u32 - slice_log);
    let mut slices = Vec::new();
    let mut parsed = ParsedBlock::default();
    for id in 0..data.block_count() {
        let payload = data.payload(id).expect("payload");
        decode_block_into(&payload, data.tables_for(id), data.block_shape(id), &mut parsed).expect("decode");
        let n = (parsed.len as usize).div_ceil(1 << slice_log);
        let (mut matches, mut literals) = (vec![0u64; n], vec![0u64; n]);
        for (t, token) in parsed.tokens.iter().enumerate() {
            // A token lies in the slice where its literals start (no token crosses a slice).
            let j = ((parsed.token_pos[t] >> slice_log) as usize).min(n - 1);
            literals[j] += u64::from(token.lit_len);
            matches[j] += u64::from(token.match_len > 0);
        }
        for (m, l) in matches.into_iter().zip(literals) {
            let codes = 3 * m + 1;
            let s = lane_split(codes as usize, l as usize, usize::from(data.header.rans_lanes)) as u64;
            slices.push(Slice { codes, lane0: s, lane1: l - s });
        }
    }
    println!("{path}: {} slices, {} rANS lanes", slices.len(), data.header.rans_lanes);
    percentiles("codes a slice", slices.iter().map(|s| s.codes).collect());
    percentiles("lane 1 literals", slices.iter().map(|s| s.lane1).collect());
    let weight = SPLIT_CODE_WEIGHT as u64;
    percentiles("lane 0 by the split weight", slices.iter().map(|s| weight * s.codes + s.lane0).collect());
    let mut by_codes = slices.clone();
    for group in by_codes.chunks_mut(per_group) {
        group.sort_by_key(|s| std::cmp::Reverse(s.codes));
    }
    println!("warp model, in literal steps (slowest warp, mean warp, slowest thread):");
    for cost in [10, 5, 3] {
        println!(
            "  a code = {cost:>2} literals: stream order {:?}, most codes first {:?}",
            model(&slices, cost),
            model(&by_codes, cost)
        );
    }
}
