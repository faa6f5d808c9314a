// Package asr turns audio into aligned text with a CTC acoustic model: the
// fbank op and the ONNX Runtime encoder op run as a validated
// runtime.Pipeline, then greedy CTC decoding and forced alignment (package
// dpx) give words with start/end times and confidences.
//
// Long audio is cut into overlapping chunks of Options.ChunkSeconds; each
// chunk's emissions keep only the frames nearer its own centre than any
// other chunk's, and the stitched emissions are decoded as one sequence, so
// timestamps are global and memory stays bounded by one chunk's
// activations plus the [T', V] emissions (about 8 MB per hour for a
// 29-symbol vocabulary at 20 ms per frame) and the aligner's budget.
//
// With Options.Batch the chunks that reach the encoder at the same time,
// from any calls and streams, are encoded in one batched run (batch.go).
package asr

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/edgespeech/edge/asr/transcript"
	"github.com/edgespeech/edge/plugins/vad"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/model"

	_ "github.com/edgespeech/edge/plugins/fbank" // the "fbank" op
	"github.com/edgespeech/edge/runtime/onnx"    // the "encoder" op
)

// Options configures a Recognizer.
type Options struct {
	// ORTLib is the ONNX Runtime library ("" = $EDGE_ORT_LIB, then the cache).
	ORTLib string
	// Threads bounds the encoder's intra-op threads (0 = one per core).
	Threads int
	// Precision is the encoder's: model.PrecisionFP32 ("" too) or
	// model.PrecisionInt8, the int8 file the model ships (see
	// model.Manifest.UsePrecision).
	Precision string
	// Backend runs the frontend, the encoder's I/O and, when it is not the
	// CPU, greedy decoding and forced alignment (nil = CPU). On the cuda
	// backend features and emissions stay on the device (see device.go).
	Backend runtime.Backend
	// Provider is the encoder's ONNX Runtime execution provider: "cpu"
	// (default) or "cuda".
	Provider string
	// CUDAEP is ONNX Runtime's CUDA plugin EP library ("" = $EDGE_ORT_CUDA_EP).
	CUDAEP string
	// ConvAlgoSearch is the CUDA provider's cuDNN convolution algorithm
	// search (onnx.ConvAlgoHeuristic, the default; see onnx.Options).
	ConvAlgoSearch string
	// NoTF32 turns the CUDA provider's TF32 math off (see onnx.Options.NoTF32).
	NoTF32 bool
	// ConvNC1D gives cuDNN 1-D convolutions as [N, C, 1, D] on the CUDA
	// provider (see onnx.Options.ConvNC1D).
	ConvNC1D bool
	// ORTProfile, when set, is the file prefix of ONNX Runtime's profile of
	// the encoder session, written when the recogniser closes (see
	// onnx.Options.Profile).
	ORTProfile string
	// Fallback "cpu" runs the encoder on the CPU when the GPU provider
	// cannot be used; "" fails instead.
	Fallback string
	// Bind is the encoder's binding on the cuda backend with the cuda
	// provider: "device" (zero-copy, default) or "host" (round trips
	// through host memory, for comparison).
	Bind string
	// ChunkSeconds is the longest piece of audio encoded at once (default
	// 10: the encoder's attention costs grow with the chunk, and 10 s chunks
	// are both faster and no less accurate than 30 s ones; scripts/bench/peer).
	ChunkSeconds float64
	// OverlapSeconds is the audio shared by neighbouring chunks (default 1).
	OverlapSeconds float64
	// Workers is how many chunks of long audio are encoded at once, each by
	// its own encoder session with Threads/Workers intra-op threads (at
	// least one); chunks are stitched in order, and at most Workers chunks'
	// emissions wait to be stitched. 0 = Threads on the CPU backend (one
	// single-threaded session per thread: chunks in parallel scale better
	// than intra-op threads) and 1 when Threads is 0; only the CPU backend
	// runs more than one. Concurrent calls share the same sessions.
	Workers int
	// VAD, when set, opens a voice activity detector (plugins/vad, Silero
	// VAD v5) that finds the speech in the audio: only speech is encoded,
	// each segment with a little context (cut into chunks only when longer
	// than ChunkSeconds; VAD.Rules.MaxSpeech bounds a segment, e.g. 30 s),
	// and the frames outside it are silence, so audio without speech gives
	// an empty transcript and long audio is cut at pauses, not by the
	// clock. Its Library defaults to ORTLib. nil encodes all the audio in
	// fixed chunks.
	VAD *vad.Options
	// Batch > 1 batches encoder runs across calls: chunks that reach the
	// encoder together (from concurrent Transcribe, Align and Emissions
	// calls, concurrent Streams, or the chunks of one long file) run as one
	// pipeline run of at most Batch items, zero-padded to the longest, each
	// with its own length (see batch.go). Results equal the unbatched ones
	// (log-probs within float rounding). 0 or 1 encodes every chunk alone.
	// Models whose output depends on padding are never batched (see
	// BatchDisabled).
	Batch int
	// BatchWait is how long a batch that is not full waits for more chunks
	// once it has one, while another batch runs (0 = DefaultBatchWait, 5 ms;
	// negative: no wait). A batch that would wait while no other runs
	// starts at once with the chunks already waiting, and any batch takes
	// those that arrive while every pipeline is busy. Only used with
	// Batch > 1.
	BatchWait time.Duration
	// PadTo rounds every encoder run's audio up to a multiple of this much
	// (zero-padded; each chunk keeps its length, so results are those of
	// the unpadded run within float rounding), so the encoder meets a few
	// input shapes instead of one per length: ONNX Runtime's CUDA and
	// TensorRT providers set up every new shape once, tens of milliseconds
	// each. 0 is the default: one second with a GPU execution provider,
	// none on the CPU (where padding is computed, not skipped); negative:
	// none. Models whose output depends on padding are never padded.
	PadTo time.Duration
	// OnEncode, when set, is called after every encoder pipeline run with
	// the number of chunks it encoded (1 unbatched), on the goroutine that
	// ran it; it must be safe for concurrent use and return quickly.
	OnEncode func(items int)
}

