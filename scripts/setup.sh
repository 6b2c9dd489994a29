#!/bin/sh
# Installs the Debian packages tl builds and tests with; does nothing when they are all there.
set -eu
pkgs="cmake g++ make pkg-config libcli11-dev libfmt-dev libonnx-dev libprotobuf-dev protobuf-compiler
ocl-icd-opencl-dev opencl-headers pocl-opencl-icd libeigen3-dev libzstd-dev libgtest-dev"
missing=""
for p in $pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "setup: installing$missing" >&2
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
