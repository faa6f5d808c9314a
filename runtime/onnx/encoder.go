package onnx

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"sync"

	ort "github.com/yalue/onnxruntime_go"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/model"
)

// Execution providers an Encoder can run on.
const (
	ProviderCPU      = "cpu"
	ProviderCUDA     = "cuda"
	ProviderTensorRT = "tensorrt"
)

// Values of Options.ConvAlgoSearch: how the CUDA provider picks cuDNN's
// convolution algorithms for each new input shape.
const (
	// ConvAlgoHeuristic takes cuDNN's heuristic choice: no per-shape
	// benchmarking, so audio of every length costs the same set-up.
	ConvAlgoHeuristic = "HEURISTIC"
	// ConvAlgoExhaustive times every algorithm on the first run of each
	// input shape (ONNX Runtime's own default): fastest for a few fixed
	// shapes, tens to hundreds of milliseconds for every new one.
	ConvAlgoExhaustive = "EXHAUSTIVE"
	// ConvAlgoDefault uses cuDNN's default algorithm.
	ConvAlgoDefault = "DEFAULT"
)

// Options configures an Encoder.
type Options struct {
	// Library is the ONNX Runtime shared library ("" = FindLibrary's search);
	// it only matters for the first Encoder of a process (see Init).
	Library string
	// Provider is ProviderCPU (the default), ProviderCUDA or ProviderTensorRT.
	Provider string
	// Device is the GPU ordinal for the CUDA and TensorRT providers.
	Device int
	// Threads is the number of intra-op threads; 0 lets ONNX Runtime use one
	// per physical core.
	Threads int
	// Normalize overrides the manifest's normalisation of raw waveform
	// ("" keeps it; model.NormalizeNone or model.NormalizePerUtterance).
	Normalize string
	// Precision picks the manifest's encoder file (model.PrecisionFP32,
	// the default, or model.PrecisionInt8; see Manifest.UsePrecision). It
	// needs a model directory or manifest, not a bare .onnx path.
	Precision string
	// Spin lets ONNX Runtime's idle worker threads busy-wait for the next
	// run. It lowers the latency of back-to-back runs but takes the cores
	// from whatever runs between them (fbank, alignment), so it is off by default.
	Spin bool
	// EPLibrary is ONNX Runtime's CUDA plugin execution-provider library
	// (libonnxruntime_providers_cuda.so) for ProviderCUDA; "" means
	// $EDGE_ORT_CUDA_EP, and without either the CUDA provider built into a
	// GPU build of ONNX Runtime.
	EPLibrary string
	// Fallback, when FallbackCPU, runs the model on the CPU when the GPU
	// provider cannot be used (Encoder.Fallback says why); "" fails instead.
	Fallback string
	// Stream is a CUDA stream (CUstream) the CUDA or TensorRT provider
	// runs the model on (its user_compute_stream), so that work queued on it
	// before and after a run is ordered with the model without host
	// synchronisation. 0: the provider's own stream. Works with the plugin EP
	// and with the providers built into a GPU build of ONNX Runtime.
	Stream uintptr
	// NoTF32 turns the CUDA provider's TF32 math off (its use_tf32=0): fp32
	// convolutions and GEMMs then keep fp32's 24-bit mantissa, so outputs
	// agree with the CPU provider's to ~1e-5 instead of ~1e-2, at a cost in
	// speed on Ampere and later GPUs. The zero value keeps the provider's
	// default, TF32 on.
	NoTF32 bool
	// ConvNC1D lays 1-D convolutions out as [N, C, 1, D] for cuDNN (the
	// CUDA provider's cudnn_conv1d_pad_to_nc1d) instead of [N, C, D, 1].
	ConvNC1D bool
	// Profile, when set, makes ONNX Runtime write a profile of the session
	// (every node's run time and provider, Chrome trace JSON) to
	// Profile_<timestamp>.json when the encoder closes.
	Profile string
	// ConvAlgoSearch is the CUDA provider's cuDNN convolution algorithm
	// search (ConvAlgoHeuristic, the default, ConvAlgoExhaustive or
	// ConvAlgoDefault), for ProviderCUDA and TensorRT's CUDA fallback.
	ConvAlgoSearch string
	// TensorRT configures ProviderTensorRT.
	TensorRT TensorRTOptions
	// Bind runs the model through an IoBinding: inputs are wrapped where
	// they are (host or, in -tags cuda builds, device memory; no copy) and
	// the output is left by ONNX Runtime in the provider's memory. The
	// cuda build's encoder sets it; on the CPU it gives the same results
	// as the default Run.
	Bind bool

	trtInputs []profileInput // the model's inputs, for TensorRT.Profile (set by Open)
	// rewriteSlices runs the model with its Slice nodes rewritten, as on
	// the CUDA plugin EP, on whatever provider (for tests on the CPU).
	rewriteSlices bool
}

