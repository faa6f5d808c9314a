package fbank

import (
	"fmt"
	"math"
)

// cfftPlan is a forward complex DFT of one size, X[k] = sum_j x[j] e^{-2πi jk/n},
// as an iterative Stockham autosort transform: one pass per radix, ping-pong
// between two buffers, natural order in and out, no bit reversal. Radices 4,
// 2, 3 and 5 have hand-written butterflies; any other prime factor p uses a
// generic O(p²) butterfly, so every size works and sizes built from 2, 3 and 5
// are fast. Twiddles are computed once, in float64, when the plan is made.
//
// A plan is immutable after newCFFTPlan and safe for concurrent use; the
// buffers belong to the caller (see transform).
type cfftPlan struct {
	n      int
	stages []cfftStage
	// maxRadix sizes the scratch that generic butterflies need.
	maxRadix int
}

// cfftStage is one Stockham pass: radix p over sub-transforms of length span
// (span = p·m) at stride s. tw[q*(p-1)+r-1] = e^{-2πi r q/span}.
type cfftStage struct {
	p, m, s int
	tw      []complex128
	// roots[r] = e^{-2πi r/p}, used by the generic butterfly only.
	roots []complex128
}

// factorize splits n into radices: 8s first, then 4s, 2, 3, 5 and the
// remaining primes.
func factorize(n int) []int {
	var f []int
	for n%8 == 0 {
		f = append(f, 8)
		n /= 8
	}
	for n%4 == 0 {
		f = append(f, 4)
		n /= 4
	}
	for _, p := range []int{2, 3, 5} {
		for n%p == 0 {
			f = append(f, p)
			n /= p
		}
	}
	for p := 7; n > 1; p += 2 {
		for n%p == 0 {
			f = append(f, p)
			n /= p
		}
		if p*p > n && n > 1 {
			f = append(f, n)
			break
		}
	}
	return f
}

func newCFFTPlan(n int) (*cfftPlan, error) {
	if n < 1 {
		return nil, fmt.Errorf("fft size %d: want >= 1", n)
	}
	pl := &cfftPlan{n: n, maxRadix: 1}
	span, s := n, 1
	for _, p := range factorize(n) {
		m := span / p
		st := cfftStage{p: p, m: m, s: s, tw: make([]complex128, m*(p-1))}
		for q := 0; q < m; q++ {
			for r := 1; r < p; r++ {
				st.tw[q*(p-1)+r-1] = expi(-2 * math.Pi * float64(r*q) / float64(span))
			}
		}
		if p > 5 {
			st.roots = make([]complex128, p)
			for r := range st.roots {
				st.roots[r] = expi(-2 * math.Pi * float64(r) / float64(p))
			}
		}
		pl.maxRadix = max(pl.maxRadix, p)
		pl.stages = append(pl.stages, st)
		span, s = m, s*p
	}
	return pl, nil
}

// expi returns e^{iθ}.
func expi(theta float64) complex128 {
	s, c := math.Sincos(theta)
	return complex(c, s)
}

// transform computes the DFT of x (len n) using work (len n) and scratch
// (len >= maxRadix) as workspace; it returns the buffer holding the result,
// which is x or work. It allocates nothing.
func (pl *cfftPlan) transform(x, work, scratch []complex128) []complex128 {
	src, dst := x[:pl.n], work[:pl.n]
	for i := range pl.stages {
		st := &pl.stages[i]
		switch st.p {
		case 8:
			st.radix8(src, dst)
		case 4:
			st.radix4(src, dst)
		case 2:
			st.radix2(src, dst)
		case 3:
			st.radix3(src, dst)
		case 5:
			st.radix5(src, dst)
		default:
			st.generic(src, dst, scratch[:st.p])
		}
		src, dst = dst, src
	}
	return src
}

// Each stage reads a_j = src[k + s(q + j m)] and writes
// dst[k + s(p q + r)] = w^{r q} · DFT_p(a)_r. The first stage (s == 1) has
// its own loop: there the k loop would have one iteration.

