// Package serve is edge's speech service: an HTTP server with OpenAI's
// audio transcription API in front of an asr.Recognizer.
//
// Routes:
//
//	POST /v1/audio/transcriptions  multipart: file, model, language, prompt, temperature,
//	                               response_format json|text|srt|vtt|verbose_json (edge: ctm|tsv),
//	                               timestamp_granularities[] word|segment (verbose_json only)
//	POST /v1/audio/alignments      multipart: file, text, response_format (as above; json is
//	                               edge's transcript JSON, the `edge align --format json` result)
//	GET  /health                   200 {"status":"ok"} when ready; 503 while loading or draining
//	GET  /metrics                  Prometheus text format (see metrics)
//	GET  /v1/audio/stream          WebSocket: live PCM in, partial/final JSON out (see stream.go)
//	/v1/realtime                   501 naming /v1/audio/stream: OpenAI's Realtime protocol is not spoken
//
// Every error is JSON, {"error": {"message", "type", "param", "code"}}, as
// OpenAI's are: 400 for a malformed request or a file that is not audio,
// 401 for a missing or wrong API key, 413 for an upload or audio over the
// limits, 429 with Retry-After when the queue is full, 503 while the model
// loads or the server drains, 504 past the request timeout, 500 (logged,
// never detailed in the answer) for the server's own failures.
//
// Requests go through a scheduler (see scheduler): a bounded admission
// limit, a queue, and batches of requests that arrived together. A batch's
// requests run concurrently on the recogniser (which is safe for concurrent
// use and overlaps their stages); an asr.Recognizer opened with
// Options.Batch encodes the chunks that reach its encoder together in one
// run (edge serve sets it to MaxBatch and BatchWait, and counts the runs'
// sizes with EncoderRun).
//
// A Server is safe for concurrent use. Its lifecycle: New, Serve (answers
// 503 until Ready), Ready, Shutdown (drains, then stops).
package serve

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/edgespeech/edge/asr"
	"github.com/edgespeech/edge/asr/transcript"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/model"
)

// Recognizer is what the server recognises speech with; *asr.Recognizer is
// one. Its methods are called from many goroutines at once.
type Recognizer interface {
	// Transcribe and Align take mono PCM at Manifest().SampleRate.
	Transcribe(ctx context.Context, pcm []float32) (*transcript.Transcript, error)
	Align(ctx context.Context, pcm []float32, text string) (*transcript.Transcript, error)
	Manifest() *model.Manifest
}

// Server states.
const (
	stateLoading int32 = iota
	stateReady
	stateDraining
)

// loaded is the recogniser the server answers with.
type loaded struct {
	rec    Recognizer
	name   string
	rate   int
	align  bool                  // the model can align text (a character vocabulary)
	memory func() []memorySample // device memory, nil when not reported

	// languages are serve.languages, or else the manifest's language:
	// requests naming another get 400; empty accepts any code.
	languages []string
}

// Server answers the routes in the package doc.
type Server struct {
	cfg   Config
	log   *slog.Logger
	dir   string // private spool directory
	sched *scheduler
	m     *metrics
	state atomic.Int32
	eng   atomic.Pointer[loaded]

	base   context.Context // cancelled when a drain times out
	cancel context.CancelFunc

	mu   sync.Mutex
	srvs []*http.Server

	streams streamSet

	// ewma is the mean seconds per request (exponentially weighted), for
	// Retry-After.
	ewmaMu sync.Mutex
	ewma   float64
}

// New validates cfg and returns a server in the loading state: it answers
// /health and /metrics, and 503 to recognition requests, until Ready.
func New(cfg Config) (*Server, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(cfg.TempDir, "edge-serve-")
	if err != nil {
		return nil, fmt.Errorf("serve: spool directory: %w", err)
	}
	s := &Server{cfg: cfg, log: cfg.Logger, dir: dir, ewma: 1}
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	s.base, s.cancel = context.WithCancel(context.Background())
	s.sched = newScheduler(&s.cfg, s.runBatch, s.dropped)
	s.m = newMetrics(s)
	return s, nil
}

