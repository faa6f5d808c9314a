package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// ErrTruncated is wrapped by Decode's errors for input that ends before a
// chunk it promises (a truncated file, or a size field that lies).
var ErrTruncated = errors.New("input ends early (truncated file or a size field that lies)")

// Format tags of the fmt chunk.
const (
	tagPCM        = 0x0001
	tagFloat      = 0x0003
	tagExtensible = 0xFFFE
)

// ksdataSuffix is bytes 2..15 of every KSDATAFORMAT_SUBTYPE GUID; bytes 0..1
// hold the format tag (00000001-0000-0010-8000-00AA00389B71 for PCM).
var ksdataSuffix = []byte{0x00, 0x00, 0x00, 0x00, 0x10, 0x00, 0x80, 0x00, 0x00, 0xAA, 0x00, 0x38, 0x9B, 0x71}

// streamSize is the data size a streaming writer leaves when it cannot seek
// back to patch the header.
const streamSize = 0xFFFFFFFF

// unknownCap bounds the up-front allocation when the input size is unknown.
const unknownCap = 1 << 20

// Decode reads a WAV stream: RIFF/WAVE, or RF64/BW64 with a ds64 chunk.
//
// size is the number of bytes r holds (the file size): everything a header
// claims is checked against it before anything is allocated, so a lying header
// cannot make Decode allocate more than about 4*size bytes of samples (float32
// per 1-byte sample). size < 0 means unknown: the sample buffer then starts
// at no more than 4 MiB and grows with the bytes actually read. If r holds
// fewer bytes than size, the shortfall is reported as truncation.
//
// Sample formats: PCM with 8 (unsigned), 16, 24 or 32-bit containers
// (valid-bits fields below the container size are accepted: the data is
// left-justified), IEEE float 32 and 64 bit, plain or as
// WAVE_FORMAT_EXTENSIBLE. Other formats (ADPCM, A-law, mu-law, MP3, ...) and
// big-endian RIFX are errors naming the format.
//
// Chunks: the fmt chunk must precede the data chunk; other chunks (LIST, fact,
// cue, bext, JUNK, ...) are skipped, honouring the pad byte after odd-sized
// chunks; parsing stops after the first data chunk. The RIFF (or ds64) total
// size is not trusted, since streaming writers leave it wrong; chunk sizes are.
//
// Size policy: a chunk that claims more bytes than remain is an error
// wrapping ErrTruncated; nothing is decoded from a truncated data chunk. The one
// exception is the streaming placeholder: a RIFF data chunk of size 0xFFFFFFFF
// is read to the end of the input, whole frames only. A data size that is not
// a whole number of frames is an error. Float samples must be finite.
func Decode(r io.Reader, size int64) (*Clip, error) {
	d := &decoder{r: r, left: size, known: size >= 0}
	if !d.known {
		d.left = math.MaxInt64
	}
	return d.decode()
}

type decoder struct {
	r     io.Reader
	left  int64 // bytes not yet consumed (MaxInt64 when unknown)
	known bool  // whether left is the real remaining size
	off   int64 // offset of the next byte
	buf   [64]byte
}

// format is a validated fmt chunk.
type format struct {
	channels   int
	rate       int
	blockAlign int
	container  int  // bytes per sample: 1..4 for PCM, 4 or 8 for float
	float      bool // IEEE float rather than integer PCM
}

