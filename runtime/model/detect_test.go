package model

import (
	"archive/tar"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// copyDir copies a test model directory (one level of subfolders) to a
// temporary one the test may change.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	require.NoError(t, filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	}))
	return dst
}

// AppendMetadata adds custom metadata entries to a serialised ONNX model:
// ModelProto field 14 may repeat anywhere, and a later entry wins.
func appendMetadata(model []byte, kv ...string) []byte {
	str := func(field byte, s string) []byte {
		return append(append([]byte{field<<3 | 2}, varint(uint64(len(s)))...), s...)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		entry := append(str(1, kv[i]), str(2, kv[i+1])...)
		model = append(append(append(model, 14<<3|2), varint(uint64(len(entry)))...), entry...)
	}
	return model
}

func varint(v uint64) []byte {
	var b []byte
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

func edit(t *testing.T, path string, f func(string) string) {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, []byte(f(string(b))), 0o644))
}

func TestDetectFormats(t *testing.T) {
	type want struct {
		format, file, vocab string
		frontend            map[string]any
		inputs, outputs     map[string]string
		blank               int
		v                   int
		stride, offset      float64
		delim, marker       string
		normalize           string
		tokenizer           bool
	}
	nemoIO := map[string]string{InputFeatures: "audio_signal", InputLengths: "length"}
	nemoOut := map[string]string{OutputLogProbs: "logprobs"}
	p128 := map[string]any{"preset": "parakeet-128", "layout": LayoutMelTime}
	for dir, w := range map[string]want{
		"w2v": {format: FormatHFW2V, file: "model.onnx", vocab: "vocab.json", inputs: map[string]string{InputPCM: "input_values"},
			outputs: map[string]string{OutputLogits: "logits"}, blank: 0, v: 32, stride: 0.02, offset: 0.0025, delim: "|", normalize: NormalizePerUtterance},
		"parakeet": {format: FormatHFPara, file: "onnx/model.onnx", vocab: "tokenizer.json",
			frontend: map[string]any{"preset": "parakeet-80", "layout": LayoutTimeMel},
			inputs:   map[string]string{InputFeatures: "input_features", InputAttentionMask: "attention_mask"},
			outputs:  map[string]string{OutputLogits: "logits"}, blank: 64, v: 65, stride: 0.08, marker: "\u2581", tokenizer: true},
		"nemo": {format: FormatNeMo, file: "model.onnx", vocab: "a1b2c3d4e5f64789abcdef0123456789_tokenizer.model", frontend: p128,
			inputs: nemoIO, outputs: nemoOut, blank: 64, v: 65, stride: 0.08, marker: "\u2581", tokenizer: true},
		"sherpa": {format: FormatSherpa, file: "model.onnx", vocab: "tokens.txt", frontend: p128,
			inputs: nemoIO, outputs: nemoOut, blank: 64, v: 65, stride: 0.08, marker: "\u2581", tokenizer: true},
		"sherpa_int8": {format: FormatSherpa, file: "model.int8.onnx", vocab: "tokens.txt", frontend: p128,
			inputs: nemoIO, outputs: nemoOut, blank: 64, v: 65, stride: 0.08, marker: "\u2581", tokenizer: true},
	} {
		t.Run(dir, func(t *testing.T) {
			m, err := Load(filepath.Join(testdata, dir))
			require.NoError(t, err)
			assert.Equal(t, w.format, m.Format)
			assert.Equal(t, w.file, m.Encoder.File)
			assert.Equal(t, w.vocab, m.Vocabulary)
			assert.Equal(t, w.frontend, m.Frontend)
			assert.Equal(t, w.inputs, m.Encoder.Inputs)
			assert.Equal(t, w.outputs, m.Encoder.Outputs)
			assert.Equal(t, w.blank, m.BlankID)
			assert.Equal(t, w.v, m.Vocab.Len())
			assert.InDelta(t, w.stride, m.FrameStride, 1e-12)
			assert.InDelta(t, w.offset, m.FrameOffset, 1e-12)
			assert.Equal(t, w.delim, m.WordDelimiter)
			assert.Equal(t, w.marker, m.SentencePieceMarker)
			assert.Equal(t, w.tokenizer, m.Tok != nil)
			assert.Equal(t, 16000, m.SampleRate)
			if w.normalize == "" {
				w.normalize = NormalizeNone
			}
			assert.Equal(t, w.normalize, m.Normalize)
			for _, k := range []string{"name", "sample_rate", "encoder.file", "encoder.inputs", "vocabulary", "blank_id", "frame_stride"} {
				assert.NotEmpty(t, m.Sources[k], "source of %s", k)
			}
		})
	}
}

