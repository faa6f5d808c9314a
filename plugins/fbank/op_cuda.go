//go:build cuda

package fbank

import (
	"context"
	"fmt"
	"math"
	"slices"

	"github.com/edgespeech/edge/kernels"
	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/cuda"
)

// The cuda build adds a CUDA implementation to the registered fbank op: its
// constructor runs the kernels of kernels/fbank.cu when the backend is a
// *cuda.Backend and defers to the CPU constructor otherwise. This file's
// init runs after op.go's (files initialise in name order), which registers
// the op.
func init() {
	runtime.RegisterImplementation("fbank", "cuda", cuda.Constructor(newCUDAOp))
}

// Launch geometry of the fbank kernels (kernels/fbank.cu).
const (
	cudaGroups    = 4        // frames a warp transforms at once (8 lanes a frame)
	cudaWarps     = 4        // warps per block for a batch (geometryFor)
	cudaMaxShared = 48 << 10 // bytes of dynamic shared memory without opting in
	statsThreads  = 1024     // block of fbank_stats (its kStatWarps warps)
)

// launchKnobs are the choices of how a batch runs its transform, its
// statistics and its normalisation (knobsFor picks them; benchmarks and
// tests set them directly):
//   - fused: fbank_logmel normalises the tiles itself (its normalisation
//     tiles among its transform tiles, one launch) instead of the
//     fbank_normalize launch; it needs the in-kernel statistics;
//   - statsKernel: Parakeet's per-feature moments by the fbank_stats launch
//     instead of fbank_logmel's last block of each item (which reduces the
//     item's G partials alone: slow when G is large, a long single clip);
//   - oneStage: one stage of rows even where two fit (stagesFor);
//   - lagAll: with fused, every normalisation tile after every transform
//     tile (lag = batch) instead of lagWaves (0: 1) waves of items in
//     flight, plus one;
//   - wide: for n_fft 400 the fbank_logmel_n400_wide kernel: with two
//     stages in the mel_time layout (frames a multiple of 4, no
//     per-feature sums) it writes the rows of two steps together (128
//     bytes a feature instead of 64: whole lines);
//   - rev: with fused, the normalisation tiles after the last transform
//     tile in reverse item order (the items transformed last first: their
//     features are likeliest still in L2);
//   - tabs: the fbank_logmel_n{N}_tabs kernel, which reads the window and
//     the column twiddles from shared memory (tabsBytes more of it).
type launchKnobs struct {
	fused, statsKernel, oneStage, lagAll, wide, rev, tabs bool
	lagWaves                                              int
}

// launchGeom is fbank_logmel's block shape: warps per block (1, 2, 4 or 8) and
// steps, the rounds of 4 frames a warp does; a block owns
// cudaGroups·warps·steps consecutive frames.
type launchGeom struct{ warps, steps int }

func (g launchGeom) frames() int { return cudaGroups * g.warps * g.steps }

// Statistics modes of the kernels (enum Stats in fbank.cu).
const (
	statsNone    = 0
	statsMax     = 1
	statsMoments = 2
)

// cudaOp is the fbank op on a CUDA backend. Its tables (window, twiddles,
// filterbank bands) live on the device from construction; Run takes the pcm
// in device memory and returns device-resident features, copying to the host
// only the per-item error words (8 bytes an item). The per-item words the
// kernels read and write (items) outlive a Run: a stream of batches of one
// geometry uploads nothing more. The threads parameter does not apply; Run
// is for one goroutine at a time (runtime.Op), which items relies on.
type cudaOp struct {
	fe                  *Frontend
	be                  *cuda.Backend
	sms                 int
	logmel, stats, norm *cuda.Kernel
	logmelWide          *cuda.Kernel // fbank_logmel_n400_wide (the wide knob; nil for n_fft 512)
	logmelTabs          *cuda.Kernel // fbank_logmel_n{N}_tabs (the tabs knob)
	window, twiddle     *cuda.Buffer
	colTw               *cuda.Buffer // W_H^(n1·k) at [k·8 + n1] (fbank_frame.cuh's Column)
	bands, weights      *cuda.Buffer
	melFrag, melTiles   *cuda.Buffer // the filterbank for FBANK_MEL_TC builds (cuda_mel.go)

	// sharedW is the number of filterbank weights fbank_logmel copies to
	// shared memory with the bands (0: it reads them from global memory).
	sharedW int
	// sharedLimit is the dynamic shared memory fbank_logmel may use (opted
	// in above 48 KiB when the device allows); fixed, when set, overrides
	// the launch geometry (benchmarks).
	sharedLimit int
	// smemSM is the shared memory of an SM (the per-block opt-in limit plus
	// the 1 KiB the SM keeps per block): how many blocks fit (stagesFor).
	smemSM int
	fixed  launchGeom
	// knobs, when set (benchmarks, tests), replace knobsFor's choice.
	knobs *launchKnobs
	// epoch counts the launches; fbank_logmel's normalisation tiles wait
	// for their item's statistics of this launch (ready[b] == epoch).
	epoch int64

	items itemWords

	statsMode         int
	fixedFloor        float64 // statsMax: NaN (per-item max) or the global floor
	guard, floor, lg2 float64 // y = log2(max(mel + guard, floor)) · lg2
	melAffine         int64   // how fbank_logmel stores y (melAffine)
}

