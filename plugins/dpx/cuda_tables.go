package dpx

import (
	"context"
	"sync"
)

// ctcTables is the host side of the CUDA CTC kernel (kernels/dpx.cu,
// dpx_ctc_align_*), kept free of the cuda build tag so the kernels' host
// replay (kernels/dpxemu/dpx_emu.cpp, cuda_emu_test.go) builds the same
// tables.
type ctcTables struct {
	// meta holds {T_b, S = 2L+1, table offset, backpointer offset in
	// 32-bit words} per item.
	meta []int64
	// table holds, per item, three runs of S words: label | skip<<30 for
	// each trellis state (skip: the s-2 -> s transition is allowed), the
	// first frame whose window contains the state, and the first frame
	// after its window (T_b for either when there is none), from the CPU
	// Aligner's prepare.
	table []int32
	// bpWords is the backpointer memory of the batch in 32-bit words: two
	// bit planes of ceil(S/32) words per frame after the first
	// (dpx_ctc_align_*), or ceil(S/K) * ceil(2K/32) words (dpx_ctc_warp_*,
	// after useWarpLayout).
	bpWords int64
	// maxS is the largest trellis of the batch.
	maxS int
}

// alignerPool hands out Aligners with one set of options, for their
// prepare (per-call scratch, so concurrent Runs and workers do not share
// them).
type alignerPool struct {
	proto Aligner // validated options, no scratch
	p     sync.Pool
}

// newAlignerPool validates opt (NewAligner's errors) and returns a pool.
func newAlignerPool(opt AlignOptions) (*alignerPool, error) {
	a, err := NewAligner(opt)
	if err != nil {
		return nil, err
	}
	pl := &alignerPool{proto: Aligner{opt: a.opt, quant: a.quant}}
	pl.p.Put(a)
	return pl, nil
}

func (pl *alignerPool) get() *Aligner {
	if a, ok := pl.p.Get().(*Aligner); ok {
		return a
	}
	return &Aligner{opt: pl.proto.opt, quant: pl.proto.quant}
}

func (pl *alignerPool) put(a *Aligner) { pl.p.Put(a) }

// newCTCTables builds the tables of a batch of validated targets, items
// spread over GOMAXPROCS workers, each with an Aligner of pool (its prepare
// makes an item's labels and window).
//
// torchaudio's state window [lo(t), hi(t)) only moves forward (prepare's
// start and end never decrease), so state s is inside it exactly for the
// frames t with hi(t) > s and lo(t) <= s: the range [first_s, end_s) with
// first_s the first frame where hi exceeds s and end_s the first where lo
// does. The kernel tests that range instead of reading a window per frame.
func newCTCTables(pool *alignerPool, targets [][]int, lengths []int) ctcTables {
	B := len(targets)
	c := ctcTables{maxS: 1, meta: make([]int64, 4*B)}
	n := 0
	for b, tg := range targets {
		Tb, S := lengths[b], 2*len(tg)+1
		c.meta[4*b], c.meta[4*b+1], c.meta[4*b+2], c.meta[4*b+3] = int64(Tb), int64(S), int64(n), c.bpWords
		n += 3 * S
		c.bpWords += int64(Tb-1) * 2 * int64((S+31)/32)
		c.maxS = max(c.maxS, S)
	}
	c.table = make([]int32, n)
	_ = forEach(context.Background(), B, func(_, b int) error {
		a := pool.get()
		defer pool.put(a)
		off, S := int(c.meta[4*b+2]), int(c.meta[4*b+1])
		ctcItemTable(a, targets[b], lengths[b], c.table[off:off+3*S])
		return nil
	})
	return c
}

// ctcItemTable writes one item's table (3*S words: labels | skip, first
// frames, end frames) into dst.
func ctcItemTable(a *Aligner, tg []int, Tb int, dst []int32) {
	S := 2*len(tg) + 1
	a.prepare(Tb, tg)
	lab, first, end := dst[:S], dst[S:2*S], dst[2*S:3*S]
	for s := range S {
		lab[s] = a.lab[s]
		if a.penF[s] == 0 {
			lab[s] |= 1 << 30
		}
		first[s], end[s] = int32(Tb), int32(Tb)
	}
	h, l := 0, 0
	for t := 0; t < Tb && l < S; t++ {
		for hi := min(int(a.hi[t]), S); h < hi; h++ {
			first[h] = int32(t)
		}
		for lo := min(int(a.lo[t]), S); l < lo; l++ {
			end[l] = int32(t)
		}
	}
}

// useWarpLayout sets the backpointer offsets (meta) and bpWords for the
// register-resident kernels with k states a thread (dpx_ctc_warp_*_k<k>):
// each thread that owns states stores ceil(2k/32) words a frame, and the
// threads without states store to two spare words after the item's rows,
// so an item takes (T_b-1) * ceil(S/k) * ceil(2k/32) + 2 words (an even
// count when a thread stores two, which keeps its 64-bit stores aligned).
func (c *ctcTables) useWarpLayout(k int) {
	c.bpWords = 0
	for b := 0; b < len(c.meta)/4; b++ {
		Tb, S := c.meta[4*b], c.meta[4*b+1]
		c.meta[4*b+3] = c.bpWords
		c.bpWords += (Tb-1)*((S+int64(k)-1)/int64(k))*int64((2*k+31)/32) + 2
	}
}

// forEach is parallel, except that a single item runs on the calling
// goroutine (the single-utterance path skips the hand-off to a worker).
func forEach(ctx context.Context, n int, fn func(worker, item int) error) error {
	if n != 1 {
		return parallel(ctx, n, fn)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return fn(0, 0)
}
