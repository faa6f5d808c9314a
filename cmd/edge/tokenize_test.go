package main

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/edgespeech/edge/codec"
	"github.com/edgespeech/edge/runtime/audio"
	"github.com/edgespeech/edge/runtime/npy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	codecDir    = "../../codec/testdata/encodec"
	codecGolden = "../../codec/testdata/encodec_golden/"
)

// TestTokenizeRoundTrip runs edge tokenize and edge detokenize on a golden
// clip: the codes equal transformers' encode(), the audio its decode().
func TestTokenizeRoundTrip(t *testing.T) {
	out := t.TempDir()
	for _, tc := range []struct {
		args   []string
		suffix string
	}{{nil, ""}, {[]string{"--bandwidth", "1.5"}, "_q2"}, {[]string{"--codebooks", "2"}, "_q2"}} {
		args := append([]string{"tokenize", "--codec", codecDir, "--out", out}, tc.args...)
		code, _, stderr := capture(t, append(args, codecGolden+"clip0.wav")...)
		require.Equal(t, 0, code, stderr)
		got, err := npy.ReadFile(filepath.Join(out, "clip0.npy"))
		require.NoError(t, err)
		want, err := npy.ReadFile(codecGolden + "clip0_codes" + tc.suffix + ".npy")
		require.NoError(t, err)
		require.Equal(t, want.Shape(), got.Shape())
		require.Equal(t, want.I32(), got.I32(), "codes %v", tc.args)

		wav := filepath.Join(out, "clip0.wav")
		code, _, stderr = capture(t, "detokenize", "--codec", codecDir, "--out", wav, filepath.Join(out, "clip0.npy"))
		require.Equal(t, 0, code, stderr)
		pcm, err := audio.Load(wav, 24000)
		require.NoError(t, err)
		ref, err := npy.ReadFile(codecGolden + "clip0_audio" + tc.suffix + ".npy")
		require.NoError(t, err)
		require.Len(t, pcm, len(ref.F32()))
		worst := 0.0
		for i, v := range ref.F32() {
			worst = max(worst, math.Abs(float64(v-pcm[i])))
		}
		assert.LessOrEqual(t, worst, 1e-4, tc.args)
	}
	code, _, stderr := capture(t, "tokenize", "--codec", codecDir, "--format", "jsonl", "--out", out, codecGolden+"clip1.wav", codecGolden+"clip2.wav")
	require.Equal(t, 0, code, stderr)
	b, err := os.ReadFile(filepath.Join(out, "codes.jsonl"))
	require.NoError(t, err)
	assert.Contains(t, string(b), `"frames":27`)
	assert.Contains(t, string(b), `"frames":15`)

	code, _, stderr = capture(t, "tokenize", "--codec", codecDir, "--format", "safetensors", "--out", out, codecGolden+"clip1.wav", codecGolden+"clip2.wav")
	require.Equal(t, 0, code, stderr)
	shard := filepath.Join(out, "codes.safetensors")
	want, err := npy.ReadFile(codecGolden + "clip2_codes.npy")
	require.NoError(t, err)
	ts, err := codec.ReadCodesSafetensors(shard)
	require.NoError(t, err)
	require.Equal(t, want.I32(), ts["clip2"].Data)
	code, _, stderr = capture(t, "detokenize", "--codec", codecDir, "--name", "clip2", "--out", filepath.Join(out, "c2.wav"), shard)
	require.Equal(t, 0, code, stderr)
	code, _, stderr = capture(t, "detokenize", "--codec", codecDir, "--out", filepath.Join(out, "c2.wav"), shard)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "name one with --name")
}

func TestTokenizeErrors(t *testing.T) {
	dir := t.TempDir()
	short := filepath.Join(dir, "short.wav")
	require.NoError(t, os.WriteFile(short, wavBytes(24000, make([]float32, 100)), 0o644))
	bad := filepath.Join(dir, "bad.npy")
	require.NoError(t, os.WriteFile(bad, []byte("nope"), 0o644))
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"tokenize", "--out", dir, short}, 2, "need --codec DIR"},
		{[]string{"tokenize", "--codec", codecDir, "--out", dir, "--format", "csv", short}, 2, "unknown --format"},
		{[]string{"tokenize", "--codec", codecDir, "--out", dir, "--bandwidth", "1.5", "--codebooks", "2", short}, 2, "not both"},
		{[]string{"tokenize", "--codec", codecDir, "--out", dir, "--bandwidth", "6", short}, 1, "target_bandwidths"},
		{[]string{"tokenize", "--codec", codecDir, "--out", dir, "--codebooks", "9", short}, 2, "want 1..4"},
		{[]string{"tokenize", "--codec", codecDir, "--out", dir, short}, 1, "at least one frame"},
		{[]string{"tokenize", "--codec", dir, "--out", dir, short}, 1, "config.json"},
		{[]string{"tokenize", "--codec", codecDir, "--backend", "tpu", "--out", dir, short}, 1, "--backend tpu"},
		{[]string{"tokenize", "--codec", codecDir, "--execution-provider", "tpu", "--out", dir, short}, 2, `--execution-provider "tpu" is not cpu or cuda`},
		{[]string{"tokenize", "--codec", codecDir, "--execution-provider", "cuda", "--ort-cuda-ep", "/no/ep.so", "--out", dir, short}, 1, "/no/ep.so"},
		{[]string{"detokenize", "--codec", codecDir, "--out", filepath.Join(dir, "x.wav"), bad}, 1, "bad.npy"},
	} {
		code, _, stderr := capture(t, tc.args...)
		assert.Equal(t, tc.code, code, "%v: %s", tc.args, stderr)
		assert.Contains(t, stderr, tc.msg, tc.args)
	}
}
