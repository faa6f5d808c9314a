package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"github.com/edgespeech/edge/asr"
	"github.com/edgespeech/edge/runtime/audio"
)

// Streaming recognition: GET /v1/audio/stream, a WebSocket carrying live
// audio in and results out, on asr.Stream (the recogniser `edge listen`
// runs).
//
// The request (checked before the upgrade; a bad one gets the usual JSON
// error and status, never a WebSocket):
//
//	GET /v1/audio/stream?format=s16le&sample_rate=16000&channels=1&chunk=480ms&left=4s&look_ahead=480ms&partials=true
//
//	format       s16le (default) or f32le: little-endian interleaved PCM
//	sample_rate  Hz, default the model's; any other rate is refused (400):
//	             resample on the client (ffmpeg -ar 16000, arecord -r 16000)
//	channels     1 (default) to 8, averaged to mono
//	chunk, left, look_ahead
//	             asr.StreamOptions, Go durations (defaults 480ms, 4s, 480ms)
//	partials     false sends finals only
//	model        accepted and ignored, as on the other routes
//
// Auth, when the server has an API key: "Authorization: Bearer KEY", or,
// for browsers (which cannot set headers on a WebSocket), the
// subprotocols "edge.stream.v1" and "edge.api-key.KEY" offered together
// (new WebSocket(url, ["edge.stream.v1", "edge.api-key." + key])); the
// server answers with "edge.stream.v1" (such a key must be a valid
// subprotocol token: letters, digits and !#$%&'*+-.^_`|~). Keys are not
// taken from the query: URLs end up in logs.
//
// Client to server: binary messages of whole PCM frames (any length up to
// serve.max_frame_bytes); the text message {"type":"end"} flushes: the
// last utterance's final is sent, then done, then the server closes with
// 1000. A close without end abandons the stream: nothing can be sent after
// a close frame.
//
// Server to client, text messages of JSON:
//
//	{"type":"ready","model","sample_rate","format","channels"}      once, first
//	{"type":"partial","utterance","start","end","text"}              the utterance so far (replaced by the next)
//	{"type":"final","utterance","start","end","text","words":[{"word","start","end","confidence"}]}
//	{"type":"error","error":{"message","type","param","code"}}        then the connection closes
//	{"type":"done","reason","duration"}                              last: end, idle_timeout, max_duration, shutting_down
//
// Times are seconds from the start of the stream; duration is the audio
// received. An error for a limit (idle_timeout, max_duration) follows the
// flushed finals and precedes done; an error for a bad message
// (invalid_audio, invalid_message, frame_too_large) or the server's own
// failure (internal_error) abandons the stream and closes it at once with
// 1007, 1003, 1009 or 1011. On SIGTERM every stream is flushed and gets
// done with reason shutting_down and a 1001 close, within
// serve.drain_timeout.

// streamRoute is the streaming endpoint's path.
const streamRoute = "/v1/audio/stream"

// Subprotocols: streamProtocol names the protocol above; a client that
// offers keyProtocol+KEY authenticates with it.
const (
	streamProtocol = "edge.stream.v1"
	keyProtocol    = "edge.api-key."
)

// streamer is a Recognizer that streams; *asr.Recognizer is one.
type streamer interface {
	NewStream(opt asr.StreamOptions) (*asr.Stream, error)
}

// streamWriteTimeout bounds one message to the client: a client that stops
// reading ends its stream.
const streamWriteTimeout = 10 * time.Second

// streamParams are a stream request's validated query.
type streamParams struct {
	raw      audio.RawFormat
	opt      asr.StreamOptions
	partials bool
}

