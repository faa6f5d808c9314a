#!/usr/bin/env bash
# gpu_corpus.sh OUT: corpus transcription on one GPU, edge against the same
# model run the PyTorch way, in one run (BENCHMARKS.md, "Corpus
# transcription on the GPU"). For the bundled model and a ~100 M-parameter
# export of its family (models/scripts/export_large.py, random weights):
#
#   torch: scripts/bench/gpu_corpus.py peer: models/scripts/model.py with the
#          model's ONNX weights, length-sorted batches of BATCH, features in
#          torch on the GPU, torchaudio.functional.forced_align per item;
#          first its log-probs are checked against ONNX Runtime within 1e-4.
#   edge:  `edge batch transcribe --backend cuda --execution-provider cuda
#          --vad=false` (the zero-copy pipeline; --batch BATCH when this
#          binary has the flag, else --jobs JOBS items in flight), then
#          `edge transcribe --stats` on STATS_FILES files for its stages,
#          once for each cuDNN algorithm search and --pad-to in VARIANTS,
#          and ONNX Runtime's per-node profile of PROFILE_FILES of them
#          (scripts/bench/ort_profile.py: OUT/NAME.profile.txt).
#
# Both transcribe the same manifest of HOURS (default 1) hours of the bundled
# clips, joined 1 to 4 at a time into distinct WAV files. Prints one markdown
# row a model (hours of audio per second, ratio, WER) and writes the details
# (per-stage times, the log-probs check) to OUT/results.jsonl, the logs
# beside it. The audio, the large export and edge's outputs go to WORK
# (default: a temporary directory, removed at the end), not OUT.
#
# On the GPU host (no Go toolchain), from the repository root, with the
# -tags cuda binary built here (make build-cuda; carry bin/edge-cuda, or
# EDGE_BIN=... for another path) and the ONNX Runtime core + CUDA plugin EP
# as for scripts/bench/run.sh pipeline-gpu: $EDGE_ORT_LIB and
# $EDGE_ORT_CUDA_EP, or $ORT_CORE and $ORT_EP_PARTS.
#
#   scripts/bench/gpu_corpus.sh $OUT
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: gpu_corpus.sh OUT}
mkdir -p "$out"
out=$(cd "$out" && pwd)
work=${WORK:-$(mktemp -d)}
[[ -n ${WORK:-} ]] || trap 'rm -rf "$work"' EXIT
HOURS=${HOURS:-1}
BATCH=${BATCH:-32}
JOBS=${JOBS:-4}
STATS_FILES=${STATS_FILES:-100}
PROFILE_FILES=${PROFILE_FILES:-30} # edge transcribe --ort-profile over this many (0: none)
# edge's runs, one per ALGO:PAD: cuDNN's convolution algorithm search and
# --pad-to (the shape bucket; -1s: none)
VARIANTS=${VARIANTS:-HEURISTIC:1s HEURISTIC:-1s EXHAUSTIVE:-1s}
EDGE=${EDGE_BIN:-$root/bin/edge-cuda}
py=$root/scripts/bench/gpu_corpus.py
export PYTHONUNBUFFERED=1
say() { echo "gpu_corpus.sh: $*" >&2; }

if [[ ! -x $EDGE && -f $EDGE.xz ]]; then
	xz -dc "$EDGE.xz" >"$work/edge" && chmod +x "$work/edge" && EDGE=$work/edge
fi
[[ -x $EDGE ]] || { say "no edge binary at $EDGE (make build-cuda here, carry bin/edge-cuda)"; exit 1; }
if [[ -z ${EDGE_ORT_CUDA_EP:-} ]]; then
	"$root/scripts/ort-cuda-ep.sh" unpack "${ORT_EP_PARTS:?set EDGE_ORT_CUDA_EP or ORT_EP_PARTS}" "$work/ortcuda"
	export EDGE_ORT_CUDA_EP=$work/ortcuda/libonnxruntime_providers_cuda.so
fi
if [[ -z ${EDGE_ORT_LIB:-} ]]; then
	: "${ORT_CORE:?set EDGE_ORT_LIB or ORT_CORE}"
	mkdir -p "$work/ortcore"
	xz -dc "$ORT_CORE/libonnxruntime.so.1.29.0.xz" >"$work/ortcore/libonnxruntime.so.1.29.0"
	cp "$ORT_CORE/libonnxruntime_providers_shared.so" "$work/ortcore/"
	export EDGE_ORT_LIB=$work/ortcore/libonnxruntime.so.1.29.0
