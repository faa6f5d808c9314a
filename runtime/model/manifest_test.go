package model

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const nemoManifest = `name: tiny-nemo
sample_rate: 16000
frontend: {preset: parakeet-128, layout: mel_time}
normalize: none
encoder:
  file: model.onnx
  inputs:  {features: audio_signal, lengths: length}
  outputs: {log_probs: logprobs, lengths: encoded_lengths}
vocabulary: tokens.txt
blank_id: 0
frame_stride: 0.04
word_delimiter: "▁"
`

const w2vManifest = `name: tiny-w2v
sample_rate: 16000
normalize: per_utterance
encoder:
  file: model.onnx
  inputs:  {pcm: input_values}
  outputs: {logits: logits}
vocabulary: tokens.txt
blank_id: 0
frame_stride: 0.02
word_delimiter: "|"
`

const tokens = "<blk> 0\n▁ 1\n| 2\na 3\n▁ab 4\n"

// writeModel writes a model directory with the given manifest, a tokens.txt
// and an (empty) model.onnx, and returns the directory.
func writeModel(t *testing.T, manifest string) string {
	t.Helper()
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, FileName), []byte(manifest), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokens.txt"), []byte(tokens), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.onnx"), nil, 0o644))
	return dir
}

func TestLoadGood(t *testing.T) {
	dir := writeModel(t, nemoManifest)
	m, err := Load(dir)
	require.NoError(t, err)
	assert.Equal(t, "tiny-nemo", m.Name)
	assert.Equal(t, 16000, m.SampleRate)
	assert.Equal(t, map[string]any{"preset": "parakeet-128", "layout": "mel_time"}, m.Frontend)
	assert.Equal(t, LayoutMelTime, m.Layout())
	assert.False(t, m.RawWaveform())
	assert.Equal(t, filepath.Join(dir, "model.onnx"), m.EncoderPath())
	assert.Equal(t, filepath.Join(dir, "tokens.txt"), m.VocabularyPath())
	assert.Equal(t, map[string]string{"features": "audio_signal", "lengths": "length"}, m.Encoder.Inputs)
	assert.Equal(t, map[string]string{"log_probs": "logprobs", "lengths": "encoded_lengths"}, m.Encoder.Outputs)
	assert.Equal(t, 0.04, m.FrameStride)
	require.NotNil(t, m.Vocab)
	assert.Equal(t, 5, m.Vocab.Len())

	// The manifest file itself works as well as its directory.
	m2, err := Load(filepath.Join(dir, FileName))
	require.NoError(t, err)
	assert.Equal(t, m.Name, m2.Name)

	w, err := Load(writeModel(t, w2vManifest))
	require.NoError(t, err)
	assert.True(t, w.RawWaveform())
	assert.Equal(t, "", w.Layout())
	assert.Equal(t, NormalizePerUtterance, w.Normalize)
}

func TestLoadDefaultsNormalize(t *testing.T) {
	m, err := Load(writeModel(t, strings.Replace(nemoManifest, "normalize: none\n", "", 1)))
	require.NoError(t, err)
	assert.Equal(t, NormalizeNone, m.Normalize)
}