func newCUDAOp(p runtime.Params, b *cuda.Backend) (runtime.Op, error) {
	cfg, err := ConfigFromParams(p)
	if err != nil {
		return nil, err
	}
	fe, err := NewFrontend(cfg)
	if err != nil {
		return nil, err
	}
	if cfg.Normalize == Fixed {
		return nil, fmt.Errorf("normalize=fixed: the cuda kernels do not implement it yet (use the cpu backend)")
	}
	if cfg.NFFT != 400 && cfg.NFFT != 512 {
		return nil, fmt.Errorf("n_fft %d: the cuda kernels support 400 and 512 (use the cpu backend for other sizes)", cfg.NFFT)
	}
	if cudaShared(cfg.NFFT, cfg.NumMels, cudaWarps, true) > cudaMaxShared {
		return nil, fmt.Errorf("num_mels %d: the cuda kernels support at most %d mel filters", cfg.NumMels, cudaMaxMels(cfg.NFFT))
	}
	mod, err := b.KernelModule()
	if err != nil {
		return nil, err
	}
	o := &cudaOp{fe: fe, be: b, sms: b.Multiprocessors()}
	for name, dst := range map[string]**cuda.Kernel{
		fmt.Sprintf("fbank_logmel_n%d", cfg.NFFT): &o.logmel, "fbank_stats": &o.stats, "fbank_normalize": &o.norm,
	} {
		if *dst, err = mod.Kernel(name); err != nil {
			return nil, err
		}
	}
	if cfg.NFFT == 400 {
		if o.logmelWide, err = mod.Kernel("fbank_logmel_n400_wide"); err != nil {
			return nil, err
		}
	}
	if o.logmelTabs, err = mod.Kernel(fmt.Sprintf("fbank_logmel_n%d_tabs", cfg.NFFT)); err != nil {
		return nil, err
	}
	o.statsMode = statsNone
	switch cfg.Normalize {
	case PerUtterance:
		o.statsMode, o.fixedFloor = statsMax, math.NaN()
	case Global:
		o.statsMode, o.fixedFloor = statsMax, cfg.GlobalLogMelMax-clampRange
	case PerFeature:
		o.statsMode = statsMoments
	}
	// Shared memory: opt in above 48 KiB as far as the largest block shape
	// needs and the device allows; the filterbank weights stay in global
	// memory when the default shape would not fit with them.
	_, _, pitch := melBands(&fe.bank)
	o.sharedW = pitch * cfg.NumMels
	o.sharedLimit, o.smemSM = cudaMaxShared, cudaMaxShared+1024
	if lim, err := o.logmel.MaxDynamicShared(); err == nil {
		o.smemSM = lim + 1024
		want := min(lim, o.sharedFor(launchGeom{8, 1}, 2)+o.tabsBytes())
		if want > cudaMaxShared && o.logmel.SetMaxDynamicShared(want) == nil &&
			(o.logmelWide == nil || o.logmelWide.SetMaxDynamicShared(want) == nil) &&
			o.logmelTabs.SetMaxDynamicShared(want) == nil {
			o.sharedLimit = want
		}
	}
	if o.shared(launchGeom{cudaWarps, 1}) > o.sharedLimit {
		o.sharedW = 0
	}
	if err := o.uploadTables(); err != nil {
		_ = o.Close()
		return nil, err
	}
	// The CPU Frontend's log: log10(max(v, 1e-10)) | ln(max(v, c)) | ln(v + 2^-24).
	o.guard, o.floor, o.lg2 = logGuard, logGuard, math.Ln2
	switch {
	case cfg.Normalize == PerUtterance || cfg.Normalize == Global:
		o.guard, o.floor, o.lg2 = 0, log10Floor, math.Log10(2)
	case cfg.LogClampMin > 0:
		o.guard, o.floor = 0, cfg.LogClampMin
	}
	o.melAffine = melAffine(o.lg2, o.statsMode == statsMax)
	return o, nil
}

