package vad

import (
	"context"
	"fmt"
)

// Stream is the state of one audio stream: the model's recurrent state and
// context, the samples of an unfinished window, and the segmentation
// state. Feed audio in chunks of any size (a chunk need not be a whole
// window); the probabilities, events and segments come out exactly as
// Detect gives them for the concatenated audio. A Stream is for one
// goroutine at a time; distinct Streams of one Detector run concurrently.
type Stream struct {
	sampleRate int
	batch      *batch
}

// NewStream starts a stream of audio at sampleRate (8 or 16 kHz) segmented
// with the Detector's rules. Close it to release its tensors.
func (d *Detector) NewStream(sampleRate int) (*Stream, error) {
	return d.newStream(sampleRate, d.rules)
}

// NewStreamWith starts a stream segmented with other rules than the
// Detector's (an endpointer waiting longer for silence, say); the session
// is still the Detector's. It fails on invalid rules.
func (d *Detector) NewStreamWith(sampleRate int, rules Rules) (*Stream, error) {
	return d.newStream(sampleRate, rules)
}

func (d *Detector) newStream(sampleRate int, rules Rules) (*Stream, error) {
	b, err := d.newBatch(1, sampleRate, rules)
	if err != nil {
		return nil, err
	}
	return &Stream{sampleRate: sampleRate, batch: b}, nil
}

// SampleRate is the stream's sample rate.
func (s *Stream) SampleRate() int { return s.sampleRate }

// Window is the number of samples per probability.
func (s *Stream) Window() int { return s.batch.lanes.window }

// Position is the number of samples fed since the stream (re)started.
func (s *Stream) Position() int { return s.batch.fed }

// InSpeech reports whether the rules are in speech: a SpeechStart was
// decided (reported, or waiting for the previous segment's SpeechEnd) and
// neither its SpeechEnd nor a SpeechDropped yet.
func (s *Stream) InSpeech() bool { return s.batch.segs[0].hasStart }

// Feed consumes the next samples of the stream (mono, in [-1, 1]) and
// returns the probabilities of the windows it completed (none while less
// than a window is buffered) and the events the rules decided. Both slices
// are the caller's. A NaN or an infinity is an error wrapping ErrNonFinite
// and consumes nothing; so does a context that is already done. Any other
// error (the context ending mid-chunk, the model failing, ErrClosed)
// leaves the stream failed: later calls return it until Reset.
func (s *Stream) Feed(ctx context.Context, pcm []float32) ([]float32, []Event, error) {
	probs, events, err := s.batch.feed(ctx, [][]float32{pcm})
	if err != nil {
		return nil, nil, err
	}
	return probs[0], events[0], nil
}

// Flush ends the stream: the buffered samples become a last window,
// zero-padded as Silero pads a clip's last window, and the speech still
// open ends at the end of the audio (or is dropped as too short). It
// returns that window's probability (none when nothing was buffered) and
// the last events; then the stream starts over at sample 0 with a fresh
// state, as after Reset.
func (s *Stream) Flush(ctx context.Context) ([]float32, []Event, error) {
	probs, events, err := s.batch.flush(ctx)
	if err != nil {
		return nil, nil, err
	}
	return probs[0], events[0], nil
}

// Reset discards everything fed and starts over at sample 0 with a fresh
// state; it also clears a failure.
func (s *Stream) Reset() { s.batch.reset() }

// Close releases the stream's tensors; later calls fail with ErrClosed.
func (s *Stream) Close() error {
	s.batch.close()
	return nil
}

// batch is B streams fed in lockstep (each call gives every lane the same
// number of samples), run together: one model run per window for all
// lanes. A Stream is a batch of one; the vad op runs B.
type batch struct {
	d       *Detector
	lanes   *lanes
	segs    []*segmenter
	pending int // samples of the unfinished window, in each lane's slot
	fed     int // samples fed to each lane
	err     error
	closed  bool
}