// bf2..bf5 are the DFT_p butterflies (forward, e^{-2πi/p}).
func bf2(a0, a1 complex128) (complex128, complex128) { return a0 + a1, a0 - a1 }

func bf4(a0, a1, a2, a3 complex128) (b0, b1, b2, b3 complex128) {
	t0, t1 := a0+a2, a0-a2
	t2, t3 := a1+a3, a1-a3
	mt3 := complex(imag(t3), -real(t3)) // -i·t3
	return t0 + t2, t1 + mt3, t0 - t2, t1 - mt3
}

const (
	sin60  = 0.86602540378443864676 // sin(2π/3)
	cos72  = 0.30901699437494742410 // cos(2π/5)
	cos144 = -0.80901699437494742410
	sin72  = 0.95105651629515357212
	sin144 = 0.58778525229247312917
	sqrt12 = 0.70710678118654752440 // 1/√2
)

func bf3(a0, a1, a2 complex128) (b0, b1, b2 complex128) {
	t1 := a1 + a2
	t2 := a0 - complex(0.5*real(t1), 0.5*imag(t1))
	d := a1 - a2
	t3 := complex(sin60*imag(d), -sin60*real(d)) // -i·sin60·d
	return a0 + t1, t2 + t3, t2 - t3
}

func (st *cfftStage) radix2(src, dst []complex128) {
	m, s := st.m, st.s
	if s == 1 {
		src, dst = src[:2*m], dst[:2*m]
		for q, w1 := range st.tw[:m] {
			b0, b1 := bf2(src[q], src[q+m])
			dst[2*q], dst[2*q+1] = b0, b1*w1
		}
		return
	}
	for q := 0; q < m; q++ {
		w1 := st.tw[q]
		in0, in1 := src[s*q:s*q+s], src[s*(q+m):s*(q+m)+s]
		out0, out1 := dst[s*2*q:s*2*q+s], dst[s*(2*q+1):s*(2*q+1)+s]
		for k := range in0 {
			b0, b1 := bf2(in0[k], in1[k])
			out0[k], out1[k] = b0, b1*w1
		}
	}
}

func (st *cfftStage) radix4(src, dst []complex128) {
	m, s := st.m, st.s
	if s == 1 {
		src, dst = src[:4*m], dst[:4*m]
		for q := 0; q < m; q++ {
			tw := st.tw[3*q : 3*q+3]
			b0, b1, b2, b3 := bf4(src[q], src[q+m], src[q+2*m], src[q+3*m])
			d := dst[4*q : 4*q+4]
			d[0], d[1], d[2], d[3] = b0, b1*tw[0], b2*tw[1], b3*tw[2]
		}
		return
	}
	for q := 0; q < m; q++ {
		tw := st.tw[3*q : 3*q+3]
		w1, w2, w3 := tw[0], tw[1], tw[2]
		in0 := src[s*q : s*q+s]
		in1 := src[s*(q+m) : s*(q+m)+s]
		in2 := src[s*(q+2*m) : s*(q+2*m)+s]
		in3 := src[s*(q+3*m) : s*(q+3*m)+s]
		o := s * 4 * q
		out0, out1, out2, out3 := dst[o:o+s], dst[o+s:o+2*s], dst[o+2*s:o+3*s], dst[o+3*s:o+4*s]
		for k := range in0 {
			b0, b1, b2, b3 := bf4(in0[k], in1[k], in2[k], in3[k])
			out0[k], out1[k], out2[k], out3[k] = b0, b1*w1, b2*w2, b3*w3
		}
	}
}

