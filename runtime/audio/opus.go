package audio

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/thesyncim/gopus"
)

// decodeOpus decodes an Ogg Opus stream (RFC 7845) with
// github.com/thesyncim/gopus, a pure-Go port of libopus 1.6 (float output
// at 48 kHz, as ffmpeg's): the pre-skip is dropped from the start, the end
// is trimmed to the final granule position, and the header's output gain is
// applied. Channel mapping family 0 (mono, stereo) and the multistream
// families 1 (up to 8 channels, Vorbis order) and 255 are decoded.
func decodeOpus(s *oggStream, o Options) (*Clip, error) {
	h := s.packets[0].data
	if len(h) < 19 {
		return nil, fmt.Errorf("opus: OpusHead has %d bytes, want >= 19", len(h))
	}
	if h[8]>>4 != 0 {
		return nil, fmt.Errorf("opus: OpusHead version %d is not supported (want 0..15)", h[8])
	}
	ch := int(h[9])
	preSkip := int64(binary.LittleEndian.Uint16(h[10:12]))
	gainQ8 := int16(binary.LittleEndian.Uint16(h[16:18]))
	family := h[18]
	if ch < 1 {
		return nil, fmt.Errorf("opus: OpusHead says %d channels", ch)
	}
	if len(s.packets) < 2 {
		return nil, fmt.Errorf("opus: the stream ends before its OpusTags packet: %s: %w", s.trunc, ErrTruncated)
	}
	const rate = 48000
	buf := make([]float32, 5760*ch) // 120 ms, the longest packet
	var dec packetDecoder
	switch family {
	case 0:
		if ch > 2 {
			return nil, fmt.Errorf("opus: channel mapping family 0 with %d channels; want 1 or 2", ch)
		}
		d, err := gopus.NewDecoder(gopus.DefaultDecoderConfig(rate, ch))
		if err != nil {
			return nil, fmt.Errorf("opus: %v", err)
		}
		dec = func(p []byte) ([]float32, error) {
			n, err := d.Decode(p, buf)
			if err != nil {
				return nil, err
			}
			return buf[:n*ch], nil
		}
	default:
		if len(h) < 21+ch {
			return nil, fmt.Errorf("opus: OpusHead of mapping family %d has %d bytes, want %d for %d channels", family, len(h), 21+ch, ch)
		}
		streams, coupled := int(h[19]), int(h[20])
		d, err := gopus.NewMultistreamDecoder(rate, ch, streams, coupled, h[21:21+ch])
		if err != nil {
			return nil, fmt.Errorf("opus: mapping family %d, %d channels, %d streams (%d coupled): %v", family, ch, streams, coupled, err)
		}
		dec = func(p []byte) ([]float32, error) {
			n, err := d.Decode(p, buf)
			if err != nil {
				return nil, err
			}
			return buf[:n*ch], nil
		}
	}
	if gainQ8 != 0 {
		g := float32(math.Pow(10, float64(gainQ8)/(20*256)))
		inner := dec
		dec = func(p []byte) ([]float32, error) {
			x, err := inner(p)
			for i := range x {
				x[i] *= g
			}
			return x, err
		}
	}
	return decodeOggAudio(s, 2, ch, rate, preSkip, dec, o, "Ogg Opus", "opus")
}
