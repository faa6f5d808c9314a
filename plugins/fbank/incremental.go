package fbank

import (
	"context"
	"fmt"
	"maps"
	"math"

	"github.com/edgespeech/edge/runtime"
)

// Incremental computes the features of audio that arrives in pieces (a
// microphone, a socket). Each Write appends samples and returns the frames
// whose samples are now all in; Flush ends the stream with the frames the
// end padding completes. It carries the window's overlap between writes: it
// keeps the samples from one window (and the pre-emphasis's previous
// sample) before the next frame on, and on each write runs the frontend's
// frame computation over [carried samples + new samples], keeping only the
// frames that lie wholly inside them. Those are computed by exactly the
// arithmetic the offline op applies to the whole clip, so:
//
//   - for normalize none, global (a fixed clamp floor) and fixed (given
//     statistics), where every frame is causal, the frames of a stream, written in pieces of any sizes, equal
//     the offline op's frames of the whole clip bit for bit, the frames past
//     the valid count (zero offline) included, and Flush's lengths equal the
//     op's;
//   - for the per-utterance normalisations (per_feature, per_utterance),
//     which need the whole utterance, the frames are the log-mel values
//     before normalisation (ln(x + 2⁻²⁴) for per_feature, log10(max(x,
//     1e-10)) for per_utterance), exactly the offline op's before its
//     second pass; NormalizeWindow then normalises a window of them, as
//     NeMo's buffered inference normalises each buffer by its own
//     statistics. Over all of a stream's valid frames that equals the
//     offline op exactly for per_feature (to the float32 rounding of the
//     clamp floor for per_utterance); over a shorter window the statistics
//     are the window's.
//
// Centre padding at the stream's start (reflect or zeros) and pre-emphasis'
// first sample are the offline op's; the padding at the end is applied by
// Flush, once the end is known. The frontend has no dither (inference
// frontends run without it), so nothing is random.
//
// Frames come out in groups of Group() consecutive frames (the frame group
// the SIMD path transforms together, so that each frame takes the same
// arithmetic path as offline): a frame is returned once the samples of
// the last frame of its group are in, (Group()-1)·hop samples after its own
// at most. pad_to_seconds and out_frames are whole-clip rules and are
// refused.
//
// Frames are returned time-major whatever the configured layout: frame t
// is NumMels consecutive values. An Incremental is used by one goroutine at
// a time; it holds about two windows of samples.
type Incremental struct {
	cfg   Config // as given
	run   Config // what the frame computation runs (per_feature: none)
	clips clipFeatures
	norm  *Frontend // NormalizeWindow's normalisation (time_mel)
	group int       // frames emitted together; base is a multiple of group·hop
	hop   int
	pad   int // virtual samples before sample 0
	off   int // the window's offset in the n_fft buffer
	win   int
	carry int // samples kept before the next frame's window beyond its previous sample

	buf    []float32 // samples from base on
	base   int       // stream index of buf[0]
	n      int       // samples written
	next   int       // the next frame to return
	closed bool
}

// clipFeatures computes the features of one clip in host memory, in the
// configuration's layout, [NumMels, frames] or [frames, NumMels], frames
// being the clip's own frame count: the CPU Frontend or the fbank op on
// any backend.
type clipFeatures interface {
	clip(ctx context.Context, x []float32) ([]float32, error)
	close() error
}

// NewIncremental starts an incremental computation of cfg's features on
// the CPU.
func NewIncremental(cfg Config) (*Incremental, error) {
	s, err := newIncremental(cfg)
	if err != nil {
		return nil, err
	}
	fe, err := NewFrontend(s.run)
	if err != nil {
		return nil, err
	}
	fe.raw = cfg.Normalize == PerUtterance
	s.clips = cpuClips{fe}
	s.group = 1
	if fe.batch != nil {
		s.group = lanes
	}
	return s, nil
}

// opGroup is the frame group of NewIncrementalOp: a multiple of the CPU
// SIMD path's lanes (4 or 8) and of the CUDA kernels' frames per warp (4).
const opGroup = 8

// NewIncrementalOp starts an incremental computation through the registered
// fbank op on backend b (the CUDA op on a CUDA backend), cfgMap being the
// op's parameters (preset= and overrides). Each write that completes frames
// runs the op once over the carried and new samples and downloads its
// features. The per_utterance normalisation is not available this way (the
// op has no un-normalised log10 output): use NewIncremental.
func NewIncrementalOp(cfgMap map[string]any, b runtime.Backend) (*Incremental, error) {
	resolved, err := runtime.ResolveParams("fbank", params, cfgMap)
	if err != nil {
		return nil, err
	}
	cfg, err := ConfigFromParams(resolved)
	if err != nil {
		return nil, err
	}
	if cfg.Normalize == PerUtterance {
		return nil, fmt.Errorf("incremental fbank through the op: normalize=per_utterance has no un-normalised output; use the cpu frontend (NewIncremental)")
	}
	s, err := newIncremental(cfg)
	if err != nil {
		return nil, err
	}
	p := maps.Clone(cfgMap)
	p["normalize"] = string(s.run.Normalize)
	inst, err := runtime.New("fbank", p, b)
	if err != nil {
		return nil, err
	}
	s.clips, s.group = &opClips{inst: inst}, opGroup
	return s, nil
}

