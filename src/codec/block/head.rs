//! The head of a slice payload (FORMAT.md §3): four varints (`nmatch`, `lit_field`, `nwords`, `extra_len`)
//! followed by `K` u32 rANS states, then the word stream and the extra-bits stream.
//!
//! Every reader of a slice payload goes through [`SlicePayload::parse`] (or [`SliceHead::read`] where only the
//! counts matter): the CPU decoder, the GPU engine's host preparation of the kernels' unit metadata, and
//! `aceapex info`'s stream sizes. One place checks the counts, so the engines agree on which slices are corrupt
//! and every reader names what it saw the same way.

use crate::codec::varint;
use crate::error::DecodeError;

/// The counts at the start of a slice payload, checked against the slice's decoded length and the payload's
/// size: `nmatch ≤ len / 2` (every match is at least 2 bytes and lies in the slice, §3.3), `nlit ≤ len`, and
/// the varints, states, words and extra bytes add up to exactly the payload. (The GPU engine sizes its token
/// storage from the slice length on the strength of the `nmatch` bound.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SliceHead {
    pub nmatch: u32,
    pub nlit: u32,
    /// The literals are coded with the group's context model (bit 0 of the `lit_field`, FORMAT.md §3.5).
    pub contexts: bool,
    /// 16-bit words in the rANS stream.
    pub nwords: u32,
    /// Bytes of the extra-bits stream.
    pub extra_len: u32,
    /// Bytes the four varints take: the rANS states start here.
    pub header_len: u32,
}

impl SliceHead {
    /// Reads and checks the head of `payload`, a slice of `slice_len` decoded bytes coded with `lanes` rANS
    /// states.
    pub fn read(payload: &[u8], lanes: usize, slice_len: u32) -> Result<SliceHead, DecodeError> {
        SlicePayload::parse(payload, lanes, slice_len).map(|p| p.head)
    }

    /// Tokens of the slice: its matches plus the final literal-only token.
    pub fn tokens(&self) -> u64 {
        u64::from(self.nmatch) + 1
    }
}

/// A slice payload split at its checked head: the counts and the three sections that follow them.
#[derive(Debug, Clone, Copy)]
pub struct SlicePayload<'a> {
    pub head: SliceHead,
    /// `4·lanes` bytes: the final encoder states, lane 0 first.
    pub states: &'a [u8],
    /// `2·nwords` bytes: the rANS word stream.
    pub words: &'a [u8],
    /// `extra_len` bytes: the extra-bits stream.
    pub extra: &'a [u8],
}

