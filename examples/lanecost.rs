//! What more rANS lanes a slice would cost an archive, and what "bits-back" initial states would give back,
//! measured on the CPU before a format change is built (docs/BENCH-GPU.md "Session 41").
//!
//! For every slice of the archive (decoded to its tokens and literals):
//! - the marginal cost of a lane: the slice coded again with one lane and with two (`encode_slices`), the
//!   difference being what the second lane costs (its 4-byte state, its own flush, its context restarting);
//! - bits-back: a lane whose encoder starts at `2^16 + v`, `v` its last 16 bits of literals (eight bases, or two
//!   bytes of a table-coded slice), gets those bits back from the decoder's final state and need not code them,
//!   so it saves what those literals cost in the model (their `-log2 p`, summed);
//! - the same saving with four lanes a slice (codes in lane 0, the literals cut in four after weighing each code
//!   as ten literals, as FORMAT.md §3.4 cuts them in two).
//!
//! Then what a format with four lanes and bits-back states would cost against today's two lanes:
//! `2 · marginal lane + split varint − (bits-back of four lanes − nothing today)`.
//!
//! `cargo run --release --example lanecost -- ARCHIVE.acx` (an archive of two lanes; genome mode is the case that
//! matters, its ratio margin is 0.1 %). Session 41, atha_chr1 in genome mode (7,186,214 bytes, 7,504 slices): the
//! second lane 3.03 bytes a slice; bits-back 3.66 bytes a slice with two lanes, 7.05 with four; four lanes with
//! bits-back states +1.02 bytes a slice against today (+7.6 KB, +0.106 %: the ratio 4.3048 → ~4.300), two lanes
//! with them −3.66 (−27.5 KB, ratio ~4.321).

use aceapex::codec::block::{codes_with_contexts, decode_slice, encode_slices, slice_count};
use aceapex::codec::context::{base_code, CtxModel};
use aceapex::codec::cut::SliceTokens;
use aceapex::codec::rans::{lane_split, SPLIT_CODE_WEIGHT};
use aceapex::codec::tables::TableSet;
use aceapex::format::ArchiveData;

/// Literals whose bits a lane's initial state carries: 16 bits of bases (2 bits each) or of bytes.
fn carried(contexts: bool) -> usize {
    if contexts {
        8
    } else {
        2
    }
}

/// The literal ranges of `lanes` lanes (1, 2 or 4): lane 0 after the codes, the rest of the literals shared out
/// so that each lane has about as much work, a code weighing [`SPLIT_CODE_WEIGHT`] literals (for two lanes this
/// is FORMAT.md §3.4's split without its rounding to 8).
fn lane_ranges(ncodes: usize, nlit: usize, lanes: usize) -> Vec<(usize, usize)> {
    if lanes == 2 {
        let s = lane_split(ncodes, nlit, 2);
        return vec![(0, s), (s, nlit)];
    }
    let work = nlit + SPLIT_CODE_WEIGHT * ncodes;
    let share = work.div_ceil(lanes);
    let mut cuts = vec![0usize];
    for l in 1..lanes {
        let cut = (l * share).saturating_sub(SPLIT_CODE_WEIGHT * ncodes).min(nlit);
        cuts.push(cut.max(*cuts.last().unwrap_or(&0)));
    }
    cuts.push(nlit);
    cuts.windows(2).map(|w| (w[0], w[1])).collect()
}

/// Bits the last [`carried`] literals of each lane cost in the slice's model (contexts restarting at each lane's
/// start, FORMAT.md §3.5), or in its LIT table.
fn bits_back(literals: &[u8], ranges: &[(usize, usize)], model: Option<&CtxModel>, tables: &TableSet) -> f64 {
    let mut bits = 0.0;
    for &(a, b) in ranges {
        let lane = &literals[a..b];
        let keep = lane.len().saturating_sub(carried(model.is_some()));
        match model {
            Some(m) => {
                let mut ctx = 0u32;
                for (j, &byte) in lane.iter().enumerate() {
                    let s = u32::from(base_code(byte).unwrap_or(0));
                    if j >= keep {
                        bits += m.bits(ctx, s);
                    }
                    ctx = ((ctx << 2) | s) & m.mask();
                }
            }
            None => {
                for &byte in &lane[keep..] {
                    let f = tables.lit.freq_of(byte as usize).max(1);
                    bits += 12.0 - (f as f64).log2();
                }
            }
        }
    }
    bits
}

fn main() {
    let path = std::env::args().nth(1).expect("usage: lanecost ARCHIVE.acx");
    let data = ArchiveData::open(&path).expect("open");
    let file_len = std::fs::metadata(&path).expect("archive size").len();
    let (mut slices, mut ctx_slices) = (0u64, 0u64);
    let (mut one_lane, mut two_lanes) = (0u64, 0u64);
    let (mut back2, mut back4) = (0.0f64, 0.0f64);
    for id in 0..data.block_count() {
        let shape = data.block_shape(id);
        let tables = data.tables_for(id);
        let payload = data.payload(id).expect("payload");
        let n = slice_count(shape.len, shape.slice_log);
        for j in 0..n {
            let parsed = decode_slice(&payload, tables, shape, j).expect("slice decodes");
            let slice = SliceTokens { tokens: parsed.tokens.clone(), literals: parsed.literals.clone() };
            let nmatch = slice.tokens.len() - 1;
            let ncodes = 3 * nmatch + 1;
            let model = tables.ctx_model().filter(|_| codes_with_contexts(&slice.literals));
            let mut bytes = [Vec::new(), Vec::new()];
            for (lanes, out) in [1u32, 2].into_iter().zip(bytes.iter_mut()) {
                encode_slices(std::slice::from_ref(&slice), tables, lanes, out);
            }
            one_lane += bytes[0].len() as u64;
            two_lanes += bytes[1].len() as u64;
            let nlit = slice.literals.len();
            back2 += bits_back(&slice.literals, &lane_ranges(ncodes, nlit, 2), model, tables);
            back4 += bits_back(&slice.literals, &lane_ranges(ncodes, nlit, 4), model, tables);
            slices += 1;
            ctx_slices += model.is_some() as u64;
        }
    }
    let per = |x: f64| x / slices as f64;
    let lane = (two_lanes as f64 - one_lane as f64) / slices as f64;
    println!("archive {path}: {} bytes, {slices} slices ({ctx_slices} context-coded)", file_len);
    println!("slices coded again, each with its directory entry: one lane {one_lane} bytes, two lanes {two_lanes}");
    println!("the second lane: {lane:.2} bytes a slice");
    println!(
        "bits-back, the last 16 bits of each lane's literals: two lanes {:.2} bytes a slice ({:.0} in all), four lanes {:.2} ({:.0})",
        per(back2 / 8.0),
        back2 / 8.0,
        per(back4 / 8.0),
        back4 / 8.0
    );
    // Four lanes: two more lanes and a varint for where the second word stream starts (~2 bytes), less what
    // four lanes' states give back.
    let four = 2.0 * lane + 2.0 - per(back4 / 8.0);
    println!(
        "four lanes with bits-back states against today's two: {four:+.2} bytes a slice, {:+.0} bytes in all ({:+.3} % of the archive)",
        four * slices as f64,
        100.0 * four * slices as f64 / file_len as f64
    );
    let two = -per(back2 / 8.0);
    println!(
        "two lanes with bits-back states against today's: {two:+.2} bytes a slice, {:+.0} bytes in all",
        two * slices as f64
    );
}
