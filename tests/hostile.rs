//! Hostile archives built on purpose: a real packed archive taken apart ([`Parts`]) and put back together with
//! one field lying and every xxh3 recomputed, so that the lie reaches the validator behind the checksums. Each
//! must give a clear error naming what was wrong (for a block fault: the block), never a panic, within a few
//! seconds (every check runs on a thread under [`within`]) and, at open, within a heap bound tied to the image
//! length (the per-thread counter of `fuzz/src/alloc.rs`, included below as this binary's allocator).
//!
//! Already covered elsewhere, and not repeated here:
//! - `src/archive/tests.rs`: footer lies (one block more or less, `total_len = u64::MAX`, shifted and reversed
//!   section offsets, `file_len`), index lies (`payload_end` decreasing, too large, past the file, the last one
//!   not at the tables), table section lies (`group_table_end` past the section or zero, a frequency changed),
//!   and a token program deeper than the header's `max_depth` (`exceeding_the_depth_bound_is_a_corrupt_block`)
//!   — those assert `is_err` / the error kind; the index cases below add the message naming the block.
//! - `src/format/header.rs`, `src/format/tree.rs`: every header field out of range, every single-byte flip,
//!   lying tree entry counts, bad names, self-parents, entries under files, `u64::MAX` file offsets.
//! - `src/codec/block.rs`: a distance reaching before the stream start at the codec level.
//! - `tests/corruption.rs`: flips, overwritten windows, truncation and extension everywhere, slice directories
//!   off by a few bytes, another legal slice size, random files.
//!
//! Added here: `total_len` at and past 2^40 with the allocation measured, files beyond the stream and
//! overlapping files, a million phantom blocks that pass the index check, index lies with their messages, table
//! sections with lying counts (a header `group_log` lie, `nsym` beyond the alphabet, group ends going back),
//! tree parent cycles, a header `max_depth` lie on a packed archive (cold reads of every block: right bytes or
//! `DepthExceeded` naming the block; `verify` misses this lie, an ignored test records it), a decoded-length lie (tokens covering more
//! than their block), distances before the stream start inside an archive, and slice directories declaring
//! 2^62-byte or overflowing slices, and genome-mode files whose region head lies about where their structure is
//! (before the bases, inside the head, past the stream, a length past the stream or the limit, a valid structure
//! placed over the file's own bases) or whose tree entry disagrees with the structure's file length.
//!
//! Cycles and forward references in matches cannot be written at all: a distance is coded as `back − 1 ≥ 0`
//! (FORMAT.md §3), so every source starts before its destination, and the nearest lies the format can express
//! (a source before the stream, a depth bound exceeded, tokens covering more than their block) are tested.

#[path = "../fuzz/src/alloc.rs"]
#[allow(dead_code)]
mod alloc;
mod common;

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use aceapex::archive::{Archive, ArchiveOptions};
use aceapex::codec::block::{SliceDirectory, Token};
use aceapex::codec::tables::TableSet;
use aceapex::codec::varint;
use aceapex::engine::DecoderChoice;
use aceapex::error::{DecodeError, Error};
use aceapex::format::sections::parse_archive;
use aceapex::format::testkit::{self, file_entry, literal_header, root_entry, write_blocks, PlannedBlock};
use aceapex::format::tree::{Entry, EntryKind, Tree, TRANSFORM_GENOME};
use aceapex::format::{Footer, Header, FOOTER_LEN, HEADER_LEN, MAX_TOTAL_LEN};
use aceapex::genome::{pieces, region, split};
use aceapex::pack::{pack, PackOptions};
use common::Rng;
use xxhash_rust::xxh3::xxh3_64;

