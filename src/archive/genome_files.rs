//! Reading genome-mode files (transform 1, FORMAT.md §2.6) through an [`Archive`].
//!
//! A genome file's region of the logical stream holds a head and its bases; the head points at its structure,
//! which lies with the other genome files' structures after every file's bytes. The structure is a piece table
//! and independently decodable pieces of ~2 MiB of original bytes each ([`crate::genome::pieces`]). The first read
//! of a file reads and validates its table (a few small stream reads through the block cache; concurrent first
//! readers wait for one open); a read then decodes only the pieces its byte range meets that are not held yet
//! (each piece's code read through the block cache; concurrent first readers of one piece wait for one decode),
//! maps each piece's part of the range to the bases it needs, reads exactly those bases, and rebuilds headers,
//! line breaks, case and N/IUPAC runs around them. The work per read stays proportional to the bytes read,
//! wherever it lands and however large the file: the random-access contract holds for genome files too.
//!
//! Memory: the decoded pieces read recently stay in memory (up to a few MB per 2 MiB piece of a soft-masked
//! genome: line runs, case runs and exception runs), up to [`OPEN_STRUCTURE_BYTES`] beyond the one being decoded;
//! the least recently used are dropped above that and decoded again on their next read. A file whose pieces are all
//! dropped drops its table too.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use super::{Archive, READ_BATCH_BLOCKS};
use crate::error::{Error, Result};
use crate::format::tree::{EntryId, EntryKind, TRANSFORM_GENOME};
use crate::genome::read::{as_uninit, BaseChunks};
use crate::genome::region::{GenomeFile, PieceState};
use crate::genome::Genome;

/// Original bytes of a streamed genome file rebuilt as one chunk (see [`Archive::stream_genome_file`]).
const STREAM_CHUNK: u64 = 1 << 20;

/// Bytes of decoded structure pieces kept for later reads. Why a bound: an archive of thousands of FASTA files
/// (or one very large one) would otherwise keep every piece a long-running mount ever decoded. Dropping one costs
/// its next reader a decode (a few ms for a 2 MiB piece of atha_chr1).
pub const OPEN_STRUCTURE_BYTES: u64 = 32 << 20;

/// The opened genome files of one archive, by entry id. Each entry has its own slot, locked while the file's
/// table is read, so that concurrent first readers of a file (the kernel sends several requests at once) wait for
/// one open; readers of other files do not wait. Pieces have slots of their own in the [`GenomeFile`].
#[derive(Default)]
pub(super) struct GenomeFiles {
    open: Mutex<OpenFiles>,
    /// Pieces decoded into the shared slots so far (what a read cost in structure decodes; tests count it).
    pieces_decoded: AtomicU64,
    /// Nanoseconds those decodes took, summed over threads (the mount's stats show it).
    decode_ns: AtomicU64,
}

struct OpenFiles {
    slots: HashMap<EntryId, Arc<OpenSlot>>,
    /// The decoded pieces' heap bytes by (file, piece), least recently used first: what eviction drops.
    used: lru::LruCache<(EntryId, usize), u64>,
    /// Pieces held per file (in `used`): a file whose count drops to 0 is dropped with its table.
    held: HashMap<EntryId, usize>,
    bytes: u64,
    /// [`OPEN_STRUCTURE_BYTES`] (tests lower it to exercise eviction under concurrent reads).
    bound: u64,
}

impl Default for OpenFiles {
    fn default() -> Self {
        OpenFiles {
            slots: HashMap::new(),
            used: lru::LruCache::unbounded(),
            held: HashMap::new(),
            bytes: 0,
            bound: OPEN_STRUCTURE_BYTES,
        }
    }
}

impl OpenFiles {
    /// Records that piece `piece` of `slot` (the one mapped for `id`, unless it was dropped meanwhile) now holds
    /// `bytes`, then drops least recently used pieces other than this one while the total is above the bound.
    /// Lock order: `open`, then a file slot, then a piece slot (a reader decoding a piece holds only that piece's
    /// slot, and releases it before it records here).
    fn decoded(&mut self, id: EntryId, slot: &Arc<OpenSlot>, piece: usize, bytes: u64) {
        if !self.slots.get(&id).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            return;
        }
        match self.used.put((id, piece), bytes) {
            Some(old) => self.bytes -= old,
            None => *self.held.entry(id).or_default() += 1,
        }
        self.bytes += bytes;
        while self.bytes > self.bound {
            match self.used.peek_lru() {
                Some((&victim, _)) if victim != (id, piece) => {
                    if let Some(((vid, vpiece), freed)) = self.used.pop_lru() {
                        self.bytes -= freed;
                        self.drop_piece(vid, vpiece);
                    }
                }
                _ => break,
            }
        }
    }

    fn drop_piece(&mut self, id: EntryId, piece: usize) {
        if let Some(slot) = self.slots.get(&id) {
            if let Some(file) = &*slot.lock().unwrap_or_else(|p| p.into_inner()) {
                file.drop_piece(piece);
            }
        }
        let held = self.held.entry(id).or_default();
        *held = held.saturating_sub(1);
        if *held == 0 {
            self.held.remove(&id);
            self.slots.remove(&id);
        }
    }
}

/// One genome file's slot: empty until its table has been read.
type OpenSlot = Mutex<Option<Arc<GenomeFile>>>;

