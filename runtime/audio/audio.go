// Package audio turns audio files into the mono float32 waveform a speech
// model consumes: decoding (Decode, Options.Decode), downmix (Clip.Mono) and
// band-limited resampling (Resample, Resampler), with Load doing all three.
//
// Formats are recognised by their content (magic bytes), never by the file
// name. Decoded natively, in pure Go: WAV (PCM 8/16/24/32, float 32/64,
// µ-law, A-law, IMA ADPCM; RIFF, RF64, BW64, WAVE_FORMAT_EXTENSIBLE), AIFF
// and AIFF-C (PCM, sowt, float, µ-law, A-law), FLAC, MP3 (MPEG 1/2/2.5 layer
// III, with the encoder delay and padding of a LAME/Xing header trimmed as
// ffmpeg does), Ogg Vorbis and Ogg Opus, and headerless PCM (Options.Raw).
// Everything else (M4A/AAC, WebM, Matroska, video containers, ...) is handed
// to ffmpeg when it is on PATH; without it the error says so.
//
// Sample scale: integer PCM maps to [-1, 1) (the value divided by 2^(bits-1),
// 8-bit WAV data being unsigned with 128 as zero: the convention of
// soundfile, scipy, torchaudio and ffmpeg); µ-law, A-law and ADPCM decode to
// 16-bit values first (ffmpeg's tables), then scale the same way; float PCM
// and the lossy decoders' output are passed through unchanged, so a file that
// stores values beyond full scale yields them (they are checked to be
// finite). Resampling can overshoot full scale slightly near clipped
// transients, as every band-limited resampler does.
//
// Truncation: input that ends before what its headers promise is decoded as
// far as it goes and reported in Clip.Truncated (with the missing duration
// where the headers say how long the audio is); Options.Strict makes it an
// error wrapping ErrTruncated instead. Nothing is allocated for what a header
// merely claims: buffers grow with the bytes actually read and the frames
// actually decoded.
package audio

