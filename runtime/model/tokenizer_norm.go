package model

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// charsMap is SentencePiece's precompiled character map
// (NormalizerSpec.precompiled_charsmap, and the "Precompiled" normalizer of
// a tokenizer.json): a Darts-clone double-array trie over UTF-8 byte
// strings whose values are offsets of NUL-terminated replacements. It is
// how SentencePiece applies its nmt_nfkc, nfkc, nmt_nfkc_cf, nfkc_cf and
// user rule (.tsv) normalisations: the rule name in a model is only a label.
//
// Layout: a little-endian uint32 trie size in bytes, the trie (uint32
// units), then the replacement strings.
type charsMap struct {
	units []uint32
	repl  []byte
}

// maxCharsMapBytes bounds a precompiled charsmap (SentencePiece's nmt_nfkc
// map is about 240 kB).
const maxCharsMapBytes = 16 << 20

func parseCharsMap(b []byte) (*charsMap, error) {
	if len(b) == 0 {
		return nil, nil
	}
	if len(b) < 4 {
		return nil, fmt.Errorf("precompiled_charsmap: %d bytes, shorter than its 4-byte header", len(b))
	}
	size := binary.LittleEndian.Uint32(b)
	if uint64(size) > uint64(len(b)-4) || size%4 != 0 || size == 0 {
		return nil, fmt.Errorf("precompiled_charsmap: trie size %d does not fit the %d bytes after the header in units of 4", size, len(b)-4)
	}
	m := &charsMap{units: make([]uint32, size/4), repl: b[4+size:]}
	for i := range m.units {
		m.units[i] = binary.LittleEndian.Uint32(b[4+4*i:])
	}
	return m, nil
}

// Darts-clone unit fields.
func dartsOffset(u uint32) uint32 { return (u >> 10) << ((u & (1 << 9)) >> 6) }
func dartsHasLeaf(u uint32) bool  { return (u>>8)&1 == 1 }
func dartsLabel(u uint32) uint32  { return u & ((1 << 31) | 0xff) }
func dartsValue(u uint32) uint32  { return u & ((1 << 31) - 1) }

// longest returns the longest key that prefixes s and its replacement;
// n == 0 when none does. A corrupt trie ends the search (no match), never a
// panic.
func (m *charsMap) longest(s string) (repl string, n int) {
	units := m.units
	pos := dartsOffset(units[0])
	for i := 0; i < len(s); i++ {
		pos ^= uint32(s[i])
		if int(pos) >= len(units) {
			break
		}
		u := units[pos]
		if dartsLabel(u) != uint32(s[i]) {
			break
		}
		pos ^= dartsOffset(u)
		if int(pos) >= len(units) {
			break
		}
		if dartsHasLeaf(u) {
			off := int(dartsValue(units[pos]))
			if off >= len(m.repl) {
				break
			}
			end := off
			for end < len(m.repl) && m.repl[end] != 0 {
				end++
			}
			repl, n = string(m.repl[off:end]), i+1
		}
	}
	return repl, n
}

// prefix is SentencePiece's Normalizer::NormalizePrefix: the normalised
// form of s's first piece and the bytes it consumes. User-defined pieces
// pass through unchanged; then the longest charsmap key; else one
// character (U+FFFD for a byte that is not UTF-8).
func (t *Tokenizer) prefix(s string) (string, int) {
	for _, p := range t.userDefined {
		if strings.HasPrefix(s, p) {
			return p, len(p)
		}
	}
	if t.chars != nil {
		if r, n := t.chars.longest(s); n > 0 {
			return r, n
		}
	}
	r, n := utf8.DecodeRuneInString(s)
	if r == utf8.RuneError && n <= 1 {
		return "\uFFFD", 1
	}
	return s[:n], n
}

