package dpx

import (
	"fmt"
	"math"
)

// AlignOptions configures CTC forced alignment.
type AlignOptions struct {
	// Blank is the blank token's column in the log-probs.
	Blank int
	// Star adds a wildcard ("star") token: a virtual column appended after
	// the C real ones, id C, whose log-prob is StarLogProb on every frame
	// (0 means probability 1: the star absorbs any audio). Targets may use id
	// C for words the model cannot emit; frames aligned to it report id C.
	Star        bool
	StarLogProb float32
	// Precision selects float32 (torchaudio-exact) or int32 fixed point.
	Precision Precision
	// Scale is the fixed-point scale in quanta per nat for Int32
	// (0: DefaultScale).
	Scale float64
	// MaxMemory bounds the working memory of the backtrace (2-bit
	// backpointers plus checkpointed score rows) in bytes; 0 means
	// DefaultMaxMemory. Inputs whose trellis does not fit even with
	// checkpointing get an error naming the bytes needed.
	MaxMemory int64
}

// DefaultMaxMemory is the backtrace memory budget when
// AlignOptions.MaxMemory is 0: one hour of audio (T = 180000 frames,
// L = 50000 tokens) aligns within it, with checkpointing.
const DefaultMaxMemory = 256 << 20

// Alignment is the result of aligning one sequence.
type Alignment struct {
	// Labels holds the token id of every frame, blank included, exactly as
	// torchaudio.functional.forced_align returns it (len T).
	Labels []int32
	// FrameScores holds the input log-prob of each frame's label (len T);
	// the star column reads StarLogProb.
	FrameScores []float32
	// Score is the sum of FrameScores, accumulated in float64.
	Score float32
}

// Aligner runs CTC forced alignment: the Viterbi path through the 2L+1
// blank-interleaved trellis of a target sequence. It keeps its scratch
// memory between calls, so aligning many sequences allocates only the
// outputs. An Aligner is not safe for concurrent use; use one per goroutine.
//
// Semantics (float32, the default) are those of torchaudio's CPU
// forced_align, reproduced frame for frame, ties included: state s at frame
// t takes predecessor s-2 (skip, allowed into a label that differs from the
// label two states back) only if strictly greater than both s-1 and s,
// else s-1 only if strictly greater than both s and s-2, else s (so a tie
// of s-1 and s-2 above s falls back to s, as torchaudio does); states that
// cannot lie on a complete path in T frames are pruned with torchaudio's
// start/end window; the path ends on the last label unless the trailing
// blank is strictly greater. It needs T >= L + R, R the number of adjacent
// repeated targets, and returns an error when every path scores -Inf (where
// torchaudio returns an arbitrary path).
//
// Int32 precision quantises the log-probs (see Int32) and renormalises every
// frame: each state's new value is best - m + e, with m the previous frame's
// maximum, saturated below at -2^28 quanta (states further below the best
// tie there); unreachable states stay at a -2^29 sentinel. Ties follow the
// same rules on the integers. A -Inf log-prob quantises to -2^24 quanta, so
// the int32 path always finds an alignment.
//
// Memory: backpointers take 2 bits per trellis state and frame, stored as
// two bit planes (about T * (2L+1) / 4 bytes). When they fit in MaxMemory
// the backtrace reads them directly; otherwise the forward pass keeps one
// score row every K frames and the backtrace recomputes one K-frame segment
// at a time (at most one extra forward pass), with K = sqrt(T * row /
// planes) minimising ceil(T/K) * row + K * planes bytes (row = (2L+19) * 4
// bytes of scores, planes = 2 * ((2L+9)/8 + 1) bytes of backpointers per
// frame). The path is the same either way: the recomputation repeats the
// same arithmetic. An error names the bytes needed when even the optimum
// exceeds MaxMemory.
type Aligner struct {
	opt   AlignOptions
	quant quantizer

	lab    []int32 // label id per trellis state
	penF   []float32
	maskI  []int32
	lo, hi []int32 // torchaudio's window [start, end) per frame

	f32 lane[float32]
	i32 lane[int32]
	bp  planes
	// segment, when > 0, forces the checkpoint segment length (tests).
	segment int
}