/// Structure reads longer than this go through the sequential decoder (see [`Archive::read_structure`]).
const SEQUENTIAL_STRUCTURE_BYTES: usize = 64 << 10;
/// Window of the sequential decode of a large structure (its near sources; far ones go through tokens).
const STRUCTURE_WINDOW_BYTES: u64 = 4 << 20;

/// An opened file and the slot it is held in (for recording its pieces).
struct Opened {
    id: EntryId,
    slot: Arc<OpenSlot>,
    file: Arc<GenomeFile>,
}

impl Archive {
    /// The opened genome file `id` (a transform-1 file at stream `offset` of `size` original bytes): its table.
    fn genome_file(&self, id: EntryId, offset: u64, size: u64) -> Result<Opened> {
        let slot = {
            let mut open = self.genomes.open.lock().unwrap_or_else(|p| p.into_inner());
            Arc::clone(open.slots.entry(id).or_default())
        };
        let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(file) = &*guard {
            let file = Arc::clone(file);
            drop(guard);
            return Ok(Opened { id, slot, file });
        }
        // A failed open leaves the slot empty: the next read tries again (and reports the error again).
        let file = GenomeFile::open(offset, size, self.total_len(), |pos, buf| self.read_stream(pos, buf))
            .map_err(|e| self.genome_error(id, e))?;
        let file = Arc::new(file);
        *guard = Some(Arc::clone(&file));
        drop(guard);
        Ok(Opened { id, slot, file })
    }

    /// Piece `i` of an opened file, decoded on first use (its code read through the block cache) and counted
    /// against [`OPEN_STRUCTURE_BYTES`].
    fn genome_piece(&self, f: &Opened, i: usize) -> Result<Arc<Genome>> {
        self.genome_piece_from(f, i, |pos, buf| self.read_stream(pos, buf))
    }

    /// [`Archive::genome_piece`] with its code (if not decoded yet) read by `read(pos, buf)`.
    fn genome_piece_from(
        &self,
        f: &Opened,
        i: usize,
        read: impl FnOnce(u64, &mut [u8]) -> Result<()>,
    ) -> Result<Arc<Genome>> {
        let started = Instant::now();
        let (g, fresh) = f.file.piece(i, read).map_err(|e| self.genome_error(f.id, e))?;
        let mut open = self.genomes.open.lock().unwrap_or_else(|p| p.into_inner());
        if fresh {
            self.genomes.pieces_decoded.fetch_add(1, Ordering::Relaxed);
            self.genomes.decode_ns.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
            open.decoded(f.id, &f.slot, i, g.heap_bytes());
        } else {
            open.used.promote(&(f.id, i));
        }
        Ok(g)
    }

    /// Stream bytes of structure pieces read together (a stream or a verify reads many pieces in order): through
    /// the sequential decoder when long. Why: read as random blocks, each structure block resolves its sources in
    /// the blocks before it through their tokens, and opening atha_chr1's ~0.5 MB structure that way cost the first
    /// read of a fresh mount 78 ms; in order, those sources are plain copies from the window.
    fn read_structure(&self, pos: u64, buf: &mut [u8]) -> Result<()> {
        if buf.len() <= SEQUENTIAL_STRUCTURE_BYTES {
            return self.read_stream_on_cpu(pos, buf);
        }
        let (mut at, want) = (0usize, buf.len());
        let end = self.checked_end(pos, want as u64)?;
        let log = self.data.header.block_log;
        let (first, last) = (pos >> log, (end - 1) >> log);
        // With a window of its own: the archive's shared window stays on the files' bases, so that an unpack's
        // next genome file (structures lie after all files) still finds its near sources there.
        let mut decoded = 0u64;
        let result = self.cpu.decode_sequential(first, last + 1, true, STRUCTURE_WINDOW_BYTES, |id, block| {
            decoded += 1;
            let block = block?;
            let block_start = self.data.block_start(id);
            let from = pos.saturating_sub(block_start) as usize;
            let to = (end - block_start).min(block.len() as u64) as usize;
            let bytes = block.get(from..to).unwrap_or_default();
            let dst = buf.get_mut(at..at + bytes.len()).ok_or_else(|| {
                Error::InvalidArgument(format!("the sequential decoder handed out more than {want} bytes"))
            })?;
            dst.copy_from_slice(bytes);
            at += bytes.len();
            Ok(())
        });
        self.cache.record_decodes(crate::engine::BlockEngine::name(&self.cpu), decoded);
        result?;
        if at != buf.len() {
            return Err(Error::InvalidArgument(format!(
                "the sequential decoder handed out {at} of {} bytes",
                buf.len()
            )));
        }
        Ok(())
    }

    /// Pieces `range` of `file` decoded privately (not kept: a stream or a verify passes over them once), in
    /// parallel, their code read in one pass ([`Archive::read_structure`]).
    fn decode_pieces(&self, id: EntryId, file: &GenomeFile, range: Range<usize>) -> Result<Vec<Genome>> {
        if range.is_empty() {
            return Ok(Vec::new());
        }
        let from = file.piece_stream_range(range.start).start;
        let to = file.piece_stream_range(range.end - 1).end;
        let mut code = vec![0u8; (to - from) as usize];
        self.read_structure(from, &mut code)?;
        spread(range.len(), |k| {
            let i = range.start + k;
            let r = file.piece_stream_range(i);
            let bytes = &code[(r.start - from) as usize..(r.end - from) as usize];
            file.table.decode_piece(i, bytes).map_err(|e| self.genome_error(id, e.into()))
        })
        .into_iter()
        .collect()
    }

