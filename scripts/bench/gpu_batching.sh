#!/usr/bin/env bash
# gpu_batching.sh [CARRY]: encoder batching on the GPU host, in one call
# (about 4 minutes), from the repository root there. Results under $OUT.
#
#   here:  scripts/bench/gpu_batching.sh --build   # writes bin/gpu-carry/ (edge-cuda.xz, asr.test.xz,
#                                                  # silero_vad_v5.onnx), the folder to carry
#   there: EDGE_ORT_CUDA_EP=/path/libonnxruntime_providers_cuda.so scripts/bench/gpu_batching.sh
#
# It measures, with encoder batching off (1 chunk per encoder run) and on
# (BATCH chunks), on --backend cuda --execution-provider cuda:
#   serve_batch{1,B}.txt  edge serve --bench: requests/s, p50/p95 latency and RTFx at
#                         concurrency 1, 4, 16 and 64 (the load generator is built into
#                         edge; max_batch BATCH, parallel 2 in both runs, so only the
#                         encoder batching differs)
#   serve_exhaustive.txt  the batched run with cuDNN's EXHAUSTIVE algorithm search
#                         (ONNX Runtime's default; edge's is HEURISTIC)
#   batch_batch{1,B}.json edge batch transcribe over ITEMS items (the bundled clips
#                         repeated), --jobs BATCH in both runs: the summary line;
#                         batch.txt: hours of audio per hour
#   align_batchB.json     edge batch align over the same items with their texts,
#                         --batch BATCH (in batch.txt too)
#   streams.txt           BenchmarkStreamCapacityGPU: 1, 4, 16 and 64 streams at once,
#                         audio seconds per wall second, batch 1 and 16
#   load.txt              BenchmarkStreamLoadGPU: 1 to 512 streams fed at real time,
#                         word latency p50/p95
#   parity.txt            TestCUDABatched: batched vs unbatched log-probs on the GPU
#   summary.txt           the tables, and how long each step took
#
# The environment is scripts/gpu-test.sh's: the CUDA libraries of the
# host's python nvidia packages on LD_LIBRARY_PATH, its onnxruntime core
# ($EDGE_ORT_LIB unless set), kernels/edge.fatbin ($EDGE_KERNELS_FATBIN: the
# binaries are built with kernels_external) and $EDGE_ORT_CUDA_EP (required).
# Knobs: BATCH (16), ITEMS (3000), SECONDS_EACH (6), LEVELS (1,4,16,64),
# STEPS (which of: serve batch align streams load parity; default all).
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
if [[ ${1:-} == --build ]]; then
	set -e
	export CGO_CFLAGS=-I$(scripts/cuda-deps.sh --print-dir)/include CGO_LDFLAGS=-L$(scripts/cuda-deps.sh --print-dir)/lib
	scripts/cuda-deps.sh
	mkdir -p bin/gpu-carry bin/cuda
	go build -tags cuda,kernels_external -ldflags "-s -w" -o bin/edge-cuda-ext ./cmd/edge
	go test -c -tags cuda,kernels_external -ldflags=-s\ -w -o bin/cuda/asr-ext.test ./asr
	xz -T2 -c bin/edge-cuda-ext >bin/gpu-carry/edge-cuda.xz
	xz -T2 -c bin/cuda/asr-ext.test >bin/gpu-carry/asr.test.xz
	make -s vad-model >/dev/null
	cp "$HOME/.cache/edge/models/silero-vad/v5/silero_vad_v5.onnx" bin/gpu-carry/
	ls -l bin/gpu-carry
	exit 0
