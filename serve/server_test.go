package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/asr"
	"github.com/edgespeech/edge/asr/transcript"
)

// gate is a fake recogniser whose calls block until released (or their
// context ends), counting how many run at once.
type gate struct {
	fakeRecognizer
	started chan struct{}
	release chan struct{}
	running atomic.Int32
	peak    atomic.Int32
	calls   atomic.Int32
	errs    chan error // each call's context error on return
}

func newGate() *gate {
	g := &gate{started: make(chan struct{}, 100), release: make(chan struct{}), errs: make(chan error, 100)}
	g.run = func(ctx context.Context, _ []float32) error {
		g.calls.Add(1)
		n := g.running.Add(1)
		defer g.running.Add(-1)
		for p := g.peak.Load(); n > p && !g.peak.CompareAndSwap(p, n); p = g.peak.Load() {
		}
		g.started <- struct{}{}
		select {
		case <-g.release:
			g.errs <- nil
			return nil
		case <-ctx.Done():
			g.errs <- ctx.Err()
			return ctx.Err()
		}
	}
	return g
}

func (g *gate) waitStarted(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-g.started:
		case <-time.After(10 * time.Second):
			t.Fatal("the recogniser was not called")
		}
	}
}

// async posts a form in the background.
type answer struct {
	status int
	header http.Header
	body   []byte
	err    error
}

