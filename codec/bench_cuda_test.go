//go:build cuda

package codec

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/edgespeech/edge/plugins/rvq"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/cuda"
	"github.com/edgespeech/edge/runtime/cuda/cudatest"
	"github.com/edgespeech/edge/runtime/npy"
)

// EnvBenchModel names the directory scripts/bench/codec_gpu.py writes for
// BenchmarkCUDATokenize: model.yaml + encoder.onnx (an EnCodec-24kHz-sized
// encoder exported as pcm [B, N] -> latents [B, T, D], its output named
// log_probs so that the encoder op runs it with device-resident input and
// output), tokens.txt (one token per latent dimension, so the encoder
// op's check of the output width against the vocabulary passes) and
// codebooks.npy (f32 [Q, K, D]).
const EnvBenchModel = "EDGE_CODEC_BENCH_MODEL"

// rate is the benchmark audio's sample rate (EnCodec 24 kHz).
const rate = 24000

// BenchmarkCUDATokenize times the whole tokenisation path on the GPU: a
// batch of B clips of N samples already in device memory, the encoder on
// ONNX Runtime's CUDA EP (the encoder op with bind=device: its input bound
// where it is, its output moved into a device tensor on the same stream),
// then rvq_encode_f32 reading those latents in place ([B, T, D], the layout
// it takes) for Q = 8 and 32 codebooks. Nothing but 8-byte status words and
// lengths crosses to the host. Three encoder configurations: tf32 (the
// CUDA EP's default math), tf32_exhaustive (cuDNN's exhaustive algorithm
// search: the batch has one shape) and fp32 (use_tf32=0). Reported per call (median device time, CUDA
// events): enc-ms (the encoder op), rvq-ms (DeviceCodebooks.Encode), and
// audio-h/s, hours of 24 kHz audio tokenised a second by the two together.
// $EDGE_CODEC_BENCH_B and $EDGE_CODEC_BENCH_SECONDS set the batch (default
// 16 clips of 10 s); $EDGE_CODEC_BENCH_PROFILE=PREFIX writes ONNX Runtime's
// profile of each configuration's encoder to PREFIX_<name>_<time>.json.
//
//	codec.test -test.run '^$' -test.bench CUDATokenize -test.benchtime 10x
func BenchmarkCUDATokenize(b *testing.B) {
	dir := os.Getenv(EnvBenchModel)
	if dir == "" {
		b.Skipf("$%s is not set (scripts/bench/codec_gpu.py sets it)", EnvBenchModel)
	}
	be, err := cudatest.Open()
	if err != nil {
		b.Fatal(err)
	}
	batch, seconds := envInt(b, "EDGE_CODEC_BENCH_B", 16), envInt(b, "EDGE_CODEC_BENCH_SECONDS", 10)
	n := seconds * rate
	books, err := npy.ReadFile(filepath.Join(dir, "codebooks.npy"))
	if err != nil {
		b.Fatal(err)
	}
	sh := books.Shape()
	if len(sh) != 3 {
		b.Fatalf("codebooks.npy has shape %v, want [Q, K, D]", sh)
	}
	rng := rand.New(rand.NewPCG(24, 1))
	pcm := make([]float32, batch*n)
	for i := range pcm {
		t := float64(i%n) / rate
		pcm[i] = float32(0.3*math.Sin(2*math.Pi*(150+float64(i/n)*20)*t) + 0.05*rng.NormFloat64())
	}
	host, err := runtime.FromSlice(runtime.F32, runtime.Shape{batch, n}, pcm)
	if err != nil {
		b.Fatal(err)
	}
	dev, err := be.Upload(host)
	if err != nil {
		b.Fatal(err)
	}
	in := runtime.Tensors{"pcm": dev}
	for _, cfg := range []struct {
		name   string
		params map[string]any
	}{
		{"tf32", nil},
		{"tf32_exhaustive", map[string]any{"cudnn_conv_algo_search": "EXHAUSTIVE"}},
		{"fp32", map[string]any{"cuda_tf32": false}},
	} {
		params := map[string]any{"model": dir, "execution_provider": "cuda"}
		for k, v := range cfg.params {
			params[k] = v
		}
		if prefix := os.Getenv("EDGE_CODEC_BENCH_PROFILE"); prefix != "" {
			params["ort_profile"] = prefix + "_" + cfg.name // its timings include the profiler's cost
		}
		benchTokenize(b, be, params, cfg.name, in, books, batch, seconds)
	}
}

