package asr

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/edgespeech/edge/asr/transcript"
)

// Wildcard is the symbol reported for text the model cannot emit (letters
// outside its vocabulary): during alignment such a run of letters becomes
// one extra "star" column whose log-probability is 0 on every frame, so it
// absorbs whatever audio the unknown letters take, as in torchaudio's
// forced-alignment recipe for out-of-vocabulary text.
const Wildcard = "*"

// TooShortError says the audio has too few encoder frames for the text:
// CTC needs one frame per token plus one blank between repeated tokens.
type TooShortError struct {
	Audio   time.Duration
	Frames  int
	Tokens  int
	Repeats int
}

func (e *TooShortError) Error() string {
	return fmt.Sprintf("audio too short for the text: %v of audio gives %d frames, the text needs at least %d (%d tokens + %d repeated adjacent tokens)",
		e.Audio.Round(time.Millisecond), e.Frames, e.Tokens+e.Repeats, e.Tokens, e.Repeats)
}

// tokenize turns text into the model's token ids: Normalize (in the
// vocabulary's letter case), then the model's own subword tokenizer when it
// has one (SentencePiece, tokenizer.json), else every letter its
// vocabulary id with the word delimiter between words. Every run of text
// the vocabulary lacks becomes one wildcard id (== V).
func (r *Recognizer) tokenize(text string) (ids []int, stars int, err error) {
	m := r.manifest
	words := strings.Fields(Normalize(text))
	switch vocabularyCase(m.Vocab.Tokens(), m.Specials()) {
	case upperCase:
		for i, w := range words {
			words[i] = strings.ToUpper(w)
		}
	case mixedCase: // a cased vocabulary: keep the text's own case
		words = strings.Fields(strings.Join(normalizeKeepCase(text), " "))
	}
	star := m.Vocab.Len()
	specials := m.Specials()
	push := func(id int) {
		if id < 0 || id >= star || id == m.BlankID || specials[id] {
			if len(ids) > 0 && ids[len(ids)-1] == star {
				return
			}
			id = star
			stars++
		}
		ids = append(ids, id)
	}
	if m.Tok != nil {
		for _, id := range m.Tok.Encode(strings.Join(words, " ")) {
			push(id)
		}
	} else {
		if m.WordDelimiter == "" {
			return nil, 0, fmt.Errorf("model %s has no word delimiter token and no subword tokenizer: cannot encode text", m.Name)
		}
		delim, ok := m.Vocab.ID(m.WordDelimiter)
		if !ok {
			return nil, 0, fmt.Errorf("model %s: word delimiter %q is not in the vocabulary", m.Name, m.WordDelimiter)
		}
		for i, word := range words {
			if i > 0 {
				ids = append(ids, delim)
			}
			for _, c := range word {
				id, ok := m.Vocab.ID(string(c))
				if !ok {
					id = -1
				}
				push(id)
			}
		}
	}
	if len(ids) == 0 {
		return nil, 0, fmt.Errorf("the text %q has no words to align", text)
	}
	return ids, stars, nil
}

type letterCase int

const (
	lowerCase letterCase = iota
	upperCase
	mixedCase
)

// vocabularyCase says whether a vocabulary's letters are lower case (or
// caseless), upper case (wav2vec2's), or both (a cased model).
func vocabularyCase(tokens []string, specials map[int]bool) letterCase {
	var lower, upper bool
	for id, s := range tokens {
		if specials[id] {
			continue
		}
		for _, c := range s {
			lower = lower || unicode.IsLower(c)
			upper = upper || unicode.IsUpper(c)
		}
	}
	switch {
	case lower && upper:
		return mixedCase
	case upper:
		return upperCase
	}
	return lowerCase
}

// Align force-aligns text to pcm (mono, at the model's sample rate) and
// returns its words with times. The text is normalised as the model's
// training text was (Normalize); letters outside the vocabulary align to
// the wildcard. Audio with too few frames for the text gives a
// *TooShortError.
func (r *Recognizer) Align(ctx context.Context, pcm []float32, text string) (*transcript.Transcript, error) {
	ids, stars, err := r.tokenize(text)
	if err != nil {
		return nil, err
	}
	c := r.begin(ctx, pcm)
	defer r.end(c)
	if r.dec != nil {
		return r.decodeOnDevice(ctx, c, pcm, ids, stars)
	}
	lp, T, err := r.hostEmissions(ctx, c, pcm)
	if err != nil {
		return nil, err
	}
	if err := checkFrames(c, T, ids); err != nil {
		return nil, err
	}
	t0 := time.Now()
	defer func() { c.stats.Stages["decode"] = time.Since(t0) }()
	V, cfg := r.manifest.Vocab.Len(), r.words
	if stars > 0 {
		lp, V = withWildcard(lp, V)
		cfg.Vocabulary = append(append([]string(nil), cfg.Vocabulary...), Wildcard)
	}
	return transcript.AlignTokens(lp, V, ids, cfg)
}

// checkFrames gives a *TooShortError when T frames cannot hold ids.
func checkFrames(c *call, T int, ids []int) error {
	repeats := 0
	for i := 1; i < len(ids); i++ {
		if ids[i] == ids[i-1] {
			repeats++
		}
	}
	if T < len(ids)+repeats {
		return &TooShortError{Audio: c.stats.Audio, Frames: T, Tokens: len(ids), Repeats: repeats}
	}
	return nil
}

// withWildcard appends a column of log-probability 0 to row-major [T, V]
// log-probs.
func withWildcard(lp []float32, V int) ([]float32, int) {
	T := len(lp) / V
	out := make([]float32, 0, T*(V+1))
	for t := range T {
		out = append(out, lp[t*V:(t+1)*V]...)
		out = append(out, 0)
	}
	return out, V + 1
}
