//go:build cuda

// Package cuda registers the "cuda" backend (builds with -tags cuda only).
//
// Threading model: a CUDA context is per-OS-thread state, while goroutines
// migrate between threads. Every method therefore locks its goroutine to its
// thread and makes the device's primary context current for the duration of
// the call; the backend is safe for concurrent use. The binary links
// libcuda.so.1 and gorgonia.org/cu calls cuInit at start-up, so a -tags cuda
// build is for GPU hosts only.
package cuda

import (
	"fmt"
	goruntime "runtime"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/edgespeech/edge/runtime"
)

func init() { runtime.RegisterBackend("cuda", func() (runtime.Backend, error) { return Open(0) }) }

// Backend drives one GPU through its primary context.
type Backend struct {
	dev     cu.Device
	ordinal int
	ctx     cu.CUContext
	name    string
}

// Open retains the primary context of GPU ordinal.
func Open(ordinal int) (*Backend, error) {
	n, err := cu.NumDevices()
	if err != nil {
		return nil, fmt.Errorf("cuda: counting devices: %w", err)
	}
	if ordinal < 0 || ordinal >= n {
		return nil, fmt.Errorf("cuda: no device %d (found %d)", ordinal, n)
	}
	dev, err := cu.GetDevice(ordinal)
	if err != nil {
		return nil, fmt.Errorf("cuda: device %d: %w", ordinal, err)
	}
	ctx, err := dev.RetainPrimaryCtx()
	if err != nil {
		return nil, fmt.Errorf("cuda: primary context of device %d: %w", ordinal, err)
	}
	return &Backend{dev: dev, ordinal: ordinal, ctx: ctx, name: fmt.Sprintf("cuda:%d", ordinal)}, nil
}

// do runs f on a locked OS thread with the primary context current.
func (b *Backend) do(f func() error) error {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		return fmt.Errorf("cuda: making the context current: %w", err)
	}
	return f()
}

// Name is "cuda".
func (b *Backend) Name() string { return "cuda" }

// Devices lists every GPU the driver reports.
func (b *Backend) Devices() []runtime.DeviceInfo {
	n, err := cu.NumDevices()
	if err != nil {
		return nil
	}
	var out []runtime.DeviceInfo
	for i := range n {
		d, err := cu.GetDevice(i)
		if err != nil {
			continue
		}
		name, _ := d.Name()
		mem, _ := d.TotalMem()
		major, minor, _ := d.ComputeCapability()
		out = append(out, runtime.DeviceInfo{
			Backend: "cuda", Name: fmt.Sprintf("cuda:%d %s", i, name), Memory: mem,
			Detail: fmt.Sprintf("sm_%d%d, driver API %d", major, minor, cu.Version()),
		})
	}
	return out
}

// buffer is device memory owned by a Backend.
type buffer struct {
	b     *Backend
	ptr   cu.DevicePtr
	bytes int64
}

func (m *buffer) Device() string { return m.b.name }
func (m *buffer) Bytes() int64   { return m.bytes }
func (m *buffer) Free() error {
	if m.ptr == 0 {
		return nil
	}
	err := m.b.do(func() error { return cu.MemFree(m.ptr) })
	m.ptr = 0
	return err
}

// Ptr returns the device address of a tensor allocated by a cuda Backend.
func Ptr(t *runtime.Tensor) (cu.DevicePtr, error) {
	m, ok := t.Buffer().(*buffer)
	if !ok {
		return 0, fmt.Errorf("cuda: tensor %v is not in cuda memory", t)
	}
	return m.ptr, nil
}

// Alloc returns a zeroed device tensor.
func (b *Backend) Alloc(dt runtime.DType, shape runtime.Shape) (*runtime.Tensor, error) {
	bytes := int64(shape.NumElements()) * int64(dt.Size())
	m := &buffer{b: b, bytes: bytes}
	if bytes == 0 {
		return runtime.NewDeviceTensor(dt, shape, m), nil
	}
	err := b.do(func() error {
		p, err := cu.MemAlloc(bytes)
		if err != nil {
			return fmt.Errorf("cuda: allocating %d bytes: %w", bytes, err)
		}
		m.ptr = p
		return cu.MemsetD8(p, 0, bytes)
	})
	if err != nil {
		return nil, err
	}
	return runtime.NewDeviceTensor(dt, shape, m), nil
}

// Upload copies a host tensor to the device.
func (b *Backend) Upload(t *runtime.Tensor) (*runtime.Tensor, error) {
	if !t.OnHost() {
		return t, nil
	}
	d, err := b.Alloc(t.DType(), t.Shape())
	if err != nil || t.Bytes() == 0 {
		return d, err
	}
	m := d.Buffer().(*buffer)
	src := hostPointer(t)
	err = b.do(func() error { return cu.MemcpyHtoD(m.ptr, src, t.Bytes()) })
	goruntime.KeepAlive(t)
	return d, err
}

// Download copies a device tensor into a new host tensor.
func (b *Backend) Download(t *runtime.Tensor) (*runtime.Tensor, error) {
	if t.OnHost() {
		return t, nil
	}
	m, ok := t.Buffer().(*buffer)
	if !ok {
		return nil, fmt.Errorf("cuda: tensor %v is not in cuda memory", t)
	}
	h, err := runtime.NewTensor(t.DType(), t.Shape())
	if err != nil || t.Bytes() == 0 {
		return h, err
	}
	dst := hostPointer(h)
	err = b.do(func() error { return cu.MemcpyDtoH(dst, m.ptr, t.Bytes()) })
	goruntime.KeepAlive(h)
	return h, err
}

// Close releases the primary context.
func (b *Backend) Close() error { return b.dev.ReleasePrimaryCtx() }

// hostPointer returns the address of a host tensor's first element.
func hostPointer(t *runtime.Tensor) unsafe.Pointer {
	switch s := t.Data().(type) {
	case []float32:
		return unsafe.Pointer(&s[0])
	case []float64:
		return unsafe.Pointer(&s[0])
	case []uint16:
		return unsafe.Pointer(&s[0])
	case []int16:
		return unsafe.Pointer(&s[0])
	case []int32:
		return unsafe.Pointer(&s[0])
	case []int64:
		return unsafe.Pointer(&s[0])
	case []uint8:
		return unsafe.Pointer(&s[0])
	case []bool:
		return unsafe.Pointer(&s[0])
	}
	panic(fmt.Sprintf("cuda: unsupported host slice %T", t.Data()))
}