// benchTokenize runs BenchmarkCUDATokenize's sub-benchmarks for one
// encoder configuration, named name.
func benchTokenize(b *testing.B, be *cuda.Backend, params map[string]any, name string, in runtime.Tensors, books *runtime.Tensor, batch, seconds int) {
	n := seconds * rate
	enc, err := runtime.New("encoder", params, be)
	if err != nil {
		b.Fatal(err)
	}
	defer enc.Close()
	if d, ok := enc.Op().(interface{ DeviceIO() bool }); !ok || !d.DeviceIO() {
		b.Fatal("the encoder op does not bind device memory (execution_provider=cuda, bind=device): not the zero-copy path")
	}
	sh := books.Shape()
	ctx := context.Background()
	out, err := enc.Run(ctx, in) // warm-up; also gives T
	if err != nil {
		b.Fatal(err)
	}
	lat := out["log_probs"]
	T, D := lat.Shape()[1], lat.Shape()[2]
	if D != sh[2] {
		b.Fatalf("latents [B, %d, %d], codebooks %v", T, D, sh)
	}
	release(out)
	all := books.Data().([]float32)
	for _, q := range []int{8, 32} {
		if q > sh[0] {
			continue
		}
		b.Run(fmt.Sprintf("%s/B%d_%ds_Q%d_K%d_D%d", name, batch, seconds, q, sh[1], D), func(b *testing.B) {
			stages := make([][]float32, q)
			for s := range stages {
				stages[s] = all[s*sh[1]*D : (s+1)*sh[1]*D]
			}
			c, err := rvq.NewCodebooksF32(D, stages...)
			if err != nil {
				b.Fatal(err)
			}
			dc, err := rvq.NewDeviceCodebooks(be, c)
			if err != nil {
				b.Fatal(err)
			}
			defer dc.Free()
			codes, err := be.Malloc(int64(4 * batch * T * q))
			if err != nil {
				b.Fatal(err)
			}
			defer codes.Free()
			quant, err := be.Malloc(int64(4 * batch * T * D))
			if err != nil {
				b.Fatal(err)
			}
			defer quant.Free()
			var encT, rvqT, total []time.Duration
			b.ResetTimer()
			for range b.N {
				var out runtime.Tensors
				start := time.Now()
				d, err := be.Time(func() error {
					var err error
					out, err = enc.Run(ctx, in)
					return err
				})
				if err != nil {
					b.Fatal(err)
				}
				encT = append(encT, d)
				x, err := cuda.Ptr(out["log_probs"])
				if err != nil {
					b.Fatal(err)
				}
				d, err = be.Time(func() error { return dc.Encode(x, rvq.Batch{B: batch, T: T}, codes.Ptr(), quant.Ptr()) })
				if err != nil {
					b.Fatal(err)
				}
				rvqT = append(rvqT, d)
				total = append(total, time.Since(start))
				release(out)
			}
			e, r := cudatest.MedianMicros(encT), cudatest.MedianMicros(rvqT)
			hours := float64(batch*n) / rate / 3600
			b.ReportMetric(e/1e3, "enc-ms")
			b.ReportMetric(r/1e3, "rvq-ms")
			b.ReportMetric(cudatest.MedianMicros(total)/1e3, "wall-ms")
			b.ReportMetric(hours/((e+r)*1e-6), "audio-h/s")
		})
	}
}

// release frees the device tensors of an op's outputs.
func release(ts runtime.Tensors) {
	for _, t := range ts {
		if buf := t.Buffer(); buf != nil {
			_ = buf.Free()
		}
	}
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("$%s = %q, want a positive integer", name, v)
	}
	return n
}
