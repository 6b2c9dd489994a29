"""Builds tl's OpenCL kernels (kernels/*.cl, common.cl first, as the binaries embed them)
through the first GPU's driver and lists each kernel whose PTX has a local depot: private
arrays or spills the compiler put in memory, a load and a store per access (on the H100
attention_gqa_f32's accumulators were, docs/tl-bench.md session 9). NVIDIA only (its
program binaries are PTX). Run on the device: python3 scripts/kernel_spills.py [LOCAL_MEM [PTX_FILE]];
PTX_FILE receives the whole PTX (to read what a kernel compiled to: fences, atomics; its
registers: scripts/ptx_resources.sh --ptx-in PTX_FILE). CL_OPTIONS: more build options
(CL_OPTIONS="-DTL_MMA -DTL_NV" with CL_FILES="common.cl dequant.cl mma.cl gemm.cl attention.cl":
the tensor-core program as KernelLibrary builds it)."""
import ctypes
import glob
import os
import re
import sys

cl = ctypes.CDLL("libOpenCL.so.1")
vp = ctypes.c_void_p
count = ctypes.c_uint32()
cl.clGetPlatformIDs(0, None, ctypes.byref(count))
platforms = (vp * count.value)()
cl.clGetPlatformIDs(count.value, platforms, None)
dev = vp()
CL_DEVICE_TYPE_GPU = 4
if not any(cl.clGetDeviceIDs(vp(p), ctypes.c_uint64(CL_DEVICE_TYPE_GPU), 1, ctypes.byref(dev), None) == 0 for p in platforms):
    sys.exit("kernel_spills: no OpenCL GPU")
err = ctypes.c_int()
cl.clCreateContext.restype = vp
ctx = cl.clCreateContext(None, 1, ctypes.byref(dev), None, None, ctypes.byref(err))
# CL_FILES: the files of kernels/ to build, in order (the tensor-core program's:
# "common.cl dequant.cl mma.cl gemm.cl attention.cl"); default all, common.cl first
files = ["kernels/" + f for f in os.environ.get("CL_FILES", "").split()] or ["kernels/common.cl"] + sorted(
    f for f in glob.glob("kernels/*.cl") if not f.endswith("common.cl"))
src = ctypes.c_char_p("".join(open(f).read() + "\n" for f in files).encode())
cl.clCreateProgramWithSource.restype = vp
prog = cl.clCreateProgramWithSource(vp(ctx), 1, ctypes.byref(src), None, ctypes.byref(err))
local_mem = sys.argv[1] if len(sys.argv) > 1 else "49152"  # the H100's, as KernelLibrary passes it (and 1024 items)
extra = os.environ.get("CL_OPTIONS", "")  # e.g. "-DTL_MMA -DTL_NV": the tensor-core program, as KernelLibrary builds it
if cl.clBuildProgram(vp(prog), 1, ctypes.byref(dev), f"-cl-std=CL1.2 -DTL_LOCAL_MEM={local_mem} -DTL_MAX_WG=1024 {extra}".encode(), None, None):
    sys.exit("kernel_spills: the kernels did not build")
CL_PROGRAM_BINARY_SIZES, CL_PROGRAM_BINARIES = 0x1165, 0x1166
size = ctypes.c_size_t()
cl.clGetProgramInfo(vp(prog), CL_PROGRAM_BINARY_SIZES, ctypes.sizeof(size), ctypes.byref(size), None)
buf = ctypes.create_string_buffer(size.value)
ptrs = (ctypes.c_char_p * 1)(ctypes.cast(buf, ctypes.c_char_p))
cl.clGetProgramInfo(vp(prog), CL_PROGRAM_BINARIES, ctypes.sizeof(ptrs), ptrs, None)
if len(sys.argv) > 2:
    open(sys.argv[2], "wb").write(buf.raw.rstrip(b"\0"))
entry, found = None, 0
for line in buf.raw.decode(errors="replace").splitlines():
    m = re.match(r"\s*\.entry (\w+)", line)
    if m:
        entry = m.group(1)
    m = re.search(r"\.local .*__local_depot\d+\[(\d+)\]", line)
    if m and entry:
        print(f"{entry}: {m.group(1)} bytes in local memory")
        found += 1
print(f"kernel_spills: {found} kernels with a local depot")
