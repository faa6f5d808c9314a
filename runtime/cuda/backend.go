//go:build cuda

// Package cuda registers the "cuda" backend (builds with -tags cuda only) on
// gorgonia.org/cu, the CUDA driver API.
//
// # Threading model
//
// A CUDA context is per-OS-thread state, while goroutines migrate between
// threads. Every method that touches the driver therefore locks its
// goroutine to its thread and makes the device's primary context current for
// the duration of the call (Backend.Do). The Backend is safe for concurrent
// use by many goroutines: its allocator pool, staging buffers, module cache
// and counters are guarded by mutexes.
//
// # Ordering
//
// All device work of a Backend — copies, memsets and kernel launches — goes
// to its one stream, in the order the calls are made. That is what makes the
// pooling allocator safe: a buffer freed while kernels that use it are still
// queued goes back to the pool at once, and whoever gets it next can only
// touch it through work queued after those kernels. Host-visible results
// (Download, DeviceToHost) synchronise the stream before they return.
//
// # Transfers
//
// Host<->device copies happen only in Upload, Download, HostToDevice and
// DeviceToHost, all through pinned staging buffers, and all are counted
// (Stats), so a pipeline can report how much it copied.
//
// # Start-up
//
// The binary links libcuda.so.1 and gorgonia.org/cu calls cuInit in its
// init (exiting the process when that fails, before our code runs), so a
// -tags cuda build is for GPU hosts only. Everything after that returns
// errors; nothing in this package exits or panics on a driver failure.
package cuda

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"
	"time"
	"unsafe"

	"gorgonia.org/cu"

	"github.com/edgespeech/edge/runtime"
)

func init() { runtime.RegisterBackend("cuda", func() (runtime.Backend, error) { return Open(0) }) }

// Backend drives one GPU through its primary context and one stream.
type Backend struct {
	dev     cu.Device
	ordinal int
	ctx     cu.CUContext
	stream  cu.Stream
	name    string

	pool    *pool
	staging *staging

	modMu   sync.Mutex
	modules map[string]*Module

	statsMu sync.Mutex
	stats   runtime.TransferStats

	closeOnce sync.Once
	closeErr  error
}

// Open retains the primary context of GPU ordinal and creates the backend's
// stream (non-blocking: it does not synchronise with the legacy stream 0).
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
	b := &Backend{dev: dev, ordinal: ordinal, ctx: ctx, name: fmt.Sprintf("cuda:%d", ordinal),
		modules: map[string]*Module{}}
	b.pool = newPool(b)
	b.staging = &staging{b: b}
	err = b.Do(func() error {
		s, err := cu.MakeStream(cu.NonBlocking)
		b.stream = s
		return err
	})
	if err != nil {
		_ = dev.ReleasePrimaryCtx()
		return nil, fmt.Errorf("cuda: creating a stream on device %d: %w", ordinal, err)
	}
	return b, nil
}

// Do runs f on a locked OS thread with the backend's context current, so f
// may call gorgonia.org/cu functions directly.
func (b *Backend) Do(f func() error) error {
	goruntime.LockOSThread()
	defer goruntime.UnlockOSThread()
	if err := cu.SetCurrentContext(b.ctx); err != nil {
		return fmt.Errorf("cuda: making the context of %s current: %w", b.name, err)
	}
	return f()
}

// Stream is the backend's stream; work queued on it is ordered with every
// copy and launch the backend makes.
func (b *Backend) Stream() cu.Stream { return b.stream }

// Synchronize waits for all work queued on the backend's stream.
func (b *Backend) Synchronize() error {
	return b.Do(func() error {
		if err := b.stream.Synchronize(); err != nil {
			return fmt.Errorf("cuda: %s: %w", b.name, err)
		}
		return nil
	})
}

// DevicePtr is a device address.
type DevicePtr = cu.DevicePtr

// Multiprocessors is the device's SM count (1 if the driver cannot say).
func (b *Backend) Multiprocessors() int {
	n, err := b.dev.Attribute(cu.MultiprocessorCount)
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// Memset queues setting n bytes at dst to v on the stream.
func (b *Backend) Memset(dst DevicePtr, v byte, n int64) error {
	if n == 0 {
		return nil
	}
	err := b.Do(func() error { return cu.MemsetD8Async(dst, v, n, b.stream) })
	if err != nil {
		return fmt.Errorf("cuda: memset of %d bytes on %s: %w", n, b.name, err)
	}
	return nil
}

// Name is "cuda".
func (b *Backend) Name() string { return "cuda" }

// Device is the device name of the backend's memory, e.g. "cuda:0".
func (b *Backend) Device() string { return b.name }

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
		sms, _ := d.Attribute(cu.MultiprocessorCount)
		out = append(out, runtime.DeviceInfo{
			Backend: "cuda", Name: fmt.Sprintf("cuda:%d %s", i, name), Memory: mem,
			Detail: fmt.Sprintf("sm_%d%d, %d SMs, driver API %d", major, minor, sms, cu.Version()),
		})
	}
	return out
}

