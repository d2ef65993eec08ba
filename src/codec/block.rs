//! Block payloads (FORMAT.md §3): one block's tokens and literals encoded as a single interleaved rANS stream plus
//! an extra-bits stream, and the parsed form that random access works from.

use crate::codec::tables::{SymbolStats, TableSet, LIT_ALPHABET, LL_ALPHABET, ML_ALPHABET, OF_ALPHABET};
use crate::codec::{logcode, rans, varint};
use crate::error::DecodeError;

/// One LZ77 token as the packer produces it: `lit_len` literals, then a match of `match_len` bytes copied from
/// `back` bytes before the match's destination (a periodic fill when `back < match_len`). The last token of a
/// block is literal-only: `match_len == 0` and `back == 0`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Token {
    pub lit_len: u32,
    pub match_len: u32,
    pub back: u64,
}

/// A decoded block payload: what the tokens say, before any match is resolved.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedBlock {
    /// Absolute stream position of the block's first byte.
    pub start: u64,
    /// Decoded length of the block.
    pub len: u32,
    /// All tokens, the literal-only one last.
    pub tokens: Vec<Token>,
    /// `token_pos[t]`: offset within the block where token t's literals begin (prefix sum); one extra entry = len.
    pub token_pos: Vec<u32>,
    /// `lit_pos[t]`: index into `literals` of token t's first literal (prefix sum); one entry per token.
    pub lit_pos: Vec<u32>,
    pub literals: Vec<u8>,
}

impl ParsedBlock {
    /// Index of the token whose span (literals + match) contains block offset `off` (`off < len`).
    pub fn token_at(&self, off: u32) -> usize {
        // token_pos is non-decreasing; the last entry equals len.
        self.token_pos.partition_point(|&p| p <= off).saturating_sub(1)
    }

    /// Heap bytes held, for cache accounting.
    pub fn heap_bytes(&self) -> usize {
        self.tokens.len() * std::mem::size_of::<Token>()
            + (self.token_pos.len() + self.lit_pos.len()) * 4
            + self.literals.len()
    }
}

/// Most tokens a block of `block_len` bytes can hold: every match is at least 2 bytes, plus the literal-only one.
fn max_matches(block_len: u32) -> u64 {
    block_len as u64 / 2
}

/// Largest literal-run / match-length code (exclusive), and distance code (exclusive), FORMAT.md §3.2.
const LEN_CODE_LIMIT: u32 = 64;
const DIST_CODE_LIMIT: u32 = 96;
/// The largest block FORMAT.md allows (`block_log ≤ 20`).
pub const MAX_BLOCK_LEN: u32 = 1 << 20;

/// Adds one block's symbols to a group's statistics (the packer calls this for every block of a group before
/// building the group's [`TableSet`]).
pub fn count_symbols(tokens: &[Token], literals: &[u8], stats: &mut SymbolStats) {
    let nmatch = tokens.len().saturating_sub(1);
    for (t, token) in tokens.iter().enumerate() {
        stats.ll[clamp_code(logcode::code_of(token.lit_len as u64), LL_ALPHABET)] += 1;
        if t < nmatch {
            stats.ml[clamp_code(logcode::code_of(token.match_len.saturating_sub(2) as u64), ML_ALPHABET)] += 1;
            stats.of[clamp_code(logcode::code_of(token.back.saturating_sub(1)), OF_ALPHABET)] += 1;
        }
    }
    for &b in literals {
        stats.lit[b as usize] += 1;
    }
}

/// Keeps a code inside its alphabet so counting never panics; [`encode_block`] refuses such a token loudly.
fn clamp_code(code: u32, alphabet: usize) -> usize {
    (code as usize).min(alphabet - 1)
}

/// Accumulates the extra-bits stream, LSB-first.
struct BitWriter {
    bytes: Vec<u8>,
    acc: u64,
    nbits: u32,
}

impl BitWriter {
    fn new() -> Self {
        BitWriter { bytes: Vec::new(), acc: 0, nbits: 0 }
    }

    /// Appends the low `n ≤ 42` bits of `value` (the caller guarantees `value < 2^n`).
    fn push(&mut self, value: u64, n: u32) {
        self.acc |= value << self.nbits;
        self.nbits += n;
        while self.nbits >= 8 {
            self.bytes.push(self.acc as u8);
            self.acc >>= 8;
            self.nbits -= 8;
        }
    }

    /// Flushes the partial last byte (its unused high bits are zero) and returns the stream.
    fn finish(mut self) -> Vec<u8> {
        if self.nbits > 0 {
            self.bytes.push(self.acc as u8);
        }
        self.bytes
    }
}

