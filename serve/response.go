package serve

import (
	"bytes"
	"compress/zlib"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/edgespeech/edge/asr/transcript"
)

// Response formats (the response_format field).
const (
	formatJSON        = "json"         // OpenAI: {"text"}; alignments: edge's transcript JSON
	formatText        = "text"         // the text and a newline
	formatSRT         = "srt"          // SubRip cues
	formatVTT         = "vtt"          // WebVTT cues
	formatVerboseJSON = "verbose_json" // OpenAI's verbose_json plus confidences
	formatCTM         = "ctm"          // edge: NIST CTM, one word a line
	formatTSV         = "tsv"          // edge: start/end ms and word
)

var formats = []string{formatJSON, formatText, formatSRT, formatVTT, formatVerboseJSON, formatCTM, formatTSV}

// verbose is OpenAI's verbose_json transcription with edge's confidences
// (mean frame probability of the tokens, in [0, 1]) on segments and words,
// and the model's name.
type verbose struct {
	Task     string        `json:"task"`
	Language string        `json:"language"`
	Duration float64       `json:"duration"` // seconds
	Text     string        `json:"text"`
	Segments []segmentJSON `json:"segments,omitempty"`
	Words    []wordJSON    `json:"words,omitempty"`
	Usage    usageJSON     `json:"usage"`
	Model    string        `json:"model"`
}

type usageJSON struct {
	Type    string  `json:"type"` // "duration"
	Seconds float64 `json:"seconds"`
}

// segmentJSON is OpenAI's TranscriptionSegment. Segments are the subtitle
// cues of the srt and vtt formats. Fields Whisper's decoder has and a CTC
// model does not: temperature is 0 (greedy decoding), no_speech_prob 0.
// avg_logprob is the mean over the segment's tokens of their mean frame
// log-probability; tokens are the model's token ids.
type segmentJSON struct {
	ID               int     `json:"id"`
	Seek             int     `json:"seek"` // start in 10 ms units
	Start            float64 `json:"start"`
	End              float64 `json:"end"`
	Text             string  `json:"text"`
	Tokens           []int   `json:"tokens"`
	Temperature      float64 `json:"temperature"`
	AvgLogprob       float64 `json:"avg_logprob"`
	CompressionRatio float64 `json:"compression_ratio"`
	NoSpeechProb     float64 `json:"no_speech_prob"`
	Confidence       float64 `json:"confidence"`
}

type wordJSON struct {
	Word       string  `json:"word"`
	Start      float64 `json:"start"`
	End        float64 `json:"end"`
	Confidence float64 `json:"confidence"`
}

// render writes tr, recognised from audio of the given duration, in format
// (one of formats) and returns the body and its Content-Type. Task "align"
// selects edge's transcript JSON for "json".
func render(tr *transcript.Transcript, audio time.Duration, format string, words, segments bool, task, language, modelName string) ([]byte, string, error) {
	var b bytes.Buffer
	switch format {
	case formatJSON:
		if task == "align" {
			if err := transcript.Write(&b, tr, transcript.JSON, transcript.WriteOptions{}); err != nil {
				return nil, "", err
			}
			return b.Bytes(), "application/json", nil
		}
		err := encodeJSON(&b, struct {
			Text  string    `json:"text"`
			Usage usageJSON `json:"usage"`
			Model string    `json:"model"`
		}{tr.Text, usageJSON{"duration", seconds(audio)}, modelName})
		return b.Bytes(), "application/json", err
	case formatVerboseJSON:
		v := verbose{Task: task, Language: language, Duration: seconds(audio), Text: tr.Text,
			Usage: usageJSON{"duration", seconds(audio)}, Model: modelName}
		if segments {
			v.Segments = makeSegments(tr)
			if v.Segments == nil {
				v.Segments = []segmentJSON{}
			}
		}
		if words {
			v.Words = make([]wordJSON, len(tr.Words))
			for i, w := range tr.Words {
				v.Words[i] = wordJSON{w.Text, seconds(w.Start), seconds(w.End), round4(w.Confidence)}
			}
		}
		err := encodeJSON(&b, v)
		return b.Bytes(), "application/json", err
	}
	f := map[string]transcript.Format{formatText: transcript.Text, formatSRT: transcript.SRT, formatVTT: transcript.VTT,
		formatCTM: transcript.CTM, formatTSV: transcript.TSV}[format]
	if f == "" {
		return nil, "", fmt.Errorf("unknown format %q", format)
	}
	if err := transcript.Write(&b, tr, f, transcript.WriteOptions{}); err != nil {
		return nil, "", err
	}
	ct := "text/plain; charset=utf-8"
	if f == transcript.VTT {
		ct = "text/vtt; charset=utf-8"
	}
	return b.Bytes(), ct, nil
}