// Stats returns the host<->device copies this backend has made.
func (b *Backend) Stats() runtime.TransferStats {
	b.statsMu.Lock()
	defer b.statsMu.Unlock()
	return b.stats
}

func (b *Backend) count(toDevice bool, bytes int64) {
	b.statsMu.Lock()
	defer b.statsMu.Unlock()
	if toDevice {
		b.stats.HostToDevice++
		b.stats.HostToDeviceBytes += bytes
	} else {
		b.stats.DeviceToHost++
		b.stats.DeviceToHostBytes += bytes
	}
}

// Buffer is device memory from a Backend's pool. Free returns it to the
// pool (stream-ordered, see the package doc); Ptr is its device address.
type Buffer struct {
	b     *Backend
	ptr   cu.DevicePtr
	bytes int64 // requested size
	class int64 // pool size class (the allocation's real size)
	mu    sync.Mutex
}

// Device names the GPU, e.g. "cuda:0".
func (m *Buffer) Device() string { return m.b.name }

// Bytes is the requested size in bytes.
func (m *Buffer) Bytes() int64 { return m.bytes }

// Ptr is the device address (0 for an empty or freed buffer).
func (m *Buffer) Ptr() cu.DevicePtr {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ptr
}

// Free returns the memory to the backend's pool; freeing twice is a no-op.
func (m *Buffer) Free() error {
	m.mu.Lock()
	p := m.ptr
	m.ptr = 0
	m.mu.Unlock()
	if p != 0 {
		m.b.pool.put(p, m.class)
	}
	return nil
}

// Ptr returns the device address of a tensor allocated by a cuda Backend.
func Ptr(t *runtime.Tensor) (cu.DevicePtr, error) {
	m, ok := t.Buffer().(*Buffer)
	if !ok {
		return 0, fmt.Errorf("cuda: tensor %v is not in cuda memory", t)
	}
	return m.Ptr(), nil
}

// Malloc returns an uninitialised device buffer of at least bytes bytes from
// the pool.
func (b *Backend) Malloc(bytes int64) (*Buffer, error) {
	if bytes < 0 {
		return nil, fmt.Errorf("cuda: allocating %d bytes", bytes)
	}
	m := &Buffer{b: b, bytes: bytes}
	if bytes == 0 {
		return m, nil
	}
	p, class, err := b.pool.get(bytes)
	if err != nil {
		return nil, err
	}
	m.ptr, m.class = p, class
	return m, nil
}

// Empty returns an uninitialised device tensor, for ops that write every
// element.
func (b *Backend) Empty(dt runtime.DType, shape runtime.Shape) (*runtime.Tensor, error) {
	if dt.Size() == 0 {
		return nil, fmt.Errorf("cuda: cannot allocate a tensor of dtype %v", dt)
	}
	if err := checkShape(shape); err != nil {
		return nil, err
	}
	m, err := b.Malloc(int64(shape.NumElements()) * int64(dt.Size()))
	if err != nil {
		return nil, err
	}
	return runtime.NewDeviceTensor(dt, shape, m), nil
}

// Alloc returns a zeroed device tensor.
func (b *Backend) Alloc(dt runtime.DType, shape runtime.Shape) (*runtime.Tensor, error) {
	t, err := b.Empty(dt, shape)
	if err != nil || t.Bytes() == 0 {
		return t, err
	}
	m := t.Buffer().(*Buffer)
	if err := b.Memset(m.Ptr(), 0, t.Bytes()); err != nil {
		_ = m.Free()
		return nil, err
	}
	return t, nil
}

// Upload copies a host tensor to the device (through pinned staging; the
// host tensor may be modified as soon as Upload returns). Device tensors of
// this backend are returned as they are.
func (b *Backend) Upload(t *runtime.Tensor) (*runtime.Tensor, error) {
	if !t.OnHost() {
		if m, ok := t.Buffer().(*Buffer); ok && m.b == b {
			return t, nil
		}
		return nil, fmt.Errorf("cuda: %v belongs to another backend; download it first", t)
	}
	d, err := b.Empty(t.DType(), t.Shape())
	if err != nil || t.Bytes() == 0 {
		return d, err
	}
	if err := b.HostToDevice(d.Buffer().(*Buffer).Ptr(), hostBytes(t)); err != nil {
		_ = d.Buffer().Free()
		return nil, err
	}
	return d, nil
}

