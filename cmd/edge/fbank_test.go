package main

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/npy"
)

const fbankTestdata = "../../plugins/fbank/testdata"

func TestFbankCommand(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		preset, golden string
		shape          runtime.Shape
		extra          []string
	}{
		{"whisper-80", "whisper-80__speech_a__np", runtime.Shape{80, 200}, nil},
		{"parakeet-128", "parakeet-128__speech_b", runtime.Shape{151, 128}, nil},
		{"parakeet-80", "", runtime.Shape{80, 151}, []string{"--set", "layout=mel_time"}},
	} {
		t.Run(tc.preset, func(t *testing.T) {
			clip := "speech_a.wav"
			if tc.preset != "whisper-80" {
				clip = "speech_b.wav"
			}
			out := filepath.Join(dir, tc.preset+".npy")
			args := append([]string{"fbank", "--preset", tc.preset, filepath.Join(fbankTestdata, clip), "--out", out}, tc.extra...)
			code, _, stderr := capture(t, args...)
			require.Equal(t, 0, code, stderr)
			require.Contains(t, stderr, "valid frames")
			got, err := npy.ReadFile(out)
			require.NoError(t, err)
			require.Equal(t, tc.shape, got.Shape())
			if tc.golden == "" {
				return
			}
			want, err := npy.ReadFile(filepath.Join(fbankTestdata, "golden", tc.golden+".npy"))
			require.NoError(t, err)
			for i, v := range want.F32() {
				require.InDelta(t, v, got.F32()[i], 1e-3, "element %d", i)
			}
		})
	}
}

func TestFbankCommandNpyInput(t *testing.T) {
	dir := t.TempDir()
	x := make([]float32, 1600)
	for i := range x {
		x[i] = float32(math.Sin(float64(i) / 5))
	}
	in := filepath.Join(dir, "pcm.npy")
	require.NoError(t, npy.WriteFile(in, runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{1600}, x))))
	out := filepath.Join(dir, "f.npy")
	code, _, stderr := capture(t, "fbank", "--preset", "whisper-128", "--set", "pad_to_seconds=1", in, "--out", out)
	require.Equal(t, 0, code, stderr)
	got, err := npy.ReadFile(out)
	require.NoError(t, err)
	require.Equal(t, runtime.Shape{128, 100}, got.Shape())
}

func TestFbankCommandErrors(t *testing.T) {
	wav := filepath.Join(fbankTestdata, "short.wav")
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no preset", []string{"fbank", wav, "--out", "x.npy"}, 2, "need --preset"},
		{"no out", []string{"fbank", "--preset", "whisper-80", wav}, 2, "need one AUDIO file and --out"},
		{"bad set", []string{"fbank", "--preset", "whisper-80", "--set", "n_fft", wav, "--out", "x.npy"}, 2, `--set "n_fft": want KEY=VALUE`},
		{"bad knob value", []string{"fbank", "--preset", "whisper-80", "--set", "n_fft=abc", wav, "--out", "x.npy"}, 1, `"abc" is not an integer`},
		{"missing file", []string{"fbank", "--preset", "whisper-80", "/nonexistent.wav", "--out", "x.npy"}, 1, "nonexistent.wav"},
		{"unknown device", []string{"fbank", "--preset", "whisper-80", "--device", "tpu", wav, "--out", "x.npy"}, 1, `unknown backend "tpu"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := capture(t, tc.args...)
			require.Equal(t, tc.code, code, stderr)
			require.Contains(t, stderr, tc.want)
		})
	}
}
