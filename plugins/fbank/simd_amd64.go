//go:build goexperiment.simd && amd64

package fbank

import (
	"math"
	"simd/archsimd"
)

// This file is the SIMD path of the frontend, built with GOEXPERIMENT=simd
// (Go 1.26's experimental simd/archsimd package). It runs `lanes` frames at
// once, one frame per float64 lane: four with AVX2+FMA (simd_lanes4_amd64.go)
// or, built with -tags fbank_avx512, eight with AVX-512
// (simd_lanes8_amd64.go). Per frame group it does the same Stockham stages,
// real-FFT split, sparse filterbank and log as the scalar code, with the
// frames laid out structure-of-arrays (value j of frame f at
// [lanes·j+f]), so every butterfly is plain lane-wise arithmetic with
// replicated twiddles and needs no shuffles. It covers even n_fft whose half
// factors into 8, 4, 2 and 5 (400 and 512 among them); other configurations,
// and CPUs without the features, use the scalar path. Results agree with the
// scalar path to float64 rounding (see TestBatchPathMatchesScalar).

func init() {
	if cpuSupported() {
		clampScale = clampScaleVec
	}
}

// clampScaleVec is clampScaleScalar with float32 vectors (f32lanes wide),
// then a scalar tail.
func clampScaleVec(x []float32, floor float32) {
	if len(x) < f32lanes {
		clampScaleScalar(x, floor)
		return
	}
	var fl, four, quarter [f32lanes]float32 // replicated: broadcasts are emulated
	for l := range fl {
		fl[l], four[l], quarter[l] = floor, 4, 0.25
	}
	flv, fourv, qv := ldF32(fl[:]), ldF32(four[:]), ldF32(quarter[:])
	i := 0
	for ; i+f32lanes <= len(x); i += f32lanes {
		ldF32(x[i:]).Max(flv).Add(fourv).Mul(qv).StoreSlice(x[i:])
	}
	archsimd.ClearAVXUpperBits() // before the scalar tail and the caller's scalar code
	clampScaleScalar(x[i:], floor)
}

// cv is `lanes` complex values, one per frame.
type cv struct{ r, i vec }

// rep4 is a constant replicated over the lanes. archsimd's broadcast is
// emulated (slow), so constants and twiddles are stored replicated and loaded.
type rep4 = [lanes]float64

func rep(x float64) rep4 {
	var r rep4
	for l := range r {
		r[l] = x
	}
	return r
}

// zero is the all-zero vector (the zero value needs no instruction).
var zero vec

// vconsts are the batch path's constants, replicated.
type vconsts struct {
	half, sqrt12, c72, c144, s72, s144 rep4
	sqrt2, one, two52, bias, ln2, inf  rep4
	poly                               [7]rep4
	mant, expOne, two52bits, shift52   [lanes]uint64
	// The log's guard, floor and scale (see Frontend.logParams) and the pre-emphasis.
	guard, floor, scale, preemph rep4
}

func newVConsts() *vconsts {
	k := &vconsts{half: rep(0.5), sqrt12: rep(sqrt12), c72: rep(cos72), c144: rep(cos144), s72: rep(sin72), s144: rep(sin144),
		sqrt2: rep(math.Sqrt2), one: rep(1), two52: rep(1 << 52), bias: rep(1<<52 + 1023), ln2: rep(math.Ln2), inf: rep(math.Inf(-1))}
	for i, c := range [...]float64{2.0 / 13, 2.0 / 11, 2.0 / 9, 2.0 / 7, 2.0 / 5, 2.0 / 3, 2} {
		k.poly[i] = rep(c)
	}
	for l := range lanes {
		k.mant[l], k.expOne[l], k.two52bits[l], k.shift52[l] = 1<<52-1, 1023<<52, math.Float64bits(1<<52), 52
	}
	return k
}

func load(re, im []float64, j int) cv {
	return cv{ldSlice(re[lanes*j:]), ldSlice(im[lanes*j:])}
}