    /// A structure that does not validate is corrupt data of that file: say which file (a bad block under it
    /// already names itself, and passes through unchanged).
    fn genome_error(&self, id: EntryId, e: Error) -> Error {
        match e {
            Error::Decode(source) => {
                let name = String::from_utf8_lossy(&self.tree().path_of(id)).into_owned();
                Error::Format { path: self.data().path.clone(), detail: format!("{name}: genome structure: {source}") }
            }
            other => other,
        }
    }

    /// Reads original bytes of genome file `id` from `offset` into `buf`; returns how many (short at the end).
    pub(super) fn read_genome_file(
        &self,
        id: EntryId,
        offset: u64,
        size: u64,
        off: u64,
        buf: &mut [u8],
    ) -> Result<usize> {
        let file = self.genome_file(id, offset, size)?;
        self.write_genome_bytes(&file, off, as_uninit(buf))
    }

    /// Appends up to `len` original bytes of file `id` from `off` to `out`, written straight into its spare
    /// capacity (no zero-fill of a buffer about to be overwritten); returns how many (short only at the end of
    /// the file). `None` if `id` is not a genome-mode file.
    pub fn read_genome_file_into(&self, id: EntryId, off: u64, len: usize, out: &mut Vec<u8>) -> Result<Option<usize>> {
        out.reserve(len);
        let Some(n) = self.read_genome_file_uninit(id, off, &mut out.spare_capacity_mut()[..len])? else {
            return Ok(None);
        };
        // SAFETY: `read_genome_file_uninit` initialised the first `n` bytes of the spare capacity, `n ≤ len ≤`
        // the spare capacity reserved above.
        unsafe { out.set_len(out.len() + n) };
        Ok(Some(n))
    }

    /// Writes original bytes of file `id` from `off` into `out`, initialised or not (no zero-fill of a buffer
    /// about to be overwritten); returns `n`, the bytes written, with `out[..n]` initialised (short only at the
    /// end of the file). `None` if `id` is not a genome-mode file.
    pub fn read_genome_file_uninit(&self, id: EntryId, off: u64, out: &mut [MaybeUninit<u8>]) -> Result<Option<usize>> {
        let Some(EntryKind::File { offset, size, transform: TRANSFORM_GENOME }) =
            self.tree().entry(id).map(|e| &e.kind)
        else {
            return Ok(None);
        };
        let file = self.genome_file(id, *offset, *size)?;
        let len = (out.len() as u64).min(size.saturating_sub(off)) as usize;
        Ok(Some(self.write_genome_bytes(&file, off, &mut out[..len])?))
    }

    /// Writes original bytes of `file` from `off` into `out`, piece by piece (each decoded on first use), each
    /// piece's part in one pass with its bases taken straight out of the decoded blocks that hold them (shared
    /// out of the block cache, not copied into a buffer first); returns how many bytes were written (`out[..n]` is
    /// initialised; short only at the end of the file).
    fn write_genome_bytes(&self, f: &Opened, off: u64, out: &mut [MaybeUninit<u8>]) -> Result<usize> {
        let file = &f.file;
        let mut at = 0usize;
        let pieces = file.pieces_of(off, out.len() as u64);
        self.read_pieces_ahead(f, pieces.start);
        for i in pieces {
            let g = self.genome_piece(f, i)?;
            let (bytes, bases) = (file.table.bytes(i), file.table.bases_of(i));
            let pos = off + at as u64;
            let n = ((bytes.end - pos) as usize).min(out.len() - at);
            let local = pos - bytes.start;
            let (b0, b1) = g.base_range(local, n as u64);
            let written = self.with_bases(file.bases_start + bases.start, b0..b1, |chunks| {
                Ok(g.write_at(local, &mut out[at..at + n], BaseChunks::new(b0, chunks))?)
            })?;
            at += written;
            if written < n {
                break;
            }
        }
        Ok(at)
    }

    /// A sequential reader that reaches a piece not decoded yet, right after the one before it (held), gets that
    /// piece and the next [`PIECES_AHEAD`] decoded together, in parallel, instead of one at a time as it gets to
    /// them: a `dd` of the 1.16 GB generated genome through a fresh mount otherwise stalled on ~560 piece decodes
    /// in a row (H200, session 16 run 4: 478–498 MB/s against 597–612 when the whole structure was decoded
    /// first). A random read (the piece before it not held) decodes only its own pieces.
    fn read_pieces_ahead(&self, f: &Opened, first: usize) {
        let file = &f.file;
        let n = file.table.len();
        if first == 0 || first >= n || file.holds_piece(first) || !file.holds_piece(first - 1) {
            return;
        }
        let ahead = (first..(first + 1 + PIECES_AHEAD).min(n)).filter(|&i| !file.holds_piece(i));
        self.decode_pieces_ahead(ahead.map(|i| (f, i)).collect());
    }

