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
/// daemon's resident memory stays under C plus an overhead O that does not grow with reads, files or time.
///
/// Charged to C:
/// - **the decoded-block LRU** of the archive: `C - C/8 - C/4` (5/8 of C). Random reads, prefetches, stream runs
///   (sequential readers) and fills all put their blocks there, so a run's blocks also serve random reads and
///   sources; running out of budget evicts the least recent block, it never fails a read (a block larger than
///   the whole LRU is decoded, used and dropped);
/// - **parsed slices**: the CPU engine's cache of slice entropy-stage output, used to resolve a cold block's
///   sources: C/8 resident, but never less than [`MemoryBudget::PARSED_FLOOR_SLICES`] slices. A parsed slice
///   holds about 1.5 times its decoded size (measured on atha_chr1: 2,754 heap bytes per 2 KiB slice, plus
///   allocation headers; `parsed_bytes_per_decoded_byte` in `archive/tests.rs`), so the cache is given
///   `C/12` of decoded-slice capacity;
/// - **sequential windows**: at most [`MemoryBudget::MAX_STREAMS`] stream runs decode at once (more are
///   refused and served by the random path), and each keeps `C/16` of recent blocks (together C/4), but never
///   less than [`MemoryBudget::WINDOW_FLOOR_BYTES`] and never more than the library default of 64 MiB.
///
/// Why floors: a cold read in the middle of a stream resolves its sources through the parsed tokens of about
/// 1,000–2,600 slices (atha_chr1, format v2). If they do not fit, the resolver parses the same slices over and
/// over: with `cache_size=4M` and no floor (256 parsed slices) 16 load-test readers got 51 reads done in a
/// minute on the loaded 2-core machine, 132 with the floor. Likewise a window of a few blocks sends most of a
/// sequential run's sources through that path. So for small C the floors exceed their share; the excess,
/// `max(0, 24 MiB - C/8) + 4 × max(0, 1 MiB - C/16)` (0 from C = 192 MiB up; 26.5 MiB at C = 4 MiB), is
/// part of the overhead O.
///
/// Not charged: the overhead O, which depends on the machine and the archive but not on how long or how hard
/// the mount is used (B = block size, 16 KiB by default; T = FUSE worker threads, `threads=`, default the
/// core count up to 16; P = CPU cores; K = the largest cold-read closure in slices, about 2,600 on atha_chr1):
/// - the floors' excess over their share of C (above);
/// - the process itself with the archive's index and tree: 3.9 MiB resident for atha_chr1 mounted and idle
///   (the index grows by ~32 bytes per block, the tree with names and entries);
/// - per FUSE worker: a reply buffer up to `max_read` (1 MiB, [`crate::fuse::MAX_READ`]), the blocks of the
///   read in progress while they are copied (up to `max_read + 2B`, held outside the LRU when it is smaller
///   than one request), the slices a cold read's closure planner parses before they go into the cache (up to
///   K × 3 KiB), fuser's receive buffer (only the pages requests touch: a few KiB) and the stack:
///   about `T × (2 MiB + 2B + 3 KiB × K)`;
/// - per live stream run: the sequential decoder's two batches of parsed blocks ahead of the copy (`2 × 8P`
///   blocks of 1.5 B) plus one block in the making and one spare: about `MAX_STREAMS × 24P × B`;
/// - thread stacks of the rayon pool (P) and the run threads: only touched pages, ~100 KiB each;
/// - allocator slack: freed memory glibc keeps in its arenas (the daemon caps them at 4 with `M_ARENA_MAX`).
///
/// So `O ≈ floors' excess + 4 MiB + T × (2 MiB + 2B + 3 KiB × K) + MAX_STREAMS × 24P × B + P × 0.1 MiB +
/// slack`. With C = 4 MiB, T = P = 2, B = 16 KiB, K = 2,600: 26.5 + 4 + 19.3 + 3 + 0.2 ≈ 53 MiB before slack.
/// The README's load section gives the measured peak against `C + O`.
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
    /// The least parsed-slice cache worth having, in decoded bytes of slices: 8,192 slices of 2 KiB (about
    /// 24 MiB resident), three times the largest cold-read closure measured on atha_chr1 (2,605 slices), so that
    /// a few concurrent cold reads do not thrash it.
    pub const PARSED_FLOOR_BYTES: u64 = 16 << 20;
    /// Resident bytes of a parsed slice per decoded byte, times 2 (1.5: see the type's documentation).
    const PARSED_RESIDENT_X2: u64 = 3;
    /// The least sequential window worth having: 64 blocks of 16 KiB.
    pub const WINDOW_FLOOR_BYTES: u64 = 1 << 20;

    /// Divides `cache_bytes` (see the type's documentation).
    pub fn split(cache_bytes: u64) -> MemoryBudget {
        let parsed_share = cache_bytes / 8;
        let window_share = cache_bytes / 16;
        let max_streams = MemoryBudget::MAX_STREAMS;
        // The parsed-slice cache is sized in decoded bytes of slices; its resident share is 1.5 times that.
        let parsed_capacity = parsed_share / MemoryBudget::PARSED_RESIDENT_X2 * 2;
        MemoryBudget {
            block_cache_bytes: cache_bytes - parsed_share - window_share * max_streams as u64,
            parsed_cache_bytes: parsed_capacity.max(MemoryBudget::PARSED_FLOOR_BYTES),
            seq_window_bytes: window_share.clamp(MemoryBudget::WINDOW_FLOOR_BYTES, DEFAULT_WINDOW_BYTES),
            max_streams,
        }
    }

    /// Resident bytes the parts may hold together at most (parsed slices at 1.5 times their decoded size).
    pub fn total_bytes(&self) -> u64 {
        let parsed_resident = self.parsed_cache_bytes / 2 * MemoryBudget::PARSED_RESIDENT_X2;
        self.block_cache_bytes + parsed_resident + self.seq_window_bytes * self.max_streams as u64
    }

    /// What the floors add beyond `cache_bytes` (0 from C = 192 MiB up): part of the overhead O.
    pub fn floor_excess(&self, cache_bytes: u64) -> u64 {
        self.total_bytes().saturating_sub(cache_bytes)
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
    fn the_budget_split_stays_within_cache_size_plus_the_floors() {
        let floors = MemoryBudget::PARSED_FLOOR_BYTES / 2 * 3 + 4 * MemoryBudget::WINDOW_FLOOR_BYTES;
        for c in [0u64, 1, 4095, 4 << 20, 64 << 20, 192 << 20, 1 << 30, 1 << 40] {
            let b = MemoryBudget::split(c);
            assert!(b.total_bytes() <= c + floors, "{c}: {b:?}");
            assert!(b.floor_excess(c) <= floors);
            assert_eq!(b.max_streams, MemoryBudget::MAX_STREAMS);
            assert!((MemoryBudget::WINDOW_FLOOR_BYTES..=DEFAULT_WINDOW_BYTES).contains(&b.seq_window_bytes));
            assert!(b.parsed_cache_bytes >= MemoryBudget::PARSED_FLOOR_BYTES);
        }
        // Small budgets: the LRU gets its 5/8, the floors show as excess (26.5 MiB at 4 MiB).
        let b = MemoryBudget::split(4 << 20);
        assert_eq!((b.block_cache_bytes, b.parsed_cache_bytes, b.seq_window_bytes), (5 << 19, 16 << 20, 1 << 20));
        assert_eq!(b.floor_excess(4 << 20), (24 << 20) - (1 << 19) + 4 * ((1 << 20) - (1 << 18)));
        // From 192 MiB up, everything is charged to the budget.
        for c in [192u64 << 20, 1 << 30, 8 << 30] {
            assert_eq!(MemoryBudget::split(c).floor_excess(c), 0, "{c}");
        }
        let b = MemoryBudget::split(1 << 30);
        assert_eq!((b.parsed_cache_bytes, b.seq_window_bytes), ((128 << 20) / 3 * 2, 64 << 20));
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
