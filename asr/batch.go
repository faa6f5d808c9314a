package asr

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/model"
)

// Cross-call batching (Options.Batch > 1): every chunk a call encodes (one
// chunk of a long file, a VAD segment, a stream step) is handed to the
// recogniser's batcher instead of taking an encoder pipeline itself. The
// batcher gathers the chunks that reach it together, from any number of
// calls and streams, and runs them as one pipeline run:
//
//	chunk ─┐                         pcm [b, Nmax] (zero-padded) ─► fbank ─► encoder ─► log_probs [b, T'max, V]
//	chunk ─┼─► batcher ─► free pipeline   pcm_lengths [b]                                frames [b]
//	chunk ─┘                                                                               │
//	       ◄── per item: log_probs [1, frames_i, V] (host: a slice; device: a device copy) ◄┘
//
// A batch starts when it holds Options.Batch chunks, or BatchWait after its
// first chunk arrived, or at once with the chunks already waiting when no
// other batch is running (a lone call never waits for company); while every
// pipeline is busy it keeps filling up to Options.Batch. Batches run on the
// pool of Options.Workers pipelines, so several run at once on the CPU. Runs
// are zero-padded to the longest chunk, rounded up to Options.PadTo. Padding never reaches a result: the fbank
// op and the encoder take each item's length, and batching is used only for
// models whose output does not depend on it (see batchable).

// DefaultBatchWait is Options.BatchWait's default: how long a batch that is
// not full waits for more chunks after its first while another batch runs.
const DefaultBatchWait = 5 * time.Millisecond

// ErrClosed is returned by calls still encoding when the Recognizer closes.
var ErrClosed = errors.New("asr: the recognizer is closed")

// batchable says whether m's encoder gives every item of a padded batch the
// output it gives the item alone: nil when it does, else why not. An
// encoder that takes neither the items' lengths nor an attention mask
// cannot tell padding from audio; a wav2vec2 feature encoder with group
// normalisation (HF feat_extract_norm "group") normalises over the padded
// length whatever the mask says.
func batchable(m *model.Manifest) error {
	if m.PaddingSensitive {
		return fmt.Errorf("model %s: its output changes with batch padding (feat_extract_norm group): each chunk is encoded alone", m.Name)
	}
	_, lengths := m.Encoder.Inputs[model.InputLengths]
	_, mask := m.Encoder.Inputs[model.InputAttentionMask]
	if !lengths && !mask {
		return fmt.Errorf("model %s: its encoder takes no lengths or attention mask, so padding would change its output: each chunk is encoded alone", m.Name)
	}
	return nil
}

// batchItem is one chunk waiting for the encoder.
type batchItem struct {
	ctx context.Context
	pcm []float32
	res chan chunkResult // buffered 1; receives exactly one result
}

// batcher gathers chunks into batches and runs them on the recogniser's
// free pipelines. One goroutine (loop) gathers; each batch runs on a
// goroutine of its own.
type batcher struct {
	r    *Recognizer
	max  int
	wait time.Duration // < 0: no wait
	in   chan *batchItem
	stop chan struct{}
	done chan struct{} // closed when loop and every batch have returned
	wg   sync.WaitGroup
	once sync.Once
	// running counts the batches on a pipeline: with none, a new batch
	// starts at once.
	running atomic.Int64
	// onRun, when set (by tests), is called with a batch's live members
	// just before it runs.
	onRun func(items int)
	// waitIdle, set by tests that need chunks of concurrent calls in one
	// batch, makes a batch wait for company also when no other runs.
	waitIdle bool
}

func newBatcher(r *Recognizer, size int, wait time.Duration) *batcher {
	b := &batcher{r: r, max: size, wait: wait, in: make(chan *batchItem), stop: make(chan struct{}), done: make(chan struct{})}
	go b.loop()
	return b
}

// close stops gathering, fails the chunks not yet running with ErrClosed
// and waits for the running batches.
func (b *batcher) close() {
	b.once.Do(func() { close(b.stop) })
	<-b.done
}

