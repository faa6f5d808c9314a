//go:build cuda

package dpx

// Parity of the CUDA kernels (kernels/dpx.cu) with the CPU ops, the
// reference, and with torchaudio's alignment on the goldens. These tests run
// on a GPU host only: the binary is built with `go test -c -tags cuda` and
// run there, with $EDGE_KERNELS_FATBIN pointing at a freshly built fatbin
// when the sources changed in the same session.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	rt "github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/cuda"
	"github.com/edgespeech/edge/runtime/cuda/cudatest"
)

// runCUDA runs op on the GPU (host inputs are uploaded by the Instance) and
// returns its outputs on the host, checking that they came back on the
// device.
func runCUDA(t testing.TB, name string, params map[string]any, in rt.Tensors) (rt.Tensors, error) {
	t.Helper()
	be := cudatest.Backend(t)
	inst, err := rt.New(name, params, be)
	require.NoError(t, err)
	out, err := inst.Run(context.Background(), in)
	if err != nil {
		return nil, err
	}
	host := rt.Tensors{}
	for k, v := range out {
		require.False(t, v.OnHost(), "output %q stays on the device", k)
		h, err := be.Download(v)
		require.NoError(t, err)
		require.NoError(t, v.Buffer().Free())
		host[k] = h
	}
	return host, nil
}

// requireParity runs op on the CPU and the GPU and requires the same
// outputs, bit for bit, or the same error.
func requireParity(t *testing.T, name string, params map[string]any, in rt.Tensors) rt.Tensors {
	t.Helper()
	want, wantErr := runOp(t, name, params, in)
	got, err := runCUDA(t, name, params, in)
	if wantErr != nil {
		require.EqualError(t, err, wantErr.Error())
		return nil
	}
	require.NoError(t, err)
	for k, w := range want {
		g := got[k]
		require.NotNil(t, g, "output %q", k)
		require.Equal(t, w.Shape(), g.Shape(), "output %q", k)
		switch w.DType() {
		case rt.I32:
			requireSameInts(t, w.I32(), g.I32(), k)
		default:
			wf, gf := w.F32(), g.F32()
			for i := range wf {
				if math.Float32bits(wf[i]) != math.Float32bits(gf[i]) {
					require.Failf(t, "output differs", "%s[%d]: cpu %v, cuda %v", k, i, wf[i], gf[i])
				}
			}
		}
	}
	return got
}

// ctcKernel is a forced choice of the CTC kernel and its launch (the test
// hooks of ops_cuda.go); the zero value is the launcher's own choice.
type ctcKernel struct {
	name     string
	block    bool // dpx_ctc_align
	k, warps int  // dpx_ctc_warp: states a thread, warps (0: chosen)
	pipeline bool // dpx_ctc_warp's float path as a pipeline of warps
	noPairs  bool // dpx_ctc_warp's float path without frame pairs
}

// ctcKernels are the choices the parity tests run: the default, the block
// kernel, and the register-resident one with one warp and with several
// (in lockstep with and without frame pairs, and pipelined).
var ctcKernels = []ctcKernel{
	{name: "default"},
	{name: "block", block: true},
	{name: "warp_k32x1", k: 32, warps: 1},
	{name: "warp_k6x4", k: 6, warps: 4},
	{name: "pipeline_k6x4", k: 6, warps: 4, pipeline: true},
	{name: "single_k6x4", k: 6, warps: 4, noPairs: true},
	{name: "warp_k2x10", k: 2, warps: 10},
}

// use sets the hooks for k until the test ends.
func (k ctcKernel) use(tb testing.TB) {
	old := []int{ctcForceK, ctcWarps}
	oldBlock, oldPipe, oldPairs := ctcUseBlock, ctcPipeline, ctcNoPairs
	tb.Cleanup(func() {
		ctcForceK, ctcWarps, ctcUseBlock, ctcPipeline, ctcNoPairs = old[0], old[1], oldBlock, oldPipe, oldPairs
	})
	ctcForceK, ctcWarps, ctcUseBlock, ctcPipeline, ctcNoPairs = k.k, k.warps, k.block, k.pipeline, k.noPairs
}

