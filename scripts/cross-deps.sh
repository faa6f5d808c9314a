#!/usr/bin/env bash
# cross-deps.sh: the Debian (bookworm) packages that linux/arm64 builds and
# tests need on an amd64 machine: gcc-aarch64-linux-gnu and
# libc6-dev-arm64-cross (cgo cross compiler and sysroot) and qemu-user-static
# (runs arm64 binaries). A no-op when they are installed; installs them with
# apt-get (as root, or through passwordless sudo) otherwise, keeping the
# downloaded .deb files in ${XDG_CACHE_HOME:-~/.cache}/edge/apt so that a
# second install (a fresh CI container with the same cache) downloads
# nothing.
#
# Exits 1 with a message naming the missing packages when they cannot be
# installed (not root and no passwordless sudo, or apt-get failing); .ci/run
# then reports the arm64 steps as NOT RUN.
set -euo pipefail
need=()
command -v aarch64-linux-gnu-gcc >/dev/null || need+=(gcc-aarch64-linux-gnu)
[[ -e /usr/aarch64-linux-gnu/lib/ld-linux-aarch64.so.1 ]] || need+=(libc6-dev-arm64-cross)
command -v qemu-aarch64-static >/dev/null || need+=(qemu-user-static)
[[ ${#need[@]} -eq 0 ]] && exit 0
die() { echo "cross-deps: $*" >&2; exit 1; }
sudo=()
if [[ $(id -u) -ne 0 ]]; then
	command -v sudo >/dev/null && sudo -n true 2>/dev/null ||
		die "not root and no passwordless sudo: cannot apt-get install ${need[*]}"
	sudo=(sudo -n)
fi
command -v apt-get >/dev/null || die "no apt-get: install ${need[*]} (or their equivalents) by hand"
cache=${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/edge/apt
mkdir -p "$cache/archives/partial"
apt=("${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get -o "Dir::Cache::Archives=$cache/archives" -y -qq --no-install-recommends)
echo "cross-deps: installing ${need[*]} (.deb cache: $cache/archives)" >&2
# Without package lists (a fresh container) install fails at once; then update.
if ! "${apt[@]}" install "${need[@]}" >/dev/null 2>&1; then
	"${sudo[@]}" apt-get update -qq || die "apt-get update failed"
	"${apt[@]}" install "${need[@]}" >/dev/null || die "apt-get install ${need[*]} failed"
fi