// encode hands pcm to the batcher and waits for its result. When ctx ends
// first it returns ctx.Err() at once; the batch goes on for its other
// members and this chunk's result, when it comes, is released.
func (b *batcher) encode(ctx context.Context, pcm []float32) chunkResult {
	it := &batchItem{ctx: ctx, pcm: pcm, res: make(chan chunkResult, 1)}
	select {
	case b.in <- it:
	case <-ctx.Done():
		return chunkResult{err: ctx.Err()}
	case <-b.stop:
		return chunkResult{err: ErrClosed}
	}
	select {
	case res := <-it.res:
		return res
	case <-ctx.Done():
		go func() {
			if res := <-it.res; res.lp != nil {
				_ = res.lp.Release()
			}
		}()
		return chunkResult{err: ctx.Err()}
	}
}

func (b *batcher) loop() {
	defer close(b.done)
	defer b.wg.Wait()
	fail := func(batch []*batchItem) {
		for _, it := range batch {
			it.res <- chunkResult{err: ErrClosed}
		}
	}
	for {
		var first *batchItem
		select {
		case first = <-b.in:
		case <-b.stop:
			return
		}
		batch := b.gather(first)
		var p *runtime.Pipeline
		for p == nil {
			var more chan *batchItem // nil (never ready) once the batch is full
			if len(batch) < b.max {
				more = b.in
			}
			select {
			case p = <-b.r.free:
			case it := <-more:
				batch = append(batch, it)
			case <-b.stop:
				fail(batch)
				return
			}
		}
		b.wg.Add(1)
		b.running.Add(1)
		go func() {
			defer b.wg.Done()
			defer func() { b.running.Add(-1); b.r.free <- p }()
			b.run(p, batch)
		}()
	}
}

// gather makes a batch starting with first: chunks arriving within b.wait
// of it, at most b.max; only those already waiting when no batch runs.
func (b *batcher) gather(first *batchItem) []*batchItem {
	batch := []*batchItem{first}
	if b.wait < 0 || (b.running.Load() == 0 && !b.waitIdle) {
		for len(batch) < b.max {
			select {
			case it := <-b.in:
				batch = append(batch, it)
				continue
			default:
			}
			break
		}
		return batch
	}
	timer := time.NewTimer(b.wait)
	defer timer.Stop()
	for len(batch) < b.max {
		select {
		case it := <-b.in:
			batch = append(batch, it)
		case <-timer.C:
			return batch
		case <-b.stop:
			return batch
		}
	}
	return batch
}

