package audio

import (
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"sync"
)

// Stream is audio decoded as it is read: mono samples at one sample rate,
// in bounded pieces, equal sample for sample to what Options.Load (or
// LoadReader) returns for the same input.
//
// WAV (every encoding), headerless PCM, FLAC and everything ffmpeg decodes
// (read from its pipe) are decoded progressively, so a Stream holds a few
// 64 Ki-sample blocks whatever the duration. MP3, Ogg Vorbis, Ogg Opus and
// AIFF are decoded whole first (their decoders trim the end by what the
// stream's last headers say) and then handed out in pieces.
//
// The decoder runs on its own goroutine, one block ahead of Read. A Stream
// is for one goroutine at a time; Close ends the decoder and waits for it.
type Stream struct {
	name   string
	rate   int
	blocks chan block
	done   chan struct{} // closed by Close
	exited chan struct{} // closed when the decoder goroutine returns
	file   *os.File      // closed by Close (Open's file), or nil
	once   sync.Once

	res     *streamResampler // nil until the first block (or when rates match)
	from    int              // the decoded rate (0 before the first block)
	pending []float32        // output not yet read
	format  string
	trunc   *Truncation
	err     error // sticky: the error (or io.EOF) after pending
	ended   bool
}

// block is one message from the decoder goroutine: samples, or the end.
type block struct {
	rate, channels int
	x              []float32
	end            bool
	clip           *Clip // at the end: format, truncation and the unflushed samples
	err            error // at the end
}

// errStreamClosed stops a decoder whose Stream was closed.
var errStreamClosed = errors.New("audio: stream closed")

// Open starts decoding the audio file at path (any supported format) as a
// Stream of mono samples at sampleRate Hz: downmixed (the mean of the
// channels) and resampled with QualityBest, as Options.Load does. Errors of
// opening name the path; decoding errors come from Read.
func (o Options) Open(path string, sampleRate int) (*Stream, error) {
	if err := checkRate("target", sampleRate); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("audio: %s is not a regular file", path)
	}
	s := o.start(newFileInput(f, st.Size(), path), path, sampleRate)
	s.file = f
	return s, nil
}

// OpenReader is Open for a stream (standard input, a pipe): size is the
// number of bytes r holds, < 0 when unknown; name labels errors. Close
// waits for a Read of r in progress to return.
func (o Options) OpenReader(r io.Reader, size int64, name string, sampleRate int) (*Stream, error) {
	if err := checkRate("target", sampleRate); err != nil {
		return nil, err
	}
	return o.start(newInput(r, size), name, sampleRate), nil
}

func (o Options) start(in *input, name string, rate int) *Stream {
	s := &Stream{name: name, rate: rate, blocks: make(chan block, 1), done: make(chan struct{}), exited: make(chan struct{})}
	o.sink = func(rate, channels int, x []float32) error {
		select {
		case s.blocks <- block{rate: rate, channels: channels, x: x}:
			return nil
		case <-s.done:
			return errStreamClosed
		}
	}
	go func() {
		defer close(s.exited)
		clip, err := o.decode(in)
		select {
		case s.blocks <- block{end: true, clip: clip, err: err}:
		case <-s.done:
		}
	}()
	return s
}

// SampleRate is the rate of the samples Read returns.
func (s *Stream) SampleRate() int { return s.rate }

// Format names the decoded container and encoding once Read has returned
// io.EOF ("" before).
func (s *Stream) Format() string { return s.format }

// Truncated describes input that ended before what its headers promise,
// once Read has returned io.EOF; nil for complete input.
func (s *Stream) Truncated() *Truncation { return s.trunc }

// Read fills p with the next mono samples and returns how many. At the end
// of the audio it returns io.EOF (with n == 0); a decoding error (naming the
// input) comes after the samples decoded before it, and every later Read
// returns it again. Input without any sample ends in an error wrapping
// ErrNoSamples.
func (s *Stream) Read(p []float32) (int, error) {
	for len(s.pending) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		if err := s.next(); err != nil {
			s.err = err
		}
	}
	n := copy(p, s.pending)
	s.pending = s.pending[n:]
	return n, nil
}

