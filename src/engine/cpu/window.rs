//! The sequential decoder's window: the most recent decoded blocks, so that their bytes are plain copies when
//! later blocks use them as sources.
//!
//! Memory is counted in quarter blocks against a capacity of `cap` whole blocks: a block kept as bytes costs 4,
//! a block kept packed costs 1. The newest quarter of the capacity stays as bytes. An older block made only of
//! the bases `A C G T` (a genome-mode region holds nothing else, FORMAT.md §2.6) is packed two bits per base, so
//! on genomes the same memory reaches 3.25 times as far back. That matters for archives of related genomes,
//! whose sources lie one genome back: a source older than the window is resolved through the tokens of the
//! slices that hold it, and those tokens lead to the genome before, and so on, each step running the entropy
//! stage of a slice again — measured 18 times more CPU time than copying from a window that reaches back far
//! enough (4 mutated 154 MB genomes). Blocks that are not pure bases (general mode, headers, structures) are
//! kept as bytes and cost what they did.

use std::borrow::Cow;
use std::collections::VecDeque;

use rayon::prelude::*;

use super::copy_from;
use crate::cache::Block;
use crate::codec::resolve::DecodedBlocks;

/// Evicted byte buffers kept for reuse: about one batch on a large machine.
const SPARE_BUFFERS: usize = 1024;
/// Memory units of a block kept as bytes, and of a packed block (a quarter of it).
const BYTES_UNITS: usize = 4;
const PACKED_UNITS: usize = 1;

/// One block of the window.
enum Held {
    /// The block failed to decode: sources in it are resolved through its tokens (and fail again).
    Failed,
    /// A block as the decoder handed it out (a stream run's cache may hold it too: shared, not copied).
    Bytes(Block),
    Packed(Packed),
}

impl Held {
    fn units(&self) -> usize {
        match self {
            // A failed block holds nothing, but counts so that the number of blocks stays bounded.
            Held::Failed | Held::Packed(_) => PACKED_UNITS,
            Held::Bytes(_) => BYTES_UNITS,
        }
    }
}

/// A block of bases, two bits each (`A C G T` = 0 1 2 3), the first base in the low bits of the first byte.
struct Packed {
    len: usize,
    bits: Vec<u8>,
}

/// Base → two-bit code, or 4 for any other byte.
const CODE: [u8; 256] = {
    let mut t = [4u8; 256];
    t[b'A' as usize] = 0;
    t[b'C' as usize] = 1;
    t[b'G' as usize] = 2;
    t[b'T' as usize] = 3;
    t
};

/// A packed byte → its four bases.
const EXPAND: [[u8; 4]; 256] = {
    let bases = *b"ACGT";
    let mut t = [[0u8; 4]; 256];
    let mut b = 0;
    while b < 256 {
        let mut k = 0;
        while k < 4 {
            t[b][k] = bases[(b >> (2 * k)) & 3];
            k += 1;
        }
        b += 1;
    }
    t
};

impl Packed {
    /// `bytes` packed, or `None` when it holds anything but `A C G T`.
    fn new(bytes: &[u8]) -> Option<Packed> {
        // Most blocks that are not bases show it in their first bytes: look there before allocating.
        if bytes.iter().take(64).any(|&b| CODE[usize::from(b)] > 3) {
            return None;
        }
        let mut bits = Vec::with_capacity(bytes.len().div_ceil(4));
        for run in bytes.chunks(256) {
            let mut bad = 0u8;
            for chunk in run.chunks(4) {
                let mut packed = 0u8;
                for (k, &b) in chunk.iter().enumerate() {
                    let code = CODE[usize::from(b)];
                    bad |= code;
                    packed |= (code & 3) << (2 * k);
                }
                bits.push(packed);
            }
            if bad > 3 {
                return None;
            }
        }
        Some(Packed { len: bytes.len(), bits })
    }

    /// Unpacks bases `[offset, offset + out.len())` into `out`; false (touching nothing) when out of range.
    fn copy_out(&self, offset: usize, out: &mut [u8]) -> bool {
        let Some(end) = offset.checked_add(out.len()).filter(|&end| end <= self.len) else {
            return false;
        };
        let base = |i: usize| EXPAND[usize::from(self.bits[i >> 2])][i & 3];
        // Bases up to a byte boundary one at a time, then four per packed byte, then the rest.
        let head = (offset.next_multiple_of(4) - offset).min(out.len());
        for (k, o) in out[..head].iter_mut().enumerate() {
            *o = base(offset + k);
        }
        let whole = (end - offset - head) / 4;
        let from = (offset + head) / 4;
        for (chunk, &packed) in out[head..head + whole * 4].chunks_exact_mut(4).zip(&self.bits[from..from + whole]) {
            chunk.copy_from_slice(&EXPAND[usize::from(packed)]);
        }
        let done = head + whole * 4;
        for (k, o) in out[done..].iter_mut().enumerate() {
            *o = base(offset + done + k);
        }
        true
    }

