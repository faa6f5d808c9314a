package fbank

import (
	"context"
	"fmt"
	"math"
	goruntime "runtime"
	"sync"
	"sync/atomic"
)

// Frontend computes log-mel features for one Config. Building it
// precomputes the window, the FFT plan (twiddles) and the sparse
// filterbank; after that it is immutable and safe for concurrent use.
type Frontend struct {
	cfg    Config
	fft    *rfftPlan
	window []float64 // [WinLength], applied at frame positions winOff..winOff+WinLength-1
	winOff int       // where the window starts in the n_fft buffer
	pad    int       // virtual samples before sample 0 (n_fft/2 when centred)
	bank   melBank
	batch  *batchPlan // groups of `lanes` frames with SIMD; nil: scalar only
	// raw skips the normalisation pass: Compute returns the log-mel values
	// (Incremental's per_utterance frames).
	raw bool
}

// NewFrontend validates cfg and precomputes everything Compute needs.
func NewFrontend(cfg Config) (*Frontend, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	fft, err := newRFFTPlan(cfg.NFFT)
	if err != nil {
		return nil, err
	}
	f := &Frontend{cfg: cfg, fft: fft}
	if cfg.centred() {
		f.pad = cfg.NFFT / 2
		f.winOff = (cfg.NFFT - cfg.WinLength) / 2 // torch.stft centres a short window
	}
	f.window = cfg.Window
	if f.window == nil {
		f.window = hann(cfg.WinLength, cfg.WindowType == HannPeriodic)
	}
	nFreq := cfg.NFFT/2 + 1
	dense := slaneyFilterbank(cfg.SampleRate, cfg.NFFT, cfg.NumMels, cfg.FMin, cfg.FMax)
	if cfg.Filterbank != nil {
		if dense, err = denseFromFlat(cfg.Filterbank, cfg.NumMels, nFreq); err != nil {
			return nil, err
		}
	}
	f.bank = newMelBank(dense)
	f.batch = newBatchPlan(f)
	return f, nil
}

// hann is torch.hann_window(n, periodic) in float64.
func hann(n int, periodic bool) []float64 {
	w := make([]float64, n)
	den := float64(n - 1)
	if periodic {
		den = float64(n)
	}
	if n == 1 {
		w[0] = 1
		return w
	}
	for k := range w {
		w[k] = 0.5 - 0.5*math.Cos(2*math.Pi*float64(k)/den)
	}
	return w
}

// Config returns the frontend's configuration.
func (f *Frontend) Config() Config { return f.cfg }

// Features is a batch of log-mel features.
type Features struct {
	// Data is [Batch, NumMels, Frames] (MelTime) or [Batch, Frames, NumMels]
	// (TimeMel), row-major. Frames past an item's own frame count are 0.
	Data                []float32
	Batch, Mels, Frames int
	Layout              Layout
	Lengths             []int64 // valid frames per item
	ItemFrames          []int   // output frames per item (the rest of its rows are 0)
}

// ClipError is a problem with one clip of a batch.
type ClipError struct {
	Item int
	Err  error
}

func (e *ClipError) Error() string { return fmt.Sprintf("pcm item %d %v", e.Item, e.Err) }
func (e *ClipError) Unwrap() error { return e.Err }

// frameChunk is how many consecutive frames one work unit computes.
const frameChunk = 32

