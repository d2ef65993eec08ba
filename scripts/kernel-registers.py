#!/usr/bin/env python3
"""Registers, stack frames and spills of every kernel in kernels/decode.cu, as ptxas reports them, with no GPU
and no CUDA toolkit: NVRTC (from scripts/fetch-nvrtc.sh) compiles the file for sm_90 with `-Xptxas=-v` and the
log is printed, one kernel a line. Run it before spending device time on a kernel change: session 19's copy
descriptors went from 28 registers a thread to 78 (and a later version to 352-byte stack frames), which cost the
H200 more than they saved.

Usage: python3 scripts/kernel-registers.py [KERNEL_NAME_SUBSTRING]
"""
import ctypes
import os
import re
import subprocess
import sys

repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
libdir = subprocess.run(["bash", os.path.join(repo, "scripts", "fetch-nvrtc.sh")], check=True,
                        capture_output=True, text=True).stdout.strip()
nvrtc = ctypes.CDLL(os.path.join(libdir, "libnvrtc.so.12"))
source = open(os.path.join(repo, "kernels", "decode.cu"), "rb").read()
prog = ctypes.c_void_p()
if nvrtc.nvrtcCreateProgram(ctypes.byref(prog), source, b"decode.cu", 0, None, None) != 0:
    sys.exit("nvrtcCreateProgram failed")
opts = [b"-std=c++17", b"-arch=sm_90", b"-Xptxas=-v"]
rc = nvrtc.nvrtcCompileProgram(prog, len(opts), (ctypes.c_char_p * len(opts))(*opts))
size = ctypes.c_size_t()
nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
log = ctypes.create_string_buffer(size.value)
nvrtc.nvrtcGetProgramLog(prog, log)
text = log.value.decode()
if rc != 0:
    sys.exit(text)
want = sys.argv[1] if len(sys.argv) > 1 else ""
kernel = None
for line in text.splitlines():
    m = re.search(r"Function properties for (\w+)", line)
    if m:
        kernel = m.group(1)
        frame = ""
        continue
    if kernel and "stack frame" in line:
        frame = line.split(".", 1)[-1].strip()
    elif kernel and "Used" in line and "registers" in line:
        if want in kernel:
            print(f"{kernel}: {line.split(':', 1)[-1].strip()}; {frame}")
        kernel = None
