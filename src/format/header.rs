//! The fixed 64-byte header and footer (FORMAT.md §2.1, §2.2): serialisation, parsing and validation.
//!
//! Both end in an xxh3 of their first 56 bytes, and both reject unknown versions, flags and non-zero reserved
//! bytes so that a later format version can never be misread as this one.

use xxhash_rust::xxh3::xxh3_64;

use super::cursor::{checked_body, Cursor};
use super::{Footer, Header, FOOTER_LEN, FOOTER_MAGIC, HEADER_LEN, MAGIC, MAX_TOTAL_LEN, VERSION};
use crate::error::DecodeError;

/// Bytes of a header/footer covered by its checksum.
const CHECKED_LEN: usize = 56;
pub const MIN_BLOCK_LOG: u8 = 12;
pub const MAX_BLOCK_LOG: u8 = 20;
pub const MAX_GROUP_LOG: u8 = 12;
pub const LEGAL_LANES: [u8; 2] = [1, 2];
/// The default slice: 4 KiB, so that resolving a few source bytes entropy-decodes 4 KiB, not a whole block.
///
/// Why 4 and not 2 KiB (session 14, helper "cold", 4e2a5f0 with the slice size patched; atha_chr1 and fly-chr4):
/// every slice pays its own rANS states, head and directory entry, and a match may not cross it, so 4 KiB slices
/// pack 1.1–3.4 % smaller (atha general 3.3341 → 3.3694, genome 4.1555 → 4.2112, fly ×11 10.2567 → 10.6029),
/// while a cold 4 KiB read costs about the same in genome mode (it parses fewer, larger slices) and up to ~40 %
/// more CPU in general mode at the end of the stream; one-core decode speed is unchanged. 8 KiB slices made
/// genome-mode cold reads a third slower for another 0.5–0.7 %.
pub const DEFAULT_SLICE_LOG: u8 = 12;
/// Slices are at least 512 bytes (so the per-slice states and counts stay small next to the data) …
pub const MIN_SLICE_LOG: u8 = 9;
/// … and a block holds at most `2^5 = 32` of them (so the slice directory of a block stays tiny).
pub const MAX_SLICES_LOG: u8 = 5;
/// The default rANS lanes per slice: two, lane 1 reading the word stream from its back (FORMAT.md §3.4), so a
/// GPU runs each slice as two chains of half the length for a 4-byte state a slice (atha_chr1 genome mode:
/// ratio 4.318 → 4.305, still inside its 4.3 target).
pub const DEFAULT_LANES: u8 = 2;

fn invalid(what: &'static str, detail: String) -> DecodeError {
    DecodeError::Invalid { what, detail }
}

/// Checks the trailing xxh3 of a 64-byte header or footer.
fn check_sum(bytes: &[u8; 64]) -> Result<(), DecodeError> {
    checked_body(bytes).map(|_| ())
}

fn seal(bytes: &mut [u8; 64]) {
    let sum = xxh3_64(&bytes[..CHECKED_LEN]);
    bytes[CHECKED_LEN..].copy_from_slice(&sum.to_le_bytes());
}

impl Header {
    /// The default parameters: 16 KiB blocks of 4 KiB slices, depth 16, [`DEFAULT_LANES`] rANS lanes per
    /// slice, groups of 64 blocks.
    pub fn new_default() -> Header {
        Header {
            block_log: 14,
            max_depth: 16,
            rans_lanes: DEFAULT_LANES,
            group_log: 6,
            min_match: [3, 4, 5, 6, 7, 8, 9, 10],
            slice_log: DEFAULT_SLICE_LOG,
        }
    }

    /// The legal `slice_log` range for `block_log`: `max(9, block_log − 5) ..= block_log` (FORMAT.md §2.1).
    pub fn slice_log_range(block_log: u8) -> std::ops::RangeInclusive<u8> {
        MIN_SLICE_LOG.max(block_log.saturating_sub(MAX_SLICES_LOG))..=block_log
    }

