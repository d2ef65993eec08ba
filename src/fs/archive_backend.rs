//! The opened [`Archive`] as the filesystem's [`Backend`]: random reads go through the archive's single-flight
//! block cache and its engines; stream runs go through its sequential decoder
//! ([`Archive::decode_range_sequential`]), which keeps its window of recent blocks between runs.

use std::ops::Range;

use super::Backend;
use crate::archive::Archive;
use crate::error::Error;
use crate::format::tree::{EntryId, EntryKind, Tree};

impl Backend for Archive {
    fn tree(&self) -> &Tree {
        Archive::tree(self)
    }

    fn read_file(&self, id: EntryId, offset: u64, buf: &mut [u8]) -> crate::Result<usize> {
        Archive::read_file(self, id, offset, buf)
    }

    fn stream_offset(&self, id: EntryId) -> Option<u64> {
        // Only stored files map linearly onto the stream; transformed ones (genome mode) are read through
        // `read_file` alone.
        match self.tree().entry(id).map(|e| &e.kind) {
            Some(EntryKind::File { offset, transform: 0, .. }) => Some(*offset),
            _ => None,
        }
    }

    fn decode_stream(&self, blocks: Range<u64>, sink: &mut dyn FnMut(u64, &[u8]) -> bool) -> crate::Result<()> {
        let data = self.data();
        let end_block = blocks.end.min(data.block_count());
        if blocks.start >= end_block {
            return Ok(());
        }
        let start = data.block_start(blocks.start);
        let end = data.block_start(end_block - 1) + u64::from(data.block_len(end_block - 1));
        // The range is block-aligned, so the sequential decoder hands out one whole block per call.
        let mut id = blocks.start;
        let result = self.decode_range_sequential(start, end - start, |bytes| {
            if !sink(id, bytes) {
                return Err(Error::io(&data.path, std::io::Error::from(std::io::ErrorKind::Interrupted)));
            }
            id += 1;
            Ok(())
        });
        match result {
            Err(Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::Interrupted => Ok(()),
            other => other,
        }
    }

    fn stats_json(&self) -> serde_json::Value {
        let data = self.data();
        serde_json::json!({
            "engine": self.engine_name(),
            "block_size": data.header.block_size(),
            "blocks": data.block_count(),
            "total_len": data.footer.total_len,
            "cache": self.stats(),
        })
    }

    fn source_name(&self) -> String {
        self.data().path.display().to_string()
    }

    fn total_len(&self) -> u64 {
        Archive::total_len(self)
    }

    fn block_size(&self) -> u32 {
        self.data().header.block_size() as u32
    }
}

#[cfg(test)]
mod tests {
    //! The filesystem layer over a real packed archive (no mount).

    use std::path::PathBuf;
    use std::sync::Arc;

    use crate::archive::{Archive, ArchiveOptions};
    use crate::engine::DecoderChoice;
    use crate::fs::{AcxFs, FileKind, FsOptions};

    fn packed(dir: &std::path::Path) -> (PathBuf, Vec<u8>, Vec<u8>) {
        let src = dir.join("in");
        std::fs::create_dir_all(src.join("sub")).unwrap();
        let fasta: Vec<u8> = {
            // A repetitive sequence wrapped at 60 columns: indexable FASTA with plenty of matches.
            let seq: Vec<u8> = (0..30_000).map(|i| b"ACGTTGCAAC"[(i * i / 7) % 10]).collect();
            let mut out = b">s1 test\n".to_vec();
            for line in seq.chunks(60) {
                out.extend_from_slice(line);
                out.push(b'\n');
            }
            out
        };
        let blob: Vec<u8> = (0..200_000u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        std::fs::write(src.join("g.fa"), &fasta).unwrap();
        std::fs::write(src.join("sub/blob"), &blob).unwrap();
        let archive = dir.join("t.acx");
        crate::pack::pack(std::slice::from_ref(&src), &archive, &crate::pack::PackOptions::default()).unwrap();
        (archive, fasta, blob)
    }

    #[test]
    fn fs_over_packed_archive_reads_exact_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let (path, fasta, blob) = packed(dir.path());
        let archive = Archive::open_with(
            &path,
            ArchiveOptions { cache_bytes: 1 << 20, decoder: DecoderChoice::Cpu, ..ArchiveOptions::default() },
        )
        .unwrap();
        let fs = AcxFs::new(Arc::new(archive), FsOptions::default());
        let top = fs.lookup(1, b"in").unwrap();
        assert_eq!(top.kind, FileKind::Directory);
        let g = fs.lookup(top.ino, b"g.fa").unwrap();
        assert_eq!(g.size, fasta.len() as u64);
        let fai = fs.lookup(top.ino, b"g.fa.fai").unwrap();
        let sub = fs.lookup(top.ino, b"sub").unwrap();
        let b = fs.lookup(sub.ino, b"blob").unwrap();

        let read = |ino: u64, chunk: u32| crate::fs::tests::read_all(&fs, ino, chunk);
        assert_eq!(read(g.ino, 4096), fasta);
        assert_eq!(read(b.ino, 128 << 10), blob);
        assert_eq!(read(fai.ino, 1000), crate::pack::fai::fasta_index(&fasta).unwrap());

        // Random ranges straddling 16 KiB blocks.
        let opened = fs.open(b.ino, libc::O_RDONLY).unwrap();
        let mut buf = Vec::new();
        for (off, len) in [(16383u64, 2u32), (16384, 16384), (199_990, 100), (0, 1), (32767, 40000)] {
            fs.read(b.ino, opened.fh, off, len, &mut buf).unwrap();
            let end = (off as usize + len as usize).min(blob.len());
            assert_eq!(buf, &blob[off as usize..end], "{off}+{len}");
        }
        let stats: serde_json::Value = serde_json::from_slice(&fs.stats_snapshot()).unwrap();
        assert_eq!(stats["archive_stats"]["engine"], "cpu");
        assert!(stats["archive_stats"]["cache"]["misses"].as_u64().unwrap() > 0);
        // A sequential read is served by a stream run, byte for byte.
        assert_eq!(read(b.ino, 128 << 10), blob);
        let stats: serde_json::Value = serde_json::from_slice(&fs.stats_snapshot()).unwrap();
        assert!(stats["streams"]["runs"]["blocks"].as_u64().unwrap() > 0, "{stats}");
        assert!(stats["fs"]["streamed_bytes"].as_u64().unwrap() > 0, "{stats}");
    }
}
