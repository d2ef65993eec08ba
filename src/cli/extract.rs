//! Writing an archive's tree to disk without ever touching anything outside the target directory.
//!
//! The archive is hostile input. Its tree parser already refuses names with `/`, NUL, `.` and `..`, but the
//! classic escape is not a bad name: it is a symlink the archive creates (`d -> /etc`) followed by a later entry
//! that goes through it (`d/passwd`). So every entry is created relative to an open directory descriptor
//! (`mkdirat`, `openat`, `symlinkat`), every directory is entered with `O_NOFOLLOW | O_DIRECTORY`, and every file
//! is created with `O_CREAT | O_EXCL | O_NOFOLLOW`. A symlink can be created but never followed, and nothing that
//! already exists is overwritten.
//!
//! Entries are visited depth-first, so a directory's own mode and mtime are applied when the walk leaves it —
//! after its children were written (a read-only directory must be filled first) and without keeping one
//! descriptor per directory open. Set-user-ID and set-group-ID bits are not restored from an archive.

use std::ffi::{CString, OsStr};
use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::format::tree::{EntryId, EntryKind, Tree};

/// Where the bytes of regular files come from (the archive, or a test double).
pub trait FileSource {
    /// Writes all bytes of file entry `id` to `out`, a fresh, empty file at `out_path` (for error messages).
    fn write_file(&self, id: EntryId, out: &mut File, out_path: &Path) -> Result<()>;
}

/// What `unpack` may do beyond the plain tree.
#[derive(Debug, Clone, Copy, Default)]
pub struct ExtractOptions {
    /// Also write generated sidecars (entries with flag bit 0, e.g. the `.fai` the packer added). They were not
    /// in the packed input, so a faithful round trip leaves them out.
    pub include_generated: bool,
}

/// Counts of what was written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ExtractReport {
    pub dirs: u64,
    pub files: u64,
    pub symlinks: u64,
    pub bytes: u64,
    pub skipped_generated: u64,
}

/// Permission bits restored from an archive: rwx for all, and the sticky bit; never set-user/group-ID.
const RESTORED_MODE_BITS: u32 = 0o1777;

/// How many directory descriptors the walk keeps open at once. Deeper trees reopen ancestors by name (still
/// with `O_NOFOLLOW`) instead of running out of descriptors.
const MAX_OPEN_DIRS: usize = 64;

/// Writes every entry of `tree` (except the root, which is `dest` itself) under `dest`, creating `dest` if needed.
pub fn extract_tree(tree: &Tree, source: &dyn FileSource, dest: &Path, opts: ExtractOptions) -> Result<ExtractReport> {
    std::fs::create_dir_all(dest).map_err(|e| Error::io(dest, e))?;
    let root = open_dir_path(dest)?;
    let mut walk = Walk { tree, dest, root, stack: Vec::new(), report: ExtractReport::default() };
    for id in super::listing::depth_first(tree) {
        walk.visit(id, source, opts)?;
    }
    walk.leave_until(0)?;
    Ok(walk.report)
}

/// One directory on the current path of the walk, with its descriptor while it is among the deepest open ones.
struct OpenDir {
    id: EntryId,
    fd: Option<OwnedFd>,
}

struct Walk<'a> {
    tree: &'a Tree,
    dest: &'a Path,
    root: OwnedFd,
    /// The directories from the root (exclusive) down to the one the walk is in.
    stack: Vec<OpenDir>,
    report: ExtractReport,
}