// Encoder runs a CTC acoustic model in one ONNX Runtime session. The session
// is created once by Open and Run may be called many times; Close releases
// it. Run and Close are safe for concurrent use: calls are serialised (for
// parallel inference, open one Encoder per worker).
type Encoder struct {
	sig       *signature
	manifest  *model.Manifest
	normalize string

	mu      sync.Mutex // serialises Run and Close
	sess    *ort.DynamicAdvancedSession
	runOpts *ort.RunOptions

	provider string      // the provider the session runs on
	fallback error       // why the configured provider was not used (Fallback)
	ep       EPDevice    // the plugin EP device selected (zero otherwise)
	bind     *binding    // non-nil with Options.Bind
	cpuInfo  *memoryInfo // host memory (Bind)
	outInfo  *memoryInfo // where the bound output goes: the provider's memory (Bind)

	scratch []float32 // normalised pcm, reused across runs
}

// Open loads a model and creates its session. path is a model directory
// (holding model.yaml), a model.yaml manifest, or a bare .onnx file whose
// inputs and outputs are recognised by their declared types and ranks (see
// conventionalManifest). The model's declared inputs and outputs are checked
// against the manifest: every name must exist with the right element type
// and rank, every model input must be mapped, the mel axis must agree with
// the frontend layout and V with the vocabulary where the model fixes them.
func Open(path string, opts Options) (*Encoder, error) {
	if err := Init(opts.Library); err != nil {
		return nil, err
	}
	switch opts.Normalize {
	case "", model.NormalizeNone, model.NormalizePerUtterance:
	default:
		return nil, fmt.Errorf("normalize %q is not %s or %s", opts.Normalize, model.NormalizeNone, model.NormalizePerUtterance)
	}
	if opts.Threads < 0 {
		return nil, fmt.Errorf("threads %d is negative (0 means one per physical core)", opts.Threads)
	}
	var m *model.Manifest
	onnxPath := path
	if !strings.EqualFold(filepath.Ext(path), ".onnx") {
		var err error
		if m, err = model.Load(path); err != nil {
			return nil, err
		}
		if err = m.UsePrecision(opts.Precision); err != nil {
			return nil, err
		}
		onnxPath = m.EncoderPath()
	} else if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("encoder model: %w", err)
	} else if opts.Precision != "" && opts.Precision != model.PrecisionFP32 {
		return nil, fmt.Errorf("precision %s needs a model directory or model.yaml, not the .onnx file %s", opts.Precision, path)
	}
	ins, outs, err := readIO(onnxPath)
	if err != nil {
		return nil, err
	}
	if m == nil {
		if m, err = conventionalManifest(onnxPath, ins, outs); err != nil {
			return nil, err
		}
	}
	sig, err := newSignature(m, ins, outs)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", onnxPath, err)
	}
	e := &Encoder{sig: sig, manifest: m, normalize: m.Normalize}
	if opts.Normalize != "" {
		e.normalize = opts.Normalize
	}
	if e.normalize == model.NormalizePerUtterance && sig.input.edge != model.InputPCM {
		return nil, fmt.Errorf("normalize %s applies to raw-waveform models; %s takes features", model.NormalizePerUtterance, onnxPath)
	}
	if opts.Fallback != "" && opts.Fallback != FallbackCPU {
		return nil, fmt.Errorf("fallback %q is not %q (or empty: no fallback)", opts.Fallback, FallbackCPU)
	}
	inNames := []string{sig.input.name()}
	for _, p := range []*port{sig.inLengths, sig.inMask} {
		if p != nil {
			inNames = append(inNames, p.name())
		}
	}
	outNames := []string{sig.output.name()}
	if sig.outLengths != nil {
		outNames = append(outNames, sig.outLengths.name())
	}
	opts.trtInputs = sig.profileInputs()
	e.provider = opts.Provider
	if e.provider == "" {
		e.provider = ProviderCPU
	}
	f16 := sig.f16In || sig.f16Out
	if f16 {
		// fp16 graphs run through the IoBinding, which takes and gives
		// float16 tensors; Run casts at the boundary on the host.
		opts.Bind = true
	}
	e.sess, e.ep, err = newSession(onnxPath, inNames, outNames, opts)
	if err != nil && opts.Fallback == FallbackCPU && e.provider != ProviderCPU {
		e.fallback, e.provider = err, ProviderCPU
		cpu := opts
		cpu.Provider, cpu.Stream = ProviderCPU, 0
		e.sess, e.ep, err = newSession(onnxPath, inNames, outNames, cpu)
	}
	if err != nil {
		return nil, err
	}
	if e.runOpts, err = ort.NewRunOptions(); err != nil {
		e.sess.Destroy()
		return nil, err
	}
	if opts.Bind {
		if err := e.openBinding(opts.Device); err != nil {
			_ = e.Close()
			return nil, err
		}
		if f16 {
			e.outInfo = e.cpuInfo // ORT copies the output to the host for the cast
		}
	}
	return e, nil
}

