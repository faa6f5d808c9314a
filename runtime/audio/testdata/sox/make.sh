#!/bin/sh
# Regenerates the sox-written WAV fixtures and their expected samples.
# Needs sox and /usr/bin/python3 with numpy and scipy. Run from this folder.
set -eu
s() { sox -V1 -D -n "$@"; }
s -r 8000  -c 1 -b 8  -e unsigned-integer u8_8k_mono.wav        synth 0.05 sine 440
s -r 44100 -c 2 -b 16 -e signed-integer   s16_44k_stereo.wav    synth 0.05 sine 440 sine 660
s -r 48000 -c 1 -b 24 -e signed-integer   s24_48k_mono.wav      synth 0.05 sine 1000 vol 0.9
s -r 22050 -c 1 -b 32 -e signed-integer   s32_22k_mono.wav      synth 0.05 sine 300
s -r 16000 -c 2 -b 32 -e floating-point   f32_16k_stereo.wav    synth 0.05 sine 200 sine 7000
s -r 24000 -c 1 -b 64 -e floating-point   f64_24k_mono.wav      synth 0.05 sine 3000 vol 0.5
s -r 16000 -c 3 -b 16 -e signed-integer   s16_16k_3ch.wav       synth 0.05 sine 100 sine 200 sine 300
s -r 11025 -c 1 -b 16 -e signed-integer --comment "edge audio fixture" s16_11k_comment.wav synth 0.05 pinknoise vol 0.5
/usr/bin/python3 expected.py *.wav
