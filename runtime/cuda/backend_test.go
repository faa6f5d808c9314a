//go:build cuda

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
)

// Runs on a GPU host only (the test binary is built with -tags cuda).
func TestRoundTrip(t *testing.T) {
	b, err := runtime.OpenBackend("cuda")
	require.NoError(t, err)
	defer b.Close()
	require.NotEmpty(t, b.Devices())
	t.Logf("devices: %+v", b.Devices())
	for _, x := range []*runtime.Tensor{
		runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{2, 3}, []float32{1, 2, 3, 4, 5, -6})),
		runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{2}, []int64{1 << 40, -1})),
		runtime.Must(runtime.NewTensor(runtime.I32, runtime.Shape{0})),
	} {
		d, err := b.Upload(x)
		require.NoError(t, err)
		assert.False(t, d.OnHost())
		assert.Equal(t, "cuda:0", d.Device())
		h, err := b.Download(d)
		require.NoError(t, err)
		assert.Equal(t, x.Data(), h.Data())
		require.NoError(t, d.Buffer().Free())
	}
	z, err := b.Alloc(runtime.F32, runtime.Shape{1024})
	require.NoError(t, err)
	h, err := b.Download(z)
	require.NoError(t, err)
	assert.Equal(t, make([]float32, 1024), h.F32(), "Alloc zeroes memory")
}
