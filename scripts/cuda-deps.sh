#!/usr/bin/env bash
# Extracts cuda.h and the libcuda.so link stub from Debian's nvidia-cuda-dev
# (non-free) into .cache/cuda/{include,lib}, without installing the package:
# enough to compile and link -tags cuda binaries on a machine without a GPU.
# The stub is for linking only; at run time the GPU host's driver provides
# libcuda.so.1.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.cache/cuda"
if [[ -f $dest/include/cuda.h && -f $dest/lib/libcuda.so ]]; then
  exit 0
fi
tmp=$(mktemp -d); chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$dest/include" "$dest/lib"
echo "deb http://deb.debian.org/debian bookworm main contrib non-free" > "$tmp/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$tmp/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::State::Lists=$tmp/lists" -o "Debug::NoLocking=1")
echo "cuda-deps: fetching the nvidia-cuda-dev package list" >&2
apt-get "${apt_opts[@]}" update -qq
echo "cuda-deps: downloading nvidia-cuda-dev (~770 MB, only two files are kept)" >&2
(cd "$tmp" && apt-get "${apt_opts[@]}" download nvidia-cuda-dev 2>&1 | grep -v "unsandboxed" >&2 || true)
deb=$(ls "$tmp"/nvidia-cuda-dev_*.deb)
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" ./usr/include/cuda.h ./usr/lib/x86_64-linux-gnu/stubs/libcuda.so
cp "$tmp/usr/include/cuda.h" "$dest/include/"
cp "$tmp/usr/lib/x86_64-linux-gnu/stubs/libcuda.so" "$dest/lib/"
echo "cuda-deps: wrote $dest/include/cuda.h and $dest/lib/libcuda.so" >&2