/// Log-codes one field for the encoder, refusing values the format cannot carry.
fn code_field(value: u64, limit: u32, what: &str, t: usize) -> (u8, u32, u64) {
    let (code, nbits, extra) = logcode::encode(value);
    assert!(code < limit, "encode_block: token {t}: {what} value {value} needs code {code} ≥ {limit}");
    (code as u8, nbits, extra)
}

/// Encodes one block. `tokens` must end with a literal-only token; `Σ lit_len == literals.len()`.
/// `lanes` is the header's `rans_lanes`. Appends the payload to `out`.
///
/// # Panics
/// On tokens the format cannot represent (no final literal-only token, a match shorter than 2 or with `back = 0`,
/// a literal run or length of `2^28` or more, `back > 2^44`, literal count mismatch), an invalid lane count, or a
/// symbol missing from `tables` — all bugs in the packer, which builds `tables` from [`count_symbols`].
pub fn encode_block(tokens: &[Token], literals: &[u8], tables: &TableSet, lanes: u32, out: &mut Vec<u8>) {
    let last = tokens.last().expect("encode_block: a block has at least the final literal-only token");
    assert!(last.match_len == 0 && last.back == 0, "encode_block: the last token must be literal-only: {last:?}");
    let nmatch = tokens.len() - 1;
    let lit_sum: u64 = tokens.iter().map(|t| t.lit_len as u64).sum();
    assert_eq!(lit_sum, literals.len() as u64, "encode_block: Σ lit_len differs from the literal count");

    let mut symbols = vec![0u8; (nmatch + 1) + 2 * nmatch + literals.len()];
    let (ll_syms, rest) = symbols.split_at_mut(nmatch + 1);
    let (ml_syms, rest) = rest.split_at_mut(nmatch);
    let (of_syms, lit_syms) = rest.split_at_mut(nmatch);
    lit_syms.copy_from_slice(literals);

    let mut extra = BitWriter::new();
    for (t, token) in tokens.iter().enumerate() {
        let (code, nbits, bits) = code_field(token.lit_len as u64, LEN_CODE_LIMIT, "literal run", t);
        ll_syms[t] = code;
        extra.push(bits, nbits);
        if t < nmatch {
            assert!(token.match_len >= 2 && token.back >= 1, "encode_block: token {t} is not a match: {token:?}");
            let (code, nbits, bits) = code_field(token.match_len as u64 - 2, LEN_CODE_LIMIT, "match length", t);
            ml_syms[t] = code;
            extra.push(bits, nbits);
            let (code, nbits, bits) = code_field(token.back - 1, DIST_CODE_LIMIT, "distance", t);
            of_syms[t] = code;
            extra.push(bits, nbits);
        }
    }
    let extra = extra.finish();

    let segments =
        [(nmatch + 1, &tables.ll), (nmatch, &tables.ml), (nmatch, &tables.of), (literals.len(), &tables.lit)];
    let encoded = rans::encode(&symbols, &segments, lanes as usize);

    varint::write(nmatch as u64, out);
    varint::write(literals.len() as u64, out);
    varint::write(encoded.words.len() as u64, out);
    varint::write(extra.len() as u64, out);
    rans::write_stream(&encoded, out);
    out.extend_from_slice(&extra);
}

/// Decodes one block payload (entropy stage + parse by prefix sums). `block_start` is the block's absolute
/// position and `block_len` its decoded length; every length, count and distance is validated (§3.3).
pub fn decode_block(
    payload: &[u8],
    tables: &TableSet,
    lanes: u32,
    block_start: u64,
    block_len: u32,
) -> Result<ParsedBlock, DecodeError> {
    let mut parsed = ParsedBlock::default();
    decode_block_into(payload, tables, lanes, block_start, block_len, &mut parsed)?;
    Ok(parsed)
}

/// [`decode_block`] into an existing [`ParsedBlock`], reusing its allocations (a decoder working through many
/// blocks keeps one). On error `out` holds unspecified (but bounded) contents.
pub fn decode_block_into(
    payload: &[u8],
    tables: &TableSet,
    lanes: u32,
    block_start: u64,
    block_len: u32,
    out: &mut ParsedBlock,
) -> Result<(), DecodeError> {
    let lanes = rans::check_lanes(lanes)?;
    if block_len > MAX_BLOCK_LEN {
        return Err(DecodeError::Limit { what: "block length", value: block_len as u64, limit: MAX_BLOCK_LEN as u64 });
    }
    check_alphabets(tables)?;
    let layout = PayloadLayout::parse(payload, lanes, block_len)?;

    // Entropy stage: codes of all tokens, then the literals straight into the output.
    let nmatch = layout.nmatch;
    let mut codes = vec![0u8; 3 * nmatch + 1];
    out.literals.clear();
    out.literals.resize(layout.nlit, 0);
    let mut rans = rans::Decoder::new(layout.states, layout.words, lanes)?;
    {
        let (ll, rest) = codes.split_at_mut(nmatch + 1);
        let (ml, of) = rest.split_at_mut(nmatch);
        rans.decode(&tables.ll, ll)?;
        rans.decode(&tables.ml, ml)?;
        rans.decode(&tables.of, of)?;
        rans.decode(&tables.lit, &mut out.literals)?;
    }
    rans.finish()?;

    out.start = block_start;
    out.len = block_len;
    parse_tokens(&codes, nmatch, layout.extra, out)
}

