package model

import (
	"fmt"

	"github.com/edgespeech/edge/runtime/model/internal/pb"
)

// maxGraphDepth bounds the nesting of subgraphs (If/Loop/Scan bodies)
// SliceNodes follows, so a hostile file cannot recurse without end.
const maxGraphDepth = 32

// SliceNodes reads the .onnx file at path (seeking over the weights, as
// ReadONNX does) and returns the names (or, unnamed, "node I" of its
// graph) of its Slice nodes, subgraphs and model functions included. Malformed files are an
// error, never a panic.
func SliceNodes(path string) ([]string, error) { return readONNXFile(path, sliceNodes) }

func sliceNodes(m pb.Msg) ([]string, error) {
	var graph *pb.Msg
	it := m.Fields()
	var f pb.Field
	for it.Next(&f) {
		if f.Num == 7 && f.Wire == pb.Bytes {
			g := f.Sub
			graph = &g
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	if graph == nil {
		return nil, fmt.Errorf("no graph (is this an .onnx model file?)")
	}
	var found []string
	if err := scanSlicesIn(*graph, 1, 0, &found); err != nil {
		return nil, err
	}
	it = m.Fields()
	for it.Next(&f) {
		if f.Num == 25 && f.Wire == pb.Bytes { // functions: FunctionProto.node = 7
			if err := scanSlicesIn(f.Sub, 7, 0, &found); err != nil {
				return nil, err
			}
		}
	}
	return found, it.Err()
}

// scanSlicesIn appends to found the Slice nodes of g, a GraphProto
// (nodeField 1) or FunctionProto (7), and of its nodes' subgraphs.
func scanSlicesIn(g pb.Msg, nodeField, depth int, found *[]string) error {
	if depth > maxGraphDepth {
		return fmt.Errorf("subgraphs nested deeper than %d", maxGraphDepth)
	}
	it := g.Fields()
	var f pb.Field
	for i := 0; it.Next(&f); {
		if f.Num != nodeField || f.Wire != pb.Bytes {
			continue
		}
		n, err := readNode(f.Sub)
		if err != nil {
			return err
		}
		name := n.name
		if n.isSlice() {
			if name == "" {
				name = fmt.Sprintf("node %d", i)
			}
			if len(*found) >= maxONNXEntries {
				return fmt.Errorf("more than %d Slice nodes", maxONNXEntries)
			}
			*found = append(*found, name)
		}
		for _, sub := range n.subgraphs {
			if err := scanSlicesIn(sub, 1, depth+1, found); err != nil {
				return err
			}
		}
		i++
	}
	return it.Err()
}

// nodeProto is what the readers take from a NodeProto.
type nodeProto struct {
	name, op, domain string
	inputs, outputs  []string
	attrs            []pb.Msg // AttributeProto
	subgraphs        []pb.Msg // the graphs of its attributes (If/Loop/Scan bodies)
}

// readNode reads a NodeProto: input (1), output (2), name (3), op_type
// (4), attribute (5; its graphs: g = 6, graphs = 11) and domain (7).
func readNode(m pb.Msg) (nodeProto, error) {
	var n nodeProto
	it := m.Fields()
	var f pb.Field
	for it.Next(&f) {
		if f.Wire != pb.Bytes {
			continue
		}
		var err error
		switch f.Num {
		case 1, 2:
			var s string
			if s, err = f.Sub.String(maxNameBytes); err == nil {
				if len(n.inputs)+len(n.outputs) >= maxONNXEntries {
					return n, fmt.Errorf("a node with more than %d inputs and outputs", maxONNXEntries)
				}
				if f.Num == 1 {
					n.inputs = append(n.inputs, s)
				} else {
					n.outputs = append(n.outputs, s)
				}
			}
		case 3:
			n.name, err = f.Sub.String(maxNameBytes)
		case 4:
			n.op, err = f.Sub.String(maxNameBytes)
		case 7:
			n.domain, err = f.Sub.String(maxNameBytes)
		case 5:
			n.attrs = append(n.attrs, f.Sub)
			sub := f.Sub.Fields()
			var a pb.Field
			for sub.Next(&a) {
				if (a.Num == 6 || a.Num == 11) && a.Wire == pb.Bytes {
					n.subgraphs = append(n.subgraphs, a.Sub)
				}
			}
			err = sub.Err()
		}
		if err != nil {
			return n, err
		}
	}
	return n, it.Err()
}

// isSlice says whether n is the ONNX Slice operator (default domain).
func (n *nodeProto) isSlice() bool {
	return n.op == "Slice" && defaultDomain(n.domain)
}

// defaultDomain says whether an operator or opset domain is ONNX's own.
func defaultDomain(d string) bool { return d == "" || d == "ai.onnx" }
