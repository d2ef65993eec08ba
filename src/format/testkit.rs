//! Test support: hand-built archives from explicit token programs, with the reference bytes computed by the
//! byte-wise definition of FORMAT.md §1 (literals, periodic fills, reverse complements, reference depth).
//!
//! This is deliberately independent of the packer: tests of the reader must not share the packer's bugs.
//!
//! Not part of the crate's API (`#[doc(hidden)]`; its helpers panic on misuse): it is compiled into the library,
//! rather than under `cfg(test)`, only so that the integration tests (`tests/hostile.rs`) build their literal and
//! hand-made archives with the same [`write_blocks`] as the unit tests. A `testkit` feature turned on by a
//! dev-dependency of the crate on itself would keep it out of normal builds, but makes every `cargo test --lib`
//! compile the library twice.

use std::path::Path;

use xxhash_rust::xxh3::xxh3_64;

use super::tree::{Entry, EntryKind, Tree};
use super::writer::ArchiveWriter;
use super::Header;
use crate::codec::block::{count_symbols, encode_block, Token, COMPLEMENT};
use crate::codec::tables::{SymbolStats, TableSet};

/// A small deterministic PRNG (SplitMix64), so failures reproduce from a seed.
pub struct Rng(pub u64);

impl Rng {
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `[lo, hi]` (`lo ≤ hi`).
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }
}

/// One block's tokens and literals, as the packer would hand them to `encode_block`.
#[derive(Debug, Clone, Default)]
pub struct PlannedBlock {
    pub tokens: Vec<Token>,
    pub literals: Vec<u8>,
}

/// A token program and the stream it decodes to.
#[derive(Debug, Clone)]
pub struct Plan {
    pub header: Header,
    pub blocks: Vec<PlannedBlock>,
    /// The reference decoded stream.
    pub stream: Vec<u8>,
    /// Reference depth of every byte.
    pub depth: Vec<u8>,
}

impl Plan {
    /// An empty program for a stream of blocks of `header.block_size()`.
    pub fn new(header: Header) -> Plan {
        Plan { header, blocks: Vec::new(), stream: Vec::new(), depth: Vec::new() }
    }

    fn block_size(&self) -> usize {
        self.header.block_size() as usize
    }

    fn current(&mut self) -> &mut PlannedBlock {
        // The previous block is full (or there is none yet): start the next one.
        if self.blocks.len() * self.block_size() <= self.stream.len() {
            self.blocks.push(PlannedBlock::default());
        }
        self.blocks.last_mut().expect("pushed above")
    }

    /// The reference bytes of block `id`.
    pub fn block_bytes(&self, id: u64) -> &[u8] {
        let bs = self.block_size();
        &self.stream[id as usize * bs..((id as usize + 1) * bs).min(self.stream.len())]
    }

    /// Room left in the current block.
    pub fn room(&self) -> usize {
        self.block_size() - self.stream.len() % self.block_size()
    }

    /// Appends literal bytes (must fit in the current block).
    pub fn literals(&mut self, bytes: &[u8]) {
        assert!(bytes.len() <= self.room(), "literals cross a block boundary");
        if bytes.is_empty() {
            return;
        }
        let block = self.current();
        match block.tokens.last_mut() {
            Some(t) if t.match_len == 0 => t.lit_len += bytes.len() as u32,
            _ => block.tokens.push(Token { lit_len: bytes.len() as u32, match_len: 0, back: 0, rc: false }),
        }
        block.literals.extend_from_slice(bytes);
        self.stream.extend_from_slice(bytes);
        self.depth.extend(std::iter::repeat_n(0, bytes.len()));
    }

    /// Appends a match (periodic fill) of `len ≥ 2` bytes from `back` bytes before (must fit in the block).
    pub fn fill(&mut self, back: u64, len: usize) {
        let dst = self.stream.len();
        assert!(len >= 2 && len <= self.room() && back >= 1 && back as usize <= dst, "bad fill {back}/{len}");
        let block = self.current();
        match block.tokens.last_mut() {
            Some(t) if t.match_len == 0 => {
                t.match_len = len as u32;
                t.back = back;
            }
            _ => block.tokens.push(Token { lit_len: 0, match_len: len as u32, back, rc: false }),
        }
        let src = dst - back as usize;
        for k in 0..len {
            let from = src + k % back as usize;
            self.stream.push(self.stream[from]);
            self.depth.push(self.depth[from].saturating_add(1));
        }
    }

