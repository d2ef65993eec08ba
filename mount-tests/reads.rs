//! Byte-exact reads through the mount: dd at random (offset, len) pairs including block boundaries and end
//! of file, reads past the end, and concurrent readers.

use std::os::unix::fs::FileExt;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{Fixture, Mounted, Rng};

const BLOCK: u64 = 16384;

/// Random ranges of a file of `size` bytes, biased to block boundaries, the start and the end.
fn ranges(rng: &mut Rng, size: u64, n: usize) -> Vec<(u64, u64)> {
    (0..n)
        .map(|_| {
            let offset = match rng.below(5) {
                0 => (rng.below(size / BLOCK + 1) * BLOCK).saturating_sub(rng.below(3)),
                1 => size.saturating_sub(rng.below(300)),
                2 => rng.below(64),
                _ => rng.below(size + 1),
            };
            let len = match rng.below(4) {
                0 => 1 + rng.below(16),
                1 => BLOCK + rng.below(3),
                2 => 1 + rng.below(200_000),
                _ => 1 + rng.below(5000),
            };
            (offset, len)
        })
        .collect()
}

/// `dd` with byte offsets; returns its stdout.
fn dd(path: &Path, offset: u64, len: u64) -> Vec<u8> {
    let out = Command::new("dd")
        .arg(format!("if={}", path.display()))
        .arg("bs=65536")
        .arg(format!("skip={offset}"))
        .arg(format!("count={len}"))
        .arg("iflag=skip_bytes,count_bytes")
        .arg("status=none")
        .output()
        .unwrap();
    assert!(out.status.success(), "dd {offset}+{len}: {}", String::from_utf8_lossy(&out.stderr));
    out.stdout
}

fn expected(original: &[u8], offset: u64, len: u64) -> &[u8] {
    let start = (offset as usize).min(original.len());
    let end = (offset.saturating_add(len) as usize).min(original.len());
    &original[start..end]
}

#[test]
fn dd_random_ranges_match() {
    if !crate::support::fuse_available("dd_random_ranges_match") {
        return;
    }
    let fx = Fixture::new();
    let _mount = Mounted::start(&fx.archive, &fx.mnt, &[]).unwrap();
    let mut rng = Rng::new(99);
    let files = ["genome/g.fa", "text/big.txt", "bin/random.bin", "text/over16k", "text/exact16k"];
    let mut checked = 0;
    for (i, rel) in files.iter().enumerate() {
        let original = std::fs::read(fx.src.join(rel)).unwrap();
        let mounted = fx.mounted_src().join(rel);
        let n = if i < 2 { 400 } else { 100 };
        for (offset, len) in ranges(&mut rng, original.len() as u64, n) {
            let got = dd(&mounted, offset, len);
            assert!(
                got == expected(&original, offset, len),
                "{rel} at {offset}+{len}: got {} bytes, want {}",
                got.len(),
                expected(&original, offset, len).len()
            );
            checked += 1;
        }
    }
    assert!(checked >= 1000);
}

#[test]
fn pread_past_end_returns_nothing() {
    if !crate::support::fuse_available("pread_past_end_returns_nothing") {
        return;
    }
    let fx = Fixture::new();
    let _mount = Mounted::start(&fx.archive, &fx.mnt, &[]).unwrap();
    let path = fx.mounted_src().join("text/over16k");
    let file = std::fs::File::open(&path).unwrap();
    let size = file.metadata().unwrap().len();
    assert_eq!(size, 16385);
    let mut buf = vec![0u8; 100_000];
    assert_eq!(file.read_at(&mut buf, size).unwrap(), 0);
    assert_eq!(file.read_at(&mut buf, size + 12345).unwrap(), 0);
    assert_eq!(file.read_at(&mut buf, u64::MAX / 4).unwrap(), 0);
    assert_eq!(file.read_at(&mut buf, size - 1).unwrap(), 1);
    let empty = std::fs::File::open(fx.mounted_src().join("empty")).unwrap();
    assert_eq!(empty.read_at(&mut buf, 0).unwrap(), 0);
}

