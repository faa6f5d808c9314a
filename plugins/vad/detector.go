package vad

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/edgespeech/edge/runtime/onnx"
)

// Sample rates the model takes, and its window and context at each.
const (
	Rate16k = 16000
	Rate8k  = 8000
)

// Errors callers may test with errors.Is.
var (
	// ErrSampleRate: the audio is not at 8 or 16 kHz (resample it first,
	// e.g. with runtime/audio.Resample).
	ErrSampleRate = errors.New("vad: unsupported sample rate")
	// ErrEmpty: the audio has no samples.
	ErrEmpty = errors.New("vad: empty audio")
	// ErrTooShort: the audio is shorter than one window (32 ms), too short
	// to hold speech of any length the rules keep.
	ErrTooShort = errors.New("vad: audio shorter than one window")
	// ErrNonFinite: the audio holds a NaN or an infinity.
	ErrNonFinite = errors.New("vad: non-finite sample")
	// ErrClosed: the Detector (or Stream) was closed.
	ErrClosed = errors.New("vad: closed")
)

// Window returns the model's window (new samples per probability) and
// context (samples of the previous window it sees again) at a sample rate:
// 512 and 64 at 16 kHz, 256 and 32 at 8 kHz. Other rates wrap ErrSampleRate.
func Window(sampleRate int) (window, context int, err error) {
	switch sampleRate {
	case Rate16k:
		return 512, 64, nil
	case Rate8k:
		return 256, 32, nil
	}
	return 0, 0, fmt.Errorf("%w %d Hz: Silero VAD takes 16000 or 8000 Hz; resample the audio first", ErrSampleRate, sampleRate)
}

// Options configures a Detector.
type Options struct {
	// Model is the Silero VAD v5 .onnx file; "" means $EDGE_VAD_MODEL, then
	// the cache that scripts/fetch-silero-vad.sh fills (see FindModel).
	Model string
	// Library is the ONNX Runtime shared library ("" = onnx.FindLibrary's
	// search); it only matters for the first session of a process.
	Library string
	// Threads is ONNX Runtime's intra-op thread count for one window; 0
	// means 1. The model is small: one thread per stream, and streams run
	// in parallel, uses cores best.
	Threads int
	// Rules are the segmentation rules; nil means DefaultRules().
	Rules *Rules
}

// Detector runs Silero VAD v5 in one ONNX Runtime session. Its methods
// are safe for concurrent use: each call (and each Stream) owns the
// tensors it binds, and ONNX Runtime's Run is safe to call concurrently on
// one session, so many streams share one Detector. Close releases the
// session once running calls have returned.
type Detector struct {
	rules   Rules
	path    string
	mu      sync.RWMutex // read: a model run; write: Close
	sess    *ort.DynamicAdvancedSession
	threads int
}

// Open loads the model, checks that it has Silero VAD v5's interface and
// creates its session. It fails on invalid Rules.
func Open(opts Options) (*Detector, error) {
	rules := DefaultRules()
	if opts.Rules != nil {
		rules = *opts.Rules
	}
	if err := rules.Validate(); err != nil {
		return nil, err
	}
	if opts.Threads < 0 {
		return nil, fmt.Errorf("vad: threads %d is negative (0 means 1)", opts.Threads)
	}
	threads := max(opts.Threads, 1)
	if err := onnx.Init(opts.Library); err != nil {
		return nil, err
	}
	path, err := FindModel(opts.Model)
	if err != nil {
		return nil, err
	}
	ins, outs, err := ort.GetInputOutputInfo(path)
	if err != nil {
		return nil, fmt.Errorf("reading the ONNX model %s: %w", path, err)
	}
	if err := checkModel(path, ins, outs); err != nil {
		return nil, err
	}
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, err
	}
	defer so.Destroy()
	for _, set := range []func() error{
		func() error { return so.SetIntraOpNumThreads(threads) },
		func() error { return so.SetInterOpNumThreads(1) },
		func() error { return so.SetExecutionMode(ort.ExecutionModeSequential) },
	} {
		if err := set(); err != nil {
			return nil, fmt.Errorf("vad: session options: %w", err)
		}
	}
	sess, err := ort.NewDynamicAdvancedSession(path, []string{inputName, stateName, srName}, []string{outputName, stateNName}, so)
	if err != nil {
		return nil, fmt.Errorf("creating an ONNX Runtime session for %s: %w", path, err)
	}
	return &Detector{rules: rules, path: path, sess: sess, threads: threads}, nil
}