// spmNormalize is SentencePiece's Normalizer::Normalize: the charsmap, then
// leading, trailing and repeated spaces dropped (remove_extra_whitespaces),
// the dummy "▁" prefix (add_dummy_prefix) and spaces as "▁"
// (escape_whitespaces). Spaces are judged after the charsmap, which maps
// tabs, newlines and other spaces to " ".
func (t *Tokenizer) spmNormalize(text string) string {
	space := " "
	if t.escapeSpaces {
		space = SentencePieceMarker
	}
	if t.collapseSpaces {
		for text != "" {
			p, n := t.prefix(text)
			if p != " " {
				break
			}
			text = text[n:]
		}
	}
	if text == "" {
		return ""
	}
	var b strings.Builder
	if t.addDummyPrefix {
		b.WriteString(space)
	}
	prevSpace := t.collapseSpaces
	for text != "" {
		p, n := t.prefix(text)
		text = text[n:]
		for prevSpace && strings.HasPrefix(p, " ") {
			p = p[1:]
		}
		if p == "" {
			continue
		}
		if t.escapeSpaces {
			b.WriteString(strings.ReplaceAll(p, " ", SentencePieceMarker))
		} else {
			b.WriteString(p)
		}
		prevSpace = strings.HasSuffix(p, " ")
	}
	out := b.String()
	if t.collapseSpaces {
		for strings.HasSuffix(out, space) {
			out = out[:len(out)-len(space)]
		}
	}
	return out
}

// textNormalizer is one step of a tokenizer.json normalizer.
type textNormalizer func(string) string

// parseJSONNormalizer builds the steps of a tokenizer.json "normalizer"
// (null, one normalizer, or a Sequence). key names the JSON path for
// messages. Supported: NFC, NFD, NFKC, NFKD, Lowercase, Strip, StripAccents,
// Replace (String, or a Regex that Go's RE2 syntax accepts), Prepend,
// Precompiled and Sequence; anything else is an error naming the key and
// the type. Lowercase is Go's strings.ToLower, which differs from the Rust
// to_lowercase of tokenizers only in mapping a word-final capital sigma to
// σ rather than ς.
func parseJSONNormalizer(raw json.RawMessage, key string) ([]textNormalizer, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var n struct {
		Type        string            `json:"type"`
		Normalizers []json.RawMessage `json:"normalizers"`
		StripLeft   *bool             `json:"strip_left"`
		StripRight  *bool             `json:"strip_right"`
		Pattern     struct {
			String *string `json:"String"`
			Regex  *string `json:"Regex"`
		} `json:"pattern"`
		Content  string `json:"content"`
		Prepend  string `json:"prepend"`
		CharsMap string `json:"precompiled_charsmap"`
	}
	if err := json.Unmarshal(raw, &n); err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	switch n.Type {
	case "Sequence":
		var out []textNormalizer
		for i, sub := range n.Normalizers {
			steps, err := parseJSONNormalizer(sub, fmt.Sprintf("%s.normalizers[%d]", key, i))
			if err != nil {
				return nil, err
			}
			out = append(out, steps...)
		}
		return out, nil
	case "NFC":
		return []textNormalizer{norm.NFC.String}, nil
	case "NFD":
		return []textNormalizer{norm.NFD.String}, nil
	case "NFKC":
		return []textNormalizer{norm.NFKC.String}, nil
	case "NFKD":
		return []textNormalizer{norm.NFKD.String}, nil
	case "Lowercase":
		return []textNormalizer{strings.ToLower}, nil
	case "StripAccents":
		return []textNormalizer{func(s string) string {
			return strings.Map(func(r rune) rune {
				if unicode.Is(unicode.Mn, r) {
					return -1
				}
				return r
			}, s)
		}}, nil
	case "Strip":
		left, right := n.StripLeft == nil || *n.StripLeft, n.StripRight == nil || *n.StripRight
		return []textNormalizer{func(s string) string {
			if left {
				s = strings.TrimLeftFunc(s, unicode.IsSpace)
			}
			if right {
				s = strings.TrimRightFunc(s, unicode.IsSpace)
			}
			return s
		}}, nil
	case "Prepend":
		p := n.Prepend
		return []textNormalizer{func(s string) string {
			if s == "" {
				return s
			}
			return p + s
		}}, nil
	case "Replace":
		content := n.Content
		switch {
		case n.Pattern.String != nil:
			old := *n.Pattern.String
			if old == "" {
				return nil, fmt.Errorf("%s.pattern.String is empty", key)
			}
			return []textNormalizer{func(s string) string { return strings.ReplaceAll(s, old, content) }}, nil
		case n.Pattern.Regex != nil:
			re, err := regexp.Compile(*n.Pattern.Regex)
			if err != nil {
				return nil, fmt.Errorf("%s.pattern.Regex %q is not supported (Go RE2 syntax): %v", key, *n.Pattern.Regex, err)
			}
			return []textNormalizer{func(s string) string { return re.ReplaceAllLiteralString(s, content) }}, nil
		}
		return nil, fmt.Errorf("%s.pattern: neither String nor Regex", key)
	case "Precompiled":
		b, err := base64.StdEncoding.DecodeString(n.CharsMap)
		if err != nil {
			return nil, fmt.Errorf("%s.precompiled_charsmap: %w", key, err)
		}
		if len(b) > maxCharsMapBytes {
			return nil, fmt.Errorf("%s.precompiled_charsmap: %d bytes, more than %d", key, len(b), maxCharsMapBytes)
		}
		m, err := parseCharsMap(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", key, err)
		}
		if m == nil {
			return nil, nil
		}
		mt := &Tokenizer{chars: m}
		return []textNormalizer{func(s string) string {
			var b strings.Builder
			for s != "" {
				p, n := mt.prefix(s)
				b.WriteString(p)
				s = s[n:]
			}
			return b.String()
		}}, nil
	case "":
		return nil, fmt.Errorf("%s has no type", key)
	}
	return nil, fmt.Errorf("%s.type %q is not supported (supported: Sequence, NFC, NFD, NFKC, NFKD, Lowercase, StripAccents, Strip, Prepend, Replace, Precompiled)", key, n.Type)
}

