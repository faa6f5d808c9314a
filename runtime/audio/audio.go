// Package audio turns audio files into the mono float32 waveform a speech
// model consumes: WAV decoding (Decode), downmix (Clip.Mono) and band-limited
// resampling (Resample, Resampler), with Load doing all three.
//
// Sample scale: integer PCM maps to [-1, 1) (the value divided by 2^(bits-1),
// 8-bit data being unsigned with 128 as zero: the convention of soundfile,
// scipy and torchaudio); float PCM is passed through unchanged, so a float
// file that stores values beyond full scale yields them (they are checked to
// be finite). Resampling can overshoot full scale slightly near clipped
// transients, as every band-limited resampler does.
package audio

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"time"
)

// Clip is decoded audio.
type Clip struct {
	SampleRate int // Hz, >= 1
	Channels   int // >= 1
	// Samples holds interleaved frames: sample c of frame f is
	// Samples[f*Channels+c]. len(Samples) is a multiple of Channels.
	Samples []float32
}

// Frames is the number of sample frames (samples per channel).
func (c *Clip) Frames() int { return len(c.Samples) / c.Channels }

// Duration is the clip's length in time.
func (c *Clip) Duration() time.Duration {
	return time.Duration(int64(c.Frames()) * int64(time.Second) / int64(c.SampleRate))
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

// Load reads the WAV file at path, downmixes it to mono and resamples it to
// sampleRate Hz with QualityBest. The result has at least one sample: a file
// without samples is an error, as is everything Decode or Resample rejects;
// errors name the path.
func Load(path string, sampleRate int) ([]float32, error) {
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
	clip, err := Decode(bufio.NewReaderSize(f, 1<<16), st.Size())
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(clip.Samples) == 0 {
		return nil, fmt.Errorf("%s: %w", path, ErrNoSamples)
	}
	mono := clip.Mono()
	if clip.SampleRate == sampleRate {
		return mono, nil
	}
	out, err := Resample(mono, clip.SampleRate, sampleRate)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// ErrNoSamples is returned (wrapped) by Load for a well-formed file whose data
// chunk is empty.
var ErrNoSamples = errors.New("audio: the file holds no samples")
