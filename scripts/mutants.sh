#!/usr/bin/env bash
# Mutation testing (docs/testing.md): mutants of the sampler, quantization, the kernels and
# their lowering, shape rules, fusion patterns, memory-plan lifetimes, ctxswap chunks and
# tolerance, and the tokenizer, each built in a scratch copy of this tree and run against
# the tests that cover its file.
#
#   scripts/mutants.sh --sample 200 --seed 1          a random sample, areas in turn
#   scripts/mutants.sh --sample 20 --areas sampler,quant
#   scripts/mutants.sh --patch tests/mutants/*.patch  the named mutants, tests they fail
#   scripts/mutants.sh --list                         mutants per area and rule
#
# The scratch tree is $TL_MUTANTS_DIR (default /tmp/tl-mutants): the tracked and
# unignored files of this tree as they are now (changes included), ../shared and the
# tests' node_modules linked, a build configured with ccache where Debian's ccache is
# installed. The first run builds it whole; later runs rebuild what changed. Options
# after the first are scripts/mutants.py's (--help lists them).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
scratch=${TL_MUTANTS_DIR:-/tmp/tl-mutants}
mkdir -p "$scratch/src" "$scratch/build"

# the tree as it is now; only files whose contents differ are copied (with a new mtime),
# so unchanged ones are not rebuilt and a mutant an interrupted run left is rebuilt
rm -rf "$scratch/incoming" && mkdir -p "$scratch/incoming"
(cd "$here" && git ls-files -z --cached --others --exclude-standard |
  tar --null --ignore-failed-read -T - -cf - 2>/dev/null) | tar -xf - -C "$scratch/incoming"
(cd "$scratch/incoming" && find . -type f -print0) | while IFS= read -r -d '' f; do
  if ! cmp -s "$scratch/incoming/$f" "$scratch/src/$f"; then
    mkdir -p "$(dirname "$scratch/src/$f")" && cp "$scratch/incoming/$f" "$scratch/src/$f"
  fi
done
rm -rf "$scratch/incoming"
ln -sfn "$(cd "$here/../shared" && pwd)" "$scratch/shared"
mkdir -p "$scratch/src/tests/ort"
[ -d "$here/tests/ort/node_modules" ] && ln -sfn "$here/tests/ort/node_modules" "$scratch/src/tests/ort/node_modules"
[ -d "$here/tests/tok" ] && ln -sfn "$here/tests/tok" "$scratch/src/tests/tok"

if [ ! -f "$scratch/build/CMakeCache.txt" ]; then
  launcher=()
  command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  cmake -S "$scratch/src" -B "$scratch/build" -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" >/dev/null
fi

args=()
for a in "$@"; do  # patches named relative to the caller's folder
  if [ -f "$a" ]; then args+=("$(cd "$(dirname "$a")" && pwd)/$(basename "$a")"); else args+=("$a"); fi
done
exec python3 "$here/scripts/mutants.py" --src "$scratch/src" --build "$scratch/build" "${args[@]}"
