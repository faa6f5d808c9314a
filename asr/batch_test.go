package asr

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/asr/transcript"
)

// batchSizes records the size of every encoder run (Options.OnEncode).
type batchSizes struct {
	mu    sync.Mutex
	sizes []int
}

func (b *batchSizes) observe(n int) {
	b.mu.Lock()
	b.sizes = append(b.sizes, n)
	b.mu.Unlock()
}

// largest is the biggest run so far and how many runs there were.
func (b *batchSizes) largest() (int, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	m := 0
	for _, n := range b.sizes {
		m = max(m, n)
	}
	return m, len(b.sizes)
}

// batchedTolerance is the largest |diff| allowed between a batched chunk's
// log-probs and the same chunk's alone: the bundled model masks padding,
// so only float rounding of the longer runs differs.
const batchedTolerance = 1e-4

// batchDiff is maxAbsDiff for slices that must have the same length.
func batchDiff(a, b []float32) float64 {
	if len(a) != len(b) {
		return math.Inf(1)
	}
	return maxAbsDiff(a, b)
}

// sameWords requires the same text, tokens and word times, and confidences
// within float rounding.
func sameWords(want, got *transcript.Transcript) error {
	return sameWordsWithin(want, got, 0)
}

// sameWordsWithin requires the same text and tokens, word and token times
// within slack, and with slack 0 also confidences within float rounding.
func sameWordsWithin(want, got *transcript.Transcript, slack time.Duration) error {
	near := func(a, b time.Duration) bool { return (a - b).Abs() <= slack }
	if want.Text != got.Text {
		return fmt.Errorf("text %q, want %q", got.Text, want.Text)
	}
	if len(want.Words) != len(got.Words) || len(want.Tokens) != len(got.Tokens) {
		return fmt.Errorf("%d words / %d tokens, want %d / %d", len(got.Words), len(got.Tokens), len(want.Words), len(want.Tokens))
	}
	for i, w := range want.Words {
		g := got.Words[i]
		if w.Text != g.Text || !near(w.Start, g.Start) || !near(w.End, g.End) || (slack == 0 && math.Abs(w.Confidence-g.Confidence) > 1e-3) {
			return fmt.Errorf("word %d %+v, want %+v", i, g, w)
		}
	}
	for i, tk := range want.Tokens {
		g := got.Tokens[i]
		if tk.ID != g.ID || !near(tk.Start, g.Start) || !near(tk.End, g.End) {
			return fmt.Errorf("token %d %+v, want %+v", i, g, tk)
		}
	}
	return nil
}

// longClip is the clips one after another with 0.5 s pauses (about 20 s):
// three 10 s chunks with overlap.
func longClip(t *testing.T) []float32 {
	var pcm []float32
	for _, name := range clipNames {
		x, _ := loadTruth(t, name)
		pcm = append(append(pcm, x...), make([]float32, 8000)...)
	}
	return pcm
}

