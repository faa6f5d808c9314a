package asr

import (
	"context"
	"fmt"
	goruntime "runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/asr/transcript"
)

var clipNames = []string{"demo", "words_1", "words_2", "words_3", "words_4"}

// checkConcurrent runs 16 goroutines over one recogniser, each transcribing
// one clip and aligning another, and requires every result to equal the
// sequential one.
func checkConcurrent(t *testing.T, r *Recognizer) {
	ctx := context.Background()
	pcm := map[string][]float32{}
	texts := map[string]string{}
	transcribed := map[string]*transcript.Transcript{}
	aligned := map[string]*transcript.Transcript{}
	for _, name := range clipNames {
		x, truth := loadTruth(t, name)
		pcm[name], texts[name] = x, truth.Text
		var err error
		transcribed[name], err = r.Transcribe(ctx, x)
		require.NoError(t, err, name)
		aligned[name], err = r.Align(ctx, x, truth.Text)
		require.NoError(t, err, name)
	}
	const goroutines = 16
	var wg sync.WaitGroup
	errs := make(chan error, 2*goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a, b := clipNames[g%len(clipNames)], clipNames[(g+1)%len(clipNames)]
			var st Stats
			tr, err := r.Transcribe(WithStats(ctx, &st), pcm[a])
			if err != nil {
				errs <- fmt.Errorf("goroutine %d: transcribe %s: %w", g, a, err)
			} else if !assert.ObjectsAreEqual(transcribed[a], tr) {
				errs <- fmt.Errorf("goroutine %d: transcribe %s: %q, sequentially %q (or times differ)", g, a, tr.Text, transcribed[a].Text)
			} else if st.Chunks != 1 || st.Audio == 0 {
				errs <- fmt.Errorf("goroutine %d: stats of its own call: %+v", g, st)
			}
			al, err := r.Align(ctx, pcm[b], texts[b])
			if err != nil {
				errs <- fmt.Errorf("goroutine %d: align %s: %w", g, b, err)
			} else if !assert.ObjectsAreEqual(aligned[b], al) {
				errs <- fmt.Errorf("goroutine %d: align %s differs from the sequential alignment", g, b)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestRecognizerConcurrent: one recogniser, many goroutines, the sequential
// results (run it with -race).
func TestRecognizerConcurrent(t *testing.T) {
	r, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	checkConcurrent(t, r)
}

// heapAfterGC is the Go heap in use once the garbage collector has run.
func heapAfterGC() uint64 {
	var m goruntime.MemStats
	goruntime.GC()
	goruntime.GC()
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc
}

// checkFlat transcribes pcm n times and requires measure() to come back to
// where it was after the first warm-up runs, within slack.
func checkFlat(t *testing.T, r *Recognizer, pcm []float32, n int, what string, measure func() int64, slack int64) {
	ctx := context.Background()
	const warm = 10
	var start int64
	for i := range n {
		if i == warm {
			start = measure()
		}
		_, err := r.Transcribe(ctx, pcm)
		require.NoError(t, err, "run %d", i)
	}
	end := measure()
	t.Logf("%s after %d and %d transcriptions: %d and %d bytes", what, warm, n, start, end)
	assert.LessOrEqual(t, end-start, slack, "%s grew by %d bytes over %d transcriptions", what, end-start, n-warm)
}

// TestTranscribeHeapFlat: on the CPU backend repeated transcription leaves
// the Go heap where it was (what a call allocates is garbage afterwards).
func TestTranscribeHeapFlat(t *testing.T) {
	r, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	pcm, _ := loadTruth(t, "words_1")
	checkFlat(t, r, pcm, 1000, "Go heap", func() int64 { return int64(heapAfterGC()) }, 1<<20)
}
