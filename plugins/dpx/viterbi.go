package dpx

import "fmt"

// MaxViterbiStates bounds S on every path, as the GPU kernel packs the
// argmax into 16 bits.
const MaxViterbiStates = 32768

// viterbiFloor is the int32 path's clamp of a candidate score below the
// renormalised row maximum (0): the int16 floor of the GPU kernel's packing.
const viterbiFloor = -32768

// HMM is a hidden Markov model for max-plus Viterbi decoding: S states,
// log-domain transitions [S, S] (from, to; row-major) and priors [S]. It is
// immutable after NewHMM and safe for concurrent use.
//
// Float32: delta_0 = priors + e_0; delta_t[j] = max_i (delta_{t-1}[i] +
// trans[i][j]) + e_t[j], each sum rounded to float32 as written; the argmax
// (and the final state) ties to the lowest index; score = max delta_{T-1}.
//
// Int32: inputs quantised (see Int32); every frame the previous row is
// renormalised to max 0 (the shift accumulates in int64), each candidate
// delta[i] + trans[i][j] is clamped below at -32768 quanta (clamped
// candidates tie; ties go to the lowest index), and score = (max + shifts) /
// Scale. This is the contract of the packed (score << 16 | 0xFFFF - arg)
// DPX kernel.
type HMM struct {
	S         int
	precision Precision
	quant     quantizer
	trT       []float32 // transposed: trT[j*S+i] = trans[i][j]
	pr        []float32
	trTq, prq []int32
}

// NewHMM checks and prepares the model. Values may be -Inf (impossible), not
// NaN or +Inf.
func NewHMM(transitions, priors []float32, S int, precision Precision, scale float64) (*HMM, error) {
	if S < 1 || S > MaxViterbiStates {
		return nil, fmt.Errorf("viterbi: S=%d states; want 1..%d", S, MaxViterbiStates)
	}
	if len(transitions) != S*S {
		return nil, fmt.Errorf("viterbi: transitions has %d values; want S*S = %d", len(transitions), S*S)
	}
	if len(priors) != S {
		return nil, fmt.Errorf("viterbi: priors has %d values; want S = %d", len(priors), S)
	}
	if err := checkFinite("transitions", transitions, S, true); err != nil {
		return nil, err
	}
	if err := checkFinite("priors", priors, 0, true); err != nil {
		return nil, err
	}
	h := &HMM{S: S, precision: precision, pr: priors, trT: make([]float32, S*S)}
	for i := range S {
		for j := range S {
			h.trT[j*S+i] = transitions[i*S+j]
		}
	}
	if precision == Int32 {
		q, err := newQuantizer(scale)
		if err != nil {
			return nil, err
		}
		h.quant = q
		h.trTq = make([]int32, S*S)
		h.prq = make([]int32, S)
		q.row(h.trTq, h.trT)
		q.row(h.prq, priors)
	}
	return h, nil
}

// Decode returns the most likely state path for emissions, a row-major
// [T, S] log-domain matrix (T >= 1), and its score. The path is written into
// dst when it has room.
func (h *HMM) Decode(dst []int32, emissions []float32) ([]int32, float32, error) {
	S := h.S
	if len(emissions) == 0 || len(emissions)%S != 0 {
		return dst, 0, fmt.Errorf("viterbi: emissions has %d values; want a non-empty multiple of S=%d", len(emissions), S)
	}
	if err := checkFinite("emissions", emissions, S, true); err != nil {
		return dst, 0, err
	}
	T := len(emissions) / S
	path := resize(dst, T)
	bp := make([]uint16, (T-1)*S) // S <= 32768: a state index fits 16 bits
	var score float32
	if h.precision == Int32 {
		score = h.decodeI32(path, bp, emissions)
	} else {
		score = h.decodeF32(path, bp, emissions)
	}
	return path, score, nil
}

