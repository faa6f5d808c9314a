//go:build cuda

package onnx

// GPU-host tests of the encoder's CUDA implementation. The binary is built
// with `go test -c -tags cuda` and run on the GPU host with $EDGE_ORT_LIB at
// its ONNX Runtime core and, for the CUDA provider, $EDGE_ORT_CUDA_EP at the
// plugin library (scripts/ort-cuda-ep.sh unpack) and cuBLAS/cuDNN on
// LD_LIBRARY_PATH. Without $EDGE_ORT_CUDA_EP the CUDA-provider tests fail
// with the provider's own error: a missing library is a broken setup.

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/cuda/cudatest"
)

// cudaCase is a golden model and its host inputs.
type cudaCase struct {
	model string
	in    func(t *testing.T) runtime.Tensors
}

var cudaCases = []cudaCase{
	{"testdata/nemo", func(t *testing.T) runtime.Tensors {
		return runtime.Tensors{"features": load(t, "nemo_features.npy"), "lengths": load(t, "nemo_lengths.npy")}
	}},
	// logits output (device log-softmax) and per-utterance normalisation (device kernel)
	{"testdata/w2v", func(t *testing.T) runtime.Tensors {
		return runtime.Tensors{"pcm": load(t, "w2v_pcm.npy"), "lengths": load(t, "w2v_lengths.npy")}
	}},
	{"testdata/w2v_mask", func(t *testing.T) runtime.Tensors {
		return runtime.Tensors{"pcm": load(t, "w2v_pcm.npy"), "lengths": load(t, "w2v_lengths.npy")}
	}},
}

// runOnDevice uploads the inputs (lengths stay on the host), runs the
// encoder instance and returns its outputs with log_probs downloaded, and
// the backend copies the Run itself made.
func runOnDevice(t *testing.T, inst *runtime.Instance, in runtime.Tensors) (runtime.Tensors, runtime.TransferStats) {
	t.Helper()
	be := cudatest.Backend(t)
	dev := runtime.Tensors{}
	for k, v := range in {
		if k == "lengths" {
			dev[k] = v
			continue
		}
		d, err := be.Upload(v)
		require.NoError(t, err)
		dev[k] = d
	}
	require.NoError(t, be.Synchronize())
	before := be.Stats()
	out, err := inst.Run(context.Background(), dev)
	require.NoError(t, err)
	require.NoError(t, be.Synchronize())
	copies := be.Stats().Since(before)
	lp := out["log_probs"]
	require.False(t, lp.OnHost(), "log_probs stays on the device")
	h, err := be.Download(lp)
	require.NoError(t, err)
	require.NoError(t, lp.Buffer().Free())
	for k, v := range dev {
		if !v.OnHost() {
			require.NoError(t, v.Buffer().Free(), k)
		}
	}
	out["log_probs"] = h
	return out, copies
}

// cudaTol is the CUDA provider's agreement with the CPU provider: its
// MatMul/Conv run in TF32 on Hopper by default (10-bit mantissa), measured
// 1.6e-3 (nemo), 2.1e-3 (w2v) and 7.4e-3 (w2v_mask) on log-probs of
// magnitude 5-7 on the H200.
const cudaTol = 1e-2

// TestCUDAEncoderZeroCopy runs the golden models on the CUDA provider with
// device binding: the log-probs match the CPU provider's within cudaTol,
// the lengths exactly, and the run copies nothing between host and device
// except the per-item lengths of pcm normalisation.
func TestCUDAEncoderZeroCopy(t *testing.T) {
	be := cudatest.Backend(t)
	for _, tc := range cudaCases {
		t.Run(tc.model, func(t *testing.T) {
			in := tc.in(t)
			want, err := newEncoder(t, map[string]any{"model": tc.model, "threads": 1}).Run(context.Background(), in)
			require.NoError(t, err)
			inst, err := runtime.New("encoder", map[string]any{"model": tc.model, "execution_provider": ProviderCUDA}, be)
			require.NoError(t, err)
			defer inst.Close()
			for range 3 { // the binding and the session are reused
				got, copies := runOnDevice(t, inst, in)
				assertClose(t, want["log_probs"], got["log_probs"], cudaTol)
				assert.Equal(t, want["lengths"].I64(), got["lengths"].I64())
				assert.Equal(t, 0, copies.DeviceToHost, "device-to-host copies during the run: %+v", copies)
				assert.LessOrEqual(t, copies.HostToDeviceBytes, int64(8*in["lengths"].Shape()[0]), "host-to-device bytes: %+v", copies)
			}
		})
	}
}

