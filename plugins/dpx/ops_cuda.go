//go:build cuda

package dpx

import (
	"context"
	"fmt"
	"math"

	kern "github.com/edgespeech/edge/kernels"
	rt "github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/cuda"
)

// The cuda build gives ctc_align, viterbi and dtw a CUDA implementation (the
// kernels of kernels/dpx.cu): their constructors build it when the backend
// is a *cuda.Backend and defer to the CPU constructors otherwise. This
// file's init runs after ops.go's (files initialise in name order), which
// registers the ops.
//
// The CUDA ops take their tensor inputs in device memory and return
// device-resident outputs; the host sees only the per-item tables (CTC:
// labels and torchaudio's state window, made by the CPU Aligner; 4 bytes a
// state plus 8 a frame), the targets (downloaded once to validate them) and
// 24 status bytes an item (bad-value index, largest |value|, failure flag),
// which is the one synchronising copy of a Run. Errors name the item and the
// value as the CPU ops do.
func init() {
	for name, newCUDA := range map[string]func(rt.Params, *cuda.Backend) (rt.Op, error){
		"ctc_align": newAlignCUDA, "viterbi": newViterbiCUDA, "dtw": newDTWCUDA,
	} {
		rt.RegisterImplementation(name, "cuda", cuda.Constructor(newCUDA))
	}
}

const (
	cudaModule    = "edge"
	cudaMaxShared = 48 << 10 // dynamic shared memory without opting in
	cudaMaxBlock  = 1024
	cudaMaxPass   = 8 // states (rows) per thread, kMaxPass in dpx.cu
	statusWords   = 3 // per item: ^bad index, max |x| bits, failure flag
)

