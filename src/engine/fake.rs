//! A whole-range engine for tests of the callers of [`BlockEngine::stream_blocks`] (the mount's stream runs,
//! `cat` of genome files): it decodes on the CPU, hands blocks over one per sink call or all in one call (as
//! the GPU hands over 64 MiB pieces), and fails where a test asks it to.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::cpu::CpuEngine;
use super::{BlockEngine, BytesSink, Redo};

pub struct FakeWholeRange {
    pub cpu: CpuEngine,
    /// Fails with a GPU error when a run reaches this block, after handing over the blocks before it (a run that
    /// does not include it succeeds).
    pub fail_at: Option<u64>,
    /// All blocks of a call in one sink call, instead of one block per sink call.
    pub all_at_once: bool,
    /// `stream_blocks` calls so far.
    pub calls: Arc<AtomicU64>,
}

impl FakeWholeRange {
    pub fn new(cpu: CpuEngine, fail_at: Option<u64>, all_at_once: bool) -> FakeWholeRange {
        FakeWholeRange { cpu, fail_at, all_at_once, calls: Arc::new(AtomicU64::new(0)) }
    }
}

impl BlockEngine for FakeWholeRange {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn decode_blocks(&self, ids: &[u64], out: &mut [&mut [u8]]) -> crate::Result<()> {
        self.cpu.decode_blocks(ids, out)
    }

    fn stream_blocks(&self, first: u64, end: u64, _redo: Redo<'_>, sink: BytesSink<'_>) -> Option<crate::Result<()>> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        let failing = self.fail_at.filter(|f| (first..end).contains(f));
        let stop = failing.unwrap_or(end);
        let mut held = Vec::new();
        for id in first..stop {
            let mut buf = vec![0u8; self.cpu.data().block_len(id) as usize];
            if let Err(e) = self.cpu.decode_block(id, &mut buf) {
                return Some(Err(e));
            }
            if self.all_at_once {
                held.extend_from_slice(&buf);
            } else if let Err(e) = sink(&buf) {
                return Some(Err(e));
            }
        }
        if self.all_at_once {
            if let Err(e) = sink(&held) {
                return Some(Err(e));
            }
        }
        Some(match failing {
            Some(f) => Err(crate::Error::Gpu(format!("injected failure at block {f}"))),
            None => Ok(()),
        })
    }
}