    /// [`DEFAULT_SLICE_LOG`] moved into the legal range of `block_log` (large blocks need larger slices).
    pub fn default_slice_log(block_log: u8) -> u8 {
        let range = Header::slice_log_range(block_log);
        DEFAULT_SLICE_LOG.clamp(*range.start(), *range.end())
    }

    /// Checks every field against FORMAT.md §2.1.
    pub fn validate(&self) -> Result<(), DecodeError> {
        if !(MIN_BLOCK_LOG..=MAX_BLOCK_LOG).contains(&self.block_log) {
            return Err(invalid("block_log", format!("{} is outside 12..=20", self.block_log)));
        }
        if self.max_depth == 0 {
            return Err(invalid("max_depth", "0 (must be 1..=255)".into()));
        }
        if !LEGAL_LANES.contains(&self.rans_lanes) {
            return Err(invalid("rans_lanes", format!("{} is neither 1 nor 2", self.rans_lanes)));
        }
        if self.group_log > MAX_GROUP_LOG {
            return Err(invalid("group_log", format!("{} exceeds 12", self.group_log)));
        }
        if self.min_match.iter().any(|&m| m < 2) || self.min_match.windows(2).any(|w| w[0] > w[1]) {
            return Err(invalid("min_match", format!("{:?} (each 2..=255, non-decreasing)", self.min_match)));
        }
        let slices = Header::slice_log_range(self.block_log);
        if !slices.contains(&self.slice_log) {
            return Err(invalid(
                "slice_log",
                format!(
                    "{} is outside {}..={} for block_log {}",
                    self.slice_log,
                    slices.start(),
                    slices.end(),
                    self.block_log
                ),
            ));
        }
        Ok(())
    }

    /// The 64 header bytes, checksum included.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..8].copy_from_slice(MAGIC);
        b[8..10].copy_from_slice(&VERSION.to_le_bytes());
        // flags (10..12) and reserved (25..56) stay zero.
        b[12] = self.block_log;
        b[13] = self.max_depth;
        b[14] = self.rans_lanes;
        b[15] = self.group_log;
        b[16..24].copy_from_slice(&self.min_match);
        b[24] = self.slice_log;
        seal(&mut b);
        b
    }

    /// Parses and validates a header from the first 64 bytes of `bytes`.
    pub fn parse(bytes: &[u8]) -> Result<Header, DecodeError> {
        let raw: &[u8; HEADER_LEN] = bytes
            .get(..HEADER_LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or(DecodeError::Truncated { at: bytes.len(), needed: HEADER_LEN - bytes.len().min(HEADER_LEN) })?;
        if &raw[0..8] != MAGIC {
            return Err(invalid("header magic", format!("{:02x?}", &raw[0..8])));
        }
        check_sum(raw)?;
        let mut c = Cursor::new(&raw[8..]);
        let version = c.u16()?;
        if version != VERSION {
            return Err(invalid("version", format!("{version} (this reader knows version {VERSION})")));
        }
        let flags = c.u16()?;
        if flags != 0 {
            return Err(invalid("header flags", format!("{flags:#06x} (must be 0 in version {VERSION})")));
        }
        let header = Header {
            block_log: raw[12],
            max_depth: raw[13],
            rans_lanes: raw[14],
            group_log: raw[15],
            min_match: raw[16..24].try_into().expect("8 bytes"),
            slice_log: raw[24],
        };
        if raw[25..CHECKED_LEN].iter().any(|&b| b != 0) {
            return Err(invalid("header reserved bytes", "non-zero".into()));
        }
        header.validate()?;
        Ok(header)
    }

    /// `ceil(total_len / B)`.
    pub fn block_count(&self, total_len: u64) -> u64 {
        total_len.div_ceil(self.block_size())
    }

    /// `ceil(block_count / 2^group_log)`.
    pub fn group_count(&self, block_count: u64) -> u64 {
        block_count.div_ceil(1 << self.group_log)
    }

    /// The largest legal payload of one block: `2·B + 4096` (FORMAT.md §2.3).
    pub fn max_payload_len(&self) -> u64 {
        2 * self.block_size() + 4096
    }
}

