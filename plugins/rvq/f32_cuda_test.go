//go:build cuda

package rvq

// Parity of the fp32-codebook kernel (rvq_encode_f32, and rvq_decode with
// fp32 words) with the CPU op: codes identical, quantized bit-identical, on
// random data, on planted near ties (score gaps of a few ulps, where any
// rounding difference would flip a code) and through the registered op.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/cuda"
	"github.com/edgespeech/edge/runtime/cuda/cudatest"
)

// synthF32 is synth's data with fp32 codebooks that bf16 cannot hold: each
// value moved by a random relative 2^-12 or less.
func synthF32(rng *rand.Rand, frames, q, k, d int) ([][]float32, []float32) {
	books, x, _ := synth(rng, frames, q, k, d)
	out := make([][]float32, q)
	for s, b := range books {
		out[s] = make([]float32, len(b))
		for i, w := range b {
			v := BF16ToFloat32(w)
			out[s][i] = v * (1 + float32(rng.Float64()-0.5)*0x1p-11)
		}
	}
	return out, x
}

// gpuRoundTrip encodes x on the device with c, then decodes the codes on
// the device, and returns codes, Encode's quantized and Decode's.
func gpuRoundTrip(t *testing.T, c *Codebooks, x []float32, bt Batch) ([]int32, []float32, []float32) {
	t.Helper()
	be := cudatest.Backend(t)
	dc, err := NewDeviceCodebooks(be, c)
	require.NoError(t, err)
	defer dc.Free()
	n, q, d := bt.B*bt.T, c.NumStages(), c.Dim()
	codes, quant, dec := devOut(t, be, n*q), devOut(t, be, n*d), devOut(t, be, n*d)
	require.NoError(t, dc.Encode(devF32(t, be, x), bt, codes, quant))
	require.NoError(t, dc.Decode(codes, bt, dec))
	hc, hq, hd := make([]int32, n*q), make([]float32, n*d), make([]float32, n*d)
	require.NoError(t, be.DeviceToHost(cuda.Bytes(hc), codes))
	require.NoError(t, be.DeviceToHost(cuda.Bytes(hq), quant))
	require.NoError(t, be.DeviceToHost(cuda.Bytes(hd), dec))
	return hc, hq, hd
}

// TestCUDAF32MatchesCPU covers the contract's range with fp32 codebooks: Q
// 1-32, K from 1 to 4096 and not a power of two, D from 1 to 1024 and not a
// multiple of 64 (the kernel's zero padding), ragged lengths and a split.
func TestCUDAF32MatchesCPU(t *testing.T) {
	shapes := [][6]int{ // B, T, Q, K, D, split
		{2, 301, 8, 1024, 128, 0}, {1, 2048, 32, 1024, 128, 0}, {3, 65, 4, 129, 96, 1}, {1, 257, 3, 1000, 1024, 0},
		{2, 200, 4, 4096, 100, 2}, {1, 130, 2, 1, 64, 0}, {1, 1, 8, 1024, 128, 0}, {4, 33, 5, 300, 1, 0},
		{2, 150, 8, 2048, 256, 1}, {1, 64, 2, 256, 8, 0}, {1, 63, 2, 2048, 512, 0},
	}
	for i, s := range shapes {
		B, T, Q, K, D, split := s[0], s[1], s[2], s[3], s[4], s[5]
		t.Run(fmt.Sprintf("B%d_T%d_Q%d_K%d_D%d_split%d", B, T, Q, K, D, split), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(i), 32))
			books, x := synthF32(rng, B*T, Q, K, D)
			c, err := NewCodebooksF32(D, books...)
			require.NoError(t, err)
			if split > 0 {
				c, err = c.WithSplit(split)
				require.NoError(t, err)
			}
			bt := Batch{B: B, T: T}
			if B > 1 {
				bt.Lengths = make([]int, B)
				for b := range bt.Lengths {
					bt.Lengths[b] = T - (b*T)/(B+1)
				}
				bt.Lengths[B-1] = 0 // an empty item
			}
			wantC, wantQ := cpuEncode(t, c, x, bt)
			gotC, gotQ, gotD := gpuRoundTrip(t, c, x, bt)
			requireSame(t, wantC, gotC, wantQ, gotQ, Q)
			requireSame(t, nil, nil, wantQ, gotD, Q)
		})
	}
}

