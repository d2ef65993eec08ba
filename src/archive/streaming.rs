//! Large sequential reads of the logical stream (`cat` and `unpack` of big files, genome-mode files' bases):
//! the GPU's whole-range decode when a GPU decodes this archive and the range is large enough to pay for
//! decoding the whole stream device-resident once, else — and from wherever the GPU had to stop — the CPU's
//! sequential decoder.

use super::Archive;
use crate::error::Result;

/// Ranges at least this long (or an eighth of the stream) are streamed from a complete device-resident decode
/// when a GPU decodes; shorter ones are not worth decoding the whole stream for.
pub const GPU_WHOLE_RANGE_MIN_BYTES: u64 = 64 << 20;

/// Archives whose stream is at most this long get the GPU's complete decode at mount time
/// ([`Archive::prepare_streams`]); a larger one waits for its first long sequential read, as its decode holds more
/// device memory than a mount that only serves random reads needs.
pub const PREPARE_STREAM_MAX_BYTES: u64 = 2 << 30;

impl Archive {
    /// Runs now, when a GPU decodes this archive and its stream is at most [`PREPARE_STREAM_MAX_BYTES`], the
    /// complete device-resident decode that the first stream would otherwise start with (a mount calls this on
    /// its warm-up thread). Why: a fresh mount's first sequential reader waited ~3 ms for it, a tenth of reading
    /// atha_chr1 through the mount on the H200 (session 16: 32–37 ms against 27 for the empty FUSE
    /// filesystem). Errors are logged; the first stream then tries again, as it does when the GPU engine is still
    /// starting in the background.
    pub fn prepare_streams(&self) {
        if let Some(gpu) = self.gpu.get() {
            if self.total_len() <= PREPARE_STREAM_MAX_BYTES {
                if let Err(e) = gpu.prepare_stream() {
                    tracing::debug!("the complete GPU decode was not prepared ahead of the streams: {e}");
                }
            }
        }
    }

    /// Whether a sequential read of `len` stream bytes takes the GPU's whole-range decode.
    pub fn streams_on_gpu(&self, len: u64) -> bool {
        self.prefers_batches()
            && len > 0
            && (len >= GPU_WHOLE_RANGE_MIN_BYTES || len.saturating_mul(8) >= self.total_len())
    }