// TestCUDAAlignGolden: every torchaudio golden, both precisions, every
// kernel choice, against the CPU op; the float path also against
// torchaudio's alignment.
func TestCUDAAlignGolden(t *testing.T) {
	for _, c := range readManifest(t).CTC {
		for _, pr := range precisions {
			for _, kc := range ctcKernels {
				t.Run(c.Name+"/"+pr+"/"+kc.name, func(t *testing.T) {
					kc.use(t)
					lp := readGolden(t, "ctc_"+c.Name+"_log_probs")
					tg := readGolden(t, "ctc_"+c.Name+"_targets")
					params := map[string]any{"blank": c.Blank, "star": c.Star, "star_logprob": float64(c.StarLogProb), "precision": pr}
					got := requireParity(t, "ctc_align", params, rt.Tensors{"log_probs": lp, "targets": tg})
					if got != nil && pr == "f32" {
						requireSameInts(t, readGolden(t, "ctc_"+c.Name+"_alignment").I32(), got["alignment"].I32(), "torchaudio alignment")
					}
				})
			}
		}
	}
}

// TestCUDAAlignRandom: ragged batches (one item per block, several passes
// of states per thread, empty targets, tight T = L + R) on random
// emissions, both precisions, every kernel choice (a forced dpx_ctc_warp
// shape that cannot hold a case's trellis falls back to dpx_ctc_align),
// the star column too; C = 29 and 12 take the 4-byte row copies.
func TestCUDAAlignRandom(t *testing.T) {
	cases := []struct {
		name   string
		C      int
		Ts, Ls []int
		params map[string]any
	}{
		{"ragged", 32, []int{200, 57, 1, 120}, []int{60, 20, 0, 59}, nil},
		{"multipass", 29, []int{2400, 1900}, []int{1500, 1100}, nil},
		{"above_48KiB", 32, []int{4000, 3500}, []int{3100, 1700}, nil},
		{"max_states", 32, []int{8400}, []int{(ctcMaxStates(newAlignOpCUDA(t, nil).shared) - 1) / 2}, nil},
		{"blank_last", 12, []int{90, 80}, []int{30, 10}, map[string]any{"blank": 11}},
		{"star", 12, []int{90, 80}, []int{30, 12}, map[string]any{"star": true, "star_logprob": -1.5}},
		{"odd_c", 29, []int{700, 333, 1}, []int{300, 100, 0}, nil},
		{"large_c", 5000, []int{300, 200}, []int{120, 60}, nil},
	}
	for i, c := range cases {
		for _, pr := range precisions {
			for _, kc := range ctcKernels {
				t.Run(c.name+"/"+pr+"/"+kc.name, func(t *testing.T) {
					kc.use(t)
					r := rand.New(rand.NewPCG(uint64(i), 8))
					in := alignBatch(r, c.C, c.Ts, c.Ls)
					if c.params["blank"] == 11 {
						tg := in["targets"].I64()
						for k, v := range tg {
							if v == 11 {
								tg[k] = 3
							}
						}
					}
					if c.params["star"] == true {
						tg := in["targets"].I64()
						for k := range tg {
							if tg[k] > 0 && k%5 == 0 {
								tg[k] = int64(c.C)
							}
						}
					}
					params := map[string]any{"precision": pr}
					for k, v := range c.params {
						params[k] = v
					}
					requireParity(t, "ctc_align", params, in)
				})
			}
		}
	}
}

// newAlignOpCUDA builds the CUDA ctc_align op itself (not an Instance).
func newAlignOpCUDA(tb testing.TB, params map[string]any) *alignCUDA {
	tb.Helper()
	spec, err := rt.Lookup("ctc_align")
	require.NoError(tb, err)
	p, err := rt.ResolveParams("ctc_align", spec.Params, params)
	require.NoError(tb, err)
	op, err := newAlignCUDA(p, cudatest.Backend(tb))
	require.NoError(tb, err)
	return op.(*alignCUDA)
}

