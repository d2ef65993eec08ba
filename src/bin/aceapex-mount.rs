//! `aceapex-mount ARCHIVE MOUNTPOINT [-f] [-o opt,…]`: serves an `.acx` archive as a read-only filesystem.
//!
//! Without `-f` the daemon forks before anything starts a thread, and the parent waits until the child has
//! opened the archive and completed the mount: every error reaches the terminal, and the parent exits 0 only
//! once the filesystem is usable (what mount(8) and fstab expect of a `fuse.` helper). SIGINT, SIGTERM and
//! SIGHUP unmount cleanly. Exit status: 0 after a clean unmount, 1 on any error, 2 on bad usage.
//!
//! fstab: `/data/g.acx /mnt/g fuse.aceapex-mount ro,allow_other,cache_size=1G 0 0` — mount(8) runs
//! `mount.fuse`, which runs `aceapex-mount /data/g.acx /mnt/g -o ro,allow_other,cache_size=1G`.

use std::io::{Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use aceapex::archive::Archive;
use aceapex::engine::DecoderChoice;
use aceapex::fs::options::{MemoryBudget, MountOptions, Overhead};
use aceapex::fs::AcxFs;
use aceapex::fuse::{self, MountSettings};

const USAGE: &str = "usage: aceapex-mount ARCHIVE MOUNTPOINT [-f] [-o OPTION[,OPTION…]]

Mounts an .acx archive read-only at MOUNTPOINT.

  -f            stay in the foreground (logs go to stderr)
  -d            foreground with debug logs
  -o OPTIONS    comma-separated mount options:
                  allow_other, allow_root, default_permissions, uid=N, gid=N,
                  cache_size=SIZE (decoded-block cache, e.g. 512M, 2G), threads=N (FUSE workers),
                  decoder=cpu|gpu|auto, readahead=SIZE (decoded ahead of a sequential reader),
                  fill=SIZE (largest file decoded whole once read at random; 0 disables),
                  log=FILE (daemon log file), trace (log where sequential reads spend their time)
                ro and the usual fstab options (defaults, nofail, noauto, user, _netdev, x-systemd.*)
                are accepted and ignored; rw is refused.
  -h, --help    this text";

/// How long a signalled daemon waits for the session to end after unmounting before it exits anyway.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(2);

/// The parsed command line.
struct Args {
    archive: PathBuf,
    mountpoint: PathBuf,
    foreground: bool,
    debug: bool,
    options: MountOptions,
}

/// Why the daemon stops: a message for the user and the exit status.
struct Failure {
    message: String,
    code: u8,
}

impl Failure {
    fn new(message: impl Into<String>) -> Failure {
        Failure { message: message.into(), code: 1 }
    }

    fn usage(message: impl Into<String>) -> Failure {
        Failure { message: format!("{}\n\n{USAGE}", message.into()), code: 2 }
    }
}

fn parse_args(argv: impl Iterator<Item = String>) -> Result<Args, Failure> {
    let mut positional = Vec::new();
    let mut options = MountOptions::default();
    let (mut foreground, mut debug) = (false, false);
    let mut argv = argv.peekable();
    while let Some(arg) = argv.next() {
        match arg.as_str() {
            "-h" | "--help" => {
                println!("{USAGE}");
                std::process::exit(0);
            }
            "-f" => foreground = true,
            "-d" => (foreground, debug) = (true, true),
            "-o" => {
                let list = argv.next().ok_or_else(|| Failure::usage("-o needs an argument"))?;
                options.parse_into(&list).map_err(Failure::usage)?;
            }
            // mount.fuse style "-oopts", and single-threaded "-s" which we ignore (threads= decides).
            o if o.starts_with("-o") => options.parse_into(&o[2..]).map_err(Failure::usage)?,
            "-s" => {}
            o if o.starts_with('-') && o.len() > 1 => return Err(Failure::usage(format!("unknown flag {o}"))),
            _ => positional.push(PathBuf::from(arg)),
        }
    }
    match <[PathBuf; 2]>::try_from(positional) {
        Ok([archive, mountpoint]) => Ok(Args { archive, mountpoint, foreground, debug, options }),
        Err(p) => Err(Failure::usage(format!("expected ARCHIVE and MOUNTPOINT, got {} argument(s)", p.len()))),
    }
}

/// Checks everything about the mountpoint and FUSE that can be checked before mounting, so that each problem
/// gets one clear message instead of a bare errno from mount(2).
fn check_mountpoint(mountpoint: &Path) -> Result<PathBuf, Failure> {
    let shown = mountpoint.display();
    let meta = std::fs::metadata(mountpoint).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => Failure::new(format!("mountpoint {shown} does not exist")),
        _ => Failure::new(format!("mountpoint {shown}: {e}")),
    })?;
    if !meta.is_dir() {
        return Err(Failure::new(format!("mountpoint {shown} is not a directory")));
    }
    let canonical = mountpoint.canonicalize().map_err(|e| Failure::new(format!("mountpoint {shown}: {e}")))?;
    if is_mount_point(&canonical) {
        return Err(Failure::new(format!("mountpoint {shown} is busy: something is already mounted there")));
    }
    let mut entries = std::fs::read_dir(&canonical).map_err(|e| Failure::new(format!("mountpoint {shown}: {e}")))?;
    if entries.next().is_some() {
        return Err(Failure::new(format!("mountpoint {shown} is busy: the directory is not empty")));
    }
    if let Err(e) = std::fs::OpenOptions::new().read(true).write(true).open("/dev/fuse") {
        return Err(Failure::new(format!(
            "no FUSE access: cannot open /dev/fuse ({e}); is the fuse module loaded and fuse3 installed?"
        )));
    }
    Ok(canonical)
}

