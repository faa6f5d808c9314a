package audio

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// codec is one natively decoded format: every decoder has this shape.
//
// sniff looks at the first bytes of the stream (up to sniffLen, fewer for a
// short input; after any ID3v2 tag) and says whether they start this format.
// decode reads the whole stream from in and returns the clip (interleaved
// float32 at the stream's own rate and channel count) with Truncated set
// when the input ends early; it never allocates for what a header claims
// beyond in's real bytes (in.size, or the bytes read when it is unknown).
// A stream of this family that needs another decoder (an MP3 inside WAV,
// Ogg FLAC, ...) is a *needFFmpeg error.
type codec struct {
	name   string
	sniff  func(head []byte) bool
	decode func(in *input, o Options) (*Clip, error)
}

// codecs are tried in order.
var codecs = []codec{
	{"wav", sniffWAV, decodeWAV},
	{"aiff", sniffAIFF, decodeAIFF},
	{"flac", sniffFLAC, decodeFLAC},
	{"ogg", sniffOgg, decodeOgg},
	{"mp3", sniffMP3, decodeMP3},
}

// foreign names containers that only ffmpeg decodes here, for messages.
var foreign = []struct {
	name  string
	sniff func(h []byte) bool
}{
	{"MP4/M4A", func(h []byte) bool { return len(h) >= 12 && string(h[4:8]) == "ftyp" }},
	{"QuickTime", func(h []byte) bool {
		return len(h) >= 8 && (string(h[4:8]) == "moov" || string(h[4:8]) == "mdat" || string(h[4:8]) == "wide")
	}},
	{"Matroska/WebM", prefix("\x1a\x45\xdf\xa3")},
	{"ASF/WMA", prefix("\x30\x26\xb2\x75\x8e\x66\xcf\x11")},
	{"AAC (ADTS)", func(h []byte) bool { return len(h) >= 2 && h[0] == 0xFF && h[1]&0xF6 == 0xF0 }},
	{"AMR", prefix("#!AMR")},
	{"CAF", prefix("caff")},
	{"Sun AU", prefix(".snd")},
	{"AC-3", prefix("\x0b\x77")},
	{"MPEG audio layer I/II", func(h []byte) bool {
		return len(h) >= 4 && h[0] == 0xFF && h[1]&0xE0 == 0xE0 && (h[1]>>1)&3 >= 2
	}},
	{"MPEG program stream", prefix("\x00\x00\x01\xba")},
	{"MPEG transport stream", func(h []byte) bool { return len(h) > 188 && h[0] == 0x47 && h[188] == 0x47 }},
	{"AVI", func(h []byte) bool { return len(h) >= 12 && string(h[:4]) == "RIFF" && string(h[8:12]) == "AVI " }},
}

func prefix(p string) func([]byte) bool {
	return func(h []byte) bool { return bytes.HasPrefix(h, []byte(p)) }
}

// sniffLen is how many bytes the sniffers may look at.
const sniffLen = 512

// input is the stream a decoder reads.
type input struct {
	r    *bufio.Reader
	left int64 // bytes not yet read from r (buffered ones included); -1 when unknown
	off  int64 // offset of r's next byte in the original stream
	path string
	rec  *recorder // nil for files (ffmpeg reopens the path)
}

// newInput reads a stream of size bytes (< 0: unknown), recording its first
// bytes for a replay to ffmpeg.
func newInput(r io.Reader, size int64) *input {
	in := &input{left: max(size, -1)}
	in.rec = &recorder{r: r}
	in.r = bufio.NewReaderSize(in.rec, 64<<10)
	return in
}

// newFileInput reads the file at path (opened as f, size bytes); ffmpeg
// reopens the path.
func newFileInput(f io.Reader, size int64, path string) *input {
	return &input{left: max(size, -1), r: bufio.NewReaderSize(f, 64<<10), path: path}
}

// Read makes input an io.Reader that keeps off and left.
func (in *input) Read(p []byte) (int, error) {
	n, err := in.r.Read(p)
	in.off += int64(n)
	if in.left >= 0 {
		in.left = max(0, in.left-int64(n))
	}
	return n, err
}