impl Footer {
    /// The 64 footer bytes, checksum included.
    pub fn to_bytes(&self) -> [u8; FOOTER_LEN] {
        let mut b = [0u8; FOOTER_LEN];
        b[0..8].copy_from_slice(FOOTER_MAGIC);
        let fields = [self.total_len, self.tables_offset, self.tree_offset, self.index_offset, self.file_len];
        for (i, v) in fields.iter().enumerate() {
            b[8 + 8 * i..16 + 8 * i].copy_from_slice(&v.to_le_bytes());
        }
        seal(&mut b);
        b
    }

    /// Parses a footer from exactly the last 64 bytes of a file and checks its internal consistency (section
    /// order, `total_len` limit). `real_file_len` is the file's actual length.
    pub fn parse(bytes: &[u8], real_file_len: u64) -> Result<Footer, DecodeError> {
        let raw: &[u8; FOOTER_LEN] = bytes.try_into().map_err(|_| DecodeError::Invalid {
            what: "footer",
            detail: format!("{} bytes (must be {FOOTER_LEN})", bytes.len()),
        })?;
        if &raw[0..8] != FOOTER_MAGIC {
            return Err(invalid("footer magic", format!("{:02x?}", &raw[0..8])));
        }
        check_sum(raw)?;
        let mut c = Cursor::new(&raw[8..]);
        let footer = Footer {
            total_len: c.u64()?,
            tables_offset: c.u64()?,
            tree_offset: c.u64()?,
            index_offset: c.u64()?,
            file_len: c.u64()?,
        };
        if c.u64()? != 0 {
            return Err(invalid("footer reserved bytes", "non-zero".into()));
        }
        footer.validate(real_file_len)?;
        Ok(footer)
    }

