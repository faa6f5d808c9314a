package serve

import (
	"fmt"
	"time"
)

// StreamConfig holds the limits of GET /v1/audio/stream. Its keys sit
// directly under "serve." (serve.max_streams, EDGE_SERVE__MAX_STREAMS,
// --max-streams).
type StreamConfig struct {
	// MaxStreams is how many streams may be open at once; one more is
	// refused before the WebSocket upgrade with 429 and Retry-After.
	// Streams do not take places in the request queue: each runs its
	// encoder steps itself, concurrently with the batches.
	MaxStreams int `koanf:"max_streams"`
	// MaxStreamDuration bounds a stream both in wall-clock time from the
	// upgrade and in audio received: past either, the stream is flushed
	// (its last final is sent), an error with code max_duration and done
	// follow, and the connection closes.
	MaxStreamDuration time.Duration `koanf:"max_stream_duration"`
	// StreamIdleTimeout ends a stream that sends no message for that long
	// (flushed, error idle_timeout, done, closed).
	StreamIdleTimeout time.Duration `koanf:"stream_idle_timeout"`
	// MaxFrameBytes bounds one WebSocket message (binary PCM or text);
	// a larger one gets error frame_too_large and the connection closes
	// with 1009. A message is read only up to this bound.
	MaxFrameBytes int64 `koanf:"max_frame_bytes"`
	// StreamOrigins are the Origin host patterns (path.Match syntax, e.g.
	// "app.example.com" or "*.example.com") a browser page may open a
	// stream from besides the server's own host; empty: same-origin pages
	// and non-browser clients (which send no Origin) only.
	StreamOrigins []string `koanf:"stream_origins"`
}

func defaultStreamConfig() StreamConfig {
	return StreamConfig{
		MaxStreams:        16,
		MaxStreamDuration: time.Hour,
		StreamIdleTimeout: 30 * time.Second,
		MaxFrameBytes:     1 << 20,
	}
}

func (c *StreamConfig) check() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.MaxStreams < 1 {
		bad("serve.max_streams %d: want >= 1", c.MaxStreams)
	}
	if c.MaxStreamDuration <= 0 {
		bad("serve.max_stream_duration %v: want > 0", c.MaxStreamDuration)
	}
	if c.StreamIdleTimeout <= 0 {
		bad("serve.stream_idle_timeout %v: want > 0", c.StreamIdleTimeout)
	}
	if c.MaxFrameBytes < 4 {
		bad("serve.max_frame_bytes %d: want >= 4 (one f32le sample)", c.MaxFrameBytes)
	}
	return errs
}
