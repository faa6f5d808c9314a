// Package codec turns audio into neural-codec tokens and back: a codec
// directory as Hugging Face publishes it (config.json + model.safetensors)
// plus encoder.onnx (pcm [B, 1, N] -> latents [B, D, T], everything before
// the quantizer) and decoder.onnx (latents [B, D, T] -> pcm [B, 1, N']),
// written by scripts/golden/codec.py. The quantizer is read straight from
// model.safetensors and runs on plugins/rvq's CPU path with fp32 codebooks,
// so codes equal the framework's wherever its own fp32 argmin is clear of
// rounding.
//
// Families: EnCodec (model_type "encodec", quantizer.layers.{i}.codebook.embed,
// greedy RVQ on the encoder's latents) and Mimi (model_type "mimi": the
// split quantizer, a semantic and an acoustic RVQ both fed the latents
// through their own 1x1 input projections, codebooks embed_sum /
// max(cluster_usage, 1e-5), the decoded sums mapped back by the output
// projections and added).
package codec

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sync"

	"github.com/edgespeech/edge/plugins/rvq"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/onnx"
	ort "github.com/yalue/onnxruntime_go"
)

// File names inside a codec directory.
const (
	ConfigFile  = "config.json"
	WeightsFile = "model.safetensors"
	EncoderFile = "encoder.onnx"
	DecoderFile = "decoder.onnx"
)

// Options configures Open.
type Options struct {
	// Library is the ONNX Runtime shared library ("" = onnx.FindLibrary's
	// search: $EDGE_ORT_LIB, then the cache of scripts/fetch-ort.sh).
	Library string
	// Threads is ONNX Runtime's intra-op thread count (0: its default).
	Threads int
	// Provider is the ONNX Runtime provider of the encoder and decoder
	// graphs: onnx.ProviderCPU ("", the default) or onnx.ProviderCUDA
	// (host I/O: ONNX Runtime copies pcm and latents to and from the GPU).
	Provider string
	// EPLibrary is the CUDA plugin EP library for ProviderCUDA ("":
	// $EDGE_ORT_CUDA_EP, else the CUDA provider built into ONNX Runtime).
	EPLibrary string
	// Device is the GPU ordinal for ProviderCUDA.
	Device int
	// TF32 lets ProviderCUDA compute fp32 convolutions and GEMMs in TF32
	// (faster; latents then differ from the fp32 reference by ~1e-3, so
	// codes whose codewords are near ties may change). Off by default: the
	// codes are the framework's.
	TF32 bool
	// Backend is where the quantizer runs: nil or the CPU backend, or (in
	// -tags cuda builds) a CUDA backend, where rvq_encode_f32 gives the
	// CPU's codes exactly; latents go up and codes come back per clip (the
	// ONNX graphs run on Provider). The caller keeps the backend open while
	// the Codec is in use.
	Backend runtime.Backend
}

// Codec is an opened codec directory. It is safe for concurrent use.
type Codec struct {
	family     string
	sampleRate int
	hop        int     // samples per latent frame
	frameRate  float64 // frames per second, as the family computes it
	dim        int     // latent width D (the encoder's output channels)
	chains     []chain // the residual quantisers, in code order
	sizes      []int   // K per stage, over all chains
	bandwidths []float64
	enc, dec   *ort.DynamicAdvancedSession
	// quant runs each chain's RVQ on Options.Backend's device (nil: the
	// CPU); releaseQuant frees what it holds.
	quant        chainEncoder
	releaseQuant func()

	mu    sync.Mutex
	books map[int][]*rvq.Codebooks // prepared codebooks for n stages in all, per chain (nil: unused)
}

// chain is one residual quantiser: its stages' fp32 codebooks and, for
// Mimi, the 1x1 convolutions (no bias) that map the latents into its
// codebook width and back. EnCodec has one chain without projections;
// Mimi a semantic and an acoustic chain, both fed the latents, whose
// decoded sums are added (semantic first).
type chain struct {
	name    string
	width   int         // codebook width
	stages  [][]float32 // row-major [K, width] per stage
	inProj  []float32   // row-major [width, D]; nil: the identity (width = D)
	outProj []float32   // row-major [D, width]; nil: the identity
}

