#!/usr/bin/env bash
# Regenerates runtime/audio/testdata/parity: small files made by independent
# encoders (flac, lame, oggenc, opusenc, sox) and, for each, ffmpeg's decode
# of it (Opus: through libopus) as raw float32 (<name>.f32, interleaved, little-endian) plus
# parity.json (rate, channels, frames of ffmpeg's decode; the tool versions).
# Needs: sox flac lame vorbis-tools opus-tools ffmpeg (Debian packages of
# those names). Tests never run these tools: CI has none of them.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=runtime/audio/testdata/parity
src=models/default/testdata/demo.wav
rm -rf "$out" && mkdir -p "$out"
tmp=$(mktemp -d) && trap 'rm -rf "$tmp"' EXIT

# Sources: 1 s of the bundled speech clip (16 kHz mono), and stereo mixes of
# speech with a tone and noise at other rates.
sox -V1 "$src" "$tmp/speech16k.wav" trim 1.0 1.0
mix() { # rate seconds out.wav bits: left speech, right speech plus a 440 Hz tone
  sox -V1 "$src" -r "$1" -b "$4" "$tmp/l.wav" trim 1.0 "$2"
  sox -V1 -n -r "$1" -b "$4" "$tmp/t.wav" synth "$2" sine 440 vol 0.2
  sox -V1 -m "$tmp/l.wav" "$tmp/t.wav" "$tmp/r.wav"
  sox -V1 -M "$tmp/l.wav" "$tmp/r.wav" "$3"
}
mix 44100 0.2 "$tmp/s24_44k_stereo.wav" 24
mix 32000 0.4 "$tmp/s16_32k_stereo.wav" 16
mix 16000 1.0 "$tmp/s16_16k_stereo.wav" 16
mix 48000 0.25 "$tmp/s16_48k_stereo.wav" 16
mix 22050 0.2 "$tmp/s16_22k_stereo.wav" 16
mix 8000 0.5 "$tmp/s16_8k_stereo.wav" 16
sox -V1 "$tmp/speech16k.wav" -r 8000 "$tmp/speech8k.wav"
sox -V1 "$tmp/speech16k.wav" "$tmp/speech16k_half.wav" trim 0 0.5

flac -s -8 -o "$out/flac_s16_16k_mono.flac" "$tmp/speech16k.wav"
flac -s -5 -o "$out/flac_s24_44k_stereo.flac" "$tmp/s24_44k_stereo.wav"
lame --quiet -b 128 "$tmp/s16_32k_stereo.wav" "$out/mp3_cbr_32k_stereo.mp3"
lame --quiet -V 4 --id3v2-only --tt "edge parity" --ta "edge" "$tmp/speech16k.wav" "$out/mp3_vbr_16k_mono_id3.mp3"
oggenc -Q -q 4 -o "$out/vorbis_16k_mono.ogg" "$tmp/speech16k.wav"
# Several pages: ffmpeg 5.1 does not trim the end of a stream whose audio
# fits on one page (edge trims to the granule position there, as libvorbis).
oggenc -Q -q 3 -o "$out/vorbis_16k_stereo.ogg" "$tmp/s16_16k_stereo.wav"
opusenc --quiet --bitrate 24 "$tmp/speech16k_half.wav" "$out/opus_16k_mono.opus"
opusenc --quiet --bitrate 64 "$tmp/s16_48k_stereo.wav" "$out/opus_48k_stereo.opus"
sox -V1 "$tmp/s16_22k_stereo.wav" "$out/aiff_s16_22k_stereo.aiff"
sox -V1 "$tmp/speech16k.wav" -e floating-point -b 32 "$out/aifc_f32_16k_mono.aifc" trim 0 0.2
sox -V1 "$tmp/speech8k.wav" -e u-law "$out/wav_ulaw_8k_mono.wav"
sox -V1 "$tmp/speech8k.wav" -e a-law "$out/wav_alaw_8k_mono.wav"
sox -V1 "$tmp/speech16k.wav" -e ima-adpcm "$out/wav_ima_16k_mono.wav"
sox -V1 "$tmp/s16_8k_stereo.wav" -e ima-adpcm "$out/wav_ima_8k_stereo.wav"

{
  echo '{'
  echo "  \"tools\": {"
  echo "    \"ffmpeg\": \"$(ffmpeg -version | head -1 | cut -d' ' -f3)\","
  echo "    \"flac\": \"$(flac --version | cut -d' ' -f2)\","
  echo "    \"lame\": \"$(lame --version | head -1 | sed 's/.*version \([^ ]*\).*/\1/')\","
  echo "    \"oggenc\": \"$(oggenc --version | sed 's/.*vorbis-tools //')\","
  echo "    \"opusenc\": \"$(opusenc --version | head -1 | sed 's/opusenc //')\","
  echo "    \"sox\": \"$(sox --version | sed 's/.*SoX v//')\""
  echo "  },"
  echo '  "files": {'
  first=1
  for f in "$out"/*.*; do
    case "$f" in *.f32|*.json) continue;; esac
    name=$(basename "$f")
    # Opus: ffmpeg's libopus decoder (its native one resamples SILK to
    # 48 kHz its own way: 11 dB from libopus on the SILK fixture).
    dec=(); case "$name" in *.opus) dec=(-c:a libopus);; esac
    ffmpeg -v error "${dec[@]}" -i "$f" -f f32le -c:a pcm_f32le "$out/$name.f32"
    read -r rate ch codec < <(ffprobe -v error -select_streams a:0 -show_entries stream=sample_rate,channels,codec_name -of csv=p=0 "$f" | awk -F, '{print $2, $3, $1}')
    frames=$(( $(stat -c %s "$out/$name.f32") / 4 / ch ))
    [ $first = 1 ] || echo ','
    first=0
    printf '    "%s": {"codec": "%s", "sample_rate": %s, "channels": %s, "frames": %s}' "$name" "$codec" "$rate" "$ch" "$frames"
  done
  echo
  echo '  }'
  echo '}'
} > "$out/parity.json"
cat "$out/parity.json"
du -sh "$out"