/// Runs `f` on a thread and fails if it takes longer than `limit`: a hang is a bug, not a slow test.
fn within<R: Send + 'static>(limit: Duration, f: impl FnOnce() -> R + Send + 'static) -> R {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    match rx.recv_timeout(limit) {
        Ok(r) => {
            worker.join().unwrap();
            r
        }
        Err(mpsc::RecvTimeoutError::Disconnected) => match worker.join() {
            Err(p) => std::panic::resume_unwind(p),
            Ok(()) => unreachable!("the worker sends before it ends"),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("ran longer than {limit:?}: a hang"),
    }
}

/// An archive image taken apart into what its sections say, to be put back together with one part lying.
#[derive(Clone)]
struct Parts {
    header: Header,
    payloads: Vec<Vec<u8>>,
    block_hash: Vec<u64>,
    /// The table section's body (without its xxh3): `u32 group_table_end[]`, then the sets.
    tables_body: Vec<u8>,
    tree: Tree,
    total_len: u64,
}

impl Parts {
    fn of(image: &[u8]) -> Parts {
        let p = parse_archive(image).unwrap();
        let mut start = HEADER_LEN;
        let payloads = p
            .payload_end
            .iter()
            .map(|&end| {
                let payload = image[start..end as usize].to_vec();
                start = end as usize;
                payload
            })
            .collect();
        let f = p.footer;
        let tables_body = image[f.tables_offset as usize..f.tree_offset as usize - 8].to_vec();
        Parts {
            header: p.header,
            payloads,
            block_hash: p.block_hash,
            tables_body,
            tree: p.tree,
            total_len: f.total_len,
        }
    }

    /// The image, every checksum computed; `index` may replace the index's `payload_end[]` (a lie the payloads
    /// do not back).
    fn assemble_with_ends(&self, ends: Option<Vec<u64>>) -> Vec<u8> {
        let mut out = self.header.to_bytes().to_vec();
        let mut payload_end = Vec::new();
        for p in &self.payloads {
            out.extend_from_slice(p);
            payload_end.push(out.len() as u64);
        }
        let tables_offset = out.len() as u64;
        section(&mut out, &self.tables_body);
        let tree_offset = out.len() as u64;
        let mut tree = Vec::new();
        self.tree.write(&mut tree);
        out.extend_from_slice(&tree);
        let index_offset = out.len() as u64;
        let mut index = Vec::new();
        for v in ends.as_ref().unwrap_or(&payload_end).iter().chain(&self.block_hash) {
            index.extend_from_slice(&v.to_le_bytes());
        }
        section(&mut out, &index);
        let file_len = (out.len() + FOOTER_LEN) as u64;
        let footer = Footer { total_len: self.total_len, tables_offset, tree_offset, index_offset, file_len };
        out.extend_from_slice(&footer.to_bytes());
        out
    }

    fn assemble(&self) -> Vec<u8> {
        self.assemble_with_ends(None)
    }
}

/// Appends `body` and its xxh3.
fn section(out: &mut Vec<u8>, body: &[u8]) {
    out.extend_from_slice(body);
    out.extend_from_slice(&xxh3_64(body).to_le_bytes());
}

/// A tree from entries as given: no validation, so it can lie (the reader must validate).
fn raw_tree(entries: Vec<Entry>) -> Tree {
    Tree { children: vec![Vec::new(); entries.len()], entries }
}

/// A real archive of a few files: 4 KiB blocks, groups of 2, depth 16, 4 lanes.
struct Fixture {
    dir: tempfile::TempDir,
    image: Vec<u8>,
    /// (path in the archive, bytes)
    files: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in");
        std::fs::create_dir(&input).unwrap();
        let mut rng = Rng::new(11);
        let files = vec![
            (b"in/dna".to_vec(), common::dna_like(&mut rng, 40_000)),
            (b"in/random".to_vec(), rng.bytes(5_000)),
            (b"in/periodic".to_vec(), common::periodic(&mut rng, 33, 12_000)),
        ];
        for (name, bytes) in &files {
            std::fs::write(dir.path().join(std::str::from_utf8(name).unwrap()), bytes).unwrap();
        }
        let archive = dir.path().join("f.acx");
        let opts =
            PackOptions { block_log: 12, group_log: 1, max_depth: 16, rans_lanes: 2, threads: 1, ..Default::default() };
        pack(&[input], &archive, &opts).unwrap();
        Fixture { image: std::fs::read(&archive).unwrap(), files, dir }
    }

    fn parts(&self) -> Parts {
        Parts::of(&self.image)
    }

    /// Writes `image` beside the fixture and opens it on the CPU engine.
    fn open(&self, name: &str, image: &[u8]) -> Result<Archive, Error> {
        let path = self.dir.path().join(name);
        std::fs::write(&path, image).unwrap();
        open_cpu(&path)
    }
}

fn open_cpu(path: &Path) -> Result<Archive, Error> {
    Archive::open_with(path, ArchiveOptions { decoder: DecoderChoice::Cpu, cache_bytes: 4 << 20, ..Default::default() })
}

