//! An in-memory [`Backend`]: a tree built from paths, with file contents held in memory or generated from a
//! repeated pattern. It serves the `nullfs` baseline (the cost of the FUSE path alone, no decoding) and the
//! filesystem layer's unit tests, which can also make chosen byte ranges fail as a corrupt block would.

use std::collections::HashMap;
use std::ops::Range;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::Backend;
use crate::cache::Block;
use crate::error::{DecodeError, Error};
use crate::format::tree::{Entry, EntryId, EntryKind, Tree};

/// Block size the memory backend pretends to decode in (stream runs and statfs).
const BLOCK_SIZE: u32 = 64 << 10;

/// A file's bytes.
#[derive(Clone)]
pub enum Content {
    Bytes(Arc<Vec<u8>>),
    /// `size` bytes of `pattern` repeated from its start: a static buffer served without copying it per file.
    Repeat {
        pattern: Arc<Vec<u8>>,
        size: u64,
    },
}

impl Content {
    fn len(&self) -> u64 {
        match self {
            Content::Bytes(b) => b.len() as u64,
            Content::Repeat { size, .. } => *size,
        }
    }

    fn read(&self, offset: u64, buf: &mut [u8]) -> usize {
        let len = self.len();
        if offset >= len {
            return 0;
        }
        let n = (len - offset).min(buf.len() as u64) as usize;
        match self {
            Content::Bytes(b) => buf[..n].copy_from_slice(&b[offset as usize..offset as usize + n]),
            Content::Repeat { pattern, .. } => {
                if pattern.is_empty() {
                    buf[..n].fill(0);
                    return n;
                }
                let mut done = 0;
                while done < n {
                    let at = ((offset + done as u64) % pattern.len() as u64) as usize;
                    let take = (pattern.len() - at).min(n - done);
                    buf[done..done + take].copy_from_slice(&pattern[at..at + take]);
                    done += take;
                }
            }
        }
        n
    }
}

/// Builds a [`MemoryBackend`] from '/'-separated paths; missing parent directories are created.
pub struct MemoryTreeBuilder {
    entries: Vec<Entry>,
    contents: HashMap<EntryId, Content>,
    by_path: HashMap<Vec<u8>, EntryId>,
    stream_len: u64,
}

impl Default for MemoryTreeBuilder {
    fn default() -> Self {
        let root = Entry {
            parent: 0,
            name: Vec::new(),
            kind: EntryKind::Dir,
            mode: 0o755,
            mtime_sec: 0,
            mtime_nsec: 0,
            flags: 0,
        };
        MemoryTreeBuilder {
            entries: vec![root],
            contents: HashMap::new(),
            by_path: HashMap::from([(Vec::new(), 0)]),
            stream_len: 0,
        }
    }
}

impl MemoryTreeBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// The entry at `path`, creating it (and its parents) with `kind` if absent.
    fn add(&mut self, path: &str, kind: EntryKind, mode: u32) -> EntryId {
        let path = path.trim_matches('/').as_bytes().to_vec();
        if let Some(&id) = self.by_path.get(&path) {
            return id;
        }
        let (parent_path, name) = match path.iter().rposition(|&b| b == b'/') {
            Some(i) => (path[..i].to_vec(), path[i + 1..].to_vec()),
            None => (Vec::new(), path.clone()),
        };
        let parent = self.dir_at(&parent_path);
        let id = self.entries.len() as EntryId;
        self.entries.push(Entry {
            parent,
            name,
            kind,
            mode,
            mtime_sec: 1_700_000_000,
            mtime_nsec: 123_456_789,
            flags: 0,
        });
        self.by_path.insert(path, id);
        id
    }

    fn dir_at(&mut self, path: &[u8]) -> EntryId {
        match self.by_path.get(path) {
            Some(&id) => id,
            None => self.add(&String::from_utf8_lossy(path), EntryKind::Dir, 0o755),
        }
    }

    pub fn dir(&mut self, path: &str, mode: u32) -> &mut Self {
        self.add(path, EntryKind::Dir, mode);
        self
    }

    pub fn file(&mut self, path: &str, content: Content, mode: u32) -> &mut Self {
        let size = content.len();
        let id = self.add(path, EntryKind::File { offset: self.stream_len, size, transform: 0 }, mode);
        self.stream_len += size;
        self.contents.insert(id, content);
        self
    }

    pub fn bytes(&mut self, path: &str, bytes: &[u8]) -> &mut Self {
        self.file(path, Content::Bytes(Arc::new(bytes.to_vec())), 0o644)
    }

    pub fn symlink(&mut self, path: &str, target: &[u8]) -> &mut Self {
        self.add(path, EntryKind::Symlink { target: target.to_vec() }, 0o777);
        self
    }

    pub fn build(&self) -> MemoryBackend {
        let mut children: Vec<Vec<EntryId>> = vec![Vec::new(); self.entries.len()];
        for (id, e) in self.entries.iter().enumerate().skip(1) {
            children[e.parent as usize].push(id as EntryId);
        }
        for kids in &mut children {
            kids.sort_by(|&a, &b| self.entries[a as usize].name.cmp(&self.entries[b as usize].name));
        }
        MemoryBackend {
            tree: Tree { entries: self.entries.clone(), children },
            contents: self.contents.clone(),
            total_len: self.stream_len,
            failing: Vec::new(),
            streamed_blocks: AtomicU64::new(0),
            reads: AtomicU64::new(0),
        }
    }
}

