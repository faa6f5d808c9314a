package transcript

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"
)

// Format is an output format.
type Format string

// The formats Write knows.
const (
	// Text is the transcript text and a newline.
	Text Format = "text"
	// JSON is one object: text, duration, score, words and tokens, times in
	// seconds.
	JSON Format = "json"
	// SRT is SubRip: numbered cues "HH:MM:SS,mmm --> HH:MM:SS,mmm".
	SRT Format = "srt"
	// VTT is WebVTT: a "WEBVTT" header, cues "HH:MM:SS.mmm --> HH:MM:SS.mmm",
	// text with &, < and > escaped.
	VTT Format = "vtt"
	// CTM is NIST time-marked conversation: one word per line,
	// "utterance channel start duration word confidence", seconds.
	CTM Format = "ctm"
	// TSV is "start<TAB>end<TAB>text" in integer milliseconds, one word per
	// line after a header line (whisper's TSV columns).
	TSV Format = "tsv"
)

// Formats lists every format.
func Formats() []Format { return []Format{Text, JSON, SRT, VTT, CTM, TSV} }

// ParseFormat maps a name (as in Formats; "webvtt" is accepted for vtt) to
// a Format.
func ParseFormat(s string) (Format, error) {
	if s == "webvtt" {
		return VTT, nil
	}
	for _, f := range Formats() {
		if string(f) == s {
			return f, nil
		}
	}
	return "", fmt.Errorf("unknown transcript format %q (want one of text, json, srt, vtt, ctm, tsv)", s)
}

// WriteOptions tunes the writers; zero values pick the defaults.
type WriteOptions struct {
	// Utterance and Channel are CTM's first two columns ("utt", "1").
	Utterance, Channel string
	// Subtitle cues (SRT, VTT) end before a word that would make the cue
	// longer than MaxCueChars characters (42), last longer than
	// MaxCueDuration (5 s) or follow a pause longer than MaxCueGap (1 s).
	MaxCueChars    int
	MaxCueDuration time.Duration
	MaxCueGap      time.Duration
}

func (o WriteOptions) withDefaults() WriteOptions {
	if o.Utterance == "" {
		o.Utterance = "utt"
	}
	if o.Channel == "" {
		o.Channel = "1"
	}
	if o.MaxCueChars <= 0 {
		o.MaxCueChars = 42
	}
	if o.MaxCueDuration <= 0 {
		o.MaxCueDuration = 5 * time.Second
	}
	if o.MaxCueGap <= 0 {
		o.MaxCueGap = time.Second
	}
	return o
}

// Write renders tr in format f.
func Write(w io.Writer, tr *Transcript, f Format, opt WriteOptions) error {
	bw := bufio.NewWriter(w)
	if f == Text {
		fmt.Fprintln(bw, tr.Text)
		return bw.Flush()
	}
	sw, err := NewWriter(bw, f, opt)
	if err != nil {
		return err
	}
	if err := sw.Words(tr.Words); err != nil {
		return err
	}
	if err := sw.Close(tr); err != nil {
		return err
	}
	return bw.Flush()
}

// clock renders d as HH:MM:SS<sep>mmm, rounded to the millisecond.
func clock(d time.Duration, sep byte) string {
	ms := d.Round(time.Millisecond).Milliseconds()
	return fmt.Sprintf("%02d:%02d:%02d%c%03d", ms/3600000, ms/60000%60, ms/1000%60, sep, ms%1000)
}

type cue struct {
	start, end time.Duration
	text       string
}

// cues groups words into subtitle cues (see WriteOptions).
func cues(words []Word, opt WriteOptions) []cue {
	c := cuer{opt: opt}
	var out []cue
	for _, w := range words {
		if done, ok := c.add(w); ok {
			out = append(out, done)
		}
	}
	if done, ok := c.flush(); ok {
		out = append(out, done)
	}
	return out
}

// cuer groups words into subtitle cues (see WriteOptions) as they come:
// add returns the cue a word ends, flush the last one.
type cuer struct {
	opt     WriteOptions
	cur     cue
	parts   []string
	chars   int
	prevEnd time.Duration
}

func (c *cuer) add(w Word) (done cue, ok bool) {
	n := utf8.RuneCountInString(w.Text)
	if len(c.parts) > 0 && (c.chars+1+n > c.opt.MaxCueChars || w.End-c.cur.start > c.opt.MaxCueDuration || w.Start-c.prevEnd > c.opt.MaxCueGap) {
		done, ok = c.flush()
	}
	if len(c.parts) == 0 {
		c.cur.start = w.Start
		c.chars = n
	} else {
		c.chars += 1 + n
	}
	c.parts = append(c.parts, w.Text)
	c.cur.end = w.End
	c.prevEnd = w.End
	return done, ok
}

func (c *cuer) flush() (cue, bool) {
	if len(c.parts) == 0 {
		return cue{}, false
	}
	c.cur.text = strings.Join(c.parts, " ")
	done := c.cur
	c.parts, c.chars = c.parts[:0], 0
	return done, true
}

type jsonToken struct {
	ID         int     `json:"id"`
	Text       string  `json:"text"`
	Start      float64 `json:"start"`
	End        float64 `json:"end"`
	LogProb    float64 `json:"logprob"`
	Confidence float64 `json:"confidence"`
}

type jsonWord struct {
	Word       string  `json:"word"`
	Start      float64 `json:"start"`
	End        float64 `json:"end"`
	Confidence float64 `json:"confidence"`
	Tokens     [2]int  `json:"tokens"` // [first, last) into "tokens"
}

func writeJSON(w io.Writer, tr *Transcript) error {
	doc := struct {
		Text     string      `json:"text"`
		Duration float64     `json:"duration"`
		Score    float64     `json:"score"`
		Words    []jsonWord  `json:"words"`
		Tokens   []jsonToken `json:"tokens"`
	}{Text: tr.Text, Duration: tr.Duration.Seconds(), Score: tr.Score, Words: []jsonWord{}, Tokens: []jsonToken{}}
	for _, t := range tr.Tokens {
		doc.Tokens = append(doc.Tokens, jsonToken{t.ID, t.Text, t.Start.Seconds(), t.End.Seconds(), t.LogProb, t.Confidence})
	}
	for _, wd := range tr.Words {
		doc.Words = append(doc.Words, jsonWord{wd.Text, wd.Start.Seconds(), wd.End.Seconds(), wd.Confidence, [2]int{wd.FirstToken, wd.LastToken}})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(doc)
}
