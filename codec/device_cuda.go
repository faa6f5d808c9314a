//go:build cuda

package codec

import (
	"context"
	"fmt"
	"sync"

	"github.com/edgespeech/edge/plugins/rvq"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/cuda"
)

// deviceQuantizer returns the chain encoder for backend b: nil (the CPU)
// for nil or the CPU backend, the CUDA quantizer for a CUDA backend.
func deviceQuantizer(b runtime.Backend) (chainEncoder, func(), error) {
	if b == nil || b.Name() == runtime.CPU.Name() {
		return nil, nil, nil
	}
	be, ok := b.(*cuda.Backend)
	if !ok {
		return nil, nil, fmt.Errorf("codec quantizer on backend %q: want cpu or cuda", b.Name())
	}
	q := &cudaQuantizer{be: be, dev: map[*rvq.Codebooks]*rvq.DeviceCodebooks{}}
	return q.encode, q.release, nil
}

// cudaQuantizer runs chains on a CUDA backend: each prepared Codebooks is
// uploaded once (rvq.DeviceCodebooks, kept until release), the latents are
// uploaded and the codes downloaded per call. Safe for concurrent use.
type cudaQuantizer struct {
	be  *cuda.Backend
	mu  sync.Mutex
	dev map[*rvq.Codebooks]*rvq.DeviceCodebooks
}

func (q *cudaQuantizer) books(c *rvq.Codebooks) (*rvq.DeviceCodebooks, error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if dc, ok := q.dev[c]; ok {
		return dc, nil
	}
	dc, err := rvq.NewDeviceCodebooks(q.be, c)
	if err != nil {
		return nil, err
	}
	q.dev[c] = dc
	return dc, nil
}

// encode is a chainEncoder: Codebooks.Encode's codes, computed on the GPU.
func (q *cudaQuantizer) encode(ctx context.Context, books *rvq.Codebooks, x []float32, t int, codes []int32) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	dc, err := q.books(books)
	if err != nil {
		return err
	}
	xd, err := q.be.UploadBuffer(cuda.Bytes(x))
	if err != nil {
		return err
	}
	defer xd.Free()
	cd, err := q.be.Malloc(int64(4 * len(codes)))
	if err != nil {
		return err
	}
	defer cd.Free()
	qd, err := q.be.Malloc(int64(4 * len(x)))
	if err != nil {
		return err
	}
	defer qd.Free()
	if err := dc.Encode(xd.Ptr(), rvq.Batch{B: 1, T: t}, cd.Ptr(), qd.Ptr()); err != nil {
		return err
	}
	return q.be.DeviceToHost(cuda.Bytes(codes), cd.Ptr())
}

// release frees the device codebooks.
func (q *cudaQuantizer) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for c, dc := range q.dev {
		dc.Free()
		delete(q.dev, c)
	}
}
