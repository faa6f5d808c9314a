package onnx

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	goruntime "runtime"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	ort "github.com/yalue/onnxruntime_go"

	"github.com/edgespeech/edge/runtime"
)

// TestBridgeOnnxruntimeGoLayout pins what sessionOptionsHandle and
// ioBindingHandle assume: ort.SessionOptions and ort.IoBinding hold exactly
// one field, the C handle, at offset 0.
func TestBridgeOnnxruntimeGoLayout(t *testing.T) {
	for _, typ := range []reflect.Type{reflect.TypeFor[ort.SessionOptions](), reflect.TypeFor[ort.IoBinding]()} {
		require.Equal(t, 1, typ.NumField(), "%v: onnxruntime_go changed its layout; fix bridge.go's handle accessors", typ)
		f := typ.Field(0)
		assert.Equal(t, "o", f.Name, typ.String())
		assert.Equal(t, reflect.Pointer, f.Type.Kind(), typ.String())
		assert.Equal(t, uintptr(0), f.Offset, typ.String())
		assert.Equal(t, unsafe.Sizeof(uintptr(0)), typ.Size(), typ.String())
	}
}

// TestBridgeHandlesAreLive checks the handles behave as the real objects:
// a config entry set through the C handle reads back through
// onnxruntime_go, and an output bound through the C IoBinding is listed by
// onnxruntime_go's binding.
func TestBridgeHandlesAreLive(t *testing.T) {
	so, err := ort.NewSessionOptions()
	require.NoError(t, err)
	defer so.Destroy()
	require.NoError(t, addSessionConfig(so, "edge.bridge.test", "42"))
	got, err := so.GetSessionConfigEntry("edge.bridge.test")
	require.NoError(t, err)
	assert.Equal(t, "42", got)

	sess, err := ort.NewDynamicAdvancedSession("testdata/nemo_ctc.onnx", []string{"audio_signal", "length"}, []string{"logprobs"}, nil)
	require.NoError(t, err)
	defer sess.Destroy()
	b, err := newBinding(sess)
	require.NoError(t, err)
	defer b.destroy()
	cpu, err := newMemoryInfo("Cpu", 0)
	require.NoError(t, err)
	defer cpu.release()
	require.NoError(t, b.outputTo("logprobs", cpu))
	names, err := b.b.GetBoundOutputNames()
	require.NoError(t, err)
	assert.Equal(t, []string{"logprobs"}, names)
}

// TestBridgeSameLibrary pins that the bridge talks to the library
// onnxruntime_go loaded (dlopen RTLD_NOLOAD succeeded, same version) and
// shares its environment (ORT's OrtEnv singleton).
func TestBridgeSameLibrary(t *testing.T) {
	require.NoError(t, openBridge())
	assert.Equal(t, ort.GetVersion(), bridge.version)
	shared, err := envIsShared()
	require.NoError(t, err)
	assert.True(t, shared, "CreateEnv returned another environment: ORT's OrtEnv is no longer a singleton")
}

// TestBridgeHeaderMatchesOnnxruntimeGo requires ortc/'s headers to be the
// ones onnxruntime_go bundles (so the OrtApi table layout agrees).
func TestBridgeHeaderMatchesOnnxruntimeGo(t *testing.T) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/yalue/onnxruntime_go").Output()
	require.NoError(t, err, "go list -m github.com/yalue/onnxruntime_go (this test needs the go tool and the module cache)")
	dir := strings.TrimSpace(string(out))
	for _, h := range []string{"onnxruntime_c_api.h", "onnxruntime_ep_c_api.h"} {
		want, err := os.ReadFile(filepath.Join(dir, h))
		require.NoError(t, err)
		got, err := os.ReadFile(filepath.Join("ortc", h))
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, got), "ortc/%s differs from %s/%s: replace it", h, dir, h)
	}
}

func cpuEPDevice(t *testing.T) EPDevice {
	t.Helper()
	devs, err := EPDevices()
	require.NoError(t, err)
	for _, d := range devs {
		if d.EP == "CPUExecutionProvider" {
			assert.Equal(t, DeviceCPU, d.Type)
			return d
		}
	}
	require.Failf(t, "no CPU EP device", "EP devices: %+v", devs)
	return EPDevice{}
}

