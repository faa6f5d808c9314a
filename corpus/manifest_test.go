package corpus

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadManifestNeMo(t *testing.T) {
	dir := t.TempDir()
	lines := strings.Join([]string{
		`{"audio_filepath": "a/x.wav", "text": "hello", "duration": 1.5, "offset": 2, "speaker": 7}`,
		``,
		`{"audio_filepath": "/abs/y.wav"}`,
		`{"audio_filepath": "/abs/y.wav"}`,
		`{bad json`,
		`[1, 2]`,
		`{"text": "no audio"}`,
		`{"audio_filepath": 3}`,
		`{"audio_filepath": "z.wav", "duration": -1}`,
		`{"audio_filepath": "z.wav", "text": 5}`,
		`{"audio_filepath": "z.wav", "offset": "soon"}`,
	}, "\n")
	path := filepath.Join(dir, "m.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(lines), 0o644))
	items, err := ReadManifest(path)
	require.NoError(t, err)
	require.Len(t, items, 10)

	a := items[0]
	assert.Equal(t, 1, a.Line)
	assert.Equal(t, filepath.Join(dir, "a/x.wav"), a.Audio)
	assert.Equal(t, "hello", a.Text)
	assert.Equal(t, 1.5, a.Duration)
	assert.Equal(t, 2.0, a.Offset)
	assert.Equal(t, "7", string(a.Fields["speaker"]))
	assert.NoError(t, a.Err)
	assert.True(t, strings.HasPrefix(a.Key, "x-"), a.Key)

	assert.Equal(t, 3, items[1].Line, "blank lines count")
	assert.Equal(t, "/abs/y.wav", items[1].Audio)
	assert.Equal(t, items[1].Key+"-2", items[2].Key, "an identical line gets its own key")

	for _, c := range []struct {
		i    int
		want string
	}{
		{3, "line 5: invalid JSON"},
		{4, "line 6: invalid JSON"},
		{5, `line 7: field "audio_filepath" is missing`},
		{6, `line 8: field "audio_filepath": want a string`},
		{7, `line 9: field "duration": want seconds >= 0, have -1`},
		{8, `line 10: field "text": want a string`},
		{9, `line 11: field "offset"`},
	} {
		require.Error(t, items[c.i].Err, "item %d", c.i)
		assert.Contains(t, items[c.i].Err.Error(), c.want)
		assert.Contains(t, items[c.i].Err.Error(), path)
	}
	keys := map[string]bool{}
	for _, it := range items {
		assert.False(t, keys[it.Key], "duplicate key %s", it.Key)
		keys[it.Key] = true
	}

	// Keys depend on the line, not its position.
	require.NoError(t, os.WriteFile(path, []byte("\n\n"+lines), 0o644))
	again, err := ReadManifest(path)
	require.NoError(t, err)
	for i := range items {
		assert.Equal(t, items[i].Key, again[i].Key)
	}
}

func TestReadManifestLhotseGzip(t *testing.T) {
	dir := t.TempDir()
	var buf bytes.Buffer
	gz := gzip.NewWriter(&buf)
	fmt.Fprintln(gz, `{"id": "cut-1", "start": 0.5, "duration": 2.25, "channel": 0, "supervisions": [{"id": "s1", "text": "hello"}, {"id": "s2", "text": "world"}], "recording": {"id": "r1", "sources": [{"type": "file", "channels": [0], "source": "rec/r1.wav"}], "sampling_rate": 16000, "num_samples": 80000, "duration": 5.0}, "type": "MonoCut"}`)
	fmt.Fprintln(gz, `{"id": "cut-2", "start": 0, "duration": 1, "recording": {"id": "r2", "sources": [{"type": "url", "source": "https://example.invalid/a.wav"}]}}`)
	require.NoError(t, gz.Close())
	path := filepath.Join(dir, "cuts.jsonl.gz")
	require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
	items, err := ReadManifest(path)
	require.NoError(t, err)
	require.Len(t, items, 2)
	assert.NoError(t, items[0].Err)
	assert.Equal(t, filepath.Join(dir, "rec/r1.wav"), items[0].Audio)
	assert.Equal(t, 0.5, items[0].Offset)
	assert.Equal(t, 2.25, items[0].Duration)
	assert.Equal(t, "hello world", items[0].Text)
	require.Error(t, items[1].Err)
	assert.Contains(t, items[1].Err.Error(), `line 2: lhotse cut: field "recording.sources"`)
}

func TestReadManifestErrors(t *testing.T) {
	_, err := ReadManifest(filepath.Join(t.TempDir(), "none.jsonl"))
	assert.Error(t, err)
	path := filepath.Join(t.TempDir(), "bad.jsonl.gz")
	require.NoError(t, os.WriteFile(path, []byte("not gzip"), 0o644))
	_, err = ReadManifest(path)
	assert.Error(t, err)
}

func TestShardFromEnv(t *testing.T) {
	env := func(kv ...string) func(string) string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return func(k string) string { return m[k] }
	}
	for _, c := range []struct {
		name         string
		index, count int
		env          func(string) string
		want         Shard
		err          string
	}{
		{"none", -1, -1, env(), Shard{0, 1}, ""},
		{"flags", 2, 3, env("JOB_COMPLETION_INDEX", "1"), Shard{2, 3}, ""},
		{"kubernetes", -1, 4, env("JOB_COMPLETION_INDEX", "3"), Shard{3, 4}, ""},
		{"slurm", -1, -1, env("SLURM_ARRAY_TASK_ID", "5", "SLURM_ARRAY_TASK_MIN", "1", "SLURM_ARRAY_TASK_COUNT", "8"), Shard{4, 8}, ""},
		{"kubernetes without count", -1, -1, env("JOB_COMPLETION_INDEX", "3"), Shard{}, "shard index 3 of 1 shards"},
		{"bad number", -1, -1, env("SLURM_ARRAY_TASK_ID", "x"), Shard{}, `$SLURM_ARRAY_TASK_ID="x"`},
		{"out of range", 4, 4, env(), Shard{}, "want 0 <= index < shards"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := ShardFromEnv(c.index, c.count, c.env)
			if c.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), c.err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, c.want, s)
		})
	}
}

// Every item lands in exactly one shard, and the shards are near equal.
func TestShardPartition(t *testing.T) {
	var items []Item
	for i := range 4000 {
		items = append(items, Item{Key: fmt.Sprintf("clip-%d", i)})
	}
	const n = 4
	seen := map[string]int{}
	for i := range n {
		cfg := Config{Shard: Shard{i, n}}
		mine := cfg.ShardItems(items)
		assert.InDelta(t, len(items)/n, len(mine), float64(len(items))/n*0.1, "shard %d", i)
		for _, it := range mine {
			seen[it.Key]++
		}
	}
	assert.Len(t, seen, len(items))
	for k, c := range seen {
		assert.Equal(t, 1, c, k)
	}
}
