//! Host-side preparation of what the kernels read: per-block metadata from the payload headers and flattened
//! slot→symbol decode tables per group.
//!
//! Everything here is plain Rust (no CUDA), so it is unit-tested on any machine. The kernels trust the numbers
//! prepared here (offsets, counts, exact payload lengths), so this is where the block headers are validated; the
//! data-dependent checks (rANS words, sums, distances) stay in the kernels.

use crate::codec::tables::{Table, TableSet, LIT_ALPHABET, LL_ALPHABET, ML_ALPHABET, OF_ALPHABET};
use crate::codec::varint;
use crate::error::DecodeError;
use crate::format::ArchiveData;

/// u32 words of metadata per block (kernels/decode.cu: `META_WORDS`).
pub const META_WORDS: usize = 8;
/// Word 7 of a block whose header failed validation: the kernel reports `E_HEADER` for it.
pub const BAD_BLOCK: u32 = u32::MAX;
/// Slots per table (scale 2^12).
pub const SLOTS: usize = 4096;
/// Decode-table entries per group: LL, ML, OF, LIT.
pub const GROUP_ENTRIES: usize = 4 * SLOTS;
/// Entry for a slot no symbol covers (an unused table, or one whose frequencies do not fill the scale).
pub const NO_SYMBOL: u32 = u32::MAX;

/// The four varints at the start of a block payload (FORMAT.md §3), validated against the payload length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadHeader {
    pub nmatch: u32,
    pub nlit: u32,
    pub nwords: u32,
    pub extra_len: u32,
    /// Bytes used by the four varints.
    pub header_len: u32,
}

impl PayloadHeader {
    /// Tokens of the block: its matches plus the final literal-only token.
    pub fn tokens(&self) -> u64 {
        self.nmatch as u64 + 1
    }
}

/// Reads and validates a payload header. `block_len` is the block's decoded length.
///
/// Beyond §3's limits this also requires `2·nmatch ≤ block_len`: every match is at least 2 bytes and all of
/// them lie inside the block (§3.3), so a block that breaks this is corrupt anyway, and the bound lets the
/// device size token storage from `block_len`.
pub fn read_payload_header(payload: &[u8], lanes: u32, block_len: u32) -> Result<PayloadHeader, DecodeError> {
    let mut pos = 0usize;
    let mut field = |what: &'static str, limit: u64| -> Result<u32, DecodeError> {
        let v = varint::read_at(payload, &mut pos)?;
        if v > limit {
            return Err(DecodeError::Limit { what, value: v, limit });
        }
        Ok(v as u32)
    };
    let nmatch = field("nmatch", block_len as u64 / 2)?;
    let nlit = field("nlit", block_len as u64)?;
    let nwords = field("nwords", payload.len() as u64 / 2)?;
    let extra_len = field("extra_len", payload.len() as u64)?;
    let header_len = pos as u32;
    let expected = pos as u64 + 4 * lanes as u64 + 2 * nwords as u64 + extra_len as u64;
    if expected != payload.len() as u64 {
        return Err(DecodeError::Invalid {
            what: "block payload length",
            detail: format!("header says {expected} bytes, payload has {}", payload.len()),
        });
    }
    Ok(PayloadHeader { nmatch, nlit, nwords, extra_len, header_len })
}

/// Per-block metadata for the kernels (layout in kernels/decode.cu) and the total token count. A block whose
/// header is invalid gets [`BAD_BLOCK`] and zero tokens, so it fails on the device, never out of bounds.
pub struct BlockMeta {
    pub words: Vec<u32>,
    pub total_tokens: u64,
    pub max_tokens: u64,
}

/// Builds [`BlockMeta`] for every block of `data`.
pub fn block_meta(data: &ArchiveData) -> BlockMeta {
    let count = data.block_count() as usize;
    let lanes = data.header.rans_lanes as u32;
    let mut words = Vec::with_capacity(count * META_WORDS);
    let (mut total_tokens, mut max_tokens) = (0u64, 0u64);
    for id in 0..count as u64 {
        let offset = data.payload_offset(id);
        let block_len = data.block_len(id);
        let row = match read_payload_header(data.payload(id), lanes, block_len) {
            Ok(h) => {
                total_tokens += h.tokens();
                max_tokens = max_tokens.max(h.tokens());
                [offset as u32, (offset >> 32) as u32, h.nmatch, h.nlit, h.nwords, h.extra_len, h.header_len, block_len]
            }
            Err(_) => [offset as u32, (offset >> 32) as u32, 0, 0, 0, 0, 0, BAD_BLOCK],
        };
        words.extend_from_slice(&row);
    }
    BlockMeta { words, total_tokens, max_tokens }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn header_bytes(fields: [u64; 4], lanes: u32, body: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for f in fields {
            varint::write(f, &mut out);
        }
        out.extend(std::iter::repeat_n(0u8, 4 * lanes as usize + body));
        out
    }

    #[test]
    fn payload_header_accepts_exact_length() {
        let p = header_bytes([3, 10, 5, 2], 4, 5 * 2 + 2);
        let h = read_payload_header(&p, 4, 100).unwrap();
        assert_eq!(h, PayloadHeader { nmatch: 3, nlit: 10, nwords: 5, extra_len: 2, header_len: 4 });
        assert_eq!(h.tokens(), 4);
    }

    #[test]
    fn payload_header_rejects_wrong_length_and_limits() {
        let p = header_bytes([3, 10, 5, 2], 4, 5 * 2 + 3);
        assert!(matches!(read_payload_header(&p, 4, 100), Err(DecodeError::Invalid { .. })));
        let p = header_bytes([51, 10, 0, 0], 1, 0);
        assert!(matches!(read_payload_header(&p, 1, 100), Err(DecodeError::Limit { what: "nmatch", .. })));
        let p = header_bytes([0, 101, 0, 0], 1, 0);
        assert!(matches!(read_payload_header(&p, 1, 100), Err(DecodeError::Limit { what: "nlit", .. })));
        assert!(read_payload_header(&[0x80], 1, 100).is_err());
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
