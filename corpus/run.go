package corpus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/edgespeech/edge/asr/transcript"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/model"
	"github.com/edgespeech/edge/runtime/npy"
)

// Mode is what a batch does to each item.
type Mode string

const (
	// Transcribe writes pred_text and the words' alignment.
	Transcribe Mode = "transcribe"
	// Align force-aligns the item's text and writes the words' alignment.
	Align Mode = "align"
	// Tokenize writes the model's frame-level CTC token ids (the argmax of
	// each emission frame, blank included: i32 [T'] .npy) and, with
	// Config.Emissions, the log-probs (f32 [T', V] .npy); with
	// Config.Codec, the neural-codec codes instead (i32 [Q, T] .npy).
	Tokenize Mode = "tokenize"
)

// ParseMode checks a mode name.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(s); m {
	case Transcribe, Align, Tokenize:
		return m, nil
	}
	return "", fmt.Errorf("mode %q: want transcribe, align or tokenize", s)
}

// Recognizer is what a batch needs of *asr.Recognizer. Its methods must be
// safe for concurrent use.
type Recognizer interface {
	Transcribe(ctx context.Context, pcm []float32) (*transcript.Transcript, error)
	Align(ctx context.Context, pcm []float32, text string) (*transcript.Transcript, error)
	Emissions(ctx context.Context, pcm []float32) ([]float32, int, error)
	Manifest() *model.Manifest
}

// Codec is what a codec-token batch needs of *codec.Codec. Its methods
// must be safe for concurrent use.
type Codec interface {
	// Encode returns the codes of one mono clip at SampleRate, row-major
	// [stages, T], and T.
	Encode(ctx context.Context, pcm []float32, stages int) ([]int32, int, error)
	SampleRate() int
	Family() string
}

// CodecModel is the model name a codec-token batch records for a codec of
// family with the given number of codebooks (Verify takes it).
func CodecModel(family string, codebooks int) string {
	return fmt.Sprintf("%s codec, %d codebooks", family, codebooks)
}

// encodeCapacity is a Recognizer that says how many chunks it encodes at
// once (several pipelines, several chunks per encoder run).
type encodeCapacity interface{ EncodeCapacity() int }

// Config configures Run and Verify.
type Config struct {
	Mode Mode
	// Out is the output directory (created when missing).
	Out   string
	Shard Shard
	// Jobs is how many items are in flight on the recogniser at once
	// (default 2), at least the recogniser's EncodeCapacity when it has
	// one (its pipelines times its batch size).
	// Each runs its own Transcribe/Align/Emissions call; the calls overlap
	// in different pipeline stages, and a batching recogniser
	// (asr.Options.Batch) encodes their chunks in shared encoder runs.
	Jobs int
	// Format of the words' alignment file (default JSON).
	Format transcript.Format
	// Emissions makes Tokenize write the log-probs too.
	Emissions bool
	// Codec makes Tokenize write codec codes (i32 [Codebooks, T] .npy per
	// item, at the codec's SampleRate) instead of CTC tokens; the
	// recogniser is then unused and may be nil. Codebooks, at least 1, is
	// the number of RVQ stages kept.
	Codec     Codec
	Codebooks int
	// RetryFailed reprocesses items whose record is a failure; by default a
	// rerun keeps them (bad input fails again).
	RetryFailed bool
	// Progress receives progress reports (nil: none): a redrawn bar when
	// ProgressTTY, else a JSON line every ProgressEvery (default 10 s) and
	// one at the end.
	Progress      io.Writer
	ProgressTTY   bool
	ProgressEvery time.Duration
	// Events, when set, receives one JSON line per item as it finishes:
	// {"key", "line", "status": "ok"|"error"|"skipped"}.
	Events io.Writer

	model string
	cache *pcmCache
}

// Summary is what a Run did.
type Summary struct {
	Items     int           `json:"items"`   // in the shard
	Done      int           `json:"done"`    // processed now, successfully
	Failed    int           `json:"failed"`  // processed now, recorded as errors
	Skipped   int           `json:"skipped"` // complete from an earlier run
	Audio     time.Duration `json:"audio_ns"`
	Wall      time.Duration `json:"wall_ns"`
	Manifest  string        `json:"manifest"` // the shard's output manifest
	FailedOld int           `json:"failed_earlier"`
}

