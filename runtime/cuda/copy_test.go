//go:build cuda

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
)

func TestCopyDevice(t *testing.T) {
	b := openTest(t)
	src, err := b.Upload(runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{6}, []float32{1, 2, 3, 4, 5, 6})))
	require.NoError(t, err)
	dst, err := b.Alloc(runtime.F32, runtime.Shape{4})
	require.NoError(t, err)
	before := b.Stats()
	require.NoError(t, b.CopyDevice(dst, 4, src, 8, 12))
	assert.Equal(t, before, b.Stats(), "device copies are not host transfers")
	h, err := b.Download(dst)
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 3, 4, 5}, h.F32())
	assert.ErrorContains(t, b.CopyDevice(dst, 8, src, 0, 12), "out of range")
	assert.ErrorContains(t, b.CopyDevice(dst, 0, h, 0, 4), "is not memory of")
}