func (d *decoder) decode() (*Clip, error) {
	hdr, err := d.read(12, "RIFF header")
	if errors.Is(err, errEOF) {
		return nil, errors.New("wav: empty input")
	}
	if err != nil {
		return nil, err
	}
	id := string(hdr[:4])
	switch id {
	case "RIFF", "RF64", "BW64":
	case "RIFX", "FFIR":
		return nil, errors.New("wav: big-endian RIFX files are not supported")
	default:
		return nil, fmt.Errorf("wav: not a WAV file: starts with %q, want RIFF, RF64 or BW64", hdr[:4])
	}
	if form := hdr[8:12]; string(form) != "WAVE" {
		return nil, fmt.Errorf("wav: RIFF form type is %q, want WAVE", form)
	}
	rf64 := id != "RIFF"
	var (
		fmtc   *format
		data64 int64 = -1 // data size from ds64
	)
	for {
		start := d.off
		ch, err := d.read(8, "chunk header")
		if err != nil {
			if errors.Is(err, errEOF) {
				if fmtc == nil {
					return nil, errors.New("wav: no fmt chunk")
				}
				return nil, errors.New("wav: no data chunk")
			}
			return nil, err
		}
		cid := string(ch[:4])
		csize := int64(binary.LittleEndian.Uint32(ch[4:8]))
		switch cid {
		case "ds64":
			if !rf64 {
				return nil, fmt.Errorf("wav: ds64 chunk at offset %d in a RIFF (not RF64) file", start)
			}
			if csize < 28 {
				return nil, fmt.Errorf("wav: ds64 chunk at offset %d has %d bytes, want >= 28", start, csize)
			}
			b, err := d.mustRead(24, "ds64 chunk")
			if err != nil {
				return nil, err
			}
			data64 = int64(binary.LittleEndian.Uint64(b[8:16]))
			if data64 < 0 {
				return nil, fmt.Errorf("wav: ds64 data size %d does not fit in int64", uint64(data64))
			}
			if err := d.skip(csize-24, "ds64 chunk"); err != nil {
				return nil, err
			}
		case "fmt ":
			if fmtc != nil {
				return nil, fmt.Errorf("wav: second fmt chunk at offset %d", start)
			}
			if fmtc, err = d.readFormat(csize); err != nil {
				return nil, err
			}
		case "data":
			if fmtc == nil {
				return nil, fmt.Errorf("wav: data chunk at offset %d comes before any fmt chunk", start)
			}
			stream := false
			switch {
			case rf64 && csize == streamSize:
				if data64 < 0 {
					return nil, fmt.Errorf("wav: %s data chunk at offset %d defers its size to a ds64 chunk, but there is none", id, start)
				}
				csize = data64
			case !rf64 && csize == streamSize:
				stream = true
			}
			return d.readData(fmtc, csize, stream)
		default:
			if err := d.skip(csize, fmt.Sprintf("%q chunk", ch[:4])); err != nil {
				return nil, err
			}
		}
		if csize%2 == 1 && d.left > 0 {
			// A missing final pad byte is harmless: the next header read
			// finds the end of the input.
			if err := d.skip(1, "pad byte"); err != nil && !errors.Is(err, ErrTruncated) {
				return nil, err
			}
		}
	}
}

