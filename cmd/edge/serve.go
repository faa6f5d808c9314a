package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	goruntime "runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"

	"github.com/edgespeech/edge/asr"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/audio"
	"github.com/edgespeech/edge/serve"
)

const serveUsage = "[--model DIR] [--listen 127.0.0.1:8080] [--api-key-file FILE] [--bench 1,4,16,64 --bench-audio FILE]"

func init() {
	register(command{name: "serve", usage: serveUsage,
		summary: "speech service: OpenAI-compatible /v1/audio/transcriptions, /v1/audio/alignments, the /v1/audio/stream WebSocket, /health, /metrics", run: runServe})
}

// serveFlags are the flags of the serve.* config keys: --max-batch sets
// serve.max_batch.
var serveFlags = map[string]bool{}

// serveOptions is a parsed edge serve command line.
type serveOptions struct {
	k   *koanf.Koanf
	cfg serve.Config
	// levels, when set, are the --bench concurrencies.
	levels      []int
	benchAudio  string
	benchFormat string
	benchFor    time.Duration
}

// parseServe parses edge serve's flags and layers its configuration.
func parseServe(args []string) (*serveOptions, error) {
	fs := newFlags("serve", serveUsage)
	modelFlags(fs) // --config's file holds the server keys under serve:
	fs.Float64("chunk-seconds", 10, "longest piece of audio encoded at once; longer audio is chunked with overlap")

	def := serve.DefaultConfig()
	sf := func(name string) string { serveFlags[name] = true; return name }
	fs.String(sf("listen"), def.Listen, "address to listen on (loopback by default; another address serves the network)")
	fs.String(sf("api-key"), "", "require Authorization: Bearer KEY on every route but /health (prefer --api-key-file or $EDGE_SERVE__API_KEY: flags show in ps)")
	fs.String(sf("api-key-file"), "", "file holding the API key")
	fs.Int64(sf("max-upload-bytes"), def.MaxUploadBytes, "largest uploaded file, bytes (413 beyond)")
	fs.Float64(sf("max-audio-seconds"), def.MaxAudioSeconds, "longest audio, seconds (413 beyond)")
	fs.Int64(sf("max-text-bytes"), def.MaxTextBytes, "largest alignment text, bytes")
	fs.Int(sf("queue-size"), def.QueueSize, "requests that may wait beyond those running (429 with Retry-After beyond)")
	fs.Int(sf("max-batch"), def.MaxBatch, "most requests in one batch")
	fs.Duration(sf("batch-wait"), def.BatchWait, "how long a batch that is not full waits for more while another runs, and an encoder run for more chunks after its first")
	fs.Int(sf("encoder-batch"), def.EncoderBatch, "most audio chunks in one encoder run, shared by the requests running at once (0: --max-batch; 1: each encoded alone)")
	fs.Int(sf("parallel"), def.Parallel, "batches running at once")
	fs.Duration(sf("request-timeout"), def.RequestTimeout, "limit on one request, upload to answer (504 beyond)")
	fs.Duration(sf("drain-timeout"), def.DrainTimeout, "on SIGTERM/SIGINT, how long admitted requests may take to finish")
	fs.StringSlice(sf("languages"), nil, "ISO-639 codes the model transcribes (e.g. en); requests for others get 400 (default: the model.yaml language, else any)")
	fs.String(sf("temp-dir"), "", "directory for spooled uploads (default: the system's)")
	ds := def.Streams
	fs.Int(sf("max-streams"), ds.MaxStreams, "open /v1/audio/stream WebSockets at once (429 before the upgrade beyond)")
	fs.Duration(sf("max-stream-duration"), ds.MaxStreamDuration, "longest stream, in audio and in wall time (flushed and closed beyond)")
	fs.Duration(sf("stream-idle-timeout"), ds.StreamIdleTimeout, "a stream sending nothing for this long is flushed and closed")
	fs.Int64(sf("max-frame-bytes"), ds.MaxFrameBytes, "largest stream message, bytes (error and close 1009 beyond)")
	fs.StringSlice(sf("stream-origins"), nil, "Origin host patterns (e.g. *.example.com) whose pages may open streams, besides same-origin ones")

	o := &serveOptions{}
	bench := fs.String("bench", "", "benchmark instead of serving: start on a loopback port, load it with these client concurrencies (e.g. 1,4,16,64; queue_size is raised to the largest), print a table, exit")
	fs.StringVar(&o.benchAudio, "bench-audio", "models/default/testdata/demo.wav", "the file each benchmark request uploads")
	fs.DurationVar(&o.benchFor, "bench-duration", 10*time.Second, "how long each benchmark concurrency runs")
	fs.StringVar(&o.benchFormat, "bench-format", "json", "response_format of the benchmark requests")
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() != 0 {
		return nil, fmt.Errorf("serve takes no arguments: %w", errUsage)
	}
	var err error
	if o.k, err = loadServeConfig(fs); err != nil {
		return nil, err
	}
	o.cfg = serve.DefaultConfig()
	if err := unmarshalServe(o.k, &o.cfg); err != nil {
		return nil, err
	}
	if *bench != "" {
		if o.levels, err = parseLevels(*bench); err != nil {
			return nil, err
		}
		o.cfg.Listen = "127.0.0.1:0"
		o.cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
		// Closed-loop clients: every one has a place in the queue, so the
		// figures are of work done, not of 429s.
		o.cfg.QueueSize = max(o.cfg.QueueSize, o.levels[len(o.levels)-1])
	}
	return o, nil
}