// cudaShared is fbank_logmel's dynamic shared memory without the
// filterbank: per warp 4 frame buffers of 8 rows of n_fft/16 complex points
// (row pitch padded to odd, fbank_frame.cuh's Frame), the per-feature
// moments (2·n_mels float64) when the op normalises per feature, and
// 4·warps staged rows of at most n_mels+4 floats.
func cudaShared(nFFT, nMels, warps int, moments bool) int {
	c := nFFT / 16
	if c%2 == 0 {
		c++
	}
	s := warps*cudaGroups*8*c*8 + cudaGroups*warps*(nMels+4)*4
	if moments {
		s += 16 * nMels
	}
	return s
}

// shared is fbank_logmel's dynamic shared memory for this op and geometry
// with one stage.
func (o *cudaOp) shared(g launchGeom) int {
	s := cudaShared(o.fe.cfg.NFFT, o.fe.cfg.NumMels, g.warps, o.statsMode == statsMoments)
	if o.sharedW > 0 {
		s += (2*o.fe.cfg.NumMels + o.sharedW) * 4
	}
	return s
}

// sharedFor is shared with 1 or 2 stages (the staged rows double-buffered).
func (o *cudaOp) sharedFor(g launchGeom, stages int) int {
	return o.shared(g) + (stages-1)*cudaGroups*g.warps*(o.fe.cfg.NumMels+4)*4
}

// tabsBytes is the shared memory the _tabs kernels add: the window and
// the column twiddles (8·n_fft bytes) past the filterbank's weights, 8-byte
// aligned, and past the bands' place when the weights are not copied.
func (o *cudaOp) tabsBytes() int {
	b := 8*o.fe.cfg.NFFT + 8
	if o.sharedW == 0 {
		b += 8 * o.fe.cfg.NumMels
	}
	return b
}

// stagesFor picks 2 stages (one block barrier a step instead of two) when
// they fit in the opted-in limit and leave as many blocks an SM as one
// stage does, up to the 16 warps an SM the 128 registers allow; extra is
// shared memory beyond sharedFor (tabsBytes for the _tabs kernels).
func (o *cudaOp) stagesFor(g launchGeom, extra int) int {
	blocks := func(s int) int { return min(16/g.warps, o.smemSM/(s+extra+1024+256)) } // + reserved and static
	if s2 := o.sharedFor(g, 2); s2+extra <= o.sharedLimit && blocks(s2) >= blocks(o.shared(g)) {
		return 2
	}
	return 1
}

// cudaMaxMels is the largest n_mels whose default geometry fits in 48 KiB.
func cudaMaxMels(nFFT int) int {
	return (cudaMaxShared - cudaShared(nFFT, 0, cudaWarps, false)) / (16 + cudaGroups*cudaWarps*4)
}

