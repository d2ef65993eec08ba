//! Corruption sweep: flip bytes across the header, every payload and every section, truncate, extend. Opening,
//! verifying and reading must give an error (verify naming the damaged block) — never a panic, a hang, or wrong
//! bytes returned as if they were right.

mod common;

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::Duration;

use aceapex::archive::Archive;
use aceapex::codec::block::SliceDirectory;
use aceapex::codec::varint;
use aceapex::error::Error;
use aceapex::format::tree::EntryKind;
use aceapex::pack::{pack, PackOptions};
use common::Rng;

/// Where a byte of the archive lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Region {
    Header,
    /// Inside block `id`'s payload.
    Payload(u64),
    Tables,
    Tree,
    Index,
    Footer,
}

struct Fixture {
    _dir: tempfile::TempDir,
    archive: PathBuf,
    bytes: Vec<u8>,
    /// (path inside the archive, original bytes)
    files: Vec<(Vec<u8>, Vec<u8>)>,
    /// Block payload ranges and section starts, from the intact archive.
    payload_ranges: Vec<(u64, u64)>,
    tables_offset: u64,
    tree_offset: u64,
    index_offset: u64,
}

impl Fixture {
    fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in");
        std::fs::create_dir(&input).unwrap();
        let mut rng = Rng::new(77);
        let files = vec![
            (b"in/dna".to_vec(), common::dna_like(&mut rng, 70_000)),
            (b"in/random".to_vec(), rng.bytes(9_000)),
            (b"in/periodic".to_vec(), common::periodic(&mut rng, 77, 20_000)),
            (b"in/dna_again".to_vec(), common::dna_like(&mut Rng::new(77), 30_000)),
        ];
        for (name, bytes) in &files {
            let rel = std::str::from_utf8(&name[3..]).unwrap();
            std::fs::write(input.join(rel), bytes).unwrap();
        }
        let archive = dir.path().join("t.acx");
        let opts = PackOptions { block_log: 12, group_log: 2, threads: 1, ..PackOptions::default() };
        pack(&[input], &archive, &opts).unwrap();
        let opened = Archive::open(&archive).unwrap();
        let data = opened.data();
        let payload_ranges =
            (0..data.block_count()).map(|id| (data.payload_offset(id), data.payload_end[id as usize])).collect();
        let footer = data.footer;
        let bytes = std::fs::read(&archive).unwrap();
        Fixture {
            archive,
            bytes,
            files,
            payload_ranges,
            tables_offset: footer.tables_offset,
            tree_offset: footer.tree_offset,
            index_offset: footer.index_offset,
            _dir: dir,
        }
    }

    fn region(&self, pos: u64) -> Region {
        let len = self.bytes.len() as u64;
        if pos < 64 {
            Region::Header
        } else if pos < self.tables_offset {
            let block = self.payload_ranges.partition_point(|&(_, end)| end <= pos) as u64;
            Region::Payload(block)
        } else if pos < self.tree_offset {
            Region::Tables
        } else if pos < self.index_offset {
            Region::Tree
        } else if pos < len - 64 {
            Region::Index
        } else {
            Region::Footer
        }
    }

    /// Writes `bytes` as a damaged copy and checks every way of reading it.
    fn check(&self, bytes: &[u8], what: &str) {
        let path = self.archive.with_extension("bad.acx");
        std::fs::write(&path, bytes).unwrap();
        let Ok(archive) = Archive::open(&path) else { return };
        // It opened, so the length is intact and only payload bytes may differ: every section carries its own
        // checksum. Every block whose payload changed must be named by verify.
        assert_eq!(bytes.len(), self.bytes.len(), "{what}: a truncated or extended archive opened");
        let mut damaged_blocks = Vec::new();
        for (pos, (a, b)) in bytes.iter().zip(&self.bytes).enumerate() {
            if a != b {
                match self.region(pos as u64) {
                    Region::Payload(block) => damaged_blocks.push(block),
                    other => panic!("{what}: damage at {pos} in {other:?} was not detected at open"),
                }
            }
        }
        damaged_blocks.dedup();
        let errors = archive.verify();
        for block in damaged_blocks {
            assert!(
                errors.iter().any(|e| matches!(e, Error::CorruptBlock { block: b, .. } if *b == block)),
                "{what}: verify did not name block {block}: {errors:?}"
            );
        }
        for (name, want) in &self.files {
            let id = archive.tree().resolve_path(name).unwrap();
            let mut got = vec![0u8; want.len()];
            if let Ok(n) = archive.read_file(id, 0, &mut got) {
                assert!(
                    n == want.len() && got == *want,
                    "{what}: {:?} read back wrong bytes",
                    String::from_utf8_lossy(name)
                );
            }
        }
    }
}

