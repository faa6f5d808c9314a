package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	mp3 "github.com/hajimehoshi/go-mp3"
)

// mpegFrame is a parsed MPEG audio frame header.
type mpegFrame struct {
	version int // 1, 2, or 25 (MPEG-2.5)
	layer   int
	rate    int
	mono    bool
	size    int // bytes, header included
	spf     int // samples per frame and channel
}

var (
	l3Bitrates1 = [15]int{0, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320}
	l3Bitrates2 = [15]int{0, 8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160}
	mpegRates   = map[int][3]int{1: {44100, 48000, 32000}, 2: {22050, 24000, 16000}, 25: {11025, 12000, 8000}}
)

// parseMPEG parses a layer III frame header at the start of b; free-format
// (bitrate index 0) and reserved fields are refused.
func parseMPEG(b []byte) (mpegFrame, bool) {
	if len(b) < 4 || b[0] != 0xFF || b[1]&0xE0 != 0xE0 {
		return mpegFrame{}, false
	}
	var f mpegFrame
	switch (b[1] >> 3) & 3 {
	case 0:
		f.version = 25
	case 2:
		f.version = 2
	case 3:
		f.version = 1
	default:
		return f, false
	}
	if (b[1]>>1)&3 != 1 { // layer III only
		return f, false
	}
	f.layer = 3
	bi, ri := int(b[2]>>4), int(b[2]>>2)&3
	if bi == 0 || bi == 15 || ri == 3 {
		return f, false
	}
	f.rate = mpegRates[f.version][ri]
	pad := int(b[2]>>1) & 1
	f.mono = b[3]>>6 == 3
	if f.version == 1 {
		f.size = 144000*l3Bitrates1[bi]/f.rate + pad
		f.spf = 1152
	} else {
		f.size = 72000*l3Bitrates2[bi]/f.rate + pad
		f.spf = 576
	}
	return f, true
}

func sniffMP3(h []byte) bool {
	f, ok := parseMPEG(h)
	if !ok {
		return false
	}
	// A second header where the first frame ends, when the sniffed bytes
	// reach that far, guards against a stray 0xFFE sync.
	if len(h) >= f.size+4 {
		g, ok := parseMPEG(h[f.size:])
		return ok && g.version == f.version && g.rate == f.rate
	}
	return true
}

// lameInfo is what a Xing/Info (and LAME) or VBRI header in the first frame
// says.
type lameInfo struct {
	frames     int64 // audio frames after the header frame; 0 unknown
	delay, pad int   // encoder delay and padding (LAME tag), samples
	lame       bool  // delay and pad are known
}

// xingOffsets are where a Xing/Info tag starts after the 4-byte header,
// by [MPEG-1?][mono?] (ffmpeg's xing_offtbl).
func xingOffset(f mpegFrame) int {
	switch {
	case f.version == 1 && !f.mono:
		return 4 + 32
	case f.version == 1 || !f.mono:
		return 4 + 17
	default:
		return 4 + 9
	}
}

// parseXing reads the info header of the first frame b (the whole frame);
// ok is false when b is an ordinary audio frame.
func parseXing(b []byte, f mpegFrame) (lameInfo, bool) {
	var li lameInfo
	if o := xingOffset(f); len(b) >= o+8 && (string(b[o:o+4]) == "Xing" || string(b[o:o+4]) == "Info") {
		flags := binary.BigEndian.Uint32(b[o+4:])
		p := o + 8
		if flags&1 != 0 && len(b) >= p+4 {
			li.frames = int64(binary.BigEndian.Uint32(b[p:]))
			p += 4
		}
		if flags&2 != 0 {
			p += 4
		}
		if flags&4 != 0 {
			p += 100
		}
		if flags&8 != 0 {
			p += 4
		}
		// LAME extension: 9-byte version, revision, lowpass, peak (4),
		// radio and audiophile gain (2 + 2), flags, bitrate, then delay and
		// padding as two 12-bit fields.
		if len(b) >= p+24 {
			v := string(b[p : p+4])
			if v == "LAME" || v == "Lavf" || v == "Lavc" {
				d := b[p+21:]
				li.delay = int(d[0])<<4 | int(d[1])>>4
				li.pad = int(d[1]&0x0F)<<8 | int(d[2])
				li.lame = true
			}
		}
		return li, true
	}
	if len(b) >= 4+32+18 && string(b[36:40]) == "VBRI" {
		li.frames = int64(binary.BigEndian.Uint32(b[36+14:]))
		return li, true
	}
	return li, false
}

