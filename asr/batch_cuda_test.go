//go:build cuda

package asr

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/asr/transcript"
	"github.com/edgespeech/edge/runtime/cuda/cudatest"
)

// TestCUDABatched: on the cuda backend with the CUDA EP, 16 goroutines on a
// batching recogniser give the unbatched GPU results (log-probs within
// batchedCUDATolerance, same words and times); the batch's emissions are
// split on the device and nothing is left allocated.
// batchedCUDATolerance is the largest log-prob |diff| allowed between a
// chunk encoded in a batch and alone on the CUDA EP. The EP runs fp32 GEMMs
// and convolutions in TF32 (10 mantissa bits) and picks its kernels by
// shape, so a batch of b items is not the same arithmetic as b runs of one:
// measured on the H200, 0.025 at most. The words and times are required to
// be identical.
const batchedCUDATolerance = 0.05

// cudaTimeSlack is how far word and token times of a batched chunk may
// move on the CUDA EP: one output frame of the bundled model (20 ms). With
// TF32 products a boundary frame whose two best labels are within the
// rounding can go either way (seen on the H200: one word end of the long
// clip, 2.62 against 2.64 s); the texts and tokens are required equal.
const cudaTimeSlack = 20 * time.Millisecond

func TestCUDABatched(t *testing.T) {
	be := cudatest.Backend(t)
	ctx := context.Background()
	plain, err := Open(defaultModel, Options{Backend: be, Provider: "cuda"})
	require.NoError(t, err)
	defer plain.Close()
	var sizes batchSizes
	batched, err := Open(defaultModel, Options{Backend: be, Provider: "cuda", Batch: 8, BatchWait: 10 * time.Millisecond, OnEncode: sizes.observe})
	require.NoError(t, err)
	defer batched.Close()
	names := append(append([]string(nil), clipNames...), "long")
	pcm := map[string][]float32{"long": longClip(t)}
	for _, name := range clipNames {
		pcm[name], _ = loadTruth(t, name)
	}
	lp := map[string][]float32{}
	trs := map[string]*transcript.Transcript{}
	for _, name := range names {
		lp[name], _, err = plain.Emissions(ctx, pcm[name])
		require.NoError(t, err)
		trs[name], err = plain.Transcribe(ctx, pcm[name])
		require.NoError(t, err)
		_, err = batched.Transcribe(ctx, pcm[name]) // the ops' own tables reach their size
		require.NoError(t, err)
	}
	var mu sync.Mutex
	worst := 0.0
	round := func() {
		var wg sync.WaitGroup
		errs := make(chan error, 32)
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name := names[g%len(names)]
				got, _, err := batched.Emissions(ctx, pcm[name])
				if err != nil {
					errs <- err
					return
				}
				d := batchDiff(lp[name], got)
				mu.Lock()
				worst = max(worst, d)
				mu.Unlock()
				if d > batchedCUDATolerance {
					errs <- fmt.Errorf("%s: log-probs max |diff| %g", name, d)
				}
				tr, err := batched.Transcribe(ctx, pcm[name])
				if err == nil {
					err = sameWordsWithin(trs[name], tr, cudaTimeSlack)
				}
				if err != nil {
					errs <- fmt.Errorf("%s: %w", name, err)
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	}
	round() // the ops' buffers reach the batches' sizes
	before := be.PoolStats().InUse
	round()
	largest, runs := sizes.largest()
	t.Logf("GPU batched vs unbatched log-probs: max |diff| %.3g; %d encoder runs, the largest %d chunks", worst, runs, largest)
	assert.Greater(t, largest, 1)
	assert.Equal(t, before, be.PoolStats().InUse, "device pool in use after the batched calls")
}

// BenchmarkStreamCapacityGPU: BenchmarkStreamCapacity on the cuda backend
// with the CUDA EP: 1 to 64 streams, encoder batching off and on.
//
//	asr.test -test.run '^$' -test.bench StreamCapacityGPU -test.benchtime 1x
func BenchmarkStreamCapacityGPU(b *testing.B) {
	be := cudatest.Backend(b)
	for _, batch := range []int{1, 16} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			streamCapacity(b, Options{Backend: be, Provider: "cuda", Batch: batch}, []int{1, 4, 16, 64})
		})
	}
}

// BenchmarkStreamLoadGPU: BenchmarkStreamLoad on the cuda backend with the
// CUDA EP, the streams' steps batched (up to 64 a run): the latency at
// loads around the unpaced capacity of BenchmarkStreamCapacityGPU.
//
//	asr.test -test.run '^$' -test.bench StreamLoadGPU -test.benchtime 1x
func BenchmarkStreamLoadGPU(b *testing.B) {
	streamLoad(b, Options{Backend: cudatest.Backend(b), Provider: "cuda", Batch: 64}, []int{1, 128, 256, 384, 512})
}
