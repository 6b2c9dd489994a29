#!/bin/sh
# Issue 31's service row: one client of tl-ctxswap serve --max-batch N alone, then N
# clients at once, each round on fresh contexts (made before the clock starts), and
# every reply compared with the lone client's (same system prompt and prompt: greedy
# replies must be equal byte for byte).
#   scripts/serve_bench.sh MODEL [CLIENTS TOKENS ROUNDS]
# MODEL: planned with tl-plan --batch CLIENTS or more. Env: B (binaries, default
# build/bin), BUDGET (default 1MiB), POLICY (default vllm-sq), DEVICE, PROMPT.
# Prints a line a round: one client's tok/s, N clients' aggregate tok/s, the ratio, and
# the service's peak KV bytes against its budget (tl-ctxswap stats).
set -eu
model=$1 clients=${2:-8} n=${3:-200} rounds=${4:-3}
B=${B:-build/bin}
prompt=${PROMPT:-"def parse(line):"}
dev=${DEVICE:+--device $DEVICE}
dir=$(mktemp -d)
sock=$dir/sock
srv=
trap '[ -n "$srv" ] && kill $srv 2>/dev/null; rm -rf "$dir"' EXIT
$B/tl-ctxswap calibrate --model "$model" $dev --swap-dir "$dir/cal" -o "$dir/costs.txt" 2>/dev/null
$B/tl-ctxswap serve --model "$model" $dev --policy "${POLICY:-vllm-sq}" --costs "$dir/costs.txt" \
  --max-batch "$clients" --max-contexts 1000 --budget "${BUDGET:-1MiB}" --socket "$sock" --swap-dir "$dir/swap" 2>"$dir/serve.log" &
srv=$!
i=0
until [ -S "$sock" ]; do
  i=$((i + 1))
  [ $i -lt 300 ] || { cat "$dir/serve.log" >&2; exit 1; }
  sleep 0.1
done
now() { date +%s.%N; }
new() { $B/tl-ctxswap new --socket "$sock" --system "# tools"; }
# $1 clients at once, each a fresh context: prints the seconds from the first call to the last reply.
clientsAt() {
  ids=
  for c in $(seq "$1"); do ids="$ids $(new)"; done
  t0=$(now)
  pids=
  for id in $ids; do
    $B/tl-ctxswap call --socket "$sock" "$id" "$prompt" -n "$n" -o "$dir/reply.$1.$id" &
    pids="$pids $!"
  done
  for p in $pids; do wait "$p"; done
  t1=$(now)
  for id in $ids; do
    cmp -s "$dir/reply.$1.$id" "$dir/alone" || { echo "serve_bench: a reply of $1 clients differs from the lone reply" >&2; exit 1; }
  done
  echo "$t0 $t1" | awk '{ print $2 - $1 }'
}
# Warm-up (untimed): the lone reply, and one round of N, which builds the N-row step's kernels.
id=$(new)
$B/tl-ctxswap call --socket "$sock" "$id" "$prompt" -n "$n" -o "$dir/alone"
clientsAt "$clients" >/dev/null
for r in $(seq "$rounds"); do
  one=$(clientsAt 1)
  many=$(clientsAt "$clients")
  stats=$($B/tl-ctxswap stats --socket "$sock")
  peak=$(echo "$stats" | awk '$1 == "peak" { print $2 }')
  budget=$(echo "$stats" | awk '$1 == "budget" { print $2 }')
  [ "$peak" -le "$budget" ] || { echo "serve_bench: peak KV $peak over the budget $budget" >&2; exit 1; }
  echo "$one $many" | awk -v n="$n" -v c="$clients" -v peak="$peak" -v budget="$budget" \
    '{ a = n / $1; b = c * n / $2; printf "one client %.0f tok/s, %d clients %.0f tok/s, %.2fx; peak KV %d of %d bytes\n", a, c, b, b / a, peak, budget }'
done