func postAsync(ctx context.Context, t *testing.T, url string, parts ...part) chan answer {
	body, ct := multipartBody(t, parts...)
	ch := make(chan answer, 1)
	go func() {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			ch <- answer{err: err}
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		ch <- answer{status: resp.StatusCode, header: resp.Header, body: b}
	}()
	return ch
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// metric scrapes /metrics and returns the value of the first series line
// starting with prefix.
func metric(t *testing.T, url, prefix string) float64 {
	t.Helper()
	_, _, body := do(t, mustRequest(http.MethodGet, url+"/metrics"))
	for _, line := range strings.Split(string(body), "\n") {
		if strings.HasPrefix(line, prefix+" ") {
			v, err := strconv.ParseFloat(strings.TrimPrefix(line, prefix+" "), 64)
			require.NoError(t, err)
			return v
		}
	}
	return 0
}

func mustRequest(method, url string) *http.Request {
	r, err := http.NewRequest(method, url, nil)
	if err != nil {
		panic(err)
	}
	return r
}

var tick = silence(16000)

func TestQueueFullIs429(t *testing.T) {
	cfg := testConfig(t)
	cfg.QueueSize, cfg.MaxBatch, cfg.Parallel = 0, 1, 1
	g := newGate()
	_, url := startServer(t, cfg, g)
	tr := url + "/v1/audio/transcriptions"
	first := postAsync(context.Background(), t, tr, file("a.wav", tick))
	g.waitStarted(t, 1)
	status, h, body := post(t, tr, file("b.wav", tick))
	requireError(t, 429, "rate_limit_exceeded", status, h, body)
	ra, err := strconv.Atoi(h.Get("Retry-After"))
	require.NoError(t, err)
	assert.GreaterOrEqual(t, ra, 1)
	close(g.release)
	a := <-first
	require.NoError(t, a.err)
	assert.Equal(t, 200, a.status, "%s", a.body)
	status, _, body = post(t, tr, file("c.wav", tick))
	assert.Equal(t, 200, status, "%s", body)
	assert.Equal(t, 1.0, metric(t, url, `edge_serve_requests_total{code="429",route="/v1/audio/transcriptions"}`))
}

// Requests that queue while a batch runs form the next batch, whose
// requests run at the same time.
func TestBatching(t *testing.T) {
	cfg := testConfig(t)
	cfg.QueueSize, cfg.MaxBatch, cfg.Parallel, cfg.BatchWait = 16, 4, 1, 20*time.Millisecond
	g := newGate()
	s, url := startServer(t, cfg, g)
	tr := url + "/v1/audio/transcriptions"
	answers := []chan answer{postAsync(context.Background(), t, tr, file("a.wav", tick))}
	g.waitStarted(t, 1)
	for range 4 {
		answers = append(answers, postAsync(context.Background(), t, tr, file("b.wav", tick)))
	}
	waitFor(t, "4 queued requests", func() bool { return s.sched.queued.Load() == 4 })
	assert.Equal(t, 4.0, metric(t, url, "edge_serve_queue_depth"))
	g.release <- struct{}{}
	g.waitStarted(t, 4)
	assert.Equal(t, int32(4), g.running.Load(), "the second batch's 4 requests run together")
	for range 4 {
		g.release <- struct{}{}
	}
	for _, ch := range answers {
		a := <-ch
		require.NoError(t, a.err)
		assert.Equal(t, 200, a.status, "%s", a.body)
	}
	assert.Equal(t, int32(4), g.peak.Load())
	assert.Equal(t, 2.0, metric(t, url, "edge_serve_batch_size_count"))
	assert.Equal(t, 5.0, metric(t, url, "edge_serve_batch_size_sum"))
	assert.Equal(t, 0.0, metric(t, url, "edge_serve_queue_depth"))
}

// A client that goes away cancels its running request and drops its queued
// one unstarted.
func TestClientDisconnectCancels(t *testing.T) {
	cfg := testConfig(t)
	cfg.QueueSize, cfg.MaxBatch, cfg.Parallel = 4, 1, 1
	g := newGate()
	s, url := startServer(t, cfg, g)
	tr := url + "/v1/audio/transcriptions"
	ctxA, cancelA := context.WithCancel(context.Background())
	a := postAsync(ctxA, t, tr, file("a.wav", tick))
	g.waitStarted(t, 1)
	ctxB, cancelB := context.WithCancel(context.Background())
	b := postAsync(ctxB, t, tr, file("b.wav", tick))
	waitFor(t, "a queued request", func() bool { return s.sched.queued.Load() == 1 })
	cancelB()
	require.Error(t, (<-b).err)
	// The server notices the closed connection asynchronously: its handler
	// gives up (a 499) before A's slot frees.
	waitFor(t, "the queued request's handler to give up", func() bool {
		return metric(t, url, `edge_serve_requests_total{code="499",route="/v1/audio/transcriptions"}`) == 1
	})
	cancelA()
	require.Error(t, (<-a).err)
	select {
	case err := <-g.errs:
		assert.ErrorIs(t, err, context.Canceled, "the running request's context is cancelled")
	case <-time.After(10 * time.Second):
		t.Fatal("the running request was not cancelled")
	}
	waitFor(t, "the queued request dropped", func() bool {
		return metric(t, url, `edge_serve_dropped_total{reason="cancelled"}`) == 1
	})
	assert.Equal(t, int32(1), g.calls.Load(), "the dropped request never reached the recogniser")
	waitFor(t, "two 499s", func() bool {
		return metric(t, url, `edge_serve_requests_total{code="499",route="/v1/audio/transcriptions"}`) == 2
	})
	requireSpoolEmpty(t, s)
}

func TestRequestTimeout(t *testing.T) {
	cfg := testConfig(t)
	cfg.RequestTimeout = 200 * time.Millisecond
	g := newGate()
	_, url := startServer(t, cfg, g)
	status, h, body := post(t, url+"/v1/audio/transcriptions", file("a.wav", tick))
	requireError(t, 504, "timeout", status, h, body)
	assert.ErrorIs(t, <-g.errs, context.DeadlineExceeded)
}

type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// A panic in the recogniser is a 500 JSON answer with nothing of the panic
// in it, logged with its stack; the server keeps serving.
func TestPanicIsA500(t *testing.T) {
	cfg := testConfig(t)
	var logs logBuffer
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	var calls atomic.Int32
	fake := &fakeRecognizer{run: func(context.Context, []float32) error {
		if calls.Add(1) == 1 {
			panic("secret /etc/shadow")
		}
		return nil
	}}
	s, url := startServer(t, cfg, fake)
	status, h, body := post(t, url+"/v1/audio/transcriptions", file("a.wav", tick))
	requireError(t, 500, "internal_error", status, h, body)
	assert.NotContains(t, string(body), "shadow")
	assertNoLeak(t, s, body)
	assert.Contains(t, logs.String(), "secret /etc/shadow")
	assert.Contains(t, logs.String(), "goroutine")
	status, _, body = post(t, url+"/v1/audio/transcriptions", file("a.wav", tick))
	assert.Equal(t, 200, status, "%s", body)
	requireSpoolEmpty(t, s)
}

// Shutdown turns /health 503, refuses new work with 503, lets admitted
// requests finish, then stops.
func TestDrain(t *testing.T) {
	cfg := testConfig(t)
	cfg.QueueSize, cfg.MaxBatch, cfg.Parallel = 4, 1, 1
	g := newGate()
	s, err := New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", cfg.Listen)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	s.Ready(g, nil)
	url := "http://" + ln.Addr().String()
	tr := url + "/v1/audio/transcriptions"
	running := postAsync(context.Background(), t, tr, file("a.wav", tick))
	g.waitStarted(t, 1)
	queued := postAsync(context.Background(), t, tr, file("b.wav", tick))
	waitFor(t, "a queued request", func() bool { return s.sched.queued.Load() == 1 })

	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	waitFor(t, "draining", func() bool { return s.state.Load() == stateDraining })
	status, _, body := do(t, mustRequest(http.MethodGet, url+"/health"))
	assert.Equal(t, 503, status)
	assert.JSONEq(t, `{"status":"draining"}`, string(body))
	status, h, body := post(t, tr, file("c.wav", tick))
	requireError(t, 503, "shutting_down", status, h, body)

	go func() {
		for range 2 {
			g.release <- struct{}{}
		}
	}()
	for _, ch := range []chan answer{running, queued} {
		a := <-ch
		require.NoError(t, a.err)
		assert.Equal(t, 200, a.status, "%s", a.body)
	}
	require.NoError(t, <-shut)
	require.ErrorIs(t, <-served, http.ErrServerClosed)
	_, err = http.Get(url + "/health")
	assert.Error(t, err, "the listener is closed")
}

// Past the drain timeout the requests left are cancelled and answered 503.
func TestDrainTimeoutCancels(t *testing.T) {
	cfg := testConfig(t)
	cfg.DrainTimeout = 100 * time.Millisecond
	g := newGate()
	s, err := New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", cfg.Listen)
	require.NoError(t, err)
	go func() { _ = s.Serve(ln) }()
	s.Ready(g, nil)
	a := postAsync(context.Background(), t, "http://"+ln.Addr().String()+"/v1/audio/transcriptions", file("a.wav", tick))
	g.waitStarted(t, 1)
	require.NoError(t, s.Shutdown(context.Background()))
	assert.ErrorIs(t, <-g.errs, context.Canceled)
	ans := <-a
	require.NoError(t, ans.err)
	requireError(t, 503, "shutting_down", ans.status, ans.header, ans.body)
}

func TestLoadingIs503(t *testing.T) {
	s, url := startServer(t, testConfig(t), nil)
	status, h, body := do(t, mustRequest(http.MethodGet, url+"/health"))
	assert.Equal(t, 503, status)
	assert.Equal(t, "5", h.Get("Retry-After"))
	assert.JSONEq(t, `{"status":"loading"}`, string(body))
	status, h, body = post(t, url+"/v1/audio/transcriptions", file("a.wav", tick))
	requireError(t, 503, "model_loading", status, h, body)
	assert.Equal(t, 0.0, metric(t, url, "edge_serve_ready"))
	s.Ready(&fakeRecognizer{}, nil)
	status, _, body = do(t, mustRequest(http.MethodGet, url+"/health"))
	assert.Equal(t, 200, status)
	assert.JSONEq(t, `{"status":"ok","model":"fake"}`, string(body))
	assert.Equal(t, 1.0, metric(t, url, "edge_serve_ready"))
}

func TestAPIKey(t *testing.T) {
	cfg := testConfig(t)
	cfg.APIKeyFile = t.TempDir() + "/key"
	require.NoError(t, os.WriteFile(cfg.APIKeyFile, []byte("  sk-from-file\n"), 0o600))
	_, url := startServer(t, cfg, &fakeRecognizer{})
	for _, auth := range []string{"", "Bearer", "Bearer sk-wrong", "Basic sk-from-file", "sk-from-file"} {
		for _, path := range []string{"/v1/audio/transcriptions", "/metrics"} {
			body, ct := multipartBody(t, file("a.wav", tick))
			req, _ := http.NewRequest(http.MethodPost, url+path, bytes.NewReader(body))
			req.Header.Set("Content-Type", ct)
			if auth != "" {
				req.Header.Set("Authorization", auth)
			}
			status, h, b := do(t, req)
			requireError(t, 401, "invalid_api_key", status, h, b)
			assert.Equal(t, `Bearer realm="edge"`, h.Get("WWW-Authenticate"))
		}
	}
	status, _, _ := do(t, mustRequest(http.MethodGet, url+"/health"))
	assert.Equal(t, 200, status, "health needs no key")
	body, ct := multipartBody(t, file("a.wav", tick))
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/audio/transcriptions", bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	req.Header.Set("Authorization", "bearer sk-from-file")
	status, _, b := do(t, req)
	assert.Equal(t, 200, status, "%s", b)
	req = mustRequest(http.MethodGet, url+"/metrics")
	req.Header.Set("Authorization", "Bearer sk-from-file")
	status, h, b := do(t, req)
	assert.Equal(t, 200, status)
	assert.Contains(t, h.Get("Content-Type"), "text/plain")
	for _, name := range []string{"edge_serve_requests_total", "edge_serve_request_duration_seconds", "edge_serve_queue_depth",
		"edge_serve_audio_seconds_total", "edge_serve_processing_seconds_total", "edge_serve_stage_seconds", "edge_serve_queue_wait_seconds",
		"edge_serve_batch_size", "edge_serve_real_time_factor", "go_goroutines", "process_resident_memory_bytes"} {
		assert.Contains(t, string(b), "# TYPE "+name+" ", name)
	}
}

func TestConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		edit func(c *Config)
		want string
	}{
		{func(c *Config) { c.Listen = "8080" }, "serve.listen"},
		{func(c *Config) { c.MaxUploadBytes = 0 }, "serve.max_upload_bytes"},
		{func(c *Config) { c.MaxBatch = 0 }, "serve.max_batch"},
		{func(c *Config) { c.Parallel = 0 }, "serve.parallel"},
		{func(c *Config) { c.QueueSize = -1 }, "serve.queue_size"},
		{func(c *Config) { c.RequestTimeout = 0 }, "serve.request_timeout"},
		{func(c *Config) { c.Languages = []string{"english"} }, "serve.languages"},
		{func(c *Config) { c.APIKey, c.APIKeyFile = "a", "b" }, "not both"},
		{func(c *Config) { c.APIKeyFile = "/nonexistent/key" }, "serve.api_key_file"},
	} {
		c := DefaultConfig()
		tc.edit(&c)
		err := c.check()
		require.Error(t, err)
		assert.Contains(t, err.Error(), tc.want)
	}
	c := DefaultConfig()
	require.NoError(t, c.check())
	assert.True(t, Loopback(c.Listen), "loopback by default")
	for addr, want := range map[string]bool{"127.0.0.1:80": true, "[::1]:80": true, "localhost:80": true,
		"0.0.0.0:80": false, ":80": false, "192.168.1.2:80": false, "bad": false} {
		assert.Equal(t, want, Loopback(addr), addr)
	}
}

