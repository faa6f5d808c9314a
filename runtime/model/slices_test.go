package model

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime/model/internal/pb"
)

// Hand-built ONNX protobuf pieces for the Slice scanner's tests.
func pbField(num byte, v []byte) []byte {
	return append(append([]byte{num<<3 | 2}, varint(uint64(len(v)))...), v...)
}

func pbNode(name, op string, inputs, outputs []string, subgraphs ...[]byte) []byte {
	var b []byte
	for _, in := range inputs {
		b = append(b, pbField(1, []byte(in))...)
	}
	for _, out := range outputs {
		b = append(b, pbField(2, []byte(out))...)
	}
	b = append(b, pbField(3, []byte(name))...)
	b = append(b, pbField(4, []byte(op))...)
	b = append(b, 7<<3, 1) // an unrelated varint field
	for _, g := range subgraphs {
		b = append(b, pbField(5, pbField(6, g))...)
	}
	return b
}

func pbGraph(initializers []string, nodes ...[]byte) []byte {
	var b []byte
	for _, name := range initializers {
		b = append(b, pbField(5, append(pbField(8, []byte(name)), pbField(9, []byte{1, 2, 3, 4})...))...)
	}
	for _, n := range nodes {
		b = append(b, pbField(1, n)...)
	}
	return b
}

func pbModel(graph []byte) []byte { return append([]byte{1 << 3, 8}, pbField(7, graph)...) }

func TestSliceNodes(t *testing.T) {
	body := pbGraph(nil, pbNode("inner", "Slice", []string{"x", "s", "e"}, []string{"y"}))
	g := pbGraph([]string{"s0", "e0"},
		pbNode("c", "Constant", nil, []string{"e1"}),
		pbNode("first", "Slice", []string{"x", "s0", "e0"}, []string{"a"}),
		pbNode("shape", "Shape", []string{"x"}, []string{"dyn_end"}),
		pbNode("", "Slice", []string{"x", "s0", "dyn_end"}, []string{"d"}),
		pbNode("if", "If", []string{"cond"}, []string{"f"}, body),
	)
	got, err := sliceNodes(pb.FromBytes(pbModel(g)))
	require.NoError(t, err)
	assert.Equal(t, []string{"first", "node 3", "inner"}, got)

	for _, c := range []struct {
		file string
		want []string
	}{
		{"../../models/default/model.onnx", nil},
		{"../../models/testdata/w2v/model.onnx", []string{"/wav2vec2/encoder/pos_conv_embed/padding/Slice"}}, // SamePad, constant bounds
	} {
		got, err := SliceNodes(c.file)
		require.NoError(t, err, c.file)
		assert.Equal(t, c.want, got, c.file)
	}

	nemo, err := SliceNodes("../../models/testdata/nemo/model.onnx")
	require.NoError(t, err)
	assert.Len(t, nemo, 6)
	assert.Contains(t, nemo, "/inner/encoder/layers.0/self_attn/Slice_2")

	_, err = sliceNodes(pb.FromBytes(pbModel(g)[:40]))
	assert.Error(t, err, "truncated")
	_, err = sliceNodes(pb.FromBytes([]byte{0x08, 0x01}))
	assert.ErrorContains(t, err, "no graph")
	deep := pbGraph(nil)
	for range maxGraphDepth + 2 {
		deep = pbGraph(nil, pbNode("if", "If", nil, nil, deep))
	}
	_, err = sliceNodes(pb.FromBytes(pbModel(deep)))
	assert.ErrorContains(t, err, "nested deeper")
	_, err = SliceNodes("no/such/model.onnx")
	assert.Error(t, err)
}

// FuzzSliceNodes: the scanner returns names or an error on any bytes,
// never panics.
func FuzzSliceNodes(f *testing.F) {
	g := pbGraph([]string{"s"}, pbNode("n", "Slice", []string{"x", "s", "e"}, []string{"y"}),
		pbNode("if", "If", nil, nil, pbGraph(nil, pbNode("m", "Slice", []string{"x", "s", "e"}, nil))))
	f.Add(pbModel(g))
	f.Add(pbModel(g)[:25])
	f.Add([]byte{0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		names, err := sliceNodes(pb.FromBytes(b))
		if err != nil {
			assert.Empty(t, names)
		}
	})
}

// FuzzSlicesAsGathers: any bytes give a rewritten model or an error, never
// a panic; a rewritten model parses and has no Slice left.
func FuzzSlicesAsGathers(f *testing.F) {
	opset17 := []byte{8<<3 | 2, 2, 2 << 3, 17}
	g := pbGraph([]string{"s"}, pbNode("n", "Slice", []string{"x", "s", "e"}, []string{"y"}))
	f.Add(append(opset17, pbModel(g)...))
	f.Add(pbModel(g))
	if b, err := os.ReadFile("../../models/testdata/nemo/model.onnx"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		out, _, err := slicesAsGathers(b)
		if err != nil || out == nil {
			return
		}
		left, err := sliceNodes(pb.FromBytes(out))
		require.NoError(t, err)
		assert.Empty(t, left)
		_, err = parseONNX(pb.FromBytes(out))
		require.NoError(t, err)
	})
}
