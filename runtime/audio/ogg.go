package audio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

func sniffOgg(h []byte) bool { return len(h) >= 4 && string(h[:4]) == "OggS" }

// oggPacket is one packet of the first logical stream, with the granule
// position of the page it ends on (-1 when it does not end a page's last
// packet... see oggDemux).
type oggPacket struct {
	data []byte
	// granule is the page's granule position when this is the last packet
	// completed on its page, else -1.
	granule int64
	eos     bool // it ends the last page (end-of-stream flag)
}

// oggStream is the first logical stream of an Ogg file, demuxed.
type oggStream struct {
	packets []oggPacket
	eos     bool   // the end-of-stream page was seen
	trunc   string // why the input ended early, "" when it did not
}

// oggCRC is the Ogg page checksum: CRC-32, polynomial 0x04c11db7, MSB first,
// zero initial value, no final xor.
var oggCRC = func() (t [256]uint32) {
	for i := range t {
		r := uint32(i) << 24
		for range 8 {
			if r&0x80000000 != 0 {
				r = r<<1 ^ 0x04c11db7
			} else {
				r <<= 1
			}
		}
		t[i] = r
	}
	return
}()

func oggChecksum(page []byte) uint32 {
	var crc uint32
	for i, b := range page {
		if i >= 22 && i < 26 {
			b = 0 // the checksum field counts as zero
		}
		crc = crc<<8 ^ oggCRC[byte(crc>>24)^b]
	}
	return crc
}

// demuxOgg splits data into the packets of its first logical stream (the
// serial number of the first page). Pages of other streams are skipped, and
// so is a page whose checksum does not match (as ffmpeg does, after which
// the decoder sees a gap); the stream ends at its end-of-stream page. Input
// that ends inside a page, or without an end-of-stream page, is reported in
// trunc. Packet bytes are slices of data (no copies beyond reassembly of
// packets that span pages, bounded by the input).
func demuxOgg(data []byte) (*oggStream, error) {
	s := &oggStream{}
	var (
		serial  uint32
		started bool
		partial []byte // a packet continued on the next page
		seq     uint32
	)
	for pos := 0; pos < len(data); {
		if len(data)-pos < 27 {
			s.trunc = fmt.Sprintf("ogg: the input ends inside the page header at offset %d", pos)
			break
		}
		if string(data[pos:pos+4]) != "OggS" {
			// Resynchronise on the next capture pattern.
			next := bytes.Index(data[pos+1:], []byte("OggS"))
			if next < 0 {
				if !started {
					return nil, fmt.Errorf("ogg: no page at offset %d", pos)
				}
				break
			}
			pos += 1 + next
			continue
		}
		h := data[pos:]
		if h[4] != 0 {
			return nil, fmt.Errorf("ogg: page at offset %d has stream structure version %d, want 0", pos, h[4])
		}
		flags := h[5]
		granule := int64(binary.LittleEndian.Uint64(h[6:14]))
		ser := binary.LittleEndian.Uint32(h[14:18])
		pseq := binary.LittleEndian.Uint32(h[18:22])
		nseg := int(h[26])
		if len(h) < 27+nseg {
			s.trunc = fmt.Sprintf("ogg: the input ends inside the segment table of the page at offset %d", pos)
			break
		}
		lacing := h[27 : 27+nseg]
		body := 0
		for _, l := range lacing {
			body += int(l)
		}

		size := 27 + nseg + body
		if len(h) < size {
			s.trunc = fmt.Sprintf("ogg: the input ends inside the page at offset %d (%d of its %d bytes)", pos, len(h), size)
			break
		}
		page := h[:size]
		if binary.LittleEndian.Uint32(page[22:26]) != oggChecksum(page) {
			pos += 4 // a damaged page: look for the next one
			partial = nil
			continue
		}
		pos += size
		if !started {
			if flags&2 == 0 {
				return nil, errors.New("ogg: the first page does not begin a stream")
			}
			started, serial, seq = true, ser, pseq-1
		}
		if ser != serial {
			continue
		}
		if pseq != seq+1 {
			partial = nil // pages went missing: drop the packet in flight
		}
		seq = pseq
		data := h[27+nseg : size]
		if flags&1 == 0 {
			partial = nil
		} else if partial == nil {
			// A continuation whose start is lost: drop the rest of that packet.
			k, skip := 0, 0
			for k < len(lacing) {
				skip += int(lacing[k])
				k++
				if lacing[k-1] < 255 {
					break
				}
			}
			lacing, data = lacing[k:], data[skip:]
		}
		partial = s.appendPackets(partial, lacing, data, granule, flags)
		if flags&4 != 0 {
			s.eos = true
			break
		}
	}
	if !started {
		return nil, errors.New("ogg: no page")
	}
	if !s.eos && s.trunc == "" {
		s.trunc = "ogg: the input ends without the end-of-stream page"
	}
	return s, nil
}

