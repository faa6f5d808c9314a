package model

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"

	"github.com/edgespeech/edge/runtime/model/internal/pb"
)

// GatherToSliceFusion is the ONNX Runtime graph optimizer that turns a
// Gather of a Range back into a Slice; a session for a model from
// SlicesAsGathers must disable it (session config
// optimization.disable_specified_optimizers).
const GatherToSliceFusion = "GatherToSliceFusion"

// ErrSliceRewrite is wrapped by SlicesAsGathers' error for a readable model
// whose Slice nodes cannot all be rewritten.
var ErrSliceRewrite = errors.New("cannot rewrite Slice")

// minSliceRewriteOpset is the oldest default-domain opset whose operators
// the rewrite uses (Min and Max on int64 are opset 12).
const minSliceRewriteOpset = 12

// maxConstInts bounds the integer constants the rewrite reads: Slice's
// starts, ends, axes and steps have one value per sliced axis.
const maxConstInts = 64

// SlicesAsGathers reads the .onnx file at path and returns it, serialised,
// with every Slice node of its main graph replaced by operators that give
// the same tensor: per sliced axis, the axis size from Shape, starts and
// ends clamped as Slice clamps them (negative ones counted from the end,
// then limited to [0, size], or to [-1, size-1] for a negative step), a
// Range of the kept indices and a Gather of them. The values, dtype and
// shape of each output are Slice's exactly; the rest of the file (other
// nodes, initializers, external-data references, metadata) is copied
// byte for byte, and the new nodes sit where the Slice was, so the graph's
// order stays topological.
//
// Slice's steps and axes must be constants (initializers or Constant
// nodes), and starts and ends either constants or tensors computed at run
// time; a Slice inside a subgraph or a model function, or a model whose
// opset is older than 12, is an error wrapping ErrSliceRewrite that names
// the node and why. n is the number of
// Slice nodes replaced; a model without any gives (nil, 0, nil).
//
// A model with Slices is read into memory whole (one without is only
// scanned, seeking over its weights). A session created from the result
// must disable ONNX Runtime's GatherToSliceFusion and, for a model with
// external data, look for it in path's directory.
func SlicesAsGathers(path string) (model []byte, n int, err error) {
	found, err := SliceNodes(path) // seeks: a model without Slices is not read whole
	if err != nil || len(found) == 0 {
		return nil, 0, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, 0, err
	}
	model, n, err = rewriteSlices(data, found)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", path, err)
	}
	return model, n, nil
}

// slicesAsGathers is SlicesAsGathers on a model held in memory.
func slicesAsGathers(data []byte) ([]byte, int, error) {
	found, err := sliceNodes(pb.FromBytes(data))
	if err != nil {
		return nil, 0, fmt.Errorf("not a readable ONNX model: %w", err)
	}
	if len(found) == 0 {
		return nil, 0, nil
	}
	return rewriteSlices(data, found)
}

// rewriteSlices rewrites model data, whose Slice nodes sliceNodes found.
func rewriteSlices(data []byte, found []string) ([]byte, int, error) {
	opset, err := defaultOpset(pb.FromBytes(data))
	if err != nil {
		return nil, 0, fmt.Errorf("not a readable ONNX model: %w", err)
	}
	if opset < minSliceRewriteOpset {
		return nil, 0, fmt.Errorf("%w node(s) %s: opset %d is older than %d", ErrSliceRewrite, strings.Join(found, ", "), opset, minSliceRewriteOpset)
	}
	out := make([]byte, 0, len(data)+4096)
	n := 0
	it := pb.FromBytes(data).Fields()
	start := it.Pos()
	var f pb.Field
	for it.Next(&f) {
		switch {
		case f.Num == 7 && f.Wire == pb.Bytes:
			g, k, err := rewriteGraph(data, f.Sub)
			if err != nil {
				return nil, 0, err
			}
			out, n = pb.AppendBytes(out, 7, g), k
		case f.Num == 25 && f.Wire == pb.Bytes: // FunctionProto: node = 7
			var in []string
			if err := scanSlicesIn(f.Sub, 7, 0, &in); err != nil {
				return nil, 0, err
			}
			if len(in) > 0 {
				return nil, 0, fmt.Errorf("%w node %s: it is inside a model function", ErrSliceRewrite, in[0])
			}
			out = append(out, data[start:it.Pos()]...)
		default:
			out = append(out, data[start:it.Pos()]...)
		}
		start = it.Pos()
	}
	if err := it.Err(); err != nil {
		return nil, 0, fmt.Errorf("not a readable ONNX model: %w", err)
	}
	return out, n, nil
}

