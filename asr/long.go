package asr

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/edgespeech/edge/asr/transcript"
	"github.com/edgespeech/edge/plugins/dpx"
	"github.com/edgespeech/edge/plugins/vad"
	"github.com/edgespeech/edge/runtime"
)

// PCMReader is a source of mono samples at the model's sample rate
// (audio.Stream): Read fills p and returns how many samples it wrote, and
// io.EOF (with 0 samples) at the end; any other error ends the input.
type PCMReader interface {
	Read(p []float32) (int, error)
}

// ReaderOptions configures TranscribeReader.
type ReaderOptions struct {
	// Words, when set, receives the words in order, in batches, as soon as
	// no later audio can change them: their Start, End, Confidence, Text
	// and token indices are final. It runs on the calling goroutine; an
	// error stops the call and is returned.
	Words func(words []transcript.Word) error
	// Discard keeps the returned transcript's Text, Words and Tokens empty
	// (Duration and Score are set): memory then holds no per-word state
	// for the whole input, for callers that take the words from Words.
	Discard bool
}

// streamFinder is a speech finder that also segments a stream
// (*vad.Detector).
type streamFinder interface {
	NewStream(sampleRate int) (*vad.Stream, error)
}

// readBlock is how many samples TranscribeReader reads at a time.
const readBlock = 1 << 15

