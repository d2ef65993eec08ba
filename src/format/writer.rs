//! Writing an archive (FORMAT.md §2): header, block payloads streamed in order, then the table, tree and index
//! sections and the footer.
//!
//! The archive is written to a temporary file beside the destination and renamed into place by
//! [`ArchiveWriter::finish`], so a crashed or failed pack never leaves a half-written `.acx` under the real name.
//! Payloads go through a `BufWriter`; only the index (16 bytes per block) is kept in memory.

use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use xxhash_rust::xxh3::xxh3_64;

use super::tree::Tree;
use super::{Footer, Header, FOOTER_LEN, HEADER_LEN, MAX_TOTAL_LEN};
use crate::codec::tables::TableSet;
use crate::error::{Error, Result};

/// Streams an archive to disk. Blocks are pushed in order; [`finish`](Self::finish) writes the rest.
pub struct ArchiveWriter {
    path: PathBuf,
    tmp_path: PathBuf,
    /// `None` once finished (so `Drop` knows not to delete the renamed file).
    out: Option<BufWriter<File>>,
    header: Header,
    /// File offset where the next payload goes.
    pos: u64,
    payload_end: Vec<u64>,
    block_hash: Vec<u64>,
}

impl ArchiveWriter {
    /// Starts an archive that will appear at `path` when finished; writes the header to a temporary file in
    /// the same directory.
    pub fn create(path: &Path, header: Header) -> Result<ArchiveWriter> {
        header.validate().map_err(|e| Error::InvalidArgument(format!("archive header: {e}")))?;
        let tmp_path = temp_path_beside(path);
        let file = File::options().write(true).create_new(true).open(&tmp_path).map_err(|e| Error::io(&tmp_path, e))?;
        let mut writer = ArchiveWriter {
            path: path.to_path_buf(),
            tmp_path,
            out: Some(BufWriter::with_capacity(1 << 20, file)),
            header,
            pos: 0,
            payload_end: Vec::new(),
            block_hash: Vec::new(),
        };
        writer.write_all(&header.to_bytes())?;
        Ok(writer)
    }

    pub fn header(&self) -> &Header {
        &self.header
    }

    /// Blocks pushed so far.
    pub fn block_count(&self) -> u64 {
        self.payload_end.len() as u64
    }

    /// Appends the next block's payload; `decoded_hash` is xxh3 of the block's decoded bytes.
    pub fn push_block(&mut self, payload: &[u8], decoded_hash: u64) -> Result<()> {
        let limit = self.header.max_payload_len();
        if payload.len() as u64 > limit {
            return Err(Error::InvalidArgument(format!(
                "block {} payload of {} bytes exceeds the format limit {limit}",
                self.payload_end.len(),
                payload.len()
            )));
        }
        self.write_all(payload)?;
        self.payload_end.push(self.pos);
        self.block_hash.push(decoded_hash);
        Ok(())
    }

    /// Writes the table, tree and index sections and the footer, then renames the file into place. Returns the
    /// archive's length in bytes. `tables` holds one set per group, `total_len` is the logical stream length.
    pub fn finish(mut self, total_len: u64, tables: &[TableSet], tree: &Tree) -> Result<u64> {
        self.check_finish_args(total_len, tables, tree)?;
        let tables_offset = self.pos;
        self.write_section(&table_section(tables)?)?;
        let tree_offset = self.pos;
        let mut tree_bytes = Vec::new();
        tree.write(&mut tree_bytes);
        self.write_section(&tree_bytes)?;
        let index_offset = self.pos;
        let index = self.index_section();
        self.write_section(&index)?;
        let file_len = self.pos + FOOTER_LEN as u64;
        let footer = Footer { total_len, tables_offset, tree_offset, index_offset, file_len };
        self.write_all(&footer.to_bytes())?;

        let out = self.out.take().expect("finish runs once");
        let file = out.into_inner().map_err(|e| Error::io(&self.tmp_path, e.into_error()))?;
        file.sync_all().map_err(|e| Error::io(&self.tmp_path, e))?;
        drop(file);
        std::fs::rename(&self.tmp_path, &self.path).map_err(|e| Error::io(&self.path, e))?;
        Ok(file_len)
    }

    fn check_finish_args(&self, total_len: u64, tables: &[TableSet], tree: &Tree) -> Result<()> {
        if total_len > MAX_TOTAL_LEN {
            return Err(Error::InvalidArgument(format!("total_len {total_len} exceeds 2^40")));
        }
        let blocks = self.header.block_count(total_len);
        if blocks != self.block_count() {
            return Err(Error::InvalidArgument(format!(
                "{} blocks pushed, but a stream of {total_len} bytes has {blocks}",
                self.block_count()
            )));
        }
        let groups = self.header.group_count(blocks);
        if tables.len() as u64 != groups {
            return Err(Error::InvalidArgument(format!("{} table sets given, {groups} groups", tables.len())));
        }
        // Re-validate: a tree assembled by hand (not through from_entries) must not produce an unreadable archive.
        Tree::from_entries(tree.entries.clone())
            .and_then(|t| t.check_ranges(total_len))
            .map_err(|e| Error::InvalidArgument(format!("archive tree: {e}")))
    }

