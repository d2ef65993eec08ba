//! Unit tests of the filesystem layer over the in-memory backend (no mount, no archive).

use super::memory::{Content, MemoryBackend, MemoryTreeBuilder};
use super::*;
use proptest::prelude::*;

fn pattern(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

fn sample_backend() -> MemoryBackend {
    let mut b = MemoryTreeBuilder::new();
    b.bytes("a.txt", b"hello\n")
        .bytes("dir/big.bin", &pattern(300_000, 1))
        .dir("dir/sub1", 0o750)
        .dir("dir/sub2", 0o700)
        .bytes("dir/sub1/empty", b"")
        .symlink("link", b"dir/big.bin")
        .file("exec", Content::Bytes(Arc::new(b"#!/bin/sh\n".to_vec())), 0o755);
    b.build()
}

fn fs_over(backend: MemoryBackend) -> AcxFs<MemoryBackend> {
    AcxFs::new(Arc::new(backend), FsOptions { uid: 42, gid: 43, ..FsOptions::default() })
}

fn lookup_path(fs: &AcxFs<MemoryBackend>, path: &str) -> FsResult<Attr> {
    let mut attr = fs.getattr(1)?;
    for comp in path.split('/').filter(|c| !c.is_empty()) {
        attr = fs.lookup(attr.ino, comp.as_bytes())?;
    }
    Ok(attr)
}

fn list(fs: &AcxFs<MemoryBackend>, ino: u64) -> Vec<(Vec<u8>, u64, FileKind)> {
    let mut out = Vec::new();
    fs.readdir(ino, 0, |e| {
        out.push((e.name.to_vec(), e.ino, e.kind));
        false
    })
    .unwrap();
    out
}

/// Reads a whole file through open/read/release in `chunk`-byte requests, as the kernel would.
pub(crate) fn read_all<B: Backend>(fs: &AcxFs<B>, ino: u64, chunk: u32) -> Vec<u8> {
    read_from(fs, ino, 0, chunk)
}

/// Reads `ino` from byte `at` to its end through one handle in `chunk`-byte requests.
pub(crate) fn read_from<B: Backend>(fs: &AcxFs<B>, ino: u64, at: u64, chunk: u32) -> Vec<u8> {
    let opened = fs.open(ino, libc::O_RDONLY).unwrap();
    let (mut all, mut buf) = (Vec::new(), Vec::new());
    loop {
        fs.read(ino, opened.fh, at + all.len() as u64, chunk, &mut buf).unwrap();
        if buf.is_empty() {
            break;
        }
        all.extend_from_slice(&buf);
    }
    fs.release(opened.fh);
    all
}

#[test]
fn root_attributes() {
    let fs = fs_over(sample_backend());
    let root = fs.getattr(1).unwrap();
    assert_eq!(root.kind, FileKind::Directory);
    assert_eq!(root.mode() & libc::S_IFMT, libc::S_IFDIR);
    // "." and "..", the subdirectory dir, and the reserved .aceapex.
    assert_eq!(root.nlink, 4);
    assert_eq!((root.uid, root.gid), (42, 43));
    let dir = lookup_path(&fs, "dir").unwrap();
    assert_eq!(dir.nlink, 4, "dir has two subdirectories");
    assert_eq!(lookup_path(&fs, "dir/sub1").unwrap().perm, 0o750);
}

#[test]
fn file_and_symlink_attributes() {
    let fs = fs_over(sample_backend());
    let big = lookup_path(&fs, "dir/big.bin").unwrap();
    assert_eq!(big.kind, FileKind::RegularFile);
    assert_eq!(big.size, 300_000);
    assert_eq!(big.blocks, 300_000u64.div_ceil(512));
    assert_eq!(big.nlink, 1);
    assert_eq!(big.mode(), libc::S_IFREG | 0o644);
    assert_eq!(big.mtime, UNIX_EPOCH + Duration::new(1_700_000_000, 123_456_789));
    let exec = lookup_path(&fs, "exec").unwrap();
    assert_eq!(exec.perm, 0o755);
    let link = lookup_path(&fs, "link").unwrap();
    assert_eq!(link.kind, FileKind::Symlink);
    assert_eq!(link.size, b"dir/big.bin".len() as u64);
    assert_eq!(fs.readlink(link.ino).unwrap(), b"dir/big.bin");
    assert_eq!(fs.readlink(big.ino), Err(Errno::EINVAL));
    assert_eq!(lookup_path(&fs, "dir/sub1/empty").unwrap().blocks, 0);
}

#[test]
fn lookup_errors() {
    let fs = fs_over(sample_backend());
    assert_eq!(lookup_path(&fs, "missing").unwrap_err(), Errno::ENOENT);
    let a = lookup_path(&fs, "a.txt").unwrap();
    assert_eq!(fs.lookup(a.ino, b"x").unwrap_err(), Errno::ENOTDIR);
    assert_eq!(fs.getattr(0).unwrap_err(), Errno::ENOENT);
    assert_eq!(fs.getattr(u64::MAX).unwrap_err(), Errno::ENOENT);
    assert_eq!(fs.lookup(1, b"..").unwrap().ino, 1);
    let sub = lookup_path(&fs, "dir/sub1").unwrap();
    assert_eq!(fs.lookup(sub.ino, b"..").unwrap().ino, lookup_path(&fs, "dir").unwrap().ino);
}

#[test]
fn listing_is_sorted_with_dots_and_reserved_dir() {
    let fs = fs_over(sample_backend());
    let names: Vec<String> = list(&fs, 1).iter().map(|(n, _, _)| String::from_utf8_lossy(n).into_owned()).collect();
    assert_eq!(names, [".", "..", "a.txt", "dir", "exec", "link", ".aceapex"]);
    let dir = lookup_path(&fs, "dir").unwrap();
    let entries = list(&fs, dir.ino);
    let names: Vec<&[u8]> = entries.iter().map(|(n, _, _)| n.as_slice()).collect();
    assert_eq!(names, [&b"."[..], b"..", b"big.bin", b"sub1", b"sub2"]);
    assert_eq!(entries[1].1, 1, ".. of dir is the root");
    // Each listed inode's attributes agree with the listing.
    for (name, ino, kind) in &entries[2..] {
        let attr = fs.lookup(dir.ino, name).unwrap();
        assert_eq!((attr.ino, attr.kind), (*ino, *kind));
    }
}

#[test]
fn listing_resumes_at_every_offset() {
    let fs = fs_over(sample_backend());
    let full = list(&fs, 1);
    // A reply buffer that holds one entry: the kernel comes back with the offset of the last one.
    let mut resumed = Vec::new();
    let mut offset = 0;
    loop {
        let mut got = None;
        fs.readdir(1, offset, |e| {
            if got.is_some() {
                return true;
            }
            got = Some((e.name.to_vec(), e.ino, e.kind, e.next_offset));
            false
        })
        .unwrap();
        let Some((name, ino, kind, next)) = got else { break };
        resumed.push((name, ino, kind));
        offset = next;
    }
    assert_eq!(resumed, full);
    assert_eq!(fs.readdir(lookup_path(&fs, "a.txt").unwrap().ino, 0, |_| false), Err(Errno::ENOTDIR));
}

#[test]
fn open_refuses_writes_and_non_files() {
    let fs = fs_over(sample_backend());
    let a = lookup_path(&fs, "a.txt").unwrap().ino;
    for flags in [libc::O_WRONLY, libc::O_RDWR, libc::O_RDONLY | libc::O_TRUNC, libc::O_WRONLY | libc::O_APPEND] {
        assert_eq!(fs.open(a, flags), Err(Errno::EROFS), "flags {flags:#x}");
    }
    assert_eq!(fs.open(1, libc::O_RDONLY), Err(Errno::EISDIR));
    let opened = fs.open(a, libc::O_RDONLY).unwrap();
    assert!(opened.keep_cache && !opened.direct_io);
    assert_eq!(fs.open_handles(), 1);
    fs.release(opened.fh);
    assert_eq!(fs.open_handles(), 0);
    let mut buf = Vec::new();
    assert_eq!(fs.read(a, opened.fh, 0, 10, &mut buf), Err(Errno::EBADF));
}

#[test]
fn reads_return_exact_bytes_and_stop_at_eof() {
    let data = pattern(300_000, 1);
    let fs = fs_over(sample_backend());
    let big = lookup_path(&fs, "dir/big.bin").unwrap().ino;
    assert_eq!(read_all(&fs, big, 4096), data);
    assert_eq!(read_all(&fs, big, 128 << 10), data);
    let opened = fs.open(big, libc::O_RDONLY).unwrap();
    let mut buf = Vec::new();
    fs.read(big, opened.fh, 299_990, 100, &mut buf).unwrap();
    assert_eq!(buf, &data[299_990..]);
    fs.read(big, opened.fh, 300_000, 100, &mut buf).unwrap();
    assert!(buf.is_empty());
    fs.read(big, opened.fh, u64::MAX, u32::MAX, &mut buf).unwrap();
    assert!(buf.is_empty());
    let empty = lookup_path(&fs, "dir/sub1/empty").unwrap().ino;
    assert!(read_all(&fs, empty, 4096).is_empty());
}

#[test]
fn sequential_reads_are_served_by_a_stream_run() {
    let data = pattern(1 << 20, 2);
    let mut b = MemoryTreeBuilder::new();
    b.file("big", Content::Repeat { pattern: Arc::new(data.clone()), size: 64 << 20 }, 0o644);
    let backend = Arc::new(b.build());
    let options = FsOptions { readahead_bytes: 4 << 20, fill_max_bytes: 0, ..FsOptions::default() };
    let fs = AcxFs::new(Arc::clone(&backend), options);
    let ino = lookup_path_generic(&fs, "big");
    let opened = fs.open(ino, libc::O_RDONLY).unwrap();
    let mut buf = Vec::new();
    for i in 0..64u64 {
        fs.read(ino, opened.fh, i * (128 << 10), 128 << 10, &mut buf).unwrap();
        assert_eq!(buf, &data[(i as usize % 8) * (128 << 10)..][..128 << 10], "read {i}");
    }
    let stats: serde_json::Value = serde_json::from_slice(&fs.stats_snapshot()).unwrap();
    assert_eq!(stats["streams"]["runs"]["started"], 1, "{stats}");
    assert_eq!(stats["fs"]["streamed_bytes"], 8 << 20, "every byte came from the run: {stats}");
    assert_eq!(backend.random_reads(), 0);
    // The run stays within its window ahead of the reader: 8 MiB read, 4 MiB ahead at most.
    let produced = backend.streamed_blocks() * 65536;
    assert!(((8 << 20)..=(12 << 20) + 65536).contains(&produced), "produced {produced} bytes");
    // A jump cancels the run; random reads go to the backend.
    fs.read(ino, opened.fh, 40 << 20, 4096, &mut buf).unwrap();
    assert_eq!(buf, &data[..4096]);
    assert_eq!(backend.random_reads(), 1);
    fs.release(opened.fh);
}

/// Concurrent kernel readahead requests reach the workers out of order: a request that arrives ahead of its
/// predecessors looks like a jump to the detector. It must neither cancel the handle's run nor start a second
/// decode of the same blocks (a fill, or a run beside the fill that an early request started).
#[test]
fn out_of_order_requests_are_served_by_one_run() {
    let data = pattern(1 << 20, 5);
    for first_arrivals in [&[0u64, 3, 1, 2][..], &[3, 0, 1, 2][..]] {
        let mut b = MemoryTreeBuilder::new();
        b.file("big", Content::Repeat { pattern: Arc::new(data.clone()), size: 64 << 20 }, 0o644);
        let backend = Arc::new(b.build());
        let options = FsOptions { readahead_bytes: 4 << 20, fill_max_bytes: 128 << 20, ..FsOptions::default() };
        let fs = AcxFs::new(Arc::clone(&backend), options);
        let ino = lookup_path_generic(&fs, "big");
        let opened = fs.open(ino, libc::O_RDONLY).unwrap();
        let mut buf = Vec::new();
        let order = first_arrivals.iter().copied().chain([5, 4, 7, 6]).chain(8..16);
        for mib in order {
            fs.read(ino, opened.fh, mib << 20, 1 << 20, &mut buf).unwrap();
            assert!(buf == data, "read at {mib} MiB ({first_arrivals:?} first)");
        }
        fs.release(opened.fh);
        let stats: serde_json::Value = serde_json::from_slice(&fs.stats_snapshot()).unwrap();
        assert_eq!(stats["streams"]["runs"]["started"], 1, "{first_arrivals:?} first: {stats}");
        assert_eq!(backend.random_reads(), 0, "{first_arrivals:?} first: {stats}");
    }
}

#[test]
fn streams_are_off_with_zero_readahead() {
    let mut b = MemoryTreeBuilder::new();
    b.file("big", Content::Repeat { pattern: Arc::new(pattern(4096, 3)), size: 8 << 20 }, 0o644);
    let backend = Arc::new(b.build());
    let fs = AcxFs::new(Arc::clone(&backend), FsOptions { readahead_bytes: 0, ..FsOptions::default() });
    let ino = lookup_path_generic(&fs, "big");
    assert_eq!(read_all(&fs, ino, 1 << 20).len(), 8 << 20);
    assert_eq!(backend.streamed_blocks(), 0);
}

#[test]
fn random_reads_of_a_small_file_fill_it() {
    let data = pattern(2 << 20, 4);
    let mut b = MemoryTreeBuilder::new();
    b.bytes("small", &data).file("large", Content::Repeat { pattern: Arc::new(data.clone()), size: 64 << 20 }, 0o644);
    let backend = Arc::new(b.build());
    let fs = AcxFs::new(Arc::clone(&backend), FsOptions { fill_max_bytes: 4 << 20, ..FsOptions::default() });
    let mut buf = Vec::new();
    for name in ["small", "large"] {
        let ino = lookup_path_generic(&fs, name);
        let opened = fs.open(ino, libc::O_RDONLY).unwrap();
        for (i, offset) in [1_500_000u64, 100_000, 1_900_000, 700_000, 30_000, 1_200_000].into_iter().enumerate() {
            fs.read(ino, opened.fh, offset, 4096, &mut buf).unwrap();
            assert_eq!(buf, &data[offset as usize..offset as usize + 4096], "{name} read {i}");
        }
        fs.release(opened.fh);
    }
    // The small file was filled at its first random read; the large one (over fill_max_bytes) never. The fill
    // may still be finishing its last blocks on a loaded machine: wait for it (bounded).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while backend.streamed_blocks() < 32 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let stats: serde_json::Value = serde_json::from_slice(&fs.stats_snapshot()).unwrap();
    assert_eq!(stats["streams"]["runs"]["started"], 1, "{stats}");
    assert_eq!(backend.streamed_blocks(), 32, "the whole 2 MiB file, 64 KiB blocks");
    assert_eq!(backend.random_reads(), 6, "the six large-file reads");
}

#[test]
fn a_corrupt_block_fails_only_its_reads_in_a_stream() {
    let data = pattern(300_000, 1);
    let mut b = MemoryTreeBuilder::new();
    b.bytes("f", &data);
    let mut backend = b.build();
    backend.fail_stream_range(150_000..150_001);
    let fs = fs_over(backend);
    let ino = lookup_path(&fs, "f").unwrap().ino;
    let opened = fs.open(ino, libc::O_RDONLY).unwrap();
    let mut buf = Vec::new();
    let chunk = 16u64 << 10;
    let mut errors = 0;
    for i in 0..300_000u64.div_ceil(chunk) {
        match fs.read(ino, opened.fh, i * chunk, chunk as u32, &mut buf) {
            Ok(()) => assert_eq!(buf, &data[(i * chunk) as usize..((i + 1) * chunk).min(300_000) as usize]),
            Err(e) => {
                assert_eq!(e, Errno::EIO);
                assert!((i * chunk..(i + 1) * chunk).contains(&150_000), "read {i} failed");
                errors += 1;
            }
        }
    }
    assert_eq!(errors, 1);
}

fn lookup_path_generic<B: Backend>(fs: &AcxFs<B>, name: &str) -> u64 {
    fs.lookup(1, name.as_bytes()).unwrap().ino
}

#[test]
fn corrupt_range_fails_only_reads_touching_it() {
    let mut backend = sample_backend();
    let big_offset = match &backend.tree().entries[backend.tree().resolve_path(b"dir/big.bin").unwrap() as usize].kind {
        EntryKind::File { offset, .. } => *offset,
        _ => unreachable!(),
    };
    backend.fail_stream_range(big_offset + 100_000..big_offset + 100_001);
    let fs = fs_over(backend);
    let big = lookup_path(&fs, "dir/big.bin").unwrap().ino;
    let opened = fs.open(big, libc::O_RDONLY).unwrap();
    let mut buf = Vec::new();
    assert_eq!(fs.read(big, opened.fh, 99_000, 4096, &mut buf), Err(Errno::EIO));
    assert!(buf.is_empty());
    fs.read(big, opened.fh, 0, 4096, &mut buf).unwrap();
    assert_eq!(buf, &pattern(300_000, 1)[..4096]);
    fs.read(big, opened.fh, 100_001, 4096, &mut buf).unwrap();
    assert_eq!(buf.len(), 4096);
    let stats: serde_json::Value = serde_json::from_slice(&fs.stats_snapshot()).unwrap();
    assert_eq!(stats["fs"]["read_errors"], 1);
}

#[test]
fn stats_file_is_reserved_json() {
    let fs = fs_over(sample_backend());
    let a = lookup_path(&fs, "a.txt").unwrap().ino;
    assert_eq!(read_all(&fs, a, 4096), b"hello\n");
    let dir = lookup_path(&fs, ".aceapex").unwrap();
    assert_eq!(dir.kind, FileKind::Directory);
    let names: Vec<Vec<u8>> = list(&fs, dir.ino).into_iter().map(|e| e.0).collect();
    assert_eq!(names, [b".".to_vec(), b"..".to_vec(), b"stats".to_vec()]);
    let stats = fs.lookup(dir.ino, b"stats").unwrap();
    assert_eq!(stats.perm, 0o444);
    assert_eq!(stats.ttl, Duration::ZERO);
    let opened = fs.open(stats.ino, libc::O_RDONLY).unwrap();
    assert!(opened.direct_io);
    let text = read_all(&fs, stats.ino, 7);
    let doc: serde_json::Value = serde_json::from_slice(&text).expect("stats is JSON");
    assert_eq!(doc["fs"]["reads"], 2, "two reads of a.txt (data, then EOF)");
    assert_eq!(doc["fs"]["bytes_served"], 6);
    assert!(doc["fs"]["read_latency"]["p99_us"].is_u64());
    assert_eq!(doc["archive_stats"]["backend"], "memory");
    assert_eq!(fs.open(stats.ino, libc::O_WRONLY), Err(Errno::EROFS));
}

#[test]
fn statfs_reports_sizes() {
    let fs = fs_over(sample_backend());
    let s = fs.statfs();
    assert_eq!(s.bsize, 65536);
    assert_eq!(s.blocks, (6u64 + 300_000 + 10).div_ceil(65536));
    assert_eq!(s.namelen, 255);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any (offset, len) read returns exactly the reference slice (empty past EOF).
    #[test]
    fn random_reads_match_reference(offset in 0u64..310_000, len in 0u32..200_000) {
        let data = pattern(300_000, 1);
        let fs = fs_over(sample_backend());
        let big = lookup_path(&fs, "dir/big.bin").unwrap().ino;
        let opened = fs.open(big, libc::O_RDONLY).unwrap();
        let mut buf = Vec::new();
        fs.read(big, opened.fh, offset, len, &mut buf).unwrap();
        let start = (offset as usize).min(data.len());
        let end = (start + len as usize).min(data.len());
        prop_assert_eq!(&buf[..], &data[start..end]);
    }
}
