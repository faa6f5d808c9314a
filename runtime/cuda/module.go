//go:build cuda

package cuda

import (
	"fmt"
	"math"
	"sync"
	"unsafe"

	"gorgonia.org/cu"
)

// Module is a loaded kernel image (fatbin, cubin or PTX) of a Backend.
type Module struct {
	b    *Backend
	name string
	mod  cu.Module
	mu   sync.Mutex
	fns  map[string]*Kernel
}

// Module loads image once per name and backend and caches it; later calls
// with the same name return the cached module (image is then not read).
// The driver picks the SASS for the device from a fatbin, or JIT-compiles
// its PTX when there is none.
func (b *Backend) Module(name string, image []byte) (*Module, error) {
	b.modMu.Lock()
	defer b.modMu.Unlock()
	if b.modules == nil {
		return nil, fmt.Errorf("cuda: %s is closed", b.name)
	}
	if m, ok := b.modules[name]; ok {
		return m, nil
	}
	if len(image) == 0 {
		return nil, fmt.Errorf("cuda: module %s: empty image", name)
	}
	var mod cu.Module
	err := b.Do(func() error {
		var err error
		mod, err = cu.LoadData(string(image))
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: loading module %s (%d bytes) on %s: %w (is there SASS or PTX for this GPU in it?)", name, len(image), b.name, err)
	}
	m := &Module{b: b, name: name, mod: mod, fns: map[string]*Kernel{}}
	b.modules[name] = m
	return m, nil
}

func (m *Module) unload() error { return m.b.Do(func() error { return m.mod.Unload() }) }

// Kernel is one __global__ function of a Module.
type Kernel struct {
	m    *Module
	name string
	fn   cu.Function
}

// Kernel looks up an extern "C" __global__ function by name.
func (m *Module) Kernel(name string) (*Kernel, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if k, ok := m.fns[name]; ok {
		return k, nil
	}
	var fn cu.Function
	err := m.b.Do(func() error {
		var err error
		fn, err = m.mod.Function(name)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("cuda: kernel %s in module %s: %w", name, m.name, err)
	}
	k := &Kernel{m: m, name: name, fn: fn}
	m.fns[name] = k
	return k, nil
}

// Dim3 is a grid or block size.
type Dim3 struct{ X, Y, Z int }

// Launch queues the kernel on the backend's stream. Every argument is passed
// as one 8-byte word (gorgonia.org/cu's convention), so the CUDA side must
// declare 8-byte parameters: pointers (*Buffer, cu.DevicePtr), long long
// (int, int64, uint64) or double (float64). Other argument types are an
// error, float32 included: declare the parameter double and convert in the
// kernel.
func (k *Kernel) Launch(grid, block Dim3, sharedBytes int, args ...any) error {
	words := make([]uint64, len(args))
	ptrs := make([]unsafe.Pointer, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case *Buffer:
			words[i] = uint64(v.Ptr())
		case cu.DevicePtr:
			words[i] = uint64(v)
		case int:
			words[i] = uint64(int64(v))
		case int64:
			words[i] = uint64(v)
		case uint64:
			words[i] = v
		case float64:
			words[i] = math.Float64bits(v)
		default:
			return fmt.Errorf("cuda: kernel %s argument %d is %T; want *Buffer, cu.DevicePtr, int, int64, uint64 or float64 (8-byte parameters)", k.name, i, a)
		}
		ptrs[i] = unsafe.Pointer(&words[i])
	}
	for _, d := range []int{grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z} {
		if d < 1 {
			return fmt.Errorf("cuda: kernel %s launch grid %v block %v: every dimension must be >= 1", k.name, grid, block)
		}
	}
	err := k.m.b.Do(func() error {
		return k.fn.Launch(grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z, sharedBytes, k.m.b.stream, ptrs)
	})
	if err != nil {
		return fmt.Errorf("cuda: launching %s (grid %v, block %v, %d B shared): %w", k.name, grid, block, sharedBytes, err)
	}
	return nil
}
