//! Sequential-access detection per open file: decides when a handle's reads form a stream that a
//! [`super::stream::Run`] should decode ahead of.
//!
//! The kernel reads ahead by itself (up to `max_readahead`), but it asks for those pages one request at a
//! time; a run decodes the following blocks with the sequential decoder before they are asked for. Starting a
//! run for a random reader wastes the blocks it decodes ahead, so the detector wants evidence: at least
//! [`STREAM_BYTES`] read in consecutive requests that continue each other (within a slack, because the
//! kernel's concurrent readahead requests reach the workers slightly out of order), or one large read at the
//! start of the file — what `cat`, `cp`, `dd` and `md5sum` begin with. Measured: `samtools faidx` reads a region
//! as one or two 64 KiB requests, so "two near reads in a row" started (and cancelled) 30 runs in 1000 regions.

/// How close (in bytes) a read must start to where the previous one ended to count as sequential.
const SEQUENTIAL_SLACK: u64 = 1 << 20;
/// A read at offset 0 at least this long starts a stream at once (the kernel's first readahead request).
const FIRST_READ_STREAM: u64 = 128 << 10;
/// Bytes read in one streak of near-consecutive requests that make it a stream.
pub const STREAM_BYTES: u64 = 1 << 20;

/// Per-open-file state of the sequential detector.
#[derive(Debug, Default)]
pub struct SequentialState {
    /// End of the furthest read so far.
    furthest_end: u64,
    /// Requests and bytes of the current streak of near-consecutive reads.
    streak_reads: u32,
    streak_bytes: u64,
    /// The streak has qualified as a stream (it stays one until a jump).
    streaming: bool,
}

impl SequentialState {
    /// The verdict of the last [`SequentialState::on_read`].
    pub fn streaming(&self) -> bool {
        self.streaming
    }

    /// Records a read of `[offset, offset + len)`; returns true if the handle's reads now look sequential.
    pub fn on_read(&mut self, offset: u64, len: u64) -> bool {
        let end = offset.saturating_add(len);
        if offset.abs_diff(self.furthest_end) <= SEQUENTIAL_SLACK {
            self.streak_reads = self.streak_reads.saturating_add(1);
            self.streak_bytes = self.streak_bytes.saturating_add(len);
            self.furthest_end = self.furthest_end.max(end);
        } else {
            // A jump: start over from here.
            self.streak_reads = 1;
            self.streak_bytes = len;
            self.furthest_end = end;
            self.streaming = false;
        }
        // One large request in the middle of a file is not enough: an O_DIRECT reader with a large buffer
        // makes those at random.
        self.streaming |=
            (self.streak_reads >= 2 && self.streak_bytes >= STREAM_BYTES) || (offset == 0 && len >= FIRST_READ_STREAM);
        self.streaming
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_reads_are_sequential() {
        let mut s = SequentialState::default();
        let chunk = 64 << 10;
        for i in 1..16 {
            assert!(!s.on_read(i * chunk, chunk), "{i} reads of 64 KiB are not a stream yet");
        }
        assert!(s.on_read(16 * chunk, chunk), "1 MiB read in a row is");
        // Slightly out of order, as concurrent kernel requests arrive.
        assert!(s.on_read(20 * chunk, chunk));
        assert!(s.on_read(18 * chunk, chunk));
        // A jump ends the stream; 1 MiB of near reads starts a new one.
        assert!(!s.on_read(100 << 20, 512 << 10));
        assert!(s.on_read((100 << 20) + (512 << 10), 512 << 10));
    }

    #[test]
    fn a_large_first_read_at_the_start_is_a_stream() {
        assert!(SequentialState::default().on_read(0, 128 << 10));
        assert!(!SequentialState::default().on_read(0, 4096));
        assert!(!SequentialState::default().on_read(1 << 30, 1 << 20));
        // Once a stream, small reads that continue it keep it one.
        let mut s = SequentialState::default();
        assert!(s.on_read(0, 128 << 10));
        assert!(s.on_read(128 << 10, 4096));
    }

    #[test]
    fn random_reads_are_not_sequential() {
        let mut s = SequentialState::default();
        let size = 1u64 << 40;
        let mut x = 12345u64;
        for _ in 0..1000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let off = (x >> 20) % size;
            assert!(!s.on_read(off, 64 << 10), "random read at {off}");
        }
    }
}
