package asr

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/edgespeech/edge/asr/transcript"
	"github.com/edgespeech/edge/plugins/dpx"
	"github.com/edgespeech/edge/plugins/fbank"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/model"
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
	// Encoder, when set, is a stateful streaming encoder that replaces
	// buffered inference for the partials and the endpoint rules (Left and
	// LookAhead then do not apply: its StreamGeometry says what a step
	// reads); finals stay the offline recognition of each utterance.
	Encoder StreamingEncoder
}

// StreamingEncoder is a stateful streaming encoder: each step reads a
// fixed chunk of feature frames (plus its look-ahead) and cache tensors,
// and returns the chunk's emissions and the next caches, as NeMo's
// cache-aware FastConformer exports (inputs audio_signal [1, n_mels,
// chunk], length, cache_last_channel [1, layers, cache, d_model],
// cache_last_time [1, layers, d_model, conv context], cache_last_channel_len
// [1]; outputs the log-probs and cache_*_next) and sherpa-onnx's streaming
// zipformer CTC exports (x [1, chunk + pad, n_mels] and a list of per-layer
// caches, cached_len_*, cached_avg_*, cached_key_*, ...) do.
//
// No family is implemented here: none could be checked against its
// framework on this project's machines. A family would be an
// implementation of this interface around an ONNX Runtime session whose
// manifest names its cache pairs, e.g.
//
//	encoder:
//	  streaming:
//	    chunk_frames: 16        # feature frames a step consumes
//	    look_ahead_frames: 8    # feature frames after them a step reads
//	    caches:                 # input <- output of the previous step, initial shape (zeros)
//	      - {in: cache_last_channel, out: cache_last_channel_next, shape: [1, 17, 70, 512]}
//	      - {in: cache_last_time, out: cache_last_time_next, shape: [1, 17, 512, 8]}
//	      - {in: cache_last_channel_len, out: cache_last_channel_len_next, shape: [1], dtype: i64}
//
// The Stream's side of the contract:
//   - features come from the model's frontend computed once per sample
//     (fbank.Incremental): EncodeChunk gets ChunkFrames + LookAheadFrames
//     frames, time-major [frames, n_mels] (the encoder transposes to its
//     input layout), starting ChunkFrames after the previous call's; for
//     normalize none or global they are the offline features, for
//     per_feature or per_utterance frontends the log-mel values before
//     normalisation, which the encoder normalises (fbank's NormalizeWindow)
//     over whatever window it keeps;
//   - the caches of the first step are InitialCache's; each later step gets
//     exactly the caches the previous step returned, untouched, for the
//     whole stream (utterance endpoints do not reset them, as in NeMo's
//     cache-aware streaming). EncodeChunk owns the caches it is given once
//     it succeeds (it releases or reuses them); when it fails it leaves
//     them intact, so the step is retried by the next Write (a cancelled
//     context); the stream releases the last caches at Close;
//   - EncodeChunk returns OutFrames frames of log-probs [OutFrames, V],
//     the chunk's emissions, with OutFrames·frame_stride = ChunkFrames·hop;
//   - at Close the last partial chunk is padded with zero frames to a
//     whole step and only the emission frames of real audio are kept.
//
// A StreamingEncoder is used by one stream at a time.
type StreamingEncoder interface {
	StreamGeometry() StreamGeometry
	InitialCache() (runtime.Tensors, error)
	EncodeChunk(ctx context.Context, features []float32, cache runtime.Tensors) (logProbs []float32, next runtime.Tensors, err error)
}

