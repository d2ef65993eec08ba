//! The filesystem layer: inodes, attributes, directory listings, opens and reads over an archive, with no
//! FUSE types in it (the [`crate::fuse`] adapter translates; tests drive this layer directly).
//!
//! - Inode numbers are tree entry ids + 1, so the root (entry 0) is inode 1 as FUSE requires, and no table
//!   is needed: the archive is immutable, so every inode lives as long as the mount.
//! - Two reserved inodes follow the tree's: the directory `/.aceapex` and its file `stats`, a JSON snapshot of
//!   the counters (this layer's, the cache's and the engines'). A real `.aceapex` in the archive's root is
//!   hidden by it (and a warning says so once at mount).
//! - Reads go through a [`Backend`] (the opened [`crate::archive::Archive`], or an in-memory tree for tests and
//!   the `nullfs` baseline). Each open handle watches for sequential access ([`readahead`]); a sequential
//!   reader gets a [`stream::Run`]: the backend's sequential decoder on its own thread, decoding the rest of
//!   the file in order ahead of the reader into the backend's block cache (the archive's one LRU, so a run's
//!   blocks also serve random reads and sources, all within one byte budget). A file read at random whose size
//!   is within the fill limits gets one run over the whole file (a fill), so that later random reads find it
//!   decoded. Every read first takes what the cache holds and goes to the backend's random-access path only
//!   for the rest. Memory: see [`options::MemoryBudget`].
//! - A corrupt block fails only the reads that touch it (EIO) and is logged once with archive, block id and
//!   payload offset; everything else keeps working.

pub mod archive_backend;
pub mod memory;
pub mod options;
pub mod readahead;
pub mod stats;
pub mod stream;

use std::collections::{HashMap, HashSet};
use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::cache::{Block, BlockCache};
use crate::error::Error;
use crate::format::tree::{EntryId, EntryKind, Tree};
use readahead::SequentialState;
use stats::FsStats;
use stream::{Pacing, Run, StreamRuns};

/// What the filesystem layer needs from an archive. [`crate::archive::Archive`] implements it; so does the
/// in-memory [`memory::MemoryBackend`].
pub trait Backend: Send + Sync + 'static {
    /// The archive's tree (immutable).
    fn tree(&self) -> &Tree;
    /// Reads regular file `id` from `offset` into `buf`; returns the bytes read (short only at end of file).
    fn read_file(&self, id: EntryId, offset: u64, buf: &mut [u8]) -> crate::Result<usize>;
    /// Appends up to `len` bytes of regular file `id` from `offset` to `out`; returns how many (short only at
    /// end of file). The default zero-fills `len` bytes and calls [`Backend::read_file`]; a backend that can
    /// write into `out`'s spare capacity directly (the archive, for genome-mode files) skips that fill.
    fn read_file_into(&self, id: EntryId, offset: u64, len: usize, out: &mut Vec<u8>) -> crate::Result<usize> {
        let start = out.len();
        out.resize(start + len, 0);
        let result = self.read_file(id, offset, &mut out[start..]);
        out.truncate(start + *result.as_ref().unwrap_or(&0));
        result
    }
    /// Reads regular file `id` from `offset` into `buf`, initialised or not; returns `n`, the bytes read, with
    /// `buf[..n]` initialised (short only at end of file). The default zero-fills `buf` and calls
    /// [`Backend::read_file`]; a backend that writes every byte it reports (the archive, for genome-mode files)
    /// skips that fill.
    fn read_file_uninit(&self, id: EntryId, offset: u64, buf: &mut [MaybeUninit<u8>]) -> crate::Result<usize> {
        self.read_file(id, offset, zeroed(buf))
    }
    /// Where regular file `id`'s byte 0 lies in the logical stream, if the file is stored there as is (its
    /// bytes are then stream bytes `[offset, offset + size)`, cut into blocks of [`Backend::block_size`]).
    fn stream_offset(&self, id: EntryId) -> Option<u64>;
    /// For a file that is not stored as is but rebuilt from a contiguous range of the stream (a genome-mode
    /// file: its bases), where the data of a read of `[offset, offset + len)` lies: the stream bytes the read
    /// needs and those of the whole file. Stream runs and fills then decode that range ahead of the reader and
    /// [`Backend::read_file`] finds its blocks cached. `None` (the default) leaves such a file to `read_file`
    /// alone, as does an error opening it (the read reports the error).
    fn mapped_span(&self, _id: EntryId, _offset: u64, _len: u64) -> Option<MappedSpan> {
        None
    }
    /// Decodes `blocks` in order with the sequential decoder, handing whole blocks to `sink` as runs of
    /// consecutive blocks (`sink(first, blocks)`: block `first` and those after it, as the buffers the block
    /// cache keeps, so that a backend that has to copy a block out of its decoder does so once; a run of many
    /// blocks, views of shared windows, goes into the cache under one lock), which returns false to stop. Ids
    /// past the last block are ignored. An error ends the run (the blocks handed out so far are good).
    fn decode_stream(&self, blocks: Range<u64>, sink: &mut dyn FnMut(u64, &[Block]) -> bool) -> crate::Result<()>;
    /// The archive's own counters (cache, engines) as JSON.
    fn stats_json(&self) -> serde_json::Value;
    /// Where the data comes from, for logs and stats (the archive path).
    fn source_name(&self) -> String;
    /// Decoded bytes in total (for statfs).
    fn total_len(&self) -> u64;
    /// The decoded block size (statfs block size, readahead batch unit).
    fn block_size(&self) -> u32;
    /// The backend's own decoded-block cache, if it has one: stream runs then put their blocks there, so one
    /// byte budget holds every decoded block and blocks decoded by a run also serve random reads and sources.
    /// Without one the layer keeps a cache of [`FsOptions::stream_cache_bytes`] for its runs.
    fn block_cache(&self) -> Option<Arc<BlockCache>> {
        None
    }
    /// Prepares what the first reads would otherwise wait for (the archive: genome files' structures). The
    /// FUSE adapter calls it on a thread of its own once the mount is up; the default does nothing.
    fn warm(&self) {}
    /// Prepares what reads of mapped file `id` over `[offset, offset + len)` will need besides its blocks (the
    /// archive: a genome file's structure pieces there), so that a sequential reader does not wait for it when it
    /// gets there. The layer calls it on the rayon pool, ahead of a sequential reader; the default does nothing.
    fn prepare_ahead(&self, _id: EntryId, _offset: u64, _len: u64) {}
}

