//! Block payloads (FORMAT.md §3): a block is cut into slices of `S = 2^slice_log` bytes, each coded on its own as
//! one rANS stream of one or two lanes plus an extra-bits stream, behind a directory of slice payload lengths; and the
//! parsed form that decoding works from.
//!
//! The parse unit is a [`ParsedBlock`]: either one slice (random access resolves a few source bytes by decoding
//! the one slice that holds them) or a whole block (its slices' tokens one after the other, positions relative to
//! the block), which the whole-block decoders use.

use crate::codec::context::{base_code, for_each_context};
use crate::codec::cut::{cut_slices, SliceTokens};
use crate::codec::tables::{
    SymbolStats, Table, TableSet, LIT_ALPHABET, LL_ALPHABET, ML_ALPHABET, OF_ALPHABET, OF_CONTINUATION_DELTAS,
    OF_EXPLICIT_CODES, OF_REVERSE_BASE,
};
use crate::codec::{logcode, rans, varint};
use crate::error::DecodeError;
use crate::pack::matcher::all_acgt;

mod head;
pub use head::{SliceHead, SlicePayload};

/// One LZ77 token as the packer produces it: `lit_len` literals, then a match of `match_len` bytes.
///
/// A forward match (`rc == false`) copies from `back` bytes before its destination `dst`: `out[dst + k] =
/// out[dst − back + (k mod back)]`, a periodic fill when `back < match_len`. A reverse-complement match (`rc`,
/// version 5) reads its source backwards from `e = dst − back` and complements it: `out[dst + k] =
/// complement(out[e − k])`, which needs `back + match_len − 1 ≤ dst` (FORMAT.md §1). The last token of a slice
/// (and of the packer's block parse) is literal-only: `match_len == 0`, `back == 0`, `rc == false`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Token {
    pub lit_len: u32,
    pub match_len: u32,
    pub back: u64,
    pub rc: bool,
}

/// The complement of a byte for reverse-complement matches (FORMAT.md §1): A↔T and C↔G, in either case; every
/// other byte is its own complement.
pub const COMPLEMENT: [u8; 256] = {
    let mut t = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        t[i] = i as u8;
        i += 1;
    }
    let pairs = [(b'A', b'T'), (b'C', b'G'), (b'a', b't'), (b'c', b'g')];
    let mut p = 0;
    while p < pairs.len() {
        t[pairs[p].0 as usize] = pairs[p].1;
        t[pairs[p].1 as usize] = pairs[p].0;
        p += 1;
    }
    t
};

/// The previous match token of a slice, which a continuation code (FORMAT.md §3.2) continues: its resolved
/// `back`, its kind, and its destination `dst` (any origin, as long as the continuing token's `dst` uses the same:
/// only the difference counts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrevMatch {
    pub back: u64,
    pub dst: u64,
    pub rc: bool,
}

impl PrevMatch {
    /// A forward match of distance `back` at destination 0 (`back == 0`: no previous match), for tests that track
    /// only forward matches and their distances.
    #[cfg(test)]
    pub fn forward(back: u64) -> Option<PrevMatch> {
        (back != 0).then_some(PrevMatch { back, dst: 0, rc: false })
    }
}

/// The `back` of a continuation with delta `delta` of `prev` for a match at `dst` (FORMAT.md §3.2); the match has
/// `prev`'s kind. Forward: `prev.back + δ` (the same source diagonal `dst − src`, `δ` more bytes in the
/// destination). Reverse complement: `prev.back + 2·(dst − prev.dst) − δ` (the same anti-diagonal `dst + e`, `δ`
/// more bytes in the destination). `None` when the result is below 1 or overflows.
#[inline]
pub fn continued_back(prev: PrevMatch, dst: u64, delta: i64) -> Option<u64> {
    let back = if prev.rc {
        let step = dst.checked_sub(prev.dst)?.checked_mul(2)?;
        prev.back.checked_add(step)?.checked_add_signed(-delta)?
    } else {
        prev.back.checked_add_signed(delta)?
    };
    (back >= 1).then_some(back)
}

/// A decoded slice or block: what the tokens say, before any match is resolved. For a whole block, the tokens
/// of its slices follow one another (each slice ends with its own literal-only token).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ParsedBlock {
    /// Absolute stream position of the unit's first byte.
    pub start: u64,
    /// Decoded length of the unit.
    pub len: u32,
    /// All tokens, in stream order.
    pub tokens: Vec<Token>,
    /// `token_pos[t]`: offset within the unit where token t's literals begin (prefix sum); one extra entry = len.
    pub token_pos: Vec<u32>,
    /// `lit_pos[t]`: index into `literals` of token t's first literal (prefix sum); one entry per token.
    pub lit_pos: Vec<u32>,
    pub literals: Vec<u8>,
}

impl ParsedBlock {
    /// Index of the token whose span (literals + match) contains unit offset `off` (`off < len`).
    pub fn token_at(&self, off: u32) -> usize {
        // token_pos is non-decreasing; the last entry equals len.
        self.token_pos.partition_point(|&p| p <= off).saturating_sub(1)
    }

    /// How many literals the unit's tokens use (its `literals` hold them all unless it was parsed as a prefix).
    pub fn literal_count(&self) -> usize {
        match (self.lit_pos.last(), self.tokens.last()) {
            (Some(&at), Some(t)) => at as usize + t.lit_len as usize,
            _ => 0,
        }
    }

    /// Whether every literal is present (a unit parsed as a prefix, [`decode_slice_prefixes`], may lack the
    /// last ones).
    pub fn is_complete(&self) -> bool {
        self.literals.len() == self.literal_count()
    }

    /// Whether the unit can serve its bytes `[0, end)`: complete, or parsed as a prefix that holds at least `end`
    /// literals — bytes `[0, end)` hold at most `end` literals, the first ones, since every byte is a literal
    /// or a match byte.
    pub fn serves(&self, end: u32) -> bool {
        end as usize <= self.literals.len() || self.is_complete()
    }

    /// Heap bytes held, for cache accounting.
    pub fn heap_bytes(&self) -> usize {
        self.tokens.len() * std::mem::size_of::<Token>()
            + (self.token_pos.len() + self.lit_pos.len()) * 4
            + self.literals.len()
    }

    /// Empties the unit and sets where it lies, keeping the allocations.
    fn reset(&mut self, start: u64, len: u32) {
        self.start = start;
        self.len = len;
        self.tokens.clear();
        self.token_pos.clear();
        self.token_pos.push(0);
        self.lit_pos.clear();
        self.literals.clear();
    }
}

/// A block's (or slice's) decoded bytes by the byte-wise definition of FORMAT.md §1: literals, then each match
/// as a periodic fill (forward) or a reversed, complemented copy of the bytes ending at `dst − back` (reverse
/// complement). `start` is the stream position of the first byte; sources before it read `outside(pos)`. Slow
/// on purpose (a byte at a time): the reference that the decoders, the fuzz targets and their seeds are checked
/// against. The tokens must be valid (§3.3: every source byte at or after position 0).
pub fn reference_block_bytes(start: u64, tokens: &[Token], literals: &[u8], outside: impl Fn(u64) -> u8) -> Vec<u8> {
    let mut out: Vec<u8> = Vec::new();
    let mut lit = 0;
    for t in tokens {
        out.extend_from_slice(&literals[lit..lit + t.lit_len as usize]);
        lit += t.lit_len as usize;
        let dst = start + out.len() as u64;
        for k in 0..t.match_len as u64 {
            let byte = |from: u64, out: &[u8]| if from < start { outside(from) } else { out[(from - start) as usize] };
            let b = if t.rc {
                COMPLEMENT[byte(dst - t.back - k, &out) as usize]
            } else {
                byte(dst - t.back + k % t.back, &out)
            };
            out.push(b);
        }
    }
    out
}

/// Largest literal-run / match-length code (exclusive), and explicit distance code (exclusive), FORMAT.md §3.2.
const LEN_CODE_LIMIT: u32 = 64;
const DIST_CODE_LIMIT: u32 = OF_EXPLICIT_CODES as u32;
/// The largest `back` an explicit distance code carries (code 87 with all extra bits set): the longest stream.
pub const MAX_BACK: u64 = 1 << 40;

/// Index into [`OF_CONTINUATION_DELTAS`] of the continuation of `prev` (the previous match token of the same
/// slice, `None` when there is none) that gives a match of kind `rc` at `dst` the distance `back`, if any.
#[inline]
pub fn continuation_index(back: u64, rc: bool, dst: u64, prev: Option<PrevMatch>) -> Option<usize> {
    let prev = prev.filter(|p| p.rc == rc)?;
    OF_CONTINUATION_DELTAS.iter().position(|&d| continued_back(prev, dst, d) == Some(back))
}

/// The OF field of a match of kind `rc` and distance `back ≥ 1` at `dst` that follows `prev` in its slice
/// (`None`: it is the slice's first match), as `(code, extra_nbits, extra)`: a continuation code (no extra bits)
/// whenever one applies, else the explicit log code of `back − 1`, moved up by [`OF_REVERSE_BASE`] for a reverse
/// complement. The slice encoder, the symbol counts and the packer's prices all call this, so they agree on every
/// choice.
#[inline]
pub fn distance_code(back: u64, rc: bool, dst: u64, prev: Option<PrevMatch>) -> (u32, u32, u64) {
    match continuation_index(back, rc, dst, prev) {
        Some(k) => (OF_EXPLICIT_CODES as u32 + k as u32, 0, 0),
        None => {
            let (code, nbits, bits) = logcode::encode(back.saturating_sub(1));
            (code + if rc { OF_REVERSE_BASE as u32 } else { 0 }, nbits, bits)
        }
    }
}
/// The largest block FORMAT.md allows (`block_log ≤ 20`).
pub const MAX_BLOCK_LEN: u32 = 1 << 20;
/// Slice sizes the codec accepts: `2^9 ..= 2^20` (the header narrows this further per block size).
pub const MIN_SLICE_LOG: u8 = 9;
pub const MAX_SLICE_LOG: u8 = 20;

/// Number of slices of a block of `block_len` bytes: `ceil(block_len / 2^slice_log)`.
pub fn slice_count(block_len: u32, slice_log: u8) -> usize {
    (block_len as usize).div_ceil(1usize << slice_log.min(MAX_SLICE_LOG))
}

/// Adds one block's symbols to a group's statistics, as [`encode_block`] will code them (cut into slices of
/// `slice_len` bytes; `block` is the block's decoded bytes). The packer calls this for every block of a group
/// before building the group's [`TableSet`].
pub fn count_symbols(tokens: &[Token], literals: &[u8], block: &[u8], slice_len: usize, stats: &mut SymbolStats) {
    count_slices(&cut_slices(tokens, literals, block, slice_len), false, stats);
}

/// Adds already-cut slices' symbols to a group's statistics, as [`encode_slices`] will code them with a table set
/// that has a context model when `contexts` is set: the literals of a slice that [`codes_with_contexts`] are
/// coded by the model, not the LIT table, so they are not counted.
pub fn count_slices(slices: &[SliceTokens], contexts: bool, stats: &mut SymbolStats) {
    for slice in slices {
        let lits: &[u8] = if contexts && codes_with_contexts(&slice.literals) { &[] } else { &slice.literals };
        count_slice_symbols(&slice.tokens, lits, stats);
    }
}