// A model.yaml beside exported files overrides detection.
func TestManifestOverridesDetection(t *testing.T) {
	dir := copyDir(t, filepath.Join(testdata, "sherpa"))
	require.NoError(t, os.WriteFile(filepath.Join(dir, FileName), []byte(`name: mine
sample_rate: 16000
frontend: {preset: parakeet-128, layout: mel_time}
encoder: {file: model.onnx, inputs: {features: audio_signal, lengths: length}, outputs: {log_probs: logprobs}}
vocabulary: tokens.txt
blank_id: 64
frame_stride: 0.08
sentencepiece_marker: "\u2581"
`), 0o644))
	m, err := Load(dir)
	require.NoError(t, err)
	assert.Equal(t, "mine", m.Name)
	assert.Equal(t, FormatManifest, m.Format)
}

// Variants users have: the .nemo archive itself instead of extracted files,
// transformers < 5's flat preprocessor_config.json.
func TestDetectVariants(t *testing.T) {
	t.Run("nemo archive", func(t *testing.T) {
		src := filepath.Join(testdata, "nemo")
		dir := t.TempDir()
		b, err := os.ReadFile(filepath.Join(src, "model.onnx"))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, "model.onnx"), b, 0o644))
		f, err := os.Create(filepath.Join(dir, "tiny.nemo"))
		require.NoError(t, err)
		tw := tar.NewWriter(f)
		add := func(name string, data []byte) {
			require.NoError(t, tw.WriteHeader(&tar.Header{Name: "./" + name, Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}))
			_, err := tw.Write(data)
			require.NoError(t, err)
		}
		add("model_weights.ckpt", make([]byte, 4096))
		for _, n := range []string{"model_config.yaml", "a1b2c3d4e5f64789abcdef0123456789_tokenizer.model", "a1b2c3d4e5f64789abcdef0123456789_vocab.txt"} {
			b, err := os.ReadFile(filepath.Join(src, n))
			require.NoError(t, err)
			add(n, b)
		}
		require.NoError(t, tw.Close())
		require.NoError(t, f.Close())
		m, err := Load(dir)
		require.NoError(t, err)
		assert.Equal(t, FormatNeMo, m.Format)
		assert.Equal(t, "tiny.nemo#a1b2c3d4e5f64789abcdef0123456789_tokenizer.model", m.Vocabulary)
		assert.Equal(t, 65, m.Vocab.Len())
		assert.NotNil(t, m.Tok)
	})
	t.Run("nemo character model", func(t *testing.T) {
		dir := copyDir(t, filepath.Join(testdata, "nemo"))
		var chars []string
		for _, r := range " abcdefghijklmnopqrstuvwxyz'àáâãäåæçèéêëìíîïðñòóôõöøùúûüýþÿāăąćĉ" {
			chars = append(chars, fmt.Sprintf("%q", string(r)))
		}
		require.Len(t, chars, 64)
		edit(t, filepath.Join(dir, "model_config.yaml"), func(s string) string {
			i, j := strings.Index(s, "tokenizer:"), strings.Index(s, "preprocessor:")
			s = s[:i] + s[j:]
			k := strings.Index(s, "  vocabulary:")
			end := strings.Index(s[k:], "\ntarget:")
			return s[:k] + "  vocabulary: [" + strings.Join(chars, ", ") + "]" + s[k+end:]
		})
		m, err := Load(dir)
		require.NoError(t, err)
		assert.Equal(t, "model_config.yaml", m.Vocabulary)
		assert.Equal(t, " ", m.WordDelimiter)
		assert.Equal(t, 64, m.BlankID)
		assert.Nil(t, m.Tok)
		tok, _ := m.Vocab.Token(64)
		assert.Equal(t, "<blk>", tok)
	})
	t.Run("preprocessor_config.json", func(t *testing.T) {
		dir := copyDir(t, filepath.Join(testdata, "w2v"))
		require.NoError(t, os.Remove(filepath.Join(dir, "processor_config.json")))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "preprocessor_config.json"), []byte(
			`{"do_normalize": false, "feature_extractor_type": "Wav2Vec2FeatureExtractor", "feature_size": 1, "sampling_rate": 16000}`), 0o644))
		m, err := Load(dir)
		require.NoError(t, err)
		assert.Equal(t, NormalizeNone, m.Normalize)
	})
	t.Run("parakeet 128 mels, other hop", func(t *testing.T) {
		dir := copyDir(t, filepath.Join(testdata, "parakeet"))
		edit(t, filepath.Join(dir, "processor_config.json"), func(s string) string {
			return strings.Replace(s, `"hop_length": 160`, `"hop_length": 320`, 1)
		})
		m, err := Load(dir)
		require.NoError(t, err)
		assert.Equal(t, map[string]any{"preset": "parakeet-80", "layout": LayoutTimeMel, "hop_length": 320}, m.Frontend)
		assert.InDelta(t, 0.16, m.FrameStride, 1e-12)
	})
}

