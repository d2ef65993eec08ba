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
}

pub mod cpu;
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
