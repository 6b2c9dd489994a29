#!/bin/sh
# Runs tl-run's checks, the quantized kernels' tests, tl-bench --kernels and the quantized
# models' perplexity on the device machine (NVIDIA OpenCL). Prepare here, then run there
# through the device tool with `carry: ["devdata"]`:
#   scripts/device_check.sh --prepare        bundle binaries + shared models and encoders into devdata/
#   scripts/device_check.sh [quant]          (on the device) writes $OUT/device_check.log;
#                                            `quant` runs the quantization part only
set -u
if [ "${1:-}" = "--prepare" ]; then
  cd "$(dirname "$0")/.."
  rm -rf devdata && mkdir -p devdata/models
  ../shared/scripts/device-bundle.sh devdata/bin build/bin/tl-run build/bin/tl-shape build/bin/tl-quant \
    build/bin/tl-bench build/bin/tl-fuse build/bin/tl-plan build/bin/tl-ctxswap build/bin/tl_model_tests >/dev/null
  for d in ../shared/models/*-*past; do
    [ "$(basename "$d")" = bytellama-past ] && continue  # tracked as models/bytellama-past
    cp -r "$d" devdata/models/
  done
  cp ../shared/models/bytellama-heldout.txt devdata/
  cp -r ../shared/encoders devdata/encoders
  mkdir -p .git/info && grep -qx '/devdata/' .git/info/exclude 2>/dev/null || echo /devdata/ >> .git/info/exclude
  du -sh devdata
  exit 0
fi
lib=$(find / -name 'libnvidia-opencl.so.1' 2>/dev/null | head -n 1)
mkdir -p /etc/OpenCL/vendors && echo "$lib" > /etc/OpenCL/vendors/nvidia.icd
export LD_LIBRARY_PATH=$PWD/devdata/bin
log=${OUT:-.}/device_check.log
run=devdata/bin/tl-run
checks() {
  for d in devdata/models/* models/bytellama-past tests/models/dynamo/*; do
    printf '== check %s: ' "$d"
    $run "$d/model.onnx" --check "$d" --device NVIDIA > /tmp/check.txt 2>&1; rc=$?
    echo "rc=$rc $(grep -c PASS /tmp/check.txt) PASS, $(grep -c FAIL /tmp/check.txt) FAIL"
    grep -E "logits|FAIL|error" /tmp/check.txt | head -4
  done
  echo "== generate"; $run models/bytellama-past/model.onnx --device NVIDIA --generate --prompt "def " -n 200
  echo "== perplexity"; $run models/bytellama-past/model.onnx --device NVIDIA --perplexity devdata/bytellama-heldout.txt --window 512
  echo "== profile"; $run models/bytellama-past/model.onnx --device NVIDIA --generate --prompt "def " -n 64 --profile >/dev/null
}
quant() {
  echo "== quantized kernels vs Eigen"; devdata/bin/tl_model_tests --gtest_filter='Schemes/*' 2>&1 | tail -3
  echo "== tl-bench --kernels"; devdata/bin/tl-bench --kernels --kernel-runs 50 --device NVIDIA
  for s in q8 e0m4 int4 w4a8 q3h; do
    devdata/bin/tl-quant models/bytellama-past/model.onnx --scheme $s -o /tmp/q.$s.onnx 2>/dev/null
    printf '== perplexity %s: ' $s
    $run /tmp/q.$s.onnx --device NVIDIA --perplexity devdata/bytellama-heldout.txt --window 512 2>/dev/null
  done
  echo "== e0m4 check, --atol 2.7"; $run /tmp/q.e0m4.onnx --device NVIDIA --check models/bytellama-past --atol 2.7 | tail -3
  echo "== e0m4 generate"; $run /tmp/q.e0m4.onnx --device NVIDIA --generate --prompt "def " -n 120
}
{
  echo "== devices"; $run --list-devices
  nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
  [ "${1:-}" = quant ] || checks
  quant
} > "$log" 2>&1
tail -c 6000 "$log"
