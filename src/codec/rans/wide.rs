//! Context-coded literal lanes eight at once in the eight 32-bit slots of an AVX2 vector (or sixteen in two).
//!
//! A context-coded literal is one dependency chain a lane: the context's entry, three compares, a multiply, a
//! refill, the next context (FORMAT.md §3.4–3.5). The scalar lock step ([`super::contexts_round`]) interleaves
//! four lanes in general registers, where the states, positions, contexts and pointers of four lanes already fill
//! the register file; here a vector holds each of them for eight, the contexts' entries come in by two gathers
//! and the words by one, and a second vector's chain runs beside the first when there are lanes for it. The bases
//! are not stored one by one: the context register already keeps the last sixteen of each lane, so it is written
//! out every sixteen literals and unpacked into letters after the span.
//!
//! Same arithmetic as the scalar step, lane for lane, so the bytes are the same: the parent module's test
//! `context_lanes_match_one_by_one` checks every path against the format's rule run one literal at a time, on random
//! models and streams, hostile states and words that run out included.

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Lanes a vector holds.
pub(super) const WIDTH: usize = 8;

/// The most lanes one span runs: two vectors, whose chains interleave.
pub(super) const MAX_LANES: usize = 2 * WIDTH;

/// Literals a lane whose bases one context word keeps (2 bits each).
const HISTORY: usize = 16;

/// Whether this CPU can run [`span`] (std caches the answer).
pub(super) fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// The words one [`span`] call reads, all lanes' in one buffer so that a gather reaches them from one base: lane
/// `k`'s words start at `start[k]`, and every lane has `n + 2` of them (the most a span of `n` literals takes,
/// and the word after it, which a 4-byte gather of the last one reads too).
#[derive(Default)]
pub(super) struct SpanWords {
    words: Vec<u16>,
    start: [i32; MAX_LANES],
    /// The lanes laid out (whole vectors) and the literals a lane the layout serves.
    lanes: usize,
    literals: usize,
}

impl SpanWords {
    /// Lays out `n + 2` words a lane for the vectors `lanes` fill: `lanes[k]`'s from its position on (zeros past
    /// its end), zeros for the slots a vector has no lane for.
    pub fn fill(&mut self, lanes: &[&[u16]], n: usize) {
        let stride = n + 2;
        let slots = lanes.len().div_ceil(WIDTH).clamp(1, MAX_LANES / WIDTH) * WIDTH;
        self.words.clear();
        self.words.reserve(slots * stride);
        for k in 0..slots {
            // Below the buffer's length, which `decode` checks is below 2^31 (a span is at most a slice's
            // literals, so it is far below); a longer layout wraps here and is refused there.
            self.start[k] = self.words.len() as i32;
            let src = lanes.get(k).map_or(&[][..], |l| &l[..l.len().min(stride)]);
            self.words.extend_from_slice(src);
            self.words.resize((k + 1) * stride, 0);
        }
        self.lanes = slots;
        self.literals = n;
    }
}

/// The lanes of a span: states, contexts (unmasked, the newest base lowest) and, after it, how many words each
/// took.
pub(super) struct Lanes {
    pub x: [u32; MAX_LANES],
    pub ctx: [u32; MAX_LANES],
    pub taken: [u32; MAX_LANES],
}

/// Runs [`span`] over `vectors` (1 or 2) vectors of lanes when this CPU has AVX2 and the arguments meet its
/// contract (they do when they come from [`SpanWords::fill`] for `n` literals and a history of
/// [`history_len`]`(n)` words); else does nothing and returns false.
pub(super) fn decode(
    table: &[u64],
    mask: u32,
    vectors: usize,
    lanes: &mut Lanes,
    words: &SpanWords,
    n: usize,
    history: &mut [u32],
) -> bool {
    // The gathers index the words with i32s: the whole layout must be below 2^31 entries (a slice bounds it far
    // below that; the check keeps it so for any caller).
    let fits = table.len() > mask as usize
        && words.lanes >= WIDTH * vectors
        && words.literals >= n
        && words.words.len() <= i32::MAX as usize
        && history.len() >= history_len(n);
    #[cfg(target_arch = "x86_64")]
    if fits && available() {
        // SAFETY: just checked: AVX2, the table's length, the words' layout and the history's length.
        match vectors {
            1 => unsafe { span::<1>(table, mask, lanes, words, n, history) },
            2 => unsafe { span::<2>(table, mask, lanes, words, n, history) },
            _ => return false,
        }
        return true;
    }
    let _ = (fits, vectors, lanes);
    false
}

