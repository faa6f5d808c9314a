package runtime

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// scaleOp multiplies f32 x [B?,N] by the "factor" parameter.
type scaleOp struct{ factor float32 }

func (o scaleOp) Run(_ context.Context, in Tensors) (Tensors, error) {
	x := in["x"]
	y := Must(NewTensor(F32, x.Shape()))
	for i, v := range x.F32() {
		y.F32()[i] = v * o.factor
	}
	return Tensors{"y": y}, nil
}

// sumOp sums the last axis of f32 [B,N] into [B].
type sumOp struct{}

func (sumOp) Run(_ context.Context, in Tensors) (Tensors, error) {
	x := in["x"]
	b, n := x.Shape()[0], x.Shape()[1]
	s := Must(NewTensor(F32, Shape{b}))
	for i := range b {
		for _, v := range x.F32()[i*n : (i+1)*n] {
			s.F32()[i] += v
		}
	}
	return Tensors{"sum": s}, nil
}

func init() {
	Register(OpSpec{
		Name:    "test.scale",
		Inputs:  []TensorSpec{{Name: "x", DTypes: []DType{F32}, Dims: []string{"B", "N"}, BatchOptional: true}},
		Outputs: []TensorSpec{{Name: "y", DTypes: []DType{F32}, Dims: []string{"B", "N"}, BatchOptional: true}},
		Params:  []ParamSpec{{Name: "factor", Kind: Float, Default: 1.0}, {Name: "mode", Kind: String, Default: "a", Enum: []string{"a", "b"}}},
		New: func(p Params, _ Backend) (Op, error) {
			return scaleOp{factor: float32(p.Float("factor"))}, nil
		},
	})
	Register(OpSpec{
		Name:    "test.sum",
		Inputs:  []TensorSpec{{Name: "x", DTypes: []DType{F32}, Dims: []string{"B", "N"}}},
		Outputs: []TensorSpec{{Name: "sum", DTypes: []DType{F32}, Dims: []string{"B"}}},
		New:     func(Params, Backend) (Op, error) { return sumOp{}, nil },
	})
}

func TestRegisterPanics(t *testing.T) {
	newOp := func(Params, Backend) (Op, error) { return sumOp{}, nil }
	assert.PanicsWithValue(t, "edge: Register needs an op name", func() { Register(OpSpec{New: newOp}) })
	assert.Panics(t, func() { Register(OpSpec{Name: "test.nonew"}) })
	assert.PanicsWithValue(t, "edge: Register called twice for op test.sum", func() { Register(OpSpec{Name: "test.sum", New: newOp}) })
	assert.Panics(t, func() { RegisterBackend("cpu", func() (Backend, error) { return CPU, nil }) })
}

func TestLookupAndList(t *testing.T) {
	s, err := Lookup("test.sum")
	require.NoError(t, err)
	assert.Equal(t, "test.sum", s.Name)
	_, err = Lookup("nope")
	assert.ErrorContains(t, err, `unknown op "nope"`)
	names := []string{}
	for _, s := range List() {
		names = append(names, s.Name)
	}
	assert.Subset(t, names, []string{"test.scale", "test.sum"})
	assert.IsIncreasing(t, names)
}

func TestParams(t *testing.T) {
	specs := []ParamSpec{
		{Name: "n", Kind: Int, Default: 3},
		{Name: "f", Kind: Float},
		{Name: "on", Kind: Boolean, Default: false},
		{Name: "mode", Kind: String, Default: "x", Enum: []string{"x", "y"}},
		{Name: "sizes", Kind: Ints},
		{Name: "w", Kind: Floats},
	}
	p, err := ResolveParams("t", specs, map[string]any{"n": "7", "on": "true", "sizes": "1,2,3", "w": []any{1, 2.5}})
	require.NoError(t, err)
	assert.Equal(t, 7, p.Int("n"))
	assert.True(t, p.Bool("on"))
	assert.Equal(t, []int{1, 2, 3}, p.IntList("sizes"))
	assert.Equal(t, []float64{1, 2.5}, p.FloatList("w"))
	assert.True(t, p.IsNil("f"))
	assert.False(t, p.IsSet("mode"))
	assert.Equal(t, "x", p.Str("mode"))

	for _, tc := range []struct {
		cfg  map[string]any
		want string
	}{
		{map[string]any{"nn": 1}, `unknown parameter "nn" (known: n, f, on, mode, sizes, w)`},
		{map[string]any{"n": "seven"}, `parameter n: "seven" is not an integer`},
		{map[string]any{"n": 2.5}, "parameter n: 2.5 is not an integer"},
		{map[string]any{"f": "x"}, `parameter f: "x" is not a number`},
		{map[string]any{"on": "maybe"}, `parameter on: "maybe" is not a bool`},
		{map[string]any{"mode": "z"}, `parameter mode: "z" is not one of x | y`},
		{map[string]any{"sizes": "1,b"}, `parameter sizes: item 1: "b" is not an integer`},
		{map[string]any{"deep": map[string]any{"key": 1}}, `unknown parameter "deep.key"`},
	} {
		_, err := ResolveParams("t", specs, tc.cfg)
		assert.ErrorContains(t, err, tc.want, "%v", tc.cfg)
	}
}

