package asr

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/asr/transcript"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/audio"
	"github.com/edgespeech/edge/runtime/npy"
)

// The bundled model and its synthesised clips (models/default/testdata, made
// by models/scripts/make_testclips.py). Each words_N clip's JSON holds the
// word timing espeak-ng reported while synthesising it (its word events,
// each word trimmed to the samples within 40 dB of the peak): ground truth
// independent of the model.
const defaultModel = "../models/default"

type clipTruth struct {
	Text  string `json:"text"`
	Words []struct {
		Word  string  `json:"word"`
		Start float64 `json:"start"`
		End   float64 `json:"end"`
	} `json:"words"`
}

func loadTruth(t testing.TB, name string) ([]float32, clipTruth) {
	t.Helper()
	dir := filepath.Join(defaultModel, "testdata")
	pcm, err := audio.Load(filepath.Join(dir, name+".wav"), 16000)
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(dir, name+".json"))
	require.NoError(t, err)
	var truth clipTruth
	require.NoError(t, json.Unmarshal(b, &truth))
	return pcm, truth
}

// The Go frontend and encoder reproduce the training script's torch
// features and ONNX Runtime's log-probs for the demo clip.
func TestDefaultModelMatchesTrainingPipeline(t *testing.T) {
	r, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	pcm, _ := loadTruth(t, "demo")
	golden := func(name string) *runtime.Tensor {
		x, err := npy.ReadFile(filepath.Join(defaultModel, "testdata", "golden_demo", name+".npy"))
		require.NoError(t, err)
		return x
	}
	fb, err := runtime.New("fbank", r.manifest.Frontend, runtime.CPU)
	require.NoError(t, err)
	out, err := fb.Run(context.Background(), runtime.Tensors{"pcm": runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{len(pcm)}, pcm))})
	require.NoError(t, err)
	want := golden("features")
	require.Equal(t, want.Shape(), out["features"].Shape())
	assert.Less(t, maxAbsDiff(want.F32(), out["features"].F32()), 1e-3, "features vs the torch training frontend")

	lp, T, err := r.Emissions(context.Background(), pcm)
	require.NoError(t, err)
	wantLP, valid := golden("logprobs"), int(golden("encoded_lengths").I64()[0])
	require.Equal(t, valid, T)
	V := wantLP.Shape()[2]
	assert.Less(t, maxAbsDiff(wantLP.F32()[:T*V], lp), 2e-2, "log-probs vs torch features through ONNX Runtime")
}

func maxAbsDiff(a, b []float32) float64 {
	var m float64
	for i := range a {
		m = math.Max(m, math.Abs(float64(a[i]-b[i])))
	}
	return m
}

// Word junctions (the midpoint of the silence our aligner leaves between two
// words) must lie within 60 ms of the synthesiser's boundary; the clip's
// first onset and last offset, where the reference cuts at 40 dB below the
// peak, within 100 ms. Words must be exactly right.
func TestDefaultModelTranscribesAndAligns(t *testing.T) {
	r, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	ctx := context.Background()
	sec := func(d time.Duration) float64 { return d.Seconds() }
	var worstJunction, worstEdge float64
	for _, name := range []string{"demo", "words_1", "words_2", "words_3", "words_4"} {
		pcm, truth := loadTruth(t, name)
		tr, err := r.Transcribe(ctx, pcm)
		require.NoError(t, err, name)
		assert.Equal(t, truth.Text, tr.Text, name)
		aligned, err := r.Align(ctx, pcm, truth.Text)
		require.NoError(t, err, name)
		assert.Equal(t, truth.Text, aligned.Text, name)
		if len(truth.Words) == 0 {
			continue
		}
		require.Len(t, aligned.Words, len(truth.Words), name)
		w, g := aligned.Words, truth.Words
		for k := 1; k < len(w); k++ {
			mid := (sec(w[k-1].End) + sec(w[k].Start)) / 2
			ref := (g[k-1].End + g[k].Start) / 2
			worstJunction = math.Max(worstJunction, math.Abs(mid-ref))
			assert.InDelta(t, ref, mid, 0.060, "%s: junction %q|%q", name, g[k-1].Word, g[k].Word)
		}
		worstEdge = math.Max(worstEdge, math.Max(math.Abs(sec(w[0].Start)-g[0].Start), math.Abs(sec(w[len(w)-1].End)-g[len(g)-1].End)))
		assert.InDelta(t, g[0].Start, sec(w[0].Start), 0.100, "%s: onset", name)
		assert.InDelta(t, g[len(g)-1].End, sec(w[len(w)-1].End), 0.100, "%s: offset", name)
	}
	t.Logf("worst word junction error %.0f ms, worst onset/offset error %.0f ms", worstJunction*1000, worstEdge*1000)
}

func TestDefaultModelLongAudioAndFormats(t *testing.T) {
	r, err := Open(defaultModel, Options{ChunkSeconds: 10, OverlapSeconds: 2})
	require.NoError(t, err)
	defer r.Close()
	// The demo sentence five times over (27 s): chunk boundaries fall inside words.
	var pcm []float32
	var texts []string
	x, truth := loadTruth(t, "demo")
	for range 5 {
		pcm = append(pcm, x...)
		texts = append(texts, truth.Text)
	}
	var st Stats
	tr, err := r.Transcribe(WithStats(context.Background(), &st), pcm)
	require.NoError(t, err)
	assert.Greater(t, st.Chunks, 3)
	assert.Equal(t, strings.Join(texts, " "), tr.Text)
	for k := 1; k < len(tr.Words); k++ {
		assert.LessOrEqual(t, tr.Words[k-1].End, tr.Words[k].Start)
	}
	for _, f := range transcript.Formats() {
		var sb strings.Builder
		require.NoError(t, transcript.Write(&sb, tr, f, transcript.WriteOptions{}), f)
		assert.Contains(t, sb.String(), "garden", fmt.Sprint(f))
	}
}
