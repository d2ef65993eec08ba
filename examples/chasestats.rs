//! What the resident chase (kernels/decode.cu `chase_resident`) does per byte, counted on the CPU: for every
//! aligned 32-byte window of the stream (one warp's iteration), how many of its bytes are literals, how many
//! matches a byte follows before it reaches a literal, and the dependent load rounds the warp waits for under the
//! kernel's present scheme and under a literal bitmap (a bit per stream byte: literal or not).
//!
//! `cargo run --release --example chasestats -- ARCHIVE.acx`
//!
//! Why: a device call is scarce. A warp waits for its slowest lane, so the sum over windows of the slowest lane's
//! rounds says what a change in the chase's loads can buy before the H200 measures it.
use aceapex::codec::block::{decode_block_into, ParsedBlock};
use aceapex::format::ArchiveData;
use rayon::prelude::*;

/// Bytes per token-index bucket, log2: the kernel's default TOKEN_BUCKET_LOG, or CHASE_BUCKET_LOG.
fn bucket_log() -> u32 {
    std::env::var("CHASE_BUCKET_LOG").ok().and_then(|v| v.parse().ok()).unwrap_or(6)
}

struct Tokens {
    /// Start of each token's literals (stream position), ascending; tokens of length 0 left out.
    start: Vec<u64>,
    /// Start of each token's match (= start + literal length).
    mstart: Vec<u64>,
    /// Match length, distance, reverse complement.
    mlen: Vec<u32>,
    back: Vec<u64>,
    rc: Vec<bool>,
}

impl Tokens {
    fn at(&self, p: u64) -> usize {
        self.start.partition_point(|&s| s <= p) - 1
    }
    /// Tokens starting in (bucket start, p]: the index scan's extra steps.
    fn scan(&self, p: u64, unit_log: u32) -> u32 {
        let b0 = (p >> bucket_log()) << bucket_log();
        let u0 = (p >> unit_log) << unit_log;
        let lo = self.start.partition_point(|&s| s <= b0.max(u0));
        let hi = self.start.partition_point(|&s| s <= p);
        (hi - lo) as u32
    }
    /// The source of p if p is a match byte.
    fn source(&self, t: usize, p: u64) -> Option<u64> {
        if self.mlen[t] == 0 || p < self.mstart[t] {
            return None;
        }
        let k = p - self.mstart[t];
        let base = self.mstart[t] - self.back[t];
        Some(if self.rc[t] { base - k } else { base + k % self.back[t] })
    }
}

