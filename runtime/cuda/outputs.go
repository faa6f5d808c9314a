//go:build cuda

package cuda

import "github.com/edgespeech/edge/runtime"

// Outputs allocates the device output tensors of one op Run so that a
// failure part-way frees all of them: call Empty for each output (after the
// first failure it returns nil and allocates nothing), check Err once, and
// call Release on any error path before returning.
type Outputs struct {
	ts  []*runtime.Tensor
	err error
}

// Empty allocates an uninitialised device tensor of dt and shape on b, or
// returns nil when this or an earlier allocation failed (see Err).
func (o *Outputs) Empty(b *Backend, dt runtime.DType, shape runtime.Shape) *runtime.Tensor {
	if o.err != nil {
		return nil
	}
	t, err := b.Empty(dt, shape)
	if err != nil {
		o.err = err
		return nil
	}
	o.ts = append(o.ts, t)
	return t
}

// Err is the first allocation error, or nil.
func (o *Outputs) Err() error { return o.err }

// Release frees every tensor Empty allocated.
func (o *Outputs) Release() {
	for _, t := range o.ts {
		_ = t.Buffer().Free()
	}
	o.ts = nil
}