impl<'a> SlicePayload<'a> {
    /// Reads the head of `payload` (a slice of `slice_len` decoded bytes, `lanes` rANS states), checks every
    /// count against the slice and the payload's size, and splits the rest. Errors name the field and the value
    /// seen: [`DecodeError::Limit`] for `nmatch` or `nlit` past the slice, [`DecodeError::Invalid`] ("slice
    /// payload length") when the parts do not add up to the payload, or the varint's own error.
    pub fn parse(payload: &'a [u8], lanes: usize, slice_len: u32) -> Result<Self, DecodeError> {
        let mut pos = 0;
        let nmatch = varint::read_at(payload, &mut pos)?;
        // lit_field = 2·nlit + (1 when the literals are coded with the group's context model).
        let lit_field = varint::read_at(payload, &mut pos)?;
        let (nlit, contexts) = (lit_field >> 1, lit_field & 1 == 1);
        let nwords = varint::read_at(payload, &mut pos)?;
        let extra_len = varint::read_at(payload, &mut pos)?;
        // Every match is at least 2 bytes.
        let max_matches = u64::from(slice_len) / 2;
        if nmatch > max_matches {
            return Err(DecodeError::Limit { what: "nmatch", value: nmatch, limit: max_matches });
        }
        if nlit > u64::from(slice_len) {
            return Err(DecodeError::Limit { what: "nlit", value: nlit, limit: u64::from(slice_len) });
        }
        // Sizes in u128 so that no hostile count can wrap the sum.
        let expected = pos as u128 + 4 * lanes as u128 + 2 * nwords as u128 + extra_len as u128;
        if expected != payload.len() as u128 {
            return Err(DecodeError::Invalid {
                what: "slice payload length",
                detail: format!(
                    "{} bytes, but the header ({pos} bytes), {lanes} states, {nwords} words and {extra_len} extra \
                     bytes need {expected}",
                    payload.len()
                ),
            });
        }
        // Both fit in the payload, which the index bounds far below 4 GiB; a u32 that does not fit is refused
        // rather than truncated all the same.
        let to_u32 = |what, value: u64| {
            u32::try_from(value).map_err(|_| DecodeError::Limit { what, value, limit: u32::MAX.into() })
        };
        let head = SliceHead {
            nmatch: nmatch as u32,
            nlit: nlit as u32,
            contexts,
            nwords: to_u32("nwords", nwords)?,
            extra_len: to_u32("extra_len", extra_len)?,
            header_len: pos as u32,
        };
        let (states, rest) = payload[pos..].split_at(4 * lanes);
        let (words, extra) = rest.split_at(2 * nwords as usize);
        Ok(SlicePayload { head, states, words, extra })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn payload(fields: [u64; 4], lanes: usize, body: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for f in fields {
            varint::write(f, &mut out);
        }
        out.extend((0..4 * lanes + body).map(|i| i as u8));
        out
    }

    #[test]
    fn reads_the_counts_and_splits_the_sections() {
        let p = payload([3, 20, 5, 2], 4, 5 * 2 + 2);
        let s = SlicePayload::parse(&p, 4, 100).unwrap();
        let head = SliceHead { nmatch: 3, nlit: 10, contexts: false, nwords: 5, extra_len: 2, header_len: 4 };
        assert_eq!(s.head, head);
        assert_eq!(s.head.tokens(), 4);
        assert_eq!((s.states, s.words, s.extra), (&p[4..20], &p[20..30], &p[30..]));
        assert_eq!(SliceHead::read(&p, 4, 100), Ok(head));
        // lit_field 21: ten context-coded literals.
        let p = payload([3, 21, 5, 2], 4, 5 * 2 + 2);
        let h = SliceHead::read(&p, 4, 100).unwrap();
        assert_eq!((h.nlit, h.contexts), (10, true));
        // A 2-byte varint moves the states.
        let p = payload([3, 200, 0, 0], 1, 0);
        let s = SlicePayload::parse(&p, 1, 100).unwrap();
        assert_eq!((s.head.nlit, s.head.header_len, s.states), (100, 5, &p[5..]));
    }

    #[test]
    fn refuses_counts_past_the_slice_or_the_payload() {
        let err = |p: &[u8], lanes, len| SliceHead::read(p, lanes, len).unwrap_err();
        assert_eq!(
            err(&payload([51, 10, 0, 0], 1, 0), 1, 100),
            DecodeError::Limit { what: "nmatch", value: 51, limit: 50 }
        );
        assert_eq!(
            err(&payload([0, 202, 0, 0], 1, 0), 1, 100),
            DecodeError::Limit { what: "nlit", value: 101, limit: 100 }
        );
        // One byte too many, one too few, and counts so large that their sum would wrap a u64.
        for p in [
            payload([3, 10, 5, 2], 4, 5 * 2 + 3),
            payload([3, 10, 5, 2], 4, 5 * 2 + 1),
            payload([0, 0, u64::MAX, u64::MAX], 1, 0),
        ] {
            let e = err(&p, 4, 100);
            assert!(matches!(e, DecodeError::Invalid { what: "slice payload length", .. }), "{e}");
        }
        assert!(matches!(err(&[0x80], 1, 100), DecodeError::Truncated { .. }));
        assert!(matches!(err(&[1, 2, 3], 1, 100), DecodeError::Truncated { .. }));
    }
}