    /// Decodes and keeps `pieces` (file, piece) in parallel, ahead of the reads that will want them; errors are
    /// left to those reads, which decode their pieces themselves.
    ///
    /// The code of each file's pieces is read in one pass ([`Archive::read_structure`]: the sequential decoder,
    /// on the calling thread too), not piece by piece through the random path: that one decodes on the rayon
    /// pool, where a stream run's batch holds every thread until it runs out, and its structure blocks resolve
    /// their sources through tokens.
    fn decode_pieces_ahead(&self, pieces: Vec<(&Opened, usize)>) {
        // Pieces held already are only marked as just used (no code read for them: a reader's preparation asks
        // for pieces it mostly holds, every 8 MiB); those being decoded are left to that decode.
        let mut wanted = Vec::with_capacity(pieces.len());
        for (f, i) in pieces {
            match f.file.piece_state(i) {
                Some(PieceState::Empty) => wanted.push((f, i)),
                Some(PieceState::Held) => {
                    let _ = self.genome_piece(f, i);
                }
                Some(PieceState::Decoding) | None => {}
            }
        }
        let pieces = wanted;
        if pieces.is_empty() {
            return;
        }
        // Each file's span of code (its pieces lie in order in its structure).
        let mut spans: Vec<(EntryId, Range<u64>)> = Vec::new();
        for &(f, i) in &pieces {
            let r = f.file.piece_stream_range(i);
            match spans.iter_mut().find(|(id, _)| *id == f.id) {
                Some((_, span)) => *span = span.start.min(r.start)..span.end.max(r.end),
                None => spans.push((f.id, r)),
            }
        }
        let code: Vec<(EntryId, u64, Vec<u8>)> = spans
            .into_iter()
            .filter_map(|(id, span)| {
                let mut code = vec![0u8; usize::try_from(span.end - span.start).ok()?];
                // An error is left to the reads (the piece is then read through the random path below).
                self.read_structure(span.start, &mut code).ok().map(|()| (id, span.start, code))
            })
            .collect();
        spread(pieces.len(), |k| {
            let (f, i) = pieces[k];
            let r = f.file.piece_stream_range(i);
            let read = code
                .iter()
                .find(|(id, _, _)| *id == f.id)
                .and_then(|(_, from, code)| code.get((r.start - from) as usize..(r.end - from) as usize));
            let _ = match read {
                Some(bytes) => self.genome_piece_from(f, i, |_, buf| {
                    buf.copy_from_slice(bytes);
                    Ok(())
                }),
                None => self.genome_piece(f, i),
            };
        });
    }

    /// Calls `f` with bases `range` (of a piece whose base 0 lies at stream position `base0`) as slices of the
    /// decoded blocks that hold them.
    fn with_bases<T>(&self, base0: u64, range: Range<u64>, f: impl FnOnce(&[&[u8]]) -> Result<T>) -> Result<T> {
        let mut blocks = Vec::new();
        let mut slices: Vec<&[u8]> = Vec::new();
        if range.end > range.start {
            let (pos, end) = (base0 + range.start, base0 + range.end);
            self.checked_end(pos, end - pos)?;
            let log = self.data.header.block_log;
            let ids: Vec<u64> = ((pos >> log)..=((end - 1) >> log)).collect();
            for chunk in ids.chunks(READ_BATCH_BLOCKS) {
                blocks.extend(self.cache.get_many(chunk, |missing| self.decode_batch(missing))?);
            }
            for (&id, block) in ids.iter().zip(&blocks) {
                let block_start = self.data.block_start(id);
                let from = pos.saturating_sub(block_start) as usize;
                let to = (end - block_start).min(block.len() as u64) as usize;
                let bytes = block.get(from..to).ok_or_else(|| {
                    Error::InvalidArgument(format!("decoded block {id} holds {} bytes, not {to}", block.len()))
                })?;
                slices.push(bytes);
            }
        }
        f(&slices)
    }

    /// For genome file `id`, the stream bytes that original bytes `[off, off + len)` need (its bases) and the
    /// stream bytes of all its bases; `None` if `id` is not a genome-mode file. Opens the table on first use and
    /// decodes the pieces of the range's two ends, like a read. (The mount decodes the bases ahead of a
    /// sequential reader with these.)
    pub fn genome_stream_span(&self, id: EntryId, off: u64, len: u64) -> Result<Option<(Range<u64>, Range<u64>)>> {
        let Some(EntryKind::File { offset, size, transform: TRANSFORM_GENOME }) =
            self.tree().entry(id).map(|e| &e.kind)
        else {
            return Ok(None);
        };
        let f = self.genome_file(id, *offset, *size)?;
        let file = &f.file;
        let start = file.bases_start;
        let all = start..start + file.bases();
        let pieces = file.pieces_of(off, len);
        if pieces.is_empty() {
            return Ok(Some((start..start, all)));
        }
        let end = off.saturating_add(len).min(file.total_len());
        let last = pieces.end - 1;
        let (g0, g1) = (self.genome_piece(&f, pieces.start)?, self.genome_piece(&f, last)?);
        let span = file.base_span((pieces.start, &g0), (last, &g1), off, end);
        Ok(Some((start + span.start..start + span.end, all)))
    }