/// Parses `image`, which must be refused: returns the message, after checking that parsing held at most
/// `1 MiB + 64 × len` of heap (every count is checked against the bytes backing it before anything is reserved).
fn refused(image: Vec<u8>) -> String {
    within(Duration::from_secs(5), move || {
        let (result, peak) = alloc::peak_during(|| parse_archive(&image));
        let bound = (1 << 20) + 64 * image.len();
        assert!(peak <= bound, "parsing {} bytes held {peak} bytes of heap", image.len());
        match result {
            Ok(_) => panic!("a lying image was accepted"),
            Err(e) => e.to_string(),
        }
    })
}

fn assert_mentions(message: &str, parts: &[&str]) {
    for p in parts {
        assert!(message.contains(p), "{message:?} does not mention {p:?}");
    }
}

/// Reads every file of the fixture from `archive`: each read either gives the original bytes or fails with a
/// `CorruptBlock` naming a block `allowed` accepts. Returns how many reads failed.
fn reads_are_right_or_name_the_block(fx: &Fixture, archive: &Archive, allowed: impl Fn(u64) -> bool) -> usize {
    let mut failed = 0;
    for (name, want) in &fx.files {
        let id = archive.tree().resolve_path(name).unwrap();
        let mut got = vec![0u8; want.len()];
        match archive.read_file(id, 0, &mut got) {
            Ok(n) => assert!(n == want.len() && got == *want, "{}: wrong bytes", String::from_utf8_lossy(name)),
            Err(Error::CorruptBlock { block, .. }) if allowed(block) => failed += 1,
            Err(e) => panic!("{}: unexpected error {e}", String::from_utf8_lossy(name)),
        }
    }
    failed
}

#[test]
fn huge_declared_sizes_are_refused_without_allocating() {
    let fx = Fixture::new();
    // 2^40 bytes is the format's limit: 2^28 blocks of 4 KiB, whose index (4 GiB) this image does not hold.
    let mut p = fx.parts();
    p.total_len = MAX_TOTAL_LEN;
    let m = refused(p.assemble());
    assert_mentions(&m, &["index", "index_len", "268435456 blocks need"]);
    p.total_len = MAX_TOTAL_LEN + 1;
    assert_mentions(&refused(p.assemble()), &["footer", "total_len"]);
    // A file larger than the stream, and one whose end overflows a u64.
    let total = fx.parts().total_len;
    for (offset, size) in [(0, total + 1), (total, 1)] {
        let mut p = fx.parts();
        p.tree = raw_tree(vec![root_entry(), file_entry("big", offset, size)]);
        let m = refused(p.assemble());
        assert_mentions(&m, &["tree section", "entry 1", "exceeds the stream length"]);
    }
    // An offset past 2^40 is refused as the entry is read (the message names the field, not the entry).
    let mut p = fx.parts();
    p.tree = raw_tree(vec![root_entry(), file_entry("big", u64::MAX - 10, 100)]);
    assert_mentions(&refused(p.assemble()), &["tree section", "file offset", "exceeds the limit"]);
}

#[test]
fn a_million_phantom_blocks_are_contained() {
    let fx = Fixture::new();
    let real = fx.parts();
    let real_blocks = real.payloads.len() as u64;
    let mut p = real.clone();
    // 2^20 extra blocks of empty payload: the index agrees with total_len, every payload end is legal, and the
    // table section gets the sets the extra groups need. The archive opens; the phantom blocks must fail alone.
    let extra = 1u64 << 20;
    let last_block_len = p.total_len - ((real_blocks - 1) << 12);
    p.total_len = (real_blocks + extra) << 12;
    p.payloads.extend(std::iter::repeat_n(Vec::new(), extra as usize));
    p.block_hash.extend(std::iter::repeat_n(0, extra as usize));
    let groups = real.header.group_count(real_blocks + extra) as usize;
    let sets = table_sets(&real);
    let mut sets_bytes = Vec::new();
    let mut ends = Vec::new();
    for g in 0..groups {
        sets[g.min(sets.len() - 1)].write(&mut sets_bytes);
        ends.push(sets_bytes.len() as u32);
    }
    p.tables_body = ends.iter().flat_map(|e| e.to_le_bytes()).chain(sets_bytes).collect();
    let image = p.assemble();
    let path = fx.dir.path().join("phantom.acx");
    std::fs::write(&path, &image).unwrap();
    within(Duration::from_secs(60), move || {
        let archive = open_cpu(&path).expect("every count agrees, so the image opens");
        assert_eq!(archive.data().block_count(), real_blocks + extra);
        // The last real block was short and is now read as a full one: it fails too.
        let first_bad = if last_block_len < 4096 { real_blocks - 1 } else { real_blocks };
        for id in [real_blocks, real_blocks + 1, real_blocks + extra / 2, real_blocks + extra - 1] {
            match archive.block(id) {
                Err(Error::CorruptBlock { block, .. }) => assert_eq!(block, id),
                other => panic!("phantom block {id}: {:?}", other.map(|b| b.len())),
            }
        }
        for id in 0..first_bad {
            assert!(archive.block(id).is_ok(), "real block {id} failed");
        }
    });
}

