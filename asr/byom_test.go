package asr

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/audio"
	"github.com/edgespeech/edge/runtime/model"
	"github.com/edgespeech/edge/runtime/npy"
)

// The tiny models of each export family (models/testdata, made by
// scripts/golden/models.py on the GPU host) run as exported, with no
// model.yaml, and give their framework's log-probs: torch (transformers) for
// the fp32 graphs, onnxruntime's Python package for the int8 and fp16 ones.
const byomData = "../models/testdata"

type byomGolden struct {
	Families map[string]struct {
		Blank int `json:"blank"`
		Clips map[string]struct {
			Frames int    `json:"frames"`
			Text   string `json:"text"`
			Tokens []int  `json:"tokens"`
			Words  []struct {
				Word  string  `json:"word"`
				Start float64 `json:"start"`
				End   float64 `json:"end"`
			} `json:"words"`
		} `json:"clips"`
	} `json:"families"`
}

func loadByomGolden(t *testing.T) byomGolden {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(byomData, "golden", "golden.json"))
	require.NoError(t, err)
	var g byomGolden
	require.NoError(t, json.Unmarshal(b, &g))
	return g
}

// byomTolerance is the max |diff| allowed between edge's log-probs and the
// golden's, per family: 1e-4 for fp32 graphs against torch; the reduced
// graphs against onnxruntime on HF's features, where edge's features (max
// |diff| ~4e-5 to HF's) are rounded to fp16 or quantised on the way in.
var byomTolerance = map[string]float64{
	"w2v": 1e-4, "parakeet": 1e-4, "nemo": 1e-4, "sherpa": 1e-4,
	"sherpa_int8": 2e-2, "sherpa_fp16": 2e-2,
}

// golden family of each model directory (sherpa is the nemo model re-packed).
var byomFamily = map[string]string{"w2v": "w2v", "parakeet": "parakeet", "nemo": "nemo", "sherpa": "nemo",
	"sherpa_int8": "sherpa_int8", "sherpa_fp16": "sherpa_fp16"}

// byomClip reads golden clip's audio (16 kHz) and family fam's framework
// log-probs of it ([T', V]).
func byomClip(t *testing.T, fam, clip string) ([]float32, *runtime.Tensor) {
	t.Helper()
	pcm, err := audio.Load(filepath.Join(byomData, "..", "default", "testdata", clip+".wav"), 16000)
	require.NoError(t, err)
	gold, err := npy.ReadFile(filepath.Join(byomData, "golden", fam+"__"+clip+".npy"))
	require.NoError(t, err)
	return pcm, gold
}

func TestBringYourOwnModelParity(t *testing.T) {
	g := loadByomGolden(t)
	for _, dir := range []string{"w2v", "parakeet", "nemo", "sherpa", "sherpa_int8", "sherpa_fp16"} {
		t.Run(dir, func(t *testing.T) {
			r, err := Open(filepath.Join(byomData, dir), Options{Threads: 1})
			require.NoError(t, err)
			defer r.Close()
			fam := byomFamily[dir]
			gf := g.Families[fam]
			require.NotEmpty(t, gf.Clips, "golden family %s", fam)
			for clip, want := range gf.Clips {
				pcm, gold := byomClip(t, fam, clip)
				lp, T, err := r.Emissions(context.Background(), pcm)
				require.NoError(t, err)
				V := r.Manifest().Vocab.Len()
				require.Equal(t, []int{want.Frames, V}, []int(gold.Shape()), clip)
				require.Equal(t, want.Frames, T, "%s: frames", clip)
				require.Len(t, lp, len(gold.F32()), clip)
				d := maxAbsDiff(lp, gold.F32())
				t.Logf("%s %s: max |edge - framework| log-prob %.3g over [%d, %d]", dir, clip, d, T, V)
				assert.LessOrEqual(t, d, byomTolerance[dir], clip)
				tokens := greedyTokens(lp, V, r.Manifest().BlankID)
				assert.Equal(t, want.Tokens, tokens, "%s: greedy tokens", clip)
				tr, err := r.Transcribe(context.Background(), pcm)
				require.NoError(t, err)
				assert.Equal(t, withoutSpecials(want.Text, r.Manifest()), tr.Text, "%s: greedy text", clip)
				// Word times: the framework's forced alignment of the same
				// tokens (torchaudio) at its frame stride, within one frame.
				// The golden's words keep special tokens (edge drops them), so
				// an edge that is a special token's is not compared.
				if len(want.Words) > 0 {
					require.Len(t, tr.Words, len(want.Words), clip)
					frame := r.Manifest().FrameStride
					for i, w := range want.Words {
						assert.Equal(t, withoutSpecials(w.Word, r.Manifest()), tr.Words[i].Text, "%s word %d", clip, i)
						if !strings.HasPrefix(w.Word, "<") {
							assert.InDelta(t, w.Start, tr.Words[i].Start.Seconds(), frame, "%s word %d start", clip, i)
						}
						if !strings.HasSuffix(w.Word, ">") {
							assert.InDelta(t, w.End, tr.Words[i].End.Seconds(), frame, "%s word %d end", clip, i)
						}
					}
				}
			}
		})
	}
}

