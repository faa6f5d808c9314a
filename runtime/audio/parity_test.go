package audio_test

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime/audio"
)

// parityTolerance is, per decoder, how far edge's samples may be from
// ffmpeg's decode of the same file: the largest absolute difference and the
// lowest signal-to-error ratio (dB) over the whole clip. Lossless formats
// must match bit for bit. The lossy bounds sit just outside the measured
// figures (README.md, "Audio formats"): they fail on any real
// regression (a misaligned delay, a wrong trim or gain, a broken band).
var parityTolerance = map[string]struct {
	maxAbs float64
	minSNR float64
}{
	// go-mp3 synthesises 16-bit samples; ffmpeg's mp3float does not round.
	// Measured: 5.1e-4 / 70.9 dB (32 kHz stereo; the larger differences are
	// in its last two frames, below 5e-5 before), 5.1e-5 / 72.0 dB (16 kHz
	// mono).
	"mp3": {maxAbs: 1e-3, minSNR: 68},
	// Measured: 1.8e-7 / 134.9 dB (mono), 1.8e-7 / 134.7 dB (stereo).
	"vorbis": {maxAbs: 1e-6, minSNR: 120},
	// Against ffmpeg's libopus decoder, whose output is 16-bit: half an LSB
	// (1.5e-5) at most; 91.2 dB (SILK, mono), 76.2 dB (CELT, stereo).
	"opus": {maxAbs: 3.1e-5, minSNR: 72},
}

// TestParityFFmpeg decodes files made by independent encoders (flac, lame,
// oggenc, opusenc, sox: scripts/golden/audio.sh) and compares every sample
// with ffmpeg's decode of the same file (Opus: ffmpeg's libopus decoder),
// stored next to it as raw float32: same rate, channels and length after
// delay and padding trimming, bit-exact for lossless formats.
func TestParityFFmpeg(t *testing.T) {
	b, err := os.ReadFile("testdata/parity/parity.json")
	require.NoError(t, err)
	var meta struct {
		Tools map[string]string `json:"tools"`
		Files map[string]struct {
			Codec      string `json:"codec"`
			SampleRate int    `json:"sample_rate"`
			Channels   int    `json:"channels"`
			Frames     int    `json:"frames"`
		} `json:"files"`
	}
	require.NoError(t, json.Unmarshal(b, &meta))
	require.Len(t, meta.Files, 14)
	names := make([]string, 0, len(meta.Files))
	for n := range meta.Files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, name := range names {
		m := meta.Files[name]
		t.Run(name, func(t *testing.T) {
			raw, err := os.ReadFile(filepath.Join("testdata/parity", name+".f32"))
			require.NoError(t, err)
			want := make([]float32, len(raw)/4)
			for i := range want {
				want[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
			}
			f, err := os.Open(filepath.Join("testdata/parity", name))
			require.NoError(t, err)
			defer f.Close()
			st, err := f.Stat()
			require.NoError(t, err)
			clip, err := audio.Options{NoFFmpeg: true}.Decode(f, st.Size())
			require.NoError(t, err)
			assert.Nil(t, clip.Truncated)
			assert.Equal(t, m.SampleRate, clip.SampleRate)
			assert.Equal(t, m.Channels, clip.Channels)
			require.Equal(t, m.Frames, clip.Frames(), "frames: edge %d, ffmpeg %s %d", clip.Frames(), meta.Tools["ffmpeg"], m.Frames)
			tol, lossy := parityTolerance[m.Codec]
			if !lossy {
				for i := range want {
					if want[i] != clip.Samples[i] {
						t.Fatalf("%s (%s): sample %d (frame %d, channel %d): edge %v, ffmpeg %v", name, clip.Format, i, i/m.Channels, i%m.Channels, clip.Samples[i], want[i])
					}
				}
				t.Logf("%s: %s, %d frames: bit-exact", name, clip.Format, clip.Frames())
				return
			}
			var maxAbs, sig, noise float64
			worst := 0
			for i := range want {
				d := math.Abs(float64(clip.Samples[i]) - float64(want[i]))
				if d > maxAbs {
					maxAbs, worst = d, i
				}
				sig += float64(want[i]) * float64(want[i])
				noise += d * d
			}
			snr := 10 * math.Log10(sig/max(noise, 1e-300))
			t.Logf("%s: %s, %d frames: max |edge - ffmpeg| %.3g (sample %d), SNR %.1f dB", name, clip.Format, clip.Frames(), maxAbs, worst, snr)
			assert.LessOrEqual(t, maxAbs, tol.maxAbs, "max abs difference")
			assert.GreaterOrEqual(t, snr, tol.minSNR, "SNR dB")
		})
	}
}