/// A tree held in memory.
pub struct MemoryBackend {
    tree: Tree,
    contents: HashMap<EntryId, Content>,
    total_len: u64,
    /// Stream ranges that fail like a corrupt block (tests).
    failing: Vec<Range<u64>>,
    streamed_blocks: AtomicU64,
    reads: AtomicU64,
}

impl MemoryBackend {
    /// Makes reads touching stream bytes `range` fail with [`Error::CorruptBlock`].
    pub fn fail_stream_range(&mut self, range: Range<u64>) {
        self.failing.push(range);
    }

    /// Blocks handed out by `decode_stream` so far.
    pub fn streamed_blocks(&self) -> u64 {
        self.streamed_blocks.load(Ordering::Relaxed)
    }

    /// Reads made through `read_file` so far.
    pub fn random_reads(&self) -> u64 {
        self.reads.load(Ordering::Relaxed)
    }

    /// Fills `buf` with logical stream bytes from `pos` (files laid end to end in the order they were added);
    /// fails like a corrupt block where a failing range is touched.
    pub fn read_stream(&self, pos: u64, buf: &mut [u8]) -> crate::Result<()> {
        let end = pos.saturating_add(buf.len() as u64);
        if end > self.total_len {
            return Err(Error::InvalidArgument(format!("range {pos}+{} is outside the stream", buf.len())));
        }
        self.check_failing(pos, end)?;
        for (&id, content) in &self.contents {
            let start = self.file_start(id);
            let (from, to) = (pos.max(start), end.min(start + content.len()));
            if from < to {
                let at = (from - pos) as usize;
                content.read(from - start, &mut buf[at..at + (to - from) as usize]);
            }
        }
        Ok(())
    }

    fn check_failing(&self, start: u64, end: u64) -> crate::Result<()> {
        match self.failing.iter().find(|r| r.start < end && start < r.end) {
            Some(bad) => {
                let block = bad.start / u64::from(BLOCK_SIZE);
                Err(Error::CorruptBlock {
                    path: PathBuf::from("memory"),
                    block,
                    offset: block * u64::from(BLOCK_SIZE),
                    source: DecodeError::Checksum { expected: 0, actual: 1 },
                })
            }
            None => Ok(()),
        }
    }

    fn file_start(&self, id: EntryId) -> u64 {
        match self.tree.entry(id).map(|e| &e.kind) {
            Some(EntryKind::File { offset, .. }) => *offset,
            _ => 0,
        }
    }
}

impl Backend for MemoryBackend {
    fn tree(&self) -> &Tree {
        &self.tree
    }

    fn read_file(&self, id: EntryId, offset: u64, buf: &mut [u8]) -> crate::Result<usize> {
        self.reads.fetch_add(1, Ordering::Relaxed);
        let content = self.contents.get(&id).ok_or_else(|| Error::NotFound(format!("entry {id}")))?;
        let start = self.file_start(id).saturating_add(offset);
        let end = start.saturating_add(buf.len().min(content.len().saturating_sub(offset) as usize) as u64);
        self.check_failing(start, end)?;
        Ok(content.read(offset, buf))
    }

    fn stream_offset(&self, id: EntryId) -> Option<u64> {
        self.contents.contains_key(&id).then(|| self.file_start(id))
    }

    fn decode_stream(&self, blocks: Range<u64>, sink: &mut dyn FnMut(u64, &[Block]) -> bool) -> crate::Result<()> {
        let bs = u64::from(BLOCK_SIZE);
        let mut buf = Vec::new();
        for id in blocks.start..blocks.end.min(self.total_len.div_ceil(bs)) {
            let start = id * bs;
            buf.resize((self.total_len - start).min(bs) as usize, 0);
            self.read_stream(start, &mut buf)?;
            self.streamed_blocks.fetch_add(1, Ordering::Relaxed);
            if !sink(id, &[Block::from(&buf[..])]) {
                break;
            }
        }
        Ok(())
    }

    fn stats_json(&self) -> serde_json::Value {
        serde_json::json!({
            "backend": "memory",
            "reads": self.reads.load(Ordering::Relaxed),
            "streamed_blocks": self.streamed_blocks(),
        })
    }

    fn source_name(&self) -> String {
        "memory".to_string()
    }

    fn total_len(&self) -> u64 {
        self.total_len
    }

    fn block_size(&self) -> u32 {
        BLOCK_SIZE
    }
}
