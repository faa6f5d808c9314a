// Command customop shows how a downstream Go program extends edge: it
// registers its own op ("example.peak_normalize") in init(), exactly like the
// built-in op families do, and runs it in a pipeline in front of the built-in
// fbank op.
//
//	go run ./examples/customop clip.wav
package main

import (
	"context"
	"fmt"
	"math"
	"os"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/audio"

	_ "github.com/edgespeech/edge/plugins/fbank" // registers "fbank"
)

// peakNormalize scales every item of pcm f32 [B, N] so that its largest
// absolute sample equals the "peak" parameter. Silent items stay silent.
type peakNormalize struct{ peak float32 }

func (o peakNormalize) Run(_ context.Context, in runtime.Tensors) (runtime.Tensors, error) {
	x := in["pcm"]
	y, err := runtime.NewTensor(runtime.F32, x.Shape())
	if err != nil {
		return nil, err
	}
	n := x.Shape()[x.Rank()-1]
	src, dst := x.F32(), y.F32()
	for start := 0; start < len(src); start += n {
		var m float32
		for _, v := range src[start : start+n] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return nil, fmt.Errorf("pcm item %d holds a non-finite sample", start/n)
			}
			m = max(m, float32(math.Abs(float64(v))))
		}
		if m == 0 {
			continue
		}
		for i, v := range src[start : start+n] {
			dst[start+i] = v * (o.peak / m)
		}
	}
	return runtime.Tensors{"pcm": y}, nil
}

func init() {
	runtime.Register(runtime.OpSpec{
		Name: "example.peak_normalize",
		Doc:  "Scales each item so its largest absolute sample equals peak.",
		Inputs: []runtime.TensorSpec{{Name: "pcm", DTypes: []runtime.DType{runtime.F32},
			Dims: []string{"B", "N"}, BatchOptional: true, Doc: "audio samples"}},
		Outputs: []runtime.TensorSpec{{Name: "pcm", DTypes: []runtime.DType{runtime.F32},
			Dims: []string{"B", "N"}, BatchOptional: true, Doc: "normalised audio"}},
		Params: []runtime.ParamSpec{{Name: "peak", Kind: runtime.Float, Default: 0.9, Doc: "target peak, (0, 1]"}},
		New: func(p runtime.Params, b runtime.Backend) (runtime.Op, error) {
			if b.Name() != "cpu" {
				return nil, fmt.Errorf("no %s implementation", b.Name())
			}
			peak := p.Float("peak")
			if !(peak > 0 && peak <= 1) {
				return nil, fmt.Errorf("peak %v must be in (0, 1]", peak)
			}
			return peakNormalize{peak: float32(peak)}, nil
		},
	})
}

// newPipeline wires the custom op in front of the built-in fbank op.
func newPipeline() (*runtime.Pipeline, error) {
	return runtime.NewPipeline(runtime.PipelineConfig{
		Inputs: []runtime.PipelineInput{{Name: "audio", DType: "f32", Rank: 2}},
		Steps: []runtime.StepConfig{
			{Name: "normalize", Op: "example.peak_normalize", Inputs: map[string]string{"pcm": "audio"}, Params: map[string]any{"peak": 0.5}},
			{Name: "frontend", Op: "fbank", Params: map[string]any{"preset": "whisper-80"}},
		},
		Outputs: []string{"features", "lengths"},
	}, runtime.CPU)
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: customop CLIP.wav")
		os.Exit(2)
	}
	if err := run(os.Args[1]); err != nil {
		fmt.Fprintln(os.Stderr, "customop:", err)
		os.Exit(1)
	}
}

func run(path string) error {
	pcm, err := audio.Load(path, 16000)
	if err != nil {
		return err
	}
	p, err := newPipeline()
	if err != nil {
		return err
	}
	x, err := runtime.FromSlice(runtime.F32, runtime.Shape{1, len(pcm)}, pcm)
	if err != nil {
		return err
	}
	out, stats, err := p.RunStats(context.Background(), runtime.Tensors{"audio": x})
	if err != nil {
		return err
	}
	defer out.Release()
	fmt.Printf("features %v, valid frames %v\n", out["features"].Shape(), out["lengths"].I64())
	for _, s := range stats.Steps {
		fmt.Fprintf(os.Stderr, "%-10s %v\n", s.Name, s.Duration)
	}
	return nil
}