// config holds the config.json fields edge reads (EnCodec and Mimi).
type config struct {
	ModelType        string    `json:"model_type"`
	SamplingRate     int       `json:"sampling_rate"`
	AudioChannels    int       `json:"audio_channels"`
	Ratios           []int     `json:"upsampling_ratios"`
	CodebookSize     int       `json:"codebook_size"`
	CodebookDim      *int      `json:"codebook_dim"`
	HiddenSize       int       `json:"hidden_size"`
	TargetBandwidths []float64 `json:"target_bandwidths"`
	Normalize        bool      `json:"normalize"`
	ChunkLengthS     *float64  `json:"chunk_length_s"`
	// Mimi
	FrameRate       *float64 `json:"frame_rate"`
	FrameRateStored *float64 `json:"_frame_rate"` // how transformers 5 saves frame_rate
	NumQuantizers   int      `json:"num_quantizers"`
	NumSemantic     int      `json:"num_semantic_quantizers"`
	VQHidden        *int     `json:"vector_quantization_hidden_dimension"`
}

// Open reads the codec directory dir: its config, its quantizer (from
// model.safetensors) and its two ONNX graphs.
func Open(dir string, opts Options) (*Codec, error) {
	c, err := readQuantizer(dir)
	if err != nil {
		return nil, err
	}
	if c.quant, c.releaseQuant, err = deviceQuantizer(opts.Backend); err != nil {
		return nil, err
	}
	if err := onnx.Init(opts.Library); err != nil {
		return nil, err
	}
	if c.enc, err = session(filepath.Join(dir, EncoderFile), "pcm", "latents", opts); err != nil {
		return nil, err
	}
	if c.dec, err = session(filepath.Join(dir, DecoderFile), "latents", "pcm", opts); err != nil {
		c.enc.Destroy()
		return nil, err
	}
	return c, nil
}

// readQuantizer reads the config and the quantizer of codec directory dir
// (no ONNX graphs: Encode and Decode need Open's).
func readQuantizer(dir string) (*Codec, error) {
	raw, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		return nil, fmt.Errorf("codec directory %s: %w", dir, err)
	}
	var cfg config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ConfigFile), err)
	}
	c := &Codec{family: cfg.ModelType, books: map[int][]*rvq.Codebooks{}}
	switch cfg.ModelType {
	case "encodec":
		err = c.readEncodec(dir, cfg)
	case "mimi":
		err = c.readMimi(dir, cfg)
	default:
		err = fmt.Errorf("%s: model_type %q, want \"encodec\" or \"mimi\"", filepath.Join(dir, ConfigFile), cfg.ModelType)
	}
	if err != nil {
		return nil, err
	}
	return c, nil
}

// checkCommon checks the fields both families share and sets the rate.
func (c *Codec) checkCommon(where string, cfg config) error {
	if cfg.AudioChannels != 1 {
		return fmt.Errorf("%s: audio_channels = %d, want 1 (mono codecs only)", where, cfg.AudioChannels)
	}
	if cfg.SamplingRate < 1000 || cfg.SamplingRate > 384000 {
		return fmt.Errorf("%s: sampling_rate = %d", where, cfg.SamplingRate)
	}
	c.sampleRate, c.hop = cfg.SamplingRate, 1
	if len(cfg.Ratios) == 0 || len(cfg.Ratios) > 16 {
		return fmt.Errorf("%s: upsampling_ratios %v, want 1 to 16 ratios", where, cfg.Ratios)
	}
	for _, r := range cfg.Ratios {
		if r < 1 || r > 64 {
			return fmt.Errorf("%s: upsampling_ratios %v", where, cfg.Ratios)
		}
		c.hop *= r
	}
	if c.hop > c.sampleRate {
		return fmt.Errorf("%s: upsampling_ratios %v give %d samples a frame, more than the %d Hz rate", where, cfg.Ratios, c.hop, c.sampleRate)
	}
	c.dim = cfg.HiddenSize
	if c.dim < 1 || c.dim > rvq.MaxDim {
		return fmt.Errorf("%s: hidden_size %d, want 1..%d", where, c.dim, rvq.MaxDim)
	}
	if cfg.CodebookSize < 1 || cfg.CodebookSize > rvq.MaxEntries {
		return fmt.Errorf("%s: codebook_size %d, want 1..%d", where, cfg.CodebookSize, rvq.MaxEntries)
	}
	return nil
}