// Recognizer transcribes and aligns audio with one model. It is safe for
// concurrent use: each call keeps its state to itself, and concurrent calls
// share the model's one encoder session and device ops, each op running one
// call at a time (runtime.Instance), so calls overlap in different stages;
// with Options.Batch their chunks also share encoder runs.
type Recognizer struct {
	manifest *model.Manifest
	pipeline *runtime.Pipeline   // the first of pipes
	pipes    []*runtime.Pipeline // one per worker
	free     chan *runtime.Pipeline
	backend  runtime.Backend
	dec      *deviceDecoder // greedy + alignment on a device backend; nil on the CPU
	words    transcript.Config
	chunk    int // samples per chunk, a multiple of stride
	overlap  int // samples shared by neighbours, a multiple of stride
	stride   int // samples per encoder output frame
	// speech finds the speech to encode (nil: all of it); closeSpeech
	// releases it.
	speech      speechFinder
	closeSpeech func() error
	// batch gathers chunks into batched runs (nil: each chunk runs alone);
	// noBatch is why a Batch > 1 was not used.
	batch    *batcher
	noBatch  error
	onEncode func(items int)
	// padTo: encoder runs are zero-padded to a multiple of this many
	// samples (0: to their longest chunk; see Options.PadTo).
	padTo int
}

// Stats is where the time of one Transcribe, Align or Emissions call went
// (see WithStats).
type Stats struct {
	Audio time.Duration `json:"audio_ns"`
	// Stages maps "fbank", "encoder" and "decode" to their wall time.
	Stages map[string]time.Duration `json:"stages_ns"`
	Chunks int                      `json:"chunks"`
	// MaxBatch is the most chunks one of the call's encoder runs held
	// (1 unbatched; see Options.Batch). A batched run's stage times and
	// transfers count in the Stats of every call that had a chunk in it.
	MaxBatch int `json:"max_batch"`
	// Transfers counts host<->device copies made by the pipeline to place
	// tensors where each step wants them (none between steps that share a
	// device).
	Transfers runtime.TransferStats `json:"transfers"`
	// Copies counts every host<->device copy the backend made during the
	// call, the ops' own small ones (per-item tables, status words) included,
	// and those of calls running at the same time on the same backend;
	// absent on the CPU backend.
	Copies *runtime.TransferStats `json:"copies,omitempty"`
}