    /// `payload_end[]`, `block_hash[]`, xxh3.
    fn index_section(&self) -> Vec<u8> {
        let mut index = Vec::with_capacity(16 * self.payload_end.len() + 8);
        for v in self.payload_end.iter().chain(&self.block_hash) {
            index.extend_from_slice(&v.to_le_bytes());
        }
        let sum = xxh3_64(&index);
        index.extend_from_slice(&sum.to_le_bytes());
        index
    }

    fn write_section(&mut self, bytes: &[u8]) -> Result<()> {
        self.write_all(bytes)
    }

    fn write_all(&mut self, bytes: &[u8]) -> Result<()> {
        let out = self.out.as_mut().expect("writer not finished");
        out.write_all(bytes).map_err(|e| Error::io(&self.tmp_path, e))?;
        self.pos += bytes.len() as u64;
        Ok(())
    }
}

impl Drop for ArchiveWriter {
    fn drop(&mut self) {
        // Abandoned before finish (error or early return): remove the partial temporary file.
        if self.out.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp_path);
        }
    }
}

/// Serialises the table section (FORMAT.md §2.4): `u32 group_table_end[]`, the sets, xxh3.
pub fn table_section(tables: &[TableSet]) -> Result<Vec<u8>> {
    let mut sets = Vec::new();
    let mut ends = Vec::with_capacity(tables.len());
    for table in tables {
        table.write(&mut sets);
        let end =
            u32::try_from(sets.len()).map_err(|_| Error::InvalidArgument("table section exceeds 4 GiB".to_string()))?;
        ends.push(end);
    }
    let mut section = Vec::with_capacity(4 * ends.len() + sets.len() + 8);
    for end in ends {
        section.extend_from_slice(&end.to_le_bytes());
    }
    section.extend_from_slice(&sets);
    let sum = xxh3_64(&section);
    section.extend_from_slice(&sum.to_le_bytes());
    Ok(section)
}

/// `DIR/.NAME.tmp.PID` — same directory, so the final rename is atomic.
fn temp_path_beside(path: &Path) -> PathBuf {
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "archive".into());
    path.with_file_name(format!(".{name}.tmp.{}", std::process::id()))
}

/// The length of a header, used by tests and the packer to predict offsets.
pub const FIRST_PAYLOAD_OFFSET: u64 = HEADER_LEN as u64;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::testkit::{sample_tree, small_header};
    use crate::format::ArchiveData;

    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn empty_archive_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("empty.acx");
        let header = small_header(4, 1);
        let len = ArchiveWriter::create(&path, header).unwrap().finish(0, &[], &sample_tree(0)).unwrap();
        assert_eq!(len, std::fs::metadata(&path).unwrap().len());
        let data = ArchiveData::open(&path).unwrap();
        assert_eq!((data.block_count(), data.tables.len(), data.header), (0, 0, header));
        assert_eq!(data.tree.entries, sample_tree(0).entries);
        assert_eq!(leftovers(dir.path()), vec!["empty.acx".to_string()]);
    }

    #[test]
    fn finish_refuses_inconsistent_arguments_and_leaves_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.acx");
        let header = small_header(4, 1);
        let tables = vec![TableSet::default()];
        // One block pushed, but the stream length says two.
        let mut w = ArchiveWriter::create(&path, header).unwrap();
        w.push_block(&[0u8; 10], 0).unwrap();
        assert!(w.finish(4097, &tables, &sample_tree(4097)).is_err());
        // Wrong number of table sets.
        let mut w = ArchiveWriter::create(&path, header).unwrap();
        w.push_block(&[0u8; 10], 0).unwrap();
        assert!(w.finish(100, &[], &sample_tree(100)).is_err());
        // A file past the end of the stream.
        let mut w = ArchiveWriter::create(&path, header).unwrap();
        w.push_block(&[0u8; 10], 0).unwrap();
        assert!(w.finish(100, &tables, &sample_tree(200)).is_err());
        // A payload over 2·B + 4096.
        let mut w = ArchiveWriter::create(&path, header).unwrap();
        assert!(w.push_block(&vec![0u8; 2 * 4096 + 4097], 0).is_err());
        drop(w);
        assert!(leftovers(dir.path()).is_empty(), "temporary files left: {:?}", leftovers(dir.path()));
        // An invalid header is refused before anything is created.
        let bad_header = Header { block_log: 30, ..header };
        assert!(ArchiveWriter::create(&path, bad_header).is_err());
        assert!(leftovers(dir.path()).is_empty());
    }
}