import (
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// Clip is decoded audio.
type Clip struct {
	SampleRate int // Hz, >= 1
	Channels   int // >= 1
	// Samples holds interleaved frames: sample c of frame f is
	// Samples[f*Channels+c]. len(Samples) is a multiple of Channels. The
	// channel order is the container's (WAV, FLAC: front left, front right,
	// ...; Vorbis and Opus: the Vorbis order). The clip owns the slice.
	Samples []float32
	// Format names the container and encoding, e.g. "WAV (PCM 16-bit)",
	// "FLAC 24-bit", "MP3 (MPEG-1 layer III)", "Ogg Opus", "M4A via ffmpeg".
	Format string
	// Truncated is set when the input ends before what its headers promise;
	// Samples then hold what was there. Nil for complete input.
	Truncated *Truncation
}

// Truncation describes input that ends early.
type Truncation struct {
	// Missing is how much audio the headers promise beyond the decoded
	// samples; 0 when they do not say how long the audio is.
	Missing time.Duration
	// Detail says what ended early, e.g. "data chunk at offset 36 claims
	// 32000 bytes, the input ends after 12000".
	Detail string
}

func (t *Truncation) String() string {
	if t.Missing > 0 {
		d := t.Missing.Round(time.Microsecond)
		if d >= time.Second {
			d = d.Round(time.Millisecond)
		}
		return fmt.Sprintf("%s (%v of audio missing)", t.Detail, d)
	}
	return t.Detail + " (missing duration unknown)"
}

// Frames is the number of sample frames (samples per channel).
func (c *Clip) Frames() int { return len(c.Samples) / c.Channels }

// Duration is the clip's length in time.
func (c *Clip) Duration() time.Duration {
	return frameDuration(int64(c.Frames()), c.SampleRate)
}

func frameDuration(frames int64, rate int) time.Duration {
	if rate <= 0 || frames <= 0 {
		return 0
	}
	return time.Duration(float64(frames) / float64(rate) * float64(time.Second))
}

// Mono returns one sample per frame, the mean of the frame's channels. For a
// one-channel clip it returns Samples itself (no copy); otherwise a new slice.
func (c *Clip) Mono() []float32 {
	if c.Channels == 1 {
		return c.Samples
	}
	ch := c.Channels
	out := make([]float32, c.Frames())
	inv := 1 / float32(ch)
	for f := range out {
		var s float32
		for _, v := range c.Samples[f*ch : (f+1)*ch] {
			s += v
		}
		out[f] = s * inv
	}
	return out
}

// Options control decoding. The zero value decodes every supported format,
// reports truncation in Clip.Truncated and runs ffmpeg from PATH for formats
// without a native decoder.
type Options struct {
	// Strict makes truncated input an error wrapping ErrTruncated.
	Strict bool
	// Raw, when set, reads the input as headerless PCM of that layout
	// instead of recognising a container.
	Raw *RawFormat
	// FFmpeg is the ffmpeg executable for formats without a native decoder:
	// a path, or a name looked up on PATH ("" means "ffmpeg").
	FFmpeg string
	// NoFFmpeg refuses those formats instead of running ffmpeg.
	NoFFmpeg bool
	// MaxSamples, when > 0, bounds the decoded samples (all channels): a
	// stream that decodes to more is an error. Compressed formats can expand
	// a small input a lot (FLAC's constant subframes); this caps the memory
	// an untrusted input can claim.
	MaxSamples int64

	// sink, set by a Stream, receives the samples as they are decoded.
	sink sampleSink
}

// Decode reads one audio stream with the zero Options: see Options.Decode.
func Decode(r io.Reader, size int64) (*Clip, error) { return Options{}.Decode(r, size) }

// Load reads the audio file at path, downmixes it to mono and resamples it
// to sampleRate Hz with QualityBest. It is Options{Strict: true}.Load without
// the report: a truncated file is an error. Use Options.Load to decode what a
// truncated file holds and learn what is missing.
func Load(path string, sampleRate int) ([]float32, error) {
	c, err := Options{Strict: true}.Load(path, sampleRate)
	if err != nil {
		return nil, err
	}
	return c.Samples, nil
}

// Load reads the audio file at path (any supported format) and returns it as
// a one-channel clip at sampleRate Hz: downmixed (the mean of the channels)
// and resampled with QualityBest. Format and Truncated are the decoded
// file's. A file without samples is an error wrapping ErrNoSamples, as is
// everything Decode or Resample rejects; errors name the path.
func (o Options) Load(path string, sampleRate int) (*Clip, error) {
	if err := checkRate("target", sampleRate); err != nil {
		return nil, err
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("audio: %s is not a regular file", path)
	}
	in := newFileInput(f, st.Size(), path)
	clip, err := o.decode(in)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return toMono(clip, sampleRate, path)
}

// LoadReader is Load for a stream (standard input, a pipe): size is the
// number of bytes r holds, < 0 when unknown; name labels errors.
func (o Options) LoadReader(r io.Reader, size int64, name string, sampleRate int) (*Clip, error) {
	if err := checkRate("target", sampleRate); err != nil {
		return nil, err
	}
	clip, err := o.Decode(r, size)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return toMono(clip, sampleRate, name)
}

func toMono(clip *Clip, sampleRate int, name string) (*Clip, error) {
	if len(clip.Samples) == 0 {
		return nil, fmt.Errorf("%s: %w", name, ErrNoSamples)
	}
	out := &Clip{SampleRate: sampleRate, Channels: 1, Samples: clip.Mono(), Format: clip.Format, Truncated: clip.Truncated}
	if clip.SampleRate == sampleRate {
		return out, nil
	}
	y, err := Resample(out.Samples, clip.SampleRate, sampleRate)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	out.Samples = y
	return out, nil
}

// ErrNoSamples is returned (wrapped) by Load for a well-formed file that
// holds no samples.
var ErrNoSamples = errors.New("audio: the file holds no samples")

// ErrTooLong is wrapped by the error for a stream that decodes to more
// samples than Options.MaxSamples allows.
var ErrTooLong = errors.New("audio: longer than allowed")

// ErrTruncated is wrapped by the errors of strict decoding (Options.Strict)
// for input that ends before what its headers promise, and by every decoder
// for input that ends inside the headers (nothing to decode).
var ErrTruncated = errors.New("input ends early (truncated file or a size field that lies)")
