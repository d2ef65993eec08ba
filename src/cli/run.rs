//! The subcommands, each a small function over the library. They return [`CliError`]; `main` maps it to the
//! documented exit status.

use std::fs::File;
use std::io::{IsTerminal, Write};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use super::args::{CatArgs, Command, InfoArgs, LsArgs, PackArgs, UnpackArgs, VerifyArgs};
use super::extract::{extract_tree, ExtractOptions, FileSource};
use super::output::{CliError, Stdout};
use crate::archive::{Archive, ArchiveOptions};
use crate::engine::DecoderChoice;
use crate::error::Error;
use crate::format::tree::{EntryId, EntryKind};
use crate::pack::{pack, PackOptions};

/// Bytes moved per read call when `cat` streams a small range through the block cache.
const CHUNK: usize = 1 << 20;
/// Read size when a GPU decodes: 1024 blocks of 16 KiB, the archive's largest engine batch.
const GPU_CHUNK: usize = 16 << 20;

pub fn run(command: Command) -> Result<(), CliError> {
    match command {
        Command::Pack(a) => pack_cmd(a),
        Command::Unpack(a) => unpack_cmd(a),
        Command::Cat(a) => cat_cmd(a),
        Command::Ls(a) => ls_cmd(a),
        Command::Info(a) => info_cmd(a),
        Command::Verify(a) => verify_cmd(a),
    }
}

fn open(path: &Path, decoder: DecoderChoice) -> Result<Archive, CliError> {
    let opts = ArchiveOptions { decoder, ..ArchiveOptions::default() };
    Ok(Archive::open_with(path, opts)?)
}

/// An archive opened for reading file bytes out (`cat`, `unpack`). With a GPU, its engine batches and the
/// whole-range path ([`Archive::stream_blocks`]) share one device.
struct Reader {
    archive: Archive,
}

impl Reader {
    fn open(path: &Path, decoder: DecoderChoice) -> Result<Reader, CliError> {
        Ok(Reader { archive: open(path, decoder)? })
    }

    /// Streams `[start, start + len)` to `sink`; `sequential` asks for the streaming decoders (large ranges):
    /// the GPU's whole-range decode when it pays ([`Archive::streams_on_gpu`]), else the sequential decoder or,
    /// when a GPU decodes, engine batches.
    fn stream(
        &self,
        start: u64,
        len: u64,
        sequential: bool,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), CliError>,
    ) -> Result<(), CliError> {
        if sequential && self.archive.streams_on_gpu(len) {
            return with_parked_sink(sink, |sink| self.archive.decode_range_streaming(start, len, sink));
        }
        stream_range(&self.archive, start, len, sequential, sink)
    }

    /// Streams bytes `[from, from + len)` of regular file `id` (clamped to its size) to `sink`: a stored file as
    /// its stream range ([`Reader::stream`]), a genome-mode file through its structure — small ranges as one
    /// random-access read, large ones rebuilt chunk by chunk from its bases decoded in stream order.
    fn stream_file(
        &self,
        id: EntryId,
        from: u64,
        len: u64,
        sequential: bool,
        sink: &mut dyn FnMut(&[u8]) -> Result<(), CliError>,
    ) -> Result<(), CliError> {
        let archive = &self.archive;
        if !archive.is_genome_file(id) {
            let (start, size) = archive.file_range(id)?;
            let from = from.min(size);
            return self.stream(start + from, len.min(size - from), sequential, sink);
        }
        // With a GPU, a genome file too small for the whole-range decode is read in engine batches.
        let size = match archive.tree().entry(id).map(|e| &e.kind) {
            Some(EntryKind::File { size, .. }) => *size,
            _ => 0,
        };
        if !sequential || (archive.prefers_batches() && !archive.streams_on_gpu(len.min(size))) {
            let mut buf = vec![0u8; CHUNK];
            let (mut pos, end) = (from, from.saturating_add(len));
            while pos < end {
                let want = ((end - pos) as usize).min(buf.len());
                let n = archive.read_file(id, pos, &mut buf[..want])?;
                if n == 0 {
                    break;
                }
                sink(&buf[..n])?;
                pos += n as u64;
            }
            return Ok(());
        }
        with_parked_sink(sink, |sink| archive.stream_genome_file(id, from, len, sink))
    }
}

