#!/usr/bin/env bash
# fetch-silero-vad.sh — provision the Silero VAD v5 model that the vad op runs.
#
# Silero VAD (https://github.com/snakers4/silero-vad, MIT licence, "Copyright
# (c) 2020-present Silero Team") is taken from the npm package
# @ricky0123/vad-web, which ships it as dist/silero_vad_v5.onnx. That file is
# byte-identical to silero-vad's own src/silero_vad/data/silero_vad.onnx as
# of its commit f0d880d (2024-07-09, v5.1; git blob b3e3a900). The npm
# package carries no copy of Silero's licence, so the model is fetched, not
# committed. The package is checked against its pinned sha512 and the model
# against its sha256; only the model is installed, as
#
#   ${XDG_CACHE_HOME:-$HOME/.cache}/edge/models/silero-vad/v5/silero_vad_v5.onnx
#
# which is where plugins/vad looks when neither the op parameter model nor
# EDGE_VAD_MODEL names a file. Running it again is a no-op once the model is
# in place.
#
# Usage: scripts/fetch-silero-vad.sh [--print-path]
#   --print-path  print the model path and exit (nothing is fetched)
#
# The package comes from `npm pack` when npm is installed (so npm's registry
# and proxy settings apply), else straight from registry.npmjs.org (curl or
# wget; set EDGE_NPM_REGISTRY to use a mirror).
set -euo pipefail

PKG=@ricky0123/vad-web
PKG_VERSION=0.0.31
# sha512 of ricky0123-vad-web-0.0.31.tgz (npm dist.integrity, in hex).
PKG_SHA512=78f56af13bc1db5b1d1d2c5531938421ff4955aecc018a5a21a35778682c3ce88c08df316cf09d1762d2e5a623ed5451dd9c73bad79d815f59a6557ae4803516
# sha256 of package/dist/silero_vad_v5.onnx (2327524 bytes); plugins/vad.ModelSHA256.
MODEL_SHA256=2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f

die() { echo "fetch-silero-vad.sh: $*" >&2; exit 1; }
. "$(dirname "$0")/npm-fetch.sh"

print_only=0
while [ $# -gt 0 ]; do
	case "$1" in
	--print-path) print_only=1 ;;
	-h | --help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument $1 (see --help)" ;;
	esac
	shift
done

cache="${XDG_CACHE_HOME:-${HOME:?HOME is not set}/.cache}/edge/models/silero-vad/v5"
model="$cache/silero_vad_v5.onnx"
if [ "$print_only" = 1 ]; then
	echo "$model"
	exit 0
fi
if [ -s "$model" ]; then
	got="$(sha256sum "$model" | cut -d' ' -f1)"
	if [ "$got" = "$MODEL_SHA256" ]; then
		echo "Silero VAD v5 already at $model" >&2
		echo "$model"
		exit 0
	fi
	echo "fetch-silero-vad.sh: $model has sha256 $got, want $MODEL_SHA256: fetching it again" >&2
fi

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
tgz="$tmp/ricky0123-vad-web-${PKG_VERSION}.tgz"
echo "fetching ${PKG}@${PKG_VERSION} (~5.5 MB) for Silero VAD v5 ..." >&2
npm_fetch "${PKG}" "${PKG_VERSION}" "$tgz"

got="$(sha512sum "$tgz" | cut -d' ' -f1)"
[ "$got" = "$PKG_SHA512" ] || die "sha512 mismatch for ${PKG}@${PKG_VERSION}: got $got, want $PKG_SHA512"

member="package/dist/silero_vad_v5.onnx"
tar -xzf "$tgz" -C "$tmp" "$member" || die "$member is not in the package"
got="$(sha256sum "$tmp/$member" | cut -d' ' -f1)"
[ "$got" = "$MODEL_SHA256" ] || die "sha256 mismatch for $member: got $got, want $MODEL_SHA256"
mkdir -p "$cache"
# Install atomically: a concurrent reader never sees a half-written model.
cp "$tmp/$member" "$cache/.silero_vad_v5.onnx.$$"
chmod 0644 "$cache/.silero_vad_v5.onnx.$$"
mv -f "$cache/.silero_vad_v5.onnx.$$" "$model"
echo "installed Silero VAD v5 at $model" >&2
echo "$model"
