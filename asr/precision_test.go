package asr

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime/model"
)

// TestInt8Encoder: the bundled model's int8 encoder (model.int8.onnx) loads
// with Precision int8 and transcribes the bundled clips, each alone and
// all three times over with pauses (VAD segments, 141 words), with a WER
// within 0.5 points of the fp32 encoder's on the same audio.
func TestInt8Encoder(t *testing.T) {
	fp32, err := Open(defaultModel, Options{VAD: defaultVADRules(12 * time.Second)})
	require.NoError(t, err)
	defer fp32.Close()
	q8, err := Open(defaultModel, Options{Precision: model.PrecisionInt8, VAD: defaultVADRules(12 * time.Second)})
	require.NoError(t, err)
	defer q8.Close()
	assert.Equal(t, model.Int8FileName, q8.Manifest().Encoder.File)
	assert.Equal(t, "model.onnx", fp32.Manifest().Encoder.File)

	var pcm []float32
	var texts []string
	for range 3 {
		for _, name := range clipNames {
			x, truth := loadTruth(t, name)
			pcm = append(append(pcm, x...), make([]float32, 8000)...)
			texts = append(texts, truth.Text)
		}
	}
	errs := map[string]int{}
	words := 0
	for i, name := range clipNames {
		x, truth := loadTruth(t, name)
		words += len(strings.Fields(truth.Text))
		for _, c := range []struct {
			name string
			rec  *Recognizer
		}{{"fp32", fp32}, {"int8", q8}} {
			tr, err := c.rec.Transcribe(context.Background(), x)
			require.NoError(t, err, "%s %s", c.name, name)
			errs[c.name] += wordErrors(texts[i], tr.Text)
			if c.name == "int8" {
				require.NotEmpty(t, tr.Words, name)
			}
		}
	}
	ref := strings.Join(texts, " ")
	long := map[string]int{}
	for _, c := range []struct {
		name string
		rec  *Recognizer
	}{{"fp32", fp32}, {"int8", q8}} {
		tr, err := c.rec.Transcribe(context.Background(), pcm)
		require.NoError(t, err, c.name)
		long[c.name] = wordErrors(ref, tr.Text)
	}
	n := len(strings.Fields(ref))
	t.Logf("clips (%d words): fp32 %d, int8 %d word errors; with pauses (%d words): fp32 %d, int8 %d",
		words, errs["fp32"], errs["int8"], n, long["fp32"], long["int8"])
	point := func(e, w int) float64 { return 100 * float64(e) / float64(w) }
	assert.LessOrEqual(t, point(errs["int8"], words)-point(errs["fp32"], words), 0.5, "WER points over fp32 on the clips")
	assert.LessOrEqual(t, point(long["int8"], n)-point(long["fp32"], n), 0.5, "WER points over fp32 with pauses")
}

// A model that ships no int8 encoder is an error naming the file looked for.
func TestInt8EncoderMissing(t *testing.T) {
	dir := "../models/testdata/sherpa"
	_, err := Open(dir, Options{Precision: model.PrecisionInt8})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has no int8 encoder")
	assert.Contains(t, err.Error(), filepath.Join(dir, model.Int8FileName))
	_, err = Open(defaultModel, Options{Precision: "int4"})
	assert.ErrorContains(t, err, `precision "int4" is not fp32 or int8`)
}