// TestBridgeAppendEP selects the CPU EP by its EP device (the path the CUDA
// plugin takes) and runs the golden model through a binding over host memory.
func TestBridgeAppendEP(t *testing.T) {
	dev := cpuEPDevice(t)
	so, err := ort.NewSessionOptions()
	require.NoError(t, err)
	defer so.Destroy()
	require.NoError(t, appendEP(so, dev, map[string]string{}))
	sess, err := ort.NewDynamicAdvancedSession("testdata/nemo_ctc.onnx", []string{"audio_signal", "length"}, []string{"logprobs", "encoded_lengths"}, so)
	require.NoError(t, err)
	defer sess.Destroy()

	b, err := newBinding(sess)
	require.NoError(t, err)
	defer b.destroy()
	cpu, err := newMemoryInfo("Cpu", 0)
	require.NoError(t, err)
	defer cpu.release()
	feats, lens := load(t, "nemo_features.npy"), load(t, "nemo_lengths.npy")
	fs := feats.Shape()
	x, err := hostValue(cpu, feats.F32(), []int64{int64(fs[0]), int64(fs[1]), int64(fs[2])}, ort.TensorElementDataTypeFloat)
	require.NoError(t, err)
	defer x.release()
	l, err := hostValue(cpu, lens.I64(), []int64{int64(len(lens.I64()))}, ort.TensorElementDataTypeInt64)
	require.NoError(t, err)
	defer l.release()
	require.NoError(t, b.input("audio_signal", x))
	require.NoError(t, b.input("length", l))
	want := load(t, "nemo_log_probs.npy")
	// logprobs into our own host buffer (bound value), lengths allocated by ORT.
	got := make([]float32, want.Shape().NumElements())
	ws := want.Shape()
	y, err := hostValue(cpu, got, []int64{int64(ws[0]), int64(ws[1]), int64(ws[2])}, ort.TensorElementDataTypeFloat)
	require.NoError(t, err)
	defer y.release()
	require.NoError(t, b.output("logprobs", y))
	require.NoError(t, b.outputTo("encoded_lengths", cpu))
	require.NoError(t, sess.RunWithBinding(b.b))
	goruntime.KeepAlive(got)
	assertClose(t, want, runtime.Must(runtime.FromSlice(runtime.F32, ws, got)), tol)

	outs, err := b.outputs()
	require.NoError(t, err)
	require.Len(t, outs, 2)
	defer outs[0].release()
	defer outs[1].release()
	assert.Equal(t, []int64{int64(ws[0]), int64(ws[1]), int64(ws[2])}, outs[0].shape)
	n := make([]int64, outs[1].elements())
	require.NoError(t, outs[1].copyTo(n))
	assert.Equal(t, load(t, "nemo_out_lengths.npy").I64(), n)
	assert.ErrorContains(t, outs[1].copyTo(make([]float32, len(n))), "cannot copy it into a []float32")
}

// TestBoundEncoder runs the golden models through Options.Bind and
// requires the default Run's results, bit for bit (same session kind, same
// provider), and the goldens within tol.
func TestBoundEncoder(t *testing.T) {
	for _, tc := range []struct {
		model string
		in    runtime.Tensors
		want  string
	}{
		{"testdata/nemo", runtime.Tensors{"features": load(t, "nemo_features.npy"), "lengths": load(t, "nemo_lengths.npy")}, "nemo_log_probs.npy"},
		{"testdata/w2v", runtime.Tensors{"pcm": load(t, "w2v_pcm.npy"), "lengths": load(t, "w2v_lengths.npy")}, "w2v_log_probs.npy"},
		{"testdata/w2v_mask", runtime.Tensors{"pcm": load(t, "w2v_pcm.npy"), "lengths": load(t, "w2v_lengths.npy")}, "w2v_mask_log_probs.npy"},
	} {
		t.Run(tc.model, func(t *testing.T) {
			plain, err := Open(tc.model, Options{Threads: 1})
			require.NoError(t, err)
			defer plain.Close()
			bound, err := Open(tc.model, Options{Threads: 1, Bind: true})
			require.NoError(t, err)
			defer bound.Close()
			want, err := plain.Run(context.Background(), tc.in)
			require.NoError(t, err)
			for range 2 { // the binding is reused
				got, err := bound.Run(context.Background(), tc.in)
				require.NoError(t, err)
				assert.Equal(t, want["log_probs"].Shape(), got["log_probs"].Shape())
				assert.Equal(t, want["log_probs"].F32(), got["log_probs"].F32())
				assert.Equal(t, want["lengths"].I64(), got["lengths"].I64())
				assertClose(t, load(t, tc.want), got["log_probs"], tol)
			}
		})
	}
}

func TestBridgeMemoryInfo(t *testing.T) {
	for _, tc := range []struct {
		name    string
		id      int
		devType int
	}{{"Cpu", 0, 0}, {"Cuda", 0, 1}, {"Cuda", 1, 1}} {
		m, err := newMemoryInfo(tc.name, tc.id)
		require.NoError(t, err)
		name, id, devType, err := m.describe()
		require.NoError(t, err)
		assert.Equal(t, tc.name, name)
		assert.Equal(t, tc.id, id)
		assert.Equal(t, tc.devType, devType, tc.name)
		m.release()
	}
	_, err := newMemoryInfo("NoSuchAllocator", 0)
	assert.ErrorContains(t, err, "memory info NoSuchAllocator:0")
}

