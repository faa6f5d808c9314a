package onnx

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/edgespeech/edge/runtime"
)

// 30 s of input: 3000 feature frames at a 10 ms hop, or 480000 samples at 16 kHz.
const (
	benchFrames  = 3000
	benchSamples = 480000
	benchSeconds = 30.0
)

func randomF32(shape runtime.Shape, seed uint64) *runtime.Tensor {
	r := rand.New(rand.NewPCG(seed, 1))
	return f32(shape, func(int) float32 { return float32(r.NormFloat64()) })
}

type benchCase struct {
	name, model, input string
	x                  *runtime.Tensor
}

func benchCases() []benchCase {
	return []benchCase{
		{"nemo", "testdata/nemo", "features", randomF32(runtime.Shape{1, 128, benchFrames}, 1)},
		{"w2v", "testdata/w2v", "pcm", randomF32(runtime.Shape{1, benchSamples}, 2)},
	}
}

// BenchmarkEncoder measures one 30 s clip through the encoder op (input
// checks, normalisation, session run, output conversion). rtf is wall time
// per second of audio.
func BenchmarkEncoder(b *testing.B) {
	for _, bc := range benchCases() {
		for _, threads := range []int{1, 2, 0} {
			b.Run(fmt.Sprintf("%s/30s/threads=%d", bc.name, threads), func(b *testing.B) {
				enc := newEncoder(b, map[string]any{"model": bc.model, "threads": threads})
				in := runtime.Tensors{bc.input: bc.x}
				if _, err := enc.Run(context.Background(), in); err != nil { // warm-up: the first run plans memory
					b.Fatal(err)
				}
				b.SetBytes(bc.x.Bytes())
				b.ReportAllocs()
				for b.Loop() {
					if _, err := enc.Run(context.Background(), in); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/benchSeconds, "rtf")
			})
		}
	}
}

// BenchmarkRawSession runs the same models through onnxruntime_go directly
// (no checks, no normalisation, no conversion): the difference to
// BenchmarkEncoder is the op's overhead.
func BenchmarkRawSession(b *testing.B) {
	for _, bc := range benchCases() {
		b.Run(bc.name+"/30s/threads=1", func(b *testing.B) {
			e, err := Open(bc.model, Options{Threads: 1})
			if err != nil {
				b.Fatal(err)
			}
			defer e.Close()
			shape := bc.x.Shape()
			dims := make(ort.Shape, len(shape))
			for i, d := range shape {
				dims[i] = int64(d)
			}
			x, err := ort.NewTensor(dims, bc.x.F32())
			if err != nil {
				b.Fatal(err)
			}
			defer x.Destroy()
			ins := []ort.Value{x}
			if e.sig.inLengths != nil {
				l, err := ort.NewTensor(ort.NewShape(1), []int64{int64(shape[len(shape)-1])})
				if err != nil {
					b.Fatal(err)
				}
				defer l.Destroy()
				ins = append(ins, l)
			}
			nOut := 1
			if e.sig.outLengths != nil {
				nOut = 2
			}
			run := func() error {
				outs := make([]ort.Value, nOut)
				err := e.sess.Run(ins, outs)
				for _, o := range outs {
					if o != nil {
						o.Destroy()
					}
				}
				return err
			}
			if err := run(); err != nil { // warm-up
				b.Fatal(err)
			}
			b.SetBytes(bc.x.Bytes())
			b.ReportAllocs()
			for b.Loop() {
				if err := run(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/benchSeconds, "rtf")
		})
	}
}

// BenchmarkInterleaved alternates the encoder (threads=2) with CPU-bound Go
// work on two goroutines, as a pipeline alternates fbank and alignment with
// the encoder, with ONNX Runtime's idle threads spinning or not.
func BenchmarkInterleaved(b *testing.B) {
	work := func() {
		var wg sync.WaitGroup
		for g := range 2 {
			wg.Go(func() {
				x := float64(g)
				for i := range 2_000_000 {
					x += math.Sqrt(float64(i))
				}
				sink.Add(int64(x))
			})
		}
		wg.Wait()
	}
	x := randomF32(runtime.Shape{1, 128, benchFrames}, 7)
	for _, spin := range []bool{false, true} {
		b.Run(fmt.Sprintf("spin=%v", spin), func(b *testing.B) {
			enc := newEncoder(b, map[string]any{"model": "testdata/nemo", "threads": 2, "spin": spin})
			in := runtime.Tensors{"features": x}
			for b.Loop() {
				work()
				if _, err := enc.Run(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

var sink atomic.Int64
