//! Host-side preparation of what the kernels read: per-slice metadata from the block directories and slice
//! headers (FORMAT.md §3), and flattened slot→symbol decode tables per group.
//!
//! The kernels work on **units**: a unit is one slice (`2^slice_log` bytes), numbered globally over the stream
//! (unit `u` covers stream bytes from `u·S`; every block but the last holds exactly `B/S` of them), and coded
//! exactly like a version-1 block payload. So every kernel sees "a sequence of independently coded pieces of
//! `2^unit_log` bytes", and the table group of unit `u` is `u >> (block_log − slice_log + group_log)`.
//!
//! Everything here is plain Rust (no CUDA), so it is unit-tested on any machine. The kernels trust the numbers
//! prepared here (offsets, counts, exact payload lengths), so this is where the block directories and slice
//! headers are validated; the data-dependent checks (rANS words, sums, distances) stay in the kernels.

use crate::codec::block::SliceHead;
use crate::codec::tables::{Table, TableSet, LIT_ALPHABET, LL_ALPHABET, ML_ALPHABET, OF_ALPHABET};
use crate::codec::varint;
use crate::error::DecodeError;
use crate::format::ArchiveData;

/// u32 words of metadata per unit (kernels/common.cuh: `META_WORDS`).
pub const META_WORDS: usize = 8;
/// Word 7 of a unit whose header (or whose block's directory) failed validation: the kernel reports `E_HEADER`.
pub const BAD_BLOCK: u32 = u32::MAX;
/// Slots per table (scale 2^12).
pub const SLOTS: usize = 4096;
/// Decode-table entries per group: LL, ML, OF, LIT.
pub const GROUP_ENTRIES: usize = 4 * SLOTS;
/// Entry for a slot no symbol covers (an unused table, or one whose frequencies do not fill the scale).
pub const NO_SYMBOL: u32 = u32::MAX;

/// Bit of meta word 6 (the header length, a few bytes) that marks a unit whose literals are context-coded
/// (kernels/common.cuh `META_CTX`).
pub const META_CTX: u32 = 1 << 31;

/// Reads a block's slice directory (`n_slices` varint lengths) and returns each slice's `(start, end)` inside
/// the block payload. The lengths must add up to exactly the payload after the directory (FORMAT.md §3).
pub fn slice_spans(payload: &[u8], n_slices: u32) -> Result<Vec<(usize, usize)>, DecodeError> {
    let mut pos = 0usize;
    let mut lens = Vec::with_capacity(n_slices as usize);
    for _ in 0..n_slices {
        // Each length is bounded by the payload, so the sum below cannot overflow.
        let v = varint::read_at(payload, &mut pos)?;
        if v > payload.len() as u64 {
            return Err(DecodeError::Limit { what: "slice_bytes", value: v, limit: payload.len() as u64 });
        }
        lens.push(v as usize);
    }
    let sum: usize = lens.iter().sum();
    if sum != payload.len() - pos {
        return Err(DecodeError::Invalid {
            what: "slice directory",
            detail: format!("slices hold {sum} bytes, the payload has {} after the directory", payload.len() - pos),
        });
    }
    let mut spans = Vec::with_capacity(lens.len());
    for len in lens {
        spans.push((pos, pos + len));
        pos += len;
    }
    Ok(spans)
}

/// Per-unit metadata for the kernels (layout in kernels/decode.cu) and token counts. A unit whose header is
/// invalid gets [`BAD_BLOCK`] and zero tokens, so it fails on the device, never out of bounds.
pub struct UnitMeta {
    /// [`META_WORDS`] per unit: payload offset in the file (lo, hi), nmatch, nlit, nwords, extra_len, header
    /// length (| [`META_CTX`] for context-coded literals), decoded length (or [`BAD_BLOCK`]).
    pub words: Vec<u32>,
    pub total_tokens: u64,
    pub max_tokens: u64,
    /// Stream bytes that matches produce (decoded length less literals, over the units that parse): the work of
    /// the full decode's map chase (`Resolve::Auto` in device/full.rs).
    pub match_bytes: u64,
}

impl UnitMeta {
    pub fn units(&self) -> usize {
        self.words.len() / META_WORDS
    }

    /// Matches of unit `u` (0 for a bad unit).
    pub fn nmatch(&self, u: usize) -> u32 {
        self.words[u * META_WORDS + 2]
    }
}

