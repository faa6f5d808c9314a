package onnx

import (
	"errors"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
)

func TestParseProfile(t *testing.T) {
	p, err := ParseProfile("100, 1500,3000")
	require.NoError(t, err)
	assert.Equal(t, [3]int{100, 1500, 3000}, p)
	p, err = ParseProfile("")
	require.NoError(t, err)
	assert.Equal(t, [3]int{}, p)
	for in, want := range map[string]string{
		"1,2":       "want min,opt,max",
		"1,x,3":     `"x" is not a positive length`,
		"0,1,2":     `"0" is not a positive length`,
		"10,5,20":   "min <= opt <= max",
		"1,2,3,4":   "want min,opt,max",
		"10,20,15 ": "min <= opt <= max",
	} {
		_, err := ParseProfile(in)
		assert.ErrorContains(t, err, want, in)
	}
}

// The options Jetson users set map onto ONNX Runtime's trt_* keys, with the
// profile over the batch and time axes of every model input.
func TestTensorRTProviderOptions(t *testing.T) {
	dir := t.TempDir()
	inputs := []profileInput{
		{name: "audio_signal", dims: []int64{-1, 80, -1}, timeAxis: 2},
		{name: "length", dims: []int64{-1}, timeAxis: -1},
	}
	got, err := tensorRTProviderOptions(TensorRTOptions{
		FP16: true, EngineCacheDir: filepath.Join(dir, "engines"), TimingCacheDir: filepath.Join(dir, "timing"),
		Profile: [3]int{100, 1500, 3000}, MaxBatch: 4, WorkspaceBytes: 1 << 30,
	}, 1, 0xabc, inputs)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"device_id":               "1",
		"trt_fp16_enable":         "1",
		"trt_engine_cache_enable": "1", "trt_engine_cache_path": filepath.Join(dir, "engines"),
		"trt_timing_cache_enable": "1", "trt_timing_cache_path": filepath.Join(dir, "timing"),
		"trt_max_workspace_size": "1073741824",
		"trt_profile_min_shapes": "audio_signal:1x80x100,length:1",
		"trt_profile_opt_shapes": "audio_signal:1x80x1500,length:1",
		"trt_profile_max_shapes": "audio_signal:4x80x3000,length:4",
		"user_compute_stream":    "2748", "has_user_compute_stream": "1",
	}, got)
	assert.DirExists(t, filepath.Join(dir, "engines"))
	assert.DirExists(t, filepath.Join(dir, "timing"))

	got, err = tensorRTProviderOptions(TensorRTOptions{}, 0, 0, inputs)
	require.NoError(t, err)
	assert.Equal(t, map[string]string{"device_id": "0"}, got, "the zero value sets nothing but the device")

	_, err = tensorRTProviderOptions(TensorRTOptions{Profile: [3]int{5, 1, 9}}, 0, 0, inputs)
	assert.ErrorContains(t, err, "min <= opt <= max")
	_, err = tensorRTProviderOptions(TensorRTOptions{WorkspaceBytes: -1}, 0, 0, inputs)
	assert.ErrorContains(t, err, "negative")
	_, err = tensorRTProviderOptions(TensorRTOptions{Profile: [3]int{1, 2, 3}}, 0, 0,
		[]profileInput{{name: "x", dims: []int64{-1, -1, -1}, timeAxis: 2}})
	assert.ErrorContains(t, err, "input x has dynamic axis 1 that is neither batch nor time")
}

func TestProfileInputsOfModel(t *testing.T) {
	e, err := Open("testdata/nemo", Options{})
	require.NoError(t, err)
	defer e.Close()
	ins := e.sig.profileInputs()
	require.NotEmpty(t, ins)
	assert.Equal(t, e.sig.input.name(), ins[0].name)
	shapes, err := profileShapes([3]int{10, 20, 30}, 2, ins)
	require.NoError(t, err)
	assert.Contains(t, shapes[2], "x30")
}

func TestCUDAProviderOptions(t *testing.T) {
	assert.Equal(t, map[string]string{"device_id": "2", "cudnn_conv_algo_search": "HEURISTIC"}, cudaProviderOptions(Options{Device: 2}))
	assert.Equal(t, map[string]string{"device_id": "0", "cudnn_conv_algo_search": "EXHAUSTIVE", "user_compute_stream": "4096", "has_user_compute_stream": "1"},
		cudaProviderOptions(Options{Stream: 4096, ConvAlgoSearch: ConvAlgoExhaustive}))
}

