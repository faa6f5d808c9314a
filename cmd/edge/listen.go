package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"

	"github.com/edgespeech/edge/asr"
)

const listenUsage = "[--model DIR] [--format text|jsonl] [--raw s16le|f32le --rate HZ [--channels N]] [AUDIO | -]"

func init() {
	register(command{name: "listen", usage: listenUsage,
		summary: "live audio (stdin or a file) to partial and final words as it is spoken", run: runListen})
}

func runListen(ctx context.Context, args []string) error {
	fs := newFlags("listen", listenUsage)
	modelFlags(fs)
	batchFlags(fs)
	audioFlags(fs)
	fs.String("format", "text", "finals on stdout: text (one line an utterance) or jsonl (one JSON object an utterance, with words)")
	fs.Duration("stream-chunk", 0, "audio added per encoder step (default 480ms)")
	fs.Duration("stream-left", 0, "audio before each chunk encoded with it (default 4s)")
	fs.Duration("stream-look-ahead", 0, "audio after each chunk encoded with it (default 480ms)")
	fs.Bool("partials", false, "print partial hypotheses on stderr also when it is not a terminal")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 1 {
		return fmt.Errorf("need at most one AUDIO (default -, stdin): %w", errUsage)
	}
	k, err := loadConfig(fs, nil)
	if err != nil {
		return err
	}
	format := k.String("format")
	if format != "text" && format != "jsonl" {
		return fmt.Errorf("--format %q: want text or jsonl: %w", format, errUsage)
	}
	src, err := newAudioSource(k)
	if err != nil {
		return err
	}
	rec, err := openRecognizer(k)
	if err != nil {
		return err
	}
	defer rec.Close()
	rate := rec.Manifest().SampleRate
	stream, err := rec.NewStream(asr.StreamOptions{
		Chunk: k.Duration("stream_chunk"), Left: k.Duration("stream_left"), LookAhead: k.Duration("stream_look_ahead"),
	})
	if err != nil {
		return err
	}
	path := stdinName
	if fs.NArg() == 1 {
		path = fs.Arg(0)
	}
	in, err := openListenSource(src, path, rate)
	if err != nil {
		return err
	}
	defer in.Close()
	out := bufio.NewWriter(os.Stdout)
	p := &partialLine{w: os.Stderr, on: k.Bool("partials") || isTerminal(os.Stderr), tty: isTerminal(os.Stderr)}
	emit := func(rs []asr.StreamResult) error {
		for _, r := range rs {
			if !r.Final {
				p.show(r.Text)
				continue
			}
			p.clear()
			if err := writeFinal(out, format, r); err != nil {
				return err
			}
			if err := out.Flush(); err != nil {
				return err
			}
		}
		return nil
	}
	block := make([]float32, rate/10) // 100 ms a read
	for {
		n, rerr := in.Read(block)
		if n > 0 {
			rs, err := stream.Write(ctx, block[:n])
			if err != nil {
				return err
			}
			if err := emit(rs); err != nil {
				return err
			}
		}
		if errors.Is(rerr, io.EOF) {
			break
		}
		if rerr != nil {
			return rerr
		}
	}
	rs, err := stream.Close(ctx)
	if err != nil {
		return err
	}
	return emit(rs)
}

// writeFinal writes one utterance's final result.
func writeFinal(w io.Writer, format string, r asr.StreamResult) error {
	if format == "text" {
		_, err := fmt.Fprintln(w, r.Text)
		return err
	}
	type word struct {
		Word       string  `json:"word"`
		Start      float64 `json:"start"`
		End        float64 `json:"end"`
		Confidence float64 `json:"confidence"`
	}
	doc := struct {
		Utterance int     `json:"utterance"`
		Start     float64 `json:"start"`
		End       float64 `json:"end"`
		Text      string  `json:"text"`
		Words     []word  `json:"words"`
	}{r.Utterance, r.Start.Seconds(), r.End.Seconds(), r.Text, []word{}}
	for _, wd := range r.Words {
		doc.Words = append(doc.Words, word{wd.Text, wd.Start.Seconds(), wd.End.Seconds(), wd.Confidence})
	}
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(doc)
}

