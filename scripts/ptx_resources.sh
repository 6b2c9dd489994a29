#!/bin/sh
# Registers, spills and local memory of the tensor-core program's kernels for sm_90, without
# a GPU: clang compiles the OpenCL C to NVPTX, libclc supplies the builtins, ptxas (a CUDA
# toolkit's) assembles it. NVIDIA's own OpenCL compiler allots within a few registers of
# this for some kernels (qgemm_e0m4: 143 there, 147 here) and far fewer for others
# (qgemm64_mma_i8_e0m4: 94 there, 125 here; 04431d7's 75 and 125): a guide above 128, not
# below it. NVIDIA's own counts: kernel_spills.py's PTX, then --ptx-in. Needs clang-15, llvm-15 and libclc-15 (Debian)
# and ptxas (PTXAS, default /usr/local/cuda/bin/ptxas, else the one on PATH).
#   scripts/ptx_resources.sh [--rev REV] [--ptx-out FILE | --ptx-in FILE] [KERNEL ...]
#     (default: every kernel of gemm.cl's program)
#   --rev REV       the kernels of git revision REV (to compare builds)
#   --ptx-out FILE  stop at the PTX, written to FILE (where there is no ptxas: carry it to
#                   the GPU machine, whose CUDA toolkit has one, and read it there with --ptx-in)
#   --ptx-in FILE   assemble FILE (made by --ptx-out, or it xz-compressed; no clang needed)
# attention.cl is left out: libclc has no nvptx exp2f.
set -eu
cd "$(dirname "$0")/.."
rev="" out="" in=""
while [ $# -gt 0 ]; do
  case "$1" in
    --rev) rev=$2; shift 2 ;;
    --ptx-out) out=$2; shift 2 ;;
    --ptx-in) in=$2; shift 2 ;;
    *) break ;;
  esac
done
PTXAS=${PTXAS:-/usr/local/cuda/bin/ptxas}
[ -x "$PTXAS" ] || PTXAS=ptxas
T=nvptx64-unknown-nvidiacl
d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
if [ -z "$in" ]; then
  for f in common dequant mma gemm; do
    if [ -n "$rev" ]; then git show "$rev:kernels/$f.cl"; else cat "kernels/$f.cl"; fi
  done > "$d/k.cl"
  clang-15 -x cl -cl-std=CL1.2 -target $T -Xclang -finclude-default-header -Dasm=__asm__ -DTL_MMA -DTL_NV \
    -DTL_LOCAL_MEM=49152 -DTL_MAX_WG=1024 -O2 -emit-llvm -c -o "$d/k.bc" "$d/k.cl"
  llvm-link-15 "$d/k.bc" /usr/lib/clc/nvptx64--nvidiacl.bc -o "$d/l.bc" 2>/dev/null
  opt-15 -O2 "$d/l.bc" -o "$d/o.bc"
  llc-15 -mtriple=$T -mcpu=sm_86 -mattr=+ptx75 -O3 "$d/o.bc" -o "$d/k.ptx"
  if [ -n "$out" ]; then cp "$d/k.ptx" "$out"; exit 0; fi
  in=$d/k.ptx
fi
entries=""
for k in "$@"; do entries="$entries -e $k"; done  # (only those assembled: faster)
case "$in" in  # (python's lzma where there is no xz)
  *.xz) { xz -dc "$in" 2>/dev/null || python3 -c 'import lzma, sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())' "$in"; } > "$d/in.ptx"
        in=$d/in.ptx ;;
esac
# shellcheck disable=SC2086
"$PTXAS" -arch=sm_90 -v $entries "$in" -o "$d/k.cubin" 2>&1 |
  awk '/Compiling entry function/ {gsub(/[\047]/, "", $7); k = $7}
       /spill stores/ {sp = $5 " B spill stores"}
       /Used [0-9]+ registers/ {printf "%-28s %3d registers, %s, %s\n", k, $5, sp, $0 ~ /smem/ ? $(NF - 2) " B local" : "0 B local"}'
