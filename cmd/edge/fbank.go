package main

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/edgespeech/edge/plugins/fbank"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/audio"
	"github.com/edgespeech/edge/runtime/npy"
)

const fbankUsage = "--preset NAME [--set KEY=VALUE ...] [--device cpu] AUDIO --out FILE.npy"

func init() {
	register(command{name: "fbank", usage: fbankUsage,
		summary: "log-mel features of one audio file (any supported format, or f32 npy samples) to an npy file", run: runFbank})
}

// runFbank computes the features of one clip. AUDIO is an audio file (decoded,
// downmixed and resampled to the preset's sample rate) or an .npy file of
// f32 samples already at that rate. The output is float32 in the preset's
// layout without the batch dimension: [n_mels, T] or [T, n_mels].
func runFbank(ctx context.Context, args []string) error {
	fs := newFlags("fbank", fbankUsage)
	fs.String("preset", "", "frontend preset: "+strings.Join(fbank.Presets(), ", "))
	sets := fs.StringArray("set", nil, "fbank parameter as KEY=VALUE (repeatable), e.g. num_mels=128; see 'edge ops'")
	fs.String("device", "cpu", "backend to run on: "+strings.Join(runtime.Backends(), ", "))
	out := fs.String("out", "", "output .npy file")
	fs.String("config", "", "YAML config file (ops.fbank.* are parameters; layered: file < EDGE_* env < flags)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *out == "" {
		return fmt.Errorf("need one AUDIO file and --out FILE.npy: %w", errUsage)
	}
	k, err := loadConfig(fs, map[string]any{"device": "cpu"})
	if err != nil {
		return err
	}
	params, err := opParams(k, "fbank", *sets)
	if err != nil {
		return err
	}
	if p := k.String("preset"); p != "" {
		params["preset"] = p
	}
	if _, ok := params["preset"]; !ok {
		return fmt.Errorf("need --preset (one of %s): %w", strings.Join(fbank.Presets(), ", "), errUsage)
	}
	b, err := runtime.OpenBackend(k.String("device"))
	if err != nil {
		return err
	}
	defer b.Close()
	inst, err := runtime.New("fbank", params, b)
	if err != nil {
		return err
	}
	cfg, err := fbank.ConfigFromParams(inst.Params)
	if err != nil {
		return err
	}
	pcm, err := loadPCM(fs.Arg(0), cfg.SampleRate)
	if err != nil {
		return err
	}
	res, err := inst.Run(ctx, runtime.Tensors{"pcm": pcm})
	if err != nil {
		return err
	}
	defer res.Release()
	feats, err := b.Download(res["features"])
	if err != nil {
		return err
	}
	if feats, err = feats.Reshape(feats.Shape()[1:]); err != nil {
		return err
	}
	if err := npy.WriteFile(*out, feats); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s %v (%d valid frames, layout %s)\n", *out, feats, res["lengths"].I64()[0], cfg.Layout)
	return nil
}

// loadPCM reads AUDIO as mono f32 samples at rate: .npy files must hold f32
// [N] already at that rate; anything else goes through audio.Load.
func loadPCM(path string, rate int) (*runtime.Tensor, error) {
	if strings.HasSuffix(strings.ToLower(path), ".npy") {
		t, err := npy.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if t.DType() != runtime.F32 || t.Rank() != 1 {
			return nil, fmt.Errorf("%s: samples are %v, want f32 [N] at %d Hz", path, t, rate)
		}
		return t, nil
	}
	x, err := audio.Load(path, rate)
	if err != nil {
		return nil, err
	}
	return runtime.FromSlice(runtime.F32, runtime.Shape{len(x)}, x)
}
