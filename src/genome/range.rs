//! The adaptive binary range coder of genome structures (FORMAT.md §2.6), and the number models built on it.
//!
//! The coder is LZMA's: a 32-bit `range`, a 33-bit `low` with carry propagation through a cached byte and a
//! count of pending `0xFF` bytes, renormalization by whole bytes whenever `range < 2^24`. Two things differ:
//! probabilities have 16 bits (`bound = (range >> 16) · p`) instead of 11, and each probability adapts at a rate
//! that starts fast and slows down (`shift = min(1 + updates, 7)`), because a structure's columns are short and
//! stationary: a fixed shift of 5 with 11-bit probabilities cost 1.2 % more on atha_chr1's lowercase runs (the
//! saturation at 31/2048 alone costs ~1 %). The encoder does not store the first byte it emits, which is always 0.
//!
//! A number `v < 2^44` ([`NumberModel`]) is its bit length `k` (0 for `v = 0`) as six bits through a binary tree of
//! adaptive bits, then, for `k ≥ 2`, the `k − 1` bits below its leading one: the top [`MANTISSA_BITS`] of them
//! (fewer when `k − 1` is smaller) through a binary tree of adaptive bits of their own per `k`, the rest as
//! direct (probability ½) bits. Measured on atha_chr1's 190,968 lowercase runs (gap, length − 1): 324 KB, while
//! the order-0 entropy of the exact values (an in-sample bound for any memoryless model) is 324 KB; conditioning
//! on the previous run or on the other column's value gains under 1 % there (plug-in estimates), so the models
//! have no context beyond their column.
//!
//! Hostile input: the decoder never fails mid-stream. Bytes past the end of its input read as zero and are
//! counted, and the caller compares [`Decoder::used`] with the input's length: a stream that was overrun or not wholly
//! used is refused there. Every step is bounded
//! arithmetic on `u32`/`u64` (no shift by ≥ the width, no underflow), so any input decodes to some bits without
//! panicking, and the callers bound how many values they decode before they decode them.

/// Probabilities are in units of `2^-PROB_BITS`.
const PROB_BITS: u32 = 16;
/// Renormalize when the range falls below this.
const TOP: u32 = 1 << 24;
/// The adaptation shift never exceeds this (an update then moves the probability 1/128 of the way).
const MAX_SHIFT: u8 = 7;

/// Bits below a number's leading one that are coded adaptively (the rest are direct bits).
pub const MANTISSA_BITS: u32 = 3;
/// Largest bit length a number may have: every value a structure holds is below `2^44`.
pub const MAX_CLASS: u32 = 44;
/// Bits of a number's class (bit length) code.
const CLASS_BITS: u32 = 6;

/// One adaptive binary probability: `p` is the probability of a 0 bit in units of `2^-16`, `updates` how often
/// it adapted (saturating at the point where the shift stops growing).
#[derive(Clone, Copy)]
pub struct Bit {
    p: u16,
    updates: u8,
}

impl Default for Bit {
    fn default() -> Bit {
        Bit { p: 1 << (PROB_BITS - 1), updates: 0 }
    }
}

impl Bit {
    /// Moves `p` toward the bit seen. `p` stays in `[1, 65535]`: a step is at most half the distance to 0 or
    /// 65536, rounded down.
    fn update(&mut self, bit: u32) {
        let shift = (1 + self.updates).min(MAX_SHIFT);
        let p = u32::from(self.p);
        let p = if bit == 0 { p + (((1 << PROB_BITS) - p) >> shift) } else { p - (p >> shift) };
        self.p = p as u16;
        if self.updates < MAX_SHIFT {
            self.updates += 1;
        }
    }

    /// The range a 0 bit takes out of `range`: never 0 and never all of it, since `range ≥ 2^24` and
    /// `1 ≤ p ≤ 65535`.
    fn bound(&self, range: u32) -> u32 {
        (range >> PROB_BITS) * u32::from(self.p)
    }
}

/// Writes bits; [`Encoder::finish`] returns the bytes.
pub struct Encoder {
    low: u64,
    range: u32,
    /// The last byte shifted out of `low`, not yet written because a carry may still change it.
    cache: u8,
    /// `cache` plus the `0xFF` bytes behind it that a carry would also change.
    pending: u64,
    out: Vec<u8>,
}

impl Default for Encoder {
    fn default() -> Encoder {
        Encoder { low: 0, range: u32::MAX, cache: 0, pending: 1, out: Vec::new() }
    }
}

impl Encoder {
    fn shift_low(&mut self) {
        if self.low < 0xFF00_0000 || self.low >= 1 << 32 {
            let carry = (self.low >> 32) as u8;
            let mut byte = self.cache;
            while self.pending > 0 {
                self.out.push(byte.wrapping_add(carry));
                byte = 0xFF;
                self.pending -= 1;
            }
            self.cache = (self.low >> 24) as u8;
        }
        self.pending += 1;
        self.low = (self.low & 0x00FF_FFFF) << 8;
    }

