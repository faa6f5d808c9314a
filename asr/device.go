package asr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/edgespeech/edge/asr/transcript"
	"github.com/edgespeech/edge/plugins/dpx"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/model"
)

// On a device backend (cuda) the whole recognition stays on the device:
//
//	pcm ─up─► fbank ─► features ─► encoder ─► log_probs ─► ctc_greedy ─► tokens ─┐
//	                                              └──────► ctc_align ◄──────────┘
//	                                                          └─► alignment, frame scores ─down─► words
//
// Only the PCM goes up and the alignment (a label and a log-prob per frame)
// comes down, besides the ops' own small per-item tables and status words
// (Stats.Copies counts them all). Audio longer than one chunk is stitched
// in host memory (the chunks' emissions come down, the stitched ones go up
// once); one chunk (30 s by default) never leaves the device.

// deviceDecoder holds the decoding ops built on the device backend.
type deviceDecoder struct {
	backend          runtime.Backend
	blank            int
	greedy           *runtime.Instance
	align, alignStar *runtime.Instance
}

func newDeviceDecoder(m *model.Manifest, b runtime.Backend) (*deviceDecoder, error) {
	d := &deviceDecoder{backend: b, blank: m.BlankID}
	var err error
	if d.greedy, err = runtime.New("ctc_greedy", map[string]any{"blank": m.BlankID}, b); err != nil {
		return nil, err
	}
	if d.align, err = runtime.New("ctc_align", map[string]any{"blank": m.BlankID}, b); err != nil {
		return nil, err
	}
	if d.alignStar, err = runtime.New("ctc_align", map[string]any{"blank": m.BlankID, "star": true}, b); err != nil {
		return nil, err
	}
	return d, nil
}

func (d *deviceDecoder) close() error {
	var errs []error
	for _, in := range []*runtime.Instance{d.greedy, d.align, d.alignStar} {
		if in != nil {
			errs = append(errs, in.Close())
		}
	}
	return errors.Join(errs...)
}

// decodeOnDevice encodes pcm and decodes it where the emissions are:
// greedy tokens (ids == nil) or the given token ids (stars of them the
// wildcard, id V) force-aligned to the emissions, then words. The stages
// are timed as "greedy" and "align" (wall time: the device work queued by
// earlier stages finishes inside the first one that waits for it).
func (r *Recognizer) decodeOnDevice(ctx context.Context, c *call, pcm []float32, ids []int, stars int) (*transcript.Transcript, error) {
	lp, T, err := r.emissions(ctx, c, pcm)
	if err != nil {
		return nil, err
	}
	defer lp.Release()
	if ids != nil {
		if err := checkFrames(c, T, ids); err != nil {
			return nil, err
		}
	}
	d := r.dec
	lengths := runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{1}, []int64{int64(T)}))
	var targets *runtime.Tensor
	if ids == nil {
		t0 := time.Now()
		out, err := d.greedy.Run(ctx, runtime.Tensors{"log_probs": lp, "lengths": lengths})
		c.stats.Stages["greedy"] = time.Since(t0)
		if err != nil {
			return nil, err
		}
		defer out.Release()
		targets = out["tokens"]
	} else {
		tg := make([]int64, len(ids))
		for i, id := range ids {
			tg[i] = int64(id)
		}
		targets = runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{1, len(tg)}, tg))
	}
	align := d.align
	if stars > 0 {
		align = d.alignStar
	}
	t0 := time.Now()
	out, copies, err := align.RunStats(ctx, runtime.Tensors{"log_probs": lp, "targets": targets, "lengths": lengths})
	c.stats.Transfers.Add(copies)
	if err != nil {
		c.stats.Stages["align"] = time.Since(t0)
		return nil, err
	}
	defer out.Release()
	host := map[string]*runtime.Tensor{}
	for _, k := range []string{"alignment", "frame_scores", "score"} {
		if host[k], err = d.backend.Download(out[k]); err != nil {
			return nil, err
		}
	}
	c.stats.Stages["align"] = time.Since(t0)
	t0 = time.Now()
	defer func() { c.stats.Stages["decode"] = time.Since(t0) }()
	V, cfg := r.manifest.Vocab.Len(), r.words
	if stars > 0 {
		V++
		cfg.Vocabulary = append(append([]string(nil), cfg.Vocabulary...), Wildcard)
	}
	return fromAlignment(host["alignment"].I32()[:T], host["frame_scores"].F32()[:T], float64(host["score"].F32()[0]), V, cfg)
}

// fromAlignment builds the transcript of a frame labelling (ctc_align's
// alignment) and its frame scores (the log-prob of each frame's label), as
// transcript.AlignTokens does from the full [T, V] emissions:
// transcript.FromSpans reads the log-prob of a token's own label on its own
// frames only, which is exactly the frame score, so a [T, V] matrix holding
// the frame scores at (t, label[t]) (and zeros elsewhere, never read) gives
// the same tokens, words, times and confidences.
func fromAlignment(labels []int32, frameScores []float32, score float64, V int, cfg transcript.Config) (*transcript.Transcript, error) {
	if len(labels) != len(frameScores) {
		return nil, fmt.Errorf("alignment has %d frames, frame scores %d", len(labels), len(frameScores))
	}
	lp := make([]float32, len(labels)*V)
	for t, k := range labels {
		if k < 0 || int(k) >= V {
			return nil, fmt.Errorf("alignment[%d] = %d is out of range for %d classes", t, k, V)
		}
		lp[t*V+int(k)] = frameScores[t]
	}
	spans := dpx.Spans(nil, labels, cfg.Blank)
	tr, err := transcript.FromSpans(spans, lp, V, cfg)
	if err != nil {
		return nil, err
	}
	tr.Score = score
	return tr, nil
}
