#!/bin/sh
# The support matrix (docs/support.md): every export under DIR (scripts/export_matrix.py's
# cells, each a model.onnx with test_data_set_*, or a .status saying why it did not export)
# through each stage, a cell "pass" or the stage's one error line.
#   tl-shape exact: tl-shape succeeds and invents no symbol (every dim an expression of
#     the inputs');
#   check: tl-run --check against ONNX Runtime's outputs (atol 1e-4, rtol 1e-3);
#   fused: tl-fuse, then the same check;
#   planned: tl-fuse | tl-plan --batch 2 (the data sets' largest batch), the check at the
#     plan's tolerance (fp16 caches: 1e-2);
#   e0m4: tl-quant --scheme e0m4 | tl-fuse | tl-plan --batch 2, checked against its twin:
#     the same export with the dequantized weights as floats (tl-quant --format
#     dequantized), run by ONNX Runtime on the same inputs (tests/ort/reference.mjs), at
#     the plan's tolerance, through --gemm portable (fp32 activations): what is left is
#     tl's own error, not the quantization's. The default path's int8 activations in
#     one-row GEMVs are an approximation of their own (docs/tl-run.md), measured apart.
# usage: scripts/support_matrix.sh DIR [OUT.md]   (BIN: the tools' folder, default build/bin;
#   JOBS=N: N exports at a time; REQUIRE_PASS=1: exit 1 unless every cell passes, as CI
#   runs it on tests/models/matrix; TITLE=TEXT: the whole doc, its first line naming TEXT)
set -u
dir=$1
out=${2:-/dev/stdout}
bin=${BIN:-build/bin}
root=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# One line: "pass", or the stage's first error line with the paths taken out.
verdict() {
  if [ "$1" -eq 0 ]; then echo pass; return; fi
  grep -m1 'error:' "$2" 2>/dev/null | sed -e 's/^[a-z-]*: error: //' -e "s|$work/[^:]*: ||" -e "s|$dir/[^:]*: ||" \
    -e 's/|/\\|/g' | cut -c1-160 || echo "exit $1"
}

# ONNX Runtime's outputs of MODEL on each of DIR's data sets' inputs, as data sets in OUT.
twin() {
  for t in "$2"/test_data_set_*; do node "$root/tests/ort/reference.mjs" "$1" "$t" "$3/${t##*/}" || return 1; done
}

# One export's row into $work/$c/row.
cell() {
  m=$1; d=$(dirname "$m"); c=$(basename "$d"); w=$work/$c; mkdir -p "$w"
  "$bin/tl-shape" "$m" --emit text >"$w/shape.txt" 2>"$w/shape.err"; r=$?
  if [ $r -eq 0 ] && ! grep -q '^  invented symbols: 0' "$w/shape.txt"; then
    s="$(grep '^  invented symbols' "$w/shape.txt" | sed 's/^  //')"
  else s=$(verdict $r "$w/shape.err"); fi
  "$bin/tl-run" "$m" --check "$d" >/dev/null 2>"$w/check.err"; k=$(verdict $? "$w/check.err")
  "$bin/tl-fuse" "$m" -o "$w/f.onnx" 2>"$w/fuse.err" && "$bin/tl-run" "$w/f.onnx" --check "$d" >/dev/null 2>"$w/fuse.err"
  f=$(verdict $? "$w/fuse.err")
  { [ -f "$w/f.onnx" ] && "$bin/tl-plan" "$w/f.onnx" --batch 2 -o "$w/p.onnx" && "$bin/tl-run" "$w/p.onnx" --check "$d" >/dev/null; } 2>"$w/plan.err"
  p=$(verdict $? "$w/plan.err")
  { "$bin/tl-quant" "$m" --scheme e0m4 --format dequantized -o "$w/twin.onnx" &&
    twin "$w/twin.onnx" "$d" "$w/twin" &&
    "$bin/tl-quant" "$m" --scheme e0m4 | "$bin/tl-fuse" - | "$bin/tl-plan" - --batch 2 -o "$w/q.onnx" &&
    "$bin/tl-run" "$w/q.onnx" --check "$w/twin" --gemm portable >/dev/null; } 2>"$w/quant.err"
  q=$(verdict $? "$w/quant.err")
  echo "$c|$s|$k|$f|$p|$q" >"$w/row"
}

