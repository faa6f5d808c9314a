package corpus

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Status values of a record.
const (
	StatusOK    = "ok"
	StatusError = "error"
)

// FileSum is one output file of an item: its path relative to the output
// directory, size and SHA-256, so a rerun can tell a complete file from a
// truncated or damaged one.
type FileSum struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// Meta is the "edge" object of a record: what resume and --verify check.
type Meta struct {
	Key   string    `json:"key"`
	Line  int       `json:"line"`
	Mode  Mode      `json:"mode"`
	Model string    `json:"model"`
	Files []FileSum `json:"files,omitempty"`
}

// record is the part of an item's record that resume reads back.
type record struct {
	Status string `json:"status"`
	Error  string `json:"error"`
	Edge   Meta   `json:"edge"`
}

// paths of an item's files, relative to the output directory.
func (c *Config) itemDir(it *Item) string {
	h := it.hash()
	return filepath.Join("items", hex.EncodeToString(h[:1]))
}

func (c *Config) recordPath(it *Item) string {
	return filepath.Join(c.itemDir(it), it.Key+"."+string(c.Mode)+".json")
}

func (c *Config) dataPath(it *Item, what string) string {
	return filepath.Join(c.itemDir(it), it.Key+"."+string(c.Mode)+"."+what)
}

// shardManifest is the shard's output manifest, relative to the output directory.
func (c *Config) shardManifest() string {
	return string(c.Mode) + "." + c.Shard.name() + ".jsonl"
}

// writeAtomic writes path (relative to dir) through a temporary file in
// the same directory, synced and renamed into place, so a reader (or a
// rerun after a kill) sees either nothing or the whole file. It returns the
// file's size and SHA-256.
func writeAtomic(dir, rel string, fill func(io.Writer) error) (FileSum, error) {
	path := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return FileSum{}, err
	}
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return FileSum{}, err
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op once renamed
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	err = fill(cw)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		return FileSum{}, fmt.Errorf("writing %s: %w", path, err)
	}
	return FileSum{Path: rel, Bytes: cw.n, SHA256: hex.EncodeToString(h.Sum(nil))}, nil
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// checkFile says why a file listed in a record is not as recorded.
func checkFile(dir string, fs FileSum) error {
	f, err := os.Open(filepath.Join(dir, fs.Path))
	if err != nil {
		return err
	}
	defer f.Close()
	var h hash.Hash = sha256.New()
	n, err := io.Copy(h, f)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Path, err)
	}
	if n != fs.Bytes {
		return fmt.Errorf("%s: %d bytes, the record says %d", fs.Path, n, fs.Bytes)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != fs.SHA256 {
		return fmt.Errorf("%s: SHA-256 %s, the record says %s", fs.Path, got, fs.SHA256)
	}
	return nil
}

// state is what the output directory holds for one item.
type state int

const (
	missing state = iota // no record
	corrupt              // a record that does not parse or whose files differ
	failed               // a complete record of a failure
	done                 // a complete record of a success
)

func (s state) String() string {
	return [...]string{"missing", "corrupt", "failed", "ok"}[s]
}

// check reads the item's record and checks it against the item, the mode,
// the model and its files' sizes and sums.
func (c *Config) check(it *Item) (state, error) {
	b, err := os.ReadFile(filepath.Join(c.Out, c.recordPath(it)))
	if errors.Is(err, os.ErrNotExist) {
		return missing, nil
	}
	if err != nil {
		return corrupt, err
	}
	var r record
	if err := json.Unmarshal(b, &r); err != nil {
		return corrupt, fmt.Errorf("record %s: %w", c.recordPath(it), err)
	}
	if r.Edge.Key != it.Key || r.Edge.Mode != c.Mode || r.Edge.Model != c.model {
		return corrupt, fmt.Errorf("record %s is of item %q, mode %q, model %q; want %q, %q, %q",
			c.recordPath(it), r.Edge.Key, r.Edge.Mode, r.Edge.Model, it.Key, c.Mode, c.model)
	}
	for _, f := range r.Edge.Files {
		if err := checkFile(c.Out, f); err != nil {
			return corrupt, err
		}
	}
	switch r.Status {
	case StatusOK:
		return done, nil
	case StatusError:
		return failed, errors.New(r.Error)
	}
	return corrupt, fmt.Errorf("record %s: status %q", c.recordPath(it), r.Status)
}

// recordJSON is an item's output manifest line: the input fields, with
// audio_filepath absolute, plus extra (pred_text, file paths, duration,
// status, error) and the "edge" metadata. Keys are sorted, so equal
// results give equal bytes.
func recordJSON(it *Item, extra map[string]any, meta Meta) ([]byte, error) {
	out := map[string]any{}
	for k, v := range it.Fields {
		out[k] = v
	}
	if it.Fields == nil {
		out["manifest_line"] = it.Line
	}
	if it.Audio != "" {
		if _, ok := it.Fields["audio_filepath"]; ok {
			out["audio_filepath"] = it.Audio
		}
	}
	for k, v := range extra {
		out[k] = v
	}
	out["edge"] = meta
	b, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// writeShardManifest concatenates the shard's records in manifest order.
func (c *Config) writeShardManifest(items []*Item) (string, error) {
	sorted := append([]*Item(nil), items...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Line < sorted[j].Line })
	rel := c.shardManifest()
	_, err := writeAtomic(c.Out, rel, func(w io.Writer) error {
		for _, it := range sorted {
			b, err := os.ReadFile(filepath.Join(c.Out, c.recordPath(it)))
			if err != nil {
				return err
			}
			if !strings.HasSuffix(string(b), "\n") {
				b = append(b, '\n')
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		return nil
	})
	return filepath.Join(c.Out, rel), err
}