func store(re, im []float64, j int, v cv) {
	v.r.StoreSlice(re[lanes*j:])
	v.i.StoreSlice(im[lanes*j:])
}

func (a cv) add(b cv) cv { return cv{a.r.Add(b.r), a.i.Add(b.i)} }
func (a cv) sub(b cv) cv { return cv{a.r.Sub(b.r), a.i.Sub(b.i)} }

// mul multiplies lane-wise by w.
func (a cv) mul(w cv) cv {
	return cv{a.r.Mul(w.r).Sub(a.i.Mul(w.i)), a.r.MulAdd(w.i, a.i.Mul(w.r))}
}

// negI is -i·a.
func (a cv) negI() cv { return cv{a.i, zero.Sub(a.r)} }

func bf4v(a0, a1, a2, a3 cv) (cv, cv, cv, cv) {
	t0, t1 := a0.add(a2), a0.sub(a2)
	t2, t3 := a1.add(a3), a1.sub(a3)
	mt3 := t3.negI()
	return t0.add(t2), t1.add(mt3), t0.sub(t2), t1.sub(mt3)
}

// vstage is a Stockham stage with its twiddles split into real and
// imaginary parts, each replicated over the lanes (twiddle t at [lanes·t, lanes·(t+1))).
type vstage struct {
	p, m, s  int
	twr, twi []float64
	k        *vconsts
}

// tw loads twiddle t.
func (st *vstage) tw(t int) cv { return load(st.twr, st.twi, t) }

// batchPlan computes log-mel values of `lanes` frames per call.
type batchPlan struct {
	h      int // complex points of the packed transform (n_fft/2)
	stages []vstage
	postR  []float64 // real and imaginary parts of rfftPlan.post, replicated
	postI  []float64
	bank   *melBank
	wrep   []float64 // the bank's weights, replicated
	k      *vconsts
	// preemph is cfg.PreEmphasis != 0, decided here: a float compare in the
	// vector code would be a legacy-SSE UCOMISD.
	preemph bool
}

// newBatchPlan returns nil when the CPU or the configuration is not covered.
func newBatchPlan(f *Frontend) *batchPlan {
	if !cpuSupported() || !f.fft.half {
		return nil
	}
	// The vector log needs normal (non-subnormal) arguments.
	if f.cfg.LogClampMin > 0 && f.cfg.LogClampMin < 1e-300 {
		return nil
	}
	bp := &batchPlan{h: f.fft.c.n, bank: &f.bank, k: newVConsts()}
	guard, floor, scale := f.logParams()
	bp.k.guard, bp.k.floor, bp.k.scale = rep(guard), rep(floor), rep(scale)
	bp.k.preemph, bp.preemph = rep(f.cfg.PreEmphasis), f.cfg.PreEmphasis != 0
	for _, w := range f.bank.w {
		r := rep(w)
		bp.wrep = append(bp.wrep, r[:]...)
	}
	for _, st := range f.fft.c.stages {
		switch st.p {
		case 8, 5, 4, 2:
		default:
			return nil
		}
		vs := vstage{p: st.p, m: st.m, s: st.s, k: bp.k}
		for _, w := range st.tw {
			r, i := rep(real(w)), rep(imag(w))
			vs.twr = append(vs.twr, r[:]...)
			vs.twi = append(vs.twi, i[:]...)
		}
		bp.stages = append(bp.stages, vs)
	}
	for _, p := range f.fft.post {
		r, i := rep(real(p)), rep(imag(p))
		bp.postR = append(bp.postR, r[:]...)
		bp.postI = append(bp.postI, i[:]...)
	}
	return bp
}

// batchScratch is one goroutine's workspace for the batch path.
type batchScratch struct {
	z                []float64 // [8h] packed input: real half then imaginary half
	re, im, re2, im2 []float64 // [4h] ping-pong FFT buffers (re, im alias z)
	pw               []float64 // [4(h+1)] power spectra
	mel              []float64 // [4 n_mels] log-mel values
	y                [lanes]float64
}