// Open loads a model directory (or model.yaml) and builds its pipeline.
func Open(modelPath string, opt Options) (*Recognizer, error) {
	m, err := model.Load(modelPath)
	if err != nil {
		return nil, err
	}
	if err := m.UsePrecision(opt.Precision); err != nil {
		return nil, err
	}
	if opt.Backend == nil {
		opt.Backend = runtime.CPU
	}
	if opt.ChunkSeconds == 0 {
		opt.ChunkSeconds = 10
	}
	if opt.OverlapSeconds == 0 {
		opt.OverlapSeconds = 1
	}
	if opt.ChunkSeconds < 2 || opt.OverlapSeconds < 0 || opt.OverlapSeconds > opt.ChunkSeconds/2 {
		return nil, fmt.Errorf("chunk %gs with overlap %gs: want chunk >= 2 s and 0 <= overlap <= chunk/2", opt.ChunkSeconds, opt.OverlapSeconds)
	}
	stride := int(math.Round(m.FrameStride * float64(m.SampleRate)))
	if stride <= 0 || math.Abs(float64(stride)-m.FrameStride*float64(m.SampleRate)) > 1e-6*float64(stride) {
		return nil, fmt.Errorf("model %s: frame_stride %gs is not a whole number of samples at %d Hz", m.Name, m.FrameStride, m.SampleRate)
	}
	r := &Recognizer{
		manifest: m,
		stride:   stride,
		chunk:    int(opt.ChunkSeconds*float64(m.SampleRate)) / stride * stride,
		overlap:  int(opt.OverlapSeconds*float64(m.SampleRate)) / (2 * stride) * 2 * stride,
		words: transcript.Config{
			Vocabulary:          m.Vocab.Tokens(),
			Blank:               m.BlankID,
			FrameStride:         time.Duration(m.FrameStride * float64(time.Second)),
			WordDelimiter:       m.WordDelimiter,
			SentencePieceMarker: m.SentencePieceMarker,
			Special:             m.Specials(),
			FrameOffset:         time.Duration(m.FrameOffset * float64(time.Second)),
		},
	}
	r.backend = opt.Backend
	r.onEncode = opt.OnEncode
	if opt.Workers < 0 {
		return nil, fmt.Errorf("workers %d is negative", opt.Workers)
	}
	if opt.Batch < 0 {
		return nil, fmt.Errorf("batch %d is negative", opt.Batch)
	}
	workers := opt.Workers
	if workers == 0 {
		workers = max(1, opt.Threads)
	}
	if opt.VAD != nil {
		vo := *opt.VAD
		if vo.Library == "" {
			vo.Library = opt.ORTLib
		}
		d, err := vad.Open(vo)
		if err != nil {
			return nil, err
		}
		r.speech, r.closeSpeech = d, d.Close
	}
	if opt.Backend.Name() != runtime.CPU.Name() {
		workers = 1
	}
	if workers > 1 && opt.Threads > 0 {
		opt.Threads = max(1, opt.Threads/workers)
	} else if workers > 1 {
		opt.Threads = 1
	}
	r.free = make(chan *runtime.Pipeline, workers)
	for range workers {
		p, err := runtime.NewPipeline(pipelineConfig(m, modelPath, opt), opt.Backend)
		if err != nil {
			_ = r.closePipes()
			_ = r.closeVAD()
			return nil, fmt.Errorf("model %s: %w", m.Name, err)
		}
		r.pipes = append(r.pipes, p)
		r.free <- p
	}
	r.pipeline = r.pipes[0]
	if opt.Backend.Name() != runtime.CPU.Name() {
		if r.dec, err = newDeviceDecoder(m, opt.Backend); err != nil {
			_ = r.closePipes()
			_ = r.closeVAD()
			return nil, fmt.Errorf("model %s: %w", m.Name, err)
		}
	}
	r.padTo = padSamples(opt, m, r.stride)
	if opt.Batch > 1 {
		if r.noBatch = batchable(m); r.noBatch == nil {
			wait := opt.BatchWait
			if wait == 0 {
				wait = DefaultBatchWait
			}
			r.batch = newBatcher(r, opt.Batch, wait)
		}
	}
	return r, nil
}

