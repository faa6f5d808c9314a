//go:build cuda

package fbank

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/cuda/cudatest"
)

// TestCUDAIncrementalEqualsOffline: the incremental stream through the CUDA
// op, cut into pieces of prime, random and whole sizes, gives exactly the
// CUDA op's offline frames and lengths for normalize none and global.
func TestCUDAIncrementalEqualsOffline(t *testing.T) {
	be := cudatest.Backend(t)
	rng := rand.New(rand.NewPCG(11, 1))
	for _, params := range []map[string]any{
		{"preset": "parakeet-128", "normalize": "none"},
		{"preset": "nemo-legacy-80", "normalize": "none", "layout": "time_mel"},
		{"preset": "whisper-128", "normalize": "global"},
		{"preset": "whisper-80", "normalize": "global", "global_log_mel_max": 0.5},
	} {
		for _, n := range []int{1234, 16000 + 77, 3*16000 + 91} {
			x := noisySpeech(n, uint64(n))
			h, lengths := runCUDA(t, params, x)
			cfg := mustPreset(t, params["preset"].(string))
			if l, ok := params["layout"]; ok {
				cfg.Layout = Layout(l.(string))
			}
			want := timeMajor(opFeatures(cfg, runtime.Tensors{"features": h}))
			for sched, next := range pieceSchedules {
				if sched == "one" {
					continue // one op run per completed group: the CPU test covers one-sample writes
				}
				s, err := NewIncrementalOp(params, be)
				require.NoError(t, err)
				got, valid := streamFrames(t, s, x, func(i int) int { return next(rng, i) })
				require.NoError(t, s.Close())
				require.Equal(t, int(lengths[0]), valid, "%v n=%d %s: lengths", params, n, sched)
				require.Len(t, got, len(want))
				worst := 0.0
				for i := range want {
					worst = math.Max(worst, math.Abs(float64(got[i]-want[i])))
				}
				require.Zero(t, worst, "%v n=%d %s: max |incremental - offline| on the GPU", params, n, sched)
			}
		}
	}
}