    /// Decodes, in parallel, the pieces of genome file `id` that original bytes `[off, off + len)` meet and that
    /// are not held, and marks those held as just used (a sequential reader's next pieces: the mount calls this
    /// off the read path, so that a reader reaching a piece finds it decoded instead of waiting for it, and a
    /// file larger than the bound does not see its next pieces dropped just before it reads them). Pieces being
    /// decoded are left to that decode; errors are left to the reads. Returns how many pieces the archive decoded
    /// meanwhile (this call's, unless other reads decoded some at the same time).
    pub fn decode_genome_ahead(&self, id: EntryId, off: u64, len: u64) -> u64 {
        let Some(EntryKind::File { offset, size, transform: TRANSFORM_GENOME }) =
            self.tree().entry(id).map(|e| &e.kind)
        else {
            return 0;
        };
        let Ok(f) = self.genome_file(id, *offset, *size) else { return 0 };
        let before = self.genome_pieces_decoded();
        self.decode_pieces_ahead(f.file.pieces_of(off, len).map(|i| (&f, i)).collect());
        self.genome_pieces_decoded() - before
    }

    /// Structure pieces as the mount's stats show them: decoded so far, held now, and the decode time.
    pub fn genome_piece_stats(&self) -> serde_json::Value {
        serde_json::json!({
            "pieces_decoded": self.genome_pieces_decoded(),
            "pieces_held": self.genome_pieces_held(),
            "decode_ms": self.genomes.decode_ns.load(Ordering::Relaxed) / 1_000_000,
        })
    }

    /// Opens the tables of the first `max_files` genome-mode files (in tree order) that are not open yet, so that
    /// their first reads do not pay for it (a mount does this in the background when it starts). Errors are left
    /// for the reads to report. Returns how many of those files are open afterwards.
    pub fn open_genome_structures(&self, max_files: usize) -> usize {
        let genome_files = self.tree().entries.iter().enumerate().filter_map(|(id, entry)| match entry.kind {
            EntryKind::File { offset, size, transform: TRANSFORM_GENOME } => Some((id as EntryId, offset, size)),
            _ => None,
        });
        let mut opened = Vec::new();
        for (id, offset, size) in genome_files.take(max_files) {
            match self.genome_file(id, offset, size) {
                Ok(f) => opened.push(f),
                Err(e) => tracing::debug!("genome file {id} not opened ahead of its reads: {e}"),
            }
        }
        // Then the files' first pieces, in parallel, while they take less than half the bound: a mount's first
        // reads (a `cat`, a faidx of the first sequence) find them decoded, and a chromosome-sized file is whole.
        let mut budget = OPEN_STRUCTURE_BYTES / 2;
        let mut first: Vec<(&Opened, usize)> = Vec::new();
        'files: for f in &opened {
            for i in 0..f.file.table.len() {
                let cost = f.file.table.bytes(i).end - f.file.table.bytes(i).start;
                // Decoded structure is a small fraction of its original bytes (atha_chr1: ~1/16); count 1/8.
                if cost / 8 > budget {
                    break 'files;
                }
                budget -= cost / 8;
                first.push((f, i));
            }
        }
        self.decode_pieces_ahead(first);
        opened.len()
    }

    /// Lowers the bound on decoded pieces' bytes (tests: eviction under concurrent reads).
    #[cfg(test)]
    pub(super) fn set_genome_piece_bound(&self, bytes: u64) {
        self.genomes.open.lock().unwrap_or_else(|p| p.into_inner()).bound = bytes;
    }

    /// Decoded pieces held now, over all files (what the bound counts).
    pub fn genome_pieces_held(&self) -> usize {
        self.genomes.open.lock().unwrap_or_else(|p| p.into_inner()).used.len()
    }

    /// Pieces of genome structures decoded into the shared slots since the archive was opened (reads and spans;
    /// streams and verify decode privately and do not count).
    pub fn genome_pieces_decoded(&self) -> u64 {
        self.genomes.pieces_decoded.load(Ordering::Relaxed)
    }

    /// Opens every genome-mode file and decodes every piece of its structure (for `verify`): one error per file
    /// whose structure does not validate. Blocks are checked separately; a file over a bad block reports that
    /// block here too.
    pub(super) fn verify_genome_files(&self) -> Vec<Error> {
        let mut errors = Vec::new();
        for (id, entry) in self.tree().entries.iter().enumerate() {
            if let EntryKind::File { offset, size, transform: TRANSFORM_GENOME } = entry.kind {
                let id = id as EntryId;
                let checked = self.genome_file(id, offset, size).and_then(|f| {
                    // In bounded batches: a large file's decoded pieces need not all be in memory at once.
                    let n = f.file.table.len();
                    (0..n).step_by(VERIFY_BATCH).try_for_each(|from| {
                        self.decode_pieces(id, &f.file, from..(from + VERIFY_BATCH).min(n)).map(drop)
                    })
                });
                if let Err(e) = checked {
                    errors.push(e);
                }
            }
        }
        errors
    }

    /// Whether `id` is a genome-mode file.
    pub fn is_genome_file(&self, id: EntryId) -> bool {
        matches!(self.tree().entry(id).map(|e| &e.kind), Some(EntryKind::File { transform: TRANSFORM_GENOME, .. }))
    }

    /// Streams original bytes `[from, from + len)` of genome file `id` to `sink` in order (for `cat` and
    /// `unpack`): all the range's bases in one [`Archive::decode_range_streaming`] (the GPU's whole-range decode
    /// when a GPU decodes, else the CPU's sequential decoder), rebuilt into original bytes as they arrive.
    ///
    /// Structure pieces are decoded privately (not kept) on a thread of their own, [`STREAM_PIECES`] at a time
    /// in parallel, at most two batches ahead of the rebuild, and their code is read on the CPU: the stream's sink
    /// waits for them while a GPU stream holds the device, so reading them through the GPU would wait on the
    /// stream itself (`cat --decoder gpu` of a 1.1 GB file hung on the H200 in session 16). Why one stream for
    /// the whole range: streamed batch by batch, a large file's 32 MiB batches were each too short for the GPU's
    /// whole-range decode ([`super::streaming::GPU_WHOLE_RANGE_MIN_BYTES`]), so the CPU decoded them all (H200,
    /// the 1.16 GB file: `--decoder gpu` 3.9 s, cpu 4.0 s). The bases that arrive together are rebuilt in chunks
    /// of [`STREAM_CHUNK`] on all cores, then handed to `sink` in order.
    pub fn stream_genome_file(
        &self,
        id: EntryId,
        from: u64,
        len: u64,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let Some(EntryKind::File { offset, size, transform: TRANSFORM_GENOME }) =
            self.tree().entry(id).map(|e| &e.kind)
        else {
            return Err(Error::InvalidArgument(format!("entry {id} is not a genome-mode file")));
        };
        let f = self.genome_file(id, *offset, *size)?;
        let file = &*f.file;
        let end = from.saturating_add(len).min(*size);
        let pieces = file.pieces_of(from, end.saturating_sub(from));
        if pieces.is_empty() {
            return Ok(());
        }
        let (p0, p1) = (pieces.start, pieces.end - 1);
        // The range's first and last pieces (the span of bases needs both) at once, and kept for the rebuild:
        // the stream decoded them one after the other and then again (~3 ms of atha_chr1 before its first byte).
        let ends_at = if p1 > p0 { vec![p0, p1] } else { vec![p0] };
        let ends = spread(ends_at.len(), |k| self.decode_pieces(id, file, ends_at[k]..ends_at[k] + 1))
            .into_iter()
            .collect::<Result<Vec<Vec<Genome>>>>()?;
        let ends: Vec<(usize, Genome)> = ends_at.into_iter().zip(ends.into_iter().flatten()).collect();
        let (first, last) = (&ends[0], &ends[ends.len() - 1]);
        let span = file.base_span((first.0, &first.1), (last.0, &last.1), from, end);
        std::thread::scope(|scope| {
            let (tx, rx) = std::sync::mpsc::sync_channel(1);
            let batches = stream_batches(p0 + 1..p1);
            std::thread::Builder::new()
                .name("acx-pieces".to_string())
                .spawn_scoped(scope, move || {
                    for batch in batches {
                        let decoded = self.decode_pieces(id, file, batch.clone()).map(|g| (batch.start, g));
                        let failed = decoded.is_err();
                        if tx.send(decoded).is_err() || failed {
                            return; // the rebuild stopped, or has the error now
                        }
                    }
                })
                .map_err(|e| Error::InvalidArgument(format!("cannot start the structure thread: {e}")))?;
            let mut rebuild = Rebuild::new(file, rx, ends, from..end, span.start);
            if span.end > span.start {
                self.decode_range_streaming(file.bases_start + span.start, span.end - span.start, &mut |bytes| {
                    rebuild.bases.extend_from_slice(bytes);
                    rebuild.emit(false, sink)
                })?;
            }
            rebuild.emit(true, sink)
        })
    }
}

