#!/bin/sh
# tl-bench on the device machine (NVIDIA OpenCL), with PyTorch eager beside it: the rows
# of docs/tl-bench.md. Prepare here (scripts/device_check.sh --prepare bundles tl-* into
# devdata/), then run there through the device tool with `carry: ["devdata"]`, one step
# per call (each fits the 10-minute limit); what steps leave in $W stays while the
# machine is held. Reports land in $OUT.
#   scripts/device_bench.sh probe            tl-bench --probe beside PyTorch's copy bandwidth; --kernels
#   scripts/device_bench.sh bytellama        bytellama-past fp32 and e0m4
#   scripts/device_bench.sh export NAME      export_real.py NAME (qwen2-0.5b, tinyllama-1.1b, llama-2-7b)
#   scripts/device_bench.sh quantize NAME    tl-quant e0m4 of it (7B: export and quantize take a call each)
#   scripts/device_bench.sh bench NAME [DEPTHS]   fp32 and e0m4 rows of NAME beside PyTorch fp16 and fp32
#                                            (DEPTHS: 0 runs pp128, pp1024, tg128; 1024 runs tg128@d1024;
#                                            default both)
#   scripts/device_bench.sh fused NAME [DEPTHS]   tl-fuse NAME's e0m4 model; its rows beside PyTorch fp16
#                                            (default depths 0,1024) and a decode step's --profile
#   scripts/device_bench.sh plan NAME        tl-plan --emit text's totals (max-seq 2048) of NAME's fp32 and
#                                            fused e0m4 models, and tl-bench tg128 of the fused model planned
#   scripts/device_bench.sh planned NAME [DEPTHS]  all in one call (a fresh machine): export, quantize,
#                                            fuse, tl-plan --pad 64 --max-seq 4096 (KV in place), then tl-bench
#                                            tg128 at DEPTHS (default 128,2048) of the fused model, the planned
#                                            one (command buffers) and the planned one launch by launch, beside
#                                            PyTorch eager fp16; tl-plan --emit text totals (max-seq 2048)
#   scripts/device_bench.sh ab NAME [DEPTHS]   builds compared on one planned model (made as `planned` does):
#                                            tl-bench tg128 at each of DEPTHS in turn (default 128,2048; a
#                                            depth named again is another round) with PyTorch eager fp16
#                                            beside its first run at a depth, then each $B/tl-bench-X (other
#                                            builds' tl-bench, copied there by hand) on the same model, rows
#                                            named NAME-planned-X
#   scripts/device_bench.sh lmhead NAME [DEPTHS] [SCHEME]  NAME quantized e0m4 with its lm_head in
#                                            SCHEME (default q8; --lm-head-scheme), fused and planned as
#                                            `planned` does, and tl-bench tg128 at DEPTHS
#   scripts/device_bench.sh normshare NAME   a decode step's --profile with every pass but norm-matmul
#                                            (RMSNorm as its own kernels), beside `fused`'s profile
#   scripts/device_bench.sh gemm NAME      the prefill GEMM's two paths (--gemm auto, portable): bytellama
#                                            e0m4 fused through each (perplexity, greedy text, --check), then
#                                            NAME planned as `planned` makes it: pp128, pp1024, pp1024@d2048
#                                            through each, and a prefill step's --profile
#   scripts/device_bench.sh peerprep NAMES   (a fresh machine, first call) starts llama.cpp's CUDA build in
#                                            the background (devdata/llamacpp: llamacpp-src.tar.xz,
#                                            device.sh, make_gguf.py from ../shared/scripts/llamacpp),
#                                            then exports, quantizes, fuses and plans each of NAMES
#   scripts/device_bench.sh prefill NAMES    (the next call, at once) waits for the build, writes each
#                                            model's random-weight Q4_0 GGUF, then one tl-bench run a model
#                                            and depth: tl (e0m4, fused, planned) with llama.cpp CUDA Q4_0
#                                            -fa 1 beside it (scripts/bench_llamacpp.py): pp128, pp1024,
#                                            pp1024@d2048
#   scripts/device_bench.sh abprefill NAMES  builds compared on prefill: this bundle (devdata/bin) and another
#                                            build's tl-fuse, tl-bench and libraries in devdata/old (moved there
#                                            by hand; BUILDS="old bin" names other folders of devdata); each
#                                            build fuses NAME's e0m4 model itself, this build's tl-plan plans
#                                            them; then pp128, pp1024 and pp1024@d2048 of each, in BUILDS'
#                                            order, rows named NAME-old and NAME-bin
#   scripts/device_bench.sh closing NAMES    (a fresh machine, first call, under setsid: see poll) the
#                                            closing tables at once: llama.cpp's CUDA build and then each
#                                            model's Q4_0 GGUF, beside every model's export, e0m4, fuse and
#                                            plan in parallel (64 GB of disk: Llama-2-7B with one of the
#                                            others at most); then `prefill NAMES` and `decode NAMES`; with
#                                            CHECKS=1 also `gemm NAME1` (checks and both GEMM paths of the
#                                            first model, unless Llama-2-7B) and --kernels' GEMM table at
#                                            7B's shapes (TinyLlama and Llama-2-7B took 16 minutes without
#                                            them on an H200; the machine goes back after 30 held); DURING=
#                                            SCRIPT runs SCRIPT while the models are made (the GPU idle; its
#                                            output in $W/out/during.log); reports in $W/out
#   scripts/device_bench.sh batched NAMES    (a fresh machine, first call, under setsid: see poll) llama.cpp's
#                                            CUDA build beside each model exported, e0m4, fused and planned
#                                            --batch 16 (--max-seq 1024); then tl-bench -p '' -n 128 -d 128
#                                            -b 1,4,16 of each with llama.cpp CUDA Q4_0 beside (llama-bench's
#                                            one sequence, llama-batched-bench's 4 and 16), and a 16-sequence
#                                            step's --profile; reports in $W/out
#   scripts/device_bench.sh poll [SECONDS]    waits for `closing` or `batched` (up to SECONDS, default 540), prints its
#                                            log's new lines and packs $W/out into $OUT/closing-out.tar.gz
#   scripts/device_bench.sh kvcheck          fp16 and q8 against fp32 KV caches (tl-plan --kv-type): every *-past
#                                            model of devdata/models (q8: bytellama's alone, heads of 32) fused and
#                                            planned each way, tl-run --check through both GEMM paths; bytellama
#                                            fp32 and e0m4 held-out bits per byte (devdata/bytellama-heldout.txt)
#                                            and greedy 500 tokens
#   scripts/device_bench.sh kvtype NAMES     (after peerprep NAMES, on its machine) each model planned again
#                                            with fp32 and q8 caches; one tl-bench run a model: tg128 and
#                                            tg128@d2048 of the fp16, fp32 and q8 plans with llama.cpp CUDA Q4_0
#                                            -fa 1 beside them
#   scripts/device_bench.sh decode NAMES     (after peerprep or closing NAMES, on its machine) one tl-bench run a
#                                            model: tg128 and tg128@d2048 of its planned e0m4 model, llama.cpp
#                                            CUDA Q4_0 -fa 1 beside it
#   scripts/device_bench.sh decodeab NAMES   (after peerprep NAMES) `decode NAMES`, then each model again with
#                                            --gemm f16 (fp32 A: no int8 GEMVs), same depths
#   scripts/device_bench.sh gemmab NAMES     this build's GEMM choices compared: each model exported, fused and
#                                            planned as `planned` makes it, then pp128, pp1024 and pp1024@d2048
#                                            through each of GEMMS (default "auto f16": tl-bench --gemm), rows
#                                            named NAME-CHOICE
#   scripts/device_bench.sh launches NAMES   (after closing NAMES, on its machine) each planned model's --profile
#                                            of a 128- and a 1024-token prefill step, then a decode step: the
#                                            launches a layer of each
#   scripts/device_bench.sh int8check        the tensor-core int8 rows' numerics first (a fresh machine's
#                                            first minutes): the GEMM and in-place cache tests, then
#                                            bytellama e0m4 fused and planned, bits per byte over 128-token
#                                            windows (the int8 tiles) through --gemm auto,
#                                            f16 and portable, and through devdata/$OLD/tl-run's auto if OLD
#                                            names another build's folder
#                                            (FILTER: other gtest filter)
#   scripts/device_bench.sh fusetests        tl-fuse's tests (every model, each pass, both kernel
#                                            families; fused ops vs references) and tl-plan's in-place
#                                            cache tests on the GPU (FILTER: other gtest filter)
#   scripts/device_bench.sh floats NAME      float weights' prefill (the codes' tiles): NAME's fp32 export
#                                            fused and planned, pp128 and pp1024 through --gemm auto (fp32
#                                            tiles), f16 (tensor cores) and portable, and through
#                                            devdata/$OLD/tl-bench if OLD names another build's folder; then
#                                            --kernels' GEMM table of fp32 at the 7B shapes (M = 1024) beside
#                                            CLBlast's SGEMM
set -eu
lib=$(find / -name 'libnvidia-opencl.so.1' 2>/dev/null | head -n 1)
mkdir -p /etc/OpenCL/vendors && echo "$lib" > /etc/OpenCL/vendors/nvidia.icd
export LD_LIBRARY_PATH=$PWD/devdata/bin PYTHONUNBUFFERED=1
B=devdata/bin
W=${W:-/root/tlbench}
OUT=${OUT:-.}
R=${R:-3}
mkdir -p "$W"
# tl-bench over fp32 and e0m4 with both PyTorch peers; $1 name, $2 fp32 model, $3 e0m4 model, $4 config dir, $5 depths
bench() {
  for d in $(echo "${5:-0,1024}" | tr , ' '); do
    if [ "$d" = 0 ]; then tests="-p 128,1024 -n 128 -d 0"; else tests="-p '' -n 128 -d $d"; fi
    eval "$B/tl-bench $2 -m $3 $tests -r $R --device NVIDIA \
      --peer 'python3 scripts/bench_torch.py $4 --name $1 --dtype fp16' \
      --peer 'python3 scripts/bench_torch.py $4 --name $1 --dtype fp32' \
      --plot $OUT/$1-d$d.svg -o $OUT/$1-d$d.md" 2> "$OUT/$1-d$d.log" || { tail -5 "$OUT/$1-d$d.log"; exit 1; }
    cat "$OUT/$1-d$d.md"
  done
}
# $1's e0m4 model ($2: the quantized variant's suffix, default e0m4) fused ($f) and planned
# for --max-seq 4096 with the cache in place ($p), exported and quantized first where this
# machine has not yet.
fuse_and_plan() {
  v=${2:-e0m4}
  [ -f "$W/$1-e0m4/model.onnx" ] || "$0" export "$1"
  f="$W/$1-$v-fused/model.onnx" p="$W/$1-$v-planned/model.onnx"
  mkdir -p "$(dirname "$f")" "$(dirname "$p")"
  [ -f "$f" ] || $B/tl-fuse "$W/$1-$v/model.onnx" -o "$f" 2>/dev/null
  $B/tl-plan "$f" --max-seq 4096 --pad 64 --align 512 -o "$p"  # NVIDIA: sub-buffers on 512 bytes
}
# Waits for peerprep's llama.cpp build, writes $1's random-weight Q4_0 GGUF once, and sets
# $peer: the tl-bench --peer command that runs it.
llamacpp_peer() {
  L=devdata/llamacpp
  while [ ! -x /root/lc/b/bin/llama-bench ] && pgrep -f "device.sh build" >/dev/null; do sleep 5; done
  [ -x /root/lc/b/bin/llama-bench ] || { tail -20 "$W/llamacpp-build.log"; exit 1; }
  [ -f "/root/w/$1-Q4_0.gguf" ] || bash $L/device.sh gguf "$PWD/$L" "$1" Q4_0 >/dev/null 2>&1
  peer="python3 scripts/bench_llamacpp.py /root/w/$1-Q4_0.gguf --llama-bench /root/lc/b/bin/llama-bench --name $1"
}
case "${1:-}" in
  probe)
    nvidia-smi --query-gpu=name,driver_version,clocks.max.memory --format=csv,noheader
    for i in 1 2 3; do $B/tl-bench --probe --device NVIDIA 2>/dev/null | tail -1; done
    python3 - <<'PY'
