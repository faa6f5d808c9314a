package rvq

import (
	"context"
	"fmt"
	"math"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// blockFrames is the most frames one worker quantises through all stages at
// a time (a multiple of kernelRows). Their residuals (blockFrames*D float32)
// stay in L2 while each stage's codebook streams past.
const blockFrames = 8 * kernelRows

// Batch is the frame layout shared by x, codes and quantized: B items of T
// frames, row-major (frame t of item b is row b*T+t). Lengths, when non-nil,
// has B entries in 0..T: the valid frames of each item; the rest is padding.
type Batch struct {
	B, T    int
	Lengths []int
}

// valid returns the number of valid frames of item b.
func (bt Batch) valid(b int) int {
	if bt.Lengths == nil {
		return bt.T
	}
	return bt.Lengths[b]
}

func (bt Batch) check() error {
	if bt.B < 1 || bt.T < 1 {
		return fmt.Errorf("batch of B = %d items of T = %d frames, want B >= 1 and T >= 1", bt.B, bt.T)
	}
	if bt.Lengths == nil {
		return nil
	}
	if len(bt.Lengths) != bt.B {
		return fmt.Errorf("lengths has %d entries, want B = %d", len(bt.Lengths), bt.B)
	}
	for b, n := range bt.Lengths {
		if n < 0 || n > bt.T {
			return fmt.Errorf("lengths[%d] = %d, want 0..T = 0..%d", b, n, bt.T)
		}
	}
	return nil
}

// block is a run of valid frames [t0, t1) of item b.
type block struct{ b, t0, t1 int }

// blocks cuts the valid frames into blocks of at most size frames each.
func (bt Batch) blocks(size int) []block {
	n := 0
	for b := 0; b < bt.B; b++ {
		n += (bt.valid(b) + size - 1) / size
	}
	out := make([]block, 0, n)
	for b := 0; b < bt.B; b++ {
		n := bt.valid(b)
		for t := 0; t < n; t += size {
			out = append(out, block{b, t, min(t+size, n)})
		}
	}
	return out
}

// blockSize picks the frames per block for spreading the valid frames over
// workers: blockFrames when there are plenty of frames, smaller (a multiple
// of kernelRows) when that would leave fewer than blocksPerWorker blocks per
// worker, since whole blocks are the unit of load balance.
func (bt Batch) blockSize(workers int) int {
	const blocksPerWorker = 16
	total := 0
	for b := 0; b < bt.B; b++ {
		total += bt.valid(b)
	}
	per := (total + blocksPerWorker*workers - 1) / (blocksPerWorker * workers)
	per = (per + kernelRows - 1) / kernelRows * kernelRows
	return max(kernelRows, min(blockFrames, per))
}

// checkLen checks that a slice of got values holds a [names] = dims array.
func checkLen(name string, got int, names string, dims ...int) error {
	want := 1
	for _, d := range dims {
		want *= d
	}
	if got == want {
		return nil
	}
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.Itoa(d)
	}
	return fmt.Errorf("%s has %d values, want %d ([%s] = [%s])", name, got, want, names, strings.Join(parts, ", "))
}

// Encode quantises x, row-major [B, T, D] with D = c.Dim(), into codes
// [B, T, Q] (int32, stage order; -1 on padded frames) and quantized
// [B, T, D] (the sum of the selected codewords; 0 on padded frames). Both
// outputs are overwritten entirely and must not overlap x. It fails, naming
// the frame, when a valid frame of x is not finite or its squared norm
// exceeds MaxSquaredNorm (padded frames are not read). Work is spread over
// GOMAXPROCS goroutines; cancelling ctx stops it between blocks.
func (c *Codebooks) Encode(ctx context.Context, x []float32, bt Batch, codes []int32, quantized []float32) error {
	q, d := len(c.stages), c.dim
	if err := bt.check(); err != nil {
		return err
	}
	if err := checkLen("x", len(x), "B, T, D", bt.B, bt.T, d); err != nil {
		return err
	}
	if err := checkLen("codes", len(codes), "B, T, Q", bt.B, bt.T, q); err != nil {
		return err
	}
	if err := checkLen("quantized", len(quantized), "B, T, D", bt.B, bt.T, d); err != nil {
		return err
	}
	padding(bt, q, d, codes, quantized)
	blocks := bt.blocks(bt.blockSize(runtime.GOMAXPROCS(0)))
	return parallel(ctx, len(blocks), func() func(int) error {
		s := newScratch(d)
		return func(i int) error {
			bl := blocks[i]
			row0, n := bl.b*bt.T+bl.t0, bl.t1-bl.t0
			return c.encodeBlock(s, bl, x[row0*d:(row0+n)*d], codes[row0*q:(row0+n)*q], quantized[row0*d:(row0+n)*d])
		}
	})
}