/// `buf` zero-filled, as bytes.
fn zeroed(buf: &mut [MaybeUninit<u8>]) -> &mut [u8] {
    buf.fill(MaybeUninit::new(0));
    // SAFETY: every element was just initialised; `MaybeUninit<u8>` has the layout of `u8`.
    unsafe { &mut *(buf as *mut [MaybeUninit<u8>] as *mut [u8]) }
}

/// Where a read of a mapped file (see [`Backend::mapped_span`]) finds its data in the logical stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MappedSpan {
    /// Stream bytes the read needs (empty when it needs none, e.g. a read inside a FASTA header).
    pub needed: Range<u64>,
    /// Stream bytes of the whole file's data.
    pub file: Range<u64>,
}

/// An errno the filesystem answers with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Errno(pub i32);

impl Errno {
    pub const ENOENT: Errno = Errno(libc::ENOENT);
    pub const ENOTDIR: Errno = Errno(libc::ENOTDIR);
    pub const EISDIR: Errno = Errno(libc::EISDIR);
    pub const EINVAL: Errno = Errno(libc::EINVAL);
    pub const EBADF: Errno = Errno(libc::EBADF);
    pub const EROFS: Errno = Errno(libc::EROFS);
    pub const EIO: Errno = Errno(libc::EIO);
    pub const ELOOP: Errno = Errno(libc::ELOOP);
}

pub type FsResult<T> = std::result::Result<T, Errno>;

/// The three kinds of inode the archive holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    Directory,
    RegularFile,
    Symlink,
}

impl FileKind {
    /// The `S_IFMT` bits of this kind.
    pub fn type_bits(self) -> u32 {
        match self {
            FileKind::Directory => libc::S_IFDIR,
            FileKind::RegularFile => libc::S_IFREG,
            FileKind::Symlink => libc::S_IFLNK,
        }
    }
}

/// An inode's attributes, with how long the kernel may cache them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Attr {
    pub ino: u64,
    pub kind: FileKind,
    pub size: u64,
    /// 512-byte blocks: `ceil(size / 512)`.
    pub blocks: u64,
    /// Permission bits (`mode & 0o7777`).
    pub perm: u16,
    pub nlink: u32,
    pub uid: u32,
    pub gid: u32,
    pub mtime: SystemTime,
    pub blksize: u32,
    pub ttl: Duration,
}

impl Attr {
    /// `st_mode`: type bits and permission bits.
    pub fn mode(&self) -> u32 {
        self.kind.type_bits() | u32::from(self.perm)
    }
}

/// One directory listing entry; `next_offset` is what the kernel passes back to continue after it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirEntry<'a> {
    pub ino: u64,
    pub next_offset: u64,
    pub kind: FileKind,
    pub name: &'a [u8],
}

/// The reply to an open: a handle and how the kernel should cache the file's pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Opened {
    pub fh: u64,
    /// Keep the page cache across opens (archive files never change).
    pub keep_cache: bool,
    /// Bypass the page cache (the stats file changes on every open and has no fixed size).
    pub direct_io: bool,
}

/// `statfs` numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatFs {
    pub blocks: u64,
    pub files: u64,
    pub bsize: u32,
    pub namelen: u32,
}

/// Settings of the filesystem layer.
#[derive(Debug, Clone)]
pub struct FsOptions {
    /// Owner reported for every inode (default: the mounting user).
    pub uid: u32,
    pub gid: u32,
    /// The most bytes a stream run decodes ahead of its sequential reader (0 disables stream runs).
    pub readahead_bytes: u64,
    /// Byte budget of the stream cache, where stream runs put the blocks they decode, for a backend without a
    /// cache of its own ([`Backend::block_cache`]); the archive has one, and its budget covers the runs too.
    pub stream_cache_bytes: u64,
    /// Stream runs decoding at once (each is one thread; the decoder itself uses all cores).
    pub max_streams: usize,
    /// Files up to this size that are read at random get filled: one run decodes the whole file into the
    /// block cache at sequential speed (0 disables fills). Keep it well below the cache's budget.
    pub fill_max_bytes: u64,
    /// Attribute and entry cache lifetime for archive inodes (immutable, so long).
    pub ttl: Duration,
    /// Log, at info level, where each stream run spends its time (decoding, waiting for its reader, readers
    /// waiting for it): see [`stream`]. Off by default; `-o trace` or `ACEAPEX_TRACE=stream` turns it on.
    pub trace: bool,
    /// Rebuild a mapped (genome-mode) file's large reads in pieces on all cores once their blocks are cached
    /// ([`AcxFs::rebuild_in_pieces`]). On by default; `ACEAPEX_PARALLEL_REBUILD=0` turns it off (to compare).
    pub parallel_rebuild: bool,
    /// Prepare a mapped file ahead of its sequential readers on the rayon pool ([`AcxFs::prepare_ahead`]). On
    /// by default; `ACEAPEX_PREPARE_AHEAD=0` turns it off (to compare).
    pub prepare_ahead: bool,
}

