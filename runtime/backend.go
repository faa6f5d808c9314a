package runtime

import (
	"fmt"
	"runtime"
	"sort"
	"sync"
)

// Backend owns memory and runs ops on one kind of processor. The CPU backend
// is always registered; a CUDA backend registers itself in builds with
// `-tags cuda`. Backends are safe for concurrent use.
type Backend interface {
	// Name is the registry name ("cpu", "cuda").
	Name() string
	// Devices describes the processors this backend drives.
	Devices() []DeviceInfo
	// Alloc returns a zeroed tensor in this backend's memory.
	Alloc(dt DType, shape Shape) (*Tensor, error)
	// Upload copies a host tensor into this backend's memory. On the CPU
	// backend it returns its argument.
	Upload(t *Tensor) (*Tensor, error)
	// Download copies a tensor of this backend into a new host tensor. Host
	// tensors are returned as they are.
	Download(t *Tensor) (*Tensor, error)
	// Close releases the backend's resources.
	Close() error
}

// DeviceInfo describes one processor of a backend.
type DeviceInfo struct {
	Backend string `json:"backend"`
	Name    string `json:"name"`
	// Memory is the device memory in bytes (0 when it is the host's).
	Memory int64  `json:"memory_bytes"`
	Detail string `json:"detail,omitempty"`
}

// BackendFactory opens a backend. It may fail, e.g. when no GPU is present.
type BackendFactory func() (Backend, error)

var (
	backendsMu sync.RWMutex
	backends   = map[string]BackendFactory{}
)

// RegisterBackend makes a backend available by name. Like database/sql's
// Register it panics on an empty name, a nil factory or a duplicate name.
func RegisterBackend(name string, f BackendFactory) {
	backendsMu.Lock()
	defer backendsMu.Unlock()
	if name == "" || f == nil {
		panic("edge: RegisterBackend needs a name and a factory")
	}
	if _, dup := backends[name]; dup {
		panic("edge: RegisterBackend called twice for backend " + name)
	}
	backends[name] = f
}

// Backends lists the registered backend names, sorted.
func Backends() []string {
	backendsMu.RLock()
	defer backendsMu.RUnlock()
	names := make([]string, 0, len(backends))
	for n := range backends {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// OpenBackend opens a registered backend by name.
func OpenBackend(name string) (Backend, error) {
	backendsMu.RLock()
	f, ok := backends[name]
	backendsMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("unknown backend %q (registered: %v; the cuda backend needs a build with -tags cuda)", name, Backends())
	}
	return f()
}

// CPU is the host backend: tensors are Go slices and ops run on goroutines.
var CPU Backend = cpuBackend{}

type cpuBackend struct{}

func init() { RegisterBackend("cpu", func() (Backend, error) { return CPU, nil }) }

func (cpuBackend) Name() string { return "cpu" }

func (cpuBackend) Devices() []DeviceInfo {
	return []DeviceInfo{{Backend: "cpu", Name: runtime.GOARCH, Detail: fmt.Sprintf("%d logical cores", runtime.NumCPU())}}
}

func (cpuBackend) Alloc(dt DType, shape Shape) (*Tensor, error) { return NewTensor(dt, shape) }

func (cpuBackend) Upload(t *Tensor) (*Tensor, error) {
	if !t.OnHost() {
		return nil, fmt.Errorf("cpu backend cannot take %v: download it from its own backend first", t)
	}
	return t, nil
}

func (cpuBackend) Download(t *Tensor) (*Tensor, error) {
	if !t.OnHost() {
		return nil, fmt.Errorf("cpu backend cannot download %v", t)
	}
	return t, nil
}

func (cpuBackend) Close() error { return nil }