// padding writes code -1 and quantized 0 on the padded frames.
func padding(bt Batch, q, d int, codes []int32, quantized []float32) {
	for b := 0; b < bt.B; b++ {
		lo, hi := b*bt.T+bt.valid(b), (b+1)*bt.T
		if codes != nil {
			for i := range codes[lo*q : hi*q] {
				codes[lo*q+i] = -1
			}
		}
		clear(quantized[lo*d : hi*d])
	}
}

// scratch is one worker's memory, reused for every block it quantises.
type scratch struct {
	res  []float32 // blockFrames rows of D: the residuals
	acc  []float32 // blockFrames rows of D: the current chain's sum
	best []float32 // blockFrames rows of panelWidth lanes: running minimum
	bidx []int32   // index of each lane's minimum
	idx  [panelWidth]int32
}

func newScratch(d int) *scratch {
	return &scratch{
		res:  make([]float32, blockFrames*d),
		acc:  make([]float32, blockFrames*d),
		best: make([]float32, blockFrames*panelWidth),
		bidx: make([]int32, blockFrames*panelWidth),
	}
}

// encodeBlock quantises the n = len(x)/D frames of one block through every
// chain and stage.
func (c *Codebooks) encodeBlock(s *scratch, bl block, x []float32, codes []int32, out []float32) error {
	d, nq := c.dim, len(c.stages)
	n := len(x) / d
	rows := (n + kernelRows - 1) / kernelRows * kernelRows
	if err := checkFrames(x, d, bl); err != nil {
		return err
	}
	res, acc, kern := s.res[:rows*d], s.acc[:n*d], kernel
	for ci, ch := range c.chains() {
		copy(res, x)
		clear(res[n*d:])
		clear(acc)
		for q := ch[0]; q < ch[1]; q++ {
			st := &c.stages[q]
			best, bidx := s.best[:rows*panelWidth], s.bidx[:rows*panelWidth]
			for i := range best {
				best[i] = float32(math.Inf(1))
			}
			clear(bidx)
			pl := d * panelWidth
			for p := 0; p < len(st.halfNorm)/panelWidth; p++ {
				for l := range s.idx {
					s.idx[l] = int32(p*panelWidth + l)
				}
				panel, hn := st.panels[p*pl:(p+1)*pl], st.halfNorm[p*panelWidth:(p+1)*panelWidth]
				for r := 0; r < rows; r += kernelRows {
					kern(res[r*d:(r+kernelRows)*d], d, panel, hn, best[r*panelWidth:(r+kernelRows)*panelWidth], bidx[r*panelWidth:(r+kernelRows)*panelWidth], &s.idx)
				}
			}
			for i := 0; i < n; i++ {
				j := argminLanes(best[i*panelWidth:(i+1)*panelWidth], bidx[i*panelWidth:(i+1)*panelWidth])
				codes[i*nq+q] = j
				r, a := res[i*d:(i+1)*d], acc[i*d:(i+1)*d]
				if st.rows != nil {
					for k, v := range st.rows[int(j)*d : (int(j)+1)*d] {
						r[k] -= v
						a[k] += v
					}
					continue
				}
				for k, w := range st.codeword(d, int(j)) {
					v := BF16ToFloat32(w)
					r[k] -= v
					a[k] += v
				}
			}
		}
		if ci == 0 {
			copy(out, acc)
		} else {
			for i, v := range acc {
				out[i] += v
			}
		}
	}
	return nil
}

// argminLanes folds the per-lane (minimum, index) pairs of one frame: the
// smallest value wins, ties go to the lowest index.
func argminLanes(best []float32, bidx []int32) int32 {
	bv, bi := best[0], bidx[0]
	for l := 1; l < len(best); l++ {
		if best[l] < bv || (best[l] == bv && bidx[l] < bi) {
			bv, bi = best[l], bidx[l]
		}
	}
	return bi
}

