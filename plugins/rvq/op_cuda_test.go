//go:build cuda

package rvq

// Parity of the CUDA kernels (kernels/rvq.cu) with the CPU op, the numerical
// reference: codes identical, quantized bit-identical. These tests run on a
// GPU host only: the binary is built with `go test -c -tags cuda` and run
// there, with $EDGE_KERNELS_FATBIN pointing at a freshly built fatbin when
// the sources changed in the same session.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/cuda"
	"github.com/edgespeech/edge/runtime/cuda/cudatest"
)

// devF32 uploads host values and frees them with the test.
func devF32(tb testing.TB, be *cuda.Backend, v []float32) cuda.DevicePtr {
	tb.Helper()
	m, err := be.Malloc(int64(4 * max(len(v), 2)))
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = m.Free() })
	require.NoError(tb, be.HostToDevice(m.Ptr(), cuda.Bytes(v)))
	return m.Ptr()
}

// devOut allocates n words of device output, filled with a 0x7F pattern so
// that a value the kernels forget to write shows up.
func devOut(tb testing.TB, be *cuda.Backend, n int) cuda.DevicePtr {
	tb.Helper()
	m, err := be.Malloc(int64(4 * max(n, 2)))
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = m.Free() })
	require.NoError(tb, be.Memset(m.Ptr(), 0x7F, int64(4*max(n, 2))))
	return m.Ptr()
}

// gpuEncode runs DeviceCodebooks.Encode on the given path ("fused",
// "small") and variant ("" = default) and returns the codes, quantized and
// the number of rows the near-tie guard re-scored.
func gpuEncode(t *testing.T, c *Codebooks, x []float32, bt Batch, path, variant string) ([]int32, []float32, int) {
	t.Helper()
	be := cudatest.Backend(t)
	dc, err := NewDeviceCodebooks(be, c)
	require.NoError(t, err)
	defer dc.Free()
	dc.forcePath, dc.variant = path, variant
	stats, err := be.Malloc(8)
	require.NoError(t, err)
	defer stats.Free()
	require.NoError(t, be.Memset(stats.Ptr(), 0, 8))
	dc.stats = stats
	n, q, d := bt.B*bt.T, c.NumStages(), c.Dim()
	codes, quant := devOut(t, be, n*q), devOut(t, be, n*d)
	require.NoError(t, dc.Encode(devF32(t, be, x), bt, codes, quant))
	hc, hq, hs := make([]int32, n*q), make([]float32, n*d), make([]int32, 2)
	require.NoError(t, be.DeviceToHost(cuda.Bytes(hc), codes))
	require.NoError(t, be.DeviceToHost(cuda.Bytes(hq), quant))
	require.NoError(t, be.DeviceToHost(cuda.Bytes(hs), stats.Ptr()))
	return hc, hq, int(hs[0])
}

// encodePaths lists Encode's paths this GPU runs: the fused kernel, the
// split-codebook pair and, with thread block clusters, rvq_stream.
func encodePaths(tb testing.TB) []string {
	k, err := loadKernels(cudatest.Backend(tb))
	require.NoError(tb, err)
	paths := []string{"fused"}
	if k.small != nil && k.update != nil {
		paths = append(paths, "small")
	}
	if k.clusters && k.stream != nil {
		paths = append(paths, "stream")
	}
	return paths
}

func cpuEncode(t *testing.T, c *Codebooks, x []float32, bt Batch) ([]int32, []float32) {
	t.Helper()
	codes, quant := make([]int32, bt.B*bt.T*c.NumStages()), make([]float32, bt.B*bt.T*c.Dim())
	require.NoError(t, c.Encode(context.Background(), x, bt, codes, quant))
	return codes, quant
}

// requireSame asserts identical codes (reporting the first difference) and
// bit-identical quantized.
func requireSame(t *testing.T, wantC, gotC []int32, wantQ, gotQ []float32, q int) {
	t.Helper()
	bad, first := 0, -1
	for i := range wantC {
		if wantC[i] != gotC[i] {
			if first < 0 {
				first = i
			}
			bad++
		}
	}
	if bad > 0 {
		require.Failf(t, "codes differ", "%d of %d codes differ from the CPU op; first at row %d stage %d: got %d, want %d",
			bad, len(wantC), first/q, first%q, gotC[first], wantC[first])
	}
	for i := range wantQ {
		if math.Float32bits(wantQ[i]) != math.Float32bits(gotQ[i]) {
			require.Failf(t, "quantized differs", "quantized[%d] = %v, want %v (bit-identical)", i, gotQ[i], wantQ[i])
		}
	}
}

