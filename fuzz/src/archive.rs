//! Whole-archive targets: opening an image (`archive_open`), reading every file of it (`archive_read`) and the
//! token-level LZ resolver on its own (`resolver`). Inputs are real packed archives (see `fuzz/tests/seeds.rs`)
//! mutated by the fuzzer, framed and optionally resealed as [`crate::image`] describes.

use std::sync::Arc;

use aceapex::archive::{Archive, ArchiveOptions};
use aceapex::engine::cpu::CpuEngine;
use aceapex::engine::DecoderChoice;
use aceapex::error::Error;
use aceapex::format::sections::{parse_archive, ParsedArchive};
use aceapex::format::tree::{EntryKind, TRANSFORM_GENOME};
use aceapex::format::{ArchiveData, HEADER_LEN};

use crate::alloc::peak_during;
use crate::image::{self, prepare, unframe, ImageFile, Original, RESEAL};

/// The most heap `parse_archive` may hold for an image of `len` bytes: a fixed allowance plus a multiple of
/// the length. Every count in the format is checked against the bytes that must back it before anything is
/// reserved, so memory is linear in the image; the factor covers the in-memory forms being larger than the
/// serialised ones (a 1-byte frequency becomes a `u16` plus its cumulative `u16`, a 7-byte tree entry a
/// 100-byte `Entry` plus its children list), the fixed part the error strings and small vectors.
pub fn parse_memory_bound(len: usize) -> usize {
    (1 << 20) + 64 * len
}

/// What a validated archive promises every later stage: the index, tables and tree agree with the footer.
fn check_parsed(p: &ParsedArchive, image_len: usize) {
    let (h, f) = (&p.header, &p.footer);
    assert_eq!(f.file_len, image_len as u64);
    let blocks = h.block_count(f.total_len);
    assert_eq!(p.payload_end.len() as u64, blocks);
    assert_eq!(p.block_hash.len() as u64, blocks);
    assert_eq!(p.tables.len() as u64, h.group_count(blocks));
    let mut prev = HEADER_LEN as u64;
    for &end in &p.payload_end {
        assert!(end >= prev && end - prev <= h.max_payload_len(), "payload [{prev}, {end})");
        prev = end;
    }
    assert_eq!(prev, f.tables_offset);
    assert!(f.tables_offset <= f.tree_offset && f.tree_offset <= f.index_offset);
    assert!(f.index_offset + 64 <= f.file_len);
    let tree = &p.tree;
    assert_eq!(tree.children.len(), tree.entries.len());
    for (id, e) in tree.entries.iter().enumerate() {
        if let EntryKind::File { offset, size, transform } = e.kind {
            // A genome-mode file stores fewer bytes than its size (2-bit bases and a structure): the stream holds
            // at least its region's head at `offset`; the rest is checked when the file is opened.
            let stored = if transform == TRANSFORM_GENOME { aceapex::genome::region::HEAD_LEN } else { size };
            assert!(offset.checked_add(stored).is_some_and(|end| end <= f.total_len), "entry {id}: {offset}+{size}");
        }
        if id > 0 {
            assert!((e.parent as usize) < id, "entry {id}: parent {} does not precede it", e.parent);
            assert!(tree.children[e.parent as usize].contains(&(id as u32)), "entry {id} not listed by its parent");
        }
    }
}

/// `archive_open`: `mode, image`. The image (resealed when the mode asks) must parse to `Ok` or `Err` without
/// panicking, holding at most [`parse_memory_bound`] of heap, through both in-memory entry points
/// (`parse_archive` and `ArchiveData::from_image`, which must agree); what parses must be internally
/// consistent. Every 16th input is also opened as a file, whose reader takes another path (`pread` of the ends,
/// then of the sections) and must reach the same verdict.
pub fn archive_open(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else { return };
    let mut image = rest.to_vec();
    if mode & RESEAL != 0 {
        image::reseal(&mut image);
    }
    let bound = parse_memory_bound(image.len());
    let (parsed, peak) = peak_during(|| parse_archive(&image));
    assert!(peak <= bound, "parse_archive of {} bytes held {peak} bytes of heap (bound {bound})", image.len());
    if let Ok(p) = &parsed {
        check_parsed(p, image.len());
    }
    // from_image keeps the image itself: count only what it holds beyond it.
    let copy = image.clone();
    let (from_image, peak) = peak_during(|| ArchiveData::from_image("fuzz", copy));
    let peak = peak.saturating_sub(image.len());
    assert!(peak <= bound, "from_image of {} bytes held {peak} bytes of heap beyond the image", image.len());
    assert_eq!(from_image.is_ok(), parsed.is_ok(), "from_image and parse_archive disagree");
    if let (Err(a), Err(b)) = (&from_image, &parsed) {
        assert!(a.to_string().contains(&b.to_string()), "from_image says {a}, parse_archive {b}");
    }
    // The file reader is slower (a write and three preads): every 16th input.
    if mode & 0xf0 == 0 {
        let Ok(file) = ImageFile::write(&image) else { return };
        let opened = ArchiveData::open(file.path());
        assert_eq!(opened.is_ok(), parsed.is_ok(), "open and parse_archive disagree: {:?}", opened.err());
    }
}

