package audio

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
)

func sniffAIFF(h []byte) bool {
	return len(h) >= 12 && string(h[:4]) == "FORM" && (string(h[8:12]) == "AIFF" || string(h[8:12]) == "AIFC")
}

// aiffEnc is a validated AIFF/AIFF-C sample encoding.
type aiffEnc struct {
	container int // bytes per sample
	little    bool
	float     bool
	law       int // encMuLaw, encALaw or 0
	unsigned  bool
	name      string
}

// decodeAIFF reads an AIFF or AIFF-C file (Apple's Audio Interchange File
// Format, big-endian chunks; the input is read into memory first, so it is
// bounded by the real input). Chunks may come in any order; COMM says the
// layout, SSND holds the frames (after its offset field). Encodings: PCM of
// 1..32 bits in 1..4-byte big-endian containers (AIFF, AIFF-C NONE/twos;
// signed, 8-bit too, scaled over 2^(container bits-1)), little-endian sowt,
// float fl32/FL32 and fl64/FL64, µ-law and A-law (ulaw/alaw, 16-bit values
// from ffmpeg's tables), unsigned 8-bit "raw "; other AIFF-C compression
// types (ima4, MAC3, QDM2, ...) go to ffmpeg. The decoded length is the SSND
// data (as ffmpeg reads it); an SSND chunk that claims more bytes than the
// input holds is decoded as far as it goes and reported as truncated.
func decodeAIFF(in *input, o Options) (*Clip, error) {
	data, err := in.readAll()
	if err != nil {
		return nil, fmt.Errorf("aiff: reading: %w", err)
	}
	aifc := string(data[8:12]) == "AIFC"
	kind := "AIFF"
	if aifc {
		kind = "AIFF-C"
	}
	var (
		haveComm                bool
		channels, bits          int
		frames                  uint32
		rate                    int
		enc                     aiffEnc
		ssnd                    []byte
		ssndOff, ssndClaim      int64
		haveSSND, ssndTruncated bool
	)
	for pos := 12; pos+8 <= len(data); {
		id := string(data[pos : pos+4])
		size := int64(be.Uint32(data[pos+4:]))
		bodyEnd := min(int64(len(data)), int64(pos)+8+size)
		body := data[pos+8 : bodyEnd]
		short := int64(len(body)) < size
		switch id {
		case "COMM":
			if haveComm {
				return nil, fmt.Errorf("aiff: second COMM chunk at offset %d", pos)
			}
			need := 18
			if aifc {
				need = 22
			}
			if len(body) < need {
				if short {
					return nil, fmt.Errorf("aiff: COMM chunk at offset %d: input ends after %d of its %d bytes: %w", pos, len(body), size, ErrTruncated)
				}
				return nil, fmt.Errorf("aiff: COMM chunk at offset %d has %d bytes, want >= %d", pos, size, need)
			}
			haveComm = true
			channels = int(int16(be.Uint16(body[0:2])))
			frames = be.Uint32(body[2:6])
			bits = int(int16(be.Uint16(body[6:8])))
			r, err := extended80(body[8:18])
			if err != nil {
				return nil, fmt.Errorf("aiff: COMM chunk: %w", err)
			}
			rate = r
			comp := "NONE"
			if aifc {
				comp = string(body[18:22])
			}
			if enc, err = aiffEncoding(kind, comp, bits); err != nil {
				return nil, err
			}
		case "SSND":
			if haveSSND {
				break // ffmpeg too reads the first one
			}
			haveSSND = true
			if len(body) < 8 {
				if short {
					return nil, fmt.Errorf("aiff: SSND chunk at offset %d: input ends inside its header: %w", pos, ErrTruncated)
				}
				return nil, fmt.Errorf("aiff: SSND chunk at offset %d has %d bytes, want >= 8", pos, size)
			}
			off := int64(be.Uint32(body[0:4]))
			if off > size-8 {
				return nil, fmt.Errorf("aiff: SSND chunk at offset %d has a data offset of %d bytes beyond its %d bytes", pos, off, size)
			}
			ssndOff = int64(pos)
			ssndClaim = size - 8 - off
			start := min(int64(len(body)), 8+off)
			ssnd = body[start:]
			ssndTruncated = short
		}
		pos = int(min(int64(len(data)), int64(pos)+8+size+size&1))
	}
	if !haveComm {
		return nil, errors.New("aiff: no COMM chunk")
	}
	if channels < 1 {
		return nil, fmt.Errorf("aiff: COMM chunk says %d channels", channels)
	}
	clip := &Clip{SampleRate: rate, Channels: channels, Format: enc.name}
	if !haveSSND {
		if frames == 0 {
			return clip, nil
		}
		return nil, fmt.Errorf("aiff: no SSND chunk, but COMM says %d frames", frames)
	}
	ba := channels * enc.container
	n := len(ssnd) / ba
	out := newSamples(o, int64(n*channels))
	if err := out.room(n * channels); err != nil {
		return nil, fmt.Errorf("aiff: %w", err)
	}
	b := ssnd[:n*ba]
	for k := 0; k < len(b); k += enc.container {
		v, err := enc.sample(b[k:])
		if err != nil {
			i := k / enc.container
			return nil, fmt.Errorf("aiff: sample %d (frame %d, channel %d): %w", i, i/channels, i%channels, err)
		}
		out.buf = append(out.buf, v)
	}
	clip.Samples = out.buf
	if ssndTruncated {
		claimed := ssndClaim / int64(ba)
		clip.Truncated = &Truncation{
			Missing: frameDuration(max(claimed, int64(frames))-int64(n), rate),
			Detail:  fmt.Sprintf("aiff: SSND chunk at offset %d claims %d bytes of frames, the input ends after %d", ssndOff, ssndClaim, len(ssnd)),
		}
	}
	return clip, nil
}