func synthCodebooks(t *testing.T, rng *rand.Rand, frames, q, k, d int) (*Codebooks, []float32) {
	t.Helper()
	books, x, _ := synth(rng, frames, q, k, d)
	c, err := NewCodebooksBF16(d, books...)
	require.NoError(t, err)
	return c, x
}

// TestCUDAEncodeMatchesCPU covers the seed's correctness shapes and the
// contract's range (Q 1-32, K up to 4096 and not a power of two, D 64-1024
// and not a multiple of 64, nor of 8 or 4: the kernels' partial chunks and
// their scalar paths), on both paths.
func TestCUDAEncodeMatchesCPU(t *testing.T) {
	shapes := [][5]int{ // B, T, Q, K, D
		{2, 301, 8, 1024, 128}, {3, 128, 4, 256, 64}, {1, 2048, 16, 1024, 128}, {5, 65, 2, 129, 96},
		{1, 300, 32, 300, 64}, {2, 150, 4, 4096, 128}, {1, 257, 3, 1000, 1024}, {2, 200, 4, 333, 100},
		{1, 130, 2, 1, 64}, {3, 7, 5, 2048, 256}, {1, 1, 8, 1024, 128}, {1, 16, 1, 4096, 512},
		{2, 150, 3, 500, 196}, {1, 90, 2, 300, 250},
	}
	for i, s := range shapes {
		B, T, Q, K, D := s[0], s[1], s[2], s[3], s[4]
		rng := rand.New(rand.NewPCG(uint64(i), 9))
		c, x := synthCodebooks(t, rng, B*T, Q, K, D)
		bt := Batch{B: B, T: T}
		wantC, wantQ := cpuEncode(t, c, x, bt)
		for _, path := range encodePaths(t) {
			t.Run(fmt.Sprintf("B%d_T%d_Q%d_K%d_D%d/%s", B, T, Q, K, D, path), func(t *testing.T) {
				gotC, gotQ, rescored := gpuEncode(t, c, x, bt, path, "")
				requireSame(t, wantC, gotC, wantQ, gotQ, Q)
				t.Logf("rows re-scored by the near-tie guard: %d of %d row-stages", rescored, B*T*Q)
			})
		}
	}
}

// TestVariantSharedMemory pins variant.shared to kernels/rvq.cu's
// shared-memory comment: 106 KiB for m128n128w24s4p at D = 128, the fp32
// residual rows (64 KiB at BM = 128, D = 128) for the r kernels, the
// quantized-gather region (8960 bytes at BM = 128) for the aw kernels only,
// and the f kernel's missing A tile on Hopper.
func TestVariantSharedMemory(t *testing.T) {
	byName := map[string]variant{}
	for _, v := range variants {
		byName[v.name] = v
	}
	assert.Equal(t, 108096, byName["rvq_encode_m128n128w24s4p"].shared(128, true))
	wa := byName["rvq_encode_wa_m128n128s6pwra_d128"]
	noRes := wa
	noRes.rs = false
	assert.Equal(t, 128*128*4, wa.shared(128, true)-noRes.shared(128, true))
	plain := wa
	plain.awDp = 0
	assert.Equal(t, 128*MaxStages*2+MaxStages*8+8*8*8, wa.shared(128, true)-plain.shared(128, true))
	// f at D = 256: no A tile on Hopper (the residual's low halves are in
	// global scratch), a ring of 13 slots: 231888 bytes; elsewhere the A tile.
	f := byName["rvq_encode_wa_m128n128s13pwf_d256"]
	assert.Equal(t, 13*(128*64*2+128*4)+128*12+128*12+13*16+8960, f.shared(256, true))
	assert.Equal(t, 231888, f.shared(256, true))
	assert.Equal(t, f.shared(256, true)+128*256*2, f.shared(256, false))
}

