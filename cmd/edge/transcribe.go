package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"

	"github.com/edgespeech/edge/asr"
	"github.com/edgespeech/edge/asr/transcript"
	"github.com/edgespeech/edge/plugins/vad"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/audio"
	"github.com/edgespeech/edge/runtime/onnx"
)

const (
	transcribeUsage = "[--model DIR] [--format text|json|srt|vtt|ctm|tsv] [--out FILE|DIR/|-] [--strict] [--quiet] [--stats]\n" +
		"       [--raw s16le|f32le --rate HZ [--channels N]] AUDIO... (- reads standard input)\n\n" +
		"AUDIO is any WAV, FLAC, MP3, Ogg Vorbis, Ogg Opus or AIFF file, recognised by content;\n" +
		"other formats (M4A, WebM, ...) need ffmpeg on PATH. --out is a directory when it ends\n" +
		"in /, is one, or several inputs are given (DIR/NAME.FORMAT each); several inputs on\n" +
		"stdout are JSON Lines with a \"file\" field (json) or sections headed \"==> FILE <==\".\n" +
		"Exit status: 0 all inputs transcribed, 1 some failed, 2 usage error."
	alignUsage = "(--text TEXT | --text-file FILE) [--model DIR] [--format ...] [--out FILE] AUDIO"
)

// stdin is what an input named - reads (tests replace it).
var stdin io.Reader = os.Stdin

func init() {
	register(command{name: "transcribe", usage: transcribeUsage,
		summary: "speech to aligned words (fbank -> encoder -> greedy CTC -> forced alignment)", run: runTranscribe})
	register(command{name: "align", usage: alignUsage,
		summary: "force-align a given transcript to audio: words with start/end times", run: runAlign})
}

// asrFlags adds the flags transcribe and align share.
func asrFlags(fs *pflag.FlagSet) {
	fs.String("format", "text", "output format: "+formatNames())
	fs.String("out", "", "output file (one input), directory (ends in /, exists, or several inputs: one file per input) or - (stdout, the default)")
	fs.Float64("chunk-seconds", 10, "longest piece of audio encoded at once; longer audio is chunked with overlap")
	fs.Bool("stats", false, "print where the time went and the bytes copied between host and device (JSON) to stderr")
	modelFlags(fs)
	batchFlags(fs)
	audioFlags(fs)
}

// batchFlags adds the recogniser's encoder batching flags (edge serve has
// its own: serve.max_batch and serve.batch_wait drive the same batcher).
func batchFlags(fs *pflag.FlagSet) {
	fs.Int("batch", 1, "most audio chunks encoded in one encoder run: chunks that reach the encoder together (the chunks of long audio, edge batch's items in flight) share runs; 1 encodes each alone")
	fs.Duration("pad-to", 0, "round every encoder run's audio up to a multiple of this (0: "+asr.DefaultGPUPadTo.String()+" with --execution-provider cuda or tensorrt, none on the CPU; negative: none), so a GPU provider meets few input shapes")
	fs.Duration("batch-wait", asr.DefaultBatchWait, "with --batch > 1, how long a run that is not full waits for more chunks after its first (0: no wait)")
}

// modelFlags adds the flags that say which model runs where.
func modelFlags(fs *pflag.FlagSet) {
	fs.String("model", "", "model directory: a model.yaml, or an export edge detects (default: models/default, beside the binary, or PREFIX/share/edge)")
	fs.Int("threads", 0, "encoder threads (0: one per core)")
	fs.String("precision", "fp32", "encoder precision: fp32 (the model's encoder) or int8 (its model.int8.onnx or encoder.int8_file)")
	fs.String("ort-lib", "", "ONNX Runtime library (default $EDGE_ORT_LIB, then the cache of scripts/fetch-ort.sh)")
	fs.String("config", "", "YAML config file (layered: file < EDGE_* env < flags)")
	fs.String("backend", "cpu", "backend of the frontend and decoding: "+strings.Join(runtime.Backends(), ", ")+
		" (cuda keeps features and emissions on the GPU)")
	fs.String("execution-provider", onnx.ProviderCPU, "ONNX Runtime provider of the encoder: cpu or cuda")
	fs.String("ort-cuda-ep", "", "ONNX Runtime's CUDA plugin EP library, libonnxruntime_providers_cuda.so (default $"+onnx.EnvCUDAEP+")")
	fs.String("cudnn-conv-algo-search", onnx.ConvAlgoHeuristic, "with --execution-provider cuda, how cuDNN's convolution algorithms are chosen: HEURISTIC, EXHAUSTIVE (timed for every new input shape) or DEFAULT")
	fs.Bool("cuda-tf32", true, "with --execution-provider cuda, let fp32 convolutions and GEMMs use TF32 (the provider's default; false: fp32 rounding, log-probs within ~1e-5 of the CPU's, slower)")
	fs.String("ort-profile", "", "file prefix: write ONNX Runtime's per-node profile of the encoder (Chrome trace JSON) to PREFIX_<timestamp>.json on exit")
	fs.String("fallback", "", "cpu: run the encoder on the CPU when the CUDA provider cannot be used (default: fail)")
	fs.String("bind", onnx.BindDevice, "encoder I/O on --backend cuda with --execution-provider cuda: device (zero-copy) or host (round trips, for comparison)")
	fs.Bool("vad", true, "encode only the speech Silero VAD finds (no words on silence; long audio cut at pauses); --vad=false encodes everything in fixed chunks")
	fs.Duration("max-segment", 30*time.Second, "longest speech segment encoded at once; longer speech is split at its longest pause")
	fs.Float64("vad-threshold", 0.5, "speech probability above which a 32 ms window is speech")
}

