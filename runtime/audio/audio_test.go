package audio

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMono(t *testing.T) {
	for _, c := range []struct {
		name     string
		channels int
		in, want []float32
	}{
		{"mono is unchanged", 1, []float32{0.5, -1, 0}, []float32{0.5, -1, 0}},
		{"stereo mean", 2, []float32{1, 0, -0.5, -0.5, 0.25, 0.75}, []float32{0.5, -0.5, 0.5}},
		{"three channels", 3, []float32{0.3, 0.6, 0.9, -1, -1, -1}, []float32{0.6, -1}},
		{"empty", 2, nil, []float32{}},
	} {
		t.Run(c.name, func(t *testing.T) {
			clip := &Clip{SampleRate: 8000, Channels: c.channels, Samples: c.in}
			got := clip.Mono()
			require.Len(t, got, len(c.want))
			for i := range got {
				assert.InDelta(t, c.want[i], got[i], 1e-7, "frame %d", i)
			}
		})
	}
	x := []float32{1, 2}
	assert.Same(t, &x[0], &(&Clip{SampleRate: 1, Channels: 1, Samples: x}).Mono()[0], "mono clip returns Samples itself")
}

func TestClipDuration(t *testing.T) {
	c := &Clip{SampleRate: 16000, Channels: 2, Samples: make([]float32, 2*24000)}
	assert.Equal(t, 24000, c.Frames())
	assert.Equal(t, 1500*time.Millisecond, c.Duration())
}

func writeFile(t *testing.T, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, b, 0o644))
	return p
}

func TestLoad(t *testing.T) {
	// 48 kHz stereo, 1 kHz in both channels at different levels: mono at
	// 16 kHz is a 1 kHz tone at the mean level.
	const frames = 48000
	x := make([]float64, 2*frames)
	for f, v := range sine(frames, 48000, 1000, 1) {
		x[2*f], x[2*f+1] = 0.6*float64(v), 0.2*float64(v)
	}
	s := float(32, 2)
	s.rate = 48000
	path := writeFile(t, "tone.wav", encodeWAV(s, x))

	y, err := Load(path, 16000)
	require.NoError(t, err)
	require.Len(t, y, 16000)
	amp, _ := tone(y[800:15200], 1000, 16000)
	assert.InDelta(t, 0.4, amp, 1e-5)

	// Same rate: just the downmix.
	y, err = Load(path, 48000)
	require.NoError(t, err)
	require.Len(t, y, frames)
	for _, f := range []int{0, 5, 12345} {
		assert.InDelta(t, 0.4*math.Sin(2*math.Pi*1000*float64(f)/48000), y[f], 1e-7, "frame %d", f)
	}
}

func TestLoadErrors(t *testing.T) {
	empty := writeFile(t, "empty.wav", encodeWAV(pcm(16, 1), nil))
	bad := writeFile(t, "bad.wav", []byte("RIFF\x04\x00\x00\x00XYZW"))
	odd := pcm(16, 1)
	odd.rate = 44101
	irregular := writeFile(t, "odd.wav", encodeWAV(odd, testSamples(10)))
	for _, c := range []struct {
		name, path string
		rate       int
		want       string
	}{
		{"missing", filepath.Join(t.TempDir(), "nope.wav"), 16000, "no such file"},
		{"directory", t.TempDir(), 16000, "is not a regular file"},
		{"no samples", empty, 16000, "empty.wav: audio: the file holds no samples"},
		{"malformed", bad, 16000, `bad.wav: wav: RIFF form type is "XYZW"`},
		{"bad target rate", bad, 0, "target sample rate 0 Hz out of range"},
		{"irregular rate", irregular, 16000, "odd.wav: audio: cannot resample 44101 Hz to 16000 Hz"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(c.path, c.rate)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
	_, err := Load(empty, 16000)
	assert.ErrorIs(t, err, ErrNoSamples)
}