/// Whether a slice's literals are coded with its group's context model, when the group has one (FORMAT.md §3.5):
/// exactly when there are literals and every one is a base (A, C, G, T). The encoder, the symbol counts and the
/// packer's model statistics all ask this, so they agree on every slice.
///
/// Eight bytes at a time ([`all_acgt`]): every slice's literals are checked about three times while packing, a
/// byte at a time that was 1 % of a genome pack's instructions.
pub fn codes_with_contexts(literals: &[u8]) -> bool {
    let mut words = literals.chunks_exact(8);
    !literals.is_empty()
        && words.all(|w| all_acgt(u64::from_le_bytes(w.try_into().expect("8 bytes"))))
        && words.remainder().iter().all(|&b| base_code(b).is_some())
}

/// Adds one slice's symbols (tokens ending with the literal-only one) to `stats`.
fn count_slice_symbols(tokens: &[Token], literals: &[u8], stats: &mut SymbolStats) {
    let nmatch = tokens.len().saturating_sub(1);
    let (mut prev, mut dst) = (None, 0u64);
    for (t, token) in tokens.iter().enumerate() {
        stats.ll[clamp_code(logcode::code_of(token.lit_len as u64), LL_ALPHABET)] += 1;
        dst += token.lit_len as u64;
        if t < nmatch {
            stats.ml[clamp_code(logcode::code_of(token.match_len.saturating_sub(2) as u64), ML_ALPHABET)] += 1;
            // A back above 2^40 would count as a continuation here; encode_block refuses it loudly.
            stats.of[clamp_code(distance_code(token.back, token.rc, dst, prev).0, OF_ALPHABET)] += 1;
            prev = Some(PrevMatch { back: token.back, dst, rc: token.rc });
            dst += token.match_len as u64;
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

/// Encodes one block: cuts its parse into slices of `slice_len` bytes ([`cut_slices`]), then appends the slice
/// directory and every slice payload to `out`. `tokens` must end with a literal-only token and cover `block`
/// (the block's decoded bytes) exactly; `Σ lit_len == literals.len()`. `lanes` is the header's `rans_lanes`.
///
/// # Panics
/// On tokens the format cannot represent (no final literal-only token, a match shorter than 2 or with `back = 0`,
/// a literal run or length of `2^28` or more, `back > 2^40` ([`MAX_BACK`]), a count mismatch), an invalid lane count, or a
/// symbol missing from `tables` — all bugs in the packer, which builds `tables` from [`count_symbols`].
pub fn encode_block(
    tokens: &[Token],
    literals: &[u8],
    block: &[u8],
    slice_len: usize,
    tables: &TableSet,
    lanes: u32,
    out: &mut Vec<u8>,
) {
    let last = tokens.last().expect("encode_block: a block has at least the final literal-only token");
    assert!(last.match_len == 0 && last.back == 0, "encode_block: the last token must be literal-only: {last:?}");
    let lit_sum: u64 = tokens.iter().map(|t| t.lit_len as u64).sum();
    assert_eq!(lit_sum, literals.len() as u64, "encode_block: Σ lit_len differs from the literal count");
    let slices = cut_slices(tokens, literals, block, slice_len);
    encode_slices(&slices, tables, lanes, out);
}

/// Appends the directory and the payloads of already-cut slices (see [`encode_block`]).
pub fn encode_slices(slices: &[SliceTokens], tables: &TableSet, lanes: u32, out: &mut Vec<u8>) {
    let payloads: Vec<Vec<u8>> = slices
        .iter()
        .map(|s| {
            let mut p = Vec::new();
            encode_slice(&s.tokens, &s.literals, tables, lanes, &mut p);
            p
        })
        .collect();
    for p in &payloads {
        varint::write(p.len() as u64, out);
    }
    for p in &payloads {
        out.extend_from_slice(p);
    }
}

/// Encodes one slice payload (FORMAT.md §3: counts, states, words, extra bits) and appends it to `out`.
fn encode_slice(tokens: &[Token], literals: &[u8], tables: &TableSet, lanes: u32, out: &mut Vec<u8>) {
    encode_slice_with(tokens, literals, tables, lanes, out, |_, token, dst, prev| {
        distance_code(token.back, token.rc, dst, prev)
    });
}

/// [`encode_slice`] with the OF field of each match chosen by `of_field(t, token, dst, prev)` (`dst`: the
/// match's offset in the slice; `prev`: the previous match of the slice, `None` for none); the tests use it to
/// write payloads the encoder never would.
fn encode_slice_with(
    tokens: &[Token],
    literals: &[u8],
    tables: &TableSet,
    lanes: u32,
    out: &mut Vec<u8>,
    mut of_field: impl FnMut(usize, &Token, u64, Option<PrevMatch>) -> (u32, u32, u64),
) {
    let last = tokens.last().expect("encode_slice: a slice has at least the final literal-only token");
    assert!(last.match_len == 0 && last.back == 0, "encode_slice: the last token must be literal-only: {last:?}");
    let nmatch = tokens.len() - 1;

    let mut symbols = vec![0u8; (nmatch + 1) + 2 * nmatch + literals.len()];
    let (ll_syms, rest) = symbols.split_at_mut(nmatch + 1);
    let (ml_syms, rest) = rest.split_at_mut(nmatch);
    let (of_syms, lit_syms) = rest.split_at_mut(nmatch);
    lit_syms.copy_from_slice(literals);

    let mut extra = BitWriter::new();
    // The previous match of this slice (None: none yet), for the continuation codes (§3.2); `dst` is the
    // current token's match offset in the slice.
    let (mut prev, mut dst) = (None, 0u64);
    for (t, token) in tokens.iter().enumerate() {
        let (code, nbits, bits) = code_field(token.lit_len as u64, LEN_CODE_LIMIT, "literal run", t);
        ll_syms[t] = code;
        extra.push(bits, nbits);
        dst += token.lit_len as u64;
        if t < nmatch {
            assert!(token.match_len >= 2 && token.back >= 1, "encode_block: token {t} is not a match: {token:?}");
            let (code, nbits, bits) = code_field(token.match_len as u64 - 2, LEN_CODE_LIMIT, "match length", t);
            ml_syms[t] = code;
            extra.push(bits, nbits);
            assert!(token.back <= MAX_BACK, "encode_block: token {t}: back {} above 2^40", token.back);
            let (code, nbits, bits) = of_field(t, token, dst, prev);
            of_syms[t] = code as u8;
            extra.push(bits, nbits);
            prev = Some(PrevMatch { back: token.back, dst, rc: token.rc });
            dst += token.match_len as u64;
        }
    }
    let extra = extra.finish();

    let model = tables.ctx_model().filter(|_| codes_with_contexts(literals));
    // Lane 0 codes every code and the literals before the split, lane 1 the rest (FORMAT.md §3.4).
    let first = 3 * nmatch + 1;
    let split = rans::lane_split(first, literals.len(), lanes as usize);
    let starts = if lanes == 1 { vec![0] } else { vec![0, first + split] };
    let encoded = match model {
        None => {
            let segments =
                [(nmatch + 1, &tables.ll), (nmatch, &tables.ml), (nmatch, &tables.of), (literals.len(), &tables.lit)];
            rans::encode_lanes(&symbols, &segments, None, &starts)
        }
        Some(model) => {
            // The literals as base codes, each with the context of its lane (FORMAT.md §3.5).
            let mut contexts = vec![0u32; literals.len()];
            for_each_context(literals, first, lanes as usize, model.mask(), |j, ctx, code| {
                contexts[j] = ctx;
                lit_syms[j] = code as u8;
            });
            let segments = [(nmatch + 1, &tables.ll), (nmatch, &tables.ml), (nmatch, &tables.of)];
            rans::encode_lanes(&symbols, &segments, Some((model, &contexts)), &starts)
        }
    };

    varint::write(nmatch as u64, out);
    // lit_field = 2·nlit + (1 when the literals are coded with the group's context model).
    varint::write(2 * literals.len() as u64 + model.is_some() as u64, out);
    varint::write(encoded.words.len() as u64, out);
    varint::write(extra.len() as u64, out);
    rans::write_stream(&encoded, out);
    out.extend_from_slice(&extra);
}

/// Where a block lies and how it is sliced: what decoding a payload needs besides the payload and tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockShape {
    /// Absolute stream position of the block's first byte.
    pub start: u64,
    /// Decoded length of the block.
    pub len: u32,
    /// The header's `slice_log`.
    pub slice_log: u8,
    /// The header's `rans_lanes`.
    pub lanes: u32,
}

impl BlockShape {
    /// Checks the shape against the codec's limits, returning the lane count and the number of slices.
    fn check(&self) -> Result<(usize, usize), DecodeError> {
        let lanes = rans::check_lanes(self.lanes)?;
        if self.len > MAX_BLOCK_LEN {
            return Err(DecodeError::Limit {
                what: "block length",
                value: self.len as u64,
                limit: MAX_BLOCK_LEN as u64,
            });
        }
        if !(MIN_SLICE_LOG..=MAX_SLICE_LOG).contains(&self.slice_log) {
            return Err(DecodeError::Invalid {
                what: "slice_log",
                detail: format!("{} is outside {MIN_SLICE_LOG}..={MAX_SLICE_LOG}", self.slice_log),
            });
        }
        Ok((lanes, slice_count(self.len, self.slice_log)))
    }

    /// Offset in the block and length of slice `j` (`j < n_slices`).
    pub fn slice_span(&self, j: usize) -> (u32, u32) {
        let s = 1u32 << self.slice_log;
        let off = j as u32 * s;
        (off, (self.len - off).min(s))
    }
}

/// The slice directory at the front of a block payload: `n_slices` varint lengths whose sum must be exactly the
/// rest of the payload (FORMAT.md §3).
#[derive(Debug, Clone, Copy)]
pub struct SliceDirectory<'a> {
    payload: &'a [u8],
    n_slices: usize,
    /// Bytes the directory itself takes.
    dir_len: usize,
}

impl<'a> SliceDirectory<'a> {
    /// Reads and checks the directory of a payload holding `n_slices` slices.
    pub fn parse(payload: &'a [u8], n_slices: usize) -> Result<Self, DecodeError> {
        let mut pos = 0;
        let mut sum = 0u128;
        for j in 0..n_slices {
            let len = varint::read_at(payload, &mut pos).map_err(|e| in_directory(j, e))?;
            sum += len as u128;
        }
        let body = (payload.len() - pos) as u128;
        if sum != body {
            return Err(DecodeError::Invalid {
                what: "slice directory",
                detail: format!(
                    "{n_slices} slice lengths sum to {sum} bytes, but {body} bytes follow the {pos}-byte directory"
                ),
            });
        }
        Ok(SliceDirectory { payload, n_slices, dir_len: pos })
    }

    /// The payload of every slice, in order (the directory was checked by [`SliceDirectory::parse`]).
    pub fn slices(&self) -> impl Iterator<Item = &'a [u8]> + 'a {
        let payload = self.payload;
        let mut pos = 0;
        let mut at = self.dir_len;
        (0..self.n_slices).map(move |_| {
            // Cannot fail or overrun: parse() read these varints and checked that their sum fits exactly.
            let len = varint::read_at(payload, &mut pos).unwrap_or(0) as usize;
            let slice = payload.get(at..at + len).unwrap_or(&[]);
            at += len;
            slice
        })
    }

    /// Slice `j`'s payload (`j < n_slices`), found by the prefix sum of the lengths before it.
    pub fn slice(&self, j: usize) -> Result<&'a [u8], DecodeError> {
        self.slices().nth(j).ok_or(DecodeError::Limit {
            what: "slice index",
            value: j as u64,
            limit: self.n_slices.saturating_sub(1) as u64,
        })
    }
}

