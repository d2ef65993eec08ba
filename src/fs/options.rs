//! mount(8)-style `-o` options of `aceapex-mount`, parsed without any FUSE types so they can be tested alone.
//!
//! Besides our own options, an fstab line and `mount.fuse` pass generic ones (`defaults`, `nofail`,
//! `x-systemd.*`, …). Those that only matter to mount(8) or systemd are accepted and ignored; `rw` is refused
//! because the archive is immutable; anything else unknown is an error, so a typo never goes unnoticed.

use crate::engine::cpu::DEFAULT_WINDOW_BYTES;
use crate::engine::DecoderChoice;
use std::path::PathBuf;

/// Options of one mount.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MountOptions {
    /// Let other users access the mount (`allow_other`; needs `user_allow_other` in /etc/fuse.conf for
    /// non-root users).
    pub allow_other: bool,
    /// `allow_root`: the mounting user and root.
    pub allow_root: bool,
    /// Let the kernel check permissions against the modes in the archive.
    pub default_permissions: bool,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Byte budget of the decoded-block cache.
    pub cache_bytes: Option<u64>,
    /// FUSE worker threads.
    pub threads: Option<usize>,
    pub decoder: DecoderChoice,
    /// Bytes decoded ahead of a sequential reader (`readahead=`, 0 disables stream runs and fills).
    pub readahead_bytes: Option<u64>,
    /// Largest file decoded whole once it is read at random (`fill=`, 0 disables).
    pub fill_bytes: Option<u64>,
    /// Where the daemon logs once detached (`log=`); default: nowhere.
    pub log_file: Option<PathBuf>,
    /// Options accepted but without effect here, for a debug line.
    pub ignored: Vec<String>,
}

/// How the one `cache_size=` budget (C) is divided among everything that holds decoded data, so that the
/// daemon's resident memory stays under C plus a fixed overhead that does not grow with reads, files or time.
///
/// Charged to C:
/// - **the decoded-block LRU** of the archive: `C - C/8 - C/4` (5/8 of C). Random reads, prefetches, stream runs
///   (sequential readers) and fills all put their blocks there, so a run's blocks also serve random reads and
///   sources; running out of budget evicts the least recent block, it never fails a read (a block larger than
///   the whole LRU is decoded, used and dropped);
/// - **parsed slices**: the CPU engine's cache of slice entropy-stage output used to resolve sources, C/8
///   (its count floor of 16 slices, 32 KiB with 2 KiB slices, is overhead);
/// - **sequential windows**: at most [`MemoryBudget::MAX_STREAMS`] stream runs decode at once (more are
///   refused and served by the random path), and each keeps `C/4 / MAX_STREAMS` of recent blocks (at least
///   one block, at most the library default of 64 MiB).
///
/// Not charged: the fixed overhead O, which depends on the machine and the archive's metadata but not on the
/// workload (B = block size, 16 KiB by default; T = FUSE worker threads, `threads=`; P = CPU cores):
/// - the process itself: code, libraries, allocator and logging state, ~6 MiB resident;
/// - the archive's index and tree: ~32 bytes per block (offsets, hashes) plus the tree (names, entries);
/// - per FUSE worker: a reply buffer up to `max_read` (1 MiB, [`crate::fuse::MAX_READ`]), the blocks of the
///   read in progress while they are copied (up to `max_read + 2B`, held outside the LRU when it is smaller
///   than one request), and fuser's receive buffer (only the pages requests touch: a few KiB) and stack:
///   about `T × (2 MiB + 2B)`;
/// - per live stream run: the sequential decoder's two batches of parsed blocks ahead of the copy (`2 × 8P`
///   blocks, a parsed block being 1–3 B) plus one block in the making and one spare: about
///   `MAX_STREAMS × 16P × 3B` (6 MiB with P = 2, B = 16 KiB);
/// - thread stacks of the rayon pool (P) and the run threads: only touched pages, ~100 KiB each;
/// - allocator slack: freed memory glibc keeps in per-thread arenas (bounded by `M_ARENA_MAX`, which the
///   daemon sets to 4, and returned by trimming).
///
/// So `O ≈ 6 MiB + index + T × (2 MiB + 2B) + MAX_STREAMS × 48P × B + P × 0.1 MiB + slack`; the README's load
/// section gives the measured peak against `C + O`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemoryBudget {
    /// The archive's decoded-block LRU (also filled by stream runs and fills).
    pub block_cache_bytes: u64,
    /// The CPU engine's parsed-slice cache.
    pub parsed_cache_bytes: u64,
    /// Each stream run's sequential window.
    pub seq_window_bytes: u64,
    /// Stream runs decoding at once.
    pub max_streams: usize,
}

