//! The mounted tree equals the packed one: listing, types, sizes, bytes, modes, mtimes, symlink targets; plus
//! the generated `.fai` sidecars, equal to what samtools writes.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::support::{which, Fixture, Mounted};

/// What the test compares for each path below a root.
#[derive(Debug, PartialEq, Eq)]
struct Node {
    kind: char,
    size: u64,
    mode: u32,
    mtime: Option<(i64, i64)>,
    link: Option<PathBuf>,
}

fn walk(root: &Path) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            let ft = meta.file_type();
            let (kind, size, link) = if ft.is_dir() {
                stack.push(path.clone());
                ('d', 0, None)
            } else if ft.is_symlink() {
                ('l', meta.len(), Some(std::fs::read_link(&path).unwrap()))
            } else {
                ('f', meta.len(), None)
            };
            // Directory sizes are filesystem-specific, symlink times are not packed.
            let mtime = if ft.is_symlink() { None } else { Some((meta.mtime(), meta.mtime_nsec())) };
            out.insert(rel, Node { kind, size, mode: meta.mode(), mtime, link });
        }
    }
    out
}

#[test]
fn mounted_tree_equals_packed_tree() {
    if !crate::support::fuse_available("mounted_tree_equals_packed_tree") {
        return;
    }
    let fx = Fixture::new();
    let _mount = Mounted::start(&fx.archive, &fx.mnt, &[]).unwrap();
    let original = walk(&fx.src);
    let mut mounted = walk(&fx.mounted_src());

    // The FASTA gets a sidecar index; everything else is identical.
    let sidecar = mounted.remove(Path::new("genome/g.fa.fai")).expect("g.fa.fai sidecar is listed");
    assert_eq!(sidecar.kind, 'f');
    assert_eq!(original.keys().collect::<Vec<_>>(), mounted.keys().collect::<Vec<_>>(), "listings differ");
    for (rel, node) in &original {
        assert_eq!(&mounted[rel], node, "attributes of {}", rel.display());
        if node.kind == 'f' {
            let a = std::fs::read(fx.src.join(rel)).unwrap();
            let b = std::fs::read(fx.mounted_src().join(rel)).unwrap();
            assert!(a == b, "bytes of {} differ", rel.display());
        }
    }

    // Directory link counts: 2 + subdirectories.
    let deep_a = std::fs::metadata(fx.mounted_src().join("deep/a")).unwrap();
    assert_eq!(deep_a.nlink(), 3);
    // Following a symlink through the mount reaches the same bytes.
    let via_link = std::fs::read(fx.mounted_src().join("text/link-to-genome")).unwrap();
    assert_eq!(via_link, std::fs::read(fx.src.join("genome/g.fa")).unwrap());

    if which("samtools").is_some() {
        let copy = fx.dir.path().join("ref.fa");
        std::fs::copy(fx.src.join("genome/g.fa"), &copy).unwrap();
        let ok = std::process::Command::new("samtools").arg("faidx").arg(&copy).status().unwrap().success();
        assert!(ok, "samtools faidx on the original");
        let expected = std::fs::read(fx.dir.path().join("ref.fa.fai")).unwrap();
        let served = std::fs::read(fx.mounted_src().join("genome/g.fa.fai")).unwrap();
        assert_eq!(String::from_utf8_lossy(&served), String::from_utf8_lossy(&expected));
    }
}

#[test]
fn mount_is_read_only() {
    if !crate::support::fuse_available("mount_is_read_only") {
        return;
    }
    let fx = Fixture::new();
    let _mount = Mounted::start(&fx.archive, &fx.mnt, &[]).unwrap();
    let file = fx.mounted_src().join("one");
    let err = std::fs::OpenOptions::new().write(true).open(&file).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS), "open for writing: {err}");
    let err = std::fs::write(fx.mounted_src().join("new-file"), b"x").unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS), "create: {err}");
    let err = std::fs::remove_file(&file).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS), "unlink: {err}");
    let err = std::fs::create_dir(fx.mounted_src().join("d")).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EROFS), "mkdir: {err}");
}

#[test]
fn stats_file_reports_reads() {
    if !crate::support::fuse_available("stats_file_reports_reads") {
        return;
    }
    let fx = Fixture::new();
    let _mount = Mounted::start(&fx.archive, &fx.mnt, &[]).unwrap();
    let data = std::fs::read(fx.mounted_src().join("text/big.txt")).unwrap();
    assert_eq!(data.len(), 1_500_000);
    let text = std::fs::read_to_string(fx.mnt.join(".aceapex/stats")).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("stats JSON: {e}\n{text}"));
    assert!(doc["fs"]["bytes_served"].as_u64().unwrap() >= 1_500_000, "{text}");
    assert!(doc["fs"]["read_latency"]["p99_us"].is_u64(), "{text}");
    // Decoded by a stream run (sequential read) or the random-access path: either way the engine counted it.
    assert!(doc["archive_stats"]["cache"]["decodes"]["cpu"].as_u64().unwrap() > 0, "{text}");
    assert!(doc["streams"]["runs"]["started"].is_u64(), "{text}");
    // A second read sees newer counters: the file is not cached.
    let again = std::fs::read_to_string(fx.mnt.join(".aceapex/stats")).unwrap();
    let doc2: serde_json::Value = serde_json::from_str(&again).unwrap();
    assert!(doc2["fs"]["opens"].as_u64() > doc["fs"]["opens"].as_u64(), "{again}");
}
