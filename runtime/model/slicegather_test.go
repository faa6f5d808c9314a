package model_test

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ort "github.com/yalue/onnxruntime_go"

	"github.com/edgespeech/edge/runtime/model"
	"github.com/edgespeech/edge/runtime/model/internal/pb"
	"github.com/edgespeech/edge/runtime/onnx"
)

// Builders of ONNX protobuf messages for the rewrite's tests.

func valueInfoPB(name string, elem int, dims ...int64) []byte {
	var shape []byte
	for _, d := range dims {
		shape = pb.AppendBytes(shape, 1, pb.AppendInt(nil, 1, d))
	}
	tt := pb.AppendInt(nil, 1, int64(elem))
	if dims != nil {
		tt = pb.AppendBytes(tt, 2, shape)
	}
	return pb.AppendBytes(pb.AppendString(nil, 1, name), 2, pb.AppendBytes(nil, 1, tt))
}

func intTensorPB(name string, elem int, scalar bool, v ...int64) []byte {
	t := []byte{}
	if !scalar {
		t = pb.AppendInt(t, 1, int64(len(v)))
	}
	t = pb.AppendInt(t, 2, int64(elem))
	t = pb.AppendString(t, 8, name)
	var raw []byte
	for _, x := range v {
		if elem == model.ElemInt32 {
			raw = binary.LittleEndian.AppendUint32(raw, uint32(int32(x)))
		} else {
			raw = binary.LittleEndian.AppendUint64(raw, uint64(x))
		}
	}
	return pb.AppendBytes(t, 9, raw)
}

func nodePB(op string, inputs []string, output string, attrs ...[]byte) []byte {
	var b []byte
	for _, in := range inputs {
		b = pb.AppendString(b, 1, in)
	}
	b = pb.AppendString(b, 2, output)
	b = pb.AppendString(b, 3, "n_"+output)
	b = pb.AppendString(b, 4, op)
	for _, a := range attrs {
		b = pb.AppendBytes(b, 5, a)
	}
	return b
}

// constantIntsPB is a Constant node with a value_ints attribute.
func constantIntsPB(output string, v ...int64) []byte {
	a := pb.AppendString(nil, 1, "value_ints")
	var packed []byte
	for _, x := range v {
		packed = pb.AppendVarint(packed, uint64(x))
	}
	a = pb.AppendBytes(a, 8, packed)
	a = pb.AppendInt(a, 20, 7) // INTS
	return nodePB("Constant", nil, output, a)
}

// sliceModel is a graph over x f32 [4, 10, 6], b and c i32 [2] with the
// Slice forms exporters write, each output a graph output.
func sliceModel(opset int64) []byte {
	const i64, i32 = model.ElemInt64, model.ElemInt32
	var g []byte
	node := func(n []byte) { g = pb.AppendBytes(g, 1, n) }
	init := func(t []byte) { g = pb.AppendBytes(g, 5, t) }
	var outs []string
	slice := func(out string, in ...string) {
		node(nodePB("Slice", in, out))
		outs = append(outs, out)
	}
	c := func(name string, elem int, v ...int64) string {
		init(intTensorPB(name, elem, false, v...))
		return name
	}

	slice("rows", "x", c("s0", i64, 1), c("e0", i64, 3), c("a0", i64, 0))
	slice("tail", "x", c("s1", i64, -3), c("e1", i64, math.MaxInt64), c("a1", i64, 1))
	slice("reversed", "x", c("s2", i64, -1), c("e2", i64, math.MinInt64), c("a2", i64, 1), c("t2", i64, -1))
	slice("strided", "x", c("s3", i64, 0, 8, -100), c("e3", i64, 4, 2, 100), c("a3", i64, 0, 1, 2), c("t3", i64, 2, -3, 1))
	slice("noaxes", "x", c("s4", i64, 0, 1), c("e4", i64, 2, -1))
	slice("empty", "x", c("s5", i64, 5, 3), c("e5", i64, 7, 1), c("a5", i64, 0, 1))
	slice("runtime", "x", "b", "c", c("a6", i32, 1, 2), c("t6", i32, 1, -1))
	node(constantIntsPB("s7", -4))
	node(constantIntsPB("e7", -1))
	node(constantIntsPB("a7", -1))
	slice("constnode", "x", "s7", "e7", "a7")
	slice("reversed_open", "x", c("s10", i64, 4), c("e10", i64, math.MaxInt64), c("a10", i64, 1), c("t10", i64, -2))
	slice("chained", "strided", c("s8", i64, 1), c("e8", i64, 2), c("a8", i64, 0))
	slice("none", "x", c("s9", i64), c("e9", i64), c("a9", i64))

	g = pb.AppendBytes(g, 11, valueInfoPB("x", model.ElemFloat, 4, 10, 6))
	g = pb.AppendBytes(g, 11, valueInfoPB("b", i32, 2))
	g = pb.AppendBytes(g, 11, valueInfoPB("c", i32, 2))
	for _, o := range outs {
		g = pb.AppendBytes(g, 12, valueInfoPB(o, model.ElemFloat))
	}
	m := pb.AppendInt(nil, 1, 8) // ir_version
	m = pb.AppendBytes(m, 8, pb.AppendInt(pb.AppendString(nil, 1, ""), 2, opset))
	return pb.AppendBytes(m, 7, g)
}

