package audio_test

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime/audio"
	"github.com/edgespeech/edge/runtime/npy"
)

// TestSoxFixtures decodes WAV files written by sox (testdata/sox/make.sh) and
// compares with the samples scipy.io.wavfile reads from them
// (testdata/sox/expected.py), bit for bit.
func TestSoxFixtures(t *testing.T) {
	wavs, err := filepath.Glob("testdata/sox/*.wav")
	require.NoError(t, err)
	require.Len(t, wavs, 8)
	for _, path := range wavs {
		stem := strings.TrimSuffix(path, ".wav")
		t.Run(filepath.Base(stem), func(t *testing.T) {
			want, err := npy.ReadFile(stem + ".npy")
			require.NoError(t, err)
			var meta struct {
				SampleRate int `json:"sample_rate"`
			}
			b, err := os.ReadFile(stem + ".json")
			require.NoError(t, err)
			require.NoError(t, json.Unmarshal(b, &meta))

			f, err := os.Open(path)
			require.NoError(t, err)
			defer f.Close()
			st, err := f.Stat()
			require.NoError(t, err)
			clip, err := audio.Decode(f, st.Size())
			require.NoError(t, err)

			shape := want.Shape()
			require.Len(t, shape, 2)
			assert.Equal(t, meta.SampleRate, clip.SampleRate)
			assert.Equal(t, shape[1], clip.Channels)
			assert.Equal(t, shape[0], clip.Frames())
			assert.Equal(t, want.F32(), clip.Samples)

			// Load: mono at 16 kHz, ceil(frames * 16000 / rate) samples.
			y, err := audio.Load(path, 16000)
			require.NoError(t, err)
			assert.Len(t, y, int(math.Ceil(float64(clip.Frames())*16000/float64(clip.SampleRate))))
		})
	}
}
