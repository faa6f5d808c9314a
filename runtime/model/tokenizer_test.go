package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const testdata = "../../models/testdata"

// The python sentencepiece package's and tokenizers' ids of sample texts
// (scripts/golden/models.py): edge's encoders give the same ids for the
// SentencePiece BPE and unigram models, the tokenizer.json transformers
// converts the BPE model to, and the BPE model's bare tokens.txt.
func TestTokenizersMatchPython(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testdata, "golden", "tokenizers.json"))
	require.NoError(t, err)
	var g struct {
		Texts   []string
		BPE     struct{ IDs [][]int } `json:"bpe"`
		Unigram struct{ IDs [][]int } `json:"unigram"`
		TokJSON struct{ IDs [][]int } `json:"tokenizer_json"`
	}
	require.NoError(t, json.Unmarshal(b, &g))
	vocab, err := LoadVocabularyFile(filepath.Join(testdata, "sherpa", "tokens.txt"))
	require.NoError(t, err)
	load := func(p string) *Tokenizer {
		tk, err := LoadTokenizer(filepath.Join(testdata, p))
		require.NoError(t, err)
		return tk
	}
	for _, c := range []struct {
		name string
		tok  *Tokenizer
		want [][]int
		algo string
	}{
		{"sentencepiece bpe", load("nemo/a1b2c3d4e5f64789abcdef0123456789_tokenizer.model"), g.BPE.IDs, AlgoBPE},
		{"sentencepiece unigram", load("spm/unigram.model"), g.Unigram.IDs, AlgoUnigram},
		{"tokenizer.json bpe", load("parakeet/tokenizer.json"), g.TokJSON.IDs, AlgoBPE},
		{"tokens.txt in id order", TokenizerFromVocabulary(vocab, "tokens.txt"), g.BPE.IDs, AlgoBPE},
	} {
		t.Run(c.name, func(t *testing.T) {
			require.Len(t, c.want, len(g.Texts))
			assert.Equal(t, c.algo, c.tok.Algo)
			for i, text := range g.Texts {
				got := c.tok.Encode(text)
				if got == nil {
					got = []int{}
				}
				assert.Equal(t, c.want[i], got, "text %q", text)
			}
		})
	}
}

func TestTokenizerErrors(t *testing.T) {
	_, err := ParseSentencePiece([]byte{0x0a, 0x05, 0x0a})
	assert.ErrorContains(t, err, "truncated")
	_, err = ParseTokenizerJSON([]byte(`{"model": {"type": "WordPiece", "vocab": {"a": 0}}}`))
	assert.ErrorContains(t, err, `model.type "WordPiece"`)
	_, err = ParseTokenizerJSON([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0, "b": 2}, "merges": []}, "pre_tokenizer": {"replacement": "\u2581"}}`))
	assert.ErrorContains(t, err, "id 1 unused")
	_, err = ParseTokenizerJSON([]byte(`{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}}`))
	assert.ErrorContains(t, err, "SentencePiece marker")
}
