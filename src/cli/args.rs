//! The command line's shape (clap derive): subcommands, options, value parsers and the exit-code contract.

use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::engine::DecoderChoice;
use crate::pack::PackOptions;

/// Printed after `--help`: the exit codes scripts can rely on.
pub const EXIT_CODES_HELP: &str = "\
Exit status:
  0    success (also when the reader of stdout went away early, e.g. `aceapex cat ... | head`)
  1    runtime error: unreadable or corrupt archive, a corrupt block (verify), I/O error, path not found
  2    usage error: unknown option, bad value, missing argument, or an argument the archive cannot
       satisfy (e.g. `cat` of a symlink that points outside the archive)
  101  internal error (a bug in aceapex; please report it with the command that caused it)

Logging goes to stderr; set RUST_LOG (e.g. RUST_LOG=aceapex=debug) for more than warnings.";

/// Random-access compressed archives (.acx): pack a tree once, then read any byte of any file without
/// decompressing the rest.
#[derive(Debug, Parser)]
#[command(name = "aceapex", version, about, after_help = EXIT_CODES_HELP, propagate_version = true)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Pack files and directories into an archive.
    #[command(after_help = EXIT_CODES_HELP)]
    Pack(PackArgs),
    /// Write an archive's tree to a directory (never outside it), with modes and mtimes.
    #[command(after_help = EXIT_CODES_HELP)]
    Unpack(UnpackArgs),
    /// Write one file's bytes (or a range of them) to stdout.
    #[command(after_help = EXIT_CODES_HELP)]
    Cat(CatArgs),
    /// List the archive's entries.
    #[command(after_help = EXIT_CODES_HELP)]
    Ls(LsArgs),
    /// Show the archive's parameters, sizes and ratio.
    #[command(after_help = EXIT_CODES_HELP)]
    Info(InfoArgs),
    /// Decode every block, in stream order and as a cold random read within the depth bound, and check it against
    /// its checksum; list every bad block.
    #[command(after_help = EXIT_CODES_HELP)]
    Verify(VerifyArgs),
}

fn size_arg(text: &str) -> Result<u64, String> {
    super::size::parse_size(text)
}

fn block_log_arg(text: &str) -> Result<u8, String> {
    super::size::parse_block_log(text)
}

fn lanes_arg(text: &str) -> Result<u8, String> {
    match text.parse::<u8>() {
        Ok(k @ (1 | 2)) => Ok(k),
        _ => Err(format!("{text:?}: rANS lanes must be 1 or 2")),
    }
}

#[derive(Debug, Args)]
pub struct PackArgs {
    /// Files and directories to pack (each becomes a top-level entry of the archive).
    #[arg(required = true, value_name = "INPUT")]
    pub inputs: Vec<PathBuf>,
    /// The archive to write.
    #[arg(short, long, value_name = "OUT.acx")]
    pub output: PathBuf,
    /// Block size, the random-access granularity: a power of two from 4K to 1M [default: 16K].
    #[arg(long, value_name = "SIZE", value_parser = block_log_arg)]
    pub block_size: Option<u8>,
    /// Compression level 1..=9 (higher: slower match search, better ratio).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=9),
          default_value_t = PackOptions::default().level)]
    pub level: u8,
    /// Most matches any byte may resolve through (bounds the cost of a cold random read), 1..=255.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(1..=255),
          default_value_t = PackOptions::default().max_depth)]
    pub max_depth: u8,
    /// Worker threads, 0 = all cores (the archive is the same for any count).
    #[arg(long, value_name = "N", default_value_t = PackOptions::default().threads)]
    pub threads: usize,
    /// Memory budget for the packer's working structures, e.g. 4G [default: 1G].
    #[arg(long, value_name = "SIZE", value_parser = size_arg)]
    pub memory: Option<u64>,
    /// rANS lanes per slice, 1 or 2: two pack ~0.3 % larger and halve the serial decode chain of a slice.
    #[arg(long, value_name = "K", value_parser = lanes_arg, default_value_t = PackOptions::default().rans_lanes)]
    pub lanes: u8,
    /// A table group is 2^N consecutive blocks sharing frequency tables, 0..=12.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u8).range(0..=12),
          default_value_t = PackOptions::default().group_log)]
    pub group_log: u8,
    /// Store FASTA files as plain bytes. By default a FASTA file that genome mode models exactly is stored as its
    /// structure (headers, line layout, case, N and IUPAC runs) plus a stream of A/C/G/T bases, which compresses
    /// far better and reads back byte for byte (FORMAT.md §2.6).
    #[arg(long)]
    pub no_genome: bool,
    /// No progress bar even on a terminal.
    #[arg(short, long)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct DecoderArg {
    /// Which decoder to use: cpu, gpu, or auto (GPU when present and faster).
    #[arg(long, value_name = "cpu|gpu|auto", default_value = "auto")]
    pub decoder: DecoderChoice,
}

