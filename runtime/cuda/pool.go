//go:build cuda

package cuda

import (
	"errors"
	"fmt"
	"math/bits"
	"sync"

	"gorgonia.org/cu"
)

// pool is a caching device allocator. Requests are rounded up to a size
// class — the next power of two up to 1 MiB, a multiple of 2 MiB above — and
// freed blocks wait on a free list of their class for the next request of
// that class, so steady-state pipelines stop calling cuMemAlloc/cuMemFree
// (which synchronise the device). When cuMemAlloc runs out of memory the
// pool releases every cached block and tries once more.
//
// Reuse is stream-ordered (package doc): a block is handed out again only to
// work queued after the work that used it.
type pool struct {
	b      *Backend
	mu     sync.Mutex
	free   map[int64][]cu.DevicePtr
	cached int64 // bytes on the free lists
	inUse  int64 // bytes handed out
}

func newPool(b *Backend) *pool { return &pool{b: b, free: map[int64][]cu.DevicePtr{}} }

// PoolStats describes the allocator's memory.
type PoolStats struct {
	InUse  int64 `json:"in_use_bytes"` // handed out (size classes)
	Cached int64 `json:"cached_bytes"` // freed, kept for reuse
}

// PoolStats reports the pooling allocator's state.
func (b *Backend) PoolStats() PoolStats {
	b.pool.mu.Lock()
	defer b.pool.mu.Unlock()
	return PoolStats{InUse: b.pool.inUse, Cached: b.pool.cached}
}

// Trim releases the pool's cached blocks to the driver.
func (b *Backend) Trim() error { return b.pool.trim() }

// sizeClass rounds a request up to its class.
func sizeClass(n int64) int64 {
	const small, step = 1 << 20, 2 << 20
	if n <= 256 {
		return 256
	}
	if n <= small {
		return 1 << (64 - bits.LeadingZeros64(uint64(n-1)))
	}
	return (n + step - 1) / step * step
}

func (p *pool) get(n int64) (cu.DevicePtr, int64, error) {
	class := sizeClass(n)
	p.mu.Lock()
	if l := p.free[class]; len(l) > 0 {
		ptr := l[len(l)-1]
		p.free[class] = l[:len(l)-1]
		p.cached -= class
		p.inUse += class
		p.mu.Unlock()
		return ptr, class, nil
	}
	p.mu.Unlock()
	var ptr cu.DevicePtr
	alloc := func() error {
		var err error
		ptr, err = cu.MemAlloc(class)
		return err
	}
	err := p.b.Do(alloc)
	if errors.Is(err, cu.OutOfMemory) {
		if terr := p.trim(); terr != nil {
			return 0, 0, terr
		}
		err = p.b.Do(alloc)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("cuda: allocating %d bytes on %s: %w", n, p.b.name, err)
	}
	p.mu.Lock()
	p.inUse += class
	p.mu.Unlock()
	return ptr, class, nil
}

func (p *pool) put(ptr cu.DevicePtr, class int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.free[class] = append(p.free[class], ptr)
	p.cached += class
	p.inUse -= class
}

// trim frees the cached blocks. cuMemFree waits for the device, so blocks
// still in use by queued work are safe to release.
func (p *pool) trim() error {
	p.mu.Lock()
	free := p.free
	p.free = map[int64][]cu.DevicePtr{}
	p.cached = 0
	p.mu.Unlock()
	return p.b.Do(func() error {
		var errs []error
		for _, l := range free {
			for _, ptr := range l {
				if err := cu.MemFree(ptr); err != nil {
					errs = append(errs, err)
				}
			}
		}
		if err := errors.Join(errs...); err != nil {
			return fmt.Errorf("cuda: releasing pooled memory: %w", err)
		}
		return nil
	})
}
