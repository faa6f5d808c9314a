package main

import (
	"context"
	"fmt"
	"os"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/audio"
	"github.com/edgespeech/edge/runtime/npy"
)

const emissionsUsage = "[--model DIR] --out FILE.npy AUDIO"

func init() {
	register(command{name: "emissions", usage: emissionsUsage,
		summary: "the encoder's CTC log-probabilities [T', V] (f32, log-softmax applied) as .npy, for debugging and outside aligners",
		run:     runEmissions})
}

func runEmissions(ctx context.Context, args []string) error {
	fs := newFlags("emissions", emissionsUsage)
	fs.String("out", "", "the .npy file to write (required)")
	fs.Float64("chunk-seconds", 10, "longest piece of audio encoded at once; longer audio is chunked with overlap and stitched")
	modelFlags(fs)
	batchFlags(fs)
	// The encoder's own emissions of every frame: VAD (which replaces the
	// frames outside speech by blank) only when asked for.
	vadFlag := fs.Lookup("vad")
	_ = vadFlag.Value.Set("false")
	vadFlag.DefValue = "false"
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("need one AUDIO file: %w", errUsage)
	}
	k, err := loadConfig(fs, nil)
	if err != nil {
		return err
	}
	out := k.String("out")
	if out == "" {
		return fmt.Errorf("--out FILE.npy is required: %w", errUsage)
	}
	rec, err := openRecognizer(k)
	if err != nil {
		return err
	}
	defer rec.Close()
	pcm, err := audio.Load(fs.Arg(0), rec.Manifest().SampleRate)
	if err != nil {
		return err
	}
	lp, T, err := rec.Emissions(ctx, pcm)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	V := rec.Manifest().Vocab.Len()
	t, err := runtime.FromSlice(runtime.F32, runtime.Shape{T, V}, lp)
	if err != nil {
		return err
	}
	if err := npy.WriteFile(out, t); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "%s: log-probs [%d, %d] (%g s per frame, blank %d) -> %s\n", fs.Arg(0), T, V, rec.Manifest().FrameStride, rec.Manifest().BlankID, out)
	return nil
}
