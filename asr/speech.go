package asr

import (
	"context"
	"errors"
	"fmt"

	"github.com/edgespeech/edge/plugins/vad"
	"github.com/edgespeech/edge/runtime"
)

// speechFinder finds the speech in audio: segments in order, not
// overlapping, in samples of pcm (plugins/vad's *Detector; audio shorter
// than one of its windows, vad.ErrTooShort, counts as holding no speech).
type speechFinder interface {
	Segments(ctx context.Context, pcm []float32, sampleRate int) ([]vad.Segment, error)
}

// segmentContext is the audio around a speech segment encoded with it:
// enough for the model's receptive field at the edges, short enough that
// the silence does not change its output.
const segmentContext = 0.3 // seconds

// gapLogProb is the log-probability of every non-blank symbol on a frame
// outside all speech (blank has log-probability 0): greedy decoding emits
// nothing there, and forced alignment can still place a token there when
// the text needs it, at a price no real frame has.
const gapLogProb = -100

// speechEmissions builds the emissions of pcm from its speech only: each
// segment the finder reports is encoded with segmentContext of audio on
// either side (in chunks when it is longer than a chunk), and its frames
// fill the global [1, T, V] matrix (T = len(pcm) / stride) up to the middle
// of the gaps to its neighbours; frames in no segment's reach are silence
// (blank). The result is in host memory; times stay global.
func (r *Recognizer) speechEmissions(ctx context.Context, c *call, pcm []float32) (*runtime.Tensor, int, error) {
	rate, V, blank := r.manifest.SampleRate, r.manifest.Vocab.Len(), r.manifest.BlankID
	segs, err := r.speech.Segments(ctx, pcm, rate)
	if errors.Is(err, vad.ErrTooShort) {
		segs, err = nil, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("finding speech: %w", err)
	}
	T := len(pcm) / r.stride
	lp := make([]float32, T*V)
	for t := range T {
		row := lp[t*V : (t+1)*V]
		for k := range row {
			row[k] = gapLogProb
		}
		row[blank] = 0
	}
	pad := int(segmentContext*float64(rate)) / r.stride * r.stride
	for i, s := range segs {
		if s.StartSample < 0 || s.EndSample > len(pcm) || s.StartSample >= s.EndSample {
			return nil, 0, fmt.Errorf("finding speech: segment %d [%d, %d) is outside the %d samples", i, s.StartSample, s.EndSample, len(pcm))
		}
		// The frames this segment owns: up to the middle of each gap.
		lo, hi := 0, T
		if i > 0 {
			lo = (segs[i-1].EndSample + s.StartSample) / 2 / r.stride
		}
		if i+1 < len(segs) {
			hi = (s.EndSample + segs[i+1].StartSample) / 2 / r.stride
		}
		from := max(0, s.StartSample/r.stride*r.stride-pad)
		to := min(len(pcm), s.EndSample+pad)
		if to-from < 4*r.stride {
			from = max(0, min(from, len(pcm)-4*r.stride))
			to = min(len(pcm), from+4*r.stride)
		}
		seg, frames, err := r.chunkedEmissions(ctx, c, pcm[from:to])
		if err != nil {
			return nil, 0, fmt.Errorf("speech %v-%v: %w", r.seconds(s.StartSample), r.seconds(s.EndSample), err)
		}
		if !seg.OnHost() {
			h, err := r.backend.Download(seg)
			_ = seg.Release()
			if err != nil {
				return nil, 0, err
			}
			seg = h
		}
		x := seg.F32()
		first := from / r.stride
		for k := range frames {
			if g := first + k; g >= lo && g < hi && g < T {
				copy(lp[g*V:(g+1)*V], x[k*V:(k+1)*V])
			}
		}
	}
	t, err := runtime.FromSlice(runtime.F32, runtime.Shape{1, T, V}, lp)
	return t, T, err
}