// lane holds the per-precision buffers.
type lane[V int32 | float32] struct {
	rows [2][]V
	ck   []V // checkpoint rows
	e    []V // emission row of the current frame (C or C+1 values)
}

// NewAligner checks the options and returns an Aligner.
func NewAligner(opt AlignOptions) (*Aligner, error) {
	if opt.Blank < 0 {
		return nil, fmt.Errorf("blank id %d: want >= 0", opt.Blank)
	}
	if opt.Star && (opt.StarLogProb != opt.StarLogProb || opt.StarLogProb > 0 || math.IsInf(float64(opt.StarLogProb), 0)) {
		return nil, fmt.Errorf("star log-prob %v: want a finite value <= 0", opt.StarLogProb)
	}
	if opt.MaxMemory < 0 {
		return nil, fmt.Errorf("max memory %d bytes: want >= 0", opt.MaxMemory)
	}
	a := &Aligner{opt: opt}
	if opt.Precision == Int32 {
		q, err := newQuantizer(opt.Scale)
		if err != nil {
			return nil, err
		}
		a.quant = q
	}
	return a, nil
}

// Align aligns targets to logProbs, a row-major [T, C] matrix of log
// probabilities (T = len(logProbs)/C). Target ids must lie in [0, C), or be
// C when Star is set, and differ from the blank; an empty target list aligns
// every frame to the blank. Log-probs may be -Inf, not NaN or +Inf.
// dst's slices are reused when large enough.
func (a *Aligner) Align(dst *Alignment, logProbs []float32, C int, targets []int) error {
	T, err := a.check(logProbs, C, targets)
	if err != nil {
		return err
	}
	dst.Labels = resize(dst.Labels, T)
	dst.FrameScores = resize(dst.FrameScores, T)
	L := len(targets)
	if L == 0 {
		for t := range T {
			dst.Labels[t] = int32(a.opt.Blank)
		}
	} else {
		a.prepare(T, targets)
		if a.opt.Precision == Int32 {
			err = alignLane(a, &a.i32, i32Kernel{quant: a.quant, star: a.quant.q(a.opt.StarLogProb), mask: a.maskI}, logProbs, C, dst.Labels)
		} else {
			err = alignLane(a, &a.f32, f32Kernel{star: a.opt.StarLogProb, pen: a.penF}, logProbs, C, dst.Labels)
		}
		if err != nil {
			return err
		}
	}
	var sum float64
	for t, k := range dst.Labels {
		v := a.opt.StarLogProb
		if int(k) < C {
			v = logProbs[t*C+int(k)]
		}
		dst.FrameScores[t] = v
		sum += float64(v)
	}
	dst.Score = float32(sum)
	return nil
}

// Align is a convenience wrapper: NewAligner(opt) then Align.
func Align(logProbs []float32, C int, targets []int, opt AlignOptions) (*Alignment, error) {
	a, err := NewAligner(opt)
	if err != nil {
		return nil, err
	}
	var out Alignment
	if err := a.Align(&out, logProbs, C, targets); err != nil {
		return nil, err
	}
	return &out, nil
}

// check validates the inputs and returns T.
func (a *Aligner) check(logProbs []float32, C int, targets []int) (int, error) {
	if C < 1 {
		return 0, fmt.Errorf("log_probs has %d columns; want >= 1", C)
	}
	if len(logProbs) == 0 || len(logProbs)%C != 0 {
		return 0, fmt.Errorf("log_probs has %d values; want a non-empty multiple of C=%d", len(logProbs), C)
	}
	T := len(logProbs) / C
	if a.opt.Blank >= C {
		return 0, fmt.Errorf("blank id %d is out of range for C=%d columns", a.opt.Blank, C)
	}
	maxID := C - 1
	if a.opt.Star {
		maxID = C
	}
	for i, k := range targets {
		if k < 0 || k > maxID {
			want := fmt.Sprintf("[0, %d)", C)
			if k == C {
				want += fmt.Sprintf(" (id %d is the star: enable the star option)", C)
			}
			if a.opt.Star {
				want = fmt.Sprintf("[0, %d] (%d is the star)", C, C)
			}
			return 0, fmt.Errorf("targets[%d] = %d is out of range; want %s", i, k, want)
		}
		if k == a.opt.Blank {
			return 0, fmt.Errorf("targets[%d] is the blank id %d; targets must not contain the blank", i, k)
		}
	}
	if r := repeats(targets); T < len(targets)+r {
		return 0, fmt.Errorf("T=%d frames is too short for L=%d targets with R=%d adjacent repeats; want T >= L+R = %d", T, len(targets), r, len(targets)+r)
	}
	if err := checkFinite("log_probs", logProbs, C, true); err != nil {
		return 0, err
	}
	return T, nil
}