/// The fixture's table sets, one per group.
fn table_sets(p: &Parts) -> Vec<TableSet> {
    let groups = p.header.group_count(p.payloads.len() as u64) as usize;
    let ends: Vec<usize> =
        (0..groups).map(|g| u32::from_le_bytes(p.tables_body[4 * g..4 * g + 4].try_into().unwrap()) as usize).collect();
    let sets = &p.tables_body[4 * groups..];
    let mut start = 0;
    ends.iter()
        .map(|&end| {
            let set = TableSet::read(&sets[start..end]).unwrap();
            start = end;
            set
        })
        .collect()
}

#[test]
fn index_lies_name_the_block() {
    let fx = Fixture::new();
    let p = fx.parts();
    let image = p.assemble();
    let ends = parse_archive(&image).unwrap().payload_end;
    let tables = *ends.last().unwrap();
    let lie = |edit: &dyn Fn(&mut Vec<u64>)| {
        let mut e = ends.clone();
        edit(&mut e);
        refused(p.assemble_with_ends(Some(e)))
    };
    // Backwards at block 3; block 2 ending past the table section (a legal length, so block 3 is the one that
    // goes backwards); block 1 longer than 2·B + 4096; the last block ending inside the table section.
    assert_mentions(&lie(&|e| e[3] = e[2] - 1), &["index", "payload_end", "block 3 spans"]);
    assert_mentions(&lie(&|e| e[2] = tables + 100), &["index", "payload_end", "block 3 spans"]);
    assert_mentions(
        &lie(&|e| e[1] = e[0] + 2 * 4096 + 4097),
        &["index", "payload_end", "block 1 spans", "at most 12288"],
    );
    let last = ends.len() - 1;
    assert_mentions(&lie(&|e| e[last] = tables + 8), &["index", "payloads end at", "the table section starts"]);
}

#[test]
fn table_sections_with_lying_counts() {
    let fx = Fixture::new();
    let p = fx.parts();
    let groups = p.header.group_count(p.payloads.len() as u64) as usize;
    // The header says groups of one block: twice as many groups as the section holds sets for.
    let mut q = p.clone();
    q.header.group_log = 0;
    let m = refused(q.assemble());
    assert_mentions(&m, &["table section"]);
    assert!(m.contains("group") || m.contains("table set"), "{m}");
    // Group 1's set says its LL alphabet has 200 symbols (the alphabet is smaller).
    let mut q = p.clone();
    let ends: Vec<u32> =
        (0..groups).map(|g| u32::from_le_bytes(q.tables_body[4 * g..4 * g + 4].try_into().unwrap())).collect();
    let set1 = 4 * groups + ends[0] as usize;
    q.tables_body[set1] = 100;
    assert_mentions(&refused(q.assemble()), &["table section", "group 1", "LL table nsym"]);
    // Group ends going backwards.
    let mut q = p.clone();
    q.tables_body[4..8].copy_from_slice(&(ends[0] - 1).to_le_bytes());
    assert_mentions(&refused(q.assemble()), &["table section", "group_table_end", "group 1 spans"]);
}

