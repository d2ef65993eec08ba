//! mount(8)-style `-o` options of `aceapex-mount`, parsed without any FUSE types so they can be tested alone.
//!
//! Besides our own options, an fstab line and `mount.fuse` pass generic ones (`defaults`, `nofail`,
//! `x-systemd.*`, …). Those that only matter to mount(8) or systemd are accepted and ignored; `rw` is refused
//! because the archive is immutable; anything else unknown is an error, so a typo never goes unnoticed.

use crate::archive::ArchiveOptions;
use crate::engine::cpu::DEFAULT_WINDOW_BYTES;
use crate::engine::DecoderChoice;
use crate::fs::FsOptions;
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
    /// Log where stream runs spend their time (`trace`; also `ACEAPEX_TRACE=stream` in the environment), at
    /// info level: see [`crate::fs::stream`].
    pub trace: bool,
    /// Options accepted but without effect here, for a debug line.
    pub ignored: Vec<String>,
}

/// How the one `cache_size=` budget (C) is divided among everything that holds decoded data, so that the
/// daemon's resident memory stays under C plus an overhead O that does not grow with C, reads, files or time.
///
/// Charged to C:
/// - **the decoded-block LRU** of the archive: `C - C/8 - C/4` (5/8 of C). Random reads, prefetches, stream runs
///   (sequential readers) and fills all put their blocks there, so a run's blocks also serve random reads and
///   sources; running out of budget evicts the least recent block, it never fails a read (a block larger than
///   the whole LRU is decoded, used and dropped);
/// - **parsed slices**: the CPU engine's cache of slice entropy-stage output, used to resolve a cold block's
///   sources: C/8 resident, but never less than [`MemoryBudget::PARSED_FLOOR_BYTES`] (8,192 slices). A parsed slice
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
/// `max(0, 24 MiB - C/8) + 4 × max(0, 1 MiB - C/16)` (0 from C = 192 MiB up, at most 28 MiB, 26.5 MiB at
/// C = 4 MiB: [`MemoryBudget::floor_excess`]), shrinks as C grows.
///
/// Not charged: the overhead O ([`Overhead::bytes`]), which depends on the machine and the archive but not on C
/// or on how long or how hard the mount is used (B = block size, 16 KiB by default; T = FUSE worker threads,
/// `threads=`, default the core count up to 16; P = CPU cores; K = the largest cold-read closure in slices,
/// about 2,600 on atha_chr1 in general mode, under 100 in genome mode):
/// - the process: binary, libraries, the archive's index and tree, the structures of the genome-mode files read
///   recently, and what the allocator keeps between live chunks: [`Overhead::PROCESS_BYTES`] (4.0 MiB resident
///   measured at mount for the load-test archive, whose 24 genome structures take about 2 MiB) plus 64 bytes per
///   block of index. Open structures are themselves bounded: at most
///   [`crate::archive::OPEN_STRUCTURE_BYTES`] (32 MiB) plus the ones being opened, so an archive of many large
///   FASTA files adds at most that much;
/// - per FUSE worker: a reply buffer up to `max_read` (1 MiB, [`crate::fuse::MAX_READ`]), the blocks of the
///   read in progress while they are copied (up to `max_read + 2B`, held outside the LRU when it is smaller
///   than one request), the slices a cold read's closure planner parses before they go into the cache (up to
///   K slices of 1.5 S bytes each, S the slice size), fuser's receive buffer (16 MiB reserved, only the pages
///   requests touch are resident: a few KiB) and the stack: `T × (2 MiB + 2B + 1.5 S × K)`;
/// - per live stream run: the sequential decoder's two batches of parsed blocks ahead of the copy (`2 × 8P`
///   blocks of 1.5 B) plus one block in the making and one spare: `MAX_STREAMS × 24P × B` (the window of 16
///   blocks it gathers before handing them to the cache, 256 KiB, is within that: 24P ≥ 48 blocks);
/// - thread stacks of the rayon pool (P) and the run threads: only touched pages, ~100 KiB each;
/// - with a whole-range engine (a GPU) only, and not in [`Overhead::bytes`] yet: a stream run's pieces are kept as
///   shared windows of up to 4 MiB ([`crate::cache::WINDOW_BYTES`]), charged whole to the LRU while any of
///   their blocks is in it; up to four spare window buffers are kept for reuse (16 MiB), and a read in progress
///   may hold the windows of its blocks (two at most) after the LRU let them go: `16 MiB + T × 8 MiB` at worst,
///   transient beyond the 16 MiB. With decoder=cpu no windows are made (each block is its own buffer);
/// - allocator slack: memory freed into glibc's one arena (below) that stays resident until reused, because glibc
///   returns only the top of its heap to the kernel: [`Overhead::ALLOCATOR_SLACK_BYTES`] (20 MiB; the most
///   measured free in the arena was 19.3 MiB, in `load-test.sh 600 4M` at ef6b9f4). It comes from the
///   transients above (closure parses, stream batches, reply buffers), not from the LRU's churn: a freed block's
///   chunk is reused by the next block of the same size, so it does not grow with C.
///
/// So the documented bound is `max(C, parts) + O` ([`MemoryBudget::bound_bytes`]) with
/// `O = 4 MiB + 64 B × blocks + T × (2 MiB + 2B + 1.5 S × K) + MAX_STREAMS × 24P × B + P × 0.1 MiB + 20 MiB`;
/// the daemon logs it at mount (`memory bound`) and `bench/load-test.sh` fails a run whose peak exceeds it.
/// With T = P = 2, B = 16 KiB, S = 2 KiB, K = 2,600 and 2,825 blocks (the load test of format v3): O = 46.7 MiB
/// (61.9 MiB with the 4 KiB slices of format v4), and the bound is
/// 77.2 MiB at C = 4 MiB (floors' excess 26.5), 126.7 MiB at 64 MiB and 302.7 MiB at 256 MiB.
///
/// The allocator: glibc malloc with one arena (`M_ARENA_MAX=1`, set by `aceapex-mount`). With several arenas a
/// block is freed into the arena of the thread that allocated it, and each arena keeps the high-water mark of
/// the blocks its threads once held, so the slack grew with C: 150.5 MiB peak with 4 arenas against 93.5 MiB
/// with one under the same 120 s general-mode load at C = 64 MiB; mimalloc (v3, 0.1.52) peaked at 167.6 MiB
/// there (16,400-byte blocks round up to its 20 KiB size class and half-empty pages stay resident).
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

    /// What the floors add beyond `cache_bytes` (0 from C = 192 MiB up, at most 28 MiB).
    pub fn floor_excess(&self, cache_bytes: u64) -> u64 {
        self.total_bytes().saturating_sub(cache_bytes)
    }

    /// The archive's options for this budget: what `aceapex-mount` opens the archive with.
    pub fn archive_options(&self, decoder: DecoderChoice) -> ArchiveOptions {
        ArchiveOptions {
            cache_bytes: self.block_cache_bytes,
            decoder,
            seq_window_bytes: self.seq_window_bytes,
            parsed_cache_bytes: self.parsed_cache_bytes,
            // A mount must not wait for the GPU's kernels to build (~42 s on a machine that has not built them).
            gpu_in_background: true,
        }
    }

    /// The documented bound on the daemon's resident memory: the budget's parts (C, or more where the floors
    /// apply) plus the overhead O.
    pub fn bound_bytes(&self, cache_bytes: u64, overhead: &Overhead) -> u64 {
        self.total_bytes().max(cache_bytes).saturating_add(overhead.bytes())
    }
}

