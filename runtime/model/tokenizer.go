package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"unicode/utf8"

	"github.com/edgespeech/edge/runtime/model/internal/pb"
)

// SentencePieceMarker is the word-start mark of SentencePiece pieces (U+2581).
const SentencePieceMarker = "\u2581"

// Tokenizer algorithms.
const (
	AlgoBPE     = "bpe"
	AlgoUnigram = "unigram"
)

// Tokenizer encodes text into token ids the way a model's own subword
// tokenizer does: SentencePiece BPE and unigram models (.model files),
// Hugging Face tokenizer.json BPE and Unigram models, and, for a bare
// vocabulary (sherpa-onnx tokens.txt), BPE with the ids' order as merge
// priority, which is SentencePiece BPE's own order.
//
// Text is normalised as the model's own tokenizer does before it is split
// into pieces. A SentencePiece model: its precompiled character map (the
// nmt_nfkc / nfkc / *_cf rules it was trained with, NFKC via a table of
// replacements) and whitespace rules (remove_extra_whitespaces,
// add_dummy_prefix, escape_whitespaces), as SentencePiece's Normalizer.
// A tokenizer.json: its normalizer (NFKC and the other Unicode forms,
// Lowercase, Strip, Replace, Prepend, Precompiled, in Sequence), then its
// Metaspace pre-tokenizer's "▁" for spaces and prefix; a normalizer edge
// cannot reproduce is an error at load, naming the key and its type. The
// Precompiled map is applied by SentencePiece's longest-match rule, where
// tokenizers first tries each grapheme cluster of under 6 bytes whole; the
// two agree unless the map holds a key that spans grapheme clusters.
// Characters no piece covers become the unknown id (Unk), as SentencePiece
// gives them; unigram and tokenizer.json (fuse_unk) fuse runs of them.
//
// A Tokenizer is immutable after loading and safe for concurrent use.
type Tokenizer struct {
	Algo   string
	Source string // file it was read from, for messages
	pieces []string
	scores []float32 // SentencePiece scores (unigram, bpe)
	ids    map[string]int
	merges map[[2]string]int // tokenizer.json BPE: pair -> rank
	unk    int               // -1 when the model has none
	// specials are control and unknown pieces: never produced from text.
	specials       map[int]bool
	maxPiece       int // longest piece in bytes
	addDummyPrefix bool
	collapseSpaces bool
	escapeSpaces   bool
	// SentencePiece: the precompiled charsmap (nil: identity) and the
	// user-defined pieces, which the normaliser leaves as they are.
	chars       *charsMap
	userDefined []string
	// tokenizer.json: normalizer steps and the Metaspace pre-tokenizer.
	json         bool
	textNorm     []textNormalizer
	metaspace    metaspace
	fuseUnk      bool
	byteFallback bool
}

// Unk is the unknown piece's id, -1 when the model has none.
func (t *Tokenizer) Unk() int { return t.unk }

// Pieces returns the pieces in id order; callers must not modify it.
func (t *Tokenizer) Pieces() []string { return t.pieces }

// Limits on tokenizer files.
const (
	maxTokenizerBytes = 256 << 20
	maxPieceBytes     = 1 << 16
)

// LoadTokenizer reads a SentencePiece .model file or a Hugging Face
// tokenizer.json (by content: JSON starts with '{').
func LoadTokenizer(path string) (*Tokenizer, error) {
	b, err := readLimited(path, maxTokenizerBytes)
	if err != nil {
		return nil, err
	}
	var t *Tokenizer
	if first := strings.TrimLeft(string(b[:min(len(b), 64)]), " \t\r\n\ufeff"); strings.HasPrefix(first, "{") {
		t, err = ParseTokenizerJSON(b)
	} else {
		t, err = ParseSentencePiece(b)
	}
	if err != nil {
		return nil, fmt.Errorf("tokenizer %s: %w", path, err)
	}
	t.Source = path
	return t, nil
}