/// Where the fields of a payload lie, with every count checked against the block and the payload's size.
struct PayloadLayout<'a> {
    nmatch: usize,
    nlit: usize,
    states: &'a [u8],
    words: &'a [u8],
    extra: &'a [u8],
}

impl<'a> PayloadLayout<'a> {
    fn parse(payload: &'a [u8], lanes: usize, block_len: u32) -> Result<Self, DecodeError> {
        let mut pos = 0;
        let nmatch = varint::read_at(payload, &mut pos)?;
        let nlit = varint::read_at(payload, &mut pos)?;
        let nwords = varint::read_at(payload, &mut pos)?;
        let extra_len = varint::read_at(payload, &mut pos)?;
        if nmatch > max_matches(block_len) {
            return Err(DecodeError::Limit { what: "nmatch", value: nmatch, limit: max_matches(block_len) });
        }
        if nlit > block_len as u64 {
            return Err(DecodeError::Limit { what: "nlit", value: nlit, limit: block_len as u64 });
        }
        // Sizes in u128 so that no hostile count can wrap the sum.
        let expected = pos as u128 + 4 * lanes as u128 + 2 * nwords as u128 + extra_len as u128;
        if expected != payload.len() as u128 {
            return Err(DecodeError::Invalid {
                what: "block payload length",
                detail: format!(
                    "{} bytes, but the header ({pos} bytes), {lanes} states, {nwords} words and {extra_len} extra \
                     bytes need {expected}",
                    payload.len()
                ),
            });
        }
        let (states, rest) = payload[pos..].split_at(4 * lanes);
        let (words, extra) = rest.split_at(2 * nwords as usize);
        Ok(PayloadLayout { nmatch: nmatch as usize, nlit: nlit as usize, states, words, extra })
    }
}

/// Reads the extra-bits stream LSB-first. Reads past the end see zeros; [`BitReader::finish`] catches them.
struct BitReader<'a> {
    bytes: &'a [u8],
    bitpos: usize,
}

impl<'a> BitReader<'a> {
    /// Reads `n ≤ 56` bits.
    #[inline(always)]
    fn read(&mut self, n: u32) -> u64 {
        let byte = self.bitpos >> 3;
        let window = match self.bytes.get(byte..byte + 8) {
            Some(w) => u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]),
            None => self.window_near_end(byte),
        };
        let value = (window >> (self.bitpos & 7)) & ((1u64 << n) - 1);
        self.bitpos += n as usize;
        value
    }

    #[cold]
    fn window_near_end(&self, byte: usize) -> u64 {
        let tail = self.bytes.get(byte..).unwrap_or(&[]);
        tail.iter().take(8).enumerate().fold(0u64, |w, (i, &b)| w | (b as u64) << (8 * i))
    }

    /// The stream must end exactly: `ceil(bits / 8)` bytes, unused high bits of the last byte zero.
    fn finish(&self) -> Result<(), DecodeError> {
        let used_bytes = self.bitpos.div_ceil(8);
        if used_bytes != self.bytes.len() {
            return Err(DecodeError::Invalid {
                what: "extra-bits stream",
                detail: format!("{} bits used, but extra_len is {} bytes", self.bitpos, self.bytes.len()),
            });
        }
        let spare = used_bytes * 8 - self.bitpos;
        if spare > 0 && self.bytes[used_bytes - 1] >> (8 - spare) != 0 {
            return Err(DecodeError::Invalid {
                what: "extra-bits stream",
                detail: format!("unused high bits of the last byte are {:#04x}", self.bytes[used_bytes - 1]),
            });
        }
        Ok(())
    }
}

/// Base value and extra-bit count of every code, so a field is one lookup and one read. Indexed by the `u8` code
/// itself, so no bounds check is needed; codes at or above the distance limit (which validated tables cannot
/// produce) get a base of `2^40`, which no block length can absorb, so the fast parse rejects them without a
/// branch of its own.
struct CodeTable {
    base: [u64; 256],
    nbits: [u8; 256],
}

/// The poisoned base of codes outside every alphabet: large enough that one such field overruns any block, small
/// enough that 3 · 2^19 of them (the most a block has) still sum without overflow.
const POISON_BASE: u64 = 1 << 40;