/// What the daemon holds besides the budget's parts (see [`MemoryBudget`]): fixed for a machine and an archive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Overhead {
    /// FUSE worker threads (T).
    pub threads: usize,
    /// CPU cores: the decode pool's threads (P).
    pub cores: usize,
    /// The archive's block size (B).
    pub block_bytes: u64,
    /// The archive's slice size (S): a cold read's closure is counted in parsed slices.
    pub slice_bytes: u64,
    /// The archive's blocks (their index entries are resident).
    pub blocks: u64,
}

impl Overhead {
    /// The process before it serves: binary, libraries, tree, genome structures, allocator bookkeeping.
    pub const PROCESS_BYTES: u64 = 4 << 20;
    /// Resident index bytes per block (offsets, lengths, checksums, table groups, with their maps).
    pub const INDEX_BYTES_PER_BLOCK: u64 = 64;
    /// Per FUSE worker besides blocks and parsed slices: the reply buffer (`max_read`) and the stack.
    pub const WORKER_BYTES: u64 = 2 << 20;
    /// The largest cold-read closure planned at once, in slices (K, measured on atha_chr1 in general mode).
    pub const CLOSURE_SLICES: u64 = 2_600;
    /// Resident bytes of a parsed slice per 2 decoded bytes (1.5 times its decoded size, with allocation headers;
    /// 3 KiB for a 2 KiB slice). The closure counts slices whatever their size: 4 KiB slices parsed about as many
    /// for a cold read as 2 KiB slices (session 14), so its bytes grow with S.
    pub const PARSED_BYTES_PER_2_BYTES: u64 = 3;
    /// Stack pages a pool or run thread touches.
    pub const POOL_THREAD_BYTES: u64 = 100 << 10;
    /// Freed memory the allocator keeps resident between live chunks (see [`MemoryBudget`]).
    pub const ALLOCATOR_SLACK_BYTES: u64 = 20 << 20;

