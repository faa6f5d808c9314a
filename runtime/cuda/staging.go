//go:build cuda

package cuda

/*
#cgo LDFLAGS: -lcuda
#include <cuda.h>
*/
import "C"

import (
	"fmt"
	"sync"
	"unsafe"

	"gorgonia.org/cu"
)

// staging is the backend's pinned (page-locked) host buffer for copies:
// pinned memory is what lets the copy engine run at full PCIe/NVLink speed
// and copies run asynchronously. One buffer, grown on demand, guarded by a
// mutex; an upload leaves it busy until an event recorded after its copy
// completes, so a following upload overlaps with device work and only waits
// when it needs the buffer again.
type staging struct {
	b    *Backend
	mu   sync.Mutex
	buf  unsafe.Pointer // C memory from cuMemHostAlloc
	size int
	busy *cu.Event // recorded after the last async copy out of buf
}

// memHostAlloc wraps cuMemHostAlloc, which gorgonia.org/cu does not expose.
// It must run with the context current.
func memHostAlloc(n int) (unsafe.Pointer, error) {
	var p unsafe.Pointer
	if r := C.cuMemHostAlloc(&p, C.size_t(n), 0); r != C.CUDA_SUCCESS {
		return nil, fmt.Errorf("cuMemHostAlloc(%d): CUresult %d", n, int(r))
	}
	return p, nil
}

// reserve makes buf at least n bytes and idle; the caller holds mu and runs
// on a locked thread with the context current (inside Backend.Do).
func (s *staging) reserve(n int) error {
	if s.busy != nil {
		if err := s.busy.Synchronize(); err != nil {
			return err
		}
		if err := cu.DestroyEvent(s.busy); err != nil {
			return err
		}
		s.busy = nil
	}
	if n <= s.size {
		return nil
	}
	if s.buf != nil {
		if err := cu.MemFreeHost(s.buf); err != nil {
			return err
		}
		s.buf, s.size = nil, 0
	}
	size := max(n, 1<<20)
	p, err := memHostAlloc(size)
	if err != nil {
		return err
	}
	s.buf, s.size = p, size
	return nil
}

func (s *staging) view(n int) []byte { return unsafe.Slice((*byte)(s.buf), n) }

func (s *staging) toDevice(dst cu.DevicePtr, src []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.b.Do(func() error {
		if err := s.reserve(len(src)); err != nil {
			return err
		}
		copy(s.view(len(src)), src)
		if err := cu.MemcpyHtoDAsync(dst, s.buf, int64(len(src)), s.b.stream); err != nil {
			return err
		}
		ev, err := cu.MakeEvent(cu.DisableTiming)
		if err != nil {
			return err
		}
		s.busy = &ev
		return ev.Record(s.b.stream)
	})
	if err != nil {
		return fmt.Errorf("cuda: copying %d bytes to %s: %w", len(src), s.b.name, err)
	}
	return nil
}

func (s *staging) toHost(dst []byte, src cu.DevicePtr) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	err := s.b.Do(func() error {
		if err := s.reserve(len(dst)); err != nil {
			return err
		}
		if err := cu.MemcpyDtoHAsync(s.buf, src, int64(len(dst)), s.b.stream); err != nil {
			return err
		}
		if err := s.b.stream.Synchronize(); err != nil {
			return err
		}
		copy(dst, s.view(len(dst)))
		return nil
	})
	if err != nil {
		return fmt.Errorf("cuda: copying %d bytes from %s: %w", len(dst), s.b.name, err)
	}
	return nil
}

func (s *staging) free() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Do(func() error {
		if err := s.reserve(0); err != nil {
			return err
		}
		if s.buf == nil {
			return nil
		}
		err := cu.MemFreeHost(s.buf)
		s.buf, s.size = nil, 0
		return err
	})
}
