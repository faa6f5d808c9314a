#!/usr/bin/env bash
# Extracts cuda.h and the libcuda.so link stub from Debian's nvidia-cuda-dev
# (non-free, bookworm) for one architecture, without installing the package:
# enough to compile and link -tags cuda binaries on a machine without a GPU.
# The stub is for linking only; at run time the GPU host's (or Jetson's)
# driver provides libcuda.so.1.
#
# Usage: scripts/cuda-deps.sh [amd64|arm64] [--print-dir]
#   amd64 (default: this machine's) or arm64 (for cross-building Jetson
#   binaries). The files land in
#   ${XDG_CACHE_HOME:-~/.cache}/edge/cuda/linux-<arch>/{include/cuda.h,lib/libcuda.so};
#   running it again is a no-op once they are there. --print-dir prints that
#   directory and fetches nothing.
set -euo pipefail
arch=""
print=0
for a in "$@"; do
  case $a in
  amd64 | arm64) arch=$a ;;
  --print-dir) print=1 ;;
  *) echo "cuda-deps: unknown argument $a (want amd64, arm64 or --print-dir)" >&2; exit 2 ;;
  esac
done
if [[ -z $arch ]]; then
  case $(uname -m) in aarch64 | arm64) arch=arm64 ;; *) arch=amd64 ;; esac
fi
triplet=$([[ $arch == arm64 ]] && echo aarch64-linux-gnu || echo x86_64-linux-gnu)
dest="${XDG_CACHE_HOME:-$HOME/.cache}/edge/cuda/linux-$arch"
if [[ $print == 1 ]]; then
  echo "$dest"
  exit 0
fi
if [[ -f $dest/include/cuda.h && -f $dest/lib/libcuda.so ]]; then
  exit 0
fi
tmp=$(mktemp -d); chmod 755 "$tmp"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/lists/partial" "$dest/include" "$dest/lib"
echo "deb [arch=$arch] http://deb.debian.org/debian bookworm main contrib non-free" > "$tmp/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$tmp/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::State::Lists=$tmp/lists" -o "Debug::NoLocking=1"
  -o "APT::Architecture=$arch" -o "APT::Architectures::=$arch")
echo "cuda-deps: fetching the nvidia-cuda-dev package list ($arch)" >&2
apt-get "${apt_opts[@]}" update -qq
echo "cuda-deps: downloading nvidia-cuda-dev:$arch (~770 MB, only two files are kept)" >&2
(cd "$tmp" && apt-get "${apt_opts[@]}" download "nvidia-cuda-dev:$arch" 2>&1 | grep -v "unsandboxed" >&2 || true)
deb=$(ls "$tmp"/nvidia-cuda-dev_*_"$arch".deb)
dpkg-deb --fsys-tarfile "$deb" | tar -x -C "$tmp" ./usr/include/cuda.h "./usr/lib/$triplet/stubs/libcuda.so"
cp "$tmp/usr/include/cuda.h" "$dest/include/"
cp "$tmp/usr/lib/$triplet/stubs/libcuda.so" "$dest/lib/"
echo "cuda-deps: wrote $dest/include/cuda.h and $dest/lib/libcuda.so ($arch)" >&2