func TestInstanceRunChecksInputs(t *testing.T) {
	inst, err := New("test.sum", nil, CPU)
	require.NoError(t, err)
	ctx := context.Background()
	x := Must(FromSlice(F32, Shape{2, 2}, []float32{1, 2, 3, 4}))
	out, err := inst.Run(ctx, Tensors{"x": x})
	require.NoError(t, err)
	assert.Equal(t, []float32{3, 7}, out["sum"].F32())

	_, err = inst.Run(ctx, Tensors{})
	assert.ErrorContains(t, err, `op test.sum: missing input "x" (f32 [B,N])`)
	_, err = inst.Run(ctx, Tensors{"x": Must(NewTensor(I32, Shape{2, 2}))})
	assert.ErrorContains(t, err, `input "x" is i32, want f32 [B,N]`)
	_, err = inst.Run(ctx, Tensors{"x": Must(NewTensor(F32, Shape{4}))})
	assert.ErrorContains(t, err, `input "x" has shape [4] (rank 1), want f32 [B,N]`)
	_, err = inst.Run(ctx, Tensors{"x": x, "y": x})
	assert.ErrorContains(t, err, `unexpected input "y"`)

	_, err = New("test.scale", map[string]any{"factr": 2}, CPU)
	assert.ErrorContains(t, err, `op test.scale: unknown parameter "factr" (known: factor, mode)`)
}

func TestConfigLayering(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "edge.yaml")
	require.NoError(t, os.WriteFile(file, []byte("threads: 2\nmodel: from-file\nort_lib: /file/lib.so\nencoder:\n  threads: 3\n"), 0o644))
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.String("model", "flag-default", "")
	fs.String("ort-lib", "", "")
	fs.Int("threads", 1, "")
	require.NoError(t, fs.Parse([]string{"--ort-lib", "/flag/lib.so"}))
	env := func() []string {
		return []string{"EDGE_THREADS=4", "EDGE_ENCODER__THREADS=5", "EDGE_ORT_LIB=/env/lib.so", "OTHER=1"}
	}
	k, err := LoadConfig(ConfigSources{
		Defaults: map[string]any{"threads": 1, "backend": "cpu"},
		File:     file, Environ: env, Flags: fs,
		Known: []string{"threads", "model", "ort_lib", "encoder", "backend"},
	})
	require.NoError(t, err)
	assert.Equal(t, "cpu", k.String("backend"), "default survives")
	assert.Equal(t, "from-file", k.String("model"), "file beats an unchanged flag's default")
	assert.Equal(t, 4, k.Int("threads"), "env beats file")
	assert.Equal(t, 5, k.Int("encoder.threads"), "EDGE_A__B nests")
	assert.Equal(t, "/flag/lib.so", k.String("ort_lib"), "a set flag beats env")

	_, err = LoadConfig(ConfigSources{File: file, Environ: func() []string { return nil }, Known: []string{"threads"}})
	assert.ErrorContains(t, err, `unknown config key "encoder.threads"`)
	_, err = LoadConfig(ConfigSources{Environ: func() []string { return []string{"EDGE_LARGE_MODEL=/x"} }, Known: []string{"threads"}})
	assert.ErrorContains(t, err, `unknown config key "large_model", set by the environment variable EDGE_LARGE_MODEL`)
	_, err = LoadConfig(ConfigSources{File: filepath.Join(dir, "missing.yaml")})
	assert.ErrorContains(t, err, "config file")
	require.NoError(t, os.WriteFile(file, []byte("threads: [\n"), 0o644))
	_, err = LoadConfig(ConfigSources{File: file})
	assert.ErrorContains(t, err, "config file")
}

func pipelineFromYAML(t *testing.T, yaml string) (PipelineConfig, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "p.yaml")
	require.NoError(t, os.WriteFile(file, []byte(yaml), 0o644))
	k, err := LoadConfig(ConfigSources{File: file, Environ: func() []string { return nil }})
	require.NoError(t, err)
	return LoadPipelineConfig(k, "pipeline")
}

func TestPipelineRuns(t *testing.T) {
	cfg, err := pipelineFromYAML(t, `
pipeline:
  inputs: [{name: pcm, dtype: f32, rank: 2}]
  steps:
    - {name: gain, op: test.scale, inputs: {x: pcm}, outputs: {y: loud}, params: {factor: 2}}
    - {op: test.sum, inputs: {x: loud}}
  outputs: [sum]
`)
	require.NoError(t, err)
	p, err := NewPipeline(cfg, CPU)
	require.NoError(t, err)
	out, stats, err := p.RunStats(context.Background(), Tensors{"pcm": Must(FromSlice(F32, Shape{1, 3}, []float32{1, 2, 3}))})
	require.NoError(t, err)
	assert.Equal(t, []float32{12}, out["sum"].F32())
	require.Len(t, stats.Steps, 2)
	assert.Equal(t, "gain", stats.Steps[0].Name)
	assert.Equal(t, TransferStats{}, stats.Transfers, "cpu pipeline copies nothing")

	_, err = p.Run(context.Background(), Tensors{"pcm": Must(NewTensor(F32, Shape{3}))})
	assert.ErrorContains(t, err, `pipeline input "pcm" is f32[3]@cpu, declared f32 of rank 2`)
}

