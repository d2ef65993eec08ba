//! Parsing a whole archive image (FORMAT.md §2): header, footer, index, table and tree sections, each checked
//! against its own xxh3 and against the limits of the format before any value is used.
//!
//! [`parse_archive`] validates a whole image in memory ([`ArchiveData::from_image`](super::ArchiveData::from_image),
//! the hostile-input tests); [`ArchiveData::open`](super::ArchiveData::open) reads only the two ends of the file
//! and the metadata after the payloads, and runs the same checks through [`parse_ends`] and [`parse_sections`].

use super::cursor::{checked_body, Cursor};
use super::tree::Tree;
use super::{Footer, Header, FOOTER_LEN, HEADER_LEN};
use crate::codec::tables::TableSet;
use crate::error::DecodeError;

/// Everything an archive's metadata says, validated.
#[derive(Debug)]
pub struct ParsedArchive {
    pub header: Header,
    pub footer: Footer,
    pub payload_end: Vec<u64>,
    pub block_hash: Vec<u64>,
    pub tables: Vec<TableSet>,
    pub tree: Tree,
}

/// Why an archive image was refused: which part, and what the codec stage saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SectionError {
    pub section: &'static str,
    pub error: DecodeError,
}

impl std::fmt::Display for SectionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.section, self.error)
    }
}

fn in_section(section: &'static str) -> impl Fn(DecodeError) -> SectionError {
    move |error| SectionError { section, error }
}

/// Validates a whole archive image.
pub fn parse_archive(bytes: &[u8]) -> Result<ParsedArchive, SectionError> {
    let file_len = bytes.len() as u64;
    if bytes.len() < HEADER_LEN + FOOTER_LEN {
        let needed = HEADER_LEN + FOOTER_LEN - bytes.len();
        return Err(SectionError { section: "file", error: DecodeError::Truncated { at: bytes.len(), needed } });
    }
    let (header, footer) = parse_ends(&bytes[..HEADER_LEN], &bytes[bytes.len() - FOOTER_LEN..], file_len)?;
    // Footer::parse checked tables_offset ≤ file_len − 64.
    parse_sections(header, footer, &bytes[footer.tables_offset as usize..])
}

/// Validates the header (the first 64 bytes) and the footer (the last 64 bytes of a file of `file_len` bytes).
pub fn parse_ends(head: &[u8], foot: &[u8], file_len: u64) -> Result<(Header, Footer), SectionError> {
    let header = Header::parse(head).map_err(in_section("header"))?;
    let footer = Footer::parse(foot, file_len).map_err(in_section("footer"))?;
    Ok((header, footer))
}

/// Validates the metadata sections. `tail` is the file from `footer.tables_offset` to its end: table section,
/// tree, index and footer, so an opened file needs only this and the header read into memory.
pub fn parse_sections(header: Header, footer: Footer, tail: &[u8]) -> Result<ParsedArchive, SectionError> {
    let base = footer.tables_offset;
    let file_len = base + tail.len() as u64;
    if file_len != footer.file_len {
        let detail =
            format!("{} bytes after the payloads, the footer says the file ends at {}", tail.len(), footer.file_len);
        return Err(SectionError { section: "footer", error: DecodeError::Invalid { what: "file_len", detail } });
    }
    // Footer::parse checked 64 ≤ tables ≤ tree ≤ index ≤ file_len − 64, so these slices are in bounds.
    let slice = |from: u64, to: u64| &tail[(from - base) as usize..(to - base) as usize];
    let index_bytes = slice(footer.index_offset, file_len - FOOTER_LEN as u64);
    let (payload_end, block_hash) = parse_index(index_bytes, &header, &footer).map_err(in_section("index"))?;
    let tables = parse_table_section(slice(footer.tables_offset, footer.tree_offset), &header, payload_end.len())
        .map_err(in_section("table section"))?;
    let tree = Tree::read(slice(footer.tree_offset, footer.index_offset), footer.total_len)
        .map_err(in_section("tree section"))?;
    Ok(ParsedArchive { header, footer, payload_end, block_hash, tables, tree })
}

/// The index section (§2.3): payload ends (non-decreasing, each payload within `2·B + 4096`, the last ending at
/// the table section) and block hashes.
fn parse_index(section: &[u8], header: &Header, footer: &Footer) -> Result<(Vec<u64>, Vec<u64>), DecodeError> {
    let block_count = header.block_count(footer.total_len);
    // total_len ≤ 2^40 and B ≥ 2^12, so block_count ≤ 2^28 and this cannot overflow.
    let expected_len = 16 * block_count + 8;
    if section.len() as u64 != expected_len {
        return Err(DecodeError::Invalid {
            what: "index_len",
            detail: format!("{} bytes, {block_count} blocks need {expected_len}", section.len()),
        });
    }
    let body = checked_body(section)?;
    let mut c = Cursor::new(body);
    // The section length was checked against the count, so these allocations are bounded by the file length.
    let mut payload_end = Vec::with_capacity(block_count as usize);
    let mut prev = HEADER_LEN as u64;
    let max_payload = header.max_payload_len();
    for block in 0..block_count {
        let end = c.u64()?;
        if end < prev || end - prev > max_payload {
            return Err(DecodeError::Invalid {
                what: "payload_end",
                detail: format!("block {block} spans [{prev}, {end}) (non-decreasing, at most {max_payload} bytes)"),
            });
        }
        payload_end.push(end);
        prev = end;
    }
    if prev != footer.tables_offset {
        return Err(DecodeError::Invalid {
            what: "payload_end",
            detail: format!("payloads end at {prev}, the table section starts at {}", footer.tables_offset),
        });
    }
    let block_hash = (0..block_count).map(|_| c.u64()).collect::<Result<Vec<_>, _>>()?;
    Ok((payload_end, block_hash))
}

/// The table section (§2.4): `u32 group_table_end[group_count]` (non-decreasing, the last one filling the section
/// exactly), then one table set per group.
fn parse_table_section(section: &[u8], header: &Header, block_count: usize) -> Result<Vec<TableSet>, DecodeError> {
    let group_count = header.group_count(block_count as u64);
    let body = checked_body(section)?;
    let ends_len = 4 * group_count;
    if ends_len > body.len() as u64 {
        return Err(DecodeError::Limit { what: "group_count × 4", value: ends_len, limit: body.len() as u64 });
    }
    let (ends_bytes, sets) = body.split_at(ends_len as usize);
    let mut c = Cursor::new(ends_bytes);
    let mut tables = Vec::with_capacity(group_count as usize);
    let mut start = 0usize;
    for group in 0..group_count {
        let end = c.u32()? as usize;
        if end < start || end > sets.len() {
            return Err(DecodeError::Invalid {
                what: "group_table_end",
                detail: format!("group {group} spans [{start}, {end}) of {} table bytes", sets.len()),
            });
        }
        // A group may take its context model from an earlier group (FORMAT.md §2.4): those are parsed already.
        let set = TableSet::read_in(&sets[start..end], &tables)
            .map_err(|e| DecodeError::Invalid { what: "table set", detail: format!("group {group}: {e}") })?;
        tables.push(set);
        start = end;
    }
    if start != sets.len() {
        return Err(DecodeError::Invalid {
            what: "table section",
            detail: format!("table sets end at {start}, the section holds {}", sets.len()),
        });
    }
    Ok(tables)
}
