//! Real-mount tests of `aceapex-mount`: each test packs generated data, runs the daemon with `-f` in a child
//! process, drives the mount with ordinary tools (std::fs, dd, samtools), and unmounts in a guard.
//!
//! Without FUSE (no /dev/fuse, no fusermount3) every test prints SKIP and passes, unless the environment
//! variable CI is set, in which case it fails.

mod support;

mod daemon;
mod faidx;
mod faults;
mod integrity;
mod reads;
mod security;
mod tree;
