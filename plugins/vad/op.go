package vad

import (
	"context"
	"errors"
	"fmt"
	"math"
	"path/filepath"
	"sync"
	"time"

	"github.com/edgespeech/edge/runtime"
)

// OpName is the registered op's name.
const OpName = "vad"

func init() {
	runtime.Register(runtime.OpSpec{
		Name: OpName,
		Doc: "Voice activity detection with Silero VAD v5 (ONNX Runtime): a speech probability per 32 ms window " +
			"and speech segments by Silero's get_speech_timestamps rules. By default each run is whole clips; " +
			"with stream=true each run feeds the next chunk of B streams whose state the op keeps between runs " +
			"(final=true ends them). Op instances share one session per model, so many streams run at once.",
		Inputs: []runtime.TensorSpec{
			{Name: "pcm", DTypes: []runtime.DType{runtime.F32}, Dims: []string{"B", "N"}, BatchOptional: true,
				Doc: "mono audio in [-1,1] at sample_rate (8000 or 16000 Hz)"},
			{Name: "lengths", DTypes: []runtime.DType{runtime.I64}, Dims: []string{"B"}, Optional: true, Host: true,
				Doc: "valid samples per item (whole clips only), each at least one window; all N when absent"},
			{Name: "final", DTypes: []runtime.DType{runtime.Bool}, Dims: []string{"1"}, Optional: true, Host: true,
				Doc: "stream=true: this chunk ends the streams (the tail is zero-padded, open speech ends; the next run starts new streams)"},
		},
		Outputs: []runtime.TensorSpec{
			{Name: "probs", DTypes: []runtime.DType{runtime.F32}, Dims: []string{"B", "W"}, Host: true,
				Doc: "speech probability per window of 512 samples (256 at 8 kHz), the last zero-padded; -1 past an item's windows. stream=true: the windows this run completed"},
			{Name: "segments", DTypes: []runtime.DType{runtime.F64}, Dims: []string{"B", "S", "2"}, Host: true,
				Doc: "speech segments as [start, end) seconds from the start of the clip (stream), rows past num_segments -1. stream=true: those final in this run"},
			{Name: "num_segments", DTypes: []runtime.DType{runtime.I64}, Dims: []string{"B"}, Host: true,
				Doc: "segments per item"},
			{Name: "speech_start", DTypes: []runtime.DType{runtime.F64}, Dims: []string{"B"}, Host: true,
				Doc: "stream=true: the start (seconds) of speech begun and not yet ended, else -1; always -1 for whole clips"},
		},
		Params: []runtime.ParamSpec{
			{Name: "model", Kind: runtime.String, Doc: "Silero VAD v5 .onnx; default $" + EnvModel + ", then the cache of " + FetchCommand},
			{Name: "ort_lib", Kind: runtime.String, Doc: "ONNX Runtime shared library; default $EDGE_ORT_LIB, then the cache of scripts/fetch-ort.sh"},
			{Name: "threads", Kind: runtime.Int, Default: 1, Doc: "ONNX Runtime intra-op threads per window"},
			{Name: "sample_rate", Kind: runtime.Int, Default: Rate16k, Doc: "sample rate of pcm: 16000 or 8000"},
			{Name: "threshold", Kind: runtime.Float, Default: 0.5, Doc: "speech when the probability is >= threshold (Silero threshold)"},
			{Name: "neg_threshold", Kind: runtime.Float, Doc: "in speech, silence when the probability is below this; default max(threshold-0.15, 0.01)"},
			{Name: "min_speech_ms", Kind: runtime.Int, Default: 250, Doc: "drop speech no longer than this (Silero min_speech_duration_ms)"},
			{Name: "min_silence_ms", Kind: runtime.Int, Default: 100, Doc: "speech ends after this much silence (Silero min_silence_duration_ms)"},
			{Name: "speech_pad_ms", Kind: runtime.Int, Default: 30, Doc: "pad segments by this on each side, or half the gap when closer than twice it (Silero speech_pad_ms)"},
			{Name: "max_speech_s", Kind: runtime.Float, Doc: "split speech longer than this (Silero max_speech_duration_s); default no limit"},
			{Name: "min_silence_at_max_speech_ms", Kind: runtime.Int, Default: 98, Doc: "pauses longer than this are split points of too-long speech (Silero min_silence_at_max_speech)"},
			{Name: "split_at_longest_pause", Kind: runtime.Boolean, Default: true, Doc: "split too-long speech at its longest pause; false: Silero's legacy rule (use_max_poss_sil_at_max_speech)"},
			{Name: "stream", Kind: runtime.Boolean, Default: false, Doc: "keep the streams' state between runs: each run is the next chunk"},
		},
		New: newOp,
	})
}

