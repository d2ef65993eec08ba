//! The bodies of the fuzz targets, as plain functions so that the seed corpora also replay as ordinary
//! tests on stable (`cargo test --manifest-path fuzz/Cargo.toml --no-default-features`).
//!
//! Every target has two modes picked by the top bit of the first byte:
//!
//! - **hostile** (bit clear): the rest is an untrusted stream for the decoder. The decoder must return `Err` or a
//!   result that satisfies the format's invariants; `rans_decode` also checks it against a slow, literal
//!   transcription of FORMAT.md §3.4 (the layout the GPU kernel implements), so a fast-path bug cannot hide.
//! - **round trip** (bit set): the rest describes valid input for the encoder; decoding what it wrote must give it
//!   back exactly.
//!
//! A panic in any of these functions is a finding.
//!
//! The whole-archive targets (`archive_open`, `archive_read`, `resolver`) live in [`archive`], with their input
//! framing in [`image`]; the genome-mode target (`fasta_layout`) in [`genome`]. [`alloc`] counts heap bytes per
//! thread so that a target can bound memory by the input's length.

pub mod alloc;
pub mod archive;
pub mod genome;
pub mod image;

pub use archive::{archive_open, archive_read, resolver};
pub use genome::fasta_layout;

use std::sync::Arc;

use aceapex::codec::block::{self, continued_back, reference_block_bytes, BlockShape, ParsedBlock, PrevMatch, Token};
use aceapex::codec::context::{for_each_context, CtxModel, LitContext, MAX_LIT_ORDER};
use aceapex::codec::cut::{cut_slices, SliceTokens};
use aceapex::codec::rans;
use aceapex::codec::tables::{SymbolStats, Table, TableSet, OF_CONTINUATION_DELTAS};

/// Lane count from a selector byte: 1 or 2.
fn lanes_of(selector: u8) -> usize {
    1 + (selector & 1) as usize
}

/// Reads `N` bytes at `*at` (zero-padded past the end) and advances.
fn take<const N: usize>(data: &[u8], at: &mut usize) -> [u8; N] {
    let mut out = [0u8; N];
    for (i, b) in out.iter_mut().enumerate() {
        *b = data.get(*at + i).copied().unwrap_or(0);
    }
    *at += N;
    out
}

/// A table built from up to `n` count bytes (all zero gives a single-symbol table on symbol 0).
fn table_from_bytes(counts: &[u8]) -> Table {
    let mut counts: Vec<u64> = counts.iter().map(|&c| c as u64).collect();
    if counts.iter().all(|&c| c == 0) {
        counts = vec![1];
    }
    Table::from_counts(&counts)
}

/// FORMAT.md §3.4 as written: lane `l` decodes symbols `[starts[l], starts[l + 1])` on its own, lane 0 taking its
/// words from the front of the stream and lane 1 from the back; at the end every lane is at 2^16 and the lanes
/// took every word once. Returns the symbols, or `None` where the format says the stream is corrupt.
pub fn reference_rans_decode(
    states: &[u32],
    words: &[u16],
    segments: &[(usize, &Table)],
    starts: &[usize],
) -> Option<Vec<u8>> {
    if states.iter().any(|&s| s < 1 << 16) || states.len() != starts.len() {
        return None;
    }
    let mut tables = Vec::new();
    for &(n, t) in segments {
        if n > 0 && t.freq.is_empty() {
            return None;
        }
        tables.extend(std::iter::repeat_n(t, n));
    }
    let total = tables.len();
    let mut out = vec![0u8; total];
    let mut taken = 0;
    for (lane, (&start, &state)) in starts.iter().zip(states).enumerate() {
        let end = starts.get(lane + 1).copied().unwrap_or(total);
        let mut x = state;
        let mut k = 0;
        for i in start..end {
            let t = tables[i];
            let slot = x & 4095;
            let s =
                (0..t.freq.len()).find(|&s| (t.cum[s] as u32) <= slot && slot < t.cum[s] as u32 + t.freq[s] as u32)?;
            out[i] = s as u8;
            x = t.freq[s] as u32 * (x >> 12) + slot - t.cum[s] as u32;
            if x < 1 << 16 {
                let at = if lane == 0 { Some(k) } else { words.len().checked_sub(1 + k) };
                x = (x << 16) | *words.get(at?)? as u32;
                k += 1;
            }
        }
        if x != 1 << 16 {
            return None;
        }
        taken += k;
    }
    (taken == words.len()).then_some(out)
}

