//go:build dpxemu

package dpx

// Host replay of the CUDA kernels (kernels/dpxemu/dpx_emu.cpp runs
// kernels/dpx.cu with one std::thread per GPU thread): the kernels' thread
// mapping, shared-memory rows, ballot-packed backpointers, chunked backtrace
// and DPX emulation checked against the CPU ops without a GPU. Small blocks
// (32-64 threads) force several states per thread.
//
//	go test -tags dpxemu -run TestKernelReplay ./plugins/dpx   (needs g++ >= 11)

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	rt "github.com/edgespeech/edge/runtime"
)

var buildEmu = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "dpxemu")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "dpx_emu")
	out, err := exec.Command("g++", "-std=c++20", "-O1", "-pthread", "-o", bin, "../../kernels/dpxemu/dpx_emu.cpp").CombinedOutput()
	if err != nil {
		return "", &exec.ExitError{Stderr: out}
	}
	return bin, nil
})

func writeBin(t *testing.T, dir, name string, v any) {
	t.Helper()
	f, err := os.Create(filepath.Join(dir, name))
	require.NoError(t, err)
	require.NoError(t, binary.Write(f, binary.LittleEndian, v))
	require.NoError(t, f.Close())
}

func readBin[T any](t *testing.T, dir, name string, n int) []T {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	out := make([]T, n)
	require.NoError(t, binary.Read(bytesReader(b), binary.LittleEndian, out))
	return out
}

type sliceReader struct{ b []byte }

func (r *sliceReader) Read(p []byte) (int, error) {
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}

func bytesReader(b []byte) *sliceReader { return &sliceReader{b} }

func runEmu(t *testing.T, op, pr, dir string) {
	t.Helper()
	bin, err := buildEmu()
	if ee, ok := err.(*exec.ExitError); ok {
		t.Fatalf("building dpx_emu: %s", ee.Stderr)
	}
	require.NoError(t, err)
	out, err := exec.Command(bin, op, pr, dir).CombinedOutput()
	require.NoError(t, err, "%s", out)
}

func requireF32Bits(t *testing.T, want, got []float32, name string) {
	t.Helper()
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			require.Failf(t, "output differs", "%s[%d]: cpu %v, replay %v", name, i, want[i], got[i])
		}
	}
}

