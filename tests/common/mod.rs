//! Shared helpers for the integration tests: deterministic data, edge-case trees, tree comparison, the corpus,
//! and running the `aceapex` binary with a time limit.

#![allow(dead_code)] // Each test binary uses a different subset.

use std::ffi::OsStr;
use std::fs::{self, File, FileTimes};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant, SystemTime};

/// xorshift64*: deterministic test data without a dependency.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
}

/// DNA-like text with repeats (copies of earlier stretches, some mutated): compressible, matches at all distances.
pub fn dna_like(rng: &mut Rng, len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len);
    while out.len() < len {
        if out.len() > 1000 && rng.below(3) == 0 {
            let span = 20 + rng.below(3000) as usize;
            let start = rng.below((out.len() - span.min(out.len())) as u64 + 1) as usize;
            let end = (start + span).min(out.len());
            for i in start..end {
                let b = out[i];
                out.push(if rng.below(50) == 0 { b"ACGT"[rng.below(4) as usize] } else { b });
            }
        } else {
            for _ in 0..rng.below(400) {
                out.push(b"ACGT"[rng.below(4) as usize]);
            }
            if rng.below(10) == 0 {
                out.push(b'\n');
            }
        }
    }
    out.truncate(len);
    out
}

/// FASTA sequence lines: `seq` cut into lines of `width` bytes, each followed by `term`.
pub fn wrap(seq: &[u8], width: usize, term: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    for line in seq.chunks(width) {
        out.extend_from_slice(line);
        out.extend_from_slice(term);
    }
    out
}

/// `period` random bytes repeated to `len` bytes.
pub fn periodic(rng: &mut Rng, period: usize, len: usize) -> Vec<u8> {
    let unit = rng.bytes(period);
    unit.iter().copied().cycle().take(len).collect()
}

pub fn set_mtime(path: &Path, secs: u64, nanos: u32) {
    let time = SystemTime::UNIX_EPOCH + Duration::new(secs, nanos);
    let f = File::open(path).unwrap();
    f.set_times(FileTimes::new().set_modified(time)).unwrap();
}

fn write_file(path: &Path, bytes: &[u8], mode: u32, mtime: u64) {
    fs::write(path, bytes).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(mode)).unwrap();
    set_mtime(path, mtime, 123_456_789);
}

/// Writes the generated edge cases under `root` (which must not exist yet). `block` is the block size the
/// archive will use, so the "one block", "one block + 1" cases hit the boundaries.
pub fn write_edge_cases(root: &Path, block: usize) {
    let mut rng = Rng::new(42);
    fs::create_dir_all(root).unwrap();
    let files: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("one_byte", vec![b'x']),
        ("exactly_one_block", dna_like(&mut rng, block)),
        ("one_block_plus_one", dna_like(&mut rng, block + 1)),
        ("one_block_minus_one", dna_like(&mut rng, block - 1)),
        ("zeros", vec![0u8; 5 * block + 17]),
        ("random", rng.bytes(3 * block + 5)),
        ("period_1", periodic(&mut rng, 1, 4 * block)),
        ("period_3", periodic(&mut rng, 3, 3 * block + 1)),
        ("period_1000", periodic(&mut rng, 1000, 4 * block)),
        ("period_larger_than_block", periodic(&mut rng, block + 333, 5 * block)),
        ("dna", dna_like(&mut rng, 7 * block + 3)),
    ];
    for (i, (name, bytes)) in files.iter().enumerate() {
        let mode = [0o644, 0o600, 0o755, 0o444, 0o640][i % 5];
        write_file(&root.join(name), bytes, mode, 1_600_000_000 + i as u64 * 1000);
    }

    // Thousands of small files in a few directories.
    let many = root.join("many");
    for d in 0..20 {
        let dir = many.join(format!("d{d:02}"));
        fs::create_dir_all(&dir).unwrap();
        for f in 0..100 {
            let len = rng.below(64) as usize;
            let bytes: Vec<u8> = if f % 2 == 0 { rng.bytes(len) } else { dna_like(&mut rng, len) };
            write_file(&dir.join(format!("f{f:03}.txt")), &bytes, 0o644, 1_500_000_000 + f);
        }
    }

    // A deep chain of directories with a file at the bottom.
    let mut deep = root.join("deep");
    for level in 0..120 {
        deep = deep.join(format!("{}", level % 10));
    }
    fs::create_dir_all(&deep).unwrap();
    write_file(&deep.join("bottom"), b"the bottom of the tree\n", 0o644, 1_234_567_890);

    // Names that are not UTF-8, and names with spaces and newlines.
    let odd = root.join("odd names");
    fs::create_dir_all(&odd).unwrap();
    for (i, name) in
        [&b"caf\xe9"[..], b"\xff\xfe\xfd", b"with\nnewline", b"tab\there", b"-dash", b"x.fa"].iter().enumerate()
    {
        write_file(&odd.join(OsStr::from_bytes(name)), &rng.bytes(i * 7), 0o644, 1_000_000_000);
    }

    // Symlinks: relative, absolute, dangling, to a directory.
    let links = root.join("links");
    fs::create_dir_all(&links).unwrap();
    symlink("../dna", links.join("to_dna")).unwrap();
    symlink("/etc/hostname", links.join("absolute")).unwrap();
    symlink("does/not/exist", links.join("dangling")).unwrap();
    symlink("../many/d01", links.join("to_dir")).unwrap();

    // A directory with unusual permissions and a set mtime (set last: writing into it would change it).
    let ro = root.join("readonly_dir");
    fs::create_dir_all(&ro).unwrap();
    write_file(&ro.join("inside"), b"kept\n", 0o644, 1_111_111_111);
    fs::set_permissions(&ro, fs::Permissions::from_mode(0o555)).unwrap();
    set_mtime(&ro, 1_222_222_222, 0);
    set_mtime(&many, 1_333_333_333, 5);
}