// Ready makes the server answer with rec, which runs on backend (nil: the
// CPU; a backend that reports its memory feeds edge_serve_device_memory_bytes).
// The server does not close rec.
func (s *Server) Ready(rec Recognizer, backend runtime.Backend) {
	m := rec.Manifest()
	langs := s.cfg.Languages
	if len(langs) == 0 && m.Language != "" {
		langs = []string{m.Language}
	}
	s.eng.Store(&loaded{rec: rec, name: m.Name, rate: m.SampleRate, align: m.WordDelimiter != "", languages: langs, memory: deviceMemory(backend)})
	s.state.CompareAndSwap(stateLoading, stateReady)
}

func (s *Server) engine() *loaded { return s.eng.Load() }

// Serve answers on ln until Shutdown; it returns http.ErrServerClosed then.
func (s *Server) Serve(ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return s.base },
	}
	s.mu.Lock()
	if s.state.Load() == stateDraining {
		s.mu.Unlock()
		return http.ErrServerClosed
	}
	s.srvs = append(s.srvs, srv)
	s.mu.Unlock()
	return srv.Serve(ln)
}

// Shutdown drains the server: /health turns 503 and new requests get 503
// while admitted ones finish, for at most cfg.DrainTimeout (or until ctx
// ends), after which those left are cancelled. Then the listeners and idle
// connections close, the scheduler stops and the spool directory is
// removed. The recogniser is the caller's to close afterwards.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.state.Store(stateDraining)
	srvs := s.srvs
	s.mu.Unlock()
	s.streams.beginDrain()
	drain := time.NewTimer(s.cfg.DrainTimeout)
	defer drain.Stop()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
wait:
	for s.sched.admitted.Load() > 0 || s.streams.count() > 0 {
		select {
		case <-tick.C:
		case <-drain.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	if n, m := s.sched.admitted.Load(), s.streams.count(); n > 0 || m > 0 {
		s.log.Warn("drain timed out: cancelling requests", "requests", n, "streams", m)
	}
	s.cancel()
	s.streams.wait(10 * time.Second) // hijacked: srv.Shutdown does not wait for them
	var errs []error
	for _, srv := range srvs {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		errs = append(errs, srv.Shutdown(sctx))
		cancel()
	}
	s.sched.close()
	errs = append(errs, os.RemoveAll(s.dir))
	return errors.Join(errs...)
}

// Handler is the server's routes, for embedding in another server or
// httptest.
func (s *Server) Handler() http.Handler {
	metrics := promhttp.HandlerFor(s.m.reg, promhttp.HandlerOpts{ErrorLog: slog.NewLogLogger(s.log.Handler(), slog.LevelWarn)})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route := routeOf(r.URL.Path)
		rec := &statusWriter{ResponseWriter: w}
		start := time.Now()
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.Error("handler panic", "route", route, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				if !rec.wrote {
					writeError(rec, internalError())
				}
			}
			s.account(r, route, rec, time.Since(start))
		}()
		if route != "/health" && !s.authorized(r) {
			writeError(rec, newError(http.StatusUnauthorized, typeInvalidRequest, "", "invalid_api_key",
				"missing or incorrect API key: send Authorization: Bearer <key>"))
			return
		}
		var e *apiError
		switch route {
		case "/v1/audio/transcriptions":
			e = s.recognize(rec, r, "transcribe")
		case "/v1/audio/alignments":
			e = s.recognize(rec, r, "align")
		case "/health":
			e = onlyMethod(r, http.MethodGet, http.MethodHead)
			if e == nil {
				s.health(rec)
			}
		case "/metrics":
			if e = onlyMethod(r, http.MethodGet, http.MethodHead); e == nil {
				metrics.ServeHTTP(rec, r)
			}
		case streamRoute:
			e = s.stream(rec, r)
		case "/v1/realtime":
			e = newError(http.StatusNotImplemented, typeInvalidRequest, "", "not_implemented",
				"OpenAI's Realtime API is not implemented; stream PCM over a WebSocket to GET %s instead (edge's own protocol)", streamRoute)
		default:
			e = newError(http.StatusNotFound, typeInvalidRequest, "", "unknown_url", "no route %s %s", r.Method, clip(r.URL.Path, 100))
		}
		if e != nil && !rec.wrote {
			writeError(rec, e)
		}
	})
}