// ShardItems returns the items of the configured shard, in manifest order.
func (c *Config) ShardItems(items []Item) []*Item {
	var out []*Item
	for i := range items {
		if c.Shard.Has(&items[i]) {
			out = append(out, &items[i])
		}
	}
	return out
}

func (c *Config) defaults(rec Recognizer) error {
	if _, err := ParseMode(string(c.Mode)); err != nil {
		return err
	}
	if err := c.Shard.Validate(); err != nil {
		return err
	}
	if c.Out == "" {
		return errors.New("no output directory")
	}
	if c.Jobs <= 0 {
		c.Jobs = 2
	}
	if c.Codec != nil && (c.Mode != Tokenize || c.Codebooks < 1) {
		return fmt.Errorf("a codec tokenises (mode %s) with at least one codebook (%d)", Tokenize, c.Codebooks)
	}
	if b, ok := rec.(encodeCapacity); ok {
		c.Jobs = max(c.Jobs, b.EncodeCapacity())
	}
	if c.Format == "" {
		c.Format = transcript.JSON
	}
	if c.ProgressEvery <= 0 {
		c.ProgressEvery = 10 * time.Second
	}
	switch {
	case c.Codec != nil:
		c.model = CodecModel(c.Codec.Family(), c.Codebooks)
	case rec != nil:
		c.model = rec.Manifest().Name
	}
	c.cache = newPCMCache(c.Jobs + 1)
	return nil
}

// Run processes the shard's items of items on rec: items with a complete
// record are skipped, the others processed with Jobs in flight, each result
// written atomically and then its record (the record last, so a record
// means its files are whole). A failing item is recorded with its error and
// the shard goes on. When every item has a record, the shard's output
// manifest is written. Run returns an error only when it cannot go on: the
// output directory is not writable, or ctx ended (then without the shard
// manifest; a rerun finishes).
func Run(ctx context.Context, rec Recognizer, items []Item, cfg Config) (Summary, error) {
	if err := cfg.defaults(rec); err != nil {
		return Summary{}, err
	}
	if rec == nil && cfg.Codec == nil {
		return Summary{}, errors.New("no recogniser and no codec")
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return Summary{}, err
	}
	start := time.Now()
	mine := cfg.ShardItems(items)
	sum := Summary{Items: len(mine)}
	prog := newProgress(&cfg, mine)
	defer prog.stop()

	var mu sync.Mutex // guards sum, Events
	event := func(it *Item, status string, audio time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		switch status {
		case StatusOK:
			sum.Done++
		case StatusError:
			sum.Failed++
		case "skipped":
			sum.Skipped++
		case "skipped-failed":
			sum.Skipped++
			sum.FailedOld++
			status = "skipped"
		}
		sum.Audio += audio
		if cfg.Events != nil {
			b, _ := json.Marshal(map[string]any{"key": it.Key, "line": it.Line, "status": status})
			_, _ = cfg.Events.Write(append(b, '\n'))
		}
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan *Item)
	var fatal error
	var fatalOnce sync.Once
	var wg sync.WaitGroup
	for range min(cfg.Jobs, max(len(mine), 1)) {
		wg.Go(func() {
			for it := range work {
				// Resume: a complete record (checked) is kept.
				if st, _ := cfg.check(it); st == done || (st == failed && !cfg.RetryFailed) {
					prog.skip(it)
					if st == failed {
						event(it, "skipped-failed", 0)
					} else {
						event(it, "skipped", 0)
					}
					continue
				}
				audio, status, err := cfg.process(ctx, rec, it)
				if err != nil {
					if ctx.Err() == nil {
						fatalOnce.Do(func() { fatal = err; cancel() })
					}
					continue
				}
				prog.done(it, audio, status == StatusError)
				event(it, status, audio)
			}
		})
	}
feed:
	for _, it := range mine {
		select {
		case work <- it:
		case <-ctx.Done():
			break feed
		}
	}
	close(work)
	wg.Wait()
	sum.Wall = time.Since(start)
	if fatal != nil {
		return sum, fatal
	}
	if err := ctx.Err(); err != nil {
		return sum, err
	}
	m, err := cfg.writeShardManifest(mine)
	sum.Manifest = m
	return sum, err
}

