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
// graph) of its Slice nodes, subgraphs included. Malformed files are an
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
	if err := scanSlices(*graph, 0, &found); err != nil {
		return nil, err
	}
	return found, nil
}

// scanSlices appends the Slice nodes of graph g (GraphProto: node = 1) and
// of its nodes' subgraphs to found.
func scanSlices(g pb.Msg, depth int, found *[]string) error {
	if depth > maxGraphDepth {
		return fmt.Errorf("subgraphs nested deeper than %d", maxGraphDepth)
	}
	it := g.Fields()
	var f pb.Field
	for i := 0; it.Next(&f); {
		if f.Num != 1 || f.Wire != pb.Bytes {
			continue
		}
		name, op, subgraphs, err := readNode(f.Sub)
		if err != nil {
			return err
		}
		if op == "Slice" {
			if name == "" {
				name = fmt.Sprintf("node %d", i)
			}
			if len(*found) >= maxONNXEntries {
				return fmt.Errorf("more than %d Slice nodes", maxONNXEntries)
			}
			*found = append(*found, name)
		}
		for _, sub := range subgraphs {
			if err := scanSlices(sub, depth+1, found); err != nil {
				return err
			}
		}
		i++
	}
	return it.Err()
}

// readNode reads a NodeProto's name (3), op_type (4) and the graphs of its
// attributes (5: AttributeProto g = 6, graphs = 11).
func readNode(m pb.Msg) (name, op string, subgraphs []pb.Msg, err error) {
	it := m.Fields()
	var f pb.Field
	for it.Next(&f) {
		if f.Wire != pb.Bytes {
			continue
		}
		switch f.Num {
		case 3:
			name, err = f.Sub.String(maxNameBytes)
		case 4:
			op, err = f.Sub.String(maxNameBytes)
		case 5:
			sub := f.Sub.Fields()
			var a pb.Field
			for sub.Next(&a) {
				if (a.Num == 6 || a.Num == 11) && a.Wire == pb.Bytes {
					subgraphs = append(subgraphs, a.Sub)
				}
			}
			err = sub.Err()
		}
		if err != nil {
			return "", "", nil, err
		}
	}
	return name, op, subgraphs, it.Err()
}