func (d *Detector) newBatch(b, sampleRate int, rules Rules) (*batch, error) {
	if err := rules.Validate(); err != nil {
		return nil, err
	}
	win, _, err := Window(sampleRate)
	if err != nil {
		return nil, err
	}
	d.mu.RLock()
	closed := d.sess == nil
	d.mu.RUnlock()
	if closed {
		return nil, ErrClosed
	}
	l, err := newLanes(b, sampleRate)
	if err != nil {
		return nil, err
	}
	bt := &batch{d: d, lanes: l, segs: make([]*segmenter, b)}
	for i := range bt.segs {
		bt.segs[i] = newSegmenter(rules, sampleRate, win)
	}
	return bt, nil
}

func (b *batch) usable(ctx context.Context) error {
	switch {
	case b.closed:
		return ErrClosed
	case b.err != nil:
		return fmt.Errorf("vad: stream failed earlier (Reset it): %w", b.err)
	}
	return ctx.Err()
}

// feed gives lane k the samples pcm[k]; every lane gets as many.
func (b *batch) feed(ctx context.Context, pcm [][]float32) ([][]float32, [][]Event, error) {
	if err := b.usable(ctx); err != nil {
		return nil, nil, err
	}
	if len(pcm) != b.lanes.b {
		return nil, nil, fmt.Errorf("vad: %d lanes of samples for a batch of %d", len(pcm), b.lanes.b)
	}
	n := len(pcm[0])
	for k, x := range pcm {
		if len(x) != n {
			return nil, nil, fmt.Errorf("vad: lane %d has %d samples, lane 0 %d; every lane takes as many", k, len(x), n)
		}
		if i, ok := firstNonFinite(x); ok {
			return nil, nil, fmt.Errorf("%w: sample %d is %v (lane %d)", ErrNonFinite, b.fed+i, x[i], k)
		}
	}
	win := b.lanes.window
	probs := make([][]float32, b.lanes.b)
	for k := range probs {
		probs[k] = make([]float32, 0, (b.pending+n)/win)
	}
	for off := 0; off < n; {
		m := min(win-b.pending, n-off)
		for k, x := range pcm {
			copy(b.lanes.samples(k)[b.pending:], x[off:off+m])
		}
		b.pending += m
		off += m
		if b.pending < win {
			break
		}
		if err := b.window(ctx, probs, true); err != nil {
			return nil, nil, err
		}
		b.pending = 0
	}
	b.fed += n
	return probs, b.events(), nil
}

// window runs the model on the lanes' current windows and steps the
// segmenters. Every 1024th window (32 s of audio) checks the context.
func (b *batch) window(ctx context.Context, probs [][]float32, full bool) error {
	if b.segs[0].i%1024 == 1023 {
		if err := ctx.Err(); err != nil {
			b.err = err
			return err
		}
	}
	if err := b.d.run(b.lanes); err != nil {
		b.err = err
		return err
	}
	for k, p := range b.lanes.probs() {
		probs[k] = append(probs[k], p)
		b.segs[k].step(p, full)
	}
	return nil
}

func (b *batch) flush(ctx context.Context) ([][]float32, [][]Event, error) {
	if err := b.usable(ctx); err != nil {
		return nil, nil, err
	}
	probs := make([][]float32, b.lanes.b)
	if b.pending > 0 {
		for k := range probs {
			clear(b.lanes.samples(k)[b.pending:])
		}
		if err := b.window(ctx, probs, false); err != nil {
			return nil, nil, err
		}
	}
	for _, g := range b.segs {
		g.finish(b.fed)
	}
	events := b.events()
	b.reset()
	return probs, events, nil
}

func (b *batch) events() [][]Event {
	out := make([][]Event, len(b.segs))
	for k, g := range b.segs {
		out[k] = g.takeEvents()
	}
	return out
}

func (b *batch) reset() {
	if b.closed {
		return
	}
	b.lanes.reset()
	for _, g := range b.segs {
		g.reset()
	}
	b.pending, b.fed, b.err = 0, 0, nil
}

func (b *batch) close() {
	if !b.closed {
		b.lanes.destroy()
		b.closed = true
	}
}

// firstNonFinite returns the index of the first NaN or infinity in x.
func firstNonFinite(x []float32) (int, bool) {
	for i, v := range x {
		if v-v != 0 { // NaN - NaN and Inf - Inf are NaN
			return i, true
		}
	}
	return 0, false
}