func TestBridgeValueErrors(t *testing.T) {
	cpu, err := newMemoryInfo("Cpu", 0)
	require.NoError(t, err)
	defer cpu.release()
	data := make([]float32, 6)
	for _, tc := range []struct {
		shape []int64
		bytes int64
		typ   ort.TensorElementDataType
		want  string
	}{
		{[]int64{2, 4}, 24, ort.TensorElementDataTypeFloat, "needs 32 bytes; the buffer has 24"},
		{[]int64{-2, 3}, 24, ort.TensorElementDataTypeFloat, "negative dimension"},
		{[]int64{6}, 24, ort.TensorElementDataTypeDouble, "not supported by the bridge"},
	} {
		_, err := newValue(cpu, uintptr(unsafe.Pointer(&data[0])), tc.bytes, tc.shape, tc.typ)
		assert.ErrorContains(t, err, tc.want)
	}
	_, err = newValue(cpu, 0, 24, []int64{6}, ort.TensorElementDataTypeFloat)
	assert.ErrorContains(t, err, "nil buffer")
	_, err = hostValue(cpu, []float32{}, []int64{0}, ort.TensorElementDataTypeFloat)
	assert.ErrorContains(t, err, "empty")
}

func TestFindCUDAEP(t *testing.T) {
	t.Setenv(EnvCUDAEP, "")
	_, err := findCUDAEP("")
	assert.ErrorIs(t, err, ErrNoCUDAPlugin)
	assert.ErrorContains(t, err, "ort_cuda_ep")
	_, err = findCUDAEP("/no/such/libonnxruntime_providers_cuda.so")
	assert.ErrorContains(t, err, "CUDA execution provider library /no/such/libonnxruntime_providers_cuda.so (from config key ort_cuda_ep)")
	t.Setenv(EnvCUDAEP, "/no/such/ep.so")
	_, err = findCUDAEP("")
	assert.ErrorContains(t, err, "(from $EDGE_ORT_CUDA_EP)")
	_, err = findCUDAEP(t.TempDir())
	assert.ErrorContains(t, err, "is a directory")
	lib := filepath.Join(t.TempDir(), "libonnxruntime_providers_cuda.so")
	require.NoError(t, os.WriteFile(lib, []byte("x"), 0o644))
	got, err := findCUDAEP(lib)
	require.NoError(t, err)
	assert.Equal(t, lib, got)
}

func TestMissingDependency(t *testing.T) {
	for msg, want := range map[string]string{
		"libcublasLt.so.13: cannot open shared object file: No such file or directory": "cuBLAS",
		"Failed to load libcudnn.so.9":                    "cuDNN",
		"libcudart.so.13: cannot open shared object file": "CUDA runtime",
		"libcuda.so.1: cannot open shared object file":    "NVIDIA driver",
		"some other failure":                              "",
	} {
		got := missingDependency(msg)
		if want == "" {
			assert.Empty(t, got, msg)
		} else {
			assert.Contains(t, got, want, msg)
		}
	}
}

// TestCUDAEPErrors: a missing plugin library and a library that is no EP
// are errors naming the library; fallback=cpu turns them into a CPU session
// that says why.
func TestCUDAEPErrors(t *testing.T) {
	_, err := Open("testdata/nemo", Options{Provider: ProviderCUDA, EPLibrary: "/no/such/libonnxruntime_providers_cuda.so"})
	assert.ErrorContains(t, err, "CUDA execution provider library /no/such/libonnxruntime_providers_cuda.so (from config key ort_cuda_ep)")

	notEP := filepath.Join(t.TempDir(), "libnot_an_ep.so")
	require.NoError(t, os.WriteFile(notEP, []byte("not a shared library"), 0o644))
	_, err = Open("testdata/nemo", Options{Provider: ProviderCUDA, EPLibrary: notEP})
	assert.ErrorContains(t, err, "registering the CUDA execution provider (CUDA EP library "+notEP+")")

	_, err = Open("testdata/nemo", Options{Provider: ProviderCPU, Stream: 1})
	assert.ErrorContains(t, err, "a CUDA stream is given but execution_provider is \"cpu\"")
	_, err = Open("testdata/nemo", Options{Fallback: "gpu"})
	assert.ErrorContains(t, err, `fallback "gpu" is not "cpu"`)

	e, err := Open("testdata/nemo", Options{Provider: ProviderCUDA, EPLibrary: "/no/such/ep.so", Fallback: FallbackCPU, Bind: true})
	require.NoError(t, err)
	defer e.Close()
	assert.Equal(t, ProviderCPU, e.Provider())
	assert.ErrorContains(t, e.Fallback(), "/no/such/ep.so")
	out, err := e.Run(context.Background(), runtime.Tensors{"features": load(t, "nemo_features.npy"), "lengths": load(t, "nemo_lengths.npy")})
	require.NoError(t, err)
	assertClose(t, load(t, "nemo_log_probs.npy"), out["log_probs"], tol)
}
