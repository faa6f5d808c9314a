//go:build goexperiment.simd && amd64

package fbank

import "simd/archsimd"

type quadVec = archsimd.Float64x4

// fill writes the frames t..t+lanes-1 of clip x into sc's input when they
// all lie inside the clip (the common case): for every four window
// positions it loads four samples of each frame, converts and windows them
// as one vector, and transposes groups of four frames (4×4) so that each
// position becomes one vector across frames. It returns false, writing
// nothing, when a frame touches an edge or the window does not split into
// aligned groups of four; the caller then fills frame by frame.
func (bp *batchPlan) fill(f *Frontend, x []float32, g geometry, t int, sc *batchScratch) bool {
	w, off, hop := f.window, f.winOff, f.cfg.HopLength
	start := t*hop - f.pad + off
	if off%2 != 0 || len(w)%4 != 0 || start < 1 || start+(lanes-1)*hop+len(w) > g.real {
		return false
	}
	h := bp.h
	re, im := sc.re[:lanes*h], sc.im[:lanes*h]
	// (zero, not cv{}: a literal zero vector compiles to a legacy-SSE XORPS.)
	for j := 0; j < off/2; j++ {
		store(re, im, j, cv{zero, zero})
	}
	for j := (off + len(w)) / 2; j < h; j++ {
		store(re, im, j, cv{zero, zero})
	}
	a := archsimd.LoadFloat64x4Slice(bp.k.preemph[:])
	pre := bp.preemph
	quad := func(s int, win quadVec) quadVec {
		cur := archsimd.LoadFloat32x4Slice(x[s:]).ConvertToFloat64()
		if pre {
			cur = cur.Sub(a.Mul(archsimd.LoadFloat32x4Slice(x[s-1:]).ConvertToFloat64()))
		}
		return cur.Mul(win)
	}
	for u := 0; u < len(w); u += 4 {
		win := archsimd.LoadFloat64x4Slice(w[u:])
		c0, c1, c2, c3 := zero, zero, zero, zero
		for grp := 0; grp < lanes/4; grp++ {
			s := start + 4*grp*hop + u
			v0, v1, v2, v3 := quad(s, win), quad(s+hop, win), quad(s+2*hop, win), quad(s+3*hop, win)
			t0, t1 := v0.SelectFromPairGrouped(0, 2, v1), v0.SelectFromPairGrouped(1, 3, v1)
			t2, t3 := v2.SelectFromPairGrouped(0, 2, v3), v2.SelectFromPairGrouped(1, 3, v3)
			c0 = setGroup(c0, grp, t0.Select128FromPair(0, 2, t2))
			c1 = setGroup(c1, grp, t1.Select128FromPair(0, 2, t3))
			c2 = setGroup(c2, grp, t0.Select128FromPair(1, 3, t2))
			c3 = setGroup(c3, grp, t1.Select128FromPair(1, 3, t3))
		}
		j := (off + u) / 2
		store(re, im, j, cv{c0, c1})
		store(re, im, j+1, cv{c2, c3})
	}
	return true
}
