package fbank

import "math"

// lnTableBits is the number of leading mantissa bits that index lnTable.
const lnTableBits = 7

// lnTable holds, for each interval c ∈ [1 + i/128, 1 + (i+1)/128), the
// reciprocal of its midpoint c_i and ln(c_i), both in float64.
var lnTable = func() (t [1 << lnTableBits]struct{ inv, ln float64 }) {
	for i := range t {
		c := 1 + (float64(i)+0.5)/(1<<lnTableBits)
		t[i].inv, t[i].ln = 1/c, math.Log(c)
	}
	return t
}()

// ln is the natural logarithm for the positive, finite, normal arguments
// the frontend produces (powers floored at 1e-10, 2^-24 or log_clamp_min),
// with an absolute error below 1e-15: x = 2^e·m, m ∈ [1, 2),
// ln x = e·ln 2 + ln c + ln(1 + r) with r = m/c - 1, |r| < 1/256, and
// ln(1 + r) from a degree-6 series. It is 3-4x faster than math.Log, which
// matters at n_mels logs per frame. Other arguments go to math.Log.
func ln(x float64) float64 {
	bits := math.Float64bits(x)
	exp := int(bits>>52) - 1023
	if exp <= -1023 || exp >= 1024 {
		return math.Log(x) // zero, subnormal, negative (sign bit set), Inf or NaN
	}
	e := &lnTable[(bits>>(52-lnTableBits))&(1<<lnTableBits-1)]
	m := math.Float64frombits(bits&(1<<52-1) | 1023<<52)
	r := m*e.inv - 1
	r2 := r * r
	// ln(1+r) = r - r²/2 + r³/3 - r⁴/4 + r⁵/5 - r⁶/6 (+ O(r⁷) < 1e-17)
	p := r - r2*(0.5-r*(1.0/3-r*(0.25-r*(0.2-r*(1.0/6)))))
	return float64(exp)*math.Ln2 + e.ln + p
}
