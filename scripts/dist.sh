#!/usr/bin/env bash
# dist.sh: one tarball per platform that runs after untar on a machine with
# only glibc (no Go, no compiler, no network):
#
#   dist/edge-<version>-linux-<arch>.tar.gz
#     edge-<version>-linux-<arch>/bin/edge             the CPU CLI (cgo, glibc >= 2.34)
#     edge-<version>-linux-<arch>/lib/libonnxruntime.so ONNX Runtime (npm onnxruntime-node, CPU EP)
#     edge-<version>-linux-<arch>/models/default/       the bundled model and the demo clip
#     edge-<version>-linux-<arch>/models/silero-vad/    Silero VAD v5 (scripts/fetch-silero-vad.sh)
#     edge-<version>-linux-<arch>/LICENSES/             Go, every Go module linked in, ONNX Runtime
#     edge-<version>-linux-<arch>/README.md
#
# bin/edge finds lib/libonnxruntime.so, models/default and
# models/silero-vad/silero_vad_v5.onnx beside itself, so
#   tar -xzf edge-*-linux-amd64.tar.gz && edge-*/bin/edge transcribe edge-*/models/default/testdata/demo.wav
# works from any directory.
#
# Usage: scripts/dist.sh [amd64] [arm64]        build the tarballs
#        scripts/dist.sh --test [amd64] [arm64] unpack each into an empty
#        directory and transcribe the demo clip with nothing else on the
#        environment (arm64 under qemu-user with only the arm64 glibc); the
#        transcript must match the model's golden text
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
die() { echo "dist: $*" >&2; exit 1; }
test=0
arches=()
for a in "$@"; do
	case $a in
	--test) test=1 ;;
	amd64 | arm64) arches+=("$a") ;;
	*) die "unknown argument $a" ;;
	esac
