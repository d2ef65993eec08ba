//! The kernels' compilation: kernels/decode.cu with its parts in place (`kernel_source`) through NVRTC, once a
//! process, for the GPU's own architecture, its PTX kept in the kernel cache (`super::super::kernel_cache`) for
//! the next process. The measurement knobs that change the kernel source are passed here as `-D` defines.

use super::*;

/// kernels/decode.cu, the one translation unit NVRTC compiles, and the parts it includes (`#include "NAME"`), in
/// the order it includes them, embedded so that the binary is self-contained.
const KERNEL_ROOT: &str = include_str!("../../../../kernels/decode.cu");
const KERNEL_PARTS: [(&str, &str); 10] = [
    ("common.cuh", include_str!("../../../../kernels/common.cuh")),
    ("words.cuh", include_str!("../../../../kernels/words.cuh")),
    ("literals.cuh", include_str!("../../../../kernels/literals.cuh")),
    ("tokens.cuh", include_str!("../../../../kernels/tokens.cuh")),
    ("parse.cuh", include_str!("../../../../kernels/parse.cuh")),
    ("seek.cuh", include_str!("../../../../kernels/seek.cuh")),
    ("chase.cuh", include_str!("../../../../kernels/chase.cuh")),
    ("resolve.cuh", include_str!("../../../../kernels/resolve.cuh")),
    ("levels.cuh", include_str!("../../../../kernels/levels.cuh")),
    ("flow.cuh", include_str!("../../../../kernels/flow.cuh")),
];

/// The kernel source NVRTC compiles: kernels/decode.cu with each part's text in place of its `#include` line. One
/// text, because NVRTC would otherwise need the parts as files on an include path, and because the kernel cache's
/// key hashes the source (scripts/nvrtc_compile.py does the same for the SASS scripts).
pub fn kernel_source() -> &'static str {
    static SOURCE: OnceLock<String> = OnceLock::new();
    SOURCE.get_or_init(|| expand_includes(KERNEL_ROOT, &KERNEL_PARTS))
}

/// `root` with each line `#include "NAME"` of a part in `parts` replaced by its text. A line naming no part stays
/// as it is, for NVRTC to refuse by name (a test checks that none is left).
fn expand_includes(root: &str, parts: &[(&str, &str)]) -> String {
    let mut out = String::with_capacity(root.len() + parts.iter().map(|(_, p)| p.len()).sum::<usize>());
    for line in root.split_inclusive('\n') {
        let name = line.trim_end().strip_prefix("#include \"").and_then(|l| l.strip_suffix('"'));
        match name.and_then(|n| parts.iter().find(|(p, _)| *p == n)) {
            Some((_, text)) => out.push_str(text),
            None => out.push_str(line),
        }
    }
    out
}

/// Copies of a K = 1 CTA's context model in shared memory, log2 (kernels/literals.cuh `K1_CTX_COPIES_LOG`, K1Rows).
const K1_CTX_COPIES_LOG: u32 = 3;

/// [`K1_CTX_COPIES_LOG`], or ACEAPEX_GPU_CTX_COPIES_LOG (0..=3; measurements).
fn ctx_copies_log() -> u32 {
    static LOG: OnceLock<u32> = OnceLock::new();
    env_knob(&LOG, "ACEAPEX_GPU_CTX_COPIES_LOG", K1_CTX_COPIES_LOG, |l| l <= 3)
}

/// kernels/words.cuh `K1_RING_BYTES` (a power of two, 512..=4096), as ACEAPEX_GPU_K1_RING_BYTES sets it
/// (measurements); `parse_k1_staged`'s launches size their shared memory by it.
pub(super) fn k1_ring_bytes() -> u32 {
    static BYTES: OnceLock<u32> = OnceLock::new();
    env_knob(&BYTES, "ACEAPEX_GPU_K1_RING_BYTES", K1_RING_BYTES, |b: u32| {
        b.is_power_of_two() && (512..=4096).contains(&b)
    })
}

/// kernels/words.cuh `K1_STAGED_PREFETCH`, as ACEAPEX_GPU_K1_STAGED_PREFETCH (0 or 1) sets it (measurements).
fn k1_staged_prefetch() -> u32 {
    static ON: OnceLock<u32> = OnceLock::new();
    env_knob(&ON, "ACEAPEX_GPU_K1_STAGED_PREFETCH", 1, |v| v <= 1)
}

/// The NVRTC architecture option for a compute capability (kernels need warp reductions: sm_80 or later).
pub(super) fn arch_for(major: i32, minor: i32) -> Result<&'static str> {
    Ok(match (major, minor) {
        (8, 0) => "sm_80",
        (8, 6) => "sm_86",
        (8, 7) => "sm_87",
        (8, 9) => "sm_89",
        (9, 0) => "sm_90",
        (10, 0) => "sm_100",
        (12, 0) => "sm_120",
        _ => {
            return Err(Error::Gpu(format!("compute capability {major}.{minor} is not supported (need 8.x or newer)")))
        }
    })
}