/// Reads of `[offset, offset + len)` to try on a file of `size` bytes: whole-file heads, both ends, the middle,
/// ranges that cross the end, and one past it. Lengths are capped so that a lying size costs bounded work.
fn read_plan(size: u64, salt: u64) -> Vec<(u64, usize)> {
    const CAP: u64 = 64 << 10;
    let mut plan = vec![(0, size.min(CAP) as usize), (0, 1), (size / 2, 3), (size.saturating_sub(1), 1)];
    plan.push((size.saturating_sub(100), 200));
    plan.push((size, 8));
    if size > 0 {
        let off = salt % size;
        plan.push((off, (salt >> 32) as usize % 5000 + 1));
    }
    plan
}

fn original_of<'a>(originals: &'a Option<Vec<Original>>, path: &[u8], size: u64) -> Option<&'a [u8]> {
    let o = originals.as_ref()?.iter().find(|o| o.path == path)?;
    (o.bytes.len() as u64 == size).then_some(o.bytes.as_slice())
}

fn cpu_options() -> ArchiveOptions {
    ArchiveOptions {
        cache_bytes: 1 << 20,
        decoder: DecoderChoice::Cpu,
        seq_window_bytes: 64 << 10,
        ..ArchiveOptions::default()
    }
}

/// At most this many files are read per input, so an image with thousands of tiny entries stays fast.
const MAX_FILES: usize = 32;

/// `archive_read` (framed, see [`crate::image`]): opens the image in memory as an [`Archive`] on the CPU engine, reads a
/// plan of ranges of every file through the block cache, streams each file through the sequential decoder
/// (the `cat`/unpack path) and verifies every block. Never a panic or a hang; every successful read equals
/// the original files while they are intact; an intact archive opens, reads and verifies without an error.
pub fn archive_read(data: &[u8]) {
    let framed = unframe(data);
    let (image, intact) = prepare(&framed);
    let archive = match ArchiveData::from_image("fuzz", image.clone()) {
        Ok(data) => Archive::with_engines(Arc::new(data), cpu_options(), None),
        Err(e) => {
            assert!(!intact, "the seed archive did not open: {e}");
            return;
        }
    };
    let salt = xxhash_rust::xxh3::xxh3_64(&image);
    let tree = archive.tree().clone();
    let files = tree.entries.iter().enumerate().filter_map(|(id, e)| match e.kind {
        EntryKind::File { size, .. } => Some((id as u32, size)),
        _ => None,
    });
    for (id, size) in files.take(MAX_FILES) {
        let path = tree.path_of(id);
        let want = original_of(&framed.originals, &path, size);
        let name = String::from_utf8_lossy(&path).into_owned();
        for (off, len) in read_plan(size, salt ^ id as u64) {
            let mut buf = vec![0u8; len];
            match archive.read_file(id, off, &mut buf) {
                Ok(n) => {
                    assert_eq!(n as u64, (len as u64).min(size.saturating_sub(off)), "{name}: read {len} at {off}");
                    if let Some(want) = want {
                        assert!(buf[..n] == want[off as usize..off as usize + n], "{name}: wrong bytes at {off}+{n}");
                    }
                }
                Err(e) => {
                    assert!(!intact, "{name}: read {len} at {off} of the intact archive failed: {e}");
                    assert_block_error(&e, archive.data().block_count());
                }
            }
        }
        let seq_len = size.min(64 << 10);
        let mut streamed = Vec::new();
        let mut sink = |piece: &[u8]| {
            streamed.extend_from_slice(piece);
            Ok(())
        };
        // Stored files stream a range of the decoded stream; genome-mode files (transform 1) their original
        // bytes rebuilt from structure and bases.
        let result = match archive.file_range(id) {
            Ok((start, _)) => archive.decode_range_sequential(start, seq_len, &mut sink),
            Err(_) => archive.stream_genome_file(id, 0, seq_len, &mut sink),
        };
        match result {
            Ok(()) => {
                assert_eq!(streamed.len() as u64, seq_len, "{name}: sequential run length");
                if let Some(want) = want {
                    assert!(streamed == want[..seq_len as usize], "{name}: sequential run gave wrong bytes");
                }
            }
            Err(e) => assert!(!intact, "{name}: sequential run over the intact archive failed: {e}"),
        }
    }
    let errors = archive.verify();
    assert!(!intact || errors.is_empty(), "the intact archive does not verify: {errors:?}");
    for e in &errors {
        assert_block_error(e, archive.data().block_count());
    }
}

