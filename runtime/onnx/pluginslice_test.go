package onnx

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPluginSliceError(t *testing.T) {
	nemo := "../../models/testdata/nemo/model.onnx"
	err := pluginSliceError(nemo, "1.29.0")
	require.ErrorIs(t, err, ErrPluginSlice)
	assert.ErrorContains(t, err, "6 Slice node(s)")
	assert.ErrorContains(t, err, ", ...)", "the first three named")
	assert.ErrorContains(t, err, "--fallback cpu")
	assert.NoError(t, pluginSliceError(nemo, "1.31.0"), "a core newer than the releases known to crash")
	assert.NoError(t, pluginSliceError("../../models/default/model.onnx", "1.29.0"), "no Slice")
	assert.ErrorIs(t, pluginSliceError("../../models/testdata/w2v/model.onnx", "1.29.0"), ErrPluginSlice, "one Slice, constant bounds")
	assert.NoError(t, pluginSliceError("no/such/model.onnx", "1.29.0"), "ONNX Runtime reports a missing file")
}

// TestOpenRefusesPluginSlices: Open on the CUDA plugin EP refuses a model
// with Slice nodes before creating a session (the library is
// never loaded: any file passes findCUDAEP), and fallback=cpu runs it on
// the CPU with the refusal as its Fallback. Needs a core older than
// pluginSliceFixed, as the one make deps pins.
func TestOpenRefusesPluginSlices(t *testing.T) {
	ep := t.TempDir() + "/libonnxruntime_providers_cuda.so"
	require.NoError(t, os.WriteFile(ep, nil, 0o644))
	opts := Options{Provider: ProviderCUDA, EPLibrary: ep, Threads: 1}
	_, err := Open("../../models/testdata/nemo", opts)
	require.ErrorIs(t, err, ErrPluginSlice)
	opts.Fallback = FallbackCPU
	e, err := Open("../../models/testdata/nemo", opts)
	require.NoError(t, err)
	defer e.Close()
	assert.ErrorIs(t, e.Fallback(), ErrPluginSlice)
}
