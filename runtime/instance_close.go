package runtime

import "io"

// Close releases what the instance's op holds (an ONNX Runtime session, device
// memory) when the op implements io.Closer; otherwise it does nothing. The
// instance must not be run afterwards.
func (in *Instance) Close() error {
	if c, ok := in.op.(io.Closer); ok {
		return c.Close()
	}
	return nil
}
