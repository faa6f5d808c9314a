package model

import (
	"fmt"
	"os"
	"sort"
	"strings"

	"github.com/edgespeech/edge/runtime/model/internal/pb"
)

// ONNX element types (TensorProto.DataType) that detection tells apart.
const (
	ElemFloat   = 1
	ElemInt32   = 6
	ElemInt64   = 7
	ElemBool    = 9
	ElemFloat16 = 10
	ElemDouble  = 11
)

// TensorInfo is a declared graph input or output.
type TensorInfo struct {
	Name string
	Elem int // TensorProto.DataType (ElemFloat, ...)
	// Dims holds each axis's size, -1 where symbolic; DimNames the symbolic names.
	Dims     []int64
	DimNames []string
}

// ElemName is the element type as edge writes it (f32, f16, i64, ...).
func (t TensorInfo) ElemName() string { return elemName(t.Elem) }

func elemName(e int) string {
	switch e {
	case ElemFloat:
		return "f32"
	case ElemFloat16:
		return "f16"
	case ElemDouble:
		return "f64"
	case ElemInt32:
		return "i32"
	case ElemInt64:
		return "i64"
	case ElemBool:
		return "bool"
	case 16:
		return "bf16"
	}
	return fmt.Sprintf("type%d", e)
}

func (t TensorInfo) String() string {
	parts := make([]string, len(t.Dims))
	for i, d := range t.Dims {
		switch {
		case d >= 0:
			parts[i] = fmt.Sprint(d)
		case t.DimNames[i] != "":
			parts[i] = t.DimNames[i]
		default:
			parts[i] = "?"
		}
	}
	return fmt.Sprintf("%s %s [%s]", t.Name, t.ElemName(), strings.Join(parts, ","))
}

// ONNXInfo is what detection reads from an .onnx file without ONNX Runtime:
// the graph's declared inputs (initializers excluded) and outputs, the
// custom metadata (what ONNX Runtime calls the custom metadata map), the
// producer, the files holding external weights, and a count of the
// quantisation operators.
type ONNXInfo struct {
	Path         string
	Producer     string
	IRVersion    int64
	Opset        int64
	Inputs       []TensorInfo
	Outputs      []TensorInfo
	Metadata     map[string]string
	ExternalData []string // distinct external-data locations, sorted
	QuantOps     int      // QuantizeLinear, DynamicQuantizeLinear, MatMulInteger, ConvInteger, QLinear*
	Nodes        int
}

// Bounds on what ReadONNX reads of fields it keeps (names, metadata values).
const (
	maxNameBytes     = 4096
	maxMetadataBytes = 1 << 20
	maxONNXEntries   = 1 << 20
)

// ReadONNX reads an .onnx file's interface (see ONNXInfo). It seeks over the
// weights, so a 2 GB model costs a few reads of its graph structure.
func ReadONNX(path string) (*ONNXInfo, error) {
	info, err := readONNXFile(path, parseONNX)
	if err != nil {
		return nil, err
	}
	info.Path = path
	return info, nil
}

// readONNXFile parses the ModelProto in the file at path with parse,
// reading through the file (parse seeks over what it skips).
func readONNXFile[T any](path string, parse func(pb.Msg) (T, error)) (T, error) {
	var zero T
	f, err := os.Open(path)
	if err != nil {
		return zero, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return zero, err
	}
	v, err := parse(pb.New(f, st.Size()))
	if err != nil {
		return zero, fmt.Errorf("%s: not a readable ONNX model: %w", path, err)
	}
	return v, nil
}

// ParseONNX parses a serialised ModelProto held in memory (see ReadONNX).
func ParseONNX(b []byte) (*ONNXInfo, error) { return parseONNX(pb.FromBytes(b)) }

func parseONNX(m pb.Msg) (*ONNXInfo, error) {
	info := &ONNXInfo{Metadata: map[string]string{}}
	var graph *pb.Msg
	it := m.Fields()
	var f pb.Field
	for it.Next(&f) {
		switch {
		case f.Num == 1 && f.Wire == pb.Varint:
			info.IRVersion = int64(f.Value)
		case f.Num == 2 && f.Wire == pb.Bytes:
			s, err := f.Sub.String(maxNameBytes)
			if err != nil {
				return nil, err
			}
			info.Producer = s
		case f.Num == 7 && f.Wire == pb.Bytes:
			g := f.Sub
			graph = &g
		case f.Num == 8 && f.Wire == pb.Bytes: // opset_import
			domain, version, err := opsetImport(f.Sub)
			if err != nil {
				return nil, err
			}
			if defaultDomain(domain) {
				info.Opset = version
			}
		case f.Num == 14 && f.Wire == pb.Bytes: // metadata_props
			k, v, err := stringPair(f.Sub)
			if err != nil {
				return nil, err
			}
			if len(info.Metadata) >= maxONNXEntries {
				return nil, fmt.Errorf("more than %d metadata entries", maxONNXEntries)
			}
			info.Metadata[k] = v
		}
	}
	if err := it.Err(); err != nil {
		return nil, err
	}
	if graph == nil {
		return nil, fmt.Errorf("no graph (is this an .onnx model file?)")
	}
	if err := info.parseGraph(*graph); err != nil {
		return nil, err
	}
	return info, nil
}

// opsetImport reads an OperatorSetIdProto: domain (1) and version (2).
func opsetImport(m pb.Msg) (domain string, version int64, err error) {
	it := m.Fields()
	var f pb.Field
	for it.Next(&f) {
		if f.Num == 1 && f.Wire == pb.Bytes {
			domain, _ = f.Sub.String(maxNameBytes)
		} else if f.Num == 2 && f.Wire == pb.Varint {
			version = int64(f.Value)
		}
	}
	return domain, version, it.Err()
}

