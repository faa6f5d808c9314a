package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"

	"github.com/edgespeech/edge/asr"
	"github.com/edgespeech/edge/asr/transcript"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/audio"
	"github.com/edgespeech/edge/runtime/onnx"
)

const (
	transcribeUsage = "[--model DIR] [--format text|json|srt|vtt|ctm|tsv] [--out FILE|DIR] [--stats] AUDIO..."
	alignUsage      = "(--text TEXT | --text-file FILE) [--model DIR] [--format ...] [--out FILE] AUDIO"
)

func init() {
	register(command{name: "transcribe", usage: transcribeUsage,
		summary: "speech to aligned words (fbank -> encoder -> greedy CTC -> forced alignment)", run: runTranscribe})
	register(command{name: "align", usage: alignUsage,
		summary: "force-align a given transcript to audio: words with start/end times", run: runAlign})
}

// asrFlags adds the flags transcribe and align share.
func asrFlags(fs *pflag.FlagSet) {
	fs.String("model", "", "model directory: a model.yaml, or an export edge detects (default: models/default, beside the binary, or PREFIX/share/edge)")
	fs.String("format", "text", "output format: "+formatNames())
	fs.String("out", "", "output file (one input) or directory (one file per input); default stdout")
	fs.Int("threads", 0, "encoder threads (0: one per core)")
	fs.String("ort-lib", "", "ONNX Runtime library (default $EDGE_ORT_LIB, then the cache of scripts/fetch-ort.sh)")
	fs.Float64("chunk-seconds", 30, "longest piece of audio encoded at once; longer audio is chunked with overlap")
	fs.Bool("stats", false, "print where the time went and the bytes copied between host and device (JSON) to stderr")
	fs.String("config", "", "YAML config file (layered: file < EDGE_* env < flags)")
	fs.String("backend", "cpu", "backend of the frontend and decoding: "+strings.Join(runtime.Backends(), ", ")+
		" (cuda keeps features and emissions on the GPU)")
	fs.String("execution-provider", onnx.ProviderCPU, "ONNX Runtime provider of the encoder: cpu or cuda")
	fs.String("ort-cuda-ep", "", "ONNX Runtime's CUDA plugin EP library, libonnxruntime_providers_cuda.so (default $"+onnx.EnvCUDAEP+")")
	fs.String("fallback", "", "cpu: run the encoder on the CPU when the CUDA provider cannot be used (default: fail)")
	fs.String("bind", onnx.BindDevice, "encoder I/O on --backend cuda with --execution-provider cuda: device (zero-copy) or host (round trips, for comparison)")
}

func formatNames() string {
	var names []string
	for _, f := range transcript.Formats() {
		names = append(names, string(f))
	}
	return strings.Join(names, ", ")
}

// openRecognizer resolves where the output of inputs files goes and loads
// the configured model.
func openRecognizer(k *koanf.Koanf, inputs int) (*asr.Recognizer, output, error) {
	out, err := parseOutput(k, inputs)
	if err != nil {
		return nil, out, err
	}
	backend, err := openBackend(k)
	if err != nil {
		return nil, out, err
	}
	dir, err := modelDir(k.String("model"))
	if err != nil {
		_ = backend.Close()
		return nil, out, err
	}
	rec, err := asr.Open(dir, asr.Options{
		ORTLib:       k.String("ort_lib"),
		Threads:      k.Int("threads"),
		ChunkSeconds: k.Float64("chunk_seconds"),
		Backend:      backend,
		Provider:     k.String("execution_provider"),
		CUDAEP:       k.String("ort_cuda_ep"),
		Fallback:     k.String("fallback"),
		Bind:         k.String("bind"),
	})
	if err != nil {
		_ = backend.Close()
		return nil, out, err
	}
	if err := rec.EncoderFallback(); err != nil {
		fmt.Fprintf(os.Stderr, "edge: warning: the encoder runs on the CPU (fallback=cpu): %v\n", err)
	}
	return rec, out, nil
}

// modelDir resolves the model flag: given paths are used as they are; the
// default model is looked for where findDefaultModel says (models.go).
func modelDir(flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	return findDefaultModel()
}

// output says where one input's transcript goes.
type output struct {
	format transcript.Format
	out    string // "" = stdout
	many   bool   // several inputs: out is a directory
}

func (o output) write(input string, tr *transcript.Transcript) error {
	opt := transcript.WriteOptions{Utterance: strings.TrimSuffix(filepath.Base(input), filepath.Ext(input))}
	if o.out == "" {
		return transcript.Write(os.Stdout, tr, o.format, opt)
	}
	path := o.out
	if o.many {
		path = filepath.Join(o.out, opt.Utterance+"."+string(o.format))
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := transcript.Write(f, tr, o.format, opt); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func parseOutput(k *koanf.Koanf, inputs int) (output, error) {
	f, err := transcript.ParseFormat(k.String("format"))
	if err != nil {
		return output{}, fmt.Errorf("%v: %w", err, errUsage)
	}
	o := output{format: f, out: k.String("out")}
	if o.out != "" {
		st, err := os.Stat(o.out)
		o.many = inputs > 1 || (err == nil && st.IsDir())
		if o.many {
			if err := os.MkdirAll(o.out, 0o755); err != nil {
				return o, err
			}
		}
	}
	return o, nil
}

func runTranscribe(ctx context.Context, args []string) error {
	fs := newFlags("transcribe", transcribeUsage)
	asrFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("need at least one AUDIO file: %w", errUsage)
	}
	k, err := loadConfig(fs, nil)
	if err != nil {
		return err
	}
	rec, out, err := openRecognizer(k, fs.NArg())
	if err != nil {
		return err
	}
	defer rec.Close()
	failed := 0
	for i, path := range fs.Args() {
		if err := ctx.Err(); err != nil {
			return err
		}
		start := time.Now()
		var st asr.Stats
		err := transcribeOne(asr.WithStats(ctx, &st), rec, path, out)
		progress(os.Stderr, i+1, fs.NArg(), path, st, time.Since(start), err)
		if err != nil {
			failed++
			continue
		}
		if k.Bool("stats") {
			printStats(os.Stderr, path, st)
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d files failed", failed, fs.NArg())
	}
	return nil
}

func transcribeOne(ctx context.Context, rec *asr.Recognizer, path string, out output) error {
	pcm, err := audio.Load(path, rec.Manifest().SampleRate)
	if err != nil {
		return err
	}
	tr, err := rec.Transcribe(ctx, pcm)
	if err != nil {
		return err
	}
	return out.write(path, tr)
}

// progress reports one finished file on stderr: "[2/5] a.wav: 12.0 s of
// audio in 0.31 s (38x real time)".
func progress(w io.Writer, i, n int, path string, st asr.Stats, took time.Duration, err error) {
	if err != nil {
		fmt.Fprintf(w, "[%d/%d] %s: FAILED: %v\n", i, n, path, err)
		return
	}
	fmt.Fprintf(w, "[%d/%d] %s: %.1f s of audio in %.2f s (%.0fx real time)\n", i, n, path,
		st.Audio.Seconds(), took.Seconds(), st.Audio.Seconds()/max(took.Seconds(), 1e-9))
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
	rec, out, err := openRecognizer(k, 1)
	if err != nil {
		return err
	}
	defer rec.Close()
	path := fs.Arg(0)
	pcm, err := audio.Load(path, rec.Manifest().SampleRate)
	if err != nil {
		return err
	}
	var st asr.Stats
	tr, err := rec.Align(asr.WithStats(ctx, &st), pcm, text)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if k.Bool("stats") {
		printStats(os.Stderr, path, st)
	}
	return out.write(path, tr)
}