// radix8 is DFT_8 = two DFT_4 (even and odd inputs) joined by the e^{-2πik/8}
// factors, written out once for every stride like radix5.
func (st *cfftStage) radix8(src, dst []complex128) {
	m, s := st.m, st.s
	sm := s * m
	src, dst = src[:8*sm], dst[:8*sm]
	for q := 0; q < m; q++ {
		tw := st.tw[7*q : 7*q+7]
		for k := 0; k < s; k++ {
			i, o := s*q+k, 8*s*q+k
			e0, e1, e2, e3 := bf4(src[i], src[i+2*sm], src[i+4*sm], src[i+6*sm])
			o0, o1, o2, o3 := bf4(src[i+sm], src[i+3*sm], src[i+5*sm], src[i+7*sm])
			// o1·e^{-iπ/4}, o2·(-i), o3·e^{-3iπ/4}
			o1 = complex(sqrt12*(real(o1)+imag(o1)), sqrt12*(imag(o1)-real(o1)))
			o2 = complex(imag(o2), -real(o2))
			o3 = complex(sqrt12*(imag(o3)-real(o3)), -sqrt12*(real(o3)+imag(o3)))
			dst[o] = e0 + o0
			dst[o+s] = (e1 + o1) * tw[0]
			dst[o+2*s] = (e2 + o2) * tw[1]
			dst[o+3*s] = (e3 + o3) * tw[2]
			dst[o+4*s] = (e0 - o0) * tw[3]
			dst[o+5*s] = (e1 - o1) * tw[4]
			dst[o+6*s] = (e2 - o2) * tw[5]
			dst[o+7*s] = (e3 - o3) * tw[6]
		}
	}
}

func (st *cfftStage) radix3(src, dst []complex128) {
	m, s := st.m, st.s
	for q := 0; q < m; q++ {
		w1, w2 := st.tw[2*q], st.tw[2*q+1]
		in0, in1, in2 := src[s*q:s*q+s], src[s*(q+m):s*(q+m)+s], src[s*(q+2*m):s*(q+2*m)+s]
		o := s * 3 * q
		out0, out1, out2 := dst[o:o+s], dst[o+s:o+2*s], dst[o+2*s:o+3*s]
		for k := range in0 {
			b0, b1, b2 := bf3(in0[k], in1[k], in2[k])
			out0[k], out1[k], out2[k] = b0, b1*w1, b2*w2
		}
	}
}

// radix5 keeps one loop body for every stride (the butterfly is too large
// for the inliner, so it is written out once, here).
func (st *cfftStage) radix5(src, dst []complex128) {
	m, s := st.m, st.s
	sm := s * m
	src, dst = src[:5*sm], dst[:5*sm]
	for q := 0; q < m; q++ {
		tw := st.tw[4*q : 4*q+4]
		w1, w2, w3, w4 := tw[0], tw[1], tw[2], tw[3]
		for k := 0; k < s; k++ {
			i, o := s*q+k, 5*s*q+k
			a0, a1, a2, a3, a4 := src[i], src[i+sm], src[i+2*sm], src[i+3*sm], src[i+4*sm]
			t1, t2, t3, t4 := a1+a4, a2+a3, a1-a4, a2-a3
			r1 := real(a0) + cos72*real(t1) + cos144*real(t2)
			i1 := imag(a0) + cos72*imag(t1) + cos144*imag(t2)
			r2 := real(a0) + cos144*real(t1) + cos72*real(t2)
			i2 := imag(a0) + cos144*imag(t1) + cos72*imag(t2)
			// u = s1 t3 + s2 t4, v = s2 t3 - s1 t4; -i·u = (imag u, -real u).
			ur, ui := sin72*real(t3)+sin144*real(t4), sin72*imag(t3)+sin144*imag(t4)
			vr, vi := sin144*real(t3)-sin72*real(t4), sin144*imag(t3)-sin72*imag(t4)
			dst[o] = a0 + t1 + t2
			dst[o+s] = complex(r1+ui, i1-ur) * w1
			dst[o+2*s] = complex(r2+vi, i2-vr) * w2
			dst[o+3*s] = complex(r2-vi, i2+vr) * w3
			dst[o+4*s] = complex(r1-ui, i1+ur) * w4
		}
	}
}

