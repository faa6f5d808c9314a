//go:build cuda

package asr

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// byomCUDATolerance is the max |diff| allowed between the CUDA EP's
// log-probs and the framework golden, per precision and TF32 setting.
// With TF32 (the EP's default) fp32 convolutions and GEMMs keep 10
// mantissa bits: ~1e-3 relative on the tiny models' layers. Without it the
// EP computes in fp32 like the framework (1e-4, as on the CPU). The fp16
// export runs in true fp16 on the GPU (the CPU provider upcasts much of
// it), and int8's dynamic quantisation rounds activations once per run,
// so a small difference in its scale moves whole quantisation steps.
func byomCUDATolerance(dir string, tf32 bool) float64 {
	switch {
	case dir == "sherpa_fp16":
		return 0.2
	case dir == "sherpa_int8":
		return 0.1
	case tf32:
		return 1e-2
	}
	return 1e-4
}

// TestCUDABringYourOwnModel runs the tiny exports on the CUDA EP (host I/O),
// with TF32 and without, and requires the framework's log-probs within
// byomCUDATolerance and its greedy tokens. Run on the GPU host like the other -tags cuda tests. On
// ONNX Runtime's CUDA plugin EP, which crashes on Slice nodes, their
// Slices run rewritten as Gathers (model.SlicesAsGathers).
func TestCUDABringYourOwnModel(t *testing.T) {
	g := loadByomGolden(t)
	for _, dir := range []string{"w2v", "parakeet", "nemo", "sherpa", "sherpa_fp16", "sherpa_int8"} {
		for _, tf32 := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s/tf32=%v", dir, tf32), func(t *testing.T) { testCUDAByom(t, g, dir, tf32) })
		}
	}
}

// testCUDAByom compares one export's log-probs and tokens on the CUDA EP
// against the framework's.
func testCUDAByom(t *testing.T, g byomGolden, dir string, tf32 bool) {
	r, err := Open(filepath.Join(byomData, dir), Options{Provider: "cuda", NoTF32: !tf32})
	require.NoError(t, err)
	defer r.Close()
	require.NoError(t, r.EncoderFallback())
	fam := byomFamily[dir]
	for clip, want := range g.Families[fam].Clips {
		pcm, gold := byomClip(t, fam, clip)
		lp, _, err := r.Emissions(context.Background(), pcm)
		require.NoError(t, err)
		d := maxAbsDiff(lp, gold.F32())
		t.Logf("%s %s tf32=%v: max |cuda - framework| %.3g", dir, clip, tf32, d)
		assert.LessOrEqual(t, d, byomCUDATolerance(dir, tf32), clip)
		assert.Equal(t, want.Tokens, greedyTokens(lp, r.Manifest().Vocab.Len(), r.Manifest().BlankID), clip)
	}
}