// RulesFromParams reads the vad op's rule parameters.
func RulesFromParams(p runtime.Params) (Rules, error) {
	ms := func(name string) (time.Duration, error) {
		v := p.Int(name)
		if v < 0 {
			return 0, fmt.Errorf("parameter %s = %d is negative", name, v)
		}
		return time.Duration(v) * time.Millisecond, nil
	}
	r := Rules{Threshold: p.Float("threshold"), SplitAtLongestPause: p.Bool("split_at_longest_pause")}
	var err error
	for _, f := range []struct {
		name string
		dst  *time.Duration
	}{{"min_speech_ms", &r.MinSpeech}, {"min_silence_ms", &r.MinSilence}, {"speech_pad_ms", &r.SpeechPad},
		{"min_silence_at_max_speech_ms", &r.MinSilenceAtMaxSpeech}} {
		if *f.dst, err = ms(f.name); err != nil {
			return Rules{}, err
		}
	}
	if !p.IsNil("neg_threshold") {
		if r.NegThreshold = p.Float("neg_threshold"); r.NegThreshold == 0 {
			return Rules{}, errors.New("parameter neg_threshold = 0: leave it unset for Silero's default, or give a value in (0, threshold]")
		}
	}
	if !p.IsNil("max_speech_s") {
		s := p.Float("max_speech_s")
		if !(s > 0) || math.IsInf(s, 0) || s > 1e6 {
			return Rules{}, fmt.Errorf("parameter max_speech_s = %v: want a positive number of seconds (unset: no limit)", s)
		}
		r.MaxSpeech = time.Duration(s * float64(time.Second))
	}
	return r, r.Validate()
}

// vadOp is one op instance: rules, a shared Detector and, with stream=true,
// the batch of streams it feeds.
type vadOp struct {
	mu         sync.Mutex
	d          *Detector
	release    func()
	rules      Rules
	sampleRate int
	stream     bool
	batch      *batch    // stream=true, after the first run
	started    []float64 // stream=true: speech_start per lane
	closed     bool
}

func newOp(p runtime.Params, b runtime.Backend) (runtime.Op, error) {
	if b.Name() != "cpu" {
		return nil, fmt.Errorf("no %s implementation of the vad op (ONNX Runtime runs it on the CPU); use the cpu backend", b.Name())
	}
	rules, err := RulesFromParams(p)
	if err != nil {
		return nil, err
	}
	sr := p.Int("sample_rate")
	if _, _, err := Window(sr); err != nil {
		return nil, err
	}
	d, release, err := sharedDetector(p.Str("model"), p.Str("ort_lib"), p.Int("threads"))
	if err != nil {
		return nil, err
	}
	return &vadOp{d: d, release: release, rules: rules, sampleRate: sr, stream: p.Bool("stream")}, nil
}

// Close releases the op's streams and its share of the session.
func (o *vadOp) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil
	}
	o.closed = true
	if o.batch != nil {
		o.batch.close()
	}
	o.release()
	return nil
}