fn pack_cmd(a: PackArgs) -> Result<(), CliError> {
    let defaults = PackOptions::default();
    let mut opts = PackOptions {
        block_log: a.block_size.unwrap_or(defaults.block_log),
        level: a.level,
        max_depth: a.max_depth,
        threads: a.threads,
        memory: a.memory.unwrap_or(defaults.memory),
        rans_lanes: a.lanes,
        group_log: a.group_log,
        genome: !a.no_genome,
        ..defaults
    };
    opts.progress = !a.quiet && std::io::stderr().is_terminal();
    crate::pack::mem::keep_freed_memory();
    let report = pack(&a.inputs, &a.output, &opts)?;
    if !a.quiet {
        let ratio =
            if report.archive_bytes == 0 { 0.0 } else { report.input_bytes as f64 / report.archive_bytes as f64 };
        let speed = if report.seconds > 0.0 { report.input_bytes as f64 / report.seconds / 1e6 } else { 0.0 };
        let line = format!(
            "{}: {} files, {} -> {} bytes, ratio {ratio:.3}, {} blocks, {:.2} s ({speed:.1} MB/s)\n",
            a.output.display(),
            report.files,
            report.input_bytes,
            report.archive_bytes,
            report.blocks,
            report.seconds,
        );
        // The summary is for people: on stderr, and a closed stderr is no reason to fail a finished pack.
        let _ = std::io::stderr().write_all(line.as_bytes());
    }
    Ok(())
}

/// `cat` streams ranges at least this large with the sequential decoder (entropy stage on all cores ahead of the
/// copy stage); smaller ones are read through the block cache, like a filesystem read.
const SEQUENTIAL_MIN_BYTES: u64 = 4 << 20;

/// Streams `len` bytes of the logical stream from `start` to `sink`, in order: with the sequential decoder when
/// `sequential`, else through the block cache (batches of up to 16 MiB when a GPU decodes them: one launch
/// sequence per batch).
fn stream_range(
    archive: &Archive,
    start: u64,
    len: u64,
    sequential: bool,
    sink: &mut dyn FnMut(&[u8]) -> Result<(), CliError>,
) -> Result<(), CliError> {
    if sequential && !archive.prefers_batches() {
        return with_parked_sink(sink, |sink| archive.decode_range_sequential(start, len, sink));
    }
    let chunk = if archive.prefers_batches() { GPU_CHUNK } else { CHUNK };
    let mut buf = vec![0u8; chunk.min(len as usize)];
    let mut pos = start;
    let end = start + len;
    while pos < end {
        let n = ((end - pos) as usize).min(buf.len());
        archive.read_stream(pos, &mut buf[..n])?;
        sink(&buf[..n])?;
        pos += n as u64;
    }
    Ok(())
}

/// Runs a library decoder whose callback returns the library's error type with `sink`, a CLI sink: a sink error
/// is parked and returned as it was (a broken pipe must stay a broken pipe), not as a decode failure.
fn with_parked_sink(
    sink: &mut dyn FnMut(&[u8]) -> Result<(), CliError>,
    decode: impl FnOnce(&mut dyn FnMut(&[u8]) -> crate::Result<()>) -> crate::Result<()>,
) -> Result<(), CliError> {
    let mut sink_error: Option<CliError> = None;
    let result = decode(&mut |bytes| {
        sink(bytes).map_err(|e| {
            sink_error = Some(e);
            Error::InvalidArgument("output failed".into())
        })
    });
    match (result, sink_error) {
        (_, Some(e)) => Err(e),
        (Err(e), None) => Err(e.into()),
        (Ok(()), None) => Ok(()),
    }
}

/// Serves file bytes to the extractor from an opened archive. Without a GPU every file goes through the
/// sequential decoder: unpack visits files in stream order, and the archive keeps the decoder's window of recent
/// blocks from one file to the next, so near sources are plain copies instead of cold random-access resolutions.
/// With a GPU, large files stream from its whole-range decode and smaller ones are read in engine batches.
struct ArchiveSource<'a>(&'a Reader);