#[derive(Debug, Args)]
pub struct UnpackArgs {
    pub archive: PathBuf,
    /// Directory to unpack into (created if missing).
    #[arg(short = 'C', long = "directory", value_name = "DIR", default_value = ".")]
    pub dir: PathBuf,
    /// Also write generated sidecars (e.g. the .fai index the packer added for FASTA files).
    #[arg(long)]
    pub with_generated: bool,
    #[command(flatten)]
    pub decoder: DecoderArg,
}

#[derive(Debug, Args)]
pub struct CatArgs {
    pub archive: PathBuf,
    /// Path of a file inside the archive (a symlink inside the archive is followed).
    pub path: PathBuf,
    /// First byte to write (K/M/G suffixes allowed).
    #[arg(long, value_name = "N", default_value = "0", value_parser = size_arg)]
    pub offset: u64,
    /// Most bytes to write (default: to the end of the file).
    #[arg(long, value_name = "N", value_parser = size_arg)]
    pub length: Option<u64>,
    #[command(flatten)]
    pub decoder: DecoderArg,
}

#[derive(Debug, Args)]
pub struct LsArgs {
    pub archive: PathBuf,
    /// Long listing: mode, size, mtime (UTC), name, and `-> target` for symlinks.
    #[arg(short = 'l', long = "long")]
    pub long: bool,
}

#[derive(Debug, Args)]
pub struct InfoArgs {
    pub archive: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct VerifyArgs {
    pub archive: PathBuf,
    /// Decode in stream order only, skipping the cold read of every block (2-13x faster, most on large collections
    /// of related genomes, whose cold reads follow the longest chains; does not check the depth bound that random
    /// reads and the mount rely on).
    #[arg(long)]
    pub sequential_only: bool,
    #[command(flatten)]
    pub decoder: DecoderArg,
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn parses_pack_options() {
        let cli = Cli::try_parse_from([
            "aceapex",
            "pack",
            "a",
            "b",
            "-o",
            "x.acx",
            "--block-size",
            "64K",
            "--memory",
            "4G",
            "--max-depth",
            "8",
        ])
        .unwrap();
        let Command::Pack(p) = cli.command else { panic!("not pack") };
        assert_eq!(p.inputs, vec![PathBuf::from("a"), PathBuf::from("b")]);
        assert_eq!(p.block_size, Some(16));
        assert_eq!(p.memory, Some(4 << 30));
        assert_eq!(p.max_depth, 8);
    }

    /// The help text states the block-size and memory defaults in words; they must be the packer's.
    #[test]
    fn stated_defaults_are_the_packers() {
        let defaults = PackOptions::default();
        assert_eq!(defaults.block_log, 14, "update `--block-size` help: [default: 16K]");
        assert_eq!(defaults.memory, 1 << 30, "update `--memory` help: [default: 1G]");
        let cli = Cli::try_parse_from(["aceapex", "pack", "a", "-o", "x"]).unwrap();
        let Command::Pack(p) = cli.command else { panic!("not pack") };
        assert_eq!((p.level, p.max_depth, p.threads), (defaults.level, defaults.max_depth, defaults.threads));
        assert_eq!((p.lanes, p.group_log), (defaults.rans_lanes, defaults.group_log));
    }

    #[test]
    fn rejects_bad_values() {
        for argv in [
            &["aceapex", "pack", "a", "-o", "x", "--block-size", "3K"][..],
            &["aceapex", "pack", "a", "-o", "x", "--max-depth", "0"],
            &["aceapex", "pack", "a", "-o", "x", "--lanes", "3"],
            &["aceapex", "pack", "-o", "x"],
            &["aceapex", "cat", "x.acx", "f", "--decoder", "tpu"],
            &["aceapex", "cat", "x.acx", "f", "--offset", "-1"],
        ] {
            assert!(Cli::try_parse_from(argv).is_err(), "{argv:?} should be rejected");
        }
    }
}
