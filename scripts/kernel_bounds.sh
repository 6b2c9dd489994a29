#!/bin/sh
# The KernelBounds tests under Oclgrind, an OpenCL simulator that checks every access
# (docs/testing.md): on it each tensor has a buffer of its own exact size, so a kernel
# that reads or writes past a tensor is named here even where every value it stores is
# right. Fails on any error Oclgrind reports, as on a failed test.
#
#   scripts/kernel_bounds.sh build/bin/tl_model_tests [GTEST_FILTER]
#
# The default filter: KernelBounds (products and attention at ragged edges) and the kernel
# tests whose shapes are small enough for a simulator (about two and a half minutes in all;
# AttentionKernel's others take minutes each).
#
# -cl-opt-disable: Oclgrind 21.10's interpreter lacks intrinsics clang's optimizer makes
# (llvm.abs.i64); -Ucl_khr_fp16: it lists the extension but stops on a half constant.
set -u
tests=$1
filter=${2:-KernelBounds.*:AttentionKernel.OtherShapesSplitLongKeys:GatherKernel.*:MatMulKernel.*:RmsNormKernel.*:RopeKernel.*:SwiGluKernel.*:GeGluKernel.*:GeluKernel.*:ConcatKernel.*:ElementwiseKernel.*:ArgMaxKernel.*:ModKernel.*:CumSumKernel.*:TileKernel.*:GatherElementsKernel.*:TopKKernel.*:ClipKernel.*:OneHotKernel.*}
if ! command -v oclgrind >/dev/null 2>&1; then
  echo "kernel_bounds: oclgrind is not installed (Debian: oclgrind; scripts/setup.sh installs it)" >&2
  exit 1
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
TL_EXPECT_EXACT_BUFFERS=1 oclgrind --check-api --build-options "-cl-opt-disable -Ucl_khr_fp16" \
  "$tests" --gtest_filter="$filter" --gtest_brief=1 >"$log" 2>&1
code=$?
cat "$log"
if grep -qE "^(Invalid |Work-group divergence|Oclgrind - OpenCL runtime error)|OCLGRIND FATAL" "$log"; then
  echo "kernel_bounds: Oclgrind reported an error (above)" >&2
  exit 1
fi
exit $code