func formatNames() string {
	var names []string
	for _, f := range transcript.Formats() {
		names = append(names, string(f))
	}
	return strings.Join(names, ", ")
}

// openRecognizer loads the configured model on the configured backend.
func openRecognizer(k *koanf.Koanf) (*asr.Recognizer, error) {
	backend, err := openBackend(k)
	if err != nil {
		return nil, err
	}
	rec, err := openRecognizerOn(k, backend)
	if err != nil {
		_ = backend.Close()
	}
	return rec, err
}

// openRecognizerOn loads the model the modelFlags name on backend, with
// Silero VAD unless --vad=false and encoder batching as the batch and
// batch_wait keys say; tune, when given, adjusts the options last.
func openRecognizerOn(k *koanf.Koanf, backend runtime.Backend, tune ...func(*asr.Options)) (*asr.Recognizer, error) {
	var speech *vad.Options
	if k.Bool("vad") {
		rules := vad.DefaultRules()
		rules.Threshold, rules.MaxSpeech = k.Float64("vad_threshold"), k.Duration("max_segment")
		if err := rules.Validate(); err != nil {
			return nil, fmt.Errorf("--vad-threshold / --max-segment: %v: %w", err, errUsage)
		}
		speech = &vad.Options{Rules: &rules}
	}
	dir, err := modelDir(k.String("model"))
	if err != nil {
		return nil, err
	}
	if b := k.Int("batch"); b < 0 {
		return nil, fmt.Errorf("--batch %d: want >= 1: %w", b, errUsage)
	}
	if w := k.Duration("batch_wait"); w < 0 {
		return nil, fmt.Errorf("--batch-wait %v: want >= 0: %w", w, errUsage)
	}
	opt := asr.Options{
		Batch:          k.Int("batch"),
		BatchWait:      batchWait(k.Duration("batch_wait")),
		PadTo:          k.Duration("pad_to"),
		VAD:            speech,
		ORTLib:         k.String("ort_lib"),
		Threads:        k.Int("threads"),
		Precision:      k.String("precision"),
		ChunkSeconds:   k.Float64("chunk_seconds"),
		Backend:        backend,
		Provider:       k.String("execution_provider"),
		CUDAEP:         k.String("ort_cuda_ep"),
		ConvAlgoSearch: k.String("cudnn_conv_algo_search"),
		NoTF32:         k.Exists("cuda_tf32") && !k.Bool("cuda_tf32"), // absent (a flag set without it): the EP's default
		ORTProfile:     k.String("ort_profile"),
		ConvNC1D:       k.Bool("cudnn_conv1d_nc1d"),
		Fallback:       k.String("fallback"),
		Bind:           k.String("bind"),
	}
	for _, f := range tune {
		f(&opt)
	}
	rec, err := asr.Open(dir, opt)
	if err != nil {
		return nil, err
	}
	if err := rec.BatchDisabled(); err != nil {
		fmt.Fprintf(os.Stderr, "edge: warning: batch %d: %v\n", opt.Batch, err)
	}
	if err := rec.EncoderFallback(); err != nil {
		fmt.Fprintf(os.Stderr, "edge: warning: the encoder runs on the CPU (fallback=cpu): %v\n", err)
	}
	return rec, nil
}

// batchWait is asr.Options.BatchWait for a configured wait: 0 (no wait)
// is asr's negative, as asr's 0 is its default.
func batchWait(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}

// modelDir resolves the model flag: given paths are used as they are; the
// default model is looked for where findDefaultModel says (models.go).
func modelDir(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	return findDefaultModel()
}

