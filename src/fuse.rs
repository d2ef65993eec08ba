//! The fuser adapter: translates FUSE requests into calls on the filesystem layer ([`crate::fs::AcxFs`]) and
//! its answers into replies. It holds no logic of its own beyond the kernel settings below.
//!
//! Kernel settings, and why:
//! - read-only mount, long entry/attribute TTLs and `FOPEN_KEEP_CACHE`: the archive never changes, so the
//!   kernel may cache names, attributes and pages for as long as it likes, across opens;
//! - `max_readahead` of 1 MiB (or the kernel's limit) and `max_read` of 1 MiB: fewer, larger reads amortise
//!   the per-request cost, which is what bounds sequential throughput;
//! - several worker threads, each on its own cloned `/dev/fuse` fd, so that a cold read that waits for a
//!   decode does not hold up cached reads from other processes;
//! - directory listings are cached by the kernel (`FOPEN_CACHE_DIR`): offsets are stable.

use std::ffi::OsStr;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use fuser::{
    Config, Errno as FuseErrno, FileAttr, FileHandle, FileType, FopenFlags, Generation, INodeNo, InitFlags,
    KernelConfig, LockOwner, MountOption, OpenFlags, ReplyAttr, ReplyData, ReplyDirectory, ReplyEmpty, ReplyEntry,
    ReplyOpen, ReplyStatfs, Request, Session, SessionACL,
};

use crate::fs::{AcxFs, Attr, Backend, Errno, FileKind};

/// Largest read the kernel is asked to send (FUSE's own limit is 256 pages).
pub const MAX_READ: u32 = 1 << 20;
/// Reads are clamped to this, whatever a request says (the kernel never asks for more than its `max_read`).
const MAX_REQUEST: u32 = 16 << 20;

/// How the mount is presented to the kernel.
#[derive(Debug, Clone)]
pub struct MountSettings {
    /// FUSE worker threads.
    pub threads: usize,
    pub allow_other: bool,
    pub allow_root: bool,
    pub default_permissions: bool,
    /// Shown as the mount's source in /proc/mounts (the archive path).
    pub fsname: String,
}

impl Default for MountSettings {
    fn default() -> Self {
        MountSettings {
            threads: 4,
            allow_other: false,
            allow_root: false,
            default_permissions: false,
            fsname: "aceapex".to_string(),
        }
    }
}

impl MountSettings {
    /// The fuser configuration for these settings.
    pub fn fuser_config(&self) -> Config {
        let mut config = Config::default();
        config.mount_options = vec![
            MountOption::RO,
            MountOption::NoAtime,
            MountOption::FSName(self.fsname.replace(',', "_")),
            MountOption::Subtype("aceapex".to_string()),
            MountOption::CUSTOM(format!("max_read={MAX_READ}")),
        ];
        if self.default_permissions {
            config.mount_options.push(MountOption::DefaultPermissions);
        }
        config.acl = if self.allow_other {
            SessionACL::All
        } else if self.allow_root {
            SessionACL::RootAndOwner
        } else {
            SessionACL::Owner
        };
        config.n_threads = Some(self.threads.max(1));
        config.clone_fd = true;
        config
    }
}

/// The adapter: a [`fuser::Filesystem`] over an [`AcxFs`].
pub struct FuseAdapter<B: Backend> {
    fs: Arc<AcxFs<B>>,
}

impl<B: Backend> FuseAdapter<B> {
    pub fn new(fs: Arc<AcxFs<B>>) -> Self {
        FuseAdapter { fs }
    }
}

/// Mounts `fs` at `mountpoint` and completes the FUSE handshake; the caller runs the returned session
/// (`Session::run`) to serve requests, and unmounts through `Session::unmount_callable`.
pub fn mount<B: Backend>(
    fs: Arc<AcxFs<B>>,
    mountpoint: &Path,
    settings: &MountSettings,
) -> io::Result<Session<FuseAdapter<B>>> {
    let session = Session::new(FuseAdapter::new(fs), mountpoint, &settings.fuser_config())?;
    if let Err(e) = raise_kernel_readahead(mountpoint, MAX_READ / 1024) {
        tracing::debug!("kernel readahead left at its default: {e}");
    }
    Ok(session)
}

/// The kernel caps a FUSE mount's readahead at its backing device's `read_ahead_kb` (128 KiB by default),
/// whatever `max_readahead` the filesystem asked for; raising it (root only) lets sequential readers get 1 MiB
/// requests. The device is found in mountinfo (no stat of the mountpoint, which the session must answer).
pub fn raise_kernel_readahead(mountpoint: &Path, kib: u32) -> io::Result<()> {
    let canonical = mountpoint.canonicalize()?;
    let wanted = canonical.to_string_lossy().replace(' ', "\\040");
    let info = std::fs::read_to_string("/proc/self/mountinfo")?;
    let device = info
        .lines()
        .rev() // the newest mount on that path is the last line
        .map(|line| line.split(' ').collect::<Vec<_>>())
        .find(|fields| fields.get(4) == Some(&wanted.as_str()))
        .and_then(|fields| fields.get(2).map(|d| d.to_string()))
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "mount not in /proc/self/mountinfo"))?;
    std::fs::write(format!("/sys/class/bdi/{device}/read_ahead_kb"), kib.to_string())
}

fn errno(e: Errno) -> FuseErrno {
    FuseErrno::from_i32(e.0)
}