func (c *Codec) readEncodec(dir string, cfg config) error {
	where := filepath.Join(dir, ConfigFile)
	if cfg.Normalize || (cfg.ChunkLengthS != nil && *cfg.ChunkLengthS > 0) {
		return fmt.Errorf("%s: normalize/chunk_length_s are set (encodec_48khz style): chunked, normalised EnCodec is not supported yet", where)
	}
	if err := c.checkCommon(where, cfg); err != nil {
		return err
	}
	// transformers: frame_rate = ceil(sampling_rate / prod(upsampling_ratios)).
	c.frameRate = math.Ceil(float64(c.sampleRate) / float64(c.hop))
	width := c.dim
	if cfg.CodebookDim != nil {
		width = *cfg.CodebookDim
	}
	if width != c.dim {
		return fmt.Errorf("%s: codebook_dim %d differs from hidden_size %d (EnCodec quantises the latents themselves)", where, width, c.dim)
	}
	c.bandwidths = cfg.TargetBandwidths
	st, err := readSafetensors(filepath.Join(dir, WeightsFile))
	if err != nil {
		return err
	}
	wf := filepath.Join(dir, WeightsFile)
	ch := chain{name: "quantizer", width: width}
	for i := 0; ; i++ {
		name := fmt.Sprintf("quantizer.layers.%d.codebook.embed", i)
		if _, ok := st[name]; !ok {
			if i == 0 {
				return fmt.Errorf("%s: no tensor %q: not an EnCodec checkpoint", wf, name)
			}
			break
		}
		if i == rvq.MaxStages {
			return fmt.Errorf("%s: more than %d quantizer layers", wf, rvq.MaxStages)
		}
		v, _, err := st.f32(name, cfg.CodebookSize, width)
		if err != nil {
			return fmt.Errorf("%s: %w", wf, err)
		}
		ch.stages = append(ch.stages, v)
	}
	// transformers: num_quantizers = int(1000 * target_bandwidths[-1] // (frame_rate * 10)).
	if n := len(cfg.TargetBandwidths); n > 0 {
		if want := int(math.Floor(1000 * cfg.TargetBandwidths[n-1] / (c.frameRate * 10))); want != len(ch.stages) {
			return fmt.Errorf("%s: %d quantizer layers, but the config's target_bandwidths imply %d", wf, len(ch.stages), want)
		}
	}
	return c.setChains(ch)
}