/// Builds [`UnitMeta`] for every slice of `data`, in global slice order.
pub fn unit_meta(data: &ArchiveData) -> UnitMeta {
    let units = data.global_slice_count() as usize;
    let lanes = usize::from(data.header.rans_lanes);
    let slice_log = data.header.slice_log as u32;
    let mut words = Vec::with_capacity(units * META_WORDS);
    let (mut total_tokens, mut max_tokens, mut match_bytes) = (0u64, 0u64, 0u64);
    for id in 0..data.block_count() {
        let offset = data.payload_offset(id);
        // An unreadable payload (the file changed since it was opened) leaves its slices marked bad, like a
        // payload that does not parse: decoding them fails and the CPU path reports the block.
        let payload = data.payload(id).unwrap_or(std::borrow::Cow::Borrowed(&[]));
        let block_len = data.block_len(id);
        let n_slices = data.slice_count(id);
        let spans = slice_spans(&payload, n_slices).ok();
        let has_model = data.tables_for(id).ctx.is_some();
        for j in 0..n_slices {
            let len = (block_len - (j << slice_log)).min(1 << slice_log);
            let parsed = spans.as_ref().and_then(|spans| {
                let (a, b) = spans[j as usize];
                SliceHead::read(&payload[a..b], lanes, len).ok().map(|h| (offset + a as u64, h))
            });
            // A slice that flags context-coded literals in a group without a model is corrupt (the kernel then
            // reports its header).
            let parsed = parsed.filter(|(_, h)| !h.contexts || has_model);
            let row = match parsed {
                Some((at, h)) => {
                    total_tokens += h.tokens();
                    max_tokens = max_tokens.max(h.tokens());
                    match_bytes += u64::from(len.saturating_sub(h.nlit));
                    let hdr = h.header_len | if h.contexts { META_CTX } else { 0 };
                    [at as u32, (at >> 32) as u32, h.nmatch, h.nlit, h.nwords, h.extra_len, hdr, len]
                }
                None => [offset as u32, (offset >> 32) as u32, 0, 0, 0, 0, 0, BAD_BLOCK],
            };
            words.extend_from_slice(&row);
        }
    }
    debug_assert_eq!(words.len(), units * META_WORDS);
    UnitMeta { words, total_tokens, max_tokens, match_bytes }
}

/// One table's slot lookup: entry `sym | (freq − 1) << 8 | cum << 20` for every slot in `[cum, cum + freq)`.
/// Slots left uncovered (an unused table, or symbols beyond the alphabet) hold [`NO_SYMBOL`], which the kernel
/// reports as corruption if a stream ever lands on one.
pub fn table_slots(table: &Table, alphabet: usize, out: &mut [u32]) {
    out.fill(NO_SYMBOL);
    if table.freq.len() > alphabet {
        return;
    }
    let mut cum = 0usize;
    for (sym, &freq) in table.freq.iter().enumerate() {
        let freq = freq as usize;
        if freq == 0 {
            continue;
        }
        if cum + freq > SLOTS {
            out.fill(NO_SYMBOL);
            return;
        }
        let entry = sym as u32 | ((freq as u32 - 1) << 8) | ((cum as u32) << 20);
        out[cum..cum + freq].fill(entry);
        cum += freq;
    }
}

/// Flattened decode tables of all groups: `GROUP_ENTRIES` per group, tables in the order LL, ML, OF, LIT.
pub fn decode_tables(sets: &[TableSet]) -> Vec<u32> {
    let mut out = vec![NO_SYMBOL; sets.len() * GROUP_ENTRIES];
    for (set, chunk) in sets.iter().zip(out.chunks_exact_mut(GROUP_ENTRIES)) {
        let (ll, rest) = chunk.split_at_mut(SLOTS);
        let (ml, rest) = rest.split_at_mut(SLOTS);
        let (of, lit) = rest.split_at_mut(SLOTS);
        table_slots(&set.ll, LL_ALPHABET, ll);
        table_slots(&set.ml, ML_ALPHABET, ml);
        table_slots(&set.of, OF_ALPHABET, of);
        table_slots(&set.lit, LIT_ALPHABET, lit);
    }
    out
}

/// The literal context models of all groups for the kernels (FORMAT.md §2.4, §3.5): `groups` holds two u32 per
/// group, the model's order (0: none) and the index in `contexts` of its context 0; `contexts` holds two u32 per
/// context, `c1 | c2 << 16` and `c3` (the cumulative frequencies of C, G and T). A model shared by several groups
/// is stored once. `contexts` is never empty (one unused entry at least), so it can always be uploaded.
pub struct ContextTables {
    pub groups: Vec<u32>,
    pub contexts: Vec<u32>,
}

