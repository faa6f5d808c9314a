#!/usr/bin/env bash
# cross-deps.sh: the Debian (bookworm) packages that linux/arm64 builds and
# tests need on an amd64 machine: gcc-aarch64-linux-gnu and
# libc6-dev-arm64-cross (cgo cross compiler and sysroot) and qemu-user-static
# (runs arm64 binaries). A no-op when they are installed; installs them with
# apt-get (as root, or through sudo) otherwise.
set -euo pipefail
need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
[[ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ]] || need+=(libc6-dev-arm64-cross)
command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)
[[ ${#need[@]} -eq 0 ]] && exit 0
sudo=()
[[ $(id -u) -eq 0 ]] || sudo=(sudo)
echo "cross-deps: installing ${need[*]}" >&2
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