    /// Appends a reverse-complement match of `len ≥ 2` bytes whose source ends `back` bytes before it (must fit
    /// in the block and start at or after position 0): byte `k` is the complement of the byte at `dst − back − k`.
    pub fn fill_rc(&mut self, back: u64, len: usize) {
        let dst = self.stream.len();
        assert!(
            len >= 2 && len <= self.room() && back >= 1 && back as usize + len - 1 <= dst,
            "bad reverse complement {back}/{len}"
        );
        let block = self.current();
        match block.tokens.last_mut() {
            Some(t) if t.match_len == 0 => {
                t.match_len = len as u32;
                t.back = back;
                t.rc = true;
            }
            _ => block.tokens.push(Token { lit_len: 0, match_len: len as u32, back, rc: true }),
        }
        let end = dst - back as usize;
        for k in 0..len {
            let from = end - k;
            self.stream.push(COMPLEMENT[self.stream[from] as usize]);
            self.depth.push(self.depth[from].saturating_add(1));
        }
    }

    /// Deepest reference depth over the bytes a reverse complement of `len` ending `back` bytes back would read.
    pub fn source_depth_rc(&self, back: u64, len: usize) -> u8 {
        let end = self.stream.len() - back as usize;
        self.depth[end + 1 - len..=end].iter().copied().max().unwrap_or(0)
    }

    /// Deepest reference depth over the bytes a fill of `len` from `back` would read.
    pub fn source_depth(&self, back: u64, len: usize) -> u8 {
        let src = self.stream.len() - back as usize;
        let period = (back as usize).min(len);
        self.depth[src..src + period].iter().copied().max().unwrap_or(0)
    }

    /// Closes every block with its literal-only token (`encode_block` needs one last).
    fn finished_blocks(&self) -> Vec<PlannedBlock> {
        self.blocks
            .iter()
            .cloned()
            .map(|mut b| {
                if b.tokens.last().is_none_or(|t| t.match_len != 0) {
                    b.tokens.push(Token::default());
                }
                b
            })
            .collect()
    }

    /// A random program of `total_len` bytes: literal runs from a small alphabet and matches at any distance
    /// (near, far, cross-block, periodic), keeping every byte within `max_depth`. Forward matches only (the
    /// programs of the tests written before version 5); [`Plan::random_rc`] mixes in reverse complements.
    pub fn random(header: Header, total_len: usize, rng: &mut Rng) -> Plan {
        Plan::random_with(header, total_len, rng, false)
    }

    /// [`Plan::random`] with about a third of the matches reverse complements (FORMAT.md §1, version 5): near,
    /// far and cross-block, chained through earlier matches of either kind.
    pub fn random_rc(header: Header, total_len: usize, rng: &mut Rng) -> Plan {
        Plan::random_with(header, total_len, rng, true)
    }

    fn random_with(header: Header, total_len: usize, rng: &mut Rng, rc: bool) -> Plan {
        let mut plan = Plan::new(header);
        while plan.stream.len() < total_len {
            let room = plan.room().min(total_len - plan.stream.len());
            let lits = rng.range(0, 12).min(room as u64) as usize;
            let bytes: Vec<u8> = (0..lits).map(|_| b"ACGTacgtN\n"[rng.range(0, 9) as usize]).collect();
            plan.literals(&bytes);
            let room = plan.room().min(total_len - plan.stream.len());
            let pos = plan.stream.len() as u64;
            if room < 2 || pos == 0 {
                continue;
            }
            let len = rng.range(2, room.min(200) as u64) as usize;
            let back = match rng.range(0, 3) {
                0 => rng.range(1, pos.min(8)),   // short period: periodic fill
                1 => rng.range(1, pos.min(300)), // near
                _ => rng.range(1, pos),          // anywhere earlier, usually another block
            };
            // The forward programs draw nothing more, so they stay what they were before version 5.
            if rc && rng.range(0, 2) == 0 {
                let back = back.min(pos + 1 - len.min(pos as usize) as u64).max(1);
                if back as usize + len - 1 <= pos as usize && plan.source_depth_rc(back, len) < plan.header.max_depth {
                    plan.fill_rc(back, len);
                }
                continue;
            }
            if plan.source_depth(back, len) < plan.header.max_depth {
                plan.fill(back, len);
            }
        }
        plan
    }

    /// Writes the archive to `path` with files covering the stream (and a directory, an empty file and a
    /// symlink); returns the archive length.
    pub fn write(&self, path: &Path) -> u64 {
        let tree = sample_tree(self.stream.len() as u64);
        write_blocks(path, self.header, &self.finished_blocks(), &self.stream, &tree)
    }
}

