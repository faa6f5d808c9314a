package onnx

import (
	"context"
	"encoding/binary"
	"math"
	"sync"
	"testing"

	"github.com/edgespeech/edge/runtime"
)

var fuzzEncoders = sync.OnceValues(func() (map[string]*Encoder, error) {
	out := map[string]*Encoder{}
	for _, name := range []string{"nemo", "w2v", "w2v_mask"} {
		e, err := Open("testdata/"+name, Options{Threads: 1})
		if err != nil {
			return nil, err
		}
		out[name] = e
	}
	return out, nil
})

// FuzzEncoderRun feeds the encoders tensors whose shapes, lengths and values
// come from the fuzzer: every run must give an error or well-formed outputs
// (log-probs that are finite and normalised, lengths within the frames),
// never a panic.
func FuzzEncoderRun(f *testing.F) {
	f.Add(uint8(0), uint8(1), uint16(128), uint16(20), []byte{20, 0, 0, 0})
	f.Add(uint8(0), uint8(2), uint16(128), uint16(9), []byte{9, 0, 0, 0, 3, 0, 0, 0})
	f.Add(uint8(0), uint8(1), uint16(80), uint16(20), []byte{})
	f.Add(uint8(1), uint8(1), uint16(1), uint16(800), []byte{0, 3, 0, 0})
	f.Add(uint8(2), uint8(2), uint16(1), uint16(500), []byte{0xf4, 1, 0, 0, 0x90, 1, 0, 0})
	f.Add(uint8(1), uint8(1), uint16(1), uint16(399), []byte{})
	f.Add(uint8(0), uint8(1), uint16(128), uint16(4), []byte{0, 0, 0xc0, 0x7f}) // NaN bits as a value
	f.Fuzz(func(t *testing.T, which, batch uint8, mels, frames uint16, extra []byte) {
		encs, err := fuzzEncoders()
		if err != nil {
			t.Fatal(err)
		}
		name := []string{"nemo", "w2v", "w2v_mask"}[int(which)%3]
		e := encs[name]
		b, n := int(batch%4), int(frames%2000)
		var x *runtime.Tensor
		if name == "nemo" {
			x = runtime.Must(runtime.NewTensor(runtime.F32, runtime.Shape{b, int(mels % 200), n}))
		} else {
			x = runtime.Must(runtime.NewTensor(runtime.F32, runtime.Shape{b, n}))
		}
		data := x.F32()
		for i := range data {
			data[i] = float32(math.Sin(float64(i) * 0.1))
		}
		in := runtime.Tensors{e.InputName(): x}
		// extra: int32 lengths, then float32 values overwriting the start of x.
		if len(extra) >= 4*b && b > 0 {
			l := make([]int64, b)
			for i := range l {
				l[i] = int64(int32(binary.LittleEndian.Uint32(extra[4*i:])))
			}
			in["lengths"] = runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{b}, l))
			extra = extra[4*b:]
		}
		for i := 0; i+4 <= len(extra) && i/4 < len(data); i += 4 {
			data[i/4] = math.Float32frombits(binary.LittleEndian.Uint32(extra[i:]))
		}
		out, err := e.Run(context.Background(), in)
		if err != nil {
			return
		}
		lp, ol := out["log_probs"], out["lengths"]
		s := lp.Shape()
		if len(s) != 3 || s[0] != b || ol.Shape()[0] != b {
			t.Fatalf("outputs %v %v for input %v", lp, ol, x)
		}
		for _, l := range ol.I64() {
			if l < 0 || l > int64(s[1]) {
				t.Fatalf("output length %d outside 0..%d", l, s[1])
			}
		}
		v := s[2]
		for r := 0; r+v <= len(lp.F32()); r += v {
			var sum float64
			for _, p := range lp.F32()[r : r+v] {
				if p > 1e-5 || p != p {
					t.Fatalf("log-prob %v", p)
				}
				sum += math.Exp(float64(p))
			}
			if math.Abs(sum-1) > 1e-3 {
				t.Fatalf("row %d sums to %v", r/v, sum)
			}
		}
	})
}
