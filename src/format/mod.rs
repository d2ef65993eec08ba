//! The on-disk layout of an `.acx` archive (FORMAT.md §2): header, footer, index, table and tree sections.
//!
//! Parsing validates every count, length and offset against explicit limits before use; writing produces
//! exactly what parsing accepts.
//!
//! - [`cursor`]: bounds-checked little-endian fields and varints.
//! - [`header`]: the 64-byte header and footer.
//! - [`tree`]: the tree section and its lookups.
//! - [`sections`]: validation of a whole archive image (index, table section, tree) into [`ArchiveData`].
//! - [`writer`]: [`writer::ArchiveWriter`], which streams an archive to disk.

pub mod cursor;
pub mod header;
pub mod sections;
#[doc(hidden)]
pub mod testkit;
pub mod tree;
pub mod writer;

use std::borrow::Cow;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::codec::block::BlockShape;
use crate::codec::tables::TableSet;
use crate::error::{DecodeError, Error, Result};
use tree::Tree;

pub const HEADER_LEN: usize = 64;
pub const FOOTER_LEN: usize = 64;
pub const MAGIC: &[u8; 8] = b"ACEAPEX\0";
pub const FOOTER_MAGIC: &[u8; 8] = b"ACXFOOT\0";
pub const VERSION: u16 = 7;
pub const MAX_TOTAL_LEN: u64 = 1 << 40;

/// The header's parameters (FORMAT.md §2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub block_log: u8,
    pub max_depth: u8,
    pub rans_lanes: u8,
    pub group_log: u8,
    pub min_match: [u8; 8],
    /// Slices of `2^slice_log` bytes, each coded on its own (FORMAT.md §3).
    pub slice_log: u8,
}

impl Header {
    pub fn block_size(&self) -> u64 {
        1 << self.block_log
    }

    /// `S = 2^slice_log`.
    pub fn slice_size(&self) -> u64 {
        1 << self.slice_log
    }

    /// Slices per full block: `B / S`.
    pub fn slices_per_block(&self) -> u64 {
        1 << (self.block_log - self.slice_log.min(self.block_log))
    }
}

/// The footer's fields (FORMAT.md §2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    pub total_len: u64,
    pub tables_offset: u64,
    pub tree_offset: u64,
    pub index_offset: u64,
    pub file_len: u64,
}

/// Where block payloads are read from.
enum PayloadSource {
    /// The archive file, read with `pread`. Not a memory map: a file truncated under a running reader (a live
    /// mount) then gives a short read, which is an error for the blocks concerned, where a map would raise
    /// SIGBUS and kill the daemon. Each payload is a few KiB read once per decode, so the copy costs little.
    File(File),
    /// A whole archive image held in memory (fuzzing, tests).
    Memory(Vec<u8>),
}

/// A validated, opened archive file: everything an engine needs to decode any block. Immutable once opened,
/// shared by reference (`Arc`) between the archive, the engines and the filesystem. Only the metadata
/// (header, tables, tree, index) is held in memory; block payloads are read on demand ([`ArchiveData::payload`]).
pub struct ArchiveData {
    pub path: PathBuf,
    source: PayloadSource,
    pub header: Header,
    pub footer: Footer,
    /// `payload_end[i]`: end offset of block i's payload (block i starts at `payload_end[i-1]`, or 64).
    pub payload_end: Vec<u64>,
    /// xxh3 of each block's decoded bytes.
    pub block_hash: Vec<u64>,
    /// One table set per group of `2^group_log` blocks.
    pub tables: Vec<TableSet>,
    pub tree: Tree,
}

