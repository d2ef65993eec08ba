#!/usr/bin/env bash
# Fetches NVRTC (the CUDA runtime compiler, no GPU or driver needed) from PyPI into target/nvrtc/ and prints the
# directory that holds libnvrtc.so, so that machines without CUDA (this repository's CI, a laptop) can compile
# kernels/decode.cu: `LD_LIBRARY_PATH=$(bash scripts/fetch-nvrtc.sh) cargo test kernels_compile` turns the
# kernel compile test from a skip into a real check. The wheel is pinned by version and sha256. NVRTC 12.9
# compiles the kernels for sm_90 as the H200's NVRTC 13.0 does; code generation is only checked on the H200.
# Exits non-zero (printing nothing on stdout) when the download fails.
set -euo pipefail
cd "$(dirname "$0")/.."
url="https://files.pythonhosted.org/packages/b8/85/e4af82cc9202023862090bfca4ea827d533329e925c758f0cde964cb54b7/nvidia_cuda_nvrtc_cu12-12.9.86-py3-none-manylinux2010_x86_64.manylinux_2_12_x86_64.whl"
sha256="210cf05005a447e29214e9ce50851e83fc5f4358df8b453155d5e1918094dcb4"
dir="$PWD/target/nvrtc"
lib="$dir/nvidia/cuda_nvrtc/lib"
if [ ! -e "$lib/libnvrtc.so.12" ]; then
  mkdir -p "$dir"
  curl -sSfL --retry 3 -o "$dir/nvrtc.whl" "$url" >&2
  echo "$sha256  $dir/nvrtc.whl" | sha256sum -c --quiet - >&2
  (cd "$dir" && unzip -qo nvrtc.whl 'nvidia/cuda_nvrtc/lib/*' && rm -f nvrtc.whl) >&2
fi
echo "$lib"
