package dpx

import "golang.org/x/sys/cpu"

// useAVX2 selects the vector CTC steps (the pure Go step is the
// fallback and the reference it is tested against).
var useAVX2 = cpu.X86.HasAVX2

// ctcStepF32AVX2 runs the float32 trellis step on n blocks of 8 states:
// for block k and lane i (state s = 8k+i from the first state s0),
// x2 = prev[s-2] + pen[s], x1 = prev[s-1], x0 = prev[s] (prev points at
// state s0-2), c2 = x2 > x1 && x2 > x0, c1 = x1 > x0 && x1 > x2 (ordered
// compares), r = c2 ? x2 : c1 ? x1 : x0, cur[s] = r + e[lab[s]]; byte k of
// plane1 / plane2 gets the c1 / c2 bits of the block. IEEE float32 adds,
// so it matches the scalar step bit for bit.
//
//go:noescape
func ctcStepF32AVX2(prev, pen *float32, lab *int32, e, cur *float32, plane1, plane2 *byte, n int)

// ctcStepI32AVX2 is the int32 step on n blocks of 8 states, with the same
// layout as ctcStepF32AVX2: x2 = mask[s] ? prev[s-2] : ctcNeg, the same
// choice rule on integers, cur[s] = ctcNeg if r == ctcNeg else
// max(r - m + e[lab[s]], ctcFloor) (int32 wrap-around arithmetic, as the
// scalar step). It returns the maximum of cur over all its lanes (ctcNeg
// when n is 0).
//
//go:noescape
func ctcStepI32AVX2(prev, mask, lab, e, cur *int32, plane1, plane2 *byte, n int, m int32) int32
