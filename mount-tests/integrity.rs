//! A corrupted block: EIO on the reads that touch it, one log line naming archive, block and payload offset,
//! good ranges still served, the daemon alive.

use std::os::unix::fs::FileExt;

use aceapex::format::tree::EntryKind;
use aceapex::format::ArchiveData;

use crate::support::{Fixture, Mounted};

#[test]
fn corrupt_block_fails_only_its_reads() {
    if !crate::support::fuse_available("corrupt_block_fails_only_its_reads") {
        return;
    }
    let fx = Fixture::new();
    // Pick a block in the middle of the random (incompressible, so literal-heavy) file, and flip a byte in
    // the middle of its payload.
    let data = ArchiveData::open(&fx.archive).expect("open the fresh archive");
    let id = data.tree.resolve_path(b"src/bin/random.bin").expect("random.bin in the tree");
    let EntryKind::File { offset: file_start, size, .. } = data.tree.entries[id as usize].kind else {
        panic!("random.bin is not a file")
    };
    let block_log = data.header.block_log;
    let bad_block = (file_start + size / 2) >> block_log;
    let payload_start = data.payload_offset(bad_block);
    let payload_end = data.payload_end[bad_block as usize];
    drop(data);
    let mut bytes = std::fs::read(&fx.archive).unwrap();
    let flip_at = ((payload_start + payload_end) / 2) as usize;
    bytes[flip_at] ^= 0x5a;
    let corrupt = fx.dir.path().join("corrupt.acx");
    std::fs::write(&corrupt, &bytes).unwrap();

    let mut mount = Mounted::start(&corrupt, &fx.mnt, &["cache_size=4M"]).unwrap();
    let original = std::fs::read(fx.src.join("bin/random.bin")).unwrap();
    let file = std::fs::File::open(fx.mounted_src().join("bin/random.bin")).unwrap();
    let block = 1u64 << block_log;
    // File offsets of the bad block's bytes.
    let bad_start = (bad_block << block_log).saturating_sub(file_start);
    let mut buf = vec![0u8; 4096];

    // Reads touching the block fail with EIO, repeatedly.
    for _ in 0..2 {
        let err = file.read_at(&mut buf, bad_start + 100).unwrap_err();
        assert_eq!(err.raw_os_error(), Some(libc::EIO), "read in the corrupt block: {err}");
    }
    // Blocks before it cannot depend on it (sources are always earlier in the stream): they read fine.
    for offset in [0, 5000, bad_start.saturating_sub(block), bad_start.saturating_sub(1000)] {
        let n = file.read_at(&mut buf, offset).unwrap();
        let want = &original[offset as usize..(offset as usize + 4096).min(original.len())];
        assert_eq!(&buf[..n], &want[..n.min(want.len())], "good range at {offset}");
        assert!(n > 0);
    }
    // Other files are unaffected.
    let leaf = std::fs::read(fx.mounted_src().join("deep/a/b/c/d/leaf.txt")).unwrap();
    assert_eq!(leaf, b"leaf\n");
    assert!(mount.alive(), "the daemon must survive a corrupt block");

    let log = mount.log_text();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains(&format!("block {bad_block}"))).collect();
    assert!(!lines.is_empty(), "no log line names block {bad_block}:\n{log}");
    assert_eq!(lines.len(), 1, "the block is logged once:\n{log}");
    assert!(lines[0].contains("corrupt.acx"), "the line names the archive: {}", lines[0]);
    assert!(lines[0].contains(&payload_start.to_string()), "the line names the payload offset: {}", lines[0]);
}
