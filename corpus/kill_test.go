package corpus

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/asr"
	"github.com/edgespeech/edge/asr/transcript"
)

// The test binary doubles as a shard worker (re-executed by
// TestKillAndResume) when $EDGE_CORPUS_WORKER names a manifest.
func TestMain(m *testing.M) {
	if manifest := os.Getenv("EDGE_CORPUS_WORKER"); manifest != "" {
		if err := worker(manifest); err != nil {
			fmt.Fprintln(os.Stderr, "worker:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// worker runs one shard as `edge batch transcribe` would: the shard from
// the environment, events to $EDGE_CORPUS_EVENTS, each item slowed by
// $EDGE_CORPUS_DELAY (so the test can kill it mid-way).
func worker(manifest string) error {
	shard, err := ShardFromEnv(-1, -1, nil)
	if err != nil {
		return err
	}
	items, err := ReadManifest(manifest)
	if err != nil {
		return err
	}
	r, err := asr.Open(defaultModel, asr.Options{Threads: 1})
	if err != nil {
		return err
	}
	defer r.Close()
	ev, err := os.OpenFile(os.Getenv("EDGE_CORPUS_EVENTS"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer ev.Close()
	var rec Recognizer = r
	if d, _ := time.ParseDuration(os.Getenv("EDGE_CORPUS_DELAY")); d > 0 {
		rec = slow{r, d}
	}
	_, err = Run(context.Background(), rec, items, Config{Mode: Transcribe, Out: os.Getenv("EDGE_CORPUS_OUT"), Shard: shard, Events: ev})
	return err
}

type slow struct {
	*asr.Recognizer
	d time.Duration
}

func (s slow) Transcribe(ctx context.Context, pcm []float32) (*transcript.Transcript, error) {
	time.Sleep(s.d)
	return s.Recognizer.Transcribe(ctx, pcm)
}

type event struct {
	Key    string `json:"key"`
	Line   int    `json:"line"`
	Status string `json:"status"`
}

// readEvents parses an events file; a line cut short by a kill is dropped.
func readEvents(t *testing.T, path string) []event {
	t.Helper()
	b, err := os.ReadFile(path)
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	var out []event
	for _, line := range strings.Split(string(b), "\n") {
		var e event
		if json.Unmarshal([]byte(line), &e) == nil && e.Key != "" {
			out = append(out, e)
		}
	}
	return out
}

// Four shards as separate processes over a few hundred items, one killed
// (SIGKILL) mid-way and rerun: the union of the shards' outputs equals a
// single-process run item for item, and the rerun processes none of the
// items completed before the kill.
func TestKillAndResume(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test runs the model over a few hundred items in five processes (make test runs it)")
	}
	const n, shards, victim = 200, 4, 1
	dir := t.TempDir()
	manifest := synthManifest(t, dir, n)
	items, err := ReadManifest(manifest)
	require.NoError(t, err)

	// The single-process reference.
	ref := Config{Mode: Transcribe, Out: filepath.Join(dir, "ref"), Shard: Shard{0, 1}}
	t0 := time.Now()
	sum, err := Run(context.Background(), recognizer(t), items, ref)
	require.NoError(t, err)
	require.Equal(t, n, sum.Done)
	t.Logf("reference: %v", time.Since(t0))
	t0 = time.Now()

	out := filepath.Join(dir, "sharded")
	start := func(index int, delay time.Duration, events string) *exec.Cmd {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), "EDGE_CORPUS_WORKER="+manifest, "EDGE_CORPUS_OUT="+out,
			"EDGE_CORPUS_EVENTS="+events, "EDGE_CORPUS_DELAY="+delay.String(),
			"SLURM_ARRAY_TASK_ID="+strconv.Itoa(index), "SLURM_ARRAY_TASK_COUNT="+strconv.Itoa(shards))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		require.NoError(t, cmd.Start())
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("shard %d stderr:\n%s", index, stderr.String())
			}
		})
		return cmd
	}
	events := func(i, run int) string { return filepath.Join(dir, fmt.Sprintf("events-%d-%d.jsonl", i, run)) }
	var cmds []*exec.Cmd
	for i := range shards {
		delay := time.Duration(0)
		if i == victim {
			delay = 40 * time.Millisecond
		}
		cmds = append(cmds, start(i, delay, events(i, 0)))
	}
	// Kill the victim once it has finished a few items.
	deadline := time.Now().Add(2 * time.Minute)
	for len(readEvents(t, events(victim, 0))) < 3 {
		require.True(t, time.Now().Before(deadline), "shard %d made no progress", victim)
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("kill after %v", time.Since(t0))
	require.NoError(t, cmds[victim].Process.Kill())
	assert.Error(t, cmds[victim].Wait(), "the victim was killed, not finished")
	for i, c := range cmds {
		if i != victim {
			require.NoError(t, c.Wait(), "shard %d", i)
		}
	}

	t.Logf("shards done after %v", time.Since(t0))
	cfg := Config{Mode: Transcribe, Out: out, Shard: Shard{victim, shards}}
	cfg.model = recognizer(t).Manifest().Name
	mine := cfg.ShardItems(items)
	complete := map[string]bool{}
	for _, it := range mine {
		if st, _ := cfg.check(it); st == done {
			complete[it.Key] = true
		}
	}
	require.NotEmpty(t, complete)
	require.Less(t, len(complete), len(mine), "the kill came after the shard's last item")
	_, err = os.Stat(filepath.Join(out, cfg.shardManifest()))
	require.True(t, os.IsNotExist(err), "a killed shard writes no manifest")
	rep, err := Verify(items, cfg, cfg.model)
	require.NoError(t, err)
	assert.Len(t, rep.Problems, len(mine)-len(complete))

	// The rerun skips exactly the complete items and processes each other once.
	rerun := start(victim, 0, events(victim, 1))
	require.NoError(t, rerun.Wait())
	t.Logf("rerun done after %v", time.Since(t0))
	seen := map[string]int{}
	for _, e := range readEvents(t, events(victim, 1)) {
		seen[e.Key]++
		if complete[e.Key] {
			assert.Equal(t, "skipped", e.Status, "item %s was complete before the kill", e.Key)
		} else {
			assert.Equal(t, StatusOK, e.Status, "item %s", e.Key)
		}
	}
	assert.Len(t, seen, len(mine))
	for k, c := range seen {
		assert.Equal(t, 1, c, "item %s reported %d times", k, c)
	}

	// Item for item, the union equals the reference: records and results byte for byte.
	var union []string
	for i := range shards {
		b, err := os.ReadFile(filepath.Join(out, (&Config{Mode: Transcribe, Shard: Shard{i, shards}}).shardManifest()))
		require.NoError(t, err, "shard %d", i)
		union = append(union, strings.Split(strings.TrimSpace(string(b)), "\n")...)
	}
	b, err := os.ReadFile(sum.Manifest)
	require.NoError(t, err)
	want := strings.Split(strings.TrimSpace(string(b)), "\n")
	sort.Strings(union)
	sort.Strings(want)
	require.Equal(t, want, union)
	for _, it := range items {
		for _, rel := range []string{ref.recordPath(&it), ref.dataPath(&it, "words.json")} {
			a, err := os.ReadFile(filepath.Join(ref.Out, rel))
			require.NoError(t, err)
			b, err := os.ReadFile(filepath.Join(out, rel))
			require.NoError(t, err)
			require.Equal(t, string(a), string(b), rel)
		}
	}
}
