//! Shared pieces of the mount tests: FUSE availability (skip or fail), generated input trees, packing, and a
//! guard that runs the real `aceapex-mount -f` and always unmounts.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const MOUNT_BIN: &str = env!("CARGO_BIN_EXE_aceapex-mount");

/// Whether real mounts can run here. Without FUSE the tests skip with a message, unless `CI` is set: then a
/// missing FUSE is a failure, so a CI machine cannot silently test nothing.
pub fn fuse_available(test: &str) -> bool {
    let reason = if std::fs::OpenOptions::new().read(true).write(true).open("/dev/fuse").is_err() {
        Some("/dev/fuse cannot be opened")
    } else if !is_root() && which("fusermount3").is_none() {
        Some("fusermount3 is not installed")
    } else {
        None
    };
    match reason {
        None => true,
        Some(why) if std::env::var_os("CI").is_some() => panic!("{test}: FUSE unavailable ({why}) and CI is set"),
        Some(why) => {
            eprintln!("SKIP {test}: FUSE unavailable ({why})");
            false
        }
    }
}

fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

pub fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(tool)).find(|p| p.is_file())
}

/// Deterministic pseudo-random bytes (xorshift64*).
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }
}

/// One FASTA record of the generated genome: name, bases, line width.
pub struct FastaRecord {
    pub name: String,
    pub len: usize,
    pub width: usize,
}

/// The records of the generated genome (several line widths, one short last line each).
pub fn genome_records() -> Vec<FastaRecord> {
    [("chr1", 700_001, 60), ("chr2", 333_333, 70), ("chrM", 16_569, 80), ("scaffold_4", 250_000, 61), ("tiny", 7, 60)]
        .iter()
        .map(|&(name, len, width)| FastaRecord { name: name.to_string(), len, width })
        .collect()
}

/// A FASTA text with soft-masked runs, N runs and repeats (so it compresses like a genome, with matches).
pub fn genome_fasta(seed: u64) -> Vec<u8> {
    let mut rng = Rng::new(seed);
    let mut out = Vec::new();
    let mut motif: Vec<u8> = (0..5000).map(|_| b"ACGT"[rng.below(4) as usize]).collect();
    for rec in genome_records() {
        out.extend_from_slice(format!(">{} generated test sequence\n", rec.name).as_bytes());
        let mut seq = Vec::with_capacity(rec.len);
        while seq.len() < rec.len {
            match rng.below(10) {
                0 => seq.extend(std::iter::repeat_n(b'N', 1 + rng.below(300) as usize)),
                1 | 2 => {
                    // A repeat of the motif, sometimes soft-masked, with a few mutations.
                    let start = rng.below(4000) as usize;
                    let len = 50 + rng.below(900) as usize;
                    let lower = rng.below(2) == 0;
                    for &b in &motif[start..(start + len).min(motif.len())] {
                        seq.push(if lower { b.to_ascii_lowercase() } else { b });
                    }
                    let at = rng.below(motif.len() as u64) as usize;
                    motif[at] = b"ACGT"[rng.below(4) as usize];
                }
                _ => seq.extend((0..200 + rng.below(800)).map(|_| b"ACGT"[rng.below(4) as usize])),
            }
        }
        seq.truncate(rec.len);
        for line in seq.chunks(rec.width) {
            out.extend_from_slice(line);
            out.push(b'\n');
        }
    }
    out
}

/// Compressible text-like bytes.
pub fn text_bytes(len: usize, seed: u64) -> Vec<u8> {
    let words = ["alpha ", "beta ", "gamma ", "delta\n", "epsilon ", "zeta ", "eta, ", "theta. "];
    let mut rng = Rng::new(seed);
    let mut out = Vec::with_capacity(len + 16);
    while out.len() < len {
        out.extend_from_slice(words[rng.below(words.len() as u64) as usize].as_bytes());
        if rng.below(50) == 0 {
            out.extend((0..rng.below(40)).map(|_| rng.below(256) as u8));
        }
    }
    out.truncate(len);
    out
}

/// Sets a file's mtime (seconds, nanoseconds) without following symlinks.
pub fn set_mtime(path: &Path, sec: i64, nsec: i64) {
    let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
    let times = [libc::timespec { tv_sec: sec, tv_nsec: nsec }, libc::timespec { tv_sec: sec, tv_nsec: nsec }];
    // SAFETY: `c` is a NUL-terminated path and `times` two valid timespecs, both alive for the call.
    let rc = unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), libc::AT_SYMLINK_NOFOLLOW) };
    assert_eq!(rc, 0, "utimensat {}", path.display());
}