/// Flattens the groups' context models (see [`ContextTables`]).
pub fn context_tables(sets: &[TableSet]) -> ContextTables {
    let mut groups = vec![0u32; 2 * sets.len()];
    let mut contexts = vec![0u32, SLOTS as u32];
    let mut stored: Vec<(*const crate::codec::context::CtxModel, u32)> = Vec::new();
    for (set, g) in sets.iter().zip(groups.chunks_exact_mut(2)) {
        let Some(c) = &set.ctx else { continue };
        let model = &*c.model;
        let at = match stored.iter().find(|(p, _)| std::ptr::eq(*p, model)) {
            Some(&(_, at)) => at,
            None => {
                let at = (contexts.len() / 2) as u32;
                for cum in model.cumulative() {
                    contexts.push(cum[0] as u32 | (cum[1] as u32) << 16);
                    contexts.push(cum[2] as u32);
                }
                stored.push((model, at));
                at
            }
        };
        g[0] = model.order() as u32;
        g[1] = at;
    }
    ContextTables { groups, contexts }
}

/// u32 words of compact decode tables per group (kernels/common.cuh `CT_WORDS`): the symbol of every slot of
/// the four tables as bytes (4 × 4096), then `freq | cum << 16` per symbol at [`CT_FC`] + LL 0, ML 64, OF 128,
/// LIT [`CT_LIT_FC`] (the OF alphabet has 184 codes since version 5), padded to 576 words.
pub const CT_WORDS: usize = 4096 + 576;
/// Word offset of the literal table's per-symbol frequencies after [`CT_FC`] (kernels/common.cuh `CT_LIT_FC`).
pub const CT_LIT_FC: usize = 128 + OF_ALPHABET;
/// Word offset of the per-symbol frequencies in a group's compact tables.
pub const CT_FC: usize = 4096;