// DefaultGPUPadTo is Options.PadTo's default with a GPU execution provider.
const DefaultGPUPadTo = time.Second

// padSamples is Options.PadTo in samples, a multiple of stride (samples per
// output frame), for model m: 0 when runs are not padded.
func padSamples(opt Options, m *model.Manifest, stride int) int {
	d := opt.PadTo
	if d == 0 && (opt.Provider == onnx.ProviderCUDA || opt.Provider == onnx.ProviderTensorRT) {
		d = DefaultGPUPadTo
	}
	if d <= 0 || batchable(m) != nil {
		return 0
	}
	n := int(d.Seconds() * float64(m.SampleRate))
	stride = max(stride, 1)
	return max(1, (n+stride-1)/stride) * stride
}

func (r *Recognizer) closePipes() error {
	var err error
	for _, p := range r.pipes {
		err = errors.Join(err, p.Close())
	}
	return err
}

// pipelineConfig wires pcm -> fbank -> encoder, or pcm -> encoder for
// raw-waveform models.
func pipelineConfig(m *model.Manifest, modelPath string, opt Options) runtime.PipelineConfig {
	params := map[string]any{"model": modelPath, "threads": opt.Threads, "ort_lib": opt.ORTLib}
	for k, v := range map[string]string{"precision": opt.Precision, "execution_provider": opt.Provider, "ort_cuda_ep": opt.CUDAEP,
		"fallback": opt.Fallback, "bind": opt.Bind, "cudnn_conv_algo_search": opt.ConvAlgoSearch, "ort_profile": opt.ORTProfile} {
		if v != "" {
			params[k] = v
		}
	}
	if opt.NoTF32 {
		params["cuda_tf32"] = false
	}
	if opt.ConvNC1D {
		params["cudnn_conv1d_nc1d"] = true
	}
	encoder := runtime.StepConfig{Name: "encoder", Op: "encoder", Params: params}
	cfg := runtime.PipelineConfig{
		Inputs:  []runtime.PipelineInput{{Name: "pcm", DType: "f32", Rank: 2}, {Name: "pcm_lengths", DType: "i64", Rank: 1}},
		Outputs: []string{"log_probs", "frames"},
	}
	if m.RawWaveform() {
		encoder.Inputs = map[string]string{model.InputPCM: "pcm", model.InputLengths: "pcm_lengths"}
	} else {
		cfg.Steps = append(cfg.Steps, runtime.StepConfig{
			Name: "fbank", Op: "fbank", Params: m.Frontend,
			Inputs:  map[string]string{"pcm": "pcm", "lengths": "pcm_lengths"},
			Outputs: map[string]string{"features": "features", "lengths": "feature_lengths"},
		})
		encoder.Inputs = map[string]string{model.InputFeatures: "features", model.InputLengths: "feature_lengths"}
	}
	encoder.Outputs = map[string]string{model.OutputLogProbs: "log_probs", model.OutputLengths: "frames"}
	cfg.Steps = append(cfg.Steps, encoder)
	return cfg
}

// Manifest is the loaded model manifest.
func (r *Recognizer) Manifest() *model.Manifest { return r.manifest }

type statsKey struct{}

