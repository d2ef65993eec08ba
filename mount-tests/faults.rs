//! Real-mount fault tests: the archive truncated, overwritten or replaced under a live mount (issue 6).
//!
//! What the daemon guarantees, and these tests check with reads that really reach it (`O_DIRECT`, which
//! bypasses the kernel page cache the mount otherwise keeps):
//! - The daemon opens the archive once, validates its metadata (header, index with one hash per block, tree)
//!   and keeps that in memory; block payloads are read with `pread` from the open descriptor when a block is
//!   decoded, and every decoded block is checked against its hash.
//! - **Truncated in place**: a block whose payload is gone reads as EIO (never SIGBUS, never other bytes), and
//!   is logged once; blocks before the cut still decode; blocks the daemon still holds (decoded in its block
//!   cache, or their slices parsed in its parsed-slice cache) are still served, with their original bytes; the
//!   daemon stays up, and names, sizes and listings (metadata in memory) still work.
//! - **Overwritten in place** (same length, other bytes): a changed payload fails its block hash (or its
//!   decode): EIO, or the original bytes for blocks the daemon still holds. Never other bytes.
//! - **Replaced by rename** (`mv new.acx archive.acx`, how the packer and most tools replace files): the daemon
//!   keeps the descriptor of the file it opened, so it goes on serving the archive it mounted, byte for byte,
//!   until it is remounted. The new archive appears only at the next mount.

use std::path::{Path, PathBuf};

use aceapex::format::tree::EntryKind;
use aceapex::format::ArchiveData;

use crate::support::{drop_page_cache, pack, read_direct, Fixture, Mounted};

const PAGE: u64 = 4096;
/// Fills and stream runs off, so that the daemon decodes only the blocks the test reads, and a cache large
/// enough that nothing it decodes is evicted: the test then knows exactly which blocks the daemon holds.
const OPTIONS: [&str; 3] = ["cache_size=64M", "readahead=0", "fill=0"];

/// Where a file lies: its stream offset and size, the archive's block log, and each block's payload range.
struct Layout {
    file_start: u64,
    size: u64,
    block_log: u32,
    payload: Vec<(u64, u64)>,
    tables_offset: u64,
}

impl Layout {
    fn of(archive: &Path, rel: &[u8]) -> Layout {
        let data = ArchiveData::open(archive).expect("open the fresh archive");
        let id = data.tree.resolve_path(rel).expect("file in the tree");
        let EntryKind::File { offset, size, .. } = data.tree.entries[id as usize].kind else { panic!("not a file") };
        let payload = (0..data.block_count()).map(|b| (data.payload_offset(b), data.payload_end[b as usize])).collect();
        Layout {
            file_start: offset,
            size,
            block_log: u32::from(data.header.block_log),
            payload,
            tables_offset: data.footer.tables_offset,
        }
    }

    /// The stream blocks that file bytes `[offset, offset + len)` touch.
    fn blocks(&self, offset: u64, len: u64) -> std::ops::RangeInclusive<u64> {
        let first = (self.file_start + offset) >> self.block_log;
        let last = (self.file_start + (offset + len).min(self.size) - 1) >> self.block_log;
        first..=last
    }

    /// The file's block in the middle of the file.
    fn middle_block(&self) -> u64 {
        (self.file_start + self.size / 2) >> self.block_log
    }
}

/// A private copy of the fixture's archive (the tests damage it).
fn copy_archive(fx: &Fixture, name: &str) -> PathBuf {
    let path = fx.dir.path().join(name);
    std::fs::copy(&fx.archive, &path).unwrap();
    path
}

/// Reads every page of a file through the mount with O_DIRECT, one page a read, and checks each against what
/// the daemon guarantees once the payloads of blocks `damaged_from..` are gone or changed:
/// - a page read fine has the original bytes, always;
/// - a page in blocks before `damaged_from` reads fine (its payloads are intact, and sources are always earlier);
/// - a page touching a damaged block after the last one the daemon ever touched (`last_touched`: read, or parsed
///   as a source of a block that was read) gives EIO;
/// - a page touching a damaged block the daemon did touch may read fine: it may hold the block decoded, or its
///   slices parsed (the parsed-slice cache), so either answer is right, as long as the bytes are the original.
///
/// Returns (pages read fine, pages that gave EIO).
fn check_pages(
    mounted: &Path,
    original: &[u8],
    layout: &Layout,
    damaged_from: u64,
    last_touched: u64,
) -> (usize, usize) {
    let (mut good, mut eio) = (0, 0);
    for offset in (0..original.len() as u64).step_by(PAGE as usize) {
        let blocks = layout.blocks(offset, PAGE);
        let intact = *blocks.end() < damaged_from;
        let never_touched = *blocks.end() > last_touched;
        let want = &original[offset as usize..(offset + PAGE).min(original.len() as u64) as usize];
        match read_direct(mounted, offset, PAGE as usize) {
            Ok(got) => {
                assert!(got == want, "page {offset} (blocks {blocks:?}): other bytes than the original");
                assert!(!never_touched, "page {offset} (blocks {blocks:?}) read fine, but its payload is gone");
                good += 1;
            }
            Err(e) => {
                assert_eq!(e.raw_os_error(), Some(libc::EIO), "page {offset} (blocks {blocks:?}): {e}");
                assert!(!intact, "page {offset} (blocks {blocks:?}) is intact, yet gave EIO");
                eio += 1;
            }
        }
    }
    (good, eio)
}