impl FileSource for ArchiveSource<'_> {
    fn write_file(&self, id: EntryId, out: &mut File, out_path: &Path) -> crate::Result<()> {
        let mut write =
            |bytes: &[u8]| out.write_all(bytes).map_err(|e| CliError::Lib(Error::io(out_path.to_path_buf(), e)));
        match self.0.stream_file(id, 0, u64::MAX, true, &mut write) {
            Ok(()) => Ok(()),
            Err(CliError::Lib(e)) => Err(e),
            // Only library errors come out of a sink that writes a file; keep any other one readable.
            Err(other) => {
                Err(Error::Io { path: out_path.to_path_buf(), source: std::io::Error::other(format!("{other:?}")) })
            }
        }
    }
}

fn unpack_cmd(a: UnpackArgs) -> Result<(), CliError> {
    let reader = Reader::open(&a.archive, a.decoder.decoder)?;
    let opts = ExtractOptions { include_generated: a.with_generated };
    extract_tree(reader.archive.tree(), &ArchiveSource(&reader), &a.dir, opts)?;
    Ok(())
}

fn cat_cmd(a: CatArgs) -> Result<(), CliError> {
    let reader = Reader::open(&a.archive, a.decoder.decoder)?;
    let archive = &reader.archive;
    let id = super::resolve::resolve_following(archive.tree(), a.path.as_os_str().as_bytes())?;
    let shown = a.path.display().to_string();
    let size = match archive.tree().entry(id).map(|e| &e.kind) {
        Some(EntryKind::File { size, .. }) => *size,
        Some(EntryKind::Dir) => return Err(Error::IsDirectory(shown).into()),
        _ => return Err(Error::NotFound(shown).into()),
    };
    let from = a.offset.min(size);
    let to = match a.length {
        Some(len) => from.saturating_add(len).min(size),
        None => size,
    };
    let mut out = Stdout::new();
    let len = to - from;
    reader.stream_file(id, from, len, len >= SEQUENTIAL_MIN_BYTES, &mut |bytes| out.write(bytes))?;
    out.flush()
}

fn ls_cmd(a: LsArgs) -> Result<(), CliError> {
    // Listing decodes nothing: no engine choice, no GPU start-up.
    let archive = open(&a.archive, DecoderChoice::Cpu)?;
    let tree = archive.tree();
    let mut out = Stdout::new();
    for id in super::listing::depth_first(tree) {
        out.line(&super::listing::listing_line(tree, id, a.long))?;
    }
    out.flush()
}

fn info_cmd(a: InfoArgs) -> Result<(), CliError> {
    let archive = open(&a.archive, DecoderChoice::Cpu)?;
    let report = super::info::gather(archive.data());
    let mut out = Stdout::new();
    if a.json {
        let json = serde_json::to_string_pretty(&report)
            .map_err(|e| CliError::Failed(format!("cannot serialise the report: {e}")))?;
        out.line(json.as_bytes())?;
    } else {
        out.write(super::info::render_text(&report).as_bytes())?;
    }
    out.flush()
}

fn verify_cmd(a: VerifyArgs) -> Result<(), CliError> {
    let archive = open(&a.archive, a.decoder.decoder)?;
    let errors = archive.verify_with(!a.sequential_only);
    let blocks = archive.data().block_count();
    let mut out = Stdout::new();
    for e in &errors {
        let line = match e {
            Error::CorruptBlock { block, offset, source, .. } => {
                format!("bad block {block} (payload offset {offset}): {source}")
            }
            other => format!("error: {other}"),
        };
        out.line(line.as_bytes())?;
    }
    if errors.is_empty() {
        out.line(format!("{}: OK ({blocks} blocks)", a.archive.display()).as_bytes())?;
        out.flush()
    } else {
        out.flush()?;
        Err(CliError::Failed(format!("{}: {} of {blocks} blocks are corrupt", a.archive.display(), errors.len())))
    }
}