func newIncremental(cfg Config) (*Incremental, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.PadToSeconds > 0 {
		return nil, fmt.Errorf("incremental fbank: pad_to_seconds %v pads a whole clip; a stream has no fixed length", cfg.PadToSeconds)
	}
	if cfg.OutFrames > 0 {
		return nil, fmt.Errorf("incremental fbank: out_frames %d is a whole-clip rule; a stream has no fixed length", cfg.OutFrames)
	}
	run := cfg
	if cfg.Normalize == PerFeature {
		run.Normalize = None // the same log, valid frames and mask; no statistics
	}
	normCfg := cfg
	normCfg.Layout = TimeMel
	s := &Incremental{cfg: cfg, run: run, norm: &Frontend{cfg: normCfg}, hop: cfg.HopLength, win: cfg.WinLength}
	if cfg.centred() {
		s.pad, s.off = cfg.NFFT/2, (cfg.NFFT-cfg.WinLength)/2
	}
	// One window and the centre padding's worth before the next frame, so a
	// carried clip is long enough for any pad mode and the frames it
	// returns never touch its start.
	s.carry = max(s.pad, s.win)
	return s, nil
}

// Config is the configuration the stream's frames follow.
func (s *Incremental) Config() Config { return s.cfg }

// Group is how many consecutive frames are returned together.
func (s *Incremental) Group() int { return s.group }

// Frames is how many frames have been returned.
func (s *Incremental) Frames() int { return s.next }

// Samples is how many samples have been written.
func (s *Incremental) Samples() int { return s.n }

// Normalized reports whether the returned frames are final features (none,
// global, fixed) or log-mel values for NormalizeWindow (per_feature,
// per_utterance).
func (s *Incremental) Normalized() bool {
	return s.cfg.Normalize != PerFeature && s.cfg.Normalize != PerUtterance
}

// Reset starts a new stream, keeping the buffers.
func (s *Incremental) Reset() {
	s.buf, s.base, s.n, s.next, s.closed = s.buf[:0], 0, 0, 0, false
}

// Close releases the op instance of NewIncrementalOp.
func (s *Incremental) Close() error { return s.clips.close() }

// start is the stream index of frame t's first windowed sample.
func (s *Incremental) start(t int) int { return t*s.hop - s.pad + s.off }

// need is how many samples must be in for frame t to be complete: its
// window, and for reflect padding the mirrored samples a frame before the
// stream's start reads.
func (s *Incremental) need(t int) int {
	st := s.start(t)
	n := st + s.win
	if st < 0 && s.cfg.PadMode == PadReflect {
		n = max(n, -st+1)
	}
	return n
}

// ReadyFrames is how many frames Write has returned once n samples are
// written (before Flush): the frames whose samples are all in, in whole
// groups. It depends on n alone, not on how the samples were cut.
func (s *Incremental) ReadyFrames(n int) int {
	g, err := s.run.geometry(n)
	if err != nil {
		return 0
	}
	ready := 0
	if m := n - s.win + s.pad - s.off; m >= 0 {
		ready = m/s.hop + 1 // frames whose window ends by sample n
	}
	for t := 0; t < ready && s.start(t) < 0; t++ {
		if s.need(t) > n { // a reflected frame reads further than its window
			ready = t
		}
	}
	return min(ready, g.computed) / s.group * s.group
}

// Write appends pcm (mono at the sample rate, finite; it is copied) and
// appends to dst the frames it completed, time-major, returning dst.
func (s *Incremental) Write(ctx context.Context, pcm []float32, dst []float32) ([]float32, error) {
	if s.closed {
		return dst, fmt.Errorf("incremental fbank: write after flush (Reset starts a new stream)")
	}
	if i, bad := firstNonFinite(pcm); bad {
		return dst, fmt.Errorf("incremental fbank: sample %d is %v, want finite samples", s.n+i, pcm[i])
	}
	s.buf = append(s.buf, pcm...)
	s.n += len(pcm)
	k := s.base / s.hop
	cg, err := s.run.geometry(len(s.buf))
	if err != nil {
		return dst, nil // too short for any frame yet
	}
	end := min(s.ReadyFrames(s.n), k+cg.computed/s.group*s.group)
	if end <= s.next {
		return dst, nil
	}
	data, err := s.clips.clip(ctx, s.buf)
	if err != nil {
		return dst, fmt.Errorf("incremental fbank: samples %d-%d: %w", s.base, s.n, err)
	}
	dst = s.appendFrames(dst, data, cg.emit, s.next-k, end-k)
	s.next = end
	s.trim()
	return dst, nil
}