func (bp *batchPlan) newScratch() *batchScratch {
	n := lanes * bp.h
	z := make([]float64, 2*n)
	return &batchScratch{z: z, re: z[:n], im: z[n:], re2: make([]float64, n), im2: make([]float64, n),
		pw: make([]float64, lanes*(bp.h+1)), mel: make([]float64, lanes*bp.bank.nMels)}
}

// input returns the buffer the frames of a group are written into and its layout
// (frame l at base l): z[4j+l] = x_l[2j], z[4h+4j+l] = x_l[2j+1].
func (bp *batchPlan) input(sc *batchScratch) ([]float64, frameLayout) {
	return sc.z, frameLayout{odd: lanes * bp.h, step: lanes}
}

// logMel computes, for the frames in sc's input, the log-mel values
// scale·ln(max(mel + guard, floor)) with the frontend's log constants and
// writes them to out. It returns the largest value written.
func (bp *batchPlan) logMel(out groupOut, sc *batchScratch) float64 {
	h := bp.h
	re, im := sc.re[:lanes*h], sc.im[:lanes*h]
	sr, si, dr, di := re, im, sc.re2[:lanes*h], sc.im2[:lanes*h]
	for i := range bp.stages {
		st := &bp.stages[i]
		switch st.p {
		case 8:
			st.radix8(sr, si, dr, di)
		case 5:
			st.radix5(sr, si, dr, di)
		case 4:
			st.radix4(sr, si, dr, di)
		case 2:
			st.radix2(sr, si, dr, di)
		}
		sr, si, dr, di = dr, di, sr, si
	}
	bp.power(sr, si, sc.pw)
	return bp.melLog(sc.pw, out, sc)
}

// power splits the packed spectra Z into the frames' real spectra and writes |X[k]|².
func (bp *batchPlan) power(zr, zi, pw []float64) {
	h := bp.h
	z0 := load(zr, zi, 0)
	s, d := z0.r.Add(z0.i), z0.r.Sub(z0.i)
	s.Mul(s).StoreSlice(pw[0:])
	d.Mul(d).StoreSlice(pw[lanes*h:])
	half := ld4(&bp.k.half)
	for k := 1; k < h; k++ {
		a, b := load(zr, zi, k), load(zr, zi, h-k)
		sr, si := a.r.Add(b.r).Mul(half), a.i.Sub(b.i).Mul(half)
		dr, di := a.r.Sub(b.r), a.i.Add(b.i)
		post := load(bp.postR, bp.postI, k)
		pr, pi := post.r, post.i
		xr := pr.MulAdd(dr, sr).Sub(pi.Mul(di))
		xi := pr.MulAdd(di, si).Add(pi.Mul(dr))
		xr.MulAdd(xr, xi.Mul(xi)).StoreSlice(pw[lanes*k:])
	}
}