/// The daemon's log lines for corrupt blocks: each block is named once, however often it is read; returns the
/// blocks named.
fn logged_blocks(log: &str) -> Vec<u64> {
    let mut blocks: Vec<u64> =
        log.lines().filter_map(|l| l.split("block ").nth(1)?.split(" (payload").next()?.parse().ok()).collect();
    let n = blocks.len();
    blocks.sort_unstable();
    blocks.dedup();
    assert_eq!(blocks.len(), n, "a corrupt block was logged more than once:\n{log}");
    blocks
}

/// Reads two pages well after the damage point (2 and 5 blocks after block `from`, which itself stays cold)
/// before the damage, so the daemon holds their blocks. Returns those blocks.
fn warm_some_blocks(mounted: &Path, original: &[u8], layout: &Layout, from: u64) -> std::collections::BTreeSet<u64> {
    let mut cached = std::collections::BTreeSet::new();
    for later in [2u64, 5] {
        let offset = (((from + later) << layout.block_log).saturating_sub(layout.file_start) / PAGE + 1) * PAGE;
        if offset + PAGE > original.len() as u64 {
            continue;
        }
        let got = read_direct(mounted, offset, PAGE as usize).unwrap();
        assert!(got == original[offset as usize..(offset + PAGE) as usize], "warm read at {offset}");
        cached.extend(layout.blocks(offset, PAGE));
    }
    assert!(!cached.is_empty() && !cached.contains(&from));
    cached
}

#[test]
fn truncated_archive_gives_eio_for_lost_blocks_and_the_daemon_stays_up() {
    if !crate::support::fuse_available("truncated_archive_gives_eio_for_lost_blocks_and_the_daemon_stays_up") {
        return;
    }
    let fx = Fixture::new();
    let archive = copy_archive(&fx, "truncated.acx");
    let rel = "text/big.txt";
    let layout = Layout::of(&archive, format!("src/{rel}").as_bytes());
    let cut_block = layout.middle_block();
    let original = std::fs::read(fx.src.join(rel)).unwrap();
    let mut mount = Mounted::start(&archive, &fx.mnt, &OPTIONS).unwrap();
    let mounted = fx.mounted_src().join(rel);
    let cached = warm_some_blocks(&mounted, &original, &layout, cut_block);

    // Cut in the middle of the cut block's payload: it and every later block lose their payload.
    let (start, end) = layout.payload[cut_block as usize];
    let file = std::fs::OpenOptions::new().write(true).open(&archive).unwrap();
    file.set_len((start + end) / 2).unwrap();
    drop(file);

    let last_touched = *cached.last().unwrap();
    let (good, eio) = check_pages(&mounted, &original, &layout, cut_block, last_touched);
    assert!(good > 0 && eio > 0, "{good} good pages, {eio} EIO");
    assert!(mount.alive(), "the daemon survives a truncated archive");
    // Metadata is in memory: listing and sizes still work; another file before the cut still reads.
    let names: Vec<_> = std::fs::read_dir(fx.mounted_src().join("text")).unwrap().map(|e| e.unwrap()).collect();
    assert!(names.len() >= 4);
    assert_eq!(std::fs::metadata(&mounted).unwrap().len(), original.len() as u64);
    assert_eq!(std::fs::read(fx.mounted_src().join("deep/a/b/c/d/leaf.txt")).unwrap(), b"leaf\n");
    // A second pass holds to the same rules (an error is never cached as data).
    let (_, eio_again) = check_pages(&mounted, &original, &layout, cut_block, last_touched);
    assert!(eio_again > 0);
    assert!(mount.alive());
    let log = mount.log_text();
    // Every lost block a read needed is logged once, by id; none before the cut. (The file's last block may
    // have been decoded before the cut, when the mount opened the genome structures stored after it, and then
    // serves its bytes from the cache instead.)
    let logged = logged_blocks(&log);
    assert!(!logged.is_empty() && logged.iter().all(|&b| b >= cut_block), "lost blocks are logged:\n{log}");
    assert!(log.contains("truncated"), "the log says why:\n{log}");
}