fn file_type(kind: FileKind) -> FileType {
    match kind {
        FileKind::Directory => FileType::Directory,
        FileKind::RegularFile => FileType::RegularFile,
        FileKind::Symlink => FileType::Symlink,
    }
}

fn file_attr(a: &Attr) -> FileAttr {
    FileAttr {
        ino: INodeNo(a.ino),
        size: a.size,
        blocks: a.blocks,
        atime: a.mtime,
        mtime: a.mtime,
        ctime: a.mtime,
        crtime: a.mtime,
        kind: file_type(a.kind),
        perm: a.perm,
        nlink: a.nlink,
        uid: a.uid,
        gid: a.gid,
        rdev: 0,
        blksize: a.blksize,
        flags: 0,
    }
}

thread_local! {
    /// Each worker's read buffer, reused across requests (reads are up to [`MAX_READ`] bytes).
    static READ_BUFFER: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

impl<B: Backend> fuser::Filesystem for FuseAdapter<B> {
    fn init(&mut self, _req: &Request, config: &mut KernelConfig) -> io::Result<()> {
        if let Err(kernel_max) = config.set_max_readahead(MAX_READ) {
            let _ = config.set_max_readahead(kernel_max);
        }
        let _ = config.set_max_background(64);
        let _ = config.set_congestion_threshold(48);
        // Optional capabilities: each is used only if this kernel offers it.
        for flag in [InitFlags::FUSE_CACHE_SYMLINKS, InitFlags::FUSE_PARALLEL_DIROPS, InitFlags::FUSE_ASYNC_READ] {
            let _ = config.add_capabilities(flag);
        }
        // The mount is up: prepare what first reads would wait for, off the request threads.
        let fs = Arc::clone(&self.fs);
        if let Err(e) = std::thread::Builder::new().name("acx-warm".to_string()).spawn(move || fs.backend().warm()) {
            tracing::debug!("cannot start the warm-up thread: {e}");
        }
        Ok(())
    }

    fn lookup(&self, _req: &Request, parent: INodeNo, name: &OsStr, reply: ReplyEntry) {
        match self.fs.lookup(parent.0, name.as_bytes()) {
            Ok(attr) => reply.entry(&attr.ttl, &file_attr(&attr), Generation(0)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn getattr(&self, _req: &Request, ino: INodeNo, _fh: Option<FileHandle>, reply: ReplyAttr) {
        match self.fs.getattr(ino.0) {
            Ok(attr) => reply.attr(&attr.ttl, &file_attr(&attr)),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readlink(&self, _req: &Request, ino: INodeNo, reply: ReplyData) {
        match self.fs.readlink(ino.0) {
            Ok(target) => reply.data(target),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn open(&self, _req: &Request, ino: INodeNo, flags: OpenFlags, reply: ReplyOpen) {
        match self.fs.open(ino.0, flags.0) {
            Ok(opened) => {
                let mut fopen = FopenFlags::empty();
                if opened.keep_cache {
                    fopen |= FopenFlags::FOPEN_KEEP_CACHE;
                }
                if opened.direct_io {
                    fopen |= FopenFlags::FOPEN_DIRECT_IO;
                }
                reply.opened(FileHandle(opened.fh), fopen)
            }
            Err(e) => reply.error(errno(e)),
        }
    }

    fn read(
        &self,
        _req: &Request,
        ino: INodeNo,
        fh: FileHandle,
        offset: u64,
        size: u32,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        reply: ReplyData,
    ) {
        READ_BUFFER.with(|buffer| {
            let mut buffer = buffer.borrow_mut();
            // A read inside one decoded window is sent from the cache's bytes (no copy into the buffer).
            match self.fs.read_shared(ino.0, fh.0, offset, size.min(MAX_REQUEST), &mut buffer) {
                Ok(Some(view)) => reply.data(&view),
                Ok(None) => reply.data(&buffer),
                Err(e) => reply.error(errno(e)),
            }
            // Do not let one huge read pin memory in every worker forever.
            if buffer.capacity() > 2 * MAX_READ as usize {
                *buffer = Vec::new();
            }
        });
    }

    fn release(
        &self,
        _req: &Request,
        _ino: INodeNo,
        fh: FileHandle,
        _flags: OpenFlags,
        _lock_owner: Option<LockOwner>,
        _flush: bool,
        reply: ReplyEmpty,
    ) {
        self.fs.release(fh.0);
        reply.ok();
    }

    fn opendir(&self, _req: &Request, ino: INodeNo, _flags: OpenFlags, reply: ReplyOpen) {
        match self.fs.getattr(ino.0) {
            Ok(attr) if attr.kind == FileKind::Directory => {
                reply.opened(FileHandle(0), FopenFlags::FOPEN_KEEP_CACHE | FopenFlags::FOPEN_CACHE_DIR)
            }
            Ok(_) => reply.error(FuseErrno::ENOTDIR),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn readdir(&self, _req: &Request, ino: INodeNo, _fh: FileHandle, offset: u64, mut reply: ReplyDirectory) {
        let result = self.fs.readdir(ino.0, offset, |entry| {
            reply.add(INodeNo(entry.ino), entry.next_offset, file_type(entry.kind), OsStr::from_bytes(entry.name))
        });
        match result {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(errno(e)),
        }
    }

    fn statfs(&self, _req: &Request, _ino: INodeNo, reply: ReplyStatfs) {
        let s = self.fs.statfs();
        reply.statfs(s.blocks, 0, 0, s.files, 0, s.bsize, s.namelen, s.bsize);
    }
}
