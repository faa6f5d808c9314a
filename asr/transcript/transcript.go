// Package transcript turns CTC emissions into aligned words and writes them
// as text, JSON, SRT, WebVTT, CTM or TSV.
//
// The path from a model's output to a subtitle file:
//
//	cfg := transcript.Config{Vocabulary: vocab, Blank: 0, FrameStride: 20 * time.Millisecond, WordDelimiter: "▁"}
//	tr, err := transcript.Transcribe(logProbs, len(vocab), cfg) // greedy tokens, then forced alignment
//	err = transcript.Write(os.Stdout, tr, transcript.SRT, transcript.WriteOptions{})
//
// AlignTokens does the same for a known token sequence (a reference text).
package transcript

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/edgespeech/edge/plugins/dpx"
)

// Config says how a model's tokens become words and times.
type Config struct {
	// Vocabulary maps token id to symbol (len = the emissions' C).
	Vocabulary []string
	// Blank is the CTC blank id.
	Blank int
	// FrameStride is the time between emission frames (e.g. 20 ms).
	FrameStride time.Duration
	// WordDelimiter, when set, is a token that separates words and belongs
	// to none (wav2vec2's "|", a character model's "▁").
	WordDelimiter string
	// SentencePieceMarker, when set, is the prefix of a token that starts a
	// new word (SentencePiece's "▁"); it is stripped from the word's text.
	SentencePieceMarker string
	// Special marks token ids whose symbols never join a word's text
	// (<s>, </s>, <unk>, ...); they still take part in alignment.
	Special map[int]bool
	// FrameOffset is added to every frame time (the centre of frame 0's
	// receptive field less half a frame; 0 for most models). Times stay >= 0.
	FrameOffset time.Duration
}

// frameTime is the time of frame boundary f.
func (c *Config) frameTime(f int) time.Duration {
	return max(0, time.Duration(f)*c.FrameStride+c.FrameOffset)
}

func (c *Config) validate(C int) error {
	if len(c.Vocabulary) != C {
		return fmt.Errorf("transcript: vocabulary has %d symbols; the emissions have C=%d columns", len(c.Vocabulary), C)
	}
	if c.Blank < 0 || c.Blank >= C {
		return fmt.Errorf("transcript: blank id %d is out of range for C=%d", c.Blank, C)
	}
	if c.FrameStride <= 0 {
		return fmt.Errorf("transcript: frame stride %v; want > 0", c.FrameStride)
	}
	if c.WordDelimiter == "" && c.SentencePieceMarker == "" {
		return errors.New("transcript: set a word delimiter or a SentencePiece marker to find word boundaries")
	}
	return nil
}

// Token is one aligned token.
type Token struct {
	ID   int
	Text string
	// StartFrame and EndFrame delimit its frames [StartFrame, EndFrame).
	StartFrame int
	EndFrame   int
	// Start and End are the frames' times: frame * FrameStride + FrameOffset.
	Start time.Duration
	End   time.Duration
	// LogProb is the sum of its frames' log-probs; Confidence the mean of
	// their probabilities, in [0, 1].
	LogProb    float64
	Confidence float64
}

// Word is a run of tokens between word boundaries.
type Word struct {
	Text       string
	Start, End time.Duration
	// Confidence is the mean probability over the frames of its tokens.
	Confidence float64
	// FirstToken and LastToken index Transcript.Tokens: [FirstToken, LastToken).
	FirstToken, LastToken int
}

// Transcript is an aligned transcription.
type Transcript struct {
	Text   string // words joined by single spaces
	Words  []Word
	Tokens []Token
	// Score is the alignment's total log-prob (blank frames included).
	Score float64
	// Duration is the emissions' length: T * FrameStride.
	Duration time.Duration
}

// Transcribe decodes logProbs, a row-major [T, C] log-softmax matrix: greedy
// tokens, forced alignment of those tokens, words with times and
// confidences.
func Transcribe(logProbs []float32, C int, cfg Config) (*Transcript, error) {
	if err := cfg.validate(C); err != nil {
		return nil, err
	}
	spans, err := dpx.Greedy(nil, logProbs, C, cfg.Blank)
	if err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	tokens := make([]int, len(spans))
	for i, s := range spans {
		tokens[i] = int(s.Token)
	}
	T := len(logProbs) / C
	if len(spans) == 0 || T < 2*segmentGap {
		return AlignTokens(logProbs, C, tokens, cfg)
	}
	// Forced alignment costs O(T x tokens): on long audio it is cut at the
	// middles of greedy blank runs of at least segmentGap frames (pauses),
	// where the path through the whole is all but certain to be blank too,
	// and each piece is aligned on its own, so the cost grows linearly.
	a, err := dpx.NewAligner(dpx.AlignOptions{Blank: cfg.Blank})
	if err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	labels := make([]int32, 0, T)
	var ali dpx.Alignment
	var score float64
	lo, first := 0, 0
	for i := range spans {
		hi := T
		if i+1 < len(spans) {
			if spans[i+1].Start-spans[i].End < segmentGap {
				continue
			}
			hi = int(spans[i].End+spans[i+1].Start) / 2
		}
		if err := a.Align(&ali, logProbs[lo*C:hi*C], C, tokens[first:i+1]); err != nil {
			return nil, fmt.Errorf("transcript: frames %d-%d: %w", lo, hi, err)
		}
		labels = append(labels, ali.Labels...)
		score += float64(ali.Score)
		lo, first = hi, i+1
	}
	aligned := dpx.Spans(nil, labels, cfg.Blank)
	if len(aligned) != len(tokens) {
		return nil, fmt.Errorf("transcript: alignment has %d token spans for %d tokens (a bug)", len(aligned), len(tokens))
	}
	tr, err := FromSpans(aligned, logProbs, C, cfg)
	if err != nil {
		return nil, err
	}
	tr.Score = float64(float32(score))
	return tr, nil
}

