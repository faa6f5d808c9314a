//go:build !cuda

package codec

import (
	"fmt"

	"github.com/edgespeech/edge/runtime"
)

// deviceQuantizer returns the chain encoder for backend b: nil (the CPU)
// for nil or the CPU backend; this build has no other.
func deviceQuantizer(b runtime.Backend) (chainEncoder, func(), error) {
	if b == nil || b.Name() == runtime.CPU.Name() {
		return nil, nil, nil
	}
	return nil, nil, fmt.Errorf("codec quantizer on backend %q: this build quantises on the CPU only (the cuda backend needs -tags cuda)", b.Name())
}