// Flush ends the stream: it appends the remaining frames (those the end
// padding completes, and the zero rows past the valid count that the
// offline op has) and returns dst and the stream's valid frame count, the
// op's lengths output. A stream too short for one frame gives the offline
// op's error. After Flush, Reset starts a new stream.
func (s *Incremental) Flush(ctx context.Context, dst []float32) ([]float32, int, error) {
	if s.closed {
		return dst, 0, fmt.Errorf("incremental fbank: flushed twice (Reset starts a new stream)")
	}
	s.closed = true
	g, err := s.run.geometry(s.n)
	if err != nil {
		return dst, 0, fmt.Errorf("incremental fbank: the stream %w", err)
	}
	if s.next < g.emit {
		k := s.base / s.hop
		cg, err := s.run.geometry(len(s.buf))
		if err != nil { // cannot happen: the carry keeps a clip long enough
			return dst, 0, fmt.Errorf("incremental fbank: carried samples %d-%d %w", s.base, s.n, err)
		}
		data, err := s.clips.clip(ctx, s.buf)
		if err != nil {
			return dst, 0, fmt.Errorf("incremental fbank: samples %d-%d: %w", s.base, s.n, err)
		}
		dst = s.appendFrames(dst, data, cg.emit, s.next-k, g.emit-k)
		s.next = g.emit
	}
	return dst, g.valid, nil
}

// appendFrames appends frames [r0, r1) of a clip's features (frames rows in
// the configured layout) to dst, time-major.
func (s *Incremental) appendFrames(dst, data []float32, frames, r0, r1 int) []float32 {
	nm := s.cfg.NumMels
	if s.cfg.Layout == TimeMel {
		return append(dst, data[r0*nm:r1*nm]...)
	}
	at := len(dst)
	dst = append(dst, make([]float32, (r1-r0)*nm)...)
	for m := 0; m < nm; m++ {
		row := data[m*frames : (m+1)*frames]
		for r := r0; r < r1; r++ {
			dst[at+(r-r0)*nm+m] = row[r]
		}
	}
	return dst
}

// trim drops the samples no later frame reads: base moves to a multiple of
// group·hop at least carry+1 samples before the next frame's window.
func (s *Incremental) trim() {
	step := s.group * s.hop
	nb := max(0, min(s.start(s.next), s.n)-1-s.carry) / step * step
	if nb > s.base {
		s.buf = append(s.buf[:0], s.buf[nb-s.base:]...)
		s.base = nb
	}
}

// NormalizeWindow applies the configured per-utterance normalisation in
// place to a window of frames (time-major [frames, NumMels], as Write
// returns them), taking its statistics from those frames alone: per_feature
// subtracts each bin's mean and divides by its unbiased std + 1e-5 (at
// least 2 frames), per_utterance clamps at the window's maximum - 8 and
// maps x to (x + 4)/4. For none, global and fixed it does nothing (Write's
// frames are final).
func (s *Incremental) NormalizeWindow(frames []float32) error {
	nm := s.cfg.NumMels
	if len(frames)%nm != 0 {
		return fmt.Errorf("incremental fbank: window of %d values is not whole frames of %d mels", len(frames), nm)
	}
	n := len(frames) / nm
	switch s.cfg.Normalize {
	case None, Global, Fixed:
		return nil
	case PerFeature:
		if n < 2 {
			return fmt.Errorf("incremental fbank: window of %d frame(s); per_feature normalisation needs at least 2", n)
		}
	case PerUtterance:
		if n < 1 {
			return fmt.Errorf("incremental fbank: empty window")
		}
	}
	mx := math.Inf(-1)
	for _, v := range frames {
		mx = max(mx, float64(v))
	}
	s.norm.normalize(frames, n, geometry{computed: n}, mx, 0, nm)
	return nil
}

// cpuClips runs the CPU Frontend on one goroutine.
type cpuClips struct{ fe *Frontend }

func (c cpuClips) clip(ctx context.Context, x []float32) ([]float32, error) {
	f, err := c.fe.Compute(ctx, [][]float32{x}, 1)
	if err != nil {
		return nil, err
	}
	return f.Data, nil
}

func (cpuClips) close() error { return nil }

// opClips runs an fbank op instance and downloads its features.
type opClips struct{ inst *runtime.Instance }

func (c *opClips) clip(ctx context.Context, x []float32) ([]float32, error) {
	pcm, err := runtime.FromSlice(runtime.F32, runtime.Shape{len(x)}, x)
	if err != nil {
		return nil, err
	}
	out, err := c.inst.Run(ctx, runtime.Tensors{"pcm": pcm})
	if err != nil {
		return nil, err
	}
	defer out.Release()
	feats := out["features"]
	if !feats.OnHost() {
		if feats, err = c.inst.Backend.Download(feats); err != nil {
			return nil, err
		}
	}
	return feats.F32(), nil
}

func (c *opClips) close() error { return c.inst.Close() }