// process runs one item and writes its files and record. The error is
// for failures to write (the shard cannot go on) and ctx ending; the
// item's own failures are recorded (status "error").
func (c *Config) process(ctx context.Context, rec Recognizer, it *Item) (time.Duration, string, error) {
	meta := Meta{Key: it.Key, Line: it.Line, Mode: c.Mode, Model: c.model}
	extra, audio, err := c.compute(ctx, rec, it, &meta)
	if ctx.Err() != nil {
		return 0, "", ctx.Err() // not the item's fault: leave it for the rerun
	}
	var wf *writeFailure
	if errors.As(err, &wf) {
		return 0, "", wf.err
	}
	status := StatusOK
	if err != nil {
		status = StatusError
		meta.Files = nil
		extra = map[string]any{"error": err.Error()}
	}
	extra["status"] = status
	if audio > 0 {
		extra["duration"] = math.Round(audio.Seconds()*1000) / 1000
	}
	b, err := recordJSON(it, extra, meta)
	if err != nil {
		return 0, "", err
	}
	if _, err := writeAtomic(c.Out, c.recordPath(it), func(w io.Writer) error { _, err := w.Write(b); return err }); err != nil {
		return 0, "", err
	}
	return audio, status, nil
}

// writeFailure marks an error writing outputs, which stops the shard.
type writeFailure struct{ err error }

func (w *writeFailure) Error() string { return w.err.Error() }

// compute loads the item's audio, runs the mode and writes its data files,
// listing them in meta.
func (c *Config) compute(ctx context.Context, rec Recognizer, it *Item, meta *Meta) (map[string]any, time.Duration, error) {
	if it.Err != nil {
		return nil, 0, it.Err
	}
	if c.Mode == Align && it.Text == "" {
		return nil, 0, fmt.Errorf("line %d: field \"text\" is missing or empty: align needs the transcript", it.Line)
	}
	var rate int
	if c.Codec != nil {
		rate = c.Codec.SampleRate()
	} else {
		rate = rec.Manifest().SampleRate
	}
	pcm, err := c.loadSegment(it, rate)
	if err != nil {
		return nil, 0, err
	}
	audio := time.Duration(float64(len(pcm)) / float64(rate) * float64(time.Second))
	extra := map[string]any{}
	write := func(what string, fill func(io.Writer) error) (string, error) {
		fs, err := writeAtomic(c.Out, c.dataPath(it, what), fill)
		if err != nil {
			return "", &writeFailure{err}
		}
		meta.Files = append(meta.Files, fs)
		return fs.Path, nil
	}
	var tr *transcript.Transcript
	switch {
	case c.Codec != nil:
		codes, T, err := c.Codec.Encode(ctx, pcm, c.Codebooks)
		if err != nil {
			return nil, audio, fmt.Errorf("line %d: %s: %w", it.Line, it.Audio, err)
		}
		t := runtime.Must(runtime.FromSlice(runtime.I32, runtime.Shape{c.Codebooks, T}, codes))
		p, err := write("codes.npy", func(w io.Writer) error { return npy.Write(w, t) })
		if err != nil {
			return nil, 0, err
		}
		extra["codes_filepath"] = p
		extra["num_frames"] = T
		extra["num_codebooks"] = c.Codebooks
		return extra, audio, nil
	}
	switch c.Mode {
	case Transcribe:
		tr, err = rec.Transcribe(ctx, pcm)
		if err == nil {
			extra["pred_text"] = tr.Text
		}
	case Align:
		tr, err = rec.Align(ctx, pcm, it.Text)
	case Tokenize:
		var lp []float32
		var T int
		lp, T, err = rec.Emissions(ctx, pcm)
		if err != nil {
			break
		}
		V := rec.Manifest().Vocab.Len()
		ids := make([]int32, T)
		for t := range T {
			row, best := lp[t*V:(t+1)*V], 0
			for v, x := range row {
				if x > row[best] {
					best = v
				}
			}
			ids[t] = int32(best)
		}
		tok := runtime.Must(runtime.FromSlice(runtime.I32, runtime.Shape{T}, ids))
		p, err := write("tokens.npy", func(w io.Writer) error { return npy.Write(w, tok) })
		if err != nil {
			return nil, 0, err
		}
		extra["token_filepath"] = p
		extra["num_frames"] = T
		if c.Emissions {
			em := runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{T, V}, lp[:T*V]))
			p, err := write("emissions.npy", func(w io.Writer) error { return npy.Write(w, em) })
			if err != nil {
				return nil, 0, err
			}
			extra["emissions_filepath"] = p
		}
		return extra, audio, nil
	}
	if err != nil {
		return nil, audio, fmt.Errorf("line %d: %s: %w", it.Line, it.Audio, err)
	}
	p, err := write("words."+string(c.Format), func(w io.Writer) error {
		return transcript.Write(w, tr, c.Format, transcript.WriteOptions{Utterance: it.Key})
	})
	if err != nil {
		return nil, 0, err
	}
	extra["alignment_filepath"] = p
	extra["num_words"] = len(tr.Words)
	return extra, audio, nil
}