// decodeMP3 reads an MPEG-1 or MPEG-2 layer III stream (after any ID3v2 tag)
// with github.com/hajimehoshi/go-mp3, which synthesises 16-bit samples:
// the result is those values over 2^15 (lossy: see the package's parity
// test for the difference from ffmpeg's float decoder). The input is read
// into memory and its frames are walked here first: junk between frames is
// skipped by resynchronising, a trailing ID3v1/APE tag ends the stream, and
// a final frame cut short is reported as truncation (with the missing
// duration when a Xing/Info header gives the frame count). A Xing/Info/VBRI
// header frame is not decoded; a LAME tag's encoder delay and padding are
// trimmed as ffmpeg trims them (delay + 529 samples from the start, the
// output ends at frames*spf - padding + 529), so the length equals ffmpeg's.
// Mono streams give one channel, others two. MPEG-2.5 (8-12 kHz) streams
// go to ffmpeg: go-mp3 does not decode them.
func decodeMP3(in *input, o Options) (*Clip, error) {
	data, err := in.readAll()
	if err != nil {
		return nil, fmt.Errorf("mp3: reading: %w", err)
	}
	first, ok := parseMPEG(data)
	if !ok {
		return nil, errors.New("mp3: no layer III frame header at the start")
	}
	if first.version == 25 { // go-mp3 decodes MPEG-1 and MPEG-2 only
		return nil, &needFFmpeg{"MP3 (MPEG-2.5 layer III)"}
	}
	format := fmt.Sprintf("MP3 (MPEG-%d layer III)", first.version)
	// Walk the frames.
	var (
		starts    []int
		truncated bool
		pos       int
	)
	for pos+4 <= len(data) {
		f, ok := parseMPEG(data[pos:])
		if !ok || f.version != first.version || f.rate != first.rate {
			if isTrailerTag(data[pos:]) {
				break
			}
			next := resync(data, pos+1, first)
			if next < 0 {
				break
			}
			pos = next
			continue
		}
		if pos+f.size > len(data) {
			truncated = true
			break
		}
		starts = append(starts, pos)
		pos += f.size
	}
	if len(starts) == 0 {
		if truncated {
			return nil, fmt.Errorf("mp3: the input ends inside the first frame: %w", ErrTruncated)
		}
		return nil, errors.New("mp3: no complete layer III frame")
	}
	var info lameInfo
	audio := starts
	if li, ok := parseXing(data[starts[0]:min(len(data), starts[0]+first.size)], first); ok {
		info, audio = li, starts[1:]
	}
	channels := 2
	if first.mono {
		channels = 1
	}
	clip := &Clip{SampleRate: first.rate, Channels: channels, Format: format}
	total := int64(len(audio)) * int64(first.spf)
	out := newSamples(o, total*int64(channels))
	if len(audio) > 0 {
		if err := out.room(int(min(total, 1<<40)) * channels); err != nil {
			return nil, fmt.Errorf("mp3: %w", err)
		}
		last := audio[len(audio)-1]
		lf, _ := parseMPEG(data[last:])
		dec, err := mp3.NewDecoder(onlyReader{bytes.NewReader(data[audio[0] : last+lf.size])})
		if err != nil {
			return nil, fmt.Errorf("mp3: %v", err)
		}
		pcm, err := io.ReadAll(dec)
		if err != nil {
			return nil, fmt.Errorf("mp3: decoding: %v", err)
		}
		for k := 0; k+4 <= len(pcm); k += 4 {
			out.buf = append(out.buf, float32(int16(binary.LittleEndian.Uint16(pcm[k:])))/(1<<15))
			if channels == 2 {
				out.buf = append(out.buf, float32(int16(binary.LittleEndian.Uint16(pcm[k+2:])))/(1<<15))
			}
		}
	}
	// Trim as ffmpeg does.
	samples := out.buf
	decoded := int64(len(samples) / channels)
	lo, hi := int64(0), decoded
	if info.lame {
		lo = int64(info.delay) + 529
		if info.frames > 0 {
			hi = min(hi, info.frames*int64(first.spf)-int64(info.pad)+529)
		}
	}
	want := hi // the trimmed length a complete stream has
	if info.frames > 0 {
		want = info.frames * int64(first.spf)
		if info.lame {
			want = want - int64(info.pad) + 529
		}
	}
	lo = min(lo, hi)
	clip.Samples = samples[lo*int64(channels) : max(lo, hi)*int64(channels)]
	switch {
	case info.frames > int64(len(audio)):
		clip.Truncated = &Truncation{
			Missing: frameDuration(want-hi, first.rate),
			Detail:  fmt.Sprintf("mp3: the Xing/Info header promises %d frames, the input holds %d", info.frames, len(audio)),
		}
	case truncated:
		clip.Truncated = &Truncation{Detail: fmt.Sprintf("mp3: the input ends inside the frame at offset %d", pos)}
	}
	return clip, nil
}

// onlyReader hides a Seeker, so go-mp3 does not pre-scan the stream.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// isTrailerTag reports an ID3v1, APEv2 or Lyrics3 tag at the start of b.
func isTrailerTag(b []byte) bool {
	return bytes.HasPrefix(b, []byte("TAG")) || bytes.HasPrefix(b, []byte("APETAGEX")) || bytes.HasPrefix(b, []byte("LYRICS"))
}

// resync finds the next offset >= from where a frame like first starts and
// another one follows it (or the data ends); -1 if there is none.
func resync(data []byte, from int, first mpegFrame) int {
	for p := from; p+4 <= len(data); p++ {
		if data[p] != 0xFF {
			continue
		}
		f, ok := parseMPEG(data[p:])
		if !ok || f.version != first.version || f.rate != first.rate {
			continue
		}
		if n := p + f.size; n+4 > len(data) {
			return p
		} else if g, ok := parseMPEG(data[n:]); ok && g.version == f.version && g.rate == f.rate {
			return p
		}
	}
	return -1
}
