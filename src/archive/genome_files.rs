//! Reading genome-mode files (transform 1, FORMAT.md §2.6) through an [`Archive`].
//!
//! A genome file's region of the logical stream holds a head and its bases; the head points at its structure,
//! which lies with the other genome files' structures after every file's bytes. The first read of such a file
//! reads and validates the structure (two stream reads: the head through the block cache, the structure with the
//! sequential decoder; concurrent first readers wait for one open) and keeps it; every read
//! after that maps the original byte range to the base range it needs ([`GenomeFile::read_at`]), reads exactly
//! those bases, and rebuilds headers, line breaks, case and N/IUPAC runs around them. The work per read stays
//! proportional to the bytes read: the random-access contract holds for genome files too.
//!
//! Memory: the structures of the genome files read recently stay in memory (a few hundred KB to a few MB per
//! chromosome-sized file: line runs, case runs and exception runs), up to [`OPEN_STRUCTURE_BYTES`] beyond the one
//! being opened; the least recently used are dropped above that and opened again on their next read.

use std::collections::HashMap;
use std::mem::MaybeUninit;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use super::{Archive, READ_BATCH_BLOCKS};
use crate::error::{Error, Result};
use crate::format::tree::{EntryId, EntryKind, TRANSFORM_GENOME};
use crate::genome::read::{as_uninit, BaseChunks};
use crate::genome::region::GenomeFile;

/// Stream bytes the bases of one chunk of a streamed genome file come in (see [`Archive::stream_genome_file`]).
const STREAM_CHUNK: u64 = 4 << 20;

/// Bytes of opened structures kept for later reads. Why a bound: an archive of thousands of FASTA files would
/// otherwise keep every structure a long-running mount ever opened. Dropping one costs its next reader an open
/// (17 ms for atha_chr1's 0.5 MB structure under load).
pub const OPEN_STRUCTURE_BYTES: u64 = 32 << 20;

/// The opened genome files of one archive, by entry id. Each entry has its own slot, locked while the file is
/// opened, so that concurrent first readers of a file (the kernel sends several requests at once) wait for one
/// open instead of each decoding the structure on the same cores; readers of other files do not wait.
#[derive(Default)]
pub(super) struct GenomeFiles {
    open: Mutex<OpenFiles>,
}

struct OpenFiles {
    slots: HashMap<EntryId, Arc<OpenSlot>>,
    /// The opened slots' heap bytes, least recently used first: what eviction drops.
    used: lru::LruCache<EntryId, u64>,
    bytes: u64,
}

impl Default for OpenFiles {
    fn default() -> Self {
        OpenFiles { slots: HashMap::new(), used: lru::LruCache::unbounded(), bytes: 0 }
    }
}

impl OpenFiles {
    /// Records that `slot` (the one mapped for `id`, unless it was dropped meanwhile) now holds `bytes`, then
    /// drops least recently used structures other than `id` while the total is above the bound.
    fn opened(&mut self, id: EntryId, slot: &Arc<OpenSlot>, bytes: u64) {
        if !self.slots.get(&id).is_some_and(|s| Arc::ptr_eq(s, slot)) {
            return;
        }
        if let Some(old) = self.used.put(id, bytes) {
            self.bytes -= old;
        }
        self.bytes += bytes;
        while self.bytes > OPEN_STRUCTURE_BYTES {
            match self.used.peek_lru() {
                Some((&victim, _)) if victim != id => {
                    if let Some((victim, freed)) = self.used.pop_lru() {
                        self.slots.remove(&victim);
                        self.bytes -= freed;
                    }
                }
                _ => break,
            }
        }
    }
}

/// One genome file's slot: empty until its structure has been opened.
type OpenSlot = Mutex<Option<Arc<GenomeFile>>>;

/// Structure reads longer than this go through the sequential decoder (see [`Archive::read_structure`]).
const SEQUENTIAL_STRUCTURE_BYTES: usize = 64 << 10;
/// Window of the sequential decode of a large structure (its near sources; far ones go through tokens).
const STRUCTURE_WINDOW_BYTES: u64 = 4 << 20;

impl Archive {
    /// The opened genome file `id` (a transform-1 file at stream `offset` of `size` original bytes).
    fn genome_file(&self, id: EntryId, offset: u64, size: u64) -> Result<Arc<GenomeFile>> {
        let slot = {
            let mut open = self.genomes.open.lock().unwrap_or_else(|p| p.into_inner());
            open.used.promote(&id);
            Arc::clone(open.slots.entry(id).or_default())
        };
        let mut guard = slot.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(file) = &*guard {
            return Ok(Arc::clone(file));
        }
        // A failed open leaves the slot empty: the next read tries again (and reports the error again).
        let file = GenomeFile::open(offset, size, self.total_len(), |pos, buf| self.read_structure(pos, buf))
            .map_err(|e| self.genome_error(id, e))?;
        let file = Arc::new(file);
        *guard = Some(Arc::clone(&file));
        drop(guard);
        let bytes = file.genome.heap_bytes();
        self.genomes.open.lock().unwrap_or_else(|p| p.into_inner()).opened(id, &slot, bytes);
        Ok(file)
    }