// NewSession creates an ONNX Runtime session for the model file at path
// that Run feeds inNames and that gives outNames, on opts' provider
// (Provider, Device, EPLibrary, Threads, ConvAlgoSearch, NoTF32, Stream; Library
// loads ONNX Runtime on first use), with the CUDA plugin EP's Slice
// rewrite when it needs it. For graphs other than a CTC encoder (a codec's,
// say); the caller owns the session.
func NewSession(path string, inNames, outNames []string, opts Options) (*ort.DynamicAdvancedSession, error) {
	if err := Init(opts.Library); err != nil {
		return nil, err
	}
	s, _, err := newSession(path, inNames, outNames, opts)
	return s, err
}

// newSession creates the session on the configured provider.
func newSession(path string, inNames, outNames []string, opts Options) (*ort.DynamicAdvancedSession, EPDevice, error) {
	rewrite := opts.rewriteSlices
	if opts.Provider == ProviderCUDA {
		if _, err := findCUDAEP(opts.EPLibrary); err == nil && pluginCrashesOnSlices(Version()) {
			rewrite = true
		}
	}
	var rewritten []byte
	if rewrite {
		var err error
		if rewritten, err = slicesRewritten(path); err != nil {
			return nil, EPDevice{}, err
		}
	}
	so, dev, err := sessionOptions(opts)
	if err != nil {
		return nil, EPDevice{}, err
	}
	defer so.Destroy()
	var sess *ort.DynamicAdvancedSession
	if rewritten != nil {
		sess, err = newSessionFromBytes(rewritten, path, inNames, outNames, so)
	} else {
		sess, err = ort.NewDynamicAdvancedSession(path, inNames, outNames, so)
	}
	if err != nil {
		err = fmt.Errorf("creating an ONNX Runtime session for %s: %w", path, err)
		if opts.Provider == ProviderCUDA {
			lib, _ := findCUDAEP(opts.EPLibrary)
			if lib == "" {
				lib = "none; the provider built into " + Library()
			}
			err = explainCUDAError("execution_provider=cuda", lib, err)
		}
		return nil, EPDevice{}, err
	}
	return sess, dev, nil
}

