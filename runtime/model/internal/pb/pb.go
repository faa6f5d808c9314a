// Package pb reads protocol-buffer wire format from an io.ReaderAt without
// loading the message: fields are visited in order and length-delimited
// ones are handed out as sub-messages (offset ranges), so a reader can skip
// a 2 GB weight blob by its length and read only the few fields it needs.
// It knows nothing of schemas; callers name fields by number.
//
// Nothing is allocated from a length a file claims before the length is
// checked against the bytes that remain and against the caller's limit.
package pb

import (
	"errors"
	"fmt"
	"io"
	"math"
)

// Wire types.
const (
	Varint  = 0
	Fixed64 = 1
	Bytes   = 2
	Fixed32 = 5
)

// Msg is a message: bytes [Off, End) of R.
type Msg struct {
	R   io.ReaderAt
	Off int64
	End int64
}

// New is the whole of r, size bytes long, as a message.
func New(r io.ReaderAt, size int64) Msg { return Msg{R: r, Off: 0, End: size} }

// FromBytes is b as a message.
func FromBytes(b []byte) Msg { return Msg{R: byteReader(b), End: int64(len(b))} }

type byteReader []byte

func (b byteReader) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > int64(len(b)) {
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// Field is one field of a message.
type Field struct {
	Num  int
	Wire int
	// Value is the varint, or the fixed32/fixed64 bits.
	Value uint64
	// Sub is the payload of a length-delimited field.
	Sub Msg
}

// ErrTruncated is returned for a message that ends inside a field.
var ErrTruncated = errors.New("protobuf: truncated message")

// Iter visits the fields of m in order.
type Iter struct {
	m   Msg
	pos int64
	err error
	buf [10]byte
}

// Fields starts an iteration over m.
func (m Msg) Fields() *Iter { return &Iter{m: m, pos: m.Off} }

// Len is the message's byte length.
func (m Msg) Len() int64 { return m.End - m.Off }

// Err is the error that ended the iteration (nil at a clean end).
func (it *Iter) Err() error { return it.err }

func (it *Iter) varint() (uint64, error) {
	n := min(int64(len(it.buf)), it.m.End-it.pos)
	if n <= 0 {
		return 0, ErrTruncated
	}
	k, err := it.m.R.ReadAt(it.buf[:n], it.pos)
	if k < int(n) && err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	var v uint64
	for i := range k {
		b := it.buf[i]
		if i == 9 && b > 1 {
			return 0, errors.New("protobuf: varint overflows 64 bits")
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			it.pos += int64(i + 1)
			return v, nil
		}
	}
	return 0, ErrTruncated
}

// Next reads the next field into f; false at the end or on an error (see Err).
func (it *Iter) Next(f *Field) bool {
	if it.err != nil || it.pos >= it.m.End {
		return false
	}
	tag, err := it.varint()
	if err != nil {
		it.err = err
		return false
	}
	num, wire := tag>>3, int(tag&7)
	if num == 0 || num > math.MaxInt32 {
		it.err = fmt.Errorf("protobuf: invalid field number %d", num)
		return false
	}
	*f = Field{Num: int(num), Wire: wire}
	switch wire {
	case Varint:
		f.Value, it.err = it.varint()
	case Fixed64, Fixed32:
		size := int64(8)
		if wire == Fixed32 {
			size = 4
		}
		if it.m.End-it.pos < size {
			it.err = ErrTruncated
			break
		}
		var b [8]byte
		if _, err := it.m.R.ReadAt(b[:size], it.pos); err != nil && !errors.Is(err, io.EOF) {
			it.err = err
			break
		}
		for i := range size {
			f.Value |= uint64(b[i]) << (8 * i)
		}
		it.pos += size
	case Bytes:
		var n uint64
		if n, it.err = it.varint(); it.err != nil {
			break
		}
		if n > uint64(it.m.End-it.pos) {
			it.err = ErrTruncated
			break
		}
		f.Sub = Msg{R: it.m.R, Off: it.pos, End: it.pos + int64(n)}
		it.pos += int64(n)
	default:
		it.err = fmt.Errorf("protobuf: field %d has unsupported wire type %d", num, wire)
	}
	return it.err == nil
}

// Bytes reads the message's bytes; a message longer than limit is an error.
func (m Msg) Bytes(limit int64) ([]byte, error) {
	if m.Len() > limit {
		return nil, fmt.Errorf("protobuf: a %d-byte field is longer than the %d bytes allowed here", m.Len(), limit)
	}
	b := make([]byte, m.Len())
	if n, err := m.R.ReadAt(b, m.Off); n < len(b) {
		if err == nil || errors.Is(err, io.EOF) {
			err = ErrTruncated
		}
		return nil, err
	}
	return b, nil
}

// String reads the message's bytes as a string (see Bytes).
func (m Msg) String(limit int64) (string, error) {
	b, err := m.Bytes(limit)
	return string(b), err
}

// Float32 is a fixed32 field's value as a float.
func (f *Field) Float32() float32 { return math.Float32frombits(uint32(f.Value)) }

// Pos is the offset in m.R of the next field Next reads (m.End at the end).
func (it *Iter) Pos() int64 { return it.pos }

// AppendVarint appends v in varint encoding.
func AppendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// AppendTag appends a field's tag (its number and wire type).
func AppendTag(b []byte, num, wire int) []byte { return AppendVarint(b, uint64(num)<<3|uint64(wire)) }

// AppendInt appends a varint field holding v (negative values take ten
// bytes, as int32 and int64 fields encode them).
func AppendInt(b []byte, num int, v int64) []byte {
	return AppendVarint(AppendTag(b, num, Varint), uint64(v))
}

// AppendBytes appends a length-delimited field holding payload.
func AppendBytes(b []byte, num int, payload []byte) []byte {
	b = AppendVarint(AppendTag(b, num, Bytes), uint64(len(payload)))
	return append(b, payload...)
}

// AppendString appends a length-delimited field holding s.
func AppendString(b []byte, num int, s string) []byte {
	b = AppendVarint(AppendTag(b, num, Bytes), uint64(len(s)))
	return append(b, s...)
}
