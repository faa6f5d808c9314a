package asr

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/plugins/fbank"
	edgert "github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/model"
)

// cacheEncoder is a test double of a stateful streaming encoder (not a
// model family): its caches are the last `left` feature frames, how many of
// them are filled (like NeMo's cache_last_channel_len) and a step counter;
// each step runs the recogniser's offline encoder over the cached frames,
// the chunk and its look-ahead, normalised over that window, and returns
// the chunk's emissions. It fails the step when the caches it is given are
// not exactly the ones it returned last, so a stream that mis-drives
// caches fails.
type cacheEncoder struct {
	r     *Recognizer
	fb    *fbank.Incremental // the frontend's normalisation (NormalizeWindow)
	left  int
	geo   StreamGeometry
	calls int
	last  edgert.Tensors
	fail  error // returned by the next step, once
}

func newCacheEncoder(t *testing.T, r *Recognizer, chunk, ahead, left int) *cacheEncoder {
	spec, err := edgert.Lookup("fbank")
	require.NoError(t, err)
	p, err := edgert.ResolveParams("fbank", spec.Params, r.manifest.Frontend)
	require.NoError(t, err)
	cfg, err := fbank.ConfigFromParams(p)
	require.NoError(t, err)
	fb, err := fbank.NewIncremental(cfg)
	require.NoError(t, err)
	return &cacheEncoder{r: r, fb: fb, left: left, geo: StreamGeometry{ChunkFrames: chunk, LookAheadFrames: ahead, OutFrames: chunk / 2}}
}

func (e *cacheEncoder) StreamGeometry() StreamGeometry { return e.geo }

func (e *cacheEncoder) InitialCache() (edgert.Tensors, error) {
	nm := e.fb.Config().NumMels
	e.last = edgert.Tensors{
		"cache_frames": edgert.Must(edgert.FromSlice(edgert.F32, edgert.Shape{e.left, nm}, make([]float32, e.left*nm))),
		"cache_len":    edgert.Must(edgert.FromSlice(edgert.I64, edgert.Shape{1}, []int64{0})),
		"steps":        edgert.Must(edgert.FromSlice(edgert.I64, edgert.Shape{1}, []int64{0})),
	}
	return e.last, nil
}

func (e *cacheEncoder) EncodeChunk(ctx context.Context, feats []float32, cache edgert.Tensors) ([]float32, edgert.Tensors, error) {
	for name, t := range e.last {
		if cache[name] != t {
			return nil, nil, fmt.Errorf("cache %q is not the one the previous step returned", name)
		}
	}
	if len(cache) != len(e.last) {
		return nil, nil, fmt.Errorf("%d caches, want %d", len(cache), len(e.last))
	}
	if got := cache["steps"].I64()[0]; got != int64(e.calls) {
		return nil, nil, fmt.Errorf("step counter cache says %d, this is step %d", got, e.calls)
	}
	if err := e.fail; err != nil {
		e.fail = nil
		return nil, nil, err
	}
	nm, g := e.fb.Config().NumMels, e.geo
	if len(feats) != (g.ChunkFrames+g.LookAheadFrames)*nm {
		return nil, nil, fmt.Errorf("%d feature values, want %d frames", len(feats), g.ChunkFrames+g.LookAheadFrames)
	}
	filled := int(cache["cache_len"].I64()[0])
	past := cache["cache_frames"].F32()[(e.left-filled)*nm:]
	window := append(append([]float32(nil), past...), feats...)
	if err := e.fb.NormalizeWindow(window); err != nil {
		return nil, nil, err
	}
	T := len(window) / nm
	melTime := make([]float32, len(window))
	for t := 0; t < T; t++ {
		for m := 0; m < nm; m++ {
			melTime[m*T+t] = window[t*nm+m]
		}
	}
	out, err := e.r.pipeline.Step("encoder").Run(ctx, edgert.Tensors{
		model.InputFeatures: edgert.Must(edgert.FromSlice(edgert.F32, edgert.Shape{1, nm, T}, melTime)),
		model.InputLengths:  edgert.Must(edgert.FromSlice(edgert.I64, edgert.Shape{1}, []int64{int64(T)})),
	})
	if err != nil {
		return nil, nil, err
	}
	V := e.r.manifest.Vocab.Len()
	lo := filled / 2
	lp := append([]float32(nil), out[model.OutputLogProbs].F32()[lo*V:(lo+g.OutFrames)*V]...)
	// The next caches: the last `left` frames of the cached ones and the chunk.
	hist := append(append([]float32(nil), past...), feats[:g.ChunkFrames*nm]...)
	nf := min(e.left, filled+g.ChunkFrames)
	frames := make([]float32, e.left*nm)
	copy(frames[(e.left-nf)*nm:], hist[len(hist)-nf*nm:])
	e.calls++
	e.last = edgert.Tensors{
		"cache_frames": edgert.Must(edgert.FromSlice(edgert.F32, edgert.Shape{e.left, nm}, frames)),
		"cache_len":    edgert.Must(edgert.FromSlice(edgert.I64, edgert.Shape{1}, []int64{int64(nf)})),
		"steps":        edgert.Must(edgert.FromSlice(edgert.I64, edgert.Shape{1}, []int64{int64(e.calls)})),
	}
	return lp, e.last, nil
}