// TranscribeReader recognises the audio src yields (mono, at the model's
// sample rate) as Transcribe recognises the same samples given at once, and
// the transcript is equal: the same words, tokens, times, confidences and
// score. Memory is bounded by what alignment still needs, not by the
// duration: with the recogniser's VAD, each speech segment is encoded as
// soon as it has ended and its context has arrived, and only the audio of
// segments still to encode is kept; without it, the fixed chunks are
// encoded as they arrive (Workers at a time). The emissions are kept from
// the last cut of the alignment on (Transcribe cuts it at pauses of 25
// frames or more, see transcript.Transcribe), so a stretch without such a
// pause holds its emissions (about 21 MB an hour for 29 classes at 20 ms
// per frame).
//
// A read error, or audio too short for the model (ErrTooShort), ends the
// call with an error; the words already given to opt.Words stay valid.
// On a device backend (cuda) the audio is read whole and handed to
// Transcribe.
func (r *Recognizer) TranscribeReader(ctx context.Context, src PCMReader, opt ReaderOptions) (*transcript.Transcript, error) {
	if r.dec != nil {
		return r.transcribeWhole(ctx, src, opt)
	}
	var sf streamFinder
	if r.speech != nil {
		var ok bool
		if sf, ok = r.speech.(streamFinder); !ok {
			return r.transcribeWhole(ctx, src, opt)
		}
	}
	c := r.begin(ctx, nil)
	defer r.end(c)
	l := &long{r: r, c: c, V: r.manifest.Vocab.Len(), opt: opt, prevEnd: -1, open: -1}
	l.dec = &longDecoder{r: r, V: l.V, cfg: r.words, opt: opt}
	if sf != nil {
		vs, err := sf.NewStream(r.manifest.SampleRate)
		if err != nil {
			return nil, fmt.Errorf("finding speech: %w", err)
		}
		defer vs.Close()
		l.vad = vs
	}
	ctx, cancel := context.WithCancel(ctx)
	defer func() {
		cancel()
		l.drain()
	}()
	buf := make([]float32, readBlock)
	for {
		n, rerr := src.Read(buf)
		if n > 0 {
			if err := l.add(ctx, buf[:n]); err != nil {
				return nil, err
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return nil, rerr
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	c.stats.Audio = time.Duration(float64(l.fed) / float64(r.manifest.SampleRate) * float64(time.Second))
	if l.fed < 4*r.stride {
		return nil, fmt.Errorf("%w: %d samples (%v); the model needs at least %d", ErrTooShort, l.fed, c.stats.Audio, 4*r.stride)
	}
	if err := l.finish(ctx); err != nil {
		return nil, err
	}
	t0 := time.Now()
	tr, err := l.dec.finish()
	c.stats.Stages["decode"] += time.Since(t0)
	return tr, err
}

// transcribeWhole reads src to its end and calls Transcribe.
func (r *Recognizer) transcribeWhole(ctx context.Context, src PCMReader, opt ReaderOptions) (*transcript.Transcript, error) {
	var pcm []float32
	buf := make([]float32, readBlock)
	for {
		n, err := src.Read(buf)
		pcm = append(pcm, buf[:n]...)
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	tr, err := r.Transcribe(ctx, pcm)
	if err != nil {
		return nil, err
	}
	if opt.Words != nil && len(tr.Words) > 0 {
		if err := opt.Words(tr.Words); err != nil {
			return nil, err
		}
	}
	if opt.Discard {
		tr.Text, tr.Words, tr.Tokens = "", nil, nil
	}
	return tr, nil
}

// long is the state of one TranscribeReader call.
type long struct {
	r   *Recognizer
	c   *call
	V   int
	opt ReaderOptions
	dec *longDecoder

	audio []float32 // samples from abase on
	abase int
	fed   int // samples read

	// With VAD: the stream, the ended segments not yet encoded, and the
	// last encoded segment, whose frames wait for the next segment's start.
	vad     *vad.Stream
	queue   []vad.Segment
	held    *heldSegment
	prevEnd int // EndSample of the last encoded segment (-1: none)
	open    int // StartSample of an announced segment not yet ended (-1: none)

	// Without VAD: the next chunk's start and the chunks being encoded.
	next     int
	inflight []chan chunkResult
	starts   []int // their [start, end) in samples
	ends     []int
}

// heldSegment is an encoded speech segment: its emissions from global frame
// first on, of which frames from lo on are its own (up to a hi that the
// next segment's start decides).
type heldSegment struct {
	seg       vad.Segment
	first, lo int
	rows      []float32
}

// add takes the next samples.
func (l *long) add(ctx context.Context, pcm []float32) error {
	l.audio = append(l.audio, pcm...)
	l.fed += len(pcm)
	l.c.total = l.fed
	if l.vad != nil {
		_, evs, err := l.vad.Feed(ctx, pcm)
		if err != nil {
			return fmt.Errorf("finding speech: %w", err)
		}
		l.events(evs)
		if err := l.encodeSegments(ctx, false); err != nil {
			return err
		}
	} else if err := l.encodeChunks(ctx, false); err != nil {
		return err
	}
	l.trim()
	return nil
}

// finish encodes what is left once the input has ended.
func (l *long) finish(ctx context.Context) error {
	if l.vad != nil {
		_, evs, err := l.vad.Flush(ctx)
		if errors.Is(err, vad.ErrTooShort) {
			evs, err = nil, nil
		}
		if err != nil {
			return fmt.Errorf("finding speech: %w", err)
		}
		l.events(evs)
		if err := l.encodeSegments(ctx, true); err != nil {
			return err
		}
		T := l.fed / l.r.stride
		if err := l.release(T); err != nil {
			return err
		}
		return l.gap(T)
	}
	return l.encodeChunks(ctx, true)
}

// events records the VAD's decisions.
func (l *long) events(evs []vad.Event) {
	for _, e := range evs {
		switch e.Kind {
		case vad.SpeechStart:
			l.open = e.Segment.StartSample
		case vad.SpeechEnd:
			l.queue = append(l.queue, e.Segment)
			l.open = -1
		case vad.SpeechDropped:
			l.open = -1
		}
	}
}

// pad is the context encoded on either side of a speech segment, in samples.
func (l *long) pad() int {
	return int(segmentContext*float64(l.r.manifest.SampleRate)) / l.r.stride * l.r.stride
}

// encodeSegments encodes the queued segments whose audio (context
// included) has arrived, or all of them at the end; each one's frames are
// placed as speechEmissions places them.
func (l *long) encodeSegments(ctx context.Context, end bool) error {
	r, pad := l.r, l.pad()
	for len(l.queue) > 0 {
		s := l.queue[0]
		if s.StartSample < 0 || s.StartSample >= s.EndSample || s.EndSample > l.fed {
			return fmt.Errorf("finding speech: segment [%d, %d) is outside the %d samples", s.StartSample, s.EndSample, l.fed)
		}
		from := max(0, s.StartSample/r.stride*r.stride-pad)
		to := s.EndSample + pad
		if !end && to > l.fed {
			return nil
		}
		to = min(l.fed, to)
		if to-from < 4*r.stride {
			from = max(0, min(from, l.fed-4*r.stride))
			to = min(l.fed, from+4*r.stride)
		}
		if from < l.abase {
			return fmt.Errorf("speech %v-%v: its audio from %v was not kept (a bug)", r.seconds(s.StartSample), r.seconds(s.EndSample), r.seconds(from))
		}
		l.queue = l.queue[1:]
		// The held segment's frames end half way to this one.
		if l.held != nil {
			if err := l.release((l.held.seg.EndSample + s.StartSample) / 2 / r.stride); err != nil {
				return err
			}
		}
		lo := 0
		if l.prevEnd >= 0 {
			lo = (l.prevEnd + s.StartSample) / 2 / r.stride
		}
		l.c.offset = from
		lp, frames, err := r.chunkedEmissions(ctx, l.c, l.audio[from-l.abase:to-l.abase])
		l.c.offset = 0
		if err != nil {
			return fmt.Errorf("speech %v-%v: %w", r.seconds(s.StartSample), r.seconds(s.EndSample), err)
		}
		rows, err := r.hostRows(lp, frames)
		if err != nil {
			return err
		}
		l.held = &heldSegment{seg: s, first: from / r.stride, lo: lo, rows: rows}
		l.prevEnd = s.EndSample
	}
	return nil
}

// hostRows returns the first frames rows of lp ([1, T', V], freed when on a
// device) in host memory.
func (r *Recognizer) hostRows(lp *runtime.Tensor, frames int) ([]float32, error) {
	if !lp.OnHost() {
		h, err := r.backend.Download(lp)
		_ = lp.Release()
		if err != nil {
			return nil, err
		}
		lp = h
	}
	return lp.F32()[:frames*r.manifest.Vocab.Len()], nil
}

// release hands the held segment's own frames, those before global frame
// hi, to the decoder, after the silence before them.
func (l *long) release(hi int) error {
	h := l.held
	if h == nil {
		return nil
	}
	l.held = nil
	frames := len(h.rows) / l.V
	a := max(h.lo, h.first)
	b := min(hi, h.first+frames, l.fed/l.r.stride)
	if b <= a {
		return nil
	}
	if err := l.gap(a); err != nil {
		return err
	}
	return l.dec.add(h.rows[(a-h.first)*l.V : (b-h.first)*l.V])
}

// gap gives the decoder silence frames (blank certain) up to global frame
// t.
func (l *long) gap(t int) error {
	for l.dec.total < t {
		n := min(t-l.dec.total, 1024)
		rows := make([]float32, n*l.V)
		for k := range n {
			row := rows[k*l.V : (k+1)*l.V]
			for j := range row {
				row[j] = gapLogProb
			}
			row[l.r.manifest.BlankID] = 0
		}
		if err := l.dec.add(rows); err != nil {
			return err
		}
	}
	return nil
}

// encodeChunks launches the fixed chunks whose audio has arrived (all of
// them at the end), at most Workers at a time, and stitches the finished
// ones in order as chunkedEmissions does.
func (l *long) encodeChunks(ctx context.Context, end bool) error {
	r := l.r
	for {
		for l.launchReady(ctx, end) {
		}
		if len(l.inflight) == 0 {
			return nil
		}
		// Wait for the oldest chunk at the end or when the pool is full;
		// otherwise take it only if it is done.
		var res chunkResult
		if end || len(l.inflight) >= cap(r.free) {
			res = <-l.inflight[0]
		} else {
			select {
			case res = <-l.inflight[0]:
			default:
				return nil
			}
		}
		start, stop := l.starts[0], l.ends[0]
		l.inflight, l.starts, l.ends = l.inflight[1:], l.starts[1:], l.ends[1:]
		l.c.add(res)
		if res.err != nil {
			return fmt.Errorf("audio %v-%v: %w", r.seconds(start), r.seconds(stop), res.err)
		}
		l.c.advance(stop)
		// Keep local frames [lo, hi): from the middle of the overlap with
		// the previous chunk to the middle of the overlap with the next.
		lo, hi := 0, res.frames
		if start > 0 {
			lo = r.overlap / 2 / r.stride
		}
		if !(end && stop == l.fed) {
			hi = min(res.frames, (r.chunk-r.overlap/2)/r.stride)
		}
		if got, want := l.dec.total, start/r.stride+lo; got != want {
			_ = res.lp.Release()
			return fmt.Errorf("stitching chunks: have %d frames, the chunk at %v starts at frame %d (the model's frame_stride does not match its output)", got, r.seconds(start), want)
		}
		rows, err := r.hostRows(res.lp, res.frames)
		if err != nil {
			return err
		}
		if err := l.dec.add(rows[lo*l.V : hi*l.V]); err != nil {
			return err
		}
	}
}

// chunkEnd is the end of the chunk starting at l.next once it is decided:
// the chunk's full length when more audio follows it, the end of the audio
// (a short tail joins its chunk) at the end; ok is false while undecided.
func (l *long) chunkEnd(end bool) (int, bool) {
	r := l.r
	start, step := l.next, r.chunk-r.overlap
	if end {
		stop := min(start+r.chunk, l.fed)
		if stop < l.fed && l.fed-(start+step) < 4*r.stride {
			stop = l.fed
		}
		return stop, true
	}
	// More audio may come: the chunk is whole once audio beyond it has
	// arrived and the tail after its step is long enough to stand alone.
	if l.fed > start+r.chunk && l.fed-(start+step) >= 4*r.stride {
		return start + r.chunk, true
	}
	return 0, false
}

// launchReady starts the next chunk when it is decided and a worker slot
// is free; it reports whether it started one.
func (l *long) launchReady(ctx context.Context, end bool) bool {
	r := l.r
	if l.next < 0 || len(l.inflight) >= cap(r.free) {
		return false
	}
	stop, ok := l.chunkEnd(end)
	if !ok {
		return false
	}
	start := l.next
	pcm := append([]float32(nil), l.audio[start-l.abase:stop-l.abase]...)
	ch := make(chan chunkResult, 1)
	l.inflight = append(l.inflight, ch)
	l.starts, l.ends = append(l.starts, start), append(l.ends, stop)
	if stop == l.fed && end {
		l.next = -1 // the last chunk
	} else {
		l.next = start + r.chunk - r.overlap
	}
	go func() { ch <- r.encode(ctx, pcm) }()
	return true
}

// drain waits for the chunks still being encoded and frees their results.
func (l *long) drain() {
	for _, ch := range l.inflight {
		if res := <-ch; res.lp != nil {
			_ = res.lp.Release()
		}
	}
	l.inflight = nil
}

// trim drops the audio nothing will encode any more.
func (l *long) trim() {
	low := l.fed
	if l.vad != nil {
		pad := l.pad()
		margin := pad + l.r.manifest.SampleRate // the speech start the VAD may still decide
		low = l.fed - margin
		if l.open >= 0 {
			low = min(low, l.open/l.r.stride*l.r.stride-pad)
		} else if l.vad.InSpeech() {
			low = l.abase // a start decided but not yet reported
		}
		for _, s := range l.queue {
			low = min(low, s.StartSample/l.r.stride*l.r.stride-pad)
		}
		low -= 4 * l.r.stride
	} else if l.next >= 0 {
		low = l.next
	}
	if drop := low - l.abase; drop > 0 && drop >= len(l.audio)/2 {
		l.audio = append(l.audio[:0], l.audio[drop:]...)
		l.abase += drop
	}
}

// longDecoder is transcript.Transcribe applied to emissions that arrive in
// order: greedy spans are extended as rows come, and the alignment is cut
// where Transcribe cuts it (the middles of greedy blank runs of at least
// transcript's segment gap, once the emissions are long enough for cuts),
// each piece aligned as soon as it is complete, so its rows can go.
type longDecoder struct {
	r   *Recognizer
	V   int
	cfg transcript.Config
	opt ReaderOptions

	rows  []float32  // emissions from frame base on
	base  int        // global frame of rows[0]
	spans []dpx.Span // greedy spans of rows, frames relative to base
	total int        // frames received
	cut   bool       // a piece was aligned (the emissions are long enough)

	aligner *dpx.Aligner
	ali     dpx.Alignment
	score   float64
	ntok    int                // tokens aligned so far
	tokens  []transcript.Token // all of them (unless Discard)
	carry   []transcript.Token // those of the word still open
	words   []transcript.Word  // all words (unless Discard)
}

// segmentGap is transcript.Transcribe's cut rule: greedy blank runs of at
// least this many frames.
const segmentGap = 25

// add takes the next rows ([n, V]) of the emissions.
func (d *longDecoder) add(rows []float32) error {
	n := len(d.rows) / d.V
	spans, err := dpx.Greedy(nil, rows, d.V, d.cfg.Blank)
	if err != nil {
		return fmt.Errorf("transcript: %w", err)
	}
	for i, s := range spans {
		s.Start += int32(n)
		s.End += int32(n)
		if i == 0 && len(d.spans) > 0 {
			if last := &d.spans[len(d.spans)-1]; last.End == int32(n) && s.Start == int32(n) && last.Token == s.Token {
				last.End = s.End
				continue
			}
		}
		d.spans = append(d.spans, s)
	}
	d.rows = append(d.rows, rows...)
	d.total += len(rows) / d.V
	if d.total < 2*segmentGap {
		return nil
	}
	for i := 0; i+1 < len(d.spans); i++ {
		if d.spans[i+1].Start-d.spans[i].End < segmentGap {
			continue
		}
		hi := int(d.spans[i].End+d.spans[i+1].Start) / 2
		if err := d.piece(hi, i+1); err != nil {
			return err
		}
		i = -1 // spans were shifted
	}
	return nil
}

// piece aligns frames [0, hi) of rows to the first k spans' tokens and
// drops them.
func (d *longDecoder) piece(hi, k int) error {
	if d.aligner == nil {
		a, err := dpx.NewAligner(dpx.AlignOptions{Blank: d.cfg.Blank})
		if err != nil {
			return fmt.Errorf("transcript: %w", err)
		}
		d.aligner = a
	}
	d.cut = true
	tokens := make([]int, k)
	for i, s := range d.spans[:k] {
		tokens[i] = int(s.Token)
	}
	lp := d.rows[:hi*d.V]
	if err := d.aligner.Align(&d.ali, lp, d.V, tokens); err != nil {
		return fmt.Errorf("transcript: frames %d-%d: %w", d.base, d.base+hi, err)
	}
	d.score += float64(d.ali.Score)
	aligned := dpx.Spans(nil, d.ali.Labels, d.cfg.Blank)
	if len(aligned) != len(tokens) {
		return fmt.Errorf("transcript: alignment has %d token spans for %d tokens (a bug)", len(aligned), len(tokens))
	}
	tr, err := transcript.FromSpans(aligned, lp, d.V, d.cfg)
	if err != nil {
		return err
	}
	if err := d.addTokens(tr.Tokens, d.base); err != nil {
		return err
	}
	d.rows = append(d.rows[:0], d.rows[hi*d.V:]...)
	d.spans = append(d.spans[:0], d.spans[k:]...)
	for i := range d.spans {
		d.spans[i].Start -= int32(hi)
		d.spans[i].End -= int32(hi)
	}
	d.base += hi
	return nil
}

// addTokens takes a piece's tokens (frames relative to frame base), makes
// their frames and times global and emits the words they complete.
func (d *longDecoder) addTokens(toks []transcript.Token, base int) error {
	for i := range toks {
		t := &toks[i]
		t.StartFrame += base
		t.EndFrame += base
		t.Start, t.End = d.frameTime(t.StartFrame), d.frameTime(t.EndFrame)
	}
	all := append(d.carry, toks...)
	// Words end before the last token that starts one (a delimiter, or a
	// token with the SentencePiece marker); those after it may continue.
	b := 0
	for i, t := range all {
		if d.startsWord(t) {
			b = i
		}
	}
	if err := d.emit(all[:b]); err != nil {
		return err
	}
	d.carry = append([]transcript.Token(nil), all[b:]...)
	return nil
}

// startsWord is whether transcript's word grouping ends the open word at t.
func (d *longDecoder) startsWord(t transcript.Token) bool {
	if d.cfg.Special[t.ID] {
		return false
	}
	if d.cfg.WordDelimiter != "" && t.Text == d.cfg.WordDelimiter {
		return true
	}
	return d.cfg.SentencePieceMarker != "" && strings.HasPrefix(t.Text, d.cfg.SentencePieceMarker)
}

// frameTime is transcript.Config's time of frame boundary f.
func (d *longDecoder) frameTime(f int) time.Duration {
	return max(0, time.Duration(f)*d.cfg.FrameStride+d.cfg.FrameOffset)
}

// emit groups complete tokens into words and hands them on.
func (d *longDecoder) emit(toks []transcript.Token) error {
	if len(toks) == 0 {
		return nil
	}
	ws := transcript.Words(toks, d.cfg)
	for i := range ws {
		ws[i].FirstToken += d.ntok
		ws[i].LastToken += d.ntok
	}
	d.ntok += len(toks)
	if !d.opt.Discard {
		d.tokens = append(d.tokens, toks...)
		d.words = append(d.words, ws...)
	}
	if d.opt.Words != nil && len(ws) > 0 {
		return d.opt.Words(ws)
	}
	return nil
}

// finish aligns the last piece and returns the transcript.
func (d *longDecoder) finish() (*transcript.Transcript, error) {
	var score float64
	if !d.cut && (len(d.spans) == 0 || d.total < 2*segmentGap) {
		// Transcribe's own path for short or empty emissions: all of them
		// are still here.
		tokens := make([]int, len(d.spans))
		for i, s := range d.spans {
			tokens[i] = int(s.Token)
		}
		tr, err := transcript.AlignTokens(d.rows, d.V, tokens, d.cfg)
		if err != nil {
			return nil, err
		}
		score = tr.Score
		if err := d.addTokens(tr.Tokens, 0); err != nil {
			return nil, err
		}
	} else {
		if err := d.piece(len(d.rows)/d.V, len(d.spans)); err != nil {
			return nil, err
		}
		score = float64(float32(d.score))
	}
	if err := d.emit(d.carry); err != nil {
		return nil, err
	}
	d.carry = nil
	tr := &transcript.Transcript{Duration: time.Duration(d.total) * d.cfg.FrameStride, Score: score}
	if !d.opt.Discard {
		tr.Words, tr.Tokens = d.words, d.tokens
		texts := make([]string, len(tr.Words))
		for i, w := range tr.Words {
			texts[i] = w.Text
		}
		tr.Text = strings.Join(texts, " ")
		if tr.Tokens == nil {
			tr.Tokens = []transcript.Token{}
		}
	}
	return tr, nil
}
