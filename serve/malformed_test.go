package serve

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every malformed request gets its 4xx JSON error, no message leaks a path
// or a stack, and the server keeps serving.
func TestMalformedRequests(t *testing.T) {
	cfg := testConfig(t)
	cfg.MaxUploadBytes = 256 << 10
	cfg.MaxAudioSeconds = 4
	s, url := startServer(t, cfg, realRecognizer(t))
	wav, truth := readClip(t, "words_1")
	demo, _ := readClip(t, "demo") // 5.35 s, 171 KB
	tr := url + "/v1/audio/transcriptions"
	al := url + "/v1/audio/alignments"
	garbage := make([]byte, 8192)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range garbage {
		garbage[i] = byte(rng.UintN(256))
	}
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)

	cases := []struct {
		name   string
		url    string
		parts  []part
		status int
		code   string
		param  string
	}{
		{"no file", tr, []part{field("model", "whisper-1")}, 400, "missing_required_parameter", "file"},
		{"empty form", tr, nil, 400, "missing_required_parameter", "file"},
		{"file as a text field", tr, []part{field("file", "RIFF....")}, 400, "invalid_type", "file"},
		{"two files", tr, []part{file("a.wav", wav), file("b.wav", wav)}, 400, "duplicate_field", "file"},
		{"empty file", tr, []part{file("a.wav", nil)}, 400, "invalid_file", "file"},
		{"garbage bytes", tr, []part{file("noise.wav", garbage)}, 400, "invalid_file", "file"},
		{"not audio", tr, []part{file("README.md", readme)}, 400, "invalid_file", "file"},
		{"too short", tr, []part{file("tick.wav", silence(10))}, 400, "audio_too_short", "file"},
		{"response_format as a file", tr, []part{file("a.wav", wav), {name: "response_format", filename: "f.txt", data: []byte("json")}}, 400, "invalid_type", "response_format"},
		{"unknown response_format", tr, []part{file("a.wav", wav), field("response_format", "xml")}, 400, "invalid_value", "response_format"},
		{"granularity without verbose_json", tr, []part{file("a.wav", wav), field("timestamp_granularities[]", "word")}, 400, "invalid_value", "timestamp_granularities[]"},
		{"unknown granularity", tr, []part{file("a.wav", wav), field("response_format", "verbose_json"), field("timestamp_granularities[]", "char")}, 400, "invalid_value", "timestamp_granularities[]"},
		{"temperature not a number", tr, []part{file("a.wav", wav), field("temperature", "hot")}, 400, "invalid_value", "temperature"},
		{"temperature out of range", tr, []part{file("a.wav", wav), field("temperature", "7")}, 400, "invalid_value", "temperature"},
		{"language not a code", tr, []part{file("a.wav", wav), field("language", "English!")}, 400, "invalid_language", "language"},
		{"stream", tr, []part{file("a.wav", wav), field("stream", "true")}, 400, "unsupported_value", "stream"},
		{"field too long", tr, []part{file("a.wav", wav), field("model", strings.Repeat("m", 5000))}, 400, "field_too_long", "model"},
		{"field not UTF-8", tr, []part{file("a.wav", wav), field("prompt", "\xff\xfe")}, 400, "invalid_value", "prompt"},
		{"too many parts", tr, append([]part{file("a.wav", wav)}, repeatField("x", "1", 70)...), 400, "too_many_parts", ""},
		{"file over the upload limit", tr, []part{file("big.wav", bytes.Repeat(garbage, 40))}, 413, "file_too_large", "file"},
		{"audio over the duration limit", tr, []part{file("demo.wav", demo)}, 413, "audio_too_long", "file"},
		{"align without text", al, []part{file("a.wav", wav)}, 400, "missing_required_parameter", "text"},
		{"align text without words", al, []part{file("a.wav", wav), field("text", "?! ...")}, 400, "invalid_value", "text"},
		{"align text too long for the audio", al, []part{file("a.wav", wav), field("text", strings.Repeat(truth+" ", 8))}, 400, "audio_too_short", "text"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := post(t, tc.url, tc.parts...)
			e := requireError(t, tc.status, tc.code, status, h, body)
			if tc.param == "" {
				assert.Nil(t, e.Error.Param)
			} else if assert.NotNil(t, e.Error.Param) {
				assert.Equal(t, tc.param, *e.Error.Param)
			}
			assertNoLeak(t, s, body)
			requireHealthy(t, url)
		})
	}

	raw := []struct {
		name    string
		request func(t *testing.T) *http.Request
		status  int
		code    string
	}{
		{"not multipart", func(t *testing.T) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, tr, strings.NewReader(`{"file": "a.wav"}`))
			r.Header.Set("Content-Type", "application/json")
			return r
		}, 400, "invalid_content_type"},
		{"multipart without a boundary", func(t *testing.T) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, tr, bytes.NewReader(wav))
			r.Header.Set("Content-Type", "multipart/form-data")
			return r
		}, 400, "invalid_content_type"},
		{"boundary that never comes", func(t *testing.T) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, tr, bytes.NewReader(garbage))
			r.Header.Set("Content-Type", "multipart/form-data; boundary=xyzzy")
			return r
		}, 400, "truncated_body"},
		{"streamed upload over the limit (chunked)", func(t *testing.T) *http.Request {
			body, ct := multipartBody(t, file("big.wav", bytes.Repeat(garbage, 40)))
			r, _ := http.NewRequest(http.MethodPost, tr, io.MultiReader(bytes.NewReader(body))) // no length: chunked
			r.Header.Set("Content-Type", ct)
			return r
		}, 413, "file_too_large"},
		{"GET", func(t *testing.T) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, tr, nil)
			return r
		}, 405, "method_not_allowed"},
		{"unknown route", func(t *testing.T) *http.Request {
			r, _ := http.NewRequest(http.MethodPost, url+"/v1/audio/translations", nil)
			return r
		}, 404, "unknown_url"},
		{"streaming route", func(t *testing.T) *http.Request {
			r, _ := http.NewRequest(http.MethodGet, url+"/v1/realtime", nil)
			return r
		}, 501, "not_implemented"},
	}
	for _, tc := range raw {
		t.Run(tc.name, func(t *testing.T) {
			status, h, body := do(t, tc.request(t))
			requireError(t, tc.status, tc.code, status, h, body)
			assertNoLeak(t, s, body)
			requireHealthy(t, url)
		})
	}

	// Requests written byte by byte on a TCP connection, as curl or a broken
	// client would send them.
	t.Run("10 GB Content-Length", func(t *testing.T) {
		status, body := rawRequest(t, url, "POST /v1/audio/transcriptions HTTP/1.1\r\nHost: edge\r\n"+
			"Content-Type: multipart/form-data; boundary=b\r\nContent-Length: 10737418240\r\n\r\n--b\r\n", false)
		requireError(t, 413, "file_too_large", status, jsonHeader, body)
		requireHealthy(t, url)
	})
	t.Run("truncated upload", func(t *testing.T) {
		form, ct := multipartBody(t, file("a.wav", wav), field("model", "whisper-1"))
		head := fmt.Sprintf("POST /v1/audio/transcriptions HTTP/1.1\r\nHost: edge\r\nContent-Type: %s\r\nContent-Length: %d\r\n\r\n", ct, len(form))
		status, body := rawRequest(t, url, head+string(form[:len(form)/2]), true)
		requireError(t, 400, "truncated_body", status, jsonHeader, body)
		requireHealthy(t, url)
	})
	t.Run("garbage request line", func(t *testing.T) {
		status, _ := rawRequest(t, url, "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 garbage\r\n\r\n", true)
		assert.Equal(t, 400, status)
		requireHealthy(t, url)
	})

	// Still serving, and every spooled upload is gone.
	status, _, body := post(t, tr, file("words_1.wav", wav))
	require.Equal(t, 200, status, "%s", body)
	var res struct{ Text string }
	require.NoError(t, json.Unmarshal(body, &res))
	assert.Equal(t, truth, res.Text)
	requireSpoolEmpty(t, s)
}