// Compute returns the features of every clip. Clips are mono pcm at
// cfg.SampleRate, nominally in [-1, 1]; each is framed and normalised on
// its own, and shorter clips' rows are zero-filled up to the longest. The
// work is split into chunks of frames (and, for the normalisation, of mel
// bins) spread over `threads` goroutines (<= 0: GOMAXPROCS), so one long
// clip uses every core as well as a batch does. Each goroutine allocates its
// scratch once; nothing is allocated per frame.
//
// Errors: a clip that is empty, shorter than one window, or holds NaN/Inf
// gives a *ClipError naming the item; a cancelled ctx stops the work.
func (f *Frontend) Compute(ctx context.Context, clips [][]float32, threads int) (*Features, error) {
	c := &f.cfg
	geo := make([]geometry, len(clips))
	out := &Features{Batch: len(clips), Mels: c.NumMels, Layout: c.Layout, Lengths: make([]int64, len(clips)),
		ItemFrames: make([]int, len(clips))}
	for b, x := range clips {
		g, err := c.geometry(len(x))
		if err != nil {
			return nil, &ClipError{b, err}
		}
		geo[b] = g
		out.Frames = max(out.Frames, g.emit)
		out.Lengths[b] = int64(g.valid)
		out.ItemFrames[b] = g.emit
	}
	if threads <= 0 {
		threads = goruntime.GOMAXPROCS(0)
	}
	if len(clips) == 0 {
		return out, nil
	}
	// Phase 0: every sample the STFT reads must be finite (chunks of samples
	// on all cores: one long clip is as parallel as a batch).
	const checkChunk = 1 << 15
	type span struct{ item, lo, hi int }
	var spans []span
	for b := range clips {
		for lo := 0; lo < geo[b].real; lo += checkChunk {
			spans = append(spans, span{b, lo, min(lo+checkChunk, geo[b].real)})
		}
	}
	bad := make([]int, len(spans)) // index of the first non-finite sample, or -1
	err := parallel(ctx, len(spans), threads, func() func(int) {
		return func(u int) {
			sp := spans[u]
			bad[u] = -1
			if i, ok := firstNonFinite(clips[sp.item][sp.lo:sp.hi]); ok {
				bad[u] = sp.lo + i
			}
		}
	})
	if err != nil {
		return nil, err
	}
	for u, i := range bad {
		if i >= 0 {
			b := spans[u].item
			return nil, &ClipError{b, fmt.Errorf("sample %d is %v, want finite samples", i, clips[b][i])}
		}
	}
	out.Data = make([]float32, len(clips)*out.Frames*c.NumMels)

	// Phase 1: frames -> window -> |FFT|² -> mel -> log, in chunks of frames.
	type unit struct{ item, t0, t1 int }
	var units []unit
	firstUnit := make([]int, len(clips)+1)
	for b, g := range geo {
		firstUnit[b] = len(units)
		for t := 0; t < g.computed; t += frameChunk {
			units = append(units, unit{b, t, min(t+frameChunk, g.computed)})
		}
	}
	firstUnit[len(clips)] = len(units)
	unitMax := make([]float64, len(units))
	err = parallel(ctx, len(units), threads, func() func(int) {
		sc := f.newScratch()
		return func(u int) {
			un := units[u]
			unitMax[u] = f.logMelFrames(clips[un.item], geo[un.item], un.t0, un.t1, out.itemData(un.item), out.Frames, sc)
		}
	})
	if err != nil {
		return nil, err
	}

	if f.raw {
		return out, nil
	}
	// Phase 2: normalise each item, in chunks of mel bins.
	itemMax := make([]float64, len(clips))
	for b := range clips {
		itemMax[b] = math.Inf(-1)
		for _, m := range unitMax[firstUnit[b]:firstUnit[b+1]] {
			if m > itemMax[b] {
				itemMax[b] = m
			}
		}
	}
	const melChunk = 16
	perItem := ceilDiv(c.NumMels, melChunk)
	err = parallel(ctx, len(clips)*perItem, threads, func() func(int) {
		return func(u int) {
			b, m0 := u/perItem, (u%perItem)*melChunk
			f.normalize(out.itemData(b), out.Frames, geo[b], itemMax[b], m0, min(m0+melChunk, c.NumMels))
		}
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// itemData is item b's [NumMels*Frames] slice of Data.
func (o *Features) itemData(b int) []float32 {
	n := o.Frames * o.Mels
	return o.Data[b*n : (b+1)*n]
}

// parallel runs job(i) for i in [0, n) on up to `threads` goroutines. Each
// goroutine calls newWorker once (to build its scratch) and then runs the
// returned function on the indices it claims.
func parallel(ctx context.Context, n, threads int, newWorker func() func(int)) error {
	threads = min(threads, n)
	if threads <= 1 {
		work := newWorker()
		for i := 0; i < n; i++ {
			if err := ctx.Err(); err != nil {
				return err
			}
			work(i)
		}
		return nil
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	for range threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			work := newWorker()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				work(i)
			}
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// scratch is one goroutine's workspace.
type scratch struct {
	frame []float64 // [n_fft] windowed samples
	power []float64 // [n_fft/2+1]
	mel   []float64 // [n_mels]
	block []float32 // [frameChunk * n_mels] staged log-mel values
	fft   *rfftScratch
	batch *batchScratch // the batch path's workspace
}

func (f *Frontend) newScratch() *scratch {
	sc := &scratch{
		frame: make([]float64, f.cfg.NFFT),
		power: make([]float64, f.cfg.NFFT/2+1),
		mel:   make([]float64, f.cfg.NumMels),
		block: make([]float32, frameChunk*f.cfg.NumMels),
		fft:   f.fft.newScratch(),
	}
	if f.batch != nil {
		sc.batch = f.batch.newScratch()
	}
	return sc
}

// groupOut says where the batch path writes the log-mel values of a frame
// group: mel m of lane (frame) l goes to dst[m·mStride + l·lStride].
type groupOut struct {
	dst              []float32
	mStride, lStride int
}

// logMelFrames writes the log-mel values of frames [t0, t1) (at most
// frameChunk) of clip x into item (the item's slice of the output, rows of
// `frames`) and returns their maximum. The batch path writes groups of
// frames straight into item; the scalar path stages its frames in sc.block
// so that the mel_time layout is written as runs of consecutive frames.
func (f *Frontend) logMelFrames(x []float32, g geometry, t0, t1 int, item []float32, frames int, sc *scratch) float64 {
	c := &f.cfg
	nm := c.NumMels
	mx := math.Inf(-1)
	t := t0
	if f.batch != nil {
		for ; t+lanes <= t1; t += lanes {
			if !f.batch.fill(f, x, g, t, sc.batch) {
				buf, lay := f.batch.input(sc.batch)
				for l := range lanes {
					lay.base = l
					f.fillFrame(x, g, t+l, buf, lay)
				}
			}
			out := groupOut{item[m0(t, frames, nm, c.Layout):], frames, 1}
			if c.Layout == TimeMel {
				out.mStride, out.lStride = 1, nm
			}
			mx = max(mx, f.batch.logMel(out, sc.batch))
		}
	}
	ts := t // first frame of the scalar path
	if ts == t1 {
		return mx
	}
	guard, floor, scale := f.logParams()
	block := sc.block[:(t1-ts)*nm]
	for ; t < t1; t++ {
		f.fillFrame(x, g, t, sc.frame, plainLayout)
		f.fft.power(sc.frame, sc.power, sc.fft)
		f.bank.apply(sc.power, sc.mel)
		row := block[(t-ts)*nm : (t-ts+1)*nm]
		for m, v := range sc.mel {
			// log10: log10(max(v, 1e-10)); ln: ln(v + 2^-24) or ln(max(v, log_clamp_min)).
			v += guard
			if v < floor {
				v = floor
			}
			y := ln(v) * scale
			if y > mx {
				mx = y
			}
			row[m] = float32(y)
		}
	}
	if c.Layout == TimeMel {
		copy(item[ts*nm:t1*nm], block)
		return mx
	}
	for m := 0; m < nm; m++ {
		dst := item[m*frames+ts : m*frames+t1]
		for i := range dst {
			dst[i] = block[i*nm+m]
		}
	}
	return mx
}

// m0 is the index of (mel 0, frame t) in an item of the given layout.
func m0(t, frames, nm int, layout Layout) int {
	if layout == TimeMel {
		return t * nm
	}
	return t
}

// logParams returns the log's constants: features are
// scale·ln(max(mel + guard, floor)), which is log10(max(mel, 1e-10)) for
// per_utterance/global, ln(max(mel, log_clamp_min)) when that is set, and
// ln(mel + 2^-24) otherwise.
func (f *Frontend) logParams() (guard, floor, scale float64) {
	switch c := &f.cfg; {
	case c.Normalize == PerUtterance || c.Normalize == Global:
		return 0, log10Floor, 1 / math.Ln10
	case c.LogClampMin > 0:
		return 0, c.LogClampMin, 1
	}
	return logGuard, logGuard, 1
}

// frameLayout says where position p (0 <= p < n_fft) of a frame goes in a
// buffer: base + (p&1)·odd + (p>>1)·step. plainLayout is plain order; the
// batch path puts the pairs (p even, p odd) of frame l into lane l of the
// real and imaginary halves of its packed structure-of-arrays input.
type frameLayout struct{ base, odd, step int }

var plainLayout = frameLayout{0, 1, 2}

// fillFrame writes window · signal for frame t into buf (every n_fft
// position: zeros outside the window). Frames that lie inside the clip take
// a branch-free loop; frames that touch an edge resolve each index through
// the pad mode.
func (f *Frontend) fillFrame(x []float32, g geometry, t int, buf []float64, lay frameLayout) {
	w := f.window
	off := f.winOff
	for p := 0; p < off; p++ {
		buf[lay.base+(p&1)*lay.odd+(p>>1)*lay.step] = 0
	}
	for p := off + len(w); p < f.cfg.NFFT; p++ {
		buf[lay.base+(p&1)*lay.odd+(p>>1)*lay.step] = 0
	}
	start := t*f.cfg.HopLength - f.pad + off // clip index of the window's first sample
	a := f.cfg.PreEmphasis
	inside := start >= 1 && start+len(w) <= g.real
	if inside && off%2 == 0 && len(w)%2 == 0 {
		// Pairs (p even, p odd) land at fixed offsets: no per-sample index math.
		src, prev := x[start:start+len(w)], x[start-1:start-1+len(w)]
		i := lay.base + (off/2)*lay.step
		for j := 0; j < len(w); j, i = j+2, i+lay.step {
			v0, v1 := float64(src[j]), float64(src[j+1])
			if a != 0 {
				v0 -= a * float64(prev[j])
				v1 -= a * float64(prev[j+1])
			}
			buf[i] = w[j] * v0
			buf[i+lay.odd] = w[j+1] * v1
		}
		return
	}
	for j := range w {
		p := off + j
		v := f.sample(x, g, start+j)
		buf[lay.base+(p&1)*lay.odd+(p>>1)*lay.step] = w[j] * v
	}
}

// sample is the (pre-emphasised) signal at clip index i, resolving indices
// outside [0, n) through the pad mode. Past the clip's real samples (the
// pad_to_seconds zeros) the signal is 0, pre-emphasis included, as HF masks it.
func (f *Frontend) sample(x []float32, g geometry, i int) float64 {
	if i < 0 || i >= g.n {
		if f.cfg.PadMode != PadReflect {
			return 0
		}
		if i < 0 {
			i = -i
		} else {
			i = 2*(g.n-1) - i
		}
	}
	if i >= g.real {
		return 0
	}
	v := float64(x[i])
	if a := f.cfg.PreEmphasis; a != 0 && i > 0 {
		v -= a * float64(x[i-1])
	}
	return v
}

// normalize applies the post-log normalisation to mel bins [m0, m1) of one
// item's computed frames. Bin m's value at frame t is item[m*ms + t*ts].
func (f *Frontend) normalize(item []float32, frames int, g geometry, itemMax float64, m0, m1 int) {
	c := &f.cfg
	ms, ts := frames, 1
	if c.Layout == TimeMel {
		ms, ts = 1, c.NumMels
	}
	n := g.computed
	switch c.Normalize {
	case PerUtterance, Global:
		floor := float32(itemMax - clampRange)
		if c.Normalize == Global {
			floor = float32(c.GlobalLogMelMax - clampRange)
		}
		// Contiguous runs: a mel row (mel_time) or a frame's mel chunk (time_mel).
		if c.Layout == MelTime {
			for m := m0; m < m1; m++ {
				clampScale(item[m*ms:m*ms+n], floor)
			}
		} else {
			for t := 0; t < n; t++ {
				clampScale(item[t*ts+m0:t*ts+m1], floor)
			}
		}
	case Fixed:
		for m := m0; m < m1; m++ {
			mean, std := c.FixedMean[m], c.FixedStd[m]
			for i, t := m*ms, 0; t < n; i, t = i+ts, t+1 {
				item[i] = float32((float64(item[i]) - mean) / std)
			}
		}
	case PerFeature:
		for m := m0; m < m1; m++ {
			var sum float64
			for i, t := m*ms, 0; t < n; i, t = i+ts, t+1 {
				sum += float64(item[i])
			}
			mean := sum / float64(n)
			var ss float64
			for i, t := m*ms, 0; t < n; i, t = i+ts, t+1 {
				d := float64(item[i]) - mean
				ss += d * d
			}
			inv := 1 / (math.Sqrt(ss/float64(n-1)) + stdEpsilon)
			for i, t := m*ms, 0; t < n; i, t = i+ts, t+1 {
				item[i] = float32((float64(item[i]) - mean) * inv)
			}
		}
	}
}

// clampScale is Whisper's final step, x = (max(x, floor) + 4)/4, over a
// run of values; SIMD builds replace it with a vector loop giving identical
// results ((v+4)·0.25 is exact).
var clampScale = clampScaleScalar

func clampScaleScalar(x []float32, floor float32) {
	for i, v := range x {
		if v < floor {
			v = floor
		}
		x[i] = (v + 4) / 4
	}
}

// firstNonFinite returns the index of the first NaN or ±Inf in x. The scan
// itself is branch-free: v-v is 0 for finite v and NaN otherwise.
func firstNonFinite(x []float32) (int, bool) {
	const block = 4096
	for lo := 0; lo < len(x); lo += block {
		blk := x[lo:min(lo+block, len(x))]
		var s0, s1, s2, s3 float32
		i := 0
		for ; i+3 < len(blk); i += 4 {
			s0 += blk[i] - blk[i]
			s1 += blk[i+1] - blk[i+1]
			s2 += blk[i+2] - blk[i+2]
			s3 += blk[i+3] - blk[i+3]
		}
		for ; i < len(blk); i++ {
			s0 += blk[i] - blk[i]
		}
		if s0+s1+s2+s3 != 0 {
			for j, v := range blk {
				if v != v || math.IsInf(float64(v), 0) {
					return lo + j, true
				}
			}
		}
	}
	return 0, false
}
