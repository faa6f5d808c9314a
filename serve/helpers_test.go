package serve

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"log/slog"
	"mime/multipart"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/asr"
	"github.com/edgespeech/edge/asr/transcript"
	"github.com/edgespeech/edge/runtime/audio"
	"github.com/edgespeech/edge/runtime/model"
)

// The bundled model and its clips (see asr's tests).
const (
	defaultModel = "../models/default"
	clipDir      = "../models/default/testdata"
)

var (
	recOnce sync.Once
	rec     *asr.Recognizer
	recErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if rec != nil {
		_ = rec.Close()
	}
	os.Exit(code)
}

// realRecognizer is the bundled model, opened once for the package's tests.
func realRecognizer(t testing.TB) *asr.Recognizer {
	t.Helper()
	recOnce.Do(func() { rec, recErr = asr.Open(defaultModel, asr.Options{}) })
	require.NoError(t, recErr)
	return rec
}

// clip reads a test clip's WAV bytes and its reference text.
func readClip(t testing.TB, name string) ([]byte, string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(clipDir, name+".wav"))
	require.NoError(t, err)
	j, err := os.ReadFile(filepath.Join(clipDir, name+".json"))
	require.NoError(t, err)
	var truth struct {
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(j, &truth))
	return b, truth.Text
}

// loadPCM decodes a test clip at 16 kHz.
func loadPCM(t testing.TB, name string) []float32 {
	t.Helper()
	pcm, err := audio.Load(filepath.Join(clipDir, name+".wav"), 16000)
	require.NoError(t, err)
	return pcm
}

// testConfig is DefaultConfig on an ephemeral loopback port, logging to t.
func testConfig(t testing.TB) Config {
	cfg := DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.TempDir = t.TempDir()
	cfg.Logger = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	return cfg
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}

// startServer serves r (nil: stays loading) with cfg on a loopback port and
// returns its base URL; the server is shut down when the test ends.
func startServer(t testing.TB, cfg Config, r Recognizer) (*Server, string) {
	t.Helper()
	s, err := New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", cfg.Listen)
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- s.Serve(ln) }()
	if r != nil {
		s.Ready(r, nil)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Shutdown(ctx))
		require.ErrorIs(t, <-done, http.ErrServerClosed)
	})
	return s, "http://" + ln.Addr().String()
}

// part is one multipart part: a field, or a file when filename is set.
type part struct {
	name, filename string
	data           []byte
}

func field(name, value string) part { return part{name: name, data: []byte(value)} }

func file(name string, data []byte) part { return part{name: "file", filename: name, data: data} }

// multipartBody builds a form.
func multipartBody(t testing.TB, parts ...part) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, p := range parts {
		var w io.Writer
		var err error
		if p.filename != "" {
			w, err = mw.CreateFormFile(p.name, p.filename)
		} else {
			w, err = mw.CreateFormField(p.name)
		}
		require.NoError(t, err)
		_, err = w.Write(p.data)
		require.NoError(t, err)
	}
	require.NoError(t, mw.Close())
	return b.Bytes(), mw.FormDataContentType()
}

// post sends a form and returns the status, headers and body.
func post(t testing.TB, url string, parts ...part) (int, http.Header, []byte) {
	t.Helper()
	body, ct := multipartBody(t, parts...)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Content-Type", ct)
	return do(t, req)
}

func do(t testing.TB, req *http.Request) (int, http.Header, []byte) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, resp.Header, b
}

// errorBody is OpenAI's error JSON.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// requireError checks an answer is a JSON error of the given status and
// code and returns it.
func requireError(t testing.TB, status int, code string, gotStatus int, h http.Header, body []byte) errorBody {
	t.Helper()
	require.Equal(t, status, gotStatus, "body: %s", body)
	require.Equal(t, "application/json", h.Get("Content-Type"), "body: %s", body)
	var e errorBody
	require.NoError(t, json.Unmarshal(body, &e), "body: %s", body)
	require.NotEmpty(t, e.Error.Message)
	require.NotEmpty(t, e.Error.Type)
	require.NotNil(t, e.Error.Code, "body: %s", body)
	require.Equal(t, code, *e.Error.Code, "body: %s", body)
	return e
}

// fakeRecognizer answers with a fixed transcript after run (when set).
type fakeRecognizer struct {
	run func(ctx context.Context, pcm []float32) error
}

func (f *fakeRecognizer) Manifest() *model.Manifest {
	return &model.Manifest{Name: "fake", SampleRate: 16000, WordDelimiter: "|", FrameStride: 0.02}
}

func (f *fakeRecognizer) Transcribe(ctx context.Context, pcm []float32) (*transcript.Transcript, error) {
	if f.run != nil {
		if err := f.run(ctx, pcm); err != nil {
			return nil, err
		}
	}
	return &transcript.Transcript{Text: "hello world", Duration: time.Second,
		Words: []transcript.Word{{Text: "hello", Start: 0, End: 400 * time.Millisecond, Confidence: 0.9},
			{Text: "world", Start: 500 * time.Millisecond, End: 900 * time.Millisecond, Confidence: 0.8}}}, nil
}

func (f *fakeRecognizer) Align(ctx context.Context, pcm []float32, text string) (*transcript.Transcript, error) {
	return f.Transcribe(ctx, pcm)
}

// silence is a WAV file of n 16 kHz samples of silence.
func silence(n int) []byte {
	var b bytes.Buffer
	le := func(v any) { _ = binary.Write(&b, binary.LittleEndian, v) }
	b.WriteString("RIFF")
	le(uint32(36 + 2*n))
	b.WriteString("WAVEfmt ")
	le(uint32(16))
	le(uint16(1))
	le(uint16(1))
	le(uint32(16000))
	le(uint32(32000))
	le(uint16(2))
	le(uint16(16))
	b.WriteString("data")
	le(uint32(2 * n))
	b.Write(make([]byte, 2*n))
	return b.Bytes()
}