fn main() {
    let path = std::env::args().nth(1).expect("archive");
    let data = ArchiveData::open(&path).expect("open");
    let unit_log = data.header.slice_log as u32;
    let per_block: Vec<Vec<(u64, u64, u32, u64, bool)>> = (0..data.block_count())
        .into_par_iter()
        .map_init(ParsedBlock::default, |parsed, id| {
            let shape = data.block_shape(id);
            let payload = data.payload(id).unwrap();
            decode_block_into(&payload, data.tables_for(id), shape, parsed).unwrap();
            let mut v = Vec::new();
            for (t, tok) in parsed.tokens.iter().enumerate() {
                if tok.lit_len + tok.match_len == 0 {
                    continue;
                }
                let s = parsed.start + u64::from(parsed.token_pos[t]);
                v.push((s, s + u64::from(tok.lit_len), tok.match_len, tok.back, tok.rc));
            }
            v
        })
        .collect();
    let all: Vec<_> = per_block.into_iter().flatten().collect();
    let tk = Tokens {
        start: all.iter().map(|x| x.0).collect(),
        mstart: all.iter().map(|x| x.1).collect(),
        mlen: all.iter().map(|x| x.2).collect(),
        back: all.iter().map(|x| x.3).collect(),
        rc: all.iter().map(|x| x.4).collect(),
    };
    let stream = *tk.mstart.last().unwrap() + u64::from(*tk.mlen.last().unwrap());
    let stream = stream.max(all.last().map(|x| x.1).unwrap());
    let windows = stream / 32;
    // Per window: (literal bytes, all literal, max hops, rounds now, rounds with bitmap, loads now, loads bitmap)
    let stats: Vec<[u64; 10]> = (0..windows)
        .into_par_iter()
        .map(|w| {
            let p0 = w * 32;
            let mut lits = 0u64;
            let mut max_hops = 0u64;
            let (mut now_max, mut bm_max, mut now_loads, mut bm_loads) = (0u64, 0u64, 0u64, 0u64);
            let mut hop_bytes = 0u64;
            let (mut uni_max, mut uni_loads) = (0u64, 0u64);
            // The warp's token search: lane 0's index load and scan, then the lanes' tpos load.
            let search = 1 + u64::from(tk.scan(p0, unit_log)) + 1;
            let mut any_match = false;
            let mut lane_rounds = [(0u64, 0u64); 32];
            for (lane, lr) in lane_rounds.iter_mut().enumerate() {
                let p = p0 + lane as u64;
                let t = tk.at(p);
                // now: search, mpos, then bytes (literal) or back and hops.
                let mut now = search + 1;
                let mut nl = 3u64; // tpos, mpos, bytes/back (index/scan shared by the warp)
                                   // bitmap: {litmap, bytes}; a match then joins the search, then {mpos, back}.
                let mut bm = 1u64;
                let mut bl = 2u64;
                match tk.source(t, p) {
                    None => {
                        lits += 1;
                        now += 1;
                    }
                    Some(mut q) => {
                        any_match = true;
                        now += 1; // back
                        nl += 1;
                        bm += search + 1;
                        bl += 3;
                        let mut hops = 0u64;
                        loop {
                            hops += 1;
                            let t2 = tk.at(q);
                            let scan = u64::from(tk.scan(q, unit_log));
                            // now: index, then {bytes, tpos, mpos, back} and scan steps
                            now += 2 + scan;
                            nl += 1 + 4 * (1 + scan);
                            // bitmap: {litmap, bytes, index}; a match then {tpos, mpos, back} and scan
                            bm += 1;
                            bl += 3;
                            match tk.source(t2, q) {
                                None => break,
                                Some(q2) => {
                                    bm += 1 + scan;
                                    bl += 3 * (1 + scan);
                                    q = q2;
                                }
                            }
                        }
                        hop_bytes += hops;
                        max_hops = max_hops.max(hops);
                    }
                }
                // uniform: every position, the first too: {litmap, bytes, index}; a match then {tpos, mpos, back}
                // and the scan, then its source.
                let mut un = 0u64;
                let mut ul = 0u64;
                let mut q = p;
                loop {
                    un += 1;
                    ul += 3;
                    let t2 = tk.at(q);
                    match tk.source(t2, q) {
                        None => break,
                        Some(q2) => {
                            let scan = u64::from(tk.scan(q, unit_log));
                            un += 1 + scan;
                            ul += 3 * (1 + scan);
                            q = q2;
                        }
                    }
                }
                uni_max = uni_max.max(un);
                uni_loads += ul;
                *lr = (now, bm);
                now_loads += nl;
                bm_loads += bl;
            }
            for &(n, b) in &lane_rounds {
                now_max = now_max.max(n);
                bm_max = bm_max.max(if any_match { b } else { 1 });
            }
            [lits, u64::from(lits == 32), max_hops, now_max, bm_max, now_loads, bm_loads, hop_bytes, uni_max, uni_loads]
        })
        .collect();
    let sum = |i: usize| stats.iter().map(|s| s[i]).sum::<u64>();
    let n = windows as f64;
    println!("{path}: stream {stream} bytes, {} tokens, {windows} windows of 32 bytes", tk.start.len());
    println!(
        "literal bytes {:.1} %; all-literal windows {:.1} %; hops a match byte {:.2}",
        100.0 * sum(0) as f64 / (32.0 * n),
        100.0 * sum(1) as f64 / n,
        sum(7) as f64 / (32.0 * n - sum(0) as f64)
    );
    let mut hist = [0u64; 18];
    for s in &stats {
        hist[(s[2] as usize).min(17)] += 1;
    }
    println!("windows by their deepest byte's hops: {:?}", &hist[..]);
    println!(
        "rounds a window (slowest lane): now {:.2}, bitmap {:.2}; loads a byte: now {:.2}, bitmap {:.2}",
        sum(3) as f64 / n,
        sum(4) as f64 / n,
        sum(5) as f64 / (32.0 * n),
        sum(6) as f64 / (32.0 * n)
    );
    println!(
        "uniform hops (the first a hop like the others): rounds a window {:.2}, loads a byte {:.2}",
        sum(8) as f64 / n,
        sum(9) as f64 / (32.0 * n)
    );
}