func readLimited(path string, limit int64) ([]byte, error) {
	f, err := openFile(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return b, nil
}

// SentencePiece piece types (ModelProto.SentencePiece.Type).
const (
	spNormal      = 1
	spUnknown     = 2
	spControl     = 3
	spUserDefined = 4
	spUnused      = 5
	spByte        = 6
)

// ParseSentencePiece parses a serialised SentencePiece ModelProto.
func ParseSentencePiece(b []byte) (*Tokenizer, error) {
	t := &Tokenizer{ids: map[string]int{}, unk: -1, specials: map[int]bool{}, addDummyPrefix: true, collapseSpaces: true,
		escapeSpaces: true}
	modelType := 1 // UNIGRAM, SentencePiece's default
	it := pb.FromBytes(b).Fields()
	var f pb.Field
	for it.Next(&f) {
		if f.Wire != pb.Bytes {
			continue
		}
		switch f.Num {
		case 1: // pieces
			piece, score, kind := "", float32(0), spNormal
			sub := f.Sub.Fields()
			var g pb.Field
			for sub.Next(&g) {
				switch {
				case g.Num == 1 && g.Wire == pb.Bytes:
					s, err := g.Sub.String(maxPieceBytes)
					if err != nil {
						return nil, err
					}
					piece = s
				case g.Num == 2 && g.Wire == pb.Fixed32:
					score = g.Float32()
				case g.Num == 3 && g.Wire == pb.Varint:
					kind = int(g.Value)
				}
			}
			if err := sub.Err(); err != nil {
				return nil, err
			}
			if err := t.add(piece, score); err != nil {
				return nil, err
			}
			id := len(t.pieces) - 1
			switch kind {
			case spUnknown:
				t.unk = id
				t.specials[id] = true
			case spControl:
				t.specials[id] = true
			case spByte:
				t.byteFallback = true
			case spUserDefined:
				t.userDefined = append(t.userDefined, piece)
			}
		case 2: // trainer_spec
			sub := f.Sub.Fields()
			var g pb.Field
			for sub.Next(&g) {
				if g.Num == 3 && g.Wire == pb.Varint {
					modelType = int(g.Value)
				}
				if g.Num == 24 && g.Wire == pb.Varint && g.Value != 0 {
					return nil, errors.New("trainer_spec.treat_whitespace_as_suffix is set: only whitespace as a prefix is supported")
				}
			}
			if err := sub.Err(); err != nil {
				return nil, err
			}
		case 3: // normalizer_spec
			sub := f.Sub.Fields()
			var g pb.Field
			for sub.Next(&g) {
				if g.Num == 2 && g.Wire == pb.Bytes {
					b, err := g.Sub.Bytes(maxCharsMapBytes)
					if err != nil {
						return nil, fmt.Errorf("normalizer_spec.precompiled_charsmap: %w", err)
					}
					if t.chars, err = parseCharsMap(b); err != nil {
						return nil, fmt.Errorf("normalizer_spec.%w", err)
					}
					continue
				}
				if g.Wire != pb.Varint {
					continue
				}
				switch g.Num {
				case 3:
					t.addDummyPrefix = g.Value != 0
				case 4:
					t.collapseSpaces = g.Value != 0
				case 5:
					t.escapeSpaces = g.Value != 0
				}
			}
			if err := sub.Err(); err != nil {
				return nil, err
			}
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	if len(t.pieces) == 0 {
		return nil, errors.New("no pieces: not a SentencePiece model")
	}
	switch modelType {
	case 1:
		t.Algo, t.fuseUnk = AlgoUnigram, true
	case 2:
		t.Algo = AlgoBPE
	default:
		return nil, fmt.Errorf("SentencePiece model type %d is not supported (want 1 unigram or 2 bpe)", modelType)
	}
	return t, nil
}

func (t *Tokenizer) add(piece string, score float32) error {
	if len(t.pieces) >= MaxVocabulary {
		return fmt.Errorf("more than %d pieces", MaxVocabulary)
	}
	if piece == "" {
		return fmt.Errorf("piece %d is empty", len(t.pieces))
	}
	if _, dup := t.ids[piece]; !dup {
		t.ids[piece] = len(t.pieces)
	}
	t.pieces = append(t.pieces, piece)
	t.scores = append(t.scores, score)
	t.maxPiece = max(t.maxPiece, len(piece))
	return nil
}

// tokenizerJSON is the part of a Hugging Face tokenizer.json edge reads.
type tokenizerJSON struct {
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Model struct {
		Type        string          `json:"type"`
		Vocab       json.RawMessage `json:"vocab"`
		Merges      json.RawMessage `json:"merges"`
		UnkToken    *string         `json:"unk_token"`
		UnkID       *int            `json:"unk_id"`
		FuseUnk     bool            `json:"fuse_unk"`
		ByteFallbck bool            `json:"byte_fallback"`
		Prefix      *string         `json:"continuing_subword_prefix"`
	} `json:"model"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Normalizer   json.RawMessage `json:"normalizer"`
}

// ParseTokenizerJSON reads a Hugging Face tokenizer.json holding a BPE or
// Unigram model (the form transformers converts SentencePiece models to).
func ParseTokenizerJSON(b []byte) (*Tokenizer, error) {
	var j tokenizerJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("JSON: %w", err)
	}
	vocab, err := jsonVocab(j.Model.Type, j.Model.Vocab)
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{ids: map[string]int{}, unk: -1, specials: map[int]bool{}, json: true,
		fuseUnk: j.Model.FuseUnk, byteFallback: j.Model.ByteFallbck}
	if t.textNorm, err = parseJSONNormalizer(j.Normalizer, "normalizer"); err != nil {
		return nil, err
	}
	if t.metaspace, err = parseMetaspace(j.PreTokenizer, "pre_tokenizer"); err != nil {
		return nil, err
	}
	for _, a := range j.AddedTokens {
		if a.ID < 0 || a.ID >= MaxVocabulary {
			return nil, fmt.Errorf("added_tokens: id %d of %q is out of range", a.ID, a.Content)
		}
		if _, ok := vocab.byID[a.ID]; !ok {
			vocab.byID[a.ID] = vocabEntry{piece: a.Content}
		}
		if a.Special {
			e := vocab.byID[a.ID]
			e.special = true
			vocab.byID[a.ID] = e
		}
	}
	n := len(vocab.byID)
	for id := range n {
		e, ok := vocab.byID[id]
		if !ok {
			return nil, fmt.Errorf("model.vocab and added_tokens leave id %d unused: %d tokens need ids 0..%d", id, n, n-1)
		}
		if err := t.add(e.piece, e.score); err != nil {
			return nil, err
		}
		if e.special {
			t.specials[id] = true
		}
	}
	switch j.Model.Type {
	case "BPE":
		t.Algo = AlgoBPE
		if j.Model.Prefix != nil && *j.Model.Prefix != "" {
			return nil, fmt.Errorf("model.continuing_subword_prefix %q: only SentencePiece-style BPE (no prefix) is supported", *j.Model.Prefix)
		}
		if t.merges, err = jsonMerges(j.Model.Merges); err != nil {
			return nil, err
		}
		if j.Model.UnkToken != nil {
			if id, ok := t.ids[*j.Model.UnkToken]; ok {
				t.unk = id
			}
		}
	case "Unigram":
		t.Algo, t.fuseUnk = AlgoUnigram, true
		if j.Model.UnkID != nil && *j.Model.UnkID >= 0 && *j.Model.UnkID < len(t.pieces) {
			t.unk = *j.Model.UnkID
		}
	}
	if t.unk >= 0 {
		t.specials[t.unk] = true
	}
	if !t.metaspace.found && !strings.Contains(string(j.Normalizer), "\u2581") &&
		!strings.Contains(string(j.Normalizer), `\u2581`) {
		return nil, errNoMarker
	}
	return t, nil
}

type vocabEntry struct {
	piece   string
	score   float32
	special bool
}

type jsonVocabMap struct{ byID map[int]vocabEntry }

func jsonVocab(kind string, raw json.RawMessage) (*jsonVocabMap, error) {
	v := &jsonVocabMap{byID: map[int]vocabEntry{}}
	switch kind {
	case "BPE", "WordPiece", "WordLevel":
		var m map[string]int
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, fmt.Errorf("model.vocab: %w", err)
		}
		if kind != "BPE" {
			return nil, fmt.Errorf("model.type %q: only BPE and Unigram (SentencePiece-style) tokenizers are supported", kind)
		}
		for p, id := range m {
			if id < 0 || id >= MaxVocabulary {
				return nil, fmt.Errorf("model.vocab: id %d of %q is out of range", id, p)
			}
			if prev, dup := v.byID[id]; dup {
				return nil, fmt.Errorf("model.vocab: id %d is given to %q and %q", id, prev.piece, p)
			}
			v.byID[id] = vocabEntry{piece: p}
		}
	case "Unigram":
		var list [][2]json.RawMessage
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("model.vocab: %w", err)
		}
		for id, e := range list {
			var p string
			var score float64
			if err := json.Unmarshal(e[0], &p); err != nil {
				return nil, fmt.Errorf("model.vocab[%d]: %w", id, err)
			}
			if err := json.Unmarshal(e[1], &score); err != nil {
				return nil, fmt.Errorf("model.vocab[%d]: %w", id, err)
			}
			v.byID[id] = vocabEntry{piece: p, score: float32(score)}
		}
	default:
		return nil, fmt.Errorf("model.type %q: only BPE and Unigram (SentencePiece-style) tokenizers are supported", kind)
	}
	return v, nil
}

// jsonMerges reads merges as ["a b", ...] (tokenizers < 0.20) or [["a","b"], ...].
func jsonMerges(raw json.RawMessage) (map[[2]string]int, error) {
	out := map[[2]string]int{}
	if len(raw) == 0 {
		return out, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("model.merges: %w", err)
	}
	for i, e := range list {
		var pair [2]string
		var s string
		if err := json.Unmarshal(e, &s); err == nil {
			a, b, ok := strings.Cut(s, " ")
			if !ok {
				return nil, fmt.Errorf("model.merges[%d] %q is not \"a b\"", i, s)
			}
			pair = [2]string{a, b}
		} else if err := json.Unmarshal(e, &pair); err != nil {
			return nil, fmt.Errorf("model.merges[%d]: %w", i, err)
		}
		if _, dup := out[pair]; !dup {
			out[pair] = i
		}
	}
	return out, nil
}

// TokenizerFromVocabulary is BPE over a vocabulary's symbols with the ids'
// order as merge priority (a lower id merges first), the order SentencePiece
// BPE gives its pieces; symbols of the form <...> are special.
func TokenizerFromVocabulary(v *Vocabulary, source string) *Tokenizer {
	t := &Tokenizer{Algo: AlgoBPE, Source: source, ids: map[string]int{}, unk: -1, specials: map[int]bool{},
		addDummyPrefix: true, collapseSpaces: true, escapeSpaces: true}
	for id, s := range v.Tokens() {
		_ = t.add(s, float32(-id))
		if IsSpecialToken(s) {
			t.specials[id] = true
			if s == "<unk>" {
				t.unk = id
			}
		}
	}
	return t
}

// IsSpecialToken reports whether a symbol has the form of a special token,
// <...> (<pad>, <s>, </s>, <unk>, <blk>, <|endoftext|>): such symbols never
// appear in output text.
func IsSpecialToken(s string) bool {
	return len(s) > 2 && strings.HasPrefix(s, "<") && strings.HasSuffix(s, ">")
}

// normalize is the text the pieces are found in (see Tokenizer).
func (t *Tokenizer) normalize(text string) string {
	if t.json {
		return t.jsonNormalize(text)
	}
	return t.spmNormalize(text)
}

// Encode returns the ids of text's pieces; pieces the model cannot form are
// Unk (or, without an unknown piece, -1).
func (t *Tokenizer) Encode(text string) []int {
	s := t.normalize(text)
	if s == "" {
		return nil
	}
	var ids []int
	if t.Algo == AlgoUnigram {
		ids = t.unigram(s)
	} else if t.merges != nil {
		// tokenizer.json: Metaspace splits before each marker; BPE per word.
		for _, w := range splitBeforeMarker(s) {
			ids = append(ids, t.bpe(w)...)
		}
	} else {
		ids = t.bpe(s)
	}
	if t.fuseUnk {
		out := ids[:0]
		for i, id := range ids {
			if id == t.unk && i > 0 && ids[i-1] == t.unk {
				continue
			}
			out = append(out, id)
		}
		ids = out
	}
	return ids
}

func splitBeforeMarker(s string) []string {
	var out []string
	start := 0
	for i := range s {
		if i > start && strings.HasPrefix(s[i:], SentencePieceMarker) {
			out = append(out, s[start:i])
			start = i
		}
	}
	return append(out, s[start:])
}

// bpe merges adjacent symbols, best pair first (highest score of the merged
// piece for SentencePiece, lowest merge rank for tokenizer.json; ties to
// the leftmost), until no pair merges.
func (t *Tokenizer) bpe(s string) []int {
	var syms []string
	for _, r := range s {
		syms = append(syms, string(r))
	}
	for len(syms) > 1 {
		best, bestScore := -1, float32(math.Inf(-1))
		for i := 0; i+1 < len(syms); i++ {
			score, ok := t.pairScore(syms[i], syms[i+1])
			if ok && score > bestScore {
				best, bestScore = i, score
			}
		}
		if best < 0 {
			break
		}
		syms[best] += syms[best+1]
		syms = append(syms[:best+1], syms[best+2:]...)
	}
	ids := make([]int, 0, len(syms))
	for _, p := range syms {
		ids = append(ids, t.pieceIDs(p)...)
	}
	return ids
}

func (t *Tokenizer) pairScore(a, b string) (float32, bool) {
	if t.merges != nil {
		r, ok := t.merges[[2]string{a, b}]
		return float32(-r), ok
	}
	id, ok := t.ids[a+b]
	if !ok || t.specials[id] {
		return 0, false
	}
	return t.scores[id], true
}

// pieceIDs maps a final symbol to its id, byte pieces (<0xXX>) with byte
// fallback, or the unknown id.
func (t *Tokenizer) pieceIDs(p string) []int {
	if id, ok := t.ids[p]; ok && !t.specials[id] {
		return []int{id}
	}
	if t.byteFallback {
		var ids []int
		for i := 0; i < len(p); i++ {
			id, ok := t.ids[fmt.Sprintf("<0x%02X>", p[i])]
			if !ok {
				return []int{t.unk}
			}
			ids = append(ids, id)
		}
		return ids
	}
	return []int{t.unk}
}

// unigram is SentencePiece's Viterbi segmentation: the path of pieces with
// the highest total score; a character no piece starts gets the unknown
// piece at min score - 10.
func (t *Tokenizer) unigram(s string) []int {
	minScore := float32(math.Inf(1))
	for id, sc := range t.scores {
		if !t.specials[id] {
			minScore = min(minScore, sc)
		}
	}
	unkScore := minScore - 10
	n := len(s)
	best := make([]float32, n+1)
	from := make([]int, n+1) // start byte of the piece ending here
	piece := make([]int, n+1)
	for i := 1; i <= n; i++ {
		best[i] = float32(math.Inf(-1))
	}
	for i := 0; i < n; i++ {
		if math.IsInf(float64(best[i]), -1) || !utf8.RuneStart(s[i]) {
			continue
		}
		_, size := utf8.DecodeRuneInString(s[i:])
		single := false
		for j := i + 1; j <= min(n, i+t.maxPiece); j++ {
			id, ok := t.ids[s[i:j]]
			if !ok || t.specials[id] {
				continue
			}
			if j-i == size {
				single = true
			}
			if sc := best[i] + t.scores[id]; sc > best[j] {
				best[j], from[j], piece[j] = sc, i, id
			}
		}
		if !single {
			if sc := best[i] + unkScore; sc > best[i+size] {
				best[i+size], from[i+size], piece[i+size] = sc, i, t.unk
			}
		}
	}
	var rev []int
	for j := n; j > 0; j = from[j] {
		rev = append(rev, piece[j])
	}
	ids := make([]int, len(rev))
	for i, id := range rev {
		ids[len(rev)-1-i] = id
	}
	return ids
}
