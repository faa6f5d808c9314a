package transcript

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/plugins/dpx"
)

// peaky builds [T, C] emissions whose frame t has label[t] at log-prob -0.05
// and every other id at -5.
func peaky(labels []int, C int) []float32 {
	lp := make([]float32, len(labels)*C)
	for t, k := range labels {
		for c := range C {
			lp[t*C+c] = -5
		}
		lp[t*C+k] = -0.05
	}
	return lp
}

var charVocab = []string{"<blk>", "▁", "h", "i", "t", "e", "r", "<"}

// "hi there": h h i _ ▁ _ t h e r e _ (frames of 20 ms).
var hiThere = []int{0, 2, 2, 3, 0, 1, 0, 4, 2, 5, 6, 5, 0}

func charConfig() Config {
	return Config{Vocabulary: charVocab, Blank: 0, FrameStride: 20 * time.Millisecond, WordDelimiter: "▁"}
}

func TestTranscribeWords(t *testing.T) {
	tr, err := Transcribe(peaky(hiThere, len(charVocab)), len(charVocab), charConfig())
	require.NoError(t, err)
	assert.Equal(t, "hi there", tr.Text)
	require.Len(t, tr.Words, 2)
	conf := math.Exp(-0.05)
	assert.Equal(t, Word{Text: "hi", Start: 20 * time.Millisecond, End: 80 * time.Millisecond, Confidence: tr.Words[0].Confidence, FirstToken: 0, LastToken: 2}, tr.Words[0])
	assert.Equal(t, Word{Text: "there", Start: 140 * time.Millisecond, End: 240 * time.Millisecond, Confidence: tr.Words[1].Confidence, FirstToken: 3, LastToken: 8}, tr.Words[1])
	assert.InDelta(t, conf, tr.Words[0].Confidence, 1e-6)
	assert.InDelta(t, conf, tr.Words[1].Confidence, 1e-6)
	assert.Len(t, tr.Tokens, 8)
	assert.Equal(t, 260*time.Millisecond, tr.Duration)
	assert.InDelta(t, -0.05*13, tr.Score, 1e-5)
	assert.InDelta(t, 2*-0.05, tr.Tokens[0].LogProb, 1e-6) // "h" spans two frames
}

func TestSentencePieceWords(t *testing.T) {
	vocab := []string{"<blk>", "▁hi", "▁the", "re", "▁"}
	cfg := Config{Vocabulary: vocab, Blank: 0, FrameStride: 40 * time.Millisecond, SentencePieceMarker: "▁"}
	// ▁hi _ ▁the re _ ▁ (a bare marker is a boundary with no text)
	tr, err := AlignTokens(peaky([]int{1, 0, 2, 3, 0, 4}, len(vocab)), len(vocab), []int{1, 2, 3, 4}, cfg)
	require.NoError(t, err)
	assert.Equal(t, "hi there", tr.Text)
	require.Len(t, tr.Words, 2)
	assert.Equal(t, 80*time.Millisecond, tr.Words[1].Start)
	assert.Equal(t, 160*time.Millisecond, tr.Words[1].End)
}

func TestConfigErrors(t *testing.T) {
	lp := peaky(hiThere, len(charVocab))
	for _, tc := range []struct {
		mod  func(*Config)
		C    int
		want string
	}{
		{func(c *Config) {}, 5, "vocabulary has 8 symbols; the emissions have C=5 columns"},
		{func(c *Config) { c.Blank = 9 }, 8, "blank id 9 is out of range"},
		{func(c *Config) { c.FrameStride = 0 }, 8, "frame stride 0s"},
		{func(c *Config) { c.WordDelimiter = "" }, 8, "set a word delimiter"},
	} {
		cfg := charConfig()
		tc.mod(&cfg)
		_, err := Transcribe(lp, tc.C, cfg)
		require.ErrorContains(t, err, tc.want)
	}
	_, err := AlignTokens(lp, 8, []int{9}, charConfig())
	require.ErrorContains(t, err, "targets[0] = 9 is out of range")
	_, err = AlignTokens(lp[:8], 8, []int{2, 2}, charConfig())
	require.ErrorContains(t, err, "T=1 frames is too short")
}

func TestWriters(t *testing.T) {
	// "a<b" checks WebVTT escaping.
	lp := peaky([]int{0, 2, 3, 0, 1, 0, 4, 2, 5, 6, 5, 0, 1, 3, 7, 2}, len(charVocab))
	tr, err := Transcribe(lp, len(charVocab), charConfig())
	require.NoError(t, err)
	require.Equal(t, "hi there i<h", tr.Text)
	for _, tc := range []struct {
		f    Format
		want string
	}{
		{Text, "hi there i<h\n"},
		{SRT, "1\n00:00:00,020 --> 00:00:00,320\nhi there i<h\n\n"},
		{VTT, "WEBVTT\n\n00:00:00.020 --> 00:00:00.320\nhi there i&lt;h\n\n"},
		{CTM, "utt 1 0.020 0.040 hi 0.951\nutt 1 0.120 0.100 there 0.951\nutt 1 0.260 0.060 i<h 0.951\n"},
		{TSV, "start\tend\ttext\n20\t60\thi\n120\t220\tthere\n260\t320\ti<h\n"},
	} {
		var b bytes.Buffer
		require.NoError(t, Write(&b, tr, tc.f, WriteOptions{}))
		assert.Equal(t, tc.want, b.String(), "format %s", tc.f)
	}
	var b bytes.Buffer
	require.NoError(t, Write(&b, tr, JSON, WriteOptions{}))
	var doc struct {
		Text  string
		Words []struct {
			Word       string
			Start, End float64
			Tokens     [2]int
		}
		Tokens []struct{ ID int }
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &doc))
	assert.Equal(t, "hi there i<h", doc.Text)
	assert.Equal(t, 0.12, doc.Words[1].Start)
	assert.Equal(t, 0.22, doc.Words[1].End)
	assert.Equal(t, [2]int{3, 8}, doc.Words[1].Tokens)
	assert.Len(t, doc.Tokens, 12)
	assert.Contains(t, b.String(), `"text": "hi there i<h"`)

	require.ErrorContains(t, Write(&b, tr, "doc", WriteOptions{}), `unknown transcript format "doc"`)
}

