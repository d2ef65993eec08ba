#!/usr/bin/env python3
"""Concurrent readers over a mounted archive, every byte checked against the original files.

Used by bench/load-test.sh (issue: load held under a cache budget far smaller than the data). Each of N threads
loops until the deadline, picking a random file and one of two access patterns:

  sequential  buffered reads of 1 MiB from a random offset, up to 16 MiB or EOF (the readahead path);
  random      O_DIRECT reads of 4-64 KiB at 4 KiB-aligned random offsets (bypasses the page cache, so every
              read reaches the daemon: cold or warm in its LRU).

A monitor thread samples the daemon's resident memory (VmRSS) every 0.2 s and drops the kernel page cache every
5 s, so buffered reads keep reaching the daemon too. Prints one JSON object; exits 1 on any wrong byte or error.
"""

import argparse
import json
import mmap
import os
import random
import sys
import threading
import time


def rss_kib(pid, key="VmRSS:"):
    """The daemon's resident KiB now (VmHWM: the kernel's own peak, which no sampling interval misses)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Totals:
    def __init__(self):
        self.lock = threading.Lock()
        self.reads = {"sequential": 0, "random": 0}
        self.bytes = 0
        self.wrong = 0
        self.errors = 0
        self.first_problem = None
        self.latencies_us = []

    def add(self, kind, nbytes, lat_us):
        with self.lock:
            self.reads[kind] += 1
            self.bytes += nbytes
            if kind == "random" and len(self.latencies_us) < 2_000_000:
                self.latencies_us.append(lat_us)

    def problem(self, what, wrong):
        with self.lock:
            if wrong:
                self.wrong += 1
            else:
                self.errors += 1
            if self.first_problem is None:
                self.first_problem = what


def reader(seed, files, deadline, totals):
    rng = random.Random(seed)
    # O_DIRECT needs an aligned buffer: an anonymous mmap is page-aligned.
    dbuf = mmap.mmap(-1, 64 << 10)
    while time.monotonic() < deadline:
        rel, original = rng.choice(files)
        size = len(original)
        if size == 0:
            continue
        path = os.path.join(args.mount, rel)
        if rng.random() < 0.3:
            kind = "sequential"
            off = rng.randrange(0, size)
            end = min(size, off + (16 << 20))
            try:
                with open(path, "rb", buffering=0) as f:
                    pos = off
                    while pos < end and time.monotonic() < deadline:
                        t = time.perf_counter()
                        got = os.pread(f.fileno(), min(1 << 20, end - pos), pos)
                        lat = (time.perf_counter() - t) * 1e6
                        if got != original[pos:pos + len(got)] or len(got) == 0:
                            totals.problem(f"{rel}: wrong bytes at {pos} (sequential, {len(got)} B)", True)
                            break
                        totals.add(kind, len(got), lat)
                        pos += len(got)
            except OSError as e:
                totals.problem(f"{rel}: {e}", False)
        else:
            kind = "random"
            off = rng.randrange(0, max(1, size // 4096)) * 4096
            length = rng.randrange(1, 17) * 4096
            try:
                fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
                try:
                    view = memoryview(dbuf)[:length]
                    t = time.perf_counter()
                    n = os.preadv(fd, [view], off)
                    lat = (time.perf_counter() - t) * 1e6
                finally:
                    os.close(fd)
                want = original[off:off + length]
                if n != len(want) or bytes(view[:n]) != want:
                    totals.problem(f"{rel}: wrong bytes at {off} (random, {n} B)", True)
                else:
                    totals.add(kind, n, lat)
            except OSError as e:
                totals.problem(f"{rel}: {e}", False)


def monitor(pid, deadline, samples, drop):
    last_drop = time.monotonic()
    while time.monotonic() < deadline:
        r = rss_kib(pid)
        if r is not None:
            samples.append(r)
        if drop and time.monotonic() - last_drop >= 5:
            try:
                with open("/proc/sys/vm/drop_caches", "w") as f:
                    f.write("1\n")
            except OSError:
                pass
            last_drop = time.monotonic()
        time.sleep(0.2)


def percentile(sorted_values, p):
    if not sorted_values:
        return None
    i = min(len(sorted_values) - 1, int(round(p / 100 * (len(sorted_values) - 1))))
    return round(sorted_values[i], 1)


def main():
    global args
    ap = argparse.ArgumentParser()
    ap.add_argument("--mount", required=True, help="mountpoint of the archive")
    ap.add_argument("--originals", required=True, help="directory holding the packed originals")
    ap.add_argument("--pid", type=int, required=True, help="aceapex-mount daemon pid (for VmRSS)")
    ap.add_argument("--threads", type=int, default=16)
    ap.add_argument("--seconds", type=float, default=600)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--no-drop-caches", action="store_true")
    args = ap.parse_args()

    files = []
    for root, _dirs, names in os.walk(args.originals):
        for n in sorted(names):
            p = os.path.join(root, n)
            if os.path.isfile(p) and not os.path.islink(p):
                with open(p, "rb") as f:
                    files.append((os.path.relpath(p, args.originals), f.read()))
    if not files:
        sys.exit("no files under --originals")

    totals = Totals()
    deadline = time.monotonic() + args.seconds
    samples = []
    mon = threading.Thread(target=monitor, args=(args.pid, deadline, samples, not args.no_drop_caches))
    mon.start()
    threads = [threading.Thread(target=reader, args=(args.seed * 1000 + i, files, deadline, totals))
               for i in range(args.threads)]
    start = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    mon.join()
    elapsed = time.monotonic() - start
    lat = sorted(totals.latencies_us)
    out = {
        "threads": args.threads,
        "seconds": round(elapsed, 1),
        "files": len(files),
        "data_bytes": sum(len(b) for _, b in files),
        "reads": totals.reads,
        "bytes_read": totals.bytes,
        "mb_per_s": round(totals.bytes / elapsed / 1e6, 1),
        "random_read_us": {"p50": percentile(lat, 50), "p99": percentile(lat, 99), "max": percentile(lat, 100)},
        "wrong_reads": totals.wrong,
        "errors": totals.errors,
        "first_problem": totals.first_problem,
        # The peak is the kernel's high-water mark where it can be read, else the highest sample.
        "daemon_rss_kib": {
            "first": samples[0] if samples else None,
            "peak": max(samples + [rss_kib(args.pid, "VmHWM:") or 0]) if samples else None,
        },
        "daemon_alive": rss_kib(args.pid) is not None,
    }
    print(json.dumps(out, indent=2))
    ok = totals.wrong == 0 and totals.errors == 0 and out["daemon_alive"] and sum(totals.reads.values()) > 0
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
