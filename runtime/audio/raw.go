package audio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// RawFormat is the layout of headerless PCM, as `arecord -t raw` or
// `ffmpeg -f s16le` write it: interleaved frames of Channels samples.
type RawFormat struct {
	// Encoding is "s16le" (signed 16-bit little-endian, scaled over 2^15)
	// or "f32le" (IEEE float 32-bit little-endian, passed through; it must
	// be finite).
	Encoding string
	Rate     int // Hz, >= 1
	Channels int // >= 1
}

// RawEncodings lists the encodings RawFormat accepts.
func RawEncodings() []string { return []string{"s16le", "f32le"} }

func (f RawFormat) width() (int, error) {
	switch f.Encoding {
	case "s16le":
		return 2, nil
	case "f32le":
		return 4, nil
	}
	return 0, fmt.Errorf("raw: unknown encoding %q; want s16le or f32le", f.Encoding)
}

// Check validates the layout.
func (f RawFormat) Check() error {
	if _, err := f.width(); err != nil {
		return err
	}
	if f.Rate < 1 || f.Rate > 10_000_000 {
		return fmt.Errorf("raw: sample rate %d Hz out of range; want 1..10000000", f.Rate)
	}
	if f.Channels < 1 || f.Channels > 64 {
		return fmt.Errorf("raw: %d channels out of range; want 1..64", f.Channels)
	}
	return nil
}

// decodeRaw reads headerless PCM to the end of the input; a trailing
// partial frame is dropped and reported as truncation.
func decodeRaw(in *input, f RawFormat, o Options) (*Clip, error) {
	if err := f.Check(); err != nil {
		return nil, err
	}
	w, _ := f.width()
	ba := w * f.Channels
	capHint := int64(unknownCap)
	if in.left >= 0 {
		capHint = in.left / int64(w)
	}
	out := newSamples(o, capHint)
	clip := &Clip{SampleRate: f.Rate, Channels: f.Channels, Format: "raw " + f.Encoding}
	block := make([]byte, max(1, (1<<16)/ba)*ba)
	for {
		n, err := io.ReadFull(in, block)
		whole := n - n%ba
		if e := out.room(whole / w); e != nil {
			return nil, fmt.Errorf("raw: %w", e)
		}
		for k := 0; k < whole; k += w {
			if w == 2 {
				out.buf = append(out.buf, float32(int16(binary.LittleEndian.Uint16(block[k:])))/(1<<15))
				continue
			}
			v := math.Float32frombits(binary.LittleEndian.Uint32(block[k:]))
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				i := int(out.total())
				return nil, fmt.Errorf("raw: sample %d (frame %d, channel %d) is %v; want a finite value", i, i/f.Channels, i%f.Channels, v)
			}
			out.buf = append(out.buf, v)
		}
		if e := out.flush(f.Rate, f.Channels); e != nil {
			return nil, e
		}
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("raw: reading: %w", err)
			}
			if n != whole {
				clip.Truncated = &Truncation{Detail: fmt.Sprintf("raw: the input ends inside a frame (%d of its %d bytes)", n-whole, ba)}
			}
			break
		}
	}
	clip.Samples = out.buf
	return clip, nil
}