// TestCUDAVariants runs every fused variant that fits the device at D = 128
// and D = 256 on a ragged batch whose stages have even and odd numbers of
// 128-entry N-tiles (6, 5, 2, 8, 1, 6: both ends of the wa variants'
// two-accumulator pipeline), as one chain and split (the second chain's
// quantized sum added to the first's).
func TestCUDAVariants(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	sizes := []int{700, 600, 129, 1000, 64, 700}
	for _, d := range []int{128, 256} {
		books, x, _ := synth(rng, 3*333, len(sizes), 1000, d)
		for q, k := range sizes {
			books[q] = books[q][:k*d]
		}
		for _, split := range []int{0, 2} {
			c, err := NewCodebooksBF16(d, books...)
			require.NoError(t, err)
			c, err = c.WithSplit(split)
			require.NoError(t, err)
			bt := Batch{B: 3, T: 333, Lengths: []int{333, 0, 201}}
			wantC, wantQ := cpuEncode(t, c, x, bt)
			for _, v := range variants {
				t.Run(fmt.Sprintf("D%d/split%d/%s", d, split, v.name), func(t *testing.T) {
					k, err := loadKernels(cudatest.Backend(t))
					require.NoError(t, err)
					require.NotNil(t, k.fused[v.name], "variant %s is missing from the loaded fatbin", v.name)
					if err := k.fits(v, d, d); err != nil {
						// too large for this device, or an aw pipeline compiled
						// for another width: Encode refuses it by name
						be := cudatest.Backend(t)
						dc, err := NewDeviceCodebooks(be, c)
						require.NoError(t, err)
						defer dc.Free()
						dc.variant = v.name
						n := bt.B * bt.T
						assert.ErrorContains(t, dc.Encode(devF32(t, be, x), bt, devOut(t, be, n*c.NumStages()), devOut(t, be, n*d)), v.name)
						return
					}
					gotC, gotQ, _ := gpuEncode(t, c, x, bt, "fused", v.name)
					requireSame(t, wantC, gotC, wantQ, gotQ, c.NumStages())
				})
			}
		}
	}
}

// TestCUDARaggedSplitSizes: ragged lengths (0, partial, full), Mimi's split
// and per-stage codebook sizes together, both paths.
func TestCUDARaggedSplitSizes(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	sizes := []int{2048, 1000, 129, 1, 4096, 300}
	const d = 128
	books := make([][]uint16, len(sizes))
	for q, k := range sizes {
		b, _, _ := synth(rng, 1, 1, k, d)
		books[q] = b[0]
	}
	c, err := NewCodebooksBF16(d, books...)
	require.NoError(t, err)
	for _, split := range []int{0, 1, 4} {
		cs, err := c.WithSplit(split)
		require.NoError(t, err)
		_, x, _ := synth(rng, 4*97, 3, 64, d)
		bt := Batch{B: 4, T: 97, Lengths: []int{97, 0, 13, 96}}
		wantC, wantQ := cpuEncode(t, cs, x, bt)
		for _, path := range encodePaths(t) {
			t.Run(fmt.Sprintf("split%d/%s", split, path), func(t *testing.T) {
				gotC, gotQ, _ := gpuEncode(t, cs, x, bt, path, "")
				requireSame(t, wantC, gotC, wantQ, gotQ, len(sizes))
			})
		}
	}
}

// TestCUDANearTies builds frames that sit almost exactly on the bisector of
// two codewords (and exact duplicates of a codeword, a true tie), where bf16
// operands cannot decide: the guard must re-score them exactly and the
// codes must still equal the CPU's, ties to the lowest index. At D = 128
// and D = 256 (the f kernel's truncated A operand and its re-score row).
func TestCUDANearTies(t *testing.T) {
	for _, d := range []int{128, 256} {
		t.Run(fmt.Sprintf("D%d", d), func(t *testing.T) { testNearTies(t, d) })
	}
}