// readAll reads the rest of the input into memory: as many bytes as there
// are (never more than in.left when it is known), growing with the bytes
// actually read.
func (in *input) readAll() ([]byte, error) {
	var r io.Reader = in
	if in.left >= 0 {
		r = io.LimitReader(in, in.left)
	}
	var buf bytes.Buffer
	if in.left >= 0 {
		buf.Grow(int(min(in.left, 64<<20)))
	}
	_, err := buf.ReadFrom(r)
	return buf.Bytes(), err
}

// recorder keeps the first bytes read through it, so that a stream whose
// format turns out to need ffmpeg can be replayed to it.
type recorder struct {
	r    io.Reader
	buf  []byte
	full bool
}

const recordMax = 1 << 20

func (c *recorder) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if !c.full {
		if len(c.buf)+n > recordMax {
			c.full, c.buf = true, nil
		} else {
			c.buf = append(c.buf, p[:n]...)
		}
	}
	return n, err
}

// needFFmpeg says a stream is of a family decoded natively but in a variant
// only ffmpeg decodes here.
type needFFmpeg struct{ format string }

func (e *needFFmpeg) Error() string { return e.format + " has no native decoder" }

// Decode reads one audio stream and decodes it by its content: see the
// package documentation for the formats. size is the number of bytes r
// holds (the file size), < 0 when unknown: a header's claims are checked
// against it, and against the bytes actually read, before anything is
// allocated for them. Errors name the format and what is wrong (and offsets
// where that helps); a stream with no native decoder runs through ffmpeg
// unless o.NoFFmpeg. Decoders never panic on bad input: a panic inside one
// is returned as an error.
func (o Options) Decode(r io.Reader, size int64) (*Clip, error) {
	return o.decode(newInput(r, size))
}

func (o Options) decode(in *input) (*Clip, error) {
	return o.run(func() (*Clip, error) {
		if o.Raw != nil {
			return decodeRaw(in, *o.Raw, o)
		}
		return o.sniffAndDecode(in)
	})
}

// run calls decode, turning a panic into an error, checks the clip's shape
// and applies Strict.
func (o Options) run(decode func() (*Clip, error)) (clip *Clip, err error) {
	defer func() {
		if p := recover(); p != nil {
			clip, err = nil, fmt.Errorf("audio: the decoder failed on this input (%v); the file is damaged or uses a feature the decoder mishandles", p)
		}
	}()
	clip, err = decode()
	if err != nil {
		return nil, err
	}
	if clip.Channels < 1 || clip.SampleRate < 1 || len(clip.Samples)%clip.Channels != 0 {
		return nil, fmt.Errorf("audio: %s decoder returned %d samples of %d channels at %d Hz (a bug)", clip.Format, len(clip.Samples), clip.Channels, clip.SampleRate)
	}
	if clip.Truncated != nil && o.Strict {
		return nil, fmt.Errorf("%s: %s: %w", clip.Format, clip.Truncated, ErrTruncated)
	}
	return clip, nil
}

func (o Options) sniffAndDecode(in *input) (*Clip, error) {
	if err := skipID3v2(in); err != nil {
		return nil, err
	}
	head, err := in.r.Peek(sniffLen)
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, bufio.ErrBufferFull) {
		return nil, fmt.Errorf("audio: reading the first bytes: %w", err)
	}
	if len(head) == 0 {
		return nil, errors.New("audio: empty input")
	}
	for _, c := range codecs {
		if !c.sniff(head) {
			continue
		}
		clip, err := c.decode(in, o)
		var nf *needFFmpeg
		if errors.As(err, &nf) {
			return o.viaFFmpeg(in, nf.format)
		}
		return clip, err
	}
	name := ""
	for _, f := range foreign {
		if f.sniff(head) {
			name = f.name
			break
		}
	}
	if name == "" {
		if o.NoFFmpeg {
			return nil, fmt.Errorf("audio: unrecognised format: starts with %q; natively decoded are WAV, AIFF, FLAC, MP3, Ogg Vorbis and Ogg Opus (other formats need ffmpeg)", head[:min(len(head), 8)])
		}
		name = fmt.Sprintf("unrecognised format (starts with %q)", head[:min(len(head), 8)])
	}
	return o.viaFFmpeg(in, name)
}