impl MemoryBudget {
    /// Stream runs allowed at once: enough for a few concurrent sequential readers (each run decodes on all
    /// cores anyway); further sequential readers are served by the random path.
    pub const MAX_STREAMS: usize = 4;

    /// Divides `cache_bytes` (see the type's documentation).
    pub fn split(cache_bytes: u64) -> MemoryBudget {
        let parsed_cache_bytes = cache_bytes / 8;
        let windows = cache_bytes / 4;
        let max_streams = MemoryBudget::MAX_STREAMS;
        MemoryBudget {
            block_cache_bytes: cache_bytes - parsed_cache_bytes - windows,
            parsed_cache_bytes,
            seq_window_bytes: (windows / max_streams as u64).min(DEFAULT_WINDOW_BYTES),
            max_streams,
        }
    }

    /// Bytes of `cache_size` the parts may hold together (never more than the budget).
    pub fn charged_bytes(&self) -> u64 {
        self.block_cache_bytes + self.parsed_cache_bytes + self.seq_window_bytes * self.max_streams as u64
    }
}

/// Generic options that mount(8), mount.fuse or systemd consume; harmless to see here.
const IGNORED_FLAGS: &[&str] = &[
    "defaults",
    "ro",
    "nofail",
    "noauto",
    "auto",
    "user",
    "users",
    "nouser",
    "owner",
    "group",
    "_netdev",
    "nosuid",
    "suid",
    "nodev",
    "dev",
    "noexec",
    "exec",
    "noatime",
    "atime",
    "relatime",
    "strictatime",
    "nodiratime",
    "async",
    "sync",
    "auto_unmount",
    "nonempty",
    "kernel_cache",
    "auto_cache",
];

/// Ignored options with a value (`fsname=`, `subtype=`, `comment=`, `x-…`).
fn is_ignored_keyed(key: &str) -> bool {
    matches!(key, "fsname" | "subtype" | "comment" | "max_read" | "blksize" | "helper") || key.starts_with("x-")
}

