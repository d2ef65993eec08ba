"""kernels/decode.cu (with its parts in place, as the host puts them: kernel_source in src/engine/gpu/device/compile.rs)
through NVRTC for sm_90, for the scripts that look at what ptxas made of it without a GPU
(kernel-registers.py, kernel-sass.py): NVRTC comes from scripts/fetch-nvrtc.sh (a pinned PyPI wheel)."""
import ctypes
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def kernel_source():
    """kernels/decode.cu with each `#include "part"` line replaced by kernels/part's text."""
    kernels = os.path.join(REPO, "kernels")

    def part(m):
        return open(os.path.join(kernels, m.group(1))).read()

    return re.sub(r'^#include "([a-z_]+\.cuh)"$', part, open(os.path.join(kernels, "decode.cu")).read(), flags=re.M)


def compile_decode_cu(options, cubin=False):
    """Compiles kernels/decode.cu with -std=c++17 -arch=sm_90 and `options`; returns (log, cubin bytes or None).
    Exits with the log when the compile fails."""
    libdir = subprocess.run(["bash", os.path.join(REPO, "scripts", "fetch-nvrtc.sh")], check=True,
                            capture_output=True, text=True).stdout.strip()
    nvrtc = ctypes.CDLL(os.path.join(libdir, "libnvrtc.so.12"))
    source = kernel_source().encode()
    prog = ctypes.c_void_p()
    if nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source, b"decode.cu", 0, None, None) != 0:
        sys.exit("nvrtcCreateProgram failed")
    opts = [b"-std=c++17", b"-arch=sm_90"] + [o.encode() for o in options]
    rc = nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
    size = ctypes.c_size_t()
    nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
    log = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetProgramLog(prog, log)
    if rc != 0:
        sys.exit(log.value.decode())
    if not cubin:
        return log.value.decode(), None
    nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    nvrtc.nvrtcGetCUBIN(prog, buf)
    return log.value.decode(), buf.raw