// WithStats returns a context that makes a Transcribe, Align or Emissions
// call given it fill *st with where the call's time went when it returns
// (also on an error). One st serves one call at a time.
func WithStats(ctx context.Context, st *Stats) context.Context {
	return context.WithValue(ctx, statsKey{}, st)
}

type progressKey struct{}

// WithProgress returns a context that makes a Transcribe, Align or
// Emissions call given it report its progress to f: after each encoded
// chunk or speech segment, the audio covered so far and the call's whole
// audio. f runs on the calling goroutine and must return quickly.
func WithProgress(ctx context.Context, f func(done, total time.Duration)) context.Context {
	return context.WithValue(ctx, progressKey{}, f)
}

// call is the state of one Transcribe, Align or Emissions call.
type call struct {
	stats    Stats
	sink     *Stats                          // from WithStats, or nil
	progress func(done, total time.Duration) // from WithProgress, or nil
	offset   int                             // sample of the call's audio where the audio being chunked starts
	seconds  func(samples int) time.Duration // samples to time at the model's rate
	total    int                             // samples of the call's audio
}

// advance reports that the call's audio up to sample done is encoded.
func (c *call) advance(done int) {
	if c.progress != nil {
		c.progress(c.seconds(done), c.seconds(c.total))
	}
}

// BatchSize is the most chunks one encoder run holds: Options.Batch, or 1
// when batching is off or the model cannot be batched (BatchDisabled).
func (r *Recognizer) BatchSize() int {
	if r.batch == nil {
		return 1
	}
	return r.batch.max
}

// EncodeCapacity is how many chunks the recogniser encodes at once: its
// encoder pipelines (Options.Workers) times BatchSize. A caller that keeps
// that many calls in flight keeps every pipeline's runs full.
func (r *Recognizer) EncodeCapacity() int { return cap(r.free) * r.BatchSize() }

// BatchDisabled is why Options.Batch > 1 was not used: the model's output
// depends on padding, so each chunk is encoded alone (nil when batching is
// on or was not asked for).
func (r *Recognizer) BatchDisabled() error { return r.noBatch }

// Close releases the encoder session, the decoding ops and the VAD. Calls
// still encoding when it is called fail with ErrClosed (batched) or with
// the pipeline's error.
func (r *Recognizer) Close() error {
	if r.batch != nil {
		r.batch.close()
	}
	err := errors.Join(r.closePipes(), r.closeVAD())
	if r.dec != nil {
		err = errors.Join(err, r.dec.close())
	}
	return err
}

func (r *Recognizer) closeVAD() error {
	if r.closeSpeech == nil {
		return nil
	}
	return r.closeSpeech()
}

// ErrTooShort is returned for audio shorter than one encoder frame.
var ErrTooShort = errors.New("audio too short")

// Emissions runs the pipeline over pcm (mono, at the model's sample rate)
// in chunks and returns the stitched log-probs, row-major [T', V], in host
// memory (downloaded from a device backend).
func (r *Recognizer) Emissions(ctx context.Context, pcm []float32) ([]float32, int, error) {
	c := r.begin(ctx, pcm)
	defer r.end(c)
	return r.hostEmissions(ctx, c, pcm)
}

// hostEmissions is Emissions within call c.
func (r *Recognizer) hostEmissions(ctx context.Context, c *call, pcm []float32) ([]float32, int, error) {
	lp, T, err := r.emissions(ctx, c, pcm)
	if err != nil {
		return nil, 0, err
	}
	if !lp.OnHost() {
		h, err := r.backend.Download(lp)
		_ = lp.Release()
		if err != nil {
			return nil, 0, err
		}
		lp = h
	}
	return lp.F32()[:T*r.manifest.Vocab.Len()], T, nil
}

// begin starts the statistics of a call over pcm; end completes them and
// hands them to the caller's WithStats.
func (r *Recognizer) begin(ctx context.Context, pcm []float32) *call {
	c := &call{stats: Stats{Stages: map[string]time.Duration{}, Audio: time.Duration(float64(len(pcm)) / float64(r.manifest.SampleRate) * float64(time.Second))}}
	c.sink, _ = ctx.Value(statsKey{}).(*Stats)
	c.progress, _ = ctx.Value(progressKey{}).(func(done, total time.Duration))
	c.total, c.seconds = len(pcm), r.seconds
	if cc, ok := r.backend.(copyCounter); ok {
		before := cc.Stats()
		c.stats.Copies = &before
	}
	return c
}

