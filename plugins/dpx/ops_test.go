package dpx

import (
	"context"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	rt "github.com/edgespeech/edge/runtime"
)

func runOp(t *testing.T, name string, params map[string]any, in rt.Tensors) (rt.Tensors, error) {
	t.Helper()
	op, err := rt.New(name, params, rt.CPU)
	require.NoError(t, err)
	return op.Run(context.Background(), in)
}

// TestAlignOpBatch pads golden cases of one C into a ragged batch and checks
// every item against torchaudio.
func TestAlignOpBatch(t *testing.T) {
	names := []string{"tight", "tight_plus1"} // both C = 10
	type item struct {
		lp      []float32
		T, C    int
		tg      []int64
		want    []int32
		wantSum float32
	}
	var items []item
	for _, n := range names {
		lp := readGolden(t, "ctc_"+n+"_log_probs")
		tg := readGolden(t, "ctc_"+n+"_targets").I64()
		var s float64
		for _, v := range readGolden(t, "ctc_"+n+"_frame_scores").F32() {
			s += float64(v)
		}
		items = append(items, item{lp.F32(), lp.Shape()[0], lp.Shape()[1], tg, readGolden(t, "ctc_"+n+"_alignment").I32(), float32(s)})
	}
	B, C := len(items), items[0].C
	T, L := 0, 0
	for _, it := range items {
		T, L = max(T, it.T), max(L, len(it.tg))
	}
	lp := make([]float32, B*T*C)
	tg := make([]int64, B*L)
	lengths := make([]int64, B)
	for b, it := range items {
		copy(lp[b*T*C:], it.lp)
		for i := range L {
			tg[b*L+i] = -1
			if i < len(it.tg) {
				tg[b*L+i] = it.tg[i]
			}
		}
		lengths[b] = int64(it.T)
	}
	in := rt.Tensors{
		"log_probs": rt.Must(rt.FromSlice(rt.F32, rt.Shape{B, T, C}, lp)),
		"targets":   rt.Must(rt.FromSlice(rt.I64, rt.Shape{B, L}, tg)),
		"lengths":   rt.Must(rt.FromSlice(rt.I64, rt.Shape{B}, lengths)),
	}
	out, err := runOp(t, "ctc_align", nil, in)
	require.NoError(t, err)
	again, err := runOp(t, "ctc_align", nil, in)
	require.NoError(t, err)
	for _, k := range []string{"alignment", "frame_scores", "score"} {
		assert.Equal(t, out[k].Data(), again[k].Data(), "deterministic %s", k)
	}
	for b, it := range items {
		row := out["alignment"].I32()[b*T : (b+1)*T]
		assert.Equal(t, it.want, row[:it.T], "item %d", b)
		for _, v := range row[it.T:] {
			assert.Equal(t, int32(-1), v)
		}
		assert.InDelta(t, it.wantSum, out["score"].F32()[b], 1e-4)
	}
	// Unbatched input gives a batch of one; i32 precision agrees here too.
	it := items[0]
	out, err = runOp(t, "ctc_align", map[string]any{"precision": "i32"}, rt.Tensors{
		"log_probs": rt.Must(rt.FromSlice(rt.F32, rt.Shape{it.T, C}, it.lp)),
		"targets":   rt.Must(rt.FromSlice(rt.I64, rt.Shape{len(it.tg)}, it.tg)),
	})
	require.NoError(t, err)
	assert.Equal(t, rt.Shape{1, it.T}, out["alignment"].Shape())
}

