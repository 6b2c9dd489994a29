#!/bin/sh
# Times tl-shape on a 32-layer graph made by repeating bytellama-past's last layer
# (shared weights: the graph's size is what matters here).
#   scripts/bench_shape.sh [LAYERS] [RUNS]      (defaults 32, 10; build first with make)
# Needs Debian's python3-onnx to build the graph (installed here if missing).
set -eu
cd "$(dirname "$0")/.."
layers=${1:-32}
runs=${2:-10}
bin=build/bin/tl-shape
[ -x "$bin" ] || { echo "bench_shape: build first (make)" >&2; exit 2; }
if ! /usr/bin/python3 -c 'import onnx' 2>/dev/null; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq python3-onnx >/dev/null
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
/usr/bin/python3 scripts/make_deep_model.py ../shared/models/bytellama-past/model.onnx "$layers" "$tmp/deep.onnx"
"$bin" "$tmp/deep.onnx" --emit text | grep -E "nodes:|left to execute|free symbols"

time_runs() {  # label, then the command; prints min and mean wall milliseconds
  label=$1; shift
  total=0; best=""
  i=0
  while [ "$i" -lt "$runs" ]; do
    t0=$(date +%s%N); "$@" >/dev/null; t1=$(date +%s%N)
    ms=$(( (t1 - t0) / 1000000 ))
    total=$((total + ms)); [ -z "$best" ] || [ "$ms" -lt "$best" ] && best=$ms
    i=$((i + 1))
  done
  echo "$label: min ${best} ms, mean $((total / runs)) ms over $runs runs"
}
size=$(du -h "$tmp/deep.onnx" | cut -f1)
echo "tl-shape on $layers layers ($size model):"
time_runs "  model -> shaped model (file)" "$bin" "$tmp/deep.onnx" -o "$tmp/out.onnx"
time_runs "  model -> --emit text        " "$bin" "$tmp/deep.onnx" --emit text