/// Runs `f` on a thread and fails if it takes longer than `limit` (a hang is a bug, not a slow test).
fn within(limit: Duration, f: impl FnOnce() + Send + 'static) {
    let (tx, rx) = mpsc::channel();
    let worker = std::thread::spawn(move || {
        f();
        let _ = tx.send(());
    });
    match rx.recv_timeout(limit) {
        Ok(()) => worker.join().unwrap(),
        Err(mpsc::RecvTimeoutError::Disconnected) => {
            // The worker panicked: re-raise its panic here.
            if let Err(p) = worker.join() {
                std::panic::resume_unwind(p);
            }
        }
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("corruption check ran longer than {limit:?}: a hang"),
    }
}

/// Positions to damage: every byte of the header, footer and small sections, and a sample of each payload
/// (its first and last bytes plus random ones).
fn positions(fx: &Fixture, rng: &mut Rng) -> Vec<u64> {
    let len = fx.bytes.len() as u64;
    let mut pos: Vec<u64> = (0..64).chain(len - 64..len).collect();
    pos.extend(fx.tables_offset..len - 64);
    for &(start, end) in &fx.payload_ranges {
        if end > start {
            pos.extend([start, start + 1, end - 1]);
            for _ in 0..12 {
                pos.push(start + rng.below(end - start));
            }
        }
    }
    pos.sort_unstable();
    pos.dedup();
    pos
}

#[test]
fn flipped_bytes_are_caught() {
    within(Duration::from_secs(300), || {
        let fx = Fixture::new();
        let mut rng = Rng::new(5);
        let positions = positions(&fx, &mut rng);
        assert!(positions.len() > 300, "sweep too small: {}", positions.len());
        for (i, &pos) in positions.iter().enumerate() {
            let mut bytes = fx.bytes.clone();
            // Alternate a one-bit flip and a whole-byte change.
            bytes[pos as usize] ^= if i % 2 == 0 { 0x01 } else { 0xa5 };
            fx.check(&bytes, &format!("flip at {pos} ({:?})", fx.region(pos)));
        }
    });
}

#[test]
fn overwritten_windows_are_caught() {
    within(Duration::from_secs(300), || {
        let fx = Fixture::new();
        let mut rng = Rng::new(6);
        for _ in 0..150 {
            let start = rng.below(fx.bytes.len() as u64 - 16);
            let mut bytes = fx.bytes.clone();
            for b in &mut bytes[start as usize..start as usize + 16] {
                *b = rng.next_u64() as u8;
            }
            if bytes == fx.bytes {
                continue;
            }
            fx.check(&bytes, &format!("16 random bytes at {start}"));
        }
    });
}

#[test]
fn truncated_and_extended_archives_are_refused() {
    within(Duration::from_secs(120), || {
        let fx = Fixture::new();
        let len = fx.bytes.len();
        let mut rng = Rng::new(8);
        let mut cuts: Vec<usize> = vec![0, 1, 8, 63, 64, 65, 127, 128, len - 65, len - 64, len - 63, len - 1];
        cuts.extend((0..100).map(|_| rng.below(len as u64) as usize));
        for cut in cuts {
            fx.check(&fx.bytes[..cut], &format!("truncated to {cut}"));
        }
        for extra in [1usize, 7, 64, 4096] {
            let mut bytes = fx.bytes.clone();
            bytes.extend(rng.bytes(extra));
            fx.check(&bytes, &format!("extended by {extra}"));
            let mut zeros = fx.bytes.clone();
            zeros.resize(len + extra, 0);
            fx.check(&zeros, &format!("extended by {extra} zeros"));
        }
    });
}

