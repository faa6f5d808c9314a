package onnx

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	ort "github.com/yalue/onnxruntime_go"
)

// EnvCUDAEP names the environment variable holding the CUDA execution
// provider's plugin library (libonnxruntime_providers_cuda.so), used when
// the config key ort_cuda_ep is not set.
const EnvCUDAEP = "EDGE_ORT_CUDA_EP"

// CUDAEPName is the name the CUDA execution provider reports for its EP devices.
const CUDAEPName = "CUDAExecutionProvider"

// FallbackCPU is the one fallback an Encoder may take: when the configured
// GPU execution provider cannot be used, run on the CPU instead of failing.
const FallbackCPU = "cpu"

// cudaEPRegistration is the name the plugin library is registered under.
const cudaEPRegistration = "edge-cuda"

// ErrNoCUDAPlugin is wrapped by cudaPluginDevice's error when no plugin
// library is configured.
var ErrNoCUDAPlugin = errors.New("no CUDA execution provider library configured")

// findCUDAEP returns the plugin library to register: configured, else
// $EDGE_ORT_CUDA_EP; an error wrapping ErrNoCUDAPlugin when neither is set.
// A path that does not exist is an error naming where it came from.
func findCUDAEP(configured string) (string, error) {
	path, source := configured, "config key ort_cuda_ep"
	if path == "" {
		path, source = os.Getenv(EnvCUDAEP), "$"+EnvCUDAEP
	}
	if path == "" {
		return "", fmt.Errorf("%w: set the config key ort_cuda_ep or $%s to libonnxruntime_providers_cuda.so "+
			"(ONNX Runtime's CUDA plugin EP; scripts/ort-cuda-ep.sh brings it to a GPU host)", ErrNoCUDAPlugin, EnvCUDAEP)
	}
	st, err := os.Stat(path)
	if err != nil {
		return "", fmt.Errorf("CUDA execution provider library %s (from %s): %w", path, source, err)
	}
	if st.IsDir() {
		return "", fmt.Errorf("CUDA execution provider library %s (from %s) is a directory; want libonnxruntime_providers_cuda.so", path, source)
	}
	return path, nil
}

// missingDependency names the CUDA library a loader or ORT error message
// says could not be loaded ("" when it names none we know).
func missingDependency(msg string) string {
	for _, d := range []struct{ lib, what string }{
		{"libcublas", "cuBLAS (libcublas.so / libcublasLt.so for CUDA 13)"},
		{"libcudnn", "cuDNN (libcudnn*.so.9 for CUDA 13)"},
		{"libcudart", "the CUDA runtime (libcudart.so.13)"},
		{"libcufft", "cuFFT (libcufft.so for CUDA 13)"},
		{"libcurand", "cuRAND (libcurand.so for CUDA 13)"},
		{"libnvrtc", "NVRTC (libnvrtc.so for CUDA 13)"},
		{"libcuda.so", "the NVIDIA driver (libcuda.so.1)"},
	} {
		if strings.Contains(msg, d.lib) {
			return d.what
		}
	}
	return ""
}

// explainCUDAError turns an ORT error met while registering the CUDA plugin
// or creating a session on it into one that names what is missing.
func explainCUDAError(what, lib string, err error) error {
	if dep := missingDependency(err.Error()); dep != "" {
		return fmt.Errorf("%s: %s is missing: put its lib directory on LD_LIBRARY_PATH "+
			"(on the GPU host: torch's site-packages/nvidia/*/lib) (CUDA EP library %s): %w", what, dep, lib, err)
	}
	return fmt.Errorf("%s (CUDA EP library %s): %w", what, lib, err)
}

// cudaPluginDevice registers the CUDA plugin EP library and returns the EP
// device of GPU ordinal device (the device-th GPU the EP offers, in ONNX
// Runtime's order).
func cudaPluginDevice(lib string, device int) (EPDevice, error) {
	if err := RegisterEPLibrary(cudaEPRegistration, lib); err != nil {
		return EPDevice{}, explainCUDAError("registering the CUDA execution provider", lib, err)
	}
	devs, err := EPDevices()
	if err != nil {
		return EPDevice{}, err
	}
	var gpus []EPDevice
	var seen []string
	for _, d := range devs {
		seen = append(seen, d.EP+"/"+d.Type)
		if d.EP == CUDAEPName && d.Type == DeviceGPU {
			gpus = append(gpus, d)
		}
	}
	if len(gpus) == 0 {
		return EPDevice{}, fmt.Errorf("no CUDA device: the CUDA execution provider (%s) offers no GPU "+
			"(ONNX Runtime's EP devices: %s); check the NVIDIA driver (nvidia-smi) and CUDA_VISIBLE_DEVICES", lib, strings.Join(seen, ", "))
	}
	if device >= len(gpus) {
		return EPDevice{}, fmt.Errorf("device %d: the CUDA execution provider offers %d GPU(s), 0..%d", device, len(gpus), len(gpus)-1)
	}
	return gpus[device], nil
}

