package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/asr"
	"github.com/edgespeech/edge/asr/transcript"
	"github.com/edgespeech/edge/plugins/vad"
	"github.com/edgespeech/edge/runtime/audio"
)

const (
	bundledModel = "../../models/default"
	demoClip     = "../../models/default/testdata/demo.wav"
	demoText     = "the quick brown fox jumps over the lazy dog while seven children watch from the garden"
)

func TestTranscribeFormats(t *testing.T) {
	code, out, stderr := capture(t, "transcribe", "--model", bundledModel, demoClip)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, demoText+"\n", out)
	assert.Contains(t, stderr, "[1/1] "+demoClip)

	code, out, stderr = capture(t, "transcribe", "--model", bundledModel, "--format", "json", demoClip)
	require.Equal(t, 0, code, stderr)
	var doc struct {
		Text  string `json:"text"`
		Words []struct {
			Word       string  `json:"word"`
			Start, End float64 // matched case-insensitively to start/end
		} `json:"words"`
	}
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	assert.Equal(t, demoText, doc.Text)
	require.Len(t, doc.Words, 16)
	assert.Equal(t, "garden", doc.Words[15].Word)
	assert.Greater(t, doc.Words[15].End, doc.Words[15].Start)

	code, out, stderr = capture(t, "transcribe", "--model", bundledModel, "--format", "srt", demoClip)
	require.Equal(t, 0, code, stderr)
	assert.True(t, strings.HasPrefix(out, "1\n00:00:00,"), out)
}

// Many files: one output per file in --out DIR; a broken file is reported
// and skipped, the others still written, and the exit status says so.
func TestTranscribeManyFilesSkipsFailures(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "broken.wav")
	require.NoError(t, os.WriteFile(bad, []byte("RIFF\x10\x00\x00\x00WAVEjunk"), 0o644))
	out := filepath.Join(dir, "out")
	code, _, stderr := capture(t, "transcribe", "--model", bundledModel, "--format", "vtt", "--out", out, bad, demoClip)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "[1/2] "+bad+": FAILED")
	assert.Contains(t, stderr, "1 of 2 files failed")
	b, err := os.ReadFile(filepath.Join(out, "demo.vtt"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(b), "WEBVTT"))
}

func TestAlign(t *testing.T) {
	code, out, stderr := capture(t, "align", "--model", bundledModel, "--format", "tsv",
		"--text", "The quick brown fox jumps over the lazy dog, while 7 children watch from the garden.", demoClip)
	require.Equal(t, 0, code, stderr)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 17) // header + 16 words
	assert.Equal(t, "start\tend\ttext", lines[0])
	assert.True(t, strings.HasSuffix(lines[11], "\tseven"), lines[11])

	long := strings.Repeat("supercalifragilistic ", 40)
	code, _, stderr = capture(t, "align", "--model", bundledModel, "--text", long, demoClip)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "audio too short for the text: 5.349s of audio gives 267 frames")

	code, _, stderr = capture(t, "align", "--model", bundledModel, demoClip)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "need a transcript")
}

func TestTranscribeErrors(t *testing.T) {
	code, _, stderr := capture(t, "transcribe", "--model", "no/such/model", demoClip)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "no/such/model")

	code, _, stderr = capture(t, "transcribe", "--model", bundledModel, "--format", "docx", demoClip)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `unknown transcript format "docx"`)

	code, _, stderr = capture(t, "transcribe", "--model", bundledModel)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "need at least one AUDIO file")
}

// TestTranscribeProviderFlags: a CUDA provider without its plugin library is
// an error naming it; --fallback cpu transcribes on the CPU with a warning;
// --stats prints per-stage times.
func TestTranscribeProviderFlags(t *testing.T) {
	t.Setenv("EDGE_ORT_CUDA_EP", "")
	code, _, stderr := capture(t, "transcribe", "--model", bundledModel, "--execution-provider", "cuda",
		"--ort-cuda-ep", "/no/such/libonnxruntime_providers_cuda.so", demoClip)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr, "CUDA execution provider library /no/such/libonnxruntime_providers_cuda.so (from config key ort_cuda_ep)")

	code, out, stderr := capture(t, "transcribe", "--model", bundledModel, "--execution-provider", "cuda",
		"--ort-cuda-ep", "/no/such/libonnxruntime_providers_cuda.so", "--fallback", "cpu", "--stats", demoClip)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, demoText+"\n", out)
	assert.Contains(t, stderr, "warning: the encoder runs on the CPU (fallback=cpu)")
	assert.Contains(t, stderr, `"stages_ns":{`)

	code, _, stderr = capture(t, "transcribe", "--model", bundledModel, "--backend", "tpu", demoClip)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr, `unknown backend "tpu"`)
}