func (o *vadOp) Run(ctx context.Context, in runtime.Tensors) (runtime.Tensors, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.closed {
		return nil, ErrClosed
	}
	x := in["pcm"]
	shape := x.Shape()
	bsz, n := 1, shape[len(shape)-1]
	if len(shape) == 2 {
		bsz = shape[0]
	}
	if bsz == 0 {
		return nil, fmt.Errorf("input \"pcm\" has shape %v: no items", shape)
	}
	data := x.F32()
	items := make([][]float32, bsz)
	for k := range items {
		items[k] = data[k*n : (k+1)*n]
	}
	if o.stream {
		if in["lengths"] != nil {
			return nil, errors.New("input \"lengths\" is for whole clips; with stream=true every stream gets the whole chunk")
		}
		final := false
		if f := in["final"]; f != nil {
			if f.Shape().NumElements() != 1 {
				return nil, fmt.Errorf("input \"final\" is %v, want bool [1]", f)
			}
			final = f.Bools()[0]
		}
		return o.runStream(ctx, items, final)
	}
	if in["final"] != nil {
		return nil, errors.New("input \"final\" is for stream=true")
	}
	if l := in["lengths"]; l != nil {
		if l.Rank() != 1 || l.Shape()[0] != bsz {
			return nil, fmt.Errorf("input \"lengths\" is %v, want i64 [%d] (one length per item)", l, bsz)
		}
		for k, v := range l.I64() {
			if v < 0 || v > int64(n) {
				return nil, fmt.Errorf("input \"lengths\"[%d] = %d is outside 0..%d (the samples per item)", k, v, n)
			}
			items[k] = items[k][:v]
		}
	}
	return o.runClips(ctx, items)
}

func (o *vadOp) runClips(ctx context.Context, items [][]float32) (runtime.Tensors, error) {
	res, err := o.d.detectBatch(ctx, items, o.sampleRate, o.rules, "item")
	if err != nil {
		return nil, err
	}
	probs, segs := make([][]float32, len(items)), make([][]Segment, len(items))
	started := make([]float64, len(items))
	for k, r := range res {
		probs[k], segs[k], started[k] = r.Probs, r.Segments, -1
	}
	return o.outputs(probs, segs, started)
}

func (o *vadOp) runStream(ctx context.Context, items [][]float32, final bool) (runtime.Tensors, error) {
	if o.batch == nil {
		b, err := o.d.newBatch(len(items), o.sampleRate, o.rules)
		if err != nil {
			return nil, err
		}
		o.batch, o.started = b, make([]float64, len(items))
		for k := range o.started {
			o.started[k] = -1
		}
	}
	if len(items) != o.batch.lanes.b {
		return nil, fmt.Errorf("input \"pcm\" has %d streams; this op's streams are %d (fixed by its first run)", len(items), o.batch.lanes.b)
	}
	probs, events, err := o.batch.feed(ctx, items)
	if err != nil {
		return nil, err
	}
	if final {
		p, ev, err := o.batch.flush(ctx)
		if err != nil {
			return nil, err
		}
		for k := range probs {
			probs[k] = append(probs[k], p[k]...)
			events[k] = append(events[k], ev[k]...)
		}
	}
	segs := make([][]Segment, len(items))
	for k, evs := range events {
		for _, e := range evs {
			switch e.Kind {
			case SpeechStart:
				o.started[k], _ = e.Segment.Seconds(o.sampleRate)
			case SpeechEnd:
				segs[k] = append(segs[k], e.Segment)
				o.started[k] = -1
			case SpeechDropped:
				o.started[k] = -1
			}
		}
	}
	out, err := o.outputs(probs, segs, o.started)
	if final {
		for k := range o.started {
			o.started[k] = -1
		}
	}
	return out, err
}

