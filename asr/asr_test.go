package asr

import (
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// tinyModel is runtime/onnx's deterministic test model: parakeet-128
// features -> a random-weight CTC head over a 29-symbol character vocabulary,
// 40 ms per output frame. It cannot recognise speech; it exercises the wiring.
const tinyModel = "../runtime/onnx/testdata/nemo"

func noise(n int, seed uint64) []float32 {
	r := rand.New(rand.NewPCG(seed, 1))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(0.1 * r.NormFloat64())
	}
	return x
}

func TestEmissionsChunking(t *testing.T) {
	whole, err := Open(tinyModel, Options{ChunkSeconds: 60})
	require.NoError(t, err)
	defer whole.Close()
	chunked, err := Open(tinyModel, Options{ChunkSeconds: 4, OverlapSeconds: 1})
	require.NoError(t, err)
	defer chunked.Close()
	ctx := context.Background()
	for _, n := range []int{16000 * 3, 16000*10 + 123, 16000*4*2 - 3000*2 + 100} {
		pcm := noise(n, uint64(n))
		var stW, stC Stats
		lpW, tW, err := whole.Emissions(WithStats(ctx, &stW), pcm)
		require.NoError(t, err)
		assert.Equal(t, 1, stW.Chunks)
		lpC, tC, err := chunked.Emissions(WithStats(ctx, &stC), pcm)
		require.NoError(t, err)
		assert.Equal(t, tW, tC, "stitched chunks cover the same frames (n=%d)", n)
		assert.Len(t, lpC, len(lpW))
		if n > 16000*4 {
			assert.Greater(t, stC.Chunks, 1)
		}
		for i, v := range lpC {
			require.False(t, math.IsNaN(float64(v)) || v > 0, "frame value %d = %v", i, v)
		}
		assert.Contains(t, stC.Stages, "fbank")
		assert.Contains(t, stC.Stages, "encoder")
	}
}

func TestTranscribeAndAlignRun(t *testing.T) {
	r, err := Open(tinyModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	ctx := context.Background()
	pcm := noise(16000*2, 7)
	var st Stats
	tr, err := r.Transcribe(WithStats(ctx, &st), pcm)
	require.NoError(t, err)
	assert.Equal(t, st.Audio.Seconds(), 2.0)
	for _, w := range tr.Words {
		assert.LessOrEqual(t, w.Start, w.End)
	}
	tr, err = r.Align(ctx, pcm, "Hello, café 42!")
	require.NoError(t, err)
	var texts []string
	for _, w := range tr.Words {
		texts = append(texts, w.Text)
	}
	assert.Equal(t, []string{"hello", "caf*", "forty", "two"}, texts)
	for i := 1; i < len(tr.Words); i++ {
		assert.LessOrEqual(t, tr.Words[i-1].End, tr.Words[i].Start, "words are ordered")
	}
}

func TestAlignErrors(t *testing.T) {
	r, err := Open(tinyModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	ctx := context.Background()
	// 0.5 s gives 13 frames at 40 ms; "bookkeeper" needs 10 tokens + 3 repeats.
	_, err = r.Align(ctx, noise(8000, 1), "bookkeeper bookkeeper")
	var short *TooShortError
	require.True(t, errors.As(err, &short), "%v", err)
	assert.Equal(t, 21, short.Tokens)
	assert.Equal(t, 6, short.Repeats)
	assert.ErrorContains(t, err, "audio too short for the text: 500ms of audio gives 13 frames, the text needs at least 27")
	_, err = r.Align(ctx, noise(16000, 1), " ... !")
	assert.ErrorContains(t, err, "has no words to align")
	_, err = r.Transcribe(ctx, noise(100, 1))
	assert.ErrorIs(t, err, ErrTooShort)
	bad := make([]float32, 16000)
	bad[100] = float32(math.NaN())
	_, err = r.Transcribe(ctx, bad)
	assert.ErrorContains(t, err, "NaN")

	_, err = Open("no/such/model", Options{})
	assert.Error(t, err)
	_, err = Open(tinyModel, Options{ChunkSeconds: 1})
	assert.ErrorContains(t, err, "want chunk >= 2 s")
}

// Chunks encoded by a pool of workers stitch to exactly the emissions of
// one worker encoding them in order, also when calls share the pool.
func TestEmissionsWorkers(t *testing.T) {
	seq, err := Open(tinyModel, Options{ChunkSeconds: 4, OverlapSeconds: 1, Threads: 1})
	require.NoError(t, err)
	defer seq.Close()
	par, err := Open(tinyModel, Options{ChunkSeconds: 4, OverlapSeconds: 1, Threads: 2, Workers: 3})
	require.NoError(t, err)
	defer par.Close()
	ctx := context.Background()
	for _, n := range []int{16000 * 3, 16000*10 + 123, 16000*31 + 7} {
		pcm := noise(n, uint64(n))
		want, tW, err := seq.Emissions(ctx, pcm)
		require.NoError(t, err)
		done := make(chan struct{})
		for range 3 {
			go func() {
				defer func() { done <- struct{}{} }()
				var st Stats
				got, tP, err := par.Emissions(WithStats(ctx, &st), pcm)
				assert.NoError(t, err)
				assert.Equal(t, tW, tP)
				assert.Equal(t, len(par.chunks(n)), st.Chunks)
				assert.InDeltaSlice(t, want, got, 1e-4, "n=%d", n)
			}()
		}
		for range 3 {
			<-done
		}
	}
	// A cancelled call frees its chunks and returns the context's error.
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	_, _, err = par.Emissions(cctx, noise(16000*20, 9))
	assert.ErrorIs(t, err, context.Canceled)
	_, err = Open(tinyModel, Options{Workers: -1})
	assert.Error(t, err)
}
