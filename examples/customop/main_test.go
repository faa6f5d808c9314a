package main

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
)

func tone(n int, amp float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(amp * math.Sin(2*math.Pi*440*float64(i)/16000))
	}
	return x
}

// The pipeline output must equal fbank run by hand on the normalised audio.
func TestCustomOpInPipeline(t *testing.T) {
	p, err := newPipeline()
	require.NoError(t, err)
	quiet := tone(8000, 0.01)
	x := runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{1, len(quiet)}, quiet))
	out, err := p.Run(context.Background(), runtime.Tensors{"audio": x})
	require.NoError(t, err)

	loud := tone(8000, 0.5)
	fb, err := runtime.New("fbank", map[string]any{"preset": "whisper-80"}, runtime.CPU)
	require.NoError(t, err)
	want, err := fb.Run(context.Background(), runtime.Tensors{"pcm": runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{1, len(loud)}, loud))})
	require.NoError(t, err)
	require.Equal(t, want["features"].Shape(), out["features"].Shape())
	assert.InDeltaSlice(t, want["features"].F32(), out["features"].F32(), 1e-4)
	assert.Equal(t, []int64{50}, out["lengths"].I64())

	names := []string{}
	for _, s := range runtime.List() {
		names = append(names, s.Name)
	}
	assert.Contains(t, names, "example.peak_normalize")
}

func TestCustomOpErrors(t *testing.T) {
	_, err := runtime.New("example.peak_normalize", map[string]any{"peak": 2}, runtime.CPU)
	assert.ErrorContains(t, err, "peak 2 must be in (0, 1]")
	inst, err := runtime.New("example.peak_normalize", nil, runtime.CPU)
	require.NoError(t, err)
	bad := runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{2, 2}, []float32{0, 1, float32(math.NaN()), 0}))
	_, err = inst.Run(context.Background(), runtime.Tensors{"pcm": bad})
	assert.ErrorContains(t, err, "pcm item 1 holds a non-finite sample")
}
