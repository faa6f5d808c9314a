package model

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// MaxVocabulary bounds the number of tokens a vocabulary file may hold; real
// CTC vocabularies have tens to tens of thousands of entries.
const MaxVocabulary = 1 << 20

// Vocabulary maps CTC token ids to symbols and back. Ids are dense: a
// vocabulary of n tokens has exactly the ids 0..n-1.
type Vocabulary struct {
	tokens []string
	ids    map[string]int
}

// Len is the number of tokens (the CTC output width V).
func (v *Vocabulary) Len() int { return len(v.tokens) }

// Token returns the symbol of id; ok is false when id is out of range.
func (v *Vocabulary) Token(id int) (sym string, ok bool) {
	if id < 0 || id >= len(v.tokens) {
		return "", false
	}
	return v.tokens[id], true
}

// ID returns the id of a symbol; ok is false when the symbol is unknown.
func (v *Vocabulary) ID(sym string) (id int, ok bool) {
	id, ok = v.ids[sym]
	return id, ok
}

// Tokens returns the symbols in id order; callers must not modify it.
func (v *Vocabulary) Tokens() []string { return v.tokens }

// LoadVocabulary reads a tokens.txt file (see ReadVocabulary).
func LoadVocabulary(path string) (*Vocabulary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("vocabulary: %w", err)
	}
	defer f.Close()
	v, err := ReadVocabulary(f)
	if err != nil {
		return nil, fmt.Errorf("vocabulary %s: %w", path, err)
	}
	return v, nil
}

// ReadVocabulary parses the sherpa-onnx tokens.txt format: one token per
// line, "symbol id", the id a decimal integer after the last blank. A line
// holding only blanks and an id (" 3") is the literal space token. Blank
// lines are skipped; a UTF-8 byte-order mark and CRLF line ends are accepted.
//
// The ids must be exactly 0..n-1 for the n tokens (in any order) and the
// symbols unique. Errors name the line and what was expected.
func ReadVocabulary(r io.Reader) (*Vocabulary, error) {
	sc := bufio.NewScanner(r)
	type entry struct {
		sym  string
		id   int
		line int
	}
	var entries []entry
	ids := map[string]int{}
	for line := 1; sc.Scan(); line++ {
		text := sc.Bytes()
		if line == 1 {
			text = bytes.TrimPrefix(text, []byte("\ufeff"))
		}
		s := strings.TrimRight(string(text), "\r")
		if strings.TrimSpace(s) == "" {
			continue
		}
		sym, idText, err := splitTokenLine(s)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		id, err := strconv.Atoi(idText)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("line %d: id %q is not a non-negative integer", line, idText)
		}
		if len(entries) >= MaxVocabulary {
			return nil, fmt.Errorf("line %d: more than %d tokens", line, MaxVocabulary)
		}
		if prev, dup := ids[sym]; dup {
			return nil, fmt.Errorf("line %d: symbol %q appears twice (ids %d and %d)", line, sym, prev, id)
		}
		ids[sym] = id
		entries = append(entries, entry{sym, id, line})
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if len(entries) == 0 {
		return nil, fmt.Errorf("no tokens (want lines of \"symbol id\")")
	}
	// Ids are checked against the number of lines read, never allocated from.
	tokens := make([]string, len(entries))
	seen := make([]bool, len(entries))
	for _, e := range entries {
		if e.id >= len(entries) {
			return nil, fmt.Errorf("line %d: id %d out of range: %d tokens need ids 0..%d", e.line, e.id, len(entries), len(entries)-1)
		}
		if seen[e.id] {
			return nil, fmt.Errorf("line %d: id %d given twice", e.line, e.id)
		}
		seen[e.id] = true
		tokens[e.id] = e.sym
	}
	return &Vocabulary{tokens: tokens, ids: ids}, nil
}

// splitTokenLine splits "symbol id" at the last run of blanks.
func splitTokenLine(s string) (sym, id string, err error) {
	fields := strings.Fields(s)
	switch {
	case len(fields) == 2:
		return fields[0], fields[1], nil
	case len(fields) == 1 && (s[0] == ' ' || s[0] == '\t'):
		return " ", fields[0], nil
	}
	return "", "", fmt.Errorf("want \"symbol id\", got %q", s)
}
