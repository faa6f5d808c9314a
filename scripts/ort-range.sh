#!/usr/bin/env bash
# ort-range.sh: test the supported ONNX Runtime range. The encoder
# (runtime/onnx) and ASR end-to-end (asr) tests run once against every
# onnxruntime-node release scripts/fetch-ort.sh pins from the minimum
# (onnx.MinVersion, 1.24) to the newest, each library fetched and cached under
# ~/.cache/edge/onnxruntime/<version>/; the older pinned releases (1.22, 1.23:
# what JetPack 6 users have) must be refused by Init with an error naming
# their version and the minimum (TestOlderLibraryRefused).
#
# Usage: scripts/ort-range.sh [--arch x64|arm64]   (arm64: under qemu-user)
# The test binaries are compiled once and run per library (no -race: the
# race-instrumented suite runs in `make test` against the default library).
# Of asr, the end-to-end tests run ($ORT_RANGE_ASR_RUN, default below): the
# bundled model transcribing and aligning, long audio in chunks, the
# training-pipeline match; the concurrency and heap tests do not depend on
# the ONNX Runtime version and run once in `make test`.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
arch=x64
[[ ${1:-} == --arch ]] && arch=${2:?--arch x64|arm64}
min=$(sed -n 's/^const MinVersion = "\(.*\)"$/\1/p' runtime/onnx/version.go)
[[ -n $min ]] || { echo "ort-range: no MinVersion in runtime/onnx/version.go" >&2; exit 1; }
out=$root/bin/ort-range-$arch
mkdir -p "$out"
run=()
if [[ $arch == arm64 ]]; then
	export GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC=aarch64-linux-gnu-gcc
	run=(qemu-aarch64-static -L /usr/aarch64-linux-gnu)
fi
pkgs=(runtime/onnx asr)
declare -A runs=([runtime/onnx]='.' [asr]=${ORT_RANGE_ASR_RUN:-'^(TestDefaultModel|TestTranscribeAndAlignRun|TestEmissionsChunking|TestAlignErrors)'})
for p in "${pkgs[@]}"; do
	go test -c -o "$out/${p//\//_}.test" "./$p"
done
older() { [[ $(printf '%s\n%s\n' "$1" "$min" | sort -V | head -1) == "$1" && $1 != "$min" ]]; }
tested=() refused=() fail=0
for v in $(scripts/fetch-ort.sh --versions); do
	lib=$(scripts/fetch-ort.sh --arch "$arch" --version "$v" 2>/dev/null) || { echo "ort-range: fetching $v failed" >&2; exit 1; }
	if older "$v"; then
		start=$(date +%s)
		if (cd runtime/onnx && EDGE_ORT_OLD_LIB=$lib "${run[@]}" "$out/runtime_onnx.test" -test.count=1 \
			-test.run '^TestOlderLibraryRefused$' -test.v) >"$out/$v.log" 2>&1 && grep -q -- '--- PASS: TestOlderLibraryRefused' "$out/$v.log"; then
			echo "ok   ONNX Runtime $v refused clearly ($(($(date +%s) - start))s)"
			refused+=("$v")
		else
			echo "FAIL ONNX Runtime $v: not refused as expected"; tail -20 "$out/$v.log"; fail=1
		fi
		continue
	fi
	for p in "${pkgs[@]}"; do
		start=$(date +%s)
		if (cd "$p" && EDGE_ORT_LIB=$lib "${run[@]}" "$out/${p//\//_}.test" -test.count=1 -test.run "${runs[$p]}") >"$out/$v-${p//\//_}.log" 2>&1; then
			echo "ok   ONNX Runtime $v $p ($(($(date +%s) - start))s)"
		else
			echo "FAIL ONNX Runtime $v $p"; tail -30 "$out/$v-${p//\//_}.log"; fail=1
		fi
	done
	tested+=("$v")
done
echo "ort-range ($arch): tested ${tested[*]}; refused ${refused[*]}"
exit $fail