// skipID3v2 skips ID3v2 tags (MP3 files start with one; some FLAC files
// too), checking the size they claim against the input.
func skipID3v2(in *input) error {
	for {
		h, err := in.r.Peek(10)
		if len(h) < 10 || string(h[:3]) != "ID3" {
			if len(h) >= 3 && string(h[:3]) == "ID3" && err != nil {
				return fmt.Errorf("audio: ID3v2 tag at offset %d: input ends inside its 10-byte header: %w", in.off, ErrTruncated)
			}
			return nil
		}
		if h[3] == 0xFF || h[4] == 0xFF || h[6]|h[7]|h[8]|h[9] >= 0x80 {
			return fmt.Errorf("audio: ID3v2 tag at offset %d has a malformed header % x", in.off, h)
		}
		n := int64(h[6])<<21 | int64(h[7])<<14 | int64(h[8])<<7 | int64(h[9])
		n += 10
		if h[5]&0x10 != 0 { // footer present
			n += 10
		}
		if in.left >= 0 && n > in.left {
			return fmt.Errorf("audio: ID3v2 tag at offset %d claims %d bytes but only %d remain: %w", in.off, n, in.left, ErrTruncated)
		}
		got, err := io.CopyN(io.Discard, in, n)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return fmt.Errorf("audio: ID3v2 tag at offset %d claims %d bytes, the input ends after %d: %w", in.off-got, n, got, ErrTruncated)
			}
			return fmt.Errorf("audio: skipping the ID3v2 tag: %w", err)
		}
		// ffmpeg needs no tag: replays start after it.
		if in.rec != nil && !in.rec.full {
			in.rec.buf = nil
			in.rec.buf = append(in.rec.buf, peekBuffered(in.r)...)
		}
	}
}

// peekBuffered returns the bytes r holds buffered, without consuming them.
func peekBuffered(r *bufio.Reader) []byte {
	b, _ := r.Peek(r.Buffered())
	return b
}

// samples is an append-only sample buffer that honours Options.MaxSamples.
// When decoding for a Stream (o.sink set), decoders that read their input
// progressively call flush after each block: the buffered samples go to the
// sink and the buffer starts again, so only one block is held.
type samples struct {
	buf     []float32
	max     int64
	sink    sampleSink
	flushed int64 // samples handed to sink
}

// sampleSink receives interleaved samples of channels at rate Hz; it owns x.
type sampleSink func(rate, channels int, x []float32) error

func newSamples(o Options, capHint int64) *samples {
	capHint = max(0, min(capHint, 1<<22))
	if o.MaxSamples > 0 {
		capHint = min(capHint, o.MaxSamples)
	}
	if o.sink != nil {
		capHint = min(capHint, streamBlock)
	}
	return &samples{buf: make([]float32, 0, capHint), max: o.MaxSamples, sink: o.sink}
}

// streamBlock is the sample capacity of a block handed to a sink.
const streamBlock = 1 << 16

// total is the number of samples decoded so far (flushed ones included).
func (s *samples) total() int64 { return s.flushed + int64(len(s.buf)) }

// flush hands the buffered samples (whole frames of channels at rate Hz) to
// the sink, if there is one.
func (s *samples) flush(rate, channels int) error {
	if s.sink == nil || len(s.buf) == 0 {
		return nil
	}
	b := s.buf
	s.flushed += int64(len(b))
	s.buf = make([]float32, 0, max(cap(b), streamBlock))
	return s.sink(rate, channels, b)
}

// room says whether n more samples fit.
func (s *samples) room(n int) error {
	if s.max > 0 && s.total()+int64(n) > s.max {
		return fmt.Errorf("%w: it decodes to more than %d samples (Options.MaxSamples)", ErrTooLong, s.max)
	}
	return nil
}

// finite checks that v holds finite float32 values.
func finite(what string, v []float32, first, channels int) error {
	for i, x := range v {
		if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
			k := first + i
			return fmt.Errorf("%s: sample %d (frame %d, channel %d) is %v; want a finite value", what, k, k/channels, k%channels, x)
		}
	}
	return nil
}

var be = binary.BigEndian
