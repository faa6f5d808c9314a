package dpx

import "fmt"

// Span is one token of a CTC path: Token occupies frames [Start, End).
type Span struct {
	Token      int32
	Start, End int32
}

// Greedy is CTC best-path decoding of logProbs, a row-major [T, C] matrix:
// the argmax of every frame (ties to the lowest id), runs of the same id
// merged, blanks dropped. It appends the tokens with their frame spans to
// dst. Values may be -Inf, not NaN.
func Greedy(dst []Span, logProbs []float32, C, blank int) ([]Span, error) {
	if C < 1 || len(logProbs)%C != 0 {
		return dst, fmt.Errorf("log_probs has %d values; want a multiple of C=%d >= 1", len(logProbs), C)
	}
	if blank < 0 || blank >= C {
		return dst, fmt.Errorf("blank id %d is out of range for C=%d columns", blank, C)
	}
	if err := checkFinite("log_probs", logProbs, C, true); err != nil {
		return dst, err
	}
	T := len(logProbs) / C
	prev := int32(-1)
	for t := range T {
		row := logProbs[t*C : (t+1)*C]
		k, best := 0, row[0]
		for c := 1; c < len(row); c++ {
			if row[c] > best {
				k, best = c, row[c]
			}
		}
		dst, prev = extend(dst, prev, int32(k), int32(t), blank)
	}
	return dst, nil
}

// Spans collapses a frame labelling (such as Alignment.Labels) into token
// spans: each run of one non-blank id is one token. A CTC path separates
// repeated tokens by a blank, so runs and tokens coincide. Labels < 0
// (padding) end the path.
func Spans(dst []Span, labels []int32, blank int) []Span {
	prev := int32(-1)
	for t, k := range labels {
		if k < 0 {
			break
		}
		dst, prev = extend(dst, prev, k, int32(t), blank)
	}
	return dst
}

// extend adds frame t labelled k to the spans, given the previous label.
func extend(dst []Span, prev, k, t int32, blank int) ([]Span, int32) {
	switch {
	case int(k) == blank:
	case k == prev:
		dst[len(dst)-1].End = t + 1
	default:
		dst = append(dst, Span{Token: k, Start: t, End: t + 1})
	}
	return dst, k
}