// partialLine shows the current partial hypothesis on stderr: rewritten in
// place on a terminal, one line each otherwise.
type partialLine struct {
	w       io.Writer
	on, tty bool
	shown   bool
}

func (p *partialLine) show(text string) {
	if !p.on {
		return
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s", text)
		p.shown = true
		return
	}
	fmt.Fprintf(p.w, "partial: %s\n", text)
}

func (p *partialLine) clear() {
	if p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
		p.shown = false
	}
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// sampleReader reads mono samples at the model's rate.
type sampleReader interface {
	Read(dst []float32) (int, error)
	Close() error
}

// openListenSource opens path (- is standard input): headerless PCM (--raw)
// is decoded as it arrives; an audio file is decoded whole, then fed in
// pieces.
func openListenSource(src *audioSource, path string, rate int) (sampleReader, error) {
	raw := src.opts.Raw
	if raw == nil {
		clip, err := src.load(path, rate)
		if err != nil {
			return nil, err
		}
		return &sliceReader{pcm: clip.Samples}, nil
	}
	if raw.Rate != rate {
		return nil, fmt.Errorf("--rate %d: live input must be at the model's %d Hz (e.g. arecord -r %d, ffmpeg -ar %d)", raw.Rate, rate, rate, rate)
	}
	size := 2
	if raw.Encoding == "f32le" {
		size = 4
	}
	f := os.Stdin
	if path != stdinName {
		var err error
		if f, err = os.Open(path); err != nil {
			return nil, err
		}
	}
	return &pcmReader{r: f, c: f, size: size, channels: raw.Channels, name: displayName(path)}, nil
}

// sliceReader feeds decoded samples.
type sliceReader struct{ pcm []float32 }

func (s *sliceReader) Read(dst []float32) (int, error) {
	if len(s.pcm) == 0 {
		return 0, io.EOF
	}
	n := copy(dst, s.pcm)
	s.pcm = s.pcm[n:]
	return n, nil
}

func (s *sliceReader) Close() error { return nil }

// pcmReader decodes interleaved little-endian PCM frames as they arrive,
// averaging channels. A Read returns once at least one frame is in; an
// incomplete frame waits for the next Read, and is dropped at the end.
type pcmReader struct {
	r              io.Reader
	c              io.Closer
	size, channels int
	name           string
	buf            []byte
	carry          int   // bytes of an incomplete frame at the start of buf
	read           int64 // bytes decoded before this Read
}

func (p *pcmReader) Read(dst []float32) (int, error) {
	frame := p.size * p.channels
	want := len(dst) * frame
	if len(p.buf) < want {
		p.buf = append(p.buf, make([]byte, want-len(p.buf))...)
	}
	m, err := io.ReadAtLeast(p.r, p.buf[p.carry:want], frame-p.carry)
	n := p.carry + m
	frames := n / frame
	for i := range frames {
		var sum float64
		for c := range p.channels {
			o := (i*p.channels + c) * p.size
			if p.size == 2 {
				sum += float64(int16(binary.LittleEndian.Uint16(p.buf[o:]))) / 32768
				continue
			}
			v := math.Float32frombits(binary.LittleEndian.Uint32(p.buf[o:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return 0, fmt.Errorf("%s: the f32le sample at byte %d is %v", p.name, p.read+int64(o), v)
			}
			sum += float64(v)
		}
		dst[i] = float32(sum / float64(p.channels))
	}
	p.carry = copy(p.buf, p.buf[frames*frame:n])
	p.read += int64(frames * frame)
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = io.EOF
	}
	return frames, err
}

func (p *pcmReader) Close() error {
	if p.c == os.Stdin {
		return nil
	}
	return p.c.Close()
}