// Error paths of the GPU builds' providers, from the messages ONNX Runtime
// and the loader give when a library is missing or an operator is not
// supported (they cannot be produced without a GPU build here).
func TestExplainProviderError(t *testing.T) {
	for msg, want := range map[string]string{
		"libnvinfer.so.10: cannot open shared object file: No such file or directory":                                  "TensorRT (libnvinfer.so.10",
		"Failed to load library libonnxruntime_providers_tensorrt.so with error: libnvinfer_plugin.so.10: cannot open": "TensorRT's plugin library",
		"libcudnn.so.9: cannot open shared object file":                                                                "cuDNN",
		"Failed to load library libonnxruntime_providers_cuda.so with error: libcublasLt.so.12: cannot open":           "CUDA provider library",
		"[ONNXRuntimeError] : 9 : NOT_IMPLEMENTED : Could not find an implementation for ConvInteger":                  "operator the provider cannot run",
	} {
		err := explainProviderError(ProviderTensorRT, errors.New(msg))
		assert.ErrorContains(t, err, want, msg)
		assert.ErrorContains(t, err, "execution_provider=tensorrt")
	}
	err := explainProviderError(ProviderCUDA, errors.New("CUDA execution provider is not enabled in this build"))
	assert.ErrorContains(t, err, "point EDGE_ORT_LIB at a GPU build")
	assert.ErrorContains(t, err, "docs/jetson.md")
}

// With the CPU build of ONNX Runtime (what the tests load) the built-in CUDA
// and TensorRT providers are absent: opening fails with what to load
// instead, fallback=cpu runs on the CPU and says why, and a stream is
// accepted for both GPU providers (it reaches the provider options).
func TestBuiltinProvidersOnCPUBuild(t *testing.T) {
	t.Setenv(EnvCUDAEP, "")
	for _, p := range []string{ProviderCUDA, ProviderTensorRT} {
		_, err := Open("testdata/nemo", Options{Provider: p, Stream: 1,
			TensorRT: TensorRTOptions{FP16: true, Profile: [3]int{10, 100, 1000}, EngineCacheDir: t.TempDir()}})
		require.Error(t, err, p)
		assert.NotContains(t, err.Error(), "a CUDA stream is given", p)
		assert.ErrorContains(t, err, "execution_provider="+p, p)
		assert.ErrorContains(t, err, "GPU build", p)

		e, err := Open("testdata/nemo", Options{Provider: p, Fallback: FallbackCPU})
		require.NoError(t, err, p)
		assert.Equal(t, ProviderCPU, e.Provider())
		assert.ErrorContains(t, e.Fallback(), "execution_provider="+p)
		require.NoError(t, e.Close())
	}
}

func TestTensorRTOpParams(t *testing.T) {
	spec, err := runtime.Lookup("encoder")
	require.NoError(t, err)
	p, err := runtime.ResolveParams("encoder", spec.Params, map[string]any{
		"model": "testdata/nemo", "execution_provider": ProviderTensorRT, "trt_fp16": true,
		"trt_engine_cache": "/c/engines", "trt_timing_cache": "/c/timing", "trt_profile": "100,1500,3000",
		"trt_max_batch": 2, "trt_workspace_mb": 1024, "trt_no_cuda": true,
	})
	require.NoError(t, err)
	_, opts, err := optionsFromParams(p)
	require.NoError(t, err)
	assert.Equal(t, TensorRTOptions{FP16: true, EngineCacheDir: "/c/engines", TimingCacheDir: "/c/timing",
		Profile: [3]int{100, 1500, 3000}, MaxBatch: 2, WorkspaceBytes: 1 << 30, NoCUDA: true}, opts.TensorRT)

	p, err = runtime.ResolveParams("encoder", spec.Params, map[string]any{"model": "m", "trt_profile": "3,2,1"})
	require.NoError(t, err)
	_, _, err = optionsFromParams(p)
	assert.ErrorContains(t, err, "min <= opt <= max")
}
