#!/usr/bin/env bash
# vad_clips.sh — make the test clips of plugins/vad (16-bit mono WAV) with
# espeak-ng and sox (Debian: apt-get install espeak-ng sox):
#
#   silence.wav   3.0 s of a quiet room: pink noise at about -60 dBFS
#   zeros.wav     2.0 s of digital zeros
#   noise.wav     3.0 s of white noise at about -20 dBFS
#   tone.wav      3.0 s of a 440 Hz sine at -6 dBFS
#   pauses.wav    three spoken sentences with 0.12, 0.6 and 1.5 s pauses
#                 over a -45 dBFS noise floor (~9 s, 16 kHz)
#   cut.wav       speech cut off mid-word (1.23 s, a length that is no
#                 multiple of the window)
#   cut_exact.wav the same cut at exactly 39 windows (19968 samples)
#   speech8k.wav  a spoken sentence at 8 kHz
#
# The noise is random: running it again makes other clips, and the goldens
# (scripts/golden/vad_golden.py) must then be made again too.
#
# Usage: scripts/golden/vad_clips.sh [OUTDIR]   (default plugins/vad/testdata)
set -euo pipefail
out="${1:-plugins/vad/testdata}"
mkdir -p "$out"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

wav16=(-r 16000 -c 1 -b 16 -e signed-integer)
say() { # say FILE VOICE TEXT: espeak-ng at its own rate, then 16 kHz mono
	espeak-ng -v "$2" -s 150 -w "$tmp/raw.wav" "$3"
	sox "$tmp/raw.wav" "${wav16[@]}" "$1" norm -3
}

sox -n "${wav16[@]}" "$out/silence.wav" synth 3 pinknoise vol 0.001
sox -n "${wav16[@]}" "$out/zeros.wav" trim 0 2
sox -n "${wav16[@]}" "$out/noise.wav" synth 3 whitenoise vol 0.1
sox -n "${wav16[@]}" "$out/tone.wav" synth 3 sine 440 vol 0.5

say "$tmp/a.wav" en-us "The quick brown fox jumps over the lazy dog."
say "$tmp/b.wav" en-gb "Voice activity detection finds the speech."
say "$tmp/c1.wav" en-us "It skips"
say "$tmp/c2.wav" en-us "the silence between the words."
sil() { sox -n "${wav16[@]}" "$tmp/sil$1.wav" trim 0 "$1"; }
sil 0.3; sil 0.12; sil 0.6; sil 1.5
sox "$tmp/sil0.3.wav" "$tmp/a.wav" "$tmp/sil0.6.wav" "$tmp/b.wav" "$tmp/sil1.5.wav" \
	"$tmp/c1.wav" "$tmp/sil0.12.wav" "$tmp/c2.wav" "$tmp/sil0.3.wav" "$tmp/speech.wav"
len="$(soxi -D "$tmp/speech.wav")"
sox -n "${wav16[@]}" "$tmp/floor.wav" synth "$len" pinknoise vol 0.005
sox -m "$tmp/speech.wav" "$tmp/floor.wav" "${wav16[@]}" "$out/pauses.wav"

# 19680 samples = 38.4375 windows of 512.
sox "$tmp/a.wav" "${wav16[@]}" "$out/cut.wav" trim 0 19680s
sox "$tmp/a.wav" "${wav16[@]}" "$out/cut_exact.wav" trim 0 19968s

espeak-ng -v en-us -s 160 -w "$tmp/raw8.wav" "Hello, this is eight kilohertz speech."
sox "$tmp/raw8.wav" -r 8000 -c 1 -b 16 -e signed-integer "$out/speech8k.wav" norm -3

ls -l "$out"/*.wav
