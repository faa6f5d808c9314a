package asr

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/edgespeech/edge/asr/transcript"
	"github.com/edgespeech/edge/plugins/dpx"
)

// StreamOptions configures a Stream. Zero fields take the defaults; every
// duration is rounded to whole encoder frames.
type StreamOptions struct {
	// Chunk is the new audio each encoder step adds (default 480 ms):
	// partial results come once a chunk.
	Chunk time.Duration
	// Left is the audio before the chunk encoded with it as context
	// (default 4 s).
	Left time.Duration
	// LookAhead is the audio after the chunk encoded with it (default
	// 480 ms): a chunk is encoded once its look-ahead has arrived, so a
	// partial trails the audio by Chunk + LookAhead at most, plus the
	// encoder's time.
	LookAhead time.Duration
	// Endpointing, as sherpa-onnx's rules (a frame is silent when its best
	// label is the CTC blank): an utterance ends after TrailingSilence of
	// silence once it decoded a token (default 1.2 s), is dropped unheard
	// after SilenceOnly of silence with nothing decoded (default 2.4 s), and
	// is cut at MaxUtterance (default 20 s).
	TrailingSilence, SilenceOnly, MaxUtterance time.Duration
	// FinalPad is the audio kept before an utterance's first decoded token
	// and after its last when the utterance is recognised for its final
	// (default 300 ms): models trained on tightly cut speech decode worse
	// with long silences around it.
	FinalPad time.Duration
}

func (o StreamOptions) withDefaults() StreamOptions {
	def := func(d *time.Duration, v time.Duration) {
		if *d == 0 {
			*d = v
		}
	}
	def(&o.Chunk, 480*time.Millisecond)
	def(&o.Left, 4*time.Second)
	def(&o.LookAhead, 480*time.Millisecond)
	def(&o.TrailingSilence, 1200*time.Millisecond)
	def(&o.SilenceOnly, 2400*time.Millisecond)
	def(&o.MaxUtterance, 20*time.Second)
	def(&o.FinalPad, 300*time.Millisecond)
	return o
}

// StreamResult is a hypothesis for one utterance of a stream. Partials
// (Final false) are the greedy decoding of the utterance's stitched chunk
// emissions so far and are replaced by the next result of the same
// Utterance; the final one is Transcribe of the utterance's audio, so its
// words are what offline recognition of that stretch gives.
// Times (the transcript's words and tokens, Start, End) are relative to the
// start of the stream.
type StreamResult struct {
	Final bool
	// Utterance numbers the stream's utterances from 0.
	Utterance int
	// Start and End delimit the audio the utterance covers so far.
	Start, End time.Duration
	*transcript.Transcript
}

// Stream recognises audio that arrives in pieces (a microphone, a socket)
// by buffered inference: each step encodes Left context + one Chunk + the
// LookAhead and keeps the chunk's emissions, so any offline CTC model
// streams; the emissions of an utterance are stitched for its partials and
// the endpoint rules until an endpoint, when the utterance's audio is
// recognised as a whole for its final. Per-utterance feature normalisation
// (Parakeet's per-feature statistics) is computed over each step's window,
// as NeMo's buffered inference does, so partials differ from the offline
// decoding more than finals do. A stream holds at most Left + MaxUtterance
// + LookAhead of audio.
//
// A Stream is used by one goroutine at a time; many streams may run at once
// on one Recognizer.
type Stream struct {
	r        *Recognizer
	opt      StreamOptions
	chunk    int // samples per step, a multiple of the frame stride
	left     int // samples of left context
	ahead    int // samples of look-ahead
	audio    []float32
	base     int       // stream sample index of audio[0]
	done     int       // samples whose emissions are kept
	utt      int       // sample where the current utterance starts
	lp       []float32 // its emissions [frames, V], frames from utt to done
	n        int       // utterances ended so far
	lastText string    // the last partial's text, so unchanged partials are not repeated
	closed   bool
}