func initORT(t *testing.T) {
	t.Helper()
	require.NoError(t, onnx.Init(""))
}

// cpuSession opens model bytes rewritten from the file at path (or, with
// data nil, that file) on the CPU provider, as onnx's plugin-EP path opens
// them.
func cpuSession(t *testing.T, data []byte, path string, rewritten bool) *ort.DynamicAdvancedSession {
	t.Helper()
	ins, outs, err := ort.GetInputOutputInfo(path)
	require.NoError(t, err)
	so, err := ort.NewSessionOptions()
	require.NoError(t, err)
	defer so.Destroy()
	require.NoError(t, so.SetIntraOpNumThreads(1))
	if rewritten {
		require.NoError(t, so.AddSessionConfigEntry("optimization.disable_specified_optimizers", model.GatherToSliceFusion))
		require.NoError(t, so.AddSessionConfigEntry("session.model_external_initializers_file_folder_path", filepath.Dir(path)))
	}
	var s *ort.DynamicAdvancedSession
	if data != nil {
		s, err = ort.NewDynamicAdvancedSessionWithONNXData(data, names(ins), names(outs), so)
	} else {
		s, err = ort.NewDynamicAdvancedSession(path, names(ins), names(outs), so)
	}
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Destroy() })
	return s
}

func names(infos []ort.InputOutputInfo) []string {
	var n []string
	for _, i := range infos {
		n = append(n, i.Name)
	}
	return n
}

// run runs s on inputs and returns each output's shape and values.
func run(t *testing.T, s *ort.DynamicAdvancedSession, inputs []ort.Value, nOut int) []string {
	t.Helper()
	outs := make([]ort.Value, nOut)
	require.NoError(t, s.Run(inputs, outs))
	got := make([]string, nOut)
	for i, o := range outs {
		switch v := o.(type) {
		case *ort.Tensor[float32]:
			got[i] = fmt.Sprint(v.GetShape(), v.GetData())
		case *ort.Tensor[int64]:
			got[i] = fmt.Sprint(v.GetShape(), v.GetData())
		default:
			t.Fatalf("output %d is %T", i, o)
		}
		_ = o.Destroy()
	}
	return got
}

// TestSlicesAsGathersMatchesSlice: every Slice form of sliceModel, with
// run-time bounds in and out of range, gives Slice's tensors exactly after
// the rewrite, on ONNX Runtime's CPU provider with its default
// optimisations.
func TestSlicesAsGathersMatchesSlice(t *testing.T) {
	initORT(t)
	dir := t.TempDir()
	path := filepath.Join(dir, "slices.onnx")
	require.NoError(t, os.WriteFile(path, sliceModel(17), 0o644))
	data, n, err := model.SlicesAsGathers(path)
	require.NoError(t, err)
	assert.Equal(t, 11, n)
	left, err := model.SliceNodes(writeTemp(t, data))
	require.NoError(t, err)
	assert.Empty(t, left, "no Slice left")

	orig := cpuSession(t, nil, path, false)
	rew := cpuSession(t, data, path, true)
	x := make([]float32, 4*10*6)
	for i := range x {
		x[i] = float32(i)
	}
	xt, err := ort.NewTensor(ort.NewShape(4, 10, 6), x)
	require.NoError(t, err)
	defer xt.Destroy()
	for _, bc := range [][4]int32{{0, 0, 10, 6}, {2, 5, 7, 1}, {-3, -1, -1, -6}, {-20, 20, 20, -20}, {9, 0, 3, 0}, {math.MaxInt32, math.MinInt32, math.MinInt32, math.MaxInt32}} {
		b, err := ort.NewTensor(ort.NewShape(2), []int32{bc[0], bc[1]})
		require.NoError(t, err)
		c, err := ort.NewTensor(ort.NewShape(2), []int32{bc[2], bc[3]})
		require.NoError(t, err)
		in := []ort.Value{xt, b, c}
		want := run(t, orig, in, 11)
		got := run(t, rew, in, 11)
		assert.Equal(t, want, got, "bounds %v", bc)
		b.Destroy()
		c.Destroy()
	}
}

