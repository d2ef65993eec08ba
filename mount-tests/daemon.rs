//! Daemon behaviour: clean unmount on SIGTERM, daemonizing (the parent returns once mounted), and one clear
//! message with a non-zero exit for each way a mount can fail.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::support::{is_mounted, Fixture, Mounted, MOUNT_BIN};

#[test]
fn sigterm_unmounts_cleanly() {
    if !crate::support::fuse_available("sigterm_unmounts_cleanly") {
        return;
    }
    let fx = Fixture::new();
    let mut mount = Mounted::start(&fx.archive, &fx.mnt, &[]).unwrap();
    assert!(std::fs::read(fx.mounted_src().join("one")).unwrap() == b"x");
    // Keep a file open across the signal: the unmount must still happen.
    let _open = std::fs::File::open(fx.mounted_src().join("text/big.txt")).unwrap();
    let status = mount.terminate(Duration::from_secs(10)).expect("the daemon exits after SIGTERM");
    assert!(status.success(), "exit status {status}: {}", mount.log_text());
    assert!(!is_mounted(&fx.mnt), "stale mount left behind");
}

/// Runs the binary to completion (with a timeout) and returns (exit code, stderr).
fn run(args: &[&std::ffi::OsStr]) -> (Option<i32>, String) {
    let mut child = Command::new(MOUNT_BIN)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("aceapex-mount {args:?} did not finish");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn daemon_mode_returns_once_mounted() {
    if !crate::support::fuse_available("daemon_mode_returns_once_mounted") {
        return;
    }
    let fx = Fixture::new();
    let (code, stderr) = run(&[fx.archive.as_os_str(), fx.mnt.as_os_str()]);
    assert_eq!(code, Some(0), "{stderr}");
    // Usable at once, with no waiting.
    let result = std::fs::read(fx.mounted_src().join("one"));
    let unmount = Command::new("fusermount3").arg("-u").arg(&fx.mnt).status();
    assert_eq!(result.unwrap(), b"x");
    assert!(unmount.unwrap().success());
    crate::support::force_unmount(&fx.mnt);
    assert!(!is_mounted(&fx.mnt));
}

#[test]
fn failures_exit_nonzero_with_one_clear_message() {
    if !crate::support::fuse_available("failures_exit_nonzero_with_one_clear_message") {
        return;
    }
    let fx = Fixture::new();
    let missing = fx.dir.path().join("no-such-dir");
    let (code, err) = run(&[fx.archive.as_os_str(), missing.as_os_str()]);
    assert_eq!(code, Some(1));
    assert!(err.contains("does not exist"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one message: {err}");

    // Not empty.
    let full = fx.dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("x"), b"x").unwrap();
    let (code, err) = run(&[fx.archive.as_os_str(), full.as_os_str()]);
    assert_eq!(code, Some(1));
    assert!(err.contains("busy") && err.contains("not empty"), "{err}");

    // Not an archive (and in daemon mode, so the error comes back through the fork).
    let junk = fx.dir.path().join("junk.acx");
    std::fs::write(&junk, vec![7u8; 4096]).unwrap();
    let (code, err) = run(&[junk.as_os_str(), fx.mnt.as_os_str()]);
    assert_eq!(code, Some(1));
    assert!(err.contains("junk.acx"), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "one message: {err}");
    assert!(!is_mounted(&fx.mnt));

    // Missing archive.
    let nothing = fx.dir.path().join("nothing.acx");
    let (code, err) = run(&[nothing.as_os_str(), fx.mnt.as_os_str(), "-f".as_ref()]);
    assert_eq!(code, Some(1));
    assert!(err.contains("nothing.acx"), "{err}");

    // rw and unknown options are refused before anything happens.
    let (code, err) = run(&[fx.archive.as_os_str(), fx.mnt.as_os_str(), "-o".as_ref(), "rw".as_ref()]);
    assert_eq!(code, Some(2));
    assert!(err.contains("read-only"), "{err}");

    // Already a mount point.
    let _mount = Mounted::start(&fx.archive, &fx.mnt, &[]).unwrap();
    let (code, err) = run(&[fx.archive.as_os_str(), fx.mnt.as_os_str(), "-f".as_ref()]);
    assert_eq!(code, Some(1));
    assert!(err.contains("busy"), "{err}");
    // The first mount is untouched.
    assert_eq!(std::fs::read(fx.mounted_src().join("one")).unwrap(), b"x");
}