// NewStream starts a stream of mono audio at the model's sample rate.
func (r *Recognizer) NewStream(opt StreamOptions) (*Stream, error) {
	opt = opt.withDefaults()
	frames := func(name string, d time.Duration, min int) (int, error) {
		n := int(math.Round(d.Seconds() * float64(r.manifest.SampleRate) / float64(r.stride)))
		if d < 0 || n < min {
			return 0, fmt.Errorf("stream option %s %v: want at least %d encoder frames of %v", name, d, min, r.seconds(r.stride))
		}
		return n * r.stride, nil
	}
	s := &Stream{r: r, opt: opt}
	var err error
	if s.chunk, err = frames("Chunk", opt.Chunk, 1); err != nil {
		return nil, err
	}
	if s.left, err = frames("Left", opt.Left, 0); err != nil {
		return nil, err
	}
	if s.ahead, err = frames("LookAhead", opt.LookAhead, 0); err != nil {
		return nil, err
	}
	if s.chunk+s.left+s.ahead < 4*r.stride {
		return nil, fmt.Errorf("stream window %v is shorter than the 4 encoder frames the model needs", r.seconds(s.chunk+s.left+s.ahead))
	}
	if opt.TrailingSilence <= 0 || opt.SilenceOnly <= 0 || opt.MaxUtterance < opt.Chunk || opt.FinalPad < 0 {
		return nil, fmt.Errorf("stream endpoint rules %v / %v / max %v: want positive silences and a maximum of at least one chunk", opt.TrailingSilence, opt.SilenceOnly, opt.MaxUtterance)
	}
	return s, nil
}

// ErrStreamClosed is returned by Write and Close after Close.
var ErrStreamClosed = errors.New("asr: stream is closed")

// Write appends pcm (any length, mono at the model's sample rate; it is
// copied) and returns the results its complete chunks gave, in order.
func (s *Stream) Write(ctx context.Context, pcm []float32) ([]StreamResult, error) {
	if s.closed {
		return nil, ErrStreamClosed
	}
	for i, v := range pcm {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, fmt.Errorf("asr: stream sample %d is %v", s.base+len(s.audio)+i, v)
		}
	}
	s.audio = append(s.audio, pcm...)
	var out []StreamResult
	for s.base+len(s.audio) >= s.done+s.chunk+s.ahead {
		res, err := s.step(ctx, s.done+s.chunk, s.done+s.chunk+s.ahead)
		if err != nil {
			return out, err
		}
		out = append(out, res...)
	}
	return out, nil
}

// Close encodes what is left (without look-ahead), ends the last utterance
// and returns its results. The stream cannot be written afterwards.
func (s *Stream) Close(ctx context.Context) ([]StreamResult, error) {
	if s.closed {
		return nil, ErrStreamClosed
	}
	s.closed = true
	end := s.base + len(s.audio)
	var out []StreamResult
	if end > s.done {
		keep := s.done + (end-s.done)/s.r.stride*s.r.stride
		if keep > s.done {
			res, err := s.step(ctx, keep, end)
			if err != nil {
				return nil, err
			}
			out = append(out, res...)
		}
	}
	if res, ok, err := s.final(ctx); err != nil {
		return out, err
	} else if ok {
		out = append(out, res)
	}
	s.audio, s.lp = nil, nil
	return out, nil
}

// step encodes the window [done-left, end) (clipped to the audio held),
// appends the emissions of [done, keep) to the utterance and applies the
// endpoint rules.
func (s *Stream) step(ctx context.Context, keep, end int) ([]StreamResult, error) {
	r, V := s.r, s.r.manifest.Vocab.Len()
	start := max(s.base, s.done-s.left)
	if end-start < 4*r.stride { // a very short stream: pad its window with silence
		start = max(s.base, end-4*r.stride)
	}
	window := s.audio[start-s.base : end-s.base]
	if len(window) < 4*r.stride {
		window = append(make([]float32, 0, 4*r.stride), window...)
		window = window[:4*r.stride]
	}
	c := r.begin(ctx, window)
	lp, T, err := r.hostEmissions(ctx, c, window)
	r.end(c)
	if err != nil {
		return nil, fmt.Errorf("asr: stream audio %v-%v: %w", r.seconds(start), r.seconds(end), err)
	}
	lo, hi := (s.done-start)/r.stride, (keep-start)/r.stride
	if hi > T {
		return nil, fmt.Errorf("asr: stream: the encoder gave %d frames for %v of audio; the kept chunk needs %d (the model's frame_stride does not match its output)", T, r.seconds(len(window)), hi)
	}
	s.lp = append(s.lp, lp[lo*V:hi*V]...)
	s.done = keep
	s.trim()
	return s.endpoint(ctx)
}