/// The rebuild side of [`Archive::stream_genome_file`]: bases decoded but not used yet, the structure pieces
/// received from the decoding thread, and where the next original byte is.
struct Rebuild<'a> {
    file: &'a GenomeFile,
    pieces: std::sync::mpsc::Receiver<Result<(usize, Vec<Genome>)>>,
    /// The range's first and last pieces, decoded before the stream started (the span of bases needs them).
    ends: Vec<(usize, Genome)>,
    /// Batches received and not passed yet: (first piece, its decoded pieces).
    held: std::collections::VecDeque<(usize, Vec<Genome>)>,
    /// Bases from file base `bases_from` on.
    bases: Vec<u8>,
    bases_from: u64,
    /// The next original byte to hand over, and the end of the range.
    pos: u64,
    end: u64,
    /// Rebuilt chunks, reused.
    outs: Vec<Vec<u8>>,
}

impl<'a> Rebuild<'a> {
    fn new(
        file: &'a GenomeFile,
        pieces: std::sync::mpsc::Receiver<Result<(usize, Vec<Genome>)>>,
        ends: Vec<(usize, Genome)>,
        range: Range<u64>,
        bases_from: u64,
    ) -> Rebuild<'a> {
        Rebuild {
            file,
            pieces,
            ends,
            held: Default::default(),
            bases: Vec::new(),
            bases_from,
            pos: range.start,
            end: range.end,
            outs: Vec::new(),
        }
    }

    /// Receives batches from the structure thread until one holds piece `i`.
    fn receive(&mut self, i: usize) -> Result<()> {
        while held_piece(&self.ends, &self.held, i).is_none() {
            let batch = self.pieces.recv().map_err(|_| {
                Error::InvalidArgument(format!("genome piece {i} never came from the structure thread"))
            })??;
            self.held.push_back(batch);
        }
        Ok(())
    }

    /// Rebuilds and hands to `sink` every chunk of original bytes whose bases are all in (with `flush`: the rest
    /// of the range, whose bases must then all be in), in parallel, then drops the bases used up.
    fn emit(&mut self, flush: bool, sink: &mut dyn FnMut(&[u8]) -> Result<()>) -> Result<()> {
        let have_to = self.bases_from + self.bases.len() as u64;
        // The ready chunks: (piece, local offset, length, bases from, bases to), file-relative bases.
        let mut ready = Vec::new();
        let mut at = self.pos;
        while at < self.end {
            let Some(i) = self.file.table.piece_of(at) else { break };
            let (bytes, base0) = (self.file.table.bytes(i), self.file.table.bases_of(i).start);
            let take = (self.end.min(bytes.end) - at).min(STREAM_CHUNK);
            let local = at - bytes.start;
            self.receive(i)?;
            let (c0, c1) = held_piece(&self.ends, &self.held, i).map_or((0, 0), |g| g.base_range(local, take));
            if base0 + c1 > have_to || base0 + c0 < self.bases_from {
                if flush {
                    return Err(Error::InvalidArgument(format!(
                        "genome bases {}..{} are not among the decoded {}..{have_to}",
                        base0 + c0,
                        base0 + c1,
                        self.bases_from
                    )));
                }
                break;
            }
            ready.push((i, local, take as usize, base0 + c0, base0 + c1));
            at += take;
        }
        // Rebuilt once there is a chunk for every thread (or at the end): chunks that became ready one at a time
        // (4 MiB, when this waited for nothing) were rebuilt on this thread alone, ~0.7 ms each during which it
        // handed out no block, while the decoder's pool ran out of its batch.
        if ready.is_empty() || (!flush && ready.len() < rayon::current_num_threads()) {
            return Ok(());
        }
        self.outs.resize_with(self.outs.len().max(ready.len()), Vec::new);
        let (ends, held, bases, bases_from, file) = (&self.ends, &self.held, &self.bases, self.bases_from, self.file);
        // On threads of their own, not the rayon pool: this runs on the thread that hands out the sequential
        // decoder's blocks, and the pool is busy with the rest of the decoder's batch until it runs out.
        let rebuilt: Vec<Result<usize>> = spread_mut(&mut self.outs[..ready.len()], |k, out| {
            let (i, local, take, b0, b1) = ready[k];
            let piece = held_piece(ends, held, i)
                .ok_or_else(|| Error::InvalidArgument(format!("genome piece {i} is not among the batches received")))?;
            let chunk = [&bases[(b0 - bases_from) as usize..(b1 - bases_from) as usize]];
            let c0 = b0 - file.table.bases_of(i).start;
            out.clear();
            out.reserve(take);
            let n = piece.write_at(local, &mut out.spare_capacity_mut()[..take], BaseChunks::new(c0, &chunk))?;
            // SAFETY: `write_at` initialised the first `n` bytes of the spare capacity, `n ≤ take`.
            unsafe { out.set_len(n) };
            Ok(n)
        });
        let mut used_to = self.bases_from;
        for ((&(_, _, take, _, b1), n), out) in ready.iter().zip(rebuilt).zip(&self.outs) {
            let n = n?;
            sink(&out[..n])?;
            self.pos += n as u64;
            used_to = b1;
            if n < take {
                self.end = self.pos; // the structure wrote less than it promised: nothing more to rebuild
                break;
            }
        }
        // Drop the bases used up, once per call: the GPU hands over 64 MiB of bases at a time, and draining each
        // chunk from the front moved the rest every time (quadratic).
        let used = (used_to - self.bases_from).min(self.bases.len() as u64) as usize;
        self.bases.drain(..used);
        self.bases_from += used as u64;
        // And the batches of the pieces passed.
        let next = self.file.table.piece_of(self.pos).unwrap_or(usize::MAX);
        while self.held.front().is_some_and(|(first, g)| first + g.len() <= next) {
            self.held.pop_front();
        }
        Ok(())
    }
}