/// Writes the test tree under `root/src` and returns `root/src`: a genome FASTA, files whose sizes sit on
/// block boundaries, empty and one-byte files, nested directories, symlinks, varied modes and mtimes.
pub fn make_tree(root: &Path) -> PathBuf {
    let src = root.join("src");
    let write = |rel: &str, bytes: &[u8], mode: u32, mtime: (i64, i64)| {
        let p = src.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, bytes).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        set_mtime(&p, mtime.0, mtime.1);
    };
    write("genome/g.fa", &genome_fasta(7), 0o644, (1_600_000_000, 123_456_789));
    write("text/big.txt", &text_bytes(1_500_000, 3), 0o640, (1_500_000_000, 0));
    write("text/exact16k", &text_bytes(16384, 4), 0o600, (1_400_000_000, 999_999_999));
    write("text/under16k", &text_bytes(16383, 5), 0o755, (1_300_000_000, 1));
    write("text/over16k", &text_bytes(16385, 6), 0o444, (1_200_000_000, 500));
    write("empty", b"", 0o644, (1_100_000_000, 0));
    write("one", b"x", 0o644, (1_000_000_000, 0));
    write("deep/a/b/c/d/leaf.txt", b"leaf\n", 0o644, (1_650_000_000, 42));
    let random: Vec<u8> = {
        let mut rng = Rng::new(11);
        (0..100_000).map(|_| rng.next_u64() as u8).collect()
    };
    write("bin/random.bin", &random, 0o755, (1_700_000_000, 7));
    std::fs::create_dir_all(src.join("emptydir")).unwrap();
    std::os::unix::fs::symlink("../genome/g.fa", src.join("text/link-to-genome")).unwrap();
    std::os::unix::fs::symlink("/nonexistent/absolute", src.join("dangling")).unwrap();
    for dir in ["deep/a/b", "emptydir", "text"] {
        set_mtime(&src.join(dir), 1_555_555_555, 5);
    }
    std::fs::set_permissions(src.join("deep/a"), std::fs::Permissions::from_mode(0o750)).unwrap();
    src
}

/// Packs `inputs` into `archive` with the library's packer (default options).
pub fn pack(inputs: &[PathBuf], archive: &Path) {
    aceapex::pack::pack(inputs, archive, &aceapex::pack::PackOptions::default()).expect("pack");
}

/// True if `path` is a mount point now.
pub fn is_mounted(path: &Path) -> bool {
    let canonical = path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let wanted = canonical.to_string_lossy().replace(' ', "\\040");
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split(' ').nth(4))
        .any(|mp| mp == wanted)
}

/// A running `aceapex-mount -f`; dropping it sends SIGTERM, waits, and makes sure nothing stays mounted.
pub struct Mounted {
    pub child: Child,
    pub mountpoint: PathBuf,
    log: PathBuf,
}

impl Mounted {
    /// Starts the daemon in the foreground and waits (up to 20 s) until the mount is live.
    pub fn start(archive: &Path, mountpoint: &Path, options: &[&str]) -> Result<Mounted, String> {
        let log = mountpoint.with_extension("log");
        let mut cmd = Command::new(MOUNT_BIN);
        cmd.arg(archive).arg(mountpoint).arg("-f");
        if !options.is_empty() {
            cmd.arg("-o").arg(options.join(","));
        }
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .map_err(|e| format!("spawn {MOUNT_BIN}: {e}"))?;
        let mut mounted = Mounted { child, mountpoint: mountpoint.to_path_buf(), log };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(status) = mounted.child.try_wait().unwrap() {
                return Err(format!("aceapex-mount exited with {status}: {}", mounted.log_text()));
            }
            if is_mounted(mountpoint) {
                return Ok(mounted);
            }
            if Instant::now() > deadline {
                return Err(format!("not mounted after 20 s: {}", mounted.log_text()));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// What the daemon has logged so far.
    pub fn log_text(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(&self.log) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    pub fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Sends SIGTERM and waits up to `timeout` for the exit; returns the exit status if it exited.
    pub fn terminate(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Some(status);
        }
        // SAFETY: kill sends a signal to our own child process by pid; no memory is involved.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        if self.terminate(Duration::from_secs(10)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        force_unmount(&self.mountpoint);
    }
}

/// Lazily unmounts `path` if it is still mounted (test cleanup of last resort).
pub fn force_unmount(path: &Path) {
    if is_mounted(path) {
        let _ = Command::new("fusermount3").arg("-u").arg("-z").arg(path).status();
        if is_mounted(path) {
            let _ = Command::new("umount").arg("-l").arg(path).status();
        }
    }
}

/// A temporary directory with the generated tree packed into `archive.acx` and an empty `mnt/`.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub src: PathBuf,
    pub archive: PathBuf,
    pub mnt: PathBuf,
}

impl Fixture {
    pub fn new() -> Fixture {
        let dir = tempfile::tempdir().unwrap();
        let src = make_tree(dir.path());
        let archive = dir.path().join("archive.acx");
        pack(std::slice::from_ref(&src), &archive);
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).unwrap();
        Fixture { dir, src, archive, mnt }
    }

    /// The mounted copy of the packed `src` directory (each input is a top-level entry, like tar).
    pub fn mounted_src(&self) -> PathBuf {
        self.mnt.join("src")
    }
}

/// Reads up to `len` bytes of `path` at `offset` with `O_DIRECT`, so the read bypasses the kernel page cache
/// and reaches the daemon whatever was read before (the mount keeps the page cache across opens). Offsets and
/// lengths should be multiples of 4096; the buffer is page-aligned here. Short only at end of file.
pub fn read_direct(path: &Path, offset: u64, len: usize) -> std::io::Result<Vec<u8>> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let file = std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path)?;
    let mut backing = vec![0u8; len + 4096];
    let skip = backing.as_ptr().align_offset(4096);
    let buf = &mut backing[skip..skip + len];
    let mut done = 0;
    while done < len {
        match file.read_at(&mut buf[done..], offset + done as u64)? {
            0 => break,
            n => done += n,
        }
    }
    Ok(buf[..done].to_vec())
}

/// Drops the kernel's clean page cache (root only; a no-op otherwise), so that buffered reads of a mount reach
/// its daemon again. Returns whether it could. No sync first: a read-only mount has no dirty pages, and a
/// machine-wide sync would reach into the other tests' live mounts.
pub fn drop_page_cache() -> bool {
    std::fs::write("/proc/sys/vm/drop_caches", "1").is_ok()
}