/// A read or verify failure on an opened archive must name a block that exists.
fn assert_block_error(e: &Error, block_count: u64) {
    if let Error::CorruptBlock { block, .. } = e {
        assert!(*block < block_count, "error names block {block} of {block_count}: {e}");
    }
}

/// `resolver` (framed, see [`crate::image`]): stream ranges resolved through tokens alone (FORMAT.md §1, the
/// random-access path: `NoDecodedBlocks`, at most `max_depth` matches per byte, no block hash checked) must
/// never panic or hang, and must agree with the verified block decoder: wherever every block a range touches
/// decodes and matches its hash, resolving the range gives the same bytes, or fails naming an earlier (source)
/// block that does not decode as a whole.
pub fn resolver(data: &[u8]) {
    let framed = unframe(data);
    let (image, intact) = prepare(&framed);
    let Ok(opened) = ArchiveData::from_image("fuzz", image.clone()) else {
        assert!(!intact, "the seed archive did not open");
        return;
    };
    let data = Arc::new(opened);
    let total = data.footer.total_len;
    if total == 0 {
        return;
    }
    let salt = xxhash_rust::xxh3::xxh3_64(&image);
    let (block_size, slice_size) = (data.header.block_size(), data.header.slice_size());
    let last = total - 1;
    // Ranges that start on block and slice boundaries, end at the stream's end, cross a block boundary, and
    // one anywhere.
    let mut ranges = vec![(0, 1), (last, 1), (slice_size.min(last), 300), (block_size.min(last), 4096)];
    ranges.push((block_size.saturating_sub(50).min(last), 100));
    ranges.push((salt % total, (salt >> 40) as usize % 6000 + 1));
    let reference = CpuEngine::new(data.clone());
    for (pos, len) in ranges {
        let len = len.min((total - pos) as usize);
        let mut out = vec![0u8; len];
        // A fresh engine per range, so each resolves from cold (no parsed slices left over from the last one).
        let resolved = CpuEngine::new(data.clone()).resolve_unverified(pos, &mut out);
        let mut verified = Vec::with_capacity(len);
        let log = data.header.block_log;
        for id in pos >> log..=(pos + len as u64 - 1) >> log {
            let mut block = vec![0u8; data.block_len(id) as usize];
            if reference.decode_block(id, &mut block).is_err() {
                assert!(!intact, "block {id} of the intact archive does not decode");
                verified.clear();
                break;
            }
            let from = pos.saturating_sub(data.block_start(id)) as usize;
            let take = (len - verified.len()).min(block.len() - from);
            verified.extend_from_slice(&block[from..from + take]);
        }
        if verified.len() == len {
            match resolved {
                Ok(()) => assert!(out == verified, "resolving {pos}+{len} through tokens gave other bytes"),
                // The verified decoder parses a source slice only as far as the bytes it copies (the closure
                // planner's prefixes: words past them are never read, and no final rANS state is checked), while
                // this path parses whole source slices. So it may fail where every block of the range verifies,
                // but only on a source block outside the range that does not decode as a whole.
                Err(Error::CorruptBlock { block, .. })
                    if block < pos >> log
                        && reference.decode_block(block, &mut vec![0; data.block_len(block) as usize]).is_err() => {}
                Err(e) => panic!("resolving {pos}+{len} failed where every block verifies: {e}"),
            }
        }
    }
}