/// True if `path` (canonical) is the mount point of some mount, per /proc/self/mountinfo.
fn is_mount_point(path: &Path) -> bool {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else { return false };
    let wanted = path.as_os_str().as_encoded_bytes();
    info.lines().filter_map(|line| line.split(' ').nth(4)).any(|field| unescape_mountinfo(field) == wanted)
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo` octal.
fn unescape_mountinfo(field: &str) -> Vec<u8> {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal =
            bytes.get(i + 1..i + 4).filter(|d| bytes[i] == b'\\' && d.iter().all(|c| (b'0'..=b'7').contains(c)));
        match octal {
            Some(d) => {
                out.push(d.iter().fold(0u8, |acc, c| acc.wrapping_mul(8).wrapping_add(c - b'0')));
                i += 4;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    out
}

/// The signals that unmount, blocked in every thread so that one thread can wait for them.
fn shutdown_signals() -> libc::sigset_t {
    // SAFETY: sigemptyset/sigaddset initialise and fill a local sigset_t; no other state is touched.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::sigaddset(&mut set, sig);
        }
        set
    }
}

fn block_shutdown_signals() {
    let set = shutdown_signals();
    // SAFETY: blocks signals for the calling thread; threads created later inherit the mask.
    unsafe {
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

/// Waits for a shutdown signal; returns its number.
fn wait_for_shutdown_signal() -> i32 {
    let set = shutdown_signals();
    let mut sig: libc::c_int = 0;
    loop {
        // SAFETY: `set` is initialised and `sig` is a valid out-pointer; sigwait only writes `sig`.
        if unsafe { libc::sigwait(&set, &mut sig) } == 0 {
            return sig;
        }
    }
}

/// The daemon side of the fork: the write end of the pipe the waiting parent reads one status byte from.
struct ParentNotifier(Option<std::fs::File>);

impl ParentNotifier {
    fn report(&mut self, ok: bool) {
        if let Some(mut pipe) = self.0.take() {
            let _ = pipe.write_all(&[u8::from(ok)]);
        }
    }
}

/// Forks. The parent waits for the child's status byte and exits with 0 (mounted) or 1; the child returns
/// the notifier to report through. Must run before any thread is started.
fn daemonize() -> Result<ParentNotifier, Failure> {
    let mut fds = [0; 2];
    // SAFETY: pipe2 writes two fds into the array on success.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(Failure::new(format!("pipe: {}", std::io::Error::last_os_error())));
    }
    // SAFETY: both fds were just created by pipe2 and are owned by nothing else.
    let (read_end, write_end) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    // SAFETY: the process is single-threaded here (no thread has been started yet), so the child is a
    // complete copy and may go on running Rust code.
    match unsafe { libc::fork() } {
        -1 => Err(Failure::new(format!("fork: {}", std::io::Error::last_os_error()))),
        0 => {
            drop(read_end);
            Ok(ParentNotifier(Some(std::fs::File::from(write_end))))
        }
        _child => {
            drop(write_end);
            let mut status = [0u8; 1];
            let mounted = matches!(std::fs::File::from(read_end).read(&mut status), Ok(1)) && status[0] == 1;
            // The child printed its own error message; the parent only carries the status.
            std::process::exit(if mounted { 0 } else { 1 });
        }
    }
}

/// Detaches the daemon from the terminal: new session, cwd /, stdin and stdout to /dev/null, stderr to the
/// log file if one was given, else /dev/null.
fn detach(log_file: Option<&Path>) -> Result<(), Failure> {
    // SAFETY: setsid has no memory-safety preconditions; failing (already a group leader) is harmless.
    unsafe {
        libc::setsid();
    }
    let _ = std::env::set_current_dir("/");
    let null = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/null")
        .map_err(|e| Failure::new(format!("/dev/null: {e}")))?;
    let err_target = match log_file {
        Some(path) => std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .map_err(|e| Failure::new(format!("log file {}: {e}", path.display())))?,
        None => null.try_clone().map_err(|e| Failure::new(format!("/dev/null: {e}")))?,
    };
    for (target, fd) in [(&null, 0), (&null, 1), (&err_target, 2)] {
        // SAFETY: dup2 onto the standard descriptors; both fds are valid and open.
        unsafe {
            libc::dup2(target.as_raw_fd(), fd);
        }
    }
    Ok(())
}

/// Logs go to stderr: the terminal or journal with `-f`, the `log=` file (or nowhere) once detached. A daemon
/// started by mount(8) keeps quiet on the terminal unless something is wrong, so its default level is warn.
fn init_logging(debug: bool, foreground: bool) {
    let default = match (debug, foreground) {
        (true, _) => "debug",
        (false, true) => "info",
        (false, false) => "warn",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("ACEAPEX_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(false).try_init();
}

/// One glibc malloc arena for the whole daemon. With several, a block is freed into the arena of the thread
/// that allocated it and each arena keeps the high-water mark of what its threads once held, so the slack grew
/// with the cache budget (glibc's default of 8 per core, and the 4 set here before, measured 150.5 MiB peak at
/// `cache_size=64M` where one arena peaks at 93.5 MiB: `MemoryBudget`'s documentation). Allocations up to 1 KiB
/// come from each thread's lock-free tcache; the rest (blocks, parsed slices) take the arena lock for well under
/// a microsecond against ~100 µs of decoding per block, so one arena costs no measurable throughput (more reads
/// than with 4 in the same test).
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only sets an allocator parameter; it is called before any thread is started.
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, 1);
    }
}

/// `ACEAPEX_HEAP_LOG=SECS`: every SECS seconds, log the allocator's view of the heap next to the resident size,
/// to tell live data (`in_use`: what the program holds) from allocator slack (`free_in_arenas`: freed memory
/// glibc keeps mapped). A diagnostic for the memory bound (`MemoryBudget`); off unless asked for.
fn spawn_heap_logger() {
    let Some(secs) = std::env::var("ACEAPEX_HEAP_LOG").ok().and_then(|v| v.parse::<u64>().ok()).filter(|&s| s > 0)
    else {
        return;
    };
    let _ = std::thread::Builder::new().name("acx-heap-log".to_string()).spawn(move || loop {
        std::thread::sleep(Duration::from_secs(secs));
        let rss_kib = std::fs::read_to_string("/proc/self/status")
            .ok()
            .and_then(|s| s.lines().find(|l| l.starts_with("VmRSS:")).map(str::to_string))
            .and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()))
            .unwrap_or(0);
        tracing::info!("heap: rss {} KiB, {}", rss_kib, heap_summary());
    });
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn heap_summary() -> String {
    // mallinfo2 is glibc 2.33+: looked up at run time so that the daemon still starts on older systems.
    // SAFETY: dlsym with RTLD_DEFAULT and a NUL-terminated name only searches the loaded objects.
    let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"mallinfo2".as_ptr()) };
    if sym.is_null() {
        return "allocator counters unavailable (glibc before 2.33)".to_string();
    }
    // SAFETY: the symbol is glibc's `struct mallinfo2 mallinfo2(void)`, whose layout libc::mallinfo2 mirrors;
    // it only reads the allocator's counters (taking each arena's lock while it sums them).
    let m = unsafe {
        let mallinfo2: extern "C" fn() -> libc::mallinfo2 = std::mem::transmute(sym);
        mallinfo2()
    };
    format!(
        "in_use {} KiB (mmapped {} KiB), free_in_arenas {} KiB, arena_total {} KiB",
        (m.uordblks + m.hblkhd) >> 10,
        m.hblkhd >> 10,
        m.fordblks >> 10,
        m.arena >> 10
    )
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn heap_summary() -> String {
    "allocator counters unavailable".to_string()
}

fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(4, |n| n.get()).clamp(2, 16)
}

/// Opens, mounts and serves until unmounted or signalled.
fn serve(args: &Args, canonical_mountpoint: &Path, notifier: &mut ParentNotifier) -> Result<(), Failure> {
    let cache_bytes = args.options.cache_bytes_or_default();
    // One budget for every holder of decoded data: the block LRU (which stream runs fill too), the parsed
    // slices and the sequential windows of at most `max_streams` runs (see `MemoryBudget`).
    let budget = MemoryBudget::split(cache_bytes);
    let archive = Archive::open_with(&args.archive, budget.archive_options(args.options.decoder))
        .map_err(|e| Failure::new(e.to_string()))?;
    if args.options.allow_other && !args.options.default_permissions {
        // The daemon checks no permissions itself: without the kernel's checks every user can read every file.
        tracing::warn!("allow_other without default_permissions: every user can read every file, whatever its mode");
    }
    // The GPU engine starts in the background (ArchiveOptions::gpu_in_background): until it is ready, and for
    // good when there is no GPU, the CPU serves.
    let engine = match (archive.engine_name(), args.options.decoder) {
        ("cpu", DecoderChoice::Gpu) => "gpu (the CPU until the GPU engine is ready)".to_string(),
        ("cpu", DecoderChoice::Auto) => "auto (the CPU until a GPU engine is ready)".to_string(),
        (name, _) => name.to_string(),
    };
    let threads = args.options.threads.unwrap_or_else(default_threads);
    let overhead = Overhead {
        threads,
        cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
        block_bytes: archive.data().header.block_size(),
        slice_bytes: 1 << archive.data().header.slice_log,
        blocks: archive.data().block_count(),
    };
    let bound = budget.bound_bytes(cache_bytes, &overhead);
    tracing::info!(
        "memory bound: cache {} KiB + floors {} KiB + overhead {} KiB = bound_kib={} ({overhead:?})",
        cache_bytes >> 10,
        budget.floor_excess(cache_bytes) >> 10,
        overhead.bytes() >> 10,
        bound >> 10
    );
    // A GPU's stream runs produce pieces of up to 16 MiB: they get a readahead of two (see `fs_options_for`). The
    // engine starts in the background, so a GPU that may come counts (the CUDA libraries are there).
    let gpu_may_come = args.options.decoder != DecoderChoice::Cpu && aceapex::engine::gpu::libraries_available();
    let fs_options = args.options.fs_options_for(cache_bytes, &budget, archive.prefers_batches() || gpu_may_come);
    let fs = Arc::new(AcxFs::new(Arc::new(archive), fs_options));
    let settings = MountSettings {
        threads,
        allow_other: args.options.allow_other,
        allow_root: args.options.allow_root,
        default_permissions: args.options.default_permissions,
        fsname: args.archive.canonicalize().unwrap_or_else(|_| args.archive.clone()).display().to_string(),
    };
    let mut session = fuse::mount(fs, canonical_mountpoint, &settings).map_err(|e| {
        Failure::new(format!("cannot mount {} on {}: {e}", args.archive.display(), args.mountpoint.display()))
    })?;
    tracing::info!(
        "mounted {} on {} ({} threads, cache {} MiB, decoder {engine})",
        args.archive.display(),
        canonical_mountpoint.display(),
        settings.threads,
        cache_bytes >> 20
    );
    if !args.foreground {
        detach(args.options.log_file.as_deref())?;
    }
    notifier.report(true);

    let mut unmounter = session.unmount_callable();
    let mountpoint = canonical_mountpoint.to_path_buf();
    let session_ended = Arc::new(AtomicBool::new(false));
    let ended = Arc::clone(&session_ended);
    std::thread::Builder::new()
        .name("acx-signals".to_string())
        .spawn(move || {
            let sig = wait_for_shutdown_signal();
            tracing::info!("signal {sig}: unmounting {}", mountpoint.display());
            if let Err(e) = unmounter.unmount() {
                // Busy (a process has a file open or its cwd inside): detach lazily so the mount goes away.
                tracing::warn!("unmount failed ({e}); detaching lazily");
                lazy_unmount(&mountpoint);
            }
            // A lazily detached filesystem lives on while files are open in it; the session would wait for
            // them forever. Give it a moment, then exit: closing /dev/fuse ends the connection.
            let deadline = Instant::now() + SHUTDOWN_GRACE;
            while !ended.load(Ordering::SeqCst) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(20));
            }
            if !ended.load(Ordering::SeqCst) {
                tracing::info!("files are still open in the detached mount; closing the FUSE connection");
                std::process::exit(0);
            }
        })
        .map_err(|e| Failure::new(format!("cannot start the signal thread: {e}")))?;

    spawn_heap_logger();
    let result = session.run();
    session_ended.store(true, Ordering::SeqCst);
    result.map_err(|e| Failure::new(format!("FUSE session ended with an error: {e}")))?;
    tracing::info!("unmounted {}", canonical_mountpoint.display());
    Ok(())
}

fn lazy_unmount(mountpoint: &Path) {
    let Ok(c_path) = std::ffi::CString::new(mountpoint.as_os_str().as_encoded_bytes()) else { return };
    // SAFETY: c_path is a valid NUL-terminated path for the duration of the call.
    if unsafe { libc::umount2(c_path.as_ptr(), libc::MNT_DETACH) } != 0 {
        let _ = std::process::Command::new("fusermount3").arg("-u").arg("-z").arg(mountpoint).status();
    }
}

fn main() -> ExitCode {
    let args = match parse_args(std::env::args().skip(1)) {
        Ok(args) => args,
        Err(f) => return fail(&f),
    };
    let canonical = match check_mountpoint(&args.mountpoint) {
        Ok(path) => path,
        Err(f) => return fail(&f),
    };
    block_shutdown_signals();
    limit_malloc_arenas();
    let mut notifier = if args.foreground {
        ParentNotifier(None)
    } else {
        match daemonize() {
            Ok(notifier) => notifier,
            Err(f) => return fail(&f),
        }
    };
    init_logging(args.debug, args.foreground);
    for ignored in &args.options.ignored {
        tracing::debug!("ignoring mount option {ignored}");
    }
    match serve(&args, &canonical, &mut notifier) {
        Ok(()) => ExitCode::SUCCESS,
        Err(f) => {
            notifier.report(false);
            fail(&f)
        }
    }
}

fn fail(f: &Failure) -> ExitCode {
    eprintln!("aceapex-mount: {}", f.message);
    ExitCode::from(f.code)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Result<Args, Failure> {
        parse_args(list.iter().map(|s| s.to_string()))
    }

    #[test]
    fn mount_fuse_style_command_lines() {
        // What mount.fuse3 runs for an fstab line.
        let a = args(&["/data/g.acx", "/mnt/g", "-o", "ro,allow_other,cache_size=1G,nofail"]).ok().unwrap();
        assert_eq!(a.archive, PathBuf::from("/data/g.acx"));
        assert_eq!(a.mountpoint, PathBuf::from("/mnt/g"));
        assert!(a.options.allow_other && !a.foreground);
        assert_eq!(a.options.cache_bytes, Some(1 << 30));
        let b = args(&["-f", "-odecoder=cpu", "x.acx", "m"]).ok().unwrap();
        assert!(b.foreground);
        assert_eq!(b.options.decoder, aceapex::engine::DecoderChoice::Cpu);
    }

    #[test]
    fn usage_errors_exit_2() {
        for bad in [&["only-one"][..], &["a", "b", "c"], &["a", "b", "-o"], &["a", "b", "-x"], &["a", "b", "-o", "rw"]]
        {
            assert_eq!(args(bad).err().map(|f| f.code), Some(2), "{bad:?}");
        }
    }

    #[test]
    fn mountinfo_escapes() {
        assert_eq!(unescape_mountinfo("/mnt/with\\040space"), b"/mnt/with space");
        assert_eq!(unescape_mountinfo("/a\\134b"), b"/a\\b");
        assert_eq!(unescape_mountinfo("/plain\\9"), b"/plain\\9");
        assert!(is_mount_point(Path::new("/")));
    }
}