func testNearTies(t *testing.T, d int) {
	const k, frames = 512, 4096
	rng := rand.New(rand.NewPCG(11, 3))
	books, _, _ := synth(rng, 1, 2, k, d)
	// entry 5 duplicates entry 3 in stage 0: a true tie.
	copy(books[0][5*d:6*d], books[0][3*d:4*d])
	c, err := NewCodebooksBF16(d, books...)
	require.NoError(t, err)
	x := make([]float32, frames*d)
	for f := 0; f < frames; f++ {
		a, b := rng.IntN(k), rng.IntN(k)
		if f%8 == 0 {
			a, b = 3, 5
		}
		eps := float32(rng.NormFloat64() * 1e-5)
		for i := 0; i < d; i++ {
			ca, cb := BF16ToFloat32(books[0][a*d+i]), BF16ToFloat32(books[0][b*d+i])
			x[f*d+i] = (ca+cb)/2 + eps*(cb-ca)
		}
	}
	bt := Batch{B: 1, T: frames}
	wantC, wantQ := cpuEncode(t, c, x, bt)
	type run struct{ path, variant string }
	var runs []run
	for _, path := range encodePaths(t) {
		runs = append(runs, run{path, ""})
	}
	kern, err := loadKernels(cudatest.Backend(t))
	require.NoError(t, err)
	for _, v := range variants { // every fused variant that fits at D
		if kern.fused[v.name] != nil && kern.fits(v, d, d) == nil {
			runs = append(runs, run{"fused", v.name})
		}
	}
	for _, r := range runs {
		t.Run(strings.TrimSuffix(r.path+"/"+r.variant, "/"), func(t *testing.T) {
			gotC, gotQ, rescored := gpuEncode(t, c, x, bt, r.path, r.variant)
			requireSame(t, wantC, gotC, wantQ, gotQ, 2)
			if r.path == "fused" {
				assert.Greater(t, rescored, frames/4, "the guard re-scores the near ties")
				t.Logf("guard re-scored %d row-stages of %d", rescored, 2*frames)
			}
			for f := 0; f < frames; f += 8 {
				require.EqualValues(t, 3, gotC[2*f], "frame %d: the tie between entries 3 and 5 goes to 3", f)
			}
		})
	}
}

// TestCUDAGolden: the seed generator's goldens (torch's codes exactly).
func TestCUDAGolden(t *testing.T) {
	m := loadManifest(t)
	for _, gc := range m.Cases {
		data := readNPZ(t, filepath.Join(goldenDir, gc.File))
		cbt := readNPZ(t, filepath.Join(goldenDir, gc.Codebooks))["codebooks"]
		c, err := CodebooksFromTensor(cbt, nil)
		require.NoError(t, err)
		bt := Batch{B: gc.B, T: gc.T}
		x := data["x"].F32()
		wantC, wantQ := cpuEncode(t, c, x, bt)
		require.Equal(t, data["codes"].I32(), wantC, "the CPU op reproduces the golden codes")
		for _, path := range encodePaths(t) {
			t.Run(gc.Name+"/"+path, func(t *testing.T) {
				gotC, gotQ, _ := gpuEncode(t, c, x, bt, path, "")
				requireSame(t, wantC, gotC, wantQ, gotQ, gc.Q)
				assert.LessOrEqual(t, relFrobenius(gotQ, data["quantized"].F32()), 1e-6)
			})
		}
	}
}

// TestCUDADecode: Decode(Encode(x)) is bit-identical to quantized and to the
// CPU Decode; a bad code is the CPU's error.
func TestCUDADecode(t *testing.T) {
	be := cudatest.Backend(t)
	rng := rand.New(rand.NewPCG(3, 1))
	c, x := synthCodebooks(t, rng, 2*100, 5, 300, 96)
	c, err := c.WithSplit(2)
	require.NoError(t, err)
	bt := Batch{B: 2, T: 100, Lengths: []int{100, 37}}
	codes, quant := cpuEncode(t, c, x, bt)
	dc, err := NewDeviceCodebooks(be, c)
	require.NoError(t, err)
	defer dc.Free()
	out := devOut(t, be, len(quant))
	require.NoError(t, dc.Decode(devI32(t, be, codes), bt, out))
	got := make([]float32, len(quant))
	require.NoError(t, be.DeviceToHost(cuda.Bytes(got), out))
	requireSame(t, nil, nil, quant, got, 5)

	bad := append([]int32(nil), codes...)
	bad[(1*100+36)*5+3] = 300
	want := c.Decode(context.Background(), bad, bt, make([]float32, len(quant)))
	require.Error(t, want)
	assert.EqualError(t, dc.Decode(devI32(t, be, bad), bt, out), want.Error())
}