func runServe(ctx context.Context, args []string) error {
	o, err := parseServe(args)
	if err != nil {
		return err
	}
	k, cfg, levels := o.k, o.cfg, o.levels
	if !serve.Loopback(cfg.Listen) && cfg.APIKey == "" && cfg.APIKeyFile == "" {
		fmt.Fprintf(os.Stderr, "edge serve: warning: listening on %s without an API key: anyone who reaches it can use it\n", cfg.Listen)
	}
	srv, err := serve.New(cfg)
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		_ = srv.Shutdown(context.Background())
		return err
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	fmt.Fprintf(os.Stderr, "edge serve: listening on http://%s (loading the model)\n", ln.Addr())

	backend, err := openBackend(k)
	if err != nil {
		_ = srv.Shutdown(context.Background())
		return err
	}
	defer backend.Close()
	// The scheduler's batches of requests run concurrently on the
	// recogniser, whose batcher encodes their chunks together.
	rec, err := openRecognizerOn(k, backend, func(o *asr.Options) {
		o.Batch, o.BatchWait, o.OnEncode = cfg.EncoderBatchSize(), batchWait(cfg.BatchWait), srv.EncoderRun
	})
	if err != nil {
		_ = srv.Shutdown(context.Background())
		return err
	}
	defer rec.Close()
	srv.Ready(rec, backend)
	fmt.Fprintf(os.Stderr, "edge serve: ready: model %s on %s\n", rec.Manifest().Name, backend.Name())

	var benchErr error
	if levels != nil {
		benchErr = runServeBench(ctx, "http://"+ln.Addr().String(), cfg, levels, o.benchAudio, o.benchFormat, o.benchFor, rec.Manifest().SampleRate, backend.Name())
	} else {
		select {
		case <-ctx.Done():
			fmt.Fprintf(os.Stderr, "edge serve: draining (up to %v)\n", cfg.DrainTimeout)
		case err := <-served:
			return err
		}
	}
	stop() // a second signal during the drain kills the process
	if err := srv.Shutdown(context.Background()); err != nil {
		return err
	}
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return benchErr
}