// melLog applies the sparse filterbank to the frames' power spectra, takes
// the log and writes the values to out. When a group's frames are
// contiguous in out (mel_time) every mel bin is one float32 vector store;
// otherwise (time_mel) the values are spread by scalar code that runs after
// VZEROUPPER, since a legacy-SSE instruction with dirty upper AVX state
// costs a state transition.
func (bp *batchPlan) melLog(pw []float64, out groupOut, sc *batchScratch) float64 {
	b := bp.bank
	g, fl, sca := ld4(&bp.k.guard), ld4(&bp.k.floor), ld4(&bp.k.scale)
	mx := ld4(&bp.k.inf)
	mel := sc.mel[:lanes*b.nMels]
	for i := 0; i < b.nMels; i++ {
		w := bp.wrep[lanes*b.off[i] : lanes*b.off[i+1]]
		p := pw[lanes*b.start[i] : lanes*b.start[i]+len(w)]
		acc := zero
		for k := 0; k < len(w); k += lanes {
			acc = ldSlice(w[k:]).MulAdd(ldSlice(p[k:]), acc)
		}
		acc.StoreSlice(mel[lanes*i:])
	}
	// The logs in a separate loop: independent iterations the CPU overlaps.
	contiguous := out.lStride == 1
	for i := 0; i < b.nMels; i++ {
		y := lnVec(ldSlice(mel[lanes*i:]).Add(g).Max(fl), bp.k).Mul(sca)
		mx = mx.Max(y)
		if contiguous {
			y.ConvertToFloat32().StoreSlice(out.dst[i*out.mStride:])
		} else {
			y.StoreSlice(mel[lanes*i:])
		}
	}
	mx.Store(&sc.y)
	archsimd.ClearAVXUpperBits()
	if !contiguous {
		for i := 0; i < b.nMels; i++ {
			for l, v := range mel[lanes*i : lanes*i+lanes] {
				out.dst[i*out.mStride+l*out.lStride] = float32(v)
			}
		}
	}
	top := sc.y[0]
	for _, v := range sc.y[1:] {
		top = max(top, v)
	}
	return top
}

// lnVec is ln x for positive normal x, |error| < 1e-12: x = 2^e·m with
// m ∈ [√½, √2), ln m = 2·atanh(s), s = (m-1)/(m+1), |s| < 0.172, from an
// odd series up to s^13.
func lnVec(x vec, k *vconsts) vec {
	bits := asU(x)
	// Biased exponent (x > 0). A per-lane shift by a loaded count: the
	// shift-all form moves its count through a legacy-SSE MOVQ, which stalls
	// on dirty upper AVX state.
	exp := bits.ShiftRight(ldU(&k.shift52))
	m := asF(bits.And(ldU(&k.mant)).Or(ldU(&k.expOne)))
	// float64(biased exponent) via the 2^52 trick: no AVX-512 conversion needed.
	e := asF(exp.Or(ldU(&k.two52bits))).Sub(ld4(&k.bias))
	one := ld4(&k.one)
	big := m.Greater(ld4(&k.sqrt2))
	m = m.Mul(ld4(&k.half)).Merge(m, big)
	e = e.Add(one).Merge(e, big)
	s := m.Sub(one).Div(m.Add(one))
	s2 := s.Mul(s)
	p := ld4(&k.poly[0])
	for i := 1; i < len(k.poly); i++ {
		p = p.MulAdd(s2, ld4(&k.poly[i]))
	}
	return e.MulAdd(ld4(&k.ln2), p.Mul(s))
}

// The stages below mirror cfftStage's butterflies lane-wise.

func (st *vstage) radix2(sr, si, dr, di []float64) {
	m, s := st.m, st.s
	sm := s * m
	for q := 0; q < m; q++ {
		w := st.tw(q)
		for k := 0; k < s; k++ {
			i, o := s*q+k, 2*s*q+k
			a, b := load(sr, si, i), load(sr, si, i+sm)
			store(dr, di, o, a.add(b))
			store(dr, di, o+s, a.sub(b).mul(w))
		}
	}
}

func (st *vstage) radix4(sr, si, dr, di []float64) {
	m, s := st.m, st.s
	sm := s * m
	for q := 0; q < m; q++ {
		w1, w2, w3 := st.tw(3*q), st.tw(3*q+1), st.tw(3*q+2)
		for k := 0; k < s; k++ {
			i, o := s*q+k, 4*s*q+k
			b0, b1, b2, b3 := bf4v(load(sr, si, i), load(sr, si, i+sm), load(sr, si, i+2*sm), load(sr, si, i+3*sm))
			store(dr, di, o, b0)
			store(dr, di, o+s, b1.mul(w1))
			store(dr, di, o+2*s, b2.mul(w2))
			store(dr, di, o+3*s, b3.mul(w3))
		}
	}
}

