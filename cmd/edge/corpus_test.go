package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// edge batch over a small manifest: results, the shard manifest, a
// recorded failure, a resuming rerun and --verify.
func TestBatchCLI(t *testing.T) {
	dir := t.TempDir()
	clip, err := filepath.Abs(demoClip)
	require.NoError(t, err)
	manifest := filepath.Join(dir, "m.jsonl")
	require.NoError(t, os.WriteFile(manifest, []byte(fmt.Sprintf(
		"{\"audio_filepath\": %q, \"duration\": 2}\n{\"audio_filepath\": %q, \"offset\": 1, \"duration\": 1.5}\n{\"audio_filepath\": \"gone.wav\"}\n", clip, clip)), 0o644))
	out := filepath.Join(dir, "out")
	args := []string{"batch", "transcribe", "--model", bundledModel, "--manifest", manifest, "--out", out, "--progress", "json"}
	code, _, stderr := capture(t, args...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, `"final":true`)
	assert.Contains(t, stderr, "1 of 3 items failed")

	b, err := os.ReadFile(filepath.Join(out, "transcribe.shard-00000-of-00001.jsonl"))
	require.NoError(t, err)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	require.Len(t, lines, 3)
	var first map[string]any
	require.NoError(t, json.Unmarshal([]byte(lines[0]), &first))
	assert.Equal(t, "ok", first["status"])
	assert.NotEmpty(t, first["pred_text"])
	assert.FileExists(t, filepath.Join(out, first["alignment_filepath"].(string)))
	assert.Contains(t, lines[2], `"status":"error"`)

	code, _, stderr = capture(t, args...)
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, `"skipped":3`)

	code, stdout, _ := capture(t, append(args, "--verify")...)
	require.Equal(t, 0, code)
	assert.Contains(t, stdout, `"ok": 2`)

	// Shards from the environment; a bad shard is an error.
	t.Setenv("SLURM_ARRAY_TASK_ID", "7")
	t.Setenv("SLURM_ARRAY_TASK_COUNT", "2")
	code, _, stderr = capture(t, args...)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "shard index 7 of 2")

	code, _, stderr = capture(t, "batch", "summarise", "--manifest", manifest, "--out", out)
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, `mode "summarise"`)
}
