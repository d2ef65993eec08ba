//! Unsigned LEB128 integers (FORMAT.md preamble): 7 bits per byte, low groups first, the high bit of a byte
//! says "more follows".
//!
//! The format allows overlong encodings (`0x80 0x00` is 0) but caps an encoding at [`MAX_LEN`] bytes and refuses
//! values that do not fit in a `u64`: the tenth byte may only carry bit 63.

use crate::error::DecodeError;

/// The longest encoding a reader accepts: `ceil(64 / 7)` bytes.
pub const MAX_LEN: usize = 10;

/// Reads one varint from the start of `bytes`. Returns the value and the number of bytes it used.
///
/// Errors carry offsets relative to the start of `bytes`: [`DecodeError::Truncated`] when the input ends inside
/// the varint, [`DecodeError::BadVarint`] when it runs past [`MAX_LEN`] bytes or overflows a `u64`.
pub fn read(bytes: &[u8]) -> Result<(u64, usize), DecodeError> {
    // Fast path: most varints in the format are one byte (counts, small frequencies).
    if let Some(&b) = bytes.first() {
        if b < 0x80 {
            return Ok((b as u64, 1));
        }
    }
    let mut value = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(MAX_LEN) {
        let group = (b & 0x7f) as u64;
        if i == MAX_LEN - 1 && (b & 0x80 != 0 || group > 1) {
            // A tenth byte with more to come is an eleventh-byte varint; a tenth byte above 1 overflows bit 63.
            return Err(DecodeError::BadVarint { at: 0 });
        }
        value |= group << (7 * i);
        if b & 0x80 == 0 {
            return Ok((value, i + 1));
        }
    }
    Err(DecodeError::Truncated { at: bytes.len(), needed: 1 })
}

/// Reads one varint at `*pos` in `bytes` and advances `*pos` past it. Errors carry absolute offsets into `bytes`.
pub fn read_at(bytes: &[u8], pos: &mut usize) -> Result<u64, DecodeError> {
    let rest =
        bytes.get(*pos..).ok_or_else(|| DecodeError::Truncated { at: bytes.len(), needed: *pos - bytes.len() })?;
    match read(rest) {
        Ok((value, used)) => {
            *pos += used;
            Ok(value)
        }
        Err(DecodeError::BadVarint { at }) => Err(DecodeError::BadVarint { at: *pos + at }),
        Err(DecodeError::Truncated { at, needed }) => Err(DecodeError::Truncated { at: *pos + at, needed }),
        Err(other) => Err(other),
    }
}

/// Appends the shortest encoding of `value` to `out`.
pub fn write(value: u64, out: &mut Vec<u8>) {
    let mut v = value;
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// Length in bytes of the shortest encoding of `value` (what [`write`](fn@write) appends).
pub fn encoded_len(value: u64) -> usize {
    let significant_bits = 64 - (value | 1).leading_zeros() as usize;
    significant_bits.div_ceil(7)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn encode(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        write(v, &mut out);
        out
    }

    #[test]
    fn known_encodings() {
        assert_eq!(encode(0), [0x00]);
        assert_eq!(encode(127), [0x7f]);
        assert_eq!(encode(128), [0x80, 0x01]);
        assert_eq!(encode(300), [0xac, 0x02]);
        assert_eq!(encode(u64::MAX), [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01]);
    }

    #[test]
    fn boundaries_round_trip() {
        for shift in 0..64 {
            for v in [(1u64 << shift) - 1, 1u64 << shift, (1u64 << shift) + 1] {
                let bytes = encode(v);
                assert_eq!(bytes.len(), encoded_len(v), "len of {v}");
                assert_eq!(read(&bytes), Ok((v, bytes.len())), "value {v}");
            }
        }
    }

    #[test]
    fn overlong_is_accepted() {
        assert_eq!(read(&[0x80, 0x00]), Ok((0, 2)));
        assert_eq!(read(&[0x81, 0x80, 0x80, 0x00]), Ok((1, 4)));
        let ten = [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
        assert_eq!(read(&ten), Ok((0, 10)));
    }

    #[test]
    fn rejects_overflow_and_eleven_bytes() {
        let overflow = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02];
        assert_eq!(read(&overflow), Err(DecodeError::BadVarint { at: 0 }));
        let eleven = [0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00];
        assert_eq!(read(&eleven), Err(DecodeError::BadVarint { at: 0 }));
    }

    #[test]
    fn rejects_truncation() {
        assert_eq!(read(&[]), Err(DecodeError::Truncated { at: 0, needed: 1 }));
        assert_eq!(read(&[0x80]), Err(DecodeError::Truncated { at: 1, needed: 1 }));
        let mut pos = 2;
        assert_eq!(read_at(&[0, 0, 0x80, 0x80], &mut pos), Err(DecodeError::Truncated { at: 4, needed: 1 }));
        let mut pos = 1;
        assert_eq!(
            read_at(&[0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f], &mut pos),
            Err(DecodeError::BadVarint { at: 1 })
        );
        let mut pos = 9;
        assert!(matches!(read_at(&[0], &mut pos), Err(DecodeError::Truncated { .. })));
    }

    #[test]
    fn read_at_advances() {
        let mut bytes = Vec::new();
        for v in [5u64, 1 << 20, 0, u64::MAX] {
            write(v, &mut bytes);
        }
        let mut pos = 0;
        for v in [5u64, 1 << 20, 0, u64::MAX] {
            assert_eq!(read_at(&bytes, &mut pos), Ok(v));
        }
        assert_eq!(pos, bytes.len());
    }

    proptest! {
        #[test]
        fn round_trip(v: u64, tail in proptest::collection::vec(any::<u8>(), 0..4)) {
            let mut bytes = encode(v);
            let len = bytes.len();
            bytes.extend_from_slice(&tail);
            prop_assert_eq!(read(&bytes), Ok((v, len)));
        }

        #[test]
        fn never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..16)) {
            if let Ok((v, used)) = read(&bytes) {
                prop_assert!(used <= MAX_LEN && used <= bytes.len());
                prop_assert!(encoded_len(v) <= used);
            }
        }
    }
}
