// Command streamclient streams audio to edge serve's GET /v1/audio/stream
// and prints the finals on stdout (one line an utterance, or the final
// messages' JSON with --json) and the partials on stderr.
//
//	go run ./examples/streamclient clip.wav                       # a file, decoded and resampled to 16 kHz
//	arecord -q -f S16_LE -r 16000 -c 1 -t raw | go run ./examples/streamclient -   # a microphone
//
// Flags: --url (default ws://127.0.0.1:8080/v1/audio/stream), --key (else
// $EDGE_SERVE__API_KEY; sent as a bearer token), --rate (the model's, 16000),
// --realtime (pace a file as if it were live), --json.
package main

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"github.com/edgespeech/edge/runtime/audio"
)

func main() {
	addr := flag.String("url", "ws://127.0.0.1:8080/v1/audio/stream", "the stream endpoint")
	key := flag.String("key", os.Getenv("EDGE_SERVE__API_KEY"), "API key (default $EDGE_SERVE__API_KEY)")
	rate := flag.Int("rate", 16000, "sample rate the model takes, Hz")
	realtime := flag.Bool("realtime", false, "send a file no faster than real time")
	asJSON := flag.Bool("json", false, "print each final message's JSON instead of its text")
	flag.Parse()
	if flag.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: streamclient [flags] AUDIO|-   (- is 16-bit mono PCM at --rate on stdin)")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var src io.Reader = os.Stdin
	if p := flag.Arg(0); p != "-" {
		pcm, err := audio.Load(p, *rate)
		if err != nil {
			fmt.Fprintln(os.Stderr, "streamclient:", err)
			os.Exit(1)
		}
		src = &pcmReader{pcm: pcm}
	}
	opt := options{URL: *addr, Key: *key, Rate: *rate, Realtime: *realtime, JSON: *asJSON}
	if err := stream(ctx, opt, src, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "streamclient:", err)
		os.Exit(1)
	}
}

type options struct {
	URL, Key       string
	Rate           int
	Realtime, JSON bool
}

// message is any message of the protocol (see serve/stream.go).
type message struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Reason string `json:"reason"`
	Error  *struct {
		Message string `json:"message"`
		Code    string `json:"code"`
	} `json:"error"`
}

// stream sends src (s16le mono at opt.Rate) in 100 ms frames, then
// {"type":"end"}, and prints the results until done.
func stream(ctx context.Context, opt options, src io.Reader, out, log io.Writer) error {
	u, err := url.Parse(opt.URL)
	if err != nil {
		return err
	}
	q := u.Query()
	q.Set("format", "s16le")
	q.Set("sample_rate", strconv.Itoa(opt.Rate))
	u.RawQuery = q.Encode()
	dial := &websocket.DialOptions{HTTPHeader: http.Header{}}
	if opt.Key != "" {
		dial.HTTPHeader.Set("Authorization", "Bearer "+opt.Key)
	}
	c, resp, err := websocket.Dial(ctx, u.String(), dial)
	if err != nil {
		if resp != nil {
			body, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("%s: %s", resp.Status, body)
		}
		return err
	}
	defer c.CloseNow()
	c.SetReadLimit(1 << 20)

	sent := make(chan error, 1)
	go func() { sent <- send(ctx, c, src, opt) }()
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
				return nil
			}
			return err
		}
		var m message
		if err := json.Unmarshal(b, &m); err != nil {
			return fmt.Errorf("server message %q: %w", b, err)
		}
		switch m.Type {
		case "partial":
			fmt.Fprintf(log, "partial: %s\n", m.Text)
		case "final":
			if opt.JSON {
				fmt.Fprintf(out, "%s\n", b)
			} else {
				fmt.Fprintln(out, m.Text)
			}
		case "error":
			fmt.Fprintf(log, "server error %s: %s\n", m.Error.Code, m.Error.Message)
		case "done":
			if err := <-sent; err != nil && !errors.Is(err, context.Canceled) {
				return err
			}
			if m.Reason != "end" {
				return fmt.Errorf("the server ended the stream: %s", m.Reason)
			}
			return nil
		}
	}
}

// send writes src in 100 ms binary messages, then the end message.
func send(ctx context.Context, c *websocket.Conn, src io.Reader, opt options) error {
	buf := make([]byte, opt.Rate/10*2)
	start, sent := time.Now(), 0
	for {
		n, err := io.ReadFull(src, buf)
		n -= n % 2
		if n > 0 {
			if opt.Realtime {
				time.Sleep(time.Until(start.Add(time.Duration(sent) * time.Second / time.Duration(opt.Rate))))
			}
			if werr := c.Write(ctx, websocket.MessageBinary, buf[:n]); werr != nil {
				return werr
			}
			sent += n / 2
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			break
		}
		if err != nil {
			return err
		}
	}
	return c.Write(ctx, websocket.MessageText, []byte(`{"type":"end"}`))
}

// pcmReader reads float samples as s16le bytes.
type pcmReader struct{ pcm []float32 }

func (r *pcmReader) Read(p []byte) (int, error) {
	if len(r.pcm) == 0 {
		return 0, io.EOF
	}
	n := min(len(p)/2, len(r.pcm))
	for i, v := range r.pcm[:n] {
		s := math.Round(float64(v) * 32768)
		binary.LittleEndian.PutUint16(p[2*i:], uint16(int16(max(-32768, min(32767, s)))))
	}
	r.pcm = r.pcm[n:]
	return 2 * n, nil
}
