package runtime

import "fmt"

// DType is the element type of a Tensor.
type DType uint8

// Element types. F16 and BF16 host tensors store raw 16-bit patterns in a
// []uint16; U16 and I16 exist so that npy files holding bf16 bit patterns
// (as numpy has no bf16) can be passed through unchanged.
const (
	Invalid DType = iota
	F32
	F64
	F16
	BF16
	I16
	U16
	I32
	I64
	U8
	Bool
)

var dtypeNames = [...]string{
	Invalid: "invalid", F32: "f32", F64: "f64", F16: "f16", BF16: "bf16",
	I16: "i16", U16: "u16", I32: "i32", I64: "i64", U8: "u8", Bool: "bool",
}

var dtypeSizes = [...]int{
	Invalid: 0, F32: 4, F64: 8, F16: 2, BF16: 2, I16: 2, U16: 2, I32: 4, I64: 8, U8: 1, Bool: 1,
}

// String returns the short name used in configs and CLI output ("f32", "i64", ...).
func (d DType) String() string {
	if int(d) < len(dtypeNames) {
		return dtypeNames[d]
	}
	return fmt.Sprintf("dtype(%d)", uint8(d))
}

// Size is the size of one element in bytes (0 for Invalid).
func (d DType) Size() int {
	if int(d) < len(dtypeSizes) {
		return dtypeSizes[d]
	}
	return 0
}

// ParseDType maps a short name ("f32", "bf16", ...) back to its DType.
func ParseDType(s string) (DType, error) {
	for i, n := range dtypeNames {
		if n == s && DType(i) != Invalid {
			return DType(i), nil
		}
	}
	return Invalid, fmt.Errorf("unknown dtype %q (want one of f32, f64, f16, bf16, i16, u16, i32, i64, u8, bool)", s)
}