impl ArchiveData {
    /// Opens and validates an archive file: header, footer, section order, index, tables and tree (every value
    /// checked before use). Only the header and the metadata sections after the payloads are read here; block
    /// payloads are read and checked later, when a block is decoded.
    pub fn open(path: impl AsRef<Path>) -> Result<ArchiveData> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
        let meta = file.metadata().map_err(|e| Error::io(&path, e))?;
        if !meta.is_file() {
            return Err(Error::Format { path, detail: "not a regular file".into() });
        }
        let file_len = meta.len();
        let format_error = |detail: String| Error::Format { path: path.clone(), detail };
        let min_len = (HEADER_LEN + FOOTER_LEN) as u64;
        if file_len < min_len {
            return Err(format_error(format!(
                "file: {file_len} bytes, shorter than a header and a footer ({min_len})"
            )));
        }
        let read_at = |offset: u64, len: usize| -> Result<Vec<u8>> {
            let mut buf = vec![0u8; len];
            file.read_exact_at(&mut buf, offset).map_err(|e| Error::io(&path, e))?;
            Ok(buf)
        };
        let head = read_at(0, HEADER_LEN)?;
        let foot = read_at(file_len - FOOTER_LEN as u64, FOOTER_LEN)?;
        let (header, footer) = sections::parse_ends(&head, &foot, file_len).map_err(|e| format_error(e.to_string()))?;
        // Footer::parse checked 64 ≤ tables_offset ≤ file_len − 64, so this reads at most the file's own length.
        let tail = read_at(footer.tables_offset, (file_len - footer.tables_offset) as usize)?;
        let parsed = sections::parse_sections(header, footer, &tail).map_err(|e| format_error(e.to_string()))?;
        Ok(ArchiveData::from_parsed(path, PayloadSource::File(file), parsed))
    }

    /// Validates a whole archive image held in memory, exactly as [`ArchiveData::open`] validates a file.
    /// `label` names it in errors.
    pub fn from_image(label: impl Into<PathBuf>, image: Vec<u8>) -> Result<ArchiveData> {
        let path = label.into();
        let parsed =
            sections::parse_archive(&image).map_err(|e| Error::Format { path: path.clone(), detail: e.to_string() })?;
        Ok(ArchiveData::from_parsed(path, PayloadSource::Memory(image), parsed))
    }

    fn from_parsed(path: PathBuf, source: PayloadSource, parsed: sections::ParsedArchive) -> ArchiveData {
        let sections::ParsedArchive { header, footer, payload_end, block_hash, tables, tree } = parsed;
        ArchiveData { path, source, header, footer, payload_end, block_hash, tables, tree }
    }

    pub fn block_count(&self) -> u64 {
        self.payload_end.len() as u64
    }

    /// Absolute stream position of block `id`'s first byte.
    pub fn block_start(&self, id: u64) -> u64 {
        id << self.header.block_log
    }

    /// Decoded length of block `id` (the last block may be short).
    pub fn block_len(&self, id: u64) -> u32 {
        let start = self.block_start(id);
        (self.footer.total_len - start).min(self.header.block_size()) as u32
    }

    /// The shape of block `id` (`id < block_count`) as the codec needs it.
    pub fn block_shape(&self, id: u64) -> BlockShape {
        BlockShape {
            start: self.block_start(id),
            len: self.block_len(id),
            slice_log: self.header.slice_log,
            lanes: u32::from(self.header.rans_lanes),
        }
    }

    /// Slices of block `id`: `ceil(block_len / S)` (FORMAT.md §3).
    pub fn slice_count(&self, id: u64) -> u32 {
        u64::from(self.block_len(id)).div_ceil(self.header.slice_size()) as u32
    }

    /// Global slice ids run over the whole stream: slice `g` covers stream bytes from `g·S`, and belongs to block
    /// `g / (B/S)` (every block but the last holds exactly `B/S` slices). This is the total count.
    pub fn global_slice_count(&self) -> u64 {
        self.footer.total_len.div_ceil(self.header.slice_size())
    }

    /// Absolute stream position of global slice `g`'s first byte.
    pub fn slice_start(&self, g: u64) -> u64 {
        g << self.header.slice_log
    }

    /// Decoded length of global slice `g` (`g < global_slice_count`).
    pub fn slice_len(&self, g: u64) -> u32 {
        (self.footer.total_len - self.slice_start(g)).min(self.header.slice_size()) as u32
    }

    /// The block holding global slice `g`, and the slice's index inside it.
    pub fn slice_block(&self, g: u64) -> (u64, u32) {
        let shift = self.header.block_log - self.header.slice_log;
        (g >> shift, (g & ((1 << shift) - 1)) as u32)
    }

    /// File offset of block `id`'s payload.
    pub fn payload_offset(&self, id: u64) -> u64 {
        if id == 0 {
            HEADER_LEN as u64
        } else {
            self.payload_end[id as usize - 1]
        }
    }

    /// Block `id`'s payload bytes (`id < block_count`; the bounds were validated at open). Reading from the
    /// file can still fail: the file may have been truncated or replaced in place since it was opened.
    pub fn payload(&self, id: u64) -> Result<Cow<'_, [u8]>, DecodeError> {
        let (start, end) = (self.payload_offset(id), self.payload_end[id as usize]);
        match &self.source {
            PayloadSource::Memory(image) => Ok(Cow::Borrowed(&image[start as usize..end as usize])),
            PayloadSource::File(_) => {
                let mut buf = vec![0u8; (end - start) as usize];
                self.read_exact_at(start, &mut buf)?;
                Ok(Cow::Owned(buf))
            }
        }
    }

    /// Fills `buf` from the archive at byte `offset` (a range inside the payload region, `offset + buf.len() ≤
    /// footer.tables_offset`, which callers derive from validated offsets).
    pub fn read_exact_at(&self, offset: u64, buf: &mut [u8]) -> Result<(), DecodeError> {
        let end = offset.checked_add(buf.len() as u64).filter(|&end| end <= self.footer.tables_offset);
        let Some(end) = end else {
            let detail = format!("{} bytes at {offset}, past the payload region", buf.len());
            return Err(DecodeError::Read { offset, detail });
        };
        match &self.source {
            PayloadSource::Memory(image) => buf.copy_from_slice(&image[offset as usize..end as usize]),
            PayloadSource::File(file) => file.read_exact_at(buf, offset).map_err(|e| {
                let detail = match e.kind() {
                    std::io::ErrorKind::UnexpectedEof => {
                        "the archive file ended early (truncated since it was opened)".into()
                    }
                    _ => e.to_string(),
                };
                DecodeError::Read { offset, detail }
            })?,
        }
        Ok(())
    }

    /// The table set block `id` is coded with.
    pub fn tables_for(&self, id: u64) -> &TableSet {
        &self.tables[(id >> self.header.group_log) as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::testkit::{small_header, Plan, Rng};
    use super::*;
    use crate::codec::resolve::parse_block;

    fn sample(dir: &Path) -> (PathBuf, Plan) {
        let path = dir.join("a.acx");
        let plan = Plan::random(small_header(4, 1), 20_000, &mut Rng(7));
        plan.write(&path);
        (path, plan)
    }

    #[test]
    fn image_and_file_agree_block_for_block() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = sample(dir.path());
        let file = ArchiveData::open(&path).unwrap();
        let image = ArchiveData::from_image("image", std::fs::read(&path).unwrap()).unwrap();
        assert!(file.block_count() > 2);
        assert_eq!((file.header, file.footer, &file.block_hash), (image.header, image.footer, &image.block_hash));
        for id in 0..file.block_count() {
            assert_eq!(file.payload(id).unwrap(), image.payload(id).unwrap(), "block {id}");
        }
    }

    #[test]
    fn a_file_truncated_after_open_gives_read_errors_not_a_crash() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = sample(dir.path());
        let data = ArchiveData::open(&path).unwrap();
        let last = data.block_count() - 1;
        // Cut the file inside the last block's payload: earlier blocks still read, the last one cannot.
        let cut = data.payload_offset(last) + 1;
        std::fs::OpenOptions::new().write(true).open(&path).unwrap().set_len(cut).unwrap();
        assert!(parse_block(&data, 0).is_ok());
        match data.payload(last) {
            Err(DecodeError::Read { offset, detail }) => {
                assert_eq!(offset, data.payload_offset(last));
                assert!(detail.contains("truncated"), "{detail}");
            }
            other => panic!("expected a read error, got {other:?}"),
        }
        let fault = parse_block(&data, last).unwrap_err();
        assert_eq!(fault.block, last);
    }

    #[test]
    fn read_exact_at_refuses_ranges_past_the_payloads() {
        let dir = tempfile::tempdir().unwrap();
        let (path, _) = sample(dir.path());
        let data = ArchiveData::open(&path).unwrap();
        let mut buf = [0u8; 8];
        let end = data.footer.tables_offset;
        assert!(data.read_exact_at(end - 8, &mut buf).is_ok());
        assert!(matches!(data.read_exact_at(end - 7, &mut buf), Err(DecodeError::Read { .. })));
        assert!(matches!(data.read_exact_at(u64::MAX - 2, &mut buf), Err(DecodeError::Read { .. })));
    }

    #[test]
    fn open_refuses_files_shorter_than_header_and_footer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("short.acx");
        std::fs::write(&path, [0u8; 100]).unwrap();
        let err = ArchiveData::open(&path).err().unwrap().to_string();
        assert!(err.contains("shorter than a header and a footer"), "{err}");
    }
}
