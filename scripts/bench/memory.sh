#!/usr/bin/env bash
# Peak RSS (and wall time) of `edge transcribe` against the input's length:
# the bundled clips with seeded pauses of 0.3-3 s, 16 kHz 16-bit mono WAV,
# written into $WORK (default /tmp/edge-memory) by scripts/bench/longwav.
#
#   scripts/bench/memory.sh                       # MINUTES="1 60 240" THREADS=1 FORMATS="text"
#   BEFORE=/path/to/old/edge scripts/bench/memory.sh   # also the old binary, alternating
#
# One line per binary, length and format: peak RSS (/usr/bin/time -v's
# maximum resident set size), wall seconds, and the ratio of the RSS to the
# first length's. VAD is on (the CLI's default); VAD=false turns it off.
set -euo pipefail
cd "$(dirname "$0")/../.."
MINUTES=${MINUTES:-"1 60 240"}
THREADS=${THREADS:-1}
FORMATS=${FORMATS:-text}
VAD=${VAD:-true}
WORK=${WORK:-/tmp/edge-memory}
mkdir -p "$WORK"
go build -o "$WORK/edge" ./cmd/edge
bins=("$WORK/edge")
[[ -n ${BEFORE:-} ]] && bins+=("$BEFORE")
for m in $MINUTES; do
  [[ -s $WORK/$m.wav ]] || go run ./scripts/bench/longwav -minutes "$m" -out "$WORK/$m.wav"
done
echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), threads=$THREADS vad=$VAD"
declare -A base
for f in $FORMATS; do
  for m in $MINUTES; do
    for b in "${bins[@]}"; do
      /usr/bin/time -v "$b" transcribe --quiet --threads "$THREADS" --vad="$VAD" --format "$f" \
        "$WORK/$m.wav" >"$WORK/out.$f" 2>"$WORK/time.txt" || { cat "$WORK/time.txt" >&2; exit 1; }
      rss=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$WORK/time.txt")
      wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {print $2}' "$WORK/time.txt")
      key="$b/$f"
      [[ -n ${base[$key]:-} ]] || base[$key]=$rss
      words=$(wc -w <"$WORK/out.$f")
      awk -v b="$b" -v m="$m" -v f="$f" -v r="$rss" -v w="$wall" -v r0="${base[$key]}" -v n="$words" 'BEGIN {
        split(w, p, ":"); s = (length(p) == 3) ? p[1]*3600 + p[2]*60 + p[3] : p[1]*60 + p[2]
        printf "%-28s %5s min %-5s peak RSS %7.1f MiB (%.2fx the first)  wall %7.1f s  %d output words\n", b, m, f, r/1024, r/r0, s, n }'
    done
  done
done