    /// Section order and bounds: `64 ≤ tables ≤ tree ≤ index ≤ file_len − 64`, `file_len` real.
    pub fn validate(&self, real_file_len: u64) -> Result<(), DecodeError> {
        if self.total_len > MAX_TOTAL_LEN {
            return Err(DecodeError::Limit { what: "total_len", value: self.total_len, limit: MAX_TOTAL_LEN });
        }
        if self.file_len != real_file_len {
            return Err(invalid("file_len", format!("footer says {}, the file has {real_file_len}", self.file_len)));
        }
        let footer_start = self.file_len.saturating_sub(FOOTER_LEN as u64);
        let order = [HEADER_LEN as u64, self.tables_offset, self.tree_offset, self.index_offset, footer_start];
        if self.file_len < (HEADER_LEN + FOOTER_LEN) as u64 || order.windows(2).any(|w| w[0] > w[1]) {
            return Err(invalid(
                "section offsets",
                format!(
                    "tables {} tree {} index {} file_len {} (need 64 ≤ tables ≤ tree ≤ index ≤ file_len − 64)",
                    self.tables_offset, self.tree_offset, self.index_offset, self.file_len
                ),
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample_footer() -> Footer {
        Footer { total_len: 100_000, tables_offset: 1000, tree_offset: 1200, index_offset: 1300, file_len: 1424 }
    }

    #[test]
    fn header_round_trips() {
        let h = Header {
            block_log: 16,
            max_depth: 7,
            rans_lanes: 1,
            group_log: 3,
            min_match: [2, 2, 3, 4, 5, 6, 7, 255],
            slice_log: 12,
        };
        assert_eq!(Header::parse(&h.to_bytes()).unwrap(), h);
        assert_eq!(Header::parse(&Header::new_default().to_bytes()).unwrap(), Header::new_default());
    }

    #[test]
    fn header_rejects_every_single_byte_flip() {
        let good = Header::new_default().to_bytes();
        for pos in 0..HEADER_LEN {
            for bit in 0..8 {
                let mut b = good;
                b[pos] ^= 1 << bit;
                assert!(Header::parse(&b).is_err(), "flip at {pos} bit {bit} accepted");
            }
        }
    }

    #[test]
    fn header_rejects_bad_fields_even_with_good_checksum() {
        // Versions 6 (interleaved lanes) and 8, flags, block_log, depth, lanes (3, and 4: interleaved lanes of
        // version 6), group_log, slice_log too small / too large for 16 KiB blocks, a reserved byte.
        let bad_fields: [(usize, u8); 12] = [
            (8, 6),
            (8, 8),
            (10, 1),
            (12, 11),
            (12, 21),
            (13, 0),
            (14, 3),
            (14, 4),
            (15, 13),
            (24, 8),
            (24, 15),
            (30, 1),
        ];
        for (pos, value) in bad_fields {
            let mut b = Header::new_default().to_bytes();
            b[pos] = value;
            seal(&mut b);
            assert!(Header::parse(&b).is_err(), "byte {pos} = {value} accepted");
        }
        let mut b = Header::new_default().to_bytes();
        b[16] = 9; // min_match decreasing
        seal(&mut b);
        assert!(Header::parse(&b).is_err());
        assert!(Header::parse(&b[..63]).is_err());
    }

    #[test]
    fn version_6_headers_are_refused_by_name() {
        assert_eq!(VERSION, 7);
        let mut b = Header::new_default().to_bytes();
        assert_eq!(u16::from_le_bytes([b[8], b[9]]), 7);
        b[8] = 6;
        seal(&mut b);
        let err = Header::parse(&b).unwrap_err().to_string();
        assert!(err.contains("6 (this reader knows version 7)"), "{err}");
    }

    #[test]
    fn slice_log_limits_follow_block_log() {
        for block_log in MIN_BLOCK_LOG..=MAX_BLOCK_LOG {
            let lo = 9.max(block_log - 5);
            for slice_log in 0..=24u8 {
                let h = Header { block_log, slice_log, ..Header::new_default() };
                let legal = (lo..=block_log).contains(&slice_log);
                assert_eq!(Header::parse(&h.to_bytes()).is_ok(), legal, "block_log {block_log} slice_log {slice_log}");
            }
            let default = Header::default_slice_log(block_log);
            assert!(Header::slice_log_range(block_log).contains(&default));
        }
        assert_eq!(Header::default_slice_log(14), 12);
        assert_eq!(Header::default_slice_log(20), 15);
        assert_eq!(Header::new_default().slices_per_block(), 4);
    }

    #[test]
    fn footer_round_trips_and_rejects_flips() {
        let f = sample_footer();
        let bytes = f.to_bytes();
        assert_eq!(Footer::parse(&bytes, f.file_len).unwrap(), f);
        assert!(Footer::parse(&bytes, f.file_len + 1).is_err());
        for pos in 0..FOOTER_LEN {
            let mut b = bytes;
            b[pos] ^= 0x10;
            assert!(Footer::parse(&b, f.file_len).is_err(), "flip at {pos} accepted");
        }
    }

    #[test]
    fn footer_rejects_disordered_sections() {
        let mut f = sample_footer();
        f.tree_offset = 999;
        assert!(Footer::parse(&f.to_bytes(), f.file_len).is_err());
        let mut f = sample_footer();
        f.index_offset = 1361;
        assert!(Footer::parse(&f.to_bytes(), f.file_len).is_err());
        let mut f = sample_footer();
        f.tables_offset = 63;
        assert!(Footer::parse(&f.to_bytes(), f.file_len).is_err());
        let mut f = sample_footer();
        f.total_len = MAX_TOTAL_LEN + 1;
        assert!(Footer::parse(&f.to_bytes(), f.file_len).is_err());
        let f = Footer { total_len: 0, tables_offset: 64, tree_offset: 64, index_offset: 64, file_len: 100 };
        assert!(Footer::parse(&f.to_bytes(), 100).is_err());
    }
}