/// What one path looks like, for comparing trees.
#[derive(Debug, PartialEq, Eq)]
pub enum Node {
    Dir { mode: u32, mtime: (i64, i64) },
    File { mode: u32, mtime: (i64, i64), bytes_hash: u64, len: u64 },
    Symlink { target: Vec<u8> },
}

fn hash(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// Every path under `root` (relative, sorted) with its node; the root itself is not included.
pub fn snapshot(root: &Path) -> Vec<(Vec<u8>, Node)> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let mut names: Vec<_> = fs::read_dir(root.join(&rel)).unwrap().map(|e| e.unwrap().file_name()).collect();
        names.sort();
        for name in names {
            let rel_child = rel.join(&name);
            let path = root.join(&rel_child);
            let meta = fs::symlink_metadata(&path).unwrap();
            let mtime = (meta.mtime(), meta.mtime_nsec());
            let mode = meta.mode() & 0o7777;
            let node = if meta.file_type().is_symlink() {
                Node::Symlink { target: fs::read_link(&path).unwrap().as_os_str().as_bytes().to_vec() }
            } else if meta.is_dir() {
                stack.push(rel_child.clone());
                Node::Dir { mode, mtime }
            } else {
                let bytes = fs::read(&path).unwrap();
                Node::File { mode, mtime, bytes_hash: hash(&bytes), len: bytes.len() as u64 }
            };
            out.push((rel_child.as_os_str().as_bytes().to_vec(), node));
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Asserts that `actual` holds exactly the tree `expected` holds: names, kinds, bytes, modes, mtimes, targets.
pub fn assert_same_tree(expected: &Path, actual: &Path) {
    let want = snapshot(expected);
    let got = snapshot(actual);
    for ((wp, wn), (gp, gn)) in want.iter().zip(&got) {
        assert_eq!(String::from_utf8_lossy(wp), String::from_utf8_lossy(gp), "paths differ");
        assert_eq!(wn, gn, "{}", String::from_utf8_lossy(wp));
    }
    assert_eq!(want.len(), got.len(), "entry counts differ");
}

/// Makes every directory under `root` writable again so a temp dir can be removed.
pub fn make_removable(root: &Path) {
    for (rel, node) in snapshot(root) {
        if let Node::Dir { .. } = node {
            let p = root.join(OsStr::from_bytes(&rel));
            let _ = fs::set_permissions(p, fs::Permissions::from_mode(0o755));
        }
    }
}

/// The shared corpus next to the repository, when present (a fresh clone may not have it).
pub fn corpus_dir() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    dir.is_dir().then_some(dir)
}

/// Decompresses every `*.gz` of the corpus (recursively) into `dest`, keeping sub-folders. Returns the plain paths.
pub fn unpack_corpus(corpus: &Path, dest: &Path, filter: impl Fn(&Path) -> bool) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![corpus.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let mut entries: Vec<_> = fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
        entries.sort();
        for path in entries {
            if path.is_dir() {
                stack.push(path);
            } else if path.extension() == Some(OsStr::new("gz")) && filter(&path) {
                let rel = path.strip_prefix(corpus).unwrap().with_extension("");
                let plain = dest.join(rel);
                fs::create_dir_all(plain.parent().unwrap()).unwrap();
                let gz = Command::new("gzip").arg("-dc").arg(&path).output().expect("gzip runs");
                assert!(gz.status.success(), "gzip -dc {}", path.display());
                fs::write(&plain, gz.stdout).unwrap();
                out.push(plain);
            }
        }
    }
    out
}

pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_aceapex")
}

/// Runs `aceapex ARGS`, killing it after `limit`: a hang is a test failure, not a stuck CI job.
pub fn run_with_limit(args: &[&OsStr], limit: Duration) -> Output {
    let mut child = Command::new(bin())
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("aceapex starts");
    // Drain the pipes on threads so a chatty child cannot block on a full pipe while we wait.
    let mut stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();
    let out_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut stdout, &mut v).ok();
        v
    });
    let err_t = std::thread::spawn(move || {
        let mut v = Vec::new();
        std::io::Read::read_to_end(&mut stderr, &mut v).ok();
        v
    });
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("aceapex {args:?} ran longer than {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Output { status, stdout: out_t.join().unwrap(), stderr: err_t.join().unwrap() }
}

/// Runs `aceapex` with string-ish arguments and a 120 s limit.
pub fn run<S: AsRef<OsStr>>(args: &[S]) -> Output {
    let args: Vec<&OsStr> = args.iter().map(|a| a.as_ref()).collect();
    run_with_limit(&args, Duration::from_secs(120))
}

/// Asserts the run ended with `code` and did not panic.
pub fn assert_exit(out: &Output, code: i32, what: &str) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{what}: panicked: {stderr}");
    assert_eq!(out.status.code(), Some(code), "{what}: stderr: {stderr}");
}