fn in_directory(j: usize, e: DecodeError) -> DecodeError {
    DecodeError::Invalid { what: "slice directory", detail: format!("length of slice {j}: {e}") }
}

/// Adds the slice index to an error's description where the error carries one.
fn in_slice(j: usize, e: DecodeError) -> DecodeError {
    match e {
        DecodeError::Invalid { what, detail } => DecodeError::Invalid { what, detail: format!("slice {j}: {detail}") },
        DecodeError::Rans { detail } => DecodeError::Rans { detail: format!("slice {j}: {detail}") },
        other => other,
    }
}

/// Decodes a whole block payload (every slice: entropy stage + parse by prefix sums) into one unit whose
/// positions are relative to the block; every length, count and distance is validated (§3.3).
pub fn decode_block(payload: &[u8], tables: &TableSet, shape: BlockShape) -> Result<ParsedBlock, DecodeError> {
    let mut parsed = ParsedBlock::default();
    decode_block_into(payload, tables, shape, &mut parsed)?;
    Ok(parsed)
}

/// [`decode_block`] into an existing [`ParsedBlock`], reusing its allocations (a decoder working through many
/// blocks keeps one). On error `out` holds unspecified (but bounded) contents.
///
/// The slices' rANS lanes are decoded four at a time in lock step ([`rans::Decoder::decode_lockstep_all`]), their
/// context-coded literals eight at a time where the CPU has AVX2 ([`rans::Decoder::decode_contexts_all`]): a lane
/// is a single dependency chain, and interleaving independent chains keeps the core's ALUs busy.
pub fn decode_block_into(
    payload: &[u8],
    tables: &TableSet,
    shape: BlockShape,
    out: &mut ParsedBlock,
) -> Result<(), DecodeError> {
    decode_blocks_into(&[(payload, tables, shape)], &mut [out]).map_err(|(_, e)| e)
}

/// [`decode_block`] for several blocks at once, each into its own [`ParsedBlock`]: their slices' entropy stages
/// run together, so that the CPU's wide rounds of context-coded literals get sixteen lanes (two blocks' eight)
/// where one block fills eight ([`rans::Decoder::decode_contexts_all`]). The blocks may belong to any table
/// groups, but not to archives of different lane counts. On error, the index of the first block with a bad slice
/// (decoding each block alone says what each one's error is).
pub fn decode_blocks(jobs: &[(&[u8], &TableSet, BlockShape)]) -> Result<Vec<ParsedBlock>, (usize, DecodeError)> {
    let mut outs: Vec<ParsedBlock> = jobs.iter().map(|_| ParsedBlock::default()).collect();
    let mut refs: Vec<&mut ParsedBlock> = outs.iter_mut().collect();
    decode_blocks_into(jobs, &mut refs)?;
    Ok(outs)
}

/// [`decode_blocks`] into existing units (`outs[k]` for `jobs[k]`), reusing their allocations: every block's
/// slices through one [`decode_layouts`]. Errors name the job and, inside it, the slice.
fn decode_blocks_into(
    jobs: &[(&[u8], &TableSet, BlockShape)],
    outs: &mut [&mut ParsedBlock],
) -> Result<(), (usize, DecodeError)> {
    let mut lanes = None;
    // `origin[k]`: the job and the slice within it of the k-th slice decoded.
    let (mut layouts, mut dests, mut sets, mut origin) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (unit, (&(payload, tables, shape), out)) in jobs.iter().zip(outs.iter_mut()).enumerate() {
        let fail = |e| (unit, e);
        let (k, n_slices) = shape.check().map_err(fail)?;
        if *lanes.get_or_insert(k) != k {
            let detail = format!("blocks of {k} and {} rANS lanes decoded together", lanes.unwrap_or(k));
            return Err((unit, DecodeError::Invalid { what: "block job", detail }));
        }
        check_alphabets(tables).map_err(fail)?;
        let dir = SliceDirectory::parse(payload, n_slices).map_err(fail)?;
        out.reset(shape.start, shape.len);
        for (j, slice) in dir.slices().enumerate() {
            let (off, len) = shape.slice_span(j);
            layouts.push(SlicePayload::parse(slice, k, len).map_err(|e| (unit, in_slice(j, e)))?);
            dests.push(Dest { unit, start: shape.start + off as u64, base: off, len, lits: usize::MAX });
            sets.push(tables);
            origin.push((unit, j));
        }
    }
    with_scratch(|scratch| decode_layouts(&layouts, &dests, &sets, lanes.unwrap_or(1), scratch, outs)).map_err(
        |(k, e)| {
            let (unit, j) = origin.get(k).copied().unwrap_or_default();
            (unit, in_slice(j, e))
        },
    )
}

/// Where a decoded slice goes: into unit `unit`, at offset `base` of it; the slice starts at absolute stream
/// position `start` and has `len` bytes. Slices of one unit come in order. Only the first `lits` literals are
/// decoded (a prefix parse, whose final rANS state is then not checked); less than all only for a unit of one
/// slice.
struct Dest {
    unit: usize,
    start: u64,
    base: u32,
    len: u32,
    lits: usize,
}

/// The entropy stage of every slice (its lanes in lock-step groups of four), then each slice's token parse in
/// order, appended to its unit (units must have been reset). Slice `k` is coded with `sets[k]`. Errors name the
/// index of the slice that failed.
fn decode_layouts(
    layouts: &[SlicePayload],
    dests: &[Dest],
    sets: &[&TableSet],
    lanes: usize,
    scratch: &mut Scratch,
    outs: &mut [&mut ParsedBlock],
) -> Result<(), (usize, DecodeError)> {
    let n = layouts.len();
    let code_len: usize = layouts.iter().map(|l| 3 * l.head.nmatch as usize + 1).sum();
    scratch.codes.clear();
    scratch.codes.resize(code_len, 0);
    for (u, out) in outs.iter_mut().enumerate() {
        let nlit: usize = layouts
            .iter()
            .zip(dests)
            .filter(|(_, d)| d.unit == u)
            .map(|(l, d)| (l.head.nlit as usize).min(d.lits))
            .sum();
        out.literals.clear();
        out.literals.resize(nlit, 0);
    }
    // Decoder j·K + l is lane l of slice j: a slice's lanes are neighbours in the lock steps, whose chains
    // overlap.
    if scratch.decoders.len() < n * lanes {
        scratch.decoders.resize_with(n * lanes, rans::Decoder::default);
    }
    for (j, (decs, l)) in scratch.decoders.chunks_mut(lanes).zip(layouts).enumerate() {
        for (lane, (dec, state)) in decs.iter_mut().zip(l.states.chunks_exact(4)).enumerate() {
            dec.reset(state, l.words, lane == 1).map_err(|e| (j, e))?;
        }
    }
    for (j, (l, set)) in layouts.iter().zip(sets).enumerate() {
        if l.head.contexts && set.ctx.is_none() {
            let detail = "the slice codes its literals with a context model, its group has none".to_string();
            return Err((j, DecodeError::Invalid { what: "lit_field", detail }));
        }
    }
    {
        // Each lane's four output segments: lane 0 its slice's LL, ML and OF codes and literals before the split,
        // lane 1 the literals after it (in its unit). A lane whose literals are context-coded gets an empty LIT
        // segment: its literals follow the lock step.
        let mut segs: Vec<[&mut [u8]; 4]> = Vec::with_capacity(n * lanes);
        let mut ctx_lits: Vec<(usize, &mut [u8])> = Vec::new();
        let mut table_sets: Vec<[&Table; 4]> = Vec::with_capacity(n * lanes);
        let mut codes = &mut scratch.codes[..];
        let mut lits: Vec<&mut [u8]> = outs.iter_mut().map(|o| &mut o.literals[..]).collect();
        for (j, (l, d)) in layouts.iter().zip(dests).enumerate() {
            let (nmatch, nlit) = (l.head.nmatch as usize, l.head.nlit as usize);
            let (c, rest) = std::mem::take(&mut codes).split_at_mut(3 * nmatch + 1);
            codes = rest;
            let (ll, c) = c.split_at_mut(nmatch + 1);
            let (ml, of) = c.split_at_mut(nmatch);
            let (lit, rest) = std::mem::take(&mut lits[d.unit]).split_at_mut(nlit.min(d.lits));
            lits[d.unit] = rest;
            // A prefix (d.lits < nlit) may end before the split: lane 1 then decodes nothing.
            let split = rans::lane_split(3 * nmatch + 1, nlit, lanes).min(lit.len());
            let (lit0, lit1) = lit.split_at_mut(split);
            let t = sets[j];
            let mut lane_codes = Some([ll, ml, of]);
            for (lane, lit) in [lit0, lit1].into_iter().take(lanes).enumerate() {
                let body = if l.head.contexts {
                    ctx_lits.push((j * lanes + lane, lit));
                    &mut [][..]
                } else {
                    lit
                };
                let [ll, ml, of] = lane_codes.take().unwrap_or_default();
                segs.push([ll, ml, of, body]);
                table_sets.push([&t.ll, &t.ml, &t.of, &t.lit]);
            }
        }
        let decoders = &mut scratch.decoders[..n * lanes];
        rans::Decoder::decode_lockstep_all(decoders, segs, &table_sets).map_err(|(k, e)| (k / lanes, e))?;
        if !ctx_lits.is_empty() {
            let mut streams = Vec::with_capacity(ctx_lits.len());
            let mut decs = decoders.iter_mut().enumerate();
            for (k, lit) in ctx_lits {
                // ctx_lits is in lane order, so lane k's decoder is still ahead in `decs`.
                let Some((_, dec)) = decs.find(|(i, _)| *i == k) else { break };
                if let Some(model) = sets[k / lanes].ctx_model() {
                    streams.push((dec, model, lit));
                }
            }
            rans::Decoder::decode_contexts_all(streams);
        }
    }
    for (j, (decs, (l, d))) in scratch.decoders.chunks(lanes).zip(layouts.iter().zip(dests)).enumerate() {
        // A prefix stops before the end of its stream; the block hash checks what it produced.
        if d.lits >= l.head.nlit as usize {
            rans::finish_lanes(decs).map_err(|e| (j, e))?;
        }
    }
    let mut c0 = 0usize;
    let mut lit_base = vec![0u32; outs.len()];
    for (j, (l, d)) in layouts.iter().zip(dests).enumerate() {
        let (nmatch, nlit) = (l.head.nmatch as usize, l.head.nlit as usize);
        let unit = SliceUnit { start: d.start, base: d.base, len: d.len, lit_base: lit_base[d.unit], nlit };
        let codes = &scratch.codes[c0..c0 + 3 * nmatch + 1];
        parse_tokens(codes, nmatch, l.extra, unit, outs[d.unit]).map_err(|e| (j, e))?;
        c0 += 3 * nmatch + 1;
        lit_base[d.unit] += l.head.nlit;
    }
    Ok(())
}