#[test]
fn tree_cycles_and_overlapping_files() {
    let fx = Fixture::new();
    let p = fx.parts();
    let total = p.total_len;
    // Entry 1's parent is entry 2 and entry 2's is entry 1: a cycle through a forward reference.
    let mut q = p.clone();
    let dir = |parent, name: &str| Entry { parent, kind: EntryKind::Dir, ..file_entry(name, 0, 0) };
    q.tree = raw_tree(vec![root_entry(), dir(2, "a"), dir(1, "b")]);
    assert_mentions(&refused(q.assemble()), &["tree section", "entry 1"]);
    // Overlapping and shared file ranges are legal (deduplicated files): each reads its own range of the stream.
    let mut q = p.clone();
    q.tree = Tree::from_entries(vec![
        root_entry(),
        file_entry("a", 0, 20_000),
        file_entry("b", 10_000, 30_000),
        file_entry("c", 0, 20_000),
        file_entry("tail", total - 1, 1),
    ])
    .unwrap();
    let archive = fx.open("overlap.acx", &q.assemble()).unwrap();
    let stream: Vec<u8> = fx.files.iter().flat_map(|(_, b)| b.iter().copied()).collect();
    let mut whole = vec![0u8; total as usize];
    archive.read_stream(0, &mut whole).unwrap();
    for (name, offset, size) in
        [("a", 0usize, 20_000usize), ("b", 10_000, 30_000), ("c", 0, 20_000), ("tail", total as usize - 1, 1)]
    {
        let id = archive.tree().resolve_path(name.as_bytes()).unwrap();
        let mut got = vec![0u8; size];
        assert_eq!(archive.read_file(id, 0, &mut got).unwrap(), size);
        assert!(got == whole[offset..offset + size], "{name}");
    }
    // The stream is the packed files back to back in some order; the overlap reads agree with it.
    assert_eq!(whole.len(), stream.len());
}

/// Cold reads of every block of `image` (a fresh archive per block, so no source is served from the cache):
/// each block is right or fails with `DepthExceeded` naming a block — the one read, or with `strict` unset an
/// earlier one whose tokens the chain ran out of depth in. Returns the blocks that failed.
fn cold_blocks_under_a_depth_lie(fx: &Fixture, image: &[u8], bound: u8, strict: bool) -> Vec<u64> {
    let truth = Archive::open(fx.dir.path().join("f.acx")).unwrap();
    let blocks = truth.data().block_count();
    let path = fx.dir.path().join(format!("depth{bound}.acx"));
    std::fs::write(&path, image).unwrap();
    let mut failed = Vec::new();
    for id in 0..blocks {
        let archive = open_cpu(&path).unwrap();
        let want = truth.block(id).unwrap();
        match within(Duration::from_secs(10), move || archive.block(id)) {
            Ok(got) => assert!(got[..] == want[..], "block {id}: wrong bytes under a depth lie"),
            Err(e @ Error::CorruptBlock { source: DecodeError::DepthExceeded { .. }, .. }) => {
                let named = match e {
                    Error::CorruptBlock { block, .. } => block,
                    _ => unreachable!("matched above"),
                };
                assert!(named == id || (!strict && named < id), "reading block {id}: {e}");
                assert!(e.to_string().contains(&format!("block {named}")) && e.to_string().contains("depth"), "{e}");
                failed.push(id);
            }
            Err(e) => panic!("block {id}: expected DepthExceeded, got {e}"),
        }
    }
    failed
}

#[test]
fn a_depth_bound_lie_fails_blocks_never_bytes() {
    let fx = Fixture::new();
    for bound in [1u8, 2] {
        // Packed with depth 16; the header now promises less, so bytes copied from copies exceed it.
        let mut p = fx.parts();
        p.header.max_depth = bound;
        let failed = cold_blocks_under_a_depth_lie(&fx, &p.assemble(), bound, false);
        assert!(!failed.is_empty(), "depth {bound}: no block failed: the fixture has no chains of copies");
        // File reads through the one cache: right bytes or an error naming a block.
        let archive = fx.open(&format!("depth{bound}-files.acx"), &p.assemble()).unwrap();
        let blocks = archive.data().block_count();
        reads_are_right_or_name_the_block(&fx, &archive, |b| b < blocks);
    }
    // A header that promises depth 0 is refused at open.
    let mut q = fx.parts();
    q.header.max_depth = 0;
    assert_mentions(&refused(q.assemble()), &["header", "max_depth"]);
}

/// An archive whose header understates the depth fails `verify`, as its cold random reads fail
/// (`a_depth_bound_lie_fails_blocks_never_bytes`). Until session 43 it verified clean: the sequential decode
/// copies cross-block sources from the blocks it has just decoded, so it never follows a chain; verify now also
/// reads every block cold.
#[test]
fn verify_catches_a_depth_bound_lie() {
    let fx = Fixture::new();
    let mut p = fx.parts();
    p.header.max_depth = 1;
    let archive = fx.open("depth-verify.acx", &p.assemble()).unwrap();
    let errors = within(Duration::from_secs(30), move || archive.verify());
    assert!(!errors.is_empty(), "verify passed an archive whose cold reads exceed its depth bound");
    for e in &errors {
        assert!(e.block().is_some() && e.to_string().contains("depth"), "{e}");
    }
}

