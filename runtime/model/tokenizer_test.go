package model

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/text/unicode/norm"
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

// Texts whose NFKC (and SentencePiece nmt_nfkc) form is documented: the
// nmt_nfkc BPE model and its tokenizer.json conversion encode each raw
// text as they encode its normalised form, whose ids the python packages
// gave (tokenizers.json); the identity-normalised unigram model leaves the
// compatibility characters alone. When scripts/golden/tokenizer_nfkc.py
// has added the packages' own ids of the raw texts, those must match too.
func TestTokenizerNormalizerNFKC(t *testing.T) {
	var g struct {
		Texts []struct {
			Raw        string
			Normalized string
			Rule       string
		}
		BPE     *struct{ IDs [][]int } `json:"bpe"`
		Unigram *struct{ IDs [][]int } `json:"unigram"`
		TokJSON *struct{ IDs [][]int } `json:"tokenizer_json"`
	}
	b, err := os.ReadFile(filepath.Join(testdata, "golden", "tokenizers_nfkc.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &g))
	var py struct {
		Texts []string
		BPE   struct{ IDs [][]int } `json:"bpe"`
	}
	b, err = os.ReadFile(filepath.Join(testdata, "golden", "tokenizers.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &py))
	pyIDs := map[string][]int{}
	for i, s := range py.Texts {
		pyIDs[s] = py.BPE.IDs[i]
	}
	load := func(p string) *Tokenizer {
		tk, err := LoadTokenizer(filepath.Join(testdata, p))
		require.NoError(t, err)
		return tk
	}
	bpe := load("nemo/a1b2c3d4e5f64789abcdef0123456789_tokenizer.model")
	tj := load("parakeet/tokenizer.json")
	uni := load("spm/unigram.model")
	require.NotNil(t, bpe.chars, "the nmt_nfkc model has a precompiled charsmap")
	require.Nil(t, uni.chars, "the identity model has none")
	matched := 0
	for i, c := range g.Texts {
		if c.Rule == "nfkc" {
			// The documented forms are Unicode's own: x/text agrees, up to
			// the whitespace SentencePiece drops.
			assert.Equal(t, c.Normalized, strings.TrimSpace(norm.NFKC.String(c.Raw)), "NFKC of %q", c.Raw)
		}
		want := bpe.Encode(c.Normalized)
		if ids, ok := pyIDs[c.Normalized]; ok {
			assert.Equal(t, ids, want, "python ids of %q", c.Normalized)
			matched++
		}
		assert.Equal(t, want, bpe.Encode(c.Raw), "bpe %q", c.Raw)
		assert.Equal(t, want, tj.Encode(c.Raw), "tokenizer.json %q", c.Raw)
		assert.Equal(t, strings.ReplaceAll(" "+c.Normalized, " ", SentencePieceMarker), bpe.normalize(c.Raw), "bpe normalised %q", c.Raw)
		if c.Raw != c.Normalized && c.Rule == "nfkc" && !strings.Contains(c.Raw, "\u0301") && !strings.Contains(c.Raw, "\u0308") {
			assert.NotEqual(t, uni.Encode(c.Normalized), uni.Encode(c.Raw), "identity unigram %q", c.Raw)
		}
		for _, py := range []struct {
			name string
			tok  *Tokenizer
			ids  *struct{ IDs [][]int }
		}{{"bpe", bpe, g.BPE}, {"unigram", uni, g.Unigram}, {"tokenizer.json", tj, g.TokJSON}} {
			if py.ids != nil {
				require.Len(t, py.ids.IDs, len(g.Texts))
				assert.Equal(t, py.ids.IDs[i], orEmpty(py.tok.Encode(c.Raw)), "%s: python ids of %q", py.name, c.Raw)
			}
		}
	}
	assert.GreaterOrEqual(t, matched, 5, "texts whose normalised form has python ids")
}

func orEmpty(ids []int) []int {
	if ids == nil {
		return []int{}
	}
	return ids
}

// tokenizer.json normalizers other than Precompiled: a Sequence of NFKC and
// Lowercase in place of the converted model's Precompiled map.
func TestTokenizerJSONNormalizers(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(testdata, "parakeet", "tokenizer.json"))
	require.NoError(t, err)
	var j map[string]any
	require.NoError(t, json.Unmarshal(b, &j))
	with := func(normalizer string) (*Tokenizer, error) {
		var n any
		require.NoError(t, json.Unmarshal([]byte(normalizer), &n))
		j["normalizer"] = n
		b, err := json.Marshal(j)
		require.NoError(t, err)
		return ParseTokenizerJSON(b)
	}
	ref, err := ParseTokenizerJSON(b)
	require.NoError(t, err)
	tk, err := with(`{"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"},
		{"type": "Strip", "strip_left": true, "strip_right": true}, {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": " "},
		{"type": "Replace", "pattern": {"String": "ß"}, "content": "ss"}]}`)
	require.NoError(t, err)
	assert.Equal(t, ref.Encode("hello world fine"), tk.Encode("  ＨＥＬＬＯ   World \ufb01ne "))
	assert.Equal(t, ref.Encode("a ss"), tk.Encode("A ß"))
	tk, err = with(`{"type": "NFD"}`)
	require.NoError(t, err)
	assert.Equal(t, "\u2581cafe\u0301", tk.normalize("café"))
	tk, err = with(`{"type": "Sequence", "normalizers": [{"type": "NFD"}, {"type": "StripAccents"}, {"type": "NFC"}]}`)
	require.NoError(t, err)
	assert.Equal(t, "\u2581cafe", tk.normalize("café"))
	tk, err = with(`{"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"}, {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}`)
	require.NoError(t, err)
	assert.Equal(t, "\u2581hello\u2581world", tk.normalize("hello world"), "Prepend then Metaspace adds one marker")
	tk, err = with(`null`)
	require.NoError(t, err)
	assert.Equal(t, "\u2581ｈｅｌｌｏ", tk.normalize("ｈｅｌｌｏ"))

	for _, c := range []struct{ normalizer, want string }{
		{`{"type": "BertNormalizer", "lowercase": true}`, `normalizer.type "BertNormalizer" is not supported`},
		{`{"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Nmt"}]}`, `normalizer.normalizers[1].type "Nmt" is not supported`},
		{`{"type": "Replace", "pattern": {"Regex": "(?<=a)b"}, "content": ""}`, `normalizer.pattern.Regex "(?<=a)b" is not supported`},
		{`{"type": "Replace", "content": "x"}`, `normalizer.pattern: neither String nor Regex`},
		{`{"type": "Precompiled", "precompiled_charsmap": "AAAA"}`, `normalizer: precompiled_charsmap: 3 bytes`},
		{`{"type": "Precompiled", "precompiled_charsmap": "/////wAAAAA="}`, `normalizer: precompiled_charsmap: trie size 4294967295`},
		{`{"lowercase": true}`, `normalizer has no type`},
	} {
		_, err := with(c.normalizer)
		assert.ErrorContains(t, err, c.want, c.normalizer)
	}

	// LoadTokenizer names the file.
	var n any
	require.NoError(t, json.Unmarshal([]byte(`{"type": "BertNormalizer"}`), &n))
	j["normalizer"] = n
	b, err = json.Marshal(j)
	require.NoError(t, err)
	p := filepath.Join(t.TempDir(), "tokenizer.json")
	require.NoError(t, os.WriteFile(p, b, 0o644))
	_, err = LoadTokenizer(p)
	assert.ErrorContains(t, err, p)
	assert.ErrorContains(t, err, `normalizer.type "BertNormalizer"`)
}

// A corrupt precompiled charsmap never panics: lookups that leave the trie
// end the match.
func TestCharsMapCorrupt(t *testing.T) {
	b := []byte{8, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, 0x41, 0x01, 0, 0, 'x', 0}
	m, err := parseCharsMap(b)
	require.NoError(t, err)
	tk := &Tokenizer{chars: m}
	for _, s := range []string{"abc", "\xff\xfe", "A", ""} {
		if s == "" {
			continue
		}
		p, n := tk.prefix(s)
		assert.Positive(t, n)
		assert.NotEmpty(t, p)
	}
}
