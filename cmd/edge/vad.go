package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/edgespeech/edge/plugins/vad"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/audio"
	"github.com/edgespeech/edge/runtime/npy"
)

const vadUsage = "[--format text|json|rttm|audacity] [--set KEY=VALUE ...] [--out FILE|DIR] AUDIO..."

func init() {
	register(command{name: "vad", usage: vadUsage,
		summary: "speech segments of audio files (Silero VAD v5): text, JSON, RTTM or Audacity labels", run: runVAD})
}

// vadFormats are the output formats of edge vad and the file suffix of each
// with --out DIR.
var vadFormats = map[string]string{"text": ".vad.txt", "json": ".vad.json", "rttm": ".rttm", "audacity": ".labels.txt"}

// runVAD prints the speech segments of each AUDIO file. A WAV file is
// decoded, downmixed and resampled to 16 kHz (an 8 kHz file stays at 8 kHz
// unless sample_rate is set); an .npy file holds f32 samples at sample_rate
// (default 16000). The rules are the vad op's parameters (--set, or
// ops.vad.* in the config), Silero's defaults unless set.
func runVAD(ctx context.Context, args []string) error {
	fs := newFlags("vad", vadUsage)
	fs.String("format", "text", "output format: text (start and end seconds a line), json, rttm, audacity (label track)")
	sets := fs.StringArray("set", nil, "vad op parameter as KEY=VALUE (repeatable): threshold, min_speech_ms, min_silence_ms, speech_pad_ms, max_speech_s, model, ...; see 'edge ops'")
	fs.String("out", "", "output file (one input) or directory (one file per input); default stdout")
	fs.Int("threads", 1, "ONNX Runtime threads of the VAD")
	fs.String("ort-lib", "", "ONNX Runtime library (default $EDGE_ORT_LIB, then the cache of scripts/fetch-ort.sh)")
	fs.Bool("stats", false, "print the audio length, speech time and time taken per file (JSON) to stderr")
	fs.String("config", "", "YAML config file (ops.vad.* are the op's parameters; layered: file < EDGE_* env < flags)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return fmt.Errorf("need at least one AUDIO file: %w", errUsage)
	}
	k, err := loadConfig(fs, map[string]any{"format": "text", "threads": 1})
	if err != nil {
		return err
	}
	format := k.String("format")
	suffix, ok := vadFormats[format]
	if !ok {
		return fmt.Errorf("unknown --format %q (want text, json, rttm or audacity): %w", format, errUsage)
	}
	params, err := opParams(k, vad.OpName, *sets)
	if err != nil {
		return err
	}
	for _, key := range []string{"threads", "ort_lib"} {
		if _, given := params[key]; !given && k.Exists(key) && k.String(key) != "" {
			params[key] = k.Get(key)
		}
	}
	spec, err := runtime.Lookup(vad.OpName)
	if err != nil {
		return err
	}
	p, err := runtime.ResolveParams(vad.OpName, spec.Params, params)
	if err != nil {
		return err
	}
	rules, err := vad.RulesFromParams(p)
	if err != nil {
		return err
	}
	d, err := vad.Open(vad.Options{Model: p.Str("model"), Library: p.Str("ort_lib"), Threads: p.Int("threads"), Rules: &rules})
	if err != nil {
		return err
	}
	defer d.Close()
	rate := 0 // WAV files: 16 kHz, or 8 kHz as they are
	if p.IsSet("sample_rate") {
		rate = p.Int("sample_rate")
	}

	out := k.String("out")
	many := fs.NArg() > 1
	if out != "" {
		st, err := os.Stat(out)
		if many || (err == nil && st.IsDir()) {
			many = true
			if err := os.MkdirAll(out, 0o755); err != nil {
				return err
			}
		}
	}
	failed := 0
	for i, path := range fs.Args() {
		if err := ctx.Err(); err != nil {
			return err
		}
		start := time.Now()
		res, n, err := vadOne(ctx, d, path, rate)
		if err == nil {
			err = writeVAD(out, many, suffix, path, format, res, n, fs.NArg() > 1)
		}
		took := time.Since(start)
		if err != nil {
			failed++
			fmt.Fprintf(os.Stderr, "[%d/%d] %s: FAILED: %v\n", i+1, fs.NArg(), path, err)
			continue
		}
		audioDur := time.Duration(int64(n) * int64(time.Second) / int64(res.SampleRate))
		var speech time.Duration
		for _, s := range res.Segments {
			speech += s.End - s.Start
		}
		if fs.NArg() > 1 {
			fmt.Fprintf(os.Stderr, "[%d/%d] %s: %d segments, %.1f of %.1f s speech (%.0fx real time)\n", i+1, fs.NArg(), path,
				len(res.Segments), speech.Seconds(), audioDur.Seconds(), audioDur.Seconds()/max(took.Seconds(), 1e-9))
		}
		if k.Bool("stats") {
			b, _ := json.Marshal(map[string]any{"file": path, "audio_s": audioDur.Seconds(), "speech_s": speech.Seconds(),
				"segments": len(res.Segments), "windows": len(res.Probs), "took_s": took.Seconds()})
			fmt.Fprintln(os.Stderr, string(b))
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d files failed", failed, fs.NArg())
	}
	return nil
}

// vadOne loads one file (see runVAD for the rate) and detects its speech;
// n is the number of samples.
func vadOne(ctx context.Context, d *vad.Detector, path string, rate int) (*vad.Result, int, error) {
	var pcm []float32
	if strings.EqualFold(filepath.Ext(path), ".npy") {
		t, err := npy.ReadFile(path)
		if err != nil {
			return nil, 0, err
		}
		if t.DType() != runtime.F32 || t.Rank() != 1 {
			return nil, 0, fmt.Errorf("%s: samples are %v, want f32 [N]", path, t)
		}
		pcm = t.F32()
		if rate == 0 {
			rate = vad.Rate16k
		}
	} else {
		f, err := os.Open(path)
		if err != nil {
			return nil, 0, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, 0, err
		}
		clip, err := audio.Decode(bufio.NewReaderSize(f, 1<<16), st.Size())
		f.Close()
		if err != nil {
			return nil, 0, fmt.Errorf("%s: %w", path, err)
		}
		pcm = clip.Mono()
		if rate == 0 {
			rate = vad.Rate16k
			if clip.SampleRate == vad.Rate8k {
				rate = vad.Rate8k
			}
		}
		if clip.SampleRate != rate {
			if pcm, err = audio.Resample(pcm, clip.SampleRate, rate); err != nil {
				return nil, 0, fmt.Errorf("%s: %w", path, err)
			}
		}
	}
	res, err := d.Detect(ctx, pcm, rate)
	if err != nil {
		return nil, 0, err
	}
	return res, len(pcm), nil
}

func writeVAD(out string, many bool, suffix, path, format string, res *vad.Result, n int, several bool) error {
	id := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	if out == "" {
		return formatVAD(os.Stdout, format, path, id, res, n, several)
	}
	dst := out
	if many {
		dst = filepath.Join(out, id+suffix)
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	if err := formatVAD(f, format, path, id, res, n, false); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

type vadJSON struct {
	Audio      string       `json:"audio"`
	SampleRate int          `json:"sample_rate"`
	Duration   float64      `json:"duration"`
	Speech     float64      `json:"speech"`
	Segments   []vadSegJSON `json:"segments"`
}

type vadSegJSON struct {
	Start float64 `json:"start"`
	End   float64 `json:"end"`
}

// formatVAD writes one file's segments. several: stdout carries several
// files, so text lines start with the file and JSON objects are one a line.
func formatVAD(w io.Writer, format, path, id string, res *vad.Result, n int, several bool) error {
	bw := bufio.NewWriter(w)
	dur := float64(n) / float64(res.SampleRate)
	switch format {
	case "text":
		for _, s := range res.Segments {
			if several {
				fmt.Fprintf(bw, "%s\t", path)
			}
			fmt.Fprintf(bw, "%.3f\t%.3f\n", s.Start.Seconds(), s.End.Seconds())
		}
	case "json":
		doc := vadJSON{Audio: path, SampleRate: res.SampleRate, Duration: dur, Segments: []vadSegJSON{}}
		var speech int
		for _, s := range res.Segments {
			start, end := s.Seconds(res.SampleRate)
			doc.Segments = append(doc.Segments, vadSegJSON{start, end})
			speech += s.EndSample - s.StartSample
		}
		doc.Speech = float64(speech) / float64(res.SampleRate)
		enc := json.NewEncoder(bw)
		if !several {
			enc.SetIndent("", "  ")
		}
		if err := enc.Encode(doc); err != nil {
			return err
		}
	case "rttm":
		// NIST RTTM: type, file, channel, onset, duration, ortho, stype, name, conf, slat.
		for _, s := range res.Segments {
			fmt.Fprintf(bw, "SPEAKER %s 1 %.3f %.3f <NA> <NA> speech <NA> <NA>\n", rttmField(id), s.Start.Seconds(), (s.End - s.Start).Seconds())
		}
	case "audacity":
		// Audacity label track: start, end, label, tab-separated.
		for _, s := range res.Segments {
			fmt.Fprintf(bw, "%.6f\t%.6f\tspeech\n", s.Start.Seconds(), s.End.Seconds())
		}
	}
	return bw.Flush()
}

// rttmField replaces the spaces RTTM fields cannot hold.
func rttmField(s string) string {
	if s == "" {
		return "<NA>"
	}
	return strings.Join(strings.Fields(s), "_")
}