// TestBatchedMatchesUnbatched: 16 goroutines on a batching recogniser give
// the sequential unbatched results (words and times equal, log-probs within
// batchedTolerance), and their chunks did share encoder runs. A long clip's
// chunks batch with each other and with the others'.
func TestBatchedMatchesUnbatched(t *testing.T) {
	ctx := context.Background()
	plain, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer plain.Close()
	var sizes batchSizes
	batched, err := Open(defaultModel, Options{Batch: 8, BatchWait: 20 * time.Millisecond, OnEncode: sizes.observe})
	require.NoError(t, err)
	defer batched.Close()
	require.NoError(t, batched.BatchDisabled())
	require.Equal(t, 8, batched.BatchSize())

	names := append(append([]string(nil), clipNames...), "long")
	pcm := map[string][]float32{"long": longClip(t)}
	texts := map[string]string{}
	for _, name := range clipNames {
		x, truth := loadTruth(t, name)
		pcm[name], texts[name] = x, truth.Text
	}
	lp := map[string][]float32{}
	trs, als := map[string]*transcript.Transcript{}, map[string]*transcript.Transcript{}
	for _, name := range names {
		lp[name], _, err = plain.Emissions(ctx, pcm[name])
		require.NoError(t, err, name)
		trs[name], err = plain.Transcribe(ctx, pcm[name])
		require.NoError(t, err, name)
		if name != "long" {
			als[name], err = plain.Align(ctx, pcm[name], texts[name])
			require.NoError(t, err, name)
		}
	}

	const goroutines = 16
	var wg sync.WaitGroup
	var mu sync.Mutex
	worst, callBatch := 0.0, 0
	errs := make(chan error, 3*goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := names[g%len(names)]
			got, _, err := batched.Emissions(ctx, pcm[name])
			if err != nil {
				errs <- fmt.Errorf("goroutine %d: emissions %s: %w", g, name, err)
				return
			}
			d := batchDiff(lp[name], got)
			mu.Lock()
			worst = max(worst, d)
			mu.Unlock()
			if d > batchedTolerance {
				errs <- fmt.Errorf("goroutine %d: emissions %s: max |diff| %g to unbatched", g, name, d)
			}
			var st Stats
			tr, err := batched.Transcribe(WithStats(ctx, &st), pcm[name])
			if err != nil {
				errs <- fmt.Errorf("goroutine %d: transcribe %s: %w", g, name, err)
			} else if err := sameWords(trs[name], tr); err != nil {
				errs <- fmt.Errorf("goroutine %d: transcribe %s: %w", g, name, err)
			}
			mu.Lock()
			callBatch = max(callBatch, st.MaxBatch)
			mu.Unlock()
			if name == "long" {
				return
			}
			al, err := batched.Align(ctx, pcm[name], texts[name])
			if err != nil {
				errs <- fmt.Errorf("goroutine %d: align %s: %w", g, name, err)
			} else if err := sameWords(als[name], al); err != nil {
				errs <- fmt.Errorf("goroutine %d: align %s: %w", g, name, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	largest, runs := sizes.largest()
	t.Logf("batched vs unbatched log-probs: max |diff| %.3g over %d clips; %d encoder runs, the largest %d chunks; largest in one call's stats %d", worst, len(names), runs, largest, callBatch)
	assert.Greater(t, largest, 1, "no encoder run held more than one chunk")
	assert.Greater(t, callBatch, 1, "no call's Stats.MaxBatch exceeded 1")
}

// TestBatchMemberCancelled: a member whose context ends while its batch
// runs gets its context's error at once; the batch's other members get
// their results. A batch all of whose members gave up is cancelled.
func TestBatchMemberCancelled(t *testing.T) {
	ctx := context.Background()
	r, err := Open(defaultModel, Options{Batch: 4, BatchWait: time.Second})
	require.NoError(t, err)
	defer r.Close()
	r.batch.waitIdle = true
	want := map[string]*transcript.Transcript{}
	pcm := map[string][]float32{}
	for _, name := range clipNames[:4] {
		pcm[name], _ = loadTruth(t, name)
	}
	plain, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer plain.Close()
	for name, x := range pcm {
		want[name], err = plain.Transcribe(ctx, x)
		require.NoError(t, err)
	}

	victim, cancel := context.WithCancel(ctx)
	defer cancel()
	running := make(chan int, 4)
	r.batch.onRun = func(n int) { running <- n; cancel() } // cancelled mid-run
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i, name := range clipNames[:4] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := ctx
			if i == 0 {
				c = victim
			}
			tr, err := r.Transcribe(c, pcm[name])
			if err == nil {
				err = sameWords(want[name], tr)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	require.Equal(t, 4, <-running, "the four calls did not share one run")
	assert.ErrorIs(t, errs[0], context.Canceled)
	for i := 1; i < 4; i++ {
		assert.NoError(t, errs[i], clipNames[i])
	}

	// Every member gone: the run's context ends.
	all, cancelAll := context.WithCancel(ctx)
	r.batch.onRun = func(int) { cancelAll() }
	wg = sync.WaitGroup{}
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, errs[i] = r.Emissions(all, pcm[clipNames[i]])
		}()
	}
	wg.Wait()
	for i := range 3 {
		assert.ErrorIs(t, errs[i], context.Canceled)
	}
	r.batch.onRun = nil
	_, err = r.Transcribe(ctx, pcm["demo"]) // the recogniser still works
	assert.NoError(t, err)
}

// TestBatchTooShortAlone: a clip too short for the model fails alone; the
// others batched with it (a clip of the shortest encodable length among
// them) get their unbatched results.
func TestBatchTooShortAlone(t *testing.T) {
	ctx := context.Background()
	var sizes batchSizes
	r, err := Open(defaultModel, Options{Batch: 4, BatchWait: 200 * time.Millisecond, OnEncode: sizes.observe})
	require.NoError(t, err)
	defer r.Close()
	r.batch.waitIdle = true
	plain, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer plain.Close()
	demo, _ := loadTruth(t, "demo")
	w1, _ := loadTruth(t, "words_1")
	clips := [][]float32{demo, demo[:100], demo[:4*r.stride], w1}
	want := make([][]float32, len(clips))
	for i, x := range clips {
		if i != 1 {
			want[i], _, err = plain.Emissions(ctx, x)
			require.NoError(t, err)
		}
	}
	got := make([][]float32, len(clips))
	errs := make([]error, len(clips))
	var wg sync.WaitGroup
	for i, x := range clips {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i], _, errs[i] = r.Emissions(ctx, x)
		}()
	}
	wg.Wait()
	assert.ErrorIs(t, errs[1], ErrTooShort)
	for i := range clips {
		if i == 1 {
			continue
		}
		require.NoError(t, errs[i], "clip %d", i)
		assert.LessOrEqual(t, batchDiff(want[i], got[i]), batchedTolerance, "clip %d", i)
	}
	largest, _ := sizes.largest()
	assert.Equal(t, 3, largest, "the three encodable clips did not share a run")
}

