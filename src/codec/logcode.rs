//! The log code of FORMAT.md §3.2, shared by literal-run lengths, match lengths and distances.
//!
//! A value `v < 16` is its own code with no extra bits. A larger value is split into its top two bits (the
//! position `h` of the leading one and the bit `m` below it), which form the code `16 + 2·(h−4) + m`, and its low
//! `h−1` bits, which travel verbatim in the extra-bits stream. Two codes per octave keep the entropy-coded part
//! small while the extra bits stay cheap to read (one table lookup and a shift on any decoder).

/// Codes below this value stand for themselves and carry no extra bits.
pub const DIRECT_CODES: u32 = 16;

/// One more than the largest code a `u64` can produce (`v = u64::MAX` gives `h = 63, m = 1`, code 135).
pub const CODE_COUNT: usize = 136;

/// Fixed-point fraction bits of the costs [`cost`] works with (costs are in 1/256 bit).
pub const COST_FRAC_BITS: u32 = 8;

/// Splits `v` into `(code, extra_nbits, extra_value)`; `extra_value < 2^extra_nbits`.
#[inline]
pub fn encode(v: u64) -> (u32, u32, u64) {
    if v < DIRECT_CODES as u64 {
        return (v as u32, 0, 0);
    }
    let h = 63 - v.leading_zeros();
    let m = ((v >> (h - 1)) & 1) as u32;
    let nbits = h - 1;
    (16 + 2 * (h - 4) + m, nbits, v & ((1u64 << nbits) - 1))
}

/// The code of `v` alone (what the entropy coder sees).
#[inline]
pub fn code_of(v: u64) -> u32 {
    encode(v).0
}

/// Number of extra bits that follow `code`. Defined for every `code < CODE_COUNT`.
#[inline]
pub fn extra_bits(code: u32) -> u32 {
    if code < DIRECT_CODES {
        0
    } else {
        3 + (code - DIRECT_CODES) / 2
    }
}

/// The smallest value with code `code` (`code < CODE_COUNT`): the value when all extra bits are zero.
#[inline]
pub fn base(code: u32) -> u64 {
    if code < DIRECT_CODES {
        return code as u64;
    }
    let h = 4 + (code - DIRECT_CODES) / 2;
    let m = ((code - DIRECT_CODES) & 1) as u64;
    (1u64 << h) + (m << (h - 1))
}

/// Rebuilds the value from its code and extra bits. Returns `None` when `code ≥ CODE_COUNT` or `extra` does not
/// fit in [`extra_bits`]`(code)` bits, so a decoder can feed it untrusted codes.
#[inline]
pub fn decode(code: u32, extra: u64) -> Option<u64> {
    if code as usize >= CODE_COUNT || extra >> extra_bits(code) != 0 {
        return None;
    }
    Some(base(code) + extra)
}

/// Price of coding `v` in 1/256 bit: the code's entropy-coded cost from `code_costs` (indexed by code, in the same
/// fixed point, e.g. [`crate::codec::tables::Table::costs`]) plus the extra bits. A code outside `code_costs`
/// costs `u32::MAX`, so the packer never picks a value the alphabet cannot hold.
#[inline]
pub fn cost(v: u64, code_costs: &[u32]) -> u32 {
    let (code, nbits, _) = encode(v);
    match code_costs.get(code as usize) {
        Some(&c) => c.saturating_add(nbits << COST_FRAC_BITS),
        None => u32::MAX,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, written as literally as FORMAT.md states it.
    fn reference_encode(v: u64) -> (u32, u32, u64) {
        if v < 16 {
            return (v as u32, 0, 0);
        }
        let mut h = 0;
        while h < 63 && v >> (h + 1) != 0 {
            h += 1;
        }
        let m = ((v >> (h - 1)) & 1) as u32;
        (16 + 2 * (h - 4) + m, h - 1, v % (1u64 << (h - 1)))
    }

    fn check(v: u64) {
        let (code, nbits, extra) = encode(v);
        assert_eq!((code, nbits, extra), reference_encode(v), "encode({v})");
        assert_eq!(extra_bits(code), nbits, "extra_bits({code})");
        assert!(nbits == 64 || extra >> nbits == 0);
        assert_eq!(decode(code, extra), Some(v), "decode of {v}");
        assert!(base(code) <= v);
    }

    #[test]
    fn exhaustive_small_values() {
        for v in 0..1u64 << 16 {
            check(v);
        }
    }

    #[test]
    fn boundaries_up_to_2_pow_40_and_beyond() {
        for h in 1..64 {
            let p = 1u64 << h;
            for v in [p - 1, p, p + 1, p + (p >> 1) - 1, p + (p >> 1), p + (p >> 1) + 1] {
                check(v);
            }
        }
        check(u64::MAX);
        assert_eq!(code_of(u64::MAX) as usize, CODE_COUNT - 1);
    }

    #[test]
    fn codes_are_monotone_and_contiguous() {
        // Every code is produced, by a contiguous range of values starting at base(code).
        for code in 1..CODE_COUNT as u32 {
            let b = base(code);
            assert_eq!(code_of(b), code);
            assert_eq!(code_of(b - 1), code - 1);
        }
    }

    #[test]
    fn field_limits_match_the_format() {
        // Literal runs and match lengths (code < 64) reach 2^28 - 1; explicit distances (code < 88, the codes
        // above are continuations) reach back - 1 = 2^40 - 1, the longest stream.
        assert_eq!(code_of((1 << 28) - 1), 63);
        assert_eq!(code_of(1 << 28), 64);
        assert_eq!(code_of((1 << 40) - 1), 87);
        assert_eq!(code_of(1 << 40), 88);
        assert_eq!(code_of((1 << 44) - 1), 95);
        assert_eq!(code_of(1 << 44), 96);
        assert_eq!(extra_bits(95), 42);
    }

    #[test]
    fn decode_rejects_bad_input() {
        assert_eq!(decode(CODE_COUNT as u32, 0), None);
        assert_eq!(decode(u32::MAX, 0), None);
        assert_eq!(decode(3, 1), None);
        assert_eq!(decode(16, 8), None);
        assert_eq!(decode(16, 7), Some(23));
        assert_eq!(decode(17, 0), Some(24));
    }

    #[test]
    fn cost_adds_extra_bits() {
        let costs: Vec<u32> = (0..64).map(|c| c * 10).collect();
        assert_eq!(cost(5, &costs), 50);
        assert_eq!(cost(16, &costs), 160 + (3 << COST_FRAC_BITS));
        assert_eq!(cost(1 << 40, &costs), u32::MAX);
    }
}
