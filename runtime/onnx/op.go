package onnx

import (
	"errors"
	"fmt"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/model"
)

func init() {
	runtime.Register(runtime.OpSpec{
		Name: "encoder",
		Doc: "Runs a CTC acoustic model (ONNX) with ONNX Runtime: features or raw waveform in, " +
			"CTC log-probabilities out. The model, its tensor names and layout come from a model.yaml " +
			"manifest, a detected NeMo / sherpa-onnx / Hugging Face export, or a bare .onnx file's own signature; " +
			"the session is built once per op.",
		Inputs: []runtime.TensorSpec{
			{Name: model.InputFeatures, DTypes: []runtime.DType{runtime.F32}, Dims: []string{"B", "F", "T"}, Optional: true,
				Doc: "log-mel features [B,n_mels,T] (frontend layout mel_time) or [B,T,n_mels] (time_mel), for spectrogram models"},
			{Name: model.InputPCM, DTypes: []runtime.DType{runtime.F32}, Dims: []string{"B", "N"}, Optional: true,
				Doc: "raw waveform in [-1,1] at the model's sample rate, for raw-waveform (wav2vec2-style) models"},
			{Name: model.InputLengths, DTypes: []runtime.DType{runtime.I64, runtime.I32}, Dims: []string{"B"}, Optional: true, Host: true,
				Doc: "valid frames (features) or samples (pcm) per item, 1..T; all T when absent"},
		},
		Outputs: []runtime.TensorSpec{
			{Name: model.OutputLogProbs, DTypes: []runtime.DType{runtime.F32}, Dims: []string{"B", "T'", "V"},
				Doc: "CTC log-probabilities (log-softmax over V)"},
			{Name: model.OutputLengths, DTypes: []runtime.DType{runtime.I64}, Dims: []string{"B"}, Host: true,
				Doc: "valid output frames per item"},
		},
		Params: []runtime.ParamSpec{
			{Name: "model", Kind: runtime.String, Doc: "model directory (with model.yaml, or an export edge detects), model.yaml, or .onnx file"},
			{Name: "execution_provider", Kind: runtime.String, Default: ProviderCPU, Enum: []string{ProviderCPU, ProviderCUDA, ProviderTensorRT},
				Doc: "ONNX Runtime execution provider"},
			{Name: "device", Kind: runtime.Int, Default: 0, Doc: "GPU ordinal for cuda and tensorrt"},
			{Name: "threads", Kind: runtime.Int, Default: 0, Doc: "intra-op threads; 0 = one per physical core"},
			{Name: "precision", Kind: runtime.String, Default: model.PrecisionFP32, Enum: []string{model.PrecisionFP32, model.PrecisionInt8},
				Doc: "encoder file: fp32 (encoder.file) or int8 (encoder.int8_file, else model.int8.onnx beside encoder.file)"},
			{Name: "spin", Kind: runtime.Boolean, Default: false, Doc: "let idle ONNX Runtime threads busy-wait between runs (lower latency, but they hold the cores)"},
			{Name: "normalize", Kind: runtime.String, Enum: []string{model.NormalizeNone, model.NormalizePerUtterance},
				Doc: "raw-waveform normalisation; default: the manifest's"},
			{Name: "ort_lib", Kind: runtime.String, Doc: "ONNX Runtime shared library; default $EDGE_ORT_LIB, then the cache of scripts/fetch-ort.sh"},
			{Name: "ort_cuda_ep", Kind: runtime.String, Doc: "ONNX Runtime's CUDA plugin EP library (libonnxruntime_providers_cuda.so) for execution_provider=cuda; default $" + EnvCUDAEP},
			{Name: "fallback", Kind: runtime.String, Default: "", Enum: []string{"", FallbackCPU},
				Doc: "cpu: run on the CPU when the GPU provider cannot be used (default: fail)"},
			{Name: "cudnn_conv_algo_search", Kind: runtime.String, Default: ConvAlgoHeuristic, Enum: []string{ConvAlgoHeuristic, ConvAlgoExhaustive, ConvAlgoDefault},
				Doc: "execution_provider=cuda: cuDNN convolution algorithm choice; EXHAUSTIVE times every algorithm for each new input shape, which variable-length audio pays again and again"},
			{Name: "cuda_tf32", Kind: runtime.Boolean, Default: true, Doc: "execution_provider=cuda: let fp32 convolutions and GEMMs use TF32 (the provider's default; false: fp32 rounding, outputs within ~1e-5 of the CPU's)"},
			{Name: "cudnn_conv1d_nc1d", Kind: runtime.Boolean, Default: false, Doc: "execution_provider=cuda: give cuDNN 1-D convolutions as [N, C, 1, D] (cudnn_conv1d_pad_to_nc1d)"},
			{Name: "ort_profile", Kind: runtime.String, Doc: "file prefix: ONNX Runtime writes the session's per-node profile (Chrome trace JSON) to PREFIX_<timestamp>.json when it closes"},
			{Name: "trt_fp16", Kind: runtime.Boolean, Default: false, Doc: "execution_provider=tensorrt: let TensorRT use fp16 kernels"},
			{Name: "trt_engine_cache", Kind: runtime.String, Doc: "execution_provider=tensorrt: directory caching built engines (the first run of a profile builds one: minutes on an Orin)"},
			{Name: "trt_timing_cache", Kind: runtime.String, Doc: "execution_provider=tensorrt: directory caching layer timings"},
			{Name: "trt_profile", Kind: runtime.String, Doc: "execution_provider=tensorrt: min,opt,max of the input's time axis (frames, or samples for raw-waveform models), e.g. 100,1500,3000"},
			{Name: "trt_max_batch", Kind: runtime.Int, Default: 1, Doc: "execution_provider=tensorrt: largest batch of the profile"},
			{Name: "trt_workspace_mb", Kind: runtime.Int, Default: 0, Doc: "execution_provider=tensorrt: builder workspace cap in MiB (0: ONNX Runtime's default)"},
			{Name: "trt_no_cuda", Kind: runtime.Boolean, Default: false, Doc: "execution_provider=tensorrt: leave nodes TensorRT does not take to the CPU, not the built-in CUDA EP"},
			{Name: "bind", Kind: runtime.String, Default: BindDevice, Enum: []string{BindDevice, BindHost},
				Doc: "cuda backend with execution_provider=cuda: device binds features and log-probs in GPU memory (zero-copy); host copies them through host memory (for comparison)"},
		},
		New: newEncoderOp,
	})
}

