//! Decode engines: the CPU reference decoder and the GPU seek kernel implement one trait and are checked
//! against each other.

use crate::error::Result;

/// Something that decodes whole blocks of one archive. Implementations hold an `Arc<ArchiveData>` and whatever
/// caches they need; the bytes they produce must equal the CPU reference decoder's, bit for bit.
pub trait BlockEngine: Send + Sync {
    /// A short name for logs and stats ("cpu", "gpu").
    fn name(&self) -> &'static str;

    /// Decodes the blocks `ids` (ascending, distinct, each `< block_count`) into `out[i]`, which the caller
    /// has sized to each block's decoded length. Errors name the block that failed.
    fn decode_blocks(&self, ids: &[u64], out: &mut [&mut [u8]]) -> Result<()>;

    /// Hands blocks `first..end` to `sink` in order, whole (the last block of the stream may be short), in
    /// pieces of any number of blocks, from a whole-range decode — for engines that have one (the GPU decodes
    /// the stream device-resident and copies it out), `None` for engines that do not (the caller then uses the
    /// CPU's sequential decoder). Every block is checked against the index hash before `sink` sees it; a block
    /// that fails is decoded again in place by `redo` (the CPU reference). `Some(Err)` means the engine could
    /// not produce the range (nothing more reaches `sink`) or `sink` failed.
    fn stream_blocks(&self, _first: u64, _end: u64, _redo: Redo<'_>, _sink: BytesSink<'_>) -> Option<Result<()>> {
        None
    }

    /// Does now what the first [`BlockEngine::stream_blocks`] call would otherwise start with (the GPU: the
    /// complete device-resident decode), so that a mount's first sequential reader does not wait for it. The
    /// default has nothing to prepare.
    fn prepare_stream(&self) -> Result<()> {
        Ok(())
    }
}

/// Decodes block `id` into the buffer on the CPU: how a whole-range engine repairs a block it got wrong.
pub type Redo<'a> = &'a (dyn Fn(u64, &mut [u8]) -> Result<()> + Sync);
/// Receives decoded bytes in stream order; an error stops the producer.
pub type BytesSink<'a> = &'a mut dyn FnMut(&[u8]) -> Result<()>;

pub mod auto;
pub mod cpu;
#[cfg(test)]
pub(crate) mod fake;
pub mod gpu;

/// Which engine decodes: `-o decoder=` / `--decoder`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DecoderChoice {
    Cpu,
    Gpu,
    /// Measure and pick: the GPU for batched and readahead work when it is faster, the CPU for small cold reads.
    #[default]
    Auto,
}

impl std::str::FromStr for DecoderChoice {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "cpu" => Ok(DecoderChoice::Cpu),
            "gpu" => Ok(DecoderChoice::Gpu),
            "auto" => Ok(DecoderChoice::Auto),
            _ => Err(format!("unknown decoder {s:?} (expected cpu, gpu or auto)")),
        }
    }
}