/// Words of history a span of `n` literals records: [`MAX_LANES`] after every sixteenth literal and after the
/// last.
pub(super) fn history_len(n: usize) -> usize {
    MAX_LANES * n.div_ceil(HISTORY)
}

/// Decodes `n` literals in each of the first `8·G` lanes, all sharing one context model (`table`, `mask + 1`
/// entries): what `n` rounds of the scalar step would, lane for lane. The `G` vectors are independent chains in
/// one loop, so that one's gathers wait while the other computes. `history` gets each lane's context after every
/// sixteenth literal and after the last, [`MAX_LANES`] words a record (see [`unpack`]).
///
/// # Safety
/// The CPU has AVX2 ([`available`]); `G <= 2`; `table.len() > mask as usize`; `words` was laid out by
/// [`SpanWords::fill`] for at least `n` literals; `history.len() >= history_len(n)`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn span<const G: usize>(
    table: &[u64],
    mask: u32,
    lanes: &mut Lanes,
    words: &SpanWords,
    n: usize,
    history: &mut [u32],
) {
    // SAFETY (every intrinsic below): AVX2 is enabled for this function and the caller checked the CPU has it;
    // loads and stores go through `loadu`/`storeu` on eight u32 inside arrays of MAX_LANES >= 8·G.
    let load = |a: &[u32; MAX_LANES], g: usize| unsafe { _mm256_loadu_si256(a[WIDTH * g..].as_ptr().cast()) };
    let mut x: [__m256i; G] = std::array::from_fn(|g| load(&lanes.x, g));
    let mut ctx: [__m256i; G] = std::array::from_fn(|g| load(&lanes.ctx, g));
    let start: [__m256i; G] =
        std::array::from_fn(|g| unsafe { _mm256_loadu_si256(words.start[WIDTH * g..].as_ptr().cast()) });
    let mut pos = start;
    let low16 = _mm256_set1_epi32(0xffff);
    let slots = _mm256_set1_epi32(0xfff);
    let scale = _mm256_set1_epi32(4096);
    let three = _mm256_set1_epi32(3);
    let zero = _mm256_setzero_si256();
    let vmask = _mm256_set1_epi32(mask as i32);
    // An entry is c1 | c2 << 16 | c3 << 32 | 4096 << 48: its low word at 8·ctx, its high word 4 bytes on.
    let entry_lo = table.as_ptr().cast::<i32>();
    // SAFETY: 4 bytes into the first entry, inside the table (it has at least one).
    let entry_hi = unsafe { entry_lo.add(1) };
    let word_base = words.words.as_ptr().cast::<i32>();
    for i in 0..n {
        for g in 0..G {
            let index = _mm256_and_si256(ctx[g], vmask);
            // SAFETY: every index is at most `mask` < table.len(), so each 4-byte read lies inside its entry.
            let (lo_word, hi_word) =
                unsafe { (_mm256_i32gather_epi32::<8>(entry_lo, index), _mm256_i32gather_epi32::<8>(entry_hi, index)) };
            let c1 = _mm256_and_si256(lo_word, low16);
            let c2 = _mm256_srli_epi32::<16>(lo_word);
            let c3 = _mm256_and_si256(hi_word, low16);
            let slot = _mm256_and_si256(x[g], slots);
            // -1 where the bound lies above the slot: the code is 3 minus their number (decode_packed's count of
            // bounds at or below it); the bounds rise, so the symbol's range starts at the largest bound at or
            // below the slot (or 0) and ends at the smallest above it (or 4096).
            let (a1, a2, a3) =
                (_mm256_cmpgt_epi32(c1, slot), _mm256_cmpgt_epi32(c2, slot), _mm256_cmpgt_epi32(c3, slot));
            let code = _mm256_add_epi32(three, _mm256_add_epi32(a1, _mm256_add_epi32(a2, a3)));
            let cum = _mm256_max_epi32(
                _mm256_andnot_si256(a1, c1),
                _mm256_max_epi32(_mm256_andnot_si256(a2, c2), _mm256_andnot_si256(a3, c3)),
            );
            let top = _mm256_min_epi32(
                _mm256_blendv_epi8(scale, c1, a1),
                _mm256_min_epi32(_mm256_blendv_epi8(scale, c2, a2), _mm256_blendv_epi8(scale, c3, a3)),
            );
            let freq = _mm256_sub_epi32(top, cum);
            let y =
                _mm256_sub_epi32(_mm256_add_epi32(_mm256_mullo_epi32(freq, _mm256_srli_epi32::<12>(x[g])), slot), cum);
            // SAFETY: a lane takes at most one word a literal, so before literal i its position is at most its
            // start + i < start + n, and the 4 bytes read there (this word and the next) lie in its n + 2 words.
            let word = _mm256_and_si256(unsafe { _mm256_i32gather_epi32::<2>(word_base, pos[g]) }, low16);
            let refill = _mm256_cmpeq_epi32(_mm256_srli_epi32::<16>(y), zero);
            x[g] = _mm256_blendv_epi8(y, _mm256_or_si256(_mm256_slli_epi32::<16>(y), word), refill);
            pos[g] = _mm256_sub_epi32(pos[g], refill);
            ctx[g] = _mm256_or_si256(_mm256_slli_epi32::<2>(ctx[g]), code);
        }
        if i % HISTORY == HISTORY - 1 || i + 1 == n {
            let at = MAX_LANES * (i / HISTORY);
            for (g, c) in ctx.iter().enumerate() {
                // SAFETY: i / HISTORY < n.div_ceil(HISTORY), so the record lies inside `history` (caller's
                // contract).
                unsafe { _mm256_storeu_si256(history[at + WIDTH * g..at + WIDTH * (g + 1)].as_mut_ptr().cast(), *c) };
            }
        }
    }
    for g in 0..G {
        let lanes_of = |a: &mut [u32; MAX_LANES]| a[WIDTH * g..WIDTH * (g + 1)].as_mut_ptr().cast::<__m256i>();
        // SAFETY: stores of eight u32 inside arrays of MAX_LANES >= 8·G.
        unsafe {
            _mm256_storeu_si256(lanes_of(&mut lanes.x), x[g]);
            _mm256_storeu_si256(lanes_of(&mut lanes.ctx), ctx[g]);
            _mm256_storeu_si256(lanes_of(&mut lanes.taken), _mm256_sub_epi32(pos[g], start[g]));
        }
    }
}