/// Writes an archive of `stream` whose block `i` is coded from `blocks[i]` (each ending with a literal-only
/// token), with `tree`: one table set per group of `2^group_log` blocks, counted over its blocks, and slices
/// and rANS lanes as `header` says. The tokens are written as given, not checked against `stream` (hostile
/// tests hand in tokens that lie); `stream` gives the bytes the tables are counted over and the block hashes.
/// Returns the archive length.
pub fn write_blocks(path: &Path, header: Header, blocks: &[PlannedBlock], stream: &[u8], tree: &Tree) -> u64 {
    let group = 1usize << header.group_log;
    let bs = header.block_size() as usize;
    let slice = header.slice_size() as usize;
    let decoded = |i: usize| &stream[i * bs..((i + 1) * bs).min(stream.len())];
    let tables: Vec<TableSet> = blocks
        .chunks(group)
        .enumerate()
        .map(|(g, blocks)| {
            let mut stats = SymbolStats::default();
            for (k, b) in blocks.iter().enumerate() {
                count_symbols(&b.tokens, &b.literals, decoded(g * group + k), slice, &mut stats);
            }
            TableSet::from_stats(&stats)
        })
        .collect();
    let mut writer = ArchiveWriter::create(path, header).unwrap();
    for (i, b) in blocks.iter().enumerate() {
        let mut payload = Vec::new();
        let lanes = header.rans_lanes.into();
        encode_block(&b.tokens, &b.literals, decoded(i), slice, &tables[i / group], lanes, &mut payload);
        writer.push_block(&payload, xxh3_64(decoded(i))).unwrap();
    }
    writer.finish(stream.len() as u64, &tables, tree).unwrap()
}

/// The header of hand-made archives: 4 KiB blocks of one slice and one rANS lane, each block its own table
/// group, depth bound 8.
pub fn literal_header() -> Header {
    Header { block_log: 12, max_depth: 8, rans_lanes: 1, group_log: 0, min_match: [2; 8], slice_log: 12 }
}

/// Writes `stream` as an archive of [`literal_header`] blocks, each stored as plain literals (one literal-only
/// token), with `tree`. Returns the archive length.
pub fn literal_archive(path: &Path, stream: &[u8], tree: &Tree) -> u64 {
    let header = literal_header();
    let blocks: Vec<PlannedBlock> = stream
        .chunks(header.block_size() as usize)
        .map(|block| PlannedBlock {
            tokens: vec![Token { lit_len: block.len() as u32, match_len: 0, back: 0, rc: false }],
            literals: block.to_vec(),
        })
        .collect();
    write_blocks(path, header, &blocks, stream, tree)
}

/// The root directory entry of a hand-made tree (mode 755, mtime 0).
pub fn root_entry() -> Entry {
    Entry { name: Vec::new(), kind: EntryKind::Dir, mode: 0o755, ..file_entry("", 0, 0) }
}

/// A plain file in the root directory of a hand-made tree (mode 644, mtime 0): `size` bytes of the stream from
/// `offset`.
pub fn file_entry(name: &str, offset: u64, size: u64) -> Entry {
    Entry {
        parent: 0,
        name: name.as_bytes().to_vec(),
        kind: EntryKind::File { offset, size, transform: 0 },
        mode: 0o644,
        mtime_sec: 0,
        mtime_nsec: 0,
        flags: 0,
    }
}

/// `/all.bin` (the whole stream), `/d/first` (first third), `/d/rest` (the rest), `/d/empty`, `/d/link`.
pub fn sample_tree(total_len: u64) -> Tree {
    let base = Entry {
        parent: 0,
        name: Vec::new(),
        kind: EntryKind::Dir,
        mode: 0o755,
        mtime_sec: 1_700_000_000,
        mtime_nsec: 0,
        flags: 0,
    };
    let file = |parent, name: &str, offset, size| Entry {
        parent,
        name: name.as_bytes().to_vec(),
        kind: EntryKind::File { offset, size, transform: 0 },
        mode: 0o644,
        ..base.clone()
    };
    let third = total_len / 3;
    Tree::from_entries(vec![
        base.clone(),
        file(0, "all.bin", 0, total_len),
        Entry { name: b"d".to_vec(), ..base.clone() },
        file(2, "first", 0, third),
        file(2, "rest", third, total_len - third),
        file(2, "empty", total_len, 0),
        Entry { parent: 2, name: b"link".to_vec(), kind: EntryKind::Symlink { target: b"first".to_vec() }, ..base },
    ])
    .unwrap()
}

/// A test header: 4 KiB blocks of four 1 KiB slices (so that tokens are cut at slice boundaries often), groups
/// of 2 blocks.
pub fn small_header(max_depth: u8, lanes: u8) -> Header {
    Header { block_log: 12, max_depth, rans_lanes: lanes, group_log: 1, min_match: [2; 8], slice_log: 10 }
}