func repeatField(name, value string, n int) []part {
	out := make([]part, n)
	for i := range out {
		out[i] = field(name, value)
	}
	return out
}

var jsonHeader = http.Header{"Content-Type": {"application/json"}}

// rawRequest writes req on a new connection (half-closing it after when
// closeWrite) and reads the answer's status and body.
func rawRequest(t *testing.T, url, req string, closeWrite bool) (int, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(url, "http://"))
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	_, err = io.WriteString(conn, req)
	require.NoError(t, err)
	if closeWrite {
		require.NoError(t, conn.(*net.TCPConn).CloseWrite())
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || len(body) == 0 || body[0] == '{' {
		assert.Equal(t, "application/json", resp.Header.Get("Content-Type"), "%s", body)
	}
	return resp.StatusCode, body
}

// assertNoLeak checks an answer names no server path and holds no stack.
func assertNoLeak(t *testing.T, s *Server, body []byte) {
	t.Helper()
	for _, bad := range []string{s.dir, os.TempDir() + "/", "goroutine ", ".go:", "upload-"} {
		assert.NotContains(t, string(body), bad)
	}
}

func requireHealthy(t *testing.T, url string) {
	t.Helper()
	resp, err := http.Get(url + "/health")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 200, resp.StatusCode)
}

func requireSpoolEmpty(t *testing.T, s *Server) {
	t.Helper()
	var left []os.DirEntry
	for range 100 { // a job's cleanup may still be running
		var err error
		left, err = os.ReadDir(s.dir)
		require.NoError(t, err)
		if len(left) == 0 {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("spooled uploads left behind: %v", left)
}