impl FsOptions {
    /// Whether `ACEAPEX_TRACE` asks for the stream trace (`stream`, or `all`).
    pub fn trace_from_env() -> bool {
        std::env::var("ACEAPEX_TRACE").is_ok_and(|v| v.split(',').any(|w| w == "stream" || w == "all"))
    }
}

impl Default for FsOptions {
    fn default() -> Self {
        // SAFETY: geteuid/getegid have no preconditions and cannot fail.
        let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
        FsOptions {
            uid,
            gid,
            readahead_bytes: 16 << 20,
            stream_cache_bytes: 256 << 20,
            max_streams: 4,
            fill_max_bytes: 64 << 20,
            ttl: Duration::from_secs(24 * 3600),
            trace: false,
            parallel_rebuild: std::env::var("ACEAPEX_PARALLEL_REBUILD").map_or(true, |v| v != "0"),
            prepare_ahead: std::env::var("ACEAPEX_PREPARE_AHEAD").map_or(true, |v| v != "0"),
        }
    }
}

/// Name of the reserved directory in the root, and of the stats file in it.
pub const RESERVED_DIR: &[u8] = b".aceapex";
pub const STATS_FILE: &[u8] = b"stats";
/// Directory size reported by `stat` (the traditional one block).
const DIR_SIZE: u64 = 4096;

/// What an open handle refers to.
enum Handle {
    File {
        id: EntryId,
        size: u64,
        /// Stream position of the file's byte 0, if it is stored there as is.
        stream_offset: Option<u64>,
        stream: Mutex<HandleStream>,
    },
    /// A stats snapshot taken at open, so that one reader sees one consistent document.
    Stats { snapshot: Vec<u8> },
}

/// The sequential detector of a handle and the run serving it, if any.
#[derive(Default)]
struct HandleStream {
    detector: SequentialState,
    run: Option<Arc<Run>>,
    /// File offset up to which [`Backend::prepare_ahead`] was asked for (a mapped file's sequential reads).
    prepared_to: u64,
}

/// The filesystem over one backend.
pub struct AcxFs<B: Backend> {
    backend: Arc<B>,
    options: FsOptions,
    /// Per entry: link count (directories: 2 + subdirectories).
    nlink: Vec<u32>,
    reserved_dir_ino: u64,
    stats_ino: u64,
    /// Entry id of a real root `.aceapex` that the reserved directory hides, if any.
    hidden_root_entry: Option<EntryId>,
    mounted_at: SystemTime,
    started: Instant,
    handles: Mutex<HashMap<u64, Arc<Handle>>>,
    next_fh: AtomicU64,
    stats: Arc<FsStats>,
    streams: StreamRuns,
    /// Per file read at random: the run that fills it (see [`FsOptions::fill_max_bytes`]).
    fills: Mutex<HashMap<EntryId, Arc<Run>>>,
    /// Corrupt blocks already logged (each is logged once; bounded so a ruined archive cannot grow it).
    logged_corrupt: Mutex<HashSet<u64>>,
    /// The thread that runs [`Backend::prepare_ahead`] (started on first use, ends with the filesystem): ranges
    /// to prepare go to it.
    preparer: Mutex<Option<Preparer>>,
}

/// Where [`AcxFs::prepare_ahead`] sends the ranges its thread prepares: (file, file bytes).
type Preparer = std::sync::mpsc::Sender<(EntryId, Range<u64>)>;

const MAX_LOGGED_CORRUPT: usize = 4096;
/// A mapped file's read at least this long, its blocks cached, is rebuilt in pieces of [`REBUILD_PIECE_BYTES`] on
/// all cores ([`AcxFs::rebuild_in_pieces`]); shorter ones (random reads, the kernel's 128 KiB requests) in one.
const PARALLEL_REBUILD_BYTES: usize = 512 << 10;
const REBUILD_PIECE_BYTES: usize = 256 << 10;
/// Cores (threads of the rayon pool) below which reads are not rebuilt in pieces.
const PARALLEL_REBUILD_MIN_CORES: usize = 4;
/// How far ahead of a sequential reader a mapped file is prepared ([`AcxFs::prepare_ahead`]): 8 of a genome
/// file's 2 MiB structure pieces.
const PREPARE_AHEAD_BYTES: u64 = 16 << 20;
/// Reads this far before a handle's run start are served beside it instead of restarting it.
const READ_BEHIND_SLACK: u64 = 1 << 20;
/// Files smaller than this are not filled.
const FILL_MIN_BYTES: u64 = 1 << 20;
/// A random read waits for the file's fill when the fill is at most this many bytes short of its block (up to
/// 0.3–0.6 s of sequential decoding on 2 cores); further away, it decodes the block itself. Generous because a
/// cold block decoded beside the fill costs 12–24 ms of the same cores (format v1) and slows the fill down:
/// 1000 `samtools faidx` regions took 0.46–0.53 s with a 16 MiB lead and 0.46–0.49 s with 64 MiB.
const FILL_WAIT_BYTES: u64 = 64 << 20;

