package onnx

import "math"

// toFloat16 converts float32s to IEEE 754 binary16 bits, rounding to
// nearest even; values beyond the half range become ±Inf, tiny ones
// subnormals or ±0. It is the cast at the boundary of fp16 graphs.
func toFloat16(xs []float32) []uint16 {
	out := make([]uint16, len(xs))
	for i, x := range xs {
		out[i] = f32ToF16(x)
	}
	return out
}

func f32ToF16(x float32) uint16 {
	b := math.Float32bits(x)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23&0xff) - 127 + 15
	mant := b & 0x7fffff
	switch {
	case b&0x7fffffff > 0x7f800000: // NaN: keep it a quiet NaN
		return sign | 0x7e00
	case exp >= 0x1f: // overflow (and Inf)
		return sign | 0x7c00
	case exp <= 0: // subnormal or zero
		if exp < -10 {
			return sign
		}
		mant |= 0x800000
		shift := uint32(14 - exp)
		half := mant >> shift
		rem := mant & (1<<shift - 1)
		mid := uint32(1) << (shift - 1)
		if rem > mid || (rem == mid && half&1 == 1) {
			half++
		}
		return sign | uint16(half)
	}
	half := uint32(exp)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && half&1 == 1) {
		half++ // may carry into the exponent, up to Inf: still correct
	}
	return sign | uint16(half)
}

// fromFloat16 converts binary16 bits to float32s (exact).
func fromFloat16(dst []float32, h []uint16) {
	for i, v := range h {
		dst[i] = f16ToF32(v)
	}
}

func f16ToF32(v uint16) float32 {
	sign := uint32(v&0x8000) << 16
	exp := uint32(v>>10) & 0x1f
	mant := uint32(v & 0x3ff)
	switch {
	case exp == 0x1f:
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp == 0:
		if mant == 0 {
			return math.Float32frombits(sign)
		}
		f := float32(mant) / (1 << 24) // subnormal: mant · 2^-24
		if sign != 0 {
			return -f
		}
		return f
	}
	return math.Float32frombits(sign | (exp+127-15)<<23 | mant<<13)
}