// readFormat parses a fmt chunk of n bytes.
func (d *decoder) readFormat(n int64) (*format, error) {
	if n < 16 {
		return nil, fmt.Errorf("wav: fmt chunk has %d bytes, want >= 16", n)
	}
	keep := min(n, 40)
	b, err := d.mustRead(int(keep), "fmt chunk")
	if err != nil {
		return nil, err
	}
	if err := d.skip(n-keep, "fmt chunk"); err != nil {
		return nil, err
	}
	le := binary.LittleEndian
	tag := le.Uint16(b[0:2])
	f := &format{
		channels:   int(le.Uint16(b[2:4])),
		rate:       int(le.Uint32(b[4:8])),
		blockAlign: int(le.Uint16(b[12:14])),
	}
	bits := int(le.Uint16(b[14:16]))
	valid := bits
	if tag == tagExtensible {
		if n < 40 {
			return nil, fmt.Errorf("wav: WAVE_FORMAT_EXTENSIBLE fmt chunk has %d bytes, want 40", n)
		}
		if cb := le.Uint16(b[16:18]); cb < 22 {
			return nil, fmt.Errorf("wav: WAVE_FORMAT_EXTENSIBLE extension size is %d, want 22", cb)
		}
		if v := int(le.Uint16(b[18:20])); v != 0 {
			valid = v
		}
		guid := b[24:40]
		if !bytes.Equal(guid[2:], ksdataSuffix) {
			return nil, fmt.Errorf("wav: WAVE_FORMAT_EXTENSIBLE sub-format GUID % x is not a KSDATAFORMAT_SUBTYPE", guid)
		}
		tag = le.Uint16(guid[0:2])
	}
	if f.channels == 0 {
		return nil, errors.New("wav: fmt chunk says 0 channels")
	}
	if f.rate == 0 {
		return nil, errors.New("wav: fmt chunk says sample rate 0 Hz")
	}
	switch tag {
	case tagPCM:
		if bits < 1 || bits > 32 {
			return nil, fmt.Errorf("wav: PCM with %d bits per sample is not supported; want 8, 16, 24 or 32", bits)
		}
		f.container = (bits + 7) / 8
	case tagFloat:
		if bits != 32 && bits != 64 {
			return nil, fmt.Errorf("wav: IEEE float with %d bits per sample is not supported; want 32 or 64", bits)
		}
		f.container = bits / 8
		f.float = true
	default:
		return nil, fmt.Errorf("wav: unsupported format tag 0x%04x (%s); want PCM (1), IEEE float (3) or WAVE_FORMAT_EXTENSIBLE with one of them", tag, tagName(tag))
	}
	if valid > bits {
		return nil, fmt.Errorf("wav: fmt chunk says %d valid bits in a %d-bit container", valid, bits)
	}
	if want := f.channels * f.container; f.blockAlign != want {
		return nil, fmt.Errorf("wav: fmt chunk says %d channels of %d bits but block align is %d, want %d", f.channels, bits, f.blockAlign, want)
	}
	return f, nil
}

// readData decodes a data chunk of n bytes (to the end of input when stream).
func (d *decoder) readData(f *format, n int64, stream bool) (*Clip, error) {
	ba := int64(f.blockAlign)
	if stream {
		n = d.left
		if d.known {
			n -= n % ba
		}
	} else {
		if n > d.left {
			return nil, fmt.Errorf("wav: data chunk at offset %d claims %d bytes but only %d remain: %w", d.off-8, n, d.left, ErrTruncated)
		}
		if n%ba != 0 {
			return nil, fmt.Errorf("wav: data chunk size %d is not a whole number of %d-byte frames (%d channels x %d bytes)", n, ba, f.channels, f.container)
		}
	}
	capBytes := n
	if !d.known {
		capBytes = min(n, unknownCap)
	}
	clip := &Clip{SampleRate: f.rate, Channels: f.channels,
		Samples: make([]float32, 0, capBytes/int64(f.container))}
	// Read whole frames, about 64 KiB at a time.
	block := make([]byte, max(1, (1<<16)/ba)*ba)
	for n > 0 {
		want := min(int64(len(block)), n)
		got, err := io.ReadFull(d.r, block[:want])
		d.off += int64(got)
		d.left -= int64(got)
		n -= int64(got)
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
				return nil, fmt.Errorf("wav: reading data at offset %d: %w", d.off, err)
			}
			if !stream {
				return nil, fmt.Errorf("wav: data ends at offset %d, %d bytes before the end its chunk claims: %w", d.off, n, ErrTruncated)
			}
			got -= got % int(ba) // a stream cut mid-frame: drop the partial frame
			n = 0
		}
		if err := appendSamples(clip, block[:got], f); err != nil {
			return nil, err
		}
	}
	return clip, nil
}

