package runtime

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// memBackend is a device backend whose memory is Go slices behind
// DeviceBuffers that count themselves, so tests can see what a pipeline
// leaves allocated.
type memBackend struct {
	mu   sync.Mutex
	live map[*memBuf]bool
}

func newMemBackend() *memBackend { return &memBackend{live: map[*memBuf]bool{}} }

type memBuf struct {
	b    *memBackend
	data []float32
}

func (m *memBuf) Device() string { return "mem:0" }
func (m *memBuf) Bytes() int64   { return int64(4 * len(m.data)) }
func (m *memBuf) Free() error {
	m.b.mu.Lock()
	defer m.b.mu.Unlock()
	delete(m.b.live, m)
	return nil
}

func (b *memBackend) Name() string          { return "mem" }
func (b *memBackend) Devices() []DeviceInfo { return nil }
func (b *memBackend) Close() error          { return nil }

func (b *memBackend) Live() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.live)
}

func (b *memBackend) Alloc(dt DType, shape Shape) (*Tensor, error) {
	if dt != F32 {
		return nil, fmt.Errorf("mem backend holds f32 only, not %v", dt)
	}
	m := &memBuf{b: b, data: make([]float32, shape.NumElements())}
	b.mu.Lock()
	b.live[m] = true
	b.mu.Unlock()
	return NewDeviceTensor(dt, shape, m), nil
}

func (b *memBackend) Upload(t *Tensor) (*Tensor, error) {
	if !t.OnHost() {
		return t, nil
	}
	d, err := b.Alloc(t.DType(), t.Shape())
	if err != nil {
		return nil, err
	}
	copy(d.Buffer().(*memBuf).data, t.F32())
	return d, nil
}

func (b *memBackend) Download(t *Tensor) (*Tensor, error) {
	if t.OnHost() {
		return t, nil
	}
	return FromSlice(F32, t.Shape(), append([]float32(nil), t.Buffer().(*memBuf).data...))
}

// memOp runs a host op on the mem backend: inputs are read from device
// memory and outputs allocated there, as a device op's would be.
type memOp struct {
	b    *memBackend
	host Op
}

func (o memOp) Run(ctx context.Context, in Tensors) (Tensors, error) {
	hin := Tensors{}
	for k, t := range in {
		h, err := o.b.Download(t)
		if err != nil {
			return nil, err
		}
		hin[k] = h
	}
	hout, err := o.host.Run(ctx, hin)
	if err != nil {
		return nil, err
	}
	out := Tensors{}
	for k, t := range hout {
		if out[k], err = o.b.Upload(t); err != nil {
			_ = out.Release()
			return nil, err
		}
	}
	return out, nil
}

// passOp returns its input as its output (the same memory).
type passOp struct{}

func (passOp) Run(_ context.Context, in Tensors) (Tensors, error) { return Tensors{"y": in["x"]}, nil }

// failOp always fails.
type failOp struct{}

func (failOp) Run(_ context.Context, in Tensors) (Tensors, error) {
	return nil, errors.New("refused")
}

func init() {
	onMem := func(host Op) func(Params, Backend) (Op, error) {
		return func(p Params, b Backend) (Op, error) { return memOp{b: b.(*memBackend), host: host}, nil }
	}
	RegisterImplementation("test.scale", "mem", func(p Params, b Backend) (Op, error) {
		return memOp{b: b.(*memBackend), host: scaleOp{factor: float32(p.Float("factor"))}}, nil
	})
	RegisterImplementation("test.sum", "mem", onMem(sumOp{}))
	xy := func(name string) OpSpec {
		return OpSpec{
			Name:    name,
			Inputs:  []TensorSpec{{Name: "x", DTypes: []DType{F32}, Dims: []string{"B", "N"}}},
			Outputs: []TensorSpec{{Name: "y", DTypes: []DType{F32}, Dims: []string{"B", "N"}}},
		}
	}
	pass := xy("test.pass")
	pass.New = func(Params, Backend) (Op, error) { return passOp{}, nil }
	Register(pass)
	fail := xy("test.fail")
	fail.New = func(Params, Backend) (Op, error) { return failOp{}, nil }
	Register(fail)
}

func memPipeline(t *testing.T, b Backend, steps string) *Pipeline {
	t.Helper()
	cfg, err := pipelineFromYAML(t, "pipeline:\n  inputs: [{name: pcm, dtype: f32, rank: 2}]\n  steps: "+steps+"\n  outputs: [sum]\n")
	require.NoError(t, err)
	p, err := NewPipeline(cfg, b)
	require.NoError(t, err)
	return p
}

