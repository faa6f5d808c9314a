#!/usr/bin/env bash
# fetch-ort.sh — provision the ONNX Runtime shared library that edge loads.
#
# It takes the official ONNX Runtime build shipped inside the npm package
# onnxruntime-node (CPU execution provider; linux x64 and arm64), checks the
# package against its pinned sha512, and installs only the shared library as
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/edge/onnxruntime/<version>/linux-<arch>/libonnxruntime.so
#
# which is where runtime/onnx looks when neither the config key
# onnxruntime.library nor EDGE_ORT_LIB names a library. Running it again is a
# no-op once the library is in place.
#
# Usage: scripts/fetch-ort.sh [--print-path] [--arch x64|arm64]
#   --print-path  print the library path and exit (nothing is fetched)
#   --arch        fetch for another architecture (default: this machine's)
#
# The package comes from `npm pack` when npm is installed (so npm's registry
# and proxy settings apply), else straight from registry.npmjs.org (curl or
# wget; set EDGE_NPM_REGISTRY to use a mirror).
#
# The version is pinned to the one runtime/onnx expects (onnx.ORTVersion):
# onnxruntime_go v1.27.0 speaks C API version 24, which ONNX Runtime >= 1.24
# serves; 1.30.0 matches the GPU test host's ONNX Runtime.
set -euo pipefail

ORT_VERSION=1.30.0
# sha512 of onnxruntime-node-1.30.0.tgz (npm dist.integrity, in hex).
ORT_SHA512=b7086cd42d82fc1164cf5c9ce4e634288536194aba0d444eee10f86f1e50d90cb79c0309c115d6f31537355733136f5503d96894b3987a9a03f1f8d318e7c8ab

die() { echo "fetch-ort.sh: $*" >&2; exit 1; }

print_only=0
arch=""
while [ $# -gt 0 ]; do
	case "$1" in
	--print-path) print_only=1 ;;
	--arch) shift; arch="${1:-}" ;;
	--arch=*) arch="${1#--arch=}" ;;
	-h | --help) sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
	shift
done

[ "$(uname -s)" = Linux ] || die "only Linux is supported (this is $(uname -s))"
if [ -z "$arch" ]; then
	case "$(uname -m)" in
	x86_64 | amd64) arch=x64 ;;
	aarch64 | arm64) arch=arm64 ;;
	*) die "no ONNX Runtime build for machine $(uname -m) (want x86_64 or aarch64)" ;;
	esac
fi
case "$arch" in x64 | arm64) ;; *) die "--arch must be x64 or arm64, not $arch" ;; esac

cache="${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/edge/onnxruntime/${ORT_VERSION}/linux-${arch}"
lib="$cache/libonnxruntime.so"
if [ "$print_only" = 1 ]; then
	echo "$lib"
	exit 0
fi
if [ -s "$lib" ]; then
	echo "ONNX Runtime $ORT_VERSION already at $lib" >&2
	echo "$lib"
	exit 0
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tgz="$tmp/onnxruntime-node-${ORT_VERSION}.tgz"
registry="${EDGE_NPM_REGISTRY:-https://registry.npmjs.org}"
url="${registry%/}/onnxruntime-node/-/onnxruntime-node-${ORT_VERSION}.tgz"

echo "fetching onnxruntime-node@${ORT_VERSION} (~110 MB) ..." >&2
if command -v npm >/dev/null 2>&1 && [ -z "${EDGE_NPM_REGISTRY:-}" ]; then
	(cd "$tmp" && npm pack --silent "onnxruntime-node@${ORT_VERSION}" >/dev/null) ||
		die "npm pack onnxruntime-node@${ORT_VERSION} failed"
elif command -v curl >/dev/null 2>&1; then
	curl -fsSL --retry 3 -o "$tgz" "$url" || die "download of $url failed"
elif command -v wget >/dev/null 2>&1; then
	wget -q -O "$tgz" "$url" || die "download of $url failed"
else
	die "need npm, curl or wget to download $url"
fi
[ -s "$tgz" ] || die "no package at $tgz after download"

got="$(sha512sum "$tgz" | cut -d' ' -f1)"
[ "$got" = "$ORT_SHA512" ] || die "sha512 mismatch for onnxruntime-node-${ORT_VERSION}.tgz: got $got, want $ORT_SHA512"

member="package/bin/napi-v6/linux/${arch}/libonnxruntime.so.1"
tar -xzf "$tgz" -C "$tmp" "$member" || die "$member is not in the package"
mkdir -p "$cache"
# Install atomically: a concurrent reader never sees a half-written library.
cp "$tmp/$member" "$cache/.libonnxruntime.so.$$"
chmod 0755 "$cache/.libonnxruntime.so.$$"
mv -f "$cache/.libonnxruntime.so.$$" "$lib"
echo "installed ONNX Runtime $ORT_VERSION ($arch) at $lib" >&2
echo "$lib"
