package corpus

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/asr"
	"github.com/edgespeech/edge/runtime/npy"
)

const defaultModel = "../models/default"

var (
	recOnce sync.Once
	recErr  error
	testRec *asr.Recognizer
)

// recognizer is the bundled model, opened once for the package's tests
// (one encoder thread, so results do not depend on the machine).
func recognizer(t testing.TB) *asr.Recognizer {
	t.Helper()
	recOnce.Do(func() { testRec, recErr = asr.Open(defaultModel, asr.Options{Threads: 1}) })
	require.NoError(t, recErr)
	return testRec
}

// clip is the absolute path of a bundled test clip.
func clip(t testing.TB, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join(defaultModel, "testdata", name+".wav"))
	require.NoError(t, err)
	return p
}

// synthManifest writes n items cut from the four words_N clips (2.8-4 s)
// with different offsets and durations (0.5-1.1 s), each line distinct.
func synthManifest(t testing.TB, dir string, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		line, _ := json.Marshal(map[string]any{
			"audio_filepath": clip(t, fmt.Sprintf("words_%d", i%4+1)),
			"offset":         float64((i/4)%10) / 10,
			"duration":       0.5 + float64(i%7)/10,
			"id":             i,
		})
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(dir, "synth.jsonl")
	require.NoError(t, os.WriteFile(path, []byte(b.String()), 0o644))
	return path
}

func readRecords(t testing.TB, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m), line)
		out = append(out, m)
	}
	return out
}

// Each kind of bad line becomes a recorded per-item error naming the line
// and the field; the good lines still get their results.
func TestMalformedItemsAreRecorded(t *testing.T) {
	rec := recognizer(t)
	dir := t.TempDir()
	notWAV := filepath.Join(dir, "notes.wav")
	require.NoError(t, os.WriteFile(notWAV, []byte("this is not audio"), 0o644))
	good, _ := json.Marshal(map[string]any{"audio_filepath": clip(t, "words_1"), "text": "add split points to a spanner database"})
	lines := []string{
		string(good),
		`{"audio_filepath": "missing.wav", "text": "x"}`,
		`{"audio_filepath": "notes.wav", "text": "x"}`,
		`{not json`,
		fmt.Sprintf(`{"audio_filepath": %q, "duration": 0.2, "text": "this text is far too long for two hundred milliseconds of audio"}`, clip(t, "words_1")),
		fmt.Sprintf(`{"audio_filepath": %q, "offset": 10, "text": "x"}`, clip(t, "words_1")),
		fmt.Sprintf(`{"audio_filepath": %q}`, clip(t, "words_2")),
	}
	manifest := filepath.Join(dir, "m.jsonl")
	require.NoError(t, os.WriteFile(manifest, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
	items, err := ReadManifest(manifest)
	require.NoError(t, err)
	out := filepath.Join(dir, "out")
	cfg := Config{Mode: Align, Out: out, Shard: Shard{0, 1}}
	sum, err := Run(context.Background(), rec, items, cfg)
	require.NoError(t, err)
	assert.Equal(t, Summary{Items: 7, Done: 1, Failed: 6}, Summary{Items: sum.Items, Done: sum.Done, Failed: sum.Failed})

	recs := readRecords(t, sum.Manifest)
	require.Len(t, recs, 7)
	assert.Equal(t, StatusOK, recs[0]["status"])
	assert.Equal(t, "add split points to a spanner database", recs[0]["text"])
	words := filepath.Join(out, recs[0]["alignment_filepath"].(string))
	var tr struct {
		Words []struct{ Word string } `json:"words"`
	}
	b, err := os.ReadFile(words)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &tr), string(b))
	assert.Len(t, tr.Words, 7)
	for i, want := range []string{
		`line 2: field "audio_filepath"`,
		`line 3: field "audio_filepath"`,
		`line 4: invalid JSON`,
		`line 5: ` + clip(t, "words_1") + `: audio too short for the text`,
		`line 6: offset 10s + duration 0s reaches past the end`,
		`line 7: field "text" is missing or empty: align needs the transcript`,
	} {
		r := recs[i+1]
		assert.Equal(t, StatusError, r["status"], "line %d", i+2)
		assert.Contains(t, r["error"], want, "line %d", i+2)
		assert.NotContains(t, r, "alignment_filepath")
	}
	assert.Equal(t, 4.0, recs[3]["manifest_line"])
	assert.Equal(t, filepath.Join(dir, "missing.wav"), recs[1]["audio_filepath"], "audio paths are made absolute")

	// A rerun keeps everything; with RetryFailed it redoes the failures only.
	sum, err = Run(context.Background(), rec, items, cfg)
	require.NoError(t, err)
	assert.Equal(t, 7, sum.Skipped)
	cfg.RetryFailed = true
	sum, err = Run(context.Background(), rec, items, cfg)
	require.NoError(t, err)
	assert.Equal(t, 1, sum.Skipped)
	assert.Equal(t, 6, sum.Failed)
}

