package audio

import (
	"errors"
	"fmt"
	"io"

	"github.com/mewkiz/flac"
)

func sniffFLAC(h []byte) bool { return len(h) >= 4 && string(h[:4]) == "fLaC" }

// decodeFLAC reads a native FLAC stream with github.com/mewkiz/flac (frame
// CRCs checked). Samples of b bits scale over 2^(b-1), as ffmpeg's s16/s32
// output does, so the result equals ffmpeg's bit for bit. STREAMINFO's
// sample count is trusted only to report truncation: input that ends inside
// or before a frame is decoded up to the last whole frame, and the missing
// duration is what STREAMINFO promises beyond it (unknown when it says 0).
// Every frame must keep STREAMINFO's channel count, rate and sample size.
func decodeFLAC(in *input, o Options) (*Clip, error) {
	s, err := flac.New(in)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, fmt.Errorf("flac: input ends inside the metadata blocks at offset %d: %w", in.off, ErrTruncated)
		}
		return nil, fmt.Errorf("flac: metadata: %v", err)
	}
	info := s.Info
	if info.NChannels < 1 || info.SampleRate < 1 || info.BitsPerSample < 4 || info.BitsPerSample > 32 {
		return nil, fmt.Errorf("flac: STREAMINFO says %d channels at %d Hz, %d bits; want 1..8 channels, > 0 Hz, 4..32 bits", info.NChannels, info.SampleRate, info.BitsPerSample)
	}
	ch, bps := int(info.NChannels), int(info.BitsPerSample)
	clip := &Clip{SampleRate: int(info.SampleRate), Channels: ch, Format: fmt.Sprintf("FLAC %d-bit", bps)}
	out := newSamples(o, 0)
	scale := 1 / float64(int64(1)<<(bps-1))
	for {
		f, err := s.ParseNext()
		if err == io.EOF {
			break
		}
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
				clip.Truncated = &Truncation{Detail: fmt.Sprintf("flac: the input ends inside the frame after sample %d", out.total()/int64(ch))}
				break
			}
			return nil, fmt.Errorf("flac: frame %d (after sample %d): %v", out.total()/int64(ch), out.total()/int64(ch), err)
		}
		if f.Channels.Count() != ch || (f.SampleRate != 0 && f.SampleRate != info.SampleRate) || (f.BitsPerSample != 0 && int(f.BitsPerSample) != bps) {
			return nil, fmt.Errorf("flac: the frame after sample %d has %d channels at %d Hz, %d bits; STREAMINFO says %d at %d Hz, %d bits",
				out.total()/int64(ch), f.Channels.Count(), f.SampleRate, f.BitsPerSample, ch, info.SampleRate, bps)
		}
		n := len(f.Subframes[0].Samples)
		if err := out.room(n * ch); err != nil {
			return nil, fmt.Errorf("flac: %w", err)
		}
		for i := range n {
			for c := range ch {
				out.buf = append(out.buf, float32(float64(f.Subframes[c].Samples[i])*scale))
			}
		}
		if len(out.buf) >= streamBlock {
			if err := out.flush(clip.SampleRate, ch); err != nil {
				return nil, err
			}
		}
	}
	clip.Samples = out.buf
	got := uint64(out.total() / int64(ch))
	if info.NSamples > got {
		if clip.Truncated == nil {
			clip.Truncated = &Truncation{Detail: "flac: the input ends after the last whole frame"}
		}
		clip.Truncated.Missing = frameDuration(int64(info.NSamples-got), clip.SampleRate)
		clip.Truncated.Detail += fmt.Sprintf("; STREAMINFO promises %d frames, %d decoded", info.NSamples, got)
	}
	return clip, nil
}
