package serve

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"math"
	"net"
	"net/http"
	"runtime"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/asr"
)

// serverMessage is any message of the streaming protocol.
type serverMessage struct {
	Type       string     `json:"type"`
	Model      string     `json:"model"`
	SampleRate int        `json:"sample_rate"`
	Utterance  int        `json:"utterance"`
	Start      float64    `json:"start"`
	End        float64    `json:"end"`
	Text       string     `json:"text"`
	Words      []wordJSON `json:"words"`
	Reason     string     `json:"reason"`
	Duration   float64    `json:"duration"`
	Error      *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func wsURL(base, query string) string {
	u := "ws" + strings.TrimPrefix(base, "http") + streamRoute
	if query != "" {
		u += "?" + query
	}
	return u
}

// dial opens a stream and reads its ready message.
func dial(t *testing.T, base, query string, opts *websocket.DialOptions) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, wsURL(base, query), opts)
	require.NoError(t, err)
	c.SetReadLimit(1 << 20)
	m := readMessage(t, c)
	require.Equal(t, "ready", m.Type)
	require.Equal(t, 16000, m.SampleRate)
	return c
}

// dialRefused dials and checks the handshake is refused with a JSON error.
func dialRefused(t *testing.T, base, query string, opts *websocket.DialOptions, status int, code string) http.Header {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, resp, err := websocket.Dial(ctx, wsURL(base, query), opts)
	if c != nil {
		_ = c.CloseNow()
	}
	require.Error(t, err)
	require.NotNil(t, resp, "%v", err)
	body, _ := io.ReadAll(resp.Body)
	requireError(t, status, code, resp.StatusCode, resp.Header, body)
	return resp.Header
}

func readMessage(t *testing.T, c *websocket.Conn) serverMessage {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	typ, b, err := c.Read(ctx)
	require.NoError(t, err)
	require.Equal(t, websocket.MessageText, typ)
	var m serverMessage
	require.NoError(t, json.Unmarshal(b, &m), "%s", b)
	return m
}

// readAll reads messages until the server closes and returns them with the
// close status.
func readAll(t *testing.T, c *websocket.Conn) ([]serverMessage, websocket.StatusCode) {
	t.Helper()
	var out []serverMessage
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for {
		typ, b, err := c.Read(ctx)
		if err != nil {
			code := websocket.CloseStatus(err)
			require.NotEqual(t, websocket.StatusCode(-1), code, "the connection failed without a close frame: %v", err)
			return out, code
		}
		require.Equal(t, websocket.MessageText, typ)
		var m serverMessage
		require.NoError(t, json.Unmarshal(b, &m), "%s", b)
		out = append(out, m)
	}
}

// s16le encodes samples as 16-bit PCM (they are s16 values over 2^15 already:
// the clips are 16-bit WAV files, so the round trip is exact).
func s16le(pcm []float32) []byte {
	b := make([]byte, 2*len(pcm))
	for i, v := range pcm {
		binary.LittleEndian.PutUint16(b[2*i:], uint16(int16(math.Round(float64(v)*32768))))
	}
	return b
}

// sendPCM writes b in frames of n bytes.
func sendPCM(t *testing.T, c *websocket.Conn, b []byte, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := 0; i < len(b); i += n {
		require.NoError(t, c.Write(ctx, websocket.MessageBinary, b[i:min(i+n, len(b))]))
	}
}

func sendEnd(t *testing.T, c *websocket.Conn) {
	t.Helper()
	require.NoError(t, c.Write(context.Background(), websocket.MessageText, []byte(`{"type":"end"}`)))
}

// twoUtterances is the demo clip, 2 s of silence and words_1.
func twoUtterances(t testing.TB) []float32 {
	pcm := loadPCM(t, "demo")
	pcm = append(pcm, make([]float32, 32000)...)
	return append(pcm, loadPCM(t, "words_1")...)
}

// listenFinals is what `edge listen` prints for pcm: an asr.Stream with the
// default options fed 100 ms blocks.
func listenFinals(t *testing.T, r *asr.Recognizer, pcm []float32) []asr.StreamResult {
	st, err := r.NewStream(asr.StreamOptions{})
	require.NoError(t, err)
	ctx := context.Background()
	var out []asr.StreamResult
	for i := 0; i < len(pcm); i += 1600 {
		res, err := st.Write(ctx, pcm[i:min(i+1600, len(pcm))])
		require.NoError(t, err)
		out = append(out, res...)
	}
	res, err := st.Close(ctx)
	require.NoError(t, err)
	out = append(out, res...)
	var fin []asr.StreamResult
	for _, x := range out {
		if x.Final {
			fin = append(fin, x)
		}
	}
	return fin
}

