package serve

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"slices"
	"sync"
	"time"
)

// BenchOptions configures Bench: a closed-loop load of Concurrency clients,
// each posting File to URL's /v1/audio/transcriptions and waiting for the
// answer before it posts again, for Duration.
type BenchOptions struct {
	URL         string // the server's base URL, e.g. http://127.0.0.1:8080
	APIKey      string // sent as a bearer token when set
	File        []byte // the audio file
	FileName    string
	Audio       time.Duration // the file's audio duration, for RTFx
	Format      string        // response_format ("" = json)
	Concurrency int
	Duration    time.Duration
	// Client is the HTTP client (nil: one with enough idle connections for
	// Concurrency).
	Client *http.Client
}

// BenchResult is one Bench run. Latencies are of successful (200)
// requests; RPS and RTFx count them only, over the run's wall time.
type BenchResult struct {
	Concurrency int           `json:"concurrency"`
	Requests    int           `json:"requests"` // answered 200
	Rejected    int           `json:"rejected"` // answered 429
	Errors      int           `json:"errors"`   // anything else
	Wall        time.Duration `json:"wall_ns"`
	RPS         float64       `json:"requests_per_second"`
	P50         time.Duration `json:"p50_ns"`
	P95         time.Duration `json:"p95_ns"`
	P99         time.Duration `json:"p99_ns"`
	// RTFx is seconds of audio transcribed per second of wall time.
	RTFx float64 `json:"rtfx"`
	// FirstError describes the first error, if any.
	FirstError string `json:"first_error,omitempty"`
}

// Bench drives a server as BenchOptions says and measures it. It stops at
// Duration or when ctx ends; requests in flight then are waited for.
func Bench(ctx context.Context, o BenchOptions) (BenchResult, error) {
	if o.Concurrency < 1 || o.Duration <= 0 || len(o.File) == 0 {
		return BenchResult{}, fmt.Errorf("serve bench: want concurrency >= 1, a duration and a file")
	}
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	fw, err := mw.CreateFormFile("file", o.FileName)
	if err != nil {
		return BenchResult{}, err
	}
	_, _ = fw.Write(o.File)
	_ = mw.WriteField("model", "edge")
	if o.Format != "" {
		_ = mw.WriteField("response_format", o.Format)
	}
	if err := mw.Close(); err != nil {
		return BenchResult{}, err
	}
	payload, ctype := body.Bytes(), mw.FormDataContentType()
	client := o.Client
	if client == nil {
		client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: o.Concurrency, MaxConnsPerHost: o.Concurrency}}
		defer client.CloseIdleConnections()
	}
	url := o.URL + "/v1/audio/transcriptions"
	ctx, cancel := context.WithTimeout(ctx, o.Duration)
	defer cancel()
	var (
		mu  sync.Mutex
		res = BenchResult{Concurrency: o.Concurrency}
		lat []time.Duration
		wg  sync.WaitGroup
	)
	start := time.Now()
	for range o.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(payload))
				if err != nil {
					return
				}
				req.Header.Set("Content-Type", ctype)
				if o.APIKey != "" {
					req.Header.Set("Authorization", "Bearer "+o.APIKey)
				}
				t0 := time.Now()
				resp, err := client.Do(req) // not ctx: the last requests finish
				took := time.Since(t0)
				code := 0
				var msg []byte
				if err == nil {
					code = resp.StatusCode
					msg, _ = io.ReadAll(io.LimitReader(resp.Body, 1<<20))
					resp.Body.Close()
				}
				mu.Lock()
				switch {
				case code == http.StatusOK:
					res.Requests++
					lat = append(lat, took)
				case code == http.StatusTooManyRequests:
					res.Rejected++
				default:
					res.Errors++
					if res.FirstError == "" {
						if err != nil {
							res.FirstError = err.Error()
						} else {
							res.FirstError = fmt.Sprintf("%d %s", code, bytes.TrimSpace(msg))
						}
					}
				}
				mu.Unlock()
				if code == http.StatusTooManyRequests {
					time.Sleep(10 * time.Millisecond)
				}
			}
		}()
	}
	wg.Wait()
	res.Wall = time.Since(start)
	slices.Sort(lat)
	res.P50, res.P95, res.P99 = quantile(lat, 0.50), quantile(lat, 0.95), quantile(lat, 0.99)
	res.RPS = float64(res.Requests) / res.Wall.Seconds()
	res.RTFx = float64(res.Requests) * o.Audio.Seconds() / res.Wall.Seconds()
	return res, nil
}

// quantile of sorted durations (nearest rank); 0 for none.
func quantile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}
