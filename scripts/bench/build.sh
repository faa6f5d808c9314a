#!/usr/bin/env bash
# build.sh [cpu|cuda|all]: the test binaries that scripts/bench/run.sh runs,
# built on a machine with Go 1.26 and cgo (the GPU host has no Go toolchain;
# copy the checkout with its bin/ folder there).
#   cpu:  bin/bench/fbank-{scalar,avx2,avx512}.test (the three fbank builds),
#         bin/bench/{dpx,rvq,audio,onnx}.test
#   cuda: bin/cuda/*.test, the -tags cuda test binaries (make test-cuda-bin,
#         which first extracts cuda.h and the libcuda.so link stub)
#   all:  both (the default)
set -euo pipefail
cd "$(dirname "$0")/../.."
what=${1:-all}
[[ $what == cpu || $what == cuda || $what == all ]] || { echo "usage: $0 [cpu|cuda|all]" >&2; exit 2; }
export CGO_ENABLED=1
if [[ $what != cuda ]]; then
	mkdir -p bin/bench
	GOEXPERIMENT= go test -c -o bin/bench/fbank-scalar.test ./plugins/fbank
	GOEXPERIMENT=simd go test -c -o bin/bench/fbank-avx2.test ./plugins/fbank
	GOEXPERIMENT=simd go test -c -tags fbank_avx512 -o bin/bench/fbank-avx512.test ./plugins/fbank
	for p in plugins/dpx plugins/rvq runtime/audio runtime/onnx; do
		go test -c -o "bin/bench/${p##*/}.test" "./$p"
	done
	ls -l bin/bench
fi
if [[ $what != cpu ]]; then
	make test-cuda-bin
fi
