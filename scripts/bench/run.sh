#!/usr/bin/env bash
# run.sh NAME [OUT]: one benchmark of BENCHMARKS.md, ours and its peer in one
# run, from a checkout that holds the test binaries scripts/bench/build.sh
# made (bin/bench/*.test, bin/cuda/*.test). No Go toolchain is needed here;
# python3 with the peers' packages is (numpy, torch, torchaudio,
# transformers, onnxruntime, onnx). OUT (default /tmp/edge-bench) gets the
# JSON and markdown that the peer scripts write.
#
#   CPU: fbank-cpu  rvq-cpu  dpx-cpu  audio  onnx
#   GPU: fbank-gpu  rvq-gpu  dpx-gpu  pipeline-gpu
#
# onnx and pipeline-gpu take the ONNX Runtime core from $EDGE_ORT_LIB; onnx
# defaults to the python onnxruntime package's library. pipeline-gpu also
# needs the CUDA plugin EP and its matching 1.29.0 core (both made on a
# development machine by scripts/ort-cuda-ep.sh): either $EDGE_ORT_CUDA_EP and
# $EDGE_ORT_LIB, or $ORT_EP_PARTS (the directory of `ort-cuda-ep.sh pack`)
# and $ORT_CORE (the directory of `ort-cuda-ep.sh core`), unpacked into OUT.
# It exports the large random model into OUT unless $EDGE_LARGE_MODEL is set.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
name=${1:?usage: run.sh fbank-cpu|rvq-cpu|dpx-cpu|audio|onnx|fbank-gpu|rvq-gpu|dpx-gpu|pipeline-gpu [OUT]}
out=${2:-/tmp/edge-bench}
mkdir -p "$out"
out=$(cd "$out" && pwd)
B=$root/bin/bench C=$root/bin/cuda
export PYTHONUNBUFFERED=1

need() {
	local f
	for f; do
		[[ -x $f ]] || { echo "run.sh: $f is missing (scripts/bench/build.sh makes it)" >&2; exit 1; }
	done
}

# pyortlib: the ONNX Runtime library of the python onnxruntime package.
pyortlib() {
	python3 -c 'import glob, os, onnxruntime as o; print(sorted(glob.glob(os.path.join(os.path.dirname(o.__file__), "capi", "libonnxruntime.so.*")))[-1])'
}

case $name in
fbank-cpu)
	need "$B/fbank-avx512.test" "$B/fbank-avx2.test" "$B/fbank-scalar.test"
	python3 "$root/scripts/golden/fbank_bench.py" --go-test "avx512=$B/fbank-avx512.test" \
		--go-test "avx2=$B/fbank-avx2.test" --go-test "scalar=$B/fbank-scalar.test" --benchtime 1s --repeats 7
	;;
rvq-cpu)
	need "$B/rvq.test"
	cd "$root/plugins/rvq"
	"$B/rvq.test" -test.run '^$' -test.bench 'Encode$' -test.benchtime 5x
	"$B/rvq.test" -test.run '^$' -test.bench 'EncodeGraded' -test.benchtime 3x -test.count 2
	python3 "$root/scripts/golden/rvq.py" --bench --bench-devices cpu,cuda --repeats 5
	;;
dpx-cpu)
	need "$B/dpx.test"
	cd "$root/plugins/dpx"
	python3 bench_torchaudio.py "$B/dpx.test" --json "$out/dpx_cpu.json"
	;;
audio)
	need "$B/audio.test"
	cd "$root/runtime/audio"
	"$B/audio.test" -test.run XXX -test.bench . -test.benchtime 5x -test.count 2
	;;
onnx)
	need "$B/onnx.test"
	EDGE_ORT_LIB=${EDGE_ORT_LIB:-$(pyortlib)}
	export EDGE_ORT_LIB
	cd "$root/runtime/onnx"
	echo "== all cores (EDGE_ORT_LIB=$EDGE_ORT_LIB)"
	"$B/onnx.test" -test.run '^$' -test.bench . -test.benchtime 1s -test.count 3
	if (($(nproc) >= 4)); then
		echo "== 2 cores (taskset -c 2,3)"
		taskset -c 2,3 "$B/onnx.test" -test.run '^$' -test.bench . -test.benchtime 1s -test.count 3
	fi
	;;
fbank-gpu)
	need "$C/plugins_fbank.test"
	python3 "$root/scripts/bench/fbank_gpu.py" --test-binary "$C/plugins_fbank.test" --out "$out/fbank_gpu"
	python3 "$root/scripts/bench/fft_floor.py" --frames 8192
	;;
rvq-gpu)
	need "$C/plugins_rvq.test"
	cd "$root/plugins/rvq"
	python3 "$root/scripts/bench/rvq_gpu.py" "$C/plugins_rvq.test" \
		--variants 'rvq_encode_wa_m128n(128s6pwra_d128|128s12pwg_d256|128s13pwf_d256)' \
		--md "$out/rvq_gpu.md" --json "$out/rvq_gpu.json"
	;;
dpx-gpu)
	need "$C/plugins_dpx.test"
	cd "$root/plugins/dpx"
	python3 "$root/scripts/bench/dpx_gpu.py" "$C/plugins_dpx.test" --benchtime 10x --json "$out/dpx_gpu.json"
	"$C/plugins_dpx.test" -test.run '^$' -test.bench '^BenchmarkCUDAAlignShape$' -test.benchtime 10x
	;;
pipeline-gpu)
	need "$C/asr.test"
	if [[ -z ${EDGE_ORT_CUDA_EP:-} ]]; then
		"$root/scripts/ort-cuda-ep.sh" unpack "${ORT_EP_PARTS:?set EDGE_ORT_CUDA_EP or ORT_EP_PARTS}" "$out/ortcuda"
		export EDGE_ORT_CUDA_EP=$out/ortcuda/libonnxruntime_providers_cuda.so
	fi
	if [[ -z ${EDGE_ORT_LIB:-} ]]; then
		: "${ORT_CORE:?set EDGE_ORT_LIB or ORT_CORE}"
		mkdir -p "$out/ortcore"
		xz -dc "$ORT_CORE/libonnxruntime.so.1.29.0.xz" >"$out/ortcore/libonnxruntime.so.1.29.0"
		cp "$ORT_CORE/libonnxruntime_providers_shared.so" "$out/ortcore/"
		export EDGE_ORT_LIB=$out/ortcore/libonnxruntime.so.1.29.0
	fi
	if [[ -z ${EDGE_LARGE_MODEL:-} ]]; then
		python3 "$root/models/scripts/export_large.py" "$out/large10"
		export EDGE_LARGE_MODEL=$out/large10
	fi
	# cuBLAS, cuDNN and the CUDA 13 runtime of the python nvidia packages
	nv=$(python3 -c 'import nvidia; print(list(nvidia.__path__)[0])')
	libs=$(find "$nv" -maxdepth 3 -type d -name lib | tr '\n' ':')
	export LD_LIBRARY_PATH=${libs%:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
	cd "$root/asr"
	"$C/asr.test" -test.run '^$' -test.bench PipelineGPU -test.benchtime 3x
	;;
*)
	echo "run.sh: unknown benchmark $name" >&2
	exit 2
	;;
esac