// verbose_json's segments are the srt cues; alignment JSON is edge's
// transcript JSON.
func TestSegmentsAreTheSubtitleCues(t *testing.T) {
	r := realRecognizer(t)
	pcm := loadPCM(t, "demo")
	tr, err := r.Transcribe(context.Background(), pcm)
	require.NoError(t, err)
	audio := time.Duration(len(pcm)) * time.Second / 16000
	body, ct, err := render(tr, audio, formatVerboseJSON, true, true, "transcribe", "en", "m")
	require.NoError(t, err)
	assert.Equal(t, "application/json", ct)
	var v verbose
	require.NoError(t, json.Unmarshal(body, &v))
	var srt bytes.Buffer
	require.NoError(t, transcript.Write(&srt, tr, transcript.SRT, transcript.WriteOptions{}))
	cue := regexp.MustCompile(`(\d\d):(\d\d):(\d\d),(\d{3}) --> (\d\d):(\d\d):(\d\d),(\d{3})\n(.*)\n`)
	cues := cue.FindAllStringSubmatch(srt.String(), -1)
	require.Len(t, v.Segments, len(cues))
	require.Greater(t, len(cues), 1, "the demo clip makes several cues")
	sec := func(m []string) float64 {
		h, _ := strconv.Atoi(m[0])
		mi, _ := strconv.Atoi(m[1])
		s, _ := strconv.Atoi(m[2])
		ms, _ := strconv.Atoi(m[3])
		return float64(h*3600+mi*60+s) + float64(ms)/1000
	}
	for i, c := range cues {
		assert.InDelta(t, sec(c[1:5]), v.Segments[i].Start, 1e-3)
		assert.InDelta(t, sec(c[5:9]), v.Segments[i].End, 1e-3)
		assert.Equal(t, c[9], v.Segments[i].Text)
		assert.Greater(t, v.Segments[i].Confidence, 0.5)
		assert.Greater(t, v.Segments[i].CompressionRatio, 0.0)
	}
	assert.InDelta(t, audio.Seconds(), v.Duration, 1e-3)
	assert.Len(t, v.Words, len(tr.Words))

	body, ct, err = render(tr, audio, formatJSON, false, true, "align", "", "m")
	require.NoError(t, err)
	assert.Equal(t, "application/json", ct)
	var want bytes.Buffer
	require.NoError(t, transcript.Write(&want, tr, transcript.JSON, transcript.WriteOptions{}))
	assert.Equal(t, want.String(), string(body))
	for _, f := range formats {
		_, _, err := render(tr, audio, f, true, true, "transcribe", "", "m")
		assert.NoError(t, err, f)
	}
	_, _, err = render(tr, audio, "xml", false, false, "transcribe", "", "m")
	assert.Error(t, err)
	assert.Equal(t, fmt.Sprint(0.0), fmt.Sprint(compressionRatio("")))
}