// run encodes the batch's live members in one pipeline run on p and hands
// each its result. The run's context ends only when every member's has:
// one member giving up does not stop the others.
func (b *batcher) run(p *runtime.Pipeline, batch []*batchItem) {
	live := batch[:0]
	for _, it := range batch {
		if err := it.ctx.Err(); err != nil {
			it.res <- chunkResult{err: err}
			continue
		}
		live = append(live, it)
	}
	if len(live) == 0 {
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var alive atomic.Int64
	alive.Store(int64(len(live)))
	for _, it := range live {
		stop := context.AfterFunc(it.ctx, func() {
			if alive.Add(-1) == 0 {
				cancel()
			}
		})
		defer stop()
	}
	if b.onRun != nil {
		b.onRun(len(live))
	}
	pcms := make([][]float32, len(live))
	for i, it := range live {
		pcms[i] = it.pcm
	}
	for i, res := range b.r.encodeBatch(ctx, p, pcms) {
		live[i].res <- res
	}
}

// encodeBatch runs the chunks pcms through pipeline p in one run
// [len(pcms), width] (zero-padded, with each chunk's length; width is the
// longest chunk rounded up to a multiple of r.padTo) and returns each
// chunk's log-probs [1, frames_i, V] and frames. One unpadded chunk's
// tensor is returned as the pipeline made it; otherwise they are split (host memory:
// slices of the batch's buffer; device memory: device-to-device copies when
// the backend makes them, so emissions stay on the device, else
// downloaded). Every result carries the run's statistics; an error of the
// run is every chunk's error.
func (r *Recognizer) encodeBatch(ctx context.Context, p *runtime.Pipeline, pcms [][]float32) []chunkResult {
	n := len(pcms)
	out := make([]chunkResult, n)
	fail := func(stats runtime.PipelineStats, err error) []chunkResult {
		for i := range out {
			out[i] = chunkResult{stats: stats, items: n, err: err}
		}
		return out
	}
	longest := 0
	lengths := make([]int64, n)
	for i, x := range pcms {
		longest = max(longest, len(x))
		lengths[i] = int64(len(x))
	}
	width := r.paddedLen(longest)
	whole := n == 1 && width == longest // the one chunk's output is the run's
	var data []float32
	if whole {
		data = pcms[0]
	} else {
		data = make([]float32, n*width)
		for i, x := range pcms {
			copy(data[i*width:], x)
		}
	}
	x, err := runtime.FromSlice(runtime.F32, runtime.Shape{n, width}, data)
	if err != nil {
		return fail(runtime.PipelineStats{}, err)
	}
	nt := runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{n}, lengths))
	res, stats, err := p.RunStats(ctx, runtime.Tensors{"pcm": x, "pcm_lengths": nt})
	if r.onEncode != nil {
		r.onEncode(n)
	}
	if err != nil {
		return fail(stats, err)
	}
	lp, fr := res["log_probs"], res["frames"]
	V := r.manifest.Vocab.Len()
	if s := lp.Shape(); len(s) != 3 || s[0] != n || s[2] != V {
		_ = res.Release()
		return fail(stats, fmt.Errorf("the encoder emits log-probs %v; want [%d, T', %d] (the vocabulary has %d classes)", s, n, V, V))
	}
	if !fr.OnHost() || fr.DType() != runtime.I64 || fr.Shape().NumElements() != n {
		_ = res.Release()
		return fail(stats, fmt.Errorf("the pipeline's frames are %v %v; want host i64 [%d]", fr.DType(), fr.Shape(), n))
	}
	frames := fr.I64()
	T := lp.Shape()[1]
	for i, f := range frames {
		if f < 0 || f > int64(T) {
			_ = res.Release()
			return fail(stats, fmt.Errorf("the encoder's frames[%d] = %d is outside 0..%d", i, f, T))
		}
	}
	if whole {
		out[0] = chunkResult{lp: lp, frames: int(frames[0]), stats: stats, items: 1}
		return out
	}
	parts, err := r.split(lp, frames)
	_ = res.Release()
	if err != nil {
		return fail(stats, err)
	}
	for i := range out {
		out[i] = chunkResult{lp: parts[i], frames: int(frames[i]), stats: stats, items: n}
	}
	return out
}

// paddedLen is the width of an encoder run whose longest chunk has n
// samples: n rounded up to a multiple of r.padTo.
func (r *Recognizer) paddedLen(n int) int {
	if r.padTo <= 0 {
		return n
	}
	return (n + r.padTo - 1) / r.padTo * r.padTo
}

// split cuts log-probs [b, T, V] into one [1, frames[i], V] tensor per item.
// It does not take lp.
func (r *Recognizer) split(lp *runtime.Tensor, frames []int64) ([]*runtime.Tensor, error) {
	T, V := lp.Shape()[1], lp.Shape()[2]
	parts := make([]*runtime.Tensor, len(frames))
	if !lp.OnHost() {
		if dc, ok := r.backend.(deviceCopier); ok {
			row := int64(4 * V)
			for i, f := range frames {
				t, err := dc.Alloc(runtime.F32, runtime.Shape{1, int(f), V})
				if err == nil && f > 0 {
					err = dc.CopyDevice(t, 0, lp, int64(i*T)*row, f*row)
				}
				if err != nil {
					if t != nil {
						_ = t.Release()
					}
					for _, p := range parts[:i] {
						_ = p.Release()
					}
					return nil, fmt.Errorf("splitting a batch's emissions on the device: %w", err)
				}
				parts[i] = t
			}
			return parts, nil
		}
		h, err := r.backend.Download(lp)
		if err != nil {
			return nil, err
		}
		lp = h
	}
	all := lp.F32()
	for i, f := range frames {
		lo, hi := i*T*V, (i*T+int(f))*V
		t, err := runtime.FromSlice(runtime.F32, runtime.Shape{1, int(f), V}, all[lo:hi:hi])
		if err != nil {
			return nil, err
		}
		parts[i] = t
	}
	return parts, nil
}
