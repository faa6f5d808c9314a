package serve

import (
	"context"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	vegeta "github.com/tsenart/vegeta/v12/lib"
)

// usage is what a leak would grow.
type usage struct {
	goroutines int
	fds        int
	rss        int64 // bytes
	heap       uint64
}

func measure(t *testing.T) usage {
	t.Helper()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	u := usage{goroutines: runtime.NumGoroutine(), heap: ms.HeapAlloc}
	if fds, err := os.ReadDir("/proc/self/fd"); err == nil {
		u.fds = len(fds)
	}
	if b, err := os.ReadFile("/proc/self/statm"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseInt(f[1], 10, 64)
			u.rss = pages * int64(os.Getpagesize())
		}
	}
	return u
}

// attack sends rate requests a second for d with vegeta and returns its
// metrics.
func attack(t *testing.T, client *http.Client, url string, body []byte, ct string, rate float64, d time.Duration) vegeta.Metrics {
	t.Helper()
	target := vegeta.Target{Method: http.MethodPost, URL: url + "/v1/audio/transcriptions", Body: body,
		Header: http.Header{"Content-Type": {ct}}}
	atk := vegeta.NewAttacker(vegeta.Client(client), vegeta.Workers(4), vegeta.MaxWorkers(64))
	pacer := vegeta.Rate{Freq: max(1, int(rate*10)), Per: 10 * time.Second}
	var m vegeta.Metrics
	for res := range atk.Attack(vegeta.NewStaticTargeter(target), pacer, d, "edge") {
		m.Add(res)
	}
	m.Close()
	return m
}

// The load test, bounded in time (8 to 12 s) and count, on loopback only:
// the server's capacity is measured first (closed loops); at a third of it every request succeeds; at twice it the answers
// are 200 or 429, never 5xx; afterwards goroutines, open files, RSS and the
// Go heap are back at their baseline and no upload is left on disk.
func TestLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: the vegeta load test takes 8-12 s of saturated CPU (make test runs it)")
	}
	cfg := testConfig(t)
	cfg.QueueSize, cfg.MaxBatch, cfg.Parallel = 4, 2, 2
	cfg.RequestTimeout = time.Minute
	s, url := startServer(t, cfg, realRecognizer(t))
	wav, _ := readClip(t, "words_1")
	clip := time.Duration(len(loadPCM(t, "words_1"))) * time.Second / 16000
	ctx := context.Background()

	// Capacity: the better of closed loops at 1 and at the in-flight limit
	// (on 2 cores concurrent requests contend, so either may be faster).
	capacity := 0.0
	for _, c := range []int{1, cfg.Parallel * cfg.MaxBatch} {
		r, err := Bench(ctx, BenchOptions{URL: url, File: wav, FileName: "words_1.wav", Audio: clip,
			Concurrency: c, Duration: time.Second})
		require.NoError(t, err)
		require.Zero(t, r.Errors, r.FirstError)
		require.Positive(t, r.Requests)
		t.Logf("closed loop, %d in flight: %.1f req/s, p50 %v, p95 %v, RTFx %.1f", c, r.RPS, r.P50, r.P95, r.RTFx)
		capacity = max(capacity, r.RPS)
	}

	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	body, ct := multipartBody(t, file("words_1.wav", wav), field("model", "whisper-1"))
	attack(t, client, url, body, ct, 2, 500*time.Millisecond) // the attack's own connections and goroutines
	client.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond)
	base := measure(t)

	under := attack(t, client, url, body, ct, capacity/3, 2*time.Second)
	t.Logf("%.1f req/s: %d requests, codes %v, p50 %v, p95 %v, max %v", capacity/3, under.Requests,
		under.StatusCodes, under.Latencies.P50, under.Latencies.P95, under.Latencies.Max)
	assert.Equal(t, map[string]int{"200": int(under.Requests)}, under.StatusCodes, "errors: %v", under.Errors)
	assert.Positive(t, under.Latencies.P95)

	// Twice the capacity. Other packages' tests share the CPU in CI, so the
	// capacity measured may have been low: a run without a single 429 means
	// the server kept up, and the rate doubles once more (bounded: 3 runs).
	rejected := 0
	for i, rate := 0, 2*capacity; i < 3 && rejected == 0; i, rate = i+1, 2*rate {
		over := attack(t, client, url, body, ct, rate, 2*time.Second)
		t.Logf("%.1f req/s: %d requests, codes %v, p50 %v, p95 %v", rate, over.Requests,
			over.StatusCodes, over.Latencies.P50, over.Latencies.P95)
		for code, n := range over.StatusCodes {
			assert.Contains(t, []string{"200", "429"}, code, "%d answers %s: %v", n, code, over.Errors)
		}
		assert.Positive(t, over.StatusCodes["200"])
		rejected = over.StatusCodes["429"]
	}
	assert.Positive(t, rejected, "over capacity, a queue of %d overflows", cfg.QueueSize)

	client.CloseIdleConnections()
	requireSpoolEmpty(t, s)
	var after usage
	deadline := time.Now().Add(5 * time.Second)
	for {
		after = measure(t)
		settled := after.goroutines <= base.goroutines+2 && after.fds <= base.fds+2 &&
			after.heap <= base.heap+16<<20 && after.rss <= base.rss+64<<20
		if settled || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("baseline %+v, after %+v", base, after)
	if after.goroutines > base.goroutines {
		var b strings.Builder
		_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
		t.Logf("goroutines after the run:\n%s", b.String())
	}
	assert.LessOrEqual(t, after.goroutines, base.goroutines+2, "goroutines")
	assert.LessOrEqual(t, after.fds, base.fds+2, "open files")
	assert.LessOrEqual(t, after.heap, base.heap+16<<20, "Go heap")
	assert.LessOrEqual(t, after.rss, base.rss+64<<20, "RSS")
	assert.Zero(t, s.sched.admitted.Load())
}