const CODE_TABLE: CodeTable = {
    let mut base = [POISON_BASE; 256];
    let mut nbits = [0u8; 256];
    let mut c = 0;
    while c < DIST_CODE_LIMIT as usize {
        if c < 16 {
            base[c] = c as u64;
        } else {
            let h = 4 + (c as u64 - 16) / 2;
            base[c] = (1 << h) + (((c as u64 - 16) & 1) << (h - 1));
            nbits[c] = (h - 1) as u8;
        }
        c += 1;
    }
    CodeTable { base, nbits }
};

/// Decodes one field without checking its code against the alphabet (see [`CODE_TABLE`]).
#[inline(always)]
fn field(code: u8, bits: &mut BitReader) -> u64 {
    CODE_TABLE.base[code as usize] + bits.read(CODE_TABLE.nbits[code as usize] as u32)
}

/// Decodes one field: the code (checked against its alphabet's limit) plus its extra bits.
fn read_field(code: u8, limit: u32, bits: &mut BitReader, what: &'static str, t: usize) -> Result<u64, DecodeError> {
    if code as u32 >= limit {
        return Err(DecodeError::Invalid { what, detail: format!("token {t} has code {code} ≥ {limit}") });
    }
    Ok(field(code, bits))
}

/// Refuses tables whose alphabets exceed the format's limits, so that every decoded code is inside its alphabet.
fn check_alphabets(tables: &TableSet) -> Result<(), DecodeError> {
    for (table, limit, what) in [
        (&tables.ll, LL_ALPHABET, "LL table nsym"),
        (&tables.ml, ML_ALPHABET, "ML table nsym"),
        (&tables.of, OF_ALPHABET, "OF table nsym"),
        (&tables.lit, LIT_ALPHABET, "LIT table nsym"),
    ] {
        if table.nsym() > limit {
            return Err(DecodeError::Limit { what, value: table.nsym() as u64, limit: limit as u64 });
        }
    }
    Ok(())
}

/// Turns the decoded codes and the extra bits into tokens with prefix sums, validating FORMAT.md §3.3.
///
/// The fast pass has one data-dependent branch per block, not per token: lengths and literal counts only grow, so
/// checking the totals at the end covers every prefix, and the distance check is folded into a flag. Sums cannot
/// overflow (at most 2^19 tokens, every field below 2^41). When the flag is raised, the checked pass runs again
/// to say exactly which token is wrong.
fn parse_tokens(codes: &[u8], nmatch: usize, extra: &[u8], out: &mut ParsedBlock) -> Result<(), DecodeError> {
    let (ll, rest) = codes.split_at(nmatch + 1);
    let (ml, of) = rest.split_at(nmatch);
    let mut bits = BitReader { bytes: extra, bitpos: 0 };
    // Sized up front and filled through iterators: no capacity check or length update per token.
    out.tokens.clear();
    out.tokens.resize(nmatch + 1, Token::default());
    out.token_pos.clear();
    out.token_pos.resize(nmatch + 2, 0);
    out.lit_pos.clear();
    out.lit_pos.resize(nmatch + 1, 0);

    let start = out.start;
    let (mut dst, mut lits, mut bad) = (0u64, 0u64, false);
    let (last_token, match_tokens) = out.tokens.split_last_mut().unwrap_or_else(|| unreachable!("nmatch + 1 tokens"));
    let positions = out.token_pos.iter_mut().zip(out.lit_pos.iter_mut());
    let code_triples = ll.iter().zip(ml).zip(of);
    for ((token, (token_pos, lit_pos)), ((&ll_code, &ml_code), &of_code)) in
        match_tokens.iter_mut().zip(positions).zip(code_triples)
    {
        *token_pos = dst as u32;
        *lit_pos = lits as u32;
        let lit_len = field(ll_code, &mut bits);
        let len = field(ml_code, &mut bits) + 2;
        let back = field(of_code, &mut bits) + 1;
        lits += lit_len;
        dst += lit_len;
        bad |= back > start.saturating_add(dst);
        dst += len;
        *token = Token { lit_len: lit_len as u32, match_len: len as u32, back };
    }
    out.token_pos[nmatch] = dst as u32;
    out.lit_pos[nmatch] = lits as u32;
    let lit_len = field(ll[nmatch], &mut bits);
    lits += lit_len;
    dst += lit_len;
    *last_token = Token { lit_len: lit_len as u32, match_len: 0, back: 0 };
    out.token_pos[nmatch + 1] = dst as u32;

    if bad || dst != out.len as u64 || lits != out.literals.len() as u64 {
        return Err(parse_tokens_checked(codes, nmatch, extra, out).err().unwrap_or_else(|| DecodeError::Invalid {
            what: "block tokens",
            detail: "the fast and the checked parse disagree".to_string(),
        }));
    }
    bits.finish()
}