func (st *cfftStage) generic(src, dst, a []complex128) {
	p, m, s := st.p, st.m, st.s
	for q := 0; q < m; q++ {
		tw := st.tw[(p-1)*q : (p-1)*q+p-1]
		for k := 0; k < s; k++ {
			for j := range a {
				a[j] = src[k+s*(q+j*m)]
			}
			for r := 0; r < p; r++ {
				var b complex128
				idx := 0
				for j := range a {
					b += a[j] * st.roots[idx]
					idx += r
					if idx >= p {
						idx -= p
					}
				}
				if r > 0 {
					b *= tw[r-1]
				}
				dst[k+s*(p*q+r)] = b
			}
		}
	}
}

// rfftPlan computes the power spectrum |X[k]|², k = 0..n/2, of a real frame
// of length n. Even n packs the frame into n/2 complex points
// z[j] = x[2j] + i·x[2j+1], runs one n/2-point complex transform and
// separates the two interleaved spectra:
//
//	X[k] = (Z[k] + conj Z[n/2-k])/2 - i·e^{-2πik/n}·(Z[k] - conj Z[n/2-k])/2
//
// so 512 costs one 256-point (4·4·4·4) transform and 400 one 200-point
// (4·2·5·5) transform, half the work of a direct 400 = 16×25 real DFT. Odd n
// runs an n-point complex transform of the real frame.
type rfftPlan struct {
	n    int
	half bool // n even: packed half-length transform
	c    *cfftPlan
	// post[k] = -i·e^{-2πik/n}/2 for k = 0..n/2 (packed form only).
	post []complex128
}

func newRFFTPlan(n int) (*rfftPlan, error) {
	if n < 2 {
		return nil, fmt.Errorf("n_fft %d: want >= 2", n)
	}
	pl := &rfftPlan{n: n, half: n%2 == 0}
	size := n
	if pl.half {
		size = n / 2
		pl.post = make([]complex128, n/2+1)
		for k := range pl.post {
			e := expi(-2 * math.Pi * float64(k) / float64(n))
			pl.post[k] = complex(imag(e)/2, -real(e)/2)
		}
	}
	c, err := newCFFTPlan(size)
	if err != nil {
		return nil, err
	}
	pl.c = c
	return pl, nil
}

// rfftScratch is the per-goroutine workspace of an rfftPlan.
type rfftScratch struct {
	z, work, radix []complex128
}

func (pl *rfftPlan) newScratch() *rfftScratch {
	return &rfftScratch{
		z:     make([]complex128, pl.c.n),
		work:  make([]complex128, pl.c.n),
		radix: make([]complex128, pl.c.maxRadix),
	}
}

// power writes |X[k]|² for k = 0..n/2 of the real frame x (len n) into
// out (len n/2+1). It allocates nothing.
func (pl *rfftPlan) power(x []float64, out []float64, sc *rfftScratch) {
	n := pl.n
	x = x[:n]
	out = out[:n/2+1]
	if !pl.half {
		for j, v := range x {
			sc.z[j] = complex(v, 0)
		}
		Z := pl.c.transform(sc.z, sc.work, sc.radix)
		for k := range out {
			out[k] = real(Z[k])*real(Z[k]) + imag(Z[k])*imag(Z[k])
		}
		return
	}
	h := n / 2
	z := sc.z[:h]
	for j := range z {
		z[j] = complex(x[2*j], x[2*j+1])
	}
	Z := pl.c.transform(sc.z, sc.work, sc.radix)
	// k = 0 and k = n/2: X = Re Z0 ± Im Z0.
	z0 := Z[0]
	out[0] = (real(z0) + imag(z0)) * (real(z0) + imag(z0))
	out[h] = (real(z0) - imag(z0)) * (real(z0) - imag(z0))
	post := pl.post
	for k := 1; k < h; k++ {
		a, b := Z[k], Z[h-k]
		// s = (a + conj b)/2, d = a - conj b
		sr, si := (real(a)+real(b))*0.5, (imag(a)-imag(b))*0.5
		dr, di := real(a)-real(b), imag(a)+imag(b)
		p := post[k]
		xr := sr + real(p)*dr - imag(p)*di
		xi := si + real(p)*di + imag(p)*dr
		out[k] = xr*xr + xi*xi
	}
}