// rewriteGraph returns GraphProto g of data with its Slice nodes rewritten
// and the initializers the new nodes use appended.
func rewriteGraph(data []byte, g pb.Msg) ([]byte, int, error) {
	e, err := newGraphEdit(g)
	if err != nil {
		return nil, 0, err
	}
	var out []byte
	n, i := 0, 0
	var bad []string
	it := g.Fields()
	start := it.Pos()
	var f pb.Field
	for it.Next(&f) {
		raw := data[start:it.Pos()]
		start = it.Pos()
		if f.Num != 1 || f.Wire != pb.Bytes {
			out = append(out, raw...)
			continue
		}
		node, err := readNode(f.Sub)
		if err != nil {
			return nil, 0, err
		}
		name := node.name
		if name == "" {
			name = fmt.Sprintf("node %d", i)
		}
		i++
		var inner []string
		for _, sub := range node.subgraphs {
			if err := scanSlicesIn(sub, 1, 1, &inner); err != nil {
				return nil, 0, err
			}
		}
		if len(inner) > 0 {
			bad = append(bad, fmt.Sprintf("%s (inside the subgraph of %s %s)", inner[0], node.op, name))
		}
		if !node.isSlice() {
			out = append(out, raw...)
			continue
		}
		e.nodes = e.nodes[:0]
		if err := e.slice(node, n); err != nil {
			bad = append(bad, fmt.Sprintf("%s (%v)", name, err))
			continue
		}
		out = append(out, e.nodes...)
		n++
	}
	if err := it.Err(); err != nil {
		return nil, 0, err
	}
	if len(bad) > 0 {
		shown := bad
		if len(shown) > 3 {
			shown = append(shown[:3:3], fmt.Sprintf("and %d more", len(bad)-3))
		}
		return nil, 0, fmt.Errorf("%w node(s) %s", ErrSliceRewrite, strings.Join(shown, ", "))
	}
	return append(out, e.inits...), n, nil
}

// graphEdit builds the nodes and initializers that replace Slices in one
// graph.
type graphEdit struct {
	consts map[string][]int64 // the graph's small integer constants
	used   map[string]bool    // every value name of the graph, and the new ones
	nodes  []byte             // NodeProto fields (GraphProto.node) of the current Slice
	inits  []byte             // TensorProto fields (GraphProto.initializer) to append
	scalar map[int64]string   // the int64 scalar initializers made so far
	prefix string             // of the current Slice's new names
}

