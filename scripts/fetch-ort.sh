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
# Usage: scripts/fetch-ort.sh [--print-path] [--arch x64|arm64] [--version V]
#   --print-path  print the library path and exit (nothing is fetched)
#   --arch        fetch for another architecture (default: this machine's)
#   --version     another onnxruntime-node release of the table below (the
#                 ORT range tests, scripts/ort-range.sh, use it); each bundles
#                 the ONNX Runtime library of the same version
#   --versions    print the pinned versions (oldest first) and exit
#
# The package comes from `npm pack` when npm is installed (so npm's registry
# and proxy settings apply), else straight from registry.npmjs.org (curl or
# wget; set EDGE_NPM_REGISTRY to use a mirror).
#
# The version is pinned to the one runtime/onnx expects (onnx.ORTVersion):
# onnxruntime_go v1.27.0 speaks C API version 24, which ONNX Runtime >= 1.24
# serves; 1.30.0 matches the GPU test host's ONNX Runtime. 1.22.0 and 1.23.2
# are pinned only so that tests can check that they are refused clearly.
set -euo pipefail

ORT_VERSION=1.30.0
# npm dist.integrity (sha512, base64) of each onnxruntime-node-<v>.tgz.
declare -A INTEGRITY=(
	[1.22.0]=sha512-QaAqr7PFekrmEsmu1rpw7OxJYyG+iACjNHoNtQIVt9Oh7st8WDPIIUe6KhF9l35HVJTJd9CV1rePoPmKhSV26g==
	[1.23.2]=sha512-OBTsG0W8ddBVOeVVVychpVBS87A9YV5sa2hJ6lc025T97Le+J4v++PwSC4XFs1C62SWyNdof0Mh4KvnZgtt4aw==
	[1.24.1]=sha512-Ex/oUXKdhDoxvlNxBT3oYtW0MH88yYpPlXQeVQUXpcJQmN24usd/8RCoPLN5kCHwDsiZ+nqsnjciyFRl423dQw==
	[1.24.2]=sha512-ZtTkUHNNk+Xpi2Sq2BcFjzc9Vx4n3o5RxYLgRvdrFzCBsGUU1dQRFf4LM9tCc7vFhPSoZqbvzZtkzRMXoDqKNg==
	[1.24.3]=sha512-JH7+czbc8ALA819vlTgcV+Q214/+VjGeBHDjX81+ZCD0PCVCIFGFNtT0V4sXG/1JXypKPgScQcB3ij/hk3YnTg==
	[1.25.1]=sha512-N0M58CGTiTsLkPpx9bxmRFi24GT6r67Qei/GrBEIiDyntcYdXU5vQZp112ypydG9vEKRFgbgUYQJnEi+jll8dg==
	[1.26.0]=sha512-OHl6PiOEOqxaLHL0N9eFrbzS7IGmu3BtJNH3RTEnRAheCIkfc3gjcjl4sGcjp9C22ZC9YTquDOxSdT/stBQ6BQ==
	[1.27.0]=sha512-QEzGwrvNBgv4uPVdnbHsOGG4G6T96mdlcFI8aAKPjMU8wOPpVocPXb6k3QGkaZagVTv2G9Bnnbo6Z3JdXr1fQw==
	[1.29.0]=sha512-WjiVVB72riILz8HbYvxvmjKyE/WmkYoSfKY++axo5jAR609HQg8MwiG/HhShpTcJfmmAdzxxmB+MMST3A+SiPA==
	[1.30.0]=sha512-twhs1C2C/BFkz1yc5OY0KIU2GUq6DURO7hD4bx5Q2Qy3nAMJwRXW8xU3NVczE29VA9lolLOYepoD8fjTGOfIqw==
)
VERSIONS="1.22.0 1.23.2 1.24.1 1.24.2 1.24.3 1.25.1 1.26.0 1.27.0 1.29.0 1.30.0"

die() { echo "fetch-ort.sh: $*" >&2; exit 1; }
. "$(dirname "$0")/npm-fetch.sh"

print_only=0
arch=""
while [ $# -gt 0 ]; do
	case "$1" in
	--print-path) print_only=1 ;;
	--arch) shift; arch="${1:-}" ;;
	--arch=*) arch="${1#--arch=}" ;;
	--version) shift; ORT_VERSION="${1:-}" ;;
	--version=*) ORT_VERSION="${1#--version=}" ;;
	--versions) echo "$VERSIONS"; exit 0 ;;
	-h | --help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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
[ -n "${INTEGRITY[$ORT_VERSION]:-}" ] || die "onnxruntime-node $ORT_VERSION is not pinned here (pinned: $VERSIONS)"

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
echo "fetching onnxruntime-node@${ORT_VERSION} (~100 MB) ..." >&2
npm_fetch "onnxruntime-node" "${ORT_VERSION}" "$tgz"

got="sha512-$(openssl dgst -sha512 -binary "$tgz" | base64 -w0)"
want="${INTEGRITY[$ORT_VERSION]}"
[ "$got" = "$want" ] || die "integrity mismatch for onnxruntime-node-${ORT_VERSION}.tgz: got $got, want $want"

member="package/bin/napi-v6/linux/${arch}/libonnxruntime.so.1"
tar -xzf "$tgz" -C "$tmp" "$member" || die "$member is not in the package"
mkdir -p "$cache"
# Install atomically: a concurrent reader never sees a half-written library.
cp "$tmp/$member" "$cache/.libonnxruntime.so.$$"
chmod 0755 "$cache/.libonnxruntime.so.$$"
mv -f "$cache/.libonnxruntime.so.$$" "$lib"
echo "installed ONNX Runtime $ORT_VERSION ($arch) at $lib" >&2
echo "$lib"
