//! Writing to stdout when the reader may go away: `aceapex cat big | head -c 10` must end quietly with status 0.
//!
//! Rust ignores SIGPIPE, so a closed pipe shows up as an `EPIPE` write error. Everything the commands write goes
//! through [`Stdout`], which turns that one error into [`CliError::BrokenPipe`]; `main` exits 0 on it without a
//! message. No `println!` is used anywhere on this path (it panics on write errors).

use std::io::{self, Write};

use crate::error::Error;

/// Why a command stopped early.
#[derive(Debug)]
pub enum CliError {
    /// Stdout's reader went away: not an error for the user.
    BrokenPipe,
    /// A usage problem found after argument parsing (exit status 2).
    Usage(String),
    /// Anything the library reported (exit status 1).
    Lib(Error),
    /// A runtime failure already described by the command's output, with a one-line summary (exit status 1).
    Failed(String),
}

impl From<Error> for CliError {
    fn from(e: Error) -> Self {
        CliError::Lib(e)
    }
}

/// Buffered stdout that maps `EPIPE` to [`CliError::BrokenPipe`].
pub struct Stdout {
    inner: io::BufWriter<io::StdoutLock<'static>>,
}

impl Default for Stdout {
    fn default() -> Self {
        Self::new()
    }
}

impl Stdout {
    pub fn new() -> Stdout {
        Stdout { inner: io::BufWriter::with_capacity(1 << 20, io::stdout().lock()) }
    }

    pub fn write(&mut self, bytes: &[u8]) -> Result<(), CliError> {
        self.inner.write_all(bytes).map_err(stdout_error)
    }

    /// Writes `bytes` and a newline.
    pub fn line(&mut self, bytes: &[u8]) -> Result<(), CliError> {
        self.write(bytes)?;
        self.write(b"\n")
    }

    pub fn flush(&mut self) -> Result<(), CliError> {
        self.inner.flush().map_err(stdout_error)
    }
}

fn stdout_error(e: io::Error) -> CliError {
    if e.kind() == io::ErrorKind::BrokenPipe {
        CliError::BrokenPipe
    } else {
        CliError::Lib(Error::io("<stdout>", e))
    }
}