func (h *HMM) decodeF32(path []int32, bp []uint16, em []float32) float32 {
	S := h.S
	prev, cur := make([]float32, S), make([]float32, S)
	for j := range S {
		prev[j] = h.pr[j] + em[j]
	}
	for t := 1; t < len(path); t++ {
		e := em[t*S : (t+1)*S]
		b := bp[(t-1)*S : t*S]
		for j := range S {
			col := h.trT[j*S : (j+1)*S]
			best, bi := argmaxSum(prev, col)
			cur[j] = best + e[j]
			b[j] = uint16(bi)
		}
		prev, cur = cur, prev
	}
	j := argmaxF32(prev)
	backtrace(path, bp, S, j)
	return prev[j]
}

func (h *HMM) decodeI32(path []int32, bp []uint16, em []float32) float32 {
	S := h.S
	prev, cur, e := make([]int32, S), make([]int32, S), make([]int32, S)
	h.quant.row(e, em[:S])
	for j := range S {
		prev[j] = h.prq[j] + e[j]
	}
	var norm int64
	for t := 1; t < len(path); t++ {
		mx := prev[0]
		for _, v := range prev[1:] {
			mx = max(mx, v)
		}
		norm += int64(mx)
		for j := range prev {
			prev[j] -= mx
		}
		h.quant.row(e, em[t*S:(t+1)*S])
		b := bp[(t-1)*S : t*S]
		for j := range S {
			col := h.trTq[j*S : (j+1)*S]
			best, bi := max(prev[0]+col[0], viterbiFloor), 0
			for i := 1; i < S; i++ {
				if c := max(prev[i]+col[i], viterbiFloor); c > best {
					best, bi = c, i
				}
			}
			cur[j] = best + e[j]
			b[j] = uint16(bi)
		}
		prev, cur = cur, prev
	}
	j := 0
	for i, v := range prev {
		if v > prev[j] {
			j = i
		}
	}
	backtrace(path, bp, S, j)
	return float32(float64(int64(prev[j])+norm) / h.quant.scale)
}

// argmaxSum returns max_i (a[i] + b[i]) (float32 sums) and its lowest
// index, for len(a) == len(b) >= 1. Four interleaved lanes keep four
// independent compare chains in flight; each lane keeps its first maximum
// and the merge prefers the lower index on ties, so the result is the
// sequential first maximum.
func argmaxSum(a, b []float32) (float32, int) {
	n := len(a)
	b = b[:n]
	if n < 8 {
		best, bi := a[0]+b[0], 0
		for i := 1; i < n; i++ {
			if c := a[i] + b[i]; c > best {
				best, bi = c, i
			}
		}
		return best, bi
	}
	v0, v1, v2, v3 := a[0]+b[0], a[1]+b[1], a[2]+b[2], a[3]+b[3]
	i0, i1, i2, i3 := 0, 1, 2, 3
	i := 4
	for ; i+4 <= n; i += 4 {
		if c := a[i] + b[i]; c > v0 {
			v0, i0 = c, i
		}
		if c := a[i+1] + b[i+1]; c > v1 {
			v1, i1 = c, i+1
		}
		if c := a[i+2] + b[i+2]; c > v2 {
			v2, i2 = c, i+2
		}
		if c := a[i+3] + b[i+3]; c > v3 {
			v3, i3 = c, i+3
		}
	}
	for ; i < n; i++ {
		if c := a[i] + b[i]; c > v0 || (c == v0 && i < i0) {
			v0, i0 = c, i
		}
	}
	for _, l := range [...]struct {
		v float32
		i int
	}{{v1, i1}, {v2, i2}, {v3, i3}} {
		if l.v > v0 || (l.v == v0 && l.i < i0) {
			v0, i0 = l.v, l.i
		}
	}
	return v0, i0
}

// backtrace follows per-frame backpointers bp [(T-1), S] from final state j.
func backtrace(path []int32, bp []uint16, S, j int) {
	T := len(path)
	path[T-1] = int32(j)
	for t := T - 1; t > 0; t-- {
		j = int(bp[(t-1)*S+j])
		path[t-1] = int32(j)
	}
}

// argmaxF32 returns the lowest index of the maximum (-Inf rows give 0).
func argmaxF32(x []float32) int {
	j := 0
	for i, v := range x {
		if v > x[j] {
			j = i
		}
	}
	return j
}
