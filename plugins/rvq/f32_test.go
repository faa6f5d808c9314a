package rvq

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/edgespeech/edge/runtime"
)

// TestF32Codebooks checks fp32 codebooks (not bf16-representable) against a
// float64 brute force on random data with clear margins, the exact residual
// update, Decode's bit-identity, and ties to the lowest index.
func TestF32Codebooks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const d, k, q, n = 12, 37, 3, 50
	stages := make([][]float32, q)
	for i := range stages {
		stages[i] = make([]float32, k*d)
		for j := range stages[i] {
			stages[i][j] = float32(rng.NormFloat64()) * float32(math.Pow(0.5, float64(i)))
		}
	}
	if _, err := NewCodebooks(d, stages...); err == nil {
		t.Fatal("NewCodebooks accepted non-bf16 values")
	}
	c, err := NewCodebooksF32(d, stages...)
	if err != nil {
		t.Fatal(err)
	}
	if !c.F32() {
		t.Fatal("F32() = false")
	}
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	codes, quant := make([]int32, n*q), make([]float32, n*d)
	if err := c.Encode(context.Background(), x, Batch{B: 1, T: n}, codes, quant); err != nil {
		t.Fatal(err)
	}
	for f := 0; f < n; f++ {
		r := append([]float32(nil), x[f*d:(f+1)*d]...)
		for s := 0; s < q; s++ {
			best, second, bi := math.Inf(1), math.Inf(1), -1
			for e := 0; e < k; e++ {
				var dist float64
				for j := 0; j < d; j++ {
					v := float64(r[j]) - float64(stages[s][e*d+j])
					dist += v * v
				}
				if dist < best {
					second, best, bi = best, dist, e
				} else if dist < second {
					second = dist
				}
			}
			if (second-best)/best < 1e-4 {
				continue // too close to call in fp32; skip the check
			}
			if got := codes[f*q+s]; int(got) != bi {
				t.Fatalf("frame %d stage %d: code %d, want %d", f, s, got, bi)
			}
			for j := range r {
				r[j] -= stages[s][int(codes[f*q+s])*d+j]
			}
		}
	}
	dec := make([]float32, n*d)
	if err := c.Decode(context.Background(), codes, Batch{B: 1, T: n}, dec); err != nil {
		t.Fatal(err)
	}
	for i := range dec {
		if math.Float32bits(dec[i]) != math.Float32bits(quant[i]) {
			t.Fatalf("Decode[%d] = %v, Encode's quantized %v", i, dec[i], quant[i])
		}
	}
	// Duplicate codewords tie: the lowest index wins.
	dup := make([]float32, 3*d)
	for j := 0; j < d; j++ {
		dup[j], dup[d+j], dup[2*d+j] = 5, 0.1, 0.1
	}
	c2, err := NewCodebooksF32(d, dup)
	if err != nil {
		t.Fatal(err)
	}
	one := make([]int32, 1)
	if err := c2.Encode(context.Background(), make([]float32, d), Batch{B: 1, T: 1}, one, make([]float32, d)); err != nil {
		t.Fatal(err)
	}
	if one[0] != 1 {
		t.Fatalf("tie went to %d, want 1", one[0])
	}
	if _, err := NewCodebooksF32(d, []float32{float32(math.NaN())}); err == nil {
		t.Fatal("NaN codebook accepted")
	}
}

// The op with fp32 = true takes f32 codebooks of any value and gives the Go
// API's codes; without it such values are an error, as are bf16 patterns
// with it.
func TestOpFP32(t *testing.T) {
	const d, k, n = 8, 21, 30
	rng := rand.New(rand.NewPCG(5, 6))
	books := make([]float32, 2*k*d)
	for i := range books {
		books[i] = float32(rng.NormFloat64())
	}
	x := make([]float32, n*d)
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	c, err := NewCodebooksF32(d, books[:k*d], books[k*d:])
	if err != nil {
		t.Fatal(err)
	}
	want := make([]int32, n*2)
	if err := c.Encode(context.Background(), x, Batch{B: 1, T: n}, want, make([]float32, n*d)); err != nil {
		t.Fatal(err)
	}
	in := runtime.Tensors{"x": tensor(t, runtime.F32, runtime.Shape{1, n, d}, x),
		"codebooks": tensor(t, runtime.F32, runtime.Shape{2, k, d}, books)}
	out, err := run(t, "rvq_encode", map[string]any{"fp32": true}, in)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range out["codes"].I32() {
		if v != want[i] {
			t.Fatalf("codes[%d] = %d, want %d", i, v, want[i])
		}
	}
	if _, err := run(t, "rvq_encode", nil, in); err == nil {
		t.Fatal("non-bf16 f32 codebooks accepted without fp32")
	}
	in["codebooks"] = tensor(t, runtime.U16, runtime.Shape{2, k, d}, make([]uint16, 2*k*d))
	if _, err := run(t, "rvq_encode", map[string]any{"fp32": true}, in); err == nil {
		t.Fatal("bf16 patterns accepted with fp32")
	}
}