fi
carry=$(cd "${1:-bin/gpu-carry}" && pwd)
out=${OUT:?set OUT to the results folder}
: "${EDGE_ORT_CUDA_EP:?set EDGE_ORT_CUDA_EP to the CUDA plugin EP library of ONNX Runtime}"
B=${BATCH:-16}
ITEMS=${ITEMS:-3000}
EACH=${SECONDS_EACH:-6}
LEVELS=${LEVELS:-1,4,16,64}
STEPS=" ${STEPS:-serve batch align streams load parity} "
want() { [[ $STEPS == *" $1 "* ]]; }
mkdir -p "$out"
sp=$(python3 -c 'import onnxruntime, os; print(os.path.dirname(os.path.dirname(onnxruntime.__file__)))')
ld=$(ls -d "$sp"/nvidia/*/lib 2>/dev/null | tr '\n' ':')
export LD_LIBRARY_PATH=${ld}${LD_LIBRARY_PATH:-}
export EDGE_ORT_LIB=${EDGE_ORT_LIB:-$(ls "$sp"/onnxruntime/capi/libonnxruntime.so.1.* | head -1)}
export EDGE_KERNELS_FATBIN=${EDGE_KERNELS_FATBIN:-$root/kernels/edge.fatbin}
export EDGE_VAD_MODEL=${EDGE_VAD_MODEL:-$carry/silero_vad_v5.onnx}
bins=$(mktemp -d)
trap 'rm -rf "$bins"' EXIT
xz -dc "$carry/edge-cuda.xz" >"$bins/edge" && chmod +x "$bins/edge"
xz -dc "$carry/asr.test.xz" >"$bins/asr.test" && chmod +x "$bins/asr.test"
edge=$bins/edge
gpu=(--backend cuda --execution-provider cuda)
sum=$out/summary.txt
: >"$sum"
step() { # step NAME CMD...: runs CMD, notes its exit status and time
	local name=$1 t0=$SECONDS rc
	shift
	"$@"
	rc=$?
	echo "# $name: exit $rc in $((SECONDS - t0)) s" >>"$sum"
}
{
	nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
	echo "$(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
	"$edge" version
	echo "EDGE_ORT_LIB=$EDGE_ORT_LIB"
} >>"$sum" 2>&1

# 1. edge serve: the same scheduler, encoder batching off and on, and on
# with cuDNN's EXHAUSTIVE algorithm search (ONNX Runtime's default).
serve() { # serve NAME ENCODER_BATCH FLAGS...
	local name=$1 eb=$2
	shift 2
	step "serve $name" "$edge" serve "${gpu[@]}" --bench "$LEVELS" --bench-duration "${EACH}s" \
		--bench-audio models/default/testdata/demo.wav --max-batch "$B" --parallel 2 --encoder-batch "$eb" "$@" \
		>"$out/serve_$name.txt" 2>"$out/serve_$name.log"
	cat "$out/serve_$name.txt" >>"$sum"
}
if want serve; then
	serve batch1 1
	serve "batch$B" "$B"
	serve exhaustive "$B" --cudnn-conv-algo-search EXHAUSTIVE
fi

# 2. edge batch transcribe: ITEMS clips, BATCH in flight, --batch 1 and BATCH;
# edge batch align over the same items with their texts, --batch BATCH.
work=$(mktemp -d)
python3 - "$root/models/default/testdata" "$ITEMS" "$work" <<'EOF'
import json, sys
td, n, work = sys.argv[1], int(sys.argv[2]), sys.argv[3]
clips = ["demo", "words_1", "words_2", "words_3", "words_4"]
text = {c: json.load(open(f"{td}/{c}.json"))["text"] for c in clips}
with open(f"{work}/manifest.jsonl", "w") as plain, open(f"{work}/align.jsonl", "w") as align:
    for i in range(n):
        c = clips[i % 5]
        plain.write(json.dumps({"audio_filepath": f"{td}/{c}.wav", "id": i}) + "\n")
        align.write(json.dumps({"audio_filepath": f"{td}/{c}.wav", "id": i, "text": text[c]}) + "\n")
EOF
corpus() { # corpus MODE MANIFEST BATCH NAME
	rm -rf "$work/out"
	step "batch $1 --batch $3" bash -c "'$edge' batch $1 ${gpu[*]} --manifest '$2' --out '$work/out' \
		--jobs $B --batch $3 --progress none 2>&1 | grep '\"wall_ns\"' >'$out/$4.json'"
	python3 - "$out/$4.json" "$1 --batch $3" >>"$out/batch.txt" <<'EOF'
import json, sys
s = json.load(open(sys.argv[1]))
print(f"{sys.argv[2]:>20}: {s['done']} items ({s['failed']} failed), {s['audio_ns']/3.6e12:.3f} h audio in {s['wall_ns']/1e9:.1f} s = {s['audio_ns']/s['wall_ns']:.0f} h/h")
EOF
}
echo "# edge batch: $ITEMS items (the 5 bundled clips, 2.8-5.3 s), --jobs $B" >>"$sum"
if want batch; then
	corpus transcribe "$work/manifest.jsonl" 1 batch_batch1
	corpus transcribe "$work/manifest.jsonl" "$B" "batch_batch$B"
fi
want align && corpus align "$work/align.jsonl" "$B" "align_batch$B"
rm -rf "$work"
[[ -f $out/batch.txt ]] && cat "$out/batch.txt" >>"$sum"

# 3. Streams at once, batching off and on, unpaced (capacity) and paced at
# real time (latency); 4. parity of batched GPU runs.
if want streams; then
	(cd asr && step "stream capacity" "$bins/asr.test" -test.run '^$' -test.bench StreamCapacityGPU -test.benchtime 1x \
		>"$out/streams.txt" 2>&1)
	grep -E 'audio-s/s|^ok|FAIL' "$out/streams.txt" >>"$sum"
fi
if want load; then
	(cd asr && step "stream load" "$bins/asr.test" -test.run '^$' -test.bench StreamLoadGPU -test.benchtime 1x \
		-test.timeout 20m >"$out/load.txt" 2>&1)
	grep -E 'final-p50|^ok|FAIL' "$out/load.txt" >>"$sum"
fi
if want parity; then
	(cd asr && step "parity" "$bins/asr.test" -test.run 'CUDABatched' -test.v >"$out/parity.txt" 2>&1)
	grep -E 'max \|diff\||--- ' "$out/parity.txt" >>"$sum"
fi
cat "$sum"