/// Compact decode tables of all groups (the seek path copies them into shared memory): a table that is unused
/// or whose alphabet is too large maps every slot to symbol 0 with frequency 0, which the kernel reports as a
/// slot no symbol covers (tables otherwise cover all 4096 slots: `Table::from_freqs` requires it).
pub fn compact_tables(sets: &[TableSet]) -> Vec<u32> {
    let mut out = vec![0u32; sets.len() * CT_WORDS];
    for (set, chunk) in sets.iter().zip(out.chunks_exact_mut(CT_WORDS)) {
        let mut syms = vec![0u8; 4 * SLOTS];
        let tables = [
            (&set.ll, LL_ALPHABET, 0),
            (&set.ml, ML_ALPHABET, 64),
            (&set.of, OF_ALPHABET, 128),
            (&set.lit, LIT_ALPHABET, CT_LIT_FC),
        ];
        for (t, (table, alphabet, fc_at)) in tables.into_iter().enumerate() {
            let covered: usize = table.freq.iter().map(|&f| f as usize).sum();
            if table.freq.len() > alphabet || covered != SLOTS {
                continue;
            }
            let mut cum = 0usize;
            for (sym, &freq) in table.freq.iter().enumerate() {
                let freq = freq as usize;
                syms[t * SLOTS + cum..t * SLOTS + cum + freq].fill(sym as u8);
                if freq > 0 {
                    chunk[CT_FC + fc_at + sym] = freq as u32 | (cum as u32) << 16;
                }
                cum += freq;
            }
        }
        for (word, bytes) in chunk[..CT_FC].iter_mut().zip(syms.chunks_exact(4)) {
            *word = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn directory(lens: &[u64], body: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for &l in lens {
            varint::write(l, &mut out);
        }
        out.extend(std::iter::repeat_n(7u8, body));
        out
    }

    #[test]
    fn slice_spans_follow_the_directory() {
        let p = directory(&[3, 0, 5], 8);
        assert_eq!(slice_spans(&p, 3).unwrap(), vec![(3, 6), (6, 6), (6, 11)]);
        // A 2-byte varint length shifts every slice.
        let p = directory(&[200, 1], 201);
        assert_eq!(slice_spans(&p, 2).unwrap(), vec![(3, 203), (203, 204)]);
    }

    #[test]
    fn slice_spans_reject_wrong_sums_and_truncation() {
        assert!(matches!(slice_spans(&directory(&[3, 5], 9), 2), Err(DecodeError::Invalid { .. })));
        assert!(matches!(slice_spans(&directory(&[3, 5], 7), 2), Err(DecodeError::Invalid { .. })));
        assert!(matches!(slice_spans(&directory(&[u64::MAX], 0), 1), Err(DecodeError::Limit { .. })));
        assert!(slice_spans(&[0x80], 1).is_err());
        assert!(slice_spans(&directory(&[1], 1), 2).is_err());
    }

    #[test]
    fn table_slots_match_cumulative_frequencies() {
        let table = Table::from_freqs(vec![0, 4000, 96]).unwrap();
        let mut slots = vec![0; SLOTS];
        table_slots(&table, 64, &mut slots);
        for (slot, &e) in slots.iter().enumerate() {
            let (sym, freq, cum) = (e & 0xff, ((e >> 8) & 0xfff) + 1, e >> 20);
            assert!(cum as usize <= slot && slot < (cum + freq) as usize);
            assert_eq!(freq, table.freq[sym as usize] as u32);
            assert_eq!(cum, table.cum[sym as usize] as u32);
        }
        assert_eq!(slots[0] & 0xff, 1);
        assert_eq!(slots[4095] & 0xff, 2);
    }

    /// The compact tables give every slot the symbol, frequency and cumulative frequency the full tables give.
    #[test]
    fn compact_tables_agree_with_the_slot_tables() {
        let mut lit = vec![0u16; 256];
        lit[0] = 1;
        lit[255] = 4000;
        lit[7] = 95;
        let set = TableSet {
            ll: Table::from_freqs(vec![0, 4000, 96]).unwrap(),
            ml: Table::default(),
            of: Table::from_freqs({
                let mut f = vec![0u16; 96];
                f[95] = 4096;
                f
            })
            .unwrap(),
            lit: Table::from_freqs(lit).unwrap(),
            ctx: None,
        };
        let full = decode_tables(std::slice::from_ref(&set));
        let compact = compact_tables(std::slice::from_ref(&set));
        let bytes: Vec<u8> = compact[..CT_FC].iter().flat_map(|w| w.to_le_bytes()).collect();
        for (t, fc_at) in [0usize, 64, 128, CT_LIT_FC].into_iter().enumerate() {
            for slot in 0..SLOTS {
                let e = full[t * SLOTS + slot];
                let sym = bytes[t * SLOTS + slot] as usize;
                let fc = compact[CT_FC + fc_at + sym];
                if e == NO_SYMBOL {
                    assert_eq!(fc & 0xffff, 0, "table {t} slot {slot}");
                } else {
                    assert_eq!(sym as u32, e & 0xff, "table {t} slot {slot}");
                    assert_eq!(fc & 0xffff, ((e >> 8) & 0xfff) + 1);
                    assert_eq!(fc >> 16, e >> 20);
                }
            }
        }
    }

    #[test]
    fn context_tables_store_a_shared_model_once() {
        use crate::codec::context::{CtxModel, LitContext};
        let counts: Vec<[u64; 4]> = (0..16u64).map(|i| [i, 3, 0, 7]).collect();
        let model = std::sync::Arc::new(CtxModel::from_counts(2, &counts));
        let with = |back| TableSet { ctx: Some(LitContext { back, model: model.clone() }), ..TableSet::default() };
        let sets = [TableSet::default(), with(0), TableSet::default(), with(2)];
        let t = context_tables(&sets);
        assert_eq!(t.groups, vec![0, 0, 2, 1, 0, 0, 2, 1]);
        assert_eq!(t.contexts.len(), 2 + 2 * 16);
        for (ctx, cum) in model.cumulative().iter().enumerate() {
            let e = &t.contexts[2 * (1 + ctx)..2 * (2 + ctx)];
            assert_eq!(e, [cum[0] as u32 | (cum[1] as u32) << 16, cum[2] as u32]);
        }
        assert_eq!(context_tables(&[]).contexts.len(), 2);
    }

    #[test]
    fn single_symbol_table_has_frequency_4096() {
        let table = Table::from_freqs(vec![0, 0, 4096]).unwrap();
        let mut slots = vec![0; SLOTS];
        table_slots(&table, 64, &mut slots);
        assert!(slots.iter().all(|&e| e == (2 | (4095 << 8))));
    }

    #[test]
    fn unused_or_oversized_tables_cover_nothing() {
        let mut slots = vec![0; SLOTS];
        table_slots(&Table::default(), 64, &mut slots);
        assert!(slots.iter().all(|&e| e == NO_SYMBOL));
        let mut freq = vec![0u16; 65];
        freq[64] = 4096;
        table_slots(&Table::from_freqs(freq).unwrap(), 64, &mut slots);
        assert!(slots.iter().all(|&e| e == NO_SYMBOL));
    }
}
