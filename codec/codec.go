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
// greedy RVQ on the encoder's latents). Mimi's split quantizer is not read
// yet (Open says so).
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
}

// Codec is an opened codec directory. It is safe for concurrent use.
type Codec struct {
	family     string
	sampleRate int
	hop        int     // samples per latent frame
	frameRate  float64 // frames per second, as the family computes it
	dim        int
	sizes      []int       // K per stage
	stages     [][]float32 // [K, D] row-major per stage
	bandwidths []float64   // kbps the checkpoint declares
	enc, dec   *ort.DynamicAdvancedSession

	mu    sync.Mutex
	books map[int]*rvq.Codebooks // prepared first-n-stage codebooks
}

// encodecConfig holds the config.json fields edge reads for EnCodec.
type encodecConfig struct {
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
}

// Open reads the codec directory dir: its config, its quantizer (from
// model.safetensors) and its two ONNX graphs.
func Open(dir string, opts Options) (*Codec, error) {
	raw, err := os.ReadFile(filepath.Join(dir, ConfigFile))
	if err != nil {
		return nil, fmt.Errorf("codec directory %s: %w", dir, err)
	}
	var cfg encodecConfig
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, ConfigFile), err)
	}
	c := &Codec{family: cfg.ModelType, books: map[int]*rvq.Codebooks{}}
	switch cfg.ModelType {
	case "encodec":
		if err := c.readEncodec(dir, cfg); err != nil {
			return nil, err
		}
	case "mimi":
		return nil, fmt.Errorf("%s: Mimi checkpoints (split semantic/acoustic RVQ) are not supported yet; EnCodec is", dir)
	default:
		return nil, fmt.Errorf("%s: model_type %q, want \"encodec\"", filepath.Join(dir, ConfigFile), cfg.ModelType)
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

func (c *Codec) readEncodec(dir string, cfg encodecConfig) error {
	where := filepath.Join(dir, ConfigFile)
	if cfg.AudioChannels != 1 {
		return fmt.Errorf("%s: audio_channels = %d, want 1 (mono codecs only)", where, cfg.AudioChannels)
	}
	if cfg.Normalize || (cfg.ChunkLengthS != nil && *cfg.ChunkLengthS > 0) {
		return fmt.Errorf("%s: normalize/chunk_length_s are set (encodec_48khz style): chunked, normalised EnCodec is not supported yet", where)
	}
	if cfg.SamplingRate < 1000 || cfg.SamplingRate > 384000 {
		return fmt.Errorf("%s: sampling_rate = %d", where, cfg.SamplingRate)
	}
	c.sampleRate, c.hop = cfg.SamplingRate, 1
	for _, r := range cfg.Ratios {
		if r < 1 || r > 64 {
			return fmt.Errorf("%s: upsampling_ratios %v", where, cfg.Ratios)
		}
		c.hop *= r
	}
	// transformers: frame_rate = ceil(sampling_rate / prod(upsampling_ratios)).
	c.frameRate = math.Ceil(float64(c.sampleRate) / float64(c.hop))
	c.dim = cfg.HiddenSize
	if cfg.CodebookDim != nil {
		c.dim = *cfg.CodebookDim
	}
	if cfg.CodebookSize < 1 || cfg.CodebookSize > rvq.MaxEntries || c.dim < 1 || c.dim > rvq.MaxDim {
		return fmt.Errorf("%s: codebook_size %d, codebook_dim %d, want 1..%d and 1..%d", where, cfg.CodebookSize, c.dim, rvq.MaxEntries, rvq.MaxDim)
	}
	c.bandwidths = cfg.TargetBandwidths
	st, err := readSafetensors(filepath.Join(dir, WeightsFile))
	if err != nil {
		return err
	}
	for i := 0; ; i++ {
		name := fmt.Sprintf("quantizer.layers.%d.codebook.embed", i)
		if _, ok := st[name]; !ok {
			if i == 0 {
				return fmt.Errorf("%s: no tensor %q: not an EnCodec checkpoint", filepath.Join(dir, WeightsFile), name)
			}
			break
		}
		if i == rvq.MaxStages {
			return fmt.Errorf("%s: more than %d quantizer layers", filepath.Join(dir, WeightsFile), rvq.MaxStages)
		}
		v, _, err := st.f32(name, cfg.CodebookSize, c.dim)
		if err != nil {
			return fmt.Errorf("%s: %w", filepath.Join(dir, WeightsFile), err)
		}
		c.stages = append(c.stages, v)
		c.sizes = append(c.sizes, cfg.CodebookSize)
	}
	// transformers: num_quantizers = int(1000 * target_bandwidths[-1] // (frame_rate * 10)).
	if n := len(cfg.TargetBandwidths); n > 0 {
		if want := int(math.Floor(1000 * cfg.TargetBandwidths[n-1] / (c.frameRate * 10))); want != len(c.stages) {
			return fmt.Errorf("%s: %d quantizer layers, but the config's target_bandwidths imply %d", filepath.Join(dir, WeightsFile), len(c.stages), want)
		}
	}
	_, err = c.codebooks(len(c.stages)) // check every codebook now
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
	so, err := ort.NewSessionOptions()
	if err != nil {
		return nil, err
	}
	defer so.Destroy()
	if opts.Threads > 0 {
		if err := so.SetIntraOpNumThreads(opts.Threads); err != nil {
			return nil, err
		}
	}
	s, err := ort.NewDynamicAdvancedSession(path, []string{in}, []string{out}, so)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return s, nil
}

// Close releases the ONNX Runtime sessions.
func (c *Codec) Close() error {
	var errs []error
	for _, s := range []*ort.DynamicAdvancedSession{c.enc, c.dec} {
		if s != nil {
			errs = append(errs, s.Destroy())
		}
	}
	return errors.Join(errs...)
}

// Family is the checkpoint's model_type ("encodec").
func (c *Codec) Family() string { return c.family }

// SampleRate is the codec's audio rate in Hz.
func (c *Codec) SampleRate() int { return c.sampleRate }

// Hop is the number of samples per code frame.
func (c *Codec) Hop() int { return c.hop }

// NumStages is the number of codebooks in the checkpoint.
func (c *Codec) NumStages() int { return len(c.stages) }

// Dim is the latent width D.
func (c *Codec) Dim() int { return c.dim }

// StagesForBandwidth returns the number of codebooks transformers uses for
// bandwidth kbps: it must be one of the checkpoint's target_bandwidths, and
// the count is max(1, floor(1000*kbps / (log2(K) * frame_rate))).
func (c *Codec) StagesForBandwidth(kbps float64) (int, error) {
	ok := false
	for _, b := range c.bandwidths {
		ok = ok || b == kbps
	}
	if !ok {
		return 0, fmt.Errorf("bandwidth %g kbps is not one of the codec's target_bandwidths %v", kbps, c.bandwidths)
	}
	perStage := math.Log2(float64(c.sizes[0])) * c.frameRate
	return min(len(c.stages), max(1, int(math.Floor(kbps*1000/perStage)))), nil
}

// codebooks returns the prepared first n stages.
func (c *Codec) codebooks(n int) (*rvq.Codebooks, error) {
	if n < 1 || n > len(c.stages) {
		return nil, fmt.Errorf("%d codebooks, want 1..%d", n, len(c.stages))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if b, ok := c.books[n]; ok {
		return b, nil
	}
	b, err := rvq.NewCodebooksF32(c.dim, c.stages[:n]...)
	if err != nil {
		return nil, fmt.Errorf("%s quantizer: %w", c.family, err)
	}
	c.books[n] = b
	return b, nil
}

// Encode tokenises one mono clip at SampleRate: it returns codes row-major
// [stages, T] and T. pcm must be finite and at least Hop samples long.
func (c *Codec) Encode(ctx context.Context, pcm []float32, stages int) ([]int32, int, error) {
	books, err := c.codebooks(stages)
	if err != nil {
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
	x := transpose(lat, c.dim, t) // [T, D]
	codes := make([]int32, t*stages)
	if err := books.Encode(ctx, x, rvq.Batch{B: 1, T: t}, codes, make([]float32, t*c.dim)); err != nil {
		return nil, 0, fmt.Errorf("quantizer: %w", err)
	}
	return transposeI32(codes, t, stages), t, nil
}

// Decode turns codes row-major [stages, T] back into audio at SampleRate
// (T*Hop samples for EnCodec).
func (c *Codec) Decode(ctx context.Context, codes []int32, stages, t int) ([]float32, error) {
	books, err := c.codebooks(stages)
	if err != nil {
		return nil, err
	}
	if t < 1 || len(codes) != stages*t {
		return nil, fmt.Errorf("codes have %d values, want [%d, T] with T = %d >= 1", len(codes), stages, t)
	}
	for i, v := range codes {
		if k := c.sizes[i/t]; v < 0 || int(v) >= k {
			return nil, fmt.Errorf("code [%d, %d] = %d, want 0..%d", i/t, i%t, v, k-1)
		}
	}
	lat := make([]float32, t*c.dim)
	if err := books.Decode(ctx, transposeI32(codes, stages, t), rvq.Batch{B: 1, T: t}, lat); err != nil {
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
