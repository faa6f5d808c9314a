//go:build cuda

package cuda

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/cu"
)

// TestLaunchParams: a parameter struct whose size is not the kernel's is
// refused with both sizes named where the driver reports the kernel's
// parameters (CUDA >= 12.4 drivers: the check must be available there), and
// arguments that are no parameter struct are refused on any driver.
func TestLaunchParams(t *testing.T) {
	b := openTest(t)
	k := axpyKernel(t, b)
	one := Dim3{1, 1, 1}

	t.Logf("driver API %d, cuFuncGetParamInfo available: %v", cu.Version(), paramInfoAvailable())
	if cu.Version() >= 12040 {
		require.True(t, paramInfoAvailable(), "a CUDA >= 12.4 driver has cuFuncGetParamInfo")
	}
	type short struct {
		Y, X uint64
		N    int64
	}
	err := k.Launch(one, one, 0, &short{})
	if paramInfoAvailable() {
		require.Error(t, err)
		assert.Contains(t, err.Error(), "kernel axpy takes 1 parameter(s) of [32] bytes")
		assert.Contains(t, err.Error(), "of 24 bytes")
		assert.True(t, k.params.known)
		assert.Equal(t, []uintptr{32}, k.params.sizes)
		require.NoError(t, k.Launch(one, one, 0, &axpyParams{}), "n = 0: writes nothing")
	}
	for _, bad := range []any{
		nil, 3, axpyParams{}, (*axpyParams)(nil), &struct{}{},
		&struct{ P *int }{}, &struct{ S []byte }{}, &struct{ A [2]string }{}, &struct{ I int }{},
	} {
		err := k.Launch(one, one, 0, bad)
		assert.ErrorContains(t, err, "kernel axpy", "%T", bad)
	}
	require.NoError(t, b.Synchronize())
}
