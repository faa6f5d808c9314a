package rvq

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
)

func run(t *testing.T, op string, cfg map[string]any, in runtime.Tensors) (runtime.Tensors, error) {
	t.Helper()
	inst, err := runtime.New(op, cfg, runtime.CPU)
	if err != nil {
		return nil, err
	}
	return inst.Run(context.Background(), in)
}

func tensor[E any](t *testing.T, dt runtime.DType, shape runtime.Shape, data []E) *runtime.Tensor {
	t.Helper()
	ten, err := runtime.FromSlice(dt, shape, data)
	require.NoError(t, err)
	return ten
}

// The three codebook encodings (u16, i16, f32) and the three layouts (uniform
// [Q,K,D], padded [Q,Kmax,D] + codebook_sizes, concatenated [sum K,D] +
// codebook_sizes) all give the codes of the plain Go API.
func TestOpCodebookForms(t *testing.T) {
	const B, T, d = 2, 33, 8
	sizes := []int{20, 7, 16}
	_, x, _ := synth(rand.New(rand.NewPCG(11, 12)), B*T, 1, 20, d)
	rng := rand.New(rand.NewPCG(13, 14))
	stages := make([][]uint16, len(sizes))
	for q, k := range sizes {
		b, _, _ := synth(rng, 1, 1, k, d)
		stages[q] = b[0]
	}
	cb, err := NewCodebooksBF16(d, stages...)
	require.NoError(t, err)
	wantCodes, wantQ := make([]int32, B*T*len(sizes)), make([]float32, B*T*d)
	require.NoError(t, cb.Encode(context.Background(), x, Batch{B: B, T: T}, wantCodes, wantQ))

	kmax := 20
	padded := make([]uint16, len(sizes)*kmax*d)
	var concat []uint16
	for q, s := range stages {
		copy(padded[q*kmax*d:], s)
		concat = append(concat, s...)
	}
	i16 := make([]int16, len(padded))
	f32 := make([]float32, len(padded))
	for i, v := range padded {
		i16[i], f32[i] = int16(v), BF16ToFloat32(v)
	}
	xt := tensor(t, runtime.F32, runtime.Shape{B, T, d}, x)
	sz := []any{20, 7, 16}
	forms := map[string]struct {
		cb  *runtime.Tensor
		cfg map[string]any
	}{
		"u16 padded":   {tensor(t, runtime.U16, runtime.Shape{3, kmax, d}, padded), map[string]any{"codebook_sizes": sz}},
		"i16 padded":   {tensor(t, runtime.I16, runtime.Shape{3, kmax, d}, i16), map[string]any{"codebook_sizes": "20,7,16"}},
		"f32 padded":   {tensor(t, runtime.F32, runtime.Shape{3, kmax, d}, f32), map[string]any{"codebook_sizes": sz}},
		"u16 concat":   {tensor(t, runtime.U16, runtime.Shape{len(concat) / d, d}, concat), map[string]any{"codebook_sizes": sz}},
		"u16 uniform0": {tensor(t, runtime.U16, runtime.Shape{1, 20, d}, stages[0]), nil},
	}
	for name, f := range forms {
		t.Run(name, func(t *testing.T) {
			out, err := run(t, "rvq_encode", f.cfg, runtime.Tensors{"x": xt, "codebooks": f.cb})
			require.NoError(t, err)
			codes := out["codes"]
			q := codes.Shape()[2]
			require.Equal(t, runtime.Shape{B, T, q}, codes.Shape())
			for fr := 0; fr < B*T; fr++ {
				assert.Equal(t, wantCodes[fr*3:fr*3+q], codes.I32()[fr*q:(fr+1)*q])
			}
			if q == 3 {
				assert.Equal(t, wantQ, out["quantized"].F32())
			}
			dec, err := run(t, "rvq_decode", f.cfg, runtime.Tensors{"codes": codes, "codebooks": f.cb})
			require.NoError(t, err)
			assert.Equal(t, out["quantized"].F32(), dec["quantized"].F32())
		})
	}
}

func TestOpLengthsAndSplit(t *testing.T) {
	const B, T, nq, k, d = 3, 20, 4, 32, 16
	books, x, _ := synth(rand.New(rand.NewPCG(15, 16)), B*T, nq, k, d)
	flat := make([]uint16, 0, nq*k*d)
	for _, b := range books {
		flat = append(flat, b...)
	}
	cbt := tensor(t, runtime.U16, runtime.Shape{nq, k, d}, flat)
	xt := tensor(t, runtime.F32, runtime.Shape{B, T, d}, x)
	lengths := []int64{20, 5, 0}
	cfg := map[string]any{"split": 1}
	out, err := run(t, "rvq_encode", cfg, runtime.Tensors{"x": xt, "codebooks": cbt,
		"lengths": tensor(t, runtime.I64, runtime.Shape{B}, lengths)})
	require.NoError(t, err)

	cb, err := NewCodebooksBF16(d, books...)
	require.NoError(t, err)
	cb, err = cb.WithSplit(1)
	require.NoError(t, err)
	codes, q := make([]int32, B*T*nq), make([]float32, B*T*d)
	require.NoError(t, cb.Encode(context.Background(), x, Batch{B: B, T: T, Lengths: []int{20, 5, 0}}, codes, q))
	assert.Equal(t, codes, out["codes"].I32())
	assert.Equal(t, q, out["quantized"].F32())

	// i64 codes and i32 lengths are accepted by rvq_decode.
	c64 := make([]int64, len(codes))
	for i, c := range codes {
		c64[i] = int64(c)
	}
	dec, err := run(t, "rvq_decode", cfg, runtime.Tensors{"codes": tensor(t, runtime.I64, runtime.Shape{B, T, nq}, c64),
		"codebooks": cbt, "lengths": tensor(t, runtime.I32, runtime.Shape{B}, []int32{20, 5, 0})})
	require.NoError(t, err)
	assert.Equal(t, q, dec["quantized"].F32())
}