// TestPipelineReleasesWhatItMakes: uploads and intermediates are freed by
// Run, on success and on error; the outputs are the caller's until
// Tensors.Release; the caller's inputs are never freed.
func TestPipelineReleasesWhatItMakes(t *testing.T) {
	ctx := context.Background()
	b := newMemBackend()
	x := Must(FromSlice(F32, Shape{1, 3}, []float32{1, 2, 3}))

	p := memPipeline(t, b, `[{op: test.scale, inputs: {x: pcm}, params: {factor: 2}}, {op: test.pass, inputs: {x: y}, outputs: {y: z}}, {op: test.sum, inputs: {x: z}}]`)
	out, stats, err := p.RunStats(ctx, Tensors{"pcm": x})
	require.NoError(t, err)
	assert.Equal(t, 1, stats.Transfers.HostToDevice, "the host pcm went up once")
	assert.Equal(t, 1, b.Live(), "only the output is left: the upload and the intermediates are freed")
	h, err := b.Download(out["sum"])
	require.NoError(t, err)
	assert.Equal(t, []float32{12}, h.F32())
	require.NoError(t, out.Release())
	assert.Equal(t, 0, b.Live())
	require.NoError(t, out.Release(), "releasing twice is safe")

	// A device input stays the caller's, also when an op hands it back.
	dev, err := b.Upload(x)
	require.NoError(t, err)
	p = memPipeline(t, b, `[{op: test.pass, inputs: {x: pcm}}, {op: test.sum, inputs: {x: y}}]`)
	out, err = p.Run(ctx, Tensors{"pcm": dev})
	require.NoError(t, err)
	require.NoError(t, out.Release())
	assert.Equal(t, 1, b.Live(), "the caller's device input survives")
	require.NoError(t, dev.Release())

	// A failing step: nothing is left.
	p = memPipeline(t, b, `[{op: test.scale, inputs: {x: pcm}}, {op: test.fail, inputs: {x: y}, outputs: {y: z}}, {op: test.sum, inputs: {x: z}}]`)
	_, err = p.Run(ctx, Tensors{"pcm": x})
	assert.ErrorContains(t, err, "step test.fail: op test.fail: refused")
	assert.Equal(t, 0, b.Live(), "an error leaves nothing allocated")

	// Outputs that share memory with an intermediate are kept.
	cfg, err := pipelineFromYAML(t, "pipeline:\n  inputs: [{name: pcm, dtype: f32, rank: 2}]\n  steps: [{op: test.scale, inputs: {x: pcm}}, {op: test.pass, inputs: {x: y}, outputs: {y: z}}]\n  outputs: [z]\n")
	require.NoError(t, err)
	p, err = NewPipeline(cfg, b)
	require.NoError(t, err)
	out, err = p.Run(ctx, Tensors{"pcm": x})
	require.NoError(t, err)
	assert.Equal(t, 1, b.Live())
	h, err = b.Download(out["z"])
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3}, h.F32())
	require.NoError(t, out.Release())
	assert.Equal(t, 0, b.Live())
}

// TestInstanceReleasesItsUploads: the copies an Instance makes to place its
// inputs are freed when Run returns.
func TestInstanceReleasesItsUploads(t *testing.T) {
	b := newMemBackend()
	inst, err := New("test.sum", nil, b)
	require.NoError(t, err)
	x := Must(FromSlice(F32, Shape{2, 2}, []float32{1, 2, 3, 4}))
	out, copies, err := inst.RunStats(context.Background(), Tensors{"x": x})
	require.NoError(t, err)
	assert.Equal(t, TransferStats{HostToDevice: 1, HostToDeviceBytes: 16}, copies)
	assert.Equal(t, 1, b.Live(), "the upload is freed, the output is the caller's")
	require.NoError(t, out.Release())

	// An op returning its (uploaded) input: the output keeps that memory.
	inst, err = New("test.pass", nil, b)
	require.NoError(t, err)
	out, err = inst.Run(context.Background(), Tensors{"x": x})
	require.NoError(t, err)
	assert.Equal(t, 1, b.Live())
	require.NoError(t, out.Release())
	assert.Equal(t, 0, b.Live())
}

