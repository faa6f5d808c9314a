// Package cabi compiles kernels/params.h as C and reports how the C compiler
// lays out its parameter structs, for the layout test of package kernels
// (cgo is not allowed in _test.go files). It is GPU-free and only tests
// import it.
//
// params.h here is a symbolic link to ../../params.h: the go command hashes
// the header files of a package's own directory into its build ID, so an
// edit of the header rebuilds this package (an include path outside the
// directory would leave a stale layout in the build cache).
package cabi

/*
#include "params.h"
*/
import "C"

import "reflect"

// Struct is the C layout of one struct of params.h.
type Struct struct {
	Name   string
	Size   uintptr // sizeof
	Fields []Field // in declaration order, padding included (named "_")
}

// Field is one field of a Struct.
type Field struct {
	Name   string // the C name
	Offset uintptr
	Size   uintptr
	Kind   reflect.Kind // of the field's C type as cgo maps it (Uint64 for a device address)
}

// Structs returns every parameter struct of params.h. The layouts are the C
// compiler's: cgo reads field offsets from its debug information, and Size
// is its sizeof.
func Structs() []Struct {
	out := make([]Struct, len(structs))
	for i, s := range structs {
		out[i] = Struct{Name: s.name, Size: s.size}
		for j := range s.t.NumField() {
			f := s.t.Field(j)
			out[i].Fields = append(out[i].Fields, Field{Name: f.Name, Offset: f.Offset, Size: f.Type.Size(), Kind: f.Type.Kind()})
		}
	}
	return out
}

var structs = []struct {
	name string
	t    reflect.Type
	size uintptr
}{
	{"DpxCheckParams", reflect.TypeOf(C.DpxCheckParams{}), C.sizeof_DpxCheckParams},
	{"DpxQuantizeParams", reflect.TypeOf(C.DpxQuantizeParams{}), C.sizeof_DpxQuantizeParams},
	{"DpxCtcParams", reflect.TypeOf(C.DpxCtcParams{}), C.sizeof_DpxCtcParams},
	{"DpxViterbiParams", reflect.TypeOf(C.DpxViterbiParams{}), C.sizeof_DpxViterbiParams},
	{"DpxDtwParams", reflect.TypeOf(C.DpxDtwParams{}), C.sizeof_DpxDtwParams},
	{"PipelineLogSoftmaxParams", reflect.TypeOf(C.PipelineLogSoftmaxParams{}), C.sizeof_PipelineLogSoftmaxParams},
	{"PipelineNormalizePCMParams", reflect.TypeOf(C.PipelineNormalizePCMParams{}), C.sizeof_PipelineNormalizePCMParams},
	{"PipelineCtcArgmaxParams", reflect.TypeOf(C.PipelineCtcArgmaxParams{}), C.sizeof_PipelineCtcArgmaxParams},
	{"PipelineCtcCollapseParams", reflect.TypeOf(C.PipelineCtcCollapseParams{}), C.sizeof_PipelineCtcCollapseParams},
	{"FbankStatsParams", reflect.TypeOf(C.FbankStatsParams{}), C.sizeof_FbankStatsParams},
	{"FbankNormalizeParams", reflect.TypeOf(C.FbankNormalizeParams{}), C.sizeof_FbankNormalizeParams},
	{"FbankLogmelParams", reflect.TypeOf(C.FbankLogmelParams{}), C.sizeof_FbankLogmelParams},
	{"RvqEncodeParams", reflect.TypeOf(C.RvqEncodeParams{}), C.sizeof_RvqEncodeParams},
	{"RvqSmallScoreParams", reflect.TypeOf(C.RvqSmallScoreParams{}), C.sizeof_RvqSmallScoreParams},
	{"RvqSmallUpdateParams", reflect.TypeOf(C.RvqSmallUpdateParams{}), C.sizeof_RvqSmallUpdateParams},
	{"RvqStreamParams", reflect.TypeOf(C.RvqStreamParams{}), C.sizeof_RvqStreamParams},
	{"RvqPadRowsParams", reflect.TypeOf(C.RvqPadRowsParams{}), C.sizeof_RvqPadRowsParams},
	{"RvqCheckParams", reflect.TypeOf(C.RvqCheckParams{}), C.sizeof_RvqCheckParams},
	{"RvqDecodeParams", reflect.TypeOf(C.RvqDecodeParams{}), C.sizeof_RvqDecodeParams},
	{"RvqEncodeF32Params", reflect.TypeOf(C.RvqEncodeF32Params{}), C.sizeof_RvqEncodeF32Params},
}