// openBinding prepares the IoBinding and the memory infos of Options.Bind:
// the output goes to the selected EP device's memory (host memory for the
// CPU provider).
func (e *Encoder) openBinding(device int) error {
	var err error
	if e.bind, err = newBinding(e.sess); err != nil {
		return err
	}
	if e.cpuInfo, err = newMemoryInfo("Cpu", 0); err != nil {
		return err
	}
	switch {
	case e.provider == ProviderCPU:
		e.outInfo = e.cpuInfo
	case e.ep.ptr != nil && epMemoryInfo(e.ep) != nil:
		e.outInfo = epMemoryInfo(e.ep)
	default:
		e.outInfo, err = newMemoryInfo("Cuda", device)
	}
	return err
}

// Provider is the execution provider the session runs on: the configured
// one, or ProviderCPU after a fallback.
func (e *Encoder) Provider() string { return e.provider }

// Fallback is why the configured provider is not used (nil when it is).
func (e *Encoder) Fallback() error { return e.fallback }

// readIO reads the model's declared inputs and outputs with a throw-away,
// unoptimised single-threaded session.
func readIO(path string) (ins, outs []ort.InputOutputInfo, err error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, nil, err
	}
	defer so.Destroy()
	if err := so.SetGraphOptimizationLevel(ort.GraphOptimizationLevelDisableAll); err != nil {
		return nil, nil, err
	}
	if err := so.SetIntraOpNumThreads(1); err != nil {
		return nil, nil, err
	}
	ins, outs, err = ort.GetInputOutputInfoWithOptions(path, so)
	if err != nil {
		return nil, nil, fmt.Errorf("reading the ONNX model %s: %w", path, err)
	}
	return ins, outs, nil
}

func sessionOptions(o Options) (*ort.SessionOptions, EPDevice, error) {
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, EPDevice{}, err
	}
	var dev EPDevice
	fail := func(err error) (*ort.SessionOptions, EPDevice, error) { so.Destroy(); return nil, EPDevice{}, err }
	if o.Threads > 0 {
		if err := so.SetIntraOpNumThreads(o.Threads); err != nil {
			return fail(err)
		}
		if err := so.SetInterOpNumThreads(1); err != nil {
			return fail(err)
		}
	}
	spin := "0"
	if o.Spin {
		spin = "1"
	}
	for _, key := range []string{"session.intra_op.allow_spinning", "session.inter_op.allow_spinning"} {
		if err := so.AddSessionConfigEntry(key, spin); err != nil {
			return fail(err)
		}
	}
	if o.Profile != "" {
		if err := so.EnableProfiling(o.Profile); err != nil {
			return fail(err)
		}
	}
	if o.Device < 0 {
		return fail(fmt.Errorf("device %d is negative", o.Device))
	}
	if o.Provider != ProviderCUDA && o.Provider != ProviderTensorRT && o.Stream != 0 {
		return fail(fmt.Errorf("a CUDA stream is given but execution_provider is %q, not %s or %s", o.Provider, ProviderCUDA, ProviderTensorRT))
	}
	switch o.Provider {
	case "", ProviderCPU:
	case ProviderCUDA:
		if dev, err = appendCUDA(so, o); err != nil {
			return fail(err)
		}
	case ProviderTensorRT:
		if err := appendTensorRT(so, o); err != nil {
			return fail(err)
		}
	default:
		return fail(fmt.Errorf("execution_provider %q is not %s, %s or %s", o.Provider, ProviderCPU, ProviderCUDA, ProviderTensorRT))
	}
	return so, dev, nil
}

// Manifest is the manifest the encoder was opened with (synthesised from the
// model's signature for a bare .onnx file; then it has no vocabulary).
func (e *Encoder) Manifest() *model.Manifest { return e.manifest }

// InputName is the edge-side input the model takes: model.InputFeatures or model.InputPCM.
func (e *Encoder) InputName() string { return e.sig.input.edge }

// Close releases the session. It is safe to call more than once; Run after
// Close returns an error.
func (e *Encoder) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	var errs []error
	e.bind.destroy() // before its session
	e.bind = nil
	if e.sess != nil {
		errs = append(errs, e.sess.Destroy())
		e.sess = nil
	}
	if e.runOpts != nil {
		errs = append(errs, e.runOpts.Destroy())
		e.runOpts = nil
	}
	if e.outInfo != e.cpuInfo {
		e.outInfo.release()
	}
	e.cpuInfo.release()
	e.outInfo, e.cpuInfo = nil, nil
	return errors.Join(errs...)
}