func devI32(tb testing.TB, be *cuda.Backend, v []int32) cuda.DevicePtr {
	tb.Helper()
	m, err := be.Malloc(int64(4 * max(len(v), 2)))
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = m.Free() })
	require.NoError(tb, be.HostToDevice(m.Ptr(), cuda.Bytes(v)))
	return m.Ptr()
}

// TestCUDAInputErrors: non-finite or too large frames give the CPU's error.
func TestCUDAInputErrors(t *testing.T) {
	be := cudatest.Backend(t)
	rng := rand.New(rand.NewPCG(1, 2))
	c, x := synthCodebooks(t, rng, 2*50, 2, 64, 64)
	bt := Batch{B: 2, T: 50}
	dc, err := NewDeviceCodebooks(be, c)
	require.NoError(t, err)
	defer dc.Free()
	for name, mutate := range map[string]func([]float32){
		"nan":   func(v []float32) { v[(60)*64+7] = float32(math.NaN()) },
		"inf":   func(v []float32) { v[(99)*64] = float32(math.Inf(-1)) },
		"large": func(v []float32) { v[(3)*64+1] = 0x1p60 },
	} {
		t.Run(name, func(t *testing.T) {
			bad := append([]float32(nil), x...)
			mutate(bad)
			want := c.Encode(context.Background(), bad, bt, make([]int32, 100*2), make([]float32, 100*64))
			require.Error(t, want)
			for _, path := range encodePaths(t) {
				dc.forcePath = path
				err := dc.Encode(devF32(t, be, bad), bt, devOut(t, be, 200), devOut(t, be, 100*64))
				assert.EqualError(t, err, want.Error(), path)
			}
		})
	}
	// The flagged calls' status words were dropped: good input encodes
	// without an error on the same codebooks.
	dc.forcePath = ""
	require.NoError(t, dc.Encode(devF32(t, be, x), bt, devOut(t, be, 200), devOut(t, be, 100*64)))
	// padding frames are not checked, as on the CPU
	bad := append([]float32(nil), x...)
	bad[(50+40)*64] = float32(math.NaN())
	require.NoError(t, dc.Encode(devF32(t, be, bad), Batch{B: 2, T: 50, Lengths: []int{50, 40}}, devOut(t, be, 200), devOut(t, be, 100*64)))
}

// TestCUDAOp runs the registered ops on the cuda backend with host inputs
// (codebooks as f32, sizes, split, lengths) against the CPU op.
func TestCUDAOp(t *testing.T) {
	be := cudatest.Backend(t)
	rng := rand.New(rand.NewPCG(8, 8))
	books, x, _ := synth(rng, 3*40, 4, 200, 64)
	flat := make([]float32, 0, 4*200*64)
	for _, b := range books {
		for _, v := range b {
			flat = append(flat, BF16ToFloat32(v))
		}
	}
	cfg := map[string]any{"codebook_sizes": []any{200, 150, 200, 7}, "split": 1}
	in := runtime.Tensors{
		"x":         runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{3, 40, 64}, x)),
		"codebooks": runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{4, 200, 64}, flat)),
		"lengths":   runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{3}, []int64{40, 0, 17})),
	}
	run := func(op string, b runtime.Backend, in runtime.Tensors) runtime.Tensors {
		inst, err := runtime.New(op, cfg, b)
		require.NoError(t, err)
		defer inst.Close()
		out, err := inst.Run(context.Background(), in)
		require.NoError(t, err)
		host := runtime.Tensors{}
		for k, v := range out {
			h, err := be.Download(v)
			require.NoError(t, err)
			host[k] = h
		}
		return host
	}
	want, got := run("rvq_encode", runtime.CPU, in), run("rvq_encode", be, in)
	requireSame(t, want["codes"].I32(), got["codes"].I32(), want["quantized"].F32(), got["quantized"].F32(), 4)
	dec := run("rvq_decode", be, runtime.Tensors{"codes": got["codes"], "codebooks": in["codebooks"], "lengths": in["lengths"]})
	requireSame(t, nil, nil, want["quantized"].F32(), dec["quantized"].F32(), 4)

	inst, err := runtime.New("rvq_encode", nil, be)
	require.NoError(t, err)
	_, err = inst.Run(context.Background(), runtime.Tensors{"x": in["x"], "codebooks": runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{1, 2, 32}, make([]float32, 64)))})
	assert.ErrorContains(t, err, "(D = 64), but the codebooks have D = 32")
}