func (st *vstage) radix8(sr, si, dr, di []float64) {
	m, s := st.m, st.s
	sm := s * m
	c := ld4(&st.k.sqrt12)
	for q := 0; q < m; q++ {
		t := 7 * q
		for k := 0; k < s; k++ {
			i, o := s*q+k, 8*s*q+k
			e0, e1, e2, e3 := bf4v(load(sr, si, i), load(sr, si, i+2*sm), load(sr, si, i+4*sm), load(sr, si, i+6*sm))
			o0, o1, o2, o3 := bf4v(load(sr, si, i+sm), load(sr, si, i+3*sm), load(sr, si, i+5*sm), load(sr, si, i+7*sm))
			o1 = cv{o1.r.Add(o1.i).Mul(c), o1.i.Sub(o1.r).Mul(c)}
			o2 = o2.negI()
			o3 = cv{o3.i.Sub(o3.r).Mul(c), zero.Sub(o3.r.Add(o3.i)).Mul(c)}
			store(dr, di, o, e0.add(o0))
			store(dr, di, o+s, e1.add(o1).mul(st.tw(t+0)))
			store(dr, di, o+2*s, e2.add(o2).mul(st.tw(t+1)))
			store(dr, di, o+3*s, e3.add(o3).mul(st.tw(t+2)))
			store(dr, di, o+4*s, e0.sub(o0).mul(st.tw(t+3)))
			store(dr, di, o+5*s, e1.sub(o1).mul(st.tw(t+4)))
			store(dr, di, o+6*s, e2.sub(o2).mul(st.tw(t+5)))
			store(dr, di, o+7*s, e3.sub(o3).mul(st.tw(t+6)))
		}
	}
}

func (st *vstage) radix5(sr, si, dr, di []float64) {
	m, s := st.m, st.s
	sm := s * m
	c1, c2, s1, s2 := ld4(&st.k.c72), ld4(&st.k.c144), ld4(&st.k.s72), ld4(&st.k.s144)
	for q := 0; q < m; q++ {
		w1, w2, w3, w4 := st.tw(4*q), st.tw(4*q+1), st.tw(4*q+2), st.tw(4*q+3)
		for k := 0; k < s; k++ {
			i, o := s*q+k, 5*s*q+k
			a0, a1, a2, a3, a4 := load(sr, si, i), load(sr, si, i+sm), load(sr, si, i+2*sm), load(sr, si, i+3*sm), load(sr, si, i+4*sm)
			t1, t2, t3, t4 := a1.add(a4), a2.add(a3), a1.sub(a4), a2.sub(a3)
			r1 := c1.MulAdd(t1.r, c2.MulAdd(t2.r, a0.r))
			i1 := c1.MulAdd(t1.i, c2.MulAdd(t2.i, a0.i))
			r2 := c2.MulAdd(t1.r, c1.MulAdd(t2.r, a0.r))
			i2 := c2.MulAdd(t1.i, c1.MulAdd(t2.i, a0.i))
			ur, ui := s1.MulAdd(t3.r, s2.Mul(t4.r)), s1.MulAdd(t3.i, s2.Mul(t4.i))
			vr, vi := s2.Mul(t3.r).Sub(s1.Mul(t4.r)), s2.Mul(t3.i).Sub(s1.Mul(t4.i))
			store(dr, di, o, a0.add(t1).add(t2))
			store(dr, di, o+s, cv{r1.Add(ui), i1.Sub(ur)}.mul(w1))
			store(dr, di, o+2*s, cv{r2.Add(vi), i2.Sub(vr)}.mul(w2))
			store(dr, di, o+3*s, cv{r2.Sub(vi), i2.Add(vr)}.mul(w3))
			store(dr, di, o+4*s, cv{r1.Sub(ui), i1.Add(ur)}.mul(w4))
		}
	}
}