// TestStreamWords streams two utterances in 20 ms frames, far faster than
// real time, and gets partials, then finals whose words are edge listen's
// for the same audio, then done and a normal close; /health stays 200 and
// the stream metrics count it.
func TestStreamWords(t *testing.T) {
	r := realRecognizer(t)
	s, url := startServer(t, testConfig(t), r)
	pcm := twoUtterances(t)
	want := listenFinals(t, r, pcm)
	require.Len(t, want, 2)

	c := dial(t, url, "format=s16le&sample_rate=16000", nil)
	defer c.CloseNow()
	got := make(chan []serverMessage, 1)
	codes := make(chan websocket.StatusCode, 1)
	go func() {
		ms, code := readAll(t, c)
		got <- ms
		codes <- code
	}()
	sendPCM(t, c, s16le(pcm), 640)
	requireHealthy(t, url)
	sendEnd(t, c)
	msgs, code := <-got, <-codes
	assert.Equal(t, websocket.StatusNormalClosure, code)

	var finals []serverMessage
	partialsBefore := 0
	for i, m := range msgs {
		switch m.Type {
		case "partial":
			partialsBefore++
			assert.NotEmpty(t, m.Text)
		case "final":
			assert.Positive(t, partialsBefore, "a partial before final %d", len(finals))
			partialsBefore = 0
			finals = append(finals, m)
		case "done":
			assert.Equal(t, len(msgs)-1, i, "done is last")
			assert.Equal(t, "end", m.Reason)
			assert.InDelta(t, float64(len(pcm))/16000, m.Duration, 1e-4)
		default:
			t.Fatalf("unexpected message %+v", m)
		}
	}
	require.Equal(t, "done", msgs[len(msgs)-1].Type)
	require.Len(t, finals, len(want))
	for i, f := range finals {
		w := want[i]
		assert.Equal(t, w.Utterance, f.Utterance)
		assert.Equal(t, w.Text, f.Text)
		assert.Equal(t, seconds(w.Start), f.Start)
		assert.Equal(t, seconds(w.End), f.End)
		require.Len(t, f.Words, len(w.Words))
		for k, ww := range w.Words {
			assert.Equal(t, wordJSON{ww.Text, seconds(ww.Start), seconds(ww.End), round4(ww.Confidence)}, f.Words[k], "utterance %d word %d", i, k)
		}
	}
	_, truth := readClip(t, "demo")
	assert.Equal(t, truth, finals[0].Text)

	require.Eventually(t, func() bool { return s.streams.count() == 0 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1.0, value(t, s.m.streams.WithLabelValues("end")))
	assert.InDelta(t, float64(len(pcm))/16000, value(t, s.m.streamAudio), 1e-3)
	assert.Equal(t, 0.0, value(t, s.m.streamsActive))
	status, _, body := do(t, mustRequest(http.MethodGet, url+"/metrics"))
	require.Equal(t, 200, status)
	assert.Contains(t, string(body), "edge_serve_stream_final_latency_seconds_count 2")
	assert.Contains(t, string(body), `edge_serve_requests_total{code="101",route="/v1/audio/stream"} 1`)
}

// value reads a counter or gauge.
func value(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var d dto.Metric
	require.NoError(t, m.Write(&d))
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// TestStreamF32Stereo: f32le with two channels is averaged to mono and
// gives the same final text.
func TestStreamF32Stereo(t *testing.T) {
	r := realRecognizer(t)
	_, url := startServer(t, testConfig(t), r)
	pcm, truth := loadPCM(t, "words_1"), ""
	_, truth = readClip(t, "words_1")
	b := make([]byte, 8*len(pcm))
	for i, v := range pcm {
		binary.LittleEndian.PutUint32(b[8*i:], math.Float32bits(v))
		binary.LittleEndian.PutUint32(b[8*i+4:], math.Float32bits(v))
	}
	c := dial(t, url, "format=f32le&channels=2&partials=false", nil)
	defer c.CloseNow()
	sendPCM(t, c, b, 8*1000)
	sendEnd(t, c)
	msgs, code := readAll(t, c)
	assert.Equal(t, websocket.StatusNormalClosure, code)
	var texts []string
	for _, m := range msgs {
		assert.NotEqual(t, "partial", m.Type)
		if m.Type == "final" {
			texts = append(texts, m.Text)
		}
	}
	assert.Equal(t, []string{truth}, texts)
}

// TestStreamAuth: with an API key, a stream needs the bearer header or the
// key subprotocol; anything else is 401 before the upgrade.
func TestStreamAuth(t *testing.T) {
	cfg := testConfig(t)
	cfg.APIKey = "sekrit-key_1"
	_, url := startServer(t, cfg, realRecognizer(t))
	h := dialRefused(t, url, "", nil, 401, "invalid_api_key")
	assert.Equal(t, `Bearer realm="edge"`, h.Get("WWW-Authenticate"))
	dialRefused(t, url, "", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer wrong"}}}, 401, "invalid_api_key")
	dialRefused(t, url, "", &websocket.DialOptions{Subprotocols: []string{streamProtocol, keyProtocol + "wrong"}}, 401, "invalid_api_key")
	dialRefused(t, url, "api_key=sekrit-key_1", nil, 401, "invalid_api_key")

	c := dial(t, url, "", &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer sekrit-key_1"}}})
	c.CloseNow()
	c = dial(t, url, "", &websocket.DialOptions{Subprotocols: []string{streamProtocol, keyProtocol + "sekrit-key_1"}})
	assert.Equal(t, streamProtocol, c.Subprotocol())
	c.CloseNow()
}

// TestStreamBadRequests: requests refused before the upgrade get JSON errors.
func TestStreamBadRequests(t *testing.T) {
	_, url := startServer(t, testConfig(t), realRecognizer(t))
	for _, tc := range []struct{ query, code string }{
		{"sample_rate=44100", "unsupported_sample_rate"},
		{"sample_rate=abc", "unsupported_sample_rate"},
		{"format=s24le", "invalid_value"},
		{"channels=0", "invalid_value"},
		{"chunk=soon", "invalid_value"},
		{"chunk=1ms", "invalid_value"}, // shorter than an encoder frame
		{"partials=maybe", "invalid_value"},
		{"format=s16le&format=f32le", "invalid_value"},
		{"volume=11", "unknown_parameter"},
	} {
		t.Run(tc.query, func(t *testing.T) { dialRefused(t, url, tc.query, nil, 400, tc.code) })
	}
	status, h, body := do(t, mustRequest(http.MethodGet, url+streamRoute))
	requireError(t, 426, "upgrade_required", status, h, body)
	assert.Equal(t, "websocket", h.Get("Upgrade"))
	status, h, body = do(t, mustRequest(http.MethodPost, url+streamRoute))
	requireError(t, 405, "method_not_allowed", status, h, body)
	status, h, body = do(t, mustRequest(http.MethodGet, url+"/v1/realtime"))
	e := requireError(t, 501, "not_implemented", status, h, body)
	assert.Contains(t, e.Error.Message, streamRoute)

	_, fake := startServer(t, testConfig(t), &fakeRecognizer{})
	dialRefused(t, fake, "", nil, 501, "unsupported_model")
	_, loading := startServer(t, testConfig(t), nil)
	dialRefused(t, loading, "", nil, 503, "model_loading")
}

// TestStreamMalformed: a bad message gets an error message and a close
// with the code for it, never a panic, and the server keeps serving.
func TestStreamMalformed(t *testing.T) {
	cfg := testConfig(t)
	cfg.Streams.MaxFrameBytes = 4096
	s, url := startServer(t, cfg, realRecognizer(t))
	nan := make([]byte, 8)
	binary.LittleEndian.PutUint32(nan[4:], math.Float32bits(float32(math.NaN())))
	for _, tc := range []struct {
		name, query string
		typ         websocket.MessageType
		data        []byte
		code        string
		close       websocket.StatusCode
	}{
		{"odd bytes", "", websocket.MessageBinary, []byte{1, 2, 3}, "invalid_audio", websocket.StatusInvalidFramePayloadData},
		{"half a stereo frame", "channels=2", websocket.MessageBinary, []byte{1, 2}, "invalid_audio", websocket.StatusInvalidFramePayloadData},
		{"NaN", "format=f32le", websocket.MessageBinary, nan, "invalid_audio", websocket.StatusInvalidFramePayloadData},
		{"text not JSON", "", websocket.MessageText, []byte("hello"), "invalid_message", websocket.StatusInvalidFramePayloadData},
		{"unknown type", "", websocket.MessageText, []byte(`{"type":"pause"}`), "invalid_message", websocket.StatusUnsupportedData},
		{"JSON not an object", "", websocket.MessageText, []byte(`[1]`), "invalid_message", websocket.StatusInvalidFramePayloadData},
		{"too large", "", websocket.MessageBinary, make([]byte, 4098), "frame_too_large", websocket.StatusMessageTooBig},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, url, tc.query, nil)
			defer c.CloseNow()
			require.NoError(t, c.Write(context.Background(), tc.typ, tc.data))
			msgs, code := readAll(t, c)
			require.Len(t, msgs, 1)
			require.Equal(t, "error", msgs[0].Type)
			require.NotNil(t, msgs[0].Error.Code)
			assert.Equal(t, tc.code, *msgs[0].Error.Code)
			assert.Equal(t, typeInvalidRequest, msgs[0].Error.Type)
			assert.NotEmpty(t, msgs[0].Error.Message)
			assert.Equal(t, tc.close, code)
			requireHealthy(t, url)
			require.Eventually(t, func() bool { return s.streams.count() == 0 }, 5*time.Second, 10*time.Millisecond)
			assert.Equal(t, 1.0, value(t, s.m.streams.WithLabelValues(tc.code)), "outcome counted")
			s.m.streams.Reset()
		})
	}
	c := dial(t, url, "", nil) // still serving
	sendEnd(t, c)
	msgs, code := readAll(t, c)
	assert.Equal(t, websocket.StatusNormalClosure, code)
	require.Len(t, msgs, 1)
	assert.Equal(t, "done", msgs[0].Type)
}

// TestStreamTooMany: past max_streams the handshake gets 429 with
// Retry-After; a place freed is taken again.
func TestStreamTooMany(t *testing.T) {
	cfg := testConfig(t)
	cfg.Streams.MaxStreams = 2
	s, url := startServer(t, cfg, realRecognizer(t))
	a, b := dial(t, url, "", nil), dial(t, url, "", nil)
	defer b.CloseNow()
	h := dialRefused(t, url, "", nil, 429, "rate_limit_exceeded")
	assert.Equal(t, "5", h.Get("Retry-After"))
	requireHealthy(t, url)
	a.CloseNow()
	require.Eventually(t, func() bool { return s.streams.count() == 1 }, 5*time.Second, 10*time.Millisecond)
	c := dial(t, url, "", nil)
	c.CloseNow()
}

// TestStreamIdleTimeout: a stream that goes quiet is flushed (its speech
// gets its final), told why, and closed with 1008.
func TestStreamIdleTimeout(t *testing.T) {
	cfg := testConfig(t)
	cfg.Streams.StreamIdleTimeout = 500 * time.Millisecond
	s, url := startServer(t, cfg, realRecognizer(t))
	pcm := loadPCM(t, "words_1")
	_, truth := readClip(t, "words_1")
	c := dial(t, url, "partials=false", nil)
	defer c.CloseNow()
	sendPCM(t, c, s16le(pcm), 3200)
	msgs, code := readAll(t, c)
	assert.Equal(t, websocket.StatusPolicyViolation, code)
	require.Len(t, msgs, 3, "%+v", msgs)
	assert.Equal(t, "final", msgs[0].Type)
	assert.Equal(t, truth, msgs[0].Text)
	assert.Equal(t, "error", msgs[1].Type)
	assert.Equal(t, "idle_timeout", *msgs[1].Error.Code)
	assert.Equal(t, "done", msgs[2].Type)
	assert.Equal(t, "idle_timeout", msgs[2].Reason)
	require.Eventually(t, func() bool { return s.streams.count() == 0 }, 5*time.Second, 10*time.Millisecond)
	assert.Equal(t, 1.0, value(t, s.m.streams.WithLabelValues("idle_timeout")))
}

// TestStreamMaxDuration: audio past max_stream_duration is cut there; the
// stream is flushed and closed.
func TestStreamMaxDuration(t *testing.T) {
	cfg := testConfig(t)
	cfg.Streams.MaxStreamDuration = 2 * time.Second
	_, url := startServer(t, cfg, realRecognizer(t))
	c := dial(t, url, "partials=false", nil)
	defer c.CloseNow()
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		b := s16le(loadPCM(t, "demo"))
		for i := 0; i < len(b); i += 3200 {
			if c.Write(ctx, websocket.MessageBinary, b[i:min(i+3200, len(b))]) != nil {
				return // the server closed
			}
		}
	}()
	msgs, code := readAll(t, c)
	assert.Equal(t, websocket.StatusPolicyViolation, code)
	require.GreaterOrEqual(t, len(msgs), 2)
	last, e := msgs[len(msgs)-1], msgs[len(msgs)-2]
	assert.Equal(t, "done", last.Type)
	assert.Equal(t, "max_duration", last.Reason)
	assert.Equal(t, 2.0, last.Duration)
	assert.Equal(t, "max_duration", *e.Error.Code)
	for _, m := range msgs[:len(msgs)-2] {
		assert.Equal(t, "final", m.Type)
		assert.LessOrEqual(t, m.End, 2.0)
	}
}

