package asr

import (
	"context"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime/audio"
)

// streamAll writes pcm to a new stream in pieces of n samples, closes it and
// returns every result.
func streamAll(t *testing.T, r *Recognizer, opt StreamOptions, pcm []float32, n int) []StreamResult {
	t.Helper()
	s, err := r.NewStream(opt)
	require.NoError(t, err)
	ctx := context.Background()
	var out []StreamResult
	for i := 0; i < len(pcm); i += n {
		res, err := s.Write(ctx, pcm[i:min(i+n, len(pcm))])
		require.NoError(t, err)
		out = append(out, res...)
	}
	res, err := s.Close(ctx)
	require.NoError(t, err)
	return append(out, res...)
}

func finals(rs []StreamResult) []StreamResult {
	var out []StreamResult
	for _, r := range rs {
		if r.Final {
			out = append(out, r)
		}
	}
	return out
}

// utterances is three clips with 2 s of silence between them and none
// after the last, with their texts and where each starts.
func utterances(t *testing.T) (pcm []float32, texts []string, starts []time.Duration) {
	for i, name := range []string{"demo", "words_1", "words_3"} {
		if i > 0 {
			pcm = append(pcm, make([]float32, 2*16000)...)
		}
		x, truth := loadTruth(t, name)
		starts = append(starts, time.Duration(len(pcm))*time.Second/16000)
		pcm = append(pcm, x...)
		texts = append(texts, truth.Text)
	}
	return pcm, texts, starts
}

// TestStreamUtterances: three utterances separated by pauses come out as
// three finals with the offline texts and word times near the offline
// ones, partials before each final, and speech up to the last sample is
// flushed by Close.
func TestStreamUtterances(t *testing.T) {
	r, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	pcm, texts, starts := utterances(t)
	all := streamAll(t, r, StreamOptions{}, pcm, 1600)
	fin := finals(all)
	require.Len(t, fin, 3)
	for i, f := range fin {
		assert.Equal(t, i, f.Utterance)
		assert.Equal(t, texts[i], f.Text, "utterance %d", i)
		x, _ := loadTruth(t, []string{"demo", "words_1", "words_3"}[i])
		off, err := r.Transcribe(context.Background(), x)
		require.NoError(t, err)
		require.Len(t, f.Words, len(off.Words), "utterance %d", i)
		for k, w := range off.Words {
			assert.InDelta(t, (w.Start + starts[i]).Seconds(), f.Words[k].Start.Seconds(), 0.041, "utterance %d word %d start", i, k)
			assert.InDelta(t, (w.End + starts[i]).Seconds(), f.Words[k].End.Seconds(), 0.041, "utterance %d word %d end", i, k)
		}
	}
	partials := 0
	for _, res := range all {
		if !res.Final {
			partials++
			assert.NotEmpty(t, res.Text)
			assert.LessOrEqual(t, res.Start, res.End)
		}
	}
	assert.Greater(t, partials, 3, "partials appear while each utterance is spoken")
	assert.True(t, all[len(all)-1].Final)
}

// TestStreamWriteSizes: one-sample writes and one big write give the same
// results as chunk-sized ones.
func TestStreamWriteSizes(t *testing.T) {
	r, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	x, truth := loadTruth(t, "words_2")
	want := streamAll(t, r, StreamOptions{}, x, 7680)
	for _, n := range []int{1, 333, len(x)} {
		got := streamAll(t, r, StreamOptions{}, x, n)
		assert.Equal(t, want, got, "writes of %d samples", n)
	}
	fin := finals(want)
	require.Len(t, fin, 1)
	assert.Equal(t, truth.Text, fin[0].Text)
}

// TestStreamTiny: an empty stream and one shorter than the model's
// shortest input give no results and no error.
func TestStreamTiny(t *testing.T) {
	r, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	for name, pcm := range map[string][]float32{"tiny": make([]float32, 100), "empty": nil} {
		res := streamAll(t, r, StreamOptions{}, pcm, 4000)
		assert.Empty(t, res, name)
	}
}

// TestStreamErrors: bad options, NaN samples, writes after Close and a
// cancelled context are errors.
func TestStreamErrors(t *testing.T) {
	r, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	_, err = r.NewStream(StreamOptions{Chunk: -time.Second})
	assert.ErrorContains(t, err, "stream option Chunk")
	_, err = r.NewStream(StreamOptions{Chunk: 20 * time.Millisecond, Left: -1, LookAhead: 20 * time.Millisecond})
	assert.ErrorContains(t, err, "stream option Left")
	_, err = r.NewStream(StreamOptions{Chunk: 20 * time.Millisecond, Left: time.Millisecond, LookAhead: time.Millisecond})
	assert.ErrorContains(t, err, "shorter than the 4 encoder frames")

	s, err := r.NewStream(StreamOptions{})
	require.NoError(t, err)
	_, err = s.Write(context.Background(), []float32{0, float32(math.NaN())})
	assert.ErrorContains(t, err, "stream sample 1 is NaN")
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	x, _ := loadTruth(t, "demo")
	_, err = s.Write(ctx, x)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = s.Close(context.Background())
	require.NoError(t, err)
	_, err = s.Write(context.Background(), x)
	assert.ErrorIs(t, err, ErrStreamClosed)
	_, err = s.Close(context.Background())
	assert.ErrorIs(t, err, ErrStreamClosed)
}

// TestStreamsConcurrent: streams on one recogniser from many goroutines
// give what each gives alone.
func TestStreamsConcurrent(t *testing.T) {
	r, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	var want [][]StreamResult
	var clips [][]float32
	for _, name := range clipNames {
		x, _ := loadTruth(t, name)
		clips = append(clips, x)
		want = append(want, streamAll(t, r, StreamOptions{}, x, 4800))
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := g % len(clips)
			got := streamAll(t, r, StreamOptions{}, clips[i], 4800)
			assert.Equal(t, want[i], got, "stream %d (%s)", g, clipNames[i])
		}()
	}
	wg.Wait()
	var texts []string
	for _, w := range want {
		for _, f := range finals(w) {
			texts = append(texts, f.Text)
		}
	}
	assert.NotEmpty(t, strings.Join(texts, ""))
}

// TestStreamSilenceWithVAD: with a VAD, silence, noise and a tone stream
// without results (the model alone invents words on them).
func TestStreamSilenceWithVAD(t *testing.T) {
	r := withVAD(t, 30*time.Second, Options{})
	for _, name := range []string{"silence", "zeros", "noise", "tone"} {
		pcm, err := audio.Load("../plugins/vad/testdata/"+name+".wav", 16000)
		require.NoError(t, err)
		pcm = append(append(pcm, pcm...), pcm...)
		assert.Empty(t, finals(streamAll(t, r, StreamOptions{}, pcm, 1600)), name)
	}
	pcm, texts, _ := utterances(t)
	var got []string
	for _, f := range finals(streamAll(t, r, StreamOptions{}, pcm, 1600)) {
		got = append(got, f.Text)
	}
	assert.Equal(t, texts, got, "speech between the silences")
}