// TestCUDAAlignLaunch: the launch shape covers the states with at most 1024
// threads, and the shared memory it asks for fits the device.
func TestCUDAAlignLaunch(t *testing.T) {
	o := newAlignOpCUDA(t, nil)
	for _, S := range []int{1, 3, 601, 1025, 2049, 6001, ctcMaxStates(o.shared)} {
		passes, block, frames := o.ctcLaunch(S)
		require.LessOrEqual(t, block, cudaMaxBlock, "S=%d", S)
		require.GreaterOrEqual(t, passes*block, S, "S=%d", S)
		require.Positive(t, frames, "S=%d", S)
		require.LessOrEqual(t, ctcShared(S, frames), o.shared, "S=%d", S)
		if S <= 1025 {
			require.Equal(t, ctcMaxFrames, frames, "S=%d: full blocks", S)
		}
		for _, C := range []int{32, 1025, 5000} {
			sh, ok := o.ctcWarpLaunch(S, C)
			require.True(t, ok, "S=%d, C=%d: dpx_ctc_warp covers it", S, C)
			k := ctcWarpK[sh.ki]
			require.GreaterOrEqual(t, k*sh.block, S, "S=%d", S)
			require.LessOrEqual(t, sh.block, ctcWarpBound[sh.ki], "S=%d: within K=%d's launch bound", S, k)
			require.Zero(t, sh.block%32, "S=%d: whole warps", S)
			require.Positive(t, sh.frames, "S=%d", S)
			require.LessOrEqual(t, ctcWarpShared(S, C, sh.frames, k), o.shared, "S=%d, C=%d", S, C)
		}
	}
	require.GreaterOrEqual(t, ctcMaxStates(o.shared), 8191, "Hopper's 227 KiB hold 8191 states")
	_, ok := o.ctcWarpLaunch(601, 1<<20)
	require.False(t, ok, "a million columns: no frame's row fits, dpx_ctc_align takes it")
}

// TestCUDAErrors: bad values and impossible inputs give the CPU ops' errors.
func TestCUDAErrors(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 3))
	nan := float32(math.NaN())
	inf := float32(math.Inf(1))
	ninf := float32(math.Inf(-1))
	cases := []struct {
		name string
		op   string
		in   func() rt.Tensors
	}{
		{"ctc_nan", "ctc_align", func() rt.Tensors {
			in := alignBatch(r, 8, []int{40, 40}, []int{10, 10})
			in["log_probs"].F32()[40*8+17*8+3] = nan
			return in
		}},
		{"ctc_inf", "ctc_align", func() rt.Tensors {
			in := alignBatch(r, 8, []int{40, 30}, []int{10, 10})
			in["log_probs"].F32()[40*8+29*8] = inf
			return in
		}},
		{"ctc_all_neginf", "ctc_align", func() rt.Tensors {
			in := alignBatch(r, 8, []int{40}, []int{10})
			lp := in["log_probs"].F32()
			for i := range lp {
				if i%8 != 0 {
					lp[i] = ninf
				}
			}
			return in
		}},
		{"ctc_short", "ctc_align", func() rt.Tensors { return alignBatch(r, 8, []int{40, 9}, []int{10, 10}) }},
		{"ctc_target_range", "ctc_align", func() rt.Tensors {
			in := alignBatch(r, 8, []int{40, 40}, []int{10, 10})
			in["targets"].I64()[13] = 8
			return in
		}},
		{"viterbi_nan", "viterbi", func() rt.Tensors {
			in := viterbiInput(r, 2, 10, 7, -3)
			in["emissions"].F32()[70+5*7+2] = nan
			return in
		}},
		{"viterbi_transitions", "viterbi", func() rt.Tensors {
			in := viterbiInput(r, 2, 10, 7, -3)
			in["transitions"].F32()[7*3+4] = inf
			return in
		}},
		{"dtw_inf", "dtw", func() rt.Tensors {
			in := dtwInput(r, []int{9, 12}, []int{11, 7})
			in["cost"].F32()[12*11+8*11+6] = ninf
			return in
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			in := c.in()
			_, wantErr := runOp(t, c.op, nil, in)
			require.Error(t, wantErr)
			_, err := runCUDA(t, c.op, nil, in)
			require.EqualError(t, err, wantErr.Error())
		})
	}
}