func TestCues(t *testing.T) {
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	words := []Word{
		{Text: "one", Start: ms(0), End: ms(300)},
		{Text: "two", Start: ms(400), End: ms(700)},
		{Text: "three", Start: ms(2000), End: ms(2400)}, // after a 1.3 s pause
		{Text: "four", Start: ms(2500), End: ms(7600)},  // cue would last 5.6 s
		{Text: "fivefivefive", Start: ms(7700), End: ms(8000)},
	}
	got := cues(words, WriteOptions{MaxCueChars: 15}.withDefaults())
	assert.Equal(t, []cue{
		{ms(0), ms(700), "one two"},
		{ms(2000), ms(2400), "three"},
		{ms(2500), ms(7600), "four"},
		{ms(7700), ms(8000), "fivefivefive"},
	}, got)
	var b bytes.Buffer
	require.NoError(t, Write(&b, &Transcript{Words: words}, SRT, WriteOptions{}))
	assert.Contains(t, b.String(), "3\n00:00:02,500 --> 00:00:07,600\nfour\n\n")
	assert.Equal(t, "01:01:01,001", clock(time.Hour+time.Minute+time.Second+time.Millisecond, ','))
	assert.Equal(t, "00:00:00.000", clock(0, '.'))
}

func TestParseFormat(t *testing.T) {
	for _, f := range Formats() {
		got, err := ParseFormat(string(f))
		require.NoError(t, err)
		assert.Equal(t, f, got)
	}
	got, err := ParseFormat("webvtt")
	require.NoError(t, err)
	assert.Equal(t, VTT, got)
	_, err = ParseFormat("docx")
	require.ErrorContains(t, err, `unknown transcript format "docx"`)
}

func TestEmptyTranscript(t *testing.T) {
	tr, err := Transcribe(peaky([]int{0, 0, 0}, len(charVocab)), len(charVocab), charConfig())
	require.NoError(t, err)
	assert.Empty(t, tr.Words)
	var b bytes.Buffer
	require.NoError(t, Write(&b, tr, VTT, WriteOptions{}))
	assert.Equal(t, "WEBVTT\n\n", b.String())
}

func TestFromSpans(t *testing.T) {
	lp := peaky(hiThere, len(charVocab))
	C := len(charVocab)
	// A star span (id C) joins no word and has no confidence.
	tr, err := FromSpans([]dpx.Span{{Token: 2, Start: 1, End: 3}, {Token: int32(C), Start: 3, End: 5}, {Token: 3, Start: 5, End: 6}}, lp, C, charConfig())
	require.NoError(t, err)
	assert.Equal(t, "hi", tr.Text)
	assert.Equal(t, 0.0, tr.Tokens[1].Confidence)
	for _, bad := range [][]dpx.Span{
		{{Token: 2, Start: 3, End: 3}},
		{{Token: 2, Start: 0, End: 14}},
		{{Token: 9, Start: 0, End: 1}},
		{{Token: 2, Start: 4, End: 5}, {Token: 3, Start: 2, End: 3}},
	} {
		_, err := FromSpans(bad, lp, C, charConfig())
		require.ErrorContains(t, err, "out of order, empty or out of range")
	}
}

// TestWriterStreamsAsWrite: words given to a Writer in batches of any size
// give exactly Write's output, in every format.
func TestWriterStreamsAsWrite(t *testing.T) {
	var words []Word
	for i := range 40 {
		start := time.Duration(i)*300*time.Millisecond + time.Duration(i/7)*1500*time.Millisecond
		words = append(words, Word{Text: strings.Repeat("ab<&", 2)[:2+i%5], Start: start, End: start + 200*time.Millisecond, Confidence: 0.5})
	}
	texts := make([]string, len(words))
	for i, w := range words {
		texts[i] = w.Text
	}
	for _, ws := range [][]Word{nil, words[:1], words} {
		tr := &Transcript{Words: ws, Text: strings.Join(texts[:len(ws)], " "), Tokens: []Token{}}
		for _, f := range Formats() {
			var want, got bytes.Buffer
			require.NoError(t, Write(&want, tr, f, WriteOptions{}))
			sw, err := NewWriter(&got, f, WriteOptions{})
			require.NoError(t, err)
			for i := 0; i < len(ws); i += 3 {
				require.NoError(t, sw.Words(ws[i:min(i+3, len(ws))]))
			}
			require.NoError(t, sw.Close(tr))
			require.Equal(t, want.String(), got.String(), "%s, %d words", f, len(ws))
		}
	}
}