// appendCUDA selects the CUDA execution provider for so. With a plugin
// library (Options.EPLibrary or $EDGE_ORT_CUDA_EP) it registers it and
// appends the EP device of Options.Device; without one it uses the CUDA
// provider built into a GPU build of ONNX Runtime (the onnxruntime-gpu and
// Jetson builds). Either way Options.Stream, when set, becomes the provider's
// user_compute_stream, so zero-copy binding works with both. It returns the
// EP device (zero for the built-in provider).
func appendCUDA(so *ort.SessionOptions, o Options) (EPDevice, error) {
	lib, err := findCUDAEP(o.EPLibrary)
	if errors.Is(err, ErrNoCUDAPlugin) {
		return EPDevice{}, appendBuiltinCUDA(so, o)
	}
	if err != nil {
		return EPDevice{}, err
	}
	dev, err := cudaPluginDevice(lib, o.Device)
	if err != nil {
		return EPDevice{}, err
	}
	if err := appendEP(so, dev, cudaProviderOptions(o)); err != nil {
		return EPDevice{}, explainCUDAError("selecting the CUDA execution provider", lib, err)
	}
	return dev, nil
}

// cudaProviderOptions are the CUDA EP's options (the plugin and the built-in
// provider take the same keys): the device, cuDNN's convolution algorithm
// search (o.ConvAlgoSearch, default ConvAlgoHeuristic), TF32 off with
// o.NoTF32 and, when o.Stream is not 0, the caller's stream as
// user_compute_stream.
func cudaProviderOptions(o Options) map[string]string {
	search := o.ConvAlgoSearch
	if search == "" {
		search = ConvAlgoHeuristic
	}
	options := map[string]string{"device_id": strconv.Itoa(o.Device), "cudnn_conv_algo_search": search}
	if o.ConvNC1D {
		options["cudnn_conv1d_pad_to_nc1d"] = "1"
	}
	if o.NoTF32 {
		options["use_tf32"] = "0"
	}
	if o.Stream != 0 {
		options["user_compute_stream"] = strconv.FormatUint(uint64(o.Stream), 10)
		options["has_user_compute_stream"] = "1"
	}
	return options
}

// appendBuiltinCUDA appends the CUDA provider compiled into the loaded
// library (OrtCUDAProviderOptionsV2). A CPU-only library fails here with an
// error saying what to load instead.
func appendBuiltinCUDA(so *ort.SessionOptions, o Options) error {
	cuda, err := ort.NewCUDAProviderOptions()
	if err != nil {
		return explainProviderError(ProviderCUDA, err)
	}
	defer cuda.Destroy()
	if err := cuda.Update(cudaProviderOptions(o)); err != nil {
		return explainProviderError(ProviderCUDA, err)
	}
	if err := so.AppendExecutionProviderCUDA(cuda); err != nil {
		return explainProviderError(ProviderCUDA, err)
	}
	return nil
}

// appendTensorRT appends the TensorRT provider compiled into the loaded
// library with o.TensorRT's settings and, unless o.TensorRT.NoCUDA, the
// built-in CUDA provider after it for the nodes TensorRT does not take
// (ONNX Runtime's CPU provider takes what is left).
func appendTensorRT(so *ort.SessionOptions, o Options) error {
	options, err := tensorRTProviderOptions(o.TensorRT, o.Device, o.Stream, o.trtInputs)
	if err != nil {
		return err
	}
	trt, err := ort.NewTensorRTProviderOptions()
	if err != nil {
		return explainProviderError(ProviderTensorRT, err)
	}
	defer trt.Destroy()
	if err := trt.Update(options); err != nil {
		return explainProviderError(ProviderTensorRT, err)
	}
	if err := so.AppendExecutionProviderTensorRT(trt); err != nil {
		return explainProviderError(ProviderTensorRT, err)
	}
	if o.TensorRT.NoCUDA {
		return nil
	}
	return appendBuiltinCUDA(so, o)
}
