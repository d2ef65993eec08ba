#!/usr/bin/env python3
"""The SASS of a kernel in kernels/decode.cu, with no GPU and no CUDA toolkit: NVRTC (scripts/fetch-nvrtc.sh)
compiles the file for sm_90 to a cubin, and cuobjdump/nvdisasm (two pinned PyPI wheels, fetched into
target/sass-tools/) disassemble it. Then one line per loop of the kernel: its address range, instructions, and how
many shared loads (LDS), global loads (LDG) and shared stores (STS) it holds, so that a change to a hot loop can be
counted before any device time is spent on it. Session 25 used it to take the staged K = 1 chain from 66 to 52
instructions a literal, and the H200 then showed that the count was not what bound it (docs/BENCH-GPU.md): count
here, but time only on the device.

Usage: python3 scripts/kernel-sass.py KERNEL [--dump FILE] [-- NVRTC_OPTION ...]
"""
import hashlib
import os
import re
import subprocess
import sys
import urllib.request
import zipfile

from nvrtc_compile import REPO, compile_decode_cu

tools = os.path.join(REPO, "target", "sass-tools")
WHEELS = [  # (name, url, sha256)
    ("cuobjdump", "https://files.pythonhosted.org/packages/07/70/2cea1817edfd186883b357cffa78dd47757ba33e4eef3bd0141a"
     "4f4b4109/nvidia_cuda_cuobjdump-13.5.37-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
     "38780fee50863252a0b8926357faa91615ca1c8346490563f33a06100cd73f58"),
    ("nvdisasm", "https://files.pythonhosted.org/packages/64/4a/c84a14209a549d97831a02d111d943f47c995d4d3beaa3416daa"
     "3b534abb/nvidia_cuda_nvdisasm-13.5.37-py3-none-manylinux2014_x86_64.manylinux_2_17_x86_64.whl",
     "d3fdbdd49fa53e2e4aacd3db8259d052bd2b049ececdcb69e92e083c6728e7ca"),
]


def fetch_tools():
    bindir = os.path.join(tools, "nvidia", "cu13", "bin")
    for name, url, sha in WHEELS:
        if os.path.exists(os.path.join(bindir, name)):
            continue
        os.makedirs(tools, exist_ok=True)
        data = urllib.request.urlopen(url).read()
        if hashlib.sha256(data).hexdigest() != sha:
            sys.exit(f"{name}: the wheel's sha256 is not the pinned one")
        path = os.path.join(tools, name + ".whl")
        open(path, "wb").write(data)
        with zipfile.ZipFile(path) as z:
            z.extract(f"nvidia/cu13/bin/{name}", tools)
        os.chmod(os.path.join(bindir, name), 0o755)
        os.remove(path)
    return bindir


def main():
    args = sys.argv[1:]
    options = args[args.index("--") + 1:] if "--" in args else []
    args = args[:args.index("--")] if "--" in args else args
    dump = args[args.index("--dump") + 1] if "--dump" in args else None
    if not args or args[0].startswith("-"):
        sys.exit(__doc__)
    kernel = args[0]
    bindir = fetch_tools()
    path = os.path.join(tools, "decode.cubin")
    open(path, "wb").write(compile_decode_cu(options, cubin=True)[1])
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    sass = subprocess.run([os.path.join(bindir, "cuobjdump"), "-sass", "-fun", kernel, path], check=True,
                          capture_output=True, text=True, env=env).stdout
    ins = []
    for line in sass.splitlines():
        m = re.match(r"\s*/\*([0-9a-f]+)\*/\s+(.*?)\s*;", line)
        if m:
            ins.append((int(m.group(1), 16), m.group(2)))
    if not ins:
        sys.exit(f"no SASS for kernel {kernel}")
    if dump:
        open(dump, "w").write("\n".join(f"{a:06x}  {t}" for a, t in ins) + "\n")
    at = {a: i for i, (a, _) in enumerate(ins)}
    print(f"{kernel}: {len(ins)} instructions")
    # A loop: a branch back to an earlier instruction; its body runs from the target to the branch.
    for i, (a, text) in enumerate(ins):
        m = re.search(r"\bBRA (0x[0-9a-f]+)", text)
        if not m or int(m.group(1), 16) >= a or int(m.group(1), 16) not in at:
            continue
        body = [t for _, t in ins[at[int(m.group(1), 16)]:i + 1]]
        count = {k: sum(1 for t in body if (t.split()[1] if t.startswith("@") else t.split()[0]).startswith(k))
                 for k in ("LDS", "LDG", "STS", "STG")}
        print(f"  loop {m.group(1)}..{a:#x}: {len(body)} instructions, "
              + ", ".join(f"{k} {v}" for k, v in count.items()))


main()