rows=$work/rows
: >"$rows"
running=0
for m in "$dir"/*/model.onnx "$dir"/*.status; do
  [ -e "$m" ] || continue
  case $m in
    *.status) grep -q '^ok' "$m" && continue
              echo "$(basename "$m" .status)|$(sed -e 's/^failed: //' -e 's/\x1b\[[0-9;]*m//g' -e 's/|/\\|/g' "$m" | cut -c1-160)|export failed" >>"$rows"
              continue ;;
  esac
  st=${m%/model.onnx}.status
  [ -f "$st" ] && ! grep -q '^ok' "$st" && continue  # a partial export: its status row says why
  cell "$m" &
  running=$((running + 1))
  if [ "$running" -ge "${JOBS:-1}" ]; then wait; running=0; fi  # JOBS exports at a time
done
wait
cat "$work"/*/row >>"$rows" 2>/dev/null

{
  if [ -n "${TITLE:-}" ]; then  # the whole doc (docs/support.md), not the table alone
    cat <<EOF
# Support matrix: the exports a user makes today

Written by \`scripts/support_matrix.sh\` ($TITLE). The exports come from
\`scripts/export_matrix.py\` (run on the GPU machine: transformers 5.17, torch 2.11, ONNX
Runtime 1.30): each architecture from a tiny random config (hidden 16, 2 layers, 2 query
heads on 1 KV head of 8, vocabulary 64; the exporter's debugging records, such as dynamo's
stack traces, dropped), through both of PyTorch's ONNX exporters (TorchScript, opset 17;
dynamo, opset 20), with a cache (\`past\`) and without, exported as a user would (an
example of one sequence; an export that fails so is retried from two, and its status says
so), two data sets each (batch 1 and 2) with ONNX Runtime's outputs. A cell is "pass" or
the stage's one error line:

- **tl-shape exact**: tl-shape succeeds and invents no symbol;
- **check**: \`tl-run --check\` against ONNX Runtime's outputs (atol 1e-4, rtol 1e-3);
- **fused**: \`tl-fuse\`, the same check;
- **fused + planned**: \`tl-fuse | tl-plan --batch 2\`, the check at the plan's tolerance
  (its fp16 caches: 1e-2);
- **e0m4 + fused + planned**: \`tl-quant --scheme e0m4 | tl-fuse | tl-plan --batch 2\`,
  checked against its twin (the export with the dequantized weights as floats, \`tl-quant
  --format dequantized\`, run by ONNX Runtime), through \`--gemm portable\`: what is left is
  tl's own error, not the quantization's. The default path's int8 activations in one-row
  GEMVs are an approximation of their own (docs/tl-run.md).

An export that failed (the exporter's error, or ONNX Runtime's on the export) counts as
five failing cells. CI runs the same script over every export that exported, all of them in
\`tests/models/matrix\`.

EOF
  fi
  echo "| export | tl-shape exact | check | fused | fused + planned | e0m4 + fused + planned |"
  echo "|---|---|---|---|---|---|"
  sort "$rows" | while IFS='|' read -r c s k f p q; do
    if [ "$k" = "export failed" ]; then echo "| $c | export failed: $s | | | | |"; else echo "| $c | $s | $k | $f | $p | $q |"; fi
  done
  cells=$(awk 'END {print NR * 5}' "$rows")
  passed=$(sort "$rows" | awk -F'|' '$3 != "export failed" {for (i = 2; i <= 6; ++i) if ($i == "pass") p++} END {print p + 0}')
  echo
  echo "$passed of $cells cells pass (an export that failed counts as 5 failing cells)."
} >"$out"
if [ "${REQUIRE_PASS:-0}" = 1 ] && [ "$passed" -ne "$cells" ]; then
  echo "support_matrix: $((cells - passed)) of $cells cells fail:" >&2
  grep -v '| pass | pass | pass | pass | pass |$' "$out" | grep '^| [a-z]' | grep -v '^| export' >&2
  exit 1
fi