// checkFrames checks that every frame of a block is finite with a squared
// norm of at most MaxSquaredNorm.
func checkFrames(x []float32, d int, bl block) error {
	for i := 0; i < len(x)/d; i++ {
		var norm float32
		for _, v := range x[i*d : (i+1)*d] {
			norm += v * v
		}
		if norm <= MaxSquaredNorm {
			continue
		}
		for k, v := range x[i*d : (i+1)*d] {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				return fmt.Errorf("x[%d, %d, %d] = %v, want a finite value", bl.b, bl.t0+i, k, v)
			}
		}
		return fmt.Errorf("x[%d, %d, :] has squared norm %g, want at most %g (fp32 distances would overflow)", bl.b, bl.t0+i, norm, MaxSquaredNorm)
	}
	return nil
}

// Decode writes quantized [B, T, D], the sum of the codewords that codes
// [B, T, Q] selects on each valid frame (0 on padded frames, whose codes are
// ignored), summed chain by chain in the same order as Encode. A code outside
// 0..K_q-1 on a valid frame is an error naming it.
func (c *Codebooks) Decode(ctx context.Context, codes []int32, bt Batch, quantized []float32) error {
	q, d := len(c.stages), c.dim
	if err := bt.check(); err != nil {
		return err
	}
	if err := checkLen("codes", len(codes), "B, T, Q", bt.B, bt.T, q); err != nil {
		return err
	}
	if err := checkLen("quantized", len(quantized), "B, T, D", bt.B, bt.T, d); err != nil {
		return err
	}
	padding(bt, q, d, nil, quantized)
	blocks := bt.blocks(blockFrames)
	return parallel(ctx, len(blocks), func() func(int) error {
		acc := make([]float32, d)
		return func(i int) error {
			bl := blocks[i]
			for t := bl.t0; t < bl.t1; t++ {
				row := bl.b*bt.T + t
				fc := codes[row*q : (row+1)*q]
				if s := c.badCode(fc); s >= 0 {
					k := c.stages[s].k
					return fmt.Errorf("codes[%d, %d, %d] = %d, want 0..%d (codebook %d has K = %d entries)", bl.b, t, s, fc[s], k-1, s, k)
				}
				c.decodeFrame(fc, acc, quantized[row*d:(row+1)*d])
			}
			return nil
		}
	})
}

// badCode returns the first stage whose code is out of range, or -1.
func (c *Codebooks) badCode(codes []int32) int {
	for q, j := range codes {
		if j < 0 || int(j) >= c.stages[q].k {
			return q
		}
	}
	return -1
}

// decodeFrame sums the codewords that one frame's (valid) codes select into
// out, using acc as the chain accumulator.
func (c *Codebooks) decodeFrame(codes []int32, acc, out []float32) {
	d := c.dim
	for ci, ch := range c.chains() {
		clear(acc)
		for q := ch[0]; q < ch[1]; q++ {
			st, e := &c.stages[q], int(codes[q])
			if st.rows != nil {
				for k, v := range st.rows[e*d : (e+1)*d] {
					acc[k] += v
				}
				continue
			}
			for k, w := range st.codeword(d, e) {
				acc[k] += BF16ToFloat32(w)
			}
		}
		if ci == 0 {
			copy(out, acc)
		} else {
			for k, v := range acc {
				out[k] += v
			}
		}
	}
}

// parallel runs n tasks on up to GOMAXPROCS goroutines. newWorker is called
// once per goroutine and returns its task function, so each goroutine owns
// its scratch memory. The first error (or ctx's) stops the remaining tasks
// and is returned.
func parallel(ctx context.Context, n int, newWorker func() func(int) error) error {
	workers := min(runtime.GOMAXPROCS(0), n)
	var (
		next    atomic.Int64
		stop    atomic.Bool
		errOnce sync.Once
		first   error
		wg      sync.WaitGroup
	)
	fail := func(err error) {
		errOnce.Do(func() { first = err })
		stop.Store(true)
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			task := newWorker()
			for !stop.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := ctx.Err(); err != nil {
					fail(err)
					return
				}
				if err := task(i); err != nil {
					fail(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return first
}
