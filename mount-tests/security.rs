//! Who may read a mount, and names with any bytes.
//!
//! - Without `-o allow_other` the kernel lets only the mounting user into the mount: another uid gets EACCES
//!   even for a file of mode 0644, while the mounting user reads it.
//! - With `allow_other,default_permissions` the kernel checks each entry's mode against the reader: a 0600
//!   file is unreadable by another uid, a 0644 file readable.
//! - With `allow_other` alone the kernel leaves permission checks to the filesystem, and `aceapex-mount` makes
//!   none (its `open` ignores the caller): every user reads every file whatever its mode. The test asserts this
//!   so that a change is noticed; the systemd unit therefore mounts with `default_permissions`.
//! - Names are raw bytes: non-UTF-8, newlines, tabs, control bytes, leading dashes, glob characters and
//!   255-byte names list and read back through the mount exactly.
//!
//! The other uid is `nobody` (65534), set in a forked child before `exec` (no setpriv needed). That needs root;
//! as another user those tests print SKIP (mounting works, switching uid does not).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use crate::support::{fuse_available, pack, Mounted};

const NOBODY: libc::uid_t = 65534;
const NOGROUP: libc::gid_t = 65534;

/// Runs `cat path` as uid/gid 65534 with no supplementary groups, under a 20 s `timeout`.
fn cat_as_nobody(path: &Path) -> Output {
    let mut cmd = Command::new("timeout");
    cmd.arg("20").arg("cat").arg(path);
    // SAFETY: the closure runs in the forked child before exec and calls only setgroups, setgid and setuid,
    // which are async-signal-safe; it touches no memory shared with the parent.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setgroups(0, std::ptr::null()) != 0 || libc::setgid(NOGROUP) != 0 || libc::setuid(NOBODY) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    cmd.output().expect("run cat as nobody")
}

fn is_root(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    if !root {
        eprintln!("SKIP {test}: switching to another uid needs root");
    }
    root
}

fn assert_denied(out: &Output, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("Permission denied"), "{what}: {:?} {stderr}", out.status);
}

fn assert_reads(out: &Output, want: &[u8], what: &str) {
    assert!(out.status.success(), "{what}: {:?} {}", out.status, String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout == want, "{what}: wrong bytes");
}

/// A packed tree with a public (0644) and a private (0600) file, in directories every user may traverse, so
/// that only the mount's own rules decide who reads.
struct Modes {
    _dir: tempfile::TempDir,
    archive: PathBuf,
    mnt: PathBuf,
    public: Vec<u8>,
    private: Vec<u8>,
}