// TestStreamsBatched: streams written from their own goroutines share
// encoder runs and give the finals each gives alone.
func TestStreamsBatched(t *testing.T) {
	pcm, texts, _ := utterances(t)
	plain, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer plain.Close()
	want := finals(streamAll(t, plain, StreamOptions{}, pcm, 1600))
	require.Len(t, want, len(texts))

	var sizes batchSizes
	r, err := Open(defaultModel, Options{Batch: 8, BatchWait: 10 * time.Millisecond, OnEncode: sizes.observe})
	require.NoError(t, err)
	defer r.Close()
	const streams = 6
	got := make([][]StreamResult, streams)
	var wg sync.WaitGroup
	for i := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = finals(streamAll(t, r, StreamOptions{}, pcm, 1600))
		}()
	}
	wg.Wait()
	for i, g := range got {
		require.Len(t, g, len(want), "stream %d", i)
		for k := range want {
			assert.Equal(t, want[k].Start, g[k].Start, "stream %d final %d", i, k)
			assert.NoError(t, sameWords(want[k].Transcript, g[k].Transcript), "stream %d final %d", i, k)
		}
	}
	largest, runs := sizes.largest()
	t.Logf("%d streams: %d encoder runs, the largest %d chunks", streams, runs, largest)
	assert.Greater(t, largest, 1, "the streams' steps never shared an encoder run")
}