/// The letters of four bases packed in a byte, the oldest in its top two bits.
const LETTERS: [[u8; 4]; 256] = {
    let mut t = [[0u8; 4]; 256];
    let mut b = 0;
    while b < 256 {
        let mut j = 0;
        while j < 4 {
            t[b][j] = b"ACGT"[(b >> (6 - 2 * j)) & 3];
            j += 1;
        }
        b += 1;
    }
    t
};

/// Writes lane `k`'s `out.len()` literals from the contexts [`span`] recorded for a span of that many.
pub(super) fn unpack(history: &[u32], k: usize, out: &mut [u8]) {
    let n = out.len();
    let (full, tail) = out.split_at_mut(n - n % HISTORY);
    for (g, chunk) in full.chunks_exact_mut(HISTORY).enumerate() {
        let word = history[MAX_LANES * g + k];
        for (b, four) in chunk.chunks_exact_mut(4).enumerate() {
            four.copy_from_slice(&LETTERS[(word >> (24 - 8 * b)) as usize & 0xff]);
        }
    }
    if !tail.is_empty() {
        let word = history[MAX_LANES * (n / HISTORY) + k];
        let m = tail.len();
        for (j, byte) in tail.iter_mut().enumerate() {
            *byte = b"ACGT"[(word >> (2 * (m - 1 - j))) as usize & 3];
        }
    }
}
