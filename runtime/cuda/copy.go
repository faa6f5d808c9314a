//go:build cuda

package cuda

import (
	"fmt"

	"gorgonia.org/cu"

	"github.com/edgespeech/edge/runtime"
)

// CopyDevice queues a device-to-device copy of n bytes from byte offset
// srcOff of src to byte offset dstOff of dst (tensors in this backend's
// memory) on the stream. It is not a host transfer and is not counted in
// Stats. Ranges outside either tensor are an error.
func (b *Backend) CopyDevice(dst *runtime.Tensor, dstOff int64, src *runtime.Tensor, srcOff, n int64) error {
	if n == 0 {
		return nil
	}
	d, err := b.own(dst, "destination")
	if err != nil {
		return err
	}
	s, err := b.own(src, "source")
	if err != nil {
		return err
	}
	if n < 0 || dstOff < 0 || srcOff < 0 || dstOff+n > dst.Bytes() || srcOff+n > src.Bytes() {
		return fmt.Errorf("cuda: copying %d bytes from offset %d of %v to offset %d of %v: out of range", n, srcOff, src, dstOff, dst)
	}
	err = b.Do(func() error {
		return cu.MemcpyDtoDAsync(d.Ptr()+cu.DevicePtr(dstOff), s.Ptr()+cu.DevicePtr(srcOff), n, b.stream)
	})
	if err != nil {
		return fmt.Errorf("cuda: device copy of %d bytes on %s: %w", n, b.name, err)
	}
	return nil
}

// own returns t's buffer when it is memory of this backend.
func (b *Backend) own(t *runtime.Tensor, what string) (*Buffer, error) {
	m, ok := t.Buffer().(*Buffer)
	if t.OnHost() || !ok || m.b != b {
		return nil, fmt.Errorf("cuda: %s %v is not memory of %s", what, t, b.name)
	}
	return m, nil
}