impl Walk<'_> {
    fn visit(&mut self, id: EntryId, source: &dyn FileSource, opts: ExtractOptions) -> Result<()> {
        let entry = self.tree.entry(id).ok_or_else(|| self.format_error(format!("entry {id} does not exist")))?;
        // Depth-first order: everything on the stack that is not this entry's parent is finished.
        self.leave_until(entry.parent)?;
        if entry.flags & 1 != 0 && !opts.include_generated {
            self.report.skipped_generated += 1;
            return Ok(());
        }
        let name = checked_name(&entry.name).map_err(|detail| self.format_error(detail))?;
        let parent_fd = self.current_dir_fd()?;
        match &entry.kind {
            EntryKind::Dir => {
                let fd = make_dir(parent_fd, &name).map_err(|e| Error::io(self.disk_path(id), e))?;
                self.report.dirs += 1;
                self.stack.push(OpenDir { id, fd: Some(fd) });
                self.close_shallow_descriptors();
            }
            EntryKind::File { size, .. } => {
                let mut file = create_file(parent_fd, &name).map_err(|e| Error::io(self.disk_path(id), e))?;
                source.write_file(id, &mut file, &self.disk_path(id))?;
                set_mode_and_mtime(file.as_raw_fd(), entry.mode, entry.mtime_sec, entry.mtime_nsec)
                    .map_err(|e| Error::io(self.disk_path(id), e))?;
                self.report.files += 1;
                self.report.bytes += size;
            }
            EntryKind::Symlink { target } => {
                make_symlink(parent_fd, &name, target, entry.mtime_sec, entry.mtime_nsec)
                    .map_err(|e| Error::io(self.disk_path(id), e))?;
                self.report.symlinks += 1;
            }
        }
        Ok(())
    }

    /// Pops (and finalises) directories until the top of the stack is `dir` (or the stack is empty for the root).
    /// If `dir` is not on the stack at all, the order was not depth-first: that is a bug or a malformed tree.
    fn leave_until(&mut self, dir: EntryId) -> Result<()> {
        while let Some(top) = self.stack.last() {
            if top.id == dir {
                return Ok(());
            }
            let done = self.stack.pop().expect("stack is not empty");
            self.finish_dir(done)?;
        }
        if dir == 0 {
            Ok(())
        } else {
            Err(self.format_error(format!("entry {dir} is used as a directory before it was created")))
        }
    }

    /// Applies a directory's mode and mtime once all its children exist.
    fn finish_dir(&mut self, dir: OpenDir) -> Result<()> {
        let fd = match dir.fd {
            Some(fd) => fd,
            None => self.reopen(self.stack.len(), dir.id)?,
        };
        let entry = &self.tree.entries[dir.id as usize];
        set_mode_and_mtime(fd.as_raw_fd(), entry.mode, entry.mtime_sec, entry.mtime_nsec)
            .map_err(|e| Error::io(self.disk_path(dir.id), e))
    }

    /// The descriptor of the directory the walk is in, reopening it by name if it was closed.
    fn current_dir_fd(&mut self) -> Result<RawFd> {
        let Some(top) = self.stack.len().checked_sub(1) else { return Ok(self.root.as_raw_fd()) };
        if self.stack[top].fd.is_none() {
            let fd = self.reopen(top, self.stack[top].id)?;
            self.stack[top].fd = Some(fd);
        }
        Ok(self.stack[top].fd.as_ref().map(|fd| fd.as_raw_fd()).expect("descriptor was just opened"))
    }

    /// Opens directory `id`, which sits at `depth` on the stack, from the nearest ancestor that is still open.
    fn reopen(&self, depth: usize, id: EntryId) -> Result<OwnedFd> {
        let open_ancestor = self.stack[..depth].iter().rposition(|d| d.fd.is_some());
        let (mut fd, first) = match open_ancestor {
            Some(i) => (self.stack[i].fd.as_ref().expect("checked").as_raw_fd(), i + 1),
            None => (self.root.as_raw_fd(), 0),
        };
        let chain: Vec<EntryId> = self.stack[first..depth].iter().map(|d| d.id).chain([id]).collect();
        let mut owned: Option<OwnedFd> = None;
        for step in chain {
            let name = checked_name(&self.tree.entries[step as usize].name).map_err(|d| self.format_error(d))?;
            let next = open_dir_at(fd, &name).map_err(|e| Error::io(self.disk_path(step), e))?;
            fd = next.as_raw_fd();
            owned = Some(next);
        }
        owned.ok_or_else(|| self.format_error("empty directory chain".into()))
    }

    /// Keeps at most [`MAX_OPEN_DIRS`] descriptors: the shallowest ones are closed and reopened when needed.
    fn close_shallow_descriptors(&mut self) {
        if self.stack.len() > MAX_OPEN_DIRS {
            let shallow = self.stack.len() - MAX_OPEN_DIRS - 1;
            self.stack[shallow].fd = None;
        }
    }

    fn disk_path(&self, id: EntryId) -> PathBuf {
        self.dest.join(OsStr::from_bytes(&self.tree.path_of(id)))
    }

    fn format_error(&self, detail: String) -> Error {
        Error::Format { path: self.dest.to_path_buf(), detail }
    }
}