func TestCUDAViterbi(t *testing.T) {
	cases := []struct {
		name       string
		B, T, S    int
		tscale     float64
		lens       []int64
		quantised  bool // inputs on the fixed-point grid: exact ties
		withLength bool
	}{
		{name: "small", B: 3, T: 40, S: 5, tscale: -4},
		{name: "ragged", B: 4, T: 100, S: 97, tscale: -5, lens: []int64{100, 1, 37, 64}},
		{name: "multipass", B: 2, T: 30, S: 1500, tscale: -6},
		{name: "unpacked", B: 2, T: 50, S: 40, tscale: 60},
		{name: "ties", B: 2, T: 60, S: 33, tscale: -2, quantised: true},
		{name: "above_48KiB", B: 2, T: 5, S: 7000, tscale: -6, lens: []int64{5, 3}},
	}
	for i, c := range cases {
		for _, pr := range precisions {
			t.Run(c.name+"/"+pr, func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(i), 11))
				in := viterbiInput(r, c.B, c.T, c.S, c.tscale)
				if c.quantised {
					for _, k := range []string{"emissions", "transitions", "priors"} {
						for j, v := range in[k].F32() {
							in[k].F32()[j] = float32(math.Round(float64(v)*2) / 2)
						}
					}
				}
				if c.lens != nil {
					in["lengths"] = rt.Must(rt.FromSlice(rt.I64, rt.Shape{c.B}, c.lens))
				}
				requireParity(t, "viterbi", map[string]any{"precision": pr}, in)
			})
		}
	}
	t.Run("golden", func(t *testing.T) {
		for _, c := range readManifest(t).Viterbi {
			in := rt.Tensors{
				"emissions":   readGolden(t, "viterbi_"+c.Name+"_emissions"),
				"transitions": readGolden(t, "viterbi_"+c.Name+"_transitions"),
				"priors":      readGolden(t, "viterbi_"+c.Name+"_priors"),
				"lengths":     readGolden(t, "viterbi_"+c.Name+"_lengths"),
			}
			got := requireParity(t, "viterbi", nil, in)
			requireSameInts(t, readGolden(t, "viterbi_"+c.Name+"_path").I32(), got["path"].I32(), c.Name+" golden path")
		}
	})
}

func TestCUDADTW(t *testing.T) {
	cases := []struct {
		name   string
		ns, ms []int
		grid   bool // costs on the fixed-point grid: exact ties
	}{
		{name: "single", ns: []int{1}, ms: []int{1}},
		{name: "ragged", ns: []int{50, 1, 33, 70}, ms: []int{64, 20, 1, 65}},
		{name: "multipass", ns: []int{1300, 2100}, ms: []int{900, 1700}},
		{name: "ties", ns: []int{40, 41}, ms: []int{45, 30}, grid: true},
		{name: "above_48KiB", ns: []int{8192, 5000}, ms: []int{300, 41}},
	}
	for i, c := range cases {
		for _, pr := range precisions {
			t.Run(c.name+"/"+pr, func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(i), 5))
				in := dtwInput(r, c.ns, c.ms)
				if c.grid {
					for j, v := range in["cost"].F32() {
						in["cost"].F32()[j] = float32(math.Round(float64(v)))
					}
				}
				requireParity(t, "dtw", map[string]any{"precision": pr}, in)
			})
		}
	}
	t.Run("golden", func(t *testing.T) {
		for _, c := range readManifest(t).DTW {
			in := rt.Tensors{"cost": readGolden(t, "dtw_"+c.Name+"_cost"), "lengths": readGolden(t, "dtw_"+c.Name+"_lengths")}
			got := requireParity(t, "dtw", nil, in)
			requireSameInts(t, readGolden(t, "dtw_"+c.Name+"_path").I32(), got["path"].I32(), c.Name+" golden path")
		}
	})
}

