package onnx

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/model"
)

func TestPluginCrashesOnSlices(t *testing.T) {
	assert.True(t, pluginCrashesOnSlices("1.29.0"))
	assert.True(t, pluginCrashesOnSlices("1.30.0"))
	assert.False(t, pluginCrashesOnSlices("1.31.0"), "a core newer than the releases known to crash")
	assert.False(t, pluginCrashesOnSlices("unknown"))
}

// pbBytes is a length-delimited protobuf field (tags and lengths < 128).
func pbBytes(num byte, v []byte) []byte { return append([]byte{num<<3 | 2, byte(len(v))}, v...) }

func TestSlicesRewritten(t *testing.T) {
	data, err := slicesRewritten("../../models/testdata/nemo/model.onnx")
	require.NoError(t, err)
	require.NotNil(t, data)
	left, err := model.SliceNodes(writeFile(t, "nemo.onnx", data))
	require.NoError(t, err)
	assert.Empty(t, left)

	data, err = slicesRewritten("../../models/default/model.onnx")
	require.NoError(t, err)
	assert.Nil(t, data, "no Slice")
	data, err = slicesRewritten("no/such/model.onnx")
	require.NoError(t, err, "ONNX Runtime reports a missing file")
	assert.Nil(t, data)

	// A Slice whose axes are computed at run time cannot be rewritten.
	var node []byte
	for _, in := range []string{"x", "s", "e", "axes"} {
		node = append(node, pbBytes(1, []byte(in))...)
	}
	node = append(append(node, pbBytes(2, []byte("y"))...), pbBytes(4, []byte("Slice"))...)
	m := append(pbBytes(8, []byte{2 << 3, 17}), pbBytes(7, pbBytes(1, node))...)
	_, err = slicesRewritten(writeFile(t, "runtime_axes.onnx", m))
	require.ErrorIs(t, err, ErrPluginSlice)
	assert.ErrorContains(t, err, "axes computed at run time")
	assert.ErrorContains(t, err, "--fallback cpu")
}

func writeFile(t *testing.T, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	require.NoError(t, os.WriteFile(p, data, 0o644))
	return p
}

// TestRewrittenSlicesRun: the encoder opened with its Slices rewritten (as
// on the CUDA plugin EP; here on the CPU provider, Parakeet's weights as
// external data found beside the file) gives the log-probs of the file as
// exported, bit for bit.
func TestRewrittenSlicesRun(t *testing.T) {
	for _, dir := range []string{"nemo", "parakeet", "w2v", "sherpa"} {
		t.Run(dir, func(t *testing.T) {
			path := filepath.Join("../../models/testdata", dir)
			plain, err := Open(path, Options{Threads: 1})
			require.NoError(t, err)
			defer plain.Close()
			rewritten, err := Open(path, Options{Threads: 1, rewriteSlices: true})
			require.NoError(t, err)
			defer rewritten.Close()

			shape := runtime.Shape{}
			for i, d := range plain.sig.input.info.Dimensions {
				switch {
				case d > 0:
					shape = append(shape, int(d))
				case i == 0:
					shape = append(shape, 2)
				case plain.InputName() == model.InputPCM:
					shape = append(shape, 16000)
				default:
					shape = append(shape, 300)
				}
			}
			rng := rand.New(rand.NewPCG(5, 6))
			x := make([]float32, shape.NumElements())
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			in, err := runtime.FromSlice(runtime.F32, shape, x)
			require.NoError(t, err)
			want, err := plain.Run(context.Background(), runtime.Tensors{plain.InputName(): in})
			require.NoError(t, err)
			got, err := rewritten.Run(context.Background(), runtime.Tensors{plain.InputName(): in})
			require.NoError(t, err)
			assert.Equal(t, want["log_probs"].F32(), got["log_probs"].F32())
			assert.Equal(t, want["lengths"].I64(), got["lengths"].I64())
		})
	}
}