// Broken and ambiguous directories give errors that name the file, the key
// and the value.
func TestDetectErrors(t *testing.T) {
	for _, c := range []struct {
		name, src string
		change    func(t *testing.T, dir string)
		want      []string
	}{
		{"empty", "", nil, []string{"no model.yaml and no model export", "files seen: none"}},
		{"ambiguous", "sherpa", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"architectures": ["Wav2Vec2ForCTC"]}`), 0o644))
		}, []string{"ambiguous", "Hugging Face (config.json) and sherpa-onnx (tokens.txt)"}},
		{"nemo window", "nemo", func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, "model_config.yaml"), func(s string) string { return strings.Replace(s, "window: hann", "window: hamming", 1) })
		}, []string{"model_config.yaml", "preprocessor.window = hamming"}},
		{"nemo mel norm", "nemo", func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, "model_config.yaml"), func(s string) string {
				return strings.Replace(s, "  window: hann", "  window: hann\n  mel_norm: null", 1)
			})
		}, []string{"model_config.yaml", "preprocessor.mel_norm = <nil>"}},
		{"nemo window size", "nemo", func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, "model_config.yaml"), func(s string) string { return strings.Replace(s, "window_size: 0.025", "window_size: 0.02501", 1) })
		}, []string{"model_config.yaml", "preprocessor.window_size = 0.02501", "whole number of samples"}},
		{"nemo no tokenizer", "nemo", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "a1b2c3d4e5f64789abcdef0123456789_tokenizer.model")))
		}, []string{"tokenizer.model_path", "a1b2c3d4e5f64789abcdef0123456789_tokenizer.model is not in"}},
		{"parakeet preemphasis", "parakeet", func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, "processor_config.json"), func(s string) string { return strings.Replace(s, `"preemphasis": 0.97`, `"preemphasis": 1.5`, 1) })
		}, []string{"processor_config.json", "preemphasis = 1.5"}},
		{"parakeet extractor", "parakeet", func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, "processor_config.json"), func(s string) string {
				return strings.Replace(s, `"ParakeetFeatureExtractor"`, `"WhisperFeatureExtractor"`, 1)
			})
		}, []string{"processor_config.json", `feature_extractor_type "WhisperFeatureExtractor"`}},
		{"parakeet external data missing", "parakeet", func(t *testing.T, dir string) {
			require.NoError(t, os.Remove(filepath.Join(dir, "onnx", "model.onnx_data")))
		}, []string{"external data file", "model.onnx_data", "missing"}},
		{"hf architecture", "w2v", func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, "config.json"), func(s string) string {
				return strings.Replace(s, `"Wav2Vec2ForCTC"`, `"WhisperForConditionalGeneration"`, 1)
			})
		}, []string{"config.json architectures [WhisperForConditionalGeneration]"}},
		{"hf vocab size", "w2v", func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, "config.json"), func(s string) string { return strings.Replace(s, `"vocab_size": 32`, `"vocab_size": 40`, 1) })
		}, []string{"config.json vocab_size = 40", "vocab.json has 32 tokens"}},
		{"two onnx files", "w2v", func(t *testing.T, dir string) {
			require.NoError(t, os.Rename(filepath.Join(dir, "model.onnx"), filepath.Join(dir, "a.onnx")))
			b, _ := os.ReadFile(filepath.Join(dir, "a.onnx"))
			require.NoError(t, os.WriteFile(filepath.Join(dir, "b.onnx"), b, 0o644))
		}, []string{"cannot tell which ONNX file is the encoder: a.onnx, b.onnx"}},
		{"sherpa normalize_type", "sherpa", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model.onnx")
			b, _ := os.ReadFile(p)
			require.NoError(t, os.WriteFile(p, appendMetadata(b, "normalize_type", "all_features"), 0o644))
		}, []string{"model.onnx", `normalize_type="all_features"`}},
		{"sherpa vocab_size", "sherpa", func(t *testing.T, dir string) {
			p := filepath.Join(dir, "model.onnx")
			b, _ := os.ReadFile(p)
			require.NoError(t, os.WriteFile(p, appendMetadata(b, "vocab_size", "500"), 0o644))
		}, []string{"model.onnx", `vocab_size="500"`, "tokens.txt has 65 tokens"}},
		{"sherpa no blank", "sherpa", func(t *testing.T, dir string) {
			edit(t, filepath.Join(dir, "tokens.txt"), func(s string) string { return strings.Replace(s, "<blk> 64", "<zzz> 64", 1) })
		}, []string{"tokens.txt has no blank token"}},
		{"not onnx", "sherpa", func(t *testing.T, dir string) {
			require.NoError(t, os.WriteFile(filepath.Join(dir, "model.onnx"), []byte("not a model"), 0o644))
		}, []string{"model.onnx: not a readable ONNX model"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if c.src != "" {
				dir = copyDir(t, filepath.Join(testdata, c.src))
			}
			if c.change != nil {
				c.change(t, dir)
			}
			_, err := Load(dir)
			require.Error(t, err)
			for _, w := range c.want {
				assert.Contains(t, err.Error(), w)
			}
		})
	}
}

func TestReadONNX(t *testing.T) {
	info, err := ReadONNX(filepath.Join(testdata, "parakeet", "onnx", "model.onnx"))
	require.NoError(t, err)
	assert.Equal(t, []string{"model.onnx_data"}, info.ExternalData)
	require.Len(t, info.Inputs, 2)
	assert.Equal(t, "input_features f32 [batch_size,sequence_length,80]", info.Inputs[0].String())
	q, err := ReadONNX(filepath.Join(testdata, "sherpa_int8", "model.int8.onnx"))
	require.NoError(t, err)
	assert.Positive(t, q.QuantOps)
	assert.Equal(t, "per_feature", q.Metadata["normalize_type"])
	h, err := ReadONNX(filepath.Join(testdata, "sherpa_fp16", "model.onnx"))
	require.NoError(t, err)
	assert.Equal(t, ElemFloat16, h.Inputs[0].Elem)
}

// TestDetectLanguage: a language that Hugging Face's config.json or
// NeMo's model_config.yaml states becomes the manifest's, with its source;
// several languages or a name that is not a code leave it unknown, noted.
func TestDetectLanguage(t *testing.T) {
	hf := func(t *testing.T, value string) *Manifest {
		dir := copyDir(t, filepath.Join(testdata, "w2v"))
		edit(t, filepath.Join(dir, "config.json"), func(s string) string {
			return strings.Replace(s, "{", `{"language": `+value+`, `, 1)
		})
		m, err := Load(dir)
		require.NoError(t, err)
		return m
	}
	m := hf(t, `"EN"`)
	assert.Equal(t, "en", m.Language)
	assert.Equal(t, "config.json language", m.Sources["language"])
	assert.Equal(t, "de", hf(t, `["de"]`).Language)
	for _, v := range []string{`["en", "de"]`, `"English"`, `7`} {
		m := hf(t, v)
		assert.Empty(t, m.Language, v)
		assert.Contains(t, strings.Join(m.Notes, "\n"), "config.json language", v)
	}
	m = hf(t, `null`)
	assert.Empty(t, m.Language)

	dir := copyDir(t, filepath.Join(testdata, "nemo"))
	edit(t, filepath.Join(dir, "model_config.yaml"), func(s string) string { return "language: es\n" + s })
	m, err := Load(dir)
	require.NoError(t, err)
	assert.Equal(t, "es", m.Language)
	assert.Equal(t, "model_config.yaml language", m.Sources["language"])
	dir = copyDir(t, filepath.Join(testdata, "nemo"))
	m, err = Load(dir)
	require.NoError(t, err)
	assert.Empty(t, m.Language)
}
