package dpx

import (
	"fmt"
	"math"
)

// Precision selects the arithmetic of a decoder.
type Precision uint8

const (
	// Float32 runs the recurrences in IEEE float32, exactly as the reference
	// implementations do (torchaudio forced_align, the numpy Viterbi/DTW).
	Float32 Precision = iota
	// Int32 runs them on fixed-point integers: every log-domain input x is
	// quantised to clamp(round(x*Scale), -QuantMax, QuantMax) (-Inf becomes
	// -QuantMax) and the recurrence uses int32 max/min with the per-op
	// renormalisation documented on each decoder. It is the contract of the
	// DPX (__vimax3_s32 / __vimin3_s32) GPU kernels. On inputs whose best path
	// wins by more than the quantisation error (about T/Scale), it returns the
	// same path as Float32.
	Int32
)

// String returns "f32" or "i32", the op parameter values.
func (p Precision) String() string {
	if p == Int32 {
		return "i32"
	}
	return "f32"
}

// ParsePrecision maps "f32" / "i32" to a Precision.
func ParsePrecision(s string) (Precision, error) {
	switch s {
	case "f32", "":
		return Float32, nil
	case "i32":
		return Int32, nil
	}
	return Float32, fmt.Errorf("precision %q: want f32 or i32", s)
}

const (
	// DefaultScale is the fixed-point scale (quanta per nat) used when a
	// decoder's Scale is 0: a quantisation step of about 0.001 nat.
	DefaultScale = 1024
	// QuantMax bounds every quantised input value: |q| <= 2^24.
	QuantMax = 1 << 24
	// maxScale keeps round(x*scale) meaningful for float32 inputs.
	maxScale = 1 << 20
)

// quantizer turns log-domain float32 values into fixed-point int32.
type quantizer struct{ scale float64 }

func newQuantizer(scale float64) (quantizer, error) {
	if scale == 0 {
		scale = DefaultScale
	}
	if !(scale >= 1 && scale <= maxScale) {
		return quantizer{}, fmt.Errorf("fixed-point scale %v: want 1 <= scale <= %d quanta per unit", scale, maxScale)
	}
	return quantizer{scale: scale}, nil
}

// q quantises one value; NaN must have been rejected by the caller.
func (z quantizer) q(x float32) int32 {
	v := math.Round(float64(x) * z.scale)
	if v > QuantMax {
		return QuantMax
	}
	if v < -QuantMax { // also -Inf
		return -QuantMax
	}
	return int32(v)
}

// row quantises src into dst (same length).
func (z quantizer) row(dst []int32, src []float32) {
	for i, x := range src {
		dst[i] = z.q(x)
	}
}

// checkFinite reports the first NaN (or, unless allowNegInf, any infinity)
// in x, naming the input and the position as index within rows of width cols.
func checkFinite(name string, x []float32, cols int, allowNegInf bool) error {
	for i, v := range x {
		bad := v != v || v > math.MaxFloat32 || (!allowNegInf && v < -math.MaxFloat32)
		if bad {
			want := "finite"
			if allowNegInf {
				want = "finite or -Inf"
			}
			if cols > 0 {
				return fmt.Errorf("%s[%d][%d] is %v; want %s", name, i/cols, i%cols, v, want)
			}
			return fmt.Errorf("%s[%d] is %v; want %s", name, i, v, want)
		}
	}
	return nil
}
