//! One error type for the whole crate, carrying the errno the filesystem answers with.
//!
//! Layers below the archive (the codec stages) return their own typed errors that say what was seen
//! ([`DecodeError`]); the archive layer wraps them with the archive path, block id and payload offset, so a
//! user reading a log line knows exactly which bytes are bad.

use std::path::PathBuf;

/// What a codec stage saw when it refused its input. Each variant names the offending value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("truncated: needed {needed} more bytes at offset {at}")]
    Truncated { at: usize, needed: usize },
    #[error("bad varint at offset {at}")]
    BadVarint { at: usize },
    #[error("{what} = {value} exceeds the limit {limit}")]
    Limit { what: &'static str, value: u64, limit: u64 },
    #[error("invalid {what}: {detail}")]
    Invalid { what: &'static str, detail: String },
    #[error("rANS stream corrupt: {detail}")]
    Rans { detail: String },
    #[error("reference depth exceeded the bound {bound} at stream position {pos}")]
    DepthExceeded { bound: u8, pos: u64 },
    /// Reading archive bytes failed (the file shrank or became unreadable after it was opened).
    #[error("reading the archive at byte {offset} failed: {detail}")]
    Read { offset: u64, detail: String },
    #[error("checksum mismatch: expected {expected:016x}, computed {actual:016x}")]
    Checksum { expected: u64, actual: u64 },
}

/// The crate's error. [`Error::errno`] gives the value a FUSE reply carries.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{path}: {source}")]
    Io { path: PathBuf, source: std::io::Error },
    /// The archive's structure (header, footer, sections, tree) is invalid.
    #[error("{path}: not a valid .acx archive: {detail}")]
    Format { path: PathBuf, detail: String },
    /// One block is corrupt; the rest of the archive may still be served.
    #[error("{path}: block {block} (payload at byte {offset}) is corrupt: {source}")]
    CorruptBlock { path: PathBuf, block: u64, offset: u64, source: DecodeError },
    #[error("{0}: no such file or directory in the archive")]
    NotFound(String),
    #[error("{0}: is a directory")]
    IsDirectory(String),
    #[error("{0}: not a directory")]
    NotDirectory(String),
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
    /// Pack input problems (unsupported file type, too large, ...).
    #[error("{path}: {detail}")]
    Input { path: PathBuf, detail: String },
    /// The GPU engine failed; callers fall back to the CPU decoder.
    #[error("GPU engine: {0}")]
    Gpu(String),
    /// A codec error with no archive context yet (the archive layer adds it).
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

impl Error {
    /// The errno a filesystem reply should carry for this error.
    pub fn errno(&self) -> i32 {
        match self {
            Error::Io { source, .. } => source.raw_os_error().unwrap_or(libc::EIO),
            Error::NotFound(_) => libc::ENOENT,
            Error::IsDirectory(_) => libc::EISDIR,
            Error::NotDirectory(_) => libc::ENOTDIR,
            Error::InvalidArgument(_) => libc::EINVAL,
            Error::Format { .. }
            | Error::CorruptBlock { .. }
            | Error::Input { .. }
            | Error::Gpu(_)
            | Error::Decode(_) => libc::EIO,
        }
    }

    /// The block a [`Error::CorruptBlock`] names.
    pub fn block(&self) -> Option<u64> {
        match self {
            Error::CorruptBlock { block, .. } => Some(*block),
            _ => None,
        }
    }

    /// Wraps an I/O error with the path it concerns.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io { path: path.into(), source }
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