// TestCUDAF32NearTies plants near ties: stage 0 holds pairs of codewords
// that differ by one ulp in a few dimensions (and one exact duplicate pair),
// and most frames sit on the bisector of a pair, so the two scores differ by
// no more than rounding. The CPU's fp32 scores decide each such frame;
// rvq_encode_f32 must reproduce every one of those decisions, and the exact
// tie must go to the lower index.
func TestCUDAF32NearTies(t *testing.T) {
	for _, d := range []int{16, 128, 200} {
		t.Run(fmt.Sprintf("D%d", d), func(t *testing.T) {
			const k, frames = 512, 4096
			rng := rand.New(rand.NewPCG(uint64(d), 7))
			books, _ := synthF32(rng, 1, 3, k, d)
			for e := 1; e < k; e += 2 { // entry e is entry e-1 nudged by an ulp in 3 dimensions
				copy(books[0][e*d:(e+1)*d], books[0][(e-1)*d:e*d])
				for n := 0; n < 3; n++ {
					i := e*d + rng.IntN(d)
					books[0][i] = math.Nextafter32(books[0][i], float32(math.Inf(int(rng.IntN(2))*2-1)))
				}
			}
			copy(books[0][5*d:6*d], books[0][4*d:5*d]) // 4 and 5: an exact tie
			c, err := NewCodebooksF32(d, books...)
			require.NoError(t, err)
			x := make([]float32, frames*d)
			near := 0
			for f := 0; f < frames; f++ {
				a := 2 * rng.IntN(k/2)
				if f%8 == 0 {
					a = 4
				}
				for i := 0; i < d; i++ {
					x[f*d+i] = (books[0][a*d+i] + books[0][(a+1)*d+i]) / 2
				}
				if f%4 == 3 { // a few frames away from any tie
					for i := 0; i < d; i++ {
						x[f*d+i] += float32(rng.NormFloat64() * 0.1 / math.Sqrt(float64(d)))
					}
					continue
				}
				// the pair's fp64 distances differ by far less than fp32 rounding of a score
				var da, db, scale float64
				for i := 0; i < d; i++ {
					va, vb := float64(x[f*d+i]-books[0][a*d+i]), float64(x[f*d+i]-books[0][(a+1)*d+i])
					da, db, scale = da+va*va, db+vb*vb, scale+float64(x[f*d+i])*float64(x[f*d+i])
				}
				if math.Abs(da-db) < 1e-6*scale {
					near++
				}
			}
			require.Greater(t, near, frames/2, "the planted pairs must be near ties")
			bt := Batch{B: 1, T: frames}
			wantC, wantQ := cpuEncode(t, c, x, bt)
			gotC, gotQ, _ := gpuRoundTrip(t, c, x, bt)
			requireSame(t, wantC, gotC, wantQ, gotQ, 3)
			for f := 0; f < frames; f += 8 {
				require.EqualValues(t, 4, gotC[3*f], "frame %d: the exact tie between entries 4 and 5 goes to 4", f)
			}
			t.Logf("%d of %d frames within 1e-6 relative of a tie; codes equal the CPU's", near, frames)
		})
	}
}

