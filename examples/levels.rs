//! The match levels of an archive, as the GPU's `Resolve::Levels` sees them: a match's level is 1 + the highest
//! level among the matches its source overlaps (literals: 0; a periodic fill's overlap with itself does not
//! count). Prints how many matches and match bytes each level has, computed in stream order on the CPU.
//!
//! `cargo run --release --example levels -- ARCHIVE.acx`
//!
//! Why: the level search and the per-level copies cost about one launch per level, and what lies above the pass
//! count is chased byte by byte, so the histogram says where to put the cap (kernels/decode.cu, "Full decode by
//! match levels").
use aceapex::codec::block::{decode_block_into, ParsedBlock};
use aceapex::format::ArchiveData;
use rayon::prelude::*;

fn main() {
    let path = std::env::args().nth(1).expect("archive");
    let data = ArchiveData::open(&path).expect("open");
    let per_block: Vec<Vec<(u64, u32, u64, bool)>> = (0..data.block_count())
        .into_par_iter()
        .map_init(ParsedBlock::default, |parsed, id| {
            let shape = data.block_shape(id);
            let payload = data.payload(id).unwrap();
            decode_block_into(&payload, data.tables_for(id), shape, parsed).unwrap();
            let mut v = Vec::new();
            for (t, tok) in parsed.tokens.iter().enumerate() {
                if tok.match_len > 0 {
                    let dst = parsed.start + u64::from(parsed.token_pos[t]) + u64::from(tok.lit_len);
                    v.push((dst, tok.match_len, tok.back, tok.rc));
                }
            }
            v
        })
        .collect();
    let m: Vec<(u64, u32, u64, bool)> = per_block.into_iter().flatten().collect();
    let starts: Vec<u64> = m.iter().map(|x| x.0).collect();
    let mut level = vec![0u32; m.len()];
    const LEVELS: usize = 4096;
    let mut hist = vec![0u64; LEVELS];
    let mut bytes_hist = vec![0u64; LEVELS];
    let mut overl = 0u64;
    let mut selfov = 0u64;
    for i in 0..m.len() {
        let (dst, len, back, rc) = m[i];
        let (s0, s1) = if rc {
            (dst - back - u64::from(len) + 1, dst - back + 1)
        } else {
            (dst - back, (dst - back + u64::from(len)).min(dst))
        };
        if !rc && back < u64::from(len) {
            selfov += 1;
        }
        // first match that ends after s0
        let mut j = starts.partition_point(|&s| s <= s0).saturating_sub(1);
        let mut lv = 0;
        while j < i && starts[j] < s1 {
            let end = m[j].0 + u64::from(m[j].1);
            if end > s0 {
                lv = lv.max(level[j]);
                overl += 1;
            }
            j += 1;
        }
        level[i] = lv + 1;
        let l = (lv + 1).min(LEVELS as u32 - 1) as usize;
        hist[l] += 1;
        bytes_hist[l] += u64::from(len);
    }
    let total: u64 = m.iter().map(|x| u64::from(x.1)).sum();
    println!(
        "matches {} match bytes {} stream {} overlapped-token visits {} self-overlap {}",
        m.len(),
        total,
        data.footer.total_len,
        overl,
        selfov
    );
    for l in 1..LEVELS {
        if hist[l] > 0 && (l <= 40 || l % 50 == 0) {
            println!("level {l:4}: {:9} matches {:12} bytes", hist[l], bytes_hist[l]);
        }
    }
    // The shape the copies see: levels and 128-byte pieces (about) by pieces per level.
    let max_level = (1..LEVELS).rev().find(|&l| hist[l] > 0).unwrap_or(0);
    println!("highest level {max_level} (levels at or above {} counted together)", LEVELS - 1);
    let bounds = [64u64, 512, 4096, 65536, u64::MAX];
    let mut lo = 0u64;
    for hi in bounds {
        let (mut n, mut pieces) = (0u64, 0u64);
        for l in 1..LEVELS {
            let p = bytes_hist[l].div_ceil(128);
            if hist[l] > 0 && p >= lo && p < hi {
                n += 1;
                pieces += p;
            }
        }
        println!("levels of [{lo}, {hi}) pieces: {n} levels, {pieces} pieces");
        lo = hi;
    }
}