// trim drops the audio that neither the next window nor the current
// utterance's final needs.
func (s *Stream) trim() {
	if drop := min(s.done-s.left, s.utt) - s.base; drop > 0 {
		s.audio = append(s.audio[:0], s.audio[drop:]...)
		s.base += drop
	}
}

// endpoint applies the rules to the utterance so far: a final, a drop, or a
// partial when its text changed.
func (s *Stream) endpoint(ctx context.Context) ([]StreamResult, error) {
	r, V := s.r, s.r.manifest.Vocab.Len()
	spans, err := dpx.Greedy(nil, s.lp, V, r.manifest.BlankID)
	if err != nil {
		return nil, fmt.Errorf("asr: stream: %w", err)
	}
	frames := len(s.lp) / V
	trailing := frames
	if len(spans) > 0 {
		trailing = frames - int(spans[len(spans)-1].End)
	}
	perFrame := time.Duration(r.stride) * time.Second / time.Duration(r.manifest.SampleRate)
	switch {
	case len(spans) == 0 && time.Duration(trailing)*perFrame >= s.opt.SilenceOnly:
		s.utt, s.lp = s.done, s.lp[:0] // silence only: nothing to report
		s.trim()
		return nil, nil
	case len(spans) > 0 && time.Duration(trailing)*perFrame >= s.opt.TrailingSilence,
		time.Duration(frames)*perFrame >= s.opt.MaxUtterance:
		res, ok, err := s.final(ctx)
		if err != nil || !ok {
			return nil, err
		}
		return []StreamResult{res}, nil
	case len(spans) == 0:
		return nil, nil
	}
	tr, err := transcript.FromSpans(spans, s.lp, V, r.words)
	if err != nil {
		return nil, fmt.Errorf("asr: stream: %w", err)
	}
	if tr.Text == s.lastText {
		return nil, nil
	}
	s.lastText = tr.Text
	return []StreamResult{s.result(false, tr)}, nil
}

// final recognises the utterance's audio and starts the next utterance; ok
// is false when it decoded nothing.
func (s *Stream) final(ctx context.Context) (res StreamResult, ok bool, err error) {
	r := s.r
	defer func() {
		s.utt, s.lp, s.lastText = s.done, s.lp[:0], ""
		s.trim()
	}()
	V := r.manifest.Vocab.Len()
	spans, err := dpx.Greedy(nil, s.lp, V, r.manifest.BlankID)
	if err != nil || len(spans) == 0 {
		return res, false, err
	}
	// The utterance is the audio from its first decoded token to its last,
	// with FinalPad on either side.
	pad := int(s.opt.FinalPad.Seconds()*float64(r.manifest.SampleRate)) / r.stride * r.stride
	from := max(s.base, s.utt+int(spans[0].Start)*r.stride-pad)
	to := min(s.done, s.utt+int(spans[len(spans)-1].End)*r.stride+pad)
	pcm := s.audio[from-s.base : to-s.base]
	if len(pcm) < 4*r.stride {
		pcm = append(make([]float32, 0, 4*r.stride), pcm...)[:4*r.stride]
	}
	tr, err := r.Transcribe(ctx, pcm)
	if err != nil {
		return res, false, fmt.Errorf("asr: stream audio %v-%v: %w", r.seconds(from), r.seconds(to), err)
	}
	if len(tr.Tokens) == 0 {
		return res, false, nil
	}
	s.utt = from
	res = s.result(true, tr)
	s.n++
	return res, true, nil
}

// result shifts tr's times from the utterance to the stream.
func (s *Stream) result(final bool, tr *transcript.Transcript) StreamResult {
	off := s.r.seconds(s.utt)
	for i := range tr.Words {
		tr.Words[i].Start += off
		tr.Words[i].End += off
	}
	for i := range tr.Tokens {
		tr.Tokens[i].Start += off
		tr.Tokens[i].End += off
	}
	return StreamResult{Final: final, Utterance: s.n, Start: off, End: s.r.seconds(s.done), Transcript: tr}
}