/// One slice to decode with [`decode_slices`]: its block's payload, shape and tables, and the slice's index.
pub type SliceJob<'a> = (&'a [u8], BlockShape, usize, &'a TableSet);

/// Decodes several slices, each on its own (as [`decode_slice`] would), but their entropy stages four at a time
/// in lock step: what a reader resolving many source pieces does, one slice per piece (the slices may belong to
/// any blocks and table groups). One result per job.
pub fn decode_slices(jobs: &[SliceJob]) -> Vec<Result<ParsedBlock, DecodeError>> {
    decode_slice_prefixes(jobs, &vec![u32::MAX; jobs.len()])
}

/// [`decode_slices`], decoding of slice `k` only what its bytes `[0, ends[k])` need: every code (the tokens
/// are all there) but only the first `ends[k]` literals, which serve those bytes ([`ParsedBlock::serves`]). A
/// source piece lies anywhere in its slice, so this skips about half the literals — most of a slice's rANS
/// symbols — of the slices a cold read reaches through sources. A prefix's final rANS state is not checked
/// (the stream goes on); the block hash checks the bytes it produces.
pub fn decode_slice_prefixes(jobs: &[SliceJob], ends: &[u32]) -> Vec<Result<ParsedBlock, DecodeError>> {
    let together = (|| {
        if ends.len() != jobs.len() {
            let detail = format!("{} slice jobs, {} ends", jobs.len(), ends.len());
            return Err(DecodeError::Invalid { what: "slice job", detail });
        }
        let mut layouts = Vec::with_capacity(jobs.len());
        let mut dests = Vec::with_capacity(jobs.len());
        let mut sets = Vec::with_capacity(jobs.len());
        let mut lanes = None;
        for (k, &(payload, shape, j, tables)) in jobs.iter().enumerate() {
            check_alphabets(tables)?;
            sets.push(tables);
            let (l, n_slices) = shape.check()?;
            if j >= n_slices || lanes.is_some_and(|x| x != l) {
                return Err(DecodeError::Invalid { what: "slice job", detail: format!("job {k}") });
            }
            lanes = Some(l);
            let slice = SliceDirectory::parse(payload, n_slices)?.slice(j)?;
            let (off, len) = shape.slice_span(j);
            layouts.push(SlicePayload::parse(slice, l, len)?);
            dests.push(Dest { unit: k, start: shape.start + off as u64, base: 0, len, lits: ends[k] as usize });
        }
        let mut outs: Vec<ParsedBlock> = dests
            .iter()
            .map(|d| {
                let mut p = ParsedBlock::default();
                p.reset(d.start, d.len);
                p
            })
            .collect();
        let mut refs: Vec<&mut ParsedBlock> = outs.iter_mut().collect();
        with_scratch(|scratch| decode_layouts(&layouts, &dests, &sets, lanes.unwrap_or(1), scratch, &mut refs))
            .map_err(|(_, e)| e)?;
        Ok(outs)
    })();
    match together {
        Ok(outs) => outs.into_iter().map(Ok).collect(),
        // Some slice is bad: decode each alone, so that each gets its own verdict and error.
        Err(_) => jobs.iter().map(|&(payload, shape, j, tables)| decode_slice(payload, tables, shape, j)).collect(),
    }
}

/// Decodes slice `j` of a block payload on its own into a unit covering just that slice (`start` is the slice's
/// absolute position). Only the directory and slice `j`'s bytes are read.
pub fn decode_slice(
    payload: &[u8],
    tables: &TableSet,
    shape: BlockShape,
    j: usize,
) -> Result<ParsedBlock, DecodeError> {
    let mut parsed = ParsedBlock::default();
    decode_slice_into(payload, tables, shape, j, &mut parsed)?;
    Ok(parsed)
}

/// [`decode_slice`] into an existing [`ParsedBlock`], reusing its allocations.
pub fn decode_slice_into(
    payload: &[u8],
    tables: &TableSet,
    shape: BlockShape,
    j: usize,
    out: &mut ParsedBlock,
) -> Result<(), DecodeError> {
    let (lanes, n_slices) = shape.check()?;
    if j >= n_slices {
        return Err(DecodeError::Limit {
            what: "slice index",
            value: j as u64,
            limit: n_slices.saturating_sub(1) as u64,
        });
    }
    check_alphabets(tables)?;
    let slice = SliceDirectory::parse(payload, n_slices)?.slice(j)?;
    let (off, len) = shape.slice_span(j);
    let start = shape.start + off as u64;
    out.reset(start, len);
    let layout = SlicePayload::parse(slice, lanes, len).map_err(|e| in_slice(j, e))?;
    let dest = Dest { unit: 0, start, base: 0, len, lits: usize::MAX };
    with_scratch(|scratch| {
        decode_layouts(
            std::slice::from_ref(&layout),
            std::slice::from_ref(&dest),
            &[tables],
            lanes,
            scratch,
            &mut [out],
        )
    })
    .map_err(|(_, e)| in_slice(j, e))
}

/// Buffers a decode needs, kept per thread so that decoding many slices allocates nothing.
#[derive(Default)]
struct Scratch {
    codes: Vec<u8>,
    decoders: Vec<rans::Decoder>,
}

thread_local! {
    static SCRATCH: std::cell::RefCell<Scratch> = std::cell::RefCell::new(Scratch::default());
}

