#!/usr/bin/env python3
"""Registers, stack frames and spills of every kernel in kernels/decode.cu, as ptxas reports them, with no GPU
and no CUDA toolkit: NVRTC (from scripts/fetch-nvrtc.sh) compiles the file for sm_90 with `-Xptxas=-v` and the
log is printed, one kernel a line. Run it before spending device time on a kernel change: session 19's copy
descriptors went from 28 registers a thread to 78 (and a later version to 352-byte stack frames), which cost the
H200 more than they saved.

Usage: python3 scripts/kernel-registers.py [KERNEL_NAME_SUBSTRING]
"""
import re
import sys

from nvrtc_compile import compile_decode_cu

text, _ = compile_decode_cu(["-Xptxas=-v"])
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