// TestStreamClientDisconnect: a client that drops the connection in the
// middle of an utterance ends its stream: the work stops, the place is
// freed and no goroutine is left behind.
func TestStreamClientDisconnect(t *testing.T) {
	r := realRecognizer(t)
	s, url := startServer(t, testConfig(t), r)
	pcm := s16le(twoUtterances(t))
	// Warm up the client and server paths so the baseline holds their
	// long-lived goroutines.
	c := dial(t, url, "", nil)
	sendEnd(t, c)
	readAll(t, c)
	http.DefaultClient.CloseIdleConnections()
	require.Eventually(t, func() bool { return s.streams.count() == 0 }, 5*time.Second, 10*time.Millisecond)
	base := runtime.NumGoroutine()

	for range 3 {
		c := dial(t, url, "", nil)
		sendPCM(t, c, pcm[:3*32000], 640) // 3 s: inside the first utterance
		readMessage(t, c)                 // the server is working on it
		require.NoError(t, c.CloseNow())
	}
	require.Eventually(t, func() bool { return s.streams.count() == 0 }, 10*time.Second, 10*time.Millisecond)
	assert.Equal(t, 3.0, value(t, s.m.streams.WithLabelValues("client_gone")))
	assert.Equal(t, 0.0, value(t, s.m.streamsActive))
	settled := false
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if runtime.NumGoroutine() <= base {
			settled = true
			break
		}
	}
	if !settled {
		var b bytes.Buffer
		_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
		t.Errorf("goroutines: %d after the disconnects, %d before:\n%s", runtime.NumGoroutine(), base, b.String())
	}
	requireHealthy(t, url)
}