/// Records of kernels/parse.cuh `k1_clocks` (two a unit) when ACEAPEX_GPU_K1_CLOCKS=1 (a measurement: the linear
/// parse's threads time their chains, `Device::k1_clocks`), else 0: not compiled in.
pub(super) fn k1_clock_records() -> u32 {
    static N: OnceLock<u32> = OnceLock::new();
    env_knob(&N, "ACEAPEX_GPU_K1_CLOCKS", 0, |v| v <= 1) << 17
}

/// NVRTC's options for the kernels.
pub(super) fn compile_options() -> Vec<String> {
    let mut options = vec!["-std=c++17".to_string()];
    if resident::token_bucket_log() != resident::TOKEN_BUCKET_LOG {
        options.push(format!("-DTOKEN_BUCKET_LOG={}", resident::token_bucket_log()));
    }
    if ctx_copies_log() != K1_CTX_COPIES_LOG {
        options.push(format!("-DK1_CTX_COPIES_LOG={}u", ctx_copies_log()));
    }
    if k1_ring_bytes() != K1_RING_BYTES {
        options.push(format!("-DK1_RING_BYTES={}", k1_ring_bytes()));
    }
    if k1_clock_records() != 0 {
        options.push(format!("-DK1_CLOCKS={}", k1_clock_records()));
    }
    if k1_staged_prefetch() != 1 {
        options.push(format!("-DK1_STAGED_PREFETCH={}", k1_staged_prefetch()));
    }
    options
}

/// Compiles the kernels for `arch` with NVRTC, and stores the PTX in the kernel cache (best effort).
///
/// Said at `info`, with its time: on a machine that has not compiled this build's kernels yet it is the whole of a
/// first GPU start (H200, session 35 run 8: 42 s, then 0.4 s a process from the cache), and a mount with
/// decoder=gpu waits for it before it mounts.
pub(super) fn compile_fresh(arch: &'static str, cache: Option<&std::path::Path>) -> std::result::Result<Ptx, String> {
    let where_to = cache.map_or_else(|| "no kernel cache".to_string(), |p| format!("cached in {}", p.display()));
    tracing::info!("compiling the GPU kernels for {arch} with NVRTC (once per build and machine: {where_to})");
    let started = std::time::Instant::now();
    let opts = CompileOptions { arch: Some(arch), options: compile_options(), ..Default::default() };
    let ptx = compile_ptx_with_opts(kernel_source(), opts).map_err(|e| format!("NVRTC: {e}"))?;
    tracing::info!("GPU kernels compiled in {:.1} s", started.elapsed().as_secs_f64());
    if let Some(path) = cache {
        if let Err(e) = kernel_cache::write(path, &ptx.to_src()) {
            tracing::debug!("kernel cache: not written to {} ({e})", path.display());
        }
    }
    Ok(ptx)
}

/// The kernel cache's file for `arch` (None when the cache is off or has no directory).
pub(super) fn kernel_cache_file(arch: &str) -> Option<std::path::PathBuf> {
    kernel_cache::default_dir().map(|dir| kernel_cache::file_for(&dir, kernel_source(), &compile_options(), arch))
}

/// The kernels for `arch`, once per process: from the kernel cache when an intact copy is there (the second
/// value is then true), else compiled by NVRTC (and stored for the next process).
pub(super) fn compiled_ptx(arch: &'static str) -> Result<(Ptx, bool)> {
    static PTX: OnceLock<std::result::Result<(&'static str, Ptx, bool), String>> = OnceLock::new();
    let entry = PTX.get_or_init(|| {
        let cache = kernel_cache_file(arch);
        match cache.as_deref().and_then(kernel_cache::read) {
            Some(src) => Ok((arch, Ptx::from_src(src), true)),
            None => compile_fresh(arch, cache.as_deref()).map(|p| (arch, p, false)),
        }
    });
    match entry {
        Ok((a, ptx, cached)) if *a == arch => Ok((ptx.clone(), *cached)),
        Ok((a, ..)) => Err(Error::Gpu(format!("kernels were compiled for {a}, this GPU needs {arch}"))),
        Err(e) => Err(Error::Gpu(e.clone())),
    }
}

/// Compiles the kernel source for `arch` without a GPU (NVRTC only): lets tests check the .cu file.
pub fn compile_check(arch: &'static str) -> std::result::Result<usize, String> {
    compile_fresh(arch, None).map(|p| p.to_src().len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every part is included once, in place of its line, and no include is left for NVRTC to look for.
    #[test]
    fn every_kernel_part_is_put_in_place_once() {
        let source = kernel_source();
        assert!(!source.contains("#include"), "an include names no embedded part");
        for (name, text) in KERNEL_PARTS {
            assert_eq!(KERNEL_ROOT.matches(&format!("#include \"{name}\"\n")).count(), 1, "{name}");
            assert_eq!(source.matches(text).count(), 1, "{name}");
        }
        let parts: usize = KERNEL_PARTS.iter().map(|(n, t)| t.len() - format!("#include \"{n}\"\n").len()).sum();
        assert_eq!(source.len(), KERNEL_ROOT.len() + parts);
    }

    #[test]
    fn an_unknown_include_stays_for_nvrtc_to_name() {
        let root = "a\n#include \"x.cuh\"\n#include \"y.cuh\"\nb";
        assert_eq!(expand_includes(root, &[("x.cuh", "X\n")]), "a\nX\n#include \"y.cuh\"\nb");
    }
}
