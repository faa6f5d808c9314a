package rvq

import (
	"context"
	"encoding/binary"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
)

// fuzzInput turns arbitrary bytes into an rvq op call: a small header picks
// the shapes, split and lengths, the rest fills the codebooks, x and codes:
// mostly valid values, and one in 256 raw bit patterns (NaN, Inf, huge or
// negative values included).
type fuzzInput struct {
	b, t, q, k, d, split int
	lengths              []int64
	books                []uint16
	x                    []float32
	codes                []int32
}

func parseFuzz(data []byte) *fuzzInput {
	if len(data) < 6 {
		return nil
	}
	h := data[:6]
	data = data[6:]
	f := &fuzzInput{b: int(h[0]%3) + 1, t: int(h[1]%9) + 1, q: int(h[2]%4) + 1, k: int(h[3]%40) + 1, d: int(h[4]%9) + 1}
	f.split = int(h[5]%4) - 1 // -1 (invalid) .. 2
	next := func() uint16 {
		if len(data) < 2 {
			return 0
		}
		v := binary.LittleEndian.Uint16(data)
		data = data[2:]
		return v
	}
	if h[5]&0x80 != 0 {
		for i := 0; i < f.b; i++ {
			f.lengths = append(f.lengths, int64(int8(next()))%int64(f.t+2))
		}
	}
	f.books = make([]uint16, f.q*f.k*f.d)
	for i := range f.books {
		// Mostly small finite values, so that some calls get past validation.
		v := next()
		if v&0xFF00 != 0xFF00 {
			v = v&0x807F | 0x3C00
		}
		f.books[i] = v
	}
	f.x = make([]float32, f.b*f.t*f.d)
	for i := range f.x {
		if v := next(); v&0xFF00 != 0xFF00 {
			f.x[i] = float32(int16(v<<1)) / 0x4000
		} else {
			f.x[i] = math.Float32frombits(uint32(v)<<16 | uint32(next()))
		}
	}
	f.codes = make([]int32, f.b*f.t*f.q)
	for i := range f.codes {
		if v := next(); v&0xFF00 != 0xFF00 {
			f.codes[i] = int32(v) % int32(f.k)
		} else {
			f.codes[i] = int32(int16(v))
		}
	}
	return f
}

func (f *fuzzInput) tensors() (x, cb, codes, lengths *runtime.Tensor) {
	x = runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{f.b, f.t, f.d}, f.x))
	cb = runtime.Must(runtime.FromSlice(runtime.U16, runtime.Shape{f.q, f.k, f.d}, f.books))
	codes = runtime.Must(runtime.FromSlice(runtime.I32, runtime.Shape{f.b, f.t, f.q}, f.codes))
	if f.lengths != nil {
		lengths = runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{len(f.lengths)}, f.lengths))
	}
	return
}

func fuzzSeeds(f *testing.F) {
	f.Add([]byte{1, 4, 2, 5, 3, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	f.Add([]byte{2, 8, 3, 39, 8, 0x81, 0xff, 0x7f, 0x80, 0x7f, 0xc0, 0x7f, 0, 0, 1, 0, 2, 0})
	f.Add([]byte{0, 0, 0, 0, 0, 2, 0x80, 0x7f, 0xc0, 0x7f, 0xff, 0xff})
	f.Add(make([]byte, 600))
}

// FuzzDecode feeds arbitrary codes, codebooks and lengths to rvq_decode: it
// must return an error or a finite result, never panic.
func FuzzDecode(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := parseFuzz(data)
		if in == nil {
			return
		}
		_, cb, codes, lengths := in.tensors()
		inst, err := runtime.New("rvq_decode", map[string]any{"split": max(in.split, 0)}, runtime.CPU)
		require.NoError(t, err)
		ts := runtime.Tensors{"codes": codes, "codebooks": cb}
		if lengths != nil {
			ts["lengths"] = lengths
		}
		out, err := inst.Run(context.Background(), ts)
		if err != nil {
			return
		}
		for _, v := range out["quantized"].F32() {
			require.False(t, math.IsNaN(float64(v)))
		}
	})
}

// FuzzEncode feeds arbitrary x, codebooks, lengths and split to rvq_encode:
// it must return an error or in-range codes whose decoding is quantized.
func FuzzEncode(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := parseFuzz(data)
		if in == nil {
			return
		}
		x, cb, _, lengths := in.tensors()
		cfg := map[string]any{"split": in.split}
		enc, err := runtime.New("rvq_encode", cfg, runtime.CPU)
		if err != nil {
			require.Negative(t, in.split)
			return
		}
		ts := runtime.Tensors{"x": x, "codebooks": cb}
		if lengths != nil {
			ts["lengths"] = lengths
		}
		out, err := enc.Run(context.Background(), ts)
		if err != nil {
			return
		}
		for i, c := range out["codes"].I32() {
			require.True(t, c >= -1 && int(c) < in.k, "code %d = %d", i, c)
		}
		dec, err := runtime.New("rvq_decode", cfg, runtime.CPU)
		require.NoError(t, err)
		ts = runtime.Tensors{"codes": out["codes"], "codebooks": cb}
		if lengths != nil {
			ts["lengths"] = lengths
		}
		back, err := dec.Run(context.Background(), ts)
		require.NoError(t, err)
		require.Equal(t, out["quantized"].F32(), back["quantized"].F32())
	})
}