/// Rewrites block `block`'s slice directory with `lens` (same encoded size as the original directory), or `None`
/// when the lengths do not encode to that size.
fn with_directory(fx: &Fixture, block: usize, lens: &[u64]) -> Option<Vec<u8>> {
    let (start, end) = fx.payload_ranges[block];
    let payload = &fx.bytes[start as usize..end as usize];
    let n = Archive::open(&fx.archive).unwrap().data().slice_count(block as u64) as usize;
    let body: usize = SliceDirectory::parse(payload, n).unwrap().slices().map(|s| s.len()).sum();
    let dir_len = payload.len() - body;
    let mut dir = Vec::new();
    lens.iter().for_each(|&l| varint::write(l, &mut dir));
    if dir.len() != dir_len {
        return None;
    }
    let mut bytes = fx.bytes.clone();
    bytes[start as usize..start as usize + dir_len].copy_from_slice(&dir);
    Some(bytes)
}

#[test]
fn lying_slice_directories_are_caught() {
    within(Duration::from_secs(120), || {
        let fx = Fixture::new();
        let data = Archive::open(&fx.archive).unwrap();
        let mut tried = 0;
        for block in 0..fx.payload_ranges.len() {
            let n = data.data().slice_count(block as u64) as usize;
            let (start, end) = fx.payload_ranges[block];
            let payload = &fx.bytes[start as usize..end as usize];
            let lens: Vec<u64> = SliceDirectory::parse(payload, n).unwrap().slices().map(|s| s.len() as u64).collect();
            // Lengths that keep the sum (bytes moved between slices), and sums one too large or too small.
            let mut variants = Vec::new();
            for j in 0..n {
                for delta in [-3i64, -1, 1, 3] {
                    let mut l = lens.clone();
                    l[j] = (l[j] as i64 + delta).max(0) as u64;
                    if n > 1 {
                        let k = (j + 1) % n;
                        let mut moved = l.clone();
                        moved[k] = (moved[k] as i64 - delta).max(0) as u64;
                        variants.push(moved);
                    }
                    variants.push(l);
                }
            }
            for lying in variants {
                if lying == lens {
                    continue;
                }
                if let Some(bytes) = with_directory(&fx, block, &lying) {
                    fx.check(&bytes, &format!("block {block}: directory {lens:?} -> {lying:?}"));
                    tried += 1;
                }
            }
        }
        assert!(tried > 50, "only {tried} lying directories tried");
    });
}

#[test]
fn a_header_with_another_legal_slice_size_is_caught() {
    within(Duration::from_secs(120), || {
        let fx = Fixture::new();
        // 4 KiB blocks: slice_log 9..=12 are all legal; the archive was written with 12 (one slice a block).
        assert_eq!(fx.bytes[24], 12);
        for slice_log in [9u8, 10, 11] {
            let mut bytes = fx.bytes.clone();
            bytes[24] = slice_log;
            let sum = xxhash_rust::xxh3::xxh3_64(&bytes[..56]);
            bytes[56..64].copy_from_slice(&sum.to_le_bytes());
            let path = fx.archive.with_extension(format!("s{slice_log}.acx"));
            std::fs::write(&path, &bytes).unwrap();
            let archive = Archive::open(&path).unwrap();
            let errors = archive.verify();
            assert!(!errors.is_empty(), "slice_log {slice_log}: verify found nothing");
            assert!(errors.iter().all(|e| matches!(e, Error::CorruptBlock { .. })), "{errors:?}");
            for (name, want) in &fx.files {
                let id = archive.tree().resolve_path(name).unwrap();
                let mut got = vec![0u8; want.len()];
                if let Ok(n) = archive.read_file(id, 0, &mut got) {
                    assert!(n == want.len() && got == *want, "slice_log {slice_log}: wrong bytes read back");
                }
            }
        }
        // An illegal slice size for 4 KiB blocks is refused at open.
        for slice_log in [0u8, 8, 13, 255] {
            let mut bytes = fx.bytes.clone();
            bytes[24] = slice_log;
            let sum = xxhash_rust::xxh3::xxh3_64(&bytes[..56]);
            bytes[56..64].copy_from_slice(&sum.to_le_bytes());
            let path = fx.archive.with_extension("illegal.acx");
            std::fs::write(&path, &bytes).unwrap();
            assert!(Archive::open(&path).is_err(), "slice_log {slice_log} accepted");
        }
    });
}