// TestPipelineConcurrentRuns: many goroutines run one pipeline; each gets
// its own result and statistics, and nothing is left allocated.
func TestPipelineConcurrentRuns(t *testing.T) {
	b := newMemBackend()
	p := memPipeline(t, b, `[{op: test.scale, inputs: {x: pcm}, params: {factor: 3}}, {op: test.sum, inputs: {x: y}}]`)
	const goroutines, runs = 16, 20
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range runs {
				v := float32(g*runs + i)
				x := Must(FromSlice(F32, Shape{1, 2}, []float32{v, 1}))
				out, stats, err := p.RunStats(context.Background(), Tensors{"pcm": x})
				if err != nil {
					errs <- err
					return
				}
				h, err := b.Download(out["sum"])
				_ = out.Release()
				if err != nil {
					errs <- err
					return
				}
				if got, want := h.F32()[0], 3*(v+1); got != want || len(stats.Steps) != 2 || stats.Transfers.HostToDevice != 1 {
					errs <- fmt.Errorf("run %v: sum %v (want %v), %d steps, %d uploads", v, got, want, len(stats.Steps), stats.Transfers.HostToDevice)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assert.Equal(t, 0, b.Live())
}

// blockOp blocks until its context is done or release is closed.
type blockOp struct{ started, release chan struct{} }

func (o blockOp) Run(ctx context.Context, in Tensors) (Tensors, error) {
	o.started <- struct{}{}
	select {
	case <-o.release:
	case <-ctx.Done():
	}
	return Tensors{"sum": Must(NewTensor(F32, Shape{1}))}, nil
}

// TestInstanceSerialisesAndCancels: a second call waits for the first and
// gives up when its context ends first.
func TestInstanceSerialisesAndCancels(t *testing.T) {
	op := blockOp{started: make(chan struct{}, 2), release: make(chan struct{})}
	spec, err := Lookup("test.sum")
	require.NoError(t, err)
	inst := &Instance{Spec: spec, Backend: CPU, op: op, turn: make(chan struct{}, 1)}
	x := Must(FromSlice(F32, Shape{1, 1}, []float32{1}))
	done := make(chan error)
	go func() {
		_, err := inst.Run(context.Background(), Tensors{"x": x})
		done <- err
	}()
	<-op.started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = inst.Run(ctx, Tensors{"x": x})
	assert.ErrorIs(t, err, context.Canceled, "the second call waited for its turn and gave up")
	assert.Empty(t, op.started, "the op was never entered twice at once")
	close(op.release)
	require.NoError(t, <-done)
}

func TestRegisterChecksDefaults(t *testing.T) {
	newOp := func(Params, Backend) (Op, error) { return sumOp{}, nil }
	for _, tc := range []struct {
		p    ParamSpec
		want string
	}{
		{ParamSpec{Name: "gain", Kind: Float, Default: 1}, "edge: Register: op test.bad: parameter gain: default 1 is a int; a float parameter needs a float64"},
		{ParamSpec{Name: "n", Kind: Int, Default: 1.5}, "edge: Register: op test.bad: parameter n: default 1.5 is a float64; a int parameter needs a int"},
		{ParamSpec{Name: "on", Kind: Boolean, Default: "yes"}, "edge: Register: op test.bad: parameter on: default yes is a string; a bool parameter needs a bool"},
		{ParamSpec{Name: "xs", Kind: Floats, Default: []int{1}}, "edge: Register: op test.bad: parameter xs: default [1] is a []int; a []float parameter needs a []float64"},
		{ParamSpec{Name: "mode", Kind: String, Default: "c", Enum: []string{"a", "b"}}, `edge: Register: op test.bad: parameter mode: default "c" is not one of a | b`},
	} {
		assert.PanicsWithValue(t, tc.want, func() {
			Register(OpSpec{Name: "test.bad", New: newOp, Params: []ParamSpec{tc.p}})
		}, tc.p.Name)
		_, err := Lookup("test.bad")
		require.Error(t, err, "a refused op is not registered")
	}
}

// gainOp multiplies x by its optional input gain's first element (1 when
// absent).
type gainOp struct{}

func (gainOp) Run(_ context.Context, in Tensors) (Tensors, error) {
	g := float32(1)
	if t := in["gain"]; t != nil {
		g = t.F32()[0]
	}
	y := Must(NewTensor(F32, in["x"].Shape()))
	for i, v := range in["x"].F32() {
		y.F32()[i] = g * v
	}
	return Tensors{"y": y}, nil
}

func init() {
	Register(OpSpec{
		Name: "test.gain",
		Inputs: []TensorSpec{
			{Name: "x", DTypes: []DType{F32}, Dims: []string{"B", "N"}},
			{Name: "gain", DTypes: []DType{F32}, Dims: []string{"N"}, Optional: true},
		},
		Outputs: []TensorSpec{{Name: "y", DTypes: []DType{F32}, Dims: []string{"B", "N"}}},
		New:     func(Params, Backend) (Op, error) { return gainOp{}, nil },
	})
}

// TestOptionalInputsBindOnlyWhenNamed: a pipeline tensor that happens to
// share an optional input's name is not fed to it.
func TestOptionalInputsBindOnlyWhenNamed(t *testing.T) {
	in := Tensors{
		"x":    Must(FromSlice(F32, Shape{1, 2}, []float32{1, 2})),
		"gain": Must(FromSlice(F32, Shape{1}, []float32{10})),
	}
	for _, tc := range []struct {
		binding string
		want    []float32
	}{
		{"{x: x}", []float32{1, 2}},
		{"{x: x, gain: gain}", []float32{10, 20}},
	} {
		cfg, err := pipelineFromYAML(t, "pipeline:\n  inputs: [{name: x, dtype: f32, rank: 2}, {name: gain, dtype: f32, rank: 1}]\n  steps: [{op: test.gain, inputs: "+tc.binding+"}]\n  outputs: [y]\n")
		require.NoError(t, err)
		p, err := NewPipeline(cfg, CPU)
		require.NoError(t, err)
		out, err := p.Run(context.Background(), in)
		require.NoError(t, err)
		assert.Equal(t, tc.want, out["y"].F32(), tc.binding)
	}
}