// parseFormat reads --format.
func parseFormat(k *koanf.Koanf) (transcript.Format, error) {
	f, err := transcript.ParseFormat(k.String("format"))
	if err != nil {
		return "", fmt.Errorf("%v: %w", err, errUsage)
	}
	return f, nil
}

func runTranscribe(ctx context.Context, args []string) error {
	fs := newFlags("transcribe", transcribeUsage)
	asrFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("need at least one AUDIO file (- for standard input): %w", errUsage)
	}
	k, err := loadConfig(fs, nil)
	if err != nil {
		return err
	}
	format, err := parseFormat(k)
	if err != nil {
		return err
	}
	src, err := newAudioSource(k)
	if err != nil {
		return err
	}
	inputs := fs.Args()
	out, err := planOutput(format, k.String("out"), inputs, os.Stdout, src.log.note)
	if err != nil {
		return err
	}
	rec, err := openRecognizer(k)
	if err != nil {
		return err
	}
	defer rec.Close()
	failed := 0
	for i, path := range inputs {
		if err := ctx.Err(); err != nil {
			return err
		}
		start := time.Now()
		var st asr.Stats
		dst, err := out.open(path)
		if err != nil {
			return err
		}
		tr, dur, err := transcribeOne(asr.WithStats(ctx, &st), rec, src, path, i+1, len(inputs), dst)
		if err == nil {
			err = dst.close(tr)
		}
		if !src.log.quiet || err != nil {
			progress(os.Stderr, i+1, len(inputs), displayName(path), dur, time.Since(start), err)
		}
		if err != nil {
			failed++
			if werr := dst.fail(err); werr != nil {
				return werr
			}
			continue
		}
		if k.Bool("stats") {
			printStats(os.Stderr, displayName(path), st)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d files failed", failed, len(inputs))
	}
	return nil
}

// transcribeOne decodes and recognises one input as it is read, handing
// its words to dst as they become final. Audio too short for the model,
// and audio without samples, give an empty transcript and a warning, not an
// error; so does digitally silent audio (its words, if any, are held back
// until a sample that is not silent arrives) and audio in which nothing is
// recognised (a warning only).
func transcribeOne(ctx context.Context, rec *asr.Recognizer, src *audioSource, path string, i, n int, dst *outStream) (*transcript.Transcript, time.Duration, error) {
	rate := rec.Manifest().SampleRate
	st, err := src.open(path, rate)
	if err != nil {
		return nil, 0, err
	}
	defer st.Close()
	rd := &gatedReader{r: st}
	if !src.log.quiet {
		p := &percent{w: os.Stderr, tty: isTerminal(os.Stderr), prefix: fmt.Sprintf("[%d/%d] %s", i, n, displayName(path))}
		defer p.done()
		ctx = asr.WithProgress(ctx, p.show)
	}
	tr, err := rec.TranscribeReader(ctx, rd, asr.ReaderOptions{Words: rd.gate(dst.words), Discard: dst.streams()})
	dur := time.Duration(float64(rd.n) / float64(rate) * float64(time.Second))
	if errors.Is(err, audio.ErrNoSamples) {
		src.log.warn(path, "the input holds no audio samples; the transcript is empty")
		return &transcript.Transcript{}, 0, nil
	}
	if err != nil && !errors.Is(err, asr.ErrTooShort) {
		return nil, dur, err
	}
	if t := st.Truncated(); t != nil {
		src.log.warn(path, fmt.Sprintf("truncated %s: %s; transcribing what is there (--strict makes this an error)", st.Format(), t))
	}
	if !rd.loud {
		src.log.warn(path, fmt.Sprintf("%v of audio is silent (no sample above one 16-bit step); the transcript is empty", dur.Round(time.Millisecond)))
		return &transcript.Transcript{Duration: dur}, dur, nil
	}
	if err != nil {
		src.log.warn(path, fmt.Sprintf("%v of audio is too short for the model (%v); the transcript is empty", dur.Round(time.Millisecond), err))
		return &transcript.Transcript{Duration: dur}, dur, nil
	}
	if err := rd.release(); err != nil {
		return nil, dur, err
	}
	if rd.words == 0 {
		src.log.warn(path, fmt.Sprintf("no speech recognised in %v of audio (silence?); the transcript is empty", dur.Round(time.Millisecond)))
	}
	return tr, dur, nil
}

// gatedReader counts the samples read through it and notes the first one
// that is not digitally silent; its gate holds words back until then.
type gatedReader struct {
	r     asr.PCMReader
	n     int
	loud  bool
	held  []transcript.Word
	emit  func([]transcript.Word) error
	words int
}