// parseStreamQuery validates q for a model taking rate Hz.
func parseStreamQuery(q url.Values, rate int) (*streamParams, *apiError) {
	p := &streamParams{raw: audio.RawFormat{Encoding: "s16le", Rate: rate, Channels: 1}, partials: true}
	for name, vs := range q {
		if len(vs) != 1 {
			return nil, badRequest(name, "invalid_value", "query parameter %s is given %d times; give it once", clip(name, 40), len(vs))
		}
		v := strings.TrimSpace(vs[0])
		switch name {
		case "format":
			if v != "s16le" && v != "f32le" {
				return nil, badRequest(name, "invalid_value", "format %q is not s16le or f32le (little-endian PCM)", clip(v, 40))
			}
			p.raw.Encoding = v
		case "sample_rate":
			n, err := strconv.Atoi(v)
			if err != nil || n != rate {
				return nil, badRequest(name, "unsupported_sample_rate", "sample_rate %q: the model takes %d Hz PCM; resample on the client (e.g. ffmpeg -ar %d)", clip(v, 40), rate, rate)
			}
		case "channels":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > 8 {
				return nil, badRequest(name, "invalid_value", "channels %q is not a count from 1 to 8", clip(v, 40))
			}
			p.raw.Channels = n
		case "chunk", "left", "look_ahead":
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 || d > time.Minute {
				return nil, badRequest(name, "invalid_value", "%s %q is not a duration such as 480ms (0 < d <= 1m)", name, clip(v, 40))
			}
			switch name {
			case "chunk":
				p.opt.Chunk = d
			case "left":
				p.opt.Left = d
			default:
				p.opt.LookAhead = d
			}
		case "partials":
			b, err := strconv.ParseBool(v)
			if err != nil {
				return nil, badRequest(name, "invalid_value", "partials %q is not true or false", clip(v, 40))
			}
			p.partials = b
		case "model":
		default:
			return nil, badRequest(name, "unknown_parameter", "unknown query parameter %q; %s takes format, sample_rate, channels, chunk, left, look_ahead, partials, model",
				clip(name, 40), streamRoute)
		}
	}
	return p, nil
}

// offeredProtocols lists the subprotocols a WebSocket request offers.
func offeredProtocols(r *http.Request) []string {
	var out []string
	for _, h := range r.Header.Values("Sec-WebSocket-Protocol") {
		for _, p := range strings.Split(h, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
	}
	return out
}

// protocolKey is the API key a stream request offers as a subprotocol, or "".
func protocolKey(r *http.Request) string {
	if r.URL.Path != streamRoute {
		return ""
	}
	for _, p := range offeredProtocols(r) {
		if k, ok := strings.CutPrefix(p, keyProtocol); ok {
			return k
		}
	}
	return ""
}

// isUpgrade reports whether r asks for a WebSocket.
func isUpgrade(r *http.Request) bool {
	if !strings.EqualFold(strings.TrimSpace(r.Header.Get("Upgrade")), "websocket") {
		return false
	}
	for _, h := range r.Header.Values("Connection") {
		for _, t := range strings.Split(h, ",") {
			if strings.EqualFold(strings.TrimSpace(t), "upgrade") {
				return true
			}
		}
	}
	return false
}

// streamSet counts the open streams and tells them when the server drains.
// Its zero value is ready to use.
type streamSet struct {
	mu       sync.Mutex
	open     int
	draining bool
	drain    chan struct{} // closed when draining starts
}

func (t *streamSet) drainCh() chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.drain == nil {
		t.drain = make(chan struct{})
	}
	return t.drain
}

// acquire takes a place for a stream; it fails when limit are open or the
// server drains.
func (t *streamSet) acquire(limit int) (ok, draining bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.draining {
		return false, true
	}
	if t.open >= limit {
		return false, false
	}
	t.open++
	return true, false
}

func (t *streamSet) release() {
	t.mu.Lock()
	t.open--
	t.mu.Unlock()
}

// count is the number of open streams.
func (t *streamSet) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.open
}

// beginDrain refuses new streams and tells the open ones to finish.
func (t *streamSet) beginDrain() {
	ch := t.drainCh()
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.draining {
		t.draining = true
		close(ch)
	}
}

// wait waits up to d for every stream to end.
func (t *streamSet) wait(d time.Duration) bool {
	deadline := time.Now().Add(d)
	for t.count() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
	return true
}

// readyEngine is the loaded recogniser, or the 503 to answer while the
// model loads or the server drains.
func (s *Server) readyEngine() (*loaded, *apiError) {
	eng := s.engine()
	switch st := s.state.Load(); {
	case st == stateLoading || eng == nil:
		e := newError(http.StatusServiceUnavailable, typeServer, "", "model_loading", "the model is loading; try again shortly")
		e.retryAfter = 5
		return nil, e
	case st == stateDraining:
		return nil, newError(http.StatusServiceUnavailable, typeServer, "", "shutting_down", "the server is shutting down")
	}
	return eng, nil
}