func aiffEncoding(kind, comp string, bits int) (aiffEnc, error) {
	pcm := func(little bool, name string) (aiffEnc, error) {
		if bits < 1 || bits > 32 {
			return aiffEnc{}, fmt.Errorf("aiff: %s PCM with %d bits per sample is not supported; want 1..32", kind, bits)
		}
		return aiffEnc{container: (bits + 7) / 8, little: little, name: fmt.Sprintf("%s (%s %d-bit)", kind, name, bits)}, nil
	}
	switch comp {
	case "NONE", "twos":
		return pcm(false, "PCM")
	case "sowt":
		return pcm(true, "PCM little-endian")
	case "fl32", "FL32":
		return aiffEnc{container: 4, float: true, name: kind + " (float 32-bit)"}, nil
	case "fl64", "FL64":
		return aiffEnc{container: 8, float: true, name: kind + " (float 64-bit)"}, nil
	case "ulaw", "ULAW":
		return aiffEnc{container: 1, law: encMuLaw, name: kind + " (µ-law)"}, nil
	case "alaw", "ALAW":
		return aiffEnc{container: 1, law: encALaw, name: kind + " (A-law)"}, nil
	case "raw ":
		return aiffEnc{container: 1, unsigned: true, name: kind + " (PCM 8-bit unsigned)"}, nil
	}
	return aiffEnc{}, &needFFmpeg{fmt.Sprintf("%s with compression type %q", kind, comp)}
}

// sample decodes one sample at the start of b (len(b) >= e.container).
func (e aiffEnc) sample(b []byte) (float32, error) {
	switch {
	case e.law == encMuLaw:
		return float32(muLaw[b[0]]) / (1 << 15), nil
	case e.law == encALaw:
		return float32(aLaw[b[0]]) / (1 << 15), nil
	case e.unsigned:
		return (float32(b[0]) - 128) / 128, nil
	case e.float && e.container == 4:
		v := math.Float32frombits(be.Uint32(b))
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return 0, fmt.Errorf("%v; want a finite value", v)
		}
		return v, nil
	case e.float:
		v := math.Float64frombits(be.Uint64(b))
		if !(math.Abs(v) <= math.MaxFloat32) {
			return 0, fmt.Errorf("%g; want a finite float32 value", v)
		}
		return float32(v), nil
	}
	var u uint32
	if e.little {
		for i := e.container - 1; i >= 0; i-- {
			u = u<<8 | uint32(b[i])
		}
	} else {
		for i := range e.container {
			u = u<<8 | uint32(b[i])
		}
	}
	shift := 32 - 8*e.container
	v := int32(u<<shift) >> shift
	if e.container == 4 {
		return float32(float64(v) / (1 << 31)), nil
	}
	return float32(v) / float32(int32(1)<<(8*e.container-1)), nil
}

// extended80 decodes an IEEE 754 80-bit extended sample rate to whole Hz.
func extended80(b []byte) (int, error) {
	exp := int(binary.BigEndian.Uint16(b[0:2]))
	mant := binary.BigEndian.Uint64(b[2:10])
	neg := exp&0x8000 != 0
	exp &= 0x7FFF
	v := math.Ldexp(float64(mant), exp-16383-63)
	if neg || exp == 0x7FFF || !(v >= 1 && v <= math.MaxInt32) {
		return 0, fmt.Errorf("sample rate % x is not a rate in 1..2^31-1 Hz", b)
	}
	return int(math.Round(v)), nil
}
