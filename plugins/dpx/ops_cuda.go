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
	cudaModule   = "edge"
	cudaMaxBlock = 1024
	cudaMaxPass  = 8 // states (rows) per thread, kMaxPass in dpx.cu
	statusWords  = 3 // per item: ^bad index, max |x| bits, failure flag
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

// uploadAll copies the parts, each padded to 8 bytes, to one new scratch
// buffer in one copy and returns each part's device address.
func uploadAll(s *scratch, parts ...[]byte) ([]cuda.DevicePtr, error) {
	var all []byte
	offs := make([]int, len(parts))
	for i, p := range parts {
		offs[i] = len(all)
		all = append(all, p...)
		all = append(all, make([]byte, (8-len(all)%8)%8)...)
	}
	m, err := s.alloc(int64(len(all)))
	if err != nil {
		return nil, err
	}
	ptrs := make([]cuda.DevicePtr, len(parts))
	for i, off := range offs {
		ptrs[i] = m.Ptr() + cuda.DevicePtr(off)
	}
	return ptrs, s.be.HostToDevice(m.Ptr(), all)
}

func (s *scratch) free() {
	for _, m := range s.bufs {
		_ = m.Free()
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
func readStatus(be *cuda.Backend, status cuda.DevicePtr, items int) ([]uint64, error) {
	out := make([]uint64, statusWords*items)
	return out, be.DeviceToHost(cuda.Bytes(out), status)
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
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := o.plan(ctx, in)
	if err != nil {
		return nil, err
	}
	sc := scratch{be: o.be}
	defer sc.free()
	var outs cuda.Outputs
	ali := outs.Empty(o.be, rt.I32, rt.Shape{c.B, c.T})
	fs := outs.Empty(o.be, rt.F32, rt.Shape{c.B, c.T})
	score := outs.Empty(o.be, rt.F32, rt.Shape{c.B})
	ok := false
	defer func() {
		if !ok {
			outs.Release()
		}
	}()
	if outs.Err() != nil {
		return nil, outs.Err()
	}
	status, err := o.launch(&sc, c, ali, fs, score)
	if err != nil {
		return nil, err
	}
	st, err := readStatus(o.be, status, c.B)
	if err != nil {
		return nil, err
	}
	for b := range c.B {
		if err := o.check.badValue(st, b, "log_probs", c.lp, int64(c.T*c.C), int64(c.C), int64(c.C), true); err != nil {
			return nil, fmt.Errorf("item %d: %w", b, err)
		}
		if st[statusWords*b+2] != 0 {
			return nil, fmt.Errorf("item %d: no alignment has a finite score: every path of the %d targets through the %d frames meets a -Inf log-prob", b, c.tabs.meta[4*b+1]/2, c.lengths[b])
		}
	}
	ok = true
	return rt.Tensors{"alignment": ali, "frame_scores": fs, "score": score}, nil
}

// launch uploads the call's tables (one copy), queues the check and the
// alignment (dpx_ctc_warp when one covers the trellis and its rows fit,
// else dpx_ctc_align) and returns the status buffer.
func (o *alignCUDA) launch(sc *scratch, c *ctcCall, ali, fs, score *rt.Tensor) (cuda.DevicePtr, error) {
	tabs, err := uploadAll(sc, cuda.Bytes(c.tabs.meta), cuda.Bytes(c.dims), cuda.Bytes(c.tabs.table), zeroStatus(c.B))
	if err != nil {
		return 0, err
	}
	status := tabs[3]
	bp, err := sc.alloc(4 * c.tabs.bpWords)
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
	var ptrs [3]cuda.DevicePtr
	for i, t := range []*rt.Tensor{ali, fs, score} {
		if ptrs[i], err = cuda.Ptr(t); err != nil {
			return 0, err
		}
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
	return status, k.Launch(dim(c.B), dim(block), shared,
		c.lp, c.T, c.C, tabs[0], tabs[2], bp, o.opt.Blank, float64(o.opt.StarLogProb), scale, frames,
		ptrs[0], ptrs[1], ptrs[2], status)
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
	if S > o.maxStates {
		return nil, fmt.Errorf("input \"emissions\" has S=%d states; the cuda kernel holds at most %d on %s: use the cpu backend", S, o.maxStates, o.be.Device())
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
	var outs cuda.Outputs
	path := outs.Empty(o.be, rt.I32, rt.Shape{B, T})
	score := outs.Empty(o.be, rt.F32, rt.Shape{B})
	ok := false
	defer func() {
		if !ok {
			outs.Release()
		}
	}()
	if outs.Err() != nil {
		return nil, outs.Err()
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
func (o *viterbiCUDA) launch(sc *scratch, ptr [3]cuda.DevicePtr, B, T, S int, dims, lens []int64, path, score *rt.Tensor) (cuda.DevicePtr, error) {
	be := o.be
	tabs, err := uploadAll(sc, cuda.Bytes(dims), cuda.Bytes(lens), zeroStatus(B+2))
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
	bp, err := sc.alloc(int64(B) * int64(max(T-1, 1)) * int64(S) * 2)
	if err != nil {
		return 0, err
	}
	k, trans, priors := o.f32, ptr[1], ptr[2]
	maxq, err := sc.alloc(8)
	if err != nil {
		return 0, err
	}
	if o.precision == Int32 {
		k = o.i32
		q, err := sc.alloc(int64(4 * (S*S + S)))
		if err != nil {
			return 0, err
		}
		if err := be.Memset(maxq.Ptr(), 0x80, 8); err != nil { // 0x80808080: below every quantised value
			return 0, err
		}
		trans, priors = q.Ptr(), q.Ptr()+cuda.DevicePtr(4*S*S)
		blocks := min((S*S+255)/256, 1024)
		if err := o.quantize.Launch(dim(blocks), dim(256), 0, ptr[1], S*S, o.scale, trans, maxq); err != nil {
			return 0, err
		}
		if err := o.quantize.Launch(dim((S+255)/256), dim(256), 0, ptr[2], S, o.scale, priors, maxq.Ptr()+4); err != nil {
			return 0, err
		}
	}
	pathPtr, err := cuda.Ptr(path)
	if err != nil {
		return 0, err
	}
	scorePtr, err := cuda.Ptr(score)
	if err != nil {
		return 0, err
	}
	return status, k.Launch(dim(B), dim(blockFor(S)), 8*S+384,
		ptr[0], T, S, trans, priors, lensPtr, maxq, bp, o.scale, pathPtr, scorePtr)
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
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	cost := in["cost"]
	B, nm := batched(cost, 3)
	N, M := nm[0], nm[1]
	if N == 0 || M == 0 || B == 0 {
		return nil, fmt.Errorf("input \"cost\" has shape %v; want B >= 1 items, N >= 1 and M >= 1", cost.Shape())
	}
	if N > o.maxRows {
		return nil, fmt.Errorf("input \"cost\" has N=%d rows; the cuda kernel holds at most %d on %s (transpose the cost so N <= M, or use the cpu backend)", N, o.maxRows, o.be.Device())
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
	var outs cuda.Outputs
	path := outs.Empty(o.be, rt.I32, rt.Shape{B, K, 2})
	pl := outs.Empty(o.be, rt.I32, rt.Shape{B})
	tot := outs.Empty(o.be, rt.F32, rt.Shape{B})
	ok := false
	defer func() {
		if !ok {
			outs.Release()
		}
	}()
	if outs.Err() != nil {
		return nil, outs.Err()
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

func (o *dtwCUDA) launch(sc *scratch, cost cuda.DevicePtr, B, N, M int, dims []int64, path, pl, tot *rt.Tensor) (cuda.DevicePtr, error) {
	tabs, err := uploadAll(sc, cuda.Bytes(dims), zeroStatus(B))
	if err != nil {
		return 0, err
	}
	dimsPtr, status := tabs[0], tabs[1]
	if err := o.check.launch(cost, B, int64(N*M), int64(M), dimsPtr, 2, false, status, int64(N*M)); err != nil {
		return 0, err
	}
	W := int64(N+31) / 32
	bp, err := sc.alloc(int64(B) * int64(N+M-1) * 2 * W * 4)
	if err != nil {
		return 0, err
	}
	k := o.f32
	if o.precision == Int32 {
		k = o.i32
	}
	var ptrs [3]cuda.DevicePtr
	for i, t := range []*rt.Tensor{path, pl, tot} {
		if ptrs[i], err = cuda.Ptr(t); err != nil {
			return 0, err
		}
	}
	return status, k.Launch(dim(B), dim(blockFor(N)), 12*N+dtwScratch,
		cost, N, M, dimsPtr, bp, o.scale, ptrs[0], ptrs[1], ptrs[2])
}
