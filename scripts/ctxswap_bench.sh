#!/bin/sh
# Issue 11's replay tables: for each context-switching pattern a trace, then tl-ctxswap
# replay of the five policies at budgets of 2 and 8 contexts' worth (a context's worth:
# the trace's mean tokens per context times CHANNELS floats of KV a token, uncompressed).
#   scripts/ctxswap_bench.sh MODEL TEXT OUTDIR [CONTEXTS CALLS SCALE]
# Env: B (binaries, default build/bin), CHANNELS (default 1024: bytellama's 4 layers x k, v
# x 4 heads x 32), DEVICE (tl-run --list-devices). Writes OUTDIR/costs.txt, PATTERN.trace
# and PATTERN-Kctx.md, and prints every table.
set -eu
model=$1 text=$2 out=$3 contexts=${4:-16} calls=${5:-120} scale=${6:-0.1}
B=${B:-build/bin}
CHANNELS=${CHANNELS:-1024}
dev=${DEVICE:+--device $DEVICE}
mkdir -p "$out"
$B/tl-ctxswap calibrate --model "$model" $dev --swap-dir "$out/swap" -o "$out/costs.txt"
cat "$out/costs.txt"
for pattern in random markov gaussian; do
  $B/tl-ctxswap trace --texts "$text" --pattern $pattern --contexts "$contexts" --calls "$calls" --scale "$scale" \
    --generate 8 -o "$out/$pattern.trace"
  tokens=$(awk -F'\t' '!/^#/ { t += $5 + $6 } END { print t }' "$out/$pattern.trace")
  worth=$((tokens / contexts * CHANNELS * 4))
  for k in 2 8; do
    echo "== $pattern, $contexts contexts, $calls calls, budget $k contexts' worth ($((k * worth)) bytes)"
    $B/tl-ctxswap replay "$out/$pattern.trace" --model "$model" $dev --texts "$text" --budget $((k * worth)) \
      --costs "$out/costs.txt" --swap-dir "$out/swap" -o "$out/$pattern-${k}ctx.md" 2>/dev/null
    cat "$out/$pattern-${k}ctx.md"
  done
done