func TestParseErrors(t *testing.T) {
	edit := func(base, old, new string) string {
		if !strings.Contains(base, old) {
			panic("test edit does not apply: " + old)
		}
		return strings.Replace(base, old, new, 1)
	}
	tests := []struct {
		name     string
		manifest string
		wantErr  []string
	}{
		{"empty", "", []string{"empty manifest"}},
		{"not yaml", "name: [", []string{"YAML"}},
		{"unknown key", nemoManifest + "colour: blue\n", []string{"field colour not found"}},
		{"unknown encoder key", edit(nemoManifest, "  file: model.onnx", "  file: model.onnx\n  path: x"), []string{"field path not found"}},
		{"wrong type", edit(nemoManifest, "sample_rate: 16000", "sample_rate: fast"), []string{"YAML", "fast"}},
		{"no name", edit(nemoManifest, "name: tiny-nemo\n", ""), []string{"name is missing"}},
		{"no rate", edit(nemoManifest, "sample_rate: 16000\n", ""), []string{"sample_rate 0 is out of range"}},
		{"negative rate", edit(nemoManifest, "sample_rate: 16000", "sample_rate: -8000"), []string{"sample_rate -8000 is out of range"}},
		{"no preset", edit(nemoManifest, "preset: parakeet-128, ", ""), []string{"frontend.preset is missing"}},
		{"bad layout", edit(nemoManifest, "layout: mel_time", "layout: sideways"), []string{"frontend.layout sideways is not mel_time or time_mel"}},
		{"bad normalize", edit(nemoManifest, "normalize: none", "normalize: loud"), []string{`normalize "loud" is not none or per_utterance`}},
		{"bad language", edit(nemoManifest, "sample_rate: 16000", "language: English\nsample_rate: 16000"), []string{`language "English" is not a lower-case ISO-639-1 or -3 code`}},
		{"per_utterance with frontend", edit(nemoManifest, "normalize: none", "normalize: per_utterance"), []string{"applies to raw-waveform models"}},
		{"no encoder file", edit(nemoManifest, "  file: model.onnx\n", ""), []string{"encoder.file is missing"}},
		{"unknown input", edit(nemoManifest, "lengths: length}", "lengths: length, mask: m}"), []string{`encoder.inputs has unknown name "mask"`}},
		{"empty onnx name", edit(nemoManifest, "lengths: length}", "lengths: ''}"), []string{"encoder.inputs.lengths has no ONNX name"}},
		{"unknown output", edit(nemoManifest, "log_probs: logprobs", "probs: logprobs"), []string{`encoder.outputs has unknown name "probs"`, "needs log_probs"}},
		{"both outputs", edit(nemoManifest, "log_probs: logprobs", "log_probs: logprobs, logits: x"), []string{"both log_probs and logits"}},
		{"features missing", edit(nemoManifest, "features: audio_signal", "pcm: audio_signal"), []string{"encoder.inputs.features is missing"}},
		{"both inputs", edit(nemoManifest, "features: audio_signal", "features: audio_signal, pcm: x"), []string{"both features and pcm"}},
		{"pcm missing", edit(w2vManifest, "pcm: input_values", "features: input_values"), []string{"encoder.inputs.pcm is missing"}},
		{"no vocabulary", edit(nemoManifest, "vocabulary: tokens.txt\n", ""), []string{"vocabulary is missing"}},
		{"negative blank", edit(nemoManifest, "blank_id: 0", "blank_id: -1"), []string{"blank_id -1 is negative"}},
		{"no stride", edit(nemoManifest, "frame_stride: 0.04\n", ""), []string{"frame_stride 0 is out of range"}},
		{"nan stride", edit(nemoManifest, "frame_stride: 0.04", "frame_stride: .nan"), []string{"frame_stride NaN is out of range"}},
		{"both delimiters", nemoManifest + "sentencepiece_marker: \"▁\"\n", []string{"both set"}},
		{"several errors at once", edit(edit(nemoManifest, "name: tiny-nemo\n", ""), "blank_id: 0", "blank_id: -3"), []string{"name is missing", "blank_id -3 is negative"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.manifest), "/m")
			require.Error(t, err)
			for _, w := range tc.wantErr {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestLoadFileErrors(t *testing.T) {
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string) string // returns the path to load
		wantErr []string
	}{
		{"no directory", func(t *testing.T, dir string) string { return filepath.Join(dir, "nope") }, []string{"nope", "does not exist"}},
		{"no manifest", func(t *testing.T, dir string) string {
			require.NoError(t, os.Remove(filepath.Join(dir, FileName)))
			return dir
		}, []string{"has no model.yaml; detecting", "not a readable ONNX model"}},
		{"no onnx", func(t *testing.T, dir string) string {
			require.NoError(t, os.Remove(filepath.Join(dir, "model.onnx")))
			return dir
		}, []string{"encoder.file", "model.onnx", "no such file"}},
		{"onnx is a directory", func(t *testing.T, dir string) string {
			require.NoError(t, os.Remove(filepath.Join(dir, "model.onnx")))
			require.NoError(t, os.Mkdir(filepath.Join(dir, "model.onnx"), 0o755))
			return dir
		}, []string{"is a directory"}},
		{"no tokens", func(t *testing.T, dir string) string {
			require.NoError(t, os.Remove(filepath.Join(dir, "tokens.txt")))
			return dir
		}, []string{"vocabulary", "tokens.txt", "no such file"}},
		{"bad tokens", func(t *testing.T, dir string) string {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "tokens.txt"), []byte("a 0\nb 7\n"), 0o644))
			return dir
		}, []string{"tokens.txt: line 2: id 7 out of range"}},
		{"blank out of range", func(t *testing.T, dir string) string {
			rewrite(t, dir, "blank_id: 0", "blank_id: 6")
			return dir
		}, []string{"blank_id 6 is out of range: the vocabulary has 5 tokens (ids 0..4, or 5 for a blank appended after them)"}},
		{"delimiter not in vocabulary", func(t *testing.T, dir string) string {
			rewrite(t, dir, `word_delimiter: "▁"`, `word_delimiter: "#"`)
			return dir
		}, []string{`word_delimiter "#" is not a token`}},
		{"marker starts no token", func(t *testing.T, dir string) string {
			rewrite(t, dir, `word_delimiter: "▁"`, `sentencepiece_marker: "@@"`)
			return dir
		}, []string{`sentencepiece_marker "@@" starts no token`}},
		{"too large", func(t *testing.T, dir string) string {
			big := nemoManifest + "# " + strings.Repeat("x", maxManifestBytes) + "\n"
			require.NoError(t, os.WriteFile(filepath.Join(dir, FileName), []byte(big), 0o644))
			return dir
		}, []string{"larger than"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := writeModel(t, nemoManifest)
			_, err := Load(tc.prepare(t, dir))
			require.Error(t, err)
			for _, w := range tc.wantErr {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestSentencePieceMarker(t *testing.T) {
	dir := writeModel(t, nemoManifest)
	rewrite(t, dir, `word_delimiter: "▁"`, `sentencepiece_marker: "▁"`)
	m, err := Load(dir)
	require.NoError(t, err)
	assert.Equal(t, "▁", m.SentencePieceMarker)
}

func TestAbsolutePaths(t *testing.T) {
	other := writeModel(t, nemoManifest)
	dir := writeModel(t, nemoManifest)
	rewrite(t, dir, "file: model.onnx", "file: "+filepath.Join(other, "model.onnx"))
	m, err := Load(dir)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(other, "model.onnx"), m.EncoderPath())
}

func rewrite(t *testing.T, dir, old, new string) {
	t.Helper()
	p := filepath.Join(dir, FileName)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.Contains(t, string(b), old)
	require.NoError(t, os.WriteFile(p, []byte(strings.Replace(string(b), old, new, 1)), 0o644))
}

// FuzzParse checks that arbitrary manifest bytes give a validated manifest or
// an error, never a panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte(nemoManifest))
	f.Add([]byte(w2vManifest))
	f.Add([]byte("name: x\nframe_stride: 1e309\n"))
	f.Add([]byte("frontend: [1, 2]\n"))
	f.Add([]byte("encoder: {inputs: {features: ~}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Parse(data, "/m")
		if err != nil {
			return
		}
		require.NotEmpty(t, m.Name)
		require.Greater(t, m.FrameStride, 0.0)
		require.NotEmpty(t, m.Encoder.File)
		require.NotEqual(t, m.RawWaveform(), m.Encoder.Inputs[InputFeatures] != "")
	})
}

// UsePrecision: int8 is model.int8.onnx beside the encoder (sherpa-onnx's
// layout) or what encoder.int8_file names; a model without one, or an
// unknown precision, is an error saying what was looked for.
func TestUsePrecision(t *testing.T) {
	dir := writeModel(t, nemoManifest)
	m, err := Load(dir)
	require.NoError(t, err)
	require.NoError(t, m.UsePrecision(PrecisionFP32))
	assert.Equal(t, "model.onnx", m.Encoder.File)
	err = m.UsePrecision(PrecisionInt8)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "has no int8 encoder")
	assert.Contains(t, err.Error(), filepath.Join(dir, Int8FileName))
	assert.Contains(t, err.Error(), "encoder.int8_file")
	assert.Equal(t, "model.onnx", m.Encoder.File, "an error leaves the manifest as it was")
	assert.ErrorContains(t, m.UsePrecision("fp16"), `precision "fp16" is not fp32 or int8`)

	require.NoError(t, os.WriteFile(filepath.Join(dir, Int8FileName), nil, 0o644))
	require.NoError(t, m.UsePrecision(PrecisionInt8))
	assert.Equal(t, Int8FileName, m.Encoder.File)
	assert.Equal(t, filepath.Join(dir, Int8FileName), m.EncoderPath())
	assert.Contains(t, m.Sources["encoder.file"], "precision int8")

	named := strings.Replace(nemoManifest, "  file: model.onnx\n", "  file: model.onnx\n  int8_file: q/enc-int8.onnx\n", 1)
	dir = writeModel(t, named)
	m, err = Load(dir)
	require.NoError(t, err)
	assert.Equal(t, "q/enc-int8.onnx", m.Encoder.Int8File)
	assert.ErrorContains(t, m.UsePrecision(PrecisionInt8), "encoder.int8_file: stat "+filepath.Join(dir, "q", "enc-int8.onnx"))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "q"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "q", "enc-int8.onnx"), nil, 0o644))
	require.NoError(t, m.UsePrecision(PrecisionInt8))
	assert.Equal(t, filepath.Join(dir, "q", "enc-int8.onnx"), m.EncoderPath())
	out, err := m.YAML()
	require.NoError(t, err)
	assert.Contains(t, string(out), "int8_file: q/enc-int8.onnx")

	// A sherpa-onnx int8 download ships only model.int8.onnx: it is both.
	m, err = Load(filepath.Join(testdata, "sherpa_int8"))
	require.NoError(t, err)
	require.NoError(t, m.UsePrecision(PrecisionInt8))
	assert.Equal(t, Int8FileName, m.Encoder.File)
}

// TestManifestLanguage: model.yaml's language is read, validated and
// rendered back by YAML (what edge models inspect shows).
func TestManifestLanguage(t *testing.T) {
	m, err := Parse([]byte(strings.Replace(nemoManifest, "sample_rate: 16000", "language: en\nsample_rate: 16000", 1)), t.TempDir())
	require.NoError(t, err)
	assert.Equal(t, "en", m.Language)
	y, err := m.YAML()
	require.NoError(t, err)
	assert.Contains(t, string(y), "language: en")
	m, err = Parse([]byte(nemoManifest), t.TempDir())
	require.NoError(t, err)
	assert.Empty(t, m.Language)
	y, err = m.YAML()
	require.NoError(t, err)
	assert.NotContains(t, string(y), "language")
}