// TestCUDAOpCodebookCache: one instance, codebooks unchanged (cached),
// changed in place (re-prepared), then closed.
func TestCUDAOpCodebookCache(t *testing.T) {
	be := cudatest.Backend(t)
	rng := rand.New(rand.NewPCG(4, 4))
	books, x, _ := synth(rng, 2*30, 3, 100, 64)
	flat := make([]uint16, 0, 3*100*64)
	for _, b := range books {
		flat = append(flat, b...)
	}
	xt := runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{2, 30, 64}, x))
	inst, err := runtime.New("rvq_encode", nil, be)
	require.NoError(t, err)
	cpu, err := runtime.New("rvq_encode", nil, runtime.CPU)
	require.NoError(t, err)
	for step := range 3 {
		if step == 2 { // same tensor, new values
			for i := range flat {
				flat[i] = roundBF16(BF16ToFloat32(flat[i]) * -0.75)
			}
		}
		cb := runtime.Must(runtime.FromSlice(runtime.U16, runtime.Shape{3, 100, 64}, flat))
		in := runtime.Tensors{"x": xt, "codebooks": cb}
		want, err := cpu.Run(context.Background(), in)
		require.NoError(t, err)
		out, err := inst.Run(context.Background(), in)
		require.NoError(t, err)
		codes, err := be.Download(out["codes"])
		require.NoError(t, err)
		quant, err := be.Download(out["quantized"])
		require.NoError(t, err)
		requireSame(t, want["codes"].I32(), codes.I32(), want["quantized"].F32(), quant.F32(), 3)
	}
	require.NoError(t, inst.Close())
}

// TestCUDAConcurrentEncodes: Encode from several goroutines on one
// DeviceCodebooks (the status words they take and give back are shared),
// one of them given a non-finite frame every other call: every good call's codes
// and quantized equal the CPU's, every bad call reports the CPU's error.
func TestCUDAConcurrentEncodes(t *testing.T) {
	be := cudatest.Backend(t)
	rng := rand.New(rand.NewPCG(4, 4))
	c, x := synthCodebooks(t, rng, 2*64, 3, 256, 128)
	bt := Batch{B: 2, T: 64}
	wantC, wantQ := cpuEncode(t, c, x, bt)
	bad := append([]float32(nil), x...)
	bad[70*128+3] = float32(math.Inf(1))
	wantErr := c.Encode(context.Background(), bad, bt, make([]int32, 128*3), make([]float32, 128*128))
	require.Error(t, wantErr)
	dc, err := NewDeviceCodebooks(be, c)
	require.NoError(t, err)
	defer dc.Free()
	xd, badD := devF32(t, be, x), devF32(t, be, bad)
	type out struct{ codes, quant cuda.DevicePtr }
	var outs [4][4]out // allocated here: require must not fail in the goroutines
	for g := range outs {
		for i := range outs[g] {
			outs[g][i] = out{devOut(t, be, 128*3), devOut(t, be, 128*128)}
		}
	}
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 4 {
				codes, quant := outs[g][i].codes, outs[g][i].quant
				if g == 0 && i%2 == 1 {
					if err := dc.Encode(badD, bt, codes, quant); err == nil || err.Error() != wantErr.Error() {
						errs <- fmt.Errorf("bad input: got %v, want %v", err, wantErr)
					}
					continue
				}
				if err := dc.Encode(xd, bt, codes, quant); err != nil {
					errs <- err
					continue
				}
				gotC, gotQ := make([]int32, 128*3), make([]float32, 128*128)
				if err := be.DeviceToHost(cuda.Bytes(gotC), codes); err != nil {
					errs <- err
				}
				if err := be.DeviceToHost(cuda.Bytes(gotQ), quant); err != nil {
					errs <- err
				}
				if !slices.Equal(gotC, wantC) || !slices.EqualFunc(gotQ, wantQ, func(a, b float32) bool { return math.Float32bits(a) == math.Float32bits(b) }) {
					errs <- fmt.Errorf("goroutine %d call %d: codes or quantized differ from the CPU's", g, i)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
