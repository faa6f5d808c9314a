//go:build cuda

package cuda

import (
	"reflect"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gorgonia.org/cu"

	"github.com/edgespeech/edge/runtime"
)

// TestRawFunctionLayout pins what rawFunction assumes about gorgonia.org/cu:
// Function is a struct of exactly one field, the CUfunction handle.
func TestRawFunctionLayout(t *testing.T) {
	ft := reflect.TypeOf(cu.Function{})
	require.Equal(t, reflect.Struct, ft.Kind())
	require.Equal(t, 1, ft.NumField(), "cu.Function changed shape: rawFunction must be revisited")
	assert.Equal(t, unsafe.Sizeof(uintptr(0)), ft.Size())
	assert.Equal(t, reflect.Pointer, ft.Field(0).Type.Kind())
}

func TestSetMaxDynamicShared(t *testing.T) {
	b := openTest(t)
	k := axpyKernel(t, b)
	limit, err := k.MaxDynamicShared()
	require.NoError(t, err)
	assert.Greater(t, limit, 48<<10, "Hopper and Orin allow more than 48 KiB a block after opting in")

	yd, err := b.Alloc(runtime.F32, runtime.Shape{1})
	require.NoError(t, err)
	y := yd.Buffer().(*Buffer)
	p := &axpyParams{Y: uint64(y.Ptr()), X: uint64(y.Ptr()), A: 0.5}
	// Above 48 KiB the launch fails until the kernel opts in.
	big := 64 << 10
	assert.Error(t, k.Launch(Dim3{1, 1, 1}, Dim3{1, 1, 1}, big, p))
	require.NoError(t, k.SetMaxDynamicShared(big))
	require.NoError(t, k.Launch(Dim3{1, 1, 1}, Dim3{1, 1, 1}, big, p))
	require.NoError(t, b.Synchronize())
	assert.ErrorContains(t, k.SetMaxDynamicShared(limit+1), "allows")
}
