// Package npy reads and writes NumPy .npy files (format versions 1, 2 and 3)
// as runtime tensors.
//
// Supported element types: f32, f64, i16, u16, i32, i64, u8 and bool, little
// or big endian (big-endian data is converted), C order. Fortran-order arrays
// are rejected with an error. The reader never allocates more than the bytes
// actually present: the declared shape is checked against the remaining data
// before any allocation.
package npy

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/edgespeech/edge/runtime"
)

var magic = []byte("\x93NUMPY")

// maxHeader bounds the header dictionary; numpy itself writes < 1 KiB.
const maxHeader = 1 << 16

// ReadFile reads one .npy file.
func ReadFile(path string) (*runtime.Tensor, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	t, err := Read(bufio.NewReader(f), st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Read decodes an .npy stream of at most size bytes (the limit on what the
// header may claim; pass the file size).
func Read(r io.Reader, size int64) (*runtime.Tensor, error) {
	var pre [10]byte
	if _, err := io.ReadFull(r, pre[:8]); err != nil {
		return nil, fmt.Errorf("npy: truncated preamble: %w", err)
	}
	if !bytes.Equal(pre[:6], magic) {
		return nil, errors.New("npy: not an .npy file (bad magic)")
	}
	var hlen int
	switch major := pre[6]; major {
	case 1:
		if _, err := io.ReadFull(r, pre[8:10]); err != nil {
			return nil, fmt.Errorf("npy: truncated header length: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint16(pre[8:10]))
		size -= 10
	case 2, 3:
		var l [4]byte
		if _, err := io.ReadFull(r, l[:]); err != nil {
			return nil, fmt.Errorf("npy: truncated header length: %w", err)
		}
		hlen = int(binary.LittleEndian.Uint32(l[:]))
		size -= 12
	default:
		return nil, fmt.Errorf("npy: unsupported format version %d", major)
	}
	if hlen > maxHeader || int64(hlen) > size {
		return nil, fmt.Errorf("npy: header length %d exceeds the file", hlen)
	}
	hdr := make([]byte, hlen)
	if _, err := io.ReadFull(r, hdr); err != nil {
		return nil, fmt.Errorf("npy: truncated header: %w", err)
	}
	size -= int64(hlen)
	descr, fortran, shape, err := parseHeader(string(hdr))
	if err != nil {
		return nil, err
	}
	dt, order, err := parseDescr(descr)
	if err != nil {
		return nil, err
	}
	n := int64(1)
	for _, d := range shape {
		if d < 0 || (d > 0 && n > math.MaxInt64/int64(d)/8) {
			return nil, fmt.Errorf("npy: invalid shape %v", shape)
		}
		n *= int64(d)
	}
	need := n * int64(dt.Size())
	if need > size {
		return nil, fmt.Errorf("npy: shape %v of %v needs %d data bytes, the file has %d", shape, dt, need, size)
	}
	stored := shape
	if fortran { // column-major: the C-order layout of the reversed shape
		stored = slices.Clone(shape)
		slices.Reverse(stored)
	}
	t, err := runtime.NewTensor(dt, stored)
	if err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	if err := readData(r, order, t); err != nil {
		return nil, fmt.Errorf("npy: truncated data: %w", err)
	}
	if fortran {
		return fromFortran(t, shape)
	}
	return t, nil
}

// fromFortran returns src, an array of shape read in Fortran
// (column-major) order and so laid out as the C-order tensor of the reversed
// shape, as a C-order tensor of shape.
func fromFortran(src *runtime.Tensor, shape runtime.Shape) (*runtime.Tensor, error) {
	dst, err := runtime.NewTensor(src.DType(), shape)
	if err != nil {
		return nil, fmt.Errorf("npy: %w", err)
	}
	s, d := reflect.ValueOf(src.Data()), reflect.ValueOf(dst.Data())
	idx := make([]int, len(shape)) // C-order index of element i
	for i := range d.Len() {
		off, stride := 0, 1 // column-major offset: the first axis varies fastest
		for k, n := range shape {
			off += idx[k] * stride
			stride *= n
		}
		d.Index(i).Set(s.Index(off))
		for k := len(shape) - 1; k >= 0; k-- {
			if idx[k]++; idx[k] < shape[k] {
				break
			}
			idx[k] = 0
		}
	}
	return dst, nil
}

var (
	descrRe   = regexp.MustCompile(`'descr'\s*:\s*'([^']*)'`)
	fortranRe = regexp.MustCompile(`'fortran_order'\s*:\s*(True|False)`)
	shapeRe   = regexp.MustCompile(`'shape'\s*:\s*\(([^)]*)\)`)
)

func parseHeader(h string) (descr string, fortran bool, shape runtime.Shape, err error) {
	m := descrRe.FindStringSubmatch(h)
	f := fortranRe.FindStringSubmatch(h)
	s := shapeRe.FindStringSubmatch(h)
	if m == nil || f == nil || s == nil {
		return "", false, nil, fmt.Errorf("npy: malformed header %q", h)
	}
	shape = runtime.Shape{}
	for _, part := range strings.Split(s[1], ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		d, err := strconv.Atoi(strings.TrimSuffix(part, "L"))
		if err != nil || d < 0 {
			return "", false, nil, fmt.Errorf("npy: malformed shape (%s)", s[1])
		}
		shape = append(shape, d)
	}
	return m[1], f[1] == "True", shape, nil
}

func parseDescr(d string) (runtime.DType, binary.ByteOrder, error) {
	if len(d) < 2 {
		return 0, nil, fmt.Errorf("npy: unsupported dtype %q", d)
	}
	var order binary.ByteOrder = binary.LittleEndian
	switch d[0] {
	case '<', '|', '=':
	case '>':
		order = binary.BigEndian
	default:
		return 0, nil, fmt.Errorf("npy: unsupported dtype %q", d)
	}
	dt, ok := map[string]runtime.DType{
		"f4": runtime.F32, "f8": runtime.F64, "i2": runtime.I16, "u2": runtime.U16,
		"i4": runtime.I32, "i8": runtime.I64, "u1": runtime.U8, "b1": runtime.Bool,
	}[d[1:]]
	if !ok {
		return 0, nil, fmt.Errorf("npy: unsupported dtype %q (want f4, f8, i2, u2, i4, i8, u1 or b1)", d)
	}
	return dt, order, nil
}

func readData(r io.Reader, order binary.ByteOrder, t *runtime.Tensor) error {
	if t.DType() == runtime.Bool {
		raw := make([]byte, len(t.Bools()))
		if _, err := io.ReadFull(r, raw); err != nil {
			return err
		}
		for i, b := range raw {
			t.Bools()[i] = b != 0
		}
		return nil
	}
	return binary.Read(r, order, t.Data())
}

// WriteFile writes t (a host tensor) as a version 1.0 .npy file.
func WriteFile(path string, t *runtime.Tensor) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriter(f)
	if err := Write(w, t); err != nil {
		f.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Write encodes a host tensor in .npy format (little endian, C order).
// F16 and BF16 tensors are written as their u2 bit patterns.
func Write(w io.Writer, t *runtime.Tensor) error {
	if !t.OnHost() {
		return fmt.Errorf("npy: tensor %v is not in host memory", t)
	}
	descr, ok := map[runtime.DType]string{
		runtime.F32: "<f4", runtime.F64: "<f8", runtime.I16: "<i2", runtime.U16: "<u2",
		runtime.F16: "<u2", runtime.BF16: "<u2", runtime.I32: "<i4", runtime.I64: "<i8",
		runtime.U8: "|u1", runtime.Bool: "|b1",
	}[t.DType()]
	if !ok {
		return fmt.Errorf("npy: cannot write dtype %v", t.DType())
	}
	dims := make([]string, len(t.Shape()))
	for i, d := range t.Shape() {
		dims[i] = strconv.Itoa(d)
	}
	shape := strings.Join(dims, ", ")
	if len(dims) == 1 {
		shape += ","
	}
	h := fmt.Sprintf("{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape)
	// Pad so that magic+version+len+header+newline is a multiple of 64.
	pad := 64 - (10+len(h)+1)%64
	if pad == 64 {
		pad = 0
	}
	h += strings.Repeat(" ", pad) + "\n"
	if len(h) > math.MaxUint16 {
		return errors.New("npy: header too long")
	}
	var pre [10]byte
	copy(pre[:], magic)
	pre[6], pre[7] = 1, 0
	binary.LittleEndian.PutUint16(pre[8:], uint16(len(h)))
	if _, err := w.Write(pre[:]); err != nil {
		return err
	}
	if _, err := io.WriteString(w, h); err != nil {
		return err
	}
	if t.DType() == runtime.Bool {
		raw := make([]byte, len(t.Bools()))
		for i, b := range t.Bools() {
			if b {
				raw[i] = 1
			}
		}
		_, err := w.Write(raw)
		return err
	}
	return binary.Write(w, binary.LittleEndian, t.Data())
}