/// A cold read of block `b` whose chain runs out of depth inside an earlier block's tokens names `b` (and the
/// stream position where the chain ran out), not that earlier block, which decodes fine on its own. (It named the
/// earlier block until session 43: "block 0 is corrupt" while reading block 1.)
#[test]
fn a_depth_error_names_the_block_read() {
    let fx = Fixture::new();
    let mut p = fx.parts();
    p.header.max_depth = 1;
    cold_blocks_under_a_depth_lie(&fx, &p.assemble(), 1, true);
}

#[test]
fn a_decoded_length_lie_fails_the_last_block() {
    let fx = Fixture::new();
    let mut p = fx.parts();
    // The stream is 100 bytes shorter than the tokens of the last block cover; the tree still fits.
    let blocks = p.payloads.len() as u64;
    p.total_len -= 100;
    if p.total_len <= (blocks - 1) << 12 {
        // The cut would remove the last block; move the cut inside it.
        p.total_len = ((blocks - 1) << 12) + 1;
    }
    p.tree = Tree::from_entries(vec![root_entry(), file_entry("all", 0, p.total_len)]).unwrap();
    let archive = fx.open("short.acx", &p.assemble()).unwrap();
    let last = blocks - 1;
    within(Duration::from_secs(10), move || match archive.block(last) {
        Err(e @ Error::CorruptBlock { block, .. }) => {
            assert_eq!(block, last);
            assert!(e.to_string().contains(&format!("block {last}")), "{e}");
        }
        other => panic!("block {last}: {:?}", other.map(|b| b.len())),
    });
}

#[test]
fn slice_directories_declaring_huge_slices_fail_their_block() {
    let fx = Fixture::new();
    let p = fx.parts();
    let block = 3usize;
    let n = p.header.slices_per_block() as usize;
    // Directories that name the real slice count but lengths of 2^62, u64::MAX, and an 11-byte varint.
    let mut dirs: Vec<Vec<u8>> = Vec::new();
    for huge in [1u64 << 62, u64::MAX] {
        let mut d = Vec::new();
        varint::write(huge, &mut d);
        (1..n).for_each(|_| varint::write(0, &mut d));
        dirs.push(d);
    }
    dirs.push(vec![0xff; 11]);
    for (i, dir) in dirs.into_iter().enumerate() {
        let mut q = p.clone();
        let real = &p.payloads[block];
        let body: usize = SliceDirectory::parse(real, n).unwrap().slices().map(|s| s.len()).sum();
        let mut payload = dir;
        payload.extend_from_slice(&real[real.len() - body..]);
        q.payloads[block] = payload;
        let archive = fx.open(&format!("dir{i}.acx"), &q.assemble()).unwrap();
        within(Duration::from_secs(10), move || {
            match archive.block(block as u64) {
                Err(e @ Error::CorruptBlock { block: b, .. }) => {
                    assert_eq!(b, block as u64);
                    assert!(e.to_string().contains("slice"), "{e}");
                }
                other => panic!("directory {i}: {:?}", other.map(|b| b.len())),
            }
            // The blocks before it are untouched.
            for id in 0..block as u64 {
                archive.block(id).unwrap();
            }
        });
    }
}

/// A hand-written archive of 4 KiB blocks in single slices ([`literal_header`]), whose tokens may lie; the
/// decoded bytes used for hashing come from `stream`, which file `all` covers.
fn hand_archive(path: &Path, blocks: &[PlannedBlock], stream: &[u8]) -> PathBuf {
    let tree = Tree::from_entries(vec![root_entry(), file_entry("all", 0, stream.len() as u64)]).unwrap();
    write_blocks(path, literal_header(), blocks, stream, &tree);
    path.to_path_buf()
}