func TestPipelineValidation(t *testing.T) {
	for _, tc := range []struct{ name, steps, want string }{
		{"unknown op", `[{op: nope}]`, `step 1 (nope): unknown op "nope"`},
		{"missing input", `[{op: test.sum, inputs: {x: feats}}]`, `step 1 (test.sum): input "x" needs tensor "feats", which no pipeline input or earlier step produces (tensors: ids, pcm, pcm1)`},
		{"dtype mismatch", `[{op: test.sum, inputs: {x: ids}}]`, `input "x" wants f32 [B,N] but tensor "ids" (from pipeline input) is [i64]`},
		{"rank mismatch", `[{op: test.sum, inputs: {x: pcm1}}]`, `input "x" wants rank [2] (f32 [B,N]) but tensor "pcm1" (from pipeline input) has rank [1]`},
		{"rank from op output", `[{op: test.scale, inputs: {x: pcm1}}, {op: test.sum, inputs: {x: y}}]`, ""},
		{"unknown binding", `[{op: test.sum, inputs: {z: pcm}}]`, `op has no input "z" (inputs: x)`},
		{"unknown param", `[{op: test.scale, inputs: {x: pcm}, params: {factr: 1}}]`, `unknown parameter "factr"`},
		{"overwrite", `[{op: test.scale, inputs: {x: pcm}, outputs: {y: pcm1}}]`, `output "y" would overwrite tensor "pcm1" from pipeline input`},
		{"unknown step key", `[{op: test.sum, inputz: {x: pcm}}]`, `inputz`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			yaml := fmt.Sprintf("pipeline:\n  inputs: [{name: pcm, dtype: f32, rank: 2}, {name: pcm1, dtype: f32, rank: 1}, {name: ids, dtype: i64, rank: 2}]\n  steps: %s\n", tc.steps)
			cfg, err := pipelineFromYAML(t, yaml)
			if err == nil {
				_, err = NewPipeline(cfg, CPU)
			}
			if tc.want == "" {
				assert.NoError(t, err)
				return
			}
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func TestTensor(t *testing.T) {
	_, err := FromSlice(F32, Shape{2, 2}, []float32{1})
	assert.ErrorContains(t, err, "shape [2,2] needs 4 elements, the slice has 1")
	_, err = FromSlice(I32, Shape{1}, []float32{1})
	assert.ErrorContains(t, err, "cannot hold i32")
	_, err = NewTensor(F32, Shape{-1})
	assert.Error(t, err)
	_, err = NewTensor(F32, Shape{1 << 40, 1 << 40})
	assert.ErrorContains(t, err, "too many elements")
	x := Must(NewTensor(BF16, Shape{2, 3}))
	assert.Len(t, x.U16(), 6)
	assert.Equal(t, int64(12), x.Bytes())
	r, err := x.Reshape(Shape{3, 2})
	require.NoError(t, err)
	assert.Equal(t, Shape{3, 2}, r.Shape())
	assert.Panics(t, func() { x.F32() })
	for _, d := range []DType{F32, F64, F16, BF16, I16, U16, I32, I64, U8, Bool} {
		got, err := ParseDType(d.String())
		require.NoError(t, err)
		assert.Equal(t, d, got)
	}
	_, err = ParseDType("f8")
	assert.Error(t, err)
}

// fakeBackend is a host backend under another name, to exercise
// backend-specific implementations.
type fakeBackend struct{ cpuBackend }

func (fakeBackend) Name() string { return "fake" }

func TestRegisterImplementation(t *testing.T) {
	RegisterImplementation("test.sum", "fake", func(Params, Backend) (Op, error) {
		return scaleOp{factor: 0}, nil // a different op, so the test can tell which ran
	})
	assert.Panics(t, func() {
		RegisterImplementation("test.sum", "fake", func(Params, Backend) (Op, error) { return sumOp{}, nil })
	})
	assert.Panics(t, func() { RegisterImplementation("test.sum", "", nil) })

	x := Must(FromSlice(F32, Shape{1, 2}, []float32{1, 2}))
	onCPU, err := New("test.sum", nil, CPU)
	require.NoError(t, err)
	out, err := onCPU.Run(context.Background(), Tensors{"x": x})
	require.NoError(t, err)
	assert.Equal(t, []float32{3}, out["sum"].F32())

	onFake, err := New("test.sum", nil, fakeBackend{})
	require.NoError(t, err)
	_, err = onFake.Run(context.Background(), Tensors{"x": x})
	assert.ErrorContains(t, err, `produced no output "sum"`, "the fake backend's implementation ran")
}
