package onnx

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// TensorRTOptions are the TensorRT execution provider settings Jetson users
// set (ONNX Runtime's trt_* provider options). The zero value builds engines
// in fp32 with no caches and no explicit profile. ONNX Runtime's own
// ORT_TENSORRT_* environment variables (ORT_TENSORRT_FP16_ENABLE,
// ORT_TENSORRT_CACHE_PATH, ...) override these inside the provider; that is
// the way to set them from the edge CLI.
type TensorRTOptions struct {
	// FP16 lets TensorRT pick fp16 kernels (trt_fp16_enable).
	FP16 bool
	// EngineCacheDir caches built engines there (trt_engine_cache_enable,
	// trt_engine_cache_path): the first run of a shape profile builds the
	// engine (minutes on an Orin), later processes load it.
	EngineCacheDir string
	// TimingCacheDir caches layer timings there (trt_timing_cache_enable,
	// trt_timing_cache_path), which speeds up building engines for new shapes.
	TimingCacheDir string
	// Profile is the optimisation profile of the model input's dynamic time
	// axis (frames for feature models, samples for raw-waveform models):
	// min, opt and max. Zero: no explicit profile (TensorRT rebuilds the
	// engine whenever a longer input arrives).
	Profile [3]int
	// MaxBatch is the profile's largest batch (0 or 1: batch 1 only).
	MaxBatch int
	// WorkspaceBytes caps TensorRT's builder workspace (trt_max_workspace_size;
	// 0: ONNX Runtime's default). On an 8 GB Orin Nano keep it to ~1 GiB.
	WorkspaceBytes int64
	// NoCUDA leaves the nodes TensorRT does not take to the CPU instead of
	// the built-in CUDA EP, which is otherwise appended after TensorRT.
	NoCUDA bool
}

// ParseProfile reads "min,opt,max" (e.g. "100,1500,3000") into a Profile.
func ParseProfile(s string) ([3]int, error) {
	var p [3]int
	if s == "" {
		return p, nil
	}
	parts := strings.Split(s, ",")
	if len(parts) != 3 {
		return p, fmt.Errorf("TensorRT profile %q: want min,opt,max (three lengths of the time axis)", s)
	}
	for i, x := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(x))
		if err != nil || n <= 0 {
			return p, fmt.Errorf("TensorRT profile %q: %q is not a positive length", s, x)
		}
		p[i] = n
	}
	if p[0] > p[1] || p[1] > p[2] {
		return p, fmt.Errorf("TensorRT profile %q: want min <= opt <= max", s)
	}
	return p, nil
}

// profileInput is one model input the profile covers: its ONNX name and
// shape (-1 for dynamic axes), with the axis that is time (-1: none) and
// whether axis 0 is the batch.
type profileInput struct {
	name     string
	dims     []int64
	timeAxis int
}

// profileShapes formats the trt_profile_{min,opt,max}_shapes values for
// the inputs: the batch axis (0) runs 1..MaxBatch, the time axis the profile,
// static axes keep their size. Any other dynamic axis is an error.
func profileShapes(p [3]int, maxBatch int, inputs []profileInput) ([3]string, error) {
	var out [3]string
	if maxBatch < 1 {
		maxBatch = 1
	}
	batch := [3]int{1, 1, maxBatch}
	for k := range 3 {
		var parts []string
		for _, in := range inputs {
			dims := make([]string, len(in.dims))
			for i, d := range in.dims {
				switch {
				case d >= 0:
					dims[i] = strconv.FormatInt(d, 10)
				case i == 0:
					dims[i] = strconv.Itoa(batch[k])
				case i == in.timeAxis:
					dims[i] = strconv.Itoa(p[k])
				default:
					return out, fmt.Errorf("TensorRT profile: input %s has dynamic axis %d that is neither batch nor time (%v)", in.name, i, in.dims)
				}
			}
			parts = append(parts, in.name+":"+strings.Join(dims, "x"))
		}
		out[k] = strings.Join(parts, ",")
	}
	return out, nil
}