func writeTemp(t *testing.T, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.onnx")
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

// TestSlicesAsGathersRefuses: what cannot be rewritten is an error naming
// the node and why, never a wrong graph.
func TestSlicesAsGathersRefuses(t *testing.T) {
	_, _, err := model.SlicesAsGathers(writeTemp(t, sliceModel(11)))
	require.ErrorIs(t, err, model.ErrSliceRewrite)
	assert.ErrorContains(t, err, "opset 11 is older than 12")

	var g []byte
	g = pb.AppendBytes(g, 5, intTensorPB("s", model.ElemInt64, false, 0))
	g = pb.AppendBytes(g, 1, nodePB("Slice", []string{"x", "s", "e", "axes"}, "y"))
	g = pb.AppendBytes(g, 1, nodePB("Slice", []string{"x", "s", "e"}, "z"))
	g = pb.AppendBytes(g, 1, nodePB("Slice", []string{"x"}, "w"))
	g = pb.AppendBytes(g, 1, nodePB("Slice", []string{"x", "b", "c"}, "v"))
	g = pb.AppendBytes(g, 1, nodePB("Slice", []string{"x", "s", "s", "", "b"}, "u"))
	m := pb.AppendBytes(pb.AppendBytes(nil, 8, pb.AppendInt(nil, 2, 17)), 7, g)
	_, _, err = model.SlicesAsGathers(writeTemp(t, m))
	require.ErrorIs(t, err, model.ErrSliceRewrite)
	assert.ErrorContains(t, err, "n_y (axes computed at run time)")
	assert.ErrorContains(t, err, "n_w (no starts and ends inputs")
	assert.ErrorContains(t, err, "and 1 more", "three named")

	data, n, err := model.SlicesAsGathers("../../models/default/model.onnx")
	require.NoError(t, err)
	assert.Nil(t, data, "no Slice: nothing to rewrite")
	assert.Zero(t, n)
	_, _, err = model.SlicesAsGathers(writeTemp(t, []byte{0xff, 0xff}))
	require.Error(t, err)
	assert.NotErrorIs(t, err, model.ErrSliceRewrite)
}

// TestSlicesAsGathersExports: the test exports with Slice nodes (NeMo's
// relative shift, torch's chunk, wav2vec2's SamePad, EnCodec's and Mimi's
// padding arithmetic; Parakeet and Mimi with external data) give the same
// outputs after the rewrite, on inputs drawn to each one's declared shapes.
func TestSlicesAsGathersExports(t *testing.T) {
	initORT(t)
	for _, c := range []struct {
		path   string
		length int64 // of each symbolic axis but the first
	}{
		{"../../models/testdata/nemo/model.onnx", 400},
		{"../../models/testdata/parakeet/onnx/model.onnx", 400},
		{"../../models/testdata/sherpa/model.onnx", 400},
		{"../../models/testdata/w2v/model.onnx", 8000},
		{"../../codec/testdata/encodec/encoder.onnx", 8000},
		{"../../codec/testdata/encodec/decoder.onnx", 40},
		{"../../codec/testdata/mimi/encoder.onnx", 8000},
		{"../../codec/testdata/mimi/decoder.onnx", 8},
	} {
		path := c.path
		t.Run(filepath.Base(filepath.Dir(path))+"/"+filepath.Base(path), func(t *testing.T) {
			slices, err := model.SliceNodes(path)
			require.NoError(t, err)
			require.NotEmpty(t, slices)
			data, n, err := model.SlicesAsGathers(path)
			require.NoError(t, err)
			assert.Equal(t, len(slices), n)
			left, err := model.SliceNodes(writeTemp(t, data))
			require.NoError(t, err)
			assert.Empty(t, left)

			ins, outs, err := ort.GetInputOutputInfo(path)
			require.NoError(t, err)
			in := feeds(t, ins, c.length)
			defer func() {
				for _, v := range in {
					v.Destroy()
				}
			}()
			want := run(t, cpuSession(t, nil, path, false), in, len(outs))
			got := run(t, cpuSession(t, data, path, true), in, len(outs))
			assert.Equal(t, want, got)
		})
	}
}

// feeds makes one input per declared input: symbolic axes 1 (the first)
// or length, floats random, int64 vectors the length, int64 matrices an
// all-ones mask.
func feeds(t *testing.T, ins []ort.InputOutputInfo, length int64) []ort.Value {
	t.Helper()
	rng := rand.New(rand.NewPCG(3, 4))
	var vals []ort.Value
	for _, in := range ins {
		shape := append(ort.Shape{}, in.Dimensions...)
		for i, d := range shape {
			if d < 0 {
				shape[i] = length
				if i == 0 {
					shape[i] = 1
				}
			}
		}
		var v ort.Value
		var err error
		switch in.DataType {
		case ort.TensorElementDataTypeFloat:
			x := make([]float32, shape.FlattenedSize())
			for i := range x {
				x[i] = float32(rng.NormFloat64() * 0.3)
			}
			v, err = ort.NewTensor(shape, x)
		case ort.TensorElementDataTypeInt64:
			x := make([]int64, shape.FlattenedSize())
			for i := range x {
				x[i] = 1
				if len(shape) == 1 {
					x[i] = length
				}
			}
			v, err = ort.NewTensor(shape, x)
		default:
			t.Fatalf("input %s has type %v", in.Name, in.DataType)
		}
		require.NoError(t, err)
		vals = append(vals, v)
	}
	return vals
}
