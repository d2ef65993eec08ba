//! A bounds-checked little-endian reader over a byte slice, and the matching append helpers.
//!
//! Every section parser in [`crate::format`] reads through [`Cursor`], so a truncated or lying input becomes a
//! [`DecodeError::Truncated`] / [`DecodeError::BadVarint`] naming the offset, never an out-of-bounds panic.
//! Varints are unsigned LEB128 of at most 10 bytes whose value fits in `u64` (FORMAT.md, preamble).

use crate::error::DecodeError;

/// Longest legal varint encoding (10 × 7 bits ≥ 64 bits).
const MAX_VARINT_LEN: usize = 10;

/// Reads fields from `bytes` front to back; `pos` is relative to the slice start.
#[derive(Debug, Clone)]
pub struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
}

impl<'a> Cursor<'a> {
    pub fn new(bytes: &'a [u8]) -> Self {
        Cursor { bytes, pos: 0 }
    }

    /// Current offset from the start of the slice.
    pub fn pos(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.bytes.len() - self.pos
    }

    /// Takes the next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if n > self.remaining() {
            return Err(DecodeError::Truncated { at: self.pos, needed: n - self.remaining() });
        }
        let out = &self.bytes[self.pos..self.pos + n];
        self.pos += n;
        Ok(out)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }

    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }

    pub fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    /// An unsigned LEB128 varint: at most 10 bytes, and the value must fit in `u64`.
    pub fn varint(&mut self) -> Result<u64, DecodeError> {
        let start = self.pos;
        let mut value = 0u64;
        for i in 0..MAX_VARINT_LEN {
            let Some(&byte) = self.bytes.get(self.pos) else {
                return Err(DecodeError::Truncated { at: self.pos, needed: 1 });
            };
            self.pos += 1;
            let bits = u64::from(byte & 0x7f);
            let shift = 7 * i as u32;
            // The 10th byte may only contribute bit 63; anything else overflows u64.
            if i == MAX_VARINT_LEN - 1 && bits > 1 {
                return Err(DecodeError::BadVarint { at: start });
            }
            value |= bits << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(DecodeError::BadVarint { at: start })
    }

    /// A varint that must be `≤ limit`; `what` names the field in the error.
    pub fn varint_max(&mut self, what: &'static str, limit: u64) -> Result<u64, DecodeError> {
        let value = self.varint()?;
        if value > limit {
            return Err(DecodeError::Limit { what, value, limit });
        }
        Ok(value)
    }
}
/// Splits a section (or a header/footer) into its body and checks the trailing xxh3 of the body.
pub fn checked_body(section: &[u8]) -> Result<&[u8], DecodeError> {
    let body_len = section.len().checked_sub(8).ok_or(DecodeError::Truncated { at: section.len(), needed: 8 })?;
    let (body, sum) = section.split_at(body_len);
    let expected = u64::from_le_bytes(sum.try_into().expect("8 bytes"));
    let actual = xxhash_rust::xxh3::xxh3_64(body);
    if expected != actual {
        return Err(DecodeError::Checksum { expected, actual });
    }
    Ok(body)
}

/// Appends `value` as a minimal-length unsigned LEB128 varint.
pub fn put_varint(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

/// Zig-zag maps a signed value so that small magnitudes get short varints.
pub fn zigzag_encode(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

pub fn zigzag_decode(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn varint_edge_values_round_trip() {
        for v in [0, 1, 127, 128, 16383, 16384, u64::MAX >> 1, u64::MAX] {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            let mut c = Cursor::new(&buf);
            assert_eq!(c.varint().unwrap(), v);
            assert_eq!(c.remaining(), 0);
        }
    }

    #[test]
    fn varint_overlong_is_accepted_overflow_rejected() {
        // Overlong zero: allowed.
        assert_eq!(Cursor::new(&[0x80, 0x80, 0x00]).varint().unwrap(), 0);
        // 10th byte carrying more than bit 63: overflow.
        let mut bad = [0xffu8; 10];
        bad[9] = 0x02;
        assert_eq!(Cursor::new(&bad).varint(), Err(DecodeError::BadVarint { at: 0 }));
        // 11 bytes of continuation: too long.
        assert_eq!(Cursor::new(&[0x80; 11]).varint(), Err(DecodeError::BadVarint { at: 0 }));
        // Truncated.
        assert!(matches!(Cursor::new(&[0x80]).varint(), Err(DecodeError::Truncated { .. })));
    }

    #[test]
    fn take_past_end_is_truncated() {
        let mut c = Cursor::new(&[1, 2, 3]);
        assert_eq!(c.u16().unwrap(), 0x0201);
        assert_eq!(c.u16(), Err(DecodeError::Truncated { at: 2, needed: 1 }));
    }

    proptest! {
        #[test]
        fn varint_round_trips(v: u64) {
            let mut buf = Vec::new();
            put_varint(&mut buf, v);
            prop_assert_eq!(Cursor::new(&buf).varint().unwrap(), v);
        }

        #[test]
        fn zigzag_round_trips(v: i64) {
            prop_assert_eq!(zigzag_decode(zigzag_encode(v)), v);
        }

        #[test]
        fn varint_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            let _ = Cursor::new(&bytes).varint();
        }
    }
}
