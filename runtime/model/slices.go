package model

import (
	"fmt"

	"github.com/edgespeech/edge/runtime/model/internal/pb"
)

// maxGraphDepth bounds the nesting of subgraphs (If/Loop/Scan bodies)
// RuntimeSlices follows, so a hostile file cannot recurse without end.
const maxGraphDepth = 32

// RuntimeSlices reads the .onnx file at path (seeking over the weights, as
// ReadONNX does) and returns the names (or, unnamed, "node I") of its Slice
// nodes, subgraphs included, whose starts, ends, axes or steps are
// computed at run time: inputs that are neither initializers nor outputs of
// Constant nodes. Malformed files are an error, never a panic.
func RuntimeSlices(path string) ([]string, error) { return readONNXFile(path, runtimeSlices) }

func runtimeSlices(m pb.Msg) ([]string, error) {
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
	if err := scanSlices(*graph, 0, nil, &found); err != nil {
		return nil, err
	}
	return found, nil
}

// graphNode is what scanSlices keeps of a NodeProto.
type graphNode struct {
	name, op        string
	inputs, outputs []string
	subgraphs       []pb.Msg
}

// scanSlices appends the run-time-bounded Slices of graph g to found; outer
// holds the constants visible from the enclosing graphs.
func scanSlices(g pb.Msg, depth int, outer map[string]bool, found *[]string) error {
	if depth > maxGraphDepth {
		return fmt.Errorf("subgraphs nested deeper than %d", maxGraphDepth)
	}
	consts := make(map[string]bool, len(outer))
	for k := range outer {
		consts[k] = true
	}
	var nodes []graphNode
	it := g.Fields()
	var f pb.Field
	for it.Next(&f) {
		if f.Wire != pb.Bytes {
			continue
		}
		switch f.Num {
		case 1: // node
			if len(nodes) >= maxONNXEntries {
				return fmt.Errorf("more than %d nodes", maxONNXEntries)
			}
			n, err := readNode(f.Sub)
			if err != nil {
				return err
			}
			nodes = append(nodes, n)
		case 5, 15: // initializer; sparse_initializer, whose values (1) carry the name
			t := f.Sub
			if f.Num == 15 {
				sub := f.Sub.Fields()
				var v pb.Field
				for sub.Next(&v) {
					if v.Num == 1 && v.Wire == pb.Bytes {
						t = v.Sub
					}
				}
				if err := sub.Err(); err != nil {
					return err
				}
			}
			name, _, err := initializer(t)
			if err != nil {
				return err
			}
			if len(consts) >= maxONNXEntries {
				return fmt.Errorf("more than %d initializers", maxONNXEntries)
			}
			consts[name] = true
		}
	}
	if err := it.Err(); err != nil {
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
		for _, sub := range n.subgraphs {
			if err := scanSlices(sub, depth+1, consts, found); err != nil {
				return err
			}
		}
	}
	return nil
}

// readNode reads a NodeProto's inputs (1), outputs (2), name (3), op_type
// (4) and the graphs of its attributes (5: AttributeProto g = 6, graphs = 11).
func readNode(m pb.Msg) (graphNode, error) {
	var n graphNode
	it := m.Fields()
	var f pb.Field
	for it.Next(&f) {
		if f.Wire != pb.Bytes {
			continue
		}
		if f.Num == 5 {
			sub := f.Sub.Fields()
			var a pb.Field
			for sub.Next(&a) {
				if (a.Num == 6 || a.Num == 11) && a.Wire == pb.Bytes {
					n.subgraphs = append(n.subgraphs, a.Sub)
				}
			}
			if err := sub.Err(); err != nil {
				return n, err
			}
			continue
		}
		if f.Num < 1 || f.Num > 4 {
			continue
		}
		s, err := f.Sub.String(maxNameBytes)
		if err != nil {
			return n, err
		}
		switch f.Num {
		case 1:
			n.inputs = append(n.inputs, s)
		case 2:
			n.outputs = append(n.outputs, s)
		case 3:
			n.name = s
		case 4:
			n.op = s
		}
		if len(n.inputs)+len(n.outputs) > maxONNXEntries {
			return n, fmt.Errorf("a node with more than %d inputs and outputs", maxONNXEntries)
		}
	}
	return n, it.Err()
}