// uploadTables puts the window (placed in the n_fft buffer), the twiddles
// e^{-2πik/N} and the column twiddles (float64 rounded once) and the sparse
// filterbank on the device.
func (o *cudaOp) uploadTables() error {
	fe, n := o.fe, o.fe.cfg.NFFT
	win := make([]float32, n)
	for j, w := range fe.window {
		win[fe.winOff+j] = float32(w)
	}
	tw := make([]float32, 2*n)
	for k := range n {
		s, c := math.Sincos(-2 * math.Pi * float64(k) / float64(n))
		tw[2*k], tw[2*k+1] = float32(c), float32(s)
	}
	bk := &fe.bank
	bands, w, _ := melBands(bk)
	var err error
	upload := func(dst **cuda.Buffer, src []byte) {
		if err == nil {
			*dst, err = o.be.UploadBuffer(src)
		}
	}
	upload(&o.window, cuda.Bytes(win))
	upload(&o.twiddle, cuda.Bytes(tw))
	h := n / 2
	col := make([]float32, 2*h)
	for k := range h / 8 {
		for n1 := range 8 {
			s, c := math.Sincos(-2 * math.Pi * float64(n1*k) / float64(h))
			col[2*(8*k+n1)], col[2*(8*k+n1)+1] = float32(c), float32(s)
		}
	}
	upload(&o.colTw, cuda.Bytes(col))
	upload(&o.bands, cuda.Bytes(bands))
	upload(&o.weights, cuda.Bytes(w))
	frags, tiles := melTiles(bk)
	upload(&o.melFrag, cuda.Bytes(append(frags, 0, 0, 0, 0)))
	upload(&o.melTiles, cuda.Bytes(tiles))
	return err
}

// itemWords are the per-item device words of the kernels, for up to cap
// items: the item rows {n, real, computed} (3·cap int64), the error words
// (cap, all ones until a kernel finds a NaN/Inf sample), the tickets of the
// in-kernel reductions (cap, 0: fbank_logmel's last block of an item resets
// its own), the ready words (cap: the epoch of the launch whose statistics
// of the item are done) and fbank_logmel's two block counters (0: its last
// block resets them). They are uploaded whole when the batch outgrows them
// or a Run failed or reported a bad sample (stale), and the item rows alone
// when they differ from the last batch's (rows).
type itemWords struct {
	buf   *cuda.Buffer
	cap   int
	rows  []int64
	stale bool
}

// itemPtrs are the device addresses of the parts of itemWords.
type itemPtrs struct{ rows, bad, tickets, ready, counters cuda.DevicePtr }

// prepare makes the words hold items (3 int64 an item) and returns their
// device addresses.
func (w *itemWords) prepare(be *cuda.Backend, items []int64) (itemPtrs, error) {
	batch := len(items) / 3
	if w.buf == nil || batch > w.cap || w.stale {
		if w.buf != nil {
			_ = w.buf.Free()
			w.buf, w.rows = nil, nil
		}
		c := max(batch, w.cap)
		up := make([]int64, 6*c+2)
		copy(up, items)
		for b := range c {
			up[3*c+b] = -1
		}
		buf, err := be.Malloc(int64(8 * len(up)))
		if err != nil {
			return itemPtrs{}, err
		}
		if err := be.HostToDevice(buf.Ptr(), cuda.Bytes(up)); err != nil {
			_ = buf.Free()
			return itemPtrs{}, err
		}
		w.buf, w.cap, w.stale = buf, c, false
		w.rows = append(w.rows[:0], items...)
	} else if !slices.Equal(w.rows, items) {
		if err := be.HostToDevice(w.buf.Ptr(), cuda.Bytes(items)); err != nil {
			w.stale = true
			return itemPtrs{}, err
		}
		w.rows = append(w.rows[:0], items...)
	}
	at := func(words int) cuda.DevicePtr { return w.buf.Ptr() + cuda.DevicePtr(8*words) }
	return itemPtrs{at(0), at(3 * w.cap), at(4 * w.cap), at(5 * w.cap), at(6 * w.cap)}, nil
}

// Close returns the op's device tables to the backend's pool.
func (o *cudaOp) Close() error {
	for _, b := range []*cuda.Buffer{o.window, o.twiddle, o.colTw, o.bands, o.weights, o.melFrag, o.melTiles, o.items.buf} {
		if b != nil {
			_ = b.Free()
		}
	}
	return nil
}

