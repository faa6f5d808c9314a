//go:build cuda

package asr

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime/audio"
	"github.com/edgespeech/edge/runtime/npy"
)

// byomCUDATolerance is the max |diff| allowed between the CUDA EP's
// log-probs and the framework golden: ONNX Runtime's CUDA EP runs fp32
// convolutions and GEMMs in TF32 by default (use_tf32=1), which keeps 10
// mantissa bits; its own provider tests compare fp32 outputs at ~1e-3.
const byomCUDATolerance = 5e-3

// TestCUDABringYourOwnModel runs the tiny exports on the CUDA EP (host I/O)
// and requires the framework's log-probs within the EP's tolerance and its
// greedy tokens. Run on the GPU host like the other -tags cuda tests. On
// ONNX Runtime's CUDA plugin EP, which crashes on Slice nodes, their
// Slices run rewritten as Gathers (model.SlicesAsGathers).
func TestCUDABringYourOwnModel(t *testing.T) {
	g := loadByomGolden(t)
	for _, dir := range []string{"w2v", "parakeet", "nemo", "sherpa", "sherpa_fp16", "sherpa_int8"} {
		t.Run(dir, func(t *testing.T) {
			r, err := Open(filepath.Join(byomData, dir), Options{Provider: "cuda"})
			require.NoError(t, err)
			defer r.Close()
			require.NoError(t, r.EncoderFallback())
			fam := byomFamily[dir]
			for clip, want := range g.Families[fam].Clips {
				pcm, err := audio.Load(filepath.Join(byomData, "..", "default", "testdata", clip+".wav"), 16000)
				require.NoError(t, err)
				lp, _, err := r.Emissions(context.Background(), pcm)
				require.NoError(t, err)
				gold, err := npy.ReadFile(filepath.Join(byomData, "golden", fam+"__"+clip+".npy"))
				require.NoError(t, err)
				tol := byomCUDATolerance
				if dir == "sherpa_fp16" || dir == "sherpa_int8" {
					tol = max(tol, byomTolerance[dir])
				}
				d := maxAbsDiff(lp, gold.F32())
				t.Logf("%s %s: max |cuda - framework| %.3g", dir, clip, d)
				assert.LessOrEqual(t, d, tol, clip)
				assert.Equal(t, want.Tokens, greedyTokens(lp, r.Manifest().Vocab.Len(), r.Manifest().BlankID), clip)
			}
		})
	}
}