impl MountOptions {
    /// Parses one `-o` argument (comma-separated) into `self`; later options override earlier ones.
    pub fn parse_into(&mut self, list: &str) -> Result<(), String> {
        for opt in list.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            self.parse_one(opt)?;
        }
        Ok(())
    }

    pub fn parse(list: &str) -> Result<MountOptions, String> {
        let mut options = MountOptions::default();
        options.parse_into(list)?;
        Ok(options)
    }

    fn parse_one(&mut self, opt: &str) -> Result<(), String> {
        let (key, value) = match opt.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (opt, None),
        };
        let need = |what: &str| value.ok_or_else(|| format!("mount option {key} needs a value ({key}={what})"));
        match key {
            "rw" => return Err("rw: the archive is read-only; mount it with ro (the default)".to_string()),
            "allow_other" => self.allow_other = true,
            "allow_root" => self.allow_root = true,
            "default_permissions" => self.default_permissions = true,
            "uid" => self.uid = Some(parse_id(key, need("N")?)?),
            "gid" => self.gid = Some(parse_id(key, need("N")?)?),
            "cache_size" => self.cache_bytes = Some(parse_size(need("SIZE")?).map_err(|e| format!("cache_size: {e}"))?),
            "readahead" => {
                self.readahead_bytes = Some(parse_size(need("SIZE")?).map_err(|e| format!("readahead: {e}"))?)
            }
            "fill" => self.fill_bytes = Some(parse_size(need("SIZE")?).map_err(|e| format!("fill: {e}"))?),
            "threads" => {
                let n: usize =
                    need("N")?.parse().map_err(|_| format!("threads={}: not a number", value.unwrap_or("")))?;
                if !(1..=256).contains(&n) {
                    return Err(format!("threads={n}: expected 1 to 256"));
                }
                self.threads = Some(n);
            }
            "decoder" => self.decoder = need("cpu|gpu|auto")?.parse()?,
            "log" => self.log_file = Some(PathBuf::from(need("FILE")?)),
            _ if value.is_none() && IGNORED_FLAGS.contains(&key) => self.ignored.push(opt.to_string()),
            _ if value.is_some() && is_ignored_keyed(key) => self.ignored.push(opt.to_string()),
            _ if key.starts_with("x-") => self.ignored.push(opt.to_string()),
            _ => return Err(format!("unknown mount option {opt:?}")),
        }
        Ok(())
    }
}

fn parse_id(key: &str, value: &str) -> Result<u32, String> {
    value.parse().map_err(|_| format!("{key}={value}: not a numeric id"))
}

pub use crate::units::parse_size;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fstab_line_options() {
        let o =
            MountOptions::parse("ro,allow_other,cache_size=1G,nofail,x-systemd.automount,_netdev,defaults").unwrap();
        assert!(o.allow_other);
        assert_eq!(o.cache_bytes, Some(1 << 30));
        assert_eq!(o.ignored.len(), 5);
    }

    #[test]
    fn all_own_options() {
        let o = MountOptions::parse("uid=1000,gid=100,threads=8,decoder=cpu,default_permissions,readahead=4M,fill=0")
            .unwrap();
        assert_eq!(o.fill_bytes, Some(0));
        assert_eq!((o.uid, o.gid, o.threads), (Some(1000), Some(100), Some(8)));
        assert_eq!(o.decoder, DecoderChoice::Cpu);
        assert!(o.default_permissions);
        assert_eq!(o.readahead_bytes, Some(4 << 20));
    }

    #[test]
    fn refusals_name_the_option() {
        assert!(MountOptions::parse("rw").unwrap_err().contains("read-only"));
        assert!(MountOptions::parse("bogus").unwrap_err().contains("bogus"));
        assert!(MountOptions::parse("cache_size=lots").unwrap_err().contains("cache_size"));
        assert!(MountOptions::parse("threads=0").is_err());
        assert!(MountOptions::parse("uid").unwrap_err().contains("needs a value"));
        assert!(MountOptions::parse("decoder=tpu").unwrap_err().contains("tpu"));
    }

    #[test]
    fn the_budget_split_never_exceeds_cache_size() {
        for c in [0u64, 1, 4095, 4 << 20, 64 << 20, 1 << 30, 1 << 40] {
            let b = MemoryBudget::split(c);
            assert!(b.charged_bytes() <= c, "{c}: {b:?}");
            assert_eq!(b.max_streams, MemoryBudget::MAX_STREAMS);
            assert!(b.seq_window_bytes <= DEFAULT_WINDOW_BYTES);
        }
        let b = MemoryBudget::split(4 << 20);
        assert_eq!((b.block_cache_bytes, b.parsed_cache_bytes, b.seq_window_bytes), (5 << 19, 1 << 19, 1 << 18));
        assert_eq!(MemoryBudget::split(1 << 30).seq_window_bytes, 64 << 20);
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("123").unwrap(), 123);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("1T").unwrap(), 1 << 40);
        assert!(parse_size("1X").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
        assert!(parse_size("20000000000G").is_err());
    }
}
