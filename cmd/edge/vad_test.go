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

const vadClips = "../../plugins/vad/testdata/"

func TestVADFormats(t *testing.T) {
	clip := vadClips + "pauses.wav"
	code, out, stderr := capture(t, "vad", clip)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "0.322\t3.422\n4.322\t7.262\n9.026\t9.950\n10.338\t12.190\n", out)

	code, out, stderr = capture(t, "vad", "--format", "json", clip)
	require.Equal(t, 0, code, stderr)
	var doc vadJSON
	require.NoError(t, json.Unmarshal([]byte(out), &doc))
	assert.Equal(t, 16000, doc.SampleRate)
	assert.Equal(t, vadSegJSON{4.322, 7.262}, doc.Segments[1])
	assert.InDelta(t, 8.816, doc.Speech, 1e-9)

	code, out, _ = capture(t, "vad", "--format", "rttm", clip)
	require.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "SPEAKER pauses 1 0.322 3.100 <NA> <NA> speech <NA> <NA>\n"), out)

	code, out, _ = capture(t, "vad", "--format", "audacity", clip)
	require.Equal(t, 0, code)
	assert.True(t, strings.HasPrefix(out, "0.322000\t3.422000\tspeech\n"), out)

	// The rules are the op's parameters.
	code, out, _ = capture(t, "vad", "--set", "max_speech_s=3", clip)
	require.Equal(t, 0, code)
	assert.Contains(t, out, "0.322\t3.294\n")
}

// Silence, digital zeros, noise and a tone give no segments; 8 kHz audio
// runs at 8 kHz.
func TestVADNoSpeechAndManyFiles(t *testing.T) {
	dir := t.TempDir()
	var args []string
	for _, c := range []string{"silence", "zeros", "noise", "tone", "speech8k"} {
		args = append(args, vadClips+c+".wav")
	}
	code, _, stderr := capture(t, append([]string{"vad", "--format", "json", "--out", dir}, args...)...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "[5/5]")
	for _, c := range []string{"silence", "zeros", "noise", "tone", "speech8k"} {
		b, err := os.ReadFile(filepath.Join(dir, c+".vad.json"))
		require.NoError(t, err)
		var doc vadJSON
		require.NoError(t, json.Unmarshal(b, &doc))
		if c == "speech8k" {
			assert.Equal(t, 8000, doc.SampleRate)
			assert.Len(t, doc.Segments, 1)
		} else {
			assert.Empty(t, doc.Segments, c)
		}
	}
}

func TestVADErrors(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.wav")
	require.NoError(t, os.WriteFile(short, wavBytes(16000, make([]float32, 100)), 0o644))
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"vad"}, 2, "need at least one AUDIO file"},
		{[]string{"vad", "--format", "srt", vadClips + "tone.wav"}, 2, "unknown --format"},
		{[]string{"vad", "--set", "threshold=2", vadClips + "tone.wav"}, 1, "threshold 2 is outside"},
		{[]string{"vad", "--set", "nope=1", vadClips + "tone.wav"}, 1, "unknown parameter"},
		{[]string{"vad", "--set", "sample_rate=22050", vadClips + "tone.wav"}, 1, "22050 Hz"},
		{[]string{"vad", short, vadClips + "tone.wav"}, 1, "shorter than one window"},
		{[]string{"vad", filepath.Join(dir, "missing.wav")}, 1, "no such file"},
	} {
		code, _, stderr := capture(t, tc.args...)
		assert.Equal(t, tc.code, code, "%v: %s", tc.args, stderr)
		assert.Contains(t, stderr, tc.msg, tc.args)
	}
}