// Download copies a device tensor into a new host tensor; it waits for the
// work queued before it. Host tensors are returned as they are.
func (b *Backend) Download(t *runtime.Tensor) (*runtime.Tensor, error) {
	if t.OnHost() {
		return t, nil
	}
	m, ok := t.Buffer().(*Buffer)
	if !ok || m.b != b {
		return nil, fmt.Errorf("cuda: %v is not memory of %s", t, b.name)
	}
	h, err := runtime.NewTensor(t.DType(), t.Shape())
	if err != nil || t.Bytes() == 0 {
		return h, err
	}
	if err := b.DeviceToHost(hostBytes(h), m.Ptr()); err != nil {
		return nil, err
	}
	return h, nil
}

// HostToDevice queues a copy of src to device address dst on the stream,
// through the pinned staging buffer; src may be reused when it returns.
func (b *Backend) HostToDevice(dst cu.DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	if dst == 0 {
		return errors.New("cuda: copy to a nil device address")
	}
	if err := b.staging.toDevice(dst, src); err != nil {
		return err
	}
	b.count(true, int64(len(src)))
	return nil
}

// DeviceToHost copies len(dst) bytes from device address src into dst after
// the work queued before it, and waits for the copy.
func (b *Backend) DeviceToHost(dst []byte, src cu.DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	if src == 0 {
		return errors.New("cuda: copy from a nil device address")
	}
	if err := b.staging.toHost(dst, src); err != nil {
		return err
	}
	b.count(false, int64(len(dst)))
	return nil
}

// Time runs f (which queues work on the stream) between two events and
// returns the device time between them; it waits for the work.
func (b *Backend) Time(f func() error) (time.Duration, error) {
	var start, stop cu.Event
	err := b.Do(func() error {
		var err error
		if start, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
			return err
		}
		if stop, err = cu.MakeEvent(cu.DefaultEvent); err != nil {
			_ = cu.DestroyEvent(&start)
			return err
		}
		return start.Record(b.stream)
	})
	if err != nil {
		return 0, fmt.Errorf("cuda: timing events: %w", err)
	}
	defer func() {
		_ = b.Do(func() error { return errors.Join(cu.DestroyEvent(&start), cu.DestroyEvent(&stop)) })
	}()
	if err := f(); err != nil {
		return 0, err
	}
	var ms float64
	err = b.Do(func() error {
		if err := stop.Record(b.stream); err != nil {
			return err
		}
		if err := stop.Synchronize(); err != nil {
			return err
		}
		ms, err = start.Elapsed(stop)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("cuda: timing: %w", err)
	}
	return time.Duration(ms * float64(time.Millisecond)), nil
}

// Close waits for queued work, then releases the modules, the pooled and
// staging memory, the stream and the primary context. The backend and its
// buffers must not be used afterwards.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		var errs []error
		errs = append(errs, b.Synchronize())
		b.modMu.Lock()
		for _, m := range b.modules {
			errs = append(errs, m.unload())
		}
		b.modules = nil
		b.modMu.Unlock()
		errs = append(errs, b.pool.trim(), b.staging.free())
		errs = append(errs, b.Do(func() error { return b.stream.Destroy() }))
		errs = append(errs, b.dev.ReleasePrimaryCtx())
		b.closeErr = errors.Join(errs...)
	})
	return b.closeErr
}

// hostBytes views a host tensor's elements as bytes (no copy).
func hostBytes(t *runtime.Tensor) []byte {
	n := int(t.Bytes())
	if n == 0 {
		return nil
	}
	var p unsafe.Pointer
	switch s := t.Data().(type) {
	case []float32:
		p = unsafe.Pointer(&s[0])
	case []float64:
		p = unsafe.Pointer(&s[0])
	case []uint16:
		p = unsafe.Pointer(&s[0])
	case []int16:
		p = unsafe.Pointer(&s[0])
	case []int32:
		p = unsafe.Pointer(&s[0])
	case []int64:
		p = unsafe.Pointer(&s[0])
	case []uint8:
		p = unsafe.Pointer(&s[0])
	case []bool:
		p = unsafe.Pointer(&s[0])
	default:
		return nil
	}
	return unsafe.Slice((*byte)(p), n)
}

// Bytes views a slice of fixed-size numbers as bytes, for HostToDevice and
// DeviceToHost.
func Bytes[T ~int32 | ~int64 | ~uint32 | ~uint64 | ~float32 | ~float64 | ~uint8](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}

// checkShape applies runtime's shape rules (no negative dimension, no
// overflowing element count) without allocating host memory.
func checkShape(s runtime.Shape) error {
	n := 1
	for _, d := range s {
		if d < 0 {
			return fmt.Errorf("cuda: shape %v has a negative dimension", s)
		}
		if d != 0 && n > (1<<62)/d {
			return fmt.Errorf("cuda: shape %v has too many elements", s)
		}
		n *= d
	}
	return nil
}