// BenchmarkCUDA times the shapes end to end, per precision: device
// inputs, one Run (host tables, launches, and the status copy that waits
// for the kernels). cells/s counts trellis cells: B*T*(2L+1) for CTC,
// B*(T-1)*S*S state updates for Viterbi, B*N*M for DTW.
func BenchmarkCUDA(b *testing.B) {
	be := cudatest.Backend(b)
	r := rand.New(rand.NewPCG(8, 8))
	type shape struct {
		op, name string
		in       func() rt.Tensors
		cells    float64
	}
	var shapes []shape
	for _, s := range []struct{ B, T, L int }{{1, 1500, 300}, {1, 15000, 3000}, {64, 1500, 300}} {
		Ts, Ls := make([]int, s.B), make([]int, s.B)
		for i := range s.B {
			Ts[i], Ls[i] = s.T, s.L
		}
		shapes = append(shapes, shape{"ctc_align", fmt.Sprintf("B=%d,T=%d,L=%d,C=32", s.B, s.T, s.L),
			func() rt.Tensors {
				in := alignBatch(r, 32, Ts, Ls)
				delete(in, "lengths")
				return in
			}, float64(s.B * s.T * (2*s.L + 1))})
	}
	shapes = append(shapes, shape{"viterbi", "B=64,T=2000,S=1024",
		func() rt.Tensors { return viterbiInput(r, 64, 2000, 1024, -4) }, 64 * 1999 * 1024 * 1024})
	shapes = append(shapes, shape{"dtw", "B=32,N=2048,M=2048", func() rt.Tensors {
		cost := make([]float32, 32*2048*2048)
		for i := range cost {
			cost[i] = float32(r.Float64() * 4)
		}
		return rt.Tensors{"cost": rt.Must(rt.FromSlice(rt.F32, rt.Shape{32, 2048, 2048}, cost))}
	}, 32 * 2048 * 2048})

	for _, s := range shapes {
		var dev rt.Tensors
		for _, pr := range precisions {
			b.Run(s.op+"/"+s.name+"/"+pr, func(b *testing.B) {
				if dev == nil {
					dev = rt.Tensors{}
					for k, v := range s.in() {
						d, err := be.Upload(v)
						require.NoError(b, err)
						dev[k] = d
					}
				}
				inst, err := rt.New(s.op, map[string]any{"precision": pr}, be)
				require.NoError(b, err)
				run := func() {
					out, err := inst.Run(context.Background(), dev)
					require.NoError(b, err)
					for _, v := range out {
						_ = v.Buffer().Free()
					}
				}
				run() // loads the module, warms the pool
				n := 0
				for b.Loop() {
					run()
					n++
				}
				b.ReportMetric(s.cells*float64(n)/b.Elapsed().Seconds(), "cells/s")
				if s.op == "ctc_align" {
					d, _ := alignDeviceTime(b, map[string]any{"precision": pr}, dev, 10)
					b.ReportMetric(float64(d.Nanoseconds()), "dev-ns/op")
				}
			})
		}
		for _, v := range dev {
			_ = v.Buffer().Free()
		}
	}
}

// alignDeviceTime is the median device time of reps ctc_align launches on
// device inputs (between events around launch: the table upload, the
// check, the alignment and its backtrace; not the host's validation, the
// targets download or the status read), and the median host time of their
// plans (validation, targets download, tables).
func alignDeviceTime(tb testing.TB, params map[string]any, in rt.Tensors, reps int) (dev, plan time.Duration) {
	tb.Helper()
	o := newAlignOpCUDA(tb, params)
	ds, ps := make([]time.Duration, reps), make([]time.Duration, reps)
	for i := range ds {
		t0 := time.Now()
		c, err := o.plan(context.Background(), in)
		ps[i] = time.Since(t0)
		require.NoError(tb, err)
		sc := o.be.NewScratch()
		var outs cuda.Outputs
		ts := []*rt.Tensor{
			outs.Empty(o.be, rt.I32, rt.Shape{c.B, c.T}), outs.Empty(o.be, rt.F32, rt.Shape{c.B, c.T}),
			outs.Empty(o.be, rt.F32, rt.Shape{c.B}),
		}
		require.NoError(tb, outs.Err())
		ptrs := make([]cuda.DevicePtr, len(ts))
		for j, t := range ts {
			ptrs[j], err = cuda.Ptr(t)
			require.NoError(tb, err)
		}
		ds[i], err = o.be.Time(func() error {
			_, err := o.launch(sc, c, ptrs)
			return err
		})
		require.NoError(tb, err)
		sc.Free()
		outs.Release()
	}
	slices.Sort(ds)
	slices.Sort(ps)
	return ds[reps/2], ps[reps/2]
}