#[test]
fn concurrent_readers_see_exact_bytes() {
    if !crate::support::fuse_available("concurrent_readers_see_exact_bytes") {
        return;
    }
    let fx = Fixture::new();
    // A small cache so that readers keep evicting each other's blocks and decode concurrently.
    let _mount = Mounted::start(&fx.archive, &fx.mnt, &["cache_size=1M", "threads=4"]).unwrap();
    let files = ["genome/g.fa", "text/big.txt", "bin/random.bin"];
    let originals: Vec<Vec<u8>> = files.iter().map(|rel| std::fs::read(fx.src.join(rel)).unwrap()).collect();
    let deadline = Instant::now() + Duration::from_secs(4);
    let total: u64 = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8u64)
            .map(|t| {
                let originals = &originals;
                let fx = &fx;
                scope.spawn(move || {
                    let mut rng = Rng::new(1000 + t);
                    let handles: Vec<std::fs::File> =
                        files.iter().map(|rel| std::fs::File::open(fx.mounted_src().join(rel)).unwrap()).collect();
                    let mut bytes = 0u64;
                    let mut buf = vec![0u8; 256 << 10];
                    while Instant::now() < deadline {
                        let f = rng.below(files.len() as u64) as usize;
                        let size = originals[f].len() as u64;
                        let offset = rng.below(size);
                        let len = 1 + rng.below(buf.len() as u64);
                        let n = handles[f].read_at(&mut buf[..len as usize], offset).unwrap();
                        assert!(
                            buf[..n] == *expected(&originals[f], offset, n as u64) && n > 0,
                            "thread {t}: {} at {offset}+{len} (got {n})",
                            files[f]
                        );
                        bytes += n as u64;
                    }
                    bytes
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    assert!(total > 0);
}

#[test]
fn sequential_cat_and_copy() {
    if !crate::support::fuse_available("sequential_cat_and_copy") {
        return;
    }
    let fx = Fixture::new();
    let _mount = Mounted::start(&fx.archive, &fx.mnt, &[]).unwrap();
    let copy = fx.dir.path().join("copy");
    let status = Command::new("cp").arg("-r").arg(fx.mounted_src()).arg(&copy).status().unwrap();
    assert!(status.success(), "cp -r");
    let out = Command::new("diff").arg("-r").arg("--no-dereference").arg(&fx.src).arg(&copy).output().unwrap();
    let diff = String::from_utf8_lossy(&out.stdout);
    // The only difference is the sidecar index that the mount adds.
    let lines: Vec<&str> = diff.lines().collect();
    assert_eq!(lines.len(), 1, "diff -r: {diff}");
    assert!(lines[0].contains("g.fa.fai"), "diff -r: {diff}");
    let grep =
        Command::new("grep").arg("-r").arg("-c").arg("epsilon").arg(fx.mounted_src().join("text")).output().unwrap();
    assert!(String::from_utf8_lossy(&grep.stdout).contains("big.txt:"), "grep -r over the mount");
}

/// A genome-mode FASTA is streamed like a stored file: a sequential read from any start is served by a stream
/// run over its bases (the stats say so) and returns the original bytes through to the end of the file, and
/// random reads of it on a fresh mount, served by its fill, are exact too.
#[test]
fn genome_file_is_streamed_and_filled() {
    if !crate::support::fuse_available("genome_file_is_streamed_and_filled") {
        return;
    }
    let fx = Fixture::new();
    let original = std::fs::read(fx.src.join("genome/g.fa")).unwrap();
    let stats = |mnt: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(mnt.join(".aceapex/stats")).unwrap()).unwrap()
    };
    for start in [0u64, 123_457, original.len() as u64 - 5000] {
        let _mount = Mounted::start(&fx.archive, &fx.mnt, &[]).unwrap();
        let mut file = std::fs::File::open(fx.mounted_src().join("genome/g.fa")).unwrap();
        use std::io::{Read, Seek, SeekFrom};
        file.seek(SeekFrom::Start(start)).unwrap();
        let mut got = Vec::new();
        file.read_to_end(&mut got).unwrap();
        assert!(got == original[start as usize..], "sequential read from {start}");
        let doc = stats(&fx.mnt);
        assert!(doc["streams"]["runs"]["started"].as_u64().unwrap() >= 1, "from {start}: {doc}");
        assert!(doc["fs"]["streamed_bytes"].as_u64().unwrap() > 0, "from {start}: {doc}");
        assert_eq!(doc["fs"]["read_errors"], 0, "{doc}");
    }
    let _mount = Mounted::start(&fx.archive, &fx.mnt, &[]).unwrap();
    let path = fx.mounted_src().join("genome/g.fa");
    let mut rng = Rng::new(77);
    for _ in 0..200 {
        let offset = rng.below(original.len() as u64 / 4096) * 4096;
        let got = crate::support::read_direct(&path, offset, 8192).unwrap();
        assert!(got == expected(&original, offset, 8192), "random read at {offset}");
    }
    let doc = stats(&fx.mnt);
    assert_eq!(doc["fs"]["read_errors"], 0, "{doc}");
}