// Values of the encoder op's bind parameter.
const (
	BindDevice = "device"
	BindHost   = "host"
)

// newEncoderOp opens the encoder on the CPU backend (the cuda build adds a
// CUDA implementation, encoder_cuda.go). *Encoder is the op: its inputs and
// outputs live in host memory; the session itself runs where
// execution_provider says. Instance.Close releases the session.
func newEncoderOp(p runtime.Params, b runtime.Backend) (runtime.Op, error) {
	if b.Name() != "cpu" {
		return nil, fmt.Errorf("no %s implementation of the encoder op in this build (the cuda one needs -tags cuda); use the cpu backend", b.Name())
	}
	path, opts, err := optionsFromParams(p)
	if err != nil {
		return nil, err
	}
	e, err := Open(path, opts)
	if err != nil {
		return nil, err // not a typed nil *Encoder in a non-nil Op
	}
	return e, nil
}

// optionsFromParams reads the model path and the Options of the op's parameters.
func optionsFromParams(p runtime.Params) (string, Options, error) {
	path := p.Str("model")
	if path == "" {
		return "", Options{}, errors.New("parameter model is required: a model directory (with model.yaml), a model.yaml, or an .onnx file")
	}
	profile, err := ParseProfile(p.Str("trt_profile"))
	if err != nil {
		return "", Options{}, err
	}
	if p.Int("trt_workspace_mb") < 0 {
		return "", Options{}, fmt.Errorf("trt_workspace_mb %d is negative", p.Int("trt_workspace_mb"))
	}
	return path, Options{
		TensorRT: TensorRTOptions{
			FP16: p.Bool("trt_fp16"), EngineCacheDir: p.Str("trt_engine_cache"), TimingCacheDir: p.Str("trt_timing_cache"),
			Profile: profile, MaxBatch: p.Int("trt_max_batch"), WorkspaceBytes: int64(p.Int("trt_workspace_mb")) << 20,
			NoCUDA: p.Bool("trt_no_cuda"),
		},
		Library:   p.Str("ort_lib"),
		Provider:  p.Str("execution_provider"),
		Device:    p.Int("device"),
		Threads:   p.Int("threads"),
		Normalize: p.Str("normalize"),
		Precision: p.Str("precision"),
		Spin:      p.Bool("spin"),
		EPLibrary: p.Str("ort_cuda_ep"),
		Fallback:  p.Str("fallback"),

		ConvAlgoSearch: p.Str("cudnn_conv_algo_search"),
		Profile:        p.Str("ort_profile"),
		ConvNC1D:       p.Bool("cudnn_conv1d_nc1d"),
		NoTF32:         !p.Bool("cuda_tf32"),
	}, nil
}