// With a batching recogniser whose OnEncode is Server.EncoderRun,
// concurrent requests share encoder runs, edge_serve_encoder_batch_items
// shows it, and every answer is the clip's text.
func TestEncoderBatchMetric(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxBatch, cfg.Parallel, cfg.BatchWait = 4, 2, 50*time.Millisecond
	s, err := New(cfg)
	require.NoError(t, err)
	r, err := asr.Open(defaultModel, asr.Options{Batch: 4, BatchWait: cfg.BatchWait, OnEncode: s.EncoderRun})
	require.NoError(t, err)
	defer r.Close()
	ln, err := net.Listen("tcp", cfg.Listen)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	s.Ready(r, nil)
	defer func() {
		require.NoError(t, s.Shutdown(context.Background()))
		require.ErrorIs(t, <-done, http.ErrServerClosed)
	}()
	url := "http://" + ln.Addr().String()
	wav, text := readClip(t, "words_1")
	var answers []chan answer
	for range 8 {
		answers = append(answers, postAsync(context.Background(), t, url+"/v1/audio/transcriptions", file("a.wav", wav), field("response_format", "text")))
	}
	for _, ch := range answers {
		a := <-ch
		require.NoError(t, a.err)
		require.Equal(t, 200, a.status, "%s", a.body)
		assert.Equal(t, text, strings.TrimSpace(string(a.body)))
	}
	runs, items := metric(t, url, "edge_serve_encoder_batch_items_count"), metric(t, url, "edge_serve_encoder_batch_items_sum")
	t.Logf("8 requests: %g encoder runs of %g chunks", runs, items)
	assert.Equal(t, 8.0, items)
	assert.Less(t, runs, 8.0, "no encoder run held more than one request's chunk")
}
