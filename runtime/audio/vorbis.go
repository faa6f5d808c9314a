package audio

import (
	"fmt"
	"math"
	"math/bits"

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
	if err := checkVorbisSetup(s.packets[2].data); err != nil {
		return nil, err
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

// Bounds on a Vorbis setup header's codebooks, far above what encoders use
// (libvorbis' largest books have a few thousand entries). jfreymuth/vorbis
// allocates its tables from the header's counts before checking that the
// packet holds their data: 0 entries alone would ask for 16 GiB.
const (
	vorbisMaxEntries = 1 << 20
	vorbisMaxValues  = 1 << 22 // entries x dimensions, per book
	vorbisMaxTotal   = 1 << 24 // summed over the books
)

// lsbReader reads Vorbis' LSB-first bit fields; past the end it sets eof.
type lsbReader struct {
	b   []byte
	pos uint64 // bit position
	eof bool
}

func (r *lsbReader) read(n uint) uint64 {
	var v uint64
	for i := range n {
		if r.pos>>3 >= uint64(len(r.b)) {
			r.eof = true
			return 0
		}
		v |= uint64(r.b[r.pos>>3]>>(r.pos&7)&1) << i
		r.pos++
	}
	return v
}

func (r *lsbReader) left() uint64 { return uint64(len(r.b))*8 - min(r.pos, uint64(len(r.b))*8) }

// checkVorbisSetup walks the codebooks of a setup header (packet 3) as
// jfreymuth/vorbis reads them and refuses counts the packet cannot back:
// entry lengths and lookup values must be there, within the bounds above.
func checkVorbisSetup(p []byte) error {
	if len(p) < 8 {
		return fmt.Errorf("vorbis: setup header has %d bytes", len(p))
	}
	r := &lsbReader{b: p[7:]}
	books := int(r.read(8)) + 1
	total := uint64(0)
	for i := range books {
		bad := func(format string, a ...any) error {
			return fmt.Errorf("vorbis: setup header, codebook %d of %d: %s", i, books, fmt.Sprintf(format, a...))
		}
		if r.read(24) != 0x564342 {
			return bad("no sync pattern")
		}
		dims, entries := r.read(16), r.read(24)
		if dims == 0 || entries == 0 || entries > vorbisMaxEntries || dims*entries > vorbisMaxValues {
			return bad("%d entries of %d dimensions (want 1..%d entries, at most %d values)", entries, dims, vorbisMaxEntries, vorbisMaxValues)
		}
		if total += dims * entries; total > vorbisMaxTotal {
			return bad("the books hold more than %d values", vorbisMaxTotal)
		}
		if r.read(1) == 0 { // not ordered
			sparse := r.read(1) == 1
			need := entries * 5
			if sparse {
				need = entries
			}
			if need > r.left() {
				return bad("%d entry lengths, but the header ends", entries)
			}
			for range entries {
				if !sparse || r.read(1) == 1 {
					r.read(5)
				}
			}
		} else {
			r.read(5)
			for cur := uint64(0); cur < entries; {
				num := r.read(uint(bits.Len64(entries - cur)))
				if r.eof || num > entries-cur {
					return bad("ordered entry lengths run past %d entries or the header's end", entries)
				}
				if num == 0 && r.left() == 0 {
					return bad("ordered entry lengths: the header ends")
				}
				cur += num
			}
		}
		switch lookup := r.read(4); lookup {
		case 0:
		case 1, 2:
			r.read(32)
			r.read(32)
			valueBits := r.read(4) + 1
			r.read(1)
			n := dims * entries
			if lookup == 1 {
				n = uint64(math.Floor(math.Pow(float64(entries), 1/float64(dims))))
			}
			if n*valueBits > r.left() {
				return bad("%d lookup values of %d bits, but the header ends", n, valueBits)
			}
			r.pos += n * valueBits
		default:
			return bad("lookup type %d", lookup)
		}
		if r.eof {
			return bad("the header ends inside it")
		}
	}
	return nil
}
