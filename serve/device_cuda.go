//go:build cuda

package serve

import (
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/cuda"
)

// deviceMemory reports the cuda backend's pooling allocator (the memory
// edge's own ops hold; ONNX Runtime's CUDA arena is not counted).
func deviceMemory(b runtime.Backend) func() []memorySample {
	cb, ok := b.(*cuda.Backend)
	if !ok {
		return nil
	}
	return func() []memorySample {
		ps := cb.PoolStats()
		return []memorySample{{cb.Device(), "in_use", ps.InUse}, {cb.Device(), "cached", ps.Cached}}
	}
}