// repeats counts adjacent equal targets.
func repeats(targets []int) int {
	r := 0
	for i := 1; i < len(targets); i++ {
		if targets[i] == targets[i-1] {
			r++
		}
	}
	return r
}

// prepare builds the trellis labels, skip penalties and torchaudio's window.
func (a *Aligner) prepare(T int, tg []int) {
	L := len(tg)
	S := 2*L + 1
	// Padded to whole 8-state blocks (plus one) for the vector kernel: the
	// padding states read the blank and never skip.
	n := S + 16
	a.lab = resize(a.lab, n)[:S]
	a.penF = resize(a.penF, n)[:S]
	a.maskI = resize(a.maskI, n)[:S]
	negInf := float32(math.Inf(-1))
	for s := range n {
		a.lab[:n][s] = int32(a.opt.Blank)
		a.penF[:n][s] = negInf
		a.maskI[:n][s] = 0
		if s%2 == 1 && s < S {
			a.lab[s] = int32(tg[s/2])
			if s != 1 && tg[s/2] != tg[s/2-1] {
				a.penF[s] = 0
				a.maskI[s] = -1
			}
		}
	}
	a.lo = resize(a.lo, T)
	a.hi = resize(a.hi, T)
	R := repeats(tg)
	start, end := 0, 2
	if T-(L+R) <= 0 {
		start = 1
	}
	a.lo[0], a.hi[0] = int32(start), int32(end)
	for t := 1; t < T; t++ {
		if T-t <= L+R {
			if start%2 == 1 && start/2+1 < L && tg[start/2] != tg[start/2+1] {
				start++
			}
			start++
		}
		if t <= L+R {
			if end%2 == 0 && end < 2*L && tg[end/2-1] != tg[end/2] {
				end++
			}
			end++
		}
		a.lo[t], a.hi[t] = int32(min(start, S)), int32(min(end, S))
	}
}

// kernel is the per-precision arithmetic of the trellis recurrence. Rows
// are stored with two leading sentinel slots: state s lives at index s+2.
type kernel[V int32 | float32] interface {
	// neg is the value of an unreachable state.
	neg() V
	// emit returns frame src's emission row (len C, plus the star column):
	// src itself when usable as is, else buf filled.
	emit(buf []V, src []float32, star bool) []V
	// step computes states [lo, hi) of cur from prev, writes their 2-bit
	// choices into the bit planes bp and returns the maximum over [lo, hi);
	// m is prev's maximum (used by renormalising kernels). It may also write
	// cur and bp for other states of the 8-state blocks that [lo, hi)
	// touches; the caller resets the states it reads later.
	step(prev, cur, e []V, lab []int32, lo, hi int, bp []byte, m V) V
	// rowMax is the maximum of row over states [lo, hi).
	rowMax(row []V, lo, hi int) V
}