    /// Stream bytes for opening a genome file: the head through the block cache, the structure (hundreds of KB,
    /// after every file's bytes) with the sequential decoder. Why: read as random blocks, each structure block resolves
    /// its sources in the blocks before it through their tokens, and opening atha_chr1's ~0.5 MB structure cost
    /// the first read of a fresh mount 78 ms; in order, those sources are plain copies from the window.
    fn read_structure(&self, pos: u64, buf: &mut [u8]) -> Result<()> {
        if buf.len() <= SEQUENTIAL_STRUCTURE_BYTES {
            return self.read_stream(pos, buf);
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
        let Some(EntryKind::File { offset, size, transform: TRANSFORM_GENOME }) =
            self.tree().entry(id).map(|e| &e.kind)
        else {
            return Ok(None);
        };
        let file = self.genome_file(id, *offset, *size)?;
        let len = (len as u64).min(size.saturating_sub(off)) as usize;
        out.reserve(len);
        let n = self.write_genome_bytes(&file, off, &mut out.spare_capacity_mut()[..len])?;
        // SAFETY: `write_genome_bytes` returns what `Genome::write_at` initialised: the first `n` bytes of the
        // spare capacity, with `n ≤ len ≤` the spare capacity reserved above.
        unsafe { out.set_len(out.len() + n) };
        Ok(Some(n))
    }

    /// Writes original bytes of `file` from `off` into `out` in one pass, its bases taken straight out of the
    /// decoded blocks that hold them (shared out of the block cache, not copied into a buffer first); returns
    /// how many bytes were written (`out[..n]` is initialised).
    fn write_genome_bytes(&self, file: &GenomeFile, off: u64, out: &mut [MaybeUninit<u8>]) -> Result<usize> {
        let (b0, b1) = file.genome.base_range(off, out.len() as u64);
        let mut blocks = Vec::new();
        let mut slices: Vec<&[u8]> = Vec::new();
        if b1 > b0 {
            let (pos, end) = (file.bases_start + b0, file.bases_start + b1);
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
        Ok(file.genome.write_at(off, out, BaseChunks::new(b0, &slices))?)
    }

    /// For genome file `id`, the stream bytes that original bytes `[off, off + len)` need (its bases) and the
    /// stream bytes of all its bases; `None` if `id` is not a genome-mode file. Opens the structure on first
    /// use, like a read. (The mount decodes the bases ahead of a sequential reader with these.)
    pub fn genome_stream_span(&self, id: EntryId, off: u64, len: u64) -> Result<Option<(Range<u64>, Range<u64>)>> {
        let Some(EntryKind::File { offset, size, transform: TRANSFORM_GENOME }) =
            self.tree().entry(id).map(|e| &e.kind)
        else {
            return Ok(None);
        };
        let file = self.genome_file(id, *offset, *size)?;
        let (b0, b1) = file.genome.base_range(off, len);
        let start = file.bases_start;
        Ok(Some((start + b0..start + b1, start..start + file.genome.bases())))
    }

    /// Opens the structures of the first `max_files` genome-mode files (in tree order) that are not open yet, so
    /// that their first reads do not pay for it (a mount does this in the background when it starts: 17 ms
    /// under load for atha_chr1, on the critical path of a fresh mount's first `samtools faidx`). Errors are
    /// left for the reads to report. Returns how many of those files are open afterwards.
    pub fn open_genome_structures(&self, max_files: usize) -> usize {
        let genome_files = self.tree().entries.iter().enumerate().filter_map(|(id, entry)| match entry.kind {
            EntryKind::File { offset, size, transform: TRANSFORM_GENOME } => Some((id as EntryId, offset, size)),
            _ => None,
        });
        let mut opened = 0;
        for (id, offset, size) in genome_files.take(max_files) {
            match self.genome_file(id, offset, size) {
                Ok(_) => opened += 1,
                Err(e) => tracing::debug!("genome file {id} not opened ahead of its reads: {e}"),
            }
        }
        opened
    }

    /// Opens every genome-mode file's structure (for `verify`): one error per file whose structure does not
    /// validate. Blocks are checked separately; a file over a bad block reports that block here too.
    pub(super) fn verify_genome_files(&self) -> Vec<Error> {
        let mut errors = Vec::new();
        for (id, entry) in self.tree().entries.iter().enumerate() {
            if let EntryKind::File { offset, size, transform: TRANSFORM_GENOME } = entry.kind {
                if let Err(e) = self.genome_file(id as EntryId, offset, size) {
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

    /// Streams original bytes `[from, from + len)` of genome file `id` to `sink` in order, decoding its bases with
    /// [`Archive::decode_range_streaming`] (for `cat` and `unpack`: the GPU's whole-range decode or the CPU's
    /// sequential decoder): the bases arrive in stream order and each chunk of original bytes is rebuilt as soon
    /// as its bases are in.
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
        let file = self.genome_file(id, *offset, *size)?;
        let end = from.saturating_add(len).min(*size);
        if from >= end {
            return Ok(());
        }
        let (b0, b1) = file.genome.base_range(from, end - from);
        // Bases decoded but not yet used, starting at base `have_from`; the next original chunk starts at `pos`.
        let mut pending: Vec<u8> = Vec::new();
        let mut have_from = b0;
        let mut pos = from;
        let mut out = Vec::new();
        let mut emit = |pending: &mut Vec<u8>, have_from: &mut u64, flush: bool| -> Result<()> {
            let mut result = Ok(());
            while pos < end {
                let take = (end - pos).min(STREAM_CHUNK);
                let (_, c1) = file.genome.base_range(pos, take);
                let have_to = *have_from + pending.len() as u64;
                if c1 > have_to && !flush {
                    break;
                }
                let (c0, _) = file.genome.base_range(pos, take);
                let at = c0.checked_sub(*have_from).filter(|_| c1 <= have_to);
                let Some(at) = at else {
                    result = Err(Error::InvalidArgument(format!("genome bases {c0}..{c1} not decoded yet")));
                    break;
                };
                let bases = [&pending[at as usize..(c1 - *have_from) as usize]];
                out.clear();
                out.reserve(take as usize);
                let read = file
                    .genome
                    .write_at(pos, &mut out.spare_capacity_mut()[..take as usize], BaseChunks::new(c0, &bases))
                    .map_err(Error::from);
                if let Ok(n) = read {
                    // SAFETY: `write_at` initialised the first `n` bytes of the spare capacity, `n ≤ take`.
                    unsafe { out.set_len(n) };
                }
                let n = match read.and_then(|n| sink(&out[..n]).map(|()| n)) {
                    Ok(n) => n,
                    Err(e) => {
                        result = Err(e);
                        break;
                    }
                };
                pos += n as u64;
                if n == 0 {
                    break;
                }
            }
            // Drop the bases the emitted chunks used up, once per call rather than once per chunk: the GPU hands
            // over 64 MiB of bases at a time, and draining each 4 MiB chunk from the front of those moved the
            // rest every time (quadratic).
            let next = if pos < end { file.genome.base_range(pos, end - pos).0 } else { u64::MAX };
            let used = next.saturating_sub(*have_from).min(pending.len() as u64) as usize;
            pending.drain(..used);
            *have_from += used as u64;
            result
        };
        if b1 > b0 {
            self.decode_range_streaming(file.bases_start + b0, b1 - b0, &mut |bytes| {
                pending.extend_from_slice(bytes);
                emit(&mut pending, &mut have_from, false)
            })?;
        }
        emit(&mut pending, &mut have_from, true)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn open_slot(files: &mut OpenFiles, id: EntryId, bytes: u64) {
        let slot = Arc::clone(files.slots.entry(id).or_default());
        files.opened(id, &slot, bytes);
    }

    #[test]
    fn opened_structures_stay_under_the_bound_least_recently_used_first() {
        let mut files = OpenFiles::default();
        let third = OPEN_STRUCTURE_BYTES / 3;
        for id in 0..3 {
            open_slot(&mut files, id, third);
        }
        assert_eq!(files.slots.len(), 3);
        files.used.promote(&0);
        // A fourth goes over: the least recently used (1, since 0 was read again) is dropped.
        open_slot(&mut files, 3, third);
        assert!(files.bytes <= OPEN_STRUCTURE_BYTES);
        let mut kept: Vec<_> = files.slots.keys().copied().collect();
        kept.sort();
        assert_eq!(kept, vec![0, 2, 3]);
        assert_eq!(files.bytes, files.used.iter().map(|(_, b)| b).sum::<u64>());
    }

    #[test]
    fn a_structure_larger_than_the_bound_is_kept_while_alone_and_dropped_for_the_next() {
        let mut files = OpenFiles::default();
        open_slot(&mut files, 7, OPEN_STRUCTURE_BYTES * 2);
        assert_eq!(files.slots.len(), 1, "the file being opened is never dropped");
        open_slot(&mut files, 8, 1);
        assert_eq!(files.slots.keys().copied().collect::<Vec<_>>(), vec![8]);
        assert_eq!(files.bytes, 1);
    }

    #[test]
    fn a_slot_dropped_while_opening_is_not_counted() {
        let mut files = OpenFiles::default();
        let stale: Arc<OpenSlot> = Arc::default();
        files.opened(5, &stale, 100);
        assert_eq!((files.bytes, files.used.len()), (0, 0));
    }
}
