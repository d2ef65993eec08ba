//! mount(8)-style `-o` options of `aceapex-mount`, parsed without any FUSE types so they can be tested alone.
//!
//! Besides our own options, an fstab line and `mount.fuse` pass generic ones (`defaults`, `nofail`,
//! `x-systemd.*`, …). Those that only matter to mount(8) or systemd are accepted and ignored; `rw` is refused
//! because the archive is immutable; anything else unknown is an error, so a typo never goes unnoticed.

use crate::engine::DecoderChoice;
use std::path::PathBuf;

/// Options of one mount.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MountOptions {
    /// Let other users access the mount (`allow_other`; needs `user_allow_other` in /etc/fuse.conf for
    /// non-root users).
    pub allow_other: bool,
    /// `allow_root`: the mounting user and root.
    pub allow_root: bool,
    /// Let the kernel check permissions against the modes in the archive.
    pub default_permissions: bool,
    pub uid: Option<u32>,
    pub gid: Option<u32>,
    /// Byte budget of the decoded-block cache.
    pub cache_bytes: Option<u64>,
    /// FUSE worker threads.
    pub threads: Option<usize>,
    pub decoder: DecoderChoice,
    /// Bytes decoded ahead of a sequential reader (`readahead=`, 0 disables stream runs and fills).
    pub readahead_bytes: Option<u64>,
    /// Largest file decoded whole once it is read at random (`fill=`, 0 disables).
    pub fill_bytes: Option<u64>,
    /// Where the daemon logs once detached (`log=`); default: nowhere.
    pub log_file: Option<PathBuf>,
    /// Options accepted but without effect here, for a debug line.
    pub ignored: Vec<String>,
}

/// Generic options that mount(8), mount.fuse or systemd consume; harmless to see here.
const IGNORED_FLAGS: &[&str] = &[
    "defaults",
    "ro",
    "nofail",
    "noauto",
    "auto",
    "user",
    "users",
    "nouser",
    "owner",
    "group",
    "_netdev",
    "nosuid",
    "suid",
    "nodev",
    "dev",
    "noexec",
    "exec",
    "noatime",
    "atime",
    "relatime",
    "strictatime",
    "nodiratime",
    "async",
    "sync",
    "auto_unmount",
    "nonempty",
    "kernel_cache",
    "auto_cache",
];

/// Ignored options with a value (`fsname=`, `subtype=`, `comment=`, `x-…`).
fn is_ignored_keyed(key: &str) -> bool {
    matches!(key, "fsname" | "subtype" | "comment" | "max_read" | "blksize" | "helper") || key.starts_with("x-")
}

impl MountOptions {
    /// Parses one `-o` argument (comma-separated) into `self`; later options override earlier ones.
    pub fn parse_into(&mut self, list: &str) -> Result<(), String> {
        for opt in list.split(',').map(str::trim).filter(|o| !o.is_empty()) {
            self.parse_one(opt)?;
        }
        Ok(())
    }

    pub fn parse(list: &str) -> Result<MountOptions, String> {
        let mut options = MountOptions::default();
        options.parse_into(list)?;
        Ok(options)
    }

    fn parse_one(&mut self, opt: &str) -> Result<(), String> {
        let (key, value) = match opt.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (opt, None),
        };
        let need = |what: &str| value.ok_or_else(|| format!("mount option {key} needs a value ({key}={what})"));
        match key {
            "rw" => return Err("rw: the archive is read-only; mount it with ro (the default)".to_string()),
            "allow_other" => self.allow_other = true,
            "allow_root" => self.allow_root = true,
            "default_permissions" => self.default_permissions = true,
            "uid" => self.uid = Some(parse_id(key, need("N")?)?),
            "gid" => self.gid = Some(parse_id(key, need("N")?)?),
            "cache_size" => self.cache_bytes = Some(parse_size(need("SIZE")?).map_err(|e| format!("cache_size: {e}"))?),
            "readahead" => {
                self.readahead_bytes = Some(parse_size(need("SIZE")?).map_err(|e| format!("readahead: {e}"))?)
            }
            "fill" => self.fill_bytes = Some(parse_size(need("SIZE")?).map_err(|e| format!("fill: {e}"))?),
            "threads" => {
                let n: usize =
                    need("N")?.parse().map_err(|_| format!("threads={}: not a number", value.unwrap_or("")))?;
                if !(1..=256).contains(&n) {
                    return Err(format!("threads={n}: expected 1 to 256"));
                }
                self.threads = Some(n);
            }
            "decoder" => self.decoder = need("cpu|gpu|auto")?.parse()?,
            "log" => self.log_file = Some(PathBuf::from(need("FILE")?)),
            _ if value.is_none() && IGNORED_FLAGS.contains(&key) => self.ignored.push(opt.to_string()),
            _ if value.is_some() && is_ignored_keyed(key) => self.ignored.push(opt.to_string()),
            _ if key.starts_with("x-") => self.ignored.push(opt.to_string()),
            _ => return Err(format!("unknown mount option {opt:?}")),
        }
        Ok(())
    }
}

fn parse_id(key: &str, value: &str) -> Result<u32, String> {
    value.parse().map_err(|_| format!("{key}={value}: not a numeric id"))
}

pub use crate::units::parse_size;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fstab_line_options() {
        let o =
            MountOptions::parse("ro,allow_other,cache_size=1G,nofail,x-systemd.automount,_netdev,defaults").unwrap();
        assert!(o.allow_other);
        assert_eq!(o.cache_bytes, Some(1 << 30));
        assert_eq!(o.ignored.len(), 5);
    }

    #[test]
    fn all_own_options() {
        let o = MountOptions::parse("uid=1000,gid=100,threads=8,decoder=cpu,default_permissions,readahead=4M,fill=0")
            .unwrap();
        assert_eq!(o.fill_bytes, Some(0));
        assert_eq!((o.uid, o.gid, o.threads), (Some(1000), Some(100), Some(8)));
        assert_eq!(o.decoder, DecoderChoice::Cpu);
        assert!(o.default_permissions);
        assert_eq!(o.readahead_bytes, Some(4 << 20));
    }

    #[test]
    fn refusals_name_the_option() {
        assert!(MountOptions::parse("rw").unwrap_err().contains("read-only"));
        assert!(MountOptions::parse("bogus").unwrap_err().contains("bogus"));
        assert!(MountOptions::parse("cache_size=lots").unwrap_err().contains("cache_size"));
        assert!(MountOptions::parse("threads=0").is_err());
        assert!(MountOptions::parse("uid").unwrap_err().contains("needs a value"));
        assert!(MountOptions::parse("decoder=tpu").unwrap_err().contains("tpu"));
    }

    #[test]
    fn sizes() {
        assert_eq!(parse_size("123").unwrap(), 123);
        assert_eq!(parse_size("4k").unwrap(), 4096);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("1T").unwrap(), 1 << 40);
        assert!(parse_size("1X").is_err());
        assert!(parse_size("").is_err());
        assert!(parse_size("99999999999999999999G").is_err());
        assert!(parse_size("20000000000G").is_err());
    }
}