func TestKernelReplayCTC(t *testing.T) {
	// frames: the kernel's block of staged emissions and backpointers (F):
	// 1, blocks that do not divide T-1, that do (129 = 1 + 8*16, 91 = 1 +
	// 6*15), and blocks longer than some items.
	//
	// K > 0 replays the register-resident kernel (dpx_ctc_warp_*) with K
	// states a thread and bd/32 warps: one warp and several, threads with
	// padding states and threads with none, one and two backpointer words
	// a thread, C with and without 16-byte row copies (C % 4).
	cases := []struct {
		name          string
		C, bd, frames int
		Ts, Ls        []int
		blank         int
		star          bool
		K             int
	}{
		{"ragged", 12, 32, 16, []int{60, 17, 1, 40, 2}, []int{20, 8, 0, 19, 1}, 0, false, 0},
		{"multipass", 9, 32, 8, []int{150, 129}, []int{100, 64}, 0, false, 0},
		{"two_pass", 9, 64, 7, []int{150, 130}, []int{50, 64}, 0, false, 0},
		{"six_pass", 9, 32, 6, []int{120, 91}, []int{85, 40}, 0, false, 0},
		{"one_pass", 9, 128, 5, []int{90, 70}, []int{50, 30}, 0, false, 0},
		{"tight", 7, 64, 1, []int{45}, []int{40}, 0, false, 0},
		{"star_blank_last", 10, 32, 3, []int{70, 50}, []int{25, 12}, 9, true, 0},
		{"warp/ten_warps_k2", 12, 320, 8, []int{400, 300}, []int{300, 100}, 0, false, 2},
		// T well above L+R: reachable states cross the warp boundaries long
		// before the window's lower edge moves (the float path's frame
		// pairs and their ghost states).
		{"warp/pairs_k4x2", 12, 64, 7, []int{600, 500}, []int{100, 90}, 0, false, 4},
		{"warp/pairs_k6x4", 32, 128, 8, []int{900, 120}, []int{300, 40}, 0, false, 6},
		{"warp/ragged_k4", 12, 32, 16, []int{60, 17, 1, 40, 2}, []int{20, 8, 0, 19, 1}, 0, false, 4},
		{"warp/one_warp_k20", 32, 32, 16, []int{400, 333}, []int{300, 150}, 0, false, 20},
		{"warp/one_warp_k32_c9", 9, 32, 5, []int{340, 250}, []int{250, 120}, 0, false, 32},
		{"warp/two_warps_k12", 32, 64, 7, []int{420, 400}, []int{300, 200}, 0, false, 12},
		{"warp/four_warps_k6", 12, 128, 4, []int{410, 300}, []int{300, 100}, 0, false, 6},
		{"warp/three_warps_k8_c7", 7, 96, 3, []int{400, 64}, []int{300, 40}, 0, false, 8},
		{"warp/k16_k24", 16, 64, 6, []int{700, 500}, []int{500, 400}, 0, false, 16},
		{"warp/k24", 16, 32, 9, []int{500, 500}, []int{380, 20}, 0, false, 24},
		{"warp/tight_k6", 7, 32, 1, []int{45}, []int{40}, 0, false, 6},
		{"warp/star_blank_last_k8", 10, 64, 3, []int{70, 50}, []int{25, 12}, 9, true, 8},
	}
	for i, c := range cases {
		for _, pr := range precisions {
			t.Run(c.name+"/"+pr, func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(i), 4))
				in := alignBatch(r, c.C, c.Ts, c.Ls)
				tg := in["targets"].I64()
				for k, v := range tg {
					if v == int64(c.blank) {
						tg[k] = 3
					}
					if c.star && v > 0 && k%4 == 0 {
						tg[k] = int64(c.C)
					}
				}
				if strings.HasSuffix(c.name, "tight") || strings.HasPrefix(c.name, "warp/tight") { // T = L + R exactly
					reps := 0
					for k := 1; k < 40; k++ {
						if tg[k] == tg[k-1] {
							reps++
						}
					}
					in = alignBatch(r, c.C, []int{40 + reps}, []int{40})
					in["targets"] = rt.Must(rt.FromSlice(rt.I64, rt.Shape{1, 40}, tg))
				}
				params := map[string]any{"precision": pr, "blank": c.blank, "star": c.star, "star_logprob": -0.7}
				want, err := runOp(t, "ctc_align", params, in)
				require.NoError(t, err)

				B, T, C := in["log_probs"].Shape()[0], in["log_probs"].Shape()[1], c.C
				L := in["targets"].Shape()[1]
				lengths := make([]int, B)
				targets := make([][]int, B)
				for b := range B {
					lengths[b] = int(in["lengths"].I64()[b])
					for _, v := range in["targets"].I64()[b*L : (b+1)*L] {
						if v >= 0 {
							targets[b] = append(targets[b], int(v))
						}
					}
				}
				prec, _ := ParsePrecision(pr)
				pool, err := newAlignerPool(AlignOptions{Blank: c.blank, Star: c.star, StarLogProb: -0.7, Precision: prec})
				require.NoError(t, err)
				tabs := newCTCTables(pool, targets, lengths)
				if c.K > 0 {
					tabs.useWarpLayout(c.K)
				}
				// Several warps of dpx_ctc_warp: lockstep, then the float path's
				// pipeline of warps (bit 16 of frames).
				modes := []int{0}
				if c.K > 0 && c.bd > 32 {
					modes = append(modes, 1<<16)
				}
				for _, mode := range modes {
					dir := t.TempDir()
					writeBin(t, dir, "args.f64", []float64{float64(B), float64(T), float64(C), float64(c.blank), float64(float32(-0.7)), DefaultScale, float64(c.bd), float64(c.frames | mode), float64(c.K)})
					writeBin(t, dir, "lp.f32", in["log_probs"].F32())
					writeBin(t, dir, "meta.i64", tabs.meta)
					writeBin(t, dir, "table.i32", tabs.table)
					runEmu(t, "ctc", pr, dir)
					require.Equal(t, make([]int64, 3*B), readBin[int64](t, dir, "status.i64", 3*B))
					requireSameInts(t, want["alignment"].I32(), readBin[int32](t, dir, "alignment.i32", B*T), fmt.Sprintf("mode %#x: alignment", mode))
					requireF32Bits(t, want["frame_scores"].F32(), readBin[float32](t, dir, "frame_scores.f32", B*T), "frame_scores")
					requireF32Bits(t, want["score"].F32(), readBin[float32](t, dir, "score.f32", B), "score")
				}
			})
		}
	}
}