// appendSamples converts whole frames in b to float32 and appends them.
func appendSamples(c *Clip, b []byte, f *format) error {
	first := len(c.Samples)
	switch {
	case f.float && f.container == 4:
		for k := 0; k+4 <= len(b); k += 4 {
			v := math.Float32frombits(binary.LittleEndian.Uint32(b[k:]))
			if err := checkFinite(float64(v), first+k/4, f.channels); err != nil {
				return err
			}
			c.Samples = append(c.Samples, v)
		}
	case f.float:
		for k := 0; k+8 <= len(b); k += 8 {
			v := math.Float64frombits(binary.LittleEndian.Uint64(b[k:]))
			if err := checkFinite(v, first+k/8, f.channels); err != nil {
				return err
			}
			c.Samples = append(c.Samples, float32(v))
		}
	case f.container == 1:
		for _, v := range b {
			c.Samples = append(c.Samples, (float32(v)-128)/128)
		}
	case f.container == 2:
		for k := 0; k+2 <= len(b); k += 2 {
			c.Samples = append(c.Samples, float32(int16(binary.LittleEndian.Uint16(b[k:])))/(1<<15))
		}
	case f.container == 3:
		for k := 0; k+3 <= len(b); k += 3 {
			v := int32(uint32(b[k])<<8|uint32(b[k+1])<<16|uint32(b[k+2])<<24) >> 8
			c.Samples = append(c.Samples, float32(v)/(1<<23))
		}
	default:
		for k := 0; k+4 <= len(b); k += 4 {
			v := int32(binary.LittleEndian.Uint32(b[k:]))
			c.Samples = append(c.Samples, float32(float64(v)/(1<<31)))
		}
	}
	return nil
}

func checkFinite(v float64, i, channels int) error {
	if !(math.Abs(v) <= math.MaxFloat32) {
		return fmt.Errorf("wav: sample %d (frame %d, channel %d) is %g; want a finite float32 value", i, i/channels, i%channels, v)
	}
	return nil
}

// errEOF marks input that ends exactly where a chunk header would start.
var errEOF = errors.New("wav: end of input")

// mustRead is read for bytes that must be there: the end of the input is an
// error wrapping ErrTruncated.
func (d *decoder) mustRead(n int, what string) ([]byte, error) {
	b, err := d.read(n, what)
	if errors.Is(err, errEOF) {
		return nil, fmt.Errorf("wav: %s at offset %d: input ends: %w", what, d.off, ErrTruncated)
	}
	return b, err
}

// read consumes exactly n (<= 64) bytes; what names them in errors. It
// returns errEOF when the input ends before the first of them.
func (d *decoder) read(n int, what string) ([]byte, error) {
	if int64(n) > d.left {
		if d.left == 0 {
			return nil, errEOF
		}
		return nil, fmt.Errorf("wav: %s at offset %d needs %d bytes but only %d remain: %w", what, d.off, n, d.left, ErrTruncated)
	}
	b := d.buf[:n]
	got, err := io.ReadFull(d.r, b)
	d.off += int64(got)
	d.left -= int64(got)
	switch {
	case err == nil:
		return b, nil
	case errors.Is(err, io.EOF):
		return nil, errEOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		return nil, fmt.Errorf("wav: %s at offset %d: input ends after %d of %d bytes: %w", what, d.off-int64(got), got, n, ErrTruncated)
	default:
		return nil, fmt.Errorf("wav: reading %s at offset %d: %w", what, d.off-int64(got), err)
	}
}

// skip consumes n bytes without keeping them.
func (d *decoder) skip(n int64, what string) error {
	if n > d.left {
		return fmt.Errorf("wav: %s at offset %d claims %d bytes but only %d remain: %w", what, d.off, n, d.left, ErrTruncated)
	}
	got, err := io.CopyN(io.Discard, d.r, n)
	d.off += got
	d.left -= got
	if err != nil {
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("wav: %s at offset %d: input ends after %d of %d bytes: %w", what, d.off-got, got, n, ErrTruncated)
		}
		return fmt.Errorf("wav: skipping %s at offset %d: %w", what, d.off-got, err)
	}
	return nil
}

// tagName names common non-PCM format tags for error messages.
func tagName(tag uint16) string {
	switch tag {
	case 0x0002:
		return "Microsoft ADPCM"
	case 0x0006:
		return "A-law"
	case 0x0007:
		return "mu-law"
	case 0x0011:
		return "IMA ADPCM"
	case 0x0031:
		return "GSM 6.10"
	case 0x0050:
		return "MPEG"
	case 0x0055:
		return "MPEG layer 3"
	default:
		return "unknown"
	}
}
