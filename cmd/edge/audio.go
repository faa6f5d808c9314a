package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"

	"github.com/edgespeech/edge/runtime/audio"
)

// audioFlags adds the flags that say how inputs are decoded.
func audioFlags(fs *pflag.FlagSet) {
	fs.Bool("strict", false, "a truncated input is an error (default: transcribe what is there, with a warning)")
	fs.String("raw", "", "inputs are headerless PCM: "+strings.Join(audio.RawEncodings(), " or ")+" (needs --rate)")
	fs.Int("rate", 0, "sample rate of --raw input, Hz")
	fs.Int("channels", 0, "channels of --raw input, interleaved (default 1)")
	fs.BoolP("quiet", "q", false, "no progress on stderr (warnings and errors are still printed)")
}

// logger writes warnings and notes to stderr.
type logger struct {
	w     io.Writer
	quiet bool
}

// warn reports something wrong with one input that did not stop it.
func (l logger) warn(input, msg string) {
	fmt.Fprintf(l.w, "edge: warning: %s: %s\n", displayName(input), msg)
}

// note is informational; --quiet drops it.
func (l logger) note(msg string) {
	if !l.quiet {
		fmt.Fprintf(l.w, "edge: %s\n", msg)
	}
}

// audioSource decodes inputs as the flags say.
type audioSource struct {
	opts audio.Options
	log  logger
}

func newAudioSource(k *koanf.Koanf) (*audioSource, error) {
	s := &audioSource{opts: audio.Options{Strict: k.Bool("strict")}, log: logger{w: os.Stderr, quiet: k.Bool("quiet")}}
	raw, rate, ch := k.String("raw"), k.Int("rate"), k.Int("channels")
	if raw == "" {
		if rate != 0 || ch != 0 {
			return nil, fmt.Errorf("--rate and --channels describe --raw input; give --raw too: %w", errUsage)
		}
		return s, nil
	}
	if rate == 0 {
		return nil, fmt.Errorf("--raw %s needs --rate HZ: %w", raw, errUsage)
	}
	f := audio.RawFormat{Encoding: raw, Rate: rate, Channels: max(ch, 1)}
	if err := f.Check(); err != nil {
		return nil, fmt.Errorf("%v: %w", err, errUsage)
	}
	s.opts.Raw = &f
	return s, nil
}

// open starts decoding one input (- is standard input) as a stream of mono
// samples at rate Hz; the caller closes it and reads its truncation report
// at the end.
func (s *audioSource) open(path string, rate int) (*audio.Stream, error) {
	if path == stdinName {
		return s.opts.OpenReader(stdin, -1, "stdin", rate)
	}
	return s.opts.Open(path, rate)
}

// load decodes one input (- is standard input) to mono at rate Hz and
// warns when it is truncated.
func (s *audioSource) load(path string, rate int) (*audio.Clip, error) {
	var (
		clip *audio.Clip
		err  error
	)
	if path == stdinName {
		clip, err = s.opts.LoadReader(stdin, -1, "stdin", rate)
	} else {
		clip, err = s.opts.Load(path, rate)
	}
	if err != nil {
		return nil, err
	}
	if clip.Truncated != nil {
		s.log.warn(path, fmt.Sprintf("truncated %s: %s; transcribing what is there (--strict makes this an error)", clip.Format, clip.Truncated))
	}
	return clip, nil
}
