package audio_test

import (
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime/audio"
	"github.com/edgespeech/edge/runtime/npy"
)

// TestResampleTorchaudioGolden compares Resampler with
// torchaudio.functional.resample(..., resampling_method="sinc_interp_kaiser")
// run in float64 by testdata/golden/resample.py (torchaudio 2.11 on the GPU
// host; versions in meta.json), for every pair and quality listed there.
func TestResampleTorchaudioGolden(t *testing.T) {
	b, err := os.ReadFile("testdata/golden/meta.json")
	require.NoError(t, err)
	var meta struct {
		TorchAudio string   `json:"torchaudio"`
		Pairs      [][2]int `json:"pairs"`
		Qualities  map[string]struct {
			Width   int     `json:"lowpass_filter_width"`
			Rolloff float64 `json:"rolloff"`
			Beta    float64 `json:"beta"`
		} `json:"qualities"`
	}
	require.NoError(t, json.Unmarshal(b, &meta))
	require.Len(t, meta.Pairs, 10)
	presets := map[string]audio.Quality{"best": audio.QualityBest, "fast": audio.QualityFast}
	require.Len(t, meta.Qualities, len(presets))
	for name, q := range meta.Qualities {
		// The script's parameters are the Go presets, exactly.
		require.Equal(t, presets[name], audio.Quality{ZeroCrossings: q.Width, Rolloff: q.Rolloff, Beta: q.Beta}, name)
	}
	for _, p := range meta.Pairs {
		in, err := npy.ReadFile(fmt.Sprintf("testdata/golden/in_%d.npy", p[0]))
		require.NoError(t, err)
		for name, q := range presets {
			t.Run(fmt.Sprintf("%d-%d/%s", p[0], p[1], name), func(t *testing.T) {
				want, err := npy.ReadFile(fmt.Sprintf("testdata/golden/out_%d_%d_%s.npy", p[0], p[1], name))
				require.NoError(t, err)
				r, err := audio.NewResampler(p[0], p[1], q)
				require.NoError(t, err)
				got, err := r.Resample(in.F32())
				require.NoError(t, err)
				w := want.F32()
				require.Len(t, got, len(w))
				var worst float64
				for i := range w {
					worst = max(worst, float64(abs32(got[i]-w[i])))
				}
				// Inputs reach |x| ~ 1.5; float32 coefficients and sums keep the
				// error below 5e-7 (measured 4.8e-7).
				assert.Less(t, worst, 1e-6, "max |edge - torchaudio %s|", meta.TorchAudio)
			})
		}
	}
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}
