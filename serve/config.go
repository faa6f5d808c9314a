package serve

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"regexp"
	"strings"
	"time"
)

// Config is a server's configuration. The koanf tags are the keys under
// "serve." in edge's layered configuration (EDGE_SERVE__MAX_BATCH=4, a YAML
// file's serve: {max_batch: 4}, or the flag --max-batch 4).
type Config struct {
	// Listen is the TCP address to listen on, loopback by default: a
	// device on a network answers other hosts only when told to.
	Listen string `koanf:"listen"`
	// APIKey, when set, makes every route but /health require
	// "Authorization: Bearer <APIKey>" (compared in constant time).
	APIKey string `koanf:"api_key"`
	// APIKeyFile names a file holding the API key (surrounding white space
	// trimmed); it keeps the key out of the process list and the
	// environment. Setting both APIKey and APIKeyFile is an error.
	APIKeyFile string `koanf:"api_key_file"`

	// MaxUploadBytes bounds the uploaded file (bytes; OpenAI's 25 MiB by
	// default). The whole request body may exceed it by the form-field
	// budget (fieldBudget); a larger Content-Length is refused with 413
	// before a byte of the body is read, a body that grows past it while
	// streaming likewise.
	MaxUploadBytes int64 `koanf:"max_upload_bytes"`
	// MaxAudioSeconds bounds the decoded audio's duration (413 beyond it).
	MaxAudioSeconds float64 `koanf:"max_audio_seconds"`
	// MaxTextBytes bounds the text field of /v1/audio/alignments.
	MaxTextBytes int64 `koanf:"max_text_bytes"`

	// QueueSize is how many admitted requests may wait (uploading or
	// queued) beyond those running: at most QueueSize + Parallel*MaxBatch
	// requests are admitted at once, and one more gets 429 with
	// Retry-After. Spooled uploads on disk are bounded by that count times
	// MaxUploadBytes.
	QueueSize int `koanf:"queue_size"`
	// MaxBatch is the most requests one batch holds.
	MaxBatch int `koanf:"max_batch"`
	// BatchWait is how long a batch that is not full waits for more
	// requests while another batch is running; an idle server starts a
	// request at once.
	BatchWait time.Duration `koanf:"batch_wait"`
	// EncoderBatch is the most audio chunks the recogniser encodes in one
	// run (asr.Options.Batch, with BatchWait as its wait): the chunks of
	// the requests running at once share encoder runs. 0 means MaxBatch;
	// 1 (the default) encodes each chunk alone: on the H200 with the CUDA EP,
	// requests of one clip each served more requests per second unbatched
	// (BENCHMARKS.md), while corpus jobs gain several-fold from batching.
	EncoderBatch int `koanf:"encoder_batch"`
	// Parallel is how many batches run at the same time.
	Parallel int `koanf:"parallel"`
	// RequestTimeout bounds one request from its first byte to its answer
	// (upload, queue and recognition): past it the work is cancelled and
	// the answer is 504.
	RequestTimeout time.Duration `koanf:"request_timeout"`
	// DrainTimeout bounds how long Shutdown waits for admitted requests to
	// finish before it cancels them.
	DrainTimeout time.Duration `koanf:"drain_timeout"`

	// Languages are the ISO-639 codes the loaded model transcribes (e.g.
	// ["en"]); a request naming another language gets 400. Empty: the
	// model manifest's language when it states one, else any well-formed
	// code is accepted.
	Languages []string `koanf:"languages"`
	// Streams configures GET /v1/audio/stream (see stream.go).
	Streams StreamConfig `koanf:",squash"`

	// TempDir is where uploads are spooled ("" = the system's temporary
	// directory); the server makes a private directory inside it and
	// removes it on Shutdown.
	TempDir string `koanf:"temp_dir"`

	// Logger receives one line per request and every internal error (with
	// stack traces of recovered panics); nil logs text to stderr.
	Logger *slog.Logger `koanf:"-"`
}

// fieldBudget is what a request body may hold beyond the file: the form's
// other fields and the multipart framing.
const fieldBudget = 64 << 10

// DefaultConfig is the configuration edge serve starts from.
func DefaultConfig() Config {
	return Config{
		Listen:          "127.0.0.1:8080",
		MaxUploadBytes:  25 << 20,
		MaxAudioSeconds: 900,
		MaxTextBytes:    256 << 10,
		QueueSize:       32,
		MaxBatch:        4,
		BatchWait:       5 * time.Millisecond,
		EncoderBatch:    1,
		Parallel:        2,
		RequestTimeout:  2 * time.Minute,
		DrainTimeout:    30 * time.Second,
		Streams:         defaultStreamConfig(),
	}
}

var languageCode = regexp.MustCompile(`^[a-z]{2,3}$`)

// check validates c and resolves APIKeyFile into APIKey.
func (c *Config) check() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if _, _, err := net.SplitHostPort(c.Listen); err != nil {
		bad("serve.listen %q: want HOST:PORT (%v)", c.Listen, err)
	}
	if c.MaxUploadBytes <= 0 {
		bad("serve.max_upload_bytes %d: want > 0", c.MaxUploadBytes)
	}
	if c.MaxAudioSeconds <= 0 {
		bad("serve.max_audio_seconds %g: want > 0", c.MaxAudioSeconds)
	}
	if c.MaxTextBytes <= 0 {
		bad("serve.max_text_bytes %d: want > 0", c.MaxTextBytes)
	}
	if c.QueueSize < 0 {
		bad("serve.queue_size %d: want >= 0", c.QueueSize)
	}
	if c.MaxBatch < 1 {
		bad("serve.max_batch %d: want >= 1", c.MaxBatch)
	}
	if c.EncoderBatch < 0 {
		bad("serve.encoder_batch %d: want >= 0", c.EncoderBatch)
	}
	if c.Parallel < 1 {
		bad("serve.parallel %d: want >= 1", c.Parallel)
	}
	if c.BatchWait < 0 {
		bad("serve.batch_wait %v: want >= 0", c.BatchWait)
	}
	if c.RequestTimeout <= 0 {
		bad("serve.request_timeout %v: want > 0", c.RequestTimeout)
	}
	if c.DrainTimeout < 0 {
		bad("serve.drain_timeout %v: want >= 0", c.DrainTimeout)
	}
	for i, l := range c.Languages {
		c.Languages[i] = strings.ToLower(strings.TrimSpace(l))
		if !languageCode.MatchString(c.Languages[i]) {
			bad("serve.languages: %q is not an ISO-639-1 or -3 code", l)
		}
	}
	errs = append(errs, c.Streams.check()...)
	if c.APIKeyFile != "" {
		if c.APIKey != "" {
			bad("set serve.api_key or serve.api_key_file, not both")
		} else if b, err := os.ReadFile(c.APIKeyFile); err != nil {
			bad("serve.api_key_file: %v", err)
		} else if c.APIKey = strings.TrimSpace(string(b)); c.APIKey == "" {
			bad("serve.api_key_file %s is empty", c.APIKeyFile)
		}
	}
	return errors.Join(errs...)
}

// Loopback reports whether addr (HOST:PORT) listens on loopback only.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// EncoderBatchSize is EncoderBatch with its default (MaxBatch) applied.
func (c *Config) EncoderBatchSize() int {
	if c.EncoderBatch == 0 {
		return c.MaxBatch
	}
	return c.EncoderBatch
}
