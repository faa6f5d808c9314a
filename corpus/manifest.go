// Package corpus runs edge as the worker of a batch engine (Kubernetes
// Indexed Jobs, Slurm job arrays, Ray): it reads a NeMo-style JSON Lines
// manifest (or a lhotse cut manifest), takes the items of one shard,
// transcribes, aligns or tokenises them (CTC tokens on an asr recogniser,
// or neural-codec codes) with several items in flight, writes one result
// per item atomically, records failures per item without stopping, and on
// a rerun skips the items whose outputs are complete (their sizes and
// SHA-256 sums checked), so a preempted pod or a requeued array task
// finishes the work without redoing it.
//
// Output layout under the output directory DIR, for mode M (transcribe,
// align or tokenize):
//
//	DIR/items/HH/KEY.M.json            the item's record: its output manifest line
//	DIR/items/HH/KEY.M.words.FORMAT    word alignment (transcribe, align)
//	DIR/items/HH/KEY.M.tokens.npy      frame-level CTC token ids, i32 [T'] (tokenize)
//	DIR/items/HH/KEY.M.emissions.npy   log-probs, f32 [T', V] (tokenize --emissions)
//	DIR/items/HH/KEY.M.codes.npy       codec codes, i32 [Q, T] (tokenize --codec)
//	DIR/M.shard-IIIII-of-NNNNN.jsonl   the shard's output manifest, in manifest order
//
// KEY is derived from the item (see Item.Key) and HH is the first byte of
// its hash in hex, so no directory holds more than 1/256 of the corpus.
// Each shard writes only the files of its own items and its own manifest,
// so shards never contend; `cat DIR/M.shard-*.jsonl` is the corpus's
// output manifest.
package corpus

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"unicode"
)

// Item is one manifest line.
type Item struct {
	// Line is the 1-based line number in the manifest.
	Line int
	// Key names the item's output files: the audio file's base name
	// (sanitised, at most 40 characters), then 12 hex digits of the SHA-256
	// of the line's text (and, for the n-th repetition of an identical line,
	// "-n"). It depends on the line alone, not on its position, so it is the
	// same in every shard and every run.
	Key string
	// Fields are the line's JSON fields as given (nil for a line that is not
	// a JSON object). The output record repeats them, with audio_filepath
	// made absolute.
	Fields map[string]json.RawMessage
	// Audio is audio_filepath resolved against the manifest's directory.
	Audio string
	// Text is the reference transcript ("" when absent).
	Text string
	// Offset and Duration (seconds) select a segment of the audio;
	// Duration 0 means to the end of the file.
	Offset, Duration float64
	// Err is why the line cannot be processed (bad JSON, a missing or
	// mistyped field); such an item is recorded as failed.
	Err error
}

// hash is the stable hash of the key behind shard assignment and the
// directory fan-out: SHA-256(key).
func (it *Item) hash() [32]byte { return sha256.Sum256([]byte(it.Key)) }