// alignLane runs the forward pass and the (checkpointed) backtrace, writing
// the label of every frame into labels.
func alignLane[V int32 | float32, K kernel[V]](a *Aligner, ln *lane[V], k K, lp []float32, C int, labels []int32) error {
	T := len(labels)
	S := len(a.lab)
	budget := a.opt.MaxMemory
	if budget == 0 {
		budget = DefaultMaxMemory
	}
	seg, err := planSegments(T, S, budget)
	if err != nil {
		return err
	}
	if a.segment > 0 {
		seg = a.segment
	}
	// Segments g = 0..G-1 cover frames (g*seg, min((g+1)*seg, T-1)].
	G := 1
	if T >= 2 {
		G = (T-2)/seg + 1
	}
	nck := 0 // checkpoint rows: none when a single segment holds every backpointer
	if G > 1 {
		nck = G
	}
	width := S + 2 + 16 // sentinels, then room for the last 8-state block
	for i := range ln.rows {
		ln.rows[i] = resize(ln.rows[i], width)
	}
	ln.ck = resize(ln.ck, nck*width)
	cols := C
	if a.opt.Star {
		cols++
	}
	ln.e = resize(ln.e, cols)
	a.bp.reset(min(seg, T-1), S)

	neg := k.neg()
	prev, cur := ln.rows[0], ln.rows[1]
	for i := range prev {
		prev[i], cur[i] = neg, neg
	}
	e := k.emit(ln.e, lp[:C], a.opt.Star)
	for s := int(a.lo[0]); s < int(a.hi[0]); s++ {
		prev[s+2] = e[a.lab[s]]
	}
	m := k.rowMax(prev, int(a.lo[0]), int(a.hi[0]))
	// forward runs frames (t0, t1] from prev, writing backpointers of frame t
	// into row (t-1) % seg.
	forward := func(t0, t1 int, save bool) {
		for t := t0 + 1; t <= t1; t++ {
			lo, hi := int(a.lo[t]), int(a.hi[t])
			e := k.emit(ln.e, lp[t*C:(t+1)*C], a.opt.Star)
			m = k.step(prev, cur, e, a.lab, lo, hi, a.bp.row((t-1)%seg), m)
			// The states read at frame t+1 outside [lo, hi) are unreachable, as
			// torchaudio's per-frame reset makes them.
			cur[lo], cur[lo+1], cur[hi+2], cur[hi+3] = neg, neg, neg, neg
			prev, cur = cur, prev
			if save && t%seg == 0 && t/seg < nck {
				copy(ln.ck[(t/seg)*width:(t/seg+1)*width], prev)
			}
		}
	}
	if nck > 0 {
		copy(ln.ck[:width], prev)
	}
	forward(0, T-1, nck > 0)
	if prev[S-1+2] == neg && prev[S-2+2] == neg {
		return fmt.Errorf("no alignment has a finite score: every path of the %d targets through the %d frames meets a -Inf log-prob", len(a.lab)/2, T)
	}
	// End on the last label unless the trailing blank is strictly greater.
	s := S - 2
	if prev[S-1+2] > prev[S-2+2] {
		s = S - 1
	}
	// Backtrace segment by segment, last first. The last segment's
	// backpointers are still in place from the forward pass; the others are
	// recomputed from their checkpoint.
	for g := G - 1; g >= 0; g-- {
		t0 := g * seg
		t1 := min(t0+seg, T-1)
		if g < G-1 {
			copy(prev, ln.ck[g*width:(g+1)*width])
			m = k.rowMax(prev, int(a.lo[t0]), int(a.hi[t0]))
			forward(t0, t1, false)
		}
		for t := t1; t > t0; t-- {
			labels[t] = a.lab[s]
			s -= a.bp.get(a.bp.row((t-1)%seg), s)
		}
	}
	labels[0] = a.lab[s]
	return nil
}

// workingBytes is the memory the aligner holds in scratch buffers.
func (a *Aligner) workingBytes() int64 {
	n := int64(cap(a.bp.data)) + 4*int64(cap(a.lab)+cap(a.penF)+cap(a.maskI)+cap(a.lo)+cap(a.hi))
	n += 4 * int64(cap(a.f32.rows[0])+cap(a.f32.rows[1])+cap(a.f32.ck)+cap(a.f32.e))
	n += 4 * int64(cap(a.i32.rows[0])+cap(a.i32.rows[1])+cap(a.i32.ck)+cap(a.i32.e))
	return n
}