// Run runs the model on a batch.
//
// Inputs: the model's input (e.InputName()) — "features" f32 [B, n_mels, T]
// (mel_time) or [B, T, n_mels] (time_mel), or "pcm" f32 [B, N] — and the
// optional "lengths" i64 or i32 [B]: the valid frames (samples) of each item,
// 1..T (1..N), all T (N) when absent; padding beyond them should be zero.
// Values must be finite. Raw waveform is normalised first when the manifest
// says per_utterance (each item's valid samples to zero mean and unit
// variance with eps 1e-7, the padding set to 0, like HF's
// Wav2Vec2FeatureExtractor); the caller's tensor is not modified.
//
// Outputs: "log_probs" f32 [B, T', V], log-softmax over V (applied here, in
// float64, when the model emits logits), and "lengths" i64 [B]: the model's
// own output lengths when it has them (checked to lie in 0..T'), else
// ceil(len·T'/T) (exact for items that fill the batch; an estimate for
// padded ones). Errors name the input, its shape or value and what was expected.
func (e *Encoder) Run(ctx context.Context, in runtime.Tensors) (runtime.Tensors, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.sess == nil {
		return nil, errors.New("encoder is closed")
	}
	x, err := e.checkInput(in)
	if err != nil {
		return nil, err
	}
	shape := x.Shape()
	batch, length := shape[0], shape[len(shape)-1]
	if e.sig.melAxis == 2 {
		length = shape[1]
	}
	lengths, err := checkLengths(in[model.InputLengths], batch, length, e.sig.input.edge)
	if err != nil {
		return nil, err
	}
	data := x.F32()
	if e.normalize == model.NormalizePerUtterance {
		data = e.normalized(data, lengths, length)
	}
	if e.bind != nil {
		return e.runBoundHost(ctx, data, shape, length, lengths)
	}
	values, err := e.inputValues(data, shape, length, lengths)
	defer func() {
		for _, v := range values {
			v.Destroy()
		}
	}()
	if err != nil {
		return nil, err
	}
	outputs := make([]ort.Value, 1, 2)
	if e.sig.outLengths != nil {
		outputs = append(outputs, nil)
	}
	// A context that ends during the run terminates it.
	ro, terminated := e.runOpts, make(chan struct{})
	stop := context.AfterFunc(ctx, func() { ro.Terminate(); close(terminated) })
	err = e.sess.RunWithOptions(values, outputs, ro)
	if !stop() {
		<-terminated
		ro.UnsetTerminate() // ready for the next run
		if err != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
	}
	defer func() {
		for _, v := range outputs {
			if v != nil {
				v.Destroy()
			}
		}
	}()
	if err != nil {
		return nil, fmt.Errorf("running the model on %s %v: %w", e.sig.input.edge, shape, err)
	}
	return e.results(outputs, batch, length, lengths)
}

// checkInput returns the model's input tensor after checking its presence,
// shape against the model's fixed dimensions, and values.
func (e *Encoder) checkInput(in runtime.Tensors) (*runtime.Tensor, error) {
	name := e.sig.input.edge
	x := in[name]
	if x == nil {
		other := model.InputPCM
		if name == model.InputPCM {
			other = model.InputFeatures
		}
		if in[other] != nil {
			return nil, fmt.Errorf("input %q given, but the model takes %q (ONNX input %s %s)", other, name, e.sig.input.name(), dimsString(e.sig.input.info.Dimensions))
		}
		return nil, fmt.Errorf("missing input %q (ONNX input %s %s)", name, e.sig.input.name(), dimsString(e.sig.input.info.Dimensions))
	}
	if x.DType() != runtime.F32 || !x.OnHost() {
		return nil, fmt.Errorf("input %q is %v, want f32 in host memory", name, x)
	}
	shape := x.Shape()
	decl := e.sig.input.info.Dimensions
	if len(shape) != len(decl) {
		return nil, fmt.Errorf("input %q has shape %v (rank %d), the model's %s wants rank %d %s", name, shape, len(shape), e.sig.input.name(), len(decl), dimsString(decl))
	}
	for i, d := range shape {
		if d == 0 {
			return nil, fmt.Errorf("input %q has shape %v: empty (axis %d is 0)", name, shape, i)
		}
		if decl[i] > 0 && int64(d) != decl[i] {
			msg := fmt.Sprintf("input %q has shape %v, the model's %s wants %s (axis %d must be %d)", name, shape, e.sig.input.name(), dimsString(decl), i, decl[i])
			if i == e.sig.melAxis {
				msg += fmt.Sprintf("; with frontend layout %s the mels are on axis %d: does the fbank preset give %d mels, and its layout match?", layoutName(e.sig.layout), i, decl[i])
			}
			return nil, errors.New(msg)
		}
	}
	if i, ok := firstNonFinite(x.F32()); ok {
		return nil, fmt.Errorf("input %q holds %v at flat index %d; want finite values", name, x.F32()[i], i)
	}
	return x, nil
}