// Resume checks the outputs: a truncated result or a damaged record is
// reported by Verify and redone by the next Run; complete items are not.
func TestResumeChecksOutputs(t *testing.T) {
	rec := recognizer(t)
	dir := t.TempDir()
	items, err := ReadManifest(synthManifest(t, dir, 12))
	require.NoError(t, err)
	for _, mode := range []Mode{Transcribe, Tokenize} {
		t.Run(string(mode), func(t *testing.T) {
			cfg := Config{Mode: mode, Out: filepath.Join(dir, string(mode)), Shard: Shard{0, 1}, Emissions: true}
			sum, err := Run(context.Background(), rec, items, cfg)
			require.NoError(t, err)
			require.Equal(t, 12, sum.Done)
			rep, err := Verify(items, cfg, rec.Manifest().Name)
			require.NoError(t, err)
			assert.Equal(t, 12, rep.OK)
			assert.Empty(t, rep.Problems)
			assert.Empty(t, rep.Manifest)

			recs := readRecords(t, sum.Manifest)
			data := "alignment_filepath"
			if mode == Tokenize {
				data = "token_filepath"
				tok, err := npy.ReadFile(filepath.Join(cfg.Out, recs[0]["token_filepath"].(string)))
				require.NoError(t, err)
				assert.Equal(t, int(recs[0]["num_frames"].(float64)), tok.Shape()[0])
				em, err := npy.ReadFile(filepath.Join(cfg.Out, recs[0]["emissions_filepath"].(string)))
				require.NoError(t, err)
				assert.Equal(t, rec.Manifest().Vocab.Len(), em.Shape()[1])
			} else {
				assert.NotEmpty(t, recs[0]["pred_text"])
			}
			// Damage item 0's result, item 1's record; remove item 2's record.
			p := filepath.Join(cfg.Out, recs[0][data].(string))
			st, err := os.Stat(p)
			require.NoError(t, err)
			require.NoError(t, os.Truncate(p, st.Size()/2))
			require.NoError(t, os.WriteFile(filepath.Join(cfg.Out, cfg.recordPath(&items[1])), []byte(`{"status": "ok", "edge": {`), 0o644))
			require.NoError(t, os.Remove(filepath.Join(cfg.Out, cfg.recordPath(&items[2]))))

			rep, err = Verify(items, cfg, rec.Manifest().Name)
			require.NoError(t, err)
			assert.Equal(t, 9, rep.OK)
			require.Len(t, rep.Problems, 3)
			assert.Equal(t, "corrupt", rep.Problems[0].State)
			assert.Contains(t, rep.Problems[0].Error, "bytes, the record says")
			assert.Equal(t, "corrupt", rep.Problems[1].State)
			assert.Equal(t, "missing", rep.Problems[2].State)

			var events strings.Builder
			cfg.Events = &syncWriter{w: &events}
			sum, err = Run(context.Background(), rec, items, cfg)
			require.NoError(t, err)
			assert.Equal(t, 3, sum.Done)
			assert.Equal(t, 9, sum.Skipped)
			redone := map[int]bool{}
			for _, line := range strings.Split(strings.TrimSpace(events.String()), "\n") {
				var e struct {
					Line   int
					Status string
				}
				require.NoError(t, json.Unmarshal([]byte(line), &e))
				if e.Status != "skipped" {
					redone[e.Line] = true
				}
			}
			assert.Equal(t, map[int]bool{1: true, 2: true, 3: true}, redone)
			rep, err = Verify(items, cfg, rec.Manifest().Name)
			require.NoError(t, err)
			assert.Equal(t, 12, rep.OK)
		})
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  interface{ Write([]byte) (int, error) }
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// A batching recogniser gets at least its EncodeCapacity of items in flight
// (Jobs 1 here), their chunks share encoder runs, and the shard's texts
// are the unbatched ones.
func TestBatchedRun(t *testing.T) {
	dir := t.TempDir()
	items, err := ReadManifest(synthManifest(t, dir, 12))
	require.NoError(t, err)
	plain := Config{Mode: Transcribe, Out: filepath.Join(dir, "plain"), Shard: Shard{0, 1}}
	sum, err := Run(context.Background(), recognizer(t), items, plain)
	require.NoError(t, err)
	want := readRecords(t, sum.Manifest)

	var mu sync.Mutex
	largest := 0
	rec, err := asr.Open(defaultModel, asr.Options{Threads: 1, Batch: 4, BatchWait: 50 * time.Millisecond, OnEncode: func(n int) {
		mu.Lock()
		largest = max(largest, n)
		mu.Unlock()
	}})
	require.NoError(t, err)
	defer rec.Close()
	batched := Config{Mode: Transcribe, Out: filepath.Join(dir, "batched"), Shard: Shard{0, 1}, Jobs: 1}
	sum, err = Run(context.Background(), rec, items, batched)
	require.NoError(t, err)
	require.Equal(t, 12, sum.Done)
	got := readRecords(t, sum.Manifest)
	require.Len(t, got, len(want))
	for i := range want {
		assert.Equal(t, want[i]["pred_text"], got[i]["pred_text"], "item %d", i)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Greater(t, largest, 1, "no encoder run held more than one item's chunk")
}

// fakeCodec returns codes [stages, T] whose values say the clip's length
// and the stage; a clip shorter than 100 samples fails.
type fakeCodec struct{}

func (fakeCodec) Encode(_ context.Context, pcm []float32, stages int) ([]int32, int, error) {
	if len(pcm) < 100 {
		return nil, 0, fmt.Errorf("audio has %d samples, want at least one frame", len(pcm))
	}
	T := len(pcm) / 100
	codes := make([]int32, stages*T)
	for i := range codes {
		codes[i] = int32(i/T*1000 + T)
	}
	return codes, T, nil
}
func (fakeCodec) SampleRate() int { return 8000 }
func (fakeCodec) Family() string  { return "fake" }

// Codec tokens run without a recogniser: codes at the codec's rate, the
// codec's model name in the records, per-item failures recorded, and a
// codec outside tokenize refused.
func TestRunCodec(t *testing.T) {
	dir := t.TempDir()
	manifest := synthManifest(t, dir, 6)
	items, err := ReadManifest(manifest)
	require.NoError(t, err)
	items = append(items, Item{Key: "short", Line: 7, Audio: clip(t, "words_1"), Duration: 0.005})
	cfg := Config{Mode: Tokenize, Out: filepath.Join(dir, "out"), Shard: Shard{0, 1}, Codec: fakeCodec{}, Codebooks: 3}
	sum, err := Run(context.Background(), nil, items, cfg)
	require.NoError(t, err)
	assert.Equal(t, 6, sum.Done)
	assert.Equal(t, 1, sum.Failed)
	recs := readRecords(t, sum.Manifest)
	require.Len(t, recs, 7)
	for _, r := range recs[:6] {
		codes, err := npy.ReadFile(filepath.Join(cfg.Out, r["codes_filepath"].(string)))
		require.NoError(t, err)
		T := int(r["duration"].(float64) * 8000 / 100)
		assert.Equal(t, []int{3, T}, []int(codes.Shape()), r["id"])
		assert.Equal(t, float64(3), r["num_codebooks"])
	}
	assert.Contains(t, recs[6]["error"], "want at least one frame")
	rep, err := Verify(items, cfg, CodecModel("fake", 3))
	require.NoError(t, err)
	assert.Equal(t, 6, rep.OK)
	assert.Empty(t, rep.Problems)

	_, err = Run(context.Background(), nil, items, Config{Mode: Transcribe, Out: cfg.Out, Shard: Shard{0, 1}, Codec: fakeCodec{}, Codebooks: 3})
	assert.ErrorContains(t, err, "a codec tokenises")
	_, err = Run(context.Background(), nil, items, Config{Mode: Tokenize, Out: cfg.Out, Shard: Shard{0, 1}})
	assert.ErrorContains(t, err, "no recogniser and no codec")
}