// cudaKernels loads the named kernels of the embedded (or $EDGE_KERNELS_FATBIN)
// fatbin.
func cudaKernels(b *cuda.Backend, names ...string) ([]*cuda.Kernel, error) {
	image, _, err := kern.Fatbin()
	if err != nil {
		return nil, err
	}
	mod, err := b.Module(cudaModule, image)
	if err != nil {
		return nil, err
	}
	out := make([]*cuda.Kernel, len(names))
	for i, n := range names {
		if out[i], err = mod.Kernel(n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// blockFor returns the block size for n states (rows) per item: warps
// enough that each thread owns at most cudaMaxPass of them.
func blockFor(n int) int {
	pass := (n + cudaMaxBlock - 1) / cudaMaxBlock
	per := (n + pass - 1) / pass
	return max(32, (per+31)/32*32)
}

func dim(x int) cuda.Dim3 { return cuda.Dim3{X: x, Y: 1, Z: 1} }

// scratch collects the pool buffers of one Run; free returns them (stream
// order makes that safe right after the launches).
type scratch struct {
	be   *cuda.Backend
	bufs []*cuda.Buffer
}

func (s *scratch) alloc(bytes int64) (*cuda.Buffer, error) {
	m, err := s.be.Malloc(max(bytes, 8))
	if err == nil {
		s.bufs = append(s.bufs, m)
	}
	return m, err
}

// upload copies host words to a new scratch buffer.
func upload[T int32 | int64](s *scratch, v []T) (*cuda.Buffer, error) {
	bs := cuda.Bytes(v)
	m, err := s.alloc(int64(len(bs)))
	if err != nil {
		return nil, err
	}
	return m, s.be.HostToDevice(m.Ptr(), bs)
}

func (s *scratch) free() {
	for _, m := range s.bufs {
		_ = m.Free()
	}
}

// outputs allocates device output tensors and frees them all on failure.
type outputs struct {
	ts  []*rt.Tensor
	err error
}

func (o *outputs) empty(be *cuda.Backend, dt rt.DType, shape rt.Shape) *rt.Tensor {
	if o.err != nil {
		return nil
	}
	t, err := be.Empty(dt, shape)
	if err != nil {
		o.err = err
		return nil
	}
	o.ts = append(o.ts, t)
	return t
}

func (o *outputs) release() {
	for _, t := range o.ts {
		_ = t.Buffer().Free()
	}
}

// checker runs dpx_check over the items of one input and reads the status
// words back.
type checker struct {
	be     *cuda.Backend
	kernel *cuda.Kernel
}

// launch queues the check of x (device address, itemStride and rowStride in
// elements) with per-item (rows, cols) at dims[b*dimStride:], writing
// status words at status.
func (c checker) launch(x cuda.DevicePtr, items int, itemStride, rowStride int64, dims cuda.DevicePtr, dimStride int, allowNegInf bool, status cuda.DevicePtr, maxElems int64) error {
	neg := 0
	if allowNegInf {
		neg = 1
	}
	blocks := int(min(max(maxElems/(256*8), 1), 64))
	return c.kernel.Launch(cuda.Dim3{X: blocks, Y: items, Z: 1}, dim(256), 0,
		x, itemStride, rowStride, dims, dimStride, neg, status)
}

// badValue turns item b's status into the CPU ops' error for a NaN/Inf, or
// nil: name[r][c] is v; want finite (or -Inf).
func (c checker) badValue(status []uint64, b int, name string, x cuda.DevicePtr, itemStride, rowStride, cols int64, allowNegInf bool) error {
	w := status[statusWords*b]
	if w == 0 {
		return nil
	}
	k := int64(^w)
	r, col := k/cols, k%cols
	v := make([]float32, 1)
	if err := c.be.DeviceToHost(cuda.Bytes(v), x+cuda.DevicePtr(4*(int64(b)*itemStride+r*rowStride+col))); err != nil {
		return err
	}
	want := "finite"
	if allowNegInf {
		want = "finite or -Inf"
	}
	return fmt.Errorf("%s[%d][%d] is %v; want %s", name, r, col, v[0], want)
}

// readStatus waits for the queued work and copies the status words back.
func readStatus(be *cuda.Backend, status *cuda.Buffer, items int) ([]uint64, error) {
	out := make([]uint64, statusWords*items)
	return out, be.DeviceToHost(cuda.Bytes(out), status.Ptr())
}

// ---------------------------------------------------------------------------

type alignCUDA struct {
	be       *cuda.Backend
	opt      AlignOptions
	prep     *Aligner // builds the trellis tables (labels, window)
	check    checker
	f32, i32 *cuda.Kernel
	budget   int64
}

func newAlignCUDA(p rt.Params, b *cuda.Backend) (rt.Op, error) {
	pr, scale, err := precisionOf(p)
	if err != nil {
		return nil, err
	}
	opt := AlignOptions{
		Blank: p.Int("blank"), Star: p.Bool("star"), StarLogProb: float32(p.Float("star_logprob")),
		Precision: pr, Scale: scale, MaxMemory: int64(p.Int("max_memory")),
	}
	a, err := NewAligner(opt)
	if err != nil {
		return nil, err
	}
	ks, err := cudaKernels(b, "dpx_check", "dpx_ctc_align_f32", "dpx_ctc_align_i32")
	if err != nil {
		return nil, err
	}
	budget := opt.MaxMemory
	if budget == 0 {
		budget = DefaultMaxMemory
	}
	return &alignCUDA{be: b, opt: opt, prep: a, check: checker{b, ks[0]}, f32: ks[1], i32: ks[2], budget: budget}, nil
}

// ctcMaxStates is the largest trellis (2L+1 states) whose two score rows
// fit the kernel's shared memory.
const ctcMaxStates = (cudaMaxShared-256)/8 - 2

// ctcShared is the kernel's dynamic shared memory for a largest trellis of
// S states: two rows of S+2 values (at least the backtrace's 224 words of
// scratch), then 64 per-warp maxima.
func ctcShared(S int) int { return 4*max(2*(S+2), 224) + 256 }

// targetsOf validates item b's targets as the CPU Aligner does (trailing -1
// padding, ids in range, no blank, T >= L + R) and returns them.
func (o *alignCUDA) targetsOf(tg *rt.Tensor, b, L, C, T int) ([]int, error) {
	out, err := itemTargets(tg, b, L, C)
	if err != nil {
		return nil, err
	}
	maxID := C - 1
	if o.opt.Star {
		maxID = C
	}
	for i, v := range out {
		if v > maxID {
			want := fmt.Sprintf("[0, %d)", C)
			if o.opt.Star {
				want = fmt.Sprintf("[0, %d] (%d is the star)", C, C)
			} else if v == C {
				want += fmt.Sprintf(" (id %d is the star: enable the star option)", C)
			}
			return nil, fmt.Errorf("item %d: targets[%d] = %d is out of range; want %s", b, i, v, want)
		}
		if v == o.opt.Blank {
			return nil, fmt.Errorf("item %d: targets[%d] is the blank id %d; targets must not contain the blank", b, i, v)
		}
	}
	if r := repeats(out); T < len(out)+r {
		return nil, fmt.Errorf("item %d: T=%d frames is too short for L=%d targets with R=%d adjacent repeats; want T >= L+R = %d", b, T, len(out), r, len(out)+r)
	}
	return out, nil
}

// Run aligns a batch: log_probs [B,T,C] or [T,C] and targets in device
// memory, optional host lengths. Outputs are device tensors.
func (o *alignCUDA) Run(ctx context.Context, in rt.Tensors) (rt.Tensors, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lp, tgDev := in["log_probs"], in["targets"]
	B, tc := batched(lp, 3)
	T, C := tc[0], tc[1]
	tB, tl := batched(tgDev, 2)
	if tB != B || (lp.Rank() == 2 && tgDev.Rank() == 2 && tB != 1) {
		return nil, fmt.Errorf("input \"targets\" has shape %v; want [%d, L] to match log_probs %v", tgDev.Shape(), B, lp.Shape())
	}
	if T == 0 || C == 0 || B == 0 {
		return nil, fmt.Errorf("input \"log_probs\" has shape %v; want B >= 1 items, T >= 1 frames and C >= 1 columns", lp.Shape())
	}
	if o.opt.Blank >= C {
		return nil, fmt.Errorf("blank id %d is out of range for C=%d columns", o.opt.Blank, C)
	}
	lpPtr, err := cuda.Ptr(lp)
	if err != nil {
		return nil, fmt.Errorf("input \"log_probs\": %w", err)
	}
	lengths, err := lengthsOf(in, B, T)
	if err != nil {
		return nil, err
	}
	tg, err := o.be.Download(tgDev)
	if err != nil {
		return nil, fmt.Errorf("input \"targets\": %w", err)
	}
	targets := make([][]int, B)
	for b := range B {
		if targets[b], err = o.targetsOf(tg, b, tl[0], C, lengths[b]); err != nil {
			return nil, err
		}
		if S := 2*len(targets[b]) + 1; S > ctcMaxStates {
			return nil, fmt.Errorf("item %d: L=%d targets make %d trellis states; the cuda kernel holds at most %d (L <= %d): use the cpu backend", b, len(targets[b]), S, ctcMaxStates, (ctcMaxStates-1)/2)
		}
		words := int64(2*len(targets[b])+32) / 32 // ceil(S/32)
		if need := int64(lengths[b]-1) * words * 8; need > o.budget {
			return nil, fmt.Errorf("item %d: aligning T=%d frames over %d trellis states needs %d bytes of backpointers on the device; the limit (max_memory) is %d", b, lengths[b], 2*len(targets[b])+1, need, o.budget)
		}
	}
	tabs := newCTCTables(o.prep, targets, lengths)
	dims := make([]int64, 2*B)
	for b := range B {
		dims[2*b], dims[2*b+1] = int64(lengths[b]), int64(C)
	}
	meta, table, bpWords, maxS := tabs.meta, tabs.table, tabs.bpWords, tabs.maxS

	sc := scratch{be: o.be}
	defer sc.free()
	var outs outputs
	ali := outs.empty(o.be, rt.I32, rt.Shape{B, T})
	fs := outs.empty(o.be, rt.F32, rt.Shape{B, T})
	score := outs.empty(o.be, rt.F32, rt.Shape{B})
	ok := false
	defer func() {
		if !ok {
			outs.release()
		}
	}()
	if outs.err != nil {
		return nil, outs.err
	}
	err = o.launch(&sc, lpPtr, B, T, C, maxS, meta, dims, table, bpWords, ali, fs, score)
	if err != nil {
		return nil, err
	}
	st, err := readStatus(o.be, sc.bufs[len(sc.bufs)-1], B)
	if err != nil {
		return nil, err
	}
	for b := range B {
		if err := o.check.badValue(st, b, "log_probs", lpPtr, int64(T*C), int64(C), int64(C), true); err != nil {
			return nil, fmt.Errorf("item %d: %w", b, err)
		}
		if st[statusWords*b+2] != 0 {
			return nil, fmt.Errorf("item %d: no alignment has a finite score: every path of the %d targets through the %d frames meets a -Inf log-prob", b, meta[4*b+1]/2, lengths[b])
		}
	}
	ok = true
	return rt.Tensors{"alignment": ali, "frame_scores": fs, "score": score}, nil
}

// launch uploads the tables and queues the check and the alignment; the
// status buffer is the last scratch buffer.
func (o *alignCUDA) launch(sc *scratch, lp cuda.DevicePtr, B, T, C, maxS int, meta, dims []int64, table []int32, bpWords int64, ali, fs, score *rt.Tensor) error {
	metaBuf, err := upload(sc, meta)
	if err != nil {
		return err
	}
	dimsBuf, err := upload(sc, dims)
	if err != nil {
		return err
	}
	tabBuf, err := upload(sc, table)
	if err != nil {
		return err
	}
	bp, err := sc.alloc(4 * bpWords)
	if err != nil {
		return err
	}
	status, err := sc.alloc(int64(8 * statusWords * B))
	if err != nil {
		return err
	}
	if err := o.be.Memset(status.Ptr(), 0, int64(8*statusWords*B)); err != nil {
		return err
	}
	if err := o.check.launch(lp, B, int64(T*C), int64(C), dimsBuf.Ptr(), 2, true, status.Ptr(), int64(T*C)); err != nil {
		return err
	}
	k := o.f32
	if o.opt.Precision == Int32 {
		k = o.i32
	}
	scale := o.opt.Scale
	if scale == 0 {
		scale = DefaultScale
	}
	ptrs := make([]cuda.DevicePtr, 3)
	for i, t := range []*rt.Tensor{ali, fs, score} {
		if ptrs[i], err = cuda.Ptr(t); err != nil {
			return err
		}
	}
	return k.Launch(dim(B), dim(blockFor(maxS)), ctcShared(maxS),
		lp, T, C, metaBuf, tabBuf, bp, o.opt.Blank, float64(o.opt.StarLogProb), scale,
		ptrs[0], ptrs[1], ptrs[2], status)
}

// ---------------------------------------------------------------------------

type viterbiCUDA struct {
	be                 *cuda.Backend
	precision          Precision
	scale              float64
	check              checker
	quantize, f32, i32 *cuda.Kernel
}

func newViterbiCUDA(p rt.Params, b *cuda.Backend) (rt.Op, error) {
	pr, scale, err := precisionOf(p)
	if err != nil {
		return nil, err
	}
	if scale == 0 {
		scale = DefaultScale
	}
	ks, err := cudaKernels(b, "dpx_check", "dpx_quantize", "dpx_viterbi_f32", "dpx_viterbi_i32")
	if err != nil {
		return nil, err
	}
	return &viterbiCUDA{be: b, precision: pr, scale: scale, check: checker{b, ks[0]}, quantize: ks[1], f32: ks[2], i32: ks[3]}, nil
}

// viterbiMaxStates is the largest S whose two rows (and the reduction
// scratch) fit the kernel's shared memory.
const viterbiMaxStates = (cudaMaxShared - 384) / 8

// Run decodes a batch: emissions [B,T,S] or [T,S], transitions [S,S] and
// priors [S] in device memory, optional host lengths. Outputs are device
// tensors.
func (o *viterbiCUDA) Run(ctx context.Context, in rt.Tensors) (rt.Tensors, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	em, tr, pr := in["emissions"], in["transitions"], in["priors"]
	B, ts := batched(em, 3)
	T, S := ts[0], ts[1]
	if T == 0 || S == 0 || B == 0 {
		return nil, fmt.Errorf("input \"emissions\" has shape %v; want B >= 1 items, T >= 1 frames and S >= 1 states", em.Shape())
	}
	if !tr.Shape().Equal(rt.Shape{S, S}) || !pr.Shape().Equal(rt.Shape{S}) {
		return nil, fmt.Errorf("inputs \"transitions\" %v and \"priors\" %v; want [%d,%d] and [%d] for S=%d states", tr.Shape(), pr.Shape(), S, S, S, S)
	}
	if S > viterbiMaxStates {
		return nil, fmt.Errorf("input \"emissions\" has S=%d states; the cuda kernel holds at most %d: use the cpu backend", S, viterbiMaxStates)
	}
	lengths, err := lengthsOf(in, B, T)
	if err != nil {
		return nil, err
	}
	var ptr [3]cuda.DevicePtr
	for i, t := range []*rt.Tensor{em, tr, pr} {
		if ptr[i], err = cuda.Ptr(t); err != nil {
			return nil, fmt.Errorf("input %q: %w", []string{"emissions", "transitions", "priors"}[i], err)
		}
	}
	// dims: per item {T_b, S}, then {S, S} for the transitions and {1, S}
	// for the priors (status items B and B+1).
	dims := make([]int64, 2*(B+2))
	lens := make([]int64, B)
	for b, n := range lengths {
		dims[2*b], dims[2*b+1], lens[b] = int64(n), int64(S), int64(n)
	}
	dims[2*B], dims[2*B+1], dims[2*B+2], dims[2*B+3] = int64(S), int64(S), 1, int64(S)

	sc := scratch{be: o.be}
	defer sc.free()
	var outs outputs
	path := outs.empty(o.be, rt.I32, rt.Shape{B, T})
	score := outs.empty(o.be, rt.F32, rt.Shape{B})
	ok := false
	defer func() {
		if !ok {
			outs.release()
		}
	}()
	if outs.err != nil {
		return nil, outs.err
	}
	status, err := o.launch(&sc, ptr, B, T, S, dims, lens, path, score)
	if err != nil {
		return nil, err
	}
	st, err := readStatus(o.be, status, B+2)
	if err != nil {
		return nil, err
	}
	if err := o.check.badValue(st, B, "transitions", ptr[1], 0, int64(S), int64(S), true); err != nil {
		return nil, err
	}
	if st[statusWords*(B+1)] != 0 {
		k := int64(^st[statusWords*(B+1)])
		v := make([]float32, 1)
		if err := o.be.DeviceToHost(cuda.Bytes(v), ptr[2]+cuda.DevicePtr(4*k)); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("priors[%d] is %v; want finite or -Inf", k, v[0])
	}
	for b := range B {
		if err := o.check.badValue(st, b, "emissions", ptr[0], int64(T*S), int64(S), int64(S), true); err != nil {
			return nil, fmt.Errorf("item %d: %w", b, err)
		}
	}
	ok = true
	return rt.Tensors{"path": path, "score": score}, nil
}

// launch queues the checks, the quantisation (int32) and the decoder and
// returns the status buffer (B+2 items).
func (o *viterbiCUDA) launch(sc *scratch, ptr [3]cuda.DevicePtr, B, T, S int, dims, lens []int64, path, score *rt.Tensor) (*cuda.Buffer, error) {
	be := o.be
	dimsBuf, err := upload(sc, dims)
	if err != nil {
		return nil, err
	}
	lensBuf, err := upload(sc, lens)
	if err != nil {
		return nil, err
	}
	status, err := sc.alloc(int64(8 * statusWords * (B + 2)))
	if err != nil {
		return nil, err
	}
	if err := be.Memset(status.Ptr(), 0, status.Bytes()); err != nil {
		return nil, err
	}
	st := func(item int) cuda.DevicePtr { return status.Ptr() + cuda.DevicePtr(8*statusWords*item) }
	dm := func(item int) cuda.DevicePtr { return dimsBuf.Ptr() + cuda.DevicePtr(16*item) }
	if err := o.check.launch(ptr[0], B, int64(T*S), int64(S), dm(0), 2, true, st(0), int64(T*S)); err != nil {
		return nil, err
	}
	if err := o.check.launch(ptr[1], 1, 0, int64(S), dm(B), 2, true, st(B), int64(S*S)); err != nil {
		return nil, err
	}
	if err := o.check.launch(ptr[2], 1, 0, int64(S), dm(B+1), 2, true, st(B+1), int64(S)); err != nil {
		return nil, err
	}
	bp, err := sc.alloc(int64(B) * int64(max(T-1, 1)) * int64(S) * 2)
	if err != nil {
		return nil, err
	}
	k, trans, priors := o.f32, ptr[1], ptr[2]
	maxq, err := sc.alloc(8)
	if err != nil {
		return nil, err
	}
	if o.precision == Int32 {
		k = o.i32
		q, err := sc.alloc(int64(4 * (S*S + S)))
		if err != nil {
			return nil, err
		}
		if err := be.Memset(maxq.Ptr(), 0x80, 8); err != nil { // 0x80808080: below every quantised value
			return nil, err
		}
		trans, priors = q.Ptr(), q.Ptr()+cuda.DevicePtr(4*S*S)
		blocks := min((S*S+255)/256, 1024)
		if err := o.quantize.Launch(dim(blocks), dim(256), 0, ptr[1], S*S, o.scale, trans, maxq); err != nil {
			return nil, err
		}
		if err := o.quantize.Launch(dim((S+255)/256), dim(256), 0, ptr[2], S, o.scale, priors, maxq.Ptr()+4); err != nil {
			return nil, err
		}
	}
	pathPtr, err := cuda.Ptr(path)
	if err != nil {
		return nil, err
	}
	scorePtr, err := cuda.Ptr(score)
	if err != nil {
		return nil, err
	}
	return status, k.Launch(dim(B), dim(blockFor(S)), 8*S+384,
		ptr[0], T, S, trans, priors, lensBuf, maxq, bp, o.scale, pathPtr, scorePtr)
}

// ---------------------------------------------------------------------------

type dtwCUDA struct {
	be        *cuda.Backend
	precision Precision
	scale     float64
	check     checker
	f32, i32  *cuda.Kernel
}

func newDTWCUDA(p rt.Params, b *cuda.Backend) (rt.Op, error) {
	pr, scale, err := precisionOf(p)
	if err != nil {
		return nil, err
	}
	if scale == 0 {
		scale = DefaultScale
	}
	ks, err := cudaKernels(b, "dpx_check", "dpx_dtw_f32", "dpx_dtw_i32")
	if err != nil {
		return nil, err
	}
	return &dtwCUDA{be: b, precision: pr, scale: scale, check: checker{b, ks[0]}, f32: ks[1], i32: ks[2]}, nil
}

// dtwMaxRows is the largest N whose three anti-diagonal buffers fit the
// kernel's shared memory (and whose rows the block covers).
const dtwMaxRows = min((cudaMaxShared-dtwScratch)/12, cudaMaxBlock*cudaMaxPass)

// dtwScratch is the DTW kernel's shared memory besides its diagonals: the
// path length and the backtrace's 256 words.
const dtwScratch = 16 + 1024

// Run aligns a batch: cost [B,N,M] or [N,M] in device memory, optional host
// lengths [B,2]. Outputs are device tensors.
func (o *dtwCUDA) Run(ctx context.Context, in rt.Tensors) (rt.Tensors, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cost := in["cost"]
	B, nm := batched(cost, 3)
	N, M := nm[0], nm[1]
	if N == 0 || M == 0 || B == 0 {
		return nil, fmt.Errorf("input \"cost\" has shape %v; want B >= 1 items, N >= 1 and M >= 1", cost.Shape())
	}
	if N > dtwMaxRows {
		return nil, fmt.Errorf("input \"cost\" has N=%d rows; the cuda kernel holds at most %d (transpose the cost so N <= M, or use the cpu backend)", N, dtwMaxRows)
	}
	dims := make([]int64, 2*B)
	if lt := in["lengths"]; lt != nil {
		if !lt.Shape().Equal(rt.Shape{B, 2}) {
			return nil, fmt.Errorf("input \"lengths\" has shape %v; want [%d, 2] (n, m per item)", lt.Shape(), B)
		}
		for b := range B {
			n, m := intAt(lt, 2*b), intAt(lt, 2*b+1)
			if n < 1 || n > int64(N) || m < 1 || m > int64(M) {
				return nil, fmt.Errorf("lengths[%d] = (%d, %d); want 1..%d and 1..%d", b, n, m, N, M)
			}
			dims[2*b], dims[2*b+1] = n, m
		}
	} else {
		for b := range B {
			dims[2*b], dims[2*b+1] = int64(N), int64(M)
		}
	}
	costPtr, err := cuda.Ptr(cost)
	if err != nil {
		return nil, fmt.Errorf("input \"cost\": %w", err)
	}
	K := N + M
	sc := scratch{be: o.be}
	defer sc.free()
	var outs outputs
	path := outs.empty(o.be, rt.I32, rt.Shape{B, K, 2})
	pl := outs.empty(o.be, rt.I32, rt.Shape{B})
	tot := outs.empty(o.be, rt.F32, rt.Shape{B})
	ok := false
	defer func() {
		if !ok {
			outs.release()
		}
	}()
	if outs.err != nil {
		return nil, outs.err
	}
	status, err := o.launch(&sc, costPtr, B, N, M, dims, path, pl, tot)
	if err != nil {
		return nil, err
	}
	st, err := readStatus(o.be, status, B)
	if err != nil {
		return nil, err
	}
	for b := range B {
		n, m := dims[2*b], dims[2*b+1]
		if err := o.check.badValue(st, b, "cost", costPtr, int64(N*M), int64(M), m, false); err != nil {
			return nil, fmt.Errorf("item %d: %w", b, err)
		}
		if o.precision == Int32 {
			q := quantizer{scale: o.scale}
			mx := int64(q.q(math.Float32frombits(uint32(st[statusWords*b+1]))))
			if mx*(n+m-1) > math.MaxInt32 {
				return nil, fmt.Errorf("item %d: dtw: int32 path: max |cost| %d quanta * (N+M-1) = %d overflows int32; lower the scale (%v)", b, mx, mx*(n+m-1), o.scale)
			}
		}
	}
	ok = true
	return rt.Tensors{"path": path, "path_len": pl, "cost_total": tot}, nil
}

func (o *dtwCUDA) launch(sc *scratch, cost cuda.DevicePtr, B, N, M int, dims []int64, path, pl, tot *rt.Tensor) (*cuda.Buffer, error) {
	dimsBuf, err := upload(sc, dims)
	if err != nil {
		return nil, err
	}
	status, err := sc.alloc(int64(8 * statusWords * B))
	if err != nil {
		return nil, err
	}
	if err := o.be.Memset(status.Ptr(), 0, status.Bytes()); err != nil {
		return nil, err
	}
	if err := o.check.launch(cost, B, int64(N*M), int64(M), dimsBuf.Ptr(), 2, false, status.Ptr(), int64(N*M)); err != nil {
		return nil, err
	}
	W := int64(N+31) / 32
	bp, err := sc.alloc(int64(B) * int64(N+M-1) * 2 * W * 4)
	if err != nil {
		return nil, err
	}
	k := o.f32
	if o.precision == Int32 {
		k = o.i32
	}
	var ptrs [3]cuda.DevicePtr
	for i, t := range []*rt.Tensor{path, pl, tot} {
		if ptrs[i], err = cuda.Ptr(t); err != nil {
			return nil, err
		}
	}
	return status, k.Launch(dim(B), dim(blockFor(N)), 12*N+dtwScratch,
		cost, N, M, dimsBuf, bp, o.scale, ptrs[0], ptrs[1], ptrs[2])
}
