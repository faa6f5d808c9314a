//go:build cuda

package cuda

import (
	"fmt"

	"github.com/edgespeech/edge/runtime"
)

// Constructor adapts an op constructor that needs the concrete CUDA backend
// to runtime.RegisterImplementation's signature:
//
//	runtime.RegisterImplementation("fbank", "cuda", cuda.Constructor(newCUDAOp))
func Constructor(newOp func(runtime.Params, *Backend) (runtime.Op, error)) func(runtime.Params, runtime.Backend) (runtime.Op, error) {
	return func(p runtime.Params, b runtime.Backend) (runtime.Op, error) {
		cb, ok := b.(*Backend)
		if !ok {
			return nil, fmt.Errorf("backend %q is not the cuda backend of package runtime/cuda", b.Name())
		}
		return newOp(p, cb)
	}
}