func TestOpsErrors(t *testing.T) {
	f := func(shape rt.Shape, v ...float32) *rt.Tensor {
		d := make([]float32, shape.NumElements())
		copy(d, v)
		return rt.Must(rt.FromSlice(rt.F32, shape, d))
	}
	i64 := func(shape rt.Shape, v ...int64) *rt.Tensor { return rt.Must(rt.FromSlice(rt.I64, shape, v)) }
	for _, tc := range []struct {
		op     string
		params map[string]any
		in     rt.Tensors
		want   string
	}{
		{"ctc_align", nil, rt.Tensors{"log_probs": f(rt.Shape{2, 4, 3}), "targets": i64(rt.Shape{1, 1}, 1)}, `"targets" has shape [1,1]; want [2, L]`},
		{"ctc_align", nil, rt.Tensors{"log_probs": f(rt.Shape{4, 3}), "targets": i64(rt.Shape{3}, 1, -1, 2)}, "padding must be trailing"},
		{"ctc_align", nil, rt.Tensors{"log_probs": f(rt.Shape{4, 3}), "targets": i64(rt.Shape{1}, 7)}, "targets[0][0] = 7 is out of range for C=3"},
		{"ctc_align", nil, rt.Tensors{"log_probs": f(rt.Shape{2, 3}), "targets": i64(rt.Shape{2}, 1, 1)}, "item 0: T=2 frames is too short for L=2 targets with R=1"},
		{"ctc_align", nil, rt.Tensors{"log_probs": f(rt.Shape{0, 3}), "targets": i64(rt.Shape{0})}, "want T >= 1 frames"},
		{"ctc_align", nil, rt.Tensors{"log_probs": f(rt.Shape{1, 2, 3}), "targets": i64(rt.Shape{1, 1}, 1), "lengths": i64(rt.Shape{1}, 3)}, "lengths[0] = 3; want 1..2"},
		{"ctc_align", nil, rt.Tensors{"log_probs": f(rt.Shape{2, 3}, float32(math.NaN())), "targets": i64(rt.Shape{1}, 1)}, "item 0: log_probs[0][0] is NaN"},
		{"ctc_greedy", map[string]any{"blank": 5}, rt.Tensors{"log_probs": f(rt.Shape{2, 3})}, "item 0: blank id 5 is out of range for C=3"},
		{"viterbi", nil, rt.Tensors{"emissions": f(rt.Shape{2, 3}), "transitions": f(rt.Shape{2, 2}), "priors": f(rt.Shape{3})}, "want [3,3] and [3] for S=3"},
		{"dtw", nil, rt.Tensors{"cost": f(rt.Shape{2, 3}), "lengths": i64(rt.Shape{1, 2}, 3, 1)}, "lengths[0] = (3, 1); want 1..2 and 1..3"},
		{"dtw", map[string]any{"precision": "i64"}, nil, `"i64" is not one of f32 | i32`},
		{"dtw", map[string]any{"scale": 0.1}, nil, "fixed-point scale 0.1"},
	} {
		t.Run(tc.op+"/"+tc.want, func(t *testing.T) {
			op, err := rt.New(tc.op, tc.params, rt.CPU)
			if err == nil {
				_, err = op.Run(context.Background(), tc.in)
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

func TestGreedyViterbiDTWOps(t *testing.T) {
	lp := rt.Must(rt.FromSlice(rt.F32, rt.Shape{2, 3, 2}, []float32{-1, -0.1, -0.1, -1, -1, -0.1, -1, -0.1, -1, -0.1, -1, -0.1}))
	out, err := runOp(t, "ctc_greedy", nil, rt.Tensors{"log_probs": lp, "lengths": rt.Must(rt.FromSlice(rt.I64, rt.Shape{2}, []int64{3, 1}))})
	require.NoError(t, err)
	assert.Equal(t, []int64{1, 1, 1, -1}, out["tokens"].I64())
	assert.Equal(t, []int32{0, 1, 2, 3, 0, 1, -1, -1}, out["spans"].I32())
	assert.Equal(t, []int64{2, 1}, out["token_lengths"].I64())

	em := readGolden(t, "viterbi_rand_emissions")
	out, err = runOp(t, "viterbi", nil, rt.Tensors{"emissions": em, "transitions": readGolden(t, "viterbi_rand_transitions"),
		"priors": readGolden(t, "viterbi_rand_priors"), "lengths": readGolden(t, "viterbi_rand_lengths")})
	require.NoError(t, err)
	assert.Equal(t, readGolden(t, "viterbi_rand_path").I32(), out["path"].I32())
	assert.Equal(t, readGolden(t, "viterbi_rand_score").F32(), out["score"].F32())

	out, err = runOp(t, "dtw", nil, rt.Tensors{"cost": readGolden(t, "dtw_rand_cost"), "lengths": readGolden(t, "dtw_rand_lengths")})
	require.NoError(t, err)
	assert.Equal(t, readGolden(t, "dtw_rand_path").I32(), out["path"].I32())
	assert.Equal(t, readGolden(t, "dtw_rand_path_len").I32(), out["path_len"].I32())
	assert.Equal(t, readGolden(t, "dtw_rand_cost_total").F32(), out["cost_total"].F32())
}