// routeOf maps a path to its metrics label (unknown paths share one).
func routeOf(path string) string {
	switch path {
	case "/v1/audio/transcriptions", "/v1/audio/alignments", "/health", "/metrics", "/v1/realtime", streamRoute:
		return path
	}
	return "other"
}

func onlyMethod(r *http.Request, methods ...string) *apiError {
	for _, m := range methods {
		if r.Method == m {
			return nil
		}
	}
	return newError(http.StatusMethodNotAllowed, typeInvalidRequest, "", "method_not_allowed", "%s does not take %s; use %s",
		r.URL.Path, clip(r.Method, 16), strings.Join(methods, " or "))
}

// authorized checks the bearer token when an API key is configured.
func (s *Server) authorized(r *http.Request) bool {
	if s.cfg.APIKey == "" {
		return true
	}
	key := protocolKey(r) // a browser's WebSocket cannot send headers
	h := r.Header.Get("Authorization")
	const prefix = "Bearer "
	if len(h) >= len(prefix) && strings.EqualFold(h[:len(prefix)], prefix) {
		key = strings.TrimSpace(h[len(prefix):])
	}
	return key != "" && subtle.ConstantTimeCompare([]byte(key), []byte(s.cfg.APIKey)) == 1
}

func (s *Server) health(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	switch s.state.Load() {
	case stateReady:
		fmt.Fprintf(w, "{\"status\":\"ok\",\"model\":%q}\n", s.engine().name)
	case stateLoading:
		w.Header().Set("Retry-After", "5")
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, `{"status":"loading"}`)
	default:
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, `{"status":"draining"}`)
	}
}

// account records a finished request in the metrics and the log.
func (s *Server) account(r *http.Request, route string, w *statusWriter, took time.Duration) {
	code := w.status
	if !w.wrote {
		code = 499 // the client went away before an answer
	}
	s.m.requests.WithLabelValues(route, fmt.Sprint(code)).Inc()
	s.m.latency.WithLabelValues(route).Observe(took.Seconds())
	level := slog.LevelInfo
	if route == "/health" || route == "/metrics" {
		level = slog.LevelDebug
	}
	s.log.Log(r.Context(), level, "request", "method", r.Method, "route", route, "status", code,
		"seconds", math.Round(took.Seconds()*1e4)/1e4, "remote", r.RemoteAddr)
}

// statusWriter remembers the status written.
type statusWriter struct {
	http.ResponseWriter
	status int
	wrote  bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wrote {
		w.status, w.wrote = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.status, w.wrote = http.StatusOK, true
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// outcome is a job's result: a transcript or an error (*apiError for the
// request's own faults, context errors, or internal errors).
type outcome struct {
	tr    *transcript.Transcript
	audio time.Duration // the decoded audio's duration
	err   error
}

// request holds a recognition request's validated fields.
type request struct {
	task     string // "transcribe" or "align"
	format   string
	words    bool // verbose_json: words[]
	segments bool // verbose_json: segments[]
	language string
	text     string
}

// recognize answers a transcription or alignment request.
func (s *Server) recognize(w http.ResponseWriter, r *http.Request, task string) *apiError {
	if e := onlyMethod(r, http.MethodPost); e != nil {
		return e
	}
	eng, e := s.readyEngine()
	if e != nil {
		return e
	}
	if !s.sched.admit() {
		e := newError(http.StatusTooManyRequests, typeRateLimit, "", "rate_limit_exceeded",
			"the server is busy: %d requests are queued or running; retry after the time in Retry-After", s.sched.limit)
		e.retryAfter = s.retryAfter()
		return e
	}
	defer s.sched.release()
	ctx, cancel := context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
	defer cancel()
	defer context.AfterFunc(s.base, cancel)()
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.cfg.RequestTimeout))
	_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.RequestTimeout + 10*time.Second))

	f, e := parseForm(w, r, &s.cfg, s.dir)
	if e != nil {
		return e
	}
	submitted := false
	defer func() {
		if !submitted {
			f.remove()
		}
	}()
	req, e := s.parseRequest(f, task, eng)
	if e != nil {
		return e
	}
	j := &job{ctx: ctx, done: make(chan outcome, 1), cleanup: f.remove}
	j.run = func(ctx context.Context) outcome { return s.work(ctx, j, f, req, eng) }
	submitted = true
	s.sched.submit(j)
	var o outcome
	select {
	case o = <-j.done:
	case <-ctx.Done():
		o.err = ctx.Err()
	}
	switch {
	case o.err == nil:
	case errors.As(o.err, &e):
		return e
	case errors.Is(o.err, errStopped), s.base.Err() != nil:
		return newError(http.StatusServiceUnavailable, typeServer, "", "shutting_down", "the server shut down before the request finished")
	case errors.Is(o.err, context.DeadlineExceeded):
		return newError(http.StatusGatewayTimeout, typeServer, "", "timeout", "the request took longer than the server's limit of %v", s.cfg.RequestTimeout)
	case errors.Is(o.err, context.Canceled):
		return nil // the client went away: nobody to answer
	default:
		s.log.Error("recognition failed", "task", task, "error", o.err)
		return internalError()
	}
	lang := req.language
	if lang == "" && len(eng.languages) > 0 {
		lang = eng.languages[0]
	}
	body, ct, err := render(o.tr, o.audio, req.format, req.words, req.segments, task, lang, eng.name)
	if err != nil {
		s.log.Error("rendering the response", "format", req.format, "error", err)
		return internalError()
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("X-Edge-Model", eng.name)
	_, _ = w.Write(body)
	return nil
}