// outputs packs per-item probabilities and segments, padded with -1.
func (o *vadOp) outputs(probs [][]float32, segs [][]Segment, started []float64) (runtime.Tensors, error) {
	b := len(probs)
	w, s := 0, 0
	for k := range probs {
		w, s = max(w, len(probs[k])), max(s, len(segs[k]))
	}
	pt, err := runtime.NewTensor(runtime.F32, runtime.Shape{b, w})
	if err != nil {
		return nil, err
	}
	st, err := runtime.NewTensor(runtime.F64, runtime.Shape{b, s, 2})
	if err != nil {
		return nil, err
	}
	nt, err := runtime.NewTensor(runtime.I64, runtime.Shape{b})
	if err != nil {
		return nil, err
	}
	ss, err := runtime.FromSlice(runtime.F64, runtime.Shape{b}, append([]float64(nil), started...))
	if err != nil {
		return nil, err
	}
	pd, sd, nd := pt.F32(), st.F64(), nt.I64()
	for i := range pd {
		pd[i] = -1
	}
	for i := range sd {
		sd[i] = -1
	}
	for k := range probs {
		copy(pd[k*w:], probs[k])
		for j, g := range segs[k] {
			sd[(k*s+j)*2], sd[(k*s+j)*2+1] = g.Seconds(o.sampleRate)
		}
		nd[k] = int64(len(segs[k]))
	}
	return runtime.Tensors{"probs": pt, "segments": st, "num_segments": nt, "speech_start": ss}, nil
}

// clips runs whole clips of different lengths in lockstep, one lane each:
// lane k stops counting after ceil(len/window) windows (its last one
// zero-padded; the lanes run on, on zeros, and their results are ignored).
func (b *batch) clips(ctx context.Context, items [][]float32) ([][]float32, [][]Segment, error) {
	win := b.lanes.window
	windows := make([]int, len(items))
	most := 0
	probs := make([][]float32, len(items))
	for k, x := range items {
		windows[k] = (len(x) + win - 1) / win
		most = max(most, windows[k])
		probs[k] = make([]float32, 0, windows[k])
	}
	segs := make([][]Segment, len(items))
	collect := func(k int) {
		for _, e := range b.segs[k].takeEvents() {
			if e.Kind == SpeechEnd {
				segs[k] = append(segs[k], e.Segment)
			}
		}
	}
	for w := range most {
		if w%1024 == 1023 {
			if err := ctx.Err(); err != nil {
				return nil, nil, err
			}
		}
		for k, x := range items {
			slot := b.lanes.samples(k)
			lo := min(w*win, len(x))
			m := copy(slot, x[lo:min(lo+win, len(x))])
			clear(slot[m:])
		}
		if err := b.d.run(b.lanes); err != nil {
			return nil, nil, err
		}
		for k, p := range b.lanes.probs() {
			if w < windows[k] {
				probs[k] = append(probs[k], p)
				b.segs[k].step(p, (w+1)*win <= len(items[k]))
				collect(k)
			}
		}
	}
	for k, x := range items {
		b.segs[k].finish(len(x))
		collect(k)
	}
	return probs, segs, nil
}

// Sessions shared by op instances: one Detector per (model, library,
// threads), closed when its last op instance is.
var shared struct {
	sync.Mutex
	m map[string]*sharedEntry
}

type sharedEntry struct {
	d    *Detector
	refs int
}

func sharedDetector(model, library string, threads int) (*Detector, func(), error) {
	path, err := FindModel(model)
	if err != nil {
		return nil, nil, err
	}
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	key := fmt.Sprintf("%s\x00%s\x00%d", path, library, threads)
	shared.Lock()
	defer shared.Unlock()
	e := shared.m[key]
	if e == nil {
		d, err := Open(Options{Model: path, Library: library, Threads: threads})
		if err != nil {
			return nil, nil, err
		}
		e = &sharedEntry{d: d}
		if shared.m == nil {
			shared.m = map[string]*sharedEntry{}
		}
		shared.m[key] = e
	}
	e.refs++
	var once sync.Once
	return e.d, func() {
		once.Do(func() {
			shared.Lock()
			defer shared.Unlock()
			if e.refs--; e.refs == 0 {
				delete(shared.m, key)
				_ = e.d.Close()
			}
		})
	}, nil
}