// TestStreamDrain: Shutdown flushes an open stream (its speech gets its
// final), sends done with reason shutting_down, closes it with 1001, and
// refuses new streams meanwhile.
func TestStreamDrain(t *testing.T) {
	cfg := testConfig(t)
	s, err := New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", cfg.Listen)
	require.NoError(t, err)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ln) }()
	s.Ready(realRecognizer(t), nil)
	url := "http://" + ln.Addr().String()

	pcm := loadPCM(t, "words_1")
	_, truth := readClip(t, "words_1")
	c := dial(t, url, "partials=false", nil)
	defer c.CloseNow()
	sendPCM(t, c, s16le(pcm), 3200)
	got := make(chan []serverMessage, 1)
	codes := make(chan websocket.StatusCode, 1)
	go func() {
		ms, code := readAll(t, c)
		got <- ms
		codes <- code
	}()
	require.Eventually(t, func() bool { return value(t, s.m.streamAudio) >= float64(len(pcm))/16000-1e-6 }, 30*time.Second, 5*time.Millisecond)
	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	msgs, code := <-got, <-codes
	assert.Equal(t, websocket.StatusGoingAway, code)
	require.Len(t, msgs, 2, "%+v", msgs)
	assert.Equal(t, "final", msgs[0].Type)
	assert.Equal(t, truth, msgs[0].Text)
	assert.Equal(t, "done", msgs[1].Type)
	assert.Equal(t, "shutting_down", msgs[1].Reason)
	require.NoError(t, <-shut)
	require.True(t, errors.Is(<-served, http.ErrServerClosed))
	assert.Equal(t, 1.0, value(t, s.m.streams.WithLabelValues("shutting_down")))
	assert.Equal(t, 0, s.streams.count())
	ok, draining := s.streams.acquire(10)
	assert.False(t, ok)
	assert.True(t, draining)
}