// stream answers GET /v1/audio/stream: it validates the request, takes a
// stream place, upgrades and runs the session until it ends.
func (s *Server) stream(w http.ResponseWriter, r *http.Request) *apiError {
	if e := onlyMethod(r, http.MethodGet); e != nil {
		return e
	}
	eng, e := s.readyEngine()
	if e != nil {
		return e
	}
	sr, ok := eng.rec.(streamer)
	if !ok {
		return newError(http.StatusNotImplemented, typeInvalidRequest, "", "unsupported_model", "model %s does not stream", eng.name)
	}
	if !isUpgrade(r) {
		w.Header().Set("Upgrade", "websocket")
		return newError(http.StatusUpgradeRequired, typeInvalidRequest, "", "upgrade_required",
			"%s is a WebSocket endpoint: open it with a WebSocket client (Upgrade: websocket)", streamRoute)
	}
	p, e := parseStreamQuery(r.URL.Query(), eng.rate)
	if e != nil {
		return e
	}
	st, err := sr.NewStream(p.opt)
	if err != nil {
		return badRequest("", "invalid_value", "stream options: %v", err)
	}
	if ok, draining := s.streams.acquire(s.cfg.Streams.MaxStreams); !ok {
		if draining {
			return newError(http.StatusServiceUnavailable, typeServer, "", "shutting_down", "the server is shutting down")
		}
		e := newError(http.StatusTooManyRequests, typeRateLimit, "", "rate_limit_exceeded",
			"the server is busy: %d streams are open, its limit; retry after the time in Retry-After", s.cfg.Streams.MaxStreams)
		e.retryAfter = 5
		return e
	}
	defer s.streams.release()
	conn, err := websocket.Accept(w, r, &websocket.AcceptOptions{
		Subprotocols:   []string{streamProtocol},
		OriginPatterns: s.cfg.Streams.StreamOrigins,
	})
	if err != nil { // Accept answered (403 for a foreign Origin, 400 for a bad handshake)
		s.log.Info("stream upgrade refused", "error", err, "remote", r.RemoteAddr)
		return nil
	}
	s.m.streamsActive.Inc()
	defer s.m.streamsActive.Dec()
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	ss := &session{s: s, conn: conn, eng: eng, st: st, p: p, ctx: ctx, cancel: cancel,
		msgs: make(chan inMessage, 1), readDone: make(chan struct{}), start: time.Now()}
	outcome := ss.run()
	s.m.streams.WithLabelValues(outcome).Inc()
	s.log.Info("stream ended", "outcome", outcome, "audio_seconds", ss.audio.Seconds(), "remote", r.RemoteAddr)
	return nil
}

// inMessage is one message from the client.
type inMessage struct {
	typ     websocket.MessageType
	data    []byte
	at      time.Time // when it was read
	tooBig  bool      // larger than MaxFrameBytes (data is not kept)
	readErr error     // the connection failed or closed (the reader stops)
}

// session is one open stream. run owns it; read feeds it.
type session struct {
	s        *Server
	conn     *websocket.Conn
	eng      *loaded
	st       *asr.Stream
	p        *streamParams
	ctx      context.Context
	cancel   context.CancelCauseFunc
	msgs     chan inMessage
	readDone chan struct{}
	start    time.Time
	audio    time.Duration // received
}

// errGone says the client went away (or the server cancelled the stream):
// nothing more can be sent.
var errGone = errors.New("stream: the connection is gone")

// closing is how a session ends: the close frame's code and reason, and the
// outcome label of edge_serve_streams_total.
type closing struct {
	code    websocket.StatusCode
	outcome string
}

// read reads messages until the connection fails or closes, or a message
// is too large; a failure cancels the session's work.
func (ss *session) read() {
	defer close(ss.readDone)
	limit := ss.s.cfg.Streams.MaxFrameBytes
	for {
		typ, rd, err := ss.conn.Reader(ss.ctx)
		var data []byte
		if err == nil {
			data, err = io.ReadAll(io.LimitReader(rd, limit+1))
		}
		if err != nil {
			ss.cancel(errGone)
			return
		}
		m := inMessage{typ: typ, data: data, at: time.Now()}
		if int64(len(data)) > limit {
			m.data, m.tooBig = nil, true
		}
		select {
		case ss.msgs <- m:
		case <-ss.ctx.Done():
			return
		}
		if m.tooBig {
			return
		}
	}
}