// TestStreamingEncoderDrivesCaches: a stream with a StreamingEncoder feeds
// it the incremental features chunk after chunk with the caches it
// returned, gives partials from its emissions and the offline finals of
// the three utterances, in writes of any size.
func TestStreamingEncoderDrivesCaches(t *testing.T) {
	r, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	pcm, texts, _ := utterances(t)
	for _, n := range []int{1600, 7919, len(pcm)} {
		enc := newCacheEncoder(t, r, 48, 48, 400)
		all := streamAll(t, r, StreamOptions{Encoder: enc}, pcm, n)
		fin := finals(all)
		require.Len(t, fin, 3, "writes of %d", n)
		for i, f := range fin {
			assert.Equal(t, texts[i], f.Text, "writes of %d: utterance %d", n, i)
		}
		assert.Greater(t, len(all), len(fin), "partials before the finals")
		// Every feature frame is consumed once: ceil(frames / chunk) steps.
		frames := len(pcm) / 160
		assert.Equal(t, (frames+47)/48, enc.calls, "writes of %d: steps", n)
	}
}

// TestStreamingEncoderErrors: a geometry that does not match the model's
// frame stride is refused; a failed step keeps the caches and is retried.
func TestStreamingEncoderErrors(t *testing.T) {
	r, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	enc := newCacheEncoder(t, r, 48, 0, 100)
	enc.geo.OutFrames = 20
	_, err = r.NewStream(StreamOptions{Encoder: enc})
	require.ErrorContains(t, err, "streaming encoder geometry")

	enc = newCacheEncoder(t, r, 48, 16, 200)
	s, err := r.NewStream(StreamOptions{Encoder: enc})
	require.NoError(t, err)
	x, truth := loadTruth(t, "demo")
	ctx := context.Background()
	_, err = s.Write(ctx, x[:16000])
	require.NoError(t, err)
	enc.fail = context.Canceled
	_, err = s.Write(ctx, x[16000:32000])
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.Write(ctx, x[32000:])
	require.NoError(t, err)
	res, err := s.Close(ctx)
	require.NoError(t, err)
	fin := finals(res)
	require.Len(t, fin, 1)
	assert.Equal(t, truth.Text, fin[0].Text)
}

// TestStreamCancelMidUtterance: a context cancelled in the middle of an
// utterance fails that Write; the stream keeps its audio, and a later Write
// and Close give the utterance's offline final. Streams leave no goroutine
// behind.
func TestStreamCancelMidUtterance(t *testing.T) {
	r, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	before := runtime.NumGoroutine()
	x, truth := loadTruth(t, "words_1")
	s, err := r.NewStream(StreamOptions{})
	require.NoError(t, err)
	half := len(x) / 2
	_, err = s.Write(context.Background(), x[:half])
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Write(ctx, x[half:half+16000])
	require.ErrorIs(t, err, context.Canceled)
	_, err = s.Write(context.Background(), x[half+16000:])
	require.NoError(t, err)
	res, err := s.Close(context.Background())
	require.NoError(t, err)
	fin := finals(res)
	require.Len(t, fin, 1)
	assert.Equal(t, truth.Text, fin[0].Text)

	for range 5 {
		streamAll(t, r, StreamOptions{}, x, 3200)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	assert.LessOrEqual(t, runtime.NumGoroutine(), before, "goroutines left behind by streams")
}

// TestStreamFeaturePath: on the CPU without a speech finder, buffered
// inference reads its windows' features from the stream's incremental
// frontend; its finals equal those of the path that recomputes each
// window's features from its audio.
func TestStreamFeaturePath(t *testing.T) {
	r, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	s, err := r.NewStream(StreamOptions{})
	require.NoError(t, err)
	require.NotNil(t, s.fb, "the default model streams from incremental features")
	pcm, texts, _ := utterances(t)
	feats := finals(streamAll(t, r, StreamOptions{}, pcm, 1600))
	streamAudioWindows = true
	audio := finals(streamAll(t, r, StreamOptions{}, pcm, 1600))
	streamAudioWindows = false
	require.Len(t, feats, len(texts))
	require.Len(t, audio, len(texts))
	for i := range texts {
		assert.Equal(t, texts[i], feats[i].Text)
		assert.Equal(t, audio[i].Text, feats[i].Text)
		require.Len(t, feats[i].Words, len(audio[i].Words))
		for k, w := range audio[i].Words {
			assert.InDelta(t, w.Start.Seconds(), feats[i].Words[k].Start.Seconds(), 0.021, "utterance %d word %d", i, k)
		}
	}
}

// TestStreamWholeClipFrontend: a frontend that cannot run incrementally
// (pad_to_seconds) streams from each window's audio; a StreamingEncoder,
// which needs incremental features, is refused with the reason.
func TestStreamWholeClipFrontend(t *testing.T) {
	r, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	enc := newCacheEncoder(t, r, 48, 0, 100)
	r.manifest.Frontend = maps.Clone(r.manifest.Frontend)
	r.manifest.Frontend["pad_to_seconds"] = 30.0
	s, err := r.NewStream(StreamOptions{})
	require.NoError(t, err)
	assert.Nil(t, s.fb)
	_, err = r.NewStream(StreamOptions{Encoder: enc})
	require.ErrorContains(t, err, "pad_to_seconds")
}
