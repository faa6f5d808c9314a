package onnx

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestFloat16(t *testing.T) {
	for _, c := range []struct {
		x    float32
		bits uint16
	}{
		{0, 0}, {float32(math.Copysign(0, -1)), 0x8000}, {1, 0x3c00}, {-2, 0xc000}, {65504, 0x7bff},
		{65520, 0x7c00}, {float32(math.Inf(1)), 0x7c00}, {float32(math.Inf(-1)), 0xfc00},
		{6.103515625e-05, 0x0400},       // smallest normal
		{5.960464477539063e-08, 0x0001}, // smallest subnormal
		{2.9802322387695312e-08, 0},     // half of it: ties to even (0)
		{1.0009765625, 0x3c01},          // 1 + 2^-10
		{1.00048828125, 0x3c00},         // 1 + 2^-11: tie to even
		{1.00146484375, 0x3c02},         // 1 + 3·2^-11: tie to even (up)
		{-3.5, 0xc300},
	} {
		assert.Equal(t, c.bits, f32ToF16(c.x), "%g", c.x)
	}
	assert.Equal(t, uint16(0x7e00), f32ToF16(float32(math.NaN()))&0x7e00)
	// Every half value converts to float32 and back exactly.
	for b := range 1 << 16 {
		h := uint16(b)
		f := f16ToF32(h)
		if h&0x7c00 == 0x7c00 && h&0x3ff != 0 {
			assert.True(t, math.IsNaN(float64(f)))
			continue
		}
		if got := f32ToF16(f); got != h {
			t.Fatalf("%#04x -> %g -> %#04x", h, f, got)
		}
	}
	dst := make([]float32, 2)
	fromFloat16(dst, toFloat16([]float32{0.5, -1024}))
	assert.Equal(t, []float32{0.5, -1024}, dst)
}