// firstNonFinite returns the index of the first NaN or ±Inf in xs. It scans
// branch-free in chunks and looks for the index only in a chunk that has
// one: a float32 is not finite exactly when its exponent bits are all ones,
// and then (bits & expMask) + expLSB carries into bit 31.
func firstNonFinite(xs []float32) (int, bool) {
	const (
		chunk   = 1024
		expMask = 0x7f800000
		expLSB  = 0x00800000
		flag    = 0x80000000
	)
	for start := 0; start < len(xs); start += chunk {
		c := xs[start:min(start+chunk, len(xs))]
		var a0, a1, a2, a3 uint32
		i := 0
		for ; i+4 <= len(c); i += 4 {
			a0 |= math.Float32bits(c[i])&expMask + expLSB
			a1 |= math.Float32bits(c[i+1])&expMask + expLSB
			a2 |= math.Float32bits(c[i+2])&expMask + expLSB
			a3 |= math.Float32bits(c[i+3])&expMask + expLSB
		}
		for ; i < len(c); i++ {
			a0 |= math.Float32bits(c[i])&expMask + expLSB
		}
		if (a0|a1|a2|a3)&flag != 0 {
			for j, v := range c {
				if math.Float32bits(v)&expMask == expMask {
					return start + j, true
				}
			}
		}
	}
	return 0, false
}

// checkLengths returns the valid length of each item as int64 (all full
// when t is nil), checking shape and range.
func checkLengths(t *runtime.Tensor, batch, full int, of string) ([]int64, error) {
	out := make([]int64, batch)
	if t == nil {
		for i := range out {
			out[i] = int64(full)
		}
		return out, nil
	}
	if !t.OnHost() || t.Rank() != 1 || t.Shape()[0] != batch {
		return nil, fmt.Errorf("input %q is %v, want i64 [%d] (one length per %s item)", model.InputLengths, t, batch, of)
	}
	switch t.DType() {
	case runtime.I64:
		copy(out, t.I64())
	case runtime.I32:
		for i, v := range t.I32() {
			out[i] = int64(v)
		}
	default:
		return nil, fmt.Errorf("input %q is %v, want i64 [%d]", model.InputLengths, t, batch)
	}
	for i, v := range out {
		if v < 1 || v > int64(full) {
			return nil, fmt.Errorf("input %q[%d] = %d is out of range: %s has %d frames per item, want 1..%d", model.InputLengths, i, v, of, full, full)
		}
	}
	return out, nil
}

// normalized returns per-utterance normalised pcm [B, n] in e.scratch.
func (e *Encoder) normalized(x []float32, lengths []int64, n int) []float32 {
	if cap(e.scratch) < len(x) {
		e.scratch = make([]float32, len(x))
	}
	out := e.scratch[:len(x)]
	for b, l := range lengths {
		normalizeUtterance(out[b*n:(b+1)*n], x[b*n:b*n+int(l)])
	}
	return out
}

