#!/usr/bin/env bash
# serve.sh [EDGE SERVE FLAGS...]: the edge serve benchmark. It starts the
# service on a loopback port with the given flags, loads it with closed-loop
# clients at concurrency 1, 4, 16 and 64 (each client posts the clip and
# waits for the answer before posting again) and prints requests/s, p50/p95
# latency and RTFx (seconds of audio transcribed per wall second) per level,
# once per ENCODER_BATCH value: 1 encodes every request's chunks alone, N
# lets up to N chunks of the requests running at once share an encoder run
# (serve.encoder_batch; the scheduler's max_batch and parallel stay the same).
#
#   scripts/bench/serve.sh                                  # CPU, this machine
#   scripts/bench/serve.sh --max-batch 8 --parallel 1       # another scheduler setting
#   EDGE=bin/edge-cuda scripts/bench/serve.sh --backend cuda --execution-provider cuda
#                                                           # a GPU host (make build-cuda here;
#                                                           # $EDGE_ORT_LIB, $EDGE_ORT_CUDA_EP and
#                                                           # LD_LIBRARY_PATH as for edge transcribe)
#
# Environment: EDGE (the binary, default bin/edge, built when absent), LEVELS
# (default 1,4,16,64), SECONDS_EACH (default 10), CLIP (default the bundled
# models/default/testdata/demo.wav, 5.35 s), ENCODER_BATCH (default "1 4":
# off, then the default max_batch).
set -euo pipefail
cd "$(dirname "$0")/../.."
edge=${EDGE:-bin/edge}
if [[ ! -x $edge ]]; then
	make build >/dev/null
fi
[[ $edge == bin/edge ]] && make ort >/dev/null
for eb in ${ENCODER_BATCH:-1 4}; do
	"$edge" serve --bench "${LEVELS:-1,4,16,64}" --bench-duration "${SECONDS_EACH:-10}s" \
		--bench-audio "${CLIP:-models/default/testdata/demo.wav}" --encoder-batch "$eb" "$@"
done
