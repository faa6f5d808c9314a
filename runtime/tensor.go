package runtime

import (
	"fmt"
	"strings"
)

// Shape is a tensor shape, outermost dimension first (row-major).
type Shape []int

// NumElements is the product of the dimensions (1 for a scalar).
func (s Shape) NumElements() int {
	n := 1
	for _, d := range s {
		n *= d
	}
	return n
}

// Equal reports whether two shapes are identical.
func (s Shape) Equal(o Shape) bool {
	if len(s) != len(o) {
		return false
	}
	for i := range s {
		if s[i] != o[i] {
			return false
		}
	}
	return true
}

func (s Shape) String() string {
	parts := make([]string, len(s))
	for i, d := range s {
		parts[i] = fmt.Sprint(d)
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// validate checks that every dimension is non-negative and that the element
// count fits in an int without overflow.
func (s Shape) validate() error {
	n := 1
	for _, d := range s {
		if d < 0 {
			return fmt.Errorf("shape %v has a negative dimension", s)
		}
		if d != 0 && n > (1<<62)/d {
			return fmt.Errorf("shape %v has too many elements", s)
		}
		n *= d
	}
	return nil
}

// DeviceBuffer is memory owned by a non-host Backend. Ops that run on that
// backend type-assert it to their backend's concrete buffer type.
type DeviceBuffer interface {
	// Device names where the memory lives, e.g. "cuda:0".
	Device() string
	// Bytes is the size of the allocation in bytes.
	Bytes() int64
	// Free releases the memory; the buffer must not be used afterwards.
	// Freeing twice must be a no-op.
	Free() error
}

// A DeviceBuffer is identified by its interface value: implementations are
// pointer types, so two tensors share memory exactly when their buffers
// compare equal (Reshape keeps the buffer).

// Tensor is an n-dimensional array with a dtype, a shape and a location.
//
// Host tensors hold a plain Go slice whose element type follows the dtype:
// F32 []float32, F64 []float64, F16/BF16/U16 []uint16, I16 []int16,
// I32 []int32, I64 []int64, U8 []uint8, Bool []bool. The slice has exactly
// Shape.NumElements() elements in row-major order. Device tensors hold a
// DeviceBuffer from a Backend instead and have no host slice.
type Tensor struct {
	dtype DType
	shape Shape
	host  any
	dev   DeviceBuffer
}

// NewTensor allocates a zeroed host tensor.
func NewTensor(dt DType, shape Shape) (*Tensor, error) {
	if err := shape.validate(); err != nil {
		return nil, err
	}
	n := shape.NumElements()
	var data any
	switch dt {
	case F32:
		data = make([]float32, n)
	case F64:
		data = make([]float64, n)
	case F16, BF16, U16:
		data = make([]uint16, n)
	case I16:
		data = make([]int16, n)
	case I32:
		data = make([]int32, n)
	case I64:
		data = make([]int64, n)
	case U8:
		data = make([]uint8, n)
	case Bool:
		data = make([]bool, n)
	default:
		return nil, fmt.Errorf("cannot allocate a tensor of dtype %v", dt)
	}
	return &Tensor{dtype: dt, shape: append(Shape(nil), shape...), host: data}, nil
}

// FromSlice wraps a host slice as a tensor without copying. The slice type
// must match dt (see Tensor) and its length must equal the shape's element count.
func FromSlice(dt DType, shape Shape, data any) (*Tensor, error) {
	if err := shape.validate(); err != nil {
		return nil, err
	}
	n, ok := sliceLen(dt, data)
	if !ok {
		return nil, fmt.Errorf("a %T cannot hold %v elements", data, dt)
	}
	if n != shape.NumElements() {
		return nil, fmt.Errorf("shape %v needs %d elements, the slice has %d", shape, shape.NumElements(), n)
	}
	return &Tensor{dtype: dt, shape: append(Shape(nil), shape...), host: data}, nil
}

// NewDeviceTensor wraps backend memory; it is meant for Backend implementations.
func NewDeviceTensor(dt DType, shape Shape, buf DeviceBuffer) *Tensor {
	return &Tensor{dtype: dt, shape: append(Shape(nil), shape...), dev: buf}
}

func sliceLen(dt DType, data any) (int, bool) {
	switch dt {
	case F32:
		s, ok := data.([]float32)
		return len(s), ok
	case F64:
		s, ok := data.([]float64)
		return len(s), ok
	case F16, BF16, U16:
		s, ok := data.([]uint16)
		return len(s), ok
	case I16:
		s, ok := data.([]int16)
		return len(s), ok
	case I32:
		s, ok := data.([]int32)
		return len(s), ok
	case I64:
		s, ok := data.([]int64)
		return len(s), ok
	case U8:
		s, ok := data.([]uint8)
		return len(s), ok
	case Bool:
		s, ok := data.([]bool)
		return len(s), ok
	}
	return 0, false
}

// Must panics on error; for tests and literals known to be valid.
func Must(t *Tensor, err error) *Tensor {
	if err != nil {
		panic(err)
	}
	return t
}

// DType is the element type.
func (t *Tensor) DType() DType { return t.dtype }

// Shape returns the shape; callers must not modify it.
func (t *Tensor) Shape() Shape { return t.shape }

// Rank is the number of dimensions.
func (t *Tensor) Rank() int { return len(t.shape) }

// OnHost reports whether the tensor's memory is a host Go slice.
func (t *Tensor) OnHost() bool { return t.dev == nil }

// Device is "cpu" for host tensors, else the DeviceBuffer's device name.
func (t *Tensor) Device() string {
	if t.dev == nil {
		return "cpu"
	}
	return t.dev.Device()
}

// Buffer returns the device memory of a device tensor (nil on host).
func (t *Tensor) Buffer() DeviceBuffer { return t.dev }

// Bytes is the payload size in bytes.
func (t *Tensor) Bytes() int64 { return int64(t.shape.NumElements()) * int64(t.dtype.Size()) }

// Data returns the host slice as an untyped value (nil for device tensors).
func (t *Tensor) Data() any { return t.host }

// Reshape returns a tensor sharing t's memory with a new shape of the same element count.
func (t *Tensor) Reshape(shape Shape) (*Tensor, error) {
	if err := shape.validate(); err != nil {
		return nil, err
	}
	if shape.NumElements() != t.shape.NumElements() {
		return nil, fmt.Errorf("cannot reshape %v to %v", t.shape, shape)
	}
	return &Tensor{dtype: t.dtype, shape: append(Shape(nil), shape...), host: t.host, dev: t.dev}, nil
}

// Release frees a device tensor's memory now rather than leaving it to its
// owner's teardown; on host tensors it does nothing (the garbage collector
// reclaims them). Every tensor sharing the memory (see Reshape) is invalid
// afterwards. Releasing twice is safe.
func (t *Tensor) Release() error {
	if t == nil || t.dev == nil {
		return nil
	}
	return t.dev.Free()
}

// Release frees the device memory of every tensor in ts (each shared buffer
// once) and returns the first error. Tensors a pipeline or op returns belong
// to the caller, and this is how the caller gives them back.
func (ts Tensors) Release() error {
	var first error
	seen := map[DeviceBuffer]bool{}
	for _, t := range ts {
		if t == nil || t.dev == nil || seen[t.dev] {
			continue
		}
		seen[t.dev] = true
		if err := t.dev.Free(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// holds reports whether a tensor of ts shares t's device memory.
func (ts Tensors) holds(t *Tensor) bool {
	if t == nil || t.dev == nil {
		return false
	}
	for _, x := range ts {
		if x != nil && x.dev == t.dev {
			return true
		}
	}
	return false
}

func (t *Tensor) String() string {
	return fmt.Sprintf("%v%v@%s", t.dtype, t.shape, t.Device())
}

// hostSlice returns the typed host slice or panics: calling a typed accessor
// on the wrong dtype or on a device tensor is a programming error, since ops
// receive inputs already checked against their declared specs.
func hostSlice[S any](t *Tensor, want ...DType) S {
	for _, w := range want {
		if t.dtype == w && t.dev == nil {
			return t.host.(S)
		}
	}
	panic(fmt.Sprintf("edge: tensor %v accessed as %v on host", t, want))
}

// F32 returns the host []float32 of an F32 tensor.
func (t *Tensor) F32() []float32 { return hostSlice[[]float32](t, F32) }

// F64 returns the host []float64 of an F64 tensor.
func (t *Tensor) F64() []float64 { return hostSlice[[]float64](t, F64) }

// U16 returns the raw 16-bit patterns of an F16, BF16 or U16 tensor.
func (t *Tensor) U16() []uint16 { return hostSlice[[]uint16](t, U16, BF16, F16) }

// I16 returns the host []int16 of an I16 tensor.
func (t *Tensor) I16() []int16 { return hostSlice[[]int16](t, I16) }

// I32 returns the host []int32 of an I32 tensor.
func (t *Tensor) I32() []int32 { return hostSlice[[]int32](t, I32) }

// I64 returns the host []int64 of an I64 tensor.
func (t *Tensor) I64() []int64 { return hostSlice[[]int64](t, I64) }

// U8 returns the host []uint8 of a U8 tensor.
func (t *Tensor) U8() []uint8 { return hostSlice[[]uint8](t, U8) }

// Bools returns the host []bool of a Bool tensor.
func (t *Tensor) Bools() []bool { return hostSlice[[]bool](t, Bool) }