    /// Streams stream bytes `[start, start + len)` to `sink` in order, for one large sequential read: from the
    /// GPU's resident decode ([`Archive::stream_blocks`]) when [`Archive::streams_on_gpu`], else with
    /// [`Archive::decode_range_sequential`]. If the GPU cannot go on, the rest of the range (all of it, unless
    /// it failed mid-way) is decoded on the CPU; a block the GPU got wrong was already decoded again on the CPU.
    pub fn decode_range_streaming(
        &self,
        start: u64,
        len: u64,
        sink: &mut dyn FnMut(&[u8]) -> Result<()>,
    ) -> Result<()> {
        let end = self.checked_end(start, len)?;
        if !self.streams_on_gpu(len) {
            return self.decode_range_sequential(start, len, sink);
        }
        let log = self.data.header.block_log;
        let (first, last) = (start >> log, (end - 1) >> log);
        let mut pos = first << log; // stream offset of the next byte the device hands over
        let mut sink_failed = false;
        let result = self.stream_blocks(first, last + 1, &mut |bytes| {
            let (from, to) = (pos, pos + bytes.len() as u64);
            pos = to;
            let (a, b) = (start.max(from), end.min(to));
            if a >= b {
                return Ok(());
            }
            sink(&bytes[(a - from) as usize..(b - from) as usize]).inspect_err(|_| sink_failed = true)
        });
        match result {
            None => self.decode_range_sequential(start, len, sink), // no whole-range engine after all
            Some(Ok(())) => {
                tracing::info!("streamed {len} bytes from the GPU's resident decode");
                Ok(())
            }
            Some(Err(e)) if sink_failed => Err(e),
            Some(Err(e)) => {
                let done = pos.clamp(start, end);
                tracing::warn!("the GPU could not stream the range ({e}); decoding the rest on the CPU");
                self.decode_range_sequential(done, end - done, sink)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::archive::{Archive, ArchiveOptions};
    use crate::engine::fake::FakeWholeRange;
    use crate::engine::DecoderChoice;

    #[test]
    fn streaming_reads_equal_the_stream_and_refuse_ranges_past_its_end() {
        let dir = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..300_000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 % 7 + b'a').collect();
        let input = dir.path().join("f.txt");
        std::fs::write(&input, &data).unwrap();
        let path = dir.path().join("a.acx");
        crate::pack::pack(&[input], &path, &crate::pack::PackOptions::default()).unwrap();
        let opts = ArchiveOptions { decoder: DecoderChoice::Cpu, ..ArchiveOptions::default() };
        let archive = Archive::open_with(&path, opts).unwrap();
        assert!(!archive.streams_on_gpu(data.len() as u64), "no GPU engine: the CPU streams");
        let id = archive.tree().resolve_path(b"f.txt").expect("packed file");
        let (start, len) = archive.file_range(id).unwrap();
        for (from, n) in [(0, len), (12_345, 100_000), (len - 1, 1), (len, 0)] {
            let mut got = Vec::new();
            archive
                .decode_range_streaming(start + from, n, &mut |b| {
                    got.extend_from_slice(b);
                    Ok(())
                })
                .unwrap();
            assert_eq!(got, data[from as usize..(from + n) as usize]);
        }
        let past = archive.decode_range_streaming(start + len, 1, &mut |_| Ok(()));
        assert!(matches!(past, Err(crate::error::Error::InvalidArgument(_))));
    }

    /// A genome-mode file larger than a few output chunks, streamed from an engine that hands over megabytes of
    /// bases per call (and from one that fails half-way, after which the CPU carries on): the original bytes.
    #[test]
    fn genome_files_stream_exactly_from_large_whole_range_pieces() {
        use crate::format::testkit::Rng;
        let dir = tempfile::tempdir().unwrap();
        let mut rng = Rng(7);
        let mut fasta = Vec::new();
        for record in 0..3 {
            fasta.extend_from_slice(format!(">chr{record} test\n").as_bytes());
            let mut bases: Vec<u8> = (0..3_000_000).map(|_| b"ACGT"[rng.range(0, 3) as usize]).collect();
            bases[1000..1500].make_ascii_lowercase();
            bases[200_000..200_300].fill(b'N');
            for line in bases.chunks(60) {
                fasta.extend_from_slice(line);
                fasta.push(b'\n');
            }
        }
        let input = dir.path().join("g.fa");
        std::fs::write(&input, &fasta).unwrap();
        let path = dir.path().join("g.acx");
        crate::pack::pack(&[input], &path, &crate::pack::PackOptions { level: 1, ..Default::default() }).unwrap();
        let data = std::sync::Arc::new(crate::format::ArchiveData::open(&path).unwrap());
        let blocks = data.block_count();
        for fail_at in [None, Some(blocks / 2)] {
            let engine = FakeWholeRange::new(crate::engine::cpu::CpuEngine::new(data.clone()), fail_at, true);
            let options = ArchiveOptions { decoder: DecoderChoice::Gpu, ..ArchiveOptions::default() };
            let archive = Archive::with_engines(data.clone(), options, Some(Box::new(engine)));
            let id = archive.tree().resolve_path(b"g.fa").unwrap();
            assert!(archive.is_genome_file(id), "the FASTA packed in genome mode");
            for (from, len) in [(0, fasta.len() as u64), (123_457, 7_000_000)] {
                let mut got = Vec::new();
                archive
                    .stream_genome_file(id, from, len, &mut |b| {
                        got.extend_from_slice(b);
                        Ok(())
                    })
                    .unwrap();
                let want = &fasta[from as usize..(from + len).min(fasta.len() as u64) as usize];
                assert!(got == want, "bytes {from}+{len} differ (fail_at {fail_at:?})");
            }
        }
    }
}