/// The token parse with a check at every step, for the exact error message (and as the reference in tests).
fn parse_tokens_checked(codes: &[u8], nmatch: usize, extra: &[u8], out: &mut ParsedBlock) -> Result<(), DecodeError> {
    let (ll, rest) = codes.split_at(nmatch + 1);
    let (ml, of) = rest.split_at(nmatch);
    let block_len = out.len as u64;
    let nlit = out.literals.len() as u64;
    let mut bits = BitReader { bytes: extra, bitpos: 0 };

    out.tokens.clear();
    out.token_pos.clear();
    out.lit_pos.clear();

    // dst: offset in the block where the next token starts; lits: literals used so far. Both stay ≤ block_len
    // ≤ 2^20 (checked per token) and fields are < 2^44, so no sum below can overflow.
    let mut dst = 0u64;
    let mut lits = 0u64;
    for t in 0..=nmatch {
        out.token_pos.push(dst as u32);
        out.lit_pos.push(lits as u32);
        let lit_len = read_field(ll[t], LEN_CODE_LIMIT, &mut bits, "literal-run code", t)?;
        lits += lit_len;
        dst += lit_len;
        if lits > nlit || dst > block_len {
            return Err(overrun(t, "literal run", lit_len, dst, lits, block_len, nlit));
        }
        let mut token = Token { lit_len: lit_len as u32, match_len: 0, back: 0 };
        if t < nmatch {
            let len = read_field(ml[t], LEN_CODE_LIMIT, &mut bits, "match-length code", t)? + 2;
            let back = read_field(of[t], DIST_CODE_LIMIT, &mut bits, "distance code", t)? + 1;
            let abs_dst = out.start.saturating_add(dst);
            if back > abs_dst {
                return Err(DecodeError::Invalid {
                    what: "match distance",
                    detail: format!("token {t}: back {back} reaches before the stream start from position {abs_dst}"),
                });
            }
            dst += len;
            if dst > block_len {
                return Err(overrun(t, "match", len, dst, lits, block_len, nlit));
            }
            token.match_len = len as u32;
            token.back = back;
        }
        out.tokens.push(token);
    }
    out.token_pos.push(dst as u32);
    if dst != block_len || lits != nlit {
        return Err(DecodeError::Invalid {
            what: "block token lengths",
            detail: format!("tokens cover {dst} of {block_len} bytes and {lits} of {nlit} literals"),
        });
    }
    bits.finish()
}