impl<B: Backend> AcxFs<B> {
    pub fn new(backend: Arc<B>, options: FsOptions) -> AcxFs<B> {
        let tree = backend.tree();
        let nlink = link_counts(tree);
        let entry_count = tree.entries.len() as u64;
        let hidden_root_entry = tree.lookup(0, RESERVED_DIR);
        if hidden_root_entry.is_some() {
            tracing::warn!(
                "{}: the archive's /.aceapex is hidden by the reserved stats directory",
                backend.source_name()
            );
        }
        let max_streams = if options.readahead_bytes > 0 { options.max_streams } else { 0 };
        let cache = backend.block_cache().unwrap_or_else(|| Arc::new(BlockCache::new(options.stream_cache_bytes)));
        let streams = StreamRuns::new(cache, max_streams).with_trace(options.trace);
        AcxFs {
            backend,
            nlink,
            reserved_dir_ino: entry_count + 1,
            stats_ino: entry_count + 2,
            hidden_root_entry,
            mounted_at: SystemTime::now(),
            started: Instant::now(),
            handles: Mutex::new(HashMap::new()),
            next_fh: AtomicU64::new(1),
            stats: Arc::new(FsStats::default()),
            streams,
            fills: Mutex::new(HashMap::new()),
            logged_corrupt: Mutex::new(HashSet::new()),
            preparer: Mutex::new(None),
            options,
        }
    }

    pub fn backend(&self) -> &Arc<B> {
        &self.backend
    }

    pub fn options(&self) -> &FsOptions {
        &self.options
    }

    fn tree(&self) -> &Tree {
        self.backend.tree()
    }

    /// The tree entry behind `ino`, or `None` for the reserved inodes and unknown numbers.
    fn entry_id(&self, ino: u64) -> Option<EntryId> {
        let id = ino.checked_sub(1)?;
        if id < self.tree().entries.len() as u64 {
            Some(id as EntryId)
        } else {
            None
        }
    }

    fn ino_of(id: EntryId) -> u64 {
        u64::from(id) + 1
    }

    /// Attributes of inode `ino`.
    pub fn getattr(&self, ino: u64) -> FsResult<Attr> {
        if ino == self.reserved_dir_ino {
            return Ok(self.synthetic_attr(ino, FileKind::Directory, DIR_SIZE, 0o555, 2));
        }
        if ino == self.stats_ino {
            // The size is that of a fresh snapshot; the file is opened direct_io, so readers read to EOF anyway.
            let size = self.stats_snapshot().len() as u64;
            let mut attr = self.synthetic_attr(ino, FileKind::RegularFile, size, 0o444, 1);
            attr.ttl = Duration::ZERO;
            return Ok(attr);
        }
        let id = self.entry_id(ino).ok_or(Errno::ENOENT)?;
        let entry = &self.tree().entries[id as usize];
        let (kind, size) = match &entry.kind {
            EntryKind::Dir => (FileKind::Directory, DIR_SIZE),
            EntryKind::File { size, .. } => (FileKind::RegularFile, *size),
            EntryKind::Symlink { target } => (FileKind::Symlink, target.len() as u64),
        };
        let mut nlink = self.nlink[id as usize];
        if id == 0 {
            nlink += 1; // the reserved directory
        }
        Ok(Attr {
            ino,
            kind,
            size,
            blocks: size.div_ceil(512),
            perm: (entry.mode & 0o7777) as u16,
            nlink,
            uid: self.options.uid,
            gid: self.options.gid,
            mtime: system_time(entry.mtime_sec, entry.mtime_nsec),
            blksize: self.backend.block_size(),
            ttl: self.options.ttl,
        })
    }

    fn synthetic_attr(&self, ino: u64, kind: FileKind, size: u64, perm: u16, nlink: u32) -> Attr {
        Attr {
            ino,
            kind,
            size,
            blocks: size.div_ceil(512),
            perm,
            nlink,
            uid: self.options.uid,
            gid: self.options.gid,
            mtime: self.mounted_at,
            blksize: 4096,
            ttl: self.options.ttl,
        }
    }

    /// The child `name` of directory `parent`.
    pub fn lookup(&self, parent: u64, name: &[u8]) -> FsResult<Attr> {
        if parent == self.reserved_dir_ino {
            return match name {
                STATS_FILE => self.getattr(self.stats_ino),
                b"." => self.getattr(parent),
                b".." => self.getattr(1),
                _ => Err(Errno::ENOENT),
            };
        }
        let dir = self.entry_id(parent).ok_or(if parent == self.stats_ino { Errno::ENOTDIR } else { Errno::ENOENT })?;
        let tree = self.tree();
        if !matches!(tree.entries[dir as usize].kind, EntryKind::Dir) {
            return Err(Errno::ENOTDIR);
        }
        match name {
            b"." => return self.getattr(parent),
            b".." => return self.getattr(Self::ino_of(tree.entries[dir as usize].parent)),
            _ => {}
        }
        if dir == 0 && name == RESERVED_DIR {
            return self.getattr(self.reserved_dir_ino);
        }
        let child = tree.lookup(dir, name).ok_or(Errno::ENOENT)?;
        self.getattr(Self::ino_of(child))
    }

    /// The target of symlink `ino`.
    pub fn readlink(&self, ino: u64) -> FsResult<&[u8]> {
        let id = self.entry_id(ino).ok_or(Errno::EINVAL)?;
        match &self.tree().entries[id as usize].kind {
            EntryKind::Symlink { target } => Ok(target),
            _ => Err(Errno::EINVAL),
        }
    }

