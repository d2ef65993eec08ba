//! `gpubench --clocks`: where the linear parse's time goes, chain by chain. With ACEAPEX_GPU_K1_CLOCKS=1 every
//! rANS-lane thread of `parse_k1_linear` records the cycles its chain took, when it started and ended and its SM
//! (kernels/parse.cuh `k1_clocks`). A thread records when its warp reconverges, so each record is in effect its
//! warp's. Set against each unit's codes and lane literals (FORMAT.md §3.4's split), they say which warps end last
//! and why, about what a literal step costs there (a warp's cycles over its chain's literals), and how long the
//! SMs sit idle before the last warp ends: the data a change to the lane split, the parse order or the chain itself
//! needs (chainstats models the same on the CPU, with costs it has to assume). Session 39 found with it that the
//! warps mixing table-coded and context-coded slices ended last (docs/BENCH-GPU.md).

use aceapex::codec::rans::lane_split;
use aceapex::engine::gpu::prep::{unit_meta, META_WORDS};
use aceapex::engine::gpu::{FullVariant, GpuEngine};
use aceapex::format::ArchiveData;

use crate::{percentile, sorted, BoxResult};

/// One thread's chain: its unit, rANS lane, codes and literals, and what it recorded.
struct Chain {
    unit: usize,
    lane: usize,
    codes: f64,
    lits: f64,
    cycles: f64,
    start: u64,
    end: u64,
    sm: u64,
}

fn spread(name: &str, v: Vec<f64>) {
    let v = sorted(v);
    if v.is_empty() {
        return;
    }
    println!(
        "    {name:<34} p10 {:9.1}  p50 {:9.1}  p90 {:9.1}  p99 {:9.1}  max {:9.1}",
        percentile(&v, 0.1),
        percentile(&v, 0.5),
        percentile(&v, 0.9),
        percentile(&v, 0.99),
        v[v.len() - 1]
    );
}

/// A few chains, a line each, their ends in µs after `t0`.
fn print_chains(title: &str, chains: &[&Chain], t0: u64) {
    println!("  {title} (unit, lane, codes, literals, cycles, SM, end us):");
    for c in chains {
        let end = c.end.saturating_sub(t0) as f64 / 1e3;
        println!("    {:>6} {} {:>5} {:>5} {:>8} {:>4} {end:8.1}", c.unit, c.lane, c.codes, c.lits, c.cycles, c.sm);
    }
}

/// Runs the variants of the full decode whose parse is linear and prints what the chains recorded.
pub fn report(gpu: &GpuEngine, data: &ArchiveData) -> BoxResult<()> {
    let meta = unit_meta(data);
    let lanes = usize::from(data.header.rans_lanes);
    for (name, variant) in [("entropy_only", FullVariant::EntropyOnly), ("full", FullVariant::Full)] {
        for _ in 0..3 {
            gpu.full_decode(variant, None)?;
        }
        let run = gpu.full_decode(variant, None)?;
        let Some(records) = gpu.k1_clocks()? else {
            println!("clocks: the kernels were built without them (set ACEAPEX_GPU_K1_CLOCKS=1)");
            return Ok(());
        };
        let mut chains = Vec::new();
        for (r, rec) in records.iter().enumerate() {
            let (unit, lane) = (r / 2, r % 2);
            let m = &meta.words[unit * META_WORDS..(unit + 1) * META_WORDS];
            if rec[2] == 0 || lane >= lanes {
                continue;
            }
            let (nmatch, nlit) = (m[2] as usize, m[3] as usize);
            let codes = 3 * nmatch + 1;
            let s = lane_split(codes, nlit, lanes);
            let (codes, lits) = if lane == 0 { (codes, s) } else { (0, nlit - s) };
            chains.push(Chain {
                unit,
                lane,
                codes: codes as f64,
                lits: lits as f64,
                cycles: rec[0] as f64,
                start: rec[1],
                end: rec[2],
                sm: rec[3],
            });
        }
        if chains.is_empty() {
            println!("clocks ({name}): no records (the parse was not parse_k1_linear)");
            continue;
        }
        let t0 = chains.iter().map(|c| c.start).min().unwrap_or(0);
        let last = chains.iter().map(|c| c.end).max().unwrap_or(0);
        // Each SM's last end: how many SMs ran chains, and how long they wait for the slowest.
        let mut sm_end = std::collections::BTreeMap::<u64, u64>::new();
        for c in &chains {
            let e = sm_end.entry(c.sm).or_default();
            *e = (*e).max(c.end);
        }
        println!(
            "clocks ({name}, device {:.3} ms): {} chains on {} SMs, first start to last end {:.1} us",
            run.device_ms,
            chains.len(),
            sm_end.len(),
            last.saturating_sub(t0) as f64 / 1e3
        );
        for lane in 0..lanes {
            let of: Vec<&Chain> = chains.iter().filter(|c| c.lane == lane).collect();
            println!("  lane {lane}: {} chains", of.len());
            spread("cycles a chain", of.iter().map(|c| c.cycles).collect());
            spread("literals a chain", of.iter().map(|c| c.lits).collect());
            spread("codes a chain", of.iter().map(|c| c.codes).collect());
            spread(
                "cycles / literals (> 256 literals)",
                of.iter().filter(|c| c.lits > 256.0 && c.codes < 64.0).map(|c| c.cycles / c.lits).collect(),
            );
            spread("end, us after the first start", of.iter().map(|c| c.end.saturating_sub(t0) as f64 / 1e3).collect());
        }
        spread(
            "SM idle before the last end, us",
            sm_end.values().map(|&e| last.saturating_sub(e) as f64 / 1e3).collect(),
        );
        let mut by_end: Vec<&Chain> = chains.iter().collect();
        by_end.sort_by_key(|c| std::cmp::Reverse(c.end));
        print_chains("the chains that end last", &by_end[..by_end.len().min(8)], t0);
        let mut by_cycles: Vec<&Chain> = chains.iter().collect();
        by_cycles.sort_by(|a, b| b.cycles.total_cmp(&a.cycles));
        print_chains("the longest chains in cycles", &by_cycles[..by_cycles.len().min(5)], t0);
    }
    Ok(())
}
