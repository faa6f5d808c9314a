package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/serve"
)

// serveConfig parses args as edge serve does and returns the server
// configuration.
func serveConfig(t *testing.T, args ...string) (serve.Config, error) {
	t.Helper()
	o, err := parseServe(args)
	if err != nil {
		return serve.Config{}, err
	}
	return o.cfg, nil
}

// The serve.* keys layer like every other key: defaults < YAML < EDGE_SERVE__* < flags.
func TestServeConfigLayers(t *testing.T) {
	dir := t.TempDir()
	yaml := filepath.Join(dir, "edge.yaml")
	require.NoError(t, os.WriteFile(yaml, []byte("serve:\n  max_batch: 6\n  queue_size: 9\n  batch_wait: 7ms\n  languages: [en]\n"), 0o644))
	t.Setenv("EDGE_SERVE__QUEUE_SIZE", "11")
	t.Setenv("EDGE_SERVE__REQUEST_TIMEOUT", "45s")
	cfg, err := serveConfig(t, "--config", yaml, "--listen", "127.0.0.1:9999", "--parallel", "3")
	require.NoError(t, err)
	def := serve.DefaultConfig()
	assert.Equal(t, 6, cfg.MaxBatch, "from the file")
	assert.Equal(t, 11, cfg.QueueSize, "the environment over the file")
	assert.Equal(t, 7*time.Millisecond, cfg.BatchWait)
	assert.Equal(t, 45*time.Second, cfg.RequestTimeout)
	assert.Equal(t, []string{"en"}, cfg.Languages)
	assert.Equal(t, "127.0.0.1:9999", cfg.Listen, "flags over everything")
	assert.Equal(t, 3, cfg.Parallel)
	assert.Equal(t, def.MaxUploadBytes, cfg.MaxUploadBytes, "defaults stay")

	t.Setenv("EDGE_SERVE__LANGUAGES", "en,fr")
	cfg, err = serveConfig(t, "--config", yaml)
	require.NoError(t, err)
	assert.Equal(t, []string{"en", "fr"}, cfg.Languages)

	t.Setenv("EDGE_SERVE__MAX_BACH", "4")
	_, err = serveConfig(t)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "max_bach")
	os.Unsetenv("EDGE_SERVE__MAX_BACH")

	t.Setenv("EDGE_SERVE__MAX_BATCH", "many")
	_, err = serveConfig(t)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "max_batch")
}

// edge serve --bench starts the service on a loopback port, loads it and
// prints its table.
func TestServeBench(t *testing.T) {
	code, out, errOut := capture(t, "serve", "--model", "../../models/default", "--bench", "1,2",
		"--bench-duration", "300ms", "--bench-audio", "../../models/default/testdata/words_1.wav")
	require.Equal(t, 0, code, errOut)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 4, out)
	assert.Contains(t, lines[0], "edge serve --bench")
	assert.Equal(t, []string{"concurrency", "requests", "req/s", "p50_ms", "p95_ms", "RTFx", "429s", "errors"}, strings.Fields(lines[1]))
	for i, c := range []string{"1", "2"} {
		f := strings.Fields(lines[2+i])
		require.Len(t, f, 8, lines[2+i])
		assert.Equal(t, c, f[0])
		assert.NotEqual(t, "0", f[1], "requests answered")
		assert.Equal(t, "0", f[7], "no errors")
	}
	assert.Contains(t, errOut, "ready: model edge-char-ctc")
}

// The stream limits are serve.* keys too, flat beside the others.
func TestServeStreamConfig(t *testing.T) {
	def := serve.DefaultConfig().Streams
	cfg, err := serveConfig(t)
	require.NoError(t, err)
	assert.Empty(t, cfg.Streams.StreamOrigins)
	cfg.Streams.StreamOrigins = nil
	assert.Equal(t, def, cfg.Streams)
	t.Setenv("EDGE_SERVE__MAX_STREAMS", "3")
	t.Setenv("EDGE_SERVE__STREAM_IDLE_TIMEOUT", "5s")
	cfg, err = serveConfig(t, "--max-stream-duration", "10m", "--max-frame-bytes", "8192", "--stream-origins", "*.example.com")
	require.NoError(t, err)
	assert.Equal(t, 3, cfg.Streams.MaxStreams)
	assert.Equal(t, 5*time.Second, cfg.Streams.StreamIdleTimeout)
	assert.Equal(t, 10*time.Minute, cfg.Streams.MaxStreamDuration)
	assert.Equal(t, int64(8192), cfg.Streams.MaxFrameBytes)
	assert.Equal(t, []string{"*.example.com"}, cfg.Streams.StreamOrigins)
	_, err = serve.New(func() serve.Config { c := cfg; c.Streams.MaxStreams = 0; return c }())
	require.Error(t, err)
	assert.Contains(t, err.Error(), "serve.max_streams")
}
