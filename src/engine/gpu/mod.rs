//! The GPU engine: NVRTC-compiled seek kernels from `kernels/`, driven through cudarc.

use std::sync::Arc;

use crate::engine::BlockEngine;
use crate::error::{Error, Result};
use crate::format::ArchiveData;

/// Decodes blocks on an NVIDIA GPU. Construction fails (with a message for one log line) when there is no GPU,
/// no driver or no NVRTC; callers then use the CPU engine.
pub struct GpuEngine {
    _data: Arc<ArchiveData>,
}

impl GpuEngine {
    pub fn try_new(data: Arc<ArchiveData>) -> Result<GpuEngine> {
        let _ = data;
        Err(Error::Gpu("GPU engine not built yet".into()))
    }
}

impl BlockEngine for GpuEngine {
    fn name(&self) -> &'static str {
        "gpu"
    }

    fn decode_blocks(&self, _ids: &[u64], _out: &mut [&mut [u8]]) -> Result<()> {
        Err(Error::Gpu("GPU engine not built yet".into()))
    }
}
