//! Sequential-access detection per open file: decides when a handle's reads form a stream that a
//! [`super::stream::Run`] should decode ahead of.
//!
//! The kernel reads ahead by itself (up to `max_readahead`), but it asks for those pages one request at a
//! time; a run decodes the following blocks with the sequential decoder before they are asked for. Starting a
//! run for a random reader wastes the blocks it decodes ahead, so the detector wants evidence: two reads in a
//! row that continue each other (within a slack, because the kernel's concurrent readahead requests reach the
//! workers slightly out of order), or one large read at the start of the file — what `cat`, `cp`, `dd` and
//! `md5sum` begin with.

/// How close (in bytes) a read must start to where the previous one ended to count as sequential.
const SEQUENTIAL_SLACK: u64 = 1 << 20;
/// A read at offset 0 at least this long starts a stream at once (the kernel's first readahead request).
const FIRST_READ_STREAM: u64 = 128 << 10;

/// Per-open-file state of the sequential detector.
#[derive(Debug, Default)]
pub struct SequentialState {
    /// End of the furthest read so far.
    furthest_end: u64,
    /// Consecutive near-sequential reads.
    streak: u32,
}

impl SequentialState {
    /// Records a read of `[offset, offset + len)`; returns true if the handle's reads now look sequential.
    pub fn on_read(&mut self, offset: u64, len: u64) -> bool {
        let end = offset.saturating_add(len);
        if offset.abs_diff(self.furthest_end) <= SEQUENTIAL_SLACK {
            self.streak = self.streak.saturating_add(1);
            self.furthest_end = self.furthest_end.max(end);
        } else {
            // A jump: start over from here.
            self.streak = 0;
            self.furthest_end = end;
        }
        self.streak >= 2 || (offset == 0 && len >= FIRST_READ_STREAM)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_reads_are_sequential() {
        let mut s = SequentialState::default();
        assert!(!s.on_read(4096, 4096), "one read is not a stream");
        assert!(s.on_read(8192, 4096));
        // Slightly out of order, as concurrent kernel requests arrive.
        assert!(s.on_read(64 << 10, 64 << 10));
        assert!(s.on_read(16 << 10, 64 << 10));
        // A jump ends the stream; two near reads start a new one.
        assert!(!s.on_read(100 << 20, 4096));
        assert!(!s.on_read((100 << 20) + 4096, 4096));
        assert!(s.on_read((100 << 20) + 8192, 4096));
    }

    #[test]
    fn a_large_first_read_at_the_start_is_a_stream() {
        assert!(SequentialState::default().on_read(0, 128 << 10));
        assert!(!SequentialState::default().on_read(0, 4096));
        assert!(!SequentialState::default().on_read(1 << 30, 1 << 20));
    }

    #[test]
    fn random_reads_are_not_sequential() {
        let mut s = SequentialState::default();
        let size = 1u64 << 40;
        let mut x = 12345u64;
        for _ in 0..1000 {
            x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            let off = (x >> 20) % size;
            assert!(!s.on_read(off, 4096), "random read at {off}");
        }
    }
}
