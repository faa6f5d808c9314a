package model

import (
	"os"
	"path/filepath"
	"testing"
)

// Parsers of untrusted model files must not panic or allocate what a file
// claims; they return errors.

func seed(f *testing.F, paths ...string) {
	for _, p := range paths {
		if b, err := os.ReadFile(filepath.Join(testdata, p)); err == nil {
			f.Add(b)
		}
	}
}

func FuzzParseONNX(f *testing.F) {
	seed(f, "w2v/model.onnx", "sherpa_int8/model.int8.onnx")
	f.Add([]byte{0x3a, 0x02, 0x5a, 0x00})
	f.Fuzz(func(t *testing.T, b []byte) {
		info, err := ParseONNX(b)
		if err == nil && info == nil {
			t.Fatal("nil info without an error")
		}
	})
}

func FuzzParseSentencePiece(f *testing.F) {
	seed(f, "spm/unigram.model")
	f.Add([]byte{0x0a, 0x07, 0x0a, 0x01, 'a', 0x15, 0, 0, 0x80, 0xbf})
	f.Fuzz(func(t *testing.T, b []byte) {
		tk, err := ParseSentencePiece(b)
		if err == nil {
			tk.Encode("the quick brown fox")
		}
	})
}

func FuzzParseTokenizerJSON(f *testing.F) {
	f.Add([]byte(`{"model": {"type": "BPE", "vocab": {"\u2581a": 0, "b": 1}, "merges": ["\u2581 a"]}, "pre_tokenizer": {"replacement": "\u2581"}}`))
	f.Add([]byte(`{"model": {"type": "Unigram", "vocab": [["\u2581a", -1.5], ["b", -2]], "unk_id": 1}, "normalizer": {"replacement": "\u2581"}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tk, err := ParseTokenizerJSON(b)
		if err == nil {
			tk.Encode("a b ab")
		}
	})
}

func FuzzParseVocabJSON(f *testing.F) {
	seed(f, "w2v/vocab.json")
	f.Add([]byte(`{"<pad>": 0, "a": 1, "|": 2}`))
	f.Add([]byte(`{"eng": {"a": 0}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseVocabJSON(b)
	})
}

// FuzzDetectHF feeds config.json and processor_config.json contents to
// detection of an otherwise valid wav2vec2 export.
func FuzzDetectHF(f *testing.F) {
	seed(f, "w2v/config.json", "parakeet/config.json")
	f.Add([]byte(`{"architectures": ["ParakeetForCTC"], "pad_token_id": 1e9}`))
	model, err := os.ReadFile(filepath.Join(testdata, "w2v", "model.onnx"))
	if err != nil {
		f.Fatal(err)
	}
	vocab, _ := os.ReadFile(filepath.Join(testdata, "w2v", "vocab.json"))
	proc, _ := os.ReadFile(filepath.Join(testdata, "w2v", "processor_config.json"))
	f.Fuzz(func(t *testing.T, cfg []byte) {
		dir := t.TempDir()
		for name, b := range map[string][]byte{"model.onnx": model, "vocab.json": vocab, "config.json": cfg, "processor_config.json": proc} {
			if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, _ = Detect(dir)
	})
}
