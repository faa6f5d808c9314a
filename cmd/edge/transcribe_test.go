package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