    /// Lists directory `ino` from position `offset` (0 = start; positions are stable: ".", "..", then the
    /// children in name order, then, in the root, the reserved directory). `add` returns true when the reply
    /// buffer is full, which ends the listing for this call.
    pub fn readdir(&self, ino: u64, offset: u64, mut add: impl FnMut(DirEntry<'_>) -> bool) -> FsResult<()> {
        if ino == self.reserved_dir_ino {
            let entries: [(u64, FileKind, &[u8]); 3] = [
                (ino, FileKind::Directory, b"."),
                (1, FileKind::Directory, b".."),
                (self.stats_ino, FileKind::RegularFile, STATS_FILE),
            ];
            for (pos, (ino, kind, name)) in entries.iter().enumerate().skip(offset as usize) {
                if add(DirEntry { ino: *ino, next_offset: pos as u64 + 1, kind: *kind, name }) {
                    break;
                }
            }
            return Ok(());
        }
        let id = self.entry_id(ino).ok_or(Errno::ENOENT)?;
        let tree = self.tree();
        let entry = &tree.entries[id as usize];
        if !matches!(entry.kind, EntryKind::Dir) {
            return Err(Errno::ENOTDIR);
        }
        let children: &[EntryId] = tree.children.get(id as usize).map_or(&[], Vec::as_slice);
        let listed = children.len() as u64 + 2 + u64::from(id == 0);
        let mut pos = offset;
        while pos < listed {
            let next_offset = pos + 1;
            let full = match pos {
                0 => add(DirEntry { ino, next_offset, kind: FileKind::Directory, name: b"." }),
                1 => add(DirEntry {
                    ino: Self::ino_of(entry.parent),
                    next_offset,
                    kind: FileKind::Directory,
                    name: b"..",
                }),
                p if p - 2 < children.len() as u64 => {
                    let child = children[(p - 2) as usize];
                    if Some(child) == self.hidden_root_entry {
                        false
                    } else {
                        let e = &tree.entries[child as usize];
                        add(DirEntry { ino: Self::ino_of(child), next_offset, kind: kind_of(&e.kind), name: &e.name })
                    }
                }
                _ => add(DirEntry {
                    ino: self.reserved_dir_ino,
                    next_offset,
                    kind: FileKind::Directory,
                    name: RESERVED_DIR,
                }),
            };
            if full {
                break;
            }
            pos += 1;
        }
        Ok(())
    }

    /// Opens inode `ino` with open(2) `flags`; only read-only opens of regular files succeed.
    pub fn open(&self, ino: u64, flags: i32) -> FsResult<Opened> {
        let wants_write = flags & libc::O_ACCMODE != libc::O_RDONLY || flags & (libc::O_TRUNC | libc::O_APPEND) != 0;
        let handle = if ino == self.stats_ino {
            Handle::Stats { snapshot: self.stats_snapshot() }
        } else if ino == self.reserved_dir_ino {
            return Err(Errno::EISDIR);
        } else {
            let id = self.entry_id(ino).ok_or(Errno::ENOENT)?;
            match &self.tree().entries[id as usize].kind {
                EntryKind::File { size, .. } => Handle::File {
                    id,
                    size: *size,
                    stream_offset: self.backend.stream_offset(id),
                    stream: Mutex::default(),
                },
                EntryKind::Dir => return Err(Errno::EISDIR),
                EntryKind::Symlink { .. } => return Err(Errno::ELOOP),
            }
        };
        if wants_write {
            return Err(Errno::EROFS);
        }
        let direct_io = matches!(handle, Handle::Stats { .. });
        let fh = self.next_fh.fetch_add(1, Ordering::Relaxed);
        lock(&self.handles).insert(fh, Arc::new(handle));
        FsStats::add(&self.stats.opens, 1);
        Ok(Opened { fh, keep_cache: !direct_io, direct_io })
    }

    /// Forgets handle `fh`.
    pub fn release(&self, fh: u64) {
        lock(&self.handles).remove(&fh);
    }

    /// Open handles (for tests and stats).
    pub fn open_handles(&self) -> usize {
        lock(&self.handles).len()
    }

    /// Reads up to `size` bytes of `ino` at `offset` through handle `fh` into `out` (replacing its contents);
    /// `out` ends shorter only at end of file.
    pub fn read(&self, ino: u64, fh: u64, offset: u64, size: u32, out: &mut Vec<u8>) -> FsResult<()> {
        if let Some(view) = self.read_shared(ino, fh, offset, size, out)? {
            out.extend_from_slice(&view);
        }
        Ok(())
    }

    /// [`AcxFs::read`], except that a read whose bytes lie in one decoded window (a stored file's read served
    /// from blocks a stream run or an earlier read decoded) is answered with a view of that window, `out` left
    /// empty: the reply is sent straight from the cache's bytes, with no copy (the FUSE adapter does so). Else
    /// `None`, with the bytes in `out`.
    pub fn read_shared(&self, ino: u64, fh: u64, offset: u64, size: u32, out: &mut Vec<u8>) -> FsResult<Option<Block>> {
        let started = Instant::now();
        let result = self.read_inner(ino, fh, offset, size, out);
        self.stats.read_latency.record(started.elapsed());
        FsStats::add(&self.stats.reads, 1);
        match &result {
            Ok(view) => FsStats::add(&self.stats.bytes_served, view.as_ref().map_or(out.len(), |v| v.len()) as u64),
            Err(_) => FsStats::add(&self.stats.read_errors, 1),
        }
        result
    }

    fn read_inner(&self, ino: u64, fh: u64, offset: u64, size: u32, out: &mut Vec<u8>) -> FsResult<Option<Block>> {
        out.clear();
        let handle = lock(&self.handles).get(&fh).cloned().ok_or(Errno::EBADF)?;
        match &*handle {
            Handle::Stats { snapshot } => {
                if ino != self.stats_ino {
                    return Err(Errno::EBADF);
                }
                let start = (offset.min(snapshot.len() as u64)) as usize;
                let end = start.saturating_add(size as usize).min(snapshot.len());
                out.extend_from_slice(&snapshot[start..end]);
                Ok(None)
            }
            Handle::File { id, size: file_size, stream_offset, stream } => {
                if Self::ino_of(*id) != ino {
                    return Err(Errno::EBADF);
                }
                if offset >= *file_size {
                    return Ok(None);
                }
                let len = (u64::from(size)).min(file_size - offset) as usize;
                if let Some(base) = *stream_offset {
                    let run =
                        self.follow_stream(*id, stream, base..base + file_size, offset, len as u64, base + offset);
                    if let Some(view) = self.copy_streamed(base + offset, len, run.as_deref(), out) {
                        return Ok(Some(view));
                    }
                } else if let Some(span) = self.backend.mapped_span(*id, offset, len as u64) {
                    let run = self.follow_stream(*id, stream, span.file, offset, len as u64, span.needed.start);
                    self.prepare_ahead(*id, stream, offset + len as u64, *file_size);
                    if self.await_streamed(span.needed, run.as_deref()) {
                        FsStats::add(&self.stats.streamed_bytes, len as u64);
                        if len >= PARALLEL_REBUILD_BYTES && self.rebuild_in_pieces(*id, offset, len, out) {
                            return Ok(None);
                        }
                    }
                }
                while out.len() < len {
                    let done = out.len();
                    match self.backend.read_file_into(*id, offset + done as u64, len - done, out) {
                        Ok(0) => break, // the file is shorter than its entry says: end of file
                        Ok(_) => out.truncate(len),
                        Err(e) => {
                            out.clear();
                            return Err(self.read_error(*id, offset + done as u64, &e));
                        }
                    }
                }
                Ok(None)
            }
        }
    }

    /// Asks the backend, on a thread of its own, to prepare mapped file `id` up to [`PREPARE_AHEAD_BYTES`] beyond
    /// `read_end` (where a read just ended) while the handle's sequential detector (fed by [`AcxFs::follow_stream`])
    /// sees a stream, once the reader has used up half of what was prepared before (one request per 8 MiB, not one
    /// per read).
    /// Why: a genome file's reads need its structure pieces (~1.4 ms to decode 2 MiB of atha-like FASTA on one core
    /// here), and a reader that decoded them when it got there served the 340 MB generated genome from the daemon's
    /// cache at 1.0 GB/s against 3.2 GB/s with the pieces held (`examples/serve_bench`, 2 cores).
    fn prepare_ahead(&self, id: EntryId, stream: &Mutex<HandleStream>, read_end: u64, file_size: u64) {
        if !self.options.prepare_ahead {
            return;
        }
        let range = {
            let mut slot = lock(stream);
            // What was prepared lies behind the read, or far beyond it (an earlier pass): start over from here.
            let restart = slot.prepared_to < read_end || slot.prepared_to > read_end + PREPARE_AHEAD_BYTES;
            let enough = !restart && slot.prepared_to >= read_end + PREPARE_AHEAD_BYTES / 2;
            if !slot.detector.streaming() || enough || read_end >= file_size {
                return;
            }
            let start = if restart { read_end } else { slot.prepared_to };
            slot.prepared_to = (read_end + PREPARE_AHEAD_BYTES).min(file_size);
            if start >= slot.prepared_to {
                return; // prepared to the end of the file already
            }
            start..slot.prepared_to
        };
        // On a thread of its own, not the rayon pool: a stream run's sequential decoder keeps every pool thread
        // until its batch runs out, and the pieces the reader is about to need waited behind it. One thread for
        // the filesystem's lifetime rather than one per request: a thread's start, every 8 MiB, cost ~3 % of
        // serving atha_chr1 from the daemon's cache (`examples/serve_bench`, CPU time). Should the thread not
        // start, the reads decode their pieces themselves.
        let mut preparer = lock(&self.preparer);
        if preparer.is_none() {
            let (tx, rx) = std::sync::mpsc::channel::<(EntryId, Range<u64>)>();
            let backend = Arc::clone(&self.backend);
            let spawned = std::thread::Builder::new().name("acx-prepare".to_string()).spawn(move || {
                for (id, range) in rx {
                    backend.prepare_ahead(id, range.start, range.end - range.start);
                }
            });
            if spawned.is_ok() {
                *preparer = Some(tx);
            }
        }
        if let Some(tx) = &*preparer {
            let _ = tx.send((id, range));
        }
    }

    /// Rebuilds `len` bytes of mapped file `id` from `offset` into `out` (empty) in pieces of
    /// [`REBUILD_PIECE_BYTES`] on the rayon pool, once their blocks are cached. Why: a genome-mode file's bytes
    /// are rebuilt per read (line breaks, case, N runs, headers around the decoded bases), and served from the
    /// daemon's cache that rebuild took most of the daemon's time (1.8–3.6 GB/s in one thread, in-process, on
    /// the 2-core machine: `serve_from_cache_throughput`), on one FUSE worker per request. False (and `out`
    /// empty) when a piece failed or came back short: the caller reads it the ordinary way, which reports the
    /// error.
    fn rebuild_in_pieces(&self, id: EntryId, offset: u64, len: usize, out: &mut Vec<u8>) -> bool {
        use rayon::prelude::*;
        // With fewer than 4 cores the reader, the FUSE worker and the kernel's copies keep them busy: pieces gained
        // nothing on the 2-core machine (`mount-bench.sh --seq`, serving alone: 1311 and 1649 MB/s with pieces,
        // 1576 and 1275 without; nullfs 1400-2100 between runs).
        if !self.options.parallel_rebuild || rayon::current_num_threads() < PARALLEL_REBUILD_MIN_CORES {
            return false;
        }
        // Nor while a stream run decodes: its sequential decoder keeps every pool thread busy until its batch
        // runs out (up to 32 blocks a thread), and the pieces queued behind it. With 8 pool threads, the fresh
        // read of atha_chr1 saw rebuilds of 0.25 ms wait 16–23 ms (`examples/stream_bench`), the 18–20 ms read
        // latency p90 of the H200's fresh mount with decoder=cpu; on this thread the rebuild takes ~0.2 ms per MiB.
        if self.streams.decoding() {
            return false;
        }
        // Into `out`'s spare capacity, not zero-filled first: filling 1 MiB took 11 µs on the calling thread before
        // any piece started (in cache, at best), against ~45 µs for four 256 KiB pieces rebuilt at 5.9 GB/s.
        out.clear();
        out.reserve(len);
        let whole =
            out.spare_capacity_mut()[..len].par_chunks_mut(REBUILD_PIECE_BYTES).enumerate().all(|(k, piece)| {
                let at = offset + (k * REBUILD_PIECE_BYTES) as u64;
                matches!(self.backend.read_file_uninit(id, at, piece), Ok(n) if n == piece.len())
            });
        if whole {
            // SAFETY: every piece of the first `len` bytes of the spare capacity reported all its bytes written
            // (`read_file_uninit`'s contract), and `len ≤` the capacity reserved above.
            unsafe { out.set_len(len) };
        }
        whole
    }

    /// Feeds the handle's sequential detector (with the read's file `offset` and `len`) and returns the run
    /// that serves this read, starting one from the read's first stream byte `at` to the end of the file's
    /// stream bytes `data` when the reads are sequential and no run covers them. A jump away cancels the
    /// handle's run; random reads are served by the file's fill, if any.
    fn follow_stream(
        &self,
        id: EntryId,
        stream: &Mutex<HandleStream>,
        data: Range<u64>,
        offset: u64,
        len: u64,
        at: u64,
    ) -> Option<Arc<Run>> {
        // Every read feeds the detector, streams or not: `prepare_ahead` goes by its verdict too.
        let mut slot = lock(stream);
        let sequential = slot.detector.on_read(offset, len);
        if !self.streams.enabled() || data.is_empty() {
            return None;
        }
        let block_size = u64::from(self.backend.block_size().max(1));
        let first = at.clamp(data.start, data.end - 1) / block_size;
        let end = data.end.div_ceil(block_size);
        // A read that the handle's run covers is served by it, whatever the detector says: the kernel's
        // concurrent readahead requests reach the workers out of order, and one that arrives early looks like a
        // jump. Cancelling the run there (and starting a fill or a second run over the same blocks) decoded the
        // file twice: 58 MB/s instead of 162 in `examples/stream_bench` with 4 MiB of requests in flight.
        // Reads a little before the run's start are kernel requests that arrived out of order too: they are
        // served by the random path while the run goes on.
        if let Some(run) = &slot.run {
            if run.covers(first, READ_BEHIND_SLACK / block_size) {
                return Some(Arc::clone(run));
            }
        }
        if let Some(run) = slot.run.take() {
            run.cancel();
        }
        if !sequential {
            drop(slot);
            return self.fill(id, data.start / block_size..end, data.end - data.start, first);
        }
        // A fill of the file (started by a read that looked random: an early out-of-order request) decodes the
        // same blocks: follow it rather than decode them twice.
        if let Some(fill) = lock(&self.fills).get(&id) {
            if fill.covers(first, 0) && fill.is_running() {
                return Some(Arc::clone(fill));
            }
        }
        let pacing = Pacing::stream(self.options.readahead_bytes / block_size);
        slot.run = self.streams.start(&self.backend, first..end, pacing);
        slot.run.clone()
    }

    /// The fill run of file `id` (stream blocks `blocks`) for a random read of block `first`: the running
    /// one, or a new one if the file's size is within the fill limits. Why: a cold random read in the middle
    /// of a stream resolves its sources through the tokens of many earlier blocks (12–24 ms per 16 KiB block
    /// measured with format v1), while the sequential decoder fills a whole 30 MB file in 0.15–0.3 s; and
    /// `samtools faidx` on such a file touches most of it anyway (1000 regions read all 30.9 MB through the
    /// kernel's 64 KiB requests). Measured on atha_chr1 (2 loaded cores): 1000 regions 3.1–3.2 s → 0.46–0.49 s.
    fn fill(&self, id: EntryId, blocks: Range<u64>, file_size: u64, first: u64) -> Option<Arc<Run>> {
        let mut fills = lock(&self.fills);
        if let Some(run) = fills.get(&id) {
            // A finished fill whose block was evicted is started again, unless it stopped on a bad block.
            if run.is_running() || run.failed() || self.streams.cached(first).is_some() {
                return Some(Arc::clone(run));
            }
        }
        // A file of a few blocks is read whole by its first request or two; a fill would only add a run and its
        // thread for nothing.
        if file_size < FILL_MIN_BYTES || file_size > self.options.fill_max_bytes {
            return None;
        }
        let block_size = u64::from(self.backend.block_size().max(1));
        let run = self.streams.start(&self.backend, blocks, Pacing::fill((FILL_WAIT_BYTES / block_size).max(1)))?;
        fills.insert(id, Arc::clone(&run));
        Some(run)
    }

    /// Appends to `out` (empty) the longest prefix of stream bytes `[pos, pos + len)` that the block cache holds
    /// (decoded by stream runs or earlier reads), waiting for `run` when it is about to produce the next block
    /// needed. When all of it lies in one decoded window, returns a view of it instead (`out` stays empty).
    /// Bytes are taken a window at a time (one cache lookup per window, not per block): a block's window holds
    /// the blocks decoded after it too ([`Block::following`]).
    fn copy_streamed(&self, pos: u64, len: usize, run: Option<&Run>, out: &mut Vec<u8>) -> Option<Block> {
        let block_size = u64::from(self.backend.block_size().max(1));
        if let (Some(run), Some(last)) = (run, (pos + len as u64).checked_sub(1)) {
            self.await_last(run, last / block_size);
        }
        while out.len() < len {
            let at = pos + out.len() as u64;
            let id = at / block_size;
            let block = match self.streams.serve(id) {
                Some(block) => block,
                None => match run {
                    // Evicted already when `serve` finds nothing: the random path decodes it.
                    Some(run) if run.wait_for(id, self.streams.stats()) => self.streams.serve(id)?,
                    _ => return None,
                },
            };
            let from = (at - id * block_size) as usize;
            let bytes = block.following().get(from..).filter(|b| !b.is_empty())?;
            let take = bytes.len().min(len - out.len());
            FsStats::add(&self.stats.streamed_bytes, take as u64);
            if take == len {
                return block.view(from..from + len);
            }
            out.extend_from_slice(&bytes[..take]);
        }
        None
    }

    /// Makes sure the blocks of stream bytes `needed` are cached before a mapped file's read goes to the
    /// backend (which takes cached blocks and decodes only the rest): waits for `run` for each block it is about
    /// to produce. True when every block was cached or produced (the read is served from streamed blocks).
    fn await_streamed(&self, needed: Range<u64>, run: Option<&Run>) -> bool {
        if needed.is_empty() {
            return false;
        }
        let block_size = u64::from(self.backend.block_size().max(1));
        let last = (needed.end - 1) / block_size;
        if let Some(run) = run {
            self.await_last(run, last);
        }
        // One cache lock per missing block (usually none), not one per block of the read.
        let mut from = needed.start / block_size;
        while let Some(id) = self.streams.first_missing(from..last + 1) {
            match run {
                Some(run) if run.wait_for(id, self.streams.stats()) => from = id + 1,
                _ => return false,
            }
        }
        true
    }

    /// Tells `run` that a read goes up to block `last` and waits once for that block unless it is cached. The
    /// run produces blocks in order, so one wait for a read's last block (one wake-up per read, not one per
    /// block) covers those before it; a last block beyond the run's wait lead is not waited for, and the
    /// callers then wait block by block as far as they can.
    fn await_last(&self, run: &Run, last: u64) {
        run.reached(last);
        if self.streams.cached(last).is_none() {
            run.wait_for(last, self.streams.stats());
        }
    }

    /// Turns a backend error into an errno, logging corrupt blocks once each and other errors every time.
    fn read_error(&self, id: EntryId, offset: u64, error: &Error) -> Errno {
        match error {
            Error::CorruptBlock { block, .. } => {
                let mut logged = lock(&self.logged_corrupt);
                if logged.len() < MAX_LOGGED_CORRUPT && logged.insert(*block) {
                    tracing::error!("{error}");
                }
            }
            _ => {
                let path = String::from_utf8_lossy(&self.tree().path_of(id)).into_owned();
                tracing::error!("read of /{path} at offset {offset} failed: {error}");
            }
        }
        Errno(error.errno())
    }

    /// `statfs`: decoded size in blocks, entry count, nothing free.
    pub fn statfs(&self) -> StatFs {
        let bsize = self.backend.block_size().max(512);
        StatFs {
            blocks: self.backend.total_len().div_ceil(u64::from(bsize)),
            files: self.tree().entries.len() as u64 + 2,
            bsize,
            namelen: 255,
        }
    }

    /// The stats document: this layer's counters and the backend's, pretty-printed JSON with a final newline.
    pub fn stats_snapshot(&self) -> Vec<u8> {
        let doc = serde_json::json!({
            "archive": self.backend.source_name(),
            "uptime_s": self.started.elapsed().as_secs_f64(),
            "open_handles": self.open_handles(),
            "fs": self.stats.to_json(),
            "streams": { "runs": self.streams.stats().to_json(), "cache": self.streams.cache_json() },
            "archive_stats": self.backend.stats_json(),
        });
        let mut text = serde_json::to_vec_pretty(&doc).unwrap_or_default();
        text.push(b'\n');
        text
    }
}

fn kind_of(kind: &EntryKind) -> FileKind {
    match kind {
        EntryKind::Dir => FileKind::Directory,
        EntryKind::File { .. } => FileKind::RegularFile,
        EntryKind::Symlink { .. } => FileKind::Symlink,
    }
}

/// Link counts: 1 for files and symlinks, 2 + subdirectories for directories.
fn link_counts(tree: &Tree) -> Vec<u32> {
    let mut nlink: Vec<u32> =
        tree.entries.iter().map(|e| if matches!(e.kind, EntryKind::Dir) { 2 } else { 1 }).collect();
    for e in tree.entries.iter().skip(1) {
        if matches!(e.kind, EntryKind::Dir) {
            if let Some(n) = nlink.get_mut(e.parent as usize) {
                *n = n.saturating_add(1);
            }
        }
    }
    nlink
}

/// A timestamp from the tree's seconds and nanoseconds (before the epoch allowed).
fn system_time(sec: i64, nsec: u32) -> SystemTime {
    let nanos = Duration::from_nanos(u64::from(nsec.min(999_999_999)));
    let whole = Duration::from_secs(sec.unsigned_abs());
    let base = if sec >= 0 { UNIX_EPOCH.checked_add(whole) } else { UNIX_EPOCH.checked_sub(whole) };
    // Out-of-range times (beyond what the platform represents) show as the epoch rather than panicking.
    base.and_then(|t| t.checked_add(nanos)).unwrap_or(UNIX_EPOCH)
}

/// Locks a mutex, recovering the data if a panicking thread poisoned it (the data here stays consistent).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests;
