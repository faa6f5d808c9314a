package model

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// ArchiveSep separates a .nemo archive from a member in a path:
// "parakeet-ctc-0.6b.nemo#a1b2_tokenizer.model" names the member
// a1b2_tokenizer.model (at any depth) inside the tar archive.
const ArchiveSep = "#"

// splitArchive splits "X.nemo#member" into its archive and member.
func splitArchive(path string) (archive, member string, ok bool) {
	i := strings.LastIndex(path, ".nemo"+ArchiveSep)
	if i < 0 {
		return "", "", false
	}
	return path[:i+len(".nemo")], path[i+len(".nemo")+len(ArchiveSep):], true
}

// openFile opens a file, or a member of a .nemo archive (see ArchiveSep).
func openFile(path string) (io.ReadCloser, error) {
	archive, member, ok := splitArchive(path)
	if !ok {
		return os.Open(path)
	}
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	tr, closeAll, err := tarReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", archive, err)
	}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			closeAll()
			return nil, fmt.Errorf("%s has no member %s: %w", archive, member, os.ErrNotExist)
		}
		if err != nil {
			closeAll()
			return nil, fmt.Errorf("%s: %w", archive, err)
		}
		if h.Typeflag == tar.TypeReg && filepath.Base(h.Name) == member {
			return readCloser{tr, closeAll}, nil
		}
	}
}

type readCloser struct {
	io.Reader
	close func()
}

func (r readCloser) Close() error { r.close(); return nil }

// tarReader reads a .nemo archive: a tar file, gzip-compressed or not.
func tarReader(f *os.File) (*tar.Reader, func(), error) {
	br := bufio.NewReader(f)
	magic, _ := br.Peek(2)
	if len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, nil, err
		}
		return tar.NewReader(zr), func() { zr.Close(); f.Close() }, nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return nil, nil, err
	}
	// Uncompressed: the tar reader seeks over members it skips (the weights).
	return tar.NewReader(f), func() { f.Close() }, nil
}

// archiveMembers lists the regular files of a .nemo archive (base names).
func archiveMembers(archive string) ([]string, error) {
	f, err := os.Open(archive)
	if err != nil {
		return nil, err
	}
	tr, closeAll, err := tarReader(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", archive, err)
	}
	defer closeAll()
	var names []string
	for len(names) < 10000 {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not a readable .nemo (tar) archive: %w", archive, err)
		}
		if h.Typeflag == tar.TypeReg {
			names = append(names, filepath.Base(h.Name))
		}
	}
	return names, nil
}

// fileExists reports whether path is a regular file (archive members too).
func fileExists(path string) bool {
	if archive, member, ok := splitArchive(path); ok {
		names, err := archiveMembers(archive)
		if err != nil {
			return false
		}
		for _, n := range names {
			if n == member {
				return true
			}
		}
		return false
	}
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// maxVocabFileBytes bounds a vocabulary file (tokens.txt, vocab.json,
// tokenizer.json, SentencePiece model).
const maxVocabFileBytes = 256 << 20

// LoadVocabularyFile reads a vocabulary in any of the forms model exports
// ship: tokens.txt (sherpa-onnx "symbol id"), vocab.json (HF character CTC
// tokenizers: {"symbol": id}), tokenizer.json (HF: model.vocab plus
// added_tokens) or a SentencePiece .model (its pieces in id order).
func LoadVocabularyFile(path string) (*Vocabulary, error) {
	base := strings.ToLower(filepath.Base(path))
	if _, member, ok := splitArchive(path); ok {
		base = strings.ToLower(member)
	}
	switch {
	case strings.HasSuffix(base, ".model"):
		t, err := LoadTokenizer(path)
		if err != nil {
			return nil, fmt.Errorf("vocabulary: %w", err)
		}
		return NewVocabulary(t.Pieces())
	case strings.HasSuffix(base, ".json"):
		b, err := readLimited(path, maxVocabFileBytes)
		if err != nil {
			return nil, fmt.Errorf("vocabulary: %w", err)
		}
		v, err := ParseVocabJSON(b)
		if err != nil {
			return nil, fmt.Errorf("vocabulary %s: %w", path, err)
		}
		return v, nil
	}
	f, err := openFile(path)
	if err != nil {
		return nil, fmt.Errorf("vocabulary: %w", err)
	}
	defer f.Close()
	v, err := ReadVocabulary(io.LimitReader(f, maxVocabFileBytes))
	if err != nil {
		return nil, fmt.Errorf("vocabulary %s: %w", path, err)
	}
	return v, nil
}

// ParseVocabJSON reads a vocab.json ({"symbol": id, ...}, ids dense from 0)
// or, when the object has a "model" key, a tokenizer.json's vocabulary.
func ParseVocabJSON(b []byte) (*Vocabulary, error) {
	var probe map[string]json.RawMessage
	if err := json.Unmarshal(b, &probe); err != nil {
		return nil, fmt.Errorf("JSON: %w", err)
	}
	if _, ok := probe["model"]; ok {
		t, err := ParseTokenizerJSON(b)
		if err != nil {
			return nil, err
		}
		return NewVocabulary(t.Pieces())
	}
	if len(probe) > MaxVocabulary {
		return nil, fmt.Errorf("more than %d tokens", MaxVocabulary)
	}
	byID := make(map[int]string, len(probe))
	for sym, raw := range probe {
		var id int
		if err := json.Unmarshal(raw, &id); err != nil {
			return nil, fmt.Errorf("the value of %q is not a token id (a nested, per-language vocab.json needs a model.yaml naming one language's tokens): %v", sym, err)
		}
		if id < 0 || id >= len(probe) {
			return nil, fmt.Errorf("id %d of %q is out of range: %d tokens need ids 0..%d", id, sym, len(probe), len(probe)-1)
		}
		if prev, dup := byID[id]; dup {
			return nil, fmt.Errorf("id %d is given to %q and %q", id, prev, sym)
		}
		byID[id] = sym
	}
	tokens := make([]string, len(probe))
	for id := range tokens {
		tokens[id] = byID[id]
	}
	return NewVocabulary(tokens)
}

// NewVocabulary builds a vocabulary from symbols in id order; they must be
// unique and non-empty.
func NewVocabulary(tokens []string) (*Vocabulary, error) {
	if len(tokens) == 0 {
		return nil, errors.New("no tokens")
	}
	if len(tokens) > MaxVocabulary {
		return nil, fmt.Errorf("more than %d tokens", MaxVocabulary)
	}
	ids := make(map[string]int, len(tokens))
	for id, s := range tokens {
		if s == "" {
			return nil, fmt.Errorf("token %d is empty", id)
		}
		if prev, dup := ids[s]; dup {
			return nil, fmt.Errorf("symbol %q appears twice (ids %d and %d)", s, prev, id)
		}
		ids[s] = id
	}
	return &Vocabulary{tokens: append([]string(nil), tokens...), ids: ids}, nil
}

// withBlank appends a blank symbol ("<blk>", or "<blank>" when that is
// taken) as id Len(): NeMo's CTC heads put the blank after the tokenizer's pieces.
func (v *Vocabulary) withBlank() *Vocabulary {
	sym := "<blk>"
	for _, s := range []string{"<blk>", "<blank>", "<ctc_blank>"} {
		if _, taken := v.ids[s]; !taken {
			sym = s
			break
		}
	}
	out, _ := NewVocabulary(append(append([]string(nil), v.tokens...), sym))
	return out
}