    fn normalize(&mut self) {
        while self.range < TOP {
            self.range <<= 8;
            self.shift_low();
        }
    }

    /// Codes `bit` (0 or 1) with the adaptive probability `model`, then adapts it.
    pub fn bit(&mut self, model: &mut Bit, bit: u32) {
        let bound = model.bound(self.range);
        if bit == 0 {
            self.range = bound;
        } else {
            self.low += u64::from(bound);
            self.range -= bound;
        }
        model.update(bit);
        self.normalize();
    }

    /// Codes the low `n ≤ 64` bits of `value`, most significant first, each with probability ½.
    pub fn direct(&mut self, value: u64, n: u32) {
        for i in (0..n).rev() {
            self.range >>= 1;
            if (value >> i) & 1 == 1 {
                self.low += u64::from(self.range);
            }
            self.normalize();
        }
    }

    /// Codes the low `n` bits of `value`, most significant first, through the binary tree `tree` (`2^n`
    /// entries, node 1 the root; entry 0 unused).
    pub fn tree(&mut self, tree: &mut [Bit], value: u32, n: u32) {
        let mut node = 1usize;
        for i in (0..n).rev() {
            let bit = (value >> i) & 1;
            self.bit(&mut tree[node], bit);
            node = node * 2 + bit as usize;
        }
    }

    /// Flushes `low` and returns the coded bytes, without the first byte emitted (always 0: nothing can carry
    /// into it, since `low + range ≤ 2^32` before the first shift).
    pub fn finish(mut self) -> Vec<u8> {
        for _ in 0..5 {
            self.shift_low();
        }
        debug_assert_eq!(self.out.first(), Some(&0));
        self.out.remove(0);
        self.out
    }
}

/// Reads bits written by [`Encoder`] from a byte slice; reads past its end see zeros (see [`Decoder::used`]).
pub struct Decoder<'a> {
    bytes: &'a [u8],
    /// Bytes consumed, possibly past the end.
    pos: usize,
    range: u32,
    code: u32,
}

impl<'a> Decoder<'a> {
    pub fn new(bytes: &'a [u8]) -> Decoder<'a> {
        let mut d = Decoder { bytes, pos: 0, range: u32::MAX, code: 0 };
        for _ in 0..4 {
            d.code = (d.code << 8) | u32::from(d.next_byte());
        }
        d
    }

    fn next_byte(&mut self) -> u8 {
        let b = self.bytes.get(self.pos).copied().unwrap_or(0);
        self.pos = self.pos.saturating_add(1);
        b
    }

    fn normalize(&mut self) {
        while self.range < TOP {
            self.range <<= 8;
            // Bits shifted out of a hostile `code ≥ range` are lost; valid streams keep `code < range`.
            self.code = (self.code << 8) | u32::from(self.next_byte());
        }
    }

    /// The next bit under the adaptive probability `model`, which then adapts.
    pub fn bit(&mut self, model: &mut Bit) -> u32 {
        let bound = model.bound(self.range);
        let bit = if self.code < bound {
            self.range = bound;
            0
        } else {
            self.code -= bound;
            self.range -= bound;
            1
        };
        model.update(bit);
        self.normalize();
        bit
    }

    /// `n ≤ 64` direct bits, most significant first.
    pub fn direct(&mut self, n: u32) -> u64 {
        let mut value = 0u64;
        for _ in 0..n {
            self.range >>= 1;
            let bit = if self.code >= self.range {
                self.code -= self.range;
                1
            } else {
                0
            };
            value = (value << 1) | bit;
            self.normalize();
        }
        value
    }

    /// `n` bits through the binary tree `tree` (see [`Encoder::tree`]).
    pub fn tree(&mut self, tree: &mut [Bit], n: u32) -> u32 {
        let mut node = 1usize;
        for _ in 0..n {
            node = node * 2 + self.bit(&mut tree[node]) as usize;
        }
        (node - (1 << n)) as u32
    }

    /// The code value: 0 after the last bit of an encoder's whole output, whose last four bytes are its final
    /// `low`. Anything else means the input is not exactly what an encoder wrote.
    pub fn code(&self) -> u32 {
        self.code
    }

    /// Bytes consumed so far, counting reads past the end. An encoder's output is consumed to its last byte, so
    /// a stream decoded to the end is valid only if this equals its length (or the caller's padding starts here);
    /// more means zeros were read past the end.
    pub fn used(&self) -> usize {
        self.pos
    }
}

/// The adaptive models of one column of numbers: a class tree and, per class, a tree for the top mantissa bits.
pub struct NumberModel {
    class: [Bit; 1 << CLASS_BITS],
    mantissa: [[Bit; 1 << MANTISSA_BITS]; MAX_CLASS as usize + 1],
}

impl Default for NumberModel {
    fn default() -> NumberModel {
        NumberModel {
            class: [Bit::default(); 1 << CLASS_BITS],
            mantissa: [[Bit::default(); 1 << MANTISSA_BITS]; MAX_CLASS as usize + 1],
        }
    }
}

impl NumberModel {
    /// Codes `v < 2^44`.
    pub fn encode(&mut self, enc: &mut Encoder, v: u64) {
        debug_assert!(v >> MAX_CLASS == 0, "structure value {v} out of range");
        let k = 64 - v.leading_zeros();
        enc.tree(&mut self.class, k, CLASS_BITS);
        if k >= 2 {
            let below = k - 1;
            let adaptive = below.min(MANTISSA_BITS);
            let direct = below - adaptive;
            enc.tree(&mut self.mantissa[k as usize], ((v >> direct) as u32) & ((1 << adaptive) - 1), adaptive);
            enc.direct(v, direct);
        }
    }