// TestKernelReplayCTCGolden replays the torchaudio goldens (exact ties
// included: the star and all-equal cases) through the kernel.
func TestKernelReplayCTCGolden(t *testing.T) {
	for _, c := range readManifest(t).CTC {
		for _, pr := range precisions {
			t.Run(c.Name+"/"+pr, func(t *testing.T) {
				lp := readGolden(t, "ctc_"+c.Name+"_log_probs")
				tg := readGolden(t, "ctc_"+c.Name+"_targets")
				T, C := lp.Shape()[0], lp.Shape()[1]
				params := map[string]any{"blank": c.Blank, "star": c.Star, "star_logprob": float64(c.StarLogProb), "precision": pr}
				want, err := runOp(t, "ctc_align", params, rt.Tensors{"log_probs": lp, "targets": tg})
				require.NoError(t, err)
				prec, _ := ParsePrecision(pr)
				pool, err := newAlignerPool(AlignOptions{Blank: c.Blank, Star: c.Star, StarLogProb: c.StarLogProb, Precision: prec})
				require.NoError(t, err)
				// The block kernel (K = 0), then the register-resident one with
				// 8 states a thread.
				for _, K := range []int{0, 8} {
					tabs := newCTCTables(pool, [][]int{toInts(tg.I64())}, []int{T})
					bd := max(32, (tabs.maxS/8+32)/32*32)
					if K > 0 {
						tabs.useWarpLayout(K)
						bd = (tabs.maxS + 32*K - 1) / (32 * K) * 32
					}
					dir := t.TempDir()
					writeBin(t, dir, "args.f64", []float64{1, float64(T), float64(C), float64(c.Blank), float64(c.StarLogProb), DefaultScale, float64(bd), 4, float64(K)})
					writeBin(t, dir, "lp.f32", lp.F32())
					writeBin(t, dir, "meta.i64", tabs.meta)
					writeBin(t, dir, "table.i32", tabs.table)
					runEmu(t, "ctc", pr, dir)
					requireSameInts(t, want["alignment"].I32(), readBin[int32](t, dir, "alignment.i32", T), fmt.Sprintf("K=%d: alignment", K))
					requireF32Bits(t, want["frame_scores"].F32(), readBin[float32](t, dir, "frame_scores.f32", T), "frame_scores")
					requireF32Bits(t, want["score"].F32(), readBin[float32](t, dir, "score.f32", 1), "score")
					if pr == "f32" {
						requireSameInts(t, readGolden(t, "ctc_"+c.Name+"_alignment").I32(), readBin[int32](t, dir, "alignment.i32", T), "torchaudio alignment")
					}
				}
			})
		}
	}
}

