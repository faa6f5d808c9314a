package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"time"

	"github.com/edgespeech/edge/corpus"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/model"
)

const batchUsage = "transcribe|align|tokenize --manifest IN.jsonl[.gz] --out DIR [--shard-index I --num-shards N] [--jobs N] [--verify] [--retry-failed] [--emissions] [--codec DIR [--bandwidth KBPS | --codebooks N]] [--format json|ctm|...] [--progress auto|bar|json|none]"

func init() {
	register(command{name: "batch", usage: batchUsage,
		summary: "a manifest's items, one shard of them, transcribed/aligned/tokenised; resumable", run: runBatch})
}

// batchKeys are the config keys batch adds to configKeys.
var batchKeys = []string{"manifest", "shard_index", "num_shards", "jobs", "verify", "retry_failed", "emissions", "progress_every",
	"codec", "bandwidth", "codebooks"}

func runBatch(ctx context.Context, args []string) error {
	fs := newFlags("batch", batchUsage)
	asrFlags(fs)
	f := fs.Lookup("format")
	f.DefValue, f.Usage = "json", "format of the word alignment files: "+formatNames()
	_ = f.Value.Set("json")
	fs.Lookup("out").Usage = "output directory (shared by all shards; each writes only its own files)"
	fs.String("manifest", "", "NeMo JSON Lines manifest (audio_filepath, text, duration, offset) or lhotse cuts (.jsonl[.gz])")
	fs.Int("shard-index", -1, "this worker's shard (default $JOB_COMPLETION_INDEX, $SLURM_ARRAY_TASK_ID - $SLURM_ARRAY_TASK_MIN, else 0)")
	fs.Int("num-shards", -1, "number of shards (default $SLURM_ARRAY_TASK_COUNT, else 1); items go to shards by a stable hash of the item")
	fs.Int("jobs", 2, "items in flight on the recogniser at once (at least --batch times its encoder sessions, so their chunks fill the encoder runs)")
	fs.Bool("verify", false, "process nothing: report the shard's missing or corrupt outputs (JSON on stdout; exit 1 if any)")
	fs.Bool("retry-failed", false, "reprocess items recorded as failed (default: keep their error records)")
	fs.Bool("emissions", false, "tokenize: also write the log-probs [T', V] as .npy")
	fs.String("codec", "", "tokenize: neural-codec codes [Q, T] (.npy) from this codec directory instead of CTC tokens (as edge tokenize; --backend and --execution-provider place its quantizer and graphs, in fp32 unless --cuda-tf32 is given)")
	fs.Float64("bandwidth", 0, "with --codec: target bandwidth in kbps, one of the codec's target_bandwidths")
	fs.Int("codebooks", 0, "with --codec: number of codebooks to keep (0: all, or what --bandwidth gives)")
	fs.String("progress", "auto", "auto (a bar on a terminal, else JSON lines), bar, json or none; on stderr")
	fs.Duration("progress-every", 10*time.Second, "interval of JSON progress lines")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("need one mode: transcribe, align or tokenize: %w", errUsage)
	}
	mode, err := corpus.ParseMode(fs.Arg(0))
	if err != nil {
		return fmt.Errorf("%v: %w", err, errUsage)
	}
	file, _ := fs.GetString("config")
	k, err := runtime.LoadConfig(runtime.ConfigSources{File: file, Flags: fs,
		Known: append(append([]string(nil), configKeys...), batchKeys...)})
	if err != nil {
		return err
	}
	if k.String("manifest") == "" || k.String("out") == "" {
		return fmt.Errorf("need --manifest and --out: %w", errUsage)
	}
	shard, err := corpus.ShardFromEnv(k.Int("shard_index"), k.Int("num_shards"), nil)
	if err != nil {
		return err
	}
	items, err := corpus.ReadManifest(k.String("manifest"))
	if err != nil {
		return err
	}
	cfg := corpus.Config{Mode: mode, Out: k.String("out"), Shard: shard, Jobs: k.Int("jobs"),
		Emissions: k.Bool("emissions"), RetryFailed: k.Bool("retry_failed"), ProgressEvery: k.Duration("progress_every")}
	if dir := k.String("codec"); dir != "" {
		if mode != corpus.Tokenize || cfg.Emissions {
			return fmt.Errorf("--codec goes with batch tokenize, without --emissions: %w", errUsage)
		}
		c, done, err := openCodec(fs, dir)
		if err != nil {
			return err
		}
		defer done()
		if cfg.Codebooks, err = codecStages(c, k.Float64("bandwidth"), k.Int("codebooks")); err != nil {
			return err
		}
		cfg.Codec = c
	}
	if k.Bool("verify") {
		name, err := batchModelName(cfg, k.String("model"))
		if err != nil {
			return err
		}
		rep, err := corpus.Verify(items, cfg, name)
		if err != nil {
			return err
		}
		b, _ := json.MarshalIndent(rep, "", "  ")
		fmt.Println(string(b))
		if len(rep.Problems) > 0 || rep.Manifest != "" {
			return fmt.Errorf("%s: %d of %d items missing or corrupt", shard, len(rep.Problems), rep.Items)
		}
		return nil
	}
	switch p := k.String("progress"); p {
	case "auto":
		cfg.Progress = os.Stderr
		if st, err := os.Stderr.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
			cfg.ProgressTTY = true
		}
	case "bar", "json":
		cfg.Progress, cfg.ProgressTTY = os.Stderr, p == "bar"
	case "none":
	default:
		return fmt.Errorf("--progress %q: want auto, bar, json or none: %w", p, errUsage)
	}
	if cfg.Format, err = parseFormat(k); err != nil {
		return err
	}
	var rec corpus.Recognizer
	if cfg.Codec == nil {
		r, err := openRecognizer(k)
		if err != nil {
			return err
		}
		defer r.Close()
		rec = r
	}
	sum, err := corpus.Run(ctx, rec, items, cfg)
	b, _ := json.Marshal(sum)
	fmt.Fprintln(os.Stderr, string(b))
	if err != nil {
		return err
	}
	if sum.Failed+sum.FailedOld > 0 {
		fmt.Fprintf(os.Stderr, "edge batch: %s: %d of %d items failed (recorded in %s)\n", shard, sum.Failed+sum.FailedOld, sum.Items, sum.Manifest)
	}
	return nil
}

// batchModelName is the model name the shard's records hold: the codec's
// for codec tokens, else the --model directory's manifest name.
func batchModelName(cfg corpus.Config, modelFlag string) (string, error) {
	if cfg.Codec != nil {
		return corpus.CodecModel(cfg.Codec.Family(), cfg.Codebooks), nil
	}
	dir, err := modelDir(modelFlag)
	if err != nil {
		return "", err
	}
	m, err := model.Load(dir)
	if err != nil {
		return "", err
	}
	return m.Name, nil
}
