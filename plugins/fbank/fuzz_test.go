package fbank

import (
	"context"
	"encoding/binary"
	"math"
	"testing"
)

// FuzzCompute feeds arbitrary samples (raw float32 bits, so NaN, Inf and
// huge values occur) and arbitrary frame geometry to the frontend. It must
// never panic; when it accepts the input, every feature is finite and the
// output has the promised size. The seed corpus runs in plain `go test`;
// explore with `go test -fuzz FuzzCompute ./plugins/fbank`.
func FuzzCompute(f *testing.F) {
	seed := make([]byte, 4*1200)
	for i := 0; i < 1200; i++ {
		binary.LittleEndian.PutUint32(seed[4*i:], math.Float32bits(float32(math.Sin(float64(i)/7))))
	}
	f.Add(seed, uint8(0), uint16(400), uint16(160), uint8(0))
	f.Add(seed, uint8(3), uint16(512), uint16(160), uint8(1))
	f.Add(seed[:1604], uint8(5), uint16(97), uint16(33), uint8(2))
	f.Add([]byte{0, 0, 0xc0, 0x7f}, uint8(1), uint16(2), uint16(1), uint8(0)) // one NaN
	f.Add(seed[:40], uint8(2), uint16(16), uint16(4), uint8(3))
	f.Fuzz(func(t *testing.T, raw []byte, presetIdx uint8, nfft, hop uint16, mode uint8) {
		if len(raw) > 4*3000 {
			raw = raw[:4*3000] // bounded work per input: a prime n_fft costs O(n²) per frame
		}
		x := make([]float32, len(raw)/4)
		for i := range x {
			x[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		names := Presets()
		cfg, _ := Preset(names[int(presetIdx)%len(names)])
		cfg.NFFT = int(nfft%160) + 2
		if nfft&0x8000 != 0 {
			cfg.NFFT = []int{400, 512}[nfft&1] // the preset sizes (SIMD path)
		}
		cfg.WinLength = min(cfg.WinLength, cfg.NFFT)
		cfg.HopLength = int(hop%600) + 32
		cfg.PadMode = []PadMode{PadReflect, PadConstant, PadNone}[mode%3]
		cfg.Normalize = []Normalize{PerFeature, PerUtterance, None, Global}[(mode/3)%4]
		cfg.NumMels = 1 + int(mode)%40
		fe, err := NewFrontend(cfg)
		if err != nil {
			return // an invalid config is reported, not a crash
		}
		out, err := fe.Compute(context.Background(), [][]float32{x, x[:len(x)/2]}, 2)
		if err != nil {
			return
		}
		if len(out.Data) != 2*out.Frames*out.Mels || out.Mels != cfg.NumMels {
			t.Fatalf("output size %d for %d frames x %d mels", len(out.Data), out.Frames, out.Mels)
		}
		for i, v := range out.Data {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				t.Fatalf("feature %d is %v", i, v)
			}
		}
	})
}