func TestKernelReplayViterbi(t *testing.T) {
	cases := []struct {
		name        string
		B, T, S, bd int
		tscale      float64
		lens        []int64
		grid        bool
	}{
		{name: "ragged", B: 3, T: 20, S: 37, bd: 32, tscale: -4, lens: []int64{20, 1, 9}},
		{name: "multipass", B: 1, T: 12, S: 200, bd: 64, tscale: -5},
		{name: "unpacked", B: 2, T: 15, S: 20, bd: 32, tscale: 60},
		{name: "ties", B: 2, T: 25, S: 33, bd: 32, tscale: -2, grid: true},
	}
	for i, c := range cases {
		for _, pr := range precisions {
			t.Run(c.name+"/"+pr, func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(i), 7))
				in := viterbiInput(r, c.B, c.T, c.S, c.tscale)
				if c.grid {
					for _, k := range []string{"emissions", "transitions", "priors"} {
						for j, v := range in[k].F32() {
							in[k].F32()[j] = float32(math.Round(float64(v)*2) / 2)
						}
					}
				}
				lens := c.lens
				if lens == nil {
					lens = make([]int64, c.B)
					for b := range lens {
						lens[b] = int64(c.T)
					}
				}
				in["lengths"] = rt.Must(rt.FromSlice(rt.I64, rt.Shape{c.B}, lens))
				want, err := runOp(t, "viterbi", map[string]any{"precision": pr}, in)
				require.NoError(t, err)
				dir := t.TempDir()
				writeBin(t, dir, "args.f64", []float64{float64(c.B), float64(c.T), float64(c.S), DefaultScale, float64(c.bd)})
				writeBin(t, dir, "em.f32", in["emissions"].F32())
				writeBin(t, dir, "tr.f32", in["transitions"].F32())
				writeBin(t, dir, "pr.f32", in["priors"].F32())
				writeBin(t, dir, "lens.i64", lens)
				runEmu(t, "viterbi", pr, dir)
				requireSameInts(t, want["path"].I32(), readBin[int32](t, dir, "path.i32", c.B*c.T), "path")
				requireF32Bits(t, want["score"].F32(), readBin[float32](t, dir, "score.f32", c.B), "score")
				if pr == "i32" {
					packed := readBin[int32](t, dir, "maxq.i32", 2)[0] <= 32767
					require.Equal(t, c.tscale < 0, packed, "packing chosen from the quantised transitions")
				}
			})
		}
	}
}

func TestKernelReplayDTW(t *testing.T) {
	cases := []struct {
		name   string
		ns, ms []int
		bd     int
		grid   bool
	}{
		{name: "single", ns: []int{1}, ms: []int{1}, bd: 32},
		{name: "ragged", ns: []int{20, 1, 13, 33}, ms: []int{24, 9, 1, 30}, bd: 32},
		{name: "multipass", ns: []int{150, 90}, ms: []int{70, 120}, bd: 64},
		{name: "ties", ns: []int{30, 31}, ms: []int{35, 20}, bd: 32, grid: true},
	}
	for i, c := range cases {
		for _, pr := range precisions {
			t.Run(c.name+"/"+pr, func(t *testing.T) {
				r := rand.New(rand.NewPCG(uint64(i), 6))
				in := dtwInput(r, c.ns, c.ms)
				if c.grid {
					for j, v := range in["cost"].F32() {
						in["cost"].F32()[j] = float32(math.Round(float64(v)))
					}
				}
				want, err := runOp(t, "dtw", map[string]any{"precision": pr}, in)
				require.NoError(t, err)
				B, N, M := in["cost"].Shape()[0], in["cost"].Shape()[1], in["cost"].Shape()[2]
				dir := t.TempDir()
				writeBin(t, dir, "args.f64", []float64{float64(B), float64(N), float64(M), DefaultScale, float64(c.bd)})
				writeBin(t, dir, "cost.f32", in["cost"].F32())
				writeBin(t, dir, "dims.i64", in["lengths"].I64())
				runEmu(t, "dtw", pr, dir)
				requireSameInts(t, want["path"].I32(), readBin[int32](t, dir, "path.i32", B*(N+M)*2), "path")
				requireSameInts(t, want["path_len"].I32(), readBin[int32](t, dir, "path_len.i32", B), "path_len")
				requireF32Bits(t, want["cost_total"].F32(), readBin[float32](t, dir, "cost_total.f32", B), "cost_total")
				st := readBin[uint64](t, dir, "status.u64", 3*B)
				for b := range B {
					require.Zero(t, st[3*b], "item %d: no bad value", b)
					require.NotZero(t, st[3*b+1], "item %d: max |cost| recorded", b)
				}
			})
		}
	}
}