// parseRequest validates the form's fields for task.
func (s *Server) parseRequest(f *form, task string, eng *loaded) (*request, *apiError) {
	req := &request{task: task, format: formatJSON}
	if f.path == "" {
		return nil, badRequest("file", "missing_required_parameter", "the form needs a file part named \"file\" holding the audio")
	}
	if f.has("response_format") {
		req.format = strings.ToLower(strings.TrimSpace(f.value("response_format")))
		ok := false
		for _, ft := range formats {
			ok = ok || ft == req.format
		}
		if !ok {
			return nil, badRequest("response_format", "invalid_value", "response_format %q is not one of %s",
				clip(f.value("response_format"), 40), strings.Join(formats, ", "))
		}
	}
	var grains []string
	for name, vs := range f.fields {
		if name == "timestamp_granularities" || strings.HasPrefix(name, "timestamp_granularities[") {
			grains = append(grains, vs...)
		}
	}
	if len(grains) > 0 && req.format != formatVerboseJSON {
		return nil, badRequest("timestamp_granularities[]", "invalid_value",
			"timestamp_granularities needs response_format verbose_json (got %s)", req.format)
	}
	req.segments = len(grains) == 0
	for _, g := range grains {
		switch strings.TrimSpace(g) {
		case "word":
			req.words = true
		case "segment":
			req.segments = true
		default:
			return nil, badRequest("timestamp_granularities[]", "invalid_value", "timestamp granularity %q is not word or segment", clip(g, 40))
		}
	}
	if f.has("language") {
		l := strings.ToLower(strings.TrimSpace(f.value("language")))
		if !languageCode.MatchString(l) {
			return nil, badRequest("language", "invalid_language", "language %q is not an ISO-639-1 code such as \"en\"", clip(f.value("language"), 40))
		}
		if len(eng.languages) > 0 && !contains(eng.languages, l) {
			return nil, badRequest("language", "unsupported_language", "model %s transcribes %s, not %q",
				eng.name, strings.Join(eng.languages, ", "), l)
		}
		req.language = l
	}
	if f.has("temperature") {
		t, err := parseFloat(f.value("temperature"))
		if err != nil || t < 0 || t > 1 {
			return nil, badRequest("temperature", "invalid_value", "temperature %q is not a number in [0, 1]", clip(f.value("temperature"), 40))
		}
	}
	if isTrue(f.value("stream")) {
		return nil, badRequest("stream", "unsupported_value", "stream=true is not supported: this route answers whole files; stream live audio to GET %s", streamRoute)
	}
	if task == "align" {
		req.text = f.value("text")
		if !eng.align {
			return nil, badRequest("", "unsupported_model", "model %s cannot align text: it has no character vocabulary with a word delimiter", eng.name)
		}
		if strings.TrimSpace(req.text) == "" {
			return nil, badRequest("text", "missing_required_parameter", "the form needs a text field holding the transcript to align")
		}
		if len(strings.Fields(asr.Normalize(req.text))) == 0 {
			return nil, badRequest("text", "invalid_value", "the text has no words to align")
		}
	}
	return req, nil
}