// StreamGeometry is what one StreamingEncoder step reads and returns.
type StreamGeometry struct {
	ChunkFrames     int // feature frames a step consumes
	LookAheadFrames int // feature frames after them a step reads (consumed by later steps)
	OutFrames       int // emission frames a step returns
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
// recognised as a whole for its final. On the CPU backend without a speech
// finder the features are computed once per sample by an incremental
// frontend (fbank.Incremental) and each step encodes its window's frames;
// otherwise each step computes its window's features from its audio.
// Per-utterance feature normalisation
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

	// fb, when set, computes the features once per sample: feats holds
	// them (time-major) from stream frame fdone on, and flushed says Close
	// has taken the last ones. With a StreamingEncoder: its geometry and
	// caches.
	fb      *fbank.Incremental
	feats   []float32
	fdone   int
	flushed bool
	enc     StreamingEncoder
	geo     StreamGeometry
	cache   runtime.Tensors
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
	if opt.Encoder != nil {
		if err := s.startEncoder(); err != nil {
			return nil, err
		}
		return s, nil
	}
	// Buffered inference reads its windows' features from the stream's
	// incremental frontend where the window is encoded as a whole: on the
	// CPU backend, without a speech finder (which gates each window's audio),
	// with encoder frames of whole feature frames and a frontend that can run
	// incrementally (pad_to_seconds and out_frames are whole-clip rules).
	if !r.manifest.RawWaveform() && r.speech == nil && r.backend.Name() == runtime.CPU.Name() && !streamAudioWindows {
		if fb, err := r.incremental(); err == nil && r.stride%fb.Config().HopLength == 0 {
			s.fb = fb
		}
	}
	return s, nil
}

// streamAudioWindows makes buffered inference compute each window's
// features from its audio, as with a speech finder (benchmarks compare the
// two paths).
var streamAudioWindows = false

// incremental is an incremental frontend of the model's fbank configuration.
func (r *Recognizer) incremental() (*fbank.Incremental, error) {
	spec, err := runtime.Lookup("fbank")
	if err != nil {
		return nil, err
	}
	p, err := runtime.ResolveParams("fbank", spec.Params, r.manifest.Frontend)
	if err != nil {
		return nil, fmt.Errorf("stream: model %s frontend: %w", r.manifest.Name, err)
	}
	cfg, err := fbank.ConfigFromParams(p)
	if err != nil {
		return nil, fmt.Errorf("stream: model %s frontend: %w", r.manifest.Name, err)
	}
	fb, err := fbank.NewIncremental(cfg)
	if err != nil {
		return nil, fmt.Errorf("stream: model %s frontend: %w", r.manifest.Name, err)
	}
	return fb, nil
}

// startEncoder sets up a stream for its StreamingEncoder: the model's
// frontend as an incremental one and the initial caches.
func (s *Stream) startEncoder() error {
	r := s.r
	if r.manifest.RawWaveform() {
		return fmt.Errorf("stream: a StreamingEncoder reads features; model %s takes raw audio", r.manifest.Name)
	}
	var err error
	if s.fb, err = r.incremental(); err != nil {
		return err
	}
	cfg := s.fb.Config()
	s.enc, s.geo = s.opt.Encoder, s.opt.Encoder.StreamGeometry()
	g := s.geo
	if g.ChunkFrames < 1 || g.LookAheadFrames < 0 || g.OutFrames < 1 || g.OutFrames*r.stride != g.ChunkFrames*cfg.HopLength {
		return fmt.Errorf("stream: streaming encoder geometry %+v: want a chunk of at least one frame whose %d feature frames of %d samples make its %d output frames of %d samples",
			g, g.ChunkFrames, cfg.HopLength, g.OutFrames, r.stride)
	}
	s.chunk = g.ChunkFrames * cfg.HopLength
	s.left, s.ahead = 0, 0
	if s.cache, err = s.enc.InitialCache(); err != nil {
		return fmt.Errorf("stream: streaming encoder: %w", err)
	}
	return nil
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
	if s.enc != nil {
		return s.writeFeatures(ctx, pcm)
	}
	if s.fb != nil {
		var err error
		if s.feats, err = s.fb.Write(ctx, pcm, s.feats); err != nil {
			return nil, fmt.Errorf("asr: stream: %w", err)
		}
	}
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
	if s.enc != nil {
		return s.closeFeatures(ctx)
	}
	end := s.base + len(s.audio)
	if s.fb != nil && s.fb.Samples() > 0 {
		// The end padding's frames; a stream too short for one frame keeps
		// the audio path (its windows are padded with silence).
		if feats, valid, err := s.fb.Flush(ctx, s.feats); err == nil {
			s.feats, s.flushed = feats[:max(0, valid-s.fdone)*s.fb.Config().NumMels], true
		}
	}
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
	var lp []float32
	var T int
	var err error
	if s.fb != nil && end-start >= 4*r.stride && (s.flushed || s.fb.Frames() > 0) {
		lp, T, err = s.featureEmissions(ctx, start, end)
	} else {
		window := s.audio[start-s.base : end-s.base]
		if len(window) < 4*r.stride {
			window = append(make([]float32, 0, 4*r.stride), window...)
			window = window[:4*r.stride]
		}
		c := r.begin(ctx, window)
		lp, T, err = r.hostEmissions(ctx, c, window)
		r.end(c)
	}
	if err != nil {
		return nil, fmt.Errorf("asr: stream audio %v-%v: %w", r.seconds(start), r.seconds(end), err)
	}
	lo, hi := (s.done-start)/r.stride, (keep-start)/r.stride
	if hi > T {
		return nil, fmt.Errorf("asr: stream: the encoder gave %d frames for %v of audio; the kept chunk needs %d (the model's frame_stride does not match its output)", T, r.seconds(end-start), hi)
	}
	s.lp = append(s.lp, lp[lo*V:hi*V]...)
	s.done = keep
	s.trim()
	if s.fb != nil {
		// The next window starts at done - left.
		hop, nm := s.fb.Config().HopLength, s.fb.Config().NumMels
		if drop := min((s.done-s.left)/hop-s.fdone, len(s.feats)/nm); drop > 0 {
			s.feats = append(s.feats[:0], s.feats[drop*nm:]...)
			s.fdone += drop
		}
	}
	return s.endpoint(ctx)
}