// next takes the decoder's next block into pending (possibly nothing, when
// the resampler waits for more input) or returns the end.
func (s *Stream) next() error {
	if s.ended {
		return io.EOF
	}
	b, ok := <-s.blocks
	if !ok {
		return fmt.Errorf("%s: %w", s.name, errStreamClosed)
	}
	if !b.end {
		return s.add(b.rate, b.channels, b.x)
	}
	s.ended = true
	if b.err != nil {
		return fmt.Errorf("%s: %w", s.name, b.err)
	}
	if len(b.clip.Samples) > 0 {
		if err := s.add(b.clip.SampleRate, b.clip.Channels, b.clip.Samples); err != nil {
			return err
		}
	}
	s.format, s.trunc = b.clip.Format, b.clip.Truncated
	if s.from == 0 {
		return fmt.Errorf("%s: %w", s.name, ErrNoSamples)
	}
	if s.res != nil {
		s.pending = s.res.finish(s.pending)
	}
	if len(s.pending) == 0 {
		return io.EOF
	}
	return nil
}

// add downmixes and resamples one block into pending.
func (s *Stream) add(rate, channels int, x []float32) error {
	if channels < 1 || len(x)%channels != 0 {
		return fmt.Errorf("%s: the decoder gave %d samples of %d channels (a bug)", s.name, len(x), channels)
	}
	c := Clip{SampleRate: rate, Channels: channels, Samples: x}
	mono := c.Mono()
	for i, v := range mono {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("%s: audio: resample input sample %d is %v; want finite samples", s.name, i, v)
		}
	}
	switch {
	case s.from == 0:
		s.from = rate
		if rate != s.rate {
			r, err := cachedResampler(rate, s.rate)
			if err != nil {
				return fmt.Errorf("%s: %w", s.name, err)
			}
			s.res = &streamResampler{r: r}
		}
	case rate != s.from:
		return fmt.Errorf("%s: the sample rate changes from %d Hz to %d Hz mid-stream", s.name, s.from, rate)
	}
	if s.res == nil {
		s.pending = append(s.pending, mono...)
		return nil
	}
	s.pending = s.res.push(s.pending, mono)
	return nil
}

// Close stops the decoder, waits for its goroutine to return and closes
// the file Open opened. It is safe to call more than once.
func (s *Stream) Close() error {
	var err error
	s.once.Do(func() {
		close(s.done)
		if s.file != nil {
			err = s.file.Close()
		}
		<-s.exited
	})
	return err
}

// streamResampler applies a Resampler to a signal that arrives in pieces:
// output sample j is computed as soon as the input its filter spans has
// arrived, with the same arithmetic as Resampler.Resample on the whole
// signal (so the outputs are bit-identical), and the input before what the
// next output needs is dropped.
type streamResampler struct {
	r    *Resampler
	buf  []float32 // input from sample base on
	base int64
	fed  int64 // input samples pushed
	next int64 // index of the next output sample
}

// push appends the outputs that x completes to dst and returns it.
func (s *streamResampler) push(dst, x []float32) []float32 {
	s.buf = append(s.buf, x...)
	s.fed += int64(len(x))
	r := s.r
	n := int64(r.ntaps)
	for {
		i := int(s.next % int64(r.up))
		st := s.next/int64(r.up)*int64(r.down) + int64(r.start[i])
		if st+n > s.fed {
			break
		}
		dst = append(dst, s.at(i, st, s.fed))
		s.next++
	}
	s.trim()
	return dst
}

// finish appends the outputs that remain once the input has ended:
// OutputLen(fed) in all.
func (s *streamResampler) finish(dst []float32) []float32 {
	r := s.r
	for total := int64(r.OutputLen(int(s.fed))); s.next < total; s.next++ {
		i := int(s.next % int64(r.up))
		st := s.next/int64(r.up)*int64(r.down) + int64(r.start[i])
		dst = append(dst, s.at(i, st, s.fed))
	}
	s.buf = nil
	return dst
}

// at is output sample of phase i whose taps start at input st, the input
// being total samples long (or at least st+ntaps): Resampler.run's dot or
// dotClipped.
func (s *streamResampler) at(i int, st, total int64) float32 {
	r := s.r
	n := int64(r.ntaps)
	taps := r.bank[i*r.ntaps : (i+1)*r.ntaps]
	if st >= 0 && st+n <= total {
		return dot(taps, s.buf[st-s.base:st-s.base+n])
	}
	lo, hi := max(0, -st), min(n, total-st)
	if hi <= lo {
		return 0
	}
	return dot(taps[lo:hi], s.buf[st+lo-s.base:st+hi-s.base])
}

// trim drops input no later output needs (the phases' taps start at most
// minStart before their period's base).
func (s *streamResampler) trim() {
	r := s.r
	low := s.next / int64(r.up) * int64(r.down)
	for _, v := range r.start {
		low = min(low, s.next/int64(r.up)*int64(r.down)+int64(v))
	}
	if drop := low - s.base; drop > int64(len(s.buf))/2 && drop > 0 {
		s.buf = append(s.buf[:0], s.buf[drop:]...)
		s.base += drop
	}
}
