#!/usr/bin/env bash
# test-arm64.sh: the CPU test suite for linux/arm64, cross-compiled here and
# run under qemu-user (no arm64 hardware needed).
#
# Every package with tests is compiled with GOARCH=arm64 CGO_ENABLED=1
# CC=aarch64-linux-gnu-gcc into bin/arm64-test/<pkg>.test and run by
# qemu-aarch64-static -L /usr/aarch64-linux-gnu in its package directory (as
# `go test` would), with EDGE_ORT_LIB pointing at the arm64 ONNX Runtime from
# npm onnxruntime-node (scripts/fetch-ort.sh --arch arm64). The golden tests
# compare the portable fbank/dpx/rvq kernels' outputs with the committed
# golden files (made on amd64) within the tolerances those tests document, so
# a pass means arm64 equals amd64 within them.
#
# -race is off: under qemu-user the race detector stops at start with
# "FATAL: ThreadSanitizer: unsupported VMA range ... Found 39 - Supported 48"
# (qemu gives a 39-bit address space; TSan on arm64 needs 48 bits).
#
# Every test of every package runs, except in asr, where the concurrency and
# heap-growth tests (arch-independent Go properties, minutes under emulation)
# are left to `make test`: its end-to-end tests (the bundled model
# transcribing and aligning the demo clips, long audio in chunks, the match
# with the training pipeline) and the rest run ($EDGE_ARM64_ASR_RUN).
#
# Needs gcc-aarch64-linux-gnu, libc6-dev-arm64-cross and qemu-user-static
# (Debian packages; .ci/run installs them). Usage: scripts/test-arm64.sh [PKG...]
# (default: every package with tests). EDGE_ARM64_TEST_ARGS adds test flags.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
die() { echo "test-arm64: $*" >&2; exit 1; }
for t in aarch64-linux-gnu-gcc qemu-aarch64-static; do
	command -v "$t" >/dev/null || die "$t is missing (apt-get install gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user-static)"
done
sysroot=/usr/aarch64-linux-gnu
[[ -e $sysroot/lib/ld-linux-aarch64.so.1 ]] || die "$sysroot/lib/ld-linux-aarch64.so.1 is missing (apt-get install libc6-dev-arm64-cross)"
lib=$(scripts/fetch-ort.sh --arch arm64)
export EDGE_ORT_LIB=$lib
export GOOS=linux GOARCH=arm64 CGO_ENABLED=1 CC=aarch64-linux-gnu-gcc
export QEMU_LD_PREFIX=$sysroot
out=$root/bin/arm64-test
mkdir -p "$out"
if [[ $# -gt 0 ]]; then
	pkgs=("$@")
else
	mapfile -t pkgs < <(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...)
fi
declare -A runs=([github.com/edgespeech/edge/asr]=${EDGE_ARM64_ASR_RUN:-'^(TestDefaultModel|TestTranscribeAndAlignRun|TestEmissionsChunking|TestAlignErrors|TestNumberWords|TestNormalize|TestDeviceDecodeFlow|TestFromAlignment)'})
fail=0
for pkg in "${pkgs[@]}"; do
	name=$(echo "${pkg#github.com/edgespeech/edge/}" | tr / _)
	dir=$(go list -f '{{.Dir}}' "$pkg")
	go test -c -o "$out/$name.test" "$pkg"
	start=$(date +%s)
	# shellcheck disable=SC2086
	if (cd "$dir" && qemu-aarch64-static -L "$sysroot" "$out/$name.test" -test.count=1 -test.run "${runs[$pkg]:-.}" ${EDGE_ARM64_TEST_ARGS:-}) >"$out/$name.log" 2>&1; then
		echo "ok   $pkg (arm64, qemu) $(($(date +%s) - start))s"
	else
		echo "FAIL $pkg (arm64, qemu) $(($(date +%s) - start))s"
		tail -40 "$out/$name.log"
		fail=1
	fi
done
exit $fail
