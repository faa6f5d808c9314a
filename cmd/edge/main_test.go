package main

import (
	"context"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/npy"
)

// capture runs the CLI in-process and returns its exit code, stdout and stderr.
func capture(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	oldOut, oldErr := os.Stdout, os.Stderr
	ro, wo, _ := os.Pipe()
	re, we, _ := os.Pipe()
	os.Stdout, os.Stderr = wo, we
	outc, errc := make(chan string), make(chan string)
	go func() { b, _ := io.ReadAll(ro); outc <- string(b) }()
	go func() { b, _ := io.ReadAll(re); errc <- string(b) }()
	code := run(context.Background(), args)
	wo.Close()
	we.Close()
	os.Stdout, os.Stderr = oldOut, oldErr
	return code, <-outc, <-errc
}

func TestOpsJSON(t *testing.T) {
	code, out, _ := capture(t, "ops", "--format", "json")
	require.Equal(t, 0, code)
	var ops []opJSON
	require.NoError(t, json.Unmarshal([]byte(out), &ops))
	byName := map[string]opJSON{}
	for _, o := range ops {
		byName[o.Name] = o
	}
	names := make([]string, 0, len(ops))
	for _, o := range ops {
		names = append(names, o.Name)
	}
	assert.Subset(t, names, []string{"fbank", "ctc_align", "ctc_greedy", "viterbi", "dtw", "rvq_encode", "rvq_decode"})
	assert.Equal(t, "pcm", byName["fbank"].Inputs[0].Name)
	code, out, _ = capture(t, "ops")
	require.Equal(t, 0, code)
	assert.Contains(t, out, "fbank\n")
}

func TestOpRunsFromNpy(t *testing.T) {
	dir := t.TempDir()
	// 3 frames x 2 states + uniform transitions: the best path follows the emissions.
	em := runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{1, 3, 2}, []float32{0, -5, -5, 0, 0, -5}))
	tr := runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{2, 2}, []float32{-1, -1, -1, -1}))
	pr := runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{2}, []float32{0, 0}))
	for name, x := range map[string]*runtime.Tensor{"em": em, "tr": tr, "pr": pr} {
		require.NoError(t, npy.WriteFile(filepath.Join(dir, name+".npy"), x))
	}
	out := filepath.Join(dir, "out")
	code, _, stderr := capture(t, "op", "viterbi",
		"--in", "emissions="+filepath.Join(dir, "em.npy"),
		"--in", "transitions="+filepath.Join(dir, "tr.npy"),
		"--in", "priors="+filepath.Join(dir, "pr.npy"), "--out", out)
	require.Equal(t, 0, code, stderr)
	path, err := npy.ReadFile(filepath.Join(out, "path.npy"))
	require.NoError(t, err)
	assert.Equal(t, []int32{0, 1, 0}, path.I32())
}

func TestOpErrors(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "bad.npy"), []byte("not an npy file"), 0o644))
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"op", "fbank"}, 2, "need one op NAME and --out DIR"},
		{[]string{"op", "nope", "--out", dir}, 1, `unknown op "nope"`},
		{[]string{"op", "fbank", "--set", "preset=whisper-80", "--set", "n_ftt=3", "--out", dir}, 1, `unknown parameter "n_ftt"`},
		{[]string{"op", "fbank", "--set", "preset", "--out", dir}, 2, `--set "preset": want KEY=VALUE`},
		{[]string{"op", "fbank", "--set", "preset=whisper-80", "--in", "pcm", "--out", dir}, 2, `--in "pcm": want NAME=FILE.npy`},
		{[]string{"op", "fbank", "--set", "preset=whisper-80", "--in", "pcm=" + filepath.Join(dir, "bad.npy"), "--out", dir}, 1, "bad magic"},
		{[]string{"op", "fbank", "--set", "preset=whisper-80", "--out", dir}, 1, `missing input "pcm"`},
		{[]string{"op", "fbank", "--backend", "tpu", "--set", "preset=whisper-80", "--out", dir}, 1, `unknown backend "tpu"`},
	} {
		code, _, stderr := capture(t, tc.args...)
		assert.Equal(t, tc.code, code, "%v: %s", tc.args, stderr)
		assert.Contains(t, stderr, tc.want, "%v", tc.args)
	}
}

func TestConfigFileAndEnvFeedOpParams(t *testing.T) {
	dir := t.TempDir()
	cfg := filepath.Join(dir, "edge.yaml")
	require.NoError(t, os.WriteFile(cfg, []byte("ops:\n  fbank:\n    preset: whisper-80\n"), 0o644))
	pcm := make([]float32, 1600)
	require.NoError(t, npy.WriteFile(filepath.Join(dir, "pcm.npy"), runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{1600}, pcm))))
	run := func(extra ...string) (int, string) {
		args := append([]string{"op", "fbank", "--config", cfg, "--in", "pcm=" + filepath.Join(dir, "pcm.npy"), "--out", filepath.Join(dir, "o")}, extra...)
		code, _, stderr := capture(t, args...)
		return code, stderr
	}
	code, stderr := run()
	require.Equal(t, 0, code, stderr)
	f, err := npy.ReadFile(filepath.Join(dir, "o", "features.npy"))
	require.NoError(t, err)
	assert.Equal(t, 80, f.Shape()[1], "preset from the config file")

	t.Setenv("EDGE_OPS__FBANK__PRESET", "whisper-128")
	code, stderr = run()
	require.Equal(t, 0, code, stderr)
	f, _ = npy.ReadFile(filepath.Join(dir, "o", "features.npy"))
	assert.Equal(t, 128, f.Shape()[1], "environment beats the file")

	code, stderr = run("--set", "preset=whisper-80")
	require.Equal(t, 0, code, stderr)
	f, _ = npy.ReadFile(filepath.Join(dir, "o", "features.npy"))
	assert.Equal(t, 80, f.Shape()[1], "--set beats the environment")

	t.Setenv("EDGE_NO_SUCH_KEY", "1")
	code, stderr = run()
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, `unknown config key "no_such_key"`)
}
