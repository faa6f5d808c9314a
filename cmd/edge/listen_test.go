package main

import (
	"bufio"
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

// writePCM writes clips as headerless PCM (s16le, or f32le) with gap
// seconds of silence after each, in channels interleaved copies.
func writePCM(t *testing.T, enc string, channels int, gap float64, clips ...string) string {
	t.Helper()
	var pcm []float32
	for _, c := range clips {
		x, err := audio.Load(c, 16000)
		require.NoError(t, err)
		pcm = append(pcm, x...)
		pcm = append(pcm, make([]float32, int(gap*16000))...)
	}
	var b []byte
	for _, v := range pcm {
		for range channels {
			if enc == "s16le" {
				b = binary.LittleEndian.AppendUint16(b, uint16(int16(math.Round(float64(v)*32767))))
			} else {
				b = binary.LittleEndian.AppendUint32(b, math.Float32bits(v))
			}
		}
	}
	b = append(b, 0x7f) // an incomplete last frame, dropped
	p := filepath.Join(t.TempDir(), "live."+enc)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

// TestListen: piped PCM with a pause gives one JSON line per utterance with
// the clips' texts, in both encodings and with stereo input.
func TestListen(t *testing.T) {
	second := "../../models/default/testdata/words_1.wav"
	for _, tc := range []struct {
		enc      string
		channels int
	}{{"s16le", 1}, {"f32le", 2}} {
		p := writePCM(t, tc.enc, tc.channels, 2, demoClip, second)
		code, out, stderr := capture(t, "listen", "--model", bundledModel, "--format", "jsonl",
			"--raw", tc.enc, "--rate", "16000", "--channels", []string{"", "1", "2"}[tc.channels], p)
		require.Equal(t, 0, code, stderr)
		var texts []string
		sc := bufio.NewScanner(strings.NewReader(out))
		for sc.Scan() {
			var doc struct {
				Utterance  int
				Start, End float64
				Text       string
				Words      []struct{ Word string }
			}
			require.NoError(t, json.Unmarshal(sc.Bytes(), &doc), sc.Text())
			assert.Equal(t, len(texts), doc.Utterance)
			assert.Less(t, doc.Start, doc.End)
			assert.Len(t, doc.Words, len(strings.Fields(doc.Text)))
			texts = append(texts, doc.Text)
		}
		assert.Equal(t, []string{demoText, "add split points to a spanner database"}, texts, tc.enc)
	}
	code, out, stderr := capture(t, "listen", "--model", bundledModel, second)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, "add split points to a spanner database\n", out, "a file, text format")
}

func TestListenErrors(t *testing.T) {
	p := writePCM(t, "s16le", 1, 0, demoClip)
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--raw", "u8", "--rate", "16000", p}, 2, `u8`},
		{[]string{"--raw", "s16le", "--rate", "8000", p}, 1, "--rate 8000: live input must be at the model's 16000 Hz"},
		{[]string{"--raw", "s16le", p}, 2, "needs --rate"},
		{[]string{"--format", "srt", p}, 2, `--format "srt": want text or jsonl`},
		{[]string{p, p}, 2, "at most one AUDIO"},
		{[]string{"--stream-chunk", "-1s", "--raw", "s16le", "--rate", "16000", p}, 1, "stream option Chunk"},
	} {
		code, _, stderr := capture(t, append([]string{"listen", "--model", bundledModel}, tc.args...)...)
		assert.Equal(t, tc.code, code, "%v: %s", tc.args, stderr)
		assert.Contains(t, stderr, tc.want, tc.args)
	}
	nan := filepath.Join(t.TempDir(), "nan.f32")
	require.NoError(t, os.WriteFile(nan, binary.LittleEndian.AppendUint32(make([]byte, 4000), math.Float32bits(float32(math.NaN()))), 0o644))
	code, _, stderr := capture(t, "listen", "--model", bundledModel, "--raw", "f32le", "--rate", "16000", nan)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "the f32le sample at byte 4000 is NaN")
}