// Rules returns the rules the Detector segments with.
func (d *Detector) Rules() Rules { return d.rules }

// Model is the path of the loaded model.
func (d *Detector) Model() string { return d.path }

// Close releases the session after the calls in flight return; later
// calls, also on its Streams, fail with ErrClosed. Closing twice is a no-op.
func (d *Detector) Close() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.sess == nil {
		return nil
	}
	err := d.sess.Destroy()
	d.sess = nil
	return err
}

// Result is what Detect finds in one clip.
type Result struct {
	// Probs holds one speech probability per window: Probs[i] is for
	// samples [i·Window, (i+1)·Window), the last window zero-padded.
	Probs []float32
	// Segments are the speech segments, in order, not overlapping.
	Segments []Segment
	// Window is the window in samples (512 at 16 kHz, 256 at 8 kHz).
	Window     int
	SampleRate int
}

// Detect runs the model over a whole clip and segments it, exactly as
// Silero's get_speech_timestamps does: windows of Window samples from the
// start, the last one zero-padded, the state carried from the first window
// (zeros) to the last. pcm is mono in [-1, 1] at 8 or 16 kHz; an empty
// clip, one shorter than a window, a NaN or an infinity, or another rate
// is an error (wrapping ErrEmpty, ErrTooShort, ErrNonFinite, ErrSampleRate).
func (d *Detector) Detect(ctx context.Context, pcm []float32, sampleRate int) (*Result, error) {
	win, _, err := Window(sampleRate)
	if err != nil {
		return nil, err
	}
	if len(pcm) == 0 {
		return nil, ErrEmpty
	}
	if len(pcm) < win {
		return nil, fmt.Errorf("%w: %d samples (%v) at %d Hz, a window is %d (%v)", ErrTooShort, len(pcm),
			samplesToDuration(len(pcm), sampleRate), sampleRate, win, windowDuration)
	}
	s, err := d.newStream(sampleRate, d.rules)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	res := &Result{Window: win, SampleRate: sampleRate, Probs: make([]float32, 0, (len(pcm)+win-1)/win)}
	collect := func(probs []float32, events []Event) {
		res.Probs = append(res.Probs, probs...)
		for _, e := range events {
			if e.Kind == SpeechEnd {
				res.Segments = append(res.Segments, e.Segment)
			}
		}
	}
	probs, events, err := s.Feed(ctx, pcm)
	if err != nil {
		return nil, err
	}
	collect(probs, events)
	if probs, events, err = s.Flush(ctx); err != nil {
		return nil, err
	}
	collect(probs, events)
	return res, nil
}

// DetectBatch is Detect for several clips at once, in one model run per
// window for all of them (at 16 clips about half the CPU time per clip:
// BenchmarkDetectBatch). Each clip is checked and segmented as Detect does; the
// probabilities agree with Detect's within the parity tolerance (on the
// tested CPUs, bit for bit) and the segments are the same.
func (d *Detector) DetectBatch(ctx context.Context, clips [][]float32, sampleRate int) ([]*Result, error) {
	return d.detectBatch(ctx, clips, sampleRate, d.rules, "clip")
}

func (d *Detector) detectBatch(ctx context.Context, clips [][]float32, sampleRate int, rules Rules, what string) ([]*Result, error) {
	win, _, err := Window(sampleRate)
	if err != nil {
		return nil, err
	}
	if len(clips) == 0 {
		return nil, nil
	}
	for k, x := range clips {
		switch {
		case len(x) == 0:
			return nil, fmt.Errorf("%s %d: %w", what, k, ErrEmpty)
		case len(x) < win:
			return nil, fmt.Errorf("%s %d: %w: %d samples at %d Hz, a window is %d", what, k, ErrTooShort, len(x), sampleRate, win)
		}
		if i, bad := firstNonFinite(x); bad {
			return nil, fmt.Errorf("%s %d: %w: sample %d is %v", what, k, ErrNonFinite, i, x[i])
		}
	}
	b, err := d.newBatch(len(clips), sampleRate, rules)
	if err != nil {
		return nil, err
	}
	defer b.close()
	probs, segs, err := b.clips(ctx, clips)
	if err != nil {
		return nil, err
	}
	out := make([]*Result, len(clips))
	for k := range out {
		out[k] = &Result{Probs: probs[k], Segments: segs[k], Window: win, SampleRate: sampleRate}
	}
	return out, nil
}