/// A name as a C string, refusing anything that is not a single path component (the tree parser refuses these
/// too; checking again here keeps this module safe on its own).
fn checked_name(name: &[u8]) -> std::result::Result<CString, String> {
    if name.is_empty() || name == b"." || name == b".." || name.contains(&b'/') || name.len() > 255 {
        return Err(format!("unsafe entry name {:?}", String::from_utf8_lossy(name)));
    }
    CString::new(name).map_err(|_| format!("entry name {:?} contains NUL", String::from_utf8_lossy(name)))
}

fn last_os_error() -> std::io::Error {
    std::io::Error::last_os_error()
}

/// Takes ownership of a descriptor a libc call returned, or the error it set.
fn owned_fd(fd: RawFd) -> std::io::Result<OwnedFd> {
    if fd < 0 {
        return Err(last_os_error());
    }
    // SAFETY: `fd` was just returned by a successful open call and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn open_dir_path(path: &Path) -> Result<OwnedFd> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| Error::InvalidArgument(format!("{}: path contains NUL", path.display())))?;
    // SAFETY: `c_path` is a valid NUL-terminated string that outlives the call.
    let fd = unsafe { libc::open(c_path.as_ptr(), libc::O_RDONLY | libc::O_DIRECTORY | libc::O_CLOEXEC) };
    owned_fd(fd).map_err(|e| Error::io(path, e))
}

/// Opens the directory `name` inside `dir_fd`, refusing a symlink in its place.
fn open_dir_at(dir_fd: RawFd, name: &CString) -> std::io::Result<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: `dir_fd` is an open directory descriptor owned by the caller; `name` is NUL-terminated.
    owned_fd(unsafe { libc::openat(dir_fd, name.as_ptr(), flags) })
}

/// Creates directory `name` (owner-writable until it is finished) or enters an existing real directory.
fn make_dir(dir_fd: RawFd, name: &CString) -> std::io::Result<OwnedFd> {
    // SAFETY: as in `open_dir_at`.
    let rc = unsafe { libc::mkdirat(dir_fd, name.as_ptr(), 0o700) };
    if rc != 0 {
        let err = last_os_error();
        // An existing directory is merged into; a symlink or file in its place makes `open_dir_at` fail below.
        if err.raw_os_error() != Some(libc::EEXIST) {
            return Err(err);
        }
    }
    open_dir_at(dir_fd, name)
}

/// Creates a new regular file `name`; fails if anything (a file, a symlink, a dangling symlink) is there.
fn create_file(dir_fd: RawFd, name: &CString) -> std::io::Result<File> {
    let flags = libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    // SAFETY: as in `open_dir_at`; the mode argument is read because O_CREAT is set.
    let fd = owned_fd(unsafe { libc::openat(dir_fd, name.as_ptr(), flags, 0o600 as libc::c_uint) })?;
    Ok(File::from(fd))
}

fn make_symlink(dir_fd: RawFd, name: &CString, target: &[u8], mtime_sec: i64, mtime_nsec: u32) -> std::io::Result<()> {
    let c_target = CString::new(target)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "symlink target contains NUL"))?;
    // SAFETY: both strings are NUL-terminated and outlive the call; `dir_fd` is an open directory.
    if unsafe { libc::symlinkat(c_target.as_ptr(), dir_fd, name.as_ptr()) } != 0 {
        return Err(last_os_error());
    }
    let times = [atime_now(), timespec(mtime_sec, mtime_nsec)];
    // SAFETY: `times` holds two valid timespecs; AT_SYMLINK_NOFOLLOW sets the link's own time.
    if unsafe { libc::utimensat(dir_fd, name.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) } != 0 {
        return Err(last_os_error());
    }
    Ok(())
}