// defaultOpset is ModelProto m's opset of the default domain (0 when it
// imports none), read from its top-level fields only.
func defaultOpset(m pb.Msg) (int64, error) {
	var opset int64
	it := m.Fields()
	var f pb.Field
	for it.Next(&f) {
		if f.Num != 8 || f.Wire != pb.Bytes {
			continue
		}
		domain, version, err := opsetImport(f.Sub)
		if err != nil {
			return 0, err
		}
		if defaultDomain(domain) {
			opset = version
		}
	}
	return opset, it.Err()
}

func stringPair(m pb.Msg) (k, v string, err error) {
	it := m.Fields()
	var f pb.Field
	for it.Next(&f) {
		if f.Wire != pb.Bytes {
			continue
		}
		switch f.Num {
		case 1:
			k, err = f.Sub.String(maxNameBytes)
		case 2:
			v, err = f.Sub.String(maxMetadataBytes)
		}
		if err != nil {
			return "", "", err
		}
	}
	return k, v, it.Err()
}

var quantOps = map[string]bool{"QuantizeLinear": true, "DynamicQuantizeLinear": true, "MatMulInteger": true,
	"ConvInteger": true, "QLinearMatMul": true, "QLinearConv": true, "MatMulIntegerToFloat": true,
	"DynamicQuantizeMatMul": true}

func (info *ONNXInfo) parseGraph(g pb.Msg) error {
	inits := map[string]bool{}
	external := map[string]bool{}
	var ins []TensorInfo
	it := g.Fields()
	var f pb.Field
	for it.Next(&f) {
		if f.Wire != pb.Bytes {
			continue
		}
		switch f.Num {
		case 1: // node
			info.Nodes++
			n, err := readNode(f.Sub)
			if err != nil {
				return err
			}
			if quantOps[n.op] {
				info.QuantOps++
			}
		case 5: // initializer
			name, loc, err := initializer(f.Sub)
			if err != nil {
				return err
			}
			if len(inits) >= maxONNXEntries {
				return fmt.Errorf("more than %d initializers", maxONNXEntries)
			}
			inits[name] = true
			if loc != "" {
				external[loc] = true
			}
		case 11, 12: // input, output
			t, err := valueInfo(f.Sub)
			if err != nil {
				return err
			}
			if len(ins)+len(info.Outputs) >= maxONNXEntries {
				return fmt.Errorf("more than %d graph inputs and outputs", maxONNXEntries)
			}
			if f.Num == 11 {
				ins = append(ins, t)
			} else {
				info.Outputs = append(info.Outputs, t)
			}
		}
	}
	if err := it.Err(); err != nil {
		return err
	}
	for _, t := range ins {
		if !inits[t.Name] { // IR < 4 lists initializers among the inputs
			info.Inputs = append(info.Inputs, t)
		}
	}
	for loc := range external {
		info.ExternalData = append(info.ExternalData, loc)
	}
	sort.Strings(info.ExternalData)
	return nil
}

// initializer returns a TensorProto's name and, for external data, its
// location (external_data entry "location").
func initializer(m pb.Msg) (name, location string, err error) {
	it := m.Fields()
	var f pb.Field
	for it.Next(&f) {
		switch {
		case f.Num == 8 && f.Wire == pb.Bytes:
			if name, err = f.Sub.String(maxNameBytes); err != nil {
				return "", "", err
			}
		case f.Num == 13 && f.Wire == pb.Bytes:
			k, v, err := stringPair(f.Sub)
			if err != nil {
				return "", "", err
			}
			if k == "location" {
				location = v
			}
		}
	}
	return name, location, it.Err()
}

// valueInfo parses a ValueInfoProto holding a tensor type.
func valueInfo(m pb.Msg) (TensorInfo, error) {
	var t TensorInfo
	it := m.Fields()
	var f pb.Field
	for it.Next(&f) {
		if f.Wire != pb.Bytes {
			continue
		}
		var err error
		switch f.Num {
		case 1:
			t.Name, err = f.Sub.String(maxNameBytes)
		case 2: // TypeProto
			err = typeProto(f.Sub, &t)
		}
		if err != nil {
			return t, err
		}
	}
	return t, it.Err()
}

func typeProto(m pb.Msg, t *TensorInfo) error {
	it := m.Fields()
	var f pb.Field
	for it.Next(&f) {
		if f.Num != 1 || f.Wire != pb.Bytes { // tensor_type
			continue
		}
		tt := f.Sub.Fields()
		var g pb.Field
		for tt.Next(&g) {
			switch {
			case g.Num == 1 && g.Wire == pb.Varint:
				t.Elem = int(g.Value)
			case g.Num == 2 && g.Wire == pb.Bytes: // TensorShapeProto
				dims := g.Sub.Fields()
				var d pb.Field
				for dims.Next(&d) {
					if d.Num != 1 || d.Wire != pb.Bytes {
						continue
					}
					if len(t.Dims) >= 64 {
						return fmt.Errorf("tensor %q has more than 64 axes", t.Name)
					}
					size, name := int64(-1), ""
					di := d.Sub.Fields()
					var x pb.Field
					for di.Next(&x) {
						switch {
						case x.Num == 1 && x.Wire == pb.Varint:
							size = int64(x.Value)
						case x.Num == 2 && x.Wire == pb.Bytes:
							name, _ = x.Sub.String(maxNameBytes)
						}
					}
					if err := di.Err(); err != nil {
						return err
					}
					t.Dims = append(t.Dims, size)
					t.DimNames = append(t.DimNames, name)
				}
				if err := dims.Err(); err != nil {
					return err
				}
			}
		}
		if err := tt.Err(); err != nil {
			return err
		}
	}
	return it.Err()
}