/// Runs `f` with this thread's scratch buffers (fresh ones if they are in use further up the stack).
fn with_scratch<R>(f: impl FnOnce(&mut Scratch) -> R) -> R {
    SCRATCH.with(|cell| match cell.try_borrow_mut() {
        Ok(mut scratch) => f(&mut scratch),
        Err(_) => f(&mut Scratch::default()),
    })
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
/// itself, so no bounds check is needed; codes at or above the explicit distance limit get no extra bits and a
/// base of `2^40`, which no block length can absorb, so the fast parse rejects them without a branch of its own
/// (validated LL and ML tables never produce them; OF codes go through [`OF_CODE_TABLE`]).
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

/// [`CODE_TABLE`] for OF codes (FORMAT.md §3.2): an explicit reverse-complement code `OF_REVERSE_BASE + c` has
/// the base and extra bits of the forward code `c`; continuation codes read no extra bits (their back comes from
/// the previous match, and their base is never used); codes ≥ [`OF_ALPHABET`] keep the poisoned base.
const OF_CODE_TABLE: CodeTable = {
    let mut base = [POISON_BASE; 256];
    let mut nbits = [0u8; 256];
    let mut c = 0;
    while c < OF_ALPHABET {
        let from = if c >= OF_REVERSE_BASE { c - OF_REVERSE_BASE } else { c };
        if c < OF_EXPLICIT_CODES || c >= OF_REVERSE_BASE {
            base[c] = CODE_TABLE.base[from];
            nbits[c] = CODE_TABLE.nbits[from];
        } else {
            base[c] = 0;
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

/// [`field`] for an OF code ([`OF_CODE_TABLE`]): a reverse-complement code reads as its forward code.
#[inline(always)]
fn field_of(code: u8, bits: &mut BitReader) -> u64 {
    OF_CODE_TABLE.base[code as usize] + bits.read(OF_CODE_TABLE.nbits[code as usize] as u32)
}

/// Decodes one field: the code (checked against its alphabet's limit) plus its extra bits.
fn read_field(code: u8, limit: u32, bits: &mut BitReader, what: &'static str, t: usize) -> Result<u64, DecodeError> {
    if code as u32 >= limit {
        return Err(DecodeError::Invalid { what, detail: format!("token {t} has code {code} ≥ {limit}") });
    }
    Ok(field(code, bits))
}

/// The delta of every OF code that is a continuation (indexed by the `u8` code, 0 for the others), so the fast
/// parse computes the continued back without a branch.
const CONTINUATION_DELTA: [i64; 256] = {
    let mut d = [0i64; 256];
    let mut k = 0;
    while k < OF_CONTINUATION_DELTAS.len() {
        d[OF_EXPLICIT_CODES + k] = OF_CONTINUATION_DELTAS[k];
        k += 1;
    }
    d
};

/// Whether an OF code is a continuation, indexed by the `u8` code.
const IS_CONTINUATION: [bool; 256] = {
    let mut c = [false; 256];
    let mut k = OF_EXPLICIT_CODES;
    while k < OF_REVERSE_BASE {
        c[k] = true;
        k += 1;
    }
    c
};

/// Decodes one OF field (FORMAT.md §3.2) of a match at `dst` (any origin shared with `prev.dst`) to an absolute
/// back and the match's kind (`true`: reverse complement): an explicit forward code (0 … 87) or reverse-complement
/// code (96 … 183) plus its extra bits, or a continuation (88 … 95) of `prev`, the previous match of the slice
/// (`None`: there is none, which makes a continuation invalid), which takes `prev`'s kind ([`continued_back`]).
fn read_distance(
    code: u8,
    prev: Option<PrevMatch>,
    dst: u64,
    bits: &mut BitReader,
    t: usize,
) -> Result<(u64, bool), DecodeError> {
    let code_us = code as usize;
    if code_us < OF_EXPLICIT_CODES || (OF_REVERSE_BASE..OF_ALPHABET).contains(&code_us) {
        return Ok((field_of(code, bits) + 1, code_us >= OF_REVERSE_BASE));
    }
    if code_us >= OF_ALPHABET {
        return Err(DecodeError::Invalid {
            what: "distance code",
            detail: format!("token {t} has code {code} ≥ {OF_ALPHABET}"),
        });
    }
    let delta = CONTINUATION_DELTA[code_us];
    let Some(prev) = prev else {
        return Err(DecodeError::Invalid {
            what: "match distance",
            detail: format!("token {t}: continuation code {code} with no earlier match in the slice"),
        });
    };
    match continued_back(prev, dst, delta) {
        Some(back) => Ok((back, prev.rc)),
        None if prev.rc => {
            let step = 2 * (dst as i128 - prev.dst as i128);
            Err(DecodeError::Invalid {
                what: "match distance",
                detail: format!(
                    "token {t}: continuation code {code} of a reverse-complement match turns back {} at slice \
                     offset {} into {} at {dst}",
                    prev.back,
                    prev.dst,
                    prev.back as i128 + step - delta as i128
                ),
            })
        }
        None => Err(DecodeError::Invalid {
            what: "match distance",
            detail: format!(
                "token {t}: continuation code {code} turns back {} into {}",
                prev.back,
                prev.back as i128 + delta as i128
            ),
        }),
    }
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

/// Where a slice's tokens go in the unit being built.
#[derive(Debug, Clone, Copy)]
struct SliceUnit {
    /// Absolute stream position of the slice's first byte (for the distance check).
    start: u64,
    /// Offset of the slice in the unit.
    base: u32,
    /// Decoded length of the slice.
    len: u32,
    /// Index in the unit's literals of the slice's first literal.
    lit_base: u32,
    /// The slice's literal count.
    nlit: usize,
}

/// Turns one slice's decoded codes and extra bits into tokens with prefix sums appended to `out`, validating
/// FORMAT.md §3.3.
///
/// The fast pass has one data-dependent branch per slice, not per token: lengths and literal counts only grow, so
/// checking the totals at the end covers every prefix, and the distance checks are folded into a flag. The kind
/// of a match (forward or reverse complement) and its continued back are picked by selects, not branches. Sums
/// cannot overflow (at most 2^19 tokens, every field below 2^41); a continued back computed from an invalid
/// previous match may wrap, but that match already raised the flag. When the flag is raised, the checked pass
/// runs again to say exactly which token is wrong.
fn parse_tokens(
    codes: &[u8],
    nmatch: usize,
    extra: &[u8],
    unit: SliceUnit,
    out: &mut ParsedBlock,
) -> Result<(), DecodeError> {
    let (ll, rest) = codes.split_at(nmatch + 1);
    let (ml, of) = rest.split_at(nmatch);
    let mut bits = BitReader { bytes: extra, bitpos: 0 };
    // Sized up front and filled through iterators: no capacity check or length update per token.
    let t0 = out.tokens.len();
    debug_assert_eq!(out.token_pos.len(), t0 + 1);
    out.tokens.resize(t0 + nmatch + 1, Token::default());
    out.token_pos.resize(t0 + nmatch + 2, 0);
    out.lit_pos.resize(t0 + nmatch + 1, 0);

    let start = unit.start;
    let (base, lit_base) = (unit.base as u64, unit.lit_base as u64);
    let (mut dst, mut lits, mut bad) = (0u64, 0u64, false);
    // The previous match of this slice: its back (0 before the first, which a continuation code may not follow),
    // its destination (slice offset) and kind.
    let (mut prev, mut prev_dst, mut prev_rc) = (0u64, 0u64, false);
    let (last_token, match_tokens) =
        out.tokens[t0..].split_last_mut().unwrap_or_else(|| unreachable!("nmatch + 1 tokens"));
    let positions = out.token_pos[t0..].iter_mut().zip(out.lit_pos[t0..].iter_mut());
    let code_triples = ll.iter().zip(ml).zip(of);
    for ((token, (token_pos, lit_pos)), ((&ll_code, &ml_code), &of_code)) in
        match_tokens.iter_mut().zip(positions).zip(code_triples)
    {
        *token_pos = (base + dst) as u32;
        *lit_pos = (lit_base + lits) as u32;
        let lit_len = field(ll_code, &mut bits);
        let len = field(ml_code, &mut bits) + 2;
        lits += lit_len;
        dst += lit_len;
        // A continuation code reads no extra bits (OF_CODE_TABLE) and its back comes from the previous match:
        // forward b + δ, reverse complement b + 2·(dst − d) − δ (continued_back).
        let explicit = field_of(of_code, &mut bits) + 1;
        let delta = CONTINUATION_DELTA[of_code as usize] as u64;
        let step = if prev_rc { dst.wrapping_sub(prev_dst).wrapping_mul(2).wrapping_sub(delta) } else { delta };
        let continued = prev.wrapping_add(step);
        let is_continuation = IS_CONTINUATION[of_code as usize];
        // Codes ≥ OF_ALPHABET cannot come out of checked tables; refused anyway rather than read as anything.
        bad |= (is_continuation & (prev == 0)) | (of_code as usize >= OF_ALPHABET);
        let back = if is_continuation { continued } else { explicit };
        let rc = if is_continuation { prev_rc } else { of_code as usize >= OF_REVERSE_BASE };
        // Every source byte at or after position 0: back ≤ dst (forward), back + len − 1 ≤ dst (reverse
        // complement). back == 0 (a continuation below 1) wraps to u64::MAX and saturates: refused.
        let extent = if rc { len } else { 1 };
        bad |= back.wrapping_sub(1).saturating_add(extent) > start.saturating_add(dst);
        (prev, prev_dst, prev_rc) = (back, dst, rc);
        dst += len;
        *token = Token { lit_len: lit_len as u32, match_len: len as u32, back, rc };
    }
    out.token_pos[t0 + nmatch] = (base + dst) as u32;
    out.lit_pos[t0 + nmatch] = (lit_base + lits) as u32;
    let lit_len = field(ll[nmatch], &mut bits);
    lits += lit_len;
    dst += lit_len;
    *last_token = Token { lit_len: lit_len as u32, match_len: 0, back: 0, rc: false };
    out.token_pos[t0 + nmatch + 1] = (base + dst) as u32;

    if bad || dst != unit.len as u64 || lits != unit.nlit as u64 {
        out.tokens.truncate(t0);
        out.token_pos.truncate(t0 + 1);
        out.lit_pos.truncate(t0);
        return Err(parse_tokens_checked(codes, nmatch, extra, unit, out).err().unwrap_or_else(|| {
            DecodeError::Invalid { what: "slice tokens", detail: "the fast and the checked parse disagree".to_string() }
        }));
    }
    bits.finish()
}

/// The token parse with a check at every step, for the exact error message (and as the reference in tests).
/// Appends to `out` like [`parse_tokens`].
fn parse_tokens_checked(
    codes: &[u8],
    nmatch: usize,
    extra: &[u8],
    unit: SliceUnit,
    out: &mut ParsedBlock,
) -> Result<(), DecodeError> {
    let (ll, rest) = codes.split_at(nmatch + 1);
    let (ml, of) = rest.split_at(nmatch);
    let slice_len = unit.len as u64;
    let nlit = unit.nlit as u64;
    let mut bits = BitReader { bytes: extra, bitpos: 0 };
    // The entry for the slice's start is already there: pushed for each token below, it starts over.
    out.token_pos.pop();

    // dst: offset in the slice where the next token starts; lits: literals used so far. Both stay ≤ slice_len
    // ≤ 2^20 (checked per token) and fields are < 2^44, so no sum below can overflow.
    let mut dst = 0u64;
    let mut lits = 0u64;
    let mut prev = None;
    for t in 0..=nmatch {
        out.token_pos.push(unit.base + dst as u32);
        out.lit_pos.push(unit.lit_base + lits as u32);
        let lit_len = read_field(ll[t], LEN_CODE_LIMIT, &mut bits, "literal-run code", t)?;
        lits += lit_len;
        dst += lit_len;
        if lits > nlit || dst > slice_len {
            return Err(overrun(t, "literal run", lit_len, dst, lits, slice_len, nlit));
        }
        let mut token = Token { lit_len: lit_len as u32, match_len: 0, back: 0, rc: false };
        if t < nmatch {
            let len = read_field(ml[t], LEN_CODE_LIMIT, &mut bits, "match-length code", t)? + 2;
            let code = of[t];
            let (back, rc) = read_distance(code, prev, dst, &mut bits, t)?;
            prev = Some(PrevMatch { back, dst, rc });
            let abs_dst = unit.start.saturating_add(dst);
            if !rc && back > abs_dst {
                return Err(DecodeError::Invalid {
                    what: "match distance",
                    detail: format!(
                        "token {t}: code {code}: back {back} reaches before the stream start from position {abs_dst}"
                    ),
                });
            }
            // back ≤ 2^40 + 2^21 (explicit or continued) and len < 2^41: no overflow.
            if rc && back + len - 1 > abs_dst {
                return Err(DecodeError::Invalid {
                    what: "match distance",
                    detail: format!(
                        "token {t}: code {code}: reverse-complement back {back} with length {len} reaches before the \
                         stream start from position {abs_dst} (back + length − 1 = {})",
                        back + len - 1
                    ),
                });
            }
            dst += len;
            if dst > slice_len {
                return Err(overrun(t, "match", len, dst, lits, slice_len, nlit));
            }
            token.match_len = len as u32;
            token.back = back;
            token.rc = rc;
        }
        out.tokens.push(token);
    }
    out.token_pos.push(unit.base + dst as u32);
    if dst != slice_len || lits != nlit {
        return Err(DecodeError::Invalid {
            what: "slice token lengths",
            detail: format!("tokens cover {dst} of {slice_len} bytes and {lits} of {nlit} literals"),
        });
    }
    bits.finish()
}

#[cold]
fn overrun(t: usize, what: &str, value: u64, dst: u64, lits: u64, slice_len: u64, nlit: u64) -> DecodeError {
    DecodeError::Invalid {
        what: "slice token lengths",
        detail: format!(
            "token {t}: {what} of {value} runs to slice offset {dst} (slice length {slice_len}) with {lits} of \
             {nlit} literals"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::cut::cut_slices;
    use crate::codec::tables::Table;
    use proptest::prelude::*;

    mod contexts;
    mod rc;

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
            let back = 1 + selector % reach.min(MAX_BACK);
            tokens.push(Token { lit_len, match_len, back, rc: false });
            dst += match_len as u64;
        }
        tokens.push(Token { lit_len: final_lits, match_len: 0, back: 0, rc: false });
        let nlit: u64 = tokens.iter().map(|t| t.lit_len as u64).sum();
        let literals = (0..nlit).map(|i| b"ACGT"[(i as usize * 7 + seed as usize) % 4] ^ (i % 97 == 0) as u8).collect();
        (tokens, literals)
    }

    fn block_len_of(tokens: &[Token]) -> u32 {
        tokens.iter().map(|t| t.lit_len + t.match_len).sum()
    }

    /// The stream byte at absolute position `p` before a test block: a fixed function of `p`.
    fn outside_byte(p: u64) -> u8 {
        (p.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56) as u8
    }

    /// The block's decoded bytes by the byte-wise definition of FORMAT.md §1, sources before the block read
    /// through [`outside_byte`].
    fn block_bytes(start: u64, tokens: &[Token], literals: &[u8]) -> Vec<u8> {
        reference_block_bytes(start, tokens, literals, outside_byte)
    }

    /// Slice size for a test block: 2 KiB, or more where a block would need more than 32 slices.
    fn test_slice_log(len: u32) -> u8 {
        let need = (32 - len.max(1).leading_zeros()) as u8;
        11.max(need.saturating_sub(5))
    }

    fn shape(start: u64, len: u32, lanes: u32) -> BlockShape {
        BlockShape { start, len, slice_log: test_slice_log(len), lanes }
    }

    /// Encodes with tables built from the block's own (cut) symbols; returns the tables, the payload and the
    /// slices the encoder cut.
    fn encode_with_own_tables(
        start: u64,
        tokens: &[Token],
        literals: &[u8],
        lanes: u32,
    ) -> (TableSet, Vec<u8>, Vec<SliceTokens>) {
        let block = block_bytes(start, tokens, literals);
        let slice_len = 1usize << test_slice_log(block.len() as u32);
        let mut stats = SymbolStats::default();
        count_symbols(tokens, literals, &block, slice_len, &mut stats);
        let tables = TableSet::from_stats(&stats);
        let mut payload = Vec::new();
        encode_block(tokens, literals, &block, slice_len, &tables, lanes, &mut payload);
        (tables, payload, cut_slices(tokens, literals, &block, slice_len))
    }

    /// Checks a parsed unit against the tokens and literals it should hold (its own prefix sums included).
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

    /// Decodes the whole block, then every slice on its own, and checks both against the cut parse.
    fn check_block_and_slices(payload: &[u8], tables: &TableSet, shape: BlockShape, slices: &[SliceTokens]) {
        let parsed = decode_block(payload, tables, shape).expect("round trip decodes");
        let all_tokens: Vec<Token> = slices.iter().flat_map(|s| s.tokens.iter().copied()).collect();
        let all_literals: Vec<u8> = slices.iter().flat_map(|s| s.literals.iter().copied()).collect();
        check_parsed(&parsed, &all_tokens, &all_literals, shape.start);
        let slice_len = 1u32 << shape.slice_log;
        for (j, s) in slices.iter().enumerate() {
            let one = decode_slice(payload, tables, shape, j).expect("slice decodes alone");
            check_parsed(&one, &s.tokens, &s.literals, shape.start + (j as u32 * slice_len) as u64);
            assert_eq!(one.len, (shape.len - j as u32 * slice_len).min(slice_len));
        }
    }

    /// Encodes, decodes the whole block and every slice on its own, and checks both against the cut parse.
    fn round_trip(start: u64, tokens: &[Token], literals: &[u8], lanes: u32) -> Vec<u8> {
        let (tables, payload, slices) = encode_with_own_tables(start, tokens, literals, lanes);
        let len = block_len_of(tokens);
        let shape = shape(start, len, lanes);
        check_block_and_slices(&payload, &tables, shape, &slices);
        assert!(decode_slice(&payload, &tables, shape, slices.len()).is_err());
        payload
    }

    #[test]
    fn literal_only_blocks() {
        for lanes in [1, 2] {
            round_trip(0, &[Token { lit_len: 5, match_len: 0, back: 0, rc: false }], b"hello", lanes);
            // A block of zero bytes has no slices at all: an empty payload.
            assert!(round_trip(0, &[Token::default()], b"", lanes).is_empty());
            let long: Vec<u8> = (0..5000u32).map(|i| (i * 7 % 251) as u8).collect();
            round_trip(77, &[Token { lit_len: 5000, match_len: 0, back: 0, rc: false }], &long, lanes);
        }
    }

    #[test]
    fn periodic_and_far_matches() {
        let tokens = [
            Token { lit_len: 1, match_len: 1000, back: 1, rc: false },
            Token { lit_len: 3, match_len: 17, back: 3, rc: false },
            Token { lit_len: 0, match_len: 2, back: MAX_BACK - 5, rc: false },
            Token { lit_len: 0, match_len: 0, back: 0, rc: false },
        ];
        round_trip(MAX_BACK, &tokens, b"ACGT", 2);
    }

    #[test]
    fn largest_fields() {
        // lit_len and match_len just under 2^20 in a 1 MiB block, back at the 2^40 limit.
        let tokens = [
            Token { lit_len: 300_000, match_len: (1 << 20) - 300_000 - 10, back: MAX_BACK, rc: false },
            Token { lit_len: 10, match_len: 0, back: 0, rc: false },
        ];
        let literals = vec![7u8; 300_010];
        round_trip(MAX_BACK, &tokens, &literals, 2);
    }

    /// Encodes `tokens` as a block at `start` and returns what decoding the whole block says.
    fn decode_as(
        payload: &[u8],
        tables: &TableSet,
        start: u64,
        len: u32,
        lanes: u32,
    ) -> Result<ParsedBlock, DecodeError> {
        decode_block(payload, tables, shape(start, len, lanes))
    }

    #[test]
    fn refuses_back_before_stream_start() {
        let tokens = [Token { lit_len: 2, match_len: 4, back: 3, rc: false }, Token::default()];
        let (tables, payload, _) = encode_with_own_tables(1, &tokens, b"ab", 2);
        let err = decode_as(&payload, &tables, 0, 6, 2).unwrap_err();
        assert!(matches!(err, DecodeError::Invalid { what: "match distance", .. }), "{err}");
        // The same payload is fine one byte further into the stream.
        assert!(decode_as(&payload, &tables, 1, 6, 2).is_ok());
    }

    #[test]
    fn refuses_wrong_block_length_lanes_and_slice_log() {
        let tokens = [
            Token { lit_len: 2, match_len: 4, back: 1, rc: false },
            Token { lit_len: 1, match_len: 0, back: 0, rc: false },
        ];
        let (tables, payload, _) = encode_with_own_tables(0, &tokens, b"abc", 2);
        assert!(decode_as(&payload, &tables, 0, 7, 2).is_ok());
        for len in [0, 6, 8, 3000, 1 << 20] {
            assert!(decode_as(&payload, &tables, 0, len, 2).is_err(), "len {len}");
        }
        let too_long = BlockShape { start: 0, len: (1 << 20) + 1, slice_log: 15, lanes: 2 };
        assert!(matches!(decode_block(&payload, &tables, too_long), Err(DecodeError::Limit { .. })));
        for lanes in [0, 1, 3, 4, 64] {
            assert!(decode_as(&payload, &tables, 0, 7, lanes).is_err(), "lanes {lanes}");
        }
        for slice_log in [0, 8, 21, 255] {
            let shape = BlockShape { start: 0, len: 7, slice_log, lanes: 2 };
            assert!(decode_block(&payload, &tables, shape).is_err(), "slice_log {slice_log}");
            assert!(decode_slice(&payload, &tables, shape, 0).is_err(), "slice_log {slice_log}");
        }
    }

    #[test]
    fn refuses_extra_stream_mismatches() {
        // lit_len 20 needs 3 extra bits: one byte whose 5 high bits must be zero.
        let tokens = [Token { lit_len: 20, match_len: 0, back: 0, rc: false }];
        let literals = [1u8; 20];
        let (tables, payload, _) = encode_with_own_tables(0, &tokens, &literals, 1);
        assert!(decode_as(&payload, &tables, 0, 20, 1).is_ok());
        let last = payload.len() - 1;
        let mut dirty = payload.clone();
        dirty[last] |= 0x80;
        assert!(matches!(decode_as(&dirty, &tables, 0, 20, 1), Err(DecodeError::Invalid { .. })));
        // One extra byte appended, with extra_len (byte 3 of the slice, after a 1-byte directory) and the
        // directory patched to match.
        let mut longer = payload.clone();
        assert_eq!((longer[0] as usize, longer[4]), (payload.len() - 1, 1));
        longer[0] += 1;
        longer[4] = 2;
        longer.push(0);
        let err = decode_as(&longer, &tables, 0, 20, 1).unwrap_err();
        assert!(matches!(err, DecodeError::Invalid { what: "extra-bits stream", .. }), "{err}");
    }

    #[test]
    fn refuses_payload_length_mismatch_and_unused_tables() {
        let tokens = [Token { lit_len: 3, match_len: 0, back: 0, rc: false }];
        let (tables, payload, _) = encode_with_own_tables(0, &tokens, b"xyz", 2);
        let mut longer = payload.clone();
        longer.push(0);
        assert!(decode_as(&longer, &tables, 0, 3, 2).is_err());
        assert!(decode_as(&payload[..payload.len() - 1], &tables, 0, 3, 2).is_err());
        // The directory patched to the longer slice: now the slice itself is the wrong length.
        longer[0] += 1;
        let err = decode_as(&longer, &tables, 0, 3, 2).unwrap_err();
        assert!(matches!(err, DecodeError::Invalid { what: "slice payload length", .. }), "{err}");
        let no_lit = TableSet { lit: Table::default(), ..tables.clone() };
        assert!(matches!(decode_as(&payload, &no_lit, 0, 3, 2), Err(DecodeError::Rans { .. })));
    }

    /// A three-slice block (5000 literal bytes, slices of 2 KiB) and its payload.
    fn three_slices(lanes: u32) -> (TableSet, Vec<u8>) {
        let long: Vec<u8> = (0..5000u32).map(|i| b"ACGT"[(i * 7 % 13 % 4) as usize]).collect();
        let (tables, payload, slices) =
            encode_with_own_tables(0, &[Token { lit_len: 5000, match_len: 0, back: 0, rc: false }], &long, lanes);
        assert_eq!(slices.len(), 3);
        (tables, payload)
    }

    #[test]
    fn directory_must_add_up() {
        let (tables, payload) = three_slices(4);
        let dir = SliceDirectory::parse(&payload, 3).unwrap();
        let lens: Vec<usize> = dir.slices().map(|s| s.len()).collect();
        let dir_len = payload.len() - lens.iter().sum::<usize>();
        assert!(decode_as(&payload, &tables, 0, 5000, 2).is_ok());
        // Lying lengths that keep the sum: the bytes move between slices and each slice's own checks refuse.
        for (a, b) in [(0usize, 1usize), (1, 0), (1, 2), (2, 1)] {
            let mut lying = lens.clone();
            lying[a] += 1;
            lying[b] -= 1;
            let mut p = Vec::new();
            lying.iter().for_each(|&l| varint::write(l as u64, &mut p));
            if p.len() != dir_len {
                continue;
            }
            p.extend_from_slice(&payload[dir_len..]);
            assert!(decode_as(&p, &tables, 0, 5000, 2).is_err(), "lengths {lying:?}");
            let shape = shape(0, 5000, 2);
            // The slice that kept its bytes still decodes alone; the two that traded bytes do not.
            let untouched = 3 - a - b;
            assert!(decode_slice(&p, &tables, shape, untouched).is_ok());
            assert!(decode_slice(&p, &tables, shape, a).is_err());
            assert!(decode_slice(&p, &tables, shape, b).is_err());
        }
        // Sums that do not match the payload: one too many, one too few, a huge length, a truncated directory.
        for (j, delta) in [(0usize, 1i64), (2, -1), (1, 1 << 40)] {
            let mut p = Vec::new();
            for (i, &l) in lens.iter().enumerate() {
                let l = if i == j { (l as i64 + delta) as u64 } else { l as u64 };
                varint::write(l, &mut p);
            }
            p.extend_from_slice(&payload[dir_len..]);
            let err = decode_as(&p, &tables, 0, 5000, 2).unwrap_err();
            assert!(matches!(err, DecodeError::Invalid { what: "slice directory", .. }), "{err}");
            for s in 0..3 {
                assert!(decode_slice(&p, &tables, shape(0, 5000, 2), s).is_err());
            }
        }
        for cut in 0..dir_len {
            assert!(decode_as(&payload[..cut], &tables, 0, 5000, 2).is_err());
        }
        // A directory varint that never ends.
        let endless = vec![0x80u8; 40];
        let err = decode_as(&endless, &tables, 0, 5000, 2).unwrap_err();
        assert!(matches!(err, DecodeError::Invalid { what: "slice directory", .. }), "{err}");
    }

    #[test]
    fn slices_decode_alone_without_reading_the_others() {
        let (tables, payload) = three_slices(2);
        let dir = SliceDirectory::parse(&payload, 3).unwrap();
        let lens: Vec<usize> = dir.slices().map(|s| s.len()).collect();
        let dir_len = payload.len() - lens.iter().sum::<usize>();
        // Garbage in slice 0 and slice 2: slice 1 still decodes alone; the whole block does not.
        let mut p = payload.clone();
        p[dir_len + 5] ^= 0x55;
        let last = p.len() - 3;
        p[last] ^= 0x11;
        let shape = shape(0, 5000, 2);
        let one = decode_slice(&p, &tables, shape, 1).unwrap();
        assert_eq!((one.start, one.len), (2048, 2048));
        assert!(decode_block(&p, &tables, shape).is_err());
        let err = decode_slice(&p, &tables, shape, 0).unwrap_err();
        assert!(err.to_string().contains("slice 0") || matches!(err, DecodeError::Limit { .. }), "{err}");
    }

    #[test]
    fn slices_decoded_together_equal_slices_decoded_alone() {
        for lanes in [1, 2] {
            let (tables, payload) = three_slices(lanes);
            let mut bad = payload.clone();
            let last = bad.len() - 2;
            bad[last] ^= 0x21;
            // A second block with its own tables, to mix table sets in one lock-step group.
            let (t2, p2, _) = encode_with_own_tables(
                9000,
                &[Token { lit_len: 700, match_len: 0, back: 0, rc: false }],
                &[7; 700],
                lanes,
            );
            let s2 = shape(9000, 700, lanes);
            let shape = shape(0, 5000, lanes);
            let other = BlockShape { start: 5000, ..shape };
            for jobs in [
                vec![
                    (&payload[..], shape, 2, &tables),
                    (&payload[..], shape, 0, &tables),
                    (&payload[..], other, 1, &tables),
                ],
                vec![
                    (&payload[..], shape, 0, &tables),
                    (&bad[..], shape, 2, &tables),
                    (&payload[..], shape, 1, &tables),
                    (&bad[..], shape, 0, &tables),
                ],
                vec![
                    (&p2[..], s2, 0, &t2),
                    (&payload[..], shape, 1, &tables),
                    (&p2[..], s2, 0, &t2),
                    (&payload[..], shape, 2, &tables),
                ],
                vec![(&payload[..], shape, 1, &tables); 5],
                vec![(&payload[..], shape, 3, &tables)],
                vec![],
            ] {
                let together = decode_slices(&jobs);
                let alone: Vec<_> = jobs.iter().map(|&(p, sh, j, t)| decode_slice(p, t, sh, j)).collect();
                assert_eq!(together, alone, "lanes {lanes}");
            }
        }
    }

    #[test]
    fn slice_prefixes_hold_the_whole_tokens_and_the_first_literals() {
        for lanes in [1, 2] {
            let (tables, payload) = three_slices(lanes);
            let shape = shape(0, 5000, lanes);
            for j in 0..3 {
                let whole = decode_slice(&payload, &tables, shape, j).unwrap();
                assert!(whole.is_complete() && whole.serves(u32::MAX));
                // Every end, in lock-step groups that mix prefixes of all lengths with whole slices.
                let ends: Vec<u32> = (1..=whole.len + 1).chain([u32::MAX]).collect();
                for group in ends.chunks(5) {
                    let jobs = vec![(&payload[..], shape, j, &tables); group.len()];
                    for (&end, prefix) in group.iter().zip(decode_slice_prefixes(&jobs, group)) {
                        let prefix = prefix.unwrap();
                        let kept = (end as usize).min(whole.literals.len());
                        assert_eq!(
                            (&prefix.tokens, &prefix.token_pos, &prefix.lit_pos),
                            (&whole.tokens, &whole.token_pos, &whole.lit_pos),
                            "slice {j} end {end}"
                        );
                        assert_eq!(prefix.literals, whole.literals[..kept], "slice {j} end {end}");
                        assert!(prefix.serves(end.min(whole.len)), "slice {j} end {end}");
                        assert_eq!(prefix.is_complete(), kept == whole.literals.len());
                    }
                }
            }
            // A prefix of a corrupt stream is still refused where its fields are wrong, never a panic.
            let mut bad = payload.clone();
            let last = bad.len() - 2;
            bad[last] ^= 0x21;
            let jobs = vec![(&bad[..], shape, 2, &tables); 3];
            let _ = decode_slice_prefixes(&jobs, &[1, 100, u32::MAX]);
            // Ends that do not pair with the jobs: each job decoded whole, alone.
            let jobs = vec![(&payload[..], shape, 1, &tables); 3];
            let whole = decode_slice(&payload, &tables, shape, 1);
            assert_eq!(decode_slice_prefixes(&jobs, &[1, 2]), vec![whole; 3]);
        }
    }

    #[test]
    fn huge_counts_are_refused_before_allocation() {
        let mut slice = Vec::new();
        for v in [u64::MAX >> 1, 0, 0, 0] {
            varint::write(v, &mut slice);
        }
        let mut payload = Vec::new();
        varint::write(slice.len() as u64, &mut payload);
        payload.extend_from_slice(&slice);
        let shape = BlockShape { start: 0, len: 2048, slice_log: 11, lanes: 1 };
        let err = decode_block(&payload, &TableSet::default(), shape).unwrap_err();
        assert!(matches!(err, DecodeError::Limit { what: "nmatch", limit: 1024, .. }), "{err}");
        let mut slice = Vec::new();
        for v in [0, 0, u64::MAX, u64::MAX] {
            varint::write(v, &mut slice);
        }
        let mut payload = Vec::new();
        varint::write(slice.len() as u64, &mut payload);
        payload.extend_from_slice(&slice);
        assert!(decode_block(&payload, &TableSet::default(), BlockShape { len: 1, ..shape }).is_err());
    }

    #[test]
    fn decode_into_reuses_buffers() {
        let a = [
            Token { lit_len: 4, match_len: 8, back: 2, rc: false },
            Token { lit_len: 1, match_len: 0, back: 0, rc: false },
        ];
        let b = [Token { lit_len: 2, match_len: 0, back: 0, rc: false }];
        let (ta, pa, _) = encode_with_own_tables(0, &a, b"ACGTA", 2);
        let (tb, pb, _) = encode_with_own_tables(13, &b, b"GG", 2);
        let mut parsed = ParsedBlock::default();
        decode_block_into(&pa, &ta, shape(0, 13, 2), &mut parsed).unwrap();
        decode_block_into(&pb, &tb, shape(13, 2, 2), &mut parsed).unwrap();
        check_parsed(&parsed, &b, b"GG", 13);
        decode_slice_into(&pa, &ta, shape(0, 13, 2), 0, &mut parsed).unwrap();
        check_parsed(&parsed, &a, b"ACGTA", 0);
    }

    /// Tokens of mutated copies, as a parser finds them between related genomes: runs of matches at one
    /// distance broken by a substituted base (one literal, same distance after it) or a small indel (the
    /// distance moves by 1 to 4), now and then a jump to an unrelated far source. Backs stay below 2^21.
    fn mutated_copy_tokens(len: u32, rng: &mut XorShift) -> (Vec<Token>, Vec<u8>) {
        let mut tokens = Vec::new();
        let mut back = 300_000u64;
        let mut dst = 0u32;
        loop {
            let lit_len = if rng.next() % 4 == 0 { (rng.next() % 3) as u32 } else { 1 };
            let match_len = 2 + rng.next() % 60;
            if dst as u64 + lit_len as u64 + match_len >= len as u64 {
                break;
            }
            back = match rng.next() % 16 {
                0 => 1 + rng.next() % 1_000_000,
                1..=3 => back.saturating_add_signed(OF_CONTINUATION_DELTAS[(rng.next() % 8) as usize]).max(1),
                _ => back,
            };
            tokens.push(Token { lit_len, match_len: match_len as u32, back, rc: false });
            dst += lit_len + match_len as u32;
        }
        tokens.push(Token { lit_len: len - dst, match_len: 0, back: 0, rc: false });
        let nlit: u32 = tokens.iter().map(|t| t.lit_len).sum();
        let literals = (0..nlit).map(|_| b"ACGT"[(rng.next() % 4) as usize]).collect();
        (tokens, literals)
    }

    #[test]
    fn continuations_round_trip_and_are_used() {
        let mut rng = XorShift(0x1234_5678_9abc_def1);
        for (len, lanes) in [(600u32, 1u32), (5000, 2), (70_000, 2), (1 << 20, 1)] {
            let start = 1u64 << 22;
            let (tokens, literals) = mutated_copy_tokens(len, &mut rng);
            let (tables, _, slices) = encode_with_own_tables(start, &tokens, &literals, lanes);
            // Every continuation code is in use, and most matches after the first of their slice take one.
            let used: Vec<u16> = (OF_EXPLICIT_CODES..OF_REVERSE_BASE).map(|c| tables.of.freq[c]).collect();
            if len >= 70_000 {
                assert!(used.iter().all(|&f| f > 0), "continuation frequencies {used:?}");
            }
            let (mut cont, mut later) = (0, 0);
            for s in &slices {
                let mut prev = 0;
                for t in &s.tokens[..s.tokens.len() - 1] {
                    later += (prev != 0) as u32;
                    cont += continuation_index(t.back, false, 0, PrevMatch::forward(prev)).is_some() as u32;
                    prev = t.back;
                }
            }
            assert!(cont * 10 > later * 8, "{cont} continuations among {later} later matches");
            round_trip(start, &tokens, &literals, lanes);
        }
    }

    #[test]
    fn distance_code_prefers_continuations() {
        assert_eq!(distance_code(1000, false, 0, PrevMatch::forward(0)), logcode::encode(999));
        assert_eq!(distance_code(1000, false, 0, PrevMatch::forward(1000)), (OF_EXPLICIT_CODES as u32, 0, 0));
        for (k, &d) in OF_CONTINUATION_DELTAS.iter().enumerate() {
            let back = (1000 + d) as u64;
            assert_eq!(
                distance_code(back, false, 0, PrevMatch::forward(1000)),
                (OF_EXPLICIT_CODES as u32 + k as u32, 0, 0),
                "delta {d}"
            );
        }
        assert_eq!(distance_code(1005, false, 0, PrevMatch::forward(1000)), logcode::encode(1004));
        assert_eq!(distance_code(1, false, 0, PrevMatch::forward(1 << 40)), logcode::encode(0));
        assert_eq!(continuation_index(1 << 50, false, 0, PrevMatch::forward(1)), None);
    }

    /// A block payload of the given slices, each written with `of_field` choosing the OF fields of slice `j`.
    fn payload_with(
        slices: &[SliceTokens],
        tables: &TableSet,
        lanes: u32,
        of_field: impl Fn(usize, usize, u64, u64) -> (u32, u32, u64),
    ) -> Vec<u8> {
        let payloads: Vec<Vec<u8>> = slices
            .iter()
            .enumerate()
            .map(|(j, s)| {
                let mut p = Vec::new();
                encode_slice_with(&s.tokens, &s.literals, tables, lanes, &mut p, |t, token, _, prev| {
                    of_field(j, t, token.back, prev.map_or(0, |p| p.back))
                });
                p
            })
            .collect();
        let mut out = Vec::new();
        payloads.iter().for_each(|p| varint::write(p.len() as u64, &mut out));
        payloads.iter().for_each(|p| out.extend_from_slice(p));
        out
    }

    fn assert_refused(result: Result<ParsedBlock, DecodeError>, needles: &[&str]) {
        let err = result.expect_err("hostile payload must be refused");
        let text = err.to_string();
        assert!(matches!(err, DecodeError::Invalid { .. }), "{text}");
        for n in needles {
            assert!(text.contains(n), "{text:?} lacks {n:?}");
        }
    }

    #[test]
    fn refuses_continuations_without_a_valid_previous_match() {
        let tables = TableSet::every_symbol();
        let code = |k: usize| (OF_EXPLICIT_CODES + k) as u32;
        // One slice: three matches at back 1, 1, 2 after 4 literals (bytes 0..4 literal, matches of 3 bytes).
        let tokens = [
            Token { lit_len: 4, match_len: 3, back: 1, rc: false },
            Token { lit_len: 0, match_len: 3, back: 1, rc: false },
            Token { lit_len: 0, match_len: 3, back: 2, rc: false },
            Token { lit_len: 2, match_len: 0, back: 0, rc: false },
        ];
        let slice = SliceTokens { tokens: tokens.to_vec(), literals: b"ACGTAC".to_vec() };
        let shape = BlockShape { start: 0, len: 15, slice_log: 11, lanes: 2 };
        for lanes in [1, 2] {
            let shape = BlockShape { lanes, ..shape };
            // As the encoder writes it: explicit, then continuations +0 and +1.
            let good = payload_with(std::slice::from_ref(&slice), &tables, lanes, |_, _, back, prev| {
                distance_code(back, false, 0, PrevMatch::forward(prev))
            });
            assert_eq!(decode_block(&good, &tables, shape).unwrap().tokens, tokens);
            // The first match of a slice may not continue anything.
            let first = payload_with(std::slice::from_ref(&slice), &tables, lanes, |_, t, back, prev| {
                if t == 0 {
                    (code(0), 0, 0)
                } else {
                    distance_code(back, false, 0, PrevMatch::forward(prev))
                }
            });
            assert_refused(decode_block(&first, &tables, shape), &["slice 0", "token 0", "no earlier match"]);
            assert_refused(decode_slice(&first, &tables, shape, 0), &["slice 0", "no earlier match"]);
            // Back 1 continued by -1 is 0.
            let zero = payload_with(std::slice::from_ref(&slice), &tables, lanes, |_, t, back, prev| {
                if t == 1 {
                    (code(2), 0, 0)
                } else {
                    distance_code(back, false, 0, PrevMatch::forward(prev))
                }
            });
            assert_refused(decode_block(&zero, &tables, shape), &["slice 0", "token 1", "into 0"]);
            // Matches start at destinations 4, 7 and 10. Back 1 continued by +4 is 5 (valid at 7), and an explicit
            // code after a continuation starts over.
            let far = payload_with(std::slice::from_ref(&slice), &tables, lanes, |_, t, back, _| match t {
                1 => (code(7), 0, 0),
                _ => logcode::encode(back - 1),
            });
            let parsed = decode_block(&far, &tables, shape).unwrap();
            assert_eq!(parsed.tokens.iter().map(|t| t.back).collect::<Vec<_>>(), [1, 5, 2, 0]);
            // Explicit back 7 at destination 7, continued by +4 to 11 at destination 10: before the stream start
            // (and fine one byte further into the stream).
            let before_start = payload_with(std::slice::from_ref(&slice), &tables, lanes, |_, t, back, _| match t {
                1 => logcode::encode(6),
                2 => (code(7), 0, 0),
                _ => logcode::encode(back - 1),
            });
            assert_refused(decode_block(&before_start, &tables, shape), &["slice 0", "token 2", "before the stream"]);
            let later = BlockShape { start: 1, ..shape };
            assert_eq!(decode_block(&before_start, &tables, later).unwrap().tokens[2].back, 11);
        }
    }

    #[test]
    fn continuations_do_not_cross_slices() {
        // Two slices of 512 bytes; slice 1's first match has the back of slice 0's last, and a payload that
        // codes it as a continuation is refused (by the whole-block and the one-slice decoders alike).
        let tables = TableSet::every_symbol();
        let mut tokens = vec![Token { lit_len: 12, match_len: 500, back: 7, rc: false }];
        tokens.push(Token { lit_len: 0, match_len: 400, back: 7, rc: false });
        tokens.push(Token { lit_len: 112, match_len: 0, back: 0, rc: false });
        let literals: Vec<u8> = (0..124u32).map(|i| b"ACGT"[(i % 4) as usize]).collect();
        let block = block_bytes(1000, &tokens, &literals);
        let slices = cut_slices(&tokens, &literals, &block, 512);
        assert_eq!(slices.len(), 2);
        assert_eq!(slices[1].tokens[0].back, 7);
        let shape = BlockShape { start: 1000, len: 1024, slice_log: 9, lanes: 2 };
        let good = payload_with(&slices, &tables, 2, |_, _, back, prev| {
            distance_code(back, false, 0, PrevMatch::forward(prev))
        });
        let parsed = decode_block(&good, &tables, shape).unwrap();
        assert_eq!(reference_block_bytes(1000, &parsed.tokens, &parsed.literals, outside_byte), block);
        let carried = payload_with(&slices, &tables, 2, |j, t, back, prev| {
            if j == 1 && t == 0 {
                (OF_EXPLICIT_CODES as u32, 0, 0)
            } else {
                distance_code(back, false, 0, PrevMatch::forward(prev))
            }
        });
        assert_refused(decode_block(&carried, &tables, shape), &["slice 1", "no earlier match"]);
        assert_refused(decode_slice(&carried, &tables, shape, 1), &["slice 1", "no earlier match"]);
        assert!(decode_slice(&carried, &tables, shape, 0).is_ok());
    }

    #[test]
    fn matches_crossing_slices_round_trip_for_every_lane_count() {
        // Far, near and periodic matches across the 2 KiB boundaries of a 16 KiB block.
        let mut tokens = vec![Token { lit_len: 10, match_len: 3000, back: 1, rc: false }];
        tokens.push(Token { lit_len: 5, match_len: 2050, back: 4, rc: false });
        tokens.push(Token { lit_len: 0, match_len: 5000, back: 100_000, rc: false });
        tokens.push(Token { lit_len: 1, match_len: 4096, back: 3000, rc: false });
        tokens.push(Token { lit_len: 2000, match_len: 0, back: 0, rc: false });
        let nlit: u32 = tokens.iter().map(|t| t.lit_len).sum();
        let literals: Vec<u8> = (0..nlit).map(|i| b"ACGTN"[(i % 5) as usize]).collect();
        for lanes in [1, 2] {
            round_trip(1 << 20, &tokens, &literals, lanes);
        }
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
                        tokens.push(Token { lit_len: block_len - dst, match_len: 0, back: 0, rc: false });
                        break;
                    }
                    let back = 1 + rng.next() % (start + (dst + lit_len) as u64).min(100_000_000);
                    tokens.push(Token { lit_len, match_len, back, rc: false });
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
            let block_len = 1u32 << 14;
            let blocks = dna_like_blocks(256, block_len, share, &mut rng);
            let bytes: Vec<Vec<u8>> = blocks
                .iter()
                .enumerate()
                .map(|(i, (tokens, literals))| block_bytes((i as u64 + 1000) * block_len as u64, tokens, literals))
                .collect();
            for lanes in [1u32, 2] {
                let slice_len = 2048;
                let mut stats = SymbolStats::default();
                for ((tokens, literals), b) in blocks.iter().zip(&bytes) {
                    count_symbols(tokens, literals, b, slice_len, &mut stats);
                }
                let tables = TableSet::from_stats(&stats);
                let encode_start = std::time::Instant::now();
                let payloads: Vec<Vec<u8>> = blocks
                    .iter()
                    .zip(&bytes)
                    .map(|((tokens, literals), b)| {
                        let mut p = Vec::new();
                        encode_block(tokens, literals, b, slice_len, &tables, lanes, &mut p);
                        p
                    })
                    .collect();
                let encode_time = encode_start.elapsed();
                let mut parsed = ParsedBlock::default();
                let mut best = f64::MAX;
                for _ in 0..5 {
                    let t = std::time::Instant::now();
                    for (i, payload) in payloads.iter().enumerate() {
                        let start = (i as u64 + 1000) * block_len as u64;
                        let shape = BlockShape { start, len: block_len, slice_log: 11, lanes };
                        decode_block_into(payload, &tables, shape, &mut parsed).unwrap();
                    }
                    best = best.min(t.elapsed().as_secs_f64());
                }
                let total = blocks.len() as f64 * block_len as f64;
                let packed: usize = payloads.iter().map(|p| p.len()).sum();
                let tokens: usize = blocks.iter().map(|b| b.0.len()).sum();
                println!(
                    "{name:>14}, {lanes:>2} lanes: decode {:7.1} MB/s, encode {:6.1} MB/s, ratio {:.3}, {:.1} B/token",
                    total / best / 1e6,
                    total / encode_time.as_secs_f64() / 1e6,
                    total / packed as f64,
                    total / tokens as f64
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
                                    final_lits in 0u32..100, lane_log in 0u32..2, seed: u8) {
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
        fn mutated_copies_round_trip(seed in 1u64.., len in 2u32..200_000, lane_log in 0u32..2) {
            let (tokens, literals) = mutated_copy_tokens(len, &mut XorShift(seed));
            round_trip(1 << 22, &tokens, &literals, 1 << lane_log);
        }

        #[test]
        fn corrupt_payloads_never_panic(start in 0u64..1000, shapes in shapes(), lane_log in 0u32..2, seed: u8,
                                        flips in proptest::collection::vec((any::<usize>(), 1u8..=255), 0..4),
                                        cut in proptest::option::of(any::<usize>()), slice_log in 9u8..12) {
            let shapes: Vec<_> = shapes.into_iter().take(20).map(|(l, m, b)| (l % 300, m % 300 + 2, b)).collect();
            let (tokens, literals) = build_block(start, &shapes, 5, seed);
            let lanes = 1 << lane_log;
            let block = block_bytes(start, &tokens, &literals);
            let mut stats = SymbolStats::default();
            count_symbols(&tokens, &literals, &block, 1 << slice_log, &mut stats);
            let tables = TableSet::from_stats(&stats);
            let mut payload = Vec::new();
            encode_block(&tokens, &literals, &block, 1 << slice_log, &tables, lanes, &mut payload);
            for (at, x) in flips {
                let n = payload.len();
                payload[at % n] ^= x;
            }
            if let Some(cut) = cut {
                payload.truncate(cut % (payload.len() + 1));
            }
            let len = block_len_of(&tokens);
            let shape = BlockShape { start, len, slice_log, lanes };
            let check = |parsed: &ParsedBlock, len: u32, start: u64| -> Result<(), TestCaseError> {
                // Whatever decodes must itself be a valid unit.
                prop_assert_eq!(*parsed.token_pos.last().unwrap(), len);
                prop_assert_eq!(parsed.token_pos.len(), parsed.tokens.len() + 1);
                let lits: u64 = parsed.tokens.iter().map(|t| t.lit_len as u64).sum();
                prop_assert_eq!(lits, parsed.literals.len() as u64);
                for (t, token) in parsed.tokens.iter().enumerate() {
                    let dst = start + (parsed.token_pos[t] + token.lit_len) as u64;
                    prop_assert!(token.back <= dst);
                }
                Ok(())
            };
            if let Ok(parsed) = decode_block(&payload, &tables, shape) {
                check(&parsed, len, start)?;
            }
            for j in 0..slice_count(len, slice_log) {
                if let Ok(parsed) = decode_slice(&payload, &tables, shape, j) {
                    check(&parsed, parsed.len, parsed.start)?;
                }
            }
        }

        #[test]
        fn random_bytes_never_panic(payload in proptest::collection::vec(any::<u8>(), 0..200), len in 0u32..5000,
                                    slice_log in 9u8..13, j in 0usize..10) {
            let mut stats = SymbolStats::default();
            stats.ll.iter_mut().for_each(|c| *c = 1);
            stats.ml.iter_mut().for_each(|c| *c = 1);
            stats.of.iter_mut().for_each(|c| *c = 1);
            stats.lit.iter_mut().for_each(|c| *c = 1);
            let tables = TableSet::from_stats(&stats);
            let shape = BlockShape { start: 0, len, slice_log, lanes: 2 };
            let _ = decode_block(&payload, &tables, shape);
            let _ = decode_slice(&payload, &tables, shape, j);
        }
    }
}
