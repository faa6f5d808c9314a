#!/usr/bin/env bash
# Throughput of `edge batch transcribe` and `edge batch align`: hours of
# audio per hour of wall time over a manifest of the bundled clips
# (models/default/testdata: demo + words_1..4, 2.8-5.3 s each), repeated
# ITEMS times in all, one shard, JOBS items in flight, THREADS encoder threads,
# BATCH chunks at most per encoder run (--batch; 1: each alone).
#
#   scripts/bench/batch.sh                 # ITEMS=400 JOBS="1 2 4" THREADS=0 BATCH=1
#   JOBS=8 BATCH="1 4 8" MODES=transcribe scripts/bench/batch.sh   # encoder batching off and on
#
# Prints one line per mode, JOBS and BATCH: audio hours, wall seconds, hours/hour.
set -euo pipefail
cd "$(dirname "$0")/../.."
ITEMS=${ITEMS:-400}
JOBS=${JOBS:-"1 2 4"}
THREADS=${THREADS:-0}
BATCH=${BATCH:-1}
MODES=${MODES:-"transcribe align"}
make -s build >/dev/null
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
td=$PWD/models/default/testdata
clips=(demo words_1 words_2 words_3 words_4)
for ((i = 0; i < ITEMS; i++)); do
  c=${clips[i % ${#clips[@]}]}
  text=$(grep -o '"text": "[^"]*"' "$td/$c.json" | head -1 | sed 's/^"text": "//; s/"$//')
  printf '{"audio_filepath": "%s", "text": "%s", "id": %d}\n' "$td/$c.wav" "$text" "$i"
done >"$work/manifest.jsonl"
echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), $ITEMS items"
for mode in $MODES; do
  for j in $JOBS; do
  for b in $BATCH; do
    rm -rf "$work/out"
    sum=$(bin/edge batch "$mode" --manifest "$work/manifest.jsonl" --out "$work/out" \
      --jobs "$j" --batch "$b" --threads "$THREADS" --progress none 2>&1 | grep '"wall_ns"')
    audio=$(sed 's/.*"audio_ns":\([0-9]*\).*/\1/' <<<"$sum")
    wall=$(sed 's/.*"wall_ns":\([0-9]*\).*/\1/' <<<"$sum")
    failed=$(sed 's/.*"failed":\([0-9]*\).*/\1/' <<<"$sum")
    awk -v m="$mode" -v j="$j" -v b="$b" -v a="$audio" -v w="$wall" -v f="$failed" 'BEGIN {
      printf "batch %-10s jobs=%d batch=%d: %.3f h audio in %.1f s wall = %.0f h/h (%d failed)\n", m, j, b, a/3.6e12, w/1e9, a/w, f }'
  done
  done
done
