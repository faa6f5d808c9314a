package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
)

// Format tags of the fmt chunk.
const (
	tagPCM        = 0x0001
	tagFloat      = 0x0003
	tagALaw       = 0x0006
	tagMuLaw      = 0x0007
	tagIMAADPCM   = 0x0011
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

func sniffWAV(h []byte) bool {
	return len(h) >= 4 && (string(h[:4]) == "RIFF" || string(h[:4]) == "RF64" || string(h[:4]) == "BW64" ||
		string(h[:4]) == "RIFX" || string(h[:4]) == "FFIR") && !(len(h) >= 12 && string(h[8:12]) == "AVI ")
}

// decodeWAV reads a WAV stream: RIFF/WAVE, or RF64/BW64 with a ds64 chunk.
//
// Everything a header claims is checked against the input's size before
// anything is allocated, so a lying header cannot make it allocate more than
// about 8 bytes of samples per input byte (float32 per 4-bit ADPCM code).
// With the size unknown the sample buffer starts at no more than 4 MiB and
// grows with the bytes actually read.
//
// Sample formats: PCM with 8 (unsigned), 16, 24 or 32-bit containers
// (valid-bits fields below the container size are accepted: the data is
// left-justified), IEEE float 32 and 64 bit, G.711 µ-law and A-law (8-bit,
// expanded with ffmpeg's tables to 16-bit values), IMA ADPCM (4-bit, the
// WAV block layout; a short final block decodes as ffmpeg does, and the
// padding of the last block is kept, as ffmpeg keeps it: sox trims to the
// fact chunk's count instead), plain or as
// WAVE_FORMAT_EXTENSIBLE. Other format tags (Microsoft ADPCM, GSM, MP3, ...)
// and big-endian RIFX go to ffmpeg.
//
// Chunks: the fmt chunk must precede the data chunk; other chunks (LIST, fact,
// cue, bext, JUNK, ...) are skipped, honouring the pad byte after odd-sized
// chunks; parsing stops after the first data chunk. The RIFF (or ds64) total
// size is not trusted, since streaming writers leave it wrong; chunk sizes are.
//
// Size policy: a data chunk that claims more bytes than the input holds is
// decoded as far as it goes (whole frames or blocks) and reported in
// Clip.Truncated with the missing duration; a trailing partial frame is
// dropped. A RIFF data chunk of size 0xFFFFFFFF (the streaming placeholder)
// is read to the end of the input without a truncation report. A header
// that ends early is an error wrapping ErrTruncated. Float samples must be
// finite.
func decodeWAV(in *input, o Options) (*Clip, error) {
	d := &decoder{r: in, left: in.left, known: in.left >= 0, o: o}
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
	o     Options
}

// Sample encodings of a validated fmt chunk.
const (
	encPCM = iota
	encFloat
	encMuLaw
	encALaw
	encIMA
)

// format is a validated fmt chunk.
type format struct {
	channels   int
	rate       int
	blockAlign int // bytes per frame; per ADPCM block for encIMA
	container  int // bytes per sample: 1..4 for PCM, 4 or 8 for float, 1 for G.711
	enc        int
	name       string // for Clip.Format
}

// framesIn is how many frames n bytes of data decode to.
func (f *format) framesIn(n int64) int64 {
	if f.enc != encIMA {
		return n / int64(f.blockAlign)
	}
	full := n / int64(f.blockAlign) * imaBlockFrames(f.blockAlign, f.channels)
	if rest := int(n % int64(f.blockAlign)); rest >= 4*f.channels {
		full += imaBlockFrames(rest, f.channels)
	}
	return full
}

// imaBlockFrames is the frames of an IMA ADPCM block of n bytes (n >= 4*ch):
// the header sample, then 8 per 4 bytes of each channel (ffmpeg's count).
func imaBlockFrames(n, channels int) int64 {
	return 1 + int64((n-4*channels)/(4*channels))*8
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
		return nil, &needFFmpeg{"big-endian WAV (RIFX)"}
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
		f.name = fmt.Sprintf("WAV (PCM %d-bit)", bits)
		if f.container == 1 {
			f.name = "WAV (PCM 8-bit unsigned)"
		}
	case tagFloat:
		if bits != 32 && bits != 64 {
			return nil, fmt.Errorf("wav: IEEE float with %d bits per sample is not supported; want 32 or 64", bits)
		}
		f.container = bits / 8
		f.enc = encFloat
		f.name = fmt.Sprintf("WAV (float %d-bit)", bits)
	case tagMuLaw, tagALaw:
		if bits != 8 {
			return nil, fmt.Errorf("wav: %s with %d bits per sample; want 8", tagName(tag), bits)
		}
		f.container, f.enc, f.name = 1, encMuLaw, "WAV (µ-law)"
		if tag == tagALaw {
			f.enc, f.name = encALaw, "WAV (A-law)"
		}
	case tagIMAADPCM:
		if bits != 4 {
			return nil, fmt.Errorf("wav: IMA ADPCM with %d bits per sample is not supported; want 4", bits)
		}
		if f.blockAlign < 4*f.channels || f.blockAlign%(4*f.channels) != 0 {
			return nil, fmt.Errorf("wav: IMA ADPCM block align %d is not a positive multiple of 4 bytes x %d channels", f.blockAlign, f.channels)
		}
		f.enc, f.name = encIMA, "WAV (IMA ADPCM)"
		return f, nil
	default:
		return nil, &needFFmpeg{fmt.Sprintf("WAV with format tag 0x%04x (%s)", tag, tagName(tag))}
	}
	if valid > bits {
		return nil, fmt.Errorf("wav: fmt chunk says %d valid bits in a %d-bit container", valid, bits)
	}
	if want := f.channels * f.container; f.blockAlign != want {
		return nil, fmt.Errorf("wav: fmt chunk says %d channels of %d bits but block align is %d, want %d", f.channels, bits, f.blockAlign, want)
	}
	return f, nil
}