func greedyTokens(lp []float32, V, blank int) []int {
	out := []int{}
	prev := -1
	for t := 0; t < len(lp)/V; t++ {
		row := lp[t*V : (t+1)*V]
		best := 0
		for i, x := range row {
			if x > row[best] {
				best = i
			}
		}
		if best != prev && best != blank {
			out = append(out, best)
		}
		prev = best
	}
	return out
}

// withoutSpecials is a framework's decoded text with special tokens (which
// transformers 5's wav2vec2 tokenizer leaves in) removed and words rejoined.
func withoutSpecials(text string, m *model.Manifest) string {
	for id := range m.Specials() {
		s, _ := m.Vocab.Token(id)
		text = strings.ReplaceAll(text, s, "")
	}
	return strings.Join(strings.Fields(text), " ")
}

// The bundled model re-packed the sherpa-onnx way (its model.onnx with the
// normalize_type metadata sherpa-onnx needs added, and its tokens.txt; no
// model.yaml) is detected as a sherpa-onnx NeMo CTC model and gives the
// same words, with the same times, as the bundled model.
func TestSherpaRepackOfBundledModel(t *testing.T) {
	dir := t.TempDir()
	onnxBytes, err := os.ReadFile(filepath.Join(defaultModel, "model.onnx"))
	require.NoError(t, err)
	// ModelProto field 14 (metadata_props) may repeat anywhere: append one
	// entry {key: "normalize_type", value: "per_feature"}.
	entry := append([]byte{0x0a, 14}, "normalize_type"...)
	entry = append(append(entry, 0x12, 11), "per_feature"...)
	onnxBytes = append(append(onnxBytes, 14<<3|2, byte(len(entry))), entry...)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "model.onnx"), onnxBytes, 0o644))
	tokens, err := os.ReadFile(filepath.Join(defaultModel, "tokens.txt"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokens.txt"), tokens, 0o644))

	repack, err := Open(dir, Options{Threads: 1})
	require.NoError(t, err)
	defer repack.Close()
	m := repack.Manifest()
	assert.Equal(t, model.FormatSherpa, m.Format)
	assert.Equal(t, map[string]any{"preset": "parakeet-128", "layout": model.LayoutMelTime}, m.Frontend)
	assert.Equal(t, 0.02, m.FrameStride)
	assert.Equal(t, "\u2581", m.WordDelimiter)
	bundled, err := Open(defaultModel, Options{Threads: 1})
	require.NoError(t, err)
	defer bundled.Close()
	for _, clip := range []string{"demo", "words_1", "words_2"} {
		pcm, _ := loadTruth(t, clip)
		want, err := bundled.Transcribe(context.Background(), pcm)
		require.NoError(t, err)
		got, err := repack.Transcribe(context.Background(), pcm)
		require.NoError(t, err)
		assert.Equal(t, want.Text, got.Text, clip)
		assert.Equal(t, want.Words, got.Words, clip)
	}
}

// edge align encodes text with the model's own tokenizer: SentencePiece for
// the NeMo export (ids as python sentencepiece gives them), upper-case
// characters with "|" for the wav2vec2 vocabulary; letters the vocabulary
// lacks become the wildcard.
func TestAlignWithModelTokenizer(t *testing.T) {
	pcm, err := audio.Load(filepath.Join(defaultModel, "testdata", "words_1.wav"), 16000)
	require.NoError(t, err)
	for _, c := range []struct {
		dir, text string
		ids       []int
		words     []string
	}{
		// python sentencepiece: "the quick" -> ▁the ▁ q u i c k
		{"nemo", "The quick!", []int{4, 36, 61, 49, 39, 48, 58}, []string{"the", "quick"}},
		{"sherpa", "the quick", []int{4, 36, 61, 49, 39, 48, 58}, []string{"the", "quick"}},
		{"w2v", "the Quick", []int{6, 11, 5, 4, 30, 16, 10, 19, 26}, []string{"THE", "QUICK"}},
		{"w2v", "naïve", []int{9, 7, 32, 25, 5}, []string{"NA*VE"}},
	} {
		t.Run(c.dir+" "+c.text, func(t *testing.T) {
			r, err := Open(filepath.Join(byomData, c.dir), Options{Threads: 1})
			require.NoError(t, err)
			defer r.Close()
			ids, _, err := r.tokenize(c.text)
			require.NoError(t, err)
			assert.Equal(t, c.ids, ids)
			tr, err := r.Align(context.Background(), pcm, c.text)
			require.NoError(t, err)
			var words []string
			for _, w := range tr.Words {
				words = append(words, w.Text)
			}
			assert.Equal(t, c.words, words)
		})
	}
}
