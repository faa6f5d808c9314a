#!/usr/bin/env bash
# run_gpu.sh OUT: the GPU-host run that produced models/default (feature check
# against HF transformers, synthesis, training, ONNX export, evaluation).
# Needs, next to the repo on the GPU host (they travel as carried, git-ignored
# folders):
#   .gpu-carry/espeak  made here by  models/scripts/make_espeak_bundle.sh .gpu-carry/espeak
#   .gpu-carry/text    made here by  models/scripts/build_corpus.py .gpu-carry/text
#                      (or gunzip models/scripts/data/*.gz into it: the snapshot used)
set -euo pipefail
out=${1:?usage: run_gpu.sh OUT}
root=$(cd "$(dirname "$0")/../.." && pwd)
E=$root/.gpu-carry/espeak/root
export PYTHONUNBUFFERED=1 ESPEAK_NG=$E/usr/bin/espeak-ng
export LD_LIBRARY_PATH=$E/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export ESPEAK_DATA_PATH=$E/usr/lib/x86_64-linux-gnu/espeak-ng-data
mkdir -p "$out"
{
  nvidia-smi -L
  timeout 60 python3 "$root/models/scripts/verify_features.py"
  timeout 500 python3 "$root/models/scripts/train.py" --data "$root/.gpu-carry/text" --out "$out" \
    --synth-utts 200000 --synth-seconds 75 --train-seconds 300 --batch-seconds 1200 --lr 2.5e-3 \
    --eval-per-set 400 --workers 15
} 2>&1 | tee "$out/log.txt"