/// Decoded piece `i`, if it is one of the range's `ends` or one of the batches `held` holds it.
fn held_piece<'g>(
    ends: &'g [(usize, Genome)],
    held: &'g std::collections::VecDeque<(usize, Vec<Genome>)>,
    i: usize,
) -> Option<&'g Genome> {
    ends.iter()
        .find(|(at, _)| *at == i)
        .map(|(_, g)| g)
        .or_else(|| held.iter().find_map(|(first, g)| g.get(i.checked_sub(*first)?)))
}

/// Pieces a stream decodes ahead at a time, in parallel (a batch holds tens of MB of decoded structure).
const STREAM_PIECES: usize = 16;

/// The batches a stream's structure thread decodes pieces `range` in: two pieces first, then twice as many each
/// time up to [`STREAM_PIECES`]. Why: the rebuild waits for a batch's first piece until the whole batch is decoded,
/// and the first batch of 16 pieces held back atha_chr1's first rebuilt byte by all 15 pieces' decodes (50 ms
/// on the loaded 2-core machine; its first piece comes decoded with the span).
fn stream_batches(range: Range<usize>) -> impl Iterator<Item = Range<usize>> {
    let mut next = (range.start, 2usize);
    std::iter::from_fn(move || {
        let (at, n) = next;
        if at >= range.end {
            return None;
        }
        let batch = at..(at + n).min(range.end);
        next = (batch.end, (n * 2).min(STREAM_PIECES));
        Some(batch)
    })
}