func (r *Recognizer) end(c *call) {
	if cc, ok := r.backend.(copyCounter); ok && c.stats.Copies != nil {
		d := cc.Stats().Since(*c.stats.Copies)
		c.stats.Copies = &d
	}
	if c.sink != nil {
		*c.sink = c.stats
	}
}

// copyCounter is a backend that counts its host<->device copies (cuda).
type copyCounter interface{ Stats() runtime.TransferStats }

// emissions returns the log-probs [1, T', V] of pcm and T': of its speech
// (speechEmissions) when the recogniser has a SpeechFinder, else of all of
// it in chunks. The tensor may be in device memory; the caller releases it.
func (r *Recognizer) emissions(ctx context.Context, c *call, pcm []float32) (*runtime.Tensor, int, error) {
	if len(pcm) < 4*r.stride {
		return nil, 0, fmt.Errorf("%w: %d samples (%v); the model needs at least %d", ErrTooShort, len(pcm), c.stats.Audio, 4*r.stride)
	}
	if r.speech != nil {
		return r.speechEmissions(ctx, c, pcm)
	}
	return r.chunkedEmissions(ctx, c, pcm)
}

// chunkedEmissions encodes pcm (at least 4 frames long) in overlapping
// chunks and returns the stitched log-probs [1, T', V] and T'. One chunk's
// tensor is returned as the pipeline made it (in device memory on a device
// backend: the caller releases it); several chunks are stitched on the
// device when the backend copies device to device, else in host memory.
func (r *Recognizer) chunkedEmissions(ctx context.Context, c *call, pcm []float32) (*runtime.Tensor, int, error) {
	V := r.manifest.Vocab.Len()
	var st stitcher = &hostStitcher{backend: r.backend, V: V}
	if dc, ok := r.backend.(deviceCopier); ok {
		st = &deviceStitcher{backend: dc, V: V}
	}
	defer st.discard()
	bounds := r.chunks(len(pcm))
	if len(bounds) == 1 {
		res := r.encode(ctx, pcm)
		c.add(res)
		if res.err != nil {
			return nil, 0, fmt.Errorf("audio %v-%v: %w", r.seconds(0), r.seconds(len(pcm)), res.err)
		}
		c.advance(c.offset + len(pcm))
		return res.lp, res.frames, nil // one chunk: as the pipeline made it
	}
	// A bounded pool: at most cap(r.free) chunks (times the batch size when
	// batching, so a long file's chunks fill batches) are being encoded or
	// wait to be stitched; they are stitched in order.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	W := cap(r.free) * r.BatchSize()
	results := make([]chan chunkResult, len(bounds))
	next := 0
	launch := func() {
		ch := make(chan chunkResult, 1)
		results[next] = ch
		b := bounds[next]
		go func() { ch <- r.encode(ctx, pcm[b[0]:b[1]]) }()
		next++
	}
	drain := func(from int) {
		cancel()
		for j := from; j < next; j++ {
			if res := <-results[j]; res.lp != nil {
				_ = res.lp.Release()
			}
		}
	}
	for i, b := range bounds {
		for next < len(bounds) && next < i+W {
			launch()
		}
		res := <-results[i]
		results[i] = nil
		c.add(res)
		start, end := b[0], b[1]
		if res.err != nil {
			drain(i + 1)
			return nil, 0, fmt.Errorf("audio %v-%v: %w", r.seconds(start), r.seconds(end), res.err)
		}
		lp, frames := res.lp, res.frames
		c.advance(c.offset + end)
		last := i == len(bounds)-1
		// Keep local frames [lo, hi): from the middle of the overlap with the
		// previous chunk to the middle of the overlap with the next.
		lo, hi := 0, frames
		if start > 0 {
			lo = r.overlap / 2 / r.stride
		}
		if !last {
			hi = min(frames, (r.chunk-r.overlap/2)/r.stride)
		}
		if got, want := st.frames(), start/r.stride+lo; got != want {
			_ = lp.Release()
			drain(i + 1)
			return nil, 0, fmt.Errorf("stitching chunks: have %d frames, the chunk at %v starts at frame %d (the model's frame_stride does not match its output)", got, r.seconds(start), want)
		}
		if err := st.add(lp, lo, hi); err != nil {
			drain(i + 1)
			return nil, 0, err
		}
	}
	lp, err := st.result()
	return lp, st.frames(), err
}