/// rANS stage. Hostile layout: `mode, n_a: u16, n_b: u16, k, count[k], states[4·lanes], words...`: `n_a`
/// symbols with a table from the counts, then `n_b` with a fixed skewed table; with two lanes, lane 1 starts at
/// symbol `n_a`. Round trip: `mode, split: u8, symbols...` with a table per side built from its own symbols, and
/// with two lanes lane 1 starting at the split.
pub fn rans_decode(data: &[u8]) {
    let Some(&mode) = data.first() else { return };
    let lanes = lanes_of(mode);
    let mut at = 1;
    if mode & 0x80 != 0 {
        let [split] = take::<1>(data, &mut at);
        let symbols = data.get(at..).unwrap_or(&[]);
        let split = (split as usize).min(symbols.len());
        let (a, b) = symbols.split_at(split);
        let count = |s: &[u8]| {
            let mut c = vec![0u64; 256];
            s.iter().for_each(|&x| c[x as usize] += 1);
            Table::from_counts(&c)
        };
        let (ta, tb) = (count(a), count(b));
        let segments = [(a.len(), &ta), (b.len(), &tb)];
        let starts: &[usize] = if lanes == 2 { &[0, split] } else { &[0] };
        let encoded = rans::encode_lanes(symbols, &segments, None, starts);
        let mut bytes = Vec::new();
        rans::write_stream(&encoded, &mut bytes);
        let (sb, wb) = bytes.split_at(4 * lanes);
        assert_eq!(rans::decode_lanes(sb, wb, &segments, starts).ok().as_deref(), Some(symbols));
        let reference = reference_rans_decode(&encoded.states, &encoded.words, &segments, starts);
        assert_eq!(reference.as_deref(), Some(symbols));
        return;
    }
    // At most 4096 symbols per segment keeps executions fast; longer streams add no new paths.
    let n_a = u16::from_le_bytes(take::<2>(data, &mut at)) as usize % 4097;
    let n_b = u16::from_le_bytes(take::<2>(data, &mut at)) as usize % 4097;
    let [k] = take::<1>(data, &mut at);
    let k = k as usize % 33;
    let counts = data.get(at..(at + k).min(data.len())).unwrap_or(&[]);
    at += k;
    let table_a = table_from_bytes(counts);
    let table_b = Table::from_counts(&[1000, 100, 10, 1]);
    let rest = data.get(at..).unwrap_or(&[]);
    if rest.len() < 4 * lanes {
        return;
    }
    let (state_bytes, word_bytes) = rest.split_at(4 * lanes);
    let word_bytes = &word_bytes[..word_bytes.len() & !1];
    let segments = [(n_a, &table_a), (n_b, &table_b)];
    let starts: &[usize] = if lanes == 2 { &[0, n_a] } else { &[0] };
    let fast = rans::decode_lanes(state_bytes, word_bytes, &segments, starts).ok();
    let states: Vec<u32> = state_bytes.chunks_exact(4).map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]])).collect();
    let words: Vec<u16> = word_bytes.chunks_exact(2).map(|c| u16::from_le_bytes([c[0], c[1]])).collect();
    assert_eq!(fast, reference_rans_decode(&states, &words, &segments, starts), "fast decoder disagrees with §3.4");
}