// ReadManifest reads a manifest: JSON Lines, gzip-compressed when the file
// name ends in .gz. A line is either a NeMo manifest entry
// (audio_filepath, optional text, duration, offset) or a lhotse cut (an
// object with "recording": its first file source, the cut's start and
// duration, its supervisions' text joined by spaces). Relative audio paths
// are resolved against the manifest's directory. Blank lines are skipped.
// Lines that cannot be used become items with Err set, naming the line and
// field; only an unreadable manifest file is an error.
func ReadManifest(path string) ([]Item, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("manifest: %w", err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(path, ".gz") {
		gz, err := gzip.NewReader(f)
		if err != nil {
			return nil, fmt.Errorf("manifest %s: %w", path, err)
		}
		defer gz.Close()
		r = gz
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	return parseManifest(r, path, dir)
}

func parseManifest(r io.Reader, name, dir string) ([]Item, error) {
	br := bufio.NewReaderSize(r, 1<<16)
	seen := map[string]int{}
	var items []Item
	for line := 1; ; line++ {
		raw, err := br.ReadBytes('\n')
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("manifest %s: line %d: %w", name, line, err)
		}
		if text := bytes.TrimSpace(raw); len(text) > 0 {
			it := parseLine(text, dir)
			it.Line = line
			sum := sha256.Sum256(text)
			it.Key = keyBase(it.Audio) + "-" + hex.EncodeToString(sum[:6])
			if n := seen[it.Key]; n > 0 {
				seen[it.Key]++
				it.Key = fmt.Sprintf("%s-%d", it.Key, n+1)
			} else {
				seen[it.Key] = 1
			}
			if it.Err != nil {
				it.Err = fmt.Errorf("manifest %s: line %d: %w", name, line, it.Err)
			}
			items = append(items, it)
		}
		if err != nil {
			return items, nil
		}
	}
}

// keyBase is the file-name-safe stem of an audio path ("line" when none).
func keyBase(audio string) string {
	base := strings.TrimSuffix(filepath.Base(audio), filepath.Ext(audio))
	var b strings.Builder
	for _, c := range base {
		if b.Len() >= 40 {
			break
		}
		if c < unicode.MaxASCII && (unicode.IsLetter(c) || unicode.IsDigit(c) || c == '-' || c == '_') {
			b.WriteRune(c)
		} else {
			b.WriteByte('_')
		}
	}
	if audio == "" || b.Len() == 0 {
		return "line"
	}
	return b.String()
}

// parseLine parses one non-blank manifest line; problems go to Item.Err.
func parseLine(text []byte, dir string) Item {
	var it Item
	if err := json.Unmarshal(text, &it.Fields); err != nil || it.Fields == nil {
		it.Fields = nil
		if err == nil {
			err = errors.New("not a JSON object")
		}
		it.Err = fmt.Errorf("invalid JSON: %w", err)
		return it
	}
	if _, ok := it.Fields["recording"]; ok {
		it.Err = it.parseCut(dir)
		return it
	}
	audio, err := stringField(it.Fields, "audio_filepath", true)
	if err != nil {
		it.Err = err
		return it
	}
	it.Audio = resolve(audio, dir)
	if it.Text, err = stringField(it.Fields, "text", false); err != nil {
		it.Err = err
		return it
	}
	if it.Offset, err = secondsField(it.Fields, "offset"); err != nil {
		it.Err = err
		return it
	}
	if it.Duration, err = secondsField(it.Fields, "duration"); err != nil {
		it.Err = err
	}
	return it
}

func resolve(p, dir string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(dir, p)
}

// parseCut reads a lhotse MonoCut: {"id", "start", "duration",
// "recording": {"sources": [{"type": "file", "source": PATH}]},
// "supervisions": [{"text"}]}.
func (it *Item) parseCut(dir string) error {
	var cut struct {
		Start     *float64 `json:"start"`
		Duration  *float64 `json:"duration"`
		Recording struct {
			Sources []struct {
				Type   string `json:"type"`
				Source string `json:"source"`
			} `json:"sources"`
		} `json:"recording"`
		Supervisions []struct {
			Text *string `json:"text"`
		} `json:"supervisions"`
	}
	raw, _ := json.Marshal(it.Fields)
	if err := json.Unmarshal(raw, &cut); err != nil {
		return fmt.Errorf("lhotse cut: %w", err)
	}
	if len(cut.Recording.Sources) == 0 || cut.Recording.Sources[0].Type != "file" || cut.Recording.Sources[0].Source == "" {
		return errors.New(`lhotse cut: field "recording.sources": want a first source of type "file" with a path`)
	}
	it.Audio = resolve(cut.Recording.Sources[0].Source, dir)
	if cut.Start != nil {
		it.Offset = *cut.Start
	}
	if cut.Duration != nil {
		it.Duration = *cut.Duration
	}
	if bad(it.Offset) || bad(it.Duration) {
		return fmt.Errorf("lhotse cut: start %g, duration %g: want finite seconds >= 0", it.Offset, it.Duration)
	}
	var texts []string
	for _, s := range cut.Supervisions {
		if s.Text != nil && *s.Text != "" {
			texts = append(texts, *s.Text)
		}
	}
	it.Text = strings.Join(texts, " ")
	return nil
}

func bad(s float64) bool { return s < 0 || math.IsNaN(s) || math.IsInf(s, 0) }

func stringField(f map[string]json.RawMessage, name string, required bool) (string, error) {
	raw, ok := f[name]
	if !ok || string(raw) == "null" {
		if required {
			return "", fmt.Errorf("field %q is missing", name)
		}
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return "", fmt.Errorf("field %q: want a string, have %s", name, raw)
	}
	if required && s == "" {
		return "", fmt.Errorf("field %q is empty", name)
	}
	return s, nil
}

func secondsField(f map[string]json.RawMessage, name string) (float64, error) {
	raw, ok := f[name]
	if !ok || string(raw) == "null" {
		return 0, nil
	}
	var v float64
	if err := json.Unmarshal(raw, &v); err != nil || bad(v) {
		return 0, fmt.Errorf("field %q: want seconds >= 0, have %s", name, raw)
	}
	return v, nil
}