// segmentGap is the fewest frames of greedy blanks between two tokens at
// which Transcribe cuts the forced alignment (1 s at 40 ms, 0.5 s at 20 ms).
const segmentGap = 25

// AlignTokens force-aligns a known token sequence to logProbs ([T, C]) and
// builds the words. Errors name the problem (ids out of range, too few
// frames for the tokens, NaN log-probs).
func AlignTokens(logProbs []float32, C int, tokens []int, cfg Config) (*Transcript, error) {
	if err := cfg.validate(C); err != nil {
		return nil, err
	}
	ali, err := dpx.Align(logProbs, C, tokens, dpx.AlignOptions{Blank: cfg.Blank})
	if err != nil {
		return nil, fmt.Errorf("transcript: %w", err)
	}
	spans := dpx.Spans(nil, ali.Labels, cfg.Blank)
	if len(spans) != len(tokens) {
		return nil, fmt.Errorf("transcript: alignment has %d token spans for %d tokens (a bug)", len(spans), len(tokens))
	}
	tr, err := FromSpans(spans, logProbs, C, cfg)
	if err != nil {
		return nil, err
	}
	tr.Score = float64(ali.Score)
	return tr, nil
}

// FromSpans builds tokens and words from token spans (from dpx.Greedy or
// dpx.Spans of an alignment) over logProbs ([T, C]). Spans must be
// non-empty, in order, within the T frames, with ids in [0, C]; id C (the
// ctc_align star) has no symbol, log-prob or confidence (all zero) and
// joins no word. Score is left 0.
func FromSpans(spans []dpx.Span, logProbs []float32, C int, cfg Config) (*Transcript, error) {
	if err := cfg.validate(C); err != nil {
		return nil, err
	}
	if len(logProbs)%C != 0 {
		return nil, fmt.Errorf("transcript: log_probs has %d values; want a multiple of C=%d", len(logProbs), C)
	}
	T := len(logProbs) / C
	prevEnd := int32(0)
	for i, s := range spans {
		if s.Start < prevEnd || s.End <= s.Start || int(s.End) > T || s.Token < 0 || int(s.Token) > C {
			return nil, fmt.Errorf("transcript: span %d (token %d, frames [%d, %d)) is out of order, empty or out of range for T=%d frames and C=%d", i, s.Token, s.Start, s.End, T, C)
		}
		prevEnd = s.End
	}
	tr := &Transcript{Duration: time.Duration(T) * cfg.FrameStride, Tokens: make([]Token, len(spans))}
	for i, s := range spans {
		tok := Token{ID: int(s.Token), StartFrame: int(s.Start), EndFrame: int(s.End),
			Start: cfg.frameTime(int(s.Start)), End: cfg.frameTime(int(s.End))}
		if tok.ID < C {
			tok.Text = cfg.Vocabulary[tok.ID]
			var p float64
			for t := tok.StartFrame; t < tok.EndFrame; t++ {
				lp := float64(logProbs[t*C+tok.ID])
				tok.LogProb += lp
				p += math.Exp(lp)
			}
			tok.Confidence = p / float64(tok.EndFrame-tok.StartFrame)
		}
		tr.Tokens[i] = tok
	}
	tr.Words = words(tr.Tokens, cfg)
	texts := make([]string, len(tr.Words))
	for i, w := range tr.Words {
		texts[i] = w.Text
	}
	tr.Text = strings.Join(texts, " ")
	return tr, nil
}

// Words groups tokens into words as Transcribe does: at delimiter tokens
// and SentencePiece markers; special tokens join no word. FirstToken and
// LastToken index tokens.
func Words(tokens []Token, cfg Config) []Word { return words(tokens, cfg) }

// words groups tokens at delimiter tokens and SentencePiece markers.
func words(tokens []Token, cfg Config) []Word {
	var out []Word
	var text strings.Builder
	first, last := -1, -1 // tokens contributing text to the current word
	var psum float64
	var frames int
	flush := func() {
		if first >= 0 {
			out = append(out, Word{Text: text.String(), Start: tokens[first].Start, End: tokens[last].End,
				Confidence: psum / float64(frames), FirstToken: first, LastToken: last + 1})
		}
		text.Reset()
		first, last, psum, frames = -1, -1, 0, 0
	}
	for i, tok := range tokens {
		s := tok.Text
		if cfg.Special[tok.ID] {
			continue
		}
		if cfg.WordDelimiter != "" && s == cfg.WordDelimiter {
			flush()
			continue
		}
		if m := cfg.SentencePieceMarker; m != "" && strings.HasPrefix(s, m) {
			flush()
			s = strings.TrimPrefix(s, m)
		}
		if s == "" {
			continue
		}
		if first < 0 {
			first = i
		}
		last = i
		text.WriteString(s)
		n := tok.EndFrame - tok.StartFrame
		psum += tok.Confidence * float64(n)
		frames += n
	}
	flush()
	return out
}