#[cold]
fn overrun(t: usize, what: &str, value: u64, dst: u64, lits: u64, block_len: u64, nlit: u64) -> DecodeError {
    DecodeError::Invalid {
        what: "block token lengths",
        detail: format!(
            "token {t}: {what} of {value} runs to block offset {dst} (block length {block_len}) with {lits} of \
             {nlit} literals"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::tables::Table;
    use proptest::prelude::*;

    /// A block made of raw token shapes: `(lit_len, match_len, back selector)`; fits them to `block_start`.
    fn build_block(block_start: u64, shapes: &[(u32, u32, u64)], final_lits: u32, seed: u8) -> (Vec<Token>, Vec<u8>) {
        let mut tokens = Vec::new();
        let mut dst = 0u64;
        for &(lit_len, match_len, selector) in shapes {
            dst += lit_len as u64;
            let reach = block_start + dst;
            if reach == 0 {
                // Nothing to copy from yet: turn this into literals only.
                dst -= lit_len as u64;
                continue;
            }
            let back = 1 + selector % reach.min(1 << 44);
            tokens.push(Token { lit_len, match_len, back });
            dst += match_len as u64;
        }
        tokens.push(Token { lit_len: final_lits, match_len: 0, back: 0 });
        let nlit: u64 = tokens.iter().map(|t| t.lit_len as u64).sum();
        let literals = (0..nlit).map(|i| b"ACGT"[(i as usize * 7 + seed as usize) % 4] ^ (i % 97 == 0) as u8).collect();
        (tokens, literals)
    }

    fn block_len_of(tokens: &[Token]) -> u32 {
        tokens.iter().map(|t| t.lit_len + t.match_len).sum()
    }

    fn encode_with_own_tables(tokens: &[Token], literals: &[u8], lanes: u32) -> (TableSet, Vec<u8>) {
        let mut stats = SymbolStats::default();
        count_symbols(tokens, literals, &mut stats);
        let tables = TableSet::from_stats(&stats);
        let mut payload = Vec::new();
        encode_block(tokens, literals, &tables, lanes, &mut payload);
        (tables, payload)
    }

    fn check_parsed(parsed: &ParsedBlock, tokens: &[Token], literals: &[u8], start: u64) {
        assert_eq!(parsed.start, start);
        assert_eq!(parsed.tokens, tokens);
        assert_eq!(parsed.literals, literals);
        let mut pos = 0u32;
        let mut lit = 0u32;
        for (t, token) in tokens.iter().enumerate() {
            assert_eq!(parsed.token_pos[t], pos);
            assert_eq!(parsed.lit_pos[t], lit);
            pos += token.lit_len + token.match_len;
            lit += token.lit_len;
        }
        assert_eq!(parsed.token_pos.len(), tokens.len() + 1);
        assert_eq!(parsed.lit_pos.len(), tokens.len());
        assert_eq!(*parsed.token_pos.last().unwrap(), parsed.len);
    }

    fn round_trip(start: u64, tokens: &[Token], literals: &[u8], lanes: u32) -> Vec<u8> {
        let (tables, payload) = encode_with_own_tables(tokens, literals, lanes);
        let len = block_len_of(tokens);
        let parsed = decode_block(&payload, &tables, lanes, start, len).expect("round trip decodes");
        check_parsed(&parsed, tokens, literals, start);
        payload
    }

    #[test]
    fn literal_only_blocks() {
        for lanes in [1, 2, 4, 8, 16, 32] {
            round_trip(0, &[Token { lit_len: 5, match_len: 0, back: 0 }], b"hello", lanes);
            // An empty block still has its literal-only token.
            round_trip(0, &[Token::default()], b"", lanes);
        }
    }

    #[test]
    fn periodic_and_far_matches() {
        let tokens = [
            Token { lit_len: 1, match_len: 1000, back: 1 },
            Token { lit_len: 3, match_len: 17, back: 3 },
            Token { lit_len: 0, match_len: 2, back: (1 << 44) - 5 },
            Token { lit_len: 0, match_len: 0, back: 0 },
        ];
        round_trip(1 << 44, &tokens, b"ACGT", 32);
    }

    #[test]
    fn largest_fields() {
        // lit_len and match_len just under 2^20 in a 1 MiB block, back at the 2^44 limit.
        let tokens = [
            Token { lit_len: 300_000, match_len: (1 << 20) - 300_000 - 10, back: 1 << 44 },
            Token { lit_len: 10, match_len: 0, back: 0 },
        ];
        let literals = vec![7u8; 300_010];
        round_trip(1 << 44, &tokens, &literals, 8);
    }

    #[test]
    fn refuses_back_before_stream_start() {
        let tokens = [Token { lit_len: 2, match_len: 4, back: 3 }, Token::default()];
        let (tables, payload) = encode_with_own_tables(&tokens, b"ab", 4);
        let err = decode_block(&payload, &tables, 4, 0, 6).unwrap_err();
        assert!(matches!(err, DecodeError::Invalid { what: "match distance", .. }), "{err}");
        // The same payload is fine one byte further into the stream.
        assert!(decode_block(&payload, &tables, 4, 1, 6).is_ok());
    }

    #[test]
    fn refuses_wrong_block_length_and_lanes() {
        let tokens = [Token { lit_len: 2, match_len: 4, back: 1 }, Token { lit_len: 1, match_len: 0, back: 0 }];
        let (tables, payload) = encode_with_own_tables(&tokens, b"abc", 4);
        assert!(decode_block(&payload, &tables, 4, 0, 7).is_ok());
        for len in [0, 6, 8, 1 << 20] {
            assert!(decode_block(&payload, &tables, 4, 0, len).is_err(), "len {len}");
        }
        assert!(decode_block(&payload, &tables, 4, 0, (1 << 20) + 1).is_err());
        for lanes in [0, 2, 3, 8, 64] {
            assert!(decode_block(&payload, &tables, lanes, 0, 7).is_err(), "lanes {lanes}");
        }
    }

    #[test]
    fn refuses_extra_stream_mismatches() {
        // lit_len 20 needs 3 extra bits: one byte whose 5 high bits must be zero.
        let tokens = [Token { lit_len: 20, match_len: 0, back: 0 }];
        let literals = [1u8; 20];
        let (tables, payload) = encode_with_own_tables(&tokens, &literals, 1);
        assert!(decode_block(&payload, &tables, 1, 0, 20).is_ok());
        let last = payload.len() - 1;
        let mut dirty = payload.clone();
        dirty[last] |= 0x80;
        assert!(matches!(decode_block(&dirty, &tables, 1, 0, 20), Err(DecodeError::Invalid { .. })));
        // One extra byte appended, with extra_len patched to match the payload (byte 3 is extra_len).
        let mut longer = payload.clone();
        assert_eq!(longer[3], 1);
        longer[3] = 2;
        longer.push(0);
        assert!(matches!(decode_block(&longer, &tables, 1, 0, 20), Err(DecodeError::Invalid { .. })));
    }

    #[test]
    fn refuses_payload_length_mismatch_and_unused_tables() {
        let tokens = [Token { lit_len: 3, match_len: 0, back: 0 }];
        let (tables, payload) = encode_with_own_tables(&tokens, b"xyz", 2);
        let mut longer = payload.clone();
        longer.push(0);
        assert!(decode_block(&longer, &tables, 2, 0, 3).is_err());
        assert!(decode_block(&payload[..payload.len() - 1], &tables, 2, 0, 3).is_err());
        let no_lit = TableSet { lit: Table::default(), ..tables.clone() };
        assert!(matches!(decode_block(&payload, &no_lit, 2, 0, 3), Err(DecodeError::Rans { .. })));
    }

    #[test]
    fn huge_counts_are_refused_before_allocation() {
        let mut payload = Vec::new();
        for v in [u64::MAX >> 1, 0, 0, 0] {
            varint::write(v, &mut payload);
        }
        let err = decode_block(&payload, &TableSet::default(), 1, 0, 1 << 20).unwrap_err();
        assert!(matches!(err, DecodeError::Limit { what: "nmatch", .. }), "{err}");
        let mut payload = Vec::new();
        for v in [0, 0, u64::MAX, u64::MAX] {
            varint::write(v, &mut payload);
        }
        assert!(decode_block(&payload, &TableSet::default(), 1, 0, 0).is_err());
    }

    #[test]
    fn decode_into_reuses_buffers() {
        let a = [Token { lit_len: 4, match_len: 8, back: 2 }, Token { lit_len: 1, match_len: 0, back: 0 }];
        let b = [Token { lit_len: 2, match_len: 0, back: 0 }];
        let (ta, pa) = encode_with_own_tables(&a, b"ACGTA", 16);
        let (tb, pb) = encode_with_own_tables(&b, b"GG", 16);
        let mut parsed = ParsedBlock::default();
        decode_block_into(&pa, &ta, 16, 0, 13, &mut parsed).unwrap();
        decode_block_into(&pb, &tb, 16, 13, 2, &mut parsed).unwrap();
        check_parsed(&parsed, &b, b"GG", 13);
    }

    /// A tiny deterministic generator for the timing tests (no dependency, same data every run).
    struct XorShift(u64);

    impl XorShift {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        /// Geometric-ish length with the given mean.
        fn length(&mut self, mean: u64) -> u32 {
            let u = (self.next() >> 11) as f64 / (1u64 << 53) as f64;
            (-(1.0 - u).ln() * mean as f64) as u32
        }
    }

    /// DNA-like blocks: skewed ACGT literals (≈1.9 bits), short literal runs, median match around 20, sources
    /// anywhere in a 100 MB stream. `match_share` of the bytes come from matches.
    fn dna_like_blocks(
        count: usize,
        block_len: u32,
        match_share: f64,
        rng: &mut XorShift,
    ) -> Vec<(Vec<Token>, Vec<u8>)> {
        (0..count)
            .map(|b| {
                let start = (b as u64 + 1000) * block_len as u64;
                let mut tokens = Vec::new();
                let mut dst = 0u32;
                let mean_lit = (24.0 * (1.0 - match_share) / match_share.max(0.01)) as u64 + 1;
                loop {
                    let lit_len = rng.length(mean_lit).min(block_len - dst);
                    let match_len = (rng.length(20) + 8).min(block_len - dst - lit_len);
                    if match_len < 2 || dst + lit_len + match_len == block_len {
                        tokens.push(Token { lit_len: block_len - dst, match_len: 0, back: 0 });
                        break;
                    }
                    let back = 1 + rng.next() % (start + (dst + lit_len) as u64).min(100_000_000);
                    tokens.push(Token { lit_len, match_len, back });
                    dst += lit_len + match_len;
                }
                let nlit: u32 = tokens.iter().map(|t| t.lit_len).sum();
                let literals = (0..nlit)
                    .map(|_| match rng.next() % 10 {
                        0..=2 => b'A',
                        3..=4 => b'C',
                        5..=6 => b'G',
                        _ => b'T',
                    })
                    .collect();
                (tokens, literals)
            })
            .collect()
    }

    /// `cargo test --release --lib codec::block::tests::decode_speed -- --ignored --nocapture`
    #[test]
    #[ignore = "timing, run in release"]
    fn decode_speed() {
        let mut rng = XorShift(0x9e37_79b9_7f4a_7c15);
        for (name, share) in [("literals only", 0.0), ("30% matched", 0.3), ("70% matched", 0.7)] {
            for lanes in [1u32, 32] {
                let block_len = 1u32 << 14;
                let blocks = dna_like_blocks(256, block_len, share, &mut rng);
                let mut stats = SymbolStats::default();
                for (tokens, literals) in &blocks {
                    count_symbols(tokens, literals, &mut stats);
                }
                let tables = TableSet::from_stats(&stats);
                let payloads: Vec<Vec<u8>> = blocks
                    .iter()
                    .map(|(tokens, literals)| {
                        let mut p = Vec::new();
                        encode_block(tokens, literals, &tables, lanes, &mut p);
                        p
                    })
                    .collect();
                let encode_start = std::time::Instant::now();
                let mut sink = Vec::new();
                for (tokens, literals) in &blocks {
                    sink.clear();
                    encode_block(tokens, literals, &tables, lanes, &mut sink);
                }
                let encode_time = encode_start.elapsed();
                let mut parsed = ParsedBlock::default();
                let mut best = f64::MAX;
                for _ in 0..5 {
                    let t = std::time::Instant::now();
                    for (i, payload) in payloads.iter().enumerate() {
                        let start = (i as u64 + 1000) * block_len as u64;
                        decode_block_into(payload, &tables, lanes, start, block_len, &mut parsed).unwrap();
                    }
                    best = best.min(t.elapsed().as_secs_f64());
                }
                let bytes = blocks.len() as f64 * block_len as f64;
                let packed: usize = payloads.iter().map(|p| p.len()).sum();
                let tokens: usize = blocks.iter().map(|b| b.0.len()).sum();
                println!(
                    "{name:>14}, {lanes:>2} lanes: decode {:7.1} MB/s, encode {:6.1} MB/s, ratio {:.2}, {:.1} B/token",
                    bytes / best / 1e6,
                    bytes / encode_time.as_secs_f64() / 1e6,
                    bytes / packed as f64,
                    bytes / tokens as f64
                );
            }
        }
    }

    fn shapes() -> impl Strategy<Value = Vec<(u32, u32, u64)>> {
        let lit = prop_oneof![4 => 0u32..8, 2 => 0u32..300, 1 => 0u32..70_000];
        let len = prop_oneof![4 => 2u32..20, 2 => 2u32..3000, 1 => 2u32..200_000];
        let back = prop_oneof![2 => 0u64..8, 2 => any::<u64>()];
        proptest::collection::vec((lit, len, back), 0..120)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(200))]

        #[test]
        fn random_blocks_round_trip(start in prop_oneof![Just(0u64), 0u64..(1 << 40)], shapes in shapes(),
                                    final_lits in 0u32..100, lane_log in 0u32..6, seed: u8) {
            let (mut tokens, literals) = build_block(start, &shapes, final_lits, seed);
            // Keep the block within 1 MiB by dropping matches from the end.
            while block_len_of(&tokens) > 1 << 20 {
                let n = tokens.len();
                tokens.remove(n - 2);
                let nlit: u32 = tokens.iter().map(|t| t.lit_len).sum();
                let literals = &literals[..nlit as usize];
                if block_len_of(&tokens) <= 1 << 20 {
                    round_trip(start, &tokens, literals, 1 << lane_log);
                    return Ok(());
                }
            }
            round_trip(start, &tokens, &literals, 1 << lane_log);
        }

        #[test]
        fn corrupt_payloads_never_panic(start in 0u64..1000, shapes in shapes(), lane_log in 0u32..6, seed: u8,
                                        flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 0..4),
                                        cut in proptest::option::of(any::<usize>())) {
            let shapes: Vec<_> = shapes.into_iter().take(20).map(|(l, m, b)| (l % 300, m % 300 + 2, b)).collect();
            let (tokens, literals) = build_block(start, &shapes, 5, seed);
            let lanes = 1 << lane_log;
            let (tables, mut payload) = encode_with_own_tables(&tokens, &literals, lanes);
            for (at, x) in flips {
                let n = payload.len();
                payload[at % n] ^= x;
            }
            if let Some(cut) = cut {
                payload.truncate(cut % (payload.len() + 1));
            }
            let len = block_len_of(&tokens);
            if let Ok(parsed) = decode_block(&payload, &tables, lanes, start, len) {
                // Whatever decodes must itself be a valid block.
                prop_assert_eq!(*parsed.token_pos.last().unwrap(), len);
                prop_assert_eq!(parsed.token_pos.len(), parsed.tokens.len() + 1);
                let lits: u64 = parsed.tokens.iter().map(|t| t.lit_len as u64).sum();
                prop_assert_eq!(lits, parsed.literals.len() as u64);
                for (t, token) in parsed.tokens.iter().enumerate() {
                    let dst = start + (parsed.token_pos[t] + token.lit_len) as u64;
                    prop_assert!(token.back <= dst);
                }
            }
        }

        #[test]
        fn random_bytes_never_panic(payload in proptest::collection::vec(any::<u8>(), 0..200), len in 0u32..5000) {
            let mut stats = SymbolStats::default();
            stats.ll.iter_mut().for_each(|c| *c = 1);
            stats.ml.iter_mut().for_each(|c| *c = 1);
            stats.of.iter_mut().for_each(|c| *c = 1);
            stats.lit.iter_mut().for_each(|c| *c = 1);
            let tables = TableSet::from_stats(&stats);
            let _ = decode_block(&payload, &tables, 4, 0, len);
        }
    }
}