done
[[ ${#arches[@]} -gt 0 ]] || arches=(amd64 arm64)
# The build names the tarballs after the checkout and records that name in
# dist/VERSION, which --test reads: it tests what the build wrote even when
# the checkout has moved on since.
if [[ $test == 1 ]]; then
	version=$(cat dist/VERSION 2>/dev/null) || die "dist/VERSION is missing: build the tarballs first (scripts/dist.sh ${arches[*]})"
else
	version=$(git describe --tags --always --dirty 2>/dev/null || echo dev)
fi

build() {
	local arch=$1 name=edge-$version-linux-$1
	local stage=$root/dist/$name ortarch=$([[ $1 == arm64 ]] && echo arm64 || echo x64)
	rm -rf "$stage" && mkdir -p "$stage/bin" "$stage/lib" "$stage/models/default/testdata" "$stage/models/silero-vad" "$stage/LICENSES"
	local env=(GOOS=linux GOARCH="$arch" CGO_ENABLED=1)
	[[ $arch == arm64 && $(go env GOHOSTARCH) != arm64 ]] && env+=(CC=aarch64-linux-gnu-gcc)
	env "${env[@]}" go build -trimpath -ldflags "-s -w" -o "$stage/bin/edge" ./cmd/edge
	cp "$(scripts/fetch-ort.sh --arch "$ortarch")" "$stage/lib/libonnxruntime.so"
	cp models/default/{model.onnx,model.int8.onnx,model.yaml,tokens.txt,README.md} "$stage/models/default/"
	cp models/default/testdata/demo.{wav,json} "$stage/models/default/testdata/"
	cp "$(scripts/fetch-silero-vad.sh)" "$stage/models/silero-vad/silero_vad_v5.onnx"
	cp "$(go env GOROOT)/LICENSE" "$stage/LICENSES/go.LICENSE"
	local mod ver dir f
	while read -r mod ver dir; do
		[[ -z $ver ]] && continue # the main module
		for f in "$dir"/LICENSE* "$dir"/COPYING* "$dir"/NOTICE*; do
			[[ -f $f ]] && cp "$f" "$stage/LICENSES/${mod//\//_}@$ver.$(basename "$f")"
		done
	done < <(env "${env[@]}" go list -deps -f '{{with .Module}}{{.Path}} {{.Version}} {{.Dir}}{{end}}' ./cmd/edge | sort -u)
	# onnxruntime-node ships no licence file; its package.json says MIT.
	cat >"$stage/LICENSES/onnxruntime.LICENSE" <<'MIT'
ONNX Runtime (lib/libonnxruntime.so, from the npm package onnxruntime-node, "license": "MIT")

MIT License

Copyright (c) Microsoft Corporation

Permission is hereby granted, free of charge, to any person obtaining a copy
of this software and associated documentation files (the "Software"), to deal
in the Software without restriction, including without limitation the rights
to use, copy, modify, merge, publish, distribute, sublicense, and/or sell
copies of the Software, and to permit persons to whom the Software is
furnished to do so, subject to the following conditions:

The above copyright notice and this permission notice shall be included in all
copies or substantial portions of the Software.

THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND, EXPRESS OR
IMPLIED, INCLUDING BUT NOT LIMITED TO THE WARRANTIES OF MERCHANTABILITY,
FITNESS FOR A PARTICULAR PURPOSE AND NONINFRINGEMENT. IN NO EVENT SHALL THE
AUTHORS OR COPYRIGHT HOLDERS BE LIABLE FOR ANY CLAIM, DAMAGES OR OTHER
LIABILITY, WHETHER IN AN ACTION OF CONTRACT, TORT OR OTHERWISE, ARISING FROM,
OUT OF OR IN CONNECTION WITH THE SOFTWARE OR THE USE OR OTHER DEALINGS IN THE
SOFTWARE.
MIT
	# Silero VAD's licence (github.com/snakers4/silero-vad, MIT).
	sed -e '1s/.*/Silero VAD v5 (models\/silero-vad\/silero_vad_v5.onnx, github.com\/snakers4\/silero-vad, MIT)/' \
		-e 's/^Copyright (c) Microsoft Corporation$/Copyright (c) 2020-present Silero Team/' \
		"$stage/LICENSES/onnxruntime.LICENSE" >"$stage/LICENSES/silero-vad.LICENSE"
	cat >"$stage/README.md" <<README
# edge $version (linux/$arch)

    bin/edge transcribe models/default/testdata/demo.wav
    bin/edge transcribe --format srt clip.wav

bin/edge loads lib/libonnxruntime.so (ONNX Runtime $(basename "$(dirname "$(dirname "$(scripts/fetch-ort.sh --arch "$ortarch" --print-path)")")"), CPU execution provider)
and models/default from beside itself; \$EDGE_ORT_LIB or --model override them. It needs
only glibc. GPU (CUDA/TensorRT) runs need the -tags cuda build and a GPU build of ONNX
Runtime: see docs/jetson.md in the source repository. Licences: LICENSES/.
README
	tar -C "$root/dist" -czf "$root/dist/$name.tar.gz" "$name"
	rm -rf "$stage"
	echo "dist/$name.tar.gz ($(du -h "$root/dist/$name.tar.gz" | cut -f1))"
}

check() {
	local arch=$1 name=edge-$version-linux-$1 tmp
	[[ -f dist/$name.tar.gz ]] || die "dist/$name.tar.gz is missing (scripts/dist.sh $arch)"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' RETURN
	mkdir "$tmp/empty"
	tar -C "$tmp/empty" -xzf "dist/$name.tar.gz"
	local run=()
	if [[ $arch == arm64 && $(uname -m) != aarch64 ]]; then
		# only the arm64 glibc: no ORT, Go or cache reachable
		run=(qemu-aarch64-static -L /usr/aarch64-linux-gnu)
	fi
	# An empty environment: no HOME cache, no EDGE_* variables, no PATH.
	(cd "$tmp/empty" && env -i HOME="$tmp/home" "${run[@]}" "./$name/bin/edge" transcribe \
		"$name/models/default/testdata/demo.wav") >"$tmp/out.txt" 2>"$tmp/err.txt" ||
		{ cat "$tmp/err.txt" >&2; die "$name: transcribing from the unpacked tarball failed"; }
	local want
	want=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["text"])' models/default/testdata/demo.json 2>/dev/null || true)
	[[ -s $tmp/out.txt ]] || die "$name: empty transcript"
	if [[ -n $want && $(tr -s ' \n' ' ' <"$tmp/out.txt" | sed 's/ $//') != "$want" ]]; then
		die "$name: transcript \"$(cat "$tmp/out.txt")\" is not the golden \"$want\""
	fi
	echo "ok   $name transcribes the demo clip from an empty directory: $(head -c 80 "$tmp/out.txt")"
}

mkdir -p dist
[[ $test == 1 ]] || echo "$version" >dist/VERSION
for a in "${arches[@]}"; do
	if [[ $test == 1 ]]; then check "$a"; else build "$a"; fi
done