// TestTranscribeStreamsAsOffline: 40 s of the bundled clips with pauses,
// stored at 22.05 kHz (so it is resampled in pieces), gives in every format
// exactly what offline recognition of the whole decoded file writes, with
// VAD (every format) and without (text and srt), from a file and from
// standard input.
func TestTranscribeStreamsAsOffline(t *testing.T) {
	var pcm []float32
	names := []string{"demo", "words_1", "words_2", "words_3", "words_4"}
	for i := 0; len(pcm) < 40*16000; i++ {
		x, err := audio.Load("../../models/default/testdata/"+names[i%len(names)]+".wav", 16000)
		require.NoError(t, err)
		pcm = append(pcm, x...)
		pcm = append(pcm, make([]float32, 16000*(i%3)/2+4000)...)
	}
	up, err := audio.Resample(pcm, 16000, 22050)
	require.NoError(t, err)
	path := filepath.Join(t.TempDir(), "minute.wav")
	require.NoError(t, os.WriteFile(path, wavBytes(22050, up), 0o644))
	x, err := audio.Load(path, 16000)
	require.NoError(t, err)
	for _, useVAD := range []bool{true, false} {
		opt := asr.Options{}
		if useVAD {
			rules := vad.DefaultRules()
			rules.MaxSpeech = 30 * time.Second
			opt.VAD = &vad.Options{Rules: &rules}
		}
		rec, err := asr.Open(bundledModel, opt)
		require.NoError(t, err)
		want, err := rec.Transcribe(context.Background(), x)
		require.NoError(t, err)
		require.NoError(t, rec.Close())
		require.NotEmpty(t, want.Words)
		formats := transcript.Formats()
		if !useVAD {
			formats = []transcript.Format{transcript.Text, transcript.SRT, transcript.TSV}
		}
		for _, f := range formats {
			var buf bytes.Buffer
			require.NoError(t, transcript.Write(&buf, want, f, transcript.WriteOptions{Utterance: "minute"}))
			code, out, stderr := capture(t, "transcribe", "--model", bundledModel, "--vad="+fmt.Sprint(useVAD), "--format", string(f), path)
			require.Equal(t, 0, code, stderr)
			require.Equal(t, buf.String(), out, "%s, vad %v", f, useVAD)
			if f == transcript.TSV {
				b, err := os.ReadFile(path)
				require.NoError(t, err)
				stdin = bytes.NewReader(b)
				code, out, stderr = capture(t, "transcribe", "--model", bundledModel, "--vad="+fmt.Sprint(useVAD), "--format", string(f), "-")
				stdin = os.Stdin
				require.Equal(t, 0, code, stderr)
				require.Equal(t, buf.String(), out, "stdin, vad %v", useVAD)
			}
		}
	}
}

// TestTranscribeBadInputMidStream: a float WAV whose samples turn NaN 90 %
// in (in its fourth utterance: a segment's words are final once the next
// segment's first token is decoded) fails with an error naming the sample; the words before it are
// on standard output already, and a file output keeps them as NAME.part.
// Cut short, the same file is transcribed as far as it goes with a warning
// (--strict: an error once the end is reached).
func TestTranscribeBadInputMidStream(t *testing.T) {
	var pcm []float32
	for _, name := range []string{"demo", "words_1", "words_2", "words_3"} {
		x, err := audio.Load("../../models/default/testdata/"+name+".wav", 16000)
		require.NoError(t, err)
		pcm = append(pcm, x...)
		pcm = append(pcm, make([]float32, 16000)...)
	}
	floatWAV := func(x []float32) []byte {
		var b bytes.Buffer
		le := binary.LittleEndian
		b.WriteString("RIFF")
		_ = binary.Write(&b, le, uint32(36+4*len(x)))
		b.WriteString("WAVEfmt ")
		for _, v := range []any{uint32(16), uint16(3), uint16(1), uint32(16000), uint32(64000), uint16(4), uint16(32)} {
			_ = binary.Write(&b, le, v)
		}
		b.WriteString("data")
		_ = binary.Write(&b, le, uint32(4*len(x)))
		_ = binary.Write(&b, le, x)
		return b.Bytes()
	}
	dir := t.TempDir()
	bad := append([]float32(nil), pcm...)
	at := len(bad) * 9 / 10
	bad[at] = float32(math.NaN())
	path := filepath.Join(dir, "bad.wav")
	require.NoError(t, os.WriteFile(path, floatWAV(bad), 0o644))
	code, out, stderr := capture(t, "transcribe", "--model", bundledModel, path)
	require.Equal(t, 1, code)
	assert.Contains(t, stderr, fmt.Sprintf("sample %d", at))
	assert.True(t, strings.HasPrefix(demoText, strings.TrimSpace(out)) || strings.HasPrefix(out, demoText), "words before the error: %q", out)
	assert.NotEmpty(t, strings.TrimSpace(out))

	code, _, stderr = capture(t, "transcribe", "--model", bundledModel, "--format", "tsv", "--out", filepath.Join(dir, "o")+"/", path)
	require.Equal(t, 1, code, stderr)
	part, err := os.ReadFile(filepath.Join(dir, "o", "bad.tsv.part"))
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(string(part), "start\tend\ttext\n"), string(part))
	assert.Contains(t, string(part), "\tbrown\n")
	_, err = os.Stat(filepath.Join(dir, "o", "bad.tsv"))
	assert.True(t, os.IsNotExist(err), "no complete-looking output for a failed input")

	whole := floatWAV(pcm)
	cut := filepath.Join(dir, "cut.wav")
	require.NoError(t, os.WriteFile(cut, whole[:len(whole)*2/3], 0o644))
	code, out, stderr = capture(t, "transcribe", "--model", bundledModel, cut)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "truncated")
	assert.True(t, strings.HasPrefix(out, demoText), out)
	code, _, stderr = capture(t, "transcribe", "--model", bundledModel, "--strict", cut)
	require.Equal(t, 1, code)
	assert.Contains(t, stderr, "input ends early")
}