// Run computes the features of pcm (device memory, [N] or [B, N]) with the
// optional host lengths. The features stay on the device; lengths are host.
// A clip that is too short, or holds a NaN/Inf sample in its first
// lengths[b] samples, gives the CPU op's *ClipError.
func (o *cudaOp) Run(ctx context.Context, in runtime.Tensors) (runtime.Tensors, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	pcm := in["pcm"]
	batch, n := 1, pcm.Shape()[0]
	if pcm.Rank() == 2 {
		batch, n = pcm.Shape()[0], pcm.Shape()[1]
	}
	if batch == 0 {
		return nil, fmt.Errorf("input \"pcm\" has shape %v, want at least one item", pcm.Shape())
	}
	pcmPtr, err := cuda.Ptr(pcm)
	if err != nil {
		return nil, fmt.Errorf("input \"pcm\": %w", err)
	}
	lens := make([]int, batch)
	for b := range lens {
		lens[b] = n
	}
	if lt := in["lengths"]; lt != nil {
		if lt.Shape()[0] != batch {
			return nil, fmt.Errorf("input \"lengths\" has shape %v, want [%d] (one per pcm item)", lt.Shape(), batch)
		}
		for b, l := range lt.I64() {
			if l < 0 || l > int64(n) {
				return nil, fmt.Errorf("input \"lengths\"[%d] = %d, want 0..%d (the pcm row length)", b, l, n)
			}
			lens[b] = int(l)
		}
	}
	items, lengths, shape, frames, err := o.plan(lens)
	if err != nil {
		return nil, err
	}
	feats, err := o.be.Empty(runtime.F32, shape)
	if err != nil {
		return nil, err
	}
	if err := o.launch(pcmPtr, int64(n), items, feats, frames); err != nil {
		_ = feats.Buffer().Free()
		return nil, err
	}
	lt, err := runtime.FromSlice(runtime.I64, runtime.Shape{batch}, lengths)
	if err != nil {
		_ = feats.Buffer().Free()
		return nil, err
	}
	return runtime.Tensors{"features": feats, "lengths": lt}, nil
}

// plan computes each clip's geometry (CPU rules) from its sample count: the
// kernels' item rows {n, real, computed}, the lengths output, the
// features' shape and its frame count.
func (o *cudaOp) plan(lens []int) (items, lengths []int64, shape runtime.Shape, frames int, err error) {
	c := &o.fe.cfg
	items = make([]int64, 3*len(lens))
	lengths = make([]int64, len(lens))
	for b, l := range lens {
		g, err := c.geometry(l)
		if err != nil {
			return nil, nil, nil, 0, &ClipError{b, err}
		}
		items[3*b], items[3*b+1], items[3*b+2] = int64(g.n), int64(g.real), int64(g.computed)
		lengths[b] = int64(g.valid)
		frames = max(frames, g.emit)
	}
	nm := c.NumMels
	if int64(nm)*int64(frames) > math.MaxInt32 {
		return nil, nil, nil, 0, fmt.Errorf("input \"pcm\" gives %d frames x %d mels per item, more than the cuda kernels index (2^31)", frames, nm)
	}
	shape = runtime.Shape{len(lens), nm, frames}
	if c.Layout == TimeMel {
		shape = runtime.Shape{len(lens), frames, nm}
	}
	return items, lengths, shape, frames, nil
}

// launch queues the kernels for one batch, then checks the samples: the
// only synchronising step, a copy of one 8-byte error word per item.
func (o *cudaOp) launch(pcm cuda.DevicePtr, stride int64, items []int64, feats *runtime.Tensor, frames int) error {
	batch := len(items) / 3
	sc := o.be.NewScratch()
	defer sc.Free()
	bad, err := o.enqueue(pcm, stride, items, feats, frames, sc)
	if err != nil {
		o.items.stale = true
		return err
	}
	badIdx := make([]uint64, batch)
	if err := o.be.DeviceToHost(cuda.Bytes(badIdx), bad); err != nil {
		o.items.stale = true
		return err
	}
	for b, i := range badIdx {
		if i == math.MaxUint64 {
			continue
		}
		o.items.stale = true // the error words are reset by the next Run
		v := make([]float32, 1)
		if err := o.be.DeviceToHost(cuda.Bytes(v), pcm+cuda.DevicePtr(4*(int64(b)*stride+int64(i)))); err != nil {
			return err
		}
		return &ClipError{b, fmt.Errorf("sample %d is %v, want finite samples", i, v[0])}
	}
	return nil
}