fn run_bin(args: &[&OsStr]) -> std::process::Output {
    common::run_with_limit(args, Duration::from_secs(60))
}

#[test]
fn the_binary_reports_corrupt_blocks() {
    let fx = Fixture::new();
    // Damage the middle of the payload of a block that belongs to the first file.
    let block = 3u64;
    let (start, end) = fx.payload_ranges[block as usize];
    let mut bytes = fx.bytes.clone();
    bytes[((start + end) / 2) as usize] ^= 0xff;
    let bad = fx.archive.with_extension("bin-bad.acx");
    std::fs::write(&bad, &bytes).unwrap();

    let verify = run_bin(&[OsStr::new("verify"), bad.as_os_str()]);
    common::assert_exit(&verify, 1, "verify on a damaged archive");
    let report = String::from_utf8_lossy(&verify.stdout);
    assert!(report.contains(&format!("block {block} ")), "verify output does not name block {block}: {report}");
    assert!(report.contains(&format!("payload offset {start}")), "verify output lacks the payload offset: {report}");

    let cat = run_bin(&[OsStr::new("cat"), bad.as_os_str(), OsStr::new("in/dna")]);
    common::assert_exit(&cat, 1, "cat of a file with a damaged block");
    assert!(cat.stdout.len() < fx.files[0].1.len(), "cat wrote the whole file despite a damaged block");
    assert_eq!(&cat.stdout[..], &fx.files[0].1[..cat.stdout.len()], "cat wrote wrong bytes before failing");

    let dest = fx.archive.with_extension("unpacked");
    let unpack = run_bin(&[OsStr::new("unpack"), bad.as_os_str(), OsStr::new("-C"), dest.as_os_str()]);
    common::assert_exit(&unpack, 1, "unpack of a damaged archive");

    // Header damage: every command fails cleanly.
    let mut bytes = fx.bytes.clone();
    bytes[20] ^= 0x10;
    std::fs::write(&bad, &bytes).unwrap();
    for cmd in ["info", "ls", "verify"] {
        common::assert_exit(&run_bin(&[OsStr::new(cmd), bad.as_os_str()]), 1, cmd);
    }
    let _ = Path::new(&dest);
}

#[test]
fn hostile_random_files_never_panic() {
    within(Duration::from_secs(120), || {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.acx");
        let mut rng = Rng::new(99);
        let fx = Fixture::new();
        for i in 0..300 {
            // Random bytes, or the real header and footer around random middles.
            let len = 64 + rng.below(5000) as usize;
            let mut bytes = rng.bytes(len);
            if i % 2 == 0 && len >= 128 {
                bytes[..64].copy_from_slice(&fx.bytes[..64]);
                let n = fx.bytes.len();
                bytes[len - 64..].copy_from_slice(&fx.bytes[n - 64..]);
            }
            std::fs::write(&path, &bytes).unwrap();
            if let Ok(archive) = Archive::open(&path) {
                // Only possible if the middle happens to validate; reading must still be safe.
                let _ = archive.verify();
                for (id, e) in archive.tree().entries.iter().enumerate() {
                    if let EntryKind::File { size, .. } = e.kind {
                        let mut buf = vec![0u8; size.min(1 << 20) as usize];
                        let _ = archive.read_file(id as u32, 0, &mut buf);
                    }
                }
            }
        }
    });
}