// loadServeConfig layers the configuration with the serve flags under
// serve.: a copy of each serve flag named "serve.<name>" stands in for it.
func loadServeConfig(fs *pflag.FlagSet) (*koanf.Koanf, error) {
	layered := pflag.NewFlagSet("edge serve", pflag.ContinueOnError)
	fs.VisitAll(func(f *pflag.Flag) {
		if strings.HasPrefix(f.Name, "bench") {
			return
		}
		c := *f
		if serveFlags[f.Name] {
			c.Name = "serve." + f.Name
		}
		layered.AddFlag(&c)
	})
	file, _ := fs.GetString("config")
	return runtime.LoadConfig(runtime.ConfigSources{
		File:  file,
		Flags: layered,
		Known: append(append([]string(nil), configKeys...), "serve"),
	})
}

// unmarshalServe decodes the serve.* keys into cfg strictly: an unknown key
// or a value of the wrong kind is an error naming it.
func unmarshalServe(k *koanf.Koanf, cfg *serve.Config) error {
	dc := &mapstructure.DecoderConfig{
		TagName:          "koanf",
		ErrorUnused:      true,
		WeaklyTypedInput: true,
		Result:           cfg,
		DecodeHook: mapstructure.ComposeDecodeHookFunc(
			mapstructure.StringToTimeDurationHookFunc(), mapstructure.StringToSliceHookFunc(",")),
	}
	if err := k.UnmarshalWithConf("serve", cfg, koanf.UnmarshalConf{Tag: "koanf", DecoderConfig: dc}); err != nil {
		return fmt.Errorf("config serve.*: %w", err)
	}
	return nil
}

func parseLevels(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--bench %q: want concurrencies like 1,4,16,64: %w", s, errUsage)
		}
		if len(out) > 0 && n < out[len(out)-1] {
			return nil, fmt.Errorf("--bench %q: list the concurrencies in increasing order: %w", s, errUsage)
		}
		out = append(out, n)
	}
	return out, nil
}

// runServeBench loads the running server at each concurrency and prints a
// table: requests/s, p50/p95 latency and RTFx (audio seconds per wall
// second).
func runServeBench(ctx context.Context, url string, cfg serve.Config, levels []int, file, format string, each time.Duration, rate int, backend string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	pcm, err := audio.Load(file, rate)
	if err != nil {
		return err
	}
	clip := time.Duration(float64(len(pcm)) / float64(rate) * float64(time.Second))
	fmt.Printf("# edge serve --bench: %s (%.2f s), backend %s, max_batch %d, encoder_batch %d, batch_wait %v, parallel %d, queue %d, %v per level, %d cores\n",
		file, clip.Seconds(), backend, cfg.MaxBatch, cfg.EncoderBatchSize(), cfg.BatchWait, cfg.Parallel, cfg.QueueSize, each, goruntime.NumCPU())
	fmt.Printf("%-11s %9s %9s %9s %9s %9s %8s %8s\n", "concurrency", "requests", "req/s", "p50_ms", "p95_ms", "RTFx", "429s", "errors")
	// Warm up: the first requests pay for lazy initialisation.
	if _, err := serve.Bench(ctx, serve.BenchOptions{URL: url, APIKey: cfg.APIKey, File: data, FileName: file, Audio: clip,
		Format: format, Concurrency: levels[0], Duration: min(each, 2*time.Second)}); err != nil {
		return err
	}
	for _, c := range levels {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r, err := serve.Bench(ctx, serve.BenchOptions{URL: url, APIKey: cfg.APIKey, File: data, FileName: file, Audio: clip,
			Format: format, Concurrency: c, Duration: each})
		if err != nil {
			return err
		}
		fmt.Printf("%-11d %9d %9.1f %9.1f %9.1f %9.1f %8d %8d\n", c, r.Requests, r.RPS,
			float64(r.P50.Microseconds())/1e3, float64(r.P95.Microseconds())/1e3, r.RTFx, r.Rejected, r.Errors)
		if r.FirstError != "" {
			fmt.Fprintf(os.Stderr, "edge serve --bench: concurrency %d: first error: %s\n", c, r.FirstError)
		}
	}
	return nil
}
