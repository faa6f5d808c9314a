package main

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime/audio"
)

// wavBytes encodes mono float samples as a 16-bit PCM WAV.
func wavBytes(rate int, x []float32) []byte {
	var b bytes.Buffer
	le := binary.LittleEndian
	b.WriteString("RIFF")
	_ = binary.Write(&b, le, uint32(36+2*len(x)))
	b.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(1), uint32(rate), uint32(2 * rate), uint16(2), uint16(16)} {
		_ = binary.Write(&b, le, v)
	}
	b.WriteString("data")
	_ = binary.Write(&b, le, uint32(2*len(x)))
	for _, v := range x {
		_ = binary.Write(&b, le, int16(math.Round(float64(max(-1, min(v, 32767.0/32768)))*32768)))
	}
	return b.Bytes()
}

func copyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(dst), 0o755))
	require.NoError(t, os.WriteFile(dst, b, 0o644))
}

// TestTranscribeBatchOutput runs the batch output rules end to end: where
// each input's transcript goes for each --out, and the usage errors.
func TestTranscribeBatchOutput(t *testing.T) {
	dir := t.TempDir()
	ax, bx := filepath.Join(dir, "a", "x.wav"), filepath.Join(dir, "b", "x.wav")
	af := filepath.Join(dir, "a", "x.flac")
	copyFile(t, demoClip, ax)
	copyFile(t, demoClip, bx)
	copyFile(t, "../../runtime/audio/testdata/parity/flac_s16_16k_mono.flac", af)
	file := filepath.Join(dir, "exists.txt")
	require.NoError(t, os.WriteFile(file, []byte("keep"), 0o644))
	out := func(p ...string) string { return filepath.Join(append([]string{dir, "out"}, p...)...) }

	for _, c := range []struct {
		name   string
		args   []string
		code   int
		files  map[string]string // path -> prefix of its content
		stdout func(t *testing.T, s string)
		stderr string
	}{
		{name: "same name in two directories keeps the directories",
			args:  []string{"--out", out() + "/", ax, bx},
			files: map[string]string{out("a", "x.text"): demoText, out("b", "x.text"): demoText}},
		{name: "several inputs: --out without a slash is a directory, said on stderr",
			args:   []string{"--out", out("many.txt"), ax, bx},
			files:  map[string]string{out("many.txt", "a", "x.text"): demoText, out("many.txt", "b", "x.text"): demoText},
			stderr: "created directory " + out("many.txt") + "/ for the 2 outputs"},
		{name: "several inputs into an existing file is a usage error",
			args: []string{"--out", file, ax, bx}, code: 2,
			stderr: "--out " + file + " is a file, but it must be a directory (2 inputs write one file each)"},
		{name: "one input, --out ending in / is a directory",
			args:  []string{"--format", "srt", "--out", out("d1") + "/", ax},
			files: map[string]string{out("d1", "x.srt"): "1\n00:00:00,"}},
		{name: "one input, --out an existing directory",
			args:  []string{"--out", dir, ax},
			files: map[string]string{filepath.Join(dir, "x.text"): demoText}},
		{name: "one input, --out a file (parents created)",
			args:  []string{"--format", "vtt", "--out", out("sub", "talk.vtt"), ax},
			files: map[string]string{out("sub", "talk.vtt"): "WEBVTT"}},
		{name: "one input ending in / that is a file",
			args: []string{"--out", file + "/", ax}, code: 2, stderr: "is a file, but it must be a directory (it ends in /)"},
		{name: "same stem and directory: the extensions stay",
			args:  []string{"--out", out("e") + "/", ax, af},
			files: map[string]string{out("e", "x.wav.text"): demoText, out("e", "x.flac.text"): ""}},
		{name: "the same file twice is a usage error",
			args: []string{"--out", out("f") + "/", ax, ax}, code: 2, stderr: "are the same file"},
		{name: "stdin twice is a usage error",
			args: []string{"-", "-"}, code: 2, stderr: "standard input (-) is given 2 times"},
		{name: "--out - is stdout",
			args:   []string{"--out", "-", ax},
			stdout: func(t *testing.T, s string) { assert.Equal(t, demoText+"\n", s) }},
		{name: "several inputs as JSON on stdout are JSON Lines with a file field",
			args: []string{"--format", "json", ax, bx},
			stdout: func(t *testing.T, s string) {
				lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
				require.Len(t, lines, 2, s)
				for i, want := range []string{ax, bx} {
					var doc struct {
						File, Text string
					}
					require.NoError(t, json.Unmarshal([]byte(lines[i]), &doc), lines[i])
					assert.Equal(t, want, doc.File)
					assert.Equal(t, demoText, doc.Text)
					assert.True(t, strings.HasPrefix(lines[i], `{"file":`), lines[i])
				}
			}},
		{name: "several inputs as text on stdout name each file",
			args: []string{ax, bx},
			stdout: func(t *testing.T, s string) {
				assert.Equal(t, "==> "+ax+" <==\n"+demoText+"\n\n==> "+bx+" <==\n"+demoText+"\n", s)
			}},
		{name: "a failed input in JSON Lines is a line with an error",
			args: []string{"--format", "json", filepath.Join(dir, "missing.wav"), ax}, code: 1,
			stdout: func(t *testing.T, s string) {
				lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
				require.Len(t, lines, 2, s)
				var doc struct{ File, Error string }
				require.NoError(t, json.Unmarshal([]byte(lines[0]), &doc))
				assert.Contains(t, doc.Error, "no such file")
			},
			stderr: "1 of 2 files failed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, stdout, stderr := capture(t, append([]string{"transcribe", "--model", bundledModel}, c.args...)...)
			require.Equal(t, c.code, code, stderr)
			for p, want := range c.files {
				b, err := os.ReadFile(p)
				require.NoError(t, err, "output %s; stderr: %s", p, stderr)
				assert.True(t, strings.HasPrefix(string(b), want), "%s: %q", p, b)
			}
			if c.stdout != nil {
				c.stdout(t, stdout)
			} else if c.code == 0 {
				assert.Empty(t, stdout)
			}
			assert.Contains(t, stderr, c.stderr)
		})
	}
	b, _ := os.ReadFile(file)
	assert.Equal(t, "keep", string(b), "a usage error writes nothing")
}