import torch
a = torch.empty(256 << 20, dtype=torch.uint8, device="cuda"); b = torch.empty_like(a)
for _ in range(5): b.copy_(a)
s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
s.record()
for _ in range(50): b.copy_(a)
e.record(); torch.cuda.synchronize()
ms = s.elapsed_time(e) / 50
print(f"PyTorch device-to-device copy of 256 MiB: {2 * a.numel() / ms / 1e6:.1f} GB/s (read + write)")
PY
    $B/tl-bench --kernels --kernel-runs 50 --device NVIDIA --plot "$OUT/kernels.svg" 2>/dev/null
    ;;
  bytellama)
    mkdir -p "$W/bytellama-past"
    python3 -c "
from transformers import LlamaConfig
LlamaConfig(vocab_size=256, hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=8,
            num_key_value_heads=4, max_position_embeddings=4096).to_json_file('$W/bytellama-past/config.json')"
    mkdir -p "$W/bytellama-e0m4"
    $B/tl-quant models/bytellama-past/model.onnx --scheme e0m4 -o "$W/bytellama-e0m4/model.onnx" 2>/dev/null
    bench bytellama models/bytellama-past/model.onnx "$W/bytellama-e0m4/model.onnx" "$W/bytellama-past" "${2:-0,1024}"
    ;;
  export)
    python3 scripts/export_real.py "$W" "$2"
    mv "$W/$2" "$W/$2-fp32"
    [ "$2" = llama-2-7b ] && [ -z "${QUANTIZE_7B:-}" ] && exit 0
    "$0" quantize "$2"  # (its unquantized tensors stay in the fp32 files: keep them)
    ;;
  quantize)
    mkdir -p "$W/$2-e0m4"
    s=$(date +%s)
    $B/tl-quant "$W/$2-fp32/model.onnx" --scheme e0m4 -o "$W/$2-e0m4/model.onnx" 2>&1 | tail -1
    echo "tl-quant: $(( $(date +%s) - s )) s"
    du -sh "$W/$2-fp32" "$W/$2-e0m4"; df -h "$W" | tail -1
    ;;
  bench)
    bench "$2" "$W/$2-fp32/model.onnx" "$W/$2-e0m4/model.onnx" "$W/$2-fp32" "${3:-0,1024}"
    ;;
  fused)
    f="$W/$2-e0m4-fused/model.onnx"
    [ -f "$f" ] || { mkdir -p "$(dirname "$f")"; $B/tl-fuse "$W/$2-e0m4/model.onnx" -o "$f"; }
    $B/tl-run "$f" --device NVIDIA --tokens 1,2,3,4 --generate -n 32 --profile > "$OUT/$2-fused-profile.txt" 2>&1
    sed -n '/last decode step/,$p' "$OUT/$2-fused-profile.txt" | head -30
    for d in $(echo "${3:-0,1024}" | tr , ' '); do
      if [ "$d" = 0 ]; then tests="-p 128 -n 128 -d 0"; else tests="-p '' -n 128 -d $d"; fi
      eval "$B/tl-bench $f --name $2-fused-e0m4 $tests -r $R --device NVIDIA \
        --peer 'python3 scripts/bench_torch.py $W/$2-fp32 --name $2 --dtype fp16' \
        -o $OUT/$2-fused-d$d.md" 2> "$OUT/$2-fused-d$d.log" || { tail -5 "$OUT/$2-fused-d$d.log"; exit 1; }
      cat "$OUT/$2-fused-d$d.md"
    done
    ;;
  plan)
    f="$W/$2-e0m4-fused/model.onnx"
    [ -f "$f" ] || { mkdir -p "$(dirname "$f")"; $B/tl-fuse "$W/$2-e0m4/model.onnx" -o "$f"; }
    for m in "$W/$2-fp32/model.onnx" "$f"; do echo "== $m"; $B/tl-plan "$m" --max-seq 2048 --emit text | tail -5; done
    $B/tl-plan "$f" --max-seq 2048 --align 512 -o "$W/$2-planned.onnx"
    $B/tl-bench "$f" -m "$W/$2-planned.onnx" -p '' -n 128 -r "$R" --device NVIDIA -o "$OUT/$2-planned.md" 2> "$OUT/$2-planned.log"
    cat "$OUT/$2-planned.md"
    ;;
  planned)
    fuse_and_plan "$2"
    for m in "$W/$2-fp32/model.onnx" "$f"; do echo "== $m"; $B/tl-plan "$m" --max-seq 2048 --emit text | tail -4; done
    $B/tl-run "$p" --device NVIDIA --tokens 1,2,3,4 --generate -n 64 --profile > "$OUT/$2-planned-profile.txt" 2>&1
    sed -n '/last decode step/,$p' "$OUT/$2-planned-profile.txt" | head -12
    for d in $(echo "${3:-128,2048}" | tr , ' '); do
      for cb in "" --no-command-buffers; do
        $B/tl-bench "$p" --name "$2-planned${cb:+-launches}" -p '' -n 128 -d "$d" -r "$R" --device NVIDIA $cb \
          -o "$OUT/$2-planned$cb-d$d.md" 2> "$W/bench.log" || { tail -5 "$W/bench.log"; exit 1; }
        grep -E "^\| $2" "$OUT/$2-planned$cb-d$d.md" || true
      done
      $B/tl-bench "$f" --name "$2-fused-e0m4" -p '' -n 128 -d "$d" -r "$R" --device NVIDIA \
        --peer "python3 scripts/bench_torch.py $W/$2-fp32 --name $2 --dtype fp16" \
        -o "$OUT/$2-fused-d$d.md" 2> "$W/bench.log" || { tail -5 "$W/bench.log"; exit 1; }
      grep -E "^\| " "$OUT/$2-fused-d$d.md" | tail -2 || true
    done
    ;;
  ab)
    [ -f "$W/$2-e0m4/model.onnx" ] || "$0" export "$2" >/dev/null 2>&1
    fuse_and_plan "$2"
    seen=""  # depths that had PyTorch beside them: once per depth, with its first run
    for d in $(echo "${3:-128,2048}" | tr , ' '); do
      case " $seen " in *" $d "*) peer="" ;; *) peer="--peer"; seen="${seen:-} $d" ;; esac
      $B/tl-bench "$p" --name "$2-planned" -p '' -n 128 -d "$d" -r "$R" --device NVIDIA \
        ${peer:+--peer "python3 scripts/bench_torch.py $W/$2-fp32 --name $2 --dtype fp16"} 2>/dev/null | grep "^| " || true
      for b in $B/tl-bench-*; do
        [ -x "$b" ] || continue  # no other build copied there
        $b "$p" --name "$2-planned-${b##*/tl-bench-}" -p '' -n 128 -d "$d" -r "$R" --device NVIDIA 2>/dev/null | grep "^| $2"
      done
    done
    ;;
  lmhead)
    [ -f "$W/$2-e0m4/model.onnx" ] || "$0" export "$2" >/dev/null 2>&1
    lm=${4:-q8}
    mkdir -p "$W/$2-e0m4-${lm}lm"
    [ -f "$W/$2-e0m4-${lm}lm/model.onnx" ] ||
      $B/tl-quant "$W/$2-fp32/model.onnx" --scheme e0m4 --lm-head-scheme "$lm" -o "$W/$2-e0m4-${lm}lm/model.onnx" 2>&1 | tail -2
    fuse_and_plan "$2" "e0m4-${lm}lm"
    for d in $(echo "${3:-128,2048}" | tr , ' '); do
      $B/tl-bench "$p" --name "$2-planned-${lm}lm" -p '' -n 128 -d "$d" -r "$R" --device NVIDIA 2>/dev/null | grep "^| $2"
    done
    ;;
  normshare)
    f="$W/$2-e0m4-nonorm/model.onnx"
    passes=$($B/tl-fuse --list-passes | cut -f1 | grep -vx norm-matmul | paste -sd, -)
    [ -f "$f" ] || { mkdir -p "$(dirname "$f")"; $B/tl-fuse "$W/$2-e0m4/model.onnx" --passes "$passes" -o "$f"; }
    $B/tl-run "$f" --device NVIDIA --tokens 1,2,3,4 --generate -n 32 --profile > "$OUT/$2-nonorm-profile.txt" 2>&1
    sed -n '/last decode step/,$p' "$OUT/$2-nonorm-profile.txt" | head -30
    ;;
  gemm)
    $B/tl-run --list-devices
    q=$W/bytellama-e0m4-fused.onnx
    $B/tl-quant models/bytellama-past/model.onnx --scheme e0m4 2>/dev/null | $B/tl-fuse - -o "$q" 2>/dev/null
    for g in auto portable; do
      printf '== bytellama e0m4 fused, --gemm %s: bits/byte ' $g
      $B/tl-run "$q" --gemm $g --device NVIDIA --perplexity devdata/bytellama-heldout.txt --window 512 2>/dev/null
      $B/tl-run "$q" --gemm $g --device NVIDIA --generate --prompt "def " -n 200 2>/dev/null > "$W/gen-$g.txt"
      $B/tl-run "$q" --gemm $g --device NVIDIA --check models/bytellama-past --atol 2.7 2>&1 | grep -E "logits|PASSED|FAILED"
    done
    cmp "$W/gen-auto.txt" "$W/gen-portable.txt" && echo "greedy 200 tokens: equal" || { echo "greedy texts differ:"; cat "$W/gen-auto.txt" "$W/gen-portable.txt"; }
    [ -f "$W/$2-e0m4/model.onnx" ] || "$0" export "$2" >/dev/null 2>&1
    fuse_and_plan "$2"
    # NAME fp32, fused, against PyTorch fp32 on 200 tokens (scripts/torch_check_set.py)
    [ -d "$W/$2-fp32/test_data_set_0" ] || python3 scripts/torch_check_set.py "$W/$2-fp32" "$2" 200
    [ -f "$W/$2-fp32-fused.onnx" ] || $B/tl-fuse "$W/$2-fp32/model.onnx" -o "$W/$2-fp32-fused.onnx" 2>/dev/null
    # planned too: the caches in place, the prefill attention doing the RoPE's work
    [ -f "$W/$2-fp32-planned.onnx" ] ||
      $B/tl-plan "$W/$2-fp32-fused.onnx" --max-seq 4096 --pad 64 --align 512 -o "$W/$2-fp32-planned.onnx"
    for m in fused planned; do
      for g in auto portable; do
        printf '== %s fp32 %s vs PyTorch fp32, --gemm %s: ' "$2" $m $g
        $B/tl-run "$W/$2-fp32-$m.onnx" --gemm $g --device NVIDIA --check "$W/$2-fp32" --atol 1e-2 --rtol 1e-2 --explain \
          > "$W/check-$g.txt" 2>&1
        grep logits "$W/check-$g.txt"
        echo "   attention and rope launches: $(grep -o 'attention_[a-z0-9_]*\|rope_[a-z0-9_]*' "$W/check-$g.txt" | sort | uniq -c | tr '\n' ' ')"
      done
    done
    $B/tl-run "$p" --device NVIDIA --tokens "$(seq -s, 1 1024)" --generate -n 1 --profile 2>&1 >/dev/null | head -14
    for g in auto portable; do
      $B/tl-bench "$p" --gemm $g --name "$2-planned-$g" -p 128,1024 -n '' -r "$R" --device NVIDIA 2>/dev/null | grep "^| $2" || true
      $B/tl-bench "$p" --gemm $g --name "$2-planned-$g" -p 1024 -n '' -d 2048 -r "$R" --device NVIDIA 2>/dev/null | grep "^| $2" || true
    done
    ;;
  peerprep)
    L=devdata/llamacpp
    setsid nohup bash $L/device.sh build "$PWD/$L" > "$W/llamacpp-build.log" 2>&1 < /dev/null &
    for m in $(echo "$2" | tr , ' '); do
      [ -f "$W/$m-e0m4/model.onnx" ] || QUANTIZE_7B=1 "$0" export "$m" 2>&1 | grep -E "export_real|tl-quant" || true
      fuse_and_plan "$m"
    done
    ls "$W"
    ;;
  prefill)
    for m in $(echo "$2" | tr , ' '); do
      llamacpp_peer "$m"
      p="$W/$m-e0m4-planned/model.onnx"
      for t in "-p 128,1024 -d 0" "-p 1024 -d 2048"; do
        GGUF_PY=/root/lc/gguf-py $B/tl-bench "$p" --name "$m" $t -n '' -r "$R" --device NVIDIA --peer "$peer" \
          -o "$OUT/$m-prefill-$(echo $t | tr -dc 0-9).md" 2> "$W/bench.log" || { tail -5 "$W/bench.log"; exit 1; }
        grep "^| " "$OUT/$m-prefill-$(echo $t | tr -dc 0-9).md"
      done
    done
    ;;
  abprefill)
    for m in $(echo "$2" | tr , ' '); do
      [ -f "$W/$m-e0m4/model.onnx" ] || "$0" export "$m" >/dev/null 2>&1
      for x in ${BUILDS:-old bin}; do
        f="$W/$m-e0m4-$x-fused.onnx" p="$W/$m-e0m4-$x-planned.onnx"
        [ -f "$f" ] || LD_LIBRARY_PATH=$PWD/devdata/$x:$LD_LIBRARY_PATH devdata/$x/tl-fuse "$W/$m-e0m4/model.onnx" -o "$f" 2>/dev/null
        [ -f "$p" ] || $B/tl-plan "$f" --max-seq 4096 --pad 64 --align 512 -o "$p"
      done
      for t in "-p 128,1024 -d 0" "-p 1024 -d 2048"; do
        for x in ${BUILDS:-old bin}; do
          LD_LIBRARY_PATH=$PWD/devdata/$x:$LD_LIBRARY_PATH devdata/$x/tl-bench "$W/$m-e0m4-$x-planned.onnx" --name "$m-$x" $t -n '' \
            -r "$R" --device NVIDIA 2>/dev/null | grep "^| $m" || true
        done
      done
    done
    ;;
  closing)
    L=devdata/llamacpp
    mkdir -p "$W/out"
    names=$(echo "$2" | tr , ' ')
    { bash $L/device.sh build "$PWD/$L" && for m in $names; do bash $L/device.sh gguf "$PWD/$L" "$m" Q4_0; done; } \
      > "$W/llamacpp-build.log" 2>&1 &
    for m in $names; do
      ( QUANTIZE_7B=1 "$0" export "$m" && fuse_and_plan "$m" && echo "prepared $m" ) > "$W/prep-$m.log" 2>&1 &
    done
    # the GPU idles while the models are made on the CPU: DURING (a script) may use it then
    [ -z "${DURING:-}" ] || sh "$DURING" > "$W/out/during.log" 2>&1 || true
    wait
    tail -n 3 "$W"/prep-*.log "$W/llamacpp-build.log"
    OUT=$W/out "$0" prefill "$2"
    OUT=$W/out "$0" decode "$2"
    if [ "${CHECKS:-0}" = 1 ]; then
      first=${2%%,*}  # (not Llama-2-7B: its fp32 checks would not fit the disk)
      [ "$first" = llama-2-7b ] || OUT=$W/out "$0" gemm "$first" > "$W/out/gemm-$first.txt" 2>&1 || true
      $B/tl-bench --kernels --schemes e0m4 --gemm-rows 1024 --kernel-runs 10 --device NVIDIA \
        -o "$W/out/kernels-7b-shapes.md" 2>/dev/null || true
    fi
    touch "$W/closing.done"
    ;;
  batched)
    L=devdata/llamacpp
    mkdir -p "$W/out"
    bash $L/device.sh build "$PWD/$L" > "$W/llamacpp-build.log" 2>&1 &
    for m in $(echo "$2" | tr , ' '); do
      ( "$0" export "$m" && fuse_and_plan "$m" &&
        $B/tl-plan "$W/$m-e0m4-fused/model.onnx" --max-seq 1024 --pad 64 --align 512 --batch 16 -o "$W/$m-e0m4-b16.onnx" &&
        echo "prepared $m" ) > "$W/prep-$m.log" 2>&1 &
    done
    wait
    tail -n 3 "$W"/prep-*.log "$W/llamacpp-build.log"
    for m in $(echo "$2" | tr , ' '); do
      llamacpp_peer "$m"
      GGUF_PY=/root/lc/gguf-py $B/tl-bench "$W/$m-e0m4-b16.onnx" --name "$m" -p '' -n 128 -d 128 -b 1,4,16 -r "$R" \
        --device NVIDIA --peer "$peer" -o "$W/out/$m-batched.md" 2> "$W/bench.log" || tail -5 "$W/bench.log"
      grep "^| " "$W/out/$m-batched.md" || true
      $B/tl-bench "$W/$m-e0m4-b16.onnx" --name "$m" -p '' -n 16 -d 128 -b 16 -r 1 --device NVIDIA --profile \
        2> "$W/out/$m-batched-profile.txt" > /dev/null || true
    done
    touch "$W/closing.done"
    ;;
  poll)
    t=0
    while [ ! -f "$W/closing.done" ] && [ "$t" -lt "${2:-540}" ]; do sleep 10; t=$((t + 10)); done
    tail -n 40 "$W/closing.log" 2>/dev/null || true
    tail -n 2 "$W"/prep-*.log "$W/llamacpp-build.log" 2>/dev/null || true
    df -h "$W" | tail -1
    # one file: the device tool brings back only a few files a call
    tar -czf "$OUT/closing-out.tar.gz" -C "$W/out" . 2>/dev/null || true
    [ -f "$W/closing.done" ] && echo "closing: done" || echo "closing: running"
    ;;
  kvcheck)
    for d in devdata/models/*-past models/bytellama-past; do
      m=$(basename "$d")
      for t in f16 f32 q8; do
        [ $t = q8 ] && [ "$m" != bytellama-past ] && continue  # (q8: heads of multiples of 32)
        $B/tl-fuse "$d/model.onnx" 2>/dev/null | $B/tl-plan - --max-seq 1024 --pad 16 --kv-type $t -o "$W/$m-$t.onnx"
        for g in auto portable; do
          printf "%s kv %s gemm %s: " "$m" "$t" "$g"
          $B/tl-run "$W/$m-$t.onnx" --gemm $g --device NVIDIA --check "$d" 2>&1 | grep -E "logits|PASSED|FAILED" | tr '\n' ' '
          echo
        done
      done
    done
    H=devdata/bytellama-heldout.txt
    $B/tl-quant models/bytellama-past/model.onnx --scheme e0m4 2>/dev/null | $B/tl-fuse - 2>/dev/null > "$W/bl-e0m4-fused.onnx"
    $B/tl-fuse models/bytellama-past/model.onnx 2>/dev/null > "$W/bl-fp32-fused.onnx"
    for w in fp32 e0m4; do
      for t in f16 f32 q8; do
        $B/tl-plan "$W/bl-$w-fused.onnx" --max-seq 2048 --pad 64 --kv-type $t -o "$W/bl-$w-$t.onnx"
        printf "bytellama %s kv %s: bits/byte " "$w" "$t"
        $B/tl-run "$W/bl-$w-$t.onnx" --device NVIDIA --perplexity $H --window 512 2>/dev/null
        $B/tl-run "$W/bl-$w-$t.onnx" --device NVIDIA --generate --prompt "def " -n 500 2>/dev/null > "$W/gen-$w-$t.txt"
      done
      for t in f16 q8; do
        cmp -s "$W/gen-$w-$t.txt" "$W/gen-$w-f32.txt" && echo "bytellama $w kv $t greedy 500: equal to f32's" ||
          echo "bytellama $w kv $t greedy 500: differ from f32's at byte $(cmp "$W/gen-$w-$t.txt" "$W/gen-$w-f32.txt" | awk '{print $5}')"
      done
    done
    ;;
  kvtype)
    for m in $(echo "$2" | tr , ' '); do
      llamacpp_peer "$m"
      p="$W/$m-e0m4-planned/model.onnx" p32="$W/$m-e0m4-planned-f32kv/model.onnx" p8="$W/$m-e0m4-planned-q8kv/model.onnx"
      mkdir -p "$(dirname "$p32")" "$(dirname "$p8")"
      $B/tl-plan "$W/$m-e0m4-fused/model.onnx" --max-seq 4096 --pad 64 --align 512 --kv-type f32 -o "$p32"
      $B/tl-plan "$W/$m-e0m4-fused/model.onnx" --max-seq 4096 --pad 64 --align 512 --kv-type q8 -o "$p8"
      GGUF_PY=/root/lc/gguf-py $B/tl-bench "$p" -m "$p32" -m "$p8" -p '' -n 128 -d 0,2048 -r "$R" --device NVIDIA --peer "$peer" \
        -o "$OUT/$m-kvtype.md" 2> "$W/bench.log" || { tail -5 "$W/bench.log"; exit 1; }
      grep "^| " "$OUT/$m-kvtype.md"
    done
    ;;
  decode)
    for m in $(echo "$2" | tr , ' '); do
      llamacpp_peer "$m"
      GGUF_PY=/root/lc/gguf-py $B/tl-bench "$W/$m-e0m4-planned/model.onnx" --name "$m" -p '' -n 128 -d 0,2048 -r "$R" \
        --device NVIDIA --peer "$peer" -o "$OUT/$m-decode.md" 2> "$W/bench.log" || { tail -5 "$W/bench.log"; exit 1; }
      grep "^| " "$OUT/$m-decode.md"
    done
    ;;
  decodeab)
    OUT=$OUT "$0" decode "$2"
    for m in $(echo "$2" | tr , ' '); do
      $B/tl-bench "$W/$m-e0m4-planned/model.onnx" --name "$m-f16" -p '' -n 128 -d 0,2048 -r "$R" --device NVIDIA \
        --gemm f16 -o "$OUT/$m-decode-gemm-f16.md" 2> "$W/bench.log" || { tail -5 "$W/bench.log"; exit 1; }
      grep "^| " "$OUT/$m-decode-gemm-f16.md"
    done
    ;;
  gemmab)
    for m in $(echo "$2" | tr , ' '); do
      fuse_and_plan "$m" >/dev/null
      for t in "-p 128,1024 -d 0" "-p 1024 -d 2048"; do
        for g in ${GEMMS:-auto f16}; do
          $B/tl-bench "$W/$m-e0m4-planned/model.onnx" --gemm "$g" --name "$m-$g" $t -n '' -r "$R" --device NVIDIA \
            2>/dev/null | grep "^| $m" || true
        done
      done
    done
    ;;
  launches)
    for m in $(echo "$2" | tr , ' '); do
      for n in 128 1024; do
        echo "== $m: a $n-token prefill step, then a decode step"
        $B/tl-run "$W/$m-e0m4-planned/model.onnx" --device NVIDIA --tokens "$(seq -s, 1 $n)" --generate -n 2 --profile \
          2>&1 >/dev/null | cut -c1-100
      done
    done
    ;;
  int8check)
    FILTER=${FILTER:-'MatMulExtras.*:Schemes/QMatMulKernel.*gpu_e0m4*:Schemes/QMatMulKernel.*gpu_int4*:KvInPlace.*'} "$0" fusetests
    $B/tl-quant models/bytellama-past/model.onnx --scheme e0m4 2>/dev/null | $B/tl-fuse - 2>/dev/null |
      $B/tl-plan - --max-seq 2048 --pad 64 -o "$W/bl-int8check.onnx"
    for g in auto f16 portable; do
      printf "bytellama e0m4 window 128 --gemm %s: " $g
      $B/tl-run "$W/bl-int8check.onnx" --device NVIDIA --gemm $g --perplexity devdata/bytellama-heldout.txt --window 128 2>&1 | tail -1
    done
    if [ -n "${OLD:-}" ]; then
      printf "bytellama e0m4 window 128, %s's auto: " "$OLD"
      LD_LIBRARY_PATH=$PWD/devdata/$OLD:$LD_LIBRARY_PATH devdata/$OLD/tl-run "$W/bl-int8check.onnx" --device NVIDIA \
        --perplexity devdata/bytellama-heldout.txt --window 128 2>&1 | tail -1
    fi
    ;;
  floats)
    [ -f "$W/$2-fp32/model.onnx" ] || { python3 scripts/export_real.py "$W" "$2" >/dev/null && mv "$W/$2" "$W/$2-fp32"; }
    f="$W/$2-fp32-fused.onnx" p="$W/$2-fp32-planned.onnx"
    [ -f "$f" ] || $B/tl-fuse "$W/$2-fp32/model.onnx" -o "$f" 2>/dev/null
    $B/tl-plan "$f" --max-seq 4096 --pad 64 --align 512 -o "$p"
    for g in auto f16 portable; do
      $B/tl-bench "$p" --gemm "$g" --name "$2-fp32-$g" -p 128,1024 -n '' -r "$R" --device NVIDIA 2>/dev/null | grep "^| $2" || true
    done
    if [ -n "${OLD:-}" ]; then
      LD_LIBRARY_PATH=$PWD/devdata/$OLD:$LD_LIBRARY_PATH devdata/$OLD/tl-bench "$p" --name "$2-fp32-$OLD" -p 128,1024 -n '' \
        -r "$R" --device NVIDIA 2>/dev/null | grep "^| $2" || true
    fi
    $B/tl-bench --kernels --schemes fp32 --gemm-rows 1024 --kernel-runs 10 --device NVIDIA -o "$OUT/kernels-fp32.md" 2>/dev/null
    grep "| 1024 |" "$OUT/kernels-fp32.md" || true
    ;;
  fusetests)
    # The tests find the models where this checkout's build put them: /work/main, ../shared.
    mkdir -p /work "$(dirname "$PWD")/shared"
    [ -e /work/main ] || ln -s "$PWD" /work/main
    ln -sfn "$PWD/devdata/models" "$(dirname "$PWD")/shared/models"
    ln -sfn "$PWD/devdata/encoders" "$(dirname "$PWD")/shared/encoders"
    ln -sfn "$PWD/models/bytellama-past" devdata/models/bytellama-past
    TL_GUARD_BYTES=256 devdata/bin/tl_model_tests --gtest_filter="${FILTER:-AllModels/FuseModels.*:AllModels/RunModels.*:*Kernel*.*:Fuse*.*:SymbolBounds.*:MatMulExtras.*:KvInPlace.*}" \
      > "$OUT/fusetests.log" 2>&1 || true  # (the failures are in the log)
    grep -E "FAILED|PASSED|Failure" "$OUT/fusetests.log" | head -20
    ;;
  *) sed -n '2,/^set/{/^#/p}' "$0"; exit 2 ;;
esac