func TestOpErrors(t *testing.T) {
	x := tensor(t, runtime.F32, runtime.Shape{1, 2, 2}, []float32{0, 0, 1, 1})
	cb := tensor(t, runtime.U16, runtime.Shape{2, 2, 2}, make([]uint16, 8))
	cbD3 := tensor(t, runtime.U16, runtime.Shape{1, 2, 3}, make([]uint16, 6))
	codes := tensor(t, runtime.I32, runtime.Shape{1, 2, 2}, []int32{0, 1, 1, 2})
	big := tensor(t, runtime.I64, runtime.Shape{1, 2, 2}, []int64{0, 1, 1 << 40, 0})
	cases := []struct {
		name string
		op   string
		cfg  map[string]any
		in   runtime.Tensors
		want string
	}{
		{"D mismatch", "rvq_encode", nil, runtime.Tensors{"x": x, "codebooks": cbD3},
			`input "x" has shape [1,2,2] (D = 2), but the codebooks have D = 3`},
		{"f32 not bf16", "rvq_encode", nil, runtime.Tensors{"x": x, "codebooks": tensor(t, runtime.F32, runtime.Shape{1, 1, 2}, []float32{1, 1.001})},
			`input "codebooks" [1,1,2]: codebook 0 entry 0 dim 1: value 1.001 is not exactly representable in bfloat16`},
		{"sizes count", "rvq_encode", map[string]any{"codebook_sizes": "1"}, runtime.Tensors{"x": x, "codebooks": cb},
			"codebook_sizes has 1 entries, want Q = 2"},
		{"sizes exceed K", "rvq_encode", map[string]any{"codebook_sizes": "2,3"}, runtime.Tensors{"x": x, "codebooks": cb},
			"codebook_sizes[1] = 3 exceeds the 2 rows of each codebook"},
		{"sizes sum", "rvq_encode", map[string]any{"codebook_sizes": "1,2"}, runtime.Tensors{"x": x, "codebooks": tensor(t, runtime.U16, runtime.Shape{4, 2}, make([]uint16, 8))},
			"codebook_sizes [1 2] sum to 3, want the 4 rows"},
		{"sizes zero", "rvq_encode", map[string]any{"codebook_sizes": "0,2"}, nil, "codebook_sizes[0] = 0, want 1..4096"},
		{"split too large", "rvq_encode", map[string]any{"split": 2}, runtime.Tensors{"x": x, "codebooks": cb},
			"split = 2, want 0 (one chain) or 1..1"},
		{"split negative", "rvq_encode", map[string]any{"split": -1}, nil, "split = -1"},
		{"lengths shape", "rvq_encode", nil, runtime.Tensors{"x": x, "codebooks": cb, "lengths": tensor(t, runtime.I64, runtime.Shape{2}, []int64{1, 1})},
			`input "lengths" has shape [2], want [B] = [1]`},
		{"lengths range", "rvq_encode", nil, runtime.Tensors{"x": x, "codebooks": cb, "lengths": tensor(t, runtime.I64, runtime.Shape{1}, []int64{3})},
			`input "lengths"[0] = 3, want 0..T = 0..2`},
		{"empty x", "rvq_encode", nil, runtime.Tensors{"x": tensor(t, runtime.F32, runtime.Shape{1, 0, 2}, []float32{}), "codebooks": cb},
			`input "x" has shape [1,0,2]: want at least one item and one frame`},
		{"x rank", "rvq_encode", nil, runtime.Tensors{"x": tensor(t, runtime.F32, runtime.Shape{4}, []float32{0, 0, 1, 1}), "codebooks": cb},
			`input "x" has shape [4] (rank 1)`},
		{"codes Q", "rvq_decode", nil, runtime.Tensors{"codes": codes, "codebooks": cbD3},
			`input "codes" has shape [1,2,2] (Q = 2), but there are 1 codebooks`},
		{"code range", "rvq_decode", nil, runtime.Tensors{"codes": codes, "codebooks": cb},
			"codes[0, 1, 1] = 2, want 0..1 (codebook 1 has K = 2 entries)"},
		{"code int64 overflow", "rvq_decode", nil, runtime.Tensors{"codes": big, "codebooks": cb},
			"codes[0, 1, 0] = 1099511627776, want 0..K_q-1"},
		{"codebooks empty", "rvq_decode", nil, runtime.Tensors{"codes": codes, "codebooks": tensor(t, runtime.U16, runtime.Shape{2, 0, 2}, []uint16{})},
			"codebook 0 has 0 values"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := run(t, c.op, c.cfg, c.in)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
		})
	}
}

// rvq ops have no CUDA implementation yet: building one for another backend
// is an error, not a silent fallback.
func TestOpOtherBackend(t *testing.T) {
	spec, err := runtime.Lookup("rvq_encode")
	require.NoError(t, err)
	p, err := runtime.ResolveParams(spec.Name, spec.Params, nil)
	require.NoError(t, err)
	_, err = spec.New(p, fakeBackend{})
	require.Error(t, err)
	assert.Contains(t, err.Error(), `no implementation for backend "fake"`)
}

type fakeBackend struct{ runtime.Backend }

func (fakeBackend) Name() string { return "fake" }