// TestTranscribeInputs: formats by content, standard input, headerless PCM,
// truncated, too-short and silent input, and the flags' usage errors.
func TestTranscribeInputs(t *testing.T) {
	dir := t.TempDir()
	demo, err := os.ReadFile(demoClip)
	require.NoError(t, err)
	clip, err := audio.Decode(bytes.NewReader(demo), int64(len(demo)))
	require.NoError(t, err)
	var s16 bytes.Buffer
	for _, v := range clip.Samples {
		_ = binary.Write(&s16, binary.LittleEndian, int16(math.Round(float64(v)*32768)))
	}
	short := filepath.Join(dir, "short.wav")
	tone := make([]float32, 208) // 13 ms
	for i := range tone {
		tone[i] = float32(0.3 * math.Sin(2*math.Pi*440*float64(i)/16000))
	}
	require.NoError(t, os.WriteFile(short, wavBytes(16000, tone), 0o644))
	silent := filepath.Join(dir, "silent.wav")
	require.NoError(t, os.WriteFile(silent, wavBytes(16000, make([]float32, 32000)), 0o644))
	cut := filepath.Join(dir, "cut.wav")
	require.NoError(t, os.WriteFile(cut, demo[:len(demo)/2], 0o644))
	m4a := filepath.Join(dir, "talk.m4a")
	require.NoError(t, os.WriteFile(m4a, []byte("\x00\x00\x00\x18ftypM4A \x00\x00\x02\x00isomiso2\x00\x00\x00\x08free"), 0o644))
	renamed := filepath.Join(dir, "really-a-flac.wav")
	copyFile(t, "../../runtime/audio/testdata/parity/flac_s16_16k_mono.flac", renamed)

	for _, c := range []struct {
		name         string
		stdin        []byte
		path         string // PATH for the run ("" leaves it)
		args         []string
		code         int
		stdout       string // prefix
		stderr       string
		stderrAbsent string
	}{
		{name: "stdin", stdin: demo, args: []string{"-"}, stdout: demoText + "\n", stderr: "[1/1] stdin:"},
		{name: "raw s16le on stdin", stdin: s16.Bytes(), args: []string{"--raw", "s16le", "--rate", "16000", "-"}, stdout: demoText + "\n"},
		{name: "content, not the name, picks the decoder", args: []string{renamed}, stdout: "x jumps over the"},
		{name: "a 13 ms clip is an empty transcript", args: []string{short}, stdout: "\n",
			stderr: "warning: " + short + ": 13ms of audio is too short for the model"},
		{name: "a too-short clip does not stop a batch", args: []string{"--format", "json", short, demoClip},
			stderr: "[2/2] " + demoClip},
		{name: "silence is an empty transcript", args: []string{silent}, stdout: "\n",
			stderr: "warning: " + silent + ": 2s of audio is silent"},
		{name: "truncated: what is there, with a warning", args: []string{cut}, stdout: "the quick",
			stderr: "warning: " + cut + ": truncated WAV (PCM 16-bit): wav: data chunk at offset 36 claims"},
		{name: "truncated and --strict fails", args: []string{"--strict", cut}, code: 1, stderr: "input ends early"},
		{name: "--quiet drops progress", args: []string{"--quiet", demoClip}, stdout: demoText, stderrAbsent: "[1/1]"},
		{name: "M4A without ffmpeg names ffmpeg", path: dir, args: []string{m4a}, code: 1,
			stderr: "MP4/M4A needs ffmpeg, and \"ffmpeg\" is not found"},
		{name: "--raw needs --rate", args: []string{"--raw", "s16le", "-"}, code: 2, stderr: "--raw s16le needs --rate HZ"},
		{name: "--rate needs --raw", args: []string{"--rate", "8000", demoClip}, code: 2, stderr: "give --raw too"},
		{name: "unknown raw encoding", args: []string{"--raw", "s24be", "--rate", "8000", "-"}, code: 2, stderr: `unknown encoding "s24be"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.stdin != nil {
				old := stdin
				stdin = bytes.NewReader(c.stdin)
				defer func() { stdin = old }()
			}
			if c.path != "" {
				t.Setenv("PATH", c.path)
			}
			code, stdout, stderr := capture(t, append([]string{"transcribe", "--model", bundledModel}, c.args...)...)
			require.Equal(t, c.code, code, stderr)
			assert.True(t, strings.HasPrefix(stdout, c.stdout), "stdout %q", stdout)
			assert.Contains(t, stderr, c.stderr)
			if c.stderrAbsent != "" {
				assert.NotContains(t, stderr, c.stderrAbsent)
			}
		})
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := capture(t, "version")
	require.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "edge "), out)
	assert.Contains(t, out, "go1.")
}
