//! Numeric columns of a genome structure as code bytes: one byte per value that says its magnitude (and the
//! three bits below its leading one), plus the value's remaining low bits packed LSB-first into one shared bit
//! column.
//!
//! The code (FORMAT.md §2.6):
//!
//! | value `v` | code | extra bits |
//! | --- | --- | --- |
//! | `v < 64` | `v` | none |
//! | `2^h ≤ v < 2^(h+1)`, `6 ≤ h ≤ 27` | `64 + 8·(h−6) + m`, `m` = bits `h−1 … h−3` of `v` | the low `h−3` bits |
//! | `2^h ≤ v < 2^(h+1)`, `28 ≤ h ≤ 43` | `240 + (h−28)` | the low `h` bits |
//!
//! Why this code: the structure sits in the archive's logical stream and is coded there like any other bytes, by
//! LZ and one order-0 table per table group, which a structure usually fills alone (FORMAT.md §2.6). What such a
//! coder pays is the byte histogram's entropy, so the representation should put a value's predictable part in
//! bytes with a skewed histogram and as few bytes as possible of near-uniform low bits. Packed alone (`aceapex
//! pack --no-genome` of the structures as one file), atha_chr1's structure took 371.3 KB as varint columns,
//! 382.2 KB with the two-codes-per-octave log code of §3.2 (the uniform extra-bit bytes it adds cost about a bit
//! each in the shared table) and 359.2 KB with this code; fly-chr4's six assemblies 103.3, 108.9 and 100.5 KB.
//! The direct range covers most lowercase-run lengths and small gaps, eight codes per octave keep the extra
//! bits few, and sixteen single-octave codes reach 2^44, beyond any value a structure holds (all are at most
//! the file length, ≤ 2^40).

use crate::error::DecodeError;

/// Values below this are their own code.
const DIRECT: u64 = 64;
/// First code of the one-per-octave tail, and the octave it starts at.
const TAIL_CODE: u32 = 240;
const TAIL_OCTAVE: u32 = 28;
/// Every value a column can hold is below this.
pub const VALUE_LIMIT: u64 = 1 << 44;

/// Splits `v < VALUE_LIMIT` into `(code, extra_nbits, extra_value)`.
pub fn encode(v: u64) -> (u8, u32, u64) {
    debug_assert!(v < VALUE_LIMIT, "structure value {v} out of range");
    if v < DIRECT {
        return (v as u8, 0, 0);
    }
    let h = 63 - v.leading_zeros();
    if h < TAIL_OCTAVE {
        let m = ((v >> (h - 3)) & 7) as u32;
        ((64 + 8 * (h - 6) + m) as u8, h - 3, v & ((1 << (h - 3)) - 1))
    } else {
        ((TAIL_CODE + (h - TAIL_OCTAVE)) as u8, h, v & ((1 << h) - 1))
    }
}

/// The smallest value of `code` and how many extra bits follow it. Every byte is a valid code.
pub fn code_base(code: u8) -> (u64, u32) {
    let c = u32::from(code);
    if u64::from(c) < DIRECT {
        (u64::from(c), 0)
    } else if c < TAIL_CODE {
        let h = 6 + (c - 64) / 8;
        let m = u64::from((c - 64) % 8);
        ((1 << h) + (m << (h - 3)), h - 3)
    } else {
        let h = TAIL_OCTAVE + (c - TAIL_CODE);
        (1 << h, h)
    }
}

/// Writes code bytes to one buffer and extra bits to a shared bit column.
#[derive(Default)]
pub struct ColumnWriter {
    bits: Vec<u8>,
    acc: u64,
    nacc: u32,
}

impl ColumnWriter {
    /// Appends the code byte of every value of `values` to `codes` and their extra bits to the bit column.
    pub fn column(&mut self, values: impl IntoIterator<Item = u64>, codes: &mut Vec<u8>) {
        for v in values {
            let (code, nbits, extra) = encode(v);
            codes.push(code);
            self.put(extra, nbits);
        }
    }

    fn put(&mut self, mut value: u64, mut nbits: u32) {
        while nbits > 0 {
            let take = nbits.min(32);
            self.acc |= (value & ((1u64 << take) - 1)) << self.nacc;
            self.nacc += take;
            value = value.checked_shr(take).unwrap_or(0);
            nbits -= take;
            while self.nacc >= 8 {
                self.bits.push(self.acc as u8);
                self.acc >>= 8;
                self.nacc -= 8;
            }
        }
    }

    /// The bit column, its last byte padded with zero bits.
    pub fn finish(mut self) -> Vec<u8> {
        if self.nacc > 0 {
            self.bits.push(self.acc as u8);
        }
        self.bits
    }
}

