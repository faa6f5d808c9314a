package audio

import (
	"fmt"

	"github.com/jfreymuth/vorbis"
)

// packetDecoder decodes one Ogg audio packet to interleaved float32.
type packetDecoder func(p []byte) ([]float32, error)

// decodeOggAudio runs dec over the audio packets of s (after its header
// packets) and keeps the granule range: see granuleRange.
func decodeOggAudio(s *oggStream, headers int, channels, rate int, preSkip int64, dec packetDecoder, o Options, format, codec string) (*Clip, error) {
	out := newSamples(o, 0)
	firstGranule, firstDecoded, lastGranule := int64(-1), int64(0), int64(-1)
	firstIsLast := false
	for i, p := range s.packets[headers:] {
		if len(p.data) > 0 {
			pcm, err := dec(p.data)
			if err != nil {
				return nil, fmt.Errorf("%s: audio packet %d: %v", codec, i, err)
			}
			if len(pcm)%channels != 0 {
				return nil, fmt.Errorf("%s: audio packet %d decoded to %d samples, not whole frames of %d channels", codec, i, len(pcm), channels)
			}
			if err := out.room(len(pcm)); err != nil {
				return nil, fmt.Errorf("%s: %w", codec, err)
			}
			if err := finite(codec, pcm, len(out.buf), channels); err != nil {
				return nil, err
			}
			out.buf = append(out.buf, pcm...)
		}
		if p.granule >= 0 && firstGranule < 0 {
			firstGranule, firstDecoded, firstIsLast = p.granule, int64(len(out.buf)/channels), p.eos
		}
		if p.eos {
			lastGranule = p.granule
		}
	}
	lo, hi := granuleRange(int64(len(out.buf)/channels), firstGranule, firstDecoded, lastGranule, preSkip, firstIsLast)
	clip := &Clip{SampleRate: rate, Channels: channels, Format: format,
		Samples: out.buf[lo*int64(channels) : hi*int64(channels)]}
	if s.trunc != "" {
		clip.Truncated = &Truncation{Detail: s.trunc}
	}
	return clip, nil
}

// decodeVorbis decodes an Ogg Vorbis stream with github.com/jfreymuth/vorbis
// (float output, as ffmpeg's decoder; the first audio packet only primes the
// overlap and yields nothing, in both), trimmed by the granule positions.
func decodeVorbis(s *oggStream, o Options) (*Clip, error) {
	if len(s.packets) < 3 {
		return nil, fmt.Errorf("vorbis: the stream has %d of its 3 header packets: %s: %w", len(s.packets), s.trunc, ErrTruncated)
	}
	var d vorbis.Decoder
	for i, p := range s.packets[:3] {
		if err := d.ReadHeader(p.data); err != nil {
			return nil, fmt.Errorf("vorbis: header packet %d: %v", i, err)
		}
	}
	ch, rate := d.Channels(), d.SampleRate()
	if ch < 1 || rate < 1 {
		return nil, fmt.Errorf("vorbis: identification header says %d channels at %d Hz", ch, rate)
	}
	return decodeOggAudio(s, 3, ch, rate, 0, d.Decode, o, "Ogg Vorbis", "vorbis")
}