// run serves the session and returns its outcome.
func (ss *session) run() (outcome string) {
	ss.conn.SetReadLimit(-1) // read bounds each message itself, to answer with an error first
	go ss.read()
	defer func() {
		ss.cancel(errGone)
		_ = ss.conn.CloseNow()
		<-ss.readDone
	}()
	defer func() {
		if p := recover(); p != nil {
			ss.s.log.Error("stream panic", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			outcome = ss.abort(websocket.StatusInternalError, internalError(), "internal_error")
		}
	}()
	cfg := ss.s.cfg.Streams
	if err := ss.send(readyMessage{Type: "ready", Model: ss.eng.name, SampleRate: ss.p.raw.Rate, Format: ss.p.raw.Encoding, Channels: ss.p.raw.Channels}); err != nil {
		return "client_gone"
	}
	idle := time.NewTimer(cfg.StreamIdleTimeout)
	defer idle.Stop()
	limit := time.NewTimer(cfg.MaxStreamDuration)
	defer limit.Stop()
	drain := ss.s.streams.drainCh()
	for {
		select {
		case m := <-ss.msgs:
			idle.Reset(cfg.StreamIdleTimeout)
			if m.tooBig {
				return ss.abort(websocket.StatusMessageTooBig, badRequest("", "frame_too_large",
					"a message is larger than the server's limit of %d bytes (serve.max_frame_bytes); send smaller frames", cfg.MaxFrameBytes), "frame_too_large")
			}
			if m.typ == websocket.MessageText {
				var msg struct {
					Type string `json:"type"`
				}
				if err := json.Unmarshal(m.data, &msg); err != nil {
					return ss.abort(websocket.StatusInvalidFramePayloadData, badRequest("", "invalid_message",
						"a text message is not JSON (%v); the only text message is {\"type\":\"end\"}", err), "invalid_message")
				}
				if msg.Type != "end" {
					return ss.abort(websocket.StatusUnsupportedData, badRequest("type", "invalid_message",
						"unknown message type %q; the only text message is {\"type\":\"end\"}; audio goes in binary messages", clip(msg.Type, 40)), "invalid_message")
				}
				return ss.finish(closing{websocket.StatusNormalClosure, "end"}, nil)
			}
			pcm, e := ss.decode(m.data)
			if e != nil {
				return ss.abort(websocket.StatusInvalidFramePayloadData, e, "invalid_audio")
			}
			over := false
			if room := cfg.MaxStreamDuration - ss.audio; ss.seconds(len(pcm)) > room {
				pcm, over = pcm[:max(0, int(room.Seconds()*float64(ss.p.raw.Rate)))], true
			}
			ss.audio += ss.seconds(len(pcm))
			ss.s.m.streamAudio.Add(ss.seconds(len(pcm)).Seconds())
			res, err := ss.st.Write(ss.ctx, pcm)
			if err != nil {
				return ss.failed(err)
			}
			if err := ss.emit(res, m.at); err != nil {
				return "client_gone"
			}
			if over {
				return ss.finish(closing{websocket.StatusPolicyViolation, "max_duration"}, ss.limitError("max_duration"))
			}
			idle.Reset(cfg.StreamIdleTimeout) // the time spent recognising is not the client's silence
		case <-idle.C:
			return ss.finish(closing{websocket.StatusPolicyViolation, "idle_timeout"}, ss.limitError("idle_timeout"))
		case <-limit.C:
			return ss.finish(closing{websocket.StatusPolicyViolation, "max_duration"}, ss.limitError("max_duration"))
		case <-drain:
			return ss.finish(closing{websocket.StatusGoingAway, "shutting_down"}, nil)
		case <-ss.ctx.Done():
			return "client_gone"
		}
	}
}

func (ss *session) seconds(samples int) time.Duration {
	return time.Duration(samples) * time.Second / time.Duration(ss.p.raw.Rate)
}

// limitError is the error message for a limit that ended the stream.
func (ss *session) limitError(code string) *apiError {
	cfg := ss.s.cfg.Streams
	if code == "idle_timeout" {
		return newError(http.StatusRequestTimeout, typeInvalidRequest, "", code,
			"no message for %v (serve.stream_idle_timeout): the stream is flushed and closed", cfg.StreamIdleTimeout)
	}
	return newError(http.StatusRequestEntityTooLarge, typeInvalidRequest, "", code,
		"the stream reached the server's limit of %v (serve.max_stream_duration, of audio or of time): it is flushed and closed", cfg.MaxStreamDuration)
}

// decode turns one binary message into mono samples.
func (ss *session) decode(b []byte) ([]float32, *apiError) {
	f := ss.p.raw
	width := 2
	if f.Encoding == "f32le" {
		width = 4
	}
	if frame := width * f.Channels; len(b)%frame != 0 {
		return nil, badRequest("", "invalid_audio", "a binary message of %d bytes is not a whole number of %d-byte frames (%s, %d channels)",
			len(b), frame, f.Encoding, f.Channels)
	}
	if len(b) == 0 {
		return nil, nil
	}
	clip, err := audio.Options{Raw: &f, Strict: true}.Decode(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		return nil, badRequest("", "invalid_audio", "%v", err)
	}
	return clip.Mono(), nil
}

// failed ends the session after the recogniser failed.
func (ss *session) failed(err error) string {
	if ss.ctx.Err() != nil {
		return "client_gone"
	}
	ss.s.log.Error("stream recognition failed", "error", err)
	return ss.abort(websocket.StatusInternalError, internalError(), "internal_error")
}

// finish flushes the stream, sends its last finals, e (when set) and done,
// and closes the connection with c.code.
func (ss *session) finish(c closing, e *apiError) string {
	at := time.Now()
	res, err := ss.st.Close(ss.ctx)
	if err != nil {
		return ss.failed(err)
	}
	if ss.emit(res, at) != nil {
		return "client_gone"
	}
	if e != nil && ss.send(errorMessage{Type: "error", Error: e}) != nil {
		return "client_gone"
	}
	if ss.send(doneMessage{Type: "done", Reason: c.outcome, Duration: seconds(ss.audio)}) != nil {
		return "client_gone"
	}
	ss.close(c.code, c.outcome)
	return c.outcome
}

// abort sends e and closes the connection with code, without flushing.
func (ss *session) abort(code websocket.StatusCode, e *apiError, outcome string) string {
	if ss.send(errorMessage{Type: "error", Error: e}) != nil {
		return "client_gone"
	}
	ss.close(code, clip(e.Message, 120))
	return outcome
}

// close closes the connection with code and reason and stops the reader.
func (ss *session) close(code websocket.StatusCode, reason string) {
	_ = ss.conn.Close(code, reason)
}

// emit sends results; received is when the audio that produced them
// arrived (finals' latency is measured from it).
func (ss *session) emit(res []asr.StreamResult, received time.Time) error {
	for _, r := range res {
		if !r.Final {
			if ss.p.partials {
				if err := ss.send(partialMessage{Type: "partial", Utterance: r.Utterance, Start: seconds(r.Start), End: seconds(r.End), Text: r.Text}); err != nil {
					return err
				}
			}
			continue
		}
		m := finalMessage{Type: "final", Utterance: r.Utterance, Start: seconds(r.Start), End: seconds(r.End), Text: r.Text, Words: make([]wordJSON, len(r.Words))}
		for i, w := range r.Words {
			m.Words[i] = wordJSON{w.Text, seconds(w.Start), seconds(w.End), round4(w.Confidence)}
		}
		if err := ss.send(m); err != nil {
			return err
		}
		ss.s.m.streamFinalLatency.Observe(time.Since(received).Seconds())
	}
	return nil
}

// send writes one JSON text message.
func (ss *session) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ss.ctx, streamWriteTimeout)
	defer cancel()
	if err := ss.conn.Write(ctx, websocket.MessageText, b); err != nil {
		ss.cancel(errGone)
		return errGone
	}
	return nil
}

// The server's messages.
type (
	readyMessage struct {
		Type       string `json:"type"`
		Model      string `json:"model"`
		SampleRate int    `json:"sample_rate"`
		Format     string `json:"format"`
		Channels   int    `json:"channels"`
	}
	partialMessage struct {
		Type      string  `json:"type"`
		Utterance int     `json:"utterance"`
		Start     float64 `json:"start"`
		End       float64 `json:"end"`
		Text      string  `json:"text"`
	}
	finalMessage struct {
		Type      string     `json:"type"`
		Utterance int        `json:"utterance"`
		Start     float64    `json:"start"`
		End       float64    `json:"end"`
		Text      string     `json:"text"`
		Words     []wordJSON `json:"words"`
	}
	errorMessage struct {
		Type  string    `json:"type"`
		Error *apiError `json:"error"`
	}
	doneMessage struct {
		Type     string  `json:"type"`
		Reason   string  `json:"reason"`
		Duration float64 `json:"duration"`
	}
)