impl Modes {
    fn new() -> Modes {
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let src = dir.path().join("src");
        std::fs::create_dir(&src).unwrap();
        std::fs::set_permissions(&src, std::fs::Permissions::from_mode(0o755)).unwrap();
        let public = b"readable by everyone\n".repeat(300);
        let private = b"for the owner only\n".repeat(300);
        for (name, bytes, mode) in [("public.txt", &public, 0o644), ("private.txt", &private, 0o600)] {
            std::fs::write(src.join(name), bytes).unwrap();
            std::fs::set_permissions(src.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let archive = dir.path().join("modes.acx");
        pack(&[src], &archive);
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        std::fs::set_permissions(&mnt, std::fs::Permissions::from_mode(0o755)).unwrap();
        Modes { _dir: dir, archive, mnt, public, private }
    }

    fn file(&self, name: &str) -> PathBuf {
        self.mnt.join("src").join(name)
    }
}

#[test]
fn without_allow_other_only_the_mounting_user_reads() {
    let test = "without_allow_other_only_the_mounting_user_reads";
    if !fuse_available(test) || !is_root(test) {
        return;
    }
    let m = Modes::new();
    let _mount = Mounted::start(&m.archive, &m.mnt, &[]).unwrap();
    assert_eq!(std::fs::read(m.file("public.txt")).unwrap(), m.public);
    assert_eq!(std::fs::read(m.file("private.txt")).unwrap(), m.private);
    // Even the 0644 file: the kernel refuses every other uid at the mount.
    assert_denied(&cat_as_nobody(&m.file("public.txt")), "nobody reading public.txt without allow_other");
    assert_denied(&cat_as_nobody(&m.file("private.txt")), "nobody reading private.txt without allow_other");
}

#[test]
fn allow_other_with_default_permissions_honours_modes() {
    let test = "allow_other_with_default_permissions_honours_modes";
    if !fuse_available(test) || !is_root(test) {
        return;
    }
    let m = Modes::new();
    let _mount = Mounted::start(&m.archive, &m.mnt, &["allow_other", "default_permissions"]).unwrap();
    assert_reads(&cat_as_nobody(&m.file("public.txt")), &m.public, "nobody reading the 0644 file");
    assert_denied(&cat_as_nobody(&m.file("private.txt")), "nobody reading the 0600 file");
    assert_eq!(std::fs::read(m.file("private.txt")).unwrap(), m.private, "the owner reads the 0600 file");
    let meta = std::fs::metadata(m.file("private.txt")).unwrap();
    assert_eq!(meta.permissions().mode() & 0o7777, 0o600);
}

#[test]
fn allow_other_alone_leaves_modes_unchecked() {
    let test = "allow_other_alone_leaves_modes_unchecked";
    if !fuse_available(test) || !is_root(test) {
        return;
    }
    let m = Modes::new();
    let _mount = Mounted::start(&m.archive, &m.mnt, &["allow_other"]).unwrap();
    // The kernel defers to the filesystem and the daemon checks nothing: the 0600 file is readable by anyone.
    // This is why allow_other should always come with default_permissions (as in the systemd unit).
    assert_reads(&cat_as_nobody(&m.file("public.txt")), &m.public, "nobody reading the 0644 file");
    assert_reads(&cat_as_nobody(&m.file("private.txt")), &m.private, "nobody reading the 0600 file");
}

/// Names that break naive path handling: not UTF-8, control bytes, shell and glob characters, the longest
/// name Linux allows.
fn odd_names() -> Vec<Vec<u8>> {
    vec![
        b"caf\xe9 \xff\xfe".to_vec(),
        b"new\nline".to_vec(),
        b"tab\tand trailing space ".to_vec(),
        b"\x01\x1b[31mred\x7f".to_vec(),
        b"-leading-dash".to_vec(),
        b"*?[glob] $HOME `x` 'q' \"dq\" \\".to_vec(),
        "emoji \u{1f9ec} \u{00e9}".as_bytes().to_vec(),
        vec![b'n'; 255],
        b".hidden".to_vec(),
        b"..dots..".to_vec(),
    ]
}

#[test]
fn names_with_any_bytes_list_and_read() {
    if !fuse_available("names_with_any_bytes_list_and_read") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("src");
    let odd_dir = src.join(OsStr::from_bytes(b"dir \xff\nname"));
    std::fs::create_dir_all(&odd_dir).unwrap();
    let names = odd_names();
    let content = |i: usize| format!("file {i}\n").repeat(50 + i * 37).into_bytes();
    for (i, name) in names.iter().enumerate() {
        std::fs::write(src.join(OsStr::from_bytes(name)), content(i)).unwrap();
        std::fs::write(odd_dir.join(OsStr::from_bytes(name)), content(i + 100)).unwrap();
    }
    let archive = dir.path().join("names.acx");
    pack(&[src], &archive);
    let mnt = dir.path().join("mnt");
    std::fs::create_dir(&mnt).unwrap();
    let _mount = Mounted::start(&archive, &mnt, &[]).unwrap();
    let listed = |d: &Path| {
        let mut v: Vec<Vec<u8>> =
            std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().as_bytes().to_vec()).collect();
        v.sort();
        v
    };
    let mut want = names.clone();
    want.sort();
    let mut want_top = want.clone();
    want_top.push(b"dir \xff\nname".to_vec());
    want_top.sort();
    let mounted_src = mnt.join("src");
    assert_eq!(listed(&mounted_src), want_top);
    let mounted_odd = mounted_src.join(OsStr::from_bytes(b"dir \xff\nname"));
    assert_eq!(listed(&mounted_odd), want);
    for (i, name) in names.iter().enumerate() {
        let shown = String::from_utf8_lossy(name);
        assert_eq!(std::fs::read(mounted_src.join(OsStr::from_bytes(name))).unwrap(), content(i), "{shown:?}");
        assert_eq!(std::fs::read(mounted_odd.join(OsStr::from_bytes(name))).unwrap(), content(i + 100), "{shown:?}");
    }
}