// readMimi reads Mimi's split quantizer: num_semantic_quantizers stages of
// quantizer.semantic_residual_vector_quantizer and the rest of
// quantizer.acoustic_residual_vector_quantizer, each codebook
// embed_sum / max(cluster_usage, 1e-5) (MimiEuclideanCodebook's epsilon),
// each chain with its input_proj / output_proj 1x1 convolutions when
// vector_quantization_hidden_dimension differs from hidden_size.
func (c *Codec) readMimi(dir string, cfg config) error {
	where := filepath.Join(dir, ConfigFile)
	if err := c.checkCommon(where, cfg); err != nil {
		return err
	}
	fr := cfg.FrameRate
	if fr == nil {
		fr = cfg.FrameRateStored
	}
	if fr == nil || !(*fr > 0) {
		return fmt.Errorf("%s: no frame_rate", where)
	}
	c.frameRate = *fr
	hop := float64(c.sampleRate) / c.frameRate
	if hop != math.Trunc(hop) || int(hop)%c.hop != 0 {
		return fmt.Errorf("%s: sampling_rate %d / frame_rate %g is not a whole multiple of the encoder's %d samples a step", where, c.sampleRate, c.frameRate, c.hop)
	}
	c.hop = int(hop)
	width := c.dim
	if cfg.VQHidden != nil {
		width = *cfg.VQHidden
	}
	if cfg.CodebookDim != nil && *cfg.CodebookDim != width {
		return fmt.Errorf("%s: codebook_dim %d differs from vector_quantization_hidden_dimension %d", where, *cfg.CodebookDim, width)
	}
	if width < 1 || width > rvq.MaxDim {
		return fmt.Errorf("%s: codebook width %d, want 1..%d", where, width, rvq.MaxDim)
	}
	if cfg.NumQuantizers < 1 || cfg.NumQuantizers > rvq.MaxStages || cfg.NumSemantic < 0 || cfg.NumSemantic > cfg.NumQuantizers {
		return fmt.Errorf("%s: num_quantizers %d, num_semantic_quantizers %d, want 1..%d and 0..num_quantizers", where, cfg.NumQuantizers, cfg.NumSemantic, rvq.MaxStages)
	}
	st, err := readSafetensors(filepath.Join(dir, WeightsFile))
	if err != nil {
		return err
	}
	wf := filepath.Join(dir, WeightsFile)
	var chains []chain
	for _, part := range []struct {
		name string
		n    int
	}{{"semantic", cfg.NumSemantic}, {"acoustic", cfg.NumQuantizers - cfg.NumSemantic}} {
		if part.n == 0 {
			continue
		}
		prefix := "quantizer." + part.name + "_residual_vector_quantizer."
		ch := chain{name: part.name, width: width}
		if width != c.dim {
			if ch.inProj, _, err = st.f32(prefix+"input_proj.weight", width, c.dim, 1); err != nil {
				return fmt.Errorf("%s: %w", wf, err)
			}
			if ch.outProj, _, err = st.f32(prefix+"output_proj.weight", c.dim, width, 1); err != nil {
				return fmt.Errorf("%s: %w", wf, err)
			}
		}
		for i := 0; i < part.n; i++ {
			layer := fmt.Sprintf("%slayers.%d.codebook.", prefix, i)
			sum, _, err := st.f32(layer+"embed_sum", cfg.CodebookSize, width)
			if err != nil {
				return fmt.Errorf("%s: %w", wf, err)
			}
			usage, _, err := st.f32(layer+"cluster_usage", cfg.CodebookSize)
			if err != nil {
				return fmt.Errorf("%s: %w", wf, err)
			}
			const epsilon = 1e-5 // MimiEuclideanCodebook's default
			for k, u := range usage {
				u = max(u, epsilon) // torch.clamp(min=epsilon): NaN stays NaN, caught below
				if math.IsNaN(float64(u)) {
					return fmt.Errorf("%s: %scluster_usage[%d] is NaN", wf, layer, k)
				}
				for j := 0; j < width; j++ {
					sum[k*width+j] /= u
				}
			}
			ch.stages = append(ch.stages, sum)
		}
		chains = append(chains, ch)
	}
	return c.setChains(chains...)
}

// setChains installs the chains and checks every codebook once.
func (c *Codec) setChains(chains ...chain) error {
	c.chains = chains
	for _, ch := range chains {
		for _, s := range ch.stages {
			c.sizes = append(c.sizes, len(s)/ch.width)
		}
	}
	_, err := c.codebooks(len(c.sizes))
	return err
}