#[test]
fn archive_overwritten_in_place_gives_eio_or_the_original_bytes_never_others() {
    if !crate::support::fuse_available("archive_overwritten_in_place_gives_eio_or_the_original_bytes_never_others") {
        return;
    }
    let fx = Fixture::new();
    let archive = copy_archive(&fx, "overwritten.acx");
    // Another archive of the same tree with different text: valid payloads of other data to write over ours.
    let other_src = fx.dir.path().join("other/src");
    std::fs::create_dir_all(other_src.join("text")).unwrap();
    std::fs::write(other_src.join("text/big.txt"), crate::support::text_bytes(1_500_000, 99)).unwrap();
    let other = fx.dir.path().join("other.acx");
    pack(std::slice::from_ref(&other_src), &other);

    let rel = "text/big.txt";
    let layout = Layout::of(&archive, format!("src/{rel}").as_bytes());
    let from_block = layout.middle_block();
    let original = std::fs::read(fx.src.join(rel)).unwrap();
    let mut mount = Mounted::start(&archive, &fx.mnt, &OPTIONS).unwrap();
    let mounted = fx.mounted_src().join(rel);
    let cached = warm_some_blocks(&mounted, &original, &layout, from_block);

    // Same length, other bytes: from the first changed block's payload to the end of the payloads, the other
    // archive's bytes at the same offsets (its own payloads, where it has them), every byte changed.
    let (start, _) = layout.payload[from_block as usize];
    let len = (layout.tables_offset - start) as usize;
    let mut replacement = std::fs::read(&other).unwrap();
    replacement.resize(replacement.len().max(start as usize + len), 0x5a);
    let ours = std::fs::read(&archive).unwrap();
    let mut patch = replacement[start as usize..start as usize + len].to_vec();
    for (i, b) in patch.iter_mut().enumerate() {
        if *b == ours[start as usize + i] {
            *b ^= 0xa5;
        }
    }
    {
        use std::os::unix::fs::FileExt;
        let file = std::fs::OpenOptions::new().write(true).open(&archive).unwrap();
        file.write_all_at(&patch, start).unwrap();
        file.sync_all().unwrap();
    }
    assert_eq!(std::fs::metadata(&archive).unwrap().len(), ours.len() as u64, "same length");

    let (good, eio) = check_pages(&mounted, &original, &layout, from_block, *cached.last().unwrap());
    assert!(good > 0 && eio > 0, "{good} good pages, {eio} EIO");
    assert!(mount.alive(), "the daemon survives an archive overwritten in place");
    logged_blocks(&mount.log_text());
    // A buffered read of the whole file (page cache dropped where we can) fails rather than returning others'
    // bytes.
    drop_page_cache();
    match std::fs::read(&mounted) {
        Ok(bytes) => assert!(bytes == original, "a whole-file read returned other bytes"),
        Err(e) => assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}"),
    }
    assert!(mount.alive());
}

#[test]
fn archive_replaced_by_rename_keeps_serving_the_mounted_archive() {
    if !crate::support::fuse_available("archive_replaced_by_rename_keeps_serving_the_mounted_archive") {
        return;
    }
    let fx = Fixture::new();
    let archive = copy_archive(&fx, "renamed.acx");
    let new_src = fx.dir.path().join("new/src");
    std::fs::create_dir_all(new_src.join("text")).unwrap();
    std::fs::write(new_src.join("text/big.txt"), crate::support::text_bytes(1_500_000, 123)).unwrap();
    std::fs::write(new_src.join("only-in-new"), b"new\n").unwrap();
    let new_archive = fx.dir.path().join("new.acx");
    pack(std::slice::from_ref(&new_src), &new_archive);

    let mut mount = Mounted::start(&archive, &fx.mnt, &OPTIONS).unwrap();
    let mounted = fx.mounted_src();
    // Touch a little before the replacement, most of it after.
    let genome = std::fs::read(fx.src.join("genome/g.fa")).unwrap();
    assert!(read_direct(&mounted.join("genome/g.fa"), 0, 8192).unwrap() == genome[..8192]);

    std::fs::rename(&new_archive, &archive).unwrap();
    drop_page_cache();

    // Every file of the mounted archive, read through the daemon: the original bytes.
    for rel in
        ["genome/g.fa", "text/big.txt", "text/exact16k", "text/under16k", "text/over16k", "bin/random.bin", "one"]
    {
        let original = std::fs::read(fx.src.join(rel)).unwrap();
        let mut got = Vec::new();
        while got.len() < original.len() {
            let chunk = read_direct(&mounted.join(rel), got.len() as u64, 256 << 10).unwrap();
            if chunk.is_empty() {
                break;
            }
            got.extend_from_slice(&chunk);
        }
        assert!(got == original, "{rel}: not the mounted archive's bytes after the rename");
        assert!(std::fs::read(mounted.join(rel)).unwrap() == original, "{rel}: buffered read");
    }
    assert!(!mounted.join("only-in-new").exists(), "the new archive's tree does not show");
    assert!(mount.alive());
    assert!(!mount.log_text().contains("ERROR"), "no errors: {}", mount.log_text());
}