func encodeJSON(b *bytes.Buffer, v any) error {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

func seconds(d time.Duration) float64 { return round4(d.Seconds()) }

func round4(x float64) float64 { return math.Round(x*1e4) / 1e4 }

// Segment rules: those of transcript.WriteOptions' subtitle cues (its
// defaults), so verbose_json's segments are the srt/vtt cues.
const (
	cueChars    = 42
	cueDuration = 5 * time.Second
	cueGap      = time.Second
)

// makeSegments groups tr's words into segments: a segment ends before a
// word that would make it longer than cueChars characters or cueDuration,
// or that follows a pause longer than cueGap.
func makeSegments(tr *transcript.Transcript) []segmentJSON {
	var out []segmentJSON
	first, chars := 0, 0
	flush := func(last int) { // words [first, last)
		if last > first {
			out = append(out, segment(tr, len(out), tr.Words[first:last]))
		}
		first = last
	}
	for i, w := range tr.Words {
		n := utf8.RuneCountInString(w.Text)
		if i > first && (chars+1+n > cueChars || w.End-tr.Words[first].Start > cueDuration || w.Start-tr.Words[i-1].End > cueGap) {
			flush(i)
		}
		if i == first {
			chars = n
		} else {
			chars += 1 + n
		}
	}
	flush(len(tr.Words))
	return out
}

func segment(tr *transcript.Transcript, id int, words []transcript.Word) segmentJSON {
	texts := make([]string, len(words))
	for i, w := range words {
		texts[i] = w.Text
	}
	s := segmentJSON{ID: id, Start: seconds(words[0].Start), End: seconds(words[len(words)-1].End),
		Text: strings.Join(texts, " "), Tokens: []int{}}
	s.Seek = int(math.Round(words[0].Start.Seconds() * 100))
	if lo, hi := words[0].FirstToken, words[len(words)-1].LastToken; 0 <= lo && lo <= hi && hi <= len(tr.Tokens) {
		for _, tok := range tr.Tokens[lo:hi] {
			s.Tokens = append(s.Tokens, tok.ID)
		}
	}
	// The words' own tokens (no delimiters): mean frame log-prob per token,
	// and the frame-weighted mean probability.
	var lp, psum float64
	var n, frames int
	for _, w := range words {
		if w.FirstToken < 0 || w.LastToken > len(tr.Tokens) || w.FirstToken > w.LastToken {
			continue
		}
		for _, tok := range tr.Tokens[w.FirstToken:w.LastToken] {
			if f := tok.EndFrame - tok.StartFrame; f > 0 {
				lp += tok.LogProb / float64(f)
				n++
				psum += tok.Confidence * float64(f)
				frames += f
			}
		}
	}
	if n > 0 {
		s.AvgLogprob = round4(lp / float64(n))
		s.Confidence = round4(psum / float64(frames))
	}
	s.CompressionRatio = compressionRatio(s.Text)
	return s
}

// compressionRatio is Whisper's: the text's bytes over its zlib-compressed
// bytes.
func compressionRatio(text string) float64 {
	if text == "" {
		return 0
	}
	var b bytes.Buffer
	zw := zlib.NewWriter(&b)
	_, _ = zw.Write([]byte(text))
	_ = zw.Close()
	return round4(float64(len(text)) / float64(b.Len()))
}
