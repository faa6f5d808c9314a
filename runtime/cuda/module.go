//go:build cuda

package cuda

import (
	"fmt"
	"sync"

	"gorgonia.org/cu"

	"github.com/edgespeech/edge/kernels"
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

// KernelModuleName is the name KernelModule loads the project's kernels
// under.
const KernelModuleName = "edge"

// KernelModule returns the module of the project's kernels (package
// kernels: the embedded fatbin, or the file $EDGE_KERNELS_FATBIN names),
// loaded once per backend; later calls return it without reading the image
// again.
func (b *Backend) KernelModule() (*Module, error) {
	b.modMu.Lock()
	m := b.modules[KernelModuleName]
	b.modMu.Unlock()
	if m != nil {
		return m, nil
	}
	image, _, err := kernels.Fatbin()
	if err != nil {
		return nil, err
	}
	return b.Module(KernelModuleName, image)
}

func (m *Module) unload() error { return m.b.Do(func() error { return m.mod.Unload() }) }

// Kernel is one __global__ function of a Module.
type Kernel struct {
	m    *Module
	name string
	fn   cu.Function

	paramOnce sync.Once
	params    paramInfo // the driver's view of its parameters (Launch's check)
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
