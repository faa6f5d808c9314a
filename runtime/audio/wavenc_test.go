package audio

import (
	"bytes"
	"encoding/binary"
	"math"
)

// wavSpec describes a WAV file for encodeWAV, including ways to make it lie.
type wavSpec struct {
	tag        uint16 // tagPCM or tagFloat
	bits       int    // container bits
	channels   int
	rate       int
	extensible bool
	validBits  int    // extensible only; 0 = bits
	guid       []byte // extensible sub-format GUID override
	fmtExtra   []byte // appended to a plain fmt chunk (with cbSize prefix written by the caller)

	riffID    string // "RIFF" (default), "RF64", ...
	riffSize  *uint32
	dataSize  *uint32 // data chunk size field override
	ds64Data  *uint64 // RF64: write a ds64 chunk with this data size
	blockOver int     // block align override (0 = correct)

	before  []chunk // between the RIFF header and fmt
	between []chunk // between fmt and data
	after   []chunk // after data
	noFmt   bool
	noData  bool
	tail    []byte // raw bytes appended at the very end
}

type chunk struct {
	id   string
	body []byte
}

func u32(v uint32) *uint32 { return &v }
func u64(v uint64) *uint64 { return &v }

// quantize maps v in [-1, 1] to the integer a PCM container of bits holds,
// rounding and clipping; 8-bit is unsigned.
func quantize(v float64, bits int) int64 {
	scale := math.Ldexp(1, bits-1)
	q := math.Round(v * scale)
	q = max(-scale, min(scale-1, q))
	if bits == 8 {
		q += 128
	}
	return int64(q)
}

// encodeWAV writes samples (interleaved) as s says.
func encodeWAV(s wavSpec, samples []float64) []byte {
	le := binary.LittleEndian
	bytesPer := s.bits / 8
	var data bytes.Buffer
	for _, v := range samples {
		var b [8]byte
		switch {
		case s.tag == tagFloat && s.bits == 32:
			le.PutUint32(b[:], math.Float32bits(float32(v)))
		case s.tag == tagFloat:
			le.PutUint64(b[:], math.Float64bits(v))
		default:
			le.PutUint64(b[:], uint64(quantize(v, s.bits)))
		}
		data.Write(b[:bytesPer])
	}

	var fmtc bytes.Buffer
	w := func(v any) { _ = binary.Write(&fmtc, le, v) }
	tag := s.tag
	if s.extensible {
		tag = tagExtensible
	}
	blockAlign := s.channels * bytesPer
	if s.blockOver != 0 {
		blockAlign = s.blockOver
	}
	w(tag)
	w(uint16(s.channels))
	w(uint32(s.rate))
	w(uint32(s.rate * blockAlign))
	w(uint16(blockAlign))
	w(uint16(s.bits))
	if s.extensible {
		valid := s.validBits
		if valid == 0 {
			valid = s.bits
		}
		w(uint16(22))
		w(uint16(valid))
		w(uint32(0)) // channel mask
		guid := s.guid
		if guid == nil {
			guid = append([]byte{byte(s.tag), byte(s.tag >> 8)}, ksdataSuffix...)
		}
		fmtc.Write(guid)
	}
	fmtc.Write(s.fmtExtra)

	var body bytes.Buffer
	put := func(c chunk, size uint32) {
		body.WriteString(c.id)
		_ = binary.Write(&body, le, size)
		body.Write(c.body)
		if len(c.body)%2 == 1 {
			body.WriteByte(0)
		}
	}
	body.WriteString("WAVE")
	if s.ds64Data != nil {
		ds := make([]byte, 28)
		le.PutUint64(ds[8:], *s.ds64Data)
		put(chunk{"ds64", ds}, 28)
	}
	for _, c := range s.before {
		put(c, uint32(len(c.body)))
	}
	if !s.noFmt {
		put(chunk{"fmt ", fmtc.Bytes()}, uint32(fmtc.Len()))
	}
	for _, c := range s.between {
		put(c, uint32(len(c.body)))
	}
	if !s.noData {
		size := uint32(data.Len())
		if s.dataSize != nil {
			size = *s.dataSize
		}
		put(chunk{"data", data.Bytes()}, size)
	}
	for _, c := range s.after {
		put(c, uint32(len(c.body)))
	}
	body.Write(s.tail)

	var out bytes.Buffer
	id := s.riffID
	if id == "" {
		id = "RIFF"
	}
	out.WriteString(id)
	size := uint32(body.Len())
	if s.riffSize != nil {
		size = *s.riffSize
	}
	_ = binary.Write(&out, le, size)
	out.Write(body.Bytes())
	return out.Bytes()
}

// decodedPCM is what Decode must return for samples encoded as s: the
// quantised value over full scale (float32 of the exact quotient).
func decodedPCM(s wavSpec, samples []float64) []float32 {
	out := make([]float32, len(samples))
	for i, v := range samples {
		switch {
		case s.tag == tagFloat:
			out[i] = float32(v)
		case s.bits == 8:
			out[i] = float32(float64(quantize(v, 8)-128) / 128)
		default:
			out[i] = float32(float64(quantize(v, s.bits)) / math.Ldexp(1, s.bits-1))
		}
	}
	return out
}