    /// Decodes a number, or `None` for a class above [`MAX_CLASS`] (which no encoder writes).
    pub fn decode(&mut self, dec: &mut Decoder<'_>) -> Option<u64> {
        let k = dec.tree(&mut self.class, CLASS_BITS);
        if k > MAX_CLASS {
            return None;
        }
        if k < 2 {
            return Some(u64::from(k));
        }
        let below = k - 1;
        let adaptive = below.min(MANTISSA_BITS);
        let direct = below - adaptive;
        let top = (1u64 << adaptive) | u64::from(dec.tree(&mut self.mantissa[k as usize], adaptive));
        Some((top << direct) | dec.direct(direct))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (xorshift) for test values.
    fn values(seed: u64, n: usize) -> Vec<u64> {
        let mut x = seed | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // Mostly small values, sometimes up to 2^44 − 1.
                let bits = (x % 45) as u32;
                (x >> 19) & ((1u64 << bits) - 1)
            })
            .collect()
    }

    fn encode_all(vals: &[u64]) -> Vec<u8> {
        let mut enc = Encoder::default();
        let mut m = NumberModel::default();
        let mut tags = [Bit::default(); 8];
        for &v in vals {
            m.encode(&mut enc, v);
            enc.tree(&mut tags, (v % 6) as u32, 3);
        }
        enc.finish()
    }

    #[test]
    fn numbers_round_trip_and_use_every_byte() {
        for (seed, n) in [(1, 0), (2, 1), (3, 1000), (4, 20_000)] {
            let mut vals = values(seed, n);
            vals.extend([0, 1, 2, 3, 7, 8, (1 << 44) - 1, 1 << 43]);
            let bytes = encode_all(&vals);
            let mut dec = Decoder::new(&bytes);
            let mut m = NumberModel::default();
            let mut tags = [Bit::default(); 8];
            for &v in &vals {
                assert_eq!(m.decode(&mut dec), Some(v));
                assert_eq!(dec.tree(&mut tags, 3), (v % 6) as u32);
            }
            assert_eq!((dec.used(), dec.code()), (bytes.len(), 0));
        }
    }

    #[test]
    fn skewed_bits_cost_little_and_carries_propagate() {
        // Long runs of one bit drive probabilities to their limits and `low` across 0xFF.. boundaries.
        for pattern in [0u32, 1] {
            let mut enc = Encoder::default();
            let mut b = Bit::default();
            let n = 100_000;
            for i in 0..n {
                enc.bit(&mut b, if i % 5000 == 4999 { 1 - pattern } else { pattern });
            }
            let bytes = enc.finish();
            assert!(bytes.len() < 200, "{} bytes for {n} nearly constant bits", bytes.len());
            let mut dec = Decoder::new(&bytes);
            let mut b = Bit::default();
            for i in 0..n {
                assert_eq!(dec.bit(&mut b), if i % 5000 == 4999 { 1 - pattern } else { pattern }, "bit {i}");
            }
            assert_eq!((dec.used(), dec.code()), (bytes.len(), 0));
        }
    }

    #[test]
    fn short_and_long_inputs_show_in_used() {
        let vals = values(9, 500);
        let bytes = encode_all(&vals);
        let decode = |input: &[u8]| {
            let mut dec = Decoder::new(input);
            let mut m = NumberModel::default();
            let mut tags = [Bit::default(); 8];
            for _ in &vals {
                m.decode(&mut dec);
                dec.tree(&mut tags, 3);
            }
            dec.used()
        };
        assert_eq!(decode(&bytes), bytes.len());
        // Cut short, the decoder reads past the end; extended, it leaves the extra byte.
        assert!(decode(&bytes[..bytes.len() - 1]) > bytes.len() - 1);
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(decode(&longer), bytes.len());
    }

    #[test]
    fn arbitrary_bytes_decode_without_panicking() {
        // Every input, including all-0xFF (code ≥ range from the start), decodes to something bounded.
        for input in [vec![], vec![0xFF; 64], vec![0; 64], (0..=255u8).collect::<Vec<u8>>()] {
            let mut dec = Decoder::new(&input);
            let mut m = NumberModel::default();
            for _ in 0..1000 {
                if let Some(v) = m.decode(&mut dec) {
                    assert!(v >> MAX_CLASS == 0);
                }
                dec.direct(64);
            }
        }
    }
}