    fn to_vec(&self) -> Vec<u8> {
        let mut out = vec![0u8; self.len];
        self.copy_out(0, &mut out);
        out
    }
}

/// The most recent blocks of a sequential run (failed ones marked): near sources are plain copies from here. Kept
/// between runs by [`crate::archive::Archive`] so that consecutive files continue one window.
pub struct SeqWindow {
    first: u64,
    /// Capacity in whole blocks kept as bytes; memory stays within it (see the module doc).
    cap: usize,
    blocks: VecDeque<Held>,
    /// Blocks at the front that have been considered for packing (packed, or not pure bases).
    settled: usize,
    /// Memory held, in quarter blocks.
    units: usize,
    /// Buffers of evicted or packed blocks that nothing else holds, reused by the next batch.
    spare: Vec<Vec<u8>>,
}

impl SeqWindow {
    /// An empty window that will hold blocks `first ..`, in the memory of at most `cap_blocks` whole blocks.
    pub fn new(first: u64, cap_blocks: u64) -> SeqWindow {
        let cap = cap_blocks.clamp(1, 1 << 20) as usize;
        SeqWindow { first, cap, blocks: VecDeque::new(), settled: 0, units: 0, spare: Vec::new() }
    }

    /// The capacity this window was made with, in whole blocks.
    pub fn cap_blocks(&self) -> u64 {
        self.cap as u64
    }

    /// The oldest block the window holds (or will hold first, when empty).
    pub fn first_id(&self) -> u64 {
        self.first
    }

    /// The id of the block the window expects next.
    pub fn next_id(&self) -> u64 {
        self.first + self.blocks.len() as u64
    }

    /// Block `id`'s bytes, if held and good (unpacked into a copy when the window keeps it packed).
    pub fn get(&self, id: u64) -> Option<Cow<'_, [u8]>> {
        match self.held(id)? {
            Held::Bytes(bytes) => Some(Cow::Borrowed(&bytes[..])),
            Held::Packed(packed) => Some(Cow::Owned(packed.to_vec())),
            Held::Failed => None,
        }
    }

    /// Block `id`, if held and good: shared when the window keeps it as bytes, else unpacked into a new block.
    pub fn block(&self, id: u64) -> Option<Block> {
        match self.held(id)? {
            Held::Bytes(block) => Some(block.clone()),
            Held::Packed(packed) => Some(Block::from(packed.to_vec())),
            Held::Failed => None,
        }
    }

    fn held(&self, id: u64) -> Option<&Held> {
        self.blocks.get(usize::try_from(id.checked_sub(self.first)?).ok()?)
    }

    /// Up to `n` buffers of evicted blocks, for the next batch.
    pub(super) fn take_spare(&mut self, n: usize) -> Vec<Vec<u8>> {
        let keep = self.spare.len().saturating_sub(n);
        self.spare.split_off(keep)
    }

    /// Appends the blocks `first ..` (`first` must be [`next_id`](Self::next_id); `None` for a failed block),
    /// then, while the memory does not fit, packs the oldest blocks outside the newest quarter (on all cores
    /// with `parallel`) and evicts the oldest.
    ///
    /// Packing waits until the memory is needed: a window that holds a whole file as bytes (a FASTA file
    /// smaller than the window, the usual case for a mount's stream runs and fills) never packs, which saved
    /// the 4 % of a fresh mount's sequential read that `Packed::new` took (atha_chr1, `perf`); once the window is
    /// full, every block leaving the newest quarter is packed as before, so it reaches just as far back.
    pub(super) fn push_all(&mut self, first: u64, blocks: impl IntoIterator<Item = Option<Block>>, parallel: bool) {
        debug_assert_eq!(first, self.next_id());
        for block in blocks {
            let held = block.map_or(Held::Failed, Held::Bytes);
            self.units += held.units();
            self.blocks.push_back(held);
        }
        let near = (self.cap / 4).max(1);
        let to_settle = self.blocks.len().saturating_sub(near);
        loop {
            let over = self.units.saturating_sub(self.cap * BYTES_UNITS);
            if over == 0 || self.settled >= to_settle {
                break;
            }
            // Packing a block frees 3 units: settle enough of the oldest to cover the excess, and again if some
            // were not pure bases and freed nothing.
            let (from, to) = (self.settled, to_settle.min(self.settled + over.div_ceil(BYTES_UNITS - PACKED_UNITS)));
            let pack = |held: &mut Held| {
                let Held::Bytes(bytes) = held else { return None };
                let packed = Packed::new(bytes)?;
                match std::mem::replace(held, Held::Packed(packed)) {
                    Held::Bytes(bytes) => Some(bytes),
                    _ => None,
                }
            };
            let blocks = &mut self.blocks.make_contiguous()[from..to];
            let freed: Vec<Block> = if parallel {
                blocks.par_iter_mut().filter_map(pack).collect()
            } else {
                blocks.iter_mut().filter_map(pack).collect()
            };
            self.units -= freed.len() * (BYTES_UNITS - PACKED_UNITS);
            self.recycle(freed);
            self.settled = to;
        }
        while self.units > self.cap * BYTES_UNITS && self.blocks.len() > 1 {
            let Some(oldest) = self.blocks.pop_front() else { break };
            self.units -= oldest.units();
            self.settled = self.settled.saturating_sub(1);
            self.first += 1;
            if let Held::Bytes(bytes) = oldest {
                self.recycle([bytes]);
            }
        }
    }

    /// Keeps the buffers of `blocks` that nothing else holds (a stream run's cache may still serve the others)
    /// for the next batch, up to [`SPARE_BUFFERS`].
    fn recycle(&mut self, blocks: impl IntoIterator<Item = Block>) {
        for block in blocks {
            if self.spare.len() >= SPARE_BUFFERS {
                break;
            }
            if let Ok(buffer) = block.into_buffer() {
                self.spare.push(buffer);
            }
        }
    }
}