// featureEmissions encodes the features of samples [start, end) (start a
// multiple of the hop): the frames the incremental frontend has given by
// the time end samples were written (all of them once flushed; without the
// last few, whose windows reach past end, before), normalised over the
// window when the frontend normalises per utterance, through the encoder of
// a free pipeline. It returns the log-probs [T', V] and T'.
func (s *Stream) featureEmissions(ctx context.Context, start, end int) ([]float32, int, error) {
	r := s.r
	cfg := s.fb.Config()
	hop, nm := cfg.HopLength, cfg.NumMels
	fs, fe := start/hop, end/hop
	if !s.flushed {
		fe = min(fe, s.fb.ReadyFrames(end))
	}
	fe = min(fe, s.fdone+len(s.feats)/nm)
	if fs < s.fdone || fe-fs < 2 {
		return nil, 0, fmt.Errorf("features %d-%d are not held (frames %d-%d are)", fs, fe, s.fdone, s.fdone+len(s.feats)/nm)
	}
	T := fe - fs
	window := append([]float32(nil), s.feats[(fs-s.fdone)*nm:(fe-s.fdone)*nm]...)
	if err := s.fb.NormalizeWindow(window); err != nil {
		return nil, 0, err
	}
	shape := runtime.Shape{1, T, nm}
	if cfg.Layout == fbank.MelTime {
		shape = runtime.Shape{1, nm, T}
		x := make([]float32, len(window))
		for t := 0; t < T; t++ {
			for m := 0; m < nm; m++ {
				x[m*T+t] = window[t*nm+m]
			}
		}
		window = x
	}
	var p *runtime.Pipeline
	select {
	case p = <-r.free:
	case <-ctx.Done():
		return nil, 0, ctx.Err()
	}
	defer func() { r.free <- p }()
	out, err := p.Step("encoder").Run(ctx, runtime.Tensors{
		model.InputFeatures: runtime.Must(runtime.FromSlice(runtime.F32, shape, window)),
		model.InputLengths:  runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{1}, []int64{int64(T)})),
	})
	if err != nil {
		return nil, 0, err
	}
	V := r.manifest.Vocab.Len()
	lp := out[model.OutputLogProbs]
	if lp.Rank() != 3 || lp.Shape()[2] != V {
		return nil, 0, fmt.Errorf("the encoder's log-probs have shape %v, want [1, T', %d]", lp.Shape(), V)
	}
	frames := lp.Shape()[1]
	if l := out[model.OutputLengths]; l != nil {
		frames = int(l.I64()[0])
	}
	return lp.F32()[:frames*V], frames, nil
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

