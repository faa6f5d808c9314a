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
	opt = opt.withDefaults()
	bw := bufio.NewWriter(w)
	switch f {
	case Text:
		fmt.Fprintln(bw, tr.Text)
	case JSON:
		if err := writeJSON(bw, tr); err != nil {
			return err
		}
	case SRT:
		for i, c := range cues(tr.Words, opt) {
			fmt.Fprintf(bw, "%d\n%s --> %s\n%s\n\n", i+1, clock(c.start, ','), clock(c.end, ','), c.text)
		}
	case VTT:
		bw.WriteString("WEBVTT\n\n")
		esc := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;")
		for _, c := range cues(tr.Words, opt) {
			fmt.Fprintf(bw, "%s --> %s\n%s\n\n", clock(c.start, '.'), clock(c.end, '.'), esc.Replace(c.text))
		}
	case CTM:
		for _, wd := range tr.Words {
			fmt.Fprintf(bw, "%s %s %.3f %.3f %s %.3f\n", opt.Utterance, opt.Channel, wd.Start.Seconds(),
				(wd.End - wd.Start).Seconds(), strings.Join(strings.Fields(wd.Text), "_"), wd.Confidence)
		}
	case TSV:
		bw.WriteString("start\tend\ttext\n")
		clean := strings.NewReplacer("\t", " ", "\n", " ", "\r", " ")
		for _, wd := range tr.Words {
			fmt.Fprintf(bw, "%d\t%d\t%s\n", wd.Start.Round(time.Millisecond).Milliseconds(),
				wd.End.Round(time.Millisecond).Milliseconds(), clean.Replace(wd.Text))
		}
	default:
		return fmt.Errorf("unknown transcript format %q (want one of text, json, srt, vtt, ctm, tsv)", f)
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
	var out []cue
	var cur cue
	var parts []string
	chars := 0
	for i, w := range words {
		n := utf8.RuneCountInString(w.Text)
		if len(parts) > 0 && (chars+1+n > opt.MaxCueChars || w.End-cur.start > opt.MaxCueDuration || w.Start-words[i-1].End > opt.MaxCueGap) {
			cur.text = strings.Join(parts, " ")
			out = append(out, cur)
			parts, chars = parts[:0], 0
		}
		if len(parts) == 0 {
			cur.start = w.Start
			chars = n
		} else {
			chars += 1 + n
		}
		parts = append(parts, w.Text)
		cur.end = w.End
	}
	if len(parts) > 0 {
		cur.text = strings.Join(parts, " ")
		out = append(out, cur)
	}
	return out
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