impl DecodedBlocks for SeqWindow {
    fn copy_out(&self, id: u64, offset: usize, out: &mut [u8]) -> bool {
        match self.held(id) {
            Some(Held::Bytes(bytes)) => copy_from(bytes, offset, out),
            Some(Held::Packed(packed)) => packed.copy_out(offset, out),
            Some(Held::Failed) | None => false,
        }
    }

    fn contains(&self, id: u64) -> bool {
        matches!(self.held(id), Some(Held::Bytes(_) | Held::Packed(_)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bases(n: usize, seed: u64) -> Vec<u8> {
        let mut rng = crate::format::testkit::Rng(seed | 1);
        (0..n).map(|_| b"ACGT"[rng.range(0, 3) as usize]).collect()
    }

    #[test]
    fn packed_bases_copy_out_every_range_exactly() {
        let block = bases(37, 9);
        let packed = Packed::new(&block).unwrap();
        assert_eq!(packed.bits.len(), 10);
        for offset in 0..=block.len() {
            for len in 0..=block.len() - offset {
                let mut out = vec![0u8; len];
                assert!(packed.copy_out(offset, &mut out));
                assert_eq!(out, block[offset..offset + len], "{offset}+{len}");
            }
        }
        let mut out = [0u8; 2];
        assert!(!packed.copy_out(36, &mut out), "past the end");
        assert!(!packed.copy_out(usize::MAX, &mut out), "overflow");
        assert!(Packed::new(b"ACGTN").is_none() && Packed::new(b"acgt").is_none());
        assert!(Packed::new(b"").is_some_and(|p| p.to_vec().is_empty()));
    }

    #[test]
    fn window_keeps_the_most_recent_blocks() {
        let mut w = SeqWindow::new(10, 2);
        w.push_all(10, [Some(Block::from(vec![1, 2, 3])), None, Some(Block::from(vec![7, 8]))], false);
        let mut out = [0u8; 2];
        assert!(!w.copy_out(10, 0, &mut out), "evicted");
        assert!(!w.copy_out(11, 0, &mut out), "failed block");
        assert!(w.copy_out(12, 0, &mut out));
        assert_eq!(out, [7, 8]);
        assert!(!w.copy_out(12, 1, &mut out), "out of range");
        assert_eq!(w.take_spare(4).iter().map(Vec::capacity).filter(|&c| c >= 3).count(), 1);
    }

    #[test]
    fn bases_are_packed_once_old_and_reach_further_in_the_same_memory() {
        // 8 blocks of memory: the newest 2 as bytes, then 24 packed ones.
        let blocks: Vec<Vec<u8>> = (0..40).map(|i| bases(100, i)).collect();
        for parallel in [false, true] {
            let mut w = SeqWindow::new(0, 8);
            for chunk in blocks.chunks(3).enumerate() {
                w.push_all(chunk.0 as u64 * 3, chunk.1.iter().map(|b| Some(Block::from(&b[..]))), parallel);
                assert!(w.units <= 8 * BYTES_UNITS);
            }
            assert_eq!((w.first_id(), w.next_id()), (40 - 26, 40));
            for id in w.first_id()..40 {
                assert_eq!(w.get(id).as_deref(), Some(&blocks[id as usize][..]));
                let mut out = [0u8; 7];
                assert!(w.copy_out(id, 93, &mut out));
                assert_eq!(out, blocks[id as usize][93..]);
            }
            assert!(matches!(w.held(20), Some(Held::Packed(_))) && matches!(w.held(39), Some(Held::Bytes(_))));
        }
        // Blocks that are not pure bases stay bytes and cost a whole block each.
        let mut w = SeqWindow::new(0, 8);
        w.push_all(0, (0..40u8).map(|i| Some(Block::from(vec![b'N', i]))), true);
        assert_eq!((w.first_id(), w.next_id()), (32, 40));
        assert_eq!(w.get(35).as_deref(), Some(&[b'N', 35][..]));
    }
}