// session opens one ONNX graph with a single float input and output.
func session(path, in, out string, opts Options) (*ort.DynamicAdvancedSession, error) {
	ins, outs, err := ort.GetInputOutputInfo(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(ins) != 1 || ins[0].Name != in || len(outs) != 1 || outs[0].Name != out {
		return nil, fmt.Errorf("%s: want one input %q and one output %q (as scripts/golden/codec.py exports them), got %v -> %v", path, in, out, ins, outs)
	}
	s, err := onnx.NewSession(path, []string{in}, []string{out}, onnx.Options{Library: opts.Library, Threads: opts.Threads,
		Provider: opts.Provider, EPLibrary: opts.EPLibrary, Device: opts.Device, NoTF32: !opts.TF32})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Close releases the ONNX Runtime sessions and any device codebooks.
func (c *Codec) Close() error {
	if c.releaseQuant != nil {
		c.releaseQuant()
	}
	var errs []error
	for _, s := range []*ort.DynamicAdvancedSession{c.enc, c.dec} {
		if s != nil {
			errs = append(errs, s.Destroy())
		}
	}
	return errors.Join(errs...)
}

// Family is the checkpoint's model_type ("encodec" or "mimi").
func (c *Codec) Family() string { return c.family }

// SampleRate is the codec's audio rate in Hz.
func (c *Codec) SampleRate() int { return c.sampleRate }

// Hop is the number of samples per code frame.
func (c *Codec) Hop() int { return c.hop }

// NumStages is the number of codebooks in the checkpoint (over all chains).
func (c *Codec) NumStages() int { return len(c.sizes) }

// Dim is the latent width D.
func (c *Codec) Dim() int { return c.dim }

// StagesForBandwidth returns the number of codebooks transformers uses for
// bandwidth kbps (EnCodec): it must be one of the checkpoint's
// target_bandwidths, and the count is max(1, floor(1000*kbps / (log2(K) *
// frame_rate))). Mimi declares no bandwidths: pick its codebooks by count.
func (c *Codec) StagesForBandwidth(kbps float64) (int, error) {
	if len(c.bandwidths) == 0 {
		return 0, fmt.Errorf("the %s codec declares no target_bandwidths: choose the number of codebooks instead", c.family)
	}
	ok := false
	for _, b := range c.bandwidths {
		ok = ok || b == kbps
	}
	if !ok {
		return 0, fmt.Errorf("bandwidth %g kbps is not one of the codec's target_bandwidths %v", kbps, c.bandwidths)
	}
	perStage := math.Log2(float64(c.sizes[0])) * c.frameRate
	return min(len(c.sizes), max(1, int(math.Floor(kbps*1000/perStage)))), nil
}

// split returns how many of n stages in all fall into each chain (chains in
// order fill up before the next one starts, as transformers' Mimi does).
func (c *Codec) split(n int) []int {
	out := make([]int, len(c.chains))
	for i, ch := range c.chains {
		out[i] = min(n, len(ch.stages))
		n -= out[i]
	}
	return out
}

// codebooks returns the prepared codebooks of each chain for n stages in
// all (nil for a chain that n does not reach).
func (c *Codec) codebooks(n int) ([]*rvq.Codebooks, error) {
	if n < 1 || n > len(c.sizes) {
		return nil, fmt.Errorf("%d codebooks, want 1..%d", n, len(c.sizes))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.books[n]; ok {
		return b, nil
	}
	books := make([]*rvq.Codebooks, len(c.chains))
	for i, k := range c.split(n) {
		if k == 0 {
			continue
		}
		b, err := rvq.NewCodebooksF32(c.chains[i].width, c.chains[i].stages[:k]...)
		if err != nil {
			return nil, fmt.Errorf("%s %s quantizer: %w", c.family, c.chains[i].name, err)
		}
		books[i] = b
	}
	c.books[n] = books
	return books, nil
}

// project returns w x for every row of x: x row-major [t, in], w [out, in],
// the result [t, out], each value summed in float64 and rounded once (a 1x1
// convolution without bias).
func project(x []float32, t, in int, w []float32, out int) []float32 {
	y := make([]float32, t*out)
	for r := 0; r < t; r++ {
		xr := x[r*in : (r+1)*in]
		for o := 0; o < out; o++ {
			var acc float64
			for i, v := range w[o*in : (o+1)*in] {
				acc += float64(v) * float64(xr[i])
			}
			y[r*out+o] = float32(acc)
		}
	}
	return y
}

// Encode tokenises one mono clip at SampleRate: it returns codes row-major
// [stages, T] and T. pcm must be finite and at least Hop samples long.
func (c *Codec) Encode(ctx context.Context, pcm []float32, stages int) ([]int32, int, error) {
	if _, err := c.codebooks(stages); err != nil {
		return nil, 0, err
	}
	if len(pcm) < c.hop {
		return nil, 0, fmt.Errorf("audio has %d samples, want at least one frame (%d samples at %d Hz)", len(pcm), c.hop, c.sampleRate)
	}
	for i, v := range pcm {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return nil, 0, fmt.Errorf("audio sample %d is %v, want finite samples", i, v)
		}
	}
	lat, shape, err := run(c.enc, pcm, []int64{1, 1, int64(len(pcm))})
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", EncoderFile, err)
	}
	if len(shape) != 3 || shape[0] != 1 || shape[1] != int64(c.dim) || shape[2] < 1 {
		return nil, 0, fmt.Errorf("%s returned latents %v, want [1, %d, T]", EncoderFile, shape, c.dim)
	}
	t := int(shape[2])
	codes, err := c.Quantize(ctx, transpose(lat, c.dim, t), t, stages)
	if err != nil {
		return nil, 0, err
	}
	return transposeI32(codes, t, stages), t, nil
}

// Quantize returns the codes, row-major [T, stages], of latents x row-major
// [T, D] (the encoder's output transposed): each chain's input projection,
// then its greedy RVQ with the fp32 codebooks (on Options.Backend).
func (c *Codec) Quantize(ctx context.Context, x []float32, t, stages int) ([]int32, error) {
	if c.quant != nil {
		return c.quantize(ctx, x, t, stages, c.quant)
	}
	return c.quantize(ctx, x, t, stages, cpuEncode)
}

// cpuEncode is a chainEncoder on the CPU.
func cpuEncode(ctx context.Context, books *rvq.Codebooks, x []float32, t int, codes []int32) error {
	return books.Encode(ctx, x, rvq.Batch{B: 1, T: t}, codes, make([]float32, len(x)))
}

// chainEncoder quantises one chain's input x, row-major [t, books.Dim()],
// into codes row-major [t, books.NumStages()] (Codebooks.Encode's contract).
type chainEncoder func(ctx context.Context, books *rvq.Codebooks, x []float32, t int, codes []int32) error

// quantize is Quantize with each chain's RVQ run by enc.
func (c *Codec) quantize(ctx context.Context, x []float32, t, stages int, enc chainEncoder) ([]int32, error) {
	books, err := c.codebooks(stages)
	if err != nil {
		return nil, err
	}
	if t < 1 || len(x) != t*c.dim {
		return nil, fmt.Errorf("latents have %d values, want [T, %d] with T = %d >= 1", len(x), c.dim, t)
	}
	codes := make([]int32, t*stages)
	q0 := 0
	for i, k := range c.split(stages) {
		if k == 0 {
			continue
		}
		ch := &c.chains[i]
		xi := x
		if ch.inProj != nil {
			xi = project(x, t, c.dim, ch.inProj, ch.width)
		}
		ci := make([]int32, t*k)
		if err := enc(ctx, books[i], xi, t, ci); err != nil {
			return nil, fmt.Errorf("%s quantizer: %w", ch.name, err)
		}
		for r := 0; r < t; r++ {
			copy(codes[r*stages+q0:r*stages+q0+k], ci[r*k:(r+1)*k])
		}
		q0 += k
	}
	return codes, nil
}

// Dequantize returns the latents, row-major [T, D], of codes row-major
// [T, stages]: per chain the sum of its codewords in stage order, its output
// projection, and the chains' results added in order.
func (c *Codec) Dequantize(ctx context.Context, codes []int32, t, stages int) ([]float32, error) {
	books, err := c.codebooks(stages)
	if err != nil {
		return nil, err
	}
	if t < 1 || len(codes) != stages*t {
		return nil, fmt.Errorf("codes have %d values, want [T, %d] with T = %d >= 1", len(codes), stages, t)
	}
	for i, v := range codes {
		if k := c.sizes[i%stages]; v < 0 || int(v) >= k {
			return nil, fmt.Errorf("code [%d, %d] = %d, want 0..%d", i%stages, i/stages, v, k-1)
		}
	}
	var lat []float32
	q0 := 0
	for i, k := range c.split(stages) {
		if k == 0 {
			continue
		}
		ch := &c.chains[i]
		ci := make([]int32, t*k)
		for r := 0; r < t; r++ {
			copy(ci[r*k:(r+1)*k], codes[r*stages+q0:r*stages+q0+k])
		}
		q0 += k
		qi := make([]float32, t*ch.width)
		if err := books[i].Decode(ctx, ci, rvq.Batch{B: 1, T: t}, qi); err != nil {
			return nil, err
		}
		if ch.outProj != nil {
			qi = project(qi, t, ch.width, ch.outProj, c.dim)
		}
		if lat == nil {
			lat = qi
			continue
		}
		for j, v := range qi {
			lat[j] += v
		}
	}
	return lat, nil
}

// Decode turns codes row-major [stages, T] back into audio at SampleRate
// (T*Hop samples).
func (c *Codec) Decode(ctx context.Context, codes []int32, stages, t int) ([]float32, error) {
	if _, err := c.codebooks(stages); err != nil {
		return nil, err
	}
	if t < 1 || len(codes) != stages*t {
		return nil, fmt.Errorf("codes have %d values, want [%d, T] with T = %d >= 1", len(codes), stages, t)
	}
	lat, err := c.Dequantize(ctx, transposeI32(codes, stages, t), t, stages)
	if err != nil {
		return nil, err
	}
	pcm, shape, err := run(c.dec, transpose(lat, t, c.dim), []int64{1, int64(c.dim), int64(t)})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", DecoderFile, err)
	}
	if len(shape) != 3 || shape[0] != 1 || shape[1] != 1 {
		return nil, fmt.Errorf("%s returned audio %v, want [1, 1, N]", DecoderFile, shape)
	}
	return pcm, nil
}