// tensorRTProviderOptions builds the TensorRT provider options map for
// device and, when stream is not 0, ONNX Runtime's user_compute_stream. The
// cache directories are created.
func tensorRTProviderOptions(t TensorRTOptions, device int, stream uintptr, inputs []profileInput) (map[string]string, error) {
	m := map[string]string{"device_id": strconv.Itoa(device)}
	if t.FP16 {
		m["trt_fp16_enable"] = "1"
	}
	for _, c := range []struct{ dir, enable, path string }{
		{t.EngineCacheDir, "trt_engine_cache_enable", "trt_engine_cache_path"},
		{t.TimingCacheDir, "trt_timing_cache_enable", "trt_timing_cache_path"},
	} {
		if c.dir == "" {
			continue
		}
		if err := os.MkdirAll(c.dir, 0o755); err != nil {
			return nil, fmt.Errorf("TensorRT cache directory: %w", err)
		}
		m[c.enable], m[c.path] = "1", c.dir
	}
	if t.WorkspaceBytes < 0 {
		return nil, fmt.Errorf("TensorRT workspace %d bytes is negative", t.WorkspaceBytes)
	}
	if t.WorkspaceBytes > 0 {
		m["trt_max_workspace_size"] = strconv.FormatInt(t.WorkspaceBytes, 10)
	}
	if t.Profile != [3]int{} {
		if _, err := ParseProfile(fmt.Sprintf("%d,%d,%d", t.Profile[0], t.Profile[1], t.Profile[2])); err != nil {
			return nil, err
		}
		shapes, err := profileShapes(t.Profile, t.MaxBatch, inputs)
		if err != nil {
			return nil, err
		}
		m["trt_profile_min_shapes"], m["trt_profile_opt_shapes"], m["trt_profile_max_shapes"] = shapes[0], shapes[1], shapes[2]
	}
	if stream != 0 {
		m["user_compute_stream"] = strconv.FormatUint(uint64(stream), 10)
		m["has_user_compute_stream"] = "1"
	}
	return m, nil
}

// missingTensorRT names the TensorRT library an error message says could
// not be loaded ("" when it names none).
func missingTensorRT(msg string) string {
	for _, d := range []struct{ lib, what string }{
		{"libnvinfer_plugin", "TensorRT's plugin library (libnvinfer_plugin.so.10)"},
		{"libnvonnxparser", "TensorRT's ONNX parser (libnvonnxparser.so.10)"},
		{"libnvinfer", "TensorRT (libnvinfer.so.10: JetPack's tensorrt packages, or pip tensorrt-libs)"},
		{"libonnxruntime_providers_tensorrt", "ONNX Runtime's TensorRT provider library (libonnxruntime_providers_tensorrt.so, beside libonnxruntime.so in a GPU build)"},
		{"libonnxruntime_providers_cuda", "ONNX Runtime's CUDA provider library (libonnxruntime_providers_cuda.so, beside libonnxruntime.so in a GPU build)"},
	} {
		if strings.Contains(msg, d.lib) {
			return d.what
		}
	}
	return missingDependency(msg)
}

// explainProviderError is the error for a GPU build's built-in provider
// (name: cuda or tensorrt) that could not be selected or could not build
// the session: what is missing when the message names a library, and what to
// do otherwise.
func explainProviderError(name string, err error) error {
	msg := err.Error()
	// A CPU-only build has no provider libraries at all: the generic advice.
	if dep := missingTensorRT(msg); dep != "" && !strings.Contains(msg, "libonnxruntime_providers_shared") {
		return fmt.Errorf("execution_provider=%s: %s is missing: put its directory on LD_LIBRARY_PATH "+
			"(JetPack: /usr/lib/aarch64-linux-gnu and /usr/local/cuda/lib64) or use fallback=cpu "+
			"(ONNX Runtime %s at %s): %w", name, dep, Version(), Library(), err)
	}
	if strings.Contains(msg, "not supported") || strings.Contains(msg, "NOT_IMPLEMENTED") || strings.Contains(msg, "Unsupported") {
		return fmt.Errorf("execution_provider=%s: the model uses an operator the provider cannot run; "+
			"TensorRT leaves such nodes to the CUDA EP unless NoCUDA is set, and fallback=cpu runs the whole model on the CPU "+
			"(ONNX Runtime %s at %s): %w", name, Version(), Library(), err)
	}
	return fmt.Errorf("execution_provider=%s: the ONNX Runtime library %s (version %s) cannot run %s: %v.\n"+
		"The CPU build that %s installs has no GPU execution providers: point %s at a GPU build of libonnxruntime.so "+
		"(its provider libraries beside it; docs/jetson.md), set ort_cuda_ep for the CUDA plugin EP, or use execution_provider=cpu (or fallback=cpu)",
		name, Library(), Version(), name, err, FetchCommand, EnvLibrary)
}

// profileInputs are the model's inputs with their time axes, for a
// TensorRT optimisation profile.
func (s *signature) profileInputs() []profileInput {
	var out []profileInput
	add := func(p *port, timeAxis int) {
		if p != nil {
			out = append(out, profileInput{name: p.name(), dims: []int64(p.info.Dimensions), timeAxis: timeAxis})
		}
	}
	inTime := 1 // pcm [B,N]
	if s.melAxis == 1 {
		inTime = 2 // features [B,F,T]
	}
	add(s.input, inTime)
	add(s.inLengths, -1)
	add(s.inMask, 1)
	return out
}