// metaspace is the part of a tokenizer.json pre_tokenizer edge applies: the
// Metaspace replacement of spaces and its prefix (prepend_scheme "always"
// or "first", or the older add_prefix_space), found alone or in a Sequence.
type metaspace struct {
	found   bool
	prepend bool
}

func parseMetaspace(raw json.RawMessage, key string) (metaspace, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return metaspace{}, nil
	}
	var p struct {
		Type           string            `json:"type"`
		PreTokenizers  []json.RawMessage `json:"pretokenizers"`
		Replacement    *string           `json:"replacement"`
		PrependScheme  *string           `json:"prepend_scheme"`
		AddPrefixSpace *bool             `json:"add_prefix_space"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return metaspace{}, fmt.Errorf("%s: %w", key, err)
	}
	switch p.Type {
	case "Sequence":
		for i, sub := range p.PreTokenizers {
			m, err := parseMetaspace(sub, fmt.Sprintf("%s.pretokenizers[%d]", key, i))
			if err != nil || m.found {
				return m, err
			}
		}
		return metaspace{}, nil
	case "Metaspace":
		if p.Replacement != nil && *p.Replacement != SentencePieceMarker {
			return metaspace{}, fmt.Errorf("%s.replacement %q: only the SentencePiece marker \u2581 is supported", key, *p.Replacement)
		}
		m := metaspace{found: true, prepend: true}
		switch {
		case p.PrependScheme != nil:
			switch *p.PrependScheme {
			case "always", "first":
			case "never":
				m.prepend = false
			default:
				return metaspace{}, fmt.Errorf("%s.prepend_scheme %q is not supported (want always, first or never)", key, *p.PrependScheme)
			}
		case p.AddPrefixSpace != nil:
			m.prepend = *p.AddPrefixSpace
		}
		return m, nil
	}
	return metaspace{}, nil
}

// jsonNormalize is a tokenizer.json's normalizer steps, then its Metaspace
// pre-tokenizer's spaces as "▁" and "▁" prefix.
func (t *Tokenizer) jsonNormalize(text string) string {
	for _, f := range t.textNorm {
		text = f(text)
	}
	if !t.metaspace.found || text == "" {
		return text
	}
	text = strings.ReplaceAll(text, " ", SentencePieceMarker)
	if t.metaspace.prepend && !strings.HasPrefix(text, SentencePieceMarker) {
		text = SentencePieceMarker + text
	}
	return text
}

var errNoMarker = errors.New("neither pre_tokenizer nor normalizer uses the SentencePiece marker \u2581: only SentencePiece-style tokenizers are supported")