// readData decodes a data chunk of n bytes (to the end of input when
// stream). It reads whole frames (ADPCM blocks), about 64 KiB at a time.
func (d *decoder) readData(f *format, n int64, stream bool) (*Clip, error) {
	ba := int64(f.blockAlign)
	chunkOff := d.off - 8
	claimed := n
	if stream {
		n = d.left
	}
	avail := min(n, d.left)
	var capSamples int64
	if f.enc == encIMA {
		capSamples = f.framesIn(avail) * int64(f.channels)
	} else {
		capSamples = avail / int64(f.container)
	}
	if !d.known {
		capSamples = min(capSamples, unknownCap)
	}
	out := newSamples(d.o, capSamples)
	clip := &Clip{SampleRate: f.rate, Channels: f.channels, Format: f.name}
	block := make([]byte, max(1, (1<<16)/ba)*ba)
	read := int64(0)
	for read < n {
		want := min(int64(len(block)), n-read)
		got, err := io.ReadFull(d.r, block[:want])
		d.off += int64(got)
		d.left -= int64(got)
		read += int64(got)
		end := err != nil
		if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("wav: reading data at offset %d: %w", d.off, err)
		}
		whole := got - got%int(ba)
		if err := appendSamples(out, block[:whole], f); err != nil {
			return nil, err
		}
		if rest := got - whole; rest > 0 && (end || read == n) && f.enc == encIMA && rest >= 4*f.channels {
			if err := appendSamples(out, block[whole:got], f); err != nil { // a short final block
				return nil, err
			}
		}
		if err := out.flush(f.rate, f.channels); err != nil {
			return nil, err
		}
		if end {
			break
		}
	}
	clip.Samples = out.buf
	if !stream && read < claimed {
		clip.Truncated = &Truncation{
			Missing: frameDuration(f.framesIn(claimed)-out.total()/int64(f.channels), f.rate),
			Detail:  fmt.Sprintf("wav: data chunk at offset %d claims %d bytes, the input ends after %d", chunkOff, claimed, read),
		}
	}
	return clip, nil
}

// appendSamples converts whole frames (or ADPCM blocks: whole ones, or one
// short final block) in b to float32 and appends them.
func appendSamples(s *samples, b []byte, f *format) error {
	first := int(s.total())
	var n int
	switch {
	case f.enc == encIMA:
		n = int(f.framesIn(int64(len(b)))) * f.channels
	default:
		n = len(b) / f.container
	}
	if err := s.room(n); err != nil {
		return fmt.Errorf("wav: %w", err)
	}
	switch {
	case f.enc == encIMA:
		for len(b) > 0 {
			k := min(len(b), f.blockAlign)
			var err error
			if s.buf, err = decodeIMABlock(s.buf, b[:k], f.channels); err != nil {
				return err
			}
			b = b[k:]
		}
	case f.enc == encMuLaw:
		for _, v := range b {
			s.buf = append(s.buf, float32(muLaw[v])/(1<<15))
		}
	case f.enc == encALaw:
		for _, v := range b {
			s.buf = append(s.buf, float32(aLaw[v])/(1<<15))
		}
	case f.enc == encFloat && f.container == 4:
		for k := 0; k+4 <= len(b); k += 4 {
			v := math.Float32frombits(binary.LittleEndian.Uint32(b[k:]))
			if err := checkFinite(float64(v), first+k/4, f.channels); err != nil {
				return err
			}
			s.buf = append(s.buf, v)
		}
	case f.enc == encFloat:
		for k := 0; k+8 <= len(b); k += 8 {
			v := math.Float64frombits(binary.LittleEndian.Uint64(b[k:]))
			if err := checkFinite(v, first+k/8, f.channels); err != nil {
				return err
			}
			s.buf = append(s.buf, float32(v))
		}
	case f.container == 1:
		for _, v := range b {
			s.buf = append(s.buf, (float32(v)-128)/128)
		}
	case f.container == 2:
		for k := 0; k+2 <= len(b); k += 2 {
			s.buf = append(s.buf, float32(int16(binary.LittleEndian.Uint16(b[k:])))/(1<<15))
		}
	case f.container == 3:
		for k := 0; k+3 <= len(b); k += 3 {
			v := int32(uint32(b[k])<<8|uint32(b[k+1])<<16|uint32(b[k+2])<<24) >> 8
			s.buf = append(s.buf, float32(v)/(1<<23))
		}
	default:
		for k := 0; k+4 <= len(b); k += 4 {
			v := int32(binary.LittleEndian.Uint32(b[k:]))
			s.buf = append(s.buf, float32(float64(v)/(1<<31)))
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