/// `f(k, &mut items[k])` for every item, on up to as many threads as the rayon pool has (the calling thread one of
/// them), each claiming the next item; the results in item order. Why threads of their own rather than the pool:
/// structure pieces and rebuilt chunks are wanted while the sequential decoder's batch keeps every pool thread
/// until it runs out (up to 32 blocks a thread), and work queued behind it waited: with 8 pool threads, rebuilds
/// of 0.25 ms queued 16–23 ms during a fresh mount's read of atha_chr1 (`examples/stream_bench`). Starting a
/// thread costs tens of µs, against milliseconds for a 2 MiB piece. A thread that cannot start leaves its share
/// to the others.
fn spread_mut<T: Send, R: Send>(items: &mut [T], f: impl Fn(usize, &mut T) -> R + Sync) -> Vec<R> {
    let n = items.len();
    let threads = n.min(rayon::current_num_threads());
    if threads <= 1 {
        return items.iter_mut().enumerate().map(|(k, item)| f(k, item)).collect();
    }
    let slots: Vec<Mutex<(&mut T, Option<R>)>> = items.iter_mut().map(|item| Mutex::new((item, None))).collect();
    let claimed = AtomicUsize::new(0);
    let work = || loop {
        let k = claimed.fetch_add(1, Ordering::Relaxed);
        let Some(slot) = slots.get(k) else { break };
        let mut slot = slot.lock().unwrap_or_else(|p| p.into_inner());
        slot.1 = Some(f(k, slot.0));
    };
    std::thread::scope(|scope| {
        for _ in 1..threads {
            if std::thread::Builder::new().name("acx-spread".to_string()).spawn_scoped(scope, work).is_err() {
                break;
            }
        }
        work();
    });
    // Every item was claimed once and its result set (a panic in `f` would have ended the scope above with it).
    slots.into_iter().filter_map(|slot| slot.into_inner().unwrap_or_else(|p| p.into_inner()).1).collect()
}

/// [`spread_mut`] over the indices `0..n`.
fn spread<R: Send>(n: usize, f: impl Fn(usize) -> R + Sync) -> Vec<R> {
    spread_mut(&mut vec![(); n], |k, _| f(k))
}

/// Pieces a sequential reader has decoded ahead of the one it reached (see [`Archive::read_pieces_ahead`]): 16
/// MiB of original bytes at the default piece size, a few MB of decoded structure.
const PIECES_AHEAD: usize = 8;

/// Pieces `verify` decodes at a time, in parallel.
const VERIFY_BATCH: usize = 64;

#[cfg(test)]
mod tests {
    use super::*;

    fn decoded(files: &mut OpenFiles, id: EntryId, piece: usize, bytes: u64) {
        let slot = Arc::clone(files.slots.entry(id).or_default());
        files.decoded(id, &slot, piece, bytes);
    }

    fn kept(files: &OpenFiles) -> Vec<(EntryId, usize)> {
        let mut kept: Vec<_> = files.used.iter().map(|(&k, _)| k).collect();
        kept.sort();
        kept
    }

    #[test]
    fn decoded_pieces_stay_under_the_bound_least_recently_used_first() {
        let mut files = OpenFiles::default();
        let third = OPEN_STRUCTURE_BYTES / 3;
        decoded(&mut files, 0, 0, third);
        decoded(&mut files, 0, 1, third);
        decoded(&mut files, 1, 0, third);
        assert_eq!(files.slots.len(), 2);
        files.used.promote(&(0, 0));
        // A fourth goes over: the least recently used ((0, 1), since (0, 0) was read again) is dropped.
        decoded(&mut files, 2, 5, third);
        assert!(files.bytes <= OPEN_STRUCTURE_BYTES);
        assert_eq!(kept(&files), vec![(0, 0), (1, 0), (2, 5)]);
        assert_eq!(files.bytes, files.used.iter().map(|(_, b)| b).sum::<u64>());
        // Dropping a file's last piece drops the file (its table) too.
        decoded(&mut files, 3, 0, third);
        assert_eq!(kept(&files), vec![(0, 0), (2, 5), (3, 0)]);
        assert!(!files.slots.contains_key(&1) && files.slots.contains_key(&0));
        assert_eq!(files.held.get(&0), Some(&1));
    }

    #[test]
    fn a_piece_larger_than_the_bound_is_kept_while_alone_and_dropped_for_the_next() {
        let mut files = OpenFiles::default();
        decoded(&mut files, 7, 3, OPEN_STRUCTURE_BYTES * 2);
        assert_eq!(files.used.len(), 1, "the piece being decoded is never dropped");
        decoded(&mut files, 8, 0, 1);
        assert_eq!(kept(&files), vec![(8, 0)]);
        assert_eq!(files.bytes, 1);
        assert_eq!(files.slots.keys().copied().collect::<Vec<_>>(), vec![8]);
    }

    #[test]
    fn a_piece_of_a_slot_dropped_while_decoding_is_not_counted() {
        let mut files = OpenFiles::default();
        let stale: Arc<OpenSlot> = Arc::default();
        files.decoded(5, &stale, 0, 100);
        assert_eq!((files.bytes, files.used.len()), (0, 0));
    }
}