// BenchmarkCUDAAlignShape sweeps the CTC kernel and its launch shape
// (dpx_ctc_align: state passes per thread; dpx_ctc_warp: states per thread
// and warps; both: frames per block of staged emissions; 0 = the
// launcher's choice) and reports the Run wall time (ns/op), the launch's
// device time (dev-ns/op) and the plan's host time (plan-ns/op).
func BenchmarkCUDAAlignShape(b *testing.B) {
	be := cudatest.Backend(b)
	r := rand.New(rand.NewPCG(8, 9))
	defer func(p, f, k, w int, bl, ls bool) {
		ctcMinPass, ctcFrames, ctcForceK, ctcWarps, ctcUseBlock, ctcPipeline = p, f, k, w, bl, ls
	}(ctcMinPass, ctcFrames, ctcForceK, ctcWarps, ctcUseBlock, ctcPipeline)
	// kernel: "block" (dpx_ctc_align: pass, frames), "warp" (dpx_ctc_warp:
	// k states a thread, warps, frames), "pipe" (dpx_ctc_warp's float path
	// as a pipeline of warps) or "single" (dpx_ctc_warp without frame
	// pairs); 0 = the launcher's choice.
	type shape struct {
		kernel                 string
		pass, k, warps, frames int
	}
	blk := func(pass, frames int) shape { return shape{"block", pass, 0, 0, frames} }
	wrp := func(k, warps, frames int) shape { return shape{"warp", 0, k, warps, frames} }
	pip := func(k, warps int) shape { return shape{"pipe", 0, k, warps, 0} }
	sgl := func(k, warps int) shape { return shape{"single", 0, k, warps, 0} }
	defer func(np bool) { ctcNoPairs = np }(ctcNoPairs)
	for _, sh := range []struct {
		B, T, L int
		shapes  []shape
	}{
		{1, 1500, 300, []shape{blk(0, 0), wrp(0, 0, 0), sgl(6, 4), pip(6, 4), wrp(2, 10, 0), wrp(4, 5, 0), sgl(4, 5),
			wrp(8, 3, 0), wrp(12, 2, 0), sgl(12, 2), wrp(20, 1, 0), sgl(20, 1), wrp(24, 1, 0), wrp(0, 0, 16), wrp(0, 0, 64)}},
		{1, 3000, 300, []shape{wrp(0, 0, 0), sgl(6, 4), wrp(20, 1, 0)}},
		{64, 1500, 300, []shape{blk(0, 0), wrp(0, 0, 0), wrp(20, 1, 0), wrp(2, 10, 0)}},
		{1, 15000, 3000, []shape{blk(0, 0), wrp(0, 0, 0), sgl(16, 12), pip(16, 12), wrp(12, 16, 0), wrp(8, 24, 0)}},
	} {
		Ts, Ls := make([]int, sh.B), make([]int, sh.B)
		for i := range sh.B {
			Ts[i], Ls[i] = sh.T, sh.L
		}
		in := alignBatch(r, 32, Ts, Ls)
		delete(in, "lengths")
		dev := rt.Tensors{}
		for k, v := range in {
			d, err := be.Upload(v)
			require.NoError(b, err)
			dev[k] = d
		}
		for _, c := range sh.shapes {
			for _, pr := range precisions {
				ctcMinPass, ctcFrames, ctcForceK, ctcWarps = c.pass, c.frames, c.k, c.warps
				ctcUseBlock, ctcPipeline, ctcNoPairs = c.kernel == "block", c.kernel == "pipe", c.kernel == "single"
				name := fmt.Sprintf("B=%d,T=%d,L=%d/%s,pass=%d,k=%d,warps=%d,frames=%d/%s", sh.B, sh.T, sh.L, c.kernel, c.pass, c.k, c.warps, c.frames, pr)
				b.Run(name, func(b *testing.B) {
					inst, err := rt.New("ctc_align", map[string]any{"precision": pr}, be)
					require.NoError(b, err)
					run := func() {
						out, err := inst.Run(context.Background(), dev)
						require.NoError(b, err)
						for _, v := range out {
							_ = v.Buffer().Free()
						}
					}
					run()
					for b.Loop() {
						run()
					}
					d, p := alignDeviceTime(b, map[string]any{"precision": pr}, dev, 10)
					b.ReportMetric(float64(d.Nanoseconds()), "dev-ns/op")
					b.ReportMetric(float64(p.Nanoseconds()), "plan-ns/op")
				})
			}
		}
		for _, v := range dev {
			_ = v.Buffer().Free()
		}
	}
}