// writeFeatures is Write with a StreamingEncoder: pcm's features, then a
// step for every chunk whose look-ahead is in.
func (s *Stream) writeFeatures(ctx context.Context, pcm []float32) ([]StreamResult, error) {
	var err error
	if s.feats, err = s.fb.Write(ctx, pcm, s.feats); err != nil {
		return nil, fmt.Errorf("asr: stream: %w", err)
	}
	nm := s.fb.Config().NumMels
	var out []StreamResult
	for len(s.feats)/nm >= s.geo.ChunkFrames+s.geo.LookAheadFrames {
		res, err := s.encoderStep(ctx, s.geo.OutFrames)
		if err != nil {
			return out, err
		}
		out = append(out, res...)
	}
	return out, nil
}

// encoderStep runs one StreamingEncoder step over the first chunk and
// look-ahead of s.feats, keeps `keep` of its output frames and applies the
// endpoint rules.
func (s *Stream) encoderStep(ctx context.Context, keep int) ([]StreamResult, error) {
	r, V := s.r, s.r.manifest.Vocab.Len()
	nm := s.fb.Config().NumMels
	g := s.geo
	window := s.feats[:(g.ChunkFrames+g.LookAheadFrames)*nm]
	lp, next, err := s.enc.EncodeChunk(ctx, window, s.cache)
	if err != nil {
		return nil, fmt.Errorf("asr: stream features %d-%d: streaming encoder: %w", s.fdone, s.fdone+g.ChunkFrames+g.LookAheadFrames, err)
	}
	s.cache = next
	if len(lp) != g.OutFrames*V {
		return nil, fmt.Errorf("asr: stream: the streaming encoder returned %d log-probs, want %d frames of %d classes", len(lp), g.OutFrames, V)
	}
	s.lp = append(s.lp, lp[:keep*V]...)
	s.feats = append(s.feats[:0], s.feats[g.ChunkFrames*nm:]...)
	s.fdone += g.ChunkFrames
	s.done = min(s.done+keep*r.stride, s.base+len(s.audio))
	s.trim()
	return s.endpoint(ctx)
}

// closeFeatures is Close with a StreamingEncoder: the frontend's last
// frames, the remaining chunks (the last one padded with zero frames), the
// last utterance's final, and the caches released.
func (s *Stream) closeFeatures(ctx context.Context) ([]StreamResult, error) {
	defer func() {
		_ = s.cache.Release()
		s.cache, s.audio, s.lp, s.feats = nil, nil, nil, nil
	}()
	var out []StreamResult
	nm := s.fb.Config().NumMels
	g := s.geo
	if s.fb.Samples() > 0 {
		feats, valid, err := s.fb.Flush(ctx, s.feats)
		if err == nil {
			// Only the valid frames are audio; the rest are the frontend's zero rows.
			s.feats = feats[:max(0, valid-s.fdone)*nm]
		}
	}
	for len(s.feats) > 0 {
		frames := len(s.feats) / nm
		keep := g.OutFrames
		if frames < g.ChunkFrames+g.LookAheadFrames {
			if frames < g.ChunkFrames {
				keep = ceilDiv(frames*g.OutFrames, g.ChunkFrames)
			}
			s.feats = append(s.feats, make([]float32, (g.ChunkFrames+g.LookAheadFrames-frames)*nm)...)
		}
		res, err := s.encoderStep(ctx, keep)
		if err != nil {
			return out, err
		}
		out = append(out, res...)
		if frames <= g.ChunkFrames {
			break
		}
		s.feats = s.feats[:(frames-g.ChunkFrames)*nm]
	}
	if res, ok, err := s.final(ctx); err != nil {
		return out, err
	} else if ok {
		out = append(out, res)
	}
	return out, nil
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
