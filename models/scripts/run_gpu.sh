#!/usr/bin/env bash
# run_gpu.sh OUT ESPEAK_DIR TEXT_DIR: the GPU-host run that produced
# models/default (feature check against HF transformers, synthesis, training,
# ONNX export, evaluation). Needs, made on a Debian machine and copied to the
# GPU host:
#   ESPEAK_DIR  models/scripts/make_espeak_bundle.sh ESPEAK_DIR
#   TEXT_DIR    models/scripts/build_corpus.py TEXT_DIR
#               (or gunzip models/scripts/data/*.gz into it: the snapshot used)
set -euo pipefail
usage="usage: run_gpu.sh OUT ESPEAK_DIR TEXT_DIR"
out=${1:?$usage}
espeak=${2:?$usage}
text=${3:?$usage}
root=$(cd "$(dirname "$0")/../.." && pwd)
E=$espeak/root
export PYTHONUNBUFFERED=1 ESPEAK_NG=$E/usr/bin/espeak-ng
export LD_LIBRARY_PATH=$E/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export ESPEAK_DATA_PATH=$E/usr/lib/x86_64-linux-gnu/espeak-ng-data
mkdir -p "$out"
{
  nvidia-smi -L
  timeout 60 python3 "$root/models/scripts/verify_features.py"
  timeout 500 python3 "$root/models/scripts/train.py" --data "$text" --out "$out" \
    --synth-utts 200000 --synth-seconds 75 --train-seconds 300 --batch-seconds 1200 --lr 2.5e-3 \
    --eval-per-set 400 --workers 15
} 2>&1 | tee "$out/log.txt"