/// The invariants every successfully decoded unit (a slice, or a whole block of slices) must satisfy
/// (FORMAT.md §3.3): prefix sums consistent with the tokens, every match at least 2 bytes with its source at or
/// after stream position 0 (a reverse complement's whole source range: `back + len − 1 ≤ dst`), literal-only
/// tokens only where a slice ends, the last token literal-only (and forward).
pub fn check_parsed_block(parsed: &ParsedBlock, start: u64, len: u32) {
    assert_eq!(parsed.start, start);
    assert_eq!(parsed.len, len);
    let n = parsed.tokens.len();
    assert_eq!(parsed.token_pos.len(), n + 1);
    assert_eq!(parsed.lit_pos.len(), n);
    assert_eq!(parsed.token_pos[0], 0);
    assert_eq!(parsed.token_pos[n], len);
    if n > 0 {
        assert_eq!(parsed.tokens[n - 1].match_len, 0, "the last token must be literal-only");
    }
    let (mut pos, mut lits) = (0u64, 0u64);
    for (t, token) in parsed.tokens.iter().enumerate() {
        assert_eq!(parsed.token_pos[t] as u64, pos);
        assert_eq!(parsed.lit_pos[t] as u64, lits);
        let dst = start + pos + token.lit_len as u64;
        if token.match_len > 0 {
            assert!(token.match_len >= 2 && token.back >= 1 && token.back <= dst, "token {t}: {token:?}");
            if token.rc {
                assert!(token.back + token.match_len as u64 - 1 <= dst, "token {t}: {token:?} at {dst}");
            }
        } else {
            assert!(token.back == 0 && !token.rc, "token {t}: {token:?}");
        }
        pos += token.lit_len as u64 + token.match_len as u64;
        lits += token.lit_len as u64;
    }
    assert_eq!(pos, len as u64);
    assert_eq!(lits, parsed.literals.len() as u64);
}

/// Slice `j` of a whole-block parse, as its own unit (positions relative to the slice): what decoding slice `j`
/// alone must give.
fn slice_of(block: &ParsedBlock, shape: BlockShape, j: usize) -> ParsedBlock {
    let s = 1u32 << shape.slice_log;
    let (from, to) = (j as u32 * s, ((j as u32 + 1) * s).min(shape.len));
    // Slice j's tokens start after the j-th literal-only token that ends a slice.
    // (Only a slice's last token is literal-only: every other token carries a match of at least 2 bytes.)
    let ends: Vec<usize> = (0..block.tokens.len()).filter(|&t| block.tokens[t].match_len == 0).collect();
    let first = if j == 0 { 0 } else { ends[j - 1] + 1 };
    let last = ends[j];
    let lit0 = block.lit_pos[first];
    let lit1 = block.lit_pos[last] + block.tokens[last].lit_len;
    ParsedBlock {
        start: shape.start + from as u64,
        len: to - from,
        tokens: block.tokens[first..=last].to_vec(),
        token_pos: block.token_pos[first..=last + 1].iter().map(|&p| p - from).collect(),
        lit_pos: block.lit_pos[first..=last].iter().map(|&p| p - lit0).collect(),
        literals: block.literals[lit0 as usize..lit1 as usize].to_vec(),
    }
}

/// Decodes a payload as a whole block and slice by slice: whatever decodes must be valid, and when the whole
/// block decodes, every slice must decode alone to exactly its part of it.
fn check_block_and_slices(payload: &[u8], tables: &TableSet, shape: BlockShape) {
    let n_slices = block::slice_count(shape.len, shape.slice_log);
    let whole = block::decode_block(payload, tables, shape);
    if let Ok(parsed) = &whole {
        check_parsed_block(parsed, shape.start, shape.len);
    }
    // At most 64 slices: enough to reach every path, bounded work for 1 MiB blocks of 512-byte slices.
    for j in 0..n_slices.min(64) {
        let one = block::decode_slice(payload, tables, shape, j);
        if let Ok(p) = &one {
            check_parsed_block(p, p.start, p.len);
        }
        if let Ok(parsed) = &whole {
            assert_eq!(one.as_ref().ok(), Some(&slice_of(parsed, shape, j)), "slice {j} alone differs");
        }
    }
    assert!(block::decode_slice(payload, tables, shape, n_slices).is_err());
}

