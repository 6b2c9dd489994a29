#!/bin/sh
# Installs what tl builds and tests with; does nothing when it is all there.
# Debian packages, then ONNX Runtime's node package (the reference peer of the tests)
# into tests/ort/node_modules (git-ignored).
set -eu
cd "$(dirname "$0")/.."
pkgs="cmake g++ make pkg-config libcli11-dev libfmt-dev libonnx-dev libprotobuf-dev protobuf-compiler
ocl-icd-opencl-dev opencl-headers pocl-opencl-icd libclblast-dev libeigen3-dev libzstd-dev libgtest-dev"
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