// Segments returns the speech segments of a whole clip (Detect without
// the probabilities). No speech gives an empty list, not an error.
func (d *Detector) Segments(ctx context.Context, pcm []float32, sampleRate int) ([]Segment, error) {
	r, err := d.Detect(ctx, pcm, sampleRate)
	if err != nil {
		return nil, err
	}
	return r.Segments, nil
}

// run runs the model once on l's tensors under the read lock.
func (d *Detector) run(l *lanes) error {
	d.mu.RLock()
	defer d.mu.RUnlock()
	if d.sess == nil {
		return ErrClosed
	}
	return l.run(d.sess)
}

// lanes are the tensors of one model run over B independent streams
// (lanes) in lockstep: input [B, context+window] (each lane's context, then
// its new samples), state [2, B, 128] carried from run to run. The tensors
// wrap Go memory owned by lanes alone, so runs of different lanes values
// share nothing mutable. Two state tensors alternate as input and output.
type lanes struct {
	b, window, context int
	input              *ort.Tensor[float32]
	sr                 *ort.Scalar[int64]
	out                *ort.Tensor[float32]
	state              [2]*ort.Tensor[float32]
	cur                int // state[cur] is the next run's input
	ins, outs          [2][]ort.Value
}

func newLanes(b, sampleRate int) (*lanes, error) {
	win, ctx, err := Window(sampleRate)
	if err != nil {
		return nil, err
	}
	l := &lanes{b: b, window: win, context: ctx}
	ok := false
	defer func() {
		if !ok {
			l.destroy()
		}
	}()
	if l.input, err = ort.NewTensor(ort.NewShape(int64(b), int64(ctx+win)), make([]float32, b*(ctx+win))); err != nil {
		return nil, err
	}
	if l.sr, err = ort.NewScalar(int64(sampleRate)); err != nil {
		return nil, err
	}
	if l.out, err = ort.NewTensor(ort.NewShape(int64(b), 1), make([]float32, b)); err != nil {
		return nil, err
	}
	for i := range l.state {
		if l.state[i], err = ort.NewTensor(ort.NewShape(2, int64(b), stateSize), make([]float32, 2*b*stateSize)); err != nil {
			return nil, err
		}
	}
	for i := range 2 {
		l.ins[i] = []ort.Value{l.input, l.state[i], l.sr}
		l.outs[i] = []ort.Value{l.out, l.state[1-i]}
	}
	ok = true
	return l, nil
}

// samples returns lane k's slot for its next window's new samples.
func (l *lanes) samples(k int) []float32 {
	row := l.input.GetData()[k*(l.context+l.window):]
	return row[l.context : l.context+l.window]
}

// run runs the model and moves each lane's last context samples to the
// front of its row for the next run (Silero: self._context = x[..., -context_size:]).
func (l *lanes) run(sess *ort.DynamicAdvancedSession) error {
	if err := sess.Run(l.ins[l.cur], l.outs[l.cur]); err != nil {
		return fmt.Errorf("running Silero VAD: %w", err)
	}
	l.cur = 1 - l.cur
	in, n := l.input.GetData(), l.context+l.window
	for k := range l.b {
		row := in[k*n : (k+1)*n]
		copy(row[:l.context], row[l.window:])
	}
	for k, p := range l.out.GetData() {
		if math.IsNaN(float64(p)) || p < 0 || p > 1 {
			return fmt.Errorf("Silero VAD gave probability %v for lane %d; want a value in [0, 1]", p, k)
		}
	}
	return nil
}

// probs are the last run's probabilities, one per lane.
func (l *lanes) probs() []float32 { return l.out.GetData() }

// reset zeroes the state and the context (a new stream).
func (l *lanes) reset() {
	clear(l.input.GetData())
	clear(l.state[l.cur].GetData())
}

func (l *lanes) destroy() {
	for _, v := range []ort.Value{l.input, l.sr, l.out, l.state[0], l.state[1]} {
		if v != nil && !isNilValue(v) {
			_ = v.Destroy()
		}
	}
}

func isNilValue(v ort.Value) bool {
	switch t := v.(type) {
	case *ort.Tensor[float32]:
		return t == nil
	case *ort.Scalar[int64]:
		return t == nil
	}
	return false
}