// loadSegment decodes the item's audio at rate (through the cache of
// recently decoded files) and cuts [Offset,
// Offset+Duration). A segment reaching past the end by more than 50 ms is
// an error (the manifest and the file disagree).
func (c *Config) loadSegment(it *Item, rate int) ([]float32, error) {
	pcm, err := c.cache.load(it.Audio, rate)
	if err != nil {
		return nil, fmt.Errorf("line %d: field \"audio_filepath\": %w", it.Line, err)
	}
	total := float64(len(pcm)) / float64(rate)
	lo := int(math.Round(it.Offset * float64(rate)))
	hi := len(pcm)
	if it.Duration > 0 {
		hi = lo + int(math.Round(it.Duration*float64(rate)))
	}
	if lo >= len(pcm) || it.Offset+it.Duration > total+0.05 {
		return nil, fmt.Errorf("line %d: offset %gs + duration %gs reaches past the end of %s (%.3fs)", it.Line, it.Offset, it.Duration, filepath.Base(it.Audio), total)
	}
	// A copy: the cached samples are shared, the callee may scale its input in place.
	return append([]float32(nil), pcm[lo:min(hi, len(pcm))]...), nil
}

// Problem is one item that --verify found missing or corrupt.
type Problem struct {
	Key   string `json:"key"`
	Line  int    `json:"line"`
	State string `json:"state"` // missing | corrupt
	Error string `json:"error,omitempty"`
}

// Report is the result of Verify.
type Report struct {
	Items    int       `json:"items"`
	OK       int       `json:"ok"`
	Failed   int       `json:"failed"` // complete records of item errors
	Problems []Problem `json:"problems"`
	// Manifest is "" when the shard's output manifest is there and lists
	// every item, else why not.
	Manifest string `json:"manifest_problem,omitempty"`
}

// Verify checks the outputs of the shard's items without processing any:
// every record parses, belongs to its item, mode and model, and every file
// it lists has the recorded size and SHA-256. model is the model's name as
// its manifest gives it (what records carry).
func Verify(items []Item, cfg Config, model string) (Report, error) {
	if err := cfg.defaults(nil); err != nil {
		return Report{}, err
	}
	cfg.model = model
	mine := cfg.ShardItems(items)
	rep := Report{Items: len(mine), Problems: []Problem{}}
	for _, it := range mine {
		st, err := cfg.check(it)
		switch st {
		case done:
			rep.OK++
		case failed:
			rep.Failed++
		default:
			p := Problem{Key: it.Key, Line: it.Line, State: st.String()}
			if err != nil {
				p.Error = err.Error()
			}
			rep.Problems = append(rep.Problems, p)
		}
	}
	b, err := os.ReadFile(filepath.Join(cfg.Out, cfg.shardManifest()))
	switch {
	case err != nil:
		rep.Manifest = err.Error()
	case countLines(b) != len(mine):
		rep.Manifest = fmt.Sprintf("%s lists %d items; the shard has %d", cfg.shardManifest(), countLines(b), len(mine))
	}
	return rep, nil
}

func countLines(b []byte) int {
	n := 0
	for _, c := range b {
		if c == '\n' {
			n++
		}
	}
	return n
}
