#!/usr/bin/env bash
# codec_gpu.sh BINDIR OUT: the whole GPU step of the codec work, in one command on the GPU host
# (no Go toolchain there), from the repository root:
#
#   1. kernels/build.sh OUT/kernels: edge.fatbin + manifest.json with nvcc (commit both into
#      kernels/); the tests below load that fatbin ($EDGE_KERNELS_FATBIN);
#   2. (meanwhile, on the CPU) scripts/golden/codec.py OUT/codec_testdata: the tiny seeded EnCodec
#      and Mimi codec directories, their ONNX exports and goldens (commit into codec/testdata/;
#      margin.json says which exporter made each graph, or why none did);
#   3. the rvq CUDA tests (the fp32 kernel's and the existing ones) and the codec tests (CPU goldens
#      of both families against the new testdata, and the CUDA quantizer's);
#   4. benchmarks: the fp32 kernel alone (an hour of EnCodec-24kHz frames a call, Q = 8 and 32)
#      and scripts/bench/codec_gpu.py (the whole path against transformers' encode()).
#
# BINDIR holds plugins_rvq.test[.xz] and codec.test[.xz], built on a development machine with
#   make cuda-deps && CGO_CFLAGS=... go test -c -tags cuda,kernels_external -ldflags='-s -w'
# (scripts/codec_gpu.sh's caller's recipe is in BENCHMARKS.md's codec section). The codec
# benchmark's edge side needs ONNX Runtime's CUDA EP: $EDGE_ORT_CUDA_EP and $EDGE_ORT_LIB, or
# $ORT_EP_PARTS and $ORT_CORE as for scripts/bench/run.sh pipeline-gpu; without them that row is
# reported as not run. Logs and results: OUT/*.log, OUT/summary.txt, OUT/codec_gpu.{json,md}.
# Exit status: the number of failed steps.
set -uo pipefail
bindir=$(cd "${1:?usage: codec_gpu.sh BINDIR OUT}" && pwd)
out=${2:?usage: codec_gpu.sh BINDIR OUT}
mkdir -p "$out"
out=$(cd "$out" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
failed=0
step() { # step NAME RC
	echo "$1: exit $2 at $(date +%T)" | tee -a "$out/summary.txt"
	[[ $2 -eq 0 ]] || failed=$((failed + 1))
}
export PYTHONUNBUFFERED=1

kernels/build.sh "$out/kernels" >"$out/build.log" 2>&1 &
build=$!
python3 scripts/golden/codec.py "$out/codec_testdata" >"$out/codec_golden.log" 2>&1
step codec_golden $?
wait $build
step fatbin $?
export EDGE_KERNELS_FATBIN=$out/kernels/edge.fatbin
[[ -f $EDGE_KERNELS_FATBIN ]] || EDGE_KERNELS_FATBIN=$root/kernels/edge.fatbin

# The new goldens replace the committed ones in this (scratch) checkout for the codec tests.
if [[ -d $out/codec_testdata/encodec ]]; then
	cp -r "$out"/codec_testdata/* codec/testdata/
fi

# ONNX Runtime's CUDA EP, when its parts came along.
if [[ -z ${EDGE_ORT_CUDA_EP:-} && -n ${ORT_EP_PARTS:-} ]]; then
	scripts/ort-cuda-ep.sh unpack "$ORT_EP_PARTS" "$out/ortcuda" >"$out/ortcuda.log" 2>&1 &&
		export EDGE_ORT_CUDA_EP=$out/ortcuda/libonnxruntime_providers_cuda.so
fi
if [[ -n ${ORT_CORE:-} && -z ${EDGE_ORT_LIB:-} ]]; then
	mkdir -p "$out/ortcore"
	xz -dc "$ORT_CORE/libonnxruntime.so.1.29.0.xz" >"$out/ortcore/libonnxruntime.so.1.29.0"
	cp "$ORT_CORE/libonnxruntime_providers_shared.so" "$out/ortcore/"
	export EDGE_ORT_LIB=$out/ortcore/libonnxruntime.so.1.29.0
fi

# the new code's tests first, then the rest of the rvq CUDA suite (rvq_decode changed for all)
timeout 90 scripts/gpu-test.sh "$bindir" "$out/tests" \
	plugins_rvq:'-test.v -test.run CUDAF32|CUDAOp|CUDADecode' \
	codec:'-test.v -test.run Golden|Mimi|Quantizer|CUDA|Bad|Bandwidth'
step tests $?
timeout 90 scripts/gpu-test.sh "$bindir" "$out/tests_rvq" plugins_rvq:'-test.run CUDA'
step tests_rvq_all $?

# gpu-test.sh's environment for the benchmarks
sp=$(python3 -c 'import onnxruntime, os; print(os.path.dirname(os.path.dirname(onnxruntime.__file__)))')
export LD_LIBRARY_PATH=$(ls -d "$sp"/nvidia/*/lib 2>/dev/null | tr '\n' ':')${LD_LIBRARY_PATH:-}
export EDGE_ORT_LIB=${EDGE_ORT_LIB:-$(ls "$sp"/onnxruntime/capi/libonnxruntime.so.1.* | head -1)}
bins=$(mktemp -d)
for n in plugins_rvq codec; do
	if [[ -f $bindir/$n.test.xz ]]; then xz -dc "$bindir/$n.test.xz" >"$bins/$n.test"; else cp "$bindir/$n.test" "$bins/$n.test"; fi
	chmod +x "$bins/$n.test"
done
(cd plugins/rvq && timeout 45 "$bins/plugins_rvq.test" -test.run '^$' -test.bench CUDAF32Encode -test.benchtime 5x) >"$out/bench_rvq_f32.log" 2>&1
step bench_rvq_f32 $?
timeout 100 python3 scripts/bench/codec_gpu.py --codec-test "$bins/codec.test" "$out" >"$out/bench_codec.log" 2>&1
step bench_codec $?
rm -rf "$bins"
cat "$out/summary.txt"
exit "$failed"