func (g *gatedReader) Read(p []float32) (int, error) {
	n, err := g.r.Read(p)
	g.n += n
	if !g.loud && !silent(p[:n]) {
		g.loud = true
	}
	return n, err
}

// gate wraps emit: words pass once a loud sample was read; before, they
// wait for release.
func (g *gatedReader) gate(emit func([]transcript.Word) error) func([]transcript.Word) error {
	g.emit = emit
	return func(ws []transcript.Word) error {
		g.words += len(ws)
		if !g.loud {
			g.held = append(g.held, ws...)
			return nil
		}
		if err := g.release(); err != nil {
			return err
		}
		return emit(ws)
	}
}

// release hands on the words held back.
func (g *gatedReader) release() error {
	if len(g.held) == 0 {
		return nil
	}
	ws := g.held
	g.held = nil
	return g.emit(ws)
}

// silent reports digital silence: no sample beyond one 16-bit step
// (-90 dBFS), where a model would only hallucinate.
func silent(x []float32) bool {
	for _, v := range x {
		if v > 1.0/32768 || v < -1.0/32768 {
			return false
		}
	}
	return true
}

// percent shows how much of a long input is encoded (the audio is read as
// it is transcribed, so its length is not known before the end): one line
// rewritten in place on a terminal, else a line every 10 minutes of audio.
type percent struct {
	w      io.Writer
	tty    bool
	prefix string
	last   int // tens of minutes shown
	shown  bool
}

func (p *percent) show(done, _ time.Duration) {
	if done < longAudio {
		return
	}
	if p.tty {
		fmt.Fprintf(p.w, "\r\x1b[K%s: %v of audio encoded", p.prefix, done.Round(time.Second))
		p.shown = true
		return
	}
	if m := int(done / (10 * time.Minute)); m > p.last || !p.shown {
		fmt.Fprintf(p.w, "%s: %v of audio encoded\n", p.prefix, done.Round(time.Second))
		p.last, p.shown = m, true
	}
}

func (p *percent) done() {
	if p.tty && p.shown {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

// longAudio is the audio encoded from which transcribe shows progress.
const longAudio = time.Minute

// progress reports one finished file on stderr: "[2/5] a.wav: 12.0 s of
// audio in 0.31 s (38x real time)".
func progress(w io.Writer, i, n int, path string, audio time.Duration, took time.Duration, err error) {
	if err != nil {
		fmt.Fprintf(w, "[%d/%d] %s: FAILED: %v\n", i, n, path, err)
		return
	}
	fmt.Fprintf(w, "[%d/%d] %s: %.1f s of audio in %.2f s (%.0fx real time)\n", i, n, path,
		audio.Seconds(), took.Seconds(), audio.Seconds()/max(took.Seconds(), 1e-9))
}

func printStats(w io.Writer, path string, st asr.Stats) {
	b, _ := json.Marshal(struct {
		File string `json:"file"`
		asr.Stats
	}{path, st})
	fmt.Fprintln(w, string(b))
}

func runAlign(ctx context.Context, args []string) error {
	fs := newFlags("align", alignUsage)
	asrFlags(fs)
	fs.String("text", "", "the transcript to align")
	fs.String("text-file", "", "file holding the transcript to align")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("need one AUDIO file: %w", errUsage)
	}
	k, err := loadConfig(fs, nil)
	if err != nil {
		return err
	}
	text := k.String("text")
	if file := k.String("text_file"); file != "" {
		if text != "" {
			return fmt.Errorf("give --text or --text-file, not both: %w", errUsage)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		text = string(b)
	}
	if strings.TrimSpace(text) == "" {
		return fmt.Errorf("need a transcript: --text or --text-file: %w", errUsage)
	}
	format, err := parseFormat(k)
	if err != nil {
		return err
	}
	src, err := newAudioSource(k)
	if err != nil {
		return err
	}
	path := fs.Arg(0)
	out, err := planOutput(format, k.String("out"), []string{path}, os.Stdout, src.log.note)
	if err != nil {
		return err
	}
	rec, err := openRecognizer(k)
	if err != nil {
		return err
	}
	defer rec.Close()
	clip, err := src.load(path, rec.Manifest().SampleRate)
	if err != nil {
		return err
	}
	var st asr.Stats
	tr, err := rec.Align(asr.WithStats(ctx, &st), clip.Samples, text)
	if err != nil {
		return fmt.Errorf("%s: %w", displayName(path), err)
	}
	if k.Bool("stats") {
		printStats(os.Stderr, displayName(path), st)
	}
	return out.write(path, tr)
}