// planSegments returns the segment length K: T when all backpointers fit in
// budget, else the K minimising checkpoints plus one segment of
// backpointers, or an error when even that does not fit.
func planSegments(T, S int, budget int64) (int, error) {
	bpRow := planesRowBytes(S)
	if int64(T)*bpRow <= budget {
		return max(T, 1), nil
	}
	rowBytes := int64(S+18) * 4
	k := int(math.Ceil(math.Sqrt(float64(T) * float64(rowBytes) / float64(bpRow))))
	k = max(1, min(k, T))
	need := int64((T+k-1)/k)*rowBytes + int64(k)*bpRow
	if need > budget {
		return 0, fmt.Errorf("aligning T=%d frames over %d trellis states needs %d bytes of backtrace memory even with checkpointing; the limit is %d", T, S, need, budget)
	}
	return k, nil
}

// resize returns s with length n, reusing its array when large enough.
func resize[E any](s []E, n int) []E {
	if cap(s) < n {
		return make([]E, n)
	}
	return s[:n]
}

// f32Kernel is the torchaudio-exact float32 recurrence.
type f32Kernel struct {
	star float32
	pen  []float32 // 0 where the skip s-2 -> s is allowed, else -Inf
}

func (f32Kernel) neg() float32 { return float32(math.Inf(-1)) }

func (k f32Kernel) emit(buf []float32, src []float32, star bool) []float32 {
	if !star {
		return src
	}
	copy(buf, src)
	buf[len(src)] = k.star
	return buf
}

func (f32Kernel) rowMax(row []float32, lo, hi int) float32 { return 0 }

func (k f32Kernel) step(prev, cur, e []float32, lab []int32, lo, hi int, bp []byte, _ float32) float32 {
	if hi <= lo {
		return 0
	}
	if useAVX2 {
		// Whole 8-state blocks from lo rounded down; rows, labels and
		// penalties are padded so the last block stays in bounds.
		b0, b1 := lo&^7, (hi+7)&^7
		nb := len(bp) / 2
		_ = prev[b1+9]
		_ = cur[b1+1]
		_ = lab[:b1][b1-1]
		_ = k.pen[:b1][b1-1]
		_ = bp[nb+b1/8-1]
		ctcStepF32AVX2(&prev[b0], &k.pen[:b1][b0], &lab[:b1][b0], &e[0], &cur[b0+2], &bp[b0/8], &bp[nb+b0/8], (b1-b0)/8)
		return 0
	}
	// Branch-free torchaudio rule: c2 = x2 > x1 && x2 > x0; c1 = x1 > x0 &&
	// x1 > x2 (never both); r = x2 if c2, x1 if c1, else x0. Blank states
	// (even s) never skip, so they reduce to c1 = x1 > x0 (when x1 is -Inf
	// both forms are false) and read the blank's emission: states go in
	// (blank, label) pairs.
	pen := k.pen
	eb := e[lab[0]] // state 0 is the blank
	pl := planeWriter{bp: bp, s: lo}
	s := lo
	label := func(s int) {
		x0, x1, x2 := prev[s+2], prev[s+1], prev[s]+pen[s]
		c2 := b2u(x2 > x1) & b2u(x2 > x0)
		c1 := b2u(x1 > x0) & b2u(x1 > x2)
		r := math.Float32bits(x0)
		r ^= (r ^ math.Float32bits(x1)) & -c1
		r ^= (r ^ math.Float32bits(x2)) & -c2
		cur[s+2] = math.Float32frombits(r) + e[lab[s]]
		pl.put(c1, c2)
	}
	if s&1 == 1 {
		label(s)
		s++
	}
	for ; s+1 < hi; s += 2 {
		x0, x1 := prev[s+2], prev[s+1]
		c1 := b2u(x1 > x0)
		r := math.Float32bits(x0)
		r ^= (r ^ math.Float32bits(x1)) & -c1
		cur[s+2] = math.Float32frombits(r) + eb
		pl.put(c1, 0)
		label(s + 1)
	}
	if s < hi {
		x0, x1 := prev[s+2], prev[s+1]
		c1 := b2u(x1 > x0)
		r := math.Float32bits(x0)
		r ^= (r ^ math.Float32bits(x1)) & -c1
		cur[s+2] = math.Float32frombits(r) + eb
		pl.put(c1, 0)
	}
	pl.flush()
	return 0
}