#[test]
fn distances_before_the_stream_start_fail_their_block() {
    let dir = tempfile::tempdir().unwrap();
    let lits: Vec<u8> = (0..4096u32).map(|i| (i * 31 % 251) as u8).collect();
    // Block 0: plain literals. Block 1: 10 literals, then a match 5000 + 4106 bytes back (before byte 0).
    let block0 = PlannedBlock {
        tokens: vec![Token { lit_len: 4096, match_len: 0, back: 0, rc: false }],
        literals: lits.clone(),
    };
    let block1 = PlannedBlock {
        tokens: vec![
            Token { lit_len: 10, match_len: 100, back: 9106 + 5000, rc: false },
            Token { lit_len: 5, match_len: 0, back: 0, rc: false },
        ],
        literals: lits[..15].to_vec(),
    };
    let mut stream = lits.clone();
    stream.extend_from_slice(&lits[..115]);
    let path = hand_archive(&dir.path().join("before.acx"), &[block0, block1], &stream);
    let archive = open_cpu(&path).unwrap();
    within(Duration::from_secs(10), move || {
        archive.block(0).unwrap();
        match archive.block(1) {
            Err(e @ Error::CorruptBlock { block: 1, .. }) => {
                assert!(e.to_string().contains("before the stream start"), "{e}");
            }
            other => panic!("block 1: {:?}", other.map(|b| b.len())),
        }
        let errors = archive.verify();
        assert!(errors.len() == 1 && matches!(errors[0], Error::CorruptBlock { block: 1, .. }), "{errors:?}");
    });
}

/// An archive of 4 KiB single-slice blocks that hold `stream` as plain literals, with `entries` as its tree.
fn literal_archive(path: &Path, stream: &[u8], entries: Vec<Entry>) -> PathBuf {
    testkit::literal_archive(path, stream, &Tree::from_entries(entries).unwrap());
    path.to_path_buf()
}

/// A FASTA file of a few thousand bases with soft-masking, N runs and two records.
fn genome_fasta(rng: &mut Rng) -> Vec<u8> {
    let mut fasta = b">chr1 hostile test\n".to_vec();
    for line in 0..80 {
        let mut seq: Vec<u8> = (0..60).map(|_| b"ACGT"[rng.below(4) as usize]).collect();
        if line % 7 == 3 {
            seq[10..30].make_ascii_lowercase();
        }
        if line == 40 {
            seq[5..25].fill(b'N');
        }
        fasta.extend_from_slice(&seq);
        fasta.push(b'\n');
        if line == 50 {
            fasta.extend_from_slice(b">chr2\n");
        }
    }
    fasta
}

/// A genome-mode file's stream as the packer lays it out: the region (head and bases), `gap` filler bytes, then
/// the structure (in pieces of ~1000 original bytes). Returns the stream, where the structure starts, and its
/// length.
fn genome_stream(fasta: &[u8], gap: usize) -> (Vec<u8>, u64, u64) {
    let s = split(fasta).unwrap();
    let structure = pieces::encode_file(fasta, 1000, |_| {}).unwrap().structure;
    let at = region::region_len(s.bases.len() as u64) + gap as u64;
    let mut stream = region::head(at, structure.len()).to_vec();
    stream.extend_from_slice(&s.bases);
    stream.extend(std::iter::repeat_n(b'-', gap));
    stream.extend_from_slice(&structure);
    (stream, at, structure.len() as u64)
}

fn genome_entry(size: u64) -> Entry {
    Entry { kind: EntryKind::File { offset: 0, size, transform: TRANSFORM_GENOME }, ..file_entry("g.fa", 0, 0) }
}