// work is one job: decode the spooled file, recognise it, record metrics.
func (s *Server) work(ctx context.Context, j *job, f *form, req *request, eng *loaded) outcome {
	start := time.Now()
	s.m.queueWait.Observe(start.Sub(j.enqueued).Seconds())
	pcm, e := loadAudio(f.path, f.name, eng.rate, time.Duration(s.cfg.MaxAudioSeconds*float64(time.Second)))
	f.remove()
	if e != nil {
		return outcome{err: e}
	}
	s.m.stages.WithLabelValues("audio").Observe(time.Since(start).Seconds())
	var st asr.Stats
	cctx := asr.WithStats(ctx, &st)
	var tr *transcript.Transcript
	var err error
	if req.task == "align" {
		tr, err = eng.rec.Align(cctx, pcm, req.text)
	} else {
		tr, err = eng.rec.Transcribe(cctx, pcm)
	}
	took := time.Since(start)
	for stage, d := range st.Stages {
		s.m.stages.WithLabelValues(stage).Observe(d.Seconds())
	}
	if err != nil {
		var short *asr.TooShortError
		switch {
		case ctx.Err() != nil:
			return outcome{err: ctx.Err()}
		case errors.As(err, &short):
			return outcome{err: badRequest("text", "audio_too_short", "%s", short.Error())}
		case errors.Is(err, asr.ErrTooShort):
			return outcome{err: badRequest("file", "audio_too_short", "the audio is too short for the model (%.3f s)", float64(len(pcm))/float64(eng.rate))}
		}
		return outcome{err: err}
	}
	audioSec := float64(len(pcm)) / float64(eng.rate)
	route := "/v1/audio/transcriptions"
	if req.task == "align" {
		route = "/v1/audio/alignments"
	}
	s.m.audio.WithLabelValues(route).Add(audioSec)
	s.m.processing.WithLabelValues(route).Add(took.Seconds())
	s.m.rtf.WithLabelValues(route).Observe(took.Seconds() / audioSec)
	s.observe(took)
	return outcome{tr: tr, audio: time.Duration(audioSec * float64(time.Second))}
}

// runBatch runs a batch's jobs concurrently on the recogniser and waits for
// them; a batching recogniser encodes their audio in shared encoder runs.
func (s *Server) runBatch(batch []*job) {
	s.m.batchSize.Observe(float64(len(batch)))
	if len(batch) == 1 {
		batch[0].finish(s.runJob(batch[0]))
		return
	}
	var wg sync.WaitGroup
	for _, j := range batch {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j.finish(s.runJob(j))
		}()
	}
	wg.Wait()
}

// runJob runs j, turning a panic into an internal error.
func (s *Server) runJob(j *job) (o outcome) {
	defer func() {
		if p := recover(); p != nil {
			s.log.Error("recognition panic", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			o = outcome{err: internalError()}
		}
	}()
	return j.run(j.ctx)
}

// dropped counts a job dropped unstarted.
func (s *Server) dropped(j *job) {
	reason := "cancelled"
	if errors.Is(j.ctx.Err(), context.DeadlineExceeded) {
		reason = "timeout"
	}
	s.m.dropped.WithLabelValues(reason).Inc()
}

// observe folds one request's service time into the mean.
func (s *Server) observe(d time.Duration) {
	s.ewmaMu.Lock()
	s.ewma = 0.9*s.ewma + 0.1*d.Seconds()
	s.ewmaMu.Unlock()
}

// retryAfter estimates, in whole seconds (1 to 60), when the queue will
// have room: the queued requests' mean service time over the requests that
// run at once.
func (s *Server) retryAfter() int {
	s.ewmaMu.Lock()
	mean := s.ewma
	s.ewmaMu.Unlock()
	per := float64(s.cfg.Parallel * s.cfg.MaxBatch)
	secs := math.Ceil(mean * float64(s.sched.queued.Load()+1) / per)
	return int(min(max(secs, 1), 60))
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func parseFloat(s string) (float64, error) {
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, errors.New("not a number")
	}
	return f, nil
}
