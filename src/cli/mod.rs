//! The `aceapex` command line: pack, unpack, cat, ls, info, verify.
//!
//! - [`args`]: the clap definitions and the exit-code contract printed by `--help`.
//! - `run`: one small function per subcommand over the library.
//! - [`extract`]: writing a tree to disk through directory descriptors, never outside the target.
//! - [`resolve`]: in-archive path lookup that follows the archive's own relative symlinks (`cat`).
//! - [`listing`], [`info`]: what `ls` and `info` print.
//! - [`output`]: stdout that ends quietly when its reader goes away.
//! - [`size`]: `16K`, `4G` and friends.
//!
//! # Exit status
//!
//! | code | meaning |
//! | --- | --- |
//! | 0 | success, including a reader of stdout that went away early (`aceapex cat … \| head`) |
//! | 1 | runtime error: unreadable or corrupt archive, a corrupt block (`verify`), I/O, path not found |
//! | 2 | usage error: bad option or value, missing argument, [`crate::Error::InvalidArgument`] |
//! | 101 | internal error: a bug (a panic); please report it |

pub mod args;
pub mod extract;
pub mod info;
pub mod listing;
pub mod output;
pub mod resolve;
mod run;
pub mod size;

use std::io::{IsTerminal, Write};

use clap::Parser;

use args::Cli;
use output::CliError;

pub const EXIT_OK: i32 = 0;
pub const EXIT_RUNTIME: i32 = 1;
pub const EXIT_USAGE: i32 = 2;

/// Runs the command line `std::env::args_os()` and returns the process exit status.
pub fn main() -> i32 {
    init_logging();
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            // --help and --version are "errors" to clap with exit code 0; printing them may meet a closed pipe.
            let _ = e.print();
            return e.exit_code();
        }
    };
    match run::run(cli.command) {
        Ok(()) | Err(CliError::BrokenPipe) => EXIT_OK,
        Err(CliError::Usage(message)) => {
            report(&message);
            EXIT_USAGE
        }
        Err(CliError::Failed(message)) => {
            report(&message);
            EXIT_RUNTIME
        }
        Err(CliError::Lib(error)) => {
            report(&error.to_string());
            if matches!(error, crate::Error::InvalidArgument(_)) {
                EXIT_USAGE
            } else {
                EXIT_RUNTIME
            }
        }
    }
}

/// One `aceapex: message` line on stderr; a closed stderr is ignored (there is nobody left to tell).
fn report(message: &str) {
    let _ = writeln!(std::io::stderr().lock(), "aceapex: {message}");
}

/// `tracing` to stderr, filtered by `RUST_LOG` (default: warnings and errors only).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .try_init();
}
