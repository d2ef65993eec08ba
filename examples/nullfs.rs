//! `nullfs MOUNTPOINT [SIZE]`: the baseline of the mount benchmark. It mounts, through the very same
//! filesystem layer and fuser adapter settings as `aceapex-mount`, a tree with one file `null.bin` of SIZE
//! bytes (default 1 GiB) whose reads copy from a static 1 MiB buffer: the cost of the FUSE path alone, with no
//! decoding. Runs in the foreground until unmounted (`fusermount3 -u MOUNTPOINT`).

use std::sync::Arc;

use aceapex::fs::memory::{Content, MemoryTreeBuilder};
use aceapex::fs::options::parse_size;
use aceapex::fs::{AcxFs, FsOptions};
use aceapex::fuse::{self, MountSettings};

fn main() -> std::process::ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(mountpoint) = args.first() else {
        eprintln!("usage: nullfs MOUNTPOINT [SIZE]");
        return std::process::ExitCode::from(2);
    };
    let size = match args.get(1).map(|s| parse_size(s)).transpose() {
        Ok(size) => size.unwrap_or(1 << 30),
        Err(e) => {
            eprintln!("nullfs: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    // A fixed, non-trivial pattern so that a reader cannot tell it from data.
    let pattern: Vec<u8> = (0..1u32 << 20).map(|i| (i.wrapping_mul(2654435761) >> 24) as u8).collect();
    let mut tree = MemoryTreeBuilder::new();
    tree.file("null.bin", Content::Repeat { pattern: Arc::new(pattern), size }, 0o444);
    // No stream runs: there is nothing to decode ahead, so every read is the FUSE path plus one copy.
    let fs = Arc::new(AcxFs::new(Arc::new(tree.build()), FsOptions { readahead_bytes: 0, ..FsOptions::default() }));
    let threads = std::thread::available_parallelism().map_or(4, |n| n.get()).clamp(2, 16);
    let settings = MountSettings { threads, fsname: "nullfs".to_string(), ..MountSettings::default() };
    let result = fuse::mount(fs, std::path::Path::new(mountpoint), &settings).and_then(|session| session.run());
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nullfs: {e}");
            std::process::ExitCode::from(1)
        }
    }
}