func newGraphEdit(g pb.Msg) (*graphEdit, error) {
	e := &graphEdit{consts: map[string][]int64{}, used: map[string]bool{}, scalar: map[int64]string{}}
	inputs := map[string]bool{}
	inits := map[string][]int64{}
	it := g.Fields()
	var f pb.Field
	for it.Next(&f) {
		if f.Wire != pb.Bytes {
			continue
		}
		switch f.Num {
		case 1:
			n, err := readNode(f.Sub)
			if err != nil {
				return nil, err
			}
			for _, o := range n.outputs {
				e.used[o] = true
			}
			if n.op == "Constant" && len(n.outputs) == 1 && defaultDomain(n.domain) {
				if v, ok := constantNodeInts(n); ok {
					e.consts[n.outputs[0]] = v
				}
			}
		case 5:
			name, v, ok, err := tensorInts(f.Sub)
			if err != nil {
				return nil, err
			}
			e.used[name] = true
			if ok {
				inits[name] = v
			}
		case 11, 12, 13: // input, output, value_info
			t, err := valueInfo(f.Sub)
			if err != nil {
				return nil, err
			}
			e.used[t.Name] = true
			if f.Num == 11 {
				inputs[t.Name] = true
			}
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	for name, v := range inits {
		if !inputs[name] { // an initializer listed as an input may be fed another value
			e.consts[name] = v
		}
	}
	return e, nil
}

// constantNodeInts is the value of a Constant node holding integers
// (value as an int32/int64 tensor, value_ints or value_int).
func constantNodeInts(n nodeProto) ([]int64, bool) {
	if len(n.attrs) != 1 {
		return nil, false
	}
	var name string
	var v []int64
	ok := false
	it := n.attrs[0].Fields()
	var f pb.Field
	for it.Next(&f) {
		switch {
		case f.Num == 1 && f.Wire == pb.Bytes:
			name, _ = f.Sub.String(maxNameBytes)
		case f.Num == 3 && f.Wire == pb.Varint: // i
			v, ok = []int64{int64(f.Value)}, true
		case f.Num == 8: // ints, packed or not
			if !appendInts(&v, f, 8) {
				return nil, false
			}
			ok = true
		case f.Num == 5 && f.Wire == pb.Bytes: // t
			var err error
			if _, v, ok, err = tensorInts(f.Sub); err != nil {
				return nil, false
			}
		}
	}
	if it.Err() != nil || !ok {
		return nil, false
	}
	switch name {
	case "value", "value_ints":
		return v, true
	case "value_int":
		return v, len(v) == 1
	}
	return nil, false
}

// tensorInts reads a TensorProto's name and, when it is an int32 or int64
// tensor of at most maxConstInts values held in the file, its values.
func tensorInts(m pb.Msg) (name string, v []int64, ok bool, err error) {
	elem, count := 0, int64(1)
	var raw []byte
	external, hasRaw := false, false
	it := m.Fields()
	var f pb.Field
	for it.Next(&f) {
		switch {
		case f.Num == 1: // dims
			var dims []int64
			if !appendInts(&dims, f, 1) {
				return "", nil, false, fmt.Errorf("malformed tensor dims")
			}
			for _, d := range dims {
				if d < 0 || d > maxConstInts {
					count = maxConstInts + 1
				} else {
					count *= d
				}
			}
			count = min(count, maxConstInts+1)
		case f.Num == 2 && f.Wire == pb.Varint:
			elem = int(f.Value)
		case (f.Num == 5 || f.Num == 7) && len(v) <= maxConstInts: // int32_data, int64_data
			if !appendInts(&v, f, f.Num) {
				return "", nil, false, fmt.Errorf("malformed tensor data")
			}
		case f.Num == 8 && f.Wire == pb.Bytes:
			if name, err = f.Sub.String(maxNameBytes); err != nil {
				return "", nil, false, err
			}
		case f.Num == 9 && f.Wire == pb.Bytes:
			hasRaw = true
			if f.Sub.Len() <= 8*maxConstInts {
				if raw, err = f.Sub.Bytes(8 * maxConstInts); err != nil {
					return "", nil, false, err
				}
			}
		case f.Num == 14 && f.Wire == pb.Varint:
			external = f.Value == 1
		}
	}
	if err := it.Err(); err != nil {
		return "", nil, false, err
	}
	if external || count > maxConstInts || (elem != ElemInt32 && elem != ElemInt64) {
		return name, nil, false, nil
	}
	if hasRaw {
		size := 8
		if elem == ElemInt32 {
			size = 4
		}
		if int64(len(raw)) != count*int64(size) {
			return name, nil, false, nil
		}
		v = make([]int64, count)
		for i := range v {
			if size == 8 {
				v[i] = int64(binary.LittleEndian.Uint64(raw[8*i:]))
			} else {
				v[i] = int64(int32(binary.LittleEndian.Uint32(raw[4*i:])))
			}
		}
	}
	if int64(len(v)) != count {
		return name, nil, false, nil
	}
	if elem == ElemInt32 {
		for i := range v {
			v[i] = int64(int32(v[i]))
		}
	}
	return name, v, true, nil
}

// appendInts appends the integers of repeated varint field f (packed or
// not) to v; false when malformed or when v would pass maxConstInts+1.
func appendInts(v *[]int64, f pb.Field, num int) bool {
	if f.Num != num {
		return false
	}
	switch f.Wire {
	case pb.Varint:
		*v = append(*v, int64(f.Value))
		return true
	case pb.Bytes:
		if f.Sub.Len() > 10*(maxConstInts+1) {
			*v = append(*v, make([]int64, maxConstInts+1)...)
			return true
		}
		b, err := f.Sub.Bytes(10 * (maxConstInts + 1))
		if err != nil {
			return false
		}
		for len(b) > 0 {
			x, k := binary.Uvarint(b)
			if k <= 0 {
				return false
			}
			*v = append(*v, int64(x))
			b = b[k:]
		}
		return true
	}
	return false
}

// fresh returns a value name no other value of the graph has.
func (e *graphEdit) fresh(base string) string {
	name := e.prefix + base
	for i := 1; e.used[name]; i++ {
		name = e.prefix + base + "_" + strconv.Itoa(i)
	}
	e.used[name] = true
	return name
}

// int64Scalar returns the name of a rank-0 int64 initializer holding v.
func (e *graphEdit) int64Scalar(v int64) string {
	if name, ok := e.scalar[v]; ok {
		return name
	}
	saved := e.prefix
	e.prefix = "edge_slice_const/"
	name := e.fresh(strings.ReplaceAll(strconv.FormatInt(v, 10), "-", "m"))
	e.prefix = saved
	e.scalar[v] = name
	var t []byte
	t = pb.AppendInt(t, 2, ElemInt64) // data_type
	t = pb.AppendString(t, 8, name)
	t = pb.AppendBytes(t, 9, binary.LittleEndian.AppendUint64(nil, uint64(v)))
	e.inits = pb.AppendBytes(e.inits, 5, t)
	return name
}

// node appends a default-domain node; attrs are AttributeProto messages.
func (e *graphEdit) node(op string, inputs []string, output string, attrs ...[]byte) {
	var b []byte
	for _, in := range inputs {
		b = pb.AppendString(b, 1, in)
	}
	b = pb.AppendString(b, 2, output)
	b = pb.AppendString(b, 3, output) // node names are free to choose; the output's is unique
	b = pb.AppendString(b, 4, op)
	for _, a := range attrs {
		b = pb.AppendBytes(b, 5, a)
	}
	e.nodes = pb.AppendBytes(e.nodes, 1, b)
}

// op appends a node with one fresh output named after base and returns it.
func (e *graphEdit) op(op, base string, inputs []string, attrs ...[]byte) string {
	out := e.fresh(base)
	e.node(op, inputs, out, attrs...)
	return out
}

// intAttr is an AttributeProto of type INT.
func intAttr(name string, v int64) []byte {
	var a []byte
	a = pb.AppendString(a, 1, name)
	a = pb.AppendInt(a, 3, v)
	return pb.AppendInt(a, 20, 2) // AttributeProto.INT
}

// sliceBound is a start or an end of one sliced axis: a constant, or the
// name of a run-time int64 scalar.
type sliceBound struct {
	name  string
	value int64
}

// slice appends the nodes replacing Slice node n (the idx-th rewritten).
func (e *graphEdit) slice(n nodeProto, idx int) error {
	in := append(n.inputs, make([]string, 5)...)[:5]
	if len(n.inputs) > 5 || len(n.outputs) != 1 {
		return fmt.Errorf("%d inputs and %d outputs, want at most 5 and 1", len(n.inputs), len(n.outputs))
	}
	if len(n.inputs) < 3 || in[1] == "" || in[2] == "" {
		return fmt.Errorf("no starts and ends inputs (opset 1-9 attributes)")
	}
	data, starts, ends, axesIn, stepsIn := in[0], in[1], in[2], in[3], in[4]
	sv, sConst := e.consts[starts]
	ev, eConst := e.consts[ends]
	var axes []int64
	switch {
	case axesIn != "":
		v, ok := e.consts[axesIn]
		if !ok {
			return fmt.Errorf("axes computed at run time")
		}
		axes = v
	case sConst || eConst:
		k := len(sv)
		if !sConst {
			k = len(ev)
		}
		for a := range k {
			axes = append(axes, int64(a))
		}
	default:
		return fmt.Errorf("no axes, and starts and ends computed at run time")
	}
	k := len(axes)
	steps := make([]int64, k)
	for i := range steps {
		steps[i] = 1
	}
	if stepsIn != "" {
		v, ok := e.consts[stepsIn]
		if !ok {
			return fmt.Errorf("steps computed at run time")
		}
		steps = v
	}
	if (sConst && len(sv) != k) || (eConst && len(ev) != k) || len(steps) != k {
		return fmt.Errorf("starts, ends, axes and steps of different lengths")
	}
	for _, s := range steps {
		if s == 0 {
			return fmt.Errorf("a step of 0")
		}
	}
	e.prefix = fmt.Sprintf("edge_slice%d/", idx)
	out := n.outputs[0]
	if k == 0 {
		e.node("Identity", []string{data}, out)
		return nil
	}
	shape := e.op("Shape", "shape", []string{data})
	casts := map[string]string{} // run-time starts or ends -> their int64 Cast, made once
	bound := func(values []int64, isConst bool, tensor, base string, j int) sliceBound {
		if isConst {
			return sliceBound{value: values[j]}
		}
		if casts[tensor] == "" {
			casts[tensor] = e.op("Cast", base+"s_i64", []string{tensor}, intAttr("to", ElemInt64))
		}
		return sliceBound{name: e.op("Gather", fmt.Sprintf("%s%d", base, j), []string{casts[tensor], e.int64Scalar(int64(j))})}
	}
	x := data
	for j, a := range axes {
		dim := e.op("Gather", fmt.Sprintf("dim%d", j), []string{shape, e.int64Scalar(a)})
		s := bound(sv, sConst, starts, "start", j)
		t := bound(ev, eConst, ends, "end", j)
		step := steps[j]
		// Bounds as ONNX Runtime's Slice takes them: starts within [0, dim]
		// ([0, dim-1] for a negative step), ends within [0, dim] ([-1, dim]),
		// and an end of INT32_MAX or INT64_MAX meaning past the last
		// element in the step's direction.
		var from, to string
		if step > 0 {
			from = e.clamp(s, dim, 0, dim, fmt.Sprintf("from%d", j))
			to = e.clamp(t, dim, 0, dim, fmt.Sprintf("to%d", j))
		} else {
			last := e.op("Sub", fmt.Sprintf("last%d", j), []string{dim, e.int64Scalar(1)})
			from = e.clamp(s, dim, 0, last, fmt.Sprintf("from%d", j))
			to = e.untilFirst(t, dim, fmt.Sprintf("to%d", j))
		}
		indices := e.op("Range", fmt.Sprintf("indices%d", j), []string{from, to, e.int64Scalar(step)})
		y := out
		if j < k-1 {
			y = e.fresh(fmt.Sprintf("axis%d", j))
		}
		e.node("Gather", []string{x, indices}, y, intAttr("axis", a))
		x = y
	}
	return nil
}

// clamp returns the name of bound b as Slice uses it on an axis of size
// dim: a negative b counted from the end, then limited to [lo, hi].
func (e *graphEdit) clamp(b sliceBound, dim string, lo int64, hi, base string) string {
	if b.name == "" && b.value == 0 && lo == 0 {
		return e.int64Scalar(0)
	}
	var v string
	switch {
	case b.name == "" && b.value >= 0:
		v = e.int64Scalar(b.value)
	case b.name == "":
		v = e.op("Add", base+"_from_end", []string{e.int64Scalar(b.value), dim})
	default:
		neg := e.op("Less", base+"_negative", []string{b.name, e.int64Scalar(0)})
		end := e.op("Add", base+"_from_end", []string{b.name, dim})
		v = e.op("Where", base+"_counted", []string{neg, end, b.name})
	}
	v = e.op("Max", base+"_low", []string{v, e.int64Scalar(lo)})
	return e.op("Min", base, []string{v, hi})
}

// untilFirst returns end bound b of a negative-step axis of size dim:
// -1 (past the first element) where b is INT32_MAX or INT64_MAX, else b
// clamped to [-1, dim].
func (e *graphEdit) untilFirst(b sliceBound, dim, base string) string {
	if b.name == "" && (b.value == math.MaxInt32 || b.value == math.MaxInt64) {
		return e.int64Scalar(-1)
	}
	clamped := e.clamp(b, dim, -1, dim, base)
	if b.name == "" {
		return clamped
	}
	is32 := e.op("Equal", base+"_is_int32_max", []string{b.name, e.int64Scalar(math.MaxInt32)})
	is64 := e.op("Equal", base+"_is_int64_max", []string{b.name, e.int64Scalar(math.MaxInt64)})
	open := e.op("Or", base+"_open", []string{is32, is64})
	return e.op("Where", base+"_or_first", []string{open, e.int64Scalar(-1), clamped})
}
