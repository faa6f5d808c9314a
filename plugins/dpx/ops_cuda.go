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
// labels and torchaudio's state window, made by the CPU Aligner; 12 bytes a
// state), the targets (downloaded once to validate them) and 24 status
// bytes an item (bad-value index, largest |value|, failure flag; zeroed by
// the tables' upload), whose copy back is the one that waits for the
// kernels. Errors name the item and the value as the CPU ops do.
//
// ctc_align has two kernels: dpx_ctc_warp (states in registers, K a thread,
// a few warps an item) whenever one covers the trellis (S <= 8192) and a
// frame's log-prob row fits shared memory, else dpx_ctc_align (states in
// shared memory).
func init() {
	for name, newCUDA := range map[string]func(rt.Params, *cuda.Backend) (rt.Op, error){
		"ctc_align": newAlignCUDA, "viterbi": newViterbiCUDA, "dtw": newDTWCUDA,
	} {
		rt.RegisterImplementation(name, "cuda", cuda.Constructor(newCUDA))
	}
}

const (
	cudaMaxBlock = 1024
	cudaMaxPass  = 8 // states (rows) per thread, kMaxPass in dpx.cu
	statusWords  = 3 // per item: ^bad index, max |x| bits, failure flag
)

// cudaKernels loads the named kernels of the project's kernel module
// (Backend.KernelModule).
func cudaKernels(b *cuda.Backend, names ...string) ([]*cuda.Kernel, error) {
	mod, err := b.KernelModule()
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

// deviceInput is a batched input of a dpx CUDA op in device memory:
// [B, N, M], or [N, M] for one item.
type deviceInput struct {
	t       *rt.Tensor
	ptr     cuda.DevicePtr
	B, N, M int
}

// batchedDevice checks the start of every dpx CUDA op's Run: ctx is live,
// input name has no empty axis (axes names the inner two for the error,
// e.g. "T >= 1 frames and C >= 1 columns") and is memory of the cuda
// backend.
func batchedDevice(ctx context.Context, in rt.Tensors, name, axes string) (deviceInput, error) {
	if err := ctx.Err(); err != nil {
		return deviceInput{}, err
	}
	t := in[name]
	B, nm := batched(t, 3)
	x := deviceInput{t: t, B: B, N: nm[0], M: nm[1]}
	if x.N == 0 || x.M == 0 || B == 0 {
		return deviceInput{}, fmt.Errorf("input %q has shape %v; want B >= 1 items, %s", name, t.Shape(), axes)
	}
	var err error
	if x.ptr, err = cuda.Ptr(t); err != nil {
		return deviceInput{}, fmt.Errorf("input %q: %w", name, err)
	}
	return x, nil
}

// deviceOutput is one output tensor of a dpx CUDA op.
type deviceOutput struct {
	name  string
	dtype rt.DType
	shape rt.Shape
}

// runDevice is what every dpx CUDA op's Run does once its inputs are
// checked: it allocates the outputs on be (device memory, uninitialised),
// calls queue with a Scratch (freed when runDevice returns: stream order
// makes that safe right after the launches) and the outputs' device
// addresses, copies back the words 8-byte status words at the address
// queue returns (the one copy that waits for the kernels) and hands them to
// check, which turns them into the op's error. Any error releases the
// outputs; on success they are returned by name.
func runDevice(be *cuda.Backend, outs []deviceOutput, words int,
	queue func(sc *cuda.Scratch, out []cuda.DevicePtr) (status cuda.DevicePtr, err error),
	check func(status []uint64) error) (rt.Tensors, error) {
	sc := be.NewScratch()
	defer sc.Free()
	var o cuda.Outputs
	ts := make([]*rt.Tensor, len(outs))
	for i, d := range outs {
		ts[i] = o.Empty(be, d.dtype, d.shape)
	}
	err := o.Err()
	ptrs := make([]cuda.DevicePtr, len(outs))
	for i := 0; err == nil && i < len(ts); i++ {
		ptrs[i], err = cuda.Ptr(ts[i])
	}
	var status cuda.DevicePtr
	if err == nil {
		status, err = queue(sc, ptrs)
	}
	st := make([]uint64, words)
	if err == nil {
		err = be.DeviceToHost(cuda.Bytes(st), status)
	}
	if err == nil {
		err = check(st)
	}
	if err != nil {
		o.Release()
		return nil, err
	}
	res := make(rt.Tensors, len(outs))
	for i, d := range outs {
		res[d.name] = ts[i]
	}
	return res, nil
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
	blocks := int(min(max(maxElems/(256*8), 1), 64))
	return c.kernel.Launch(cuda.Dim3{X: blocks, Y: items, Z: 1}, dim(256), 0, &kern.DpxCheckParams{
		X: uint64(x), ItemStride: itemStride, RowStride: rowStride, Dims: uint64(dims), DimStride: int64(dimStride),
		AllowNegInf: int64(b2i(allowNegInf)), Status: uint64(status),
	})
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
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

// zeroStatus is the initial status words of items items, uploaded with a
// launch's tables (one copy, no memset).
func zeroStatus(items int) []byte { return make([]byte, 8*statusWords*items) }

// ---------------------------------------------------------------------------

type alignCUDA struct {
	be     *cuda.Backend
	opt    AlignOptions
	preps  *alignerPool // Aligners whose prepare builds the trellis tables
	check  checker
	k      [2][len(ctcPasses)]*cuda.Kernel // dpx_ctc_align: [f32, i32][ctcPasses]
	w      [2][len(ctcWarpK)]*cuda.Kernel  // dpx_ctc_warp: [f32, i32][ctcWarpK]
	shared int                             // dynamic shared memory a launch may use
	budget int64
}

// ctcPasses are the compile-time state passes per thread of the
// dpx_ctc_align kernels (their _p suffixes).
var ctcPasses = [...]int{1, 2, 4, 6, 8}

// ctcWarpK are the states per thread of the register-resident
// dpx_ctc_warp kernels (their _k suffixes); ctcWarpBound is each one's
// launch bound (__launch_bounds__ in dpx.cu: registers for K states).
var (
	ctcWarpK     = [...]int{2, 4, 6, 8, 12, 16, 20, 24, 32}
	ctcWarpBound = [...]int{1024, 1024, 1024, 1024, 512, 512, 128, 128, 128}
)

// Test hooks (benchmarks of the launch shape): the least state passes per
// thread and the frames per block (< 1 chooses) of dpx_ctc_align; the
// states per thread and warps of dpx_ctc_warp (< 1 chooses); ctcUseBlock,
// which forces dpx_ctc_align; ctcPipeline, which runs dpx_ctc_warp's float
// path as a pipeline of warps instead of a barrier every frame; and
// ctcNoPairs, which turns its float path's two frames per barrier off.
var (
	ctcMinPass, ctcFrames    = 0, 0
	ctcForceK, ctcWarps      = 0, 0
	ctcUseBlock, ctcPipeline = false, false
	ctcNoPairs               = false
)

func newAlignCUDA(p rt.Params, b *cuda.Backend) (rt.Op, error) {
	pr, scale, err := precisionOf(p)
	if err != nil {
		return nil, err
	}
	opt := AlignOptions{
		Blank: p.Int("blank"), Star: p.Bool("star"), StarLogProb: float32(p.Float("star_logprob")),
		Precision: pr, Scale: scale, MaxMemory: int64(p.Int("max_memory")),
	}
	preps, err := newAlignerPool(opt)
	if err != nil {
		return nil, err
	}
	names := []string{"dpx_check"}
	for _, v := range []string{"f32", "i32"} {
		for _, mp := range ctcPasses {
			names = append(names, fmt.Sprintf("dpx_ctc_align_%s_p%d", v, mp))
		}
	}
	for _, v := range []string{"f32", "i32"} {
		for _, k := range ctcWarpK {
			names = append(names, fmt.Sprintf("dpx_ctc_warp_%s_k%d", v, k))
		}
	}
	ks, err := cudaKernels(b, names...)
	if err != nil {
		return nil, err
	}
	o := &alignCUDA{be: b, opt: opt, preps: preps, check: checker{b, ks[0]}, budget: opt.MaxMemory}
	if o.budget == 0 {
		o.budget = DefaultMaxMemory
	}
	if o.shared, err = optInShared(ks[1:]...); err != nil {
		return nil, err
	}
	nb := 2 * len(ctcPasses)
	for i, k := range ks[1 : 1+nb] {
		o.k[i/len(ctcPasses)][i%len(ctcPasses)] = k
	}
	for i, k := range ks[1+nb:] {
		o.w[i/len(ctcWarpK)][i%len(ctcWarpK)] = k
	}
	return o, nil
}

// optInShared lets the kernels use the device's largest dynamic shared
// memory per block (above the default 48 KiB) and returns that size.
func optInShared(ks ...*cuda.Kernel) (int, error) {
	limit := math.MaxInt
	for _, k := range ks {
		n, err := k.MaxDynamicShared()
		if err != nil {
			return 0, err
		}
		limit = min(limit, n)
	}
	for _, k := range ks {
		if err := k.SetMaxDynamicShared(limit); err != nil {
			return 0, err
		}
	}
	return limit, nil
}

const (
	ctcMaxFrames = 16   // frames per block of staged emissions and backpointers (kernel: F)
	ctcMinRegion = 1024 // kCtcRegion in dpx.cu, words
)

// ctcShared is the kernel's dynamic shared memory for a largest trellis of
// S states and blocks of F frames: 64 per-warp maxima, S labels, the
// backpointer ring (two halves of F frames of 2*ceil(S/32) words), then a
// region of max(2(S+2) + 2FS, 1024) words (the two rows and the
// double-buffered emissions).
func ctcShared(S, F int) int {
	return 256 + 4*S + 16*F*((S+31)/32) + 4*max(2*(S+2)+2*F*S, ctcMinRegion)
}

// ctcMaxStates is the largest trellis (2L+1 states) the kernels hold in
// shared memory of the given size (one-frame blocks) and in 1024 threads
// of at most 8 states.
func ctcMaxStates(shared int) int {
	S := min(cudaMaxBlock*cudaMaxPass-1, (shared-272)/20) // ctcShared(S, 1) >= 272 + 20S
	for S > 1 && ctcShared(S, 1) > shared {
		S--
	}
	return S
}

// ctcLaunch is the launch shape for a largest trellis of S states: state
// passes per thread (a kernel's MP), block size, and frames per block (up
// to 16, as many as fit).
func (o *alignCUDA) ctcLaunch(S int) (passes, block, frames int) {
	need := max((S+cudaMaxBlock-1)/cudaMaxBlock, ctcMinPass)
	pi := 0
	for pi < len(ctcPasses)-1 && ctcPasses[pi] < need {
		pi++
	}
	passes = ctcPasses[pi]
	block = max(32, ((S+passes-1)/passes+31)/32*32)
	frames = ctcMaxFrames
	if ctcFrames > 0 {
		frames = ctcFrames
	}
	for frames > 1 && ctcShared(S, frames) > o.shared {
		frames--
	}
	return passes, block, frames
}

const (
	ctcWarpFrames   = 32 // frames per block of staged emission rows (dpx_ctc_warp: F)
	ctcWarpTarget   = 6  // states per thread the default dpx_ctc_warp launch aims at
	ctcWarpMaxWarps = 12 // and its most warps
)

// ctcWarpShared is dpx_ctc_warp's dynamic shared memory for a largest
// trellis of S states, C log-prob columns, blocks of F frames and K states
// per thread: 1328 bytes of per-warp maxima, highest states and end states,
// the warps' ring of highest states (2F frames x 32 warps x 8 bytes), a
// region of max(2*F*Cp, 64*BTW + 32, 1024) words (Cp = C+2 rounded up to 4;
// BTW = (126/K + 2) * ceil(2K/32) backtrace words a frame), and S labels.
func ctcWarpShared(S, C, F, K int) int {
	cp := (C + 5) &^ 3
	btw := (126/K + 2) * ((2*K + 31) / 32)
	return 1328 + 512*F + 4*max(2*F*cp, 64*btw+32, ctcMinRegion) + 4*S
}

// ctcWarpShape is a dpx_ctc_warp launch: the index of its K in ctcWarpK,
// the block size (warps*32) and the frames per block.
type ctcWarpShape struct{ ki, block, frames int }

// ctcWarpLaunch picks the dpx_ctc_warp launch for a largest trellis of S
// states over C columns: by default about ctcWarpTarget states a thread
// (ceil(S/192) warps, at most 12 unless no K covers S with 12, and the
// smallest K that covers S with them: on the H200 (cuda8-6), 4 warps of 6
// states for S = 601 and 12 of 16 for S = 6001 were the fastest measured);
// ok is false when no kernel covers S or the emission rows of even one
// frame do not fit shared memory (dpx_ctc_align takes the call then).
func (o *alignCUDA) ctcWarpLaunch(S, C int) (sh ctcWarpShape, ok bool) {
	warps, last := min((S+32*ctcWarpTarget-1)/(32*ctcWarpTarget), ctcWarpMaxWarps), 32
	if ctcWarps > 0 {
		warps, last = ctcWarps, ctcWarps
	}
	// More warps when no kernel's K (within its launch bound) covers S.
	for sh.ki = ctcWarpKernel(S, warps); sh.ki < 0 && warps < last; sh.ki = ctcWarpKernel(S, warps) {
		warps++
	}
	if sh.ki < 0 {
		return sh, false
	}
	sh.block = 32 * warps
	sh.frames = ctcWarpFrames
	for sh.frames > 1 && ctcWarpShared(S, C, sh.frames, ctcWarpK[sh.ki]) > o.shared {
		sh.frames /= 2
	}
	if ctcFrames > 0 {
		sh.frames = ctcFrames
	}
	return sh, ctcWarpShared(S, C, sh.frames, ctcWarpK[sh.ki]) <= o.shared
}

// ctcWarpKernel is the index in ctcWarpK of the smallest K whose kernel
// covers S states with warps warps within its launch bound (and is
// ctcForceK when that is set), or -1.
func ctcWarpKernel(S, warps int) int {
	for i, k := range ctcWarpK {
		if k*32*warps >= S && ctcWarpBound[i] >= 32*warps && (ctcForceK <= 0 || k == ctcForceK) {
			return i
		}
	}
	return -1
}

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

// ctcCall is one validated ctc_align call: the log_probs' device address
// and shape, per-item lengths and the kernel's tables.
type ctcCall struct {
	lp      cuda.DevicePtr
	B, T, C int
	lengths []int
	dims    []int64 // {T_b, C} per item, for dpx_check
	tabs    ctcTables
	warp    bool         // dpx_ctc_warp (else dpx_ctc_align)
	wsh     ctcWarpShape // its launch
}

// plan validates a call's inputs (log_probs [B,T,C] or [T,C] and targets in
// device memory, optional host lengths) and builds its tables, items spread
// over GOMAXPROCS workers; the targets are downloaded to validate them.
func (o *alignCUDA) plan(ctx context.Context, in rt.Tensors) (*ctcCall, error) {
	x, err := batchedDevice(ctx, in, "log_probs", "T >= 1 frames and C >= 1 columns")
	if err != nil {
		return nil, err
	}
	lp, tgDev, lpPtr := x.t, in["targets"], x.ptr
	B, T, C := x.B, x.N, x.M
	tB, tl := batched(tgDev, 2)
	if tB != B || (lp.Rank() == 2 && tgDev.Rank() == 2 && tB != 1) {
		return nil, fmt.Errorf("input \"targets\" has shape %v; want [%d, L] to match log_probs %v", tgDev.Shape(), B, lp.Shape())
	}
	if o.opt.Blank >= C {
		return nil, fmt.Errorf("blank id %d is out of range for C=%d columns", o.opt.Blank, C)
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
	mx := ctcMaxStates(o.shared)
	err = forEach(ctx, B, func(_, b int) error {
		var err error
		if targets[b], err = o.targetsOf(tg, b, tl[0], C, lengths[b]); err != nil {
			return err
		}
		if S := 2*len(targets[b]) + 1; S > mx {
			return fmt.Errorf("item %d: L=%d targets make %d trellis states; the cuda kernel holds at most %d on %s (L <= %d): use the cpu backend", b, len(targets[b]), S, mx, o.be.Device(), (mx-1)/2)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	maxS := 1
	for _, tg := range targets {
		maxS = max(maxS, 2*len(tg)+1)
	}
	wsh, warp := o.ctcWarpLaunch(maxS, C)
	warp = warp && !ctcUseBlock
	for b, tg := range targets {
		S := int64(2*len(tg) + 1)
		words := 2 * ((S + 31) / 32) // dpx_ctc_align: two planes of ceil(S/32)
		if warp {
			k := int64(ctcWarpK[wsh.ki])
			words = (S + k - 1) / k * ((2*k + 31) / 32)
		}
		if need := int64(lengths[b]-1) * words * 4; need > o.budget {
			return nil, fmt.Errorf("item %d: aligning T=%d frames over %d trellis states needs %d bytes of backpointers on the device; the limit (max_memory) is %d", b, lengths[b], S, need, o.budget)
		}
	}
	c := &ctcCall{lp: lpPtr, B: B, T: T, C: C, lengths: lengths, dims: make([]int64, 2*B),
		tabs: newCTCTables(o.preps, targets, lengths), warp: warp, wsh: wsh}
	if warp {
		c.tabs.useWarpLayout(ctcWarpK[wsh.ki])
	}
	for b := range B {
		c.dims[2*b], c.dims[2*b+1] = int64(lengths[b]), int64(C)
	}
	return c, nil
}

// Run aligns a batch: log_probs [B,T,C] or [T,C] and targets in device
// memory, optional host lengths. Outputs are device tensors.
func (o *alignCUDA) Run(ctx context.Context, in rt.Tensors) (rt.Tensors, error) {
	c, err := o.plan(ctx, in)
	if err != nil {
		return nil, err
	}
	outs := []deviceOutput{
		{"alignment", rt.I32, rt.Shape{c.B, c.T}}, {"frame_scores", rt.F32, rt.Shape{c.B, c.T}}, {"score", rt.F32, rt.Shape{c.B}},
	}
	return runDevice(o.be, outs, statusWords*c.B, func(sc *cuda.Scratch, out []cuda.DevicePtr) (cuda.DevicePtr, error) {
		return o.launch(sc, c, out)
	}, func(st []uint64) error {
		for b := range c.B {
			if err := o.check.badValue(st, b, "log_probs", c.lp, int64(c.T*c.C), int64(c.C), int64(c.C), true); err != nil {
				return fmt.Errorf("item %d: %w", b, err)
			}
			if st[statusWords*b+2] != 0 {
				return fmt.Errorf("item %d: no alignment has a finite score: every path of the %d targets through the %d frames meets a -Inf log-prob", b, c.tabs.meta[4*b+1]/2, c.lengths[b])
			}
		}
		return nil
	})
}

// launch uploads the call's tables (one copy), queues the check and the
// alignment (dpx_ctc_warp when one covers the trellis and its rows fit,
// else dpx_ctc_align) into out (alignment, frame_scores, score) and
// returns the status buffer.
func (o *alignCUDA) launch(sc *cuda.Scratch, c *ctcCall, out []cuda.DevicePtr) (cuda.DevicePtr, error) {
	tabs, err := sc.UploadParts(cuda.Bytes(c.tabs.meta), cuda.Bytes(c.dims), cuda.Bytes(c.tabs.table), zeroStatus(c.B))
	if err != nil {
		return 0, err
	}
	status := tabs[3]
	bp, err := sc.Alloc(4 * c.tabs.bpWords)
	if err != nil {
		return 0, err
	}
	if err := o.check.launch(c.lp, c.B, int64(c.T*c.C), int64(c.C), tabs[1], 2, true, status, int64(c.T*c.C)); err != nil {
		return 0, err
	}
	scale := o.opt.Scale
	if scale == 0 {
		scale = DefaultScale
	}
	pr := 0
	if o.opt.Precision == Int32 {
		pr = 1
	}
	var (
		k                     *cuda.Kernel
		block, frames, shared int
	)
	if c.warp {
		k, block, frames = o.w[pr][c.wsh.ki], c.wsh.block, c.wsh.frames
		shared = ctcWarpShared(c.tabs.maxS, c.C, frames, ctcWarpK[c.wsh.ki])
		if ctcPipeline {
			frames |= 1 << 16 // the kernel's pipeline flag
		}
		if ctcNoPairs {
			frames |= 1 << 17 // the kernel's no-pairs flag
		}
	} else {
		var passes int
		passes, block, frames = o.ctcLaunch(c.tabs.maxS)
		pi := 0
		for ctcPasses[pi] != passes {
			pi++
		}
		k, shared = o.k[pr][pi], ctcShared(c.tabs.maxS, frames)
	}
	return status, k.Launch(dim(c.B), dim(block), shared, &kern.DpxCtcParams{
		Lp: uint64(c.lp), T: int64(c.T), C: int64(c.C), Meta: uint64(tabs[0]), Table: uint64(tabs[2]),
		Bp: uint64(bp.Ptr()), Blank: int64(o.opt.Blank), Star: float64(o.opt.StarLogProb), Scale: scale,
		Frames: int64(frames), Alignment: uint64(out[0]), FrameScores: uint64(out[1]), Score: uint64(out[2]),
		Status: uint64(status),
	})
}

// ---------------------------------------------------------------------------

type viterbiCUDA struct {
	be                 *cuda.Backend
	precision          Precision
	scale              float64
	check              checker
	quantize, f32, i32 *cuda.Kernel
	maxStates          int
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
	shared, err := optInShared(ks[2:]...)
	if err != nil {
		return nil, err
	}
	return &viterbiCUDA{be: b, precision: pr, scale: scale, check: checker{b, ks[0]}, quantize: ks[1], f32: ks[2], i32: ks[3],
		maxStates: viterbiMaxStates(shared)}, nil
}

// viterbiMaxStates is the largest S whose two rows (and the reduction
// scratch) fit shared memory of the given size and whose states 1024
// threads cover in at most 8 passes.
func viterbiMaxStates(shared int) int { return min((shared-384)/8, cudaMaxBlock*cudaMaxPass) }

// Run decodes a batch: emissions [B,T,S] or [T,S], transitions [S,S] and
// priors [S] in device memory, optional host lengths. Outputs are device
// tensors.
func (o *viterbiCUDA) Run(ctx context.Context, in rt.Tensors) (rt.Tensors, error) {
	x, err := batchedDevice(ctx, in, "emissions", "T >= 1 frames and S >= 1 states")
	if err != nil {
		return nil, err
	}
	tr, pr := in["transitions"], in["priors"]
	B, T, S := x.B, x.N, x.M
	if !tr.Shape().Equal(rt.Shape{S, S}) || !pr.Shape().Equal(rt.Shape{S}) {
		return nil, fmt.Errorf("inputs \"transitions\" %v and \"priors\" %v; want [%d,%d] and [%d] for S=%d states", tr.Shape(), pr.Shape(), S, S, S, S)
	}
	if S > o.maxStates {
		return nil, fmt.Errorf("input \"emissions\" has S=%d states; the cuda kernel holds at most %d on %s: use the cpu backend", S, o.maxStates, o.be.Device())
	}
	lengths, err := lengthsOf(in, B, T)
	if err != nil {
		return nil, err
	}
	ptr := [3]cuda.DevicePtr{x.ptr}
	for i, t := range []*rt.Tensor{tr, pr} {
		if ptr[i+1], err = cuda.Ptr(t); err != nil {
			return nil, fmt.Errorf("input %q: %w", []string{"transitions", "priors"}[i], err)
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

	outs := []deviceOutput{{"path", rt.I32, rt.Shape{B, T}}, {"score", rt.F32, rt.Shape{B}}}
	return runDevice(o.be, outs, statusWords*(B+2), func(sc *cuda.Scratch, out []cuda.DevicePtr) (cuda.DevicePtr, error) {
		return o.launch(sc, ptr, B, T, S, dims, lens, out)
	}, func(st []uint64) error {
		if err := o.check.badValue(st, B, "transitions", ptr[1], 0, int64(S), int64(S), true); err != nil {
			return err
		}
		if st[statusWords*(B+1)] != 0 {
			k := int64(^st[statusWords*(B+1)])
			v := make([]float32, 1)
			if err := o.be.DeviceToHost(cuda.Bytes(v), ptr[2]+cuda.DevicePtr(4*k)); err != nil {
				return err
			}
			return fmt.Errorf("priors[%d] is %v; want finite or -Inf", k, v[0])
		}
		for b := range B {
			if err := o.check.badValue(st, b, "emissions", ptr[0], int64(T*S), int64(S), int64(S), true); err != nil {
				return fmt.Errorf("item %d: %w", b, err)
			}
		}
		return nil
	})
}

// launch queues the checks, the quantisation (int32) and the decoder into
// out (path, score) and returns the status buffer (B+2 items).
func (o *viterbiCUDA) launch(sc *cuda.Scratch, ptr [3]cuda.DevicePtr, B, T, S int, dims, lens []int64, out []cuda.DevicePtr) (cuda.DevicePtr, error) {
	be := o.be
	tabs, err := sc.UploadParts(cuda.Bytes(dims), cuda.Bytes(lens), zeroStatus(B+2))
	if err != nil {
		return 0, err
	}
	dimsPtr, lensPtr, status := tabs[0], tabs[1], tabs[2]
	st := func(item int) cuda.DevicePtr { return status + cuda.DevicePtr(8*statusWords*item) }
	dm := func(item int) cuda.DevicePtr { return dimsPtr + cuda.DevicePtr(16*item) }
	if err := o.check.launch(ptr[0], B, int64(T*S), int64(S), dm(0), 2, true, st(0), int64(T*S)); err != nil {
		return 0, err
	}
	if err := o.check.launch(ptr[1], 1, 0, int64(S), dm(B), 2, true, st(B), int64(S*S)); err != nil {
		return 0, err
	}
	if err := o.check.launch(ptr[2], 1, 0, int64(S), dm(B+1), 2, true, st(B+1), int64(S)); err != nil {
		return 0, err
	}
	bp, err := sc.Alloc(int64(B) * int64(max(T-1, 1)) * int64(S) * 2)
	if err != nil {
		return 0, err
	}
	k, trans, priors := o.f32, ptr[1], ptr[2]
	maxq, err := sc.Alloc(8)
	if err != nil {
		return 0, err
	}
	if o.precision == Int32 {
		k = o.i32
		q, err := sc.Alloc(int64(4 * (S*S + S)))
		if err != nil {
			return 0, err
		}
		if err := be.Memset(maxq.Ptr(), 0x80, 8); err != nil { // 0x80808080: below every quantised value
			return 0, err
		}
		trans, priors = q.Ptr(), q.Ptr()+cuda.DevicePtr(4*S*S)
		blocks := min((S*S+255)/256, 1024)
		if err := o.quantize.Launch(dim(blocks), dim(256), 0, &kern.DpxQuantizeParams{
			X: uint64(ptr[1]), N: int64(S * S), Scale: o.scale, Out: uint64(trans), Maxq: uint64(maxq.Ptr()),
		}); err != nil {
			return 0, err
		}
		if err := o.quantize.Launch(dim((S+255)/256), dim(256), 0, &kern.DpxQuantizeParams{
			X: uint64(ptr[2]), N: int64(S), Scale: o.scale, Out: uint64(priors), Maxq: uint64(maxq.Ptr() + 4),
		}); err != nil {
			return 0, err
		}
	}
	return status, k.Launch(dim(B), dim(blockFor(S)), 8*S+384, &kern.DpxViterbiParams{
		Em: uint64(ptr[0]), T: int64(T), S: int64(S), Trans: uint64(trans), Priors: uint64(priors),
		Lens: uint64(lensPtr), Maxq: uint64(maxq.Ptr()), Bp: uint64(bp.Ptr()), Scale: o.scale,
		Path: uint64(out[0]), Score: uint64(out[1]),
	})
}

// ---------------------------------------------------------------------------

type dtwCUDA struct {
	be        *cuda.Backend
	precision Precision
	scale     float64
	check     checker
	f32, i32  *cuda.Kernel
	maxRows   int
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
	shared, err := optInShared(ks[1:]...)
	if err != nil {
		return nil, err
	}
	return &dtwCUDA{be: b, precision: pr, scale: scale, check: checker{b, ks[0]}, f32: ks[1], i32: ks[2],
		maxRows: dtwMaxRows(shared)}, nil
}

// dtwMaxRows is the largest N whose three anti-diagonal buffers fit shared
// memory of the given size and whose rows 1024 threads cover in at most 8
// passes.
func dtwMaxRows(shared int) int { return min((shared-dtwScratch)/12, cudaMaxBlock*cudaMaxPass) }

// dtwScratch is the DTW kernel's shared memory besides its diagonals: the
// path length and the backtrace's 256 words.
const dtwScratch = 16 + 1024

// Run aligns a batch: cost [B,N,M] or [N,M] in device memory, optional host
// lengths [B,2]. Outputs are device tensors.
func (o *dtwCUDA) Run(ctx context.Context, in rt.Tensors) (rt.Tensors, error) {
	x, err := batchedDevice(ctx, in, "cost", "N >= 1 and M >= 1")
	if err != nil {
		return nil, err
	}
	B, N, M, costPtr := x.B, x.N, x.M, x.ptr
	if N > o.maxRows {
		return nil, fmt.Errorf("input \"cost\" has N=%d rows; the cuda kernel holds at most %d on %s (transpose the cost so N <= M, or use the cpu backend)", N, o.maxRows, o.be.Device())
	}
	dims, err := dtwLengths(in, B, N, M)
	if err != nil {
		return nil, err
	}
	outs := []deviceOutput{
		{"path", rt.I32, rt.Shape{B, N + M, 2}}, {"path_len", rt.I32, rt.Shape{B}}, {"cost_total", rt.F32, rt.Shape{B}},
	}
	return runDevice(o.be, outs, statusWords*B, func(sc *cuda.Scratch, out []cuda.DevicePtr) (cuda.DevicePtr, error) {
		return o.launch(sc, costPtr, B, N, M, dims, out)
	}, func(st []uint64) error {
		for b := range B {
			n, m := dims[2*b], dims[2*b+1]
			if err := o.check.badValue(st, b, "cost", costPtr, int64(N*M), int64(M), m, false); err != nil {
				return fmt.Errorf("item %d: %w", b, err)
			}
			if o.precision == Int32 {
				q := quantizer{scale: o.scale}
				mx := int64(q.q(math.Float32frombits(uint32(st[statusWords*b+1]))))
				if mx*(n+m-1) > math.MaxInt32 {
					return fmt.Errorf("item %d: dtw: int32 path: max |cost| %d quanta * (N+M-1) = %d overflows int32; lower the scale (%v)", b, mx, mx*(n+m-1), o.scale)
				}
			}
		}
		return nil
	})
}

// launch queues the check and the alignment into out (path, path_len,
// cost_total) and returns the status buffer.
func (o *dtwCUDA) launch(sc *cuda.Scratch, cost cuda.DevicePtr, B, N, M int, dims []int64, out []cuda.DevicePtr) (cuda.DevicePtr, error) {
	tabs, err := sc.UploadParts(cuda.Bytes(dims), zeroStatus(B))
	if err != nil {
		return 0, err
	}
	dimsPtr, status := tabs[0], tabs[1]
	if err := o.check.launch(cost, B, int64(N*M), int64(M), dimsPtr, 2, false, status, int64(N*M)); err != nil {
		return 0, err
	}
	W := int64(N+31) / 32
	bp, err := sc.Alloc(int64(B) * int64(N+M-1) * 2 * W * 4)
	if err != nil {
		return 0, err
	}
	k := o.f32
	if o.precision == Int32 {
		k = o.i32
	}
	return status, k.Launch(dim(B), dim(blockFor(N)), 12*N+dtwScratch, &kern.DpxDtwParams{
		Cost: uint64(cost), N: int64(N), M: int64(M), Dims: uint64(dimsPtr), Bp: uint64(bp.Ptr()), Scale: o.scale,
		Path: uint64(out[0]), PathLen: uint64(out[1]), Total: uint64(out[2]),
	})
}
