package vad

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	ort "github.com/yalue/onnxruntime_go"
)

// EnvModel names the environment variable holding the model path, used
// when Options.Model (the op's model parameter) is empty.
const EnvModel = "EDGE_VAD_MODEL"

// FetchCommand is what a user runs, from the repository root, to put the
// model into the cache.
const FetchCommand = "scripts/fetch-silero-vad.sh"

// ModelSHA256 is the sha256 of the Silero VAD v5 model that
// scripts/fetch-silero-vad.sh installs (silero_vad_v5.onnx of the npm
// package @ricky0123/vad-web 0.0.31, byte-identical to silero-vad's
// src/silero_vad/data/silero_vad.onnx at commit f0d880d, v5.1).
const ModelSHA256 = "2623a2953f6ff3d2c1e61740c6cdb7168133479b267dfef114a4a3cc5bdd788f"

// ErrModelNotFound is wrapped by FindModel's error when no model is
// configured and the cache is empty.
var ErrModelNotFound = errors.New("silero VAD model not found")

// ModelCachePath is where scripts/fetch-silero-vad.sh installs the model
// (whether or not it is there):
// ${XDG_CACHE_HOME:-~/.cache}/edge/models/silero-vad/v5/silero_vad_v5.onnx.
func ModelCachePath() (string, error) {
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cannot locate the model cache: %w (set XDG_CACHE_HOME or %s)", err, EnvModel)
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "edge", "models", "silero-vad", "v5", "silero_vad_v5.onnx"), nil
}

// FindModel returns the model to load: configured when it is not empty,
// else $EDGE_VAD_MODEL, else ../models/silero-vad/silero_vad_v5.onnx beside
// the running binary when it exists (the make dist tarballs' layout), else
// the cache. A configured or environment path
// that does not exist is an error (no silent fallback); an empty cache gives
// an error wrapping ErrModelNotFound that says what to run.
func FindModel(configured string) (string, error) {
	check := func(p, source string) (string, error) {
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("silero VAD model %s (from %s): %w", p, source, err)
		}
		if st.IsDir() {
			return "", fmt.Errorf("silero VAD model %s (from %s) is a directory; want the .onnx file", p, source)
		}
		return p, nil
	}
	if configured != "" {
		return check(configured, "the model option")
	}
	if env := os.Getenv(EnvModel); env != "" {
		return check(env, "$"+EnvModel)
	}
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		p := filepath.Join(filepath.Dir(exe), "..", "models", "silero-vad", "silero_vad_v5.onnx")
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return filepath.Clean(p), nil
		}
	}
	cached, err := ModelCachePath()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(cached); err != nil {
		return "", fmt.Errorf("%w: no model is configured, $%s is not set, and %s does not exist.\n"+
			"Run %s (from the edge repository) to fetch Silero VAD v5 into that cache, or set %s to a silero_vad.onnx (v5)",
			ErrModelNotFound, EnvModel, cached, FetchCommand, EnvModel)
	}
	return cached, nil
}

// Tensor names and sizes of Silero VAD v5 (and v6, which shares them).
const (
	inputName  = "input"
	stateName  = "state"
	srName     = "sr"
	outputName = "output"
	stateNName = "stateN"
	stateSize  = 128
)

// checkModel checks that the ONNX model at path has Silero VAD v5's
// interface: input f32 [B, context+window], state f32 [2, B, 128], sr i64
// scalar; output f32 [B, 1], stateN f32 [2, B, 128].
func checkModel(path string, ins, outs []ort.InputOutputInfo) error {
	want := []struct {
		list *[]ort.InputOutputInfo
		name string
		typ  ort.TensorElementDataType
		rank int
		dims []int64 // fixed dims (-1: any)
	}{
		{&ins, inputName, ort.TensorElementDataTypeFloat, 2, []int64{-1, -1}},
		{&ins, stateName, ort.TensorElementDataTypeFloat, 3, []int64{2, -1, stateSize}},
		{&ins, srName, ort.TensorElementDataTypeInt64, 0, nil},
		{&outs, outputName, ort.TensorElementDataTypeFloat, 2, []int64{-1, 1}},
		{&outs, stateNName, ort.TensorElementDataTypeFloat, 3, []int64{-1, -1, -1}},
	}
	names := func(l []ort.InputOutputInfo) []string {
		var s []string
		for _, i := range l {
			s = append(s, i.Name)
		}
		return s
	}
	if len(ins) != 3 || len(outs) != 2 {
		return fmt.Errorf("%s is not a Silero VAD v5 model: it has inputs %v and outputs %v, want [input state sr] and [output stateN]", path, names(ins), names(outs))
	}
	for _, w := range want {
		i := slices.IndexFunc(*w.list, func(x ort.InputOutputInfo) bool { return x.Name == w.name })
		if i < 0 {
			return fmt.Errorf("%s is not a Silero VAD v5 model: no tensor %q (inputs %v, outputs %v)", path, w.name, names(ins), names(outs))
		}
		info := (*w.list)[i]
		bad := info.DataType != w.typ || len(info.Dimensions) != w.rank
		for j, d := range w.dims {
			if !bad && d > 0 && info.Dimensions[j] > 0 && info.Dimensions[j] != d {
				bad = true
			}
		}
		if bad {
			return fmt.Errorf("%s is not a Silero VAD v5 model: %s is %v, want %s", path, w.name, info.String(), wantString(w.typ, w.rank, w.dims))
		}
	}
	return nil
}

func wantString(t ort.TensorElementDataType, rank int, dims []int64) string {
	if rank == 0 {
		return fmt.Sprintf("a %v scalar", t)
	}
	return fmt.Sprintf("%v of rank %d %v", t, rank, dims)
}