// normalizeUtterance writes (x - mean) / sqrt(var + 1e-7) of src into
// dst[:len(src)] and zeros the rest of dst, like HF's
// Wav2Vec2FeatureExtractor.zero_mean_unit_var_norm (population variance).
// The statistics take one pass in float64 over four lanes, shifted by
// src[0] so that a DC offset costs no precision; the output is computed in
// float64 too (HF computes in float32: this is as exact or more).
func normalizeUtterance(dst, src []float32) {
	k := float64(src[0])
	var s0, s1, s2, s3, q0, q1, q2, q3 float64
	i := 0
	for ; i+4 <= len(src); i += 4 {
		a, b, c, d := float64(src[i])-k, float64(src[i+1])-k, float64(src[i+2])-k, float64(src[i+3])-k
		s0, s1, s2, s3 = s0+a, s1+b, s2+c, s3+d
		q0, q1, q2, q3 = q0+a*a, q1+b*b, q2+c*c, q3+d*d
	}
	for ; i < len(src); i++ {
		a := float64(src[i]) - k
		s0, q0 = s0+a, q0+a*a
	}
	n := float64(len(src))
	dm := (s0 + s1 + s2 + s3) / n
	variance := max(0, (q0+q1+q2+q3)/n-dm*dm)
	mean, inv := k+dm, 1/math.Sqrt(variance+1e-7)
	for i, v := range src {
		dst[i] = float32((float64(v) - mean) * inv)
	}
	clear(dst[len(src):])
}

// inputValues wraps the input data (no copy) and builds lengths and the
// [B, n] mask (n: frames or samples per item) in the model's integer types.
// The caller destroys the values, also on error.
func (e *Encoder) inputValues(data []float32, shape runtime.Shape, n int, lengths []int64) ([]ort.Value, error) {
	dims := make(ort.Shape, len(shape))
	for i, d := range shape {
		dims[i] = int64(d)
	}
	values := make([]ort.Value, 0, 3)
	x, err := ort.NewTensor(dims, data)
	if err != nil {
		return values, fmt.Errorf("wrapping input %q: %w", e.sig.input.edge, err)
	}
	values = append(values, x)
	aux, err := e.auxValues(lengths, n)
	return append(values, aux...), err
}

// auxValues builds the model's optional lengths input and [B, n] mask (n:
// frames or samples per item) in its integer types, in signature order.
// The caller destroys the values, also on error.
func (e *Encoder) auxValues(lengths []int64, n int) ([]ort.Value, error) {
	var values []ort.Value
	if p := e.sig.inLengths; p != nil {
		v, err := intTensor(p.info.DataType, ort.NewShape(int64(len(lengths))), func(i int) int64 { return lengths[i] })
		if err != nil {
			return values, err
		}
		values = append(values, v)
	}
	if p := e.sig.inMask; p != nil {
		v, err := intTensor(p.info.DataType, ort.NewShape(int64(len(lengths)), int64(n)), func(i int) int64 {
			if int64(i%n) < lengths[i/n] {
				return 1
			}
			return 0
		})
		if err != nil {
			return values, err
		}
		values = append(values, v)
	}
	return values, nil
}

func intTensor(t ort.TensorElementDataType, shape ort.Shape, at func(int) int64) (ort.Value, error) {
	n := int(shape.FlattenedSize())
	switch t {
	case ort.TensorElementDataTypeInt64:
		d := make([]int64, n)
		for i := range d {
			d[i] = at(i)
		}
		return ort.NewTensor(shape, d)
	case ort.TensorElementDataTypeInt32:
		d := make([]int32, n)
		for i := range d {
			d[i] = int32(at(i))
		}
		return ort.NewTensor(shape, d)
	case ort.TensorElementDataTypeBool:
		d := make([]bool, n)
		for i := range d {
			d[i] = at(i) != 0
		}
		return ort.NewTensor(shape, d)
	}
	return nil, fmt.Errorf("unsupported integer input type %s", elemName(t))
}

