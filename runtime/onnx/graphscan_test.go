package onnx

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/encoding/protowire"
)

// Hand-built ONNX protobuf pieces for the graph scanner's tests.
func pbBytes(num protowire.Number, v []byte) []byte {
	return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), v)
}

func pbNode(name, op string, inputs, outputs []string, subgraphs ...[]byte) []byte {
	var b []byte
	for _, in := range inputs {
		b = append(b, pbBytes(nodeInput, []byte(in))...)
	}
	for _, out := range outputs {
		b = append(b, pbBytes(nodeOutput, []byte(out))...)
	}
	b = append(b, pbBytes(nodeName, []byte(name))...)
	b = append(b, pbBytes(nodeOpType, []byte(op))...)
	b = protowire.AppendVarint(protowire.AppendTag(b, 7, protowire.VarintType), 1) // an unrelated varint field
	for _, g := range subgraphs {
		b = append(b, pbBytes(nodeAttribute, pbBytes(attrGraph, g))...)
	}
	return b
}

func pbGraph(initializers []string, nodes ...[]byte) []byte {
	var b []byte
	for _, name := range initializers {
		b = append(b, pbBytes(graphInitializer, append(pbBytes(tensorName, []byte(name)), pbBytes(9, []byte{1, 2, 3, 4})...))...)
	}
	for _, n := range nodes {
		b = append(b, pbBytes(graphNode, n)...)
	}
	return b
}

func pbModel(graph []byte) []byte {
	return append(protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), 8), pbBytes(modelGraph, graph)...)
}

func TestRuntimeSlices(t *testing.T) {
	body := pbGraph(nil, pbNode("inner", "Slice", []string{"x", "outer_start", "dyn_end"}, []string{"y"}))
	g := pbGraph([]string{"s0", "e0"},
		pbNode("c", "Constant", nil, []string{"e1"}),
		pbNode("const_init", "Slice", []string{"x", "s0", "e0"}, []string{"a"}),
		pbNode("const_node", "Slice", []string{"x", "s0", "e1", "", ""}, []string{"b"}),
		pbNode("shape", "Shape", []string{"x"}, []string{"dyn_end"}),
		pbNode("runtime", "Slice", []string{"x", "s0", "dyn_end"}, []string{"c"}),
		pbNode("", "Slice", []string{"x", "s0", "e0", "axes_dyn"}, []string{"d"}),
		pbNode("opset1", "Slice", []string{"x"}, []string{"e"}),
		pbNode("if", "If", []string{"cond"}, []string{"f"}, body),
	)
	got, err := runtimeSlices(pbModel(g))
	require.NoError(t, err)
	assert.Equal(t, []string{"runtime", "node 5", "inner"}, got)

	for _, c := range []struct {
		file string
		want []string
	}{
		{"../../models/default/model.onnx", nil},
		{"../../models/testdata/w2v/model.onnx", nil}, // one Slice, constant bounds
		{"../../models/testdata/nemo/model.onnx", []string{"/inner/encoder/layers.0/self_attn/Slice_2", "/inner/encoder/layers.1/self_attn/Slice_2"}},
	} {
		b, err := os.ReadFile(c.file)
		require.NoError(t, err)
		got, err := runtimeSlices(b)
		require.NoError(t, err, c.file)
		assert.Equal(t, c.want, got, c.file)
	}

	_, err = runtimeSlices(pbModel(g)[:40])
	assert.Error(t, err, "truncated")
	_, err = runtimeSlices([]byte{0x08, 0x01})
	assert.ErrorContains(t, err, "no graph")
	deep := pbGraph(nil)
	for range maxGraphDepth + 2 {
		deep = pbGraph(nil, pbNode("if", "If", nil, nil, deep))
	}
	_, err = runtimeSlices(pbModel(deep))
	assert.ErrorContains(t, err, "nested deeper")
}

func TestPluginSliceError(t *testing.T) {
	nemo := "../../models/testdata/nemo/model.onnx"
	err := pluginSliceError(nemo, "1.29.0")
	require.ErrorIs(t, err, ErrPluginSlice)
	assert.ErrorContains(t, err, "2 Slice node(s)")
	assert.ErrorContains(t, err, "layers.0/self_attn/Slice_2")
	assert.ErrorContains(t, err, "--fallback cpu")
	assert.NoError(t, pluginSliceError(nemo, "1.31.0"), "a core newer than the releases known to crash")
	assert.NoError(t, pluginSliceError("../../models/default/model.onnx", "1.29.0"))
	assert.NoError(t, pluginSliceError("no/such/model.onnx", "1.29.0"), "ONNX Runtime reports a missing file")
}

// FuzzRuntimeSlices: the scanner returns names or an error on any bytes,
// never panics.
func FuzzRuntimeSlices(f *testing.F) {
	g := pbGraph([]string{"s"}, pbNode("n", "Slice", []string{"x", "s", "e"}, []string{"y"}),
		pbNode("if", "If", nil, nil, pbGraph(nil, pbNode("m", "Slice", []string{"x", "s", "e"}, nil))))
	f.Add(pbModel(g))
	f.Add(pbModel(g)[:25])
	f.Add([]byte{0x3a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, b []byte) {
		names, err := runtimeSlices(b)
		if err != nil {
			assert.Empty(t, names)
		}
	})
}

// TestOpenRefusesPluginSlices: Open on the CUDA plugin EP refuses a model
// with run-time-bounded Slices before creating a session (the library is
// never loaded: any file passes findCUDAEP), and fallback=cpu runs it on
// the CPU with the refusal as its Fallback. Needs a core older than
// pluginSliceFixed, as the one make deps pins.
func TestOpenRefusesPluginSlices(t *testing.T) {
	ep := t.TempDir() + "/libonnxruntime_providers_cuda.so"
	require.NoError(t, os.WriteFile(ep, nil, 0o644))
	opts := Options{Provider: ProviderCUDA, EPLibrary: ep, Threads: 1}
	_, err := Open("../../models/testdata/nemo", opts)
	require.ErrorIs(t, err, ErrPluginSlice)
	opts.Fallback = FallbackCPU
	e, err := Open("../../models/testdata/nemo", opts)
	require.NoError(t, err)
	defer e.Close()
	assert.ErrorIs(t, e.Fallback(), ErrPluginSlice)
}