/// The stream byte at absolute position `p` before a round-trip block.
fn outside_byte(p: u64) -> u8 {
    (p.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8
}

/// A block's decoded bytes by the byte-wise definition of FORMAT.md §1, sources before it from [`outside_byte`].
fn block_bytes(start: u64, tokens: &[Token], literals: &[u8]) -> Vec<u8> {
    reference_block_bytes(start, tokens, literals, outside_byte)
}

/// `slice_log` from a selector byte: 9 ..= 20, and never more than 2^11 slices for a block of `len` bytes.
fn slice_log_of(selector: u8, len: u32) -> u8 {
    let need = (32 - len.max(1).leading_zeros()) as u8;
    (9 + selector % 12).max(need.saturating_sub(11)).min(20)
}

/// Block stage. Hostile layout: `mode, block_len: u24, start: u32 (×256), slice_log: u8, tables_len: u8, tables,
/// payload` (the tables may carry a context model, so flagged slices decode with it). Round trip: `mode, start:
/// u32, slice_log: u8, then 5-byte token shapes (lit: u8, len: u16, back: u16)` (a back selector with its top bit
/// set makes a reverse-complement match where one fits, see [`tokens_from_shapes`]); with bit 6 of the mode set the
/// literals become bases (a literal byte 0xff becomes `N`, so its slice keeps the LIT table) and the tables carry
/// a context model of order `1 + (selector >> 4) % 8` built from them (FORMAT.md §3.5): every slice whose
/// literals are all bases is context-coded.
pub fn block_decode(data: &[u8]) {
    let Some(&mode) = data.first() else { return };
    let mut at = 1;
    if mode & 0x80 != 0 {
        let contexts = mode & 0x40 != 0;
        let lanes = lanes_of(mode & !0x40) as u32;
        let start = u32::from_le_bytes(take::<4>(data, &mut at)) as u64;
        let [selector] = take::<1>(data, &mut at);
        let (tokens, mut literals) = tokens_from_shapes(start, data.get(at..).unwrap_or(&[]));
        if contexts {
            literals.iter_mut().for_each(|b| *b = if *b == 0xff { b'N' } else { b"ACGT"[(*b & 3) as usize] });
        }
        let bytes = block_bytes(start, &tokens, &literals);
        let len = bytes.len() as u32;
        let slice_log = slice_log_of(selector, len);
        let slice_len = 1usize << slice_log;
        let slices = cut_slices(&tokens, &literals, &bytes, slice_len);
        let mut stats = SymbolStats::default();
        block::count_slices(&slices, contexts, &mut stats);
        let mut tables = TableSet::from_stats(&stats);
        if contexts {
            let model = context_model_of(&slices, 1 + (selector >> 4) % MAX_LIT_ORDER, lanes as usize);
            tables.ctx = Some(LitContext { back: 0, model: Arc::new(model) });
            // The set with its model must survive serialisation, as an archive's table section stores it.
            let mut bytes = Vec::new();
            tables.write(&mut bytes);
            assert_eq!(TableSet::read(&bytes).as_ref(), Ok(&tables));
        }
        let mut payload = Vec::new();
        block::encode_slices(&slices, &tables, lanes, &mut payload);
        let shape = BlockShape { start, len, slice_log, lanes };
        let parsed = block::decode_block(&payload, &tables, shape).expect("round trip must decode");
        check_parsed_block(&parsed, start, len);
        let cut_tokens: Vec<Token> = slices.iter().flat_map(|s| s.tokens.iter().copied()).collect();
        let cut_literals: Vec<u8> = slices.iter().flat_map(|s| s.literals.iter().copied()).collect();
        assert_eq!(parsed.tokens, cut_tokens);
        assert_eq!(parsed.literals, cut_literals);
        // The decoded tokens give the block's bytes by the byte-wise definition (the cut changed none). A byte at
        // a time, so only for blocks up to 256 KiB: a 1 MiB round trip already takes seconds under ASan.
        if bytes.len() <= 1 << 18 {
            let again = block_bytes(start, &parsed.tokens, &parsed.literals);
            assert!(again == bytes, "decoded tokens give other bytes");
        }
        check_block_and_slices(&payload, &tables, shape);
        return;
    }
    let lanes = lanes_of(mode) as u32;
    let [a, b, c] = take::<3>(data, &mut at);
    let len = u32::from_le_bytes([a, b, c, 0]) % ((1 << 20) + 2);
    let start = (u32::from_le_bytes(take::<4>(data, &mut at)) as u64) << 8;
    let [selector] = take::<1>(data, &mut at);
    let [tables_len] = take::<1>(data, &mut at);
    let table_bytes = data.get(at..(at + tables_len as usize).min(data.len())).unwrap_or(&[]);
    at += tables_len as usize;
    let tables = TableSet::read(table_bytes).unwrap_or_else(|_| TableSet::every_symbol());
    let payload = data.get(at..).unwrap_or(&[]);
    let shape = BlockShape { start, len, slice_log: slice_log_of(selector, len), lanes };
    check_block_and_slices(payload, &tables, shape);
}

/// The context model of `order` that the context-coded slices (all literals bases) of a block would get from the
/// packer's statistics: per-context base counts, contexts taken per rANS lane as the encoder takes them.
pub fn context_model_of(slices: &[SliceTokens], order: u8, lanes: usize) -> CtxModel {
    let mask = (1u32 << (2 * order)) - 1;
    let mut counts = vec![[0u64; 4]; 1 << (2 * order)];
    for slice in slices.iter().filter(|s| block::codes_with_contexts(&s.literals)) {
        let first = 3 * slice.tokens.len().saturating_sub(1) + 1;
        for_each_context(&slice.literals, first, lanes, mask, |_, ctx, s| counts[ctx as usize][s as usize] += 1);
    }
    CtxModel::from_counts(order, &counts)
}

/// Valid tokens from 5-byte shapes, each source inside `[0, dst)`; the block stays under 1 MiB. A back selector
/// with its top bit set makes a reverse-complement match (FORMAT.md §1) when the stream before it holds its
/// length: the selector picks where its source ends, and a selector below 8 after a reverse complement continues
/// it (the same anti-diagonal shifted by a continuation delta, FORMAT.md §3.2), so the encoder codes it as a
/// continuation of that kind.
fn tokens_from_shapes(start: u64, shapes: &[u8]) -> (Vec<Token>, Vec<u8>) {
    let mut tokens = Vec::new();
    let mut literals = Vec::new();
    let mut dst = 0u64;
    let mut prev: Option<PrevMatch> = None;
    for shape in shapes.chunks_exact(5) {
        let lit_len = shape[0] as u32;
        let match_len = 2 + u16::from_le_bytes([shape[1], shape[2]]) as u32;
        let selector = u16::from_le_bytes([shape[3], shape[4]]) as u64;
        let reach = start + dst + lit_len as u64;
        if reach == 0 || dst + lit_len as u64 + match_len as u64 > (1 << 20) - 300 {
            break;
        }
        let rc = selector >= 0x8000 && reach >= match_len as u64;
        let back = if rc {
            // The source ends at e = reach − back and needs e ≥ len − 1. Below 8: a continuation of the previous
            // RC match where it fits; small selectors: a source ending just before the match (a hairpin); large
            // ones: anywhere.
            let room = reach - match_len as u64 + 1;
            let sel = selector & 0x7fff;
            let continued = prev
                .filter(|p| p.rc && sel < 8)
                .and_then(|p| continued_back(p, reach, OF_CONTINUATION_DELTAS[sel as usize]))
                .filter(|&b| b <= room);
            if let Some(back) = continued {
                back
            } else if sel < 256 {
                1 + sel % room
            } else {
                1 + (sel * 0x9e37_79b9) % room
            }
        } else if selector < 256 {
            // Small selectors give periodic fills (back < len); large ones reach far back.
            1 + selector % reach
        } else {
            1 + (selector * 0x9e37_79b9) % reach
        };
        literals.extend((0..lit_len).map(|i| shape[(i % 5) as usize]));
        tokens.push(Token { lit_len, match_len, back, rc });
        prev = Some(PrevMatch { back, dst: reach, rc });
        dst += (lit_len + match_len) as u64;
    }
    let tail = (shapes.len() % 5) as u32 * 50;
    literals.extend((0..tail).map(|i| i as u8));
    tokens.push(Token { lit_len: tail, match_len: 0, back: 0, rc: false });
    (tokens, literals)
}

/// Table stage. Hostile (first byte below 0x80): the bytes are a serialised table set; if it parses,
/// re-serialising and re-reading must give it back, and its decode lookups (and its context model's, if any) must
/// agree with its frequencies. Groups (first byte 0xc0 and above): `mode`, then table sets of consecutive groups,
/// each `len: u16, set bytes`; group `g`'s set is read against the groups before it (FORMAT.md §2.4: `ctx_back`
/// names an earlier group's model of the same order), and a refused set leaves no group behind. Round trip (first
/// byte 0x80 ..= 0xbf): the bytes are 16-bit counts whose normalised table must be valid (sum 4096, present
/// exactly where counted).
pub fn tables_read(data: &[u8]) {
    let Some(&mode) = data.first() else { return };
    if mode >= 0xc0 {
        return table_groups(&data[1..]);
    }
    if mode & 0x80 != 0 {
        let counts: Vec<u64> =
            data[1..].chunks_exact(2).take(256).map(|c| u16::from_le_bytes([c[0], c[1]]) as u64).collect();
        let table = Table::from_counts(&counts);
        let nsym = counts.iter().rposition(|&c| c != 0).map_or(0, |i| i + 1);
        assert_eq!(table.nsym(), nsym);
        if nsym > 0 {
            assert_eq!(table.freq.iter().map(|&f| f as u32).sum::<u32>(), 4096);
            for (s, &c) in counts[..nsym].iter().enumerate() {
                assert_eq!(c != 0, table.freq[s] != 0);
            }
            check_lookup(&table);
        }
        return;
    }
    let Ok(set) = TableSet::read(data) else { return };
    check_table_set(&set, &[]);
}

/// Consecutive groups' table sets (see [`tables_read`]), at most 64 of them.
fn table_groups(mut data: &[u8]) {
    let mut groups: Vec<TableSet> = Vec::new();
    while data.len() >= 2 && groups.len() < 64 {
        let len = (u16::from_le_bytes([data[0], data[1]]) as usize).min(data.len() - 2);
        let bytes = &data[2..2 + len];
        data = &data[2 + len..];
        if let Ok(set) = TableSet::read_in(bytes, &groups) {
            check_table_set(&set, &groups);
            groups.push(set);
        }
    }
}

/// A parsed set re-serialises to a set that reads back equal (against the same earlier groups); a model taken
/// from an earlier group is exactly that group's model, of the declared order; every table's lookups agree with its
/// frequencies.
fn check_table_set(set: &TableSet, earlier: &[TableSet]) {
    let mut again = Vec::new();
    set.write(&mut again);
    assert_eq!(TableSet::read_in(&again, earlier).as_ref(), Ok(set));
    for table in [&set.ll, &set.ml, &set.of, &set.lit] {
        if !table.is_empty() {
            check_lookup(table);
        }
    }
    if let Some(ctx) = &set.ctx {
        let model = &*ctx.model;
        assert!((1..=MAX_LIT_ORDER).contains(&model.order()));
        if ctx.back > 0 {
            let source = earlier[earlier.len() - ctx.back as usize].ctx_model();
            assert_eq!(source, Some(model), "ctx_back {} names another model", ctx.back);
        }
        check_context_model(model);
    }
}

/// Every context's table is a valid 4-symbol table (cumulative frequencies rising to at most 4096), and decoding
/// the first and the last slot of each base's range gives that base with its frequency and offset.
fn check_context_model(model: &CtxModel) {
    assert_eq!(model.contexts(), 1 << (2 * model.order()));
    assert_eq!(model.packed().len(), model.contexts());
    for (ctx, c) in model.cumulative().iter().enumerate() {
        assert!(c[0] <= c[1] && c[1] <= c[2] && c[2] as u32 <= 4096, "context {ctx}: {c:?}");
        let ctx = ctx as u32;
        let mut total = 0;
        for s in 0..4 {
            let (f, cum) = model.freq_cum(ctx, s);
            assert_eq!(cum, total);
            total += f;
            if f > 0 {
                assert_eq!(model.decode_slot(ctx, cum), (s, f, cum), "context {ctx}, base {s}");
                assert_eq!(model.decode_slot(ctx, cum + f - 1), (s, f, cum), "context {ctx}, base {s}");
            }
        }
        assert_eq!(total, 4096);
    }
}

/// Every slot's lookup entry names the symbol whose range holds the slot, with its frequency and offset.
fn check_lookup(table: &Table) {
    let lookup = table.decode_lookup();
    for slot in 0..4096u32 {
        let (s, f, bias) = lookup.unpack(slot);
        let s = s as usize;
        assert_eq!(f, table.freq[s] as u32, "slot {slot}");
        assert_eq!(table.cum[s] as u32 + bias, slot, "slot {slot}");
    }
}