// TestBatchPaddingSensitiveModel: a wav2vec2 export with group-normalised
// features (its output changes with padding) is never batched, and says so.
func TestBatchPaddingSensitiveModel(t *testing.T) {
	var sizes batchSizes
	r, err := Open(filepath.Join(byomData, "w2v"), Options{Batch: 4, OnEncode: sizes.observe})
	require.NoError(t, err)
	defer r.Close()
	assert.Equal(t, 1, r.BatchSize())
	require.Error(t, r.BatchDisabled())
	assert.Contains(t, r.BatchDisabled().Error(), "padding")
	pcm, _ := loadTruth(t, "demo")
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _, err := r.Emissions(context.Background(), pcm)
			assert.NoError(t, err)
		}()
	}
	wg.Wait()
	largest, runs := sizes.largest()
	assert.Equal(t, 1, largest)
	assert.Equal(t, 4, runs)
}

// TestBatchClosed: calls that reach a closed batcher fail with ErrClosed,
// and a negative Batch is refused.
func TestBatchClosed(t *testing.T) {
	_, err := Open(defaultModel, Options{Batch: -1})
	require.Error(t, err)
	r, err := Open(defaultModel, Options{Batch: 2})
	require.NoError(t, err)
	r.batch.close()
	pcm, _ := loadTruth(t, "demo")
	_, _, err = r.Emissions(context.Background(), pcm)
	assert.True(t, errors.Is(err, ErrClosed), "%v", err)
	require.NoError(t, r.Close())
}

// TestBatchIdleStartsAtOnce: a lone call on an idle recogniser does not wait
// for company, however long BatchWait is.
func TestBatchIdleStartsAtOnce(t *testing.T) {
	r, err := Open(defaultModel, Options{Batch: 4, BatchWait: 10 * time.Second})
	require.NoError(t, err)
	defer r.Close()
	pcm, truth := loadTruth(t, "words_1")
	t0 := time.Now()
	tr, err := r.Transcribe(context.Background(), pcm)
	require.NoError(t, err)
	assert.Less(t, time.Since(t0), 5*time.Second, "the lone call waited for BatchWait")
	assert.Equal(t, truth.Text, tr.Text)
}

// TestPadTo: runs padded to a multiple of PadTo give the unpadded log-probs
// (within float rounding) and words, batched or not; models whose output
// depends on padding are not padded.
func TestPadTo(t *testing.T) {
	ctx := context.Background()
	plain, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer plain.Close()
	for _, opt := range []Options{{PadTo: time.Second}, {PadTo: 3 * time.Second, Batch: 4}} {
		padded, err := Open(defaultModel, opt)
		require.NoError(t, err)
		defer padded.Close()
		assert.Equal(t, int(opt.PadTo.Seconds()*16000), padded.padTo)
		for _, name := range clipNames {
			pcm, _ := loadTruth(t, name)
			want, _, err := plain.Emissions(ctx, pcm)
			require.NoError(t, err)
			got, _, err := padded.Emissions(ctx, pcm)
			require.NoError(t, err)
			assert.LessOrEqual(t, batchDiff(want, got), 1e-4, "%s, PadTo %v", name, opt.PadTo)
			wt, err := plain.Transcribe(ctx, pcm)
			require.NoError(t, err)
			gt, err := padded.Transcribe(ctx, pcm)
			require.NoError(t, err)
			assert.NoError(t, sameWords(wt, gt), "%s, PadTo %v", name, opt.PadTo)
		}
	}
	cpu, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer cpu.Close()
	assert.Zero(t, cpu.padTo, "no padding by default on the CPU")
	m := *cpu.Manifest()
	assert.Equal(t, 16000, padSamples(Options{Provider: "cuda"}, &m, 320), "1 s with the CUDA EP")
	assert.Equal(t, 640, padSamples(Options{PadTo: 30 * time.Millisecond}, &m, 320), "a multiple of the frame stride")
	assert.Zero(t, padSamples(Options{Provider: "cuda", PadTo: -1}, &m, 320))
	m.PaddingSensitive = true
	assert.Zero(t, padSamples(Options{PadTo: time.Second}, &m, 320), "padding-sensitive models are not padded")
}