// TestCUDAF32Op runs rvq_encode / rvq_decode with fp32 = true on the cuda
// backend against the CPU op, and checks bad input still names itself.
func TestCUDAF32Op(t *testing.T) {
	be := cudatest.Backend(t)
	rng := rand.New(rand.NewPCG(8, 9))
	books, x := synthF32(rng, 3*40, 4, 200, 64)
	flat := make([]float32, 0, 4*200*64)
	for _, b := range books {
		flat = append(flat, b...)
	}
	cfg := map[string]any{"fp32": true, "split": 1}
	in := runtime.Tensors{
		"x":         runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{3, 40, 64}, x)),
		"codebooks": runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{4, 200, 64}, flat)),
		"lengths":   runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{3}, []int64{40, 0, 17})),
	}
	run := func(op string, b runtime.Backend, in runtime.Tensors) (runtime.Tensors, error) {
		inst, err := runtime.New(op, cfg, b)
		require.NoError(t, err)
		defer inst.Close()
		out, err := inst.Run(context.Background(), in)
		if err != nil {
			return nil, err
		}
		host := runtime.Tensors{}
		for k, v := range out {
			h, err := be.Download(v)
			require.NoError(t, err)
			host[k] = h
		}
		return host, nil
	}
	want, err := run("rvq_encode", runtime.CPU, in)
	require.NoError(t, err)
	got, err := run("rvq_encode", be, in)
	require.NoError(t, err)
	requireSame(t, want["codes"].I32(), got["codes"].I32(), want["quantized"].F32(), got["quantized"].F32(), 4)
	dec, err := run("rvq_decode", be, runtime.Tensors{"codes": got["codes"], "codebooks": in["codebooks"], "lengths": in["lengths"]})
	require.NoError(t, err)
	requireSame(t, nil, nil, want["quantized"].F32(), dec["quantized"].F32(), 4)

	bad := append([]float32(nil), x...)
	bad[17] = float32(math.Inf(1))
	in["x"] = runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{3, 40, 64}, bad))
	_, wantErr := run("rvq_encode", runtime.CPU, in)
	require.Error(t, wantErr)
	_, err = run("rvq_encode", be, in)
	require.EqualError(t, err, wantErr.Error())
}

// BenchmarkCUDAF32Encode times DeviceCodebooks.Encode with fp32 codebooks at
// EnCodec 24 kHz's quantizer shape (K = 1024, D = 128, 75 frames a second)
// for 8 and 32 codebooks, one hour of frames a call (x, codes and quantized
// on the device). Reported: dev-ms/op (CUDA events, median), TFLOP/s
// (2*Q*frames*K*D) and audio-h/s, hours of 24 kHz audio quantised a second.
//
//	plugins_rvq.test -test.run '^$' -test.bench CUDAF32Encode -test.benchtime 5x
func BenchmarkCUDAF32Encode(b *testing.B) {
	be, err := cudatest.Open()
	if err != nil {
		b.Fatal(err)
	}
	const k, d, frames = 1024, 128, 75 * 3600
	for _, q := range []int{8, 32} {
		rng := rand.New(rand.NewPCG(uint64(q), 24))
		books, x := synthF32(rng, frames, q, k, d)
		c, err := NewCodebooksF32(d, books...)
		if err != nil {
			b.Fatal(err)
		}
		dc, xd, codes, quant := benchDevice(b, be, c, x, frames)
		bt := Batch{B: 1, T: frames}
		if err := dc.Encode(xd, bt, codes, quant); err != nil { // warm-up
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("Q%d_K%d_D%d_frames%d", q, k, d, frames), func(b *testing.B) {
			dev := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for range b.N {
				t, err := be.Time(func() error { return dc.Encode(xd, bt, codes, quant) })
				if err != nil {
					b.Fatal(err)
				}
				dev = append(dev, t)
			}
			us := cudatest.MedianMicros(dev)
			b.ReportMetric(us/1e3, "dev-ms/op")
			b.ReportMetric(2*float64(q)*frames*k*d/(us*1e-6)/1e12, "TFLOP/s")
			b.ReportMetric(1/(us*1e-6), "audio-h/s")
		})
		dc.Free()
	}
}