// TestCUDAEncoderHostBind runs the same models with bind=host (the host
// round trip) and on the CPU provider under the cuda backend: same results,
// and the copies are the ones expected.
func TestCUDAEncoderHostBind(t *testing.T) {
	be := cudatest.Backend(t)
	for _, params := range []map[string]any{
		{"execution_provider": ProviderCUDA, "bind": BindHost},
		{"execution_provider": ProviderCPU},
	} {
		for _, tc := range cudaCases[:2] {
			t.Run(tc.model+"/"+params["execution_provider"].(string), func(t *testing.T) {
				in := tc.in(t)
				want, err := newEncoder(t, map[string]any{"model": tc.model, "threads": 1}).Run(context.Background(), in)
				require.NoError(t, err)
				p := map[string]any{"model": tc.model}
				for k, v := range params {
					p[k] = v
				}
				inst, err := runtime.New("encoder", p, be)
				require.NoError(t, err)
				defer inst.Close()
				got, copies := runOnDevice(t, inst, in)
				assertClose(t, want["log_probs"], got["log_probs"], cudaTol)
				x := in["features"]
				if x == nil {
					x = in["pcm"]
				}
				assert.Equal(t, 1, copies.DeviceToHost)
				assert.Equal(t, x.Bytes(), copies.DeviceToHostBytes)
				assert.Equal(t, 1, copies.HostToDevice)
				assert.Equal(t, want["log_probs"].Bytes(), copies.HostToDeviceBytes)
			})
		}
	}
}

// TestCUDAEncoderErrors: bad device inputs and a missing plugin library are
// clear errors; fallback=cpu runs on the CPU and says why.
func TestCUDAEncoderErrors(t *testing.T) {
	be := cudatest.Backend(t)
	_, err := runtime.New("encoder", map[string]any{"model": "testdata/nemo", "execution_provider": ProviderCUDA,
		"ort_cuda_ep": "/no/such/libonnxruntime_providers_cuda.so"}, be)
	assert.ErrorContains(t, err, "CUDA execution provider library /no/such/libonnxruntime_providers_cuda.so (from config key ort_cuda_ep)")

	inst, err := runtime.New("encoder", map[string]any{"model": "testdata/nemo", "execution_provider": ProviderCUDA,
		"ort_cuda_ep": "/no/such/ep.so", "fallback": FallbackCPU}, be)
	require.NoError(t, err)
	defer inst.Close()
	in := runtime.Tensors{"features": load(t, "nemo_features.npy"), "lengths": load(t, "nemo_lengths.npy")}
	got, _ := runOnDevice(t, inst, in)
	assertClose(t, load(t, "nemo_log_probs.npy"), got["log_probs"], tol)

	zc, err := runtime.New("encoder", map[string]any{"model": "testdata/nemo", "execution_provider": ProviderCUDA}, be)
	require.NoError(t, err)
	defer zc.Close()
	x, err := be.Upload(f32(runtime.Shape{1, 80, 20}, func(int) float32 { return 0 }))
	require.NoError(t, err)
	defer x.Buffer().Free()
	_, err = zc.Run(context.Background(), runtime.Tensors{"features": x})
	assert.ErrorContains(t, err, `input "features" has shape [1,80,20]`)
	_, err = zc.Run(context.Background(), runtime.Tensors{"features": x, "lengths": runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{1}, []int64{21}))})
	assert.Error(t, err)
}