fn set_mode_and_mtime(fd: RawFd, mode: u32, mtime_sec: i64, mtime_nsec: u32) -> std::io::Result<()> {
    // SAFETY: `fd` is an open descriptor owned by the caller.
    if unsafe { libc::fchmod(fd, (mode & RESTORED_MODE_BITS) as libc::mode_t) } != 0 {
        return Err(last_os_error());
    }
    let times = [atime_now(), timespec(mtime_sec, mtime_nsec)];
    // SAFETY: `fd` is open and `times` holds two valid timespecs.
    if unsafe { libc::futimens(fd, times.as_ptr()) } != 0 {
        return Err(last_os_error());
    }
    Ok(())
}

fn timespec(sec: i64, nsec: u32) -> libc::timespec {
    // nsec < 10^9 is checked by the tree parser; clamp so a hand-made Tree cannot make the call fail oddly.
    libc::timespec { tv_sec: sec as libc::time_t, tv_nsec: nsec.min(999_999_999) as libc::c_long }
}

fn atime_now() -> libc::timespec {
    libc::timespec { tv_sec: 0, tv_nsec: libc::UTIME_NOW }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::format::tree::Entry;
    use std::io::Write;
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    /// Serves each file's bytes as its entry id repeated `size` times.
    struct Pattern<'a>(&'a Tree);
    impl FileSource for Pattern<'_> {
        fn write_file(&self, id: EntryId, out: &mut File, _: &Path) -> Result<()> {
            let EntryKind::File { size, .. } = self.0.entries[id as usize].kind else { panic!("not a file") };
            out.write_all(&vec![id as u8; size as usize]).map_err(|e| Error::io("test", e))
        }
    }

    fn entry(parent: EntryId, name: &[u8], kind: EntryKind, mode: u32) -> Entry {
        Entry { parent, name: name.to_vec(), kind, mode, mtime_sec: 1_000_000_000, mtime_nsec: 5, flags: 0 }
    }

    fn file(size: u64) -> EntryKind {
        EntryKind::File { offset: 0, size, transform: 0 }
    }

    /// Builds `children` (sorted by name) from the parent links without validating the entries: these tests feed
    /// the extractor trees that `Tree::from_entries` would refuse, to check it defends itself too.
    fn tree(entries: Vec<Entry>) -> Tree {
        let mut children = vec![Vec::new(); entries.len()];
        for (i, e) in entries.iter().enumerate().skip(1) {
            children[e.parent as usize].push(i as EntryId);
        }
        for kids in &mut children {
            kids.sort_by(|a, b| entries[*a as usize].name.cmp(&entries[*b as usize].name));
        }
        Tree { entries, children }
    }

    #[test]
    fn writes_files_dirs_symlinks_with_metadata() {
        let t = tree(vec![
            entry(0, b"", EntryKind::Dir, 0o755),
            entry(0, b"ro", EntryKind::Dir, 0o555),
            entry(1, b"f", file(3), 0o640),
            entry(0, b"link", EntryKind::Symlink { target: b"ro/f".to_vec() }, 0o777),
            entry(0, b"\xffname", file(0), 0o755),
        ]);
        let dir = tempfile::tempdir().unwrap();
        let report = extract_tree(&t, &Pattern(&t), dir.path(), ExtractOptions::default()).unwrap();
        assert_eq!(report, ExtractReport { dirs: 1, files: 2, symlinks: 1, bytes: 3, skipped_generated: 0 });
        assert_eq!(std::fs::read(dir.path().join("ro/f")).unwrap(), vec![2u8; 3]);
        let meta = std::fs::metadata(dir.path().join("ro/f")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o640);
        assert_eq!((meta.mtime(), meta.mtime_nsec()), (1_000_000_000, 5));
        let ro = std::fs::metadata(dir.path().join("ro")).unwrap();
        assert_eq!(ro.permissions().mode() & 0o7777, 0o555);
        assert_eq!(ro.mtime(), 1_000_000_000);
        assert_eq!(std::fs::read_link(dir.path().join("link")).unwrap(), Path::new("ro/f"));
        assert!(dir.path().join(OsStr::from_bytes(b"\xffname")).exists());
        // Let the temp dir be removed.
        std::fs::set_permissions(dir.path().join("ro"), std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn never_writes_through_a_symlink_it_created() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let target = outside.path().as_os_str().as_bytes().to_vec();
        // A symlink "d" to a directory outside, then a "directory" d with a file in it: a hostile tree. The
        // parser would refuse the duplicate name; this checks the extractor refuses it on its own too.
        let t = Tree {
            entries: vec![
                entry(0, b"", EntryKind::Dir, 0o755),
                entry(0, b"d", EntryKind::Symlink { target }, 0o777),
                entry(0, b"d", EntryKind::Dir, 0o755),
                entry(2, b"evil", file(4), 0o644),
            ],
            children: vec![vec![1, 2], vec![], vec![3], vec![]],
        };
        let err = extract_tree(&t, &Pattern(&t), dir.path(), ExtractOptions::default()).unwrap_err();
        assert!(matches!(err, Error::Io { .. }), "{err}");
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0, "wrote outside the target");

        // A file entry named like the symlink must not be written through it either.
        let t = Tree {
            entries: vec![
                entry(0, b"", EntryKind::Dir, 0o755),
                entry(0, b"x", EntryKind::Symlink { target: outside.path().join("f").into_os_string().into_vec() }, 0),
                entry(0, b"x", file(4), 0o644),
            ],
            children: vec![vec![1, 2], vec![], vec![]],
        };
        let dir2 = tempfile::tempdir().unwrap();
        assert!(extract_tree(&t, &Pattern(&t), dir2.path(), ExtractOptions::default()).is_err());
        assert!(!outside.path().join("f").exists(), "wrote through a symlink");
    }

    use std::os::unix::ffi::OsStringExt;

    #[test]
    fn refuses_unsafe_names_and_existing_files() {
        for bad in [&b".."[..], b".", b"a/b", b"", b"a\0b"] {
            let t = tree(vec![entry(0, b"", EntryKind::Dir, 0o755), entry(0, bad, file(1), 0o644)]);
            let dir = tempfile::tempdir().unwrap();
            let err = extract_tree(&t, &Pattern(&t), &dir.path().join("sub"), ExtractOptions::default()).unwrap_err();
            assert!(matches!(err, Error::Format { .. }), "{bad:?}: {err}");
        }
        let t = tree(vec![entry(0, b"", EntryKind::Dir, 0o755), entry(0, b"f", file(1), 0o644)]);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("f"), b"keep").unwrap();
        assert!(extract_tree(&t, &Pattern(&t), dir.path(), ExtractOptions::default()).is_err());
        assert_eq!(std::fs::read(dir.path().join("f")).unwrap(), b"keep");
    }

    #[test]
    fn deep_trees_do_not_exhaust_descriptors() {
        // 300 nested directories, each with a file, then files at shallow levels after the deep walk.
        let mut entries = vec![entry(0, b"", EntryKind::Dir, 0o755)];
        let mut parent = 0;
        for _ in 0..300 {
            entries.push(entry(parent, b"d", EntryKind::Dir, 0o700));
            parent = entries.len() as EntryId - 1;
            entries.push(entry(parent, b"f", file(1), 0o600));
        }
        entries.push(entry(0, b"z", file(2), 0o600));
        let t = tree(entries);
        let dir = tempfile::tempdir().unwrap();
        let report = extract_tree(&t, &Pattern(&t), dir.path(), ExtractOptions::default()).unwrap();
        assert_eq!((report.dirs, report.files), (300, 301));
        let deep: PathBuf = std::iter::repeat_n("d", 300).collect::<PathBuf>().join("f");
        assert_eq!(std::fs::read(dir.path().join(deep)).unwrap().len(), 1);
    }

    #[test]
    fn generated_sidecars_are_skipped_unless_asked() {
        let mut fai = entry(0, b"x.fa.fai", file(1), 0o644);
        fai.flags = 1;
        let t = tree(vec![entry(0, b"", EntryKind::Dir, 0o755), fai]);
        let dir = tempfile::tempdir().unwrap();
        let report = extract_tree(&t, &Pattern(&t), dir.path(), ExtractOptions::default()).unwrap();
        assert_eq!((report.files, report.skipped_generated), (0, 1));
        let report = extract_tree(&t, &Pattern(&t), dir.path(), ExtractOptions { include_generated: true }).unwrap();
        assert_eq!(report.files, 1);
    }
}