/// Reads extra bits LSB-first from a bit column of known length.
pub struct BitReader<'a> {
    bytes: &'a [u8],
    /// Next bit to read, counted from the column's first bit.
    pos: u64,
}

impl<'a> BitReader<'a> {
    pub fn new(bytes: &'a [u8]) -> BitReader<'a> {
        BitReader { bytes, pos: 0 }
    }

    /// `nbits ≤ 64` bits as an integer, or an error naming `what` when the column ends first.
    fn bits(&mut self, nbits: u32, what: &'static str) -> Result<u64, DecodeError> {
        let total = self.bytes.len() as u64 * 8;
        if nbits as u64 > total - self.pos {
            return Err(DecodeError::Invalid {
                what,
                detail: format!("needs {nbits} extra bits at bit {}, the bit column holds {total}", self.pos),
            });
        }
        let mut value = 0u64;
        let mut got = 0u32;
        while got < nbits {
            let byte = self.bytes[(self.pos / 8) as usize];
            let shift = (self.pos % 8) as u32;
            let take = (8 - shift).min(nbits - got);
            let chunk = (u64::from(byte) >> shift) & ((1u64 << take) - 1);
            value |= chunk << got;
            got += take;
            self.pos += u64::from(take);
        }
        Ok(value)
    }

    /// The value of code byte `code` with its extra bits from the column; `what` names the column in errors.
    pub fn value(&mut self, code: u8, what: &'static str) -> Result<u64, DecodeError> {
        let (base, nbits) = code_base(code);
        // The extra bits are fewer than the code's octave, so the sum stays inside that octave.
        Ok(base + self.bits(nbits, what)?)
    }

    /// Checks that every bit was used and the padding bits of the last byte are zero (one encoding per value).
    pub fn finish(&self, what: &'static str) -> Result<(), DecodeError> {
        let used_bytes = self.pos.div_ceil(8);
        if used_bytes != self.bytes.len() as u64 {
            return Err(DecodeError::Invalid {
                what,
                detail: format!("{} bytes of extra bits, {used_bytes} used", self.bytes.len()),
            });
        }
        let shift = (self.pos % 8) as u32;
        if shift != 0 && self.bytes[(self.pos / 8) as usize] >> shift != 0 {
            return Err(DecodeError::Invalid { what, detail: "padding bits of the last byte are not zero".into() });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_covers_one_contiguous_range_in_order() {
        // Each code's values run from its base to the next code's base - 1, and encode agrees at both ends.
        for code in 0..=255u8 {
            let (base, nbits) = code_base(code);
            let last = base + (1u64 << nbits) - 1;
            assert_eq!(encode(base), (code, nbits, 0), "base of code {code}");
            assert_eq!(encode(last).0, code, "last value of code {code}");
            let next = if code == 255 { VALUE_LIMIT } else { code_base(code + 1).0 };
            assert_eq!(last + 1, next, "code {code} ends where the next begins");
        }
        for v in (0..1u64 << 16).chain([(1 << 40) + 12345, VALUE_LIMIT - 1]) {
            let (code, nbits, extra) = encode(v);
            assert!(extra >> nbits == 0);
            assert_eq!(code_base(code).0 + extra, v);
        }
    }

    #[test]
    fn values_round_trip_through_codes_and_bits() {
        let values: Vec<u64> =
            [0, 1, 15, 63, 64, 65, 71, 72, 1000, 1 << 20, (1 << 28) - 1, 1 << 28, (1 << 40) - 1, VALUE_LIMIT - 1, 7]
                .into_iter()
                .collect();
        let mut w = ColumnWriter::default();
        let mut codes = Vec::new();
        w.column(values.iter().copied(), &mut codes);
        let bits = w.finish();
        let mut r = BitReader::new(&bits);
        let back: Vec<u64> = codes.iter().map(|&c| r.value(c, "test").unwrap()).collect();
        assert_eq!(back, values);
        r.finish("test").unwrap();
    }

    #[test]
    fn short_columns_bad_codes_and_dirty_padding_are_errors() {
        let mut w = ColumnWriter::default();
        let mut codes = Vec::new();
        w.column([100u64, 5], &mut codes);
        let bits = w.finish();
        // A column one byte short.
        let mut r = BitReader::new(&bits[..bits.len() - 1]);
        assert!(r.value(codes[0], "c").is_err());
        // Bits left over, and non-zero padding.
        let mut long = bits.clone();
        long.push(0);
        let mut r = BitReader::new(&long);
        r.value(codes[0], "c").unwrap();
        assert!(r.finish("c").is_err());
        let mut dirty = bits.clone();
        *dirty.last_mut().unwrap() |= 0x80;
        let mut r = BitReader::new(&dirty);
        r.value(codes[0], "c").unwrap();
        assert!(r.finish("c").is_err());
    }
}
