//! What the resident chase (kernels/chase.cuh `chase_resident`) does per byte, counted on the CPU: for every
//! aligned 32-byte window of the stream (one warp's iteration), how many of its bytes are literals, how many
//! matches a byte follows before it reaches a literal, and the dependent load rounds the warp waits for (its
//! slowest lane's) and the loads a byte issues, under session 25's chase and under the present one.
//!
//! `cargo run --release --example chasestats -- ARCHIVE.acx` (`CHASE_BUCKET_LOG=4` for 16-byte index buckets)
//!
//! Why: a device call is scarce. Session 26 used these counts to choose the literal map, and the H200 then showed
//! the time following the loads a byte issues more than the rounds (docs/BENCH-GPU.md).
//!
//! The two schemes, in rounds of loads that depend on each other:
//! - session 25: the warp searches the first byte's token (lane 0's index entry, its scan, the lanes' token
//!   starts), then a byte loads its match start, then its byte (a literal) or its back word; a later hop loads
//!   its index entry, then its byte, next token start, match start and back word (again per scan step).
//! - now: every position loads its literal-map word, byte and index entry; a match byte then loads its chase
//!   record (again per scan step) and moves on.
use aceapex::codec::block::{decode_block_into, ParsedBlock};
use aceapex::format::ArchiveData;
use rayon::prelude::*;

/// One token of the stream, at absolute positions.
#[derive(Clone, Copy)]
struct Token {
    /// Where its literals start, where its match starts, the match's length, distance and kind.
    start: u64,
    mstart: u64,
    mlen: u32,
    back: u64,
    rc: bool,
}

struct Stream {
    tokens: Vec<Token>,
    starts: Vec<u64>,
    unit_log: u32,
    bucket_log: u32,
}

impl Stream {
    fn token_at(&self, p: u64) -> &Token {
        &self.tokens[self.starts.partition_point(|&s| s <= p) - 1]
    }

    /// Tokens that start after the first byte of p's index bucket (within its unit) and at or before p: the
    /// index scan's extra steps.
    fn scan(&self, p: u64) -> u64 {
        let bucket = (p >> self.bucket_log) << self.bucket_log;
        let unit = (p >> self.unit_log) << self.unit_log;
        let lo = self.starts.partition_point(|&s| s <= bucket.max(unit));
        (self.starts.partition_point(|&s| s <= p) - lo) as u64
    }

    /// The source of p when p is a match byte.
    fn source(&self, p: u64) -> Option<u64> {
        let t = self.token_at(p);
        if t.mlen == 0 || p < t.mstart {
            return None;
        }
        let (k, base) = (p - t.mstart, t.mstart - t.back);
        Some(if t.rc { base - k } else { base + k % t.back })
    }
}

/// Per window: literal bytes, whether all are, the deepest byte's hops, the match bytes' hops, and for session 25
/// and now the slowest lane's rounds and the loads of all lanes.
#[derive(Default, Clone, Copy)]
struct Window {
    literals: u64,
    all_literal: u64,
    deepest: u64,
    hops: u64,
    rounds: [u64; 2],
    loads: [u64; 2],
}

fn window(s: &Stream, p0: u64) -> Window {
    let mut w = Window::default();
    // Session 25's warp search: lane 0's index entry and scan, then the lanes' token starts.
    let search = 1 + s.scan(p0) + 1;
    for p in p0..p0 + 32 {
        // Session 25: the search, the match start, then the byte (a literal) or the back word.
        let (mut old_rounds, mut old_loads) = (search + 2, 3);
        // Now: the map word, byte and index entry.
        let (mut new_rounds, mut new_loads) = (1, 3);
        let (mut q, mut hops) = (p, 0);
        while let Some(src) = s.source(q) {
            let scan = s.scan(q);
            hops += 1;
            new_rounds += 1 + scan + 1;
            new_loads += 1 + scan + 3;
            old_rounds += 2 + s.scan(src);
            old_loads += 1 + 4 * (1 + s.scan(src));
            q = src;
        }
        if hops == 0 {
            w.literals += 1;
        }
        w.hops += hops;
        w.deepest = w.deepest.max(hops);
        w.rounds[0] = w.rounds[0].max(old_rounds);
        w.rounds[1] = w.rounds[1].max(new_rounds);
        w.loads[0] += old_loads;
        w.loads[1] += new_loads;
    }
    w.all_literal = u64::from(w.literals == 32);
    w
}

fn main() {
    let path = std::env::args().nth(1).expect("usage: chasestats ARCHIVE.acx");
    let data = ArchiveData::open(&path).expect("open");
    let per_block: Vec<Vec<Token>> = (0..data.block_count())
        .into_par_iter()
        .map_init(ParsedBlock::default, |parsed, id| {
            let payload = data.payload(id).expect("payload");
            decode_block_into(&payload, data.tables_for(id), data.block_shape(id), parsed).expect("decode");
            let toks = parsed.tokens.iter().zip(&parsed.token_pos);
            toks.filter(|(t, _)| t.lit_len + t.match_len > 0)
                .map(|(t, &pos)| {
                    let start = parsed.start + u64::from(pos);
                    let mstart = start + u64::from(t.lit_len);
                    Token { start, mstart, mlen: t.match_len, back: t.back, rc: t.rc }
                })
                .collect()
        })
        .collect();
    let tokens: Vec<Token> = per_block.into_iter().flatten().collect();
    let bucket_log = std::env::var("CHASE_BUCKET_LOG").ok().and_then(|v| v.parse().ok()).unwrap_or(6);
    let s = Stream {
        starts: tokens.iter().map(|t| t.start).collect(),
        tokens,
        unit_log: u32::from(data.header.slice_log),
        bucket_log,
    };
    let last = s.tokens.last().expect("tokens");
    let len = last.mstart + u64::from(last.mlen);
    let windows = len / 32;
    let all: Vec<Window> = (0..windows).into_par_iter().map(|i| window(&s, i * 32)).collect();
    let sum = |f: &dyn Fn(&Window) -> u64| all.iter().map(f).sum::<u64>() as f64;
    let (n, bytes) = (windows as f64, 32.0 * windows as f64);
    println!("{path}: {len} stream bytes, {} tokens, {windows} windows of 32 bytes", s.tokens.len());
    println!(
        "literal bytes {:.1} %, all-literal windows {:.1} %, hops a match byte {:.2}",
        100.0 * sum(&|w| w.literals) / bytes,
        100.0 * sum(&|w| w.all_literal) / n,
        sum(&|w| w.hops) / (bytes - sum(&|w| w.literals))
    );
    let mut deepest = [0u64; 18];
    all.iter().for_each(|w| deepest[(w.deepest as usize).min(17)] += 1);
    println!("windows by their deepest byte's hops (0..=16, more): {deepest:?}");
    for (k, name) in ["session 25", "now"].iter().enumerate() {
        println!(
            "{name:>10}: rounds a window (slowest lane) {:.2}, loads a byte {:.2}",
            sum(&|w| w.rounds[k]) / n,
            sum(&|w| w.loads[k]) / bytes
        );
    }
}
