package codec

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"sort"
)

// maxHeader bounds a safetensors header (the format's own reference
// implementation refuses headers over 100 MB).
const maxHeader = 100 << 20

// safeTensor is one entry of a safetensors file: dtype, shape and its bytes
// (a sub-slice of the file, little-endian).
type safeTensor struct {
	DType string
	Shape []int
	data  []byte
}

// safeTensors is a parsed safetensors file.
type safeTensors map[string]safeTensor

// dtypeSize gives the element size of the dtypes the format defines.
var dtypeSize = map[string]int{
	"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1,
	"I16": 2, "U16": 2, "F16": 2, "BF16": 2,
	"I32": 4, "U32": 4, "F32": 4, "I64": 8, "U64": 8, "F64": 8,
}

// readSafetensors reads and parses the safetensors file at path.
func readSafetensors(path string) (safeTensors, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	st, err := parseSafetensors(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// parseSafetensors checks and indexes a safetensors image: an 8-byte
// little-endian header length n, n bytes of JSON mapping names to {dtype,
// shape, data_offsets} (plus an optional "__metadata__" of strings), then
// the data. Every tensor must lie inside the data, its byte length must
// equal its shape's element count times its dtype size, and the tensors
// must not overlap. Nothing is allocated beyond what the file holds.
func parseSafetensors(b []byte) (safeTensors, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("safetensors: %d bytes, too short for the 8-byte header length", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	if n > maxHeader || n > uint64(len(b)-8) {
		return nil, fmt.Errorf("safetensors: header length %d exceeds the file (%d bytes) or the %d-byte limit", n, len(b), maxHeader)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &raw); err != nil {
		return nil, fmt.Errorf("safetensors: header is not a JSON object: %w", err)
	}
	data := b[8+n:]
	type span struct {
		lo, hi uint64
		name   string
	}
	var spans []span
	out := make(safeTensors, len(raw))
	for name, msg := range raw {
		if name == "__metadata__" {
			var meta map[string]string
			if err := json.Unmarshal(msg, &meta); err != nil {
				return nil, fmt.Errorf("safetensors: __metadata__ is not a map of strings: %w", err)
			}
			continue
		}
		var h struct {
			DType   string   `json:"dtype"`
			Shape   []int64  `json:"shape"`
			Offsets []uint64 `json:"data_offsets"`
		}
		if err := json.Unmarshal(msg, &h); err != nil {
			return nil, fmt.Errorf("safetensors: tensor %q: %w", name, err)
		}
		size, ok := dtypeSize[h.DType]
		if !ok {
			return nil, fmt.Errorf("safetensors: tensor %q has unknown dtype %q", name, h.DType)
		}
		if len(h.Offsets) != 2 || h.Offsets[0] > h.Offsets[1] || h.Offsets[1] > uint64(len(data)) {
			return nil, fmt.Errorf("safetensors: tensor %q has data_offsets %v, want [begin, end] within the %d data bytes", name, h.Offsets, len(data))
		}
		elems := uint64(1)
		shape := make([]int, len(h.Shape))
		for i, d := range h.Shape {
			if d < 0 || d > math.MaxInt32 {
				return nil, fmt.Errorf("safetensors: tensor %q has shape %v", name, h.Shape)
			}
			shape[i] = int(d)
			if elems != 0 && uint64(d) > uint64(len(data))/elems+1 {
				return nil, fmt.Errorf("safetensors: tensor %q shape %v exceeds the file", name, h.Shape)
			}
			elems *= uint64(d)
		}
		if elems*uint64(size) != h.Offsets[1]-h.Offsets[0] {
			return nil, fmt.Errorf("safetensors: tensor %q %s%v needs %d bytes, data_offsets give %d", name, h.DType, h.Shape, elems*uint64(size), h.Offsets[1]-h.Offsets[0])
		}
		out[name] = safeTensor{DType: h.DType, Shape: shape, data: data[h.Offsets[0]:h.Offsets[1]]}
		if h.Offsets[1] > h.Offsets[0] {
			spans = append(spans, span{h.Offsets[0], h.Offsets[1], name})
		}
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].lo < spans[j].lo })
	for i := 1; i < len(spans); i++ {
		if spans[i].lo < spans[i-1].hi {
			return nil, fmt.Errorf("safetensors: tensors %q and %q overlap", spans[i-1].name, spans[i].name)
		}
	}
	return out, nil
}

// f32 returns tensor name as float32 values with the given shape (-1 matches
// any extent), naming what is missing or wrong.
func (s safeTensors) f32(name string, shape ...int) ([]float32, []int, error) {
	t, ok := s[name]
	if !ok {
		return nil, nil, fmt.Errorf("model.safetensors has no tensor %q", name)
	}
	if t.DType != "F32" {
		return nil, nil, fmt.Errorf("tensor %q is %s, want F32", name, t.DType)
	}
	bad := len(t.Shape) != len(shape)
	for i := 0; !bad && i < len(shape); i++ {
		bad = shape[i] >= 0 && shape[i] != t.Shape[i]
	}
	if bad {
		return nil, nil, fmt.Errorf("tensor %q has shape %v, want %v (-1: any)", name, t.Shape, shape)
	}
	v := make([]float32, len(t.data)/4)
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(t.data[4*i:]))
	}
	return v, t.Shape, nil
}

// CodesTensor is one named int32 tensor for WriteSafetensors.
type CodesTensor struct {
	Name  string
	Shape []int
	Data  []int32
}

// WriteSafetensors writes int32 tensors (in the given order) and string
// metadata as a safetensors file.
func WriteSafetensors(w io.Writer, tensors []CodesTensor, meta map[string]string) error {
	header := map[string]any{}
	if len(meta) > 0 {
		header["__metadata__"] = meta
	}
	off := 0
	for _, t := range tensors {
		n := 1
		for _, d := range t.Shape {
			n *= d
		}
		if n != len(t.Data) {
			return fmt.Errorf("tensor %q: %d values for shape %v", t.Name, len(t.Data), t.Shape)
		}
		if _, dup := header[t.Name]; dup || t.Name == "__metadata__" {
			return fmt.Errorf("tensor name %q given twice or reserved", t.Name)
		}
		header[t.Name] = map[string]any{"dtype": "I32", "shape": t.Shape, "data_offsets": []int{off, off + 4*n}}
		off += 4 * n
	}
	h, err := json.Marshal(header)
	if err != nil {
		return err
	}
	for len(h)%8 != 0 { // the format pads the header with spaces to 8-byte alignment
		h = append(h, ' ')
	}
	bw := bufio.NewWriter(w)
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(len(h)))
	bw.Write(b[:])
	bw.Write(h)
	for _, t := range tensors {
		for _, v := range t.Data {
			binary.LittleEndian.PutUint32(b[:4], uint32(v))
			bw.Write(b[:4])
		}
	}
	return bw.Flush()
}

// ReadCodesSafetensors reads back the int32 tensors of a file written by
// WriteSafetensors (checked like any safetensors file), by name.
func ReadCodesSafetensors(path string) (map[string]CodesTensor, error) {
	st, err := readSafetensors(path)
	if err != nil {
		return nil, err
	}
	out := make(map[string]CodesTensor, len(st))
	for name, t := range st {
		if t.DType != "I32" {
			return nil, fmt.Errorf("%s: tensor %q is %s, want I32 codes", path, name, t.DType)
		}
		v := make([]int32, len(t.data)/4)
		for i := range v {
			v[i] = int32(binary.LittleEndian.Uint32(t.data[4*i:]))
		}
		out[name] = CodesTensor{Name: name, Shape: t.Shape, Data: v}
	}
	return out, nil
}