fi
export EDGE_KERNELS_FATBIN=${EDGE_KERNELS_FATBIN:-$root/kernels/edge.fatbin}
# cuBLAS, cuDNN and the CUDA runtime of the python nvidia packages
nv=$(python3 -c 'import nvidia; print(list(nvidia.__path__)[0])')
libs=$(find "$nv" -maxdepth 3 -type d -name lib | tr '\n' ':')
export LD_LIBRARY_PATH=${libs%:}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >&2 || true
"$EDGE" version >&2 || true

t0=$(date +%s)
python3 "$py" corpus "$work/corpus" --hours "$HOURS"
manifest=$work/corpus/manifest.jsonl
if [[ -z ${EDGE_LARGE_MODEL:-} ]]; then
	# d 512, ff 2048, 8 heads, 17 blocks: about 100 M parameters
	python3 "$root/models/scripts/export_large.py" "$work/large100" --d 512 --ff 2048 --heads 8 --layers 17 | tee "$out/large100.json" >&2
	EDGE_LARGE_MODEL=$work/large100
	LARGE_ARCH=512,2048,8,17
fi
: "${LARGE_ARCH:?set LARGE_ARCH=d,ff,heads,layers for EDGE_LARGE_MODEL}"
say "corpus and export: $(($(date +%s) - t0)) s"

edge_flow=(--jobs "$JOBS")
help=$("$EDGE" batch --help 2>&1 || true)
if grep -q -e '--batch[ =]' <<<"$help"; then
	edge_flow=(--batch "$BATCH" --jobs "$((2 * BATCH))")
fi
say "edge batch flags: ${edge_flow[*]}"
cuda=(--backend cuda --execution-provider cuda --vad=false)

: >"$out/results.jsonl"
rows=()
status=0
for spec in "bundled:$root/models/default:" "large:$EDGE_LARGE_MODEL:$LARGE_ARCH"; do
	IFS=: read -r name dir arch <<<"$spec"
	say "== $name ($dir)"
	arch_flag=()
	[[ -n $arch ]] && arch_flag=(--arch "$arch")
	if ! timeout 100 python3 "$py" peer --model "$dir" --manifest "$manifest" --out "$out/$name.peer.json" \
		--batch "$BATCH" "${arch_flag[@]}"; then
		say "$name: the torch peer failed"
		status=1
		continue
	fi
	mapfile -t files < <(find "$work/corpus/wav" -name '*.wav' | sort | head -n "$STATS_FILES")
	for v in $VARIANTS; do
		algo=${v%%:*} pad=${v#*:}
		run=$name.$algo.pad$pad
		algo_flag=(--cudnn-conv-algo-search "$algo" --pad-to "$pad")
		rm -rf "$work/$run.edge"
		if ! timeout 100 "$EDGE" batch transcribe --model "$dir" --manifest "$manifest" --out "$work/$run.edge" \
			"${cuda[@]}" "${algo_flag[@]}" "${edge_flow[@]}" --progress none 2>"$out/$run.edge.log"; then
			tail -20 "$out/$run.edge.log" >&2
			say "$run: edge batch failed"
			status=1
			continue
		fi
		timeout 60 "$EDGE" transcribe --model "$dir" "${cuda[@]}" "${algo_flag[@]}" --stats --quiet --out "$work/$run.stats/" "${files[@]}" \
			2>"$out/$run.stats.log" || { say "$run: edge transcribe --stats failed"; tail -5 "$out/$run.stats.log" >&2; }
		python3 "$py" report --peer "$out/$name.peer.json" --edge-dir "$work/$run.edge" --edge-summary "$out/$run.edge.log" \
			--edge-stats "$out/$run.stats.log" --manifest "$manifest" --name "$name ($algo, pad $pad)" >"$out/$run.report.txt"
		head -1 "$out/$run.report.txt" >>"$out/results.jsonl"
		rows+=("$(tail -1 "$out/$run.report.txt")")
	done
	# ONNX Runtime's own profile of the encoder on PROFILE_FILES files, one at a time
	if ((PROFILE_FILES > 0)); then
		rm -f "$work/$name.prof"_*.json
		timeout 60 "$EDGE" transcribe --model "$dir" "${cuda[@]}" --ort-profile "$work/$name.prof" --quiet \
			--out "$work/$name.prof.out/" "${files[@]:0:PROFILE_FILES}" 2>"$out/$name.profile.log" &&
			python3 "$root/scripts/bench/ort_profile.py" "$work/$name.prof"_*.json >"$out/$name.profile.txt" ||
			say "$name: the ONNX Runtime profile failed"
	fi
done
cp "$manifest" "$out/manifest.jsonl"
echo "| model | audio | edge | torch | edge / torch | edge WER | torch WER |"
echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
printf '%s\n' "${rows[@]}"
say "details in $out/results.jsonl; total $(($(date +%s) - t0)) s"
exit "$status"