// appendPackets splits one page's body by its lacing values, completing
// partial first; it returns the bytes of a packet left unfinished.
func (s *oggStream) appendPackets(partial []byte, lacing, body []byte, granule int64, flags byte) []byte {
	lastDone := -1
	p := 0
	cur := partial
	for _, l := range lacing {
		cur = append(cur, body[p:p+int(l)]...)
		p += int(l)
		if l < 255 {
			s.packets = append(s.packets, oggPacket{data: cur, granule: -1})
			lastDone = len(s.packets) - 1
			cur = nil
		}
	}
	if lastDone >= 0 {
		s.packets[lastDone].granule = granule
		s.packets[lastDone].eos = flags&4 != 0
	}
	if len(lacing) > 0 && lacing[len(lacing)-1] == 255 {
		if cur == nil {
			cur = []byte{}
		}
		return cur
	}
	return nil
}

// decodeOgg reads an Ogg stream and decodes its first logical stream by the
// codec its first packet names: Vorbis and Opus natively; FLAC, Speex and
// others through ffmpeg.
func decodeOgg(in *input, o Options) (*Clip, error) {
	data, err := in.readAll()
	if err != nil {
		return nil, fmt.Errorf("ogg: reading: %w", err)
	}
	s, err := demuxOgg(data)
	if err != nil {
		return nil, err
	}
	if len(s.packets) == 0 {
		return nil, fmt.Errorf("ogg: no packet in the first stream: %s: %w", s.trunc, ErrTruncated)
	}
	p := s.packets[0].data
	switch {
	case bytes.HasPrefix(p, []byte("\x01vorbis")):
		return decodeVorbis(s, o)
	case bytes.HasPrefix(p, []byte("OpusHead")):
		return decodeOpus(s, o)
	case bytes.HasPrefix(p, []byte("\x7fFLAC")):
		return nil, &needFFmpeg{"Ogg FLAC"}
	case bytes.HasPrefix(p, []byte("Speex   ")):
		return nil, &needFFmpeg{"Ogg Speex"}
	case bytes.HasPrefix(p, []byte("\x80theora")):
		return nil, &needFFmpeg{"Ogg Theora (video)"}
	}
	return nil, &needFFmpeg{fmt.Sprintf("Ogg stream of an unknown codec (first packet starts with %q)", p[:min(len(p), 8)])}
}

// granuleRange is the part of an Ogg stream's decoded frames to keep, as
// ffmpeg and the reference decoders keep it. Frame i of the decoded output
// has the time i + offset, where offset is the first page's granule position
// minus the frames decoded up to it (0 when that page also ends the stream,
// or no page gave one); frames before preSkip (Opus' pre-skip) and, with an
// end-of-stream page, at or after its granule position are dropped.
func granuleRange(decoded, firstGranule, firstDecoded, lastGranule, preSkip int64, firstIsLast bool) (lo, hi int64) {
	offset := int64(0)
	if firstGranule >= 0 && !firstIsLast {
		offset = firstGranule - firstDecoded
	}
	lo, hi = max(0, preSkip-offset), decoded
	if lastGranule >= 0 {
		hi = min(hi, lastGranule-offset)
	}
	return min(lo, decoded), max(min(lo, decoded), hi)
}