#[test]
fn genome_heads_that_lie_about_their_structure_name_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let fasta = genome_fasta(&mut Rng::new(5));
    let (stream, at, len) = genome_stream(&fasta, 100);
    let total = stream.len() as u64;
    let size = fasta.len() as u64;
    // The honest archive reads back exactly.
    let good = literal_archive(&dir.path().join("good.acx"), &stream, vec![root_entry(), genome_entry(size)]);
    let archive = open_cpu(&good).unwrap();
    let mut out = vec![0u8; fasta.len()];
    assert_eq!(archive.read_file(1, 0, &mut out).unwrap(), fasta.len());
    assert_eq!(out, fasta);
    assert!(archive.verify().is_empty());

    let with_head = |offset: u64, length: u64| {
        let mut lying = stream.clone();
        lying[..8].copy_from_slice(&offset.to_le_bytes());
        lying[8..12].copy_from_slice(&(length as u32).to_le_bytes());
        lying
    };
    // A byte of piece 0's code flipped: the table opens, the piece fails its checksum when a read meets it.
    let table_len = pieces::table_len(&stream[at as usize..], len).unwrap();
    let table = pieces::PieceTable::decode(&stream[at as usize..(at + pieces::PREFIX_LEN + table_len) as usize], len);
    let code = table.unwrap().code(0);
    let mut piece_flipped = stream.clone();
    piece_flipped[(at + (code.start + code.end) / 2) as usize] ^= 0x10;
    // A valid structure copied over the file's own bases, with the head pointing at it.
    let mut over_bases = with_head(20, len);
    over_bases[20..20 + len as usize].copy_from_slice(&stream[at as usize..]);
    let cases: Vec<(&str, Vec<u8>, u64, &str)> = vec![
        ("offset-zero", with_head(0, len), size, "structure_offset"),
        ("offset-in-head", with_head(region::HEAD_LEN - 1, len), size, "structure_offset"),
        ("offset-past-stream", with_head(total + 1, len), size, "structure_offset"),
        ("offset-max", with_head(u64::MAX, len), size, "structure_offset"),
        ("len-past-stream", with_head(at, len + 1), size, "structure_len"),
        ("len-max", with_head(at, u32::MAX.into()), size, "structure_len"),
        ("len-short", with_head(at, len - 1), size, "genome piece len"),
        ("piece-0-flipped", piece_flipped, size, "piece 0 of"),
        ("over-bases", over_bases, size, "genome bases"),
        ("size-lie", stream.clone(), size + 1, "genome file size"),
    ];
    for (name, lying, entry_size, expect) in cases {
        let path = literal_archive(
            &dir.path().join(format!("{name}.acx")),
            &lying,
            vec![root_entry(), genome_entry(entry_size)],
        );
        let archive = open_cpu(&path).unwrap();
        within(Duration::from_secs(10), move || {
            let mut buf = vec![0u8; 100];
            let err = archive.read_file(1, 0, &mut buf).unwrap_err().to_string();
            assert!(err.contains("g.fa") && err.contains(expect), "{name}: {err}");
            let errors = archive.verify();
            assert_eq!(errors.len(), 1, "{name}: {errors:?}");
            assert!(errors[0].to_string().contains(expect), "{name}: {}", errors[0]);
        });
    }
}

#[test]
fn packed_genome_archives_keep_structures_after_every_file() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    std::fs::create_dir(&input).unwrap();
    let mut rng = Rng::new(9);
    let fastas: Vec<Vec<u8>> = (0..3).map(|_| genome_fasta(&mut rng)).collect();
    for (i, f) in fastas.iter().enumerate() {
        std::fs::write(input.join(format!("{i}.fa")), f).unwrap();
    }
    std::fs::write(input.join("z.txt"), b"plain bytes after the FASTA files").unwrap();
    let path = dir.path().join("g.acx");
    pack(&[input], &path, &PackOptions { block_log: 12, group_log: 1, threads: 1, ..Default::default() }).unwrap();
    let archive = open_cpu(&path).unwrap();
    let tree = archive.tree().clone();
    let files: Vec<(u32, u64, u64, u32)> = tree
        .entries
        .iter()
        .enumerate()
        .filter_map(|(id, e)| match e.kind {
            EntryKind::File { offset, size, transform } => Some((id as u32, offset, size, transform)),
            _ => None,
        })
        .collect();
    assert_eq!(files.iter().filter(|f| f.3 == TRANSFORM_GENOME).count(), 3, "{files:?}");
    // Every file's bytes end before the first structure, and the structures follow in entry order.
    let data_end = files.iter().map(|&(id, offset, size, transform)| {
        if transform == TRANSFORM_GENOME {
            let (_, bases) = archive.genome_stream_span(id, 0, 0).unwrap().unwrap();
            assert_eq!(bases.start, offset + region::HEAD_LEN);
            bases.end
        } else {
            offset + size
        }
    });
    let data_end = data_end.max().unwrap();
    let mut head = [0u8; 12];
    let mut next = data_end;
    for &(id, offset, size, transform) in &files {
        if transform != TRANSFORM_GENOME {
            continue;
        }
        archive.read_stream(offset, &mut head).unwrap();
        let at = u64::from_le_bytes(head[..8].try_into().unwrap());
        let len = u64::from(u32::from_le_bytes(head[8..].try_into().unwrap()));
        assert!(at >= next, "file {id}: structure at {at}, before {next}");
        next = at + len;
        let mut out = vec![0u8; size as usize];
        archive.read_file(id, 0, &mut out).unwrap();
        assert!(fastas.contains(&out));
    }
    assert_eq!(next, archive.total_len());
}