// run feeds one float tensor through s and returns its one output.
func run(s *ort.DynamicAdvancedSession, data []float32, shape []int64) ([]float32, []int64, error) {
	in, err := ort.NewTensor(ort.NewShape(shape...), data)
	if err != nil {
		return nil, nil, err
	}
	defer in.Destroy()
	outs := []ort.Value{nil}
	if err := s.Run([]ort.Value{in}, outs); err != nil {
		return nil, nil, err
	}
	defer outs[0].Destroy()
	t, ok := outs[0].(*ort.Tensor[float32])
	if !ok {
		return nil, nil, fmt.Errorf("output is %T, want a float32 tensor", outs[0])
	}
	return append([]float32(nil), t.GetData()...), t.GetShape(), nil
}

// transpose returns the [cols, rows] transpose of row-major [rows, cols] x.
func transpose(x []float32, rows, cols int) []float32 {
	out := make([]float32, len(x))
	for r := 0; r < rows; r++ {
		for k := 0; k < cols; k++ {
			out[k*rows+r] = x[r*cols+k]
		}
	}
	return out
}

func transposeI32(x []int32, rows, cols int) []int32 {
	out := make([]int32, len(x))
	for r := 0; r < rows; r++ {
		for k := 0; k < cols; k++ {
			out[k*rows+r] = x[r*cols+k]
		}
	}
	return out
}