// chunks cuts n samples into the [start, end) of overlapping chunks.
func (r *Recognizer) chunks(n int) [][2]int {
	var out [][2]int
	step := r.chunk - r.overlap
	for start := 0; ; start += step {
		end := min(start+r.chunk, n)
		if end < n && n-(start+step) < 4*r.stride {
			// A tail too short to encode on its own joins this chunk.
			end = n
		}
		out = append(out, [2]int{start, end})
		if end == n {
			return out
		}
	}
}

// chunkResult is one chunk's encoding: log-probs [1, T', V] where the
// pipeline left them, its valid frames, where the time went and how many
// chunks its encoder run held.
type chunkResult struct {
	lp     *runtime.Tensor
	frames int
	stats  runtime.PipelineStats
	items  int
	err    error
}

// add counts a chunk's statistics into the call's.
func (c *call) add(res chunkResult) {
	for _, s := range res.stats.Steps {
		c.stats.Stages[s.Name] += s.Duration
	}
	c.stats.Transfers.Add(res.stats.Transfers)
	c.stats.MaxBatch = max(c.stats.MaxBatch, res.items)
	if res.err == nil {
		c.stats.Chunks++
	}
}

func (r *Recognizer) seconds(samples int) time.Duration {
	return time.Duration(float64(samples) / float64(r.manifest.SampleRate) * float64(time.Second)).Round(time.Millisecond)
}

// encode runs one chunk through a free pipeline, batched with other
// chunks when the recogniser batches.
func (r *Recognizer) encode(ctx context.Context, pcm []float32) chunkResult {
	if r.batch != nil {
		return r.batch.encode(ctx, pcm)
	}
	var p *runtime.Pipeline
	select {
	case p = <-r.free:
	case <-ctx.Done():
		return chunkResult{err: ctx.Err()}
	}
	defer func() { r.free <- p }()
	return r.encodeWith(ctx, p, pcm)
}

// encodeWith runs one chunk through pipeline p.
func (r *Recognizer) encodeWith(ctx context.Context, p *runtime.Pipeline, pcm []float32) chunkResult {
	return r.encodeBatch(ctx, p, [][]float32{pcm})[0]
}

// Transcribe recognises pcm (mono, at the model's sample rate): greedy CTC
// tokens, force-aligned to the emissions, grouped into words.
func (r *Recognizer) Transcribe(ctx context.Context, pcm []float32) (*transcript.Transcript, error) {
	c := r.begin(ctx, pcm)
	defer r.end(c)
	if r.dec != nil {
		return r.decodeOnDevice(ctx, c, pcm, nil, 0)
	}
	lp, _, err := r.hostEmissions(ctx, c, pcm)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	tr, err := transcript.Transcribe(lp, r.manifest.Vocab.Len(), r.words)
	c.stats.Stages["decode"] = time.Since(t0)
	return tr, err
}

// EncoderFallback is why the encoder runs on the CPU although another
// execution provider was configured with Fallback "cpu" (nil when it runs
// where configured).
func (r *Recognizer) EncoderFallback() error {
	if st := r.pipeline.Step("encoder"); st != nil {
		if f, ok := st.Op().(interface{ Fallback() error }); ok {
			return f.Fallback()
		}
	}
	return nil
}
