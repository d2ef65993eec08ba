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
#[cfg(test)]
pub mod testkit;
pub mod tree;
pub mod writer;

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::codec::tables::TableSet;
use crate::error::{Error, Result};
use tree::Tree;

pub const HEADER_LEN: usize = 64;
pub const FOOTER_LEN: usize = 64;
pub const MAGIC: &[u8; 8] = b"ACEAPEX\0";
pub const FOOTER_MAGIC: &[u8; 8] = b"ACXFOOT\0";
pub const VERSION: u16 = 2;
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

/// A validated, opened archive file: everything an engine needs to decode any block. Immutable once opened,
/// shared by reference (`Arc`) between the archive, the engines and the filesystem.
pub struct ArchiveData {
    pub path: PathBuf,
    /// The whole archive file, mapped read-only.
    pub map: memmap2::Mmap,
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
    /// Maps and validates an archive file: header, footer, section order, index, tables and tree (every value
    /// checked before use). Block payloads are checked later, when a block is decoded.
    pub fn open(path: impl AsRef<Path>) -> Result<ArchiveData> {
        let path = path.as_ref().to_path_buf();
        let file = File::open(&path).map_err(|e| Error::io(&path, e))?;
        let meta = file.metadata().map_err(|e| Error::io(&path, e))?;
        if !meta.is_file() {
            return Err(Error::Format { path, detail: "not a regular file".into() });
        }
        // SAFETY: the map is read-only and private to this process. An archive is immutable once written
        // (the writer renames a finished file into place); modifying it underneath a running reader is outside
        // the contract, as for every mapped-file reader. All reads through the map are bounds-checked.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| Error::io(&path, e))?;
        let parsed =
            sections::parse_archive(&map).map_err(|e| Error::Format { path: path.clone(), detail: e.to_string() })?;
        let sections::ParsedArchive { header, footer, payload_end, block_hash, tables, tree } = parsed;
        Ok(ArchiveData { path, map, header, footer, payload_end, block_hash, tables, tree })
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

    /// Block `id`'s payload bytes (bounds were validated at open).
    pub fn payload(&self, id: u64) -> &[u8] {
        &self.map[self.payload_offset(id) as usize..self.payload_end[id as usize] as usize]
    }

    /// The table set block `id` is coded with.
    pub fn tables_for(&self, id: u64) -> &TableSet {
        &self.tables[(id >> self.header.group_log) as usize]
    }
}