// enqueue queues the geometry upload and the kernels without waiting. It
// returns the device address of the per-item error words (the smallest index
// of a non-finite sample, all ones when there is none). Its scratch buffers
// come from sc, for the caller to free (in stream order, so right after
// enqueue is fine).
//
// The launches (knobsFor): fbank_logmel over G = ceil(frames / tile) tiles
// an item, whose last block of each item reduces the item's statistics
// (Whisper: the floor, max - 8; Parakeet: the per-feature mean and
// 1/(std + eps)), or fbank_stats does (Parakeet, G > 64); then
// fbank_normalize, one block a tile (Whisper: only the tiles with a value
// under the floor do work). The fused knob moves the normalisation into
// fbank_logmel's own launch.
func (o *cudaOp) enqueue(pcm cuda.DevicePtr, stride int64, items []int64, feats *runtime.Tensor, frames int, sc *cuda.Scratch) (cuda.DevicePtr, error) {
	c, be := &o.fe.cfg, o.be
	batch := len(items) / 3
	out, err := cuda.Ptr(feats)
	if err != nil {
		return 0, err
	}
	geom := o.geometryFor(batch, frames)
	groups := ceilDiv(frames, geom.frames())
	ptrs, err := o.items.prepare(be, items)
	if err != nil {
		return 0, err
	}
	itemsBuf, bad, tickets := ptrs.rows, ptrs.bad, ptrs.tickets
	// The partials of fbank_logmel and the reduced statistics (result).
	var partialBytes, resultBytes int
	switch o.statsMode {
	case statsMax:
		partialBytes, resultBytes = 8*batch*groups, 4*batch // (max, min) a tile; the floor an item
	case statsMoments:
		partialBytes, resultBytes = 16*batch*groups*c.NumMels, 16*batch*c.NumMels // (Σy, Σy²); (mean, inv)
	}
	partial, err := sc.Alloc(int64(partialBytes + resultBytes))
	if err != nil {
		return 0, err
	}
	result := partial.Ptr() + cuda.DevicePtr(partialBytes)
	kn := o.knobsFor(batch, groups)
	reduce := (o.statsMode == statsMax && math.IsNaN(o.fixedFloor)) || (o.statsMode == statsMoments && !kn.statsKernel)
	if !reduce {
		tickets = 0
	}
	fused, gridY := 0, batch // fused: G·B transform tiles and G·B normalisation tiles
	if reduce && kn.fused && 2*batch <= math.MaxUint16 {
		fused, gridY = 1, 2*batch
		if kn.rev {
			fused = 2
		}
	}
	// The normalisation tiles of item b follow the transform tiles of item
	// b + lag: about the items in flight (4 blocks an SM) times lagWaves,
	// plus one; all after the transform tiles with lagAll.
	lag := max(1, kn.lagWaves)*ceilDiv(4*o.sms, groups) + 1
	if kn.lagAll {
		lag = batch
	}
	o.epoch++
	layout := int64(0)
	if c.Layout == TimeMel {
		layout = 1
	}
	logmel, extra := o.logmel, 0
	switch {
	case kn.tabs && o.shared(geom)+o.tabsBytes() <= o.sharedLimit:
		logmel, extra = o.logmelTabs, o.tabsBytes()
	case kn.wide && o.logmelWide != nil:
		logmel = o.logmelWide
	}
	stages := o.stagesFor(geom, extra)
	if kn.oneStage {
		stages = 1
	}
	block := cuda.Dim3{X: 32 * geom.warps, Y: 1, Z: 1}
	err = logmel.Launch(cuda.Dim3{X: groups, Y: gridY, Z: 1}, block, o.sharedFor(geom, stages)+extra, &kernels.FbankLogmelParams{
		Pcm: uint64(pcm), PcmStride: stride, Items: uint64(itemsBuf), Window: addr(o.window), TwN: addr(o.twiddle),
		ColTw: addr(o.colTw), Bands: addr(o.bands), Weights: addr(o.weights), SharedW: int64(o.sharedW),
		NMels: int64(c.NumMels), Frames: int64(frames), Hop: int64(c.HopLength), Pad: int64(o.fe.pad),
		Reflect: int64(b2i(c.PadMode == PadReflect)), Preemph: c.PreEmphasis, Guard: o.guard, MelFloor: o.floor,
		Scale: o.lg2, Layout: layout, Steps: int64(geom.steps), Out: uint64(out), Partial: uint64(partial.Ptr()),
		Stats: int64(o.statsMode), Bad: uint64(bad), MelFrag: addr(o.melFrag), MelTiles: addr(o.melTiles),
		Tickets: uint64(tickets), Clamp: clampRange, Eps: stdEpsilon, Result: uint64(result), Fused: int64(fused),
		Counters: uint64(ptrs.counters), Ready: uint64(ptrs.ready), Epoch: o.epoch, Tile: int64(geom.frames()),
		FixedFloor: o.fixedFloor, Lag: int64(lag), Stages: int64(stages), MelAffine: o.melAffine,
	})
	if err != nil || o.statsMode == statsNone || fused != 0 {
		return bad, err
	}
	normShared := 0
	if o.statsMode == statsMoments {
		normShared = 12 * c.NumMels
		if !reduce {
			err = o.stats.Launch(cuda.Dim3{X: ceilDiv(c.NumMels, 32), Y: batch, Z: 1}, cuda.Dim3{X: statsThreads, Y: 1, Z: 1}, 0,
				&kernels.FbankStatsParams{Items: uint64(itemsBuf), Partial: uint64(partial.Ptr()), Groups: int64(groups),
					NMels: int64(c.NumMels), Eps: stdEpsilon, Moments: uint64(result)})
			if err != nil {
				return 0, err
			}
		}
	}
	err = o.norm.Launch(cuda.Dim3{X: groups, Y: batch, Z: 1}, cuda.Dim3{X: 256, Y: 1, Z: 1}, normShared, &kernels.FbankNormalizeParams{
		Out: uint64(out), Items: uint64(itemsBuf), NMels: int64(c.NumMels), Frames: int64(frames), Layout: layout,
		Stats: int64(o.statsMode), Tile: int64(geom.frames()), Partial: uint64(partial.Ptr()), FixedFloor: o.fixedFloor,
		Result: uint64(result),
	})
	if err != nil {
		return 0, err
	}
	return bad, nil
}

