package onnx

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"google.golang.org/protobuf/encoding/protowire"
)

// Field numbers of the ONNX protobuf messages read here (onnx.proto3).
const (
	modelGraph = 7 // ModelProto.graph

	graphNode               = 1  // GraphProto.node
	graphInitializer        = 5  // GraphProto.initializer
	graphSparseInitializers = 15 // GraphProto.sparse_initializer

	nodeInput     = 1 // NodeProto.input
	nodeOutput    = 2 // NodeProto.output
	nodeName      = 3 // NodeProto.name
	nodeOpType    = 4 // NodeProto.op_type
	nodeAttribute = 5 // NodeProto.attribute

	attrGraph  = 6  // AttributeProto.g
	attrGraphs = 11 // AttributeProto.graphs

	tensorName       = 8 // TensorProto.name
	sparseTensorVals = 1 // SparseTensorProto.values (a TensorProto)
)

// maxGraphDepth bounds the nesting of subgraphs (If/Loop/Scan bodies) the
// scanner follows, so a hostile file cannot recurse without end.
const maxGraphDepth = 32

// runtimeSlices returns the names (or, unnamed, the op index) of the Slice
// nodes of an ONNX model (ModelProto bytes, subgraphs included) whose
// starts, ends, axes or steps are computed at run time: inputs that are
// neither initializers nor outputs of Constant nodes. It reads only the
// graph's structure; initializer data is skipped, not copied. Malformed
// bytes are an error, never a panic.
func runtimeSlices(model []byte) ([]string, error) {
	graph, err := field(model, modelGraph)
	if err != nil {
		return nil, fmt.Errorf("reading the ONNX model: %w", err)
	}
	if graph == nil {
		return nil, errors.New("reading the ONNX model: it has no graph")
	}
	var found []string
	if err := scanGraph(graph, 0, map[string]bool{}, &found); err != nil {
		return nil, fmt.Errorf("reading the ONNX graph: %w", err)
	}
	return found, nil
}

// scanGraph appends graph's run-time-bounded Slices to found. consts holds
// the constant names visible from enclosing graphs; graph's own are added
// to a copy.
func scanGraph(graph []byte, depth int, outer map[string]bool, found *[]string) error {
	if depth > maxGraphDepth {
		return fmt.Errorf("subgraphs nested deeper than %d", maxGraphDepth)
	}
	consts := make(map[string]bool, len(outer))
	for k := range outer {
		consts[k] = true
	}
	type node struct {
		name, op        string
		inputs, outputs []string
		subgraphs       [][]byte
	}
	var nodes []node
	err := eachField(graph, func(num protowire.Number, b []byte) error {
		switch num {
		case graphInitializer:
			name, err := stringField(b, tensorName)
			consts[name] = true
			return err
		case graphSparseInitializers:
			vals, err := field(b, sparseTensorVals)
			if err != nil || vals == nil {
				return err
			}
			name, err := stringField(vals, tensorName)
			consts[name] = true
			return err
		case graphNode:
			var n node
			err := eachField(b, func(num protowire.Number, v []byte) error {
				switch num {
				case nodeInput:
					n.inputs = append(n.inputs, string(v))
				case nodeOutput:
					n.outputs = append(n.outputs, string(v))
				case nodeName:
					n.name = string(v)
				case nodeOpType:
					n.op = string(v)
				case nodeAttribute:
					return eachField(v, func(num protowire.Number, g []byte) error {
						if num == attrGraph || num == attrGraphs {
							n.subgraphs = append(n.subgraphs, g)
						}
						return nil
					})
				}
				return nil
			})
			nodes = append(nodes, n)
			return err
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, n := range nodes {
		if n.op == "Constant" {
			for _, o := range n.outputs {
				consts[o] = true
			}
		}
	}
	for i, n := range nodes {
		if n.op == "Slice" && len(n.inputs) > 1 {
			for _, in := range n.inputs[1:] {
				if in != "" && !consts[in] {
					name := n.name
					if name == "" {
						name = fmt.Sprintf("node %d", i)
					}
					*found = append(*found, name)
					break
				}
			}
		}
		for _, g := range n.subgraphs {
			if err := scanGraph(g, depth+1, consts, found); err != nil {
				return err
			}
		}
	}
	return nil
}

// eachField calls fn with every length-delimited field of the message b
// (strings, bytes, sub-messages); fields of other wire types are skipped.
func eachField(b []byte, fn func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ == protowire.BytesType {
			v, m := protowire.ConsumeBytes(b)
			if m < 0 {
				return protowire.ParseError(m)
			}
			if err := fn(num, v); err != nil {
				return err
			}
			b = b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return protowire.ParseError(m)
		}
		b = b[m:]
	}
	return nil
}

// field returns the last length-delimited field num of b (nil if absent).
func field(b []byte, num protowire.Number) ([]byte, error) {
	var got []byte
	err := eachField(b, func(n protowire.Number, v []byte) error {
		if n == num {
			got = v
		}
		return nil
	})
	return got, err
}

func stringField(b []byte, num protowire.Number) (string, error) {
	v, err := field(b, num)
	return string(v), err
}

// ErrPluginSlice is wrapped by the error for a model the CUDA plugin EP
// would crash on (see pluginSliceError).
var ErrPluginSlice = errors.New("the CUDA plugin EP cannot run this model")

// pluginSliceFixed is the first ONNX Runtime core with which the CUDA
// plugin EP is not known to crash on run-time-bounded Slice nodes: none is
// known yet, so every core before the next unchecked release is guarded.
var pluginSliceFixed = [3]int{1, 31, 0}

// pluginSliceError says why ONNX Runtime's CUDA plugin EP (1.29, the only
// CUDA 13 plugin build) must not run the model at path with core version
// coreVersion: that EP crashes the whole process (SIGSEGV inside Run) on
// Slice nodes whose bounds are computed at run time, so such a model is
// refused with an error naming them instead. nil when the model has none,
// the core is newer than the releases known to crash, or the file cannot be
// read (ONNX Runtime then reports it).
func pluginSliceError(path, coreVersion string) error {
	if v, err := parseVersion(coreVersion); err != nil || !versionLess(v, pluginSliceFixed) {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	slices, err := runtimeSlices(b)
	if err != nil || len(slices) == 0 {
		return nil
	}
	shown := slices
	if len(shown) > 3 {
		shown = append(shown[:3:3], "...")
	}
	return fmt.Errorf("%w: %s has %d Slice node(s) whose bounds are computed at run time (%s), and ONNX Runtime's CUDA plugin EP "+
		"crashes the process on them with this core (%s); use --fallback cpu, an ONNX Runtime with the CUDA EP built in (onnxruntime-gpu, JetPack), "+
		"or an export without them (models/scripts/chunk_split.py rewrites torch's chunk() pattern)",
		ErrPluginSlice, path, len(slices), strings.Join(shown, ", "), coreVersion)
}