// planeWriter appends 2-bit choices to a row of bit planes, one state after
// another from state s, a byte at a time.
type planeWriter struct {
	bp     []byte
	s      int
	lo, hi byte
}

func (w *planeWriter) put(c1, c2 uint32) {
	sh := uint(w.s & 7)
	w.lo |= byte(c1) << sh
	w.hi |= byte(c2) << sh
	if sh == 7 {
		w.bp[w.s>>3] = w.lo
		w.bp[len(w.bp)/2+w.s>>3] = w.hi
		w.lo, w.hi = 0, 0
	}
	w.s++
}

// flush stores a partial last byte (bits of states outside the range are 0
// there and never read).
func (w *planeWriter) flush() {
	if w.s&7 != 0 {
		w.bp[w.s>>3] = w.lo
		w.bp[len(w.bp)/2+w.s>>3] = w.hi
	}
}

// b2u converts a comparison result to 0 or 1 without a branch.
func b2u(b bool) uint32 {
	if b {
		return 1
	}
	return 0
}

// Fixed-point constants of the int32 CTC recurrence.
const (
	ctcNeg   int32 = -(1 << 29) // unreachable
	ctcFloor int32 = -(1 << 28) // saturation floor of reachable states
)

// i32Kernel is the renormalised fixed-point recurrence.
type i32Kernel struct {
	quant quantizer
	star  int32
	mask  []int32 // -1 where the skip s-2 -> s is allowed, else 0
}

func (i32Kernel) neg() int32 { return ctcNeg }

func (k i32Kernel) emit(buf []int32, src []float32, star bool) []int32 {
	k.quant.row(buf[:len(src)], src)
	if star {
		buf[len(src)] = k.star
	}
	return buf
}

func (i32Kernel) rowMax(row []int32, lo, hi int) int32 {
	m := ctcNeg
	for s := lo; s < hi; s++ {
		m = max(m, row[s+2])
	}
	return m
}

func (k i32Kernel) step(prev, cur, e []int32, lab []int32, lo, hi int, bp []byte, m int32) int32 {
	mx := ctcNeg
	if hi <= lo {
		return mx
	}
	if useAVX2 {
		b0, b1 := lo&^7, (hi+7)&^7
		nb := len(bp) / 2
		_ = prev[b1+9]
		_ = cur[b1+1]
		_ = lab[:b1][b1-1]
		_ = k.mask[:b1][b1-1]
		_ = bp[nb+b1/8-1]
		call := func(b0, b1 int) int32 {
			return ctcStepI32AVX2(&prev[b0], &k.mask[:b1][b0], &lab[:b1][b0], &e[0], &cur[b0+2], &bp[b0/8], &bp[nb+b0/8], (b1-b0)/8, m)
		}
		if b1-b0 == 8 {
			call(b0, b1)
			return k.rowMax(cur, lo, hi)
		}
		// The edge blocks hold states outside [lo, hi): their maximum is
		// taken over the window only.
		call(b0, b0+8)
		if b1-b0 > 16 {
			mx = call(b0+8, b1-8)
		}
		call(b1-8, b1)
		return max(mx, k.rowMax(cur, lo, b0+8), k.rowMax(cur, b1-8, hi))
	}
	p := prev[lo : hi+2] // p[i] is state lo-2+i
	c := cur[lo+2 : hi+2]
	mask := k.mask[lo:hi]
	lb := lab[lo:hi]
	pl := planeWriter{bp: bp, s: lo}
	x2p, x1 := p[0], p[1]
	for i := range c {
		x0 := p[i+2]
		x2 := x2p&mask[i] | ctcNeg&^mask[i]
		c2 := b2u(x2 > x1) & b2u(x2 > x0)
		c1 := b2u(x1 > x0) & b2u(x1 > x2)
		r := x0
		r ^= (r ^ x1) & -int32(c1)
		r ^= (r ^ x2) & -int32(c2)
		v := max(r-m+e[lb[i]], ctcFloor)
		if r == ctcNeg {
			v = ctcNeg
		}
		c[i] = v
		mx = max(mx, v)
		pl.put(c1, c2)
		x2p, x1 = x1, x0
	}
	pl.flush()
	return mx
}