// knobsFor picks the launches for a batch of G tiles an item, from the
// measurements on the H200 (docs/bench/fbank_gpu.md, session 17; 64 x 30 s,
// device us): on a grid of two waves of blocks or more, the normalisation
// runs in fbank_logmel's launch with its tiles after every transform tile
// (fused, lagAll): Whisper's clamp (statsMax) with the rows of two steps
// written at once (wide: 234.6 instead of 268.1 with the separate
// fbank_normalize; its tiles two or three waves of items behind the
// transforms 242.7-252.6), Parakeet's (statsMoments) with its tables in
// shared memory (tabs: 305.4 instead of 310.4 with the separate launch,
// 330.8 without tabs). Else the separate launch, and the fbank_stats launch for Parakeet
// when G > 64 (one 30 s clip: 188 tiles, whose reduction by the item's
// last block was slower).
func (o *cudaOp) knobsFor(batch, groups int) launchKnobs {
	if o.knobs != nil {
		return *o.knobs
	}
	kn := launchKnobs{statsKernel: groups > 64}
	if batch*groups >= 8*o.sms {
		switch o.statsMode {
		case statsMax:
			kn.fused, kn.lagAll, kn.wide = true, true, true
		case statsMoments:
			kn.fused, kn.lagAll, kn.tabs = true, true, true
		}
	}
	return kn
}

// geometryFor picks fbank_logmel's block shape: 4 warps, and 8, 4 or 2 steps
// when that still puts at least 4 blocks per SM in the grid (fewer, larger
// partial reductions for a batch), else 1 (a single clip spreads over the
// GPU). Blocks of 1 or 2 warps measured slower for a single clip too
// (BenchmarkCUDAFbankGeometry, docs/bench/fbank_gpu.md).
func (o *cudaOp) geometryFor(batch, frames int) launchGeom {
	if o.fixed.warps > 0 && o.shared(o.fixed) <= o.sharedLimit {
		return o.fixed
	}
	for _, steps := range []int{8, 4, 2} {
		if g := (launchGeom{cudaWarps, steps}); batch*ceilDiv(frames, g.frames()) >= 4*o.sms {
			return g
		}
	}
	return launchGeom{cudaWarps, 1}
}

// addr is the device address of a table buffer (0 for none).
func addr(b *cuda.Buffer) uint64 {
	if b == nil {
		return 0
	}
	return uint64(b.Ptr())
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