// results converts the session outputs into edge tensors.
func (e *Encoder) results(outputs []ort.Value, batch, length int, lengths []int64) (runtime.Tensors, error) {
	scores, ok := outputs[0].(*ort.Tensor[float32])
	if !ok {
		return nil, fmt.Errorf("the model's %s gave a %T, want a float tensor", e.sig.output.name(), outputs[0])
	}
	frames, vocab, err := e.checkScores(scores.GetShape(), batch, length)
	if err != nil {
		return nil, err
	}
	data := scores.GetData() // a Go copy of the session's output
	if e.sig.logits {
		logSoftmaxRows(data, vocab)
	}
	lp, err := runtime.FromSlice(runtime.F32, runtime.Shape{batch, frames, vocab}, data)
	if err != nil {
		return nil, err
	}
	var modelLengths []int64
	if e.sig.outLengths != nil {
		if modelLengths, err = lengthsOfValue(outputs[1], e.sig.outLengths.name()); err != nil {
			return nil, err
		}
	}
	ol, err := e.outputLengths(modelLengths, frames, length, lengths)
	if err != nil {
		return nil, err
	}
	return runtime.Tensors{model.OutputLogProbs: lp, model.OutputLengths: ol}, nil
}

// checkScores checks the shape s of the model's scores output for a batch
// of inputs of length frames (samples) and returns T' and V.
func (e *Encoder) checkScores(s []int64, batch, length int) (frames, vocab int, err error) {
	if len(s) != 3 || s[0] != int64(batch) {
		return 0, 0, fmt.Errorf("the model's %s has shape %v, want [%d,T',V]", e.sig.output.name(), s, batch)
	}
	frames, vocab = int(s[1]), int(s[2])
	if frames == 0 {
		return 0, 0, fmt.Errorf("input %q is too short: %d frames give no encoder output frames", e.sig.input.edge, length)
	}
	if e.sig.vocab > 0 && vocab != e.sig.vocab {
		return 0, 0, fmt.Errorf("the model's %s has V=%d, the vocabulary %d tokens", e.sig.output.name(), vocab, e.sig.vocab)
	}
	if vocab == 0 {
		return 0, 0, fmt.Errorf("the model's %s has V=0", e.sig.output.name())
	}
	return frames, vocab, nil
}

// outputLengths is the "lengths" output: the model's own (checked to lie in
// 0..frames) or, when it has none (modelLengths nil), ceil(len·T'/T).
func (e *Encoder) outputLengths(modelLengths []int64, frames, length int, lengths []int64) (*runtime.Tensor, error) {
	outLen := make([]int64, len(lengths))
	if modelLengths != nil {
		name := e.sig.outLengths.name()
		if len(modelLengths) != len(outLen) {
			return nil, fmt.Errorf("the model's %s has %d values, want [%d]", name, len(modelLengths), len(outLen))
		}
		for i, l := range modelLengths {
			if l < 0 || l > int64(frames) {
				return nil, fmt.Errorf("the model's %s[%d] = %d is outside 0..%d (its output frames)", name, i, l, frames)
			}
		}
		copy(outLen, modelLengths)
	} else {
		for i, l := range lengths {
			outLen[i] = min(int64(frames), (l*int64(frames)+int64(length)-1)/int64(length))
		}
	}
	return runtime.FromSlice(runtime.I64, runtime.Shape{len(outLen)}, outLen)
}

// lengthsOfValue reads an integer output as int64s.
func lengthsOfValue(v ort.Value, name string) ([]int64, error) {
	switch t := v.(type) {
	case *ort.Tensor[int64]:
		return append([]int64(nil), t.GetData()...), nil
	case *ort.Tensor[int32]:
		out := make([]int64, len(t.GetData()))
		for i, x := range t.GetData() {
			out[i] = int64(x)
		}
		return out, nil
	}
	return nil, fmt.Errorf("the model's %s gave a %T, want an integer tensor", name, v)
}

// logSoftmaxRows replaces each row of width v by its log-softmax, computed
// in float64: x - max - log(sum(exp(x - max))).
func logSoftmaxRows(data []float32, v int) {
	for r := 0; r+v <= len(data); r += v {
		row := data[r : r+v]
		m := row[0]
		for _, x := range row[1:] {
			m = max(m, x)
		}
		var sum float64
		for _, x := range row {
			sum += math.Exp(float64(x - m))
		}
		lse := float64(m) + math.Log(sum)
		for i, x := range row {
			row[i] = float32(float64(x) - lse)
		}
	}
}