    /// O in bytes: `PROCESS + 64 B × blocks + T × (2 MiB + 2B + 1.5 S × K) + MAX_STREAMS × 24P × B + P × 0.1 MiB
    /// + slack`.
    pub fn bytes(&self) -> u64 {
        let (t, p, b) = (self.threads as u64, self.cores as u64, self.block_bytes);
        let parsed_slice = self.slice_bytes / 2 * Overhead::PARSED_BYTES_PER_2_BYTES;
        let per_worker = Overhead::WORKER_BYTES + 2 * b + Overhead::CLOSURE_SLICES * parsed_slice;
        let per_stream = 24 * p * b;
        Overhead::PROCESS_BYTES
            .saturating_add(self.blocks.saturating_mul(Overhead::INDEX_BYTES_PER_BLOCK))
            .saturating_add(t.saturating_mul(per_worker))
            .saturating_add((MemoryBudget::MAX_STREAMS as u64).saturating_mul(per_stream))
            .saturating_add(p.saturating_mul(Overhead::POOL_THREAD_BYTES))
            .saturating_add(Overhead::ALLOCATOR_SLACK_BYTES)
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

/// The default readahead of a mount whose stream runs take pieces from a whole-range engine (see
/// [`MountOptions::fs_options_for`]): two of the largest pieces
/// ([`crate::fs::archive_backend::MAX_PIECE_BYTES`]).
pub const PIECE_READAHEAD_BYTES: u64 = 2 * crate::fs::archive_backend::MAX_PIECE_BYTES;

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
            "trace" => self.trace = true,
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

/// Default decoded-block cache when `cache_size=` is not given.
pub const DEFAULT_CACHE_BYTES: u64 = 1 << 30;
/// Default largest file filled by a run when it is read at random (`fill=`).
pub const DEFAULT_FILL_MAX: u64 = 256 << 20;

impl MountOptions {
    /// The decoded-data budget C: `cache_size=`, else [`DEFAULT_CACHE_BYTES`].
    pub fn cache_bytes_or_default(&self) -> u64 {
        self.cache_bytes.unwrap_or(DEFAULT_CACHE_BYTES)
    }

    /// The filesystem layer's settings for a mount with budget `cache_bytes` divided as `budget`. Stream runs
    /// put their blocks into the archive's cache (one budget); files up to an eighth of `cache_size` (at most
    /// [`DEFAULT_FILL_MAX`]) are filled when read at random, unless `fill=` says otherwise.
    pub fn fs_options(&self, cache_bytes: u64, budget: &MemoryBudget) -> FsOptions {
        self.fs_options_for(cache_bytes, budget, false)
    }

    /// [`MountOptions::fs_options`] for an archive whose stream runs take whole pieces from a whole-range
    /// engine (a GPU: [`crate::archive::Archive::prefers_batches`]) when `pieces`: the default readahead is
    /// then [`PIECE_READAHEAD_BYTES`] (within the same share of the LRU). Why: such a run produces a piece of up
    /// to 16 MiB at a time and is held back once it is `readahead` ahead, so with a 16 MiB readahead it starts
    /// the next piece only when its reader enters the last one, and the reader waits whenever the piece's
    /// decode and copy take longer than the reader takes to consume the one before.
    pub fn fs_options_for(&self, cache_bytes: u64, budget: &MemoryBudget, pieces: bool) -> FsOptions {
        let mut fs = FsOptions {
            stream_cache_bytes: 0,
            max_streams: budget.max_streams,
            fill_max_bytes: self.fill_bytes.unwrap_or((cache_bytes / 8).min(DEFAULT_FILL_MAX)),
            trace: self.trace || FsOptions::trace_from_env(),
            ..FsOptions::default()
        };
        if let Some(uid) = self.uid {
            fs.uid = uid;
        }
        if let Some(gid) = self.gid {
            fs.gid = gid;
        }
        // A run may get this far ahead of its reader; its blocks wait in the shared LRU, so all runs together
        // should not fill more than half of it (else they evict their own blocks before the readers get there).
        let share = budget.block_cache_bytes / (2 * budget.max_streams.max(1) as u64);
        let most = if pieces { PIECE_READAHEAD_BYTES } else { fs.readahead_bytes };
        fs.readahead_bytes = self.readahead_bytes.unwrap_or_else(|| share.clamp(256 << 10, most));
        fs
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
    fn whole_range_engines_get_a_readahead_of_two_pieces_within_the_share() {
        let o = MountOptions::default();
        let (big, small) = (2u64 << 30, 64u64 << 20);
        let (b_big, b_small) = (MemoryBudget::split(big), MemoryBudget::split(small));
        assert_eq!(o.fs_options(big, &b_big).readahead_bytes, 16 << 20);
        assert_eq!(o.fs_options_for(big, &b_big, true).readahead_bytes, PIECE_READAHEAD_BYTES);
        // A small cache caps both at the same share of its LRU.
        let share = b_small.block_cache_bytes / (2 * b_small.max_streams as u64);
        assert_eq!(o.fs_options_for(small, &b_small, true).readahead_bytes, share);
        assert_eq!(o.fs_options_for(small, &b_small, false).readahead_bytes, share);
        // `readahead=` wins.
        let set = MountOptions { readahead_bytes: Some(1 << 20), ..MountOptions::default() };
        assert_eq!(set.fs_options_for(big, &b_big, true).readahead_bytes, 1 << 20);
    }

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

    /// The overhead does not grow with C: the bound is the budget's parts plus the same O for every C, and the
    /// parts are C itself once the floors are covered.
    #[test]
    fn the_bound_is_the_budget_plus_a_fixed_overhead() {
        let o = Overhead { threads: 2, cores: 2, block_bytes: 16 << 10, slice_bytes: 2 << 10, blocks: 2_825 };
        let fixed = o.bytes();
        // The load test's machine and archive: 46.7 MiB (the figure in MemoryBudget's documentation).
        assert_eq!(fixed >> 10, 47_784, "{fixed}");
        let mut last_excess = u64::MAX;
        for c in [0u64, 4 << 20, 8 << 20, 64 << 20, 191 << 20, 192 << 20, 256 << 20, 1 << 30, 64 << 30] {
            let b = MemoryBudget::split(c);
            assert_eq!(b.bound_bytes(c, &o), c + b.floor_excess(c) + fixed, "{c}");
            // The floors' excess only shrinks as C grows.
            assert!(b.floor_excess(c) <= last_excess, "{c}");
            last_excess = b.floor_excess(c);
        }
        assert_eq!(MemoryBudget::split(4 << 20).bound_bytes(4 << 20, &o) >> 10, 79_016);
        assert_eq!(MemoryBudget::split(64 << 20).bound_bytes(64 << 20, &o), (80 << 20) + fixed);
        assert!(MemoryBudget::split(256 << 20).bound_bytes(256 << 20, &o) <= (256 << 20) + fixed);
        // O grows with the machine (workers, cores) and the archive (index), never with C.
        let more_workers = Overhead { threads: 16, ..o };
        assert_eq!(more_workers.bytes() - fixed, 14 * (Overhead::WORKER_BYTES + (32 << 10) + 2_600 * 3072));
        assert!(Overhead { blocks: 2_826, ..o }.bytes() > fixed);
        // Slices twice as large: the closure's parsed slices take twice the bytes.
        assert_eq!(Overhead { slice_bytes: 4 << 10, ..o }.bytes() - fixed, 2 * 2_600 * 3072);
    }

    /// Every part of the budget is charged: the LRU, the parsed slices and the windows together never hold
    /// more than C once the floors are covered, and the LRU is never given more than its 5/8.
    #[test]
    fn the_parts_never_sum_above_the_budget_beyond_the_floors() {
        for shift in 12..44 {
            for c in [1u64 << shift, (1 << shift) + 12_345, (3 << shift) / 2] {
                let b = MemoryBudget::split(c);
                assert!(b.block_cache_bytes <= c - c / 8 - c / 16 * 4, "{c}");
                if c >= 192 << 20 {
                    assert!(b.total_bytes() <= c, "{c}: {b:?}");
                }
                assert!(b.floor_excess(c) <= MemoryBudget::PARSED_FLOOR_BYTES / 2 * 3 + (4 << 20), "{c}");
            }
        }
    }

    /// An archive opened as the daemon opens it, with budgets whose LRU share is below one block (nothing is
    /// kept) and of a few blocks (constant eviction): 4 readers, sequential and random, get every byte right,
    /// and the LRU never holds more than its share.
    #[test]
    fn reads_stay_right_and_the_lru_within_its_share_under_tiny_budgets() {
        use crate::archive::Archive;
        use crate::fs::{AcxFs, FsOptions};
        use std::sync::Arc;

        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("in");
        std::fs::create_dir_all(&src).unwrap();
        // Repetitive bytes with mutations, so blocks have sources in earlier blocks (cold reads resolve them).
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        let mut big: Vec<u8> = (0..8192).map(|_| b"ACGT"[(next() % 4) as usize]).collect();
        while big.len() < 1_200_000 {
            let from = (next() % big.len() as u64) as usize;
            let n = (100 + next() % 2000) as usize;
            for i in 0..n.min(big.len() - from) {
                let b = big[from + i];
                big.push(if next() % 61 == 0 { b"acgtN"[(next() % 5) as usize] } else { b });
            }
        }
        let files = [("big", big), ("small", b"tiny file\n".repeat(3000))];
        for (name, bytes) in &files {
            std::fs::write(src.join(name), bytes).unwrap();
        }
        let path = dir.path().join("t.acx");
        crate::pack::pack(std::slice::from_ref(&src), &path, &crate::pack::PackOptions::default()).unwrap();

        for c in [8u64 << 10, 96 << 10] {
            let budget = MemoryBudget::split(c);
            let archive = Arc::new(Archive::open_with(&path, budget.archive_options(DecoderChoice::Cpu)).unwrap());
            let block = archive.data().header.block_size();
            assert_eq!(budget.block_cache_bytes < block, c < 16 << 10, "{c}: {budget:?}");
            let fs_options = FsOptions {
                readahead_bytes: 256 << 10,
                max_streams: budget.max_streams,
                fill_max_bytes: c / 8,
                ..FsOptions::default()
            };
            let fs = AcxFs::new(Arc::clone(&archive), fs_options);
            let top = fs.lookup(1, b"in").unwrap().ino;
            let inos: Vec<u64> = files.iter().map(|(name, _)| fs.lookup(top, name.as_bytes()).unwrap().ino).collect();
            std::thread::scope(|s| {
                for t in 0..4u64 {
                    let (fs, files, inos) = (&fs, &files, &inos);
                    s.spawn(move || {
                        let mut buf = Vec::new();
                        for (f, (_, want)) in files.iter().enumerate() {
                            let opened = fs.open(inos[f], libc::O_RDONLY).unwrap();
                            let len = want.len() as u64;
                            if t % 2 == 0 {
                                let mut at = t * 40_000 % len;
                                while at < len {
                                    fs.read(inos[f], opened.fh, at, 128 << 10, &mut buf).unwrap();
                                    let end = (at as usize + (128 << 10)).min(want.len());
                                    assert!(buf == want[at as usize..end], "C={c}: sequential {f}@{at}");
                                    at += 128 << 10;
                                }
                            } else {
                                for i in 0..60u64 {
                                    let at = (i * 7_919 * (t + 3)) % len;
                                    let n = 1 + ((i * 31 + t) % 40_000) as u32;
                                    fs.read(inos[f], opened.fh, at, n, &mut buf).unwrap();
                                    let end = (at as usize + n as usize).min(want.len());
                                    assert!(buf == want[at as usize..end], "C={c}: random {f}@{at}+{n}");
                                }
                            }
                            fs.release(opened.fh);
                        }
                    });
                }
            });
            let stats = archive.stats();
            assert!(stats.bytes <= budget.block_cache_bytes, "C={c}: {stats:?}");
            assert_eq!(stats.budget_bytes, budget.block_cache_bytes);
            if budget.block_cache_bytes < block {
                // Only a short last block can fit; no full block ever does.
                assert!(stats.bytes < block, "C={c}: an LRU below one block kept one: {stats:?}");
            } else {
                assert!(stats.evictions > 0, "C={c}: the LRU was full and evicted: {stats:?}");
            }
        }
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
