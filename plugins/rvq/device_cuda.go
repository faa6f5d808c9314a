//go:build cuda

package rvq

import (
	"fmt"
	"math"
	"strings"
	"sync"

	kern "github.com/edgespeech/edge/kernels"
	"github.com/edgespeech/edge/runtime/cuda"
)

// Device codebooks and the kernels of kernels/rvq.cu that encode and decode
// with them.

const (
	// smallRows is the most valid frames for which Encode uses a small-batch
	// path instead of the fused kernel: rvq_stream (one launch, a cluster of
	// streamSplit CTAs per frame) on GPUs with clusters, else the
	// split-codebook rvq_small_score/rvq_small_update pair per stage.
	smallRows = 64
	// streamSplit is RVQ_STREAM_SPLIT of kernels/rvq.cu.
	streamSplit = 8
	// padScore is ||C_e||^2/2 of a padding row: finite (the packed running
	// minimum of the kernel needs finite scores) and above every real score
	// (|score| <= 2^99 + 2^105 under MaxSquaredNorm and MaxStages).
	padScore = 0x1p120
)

// cudaKernels is the loaded kernel set of a backend.
type cudaKernels struct {
	fused                          map[string]*cuda.Kernel
	maxShared                      map[string]int // dynamic shared memory a block of each fused kernel may use
	hopper                         bool           // compute capability 9.x: the wg (wgmma) variants are preferred
	clusters                       bool           // compute capability >= 9.0: rvq_stream can run
	stream                         *cuda.Kernel
	small, update, pad, check, dec *cuda.Kernel
	f32                            *cuda.Kernel // rvq_encode_f32 (nil in a fatbin built before it)
}

func loadKernels(b *cuda.Backend) (*cudaKernels, error) {
	mod, err := b.KernelModule()
	if err != nil {
		return nil, err
	}
	k := &cudaKernels{fused: map[string]*cuda.Kernel{}, maxShared: map[string]int{}}
	for _, d := range b.Devices() {
		var sm int
		if strings.HasPrefix(d.Name, b.Device()+" ") {
			if _, err := fmt.Sscanf(d.Detail, "sm_%d", &sm); err == nil {
				k.hopper, k.clusters = sm/10 == 9, sm >= 90
			}
		}
	}
	for _, v := range variants {
		f, err := mod.Kernel(v.name)
		if err != nil {
			// A fatbin built before a variant existed lacks it: Encode
			// chooses among the others, and forcing it is an error.
			continue
		}
		limit, err := f.MaxDynamicShared()
		if err != nil {
			return nil, err
		}
		if err := f.SetMaxDynamicShared(limit); err != nil {
			return nil, err
		}
		k.fused[v.name], k.maxShared[v.name] = f, limit
	}
	for _, p := range []struct {
		dst  **cuda.Kernel
		name string
	}{{&k.pad, "rvq_pad_rows"}, {&k.check, "rvq_check"}, {&k.dec, "rvq_decode"}} {
		if *p.dst, err = mod.Kernel(p.name); err != nil {
			return nil, err
		}
	}
	// The small-batch kernels are optional: a fatbin without them makes
	// Encode use the fused kernel for every batch.
	k.small, _ = mod.Kernel("rvq_small_score")
	k.update, _ = mod.Kernel("rvq_small_update")
	k.stream, _ = mod.Kernel("rvq_stream")
	k.f32, _ = mod.Kernel("rvq_encode_f32")
	return k, nil
}

// DeviceCodebooks is a Codebooks uploaded to a CUDA backend in the layout of
// kernels/rvq.cu: bf16 rows padded to Dp = roundup(D, 64) values, every
// stage padded to a multiple of 256 rows, ||C_e||^2/2 per row (padScore on
// padding) and per-stage (offset, K_q, max ||C_e||). fp32 codebooks
// (Codebooks.F32) also get their fp32 rows in the same layout (words32) and
// run rvq_encode_f32, exact; the bf16 kernels never see them. Free releases
// it.
type DeviceCodebooks struct {
	be        *cuda.Backend
	c         *Codebooks
	k         *cudaKernels
	dp        int
	words, hn *cuda.Buffer
	meta      *cuda.Buffer
	// words32 holds the fp32 codewords (fp32 codebooks only), laid out as
	// words.
	words32 *cuda.Buffer
	// tiles holds words again as the kernel's shared-memory image: 128-row
	// by 64-value blocks (row-block major, then k-chunk), 16-byte chunks
	// XOR-swizzled by row & 7, for the Hopper bulk copies. fragTiles (Hopper,
	// Dp = fragDp only) is the same image of the rows permuted by fragDim,
	// for the f kernels.
	tiles, fragTiles *cuda.Buffer
	// offsets holds each stage's first row in words.
	offsets []int
	// forcePath selects "fused" or "small" regardless of the batch (tests);
	// variant forces a fused variant by name.
	forcePath, variant string
	// stats counts the rows re-scored exactly by the near-tie guard, when
	// non-nil (tests).
	stats *cuda.Buffer

	// statusMu guards spare: 8-byte status words that hold all ones (a
	// check only lowers its word when it flags a row), so that Encode
	// reuses one without setting it first.
	statusMu sync.Mutex
	spare    []*cuda.Buffer
}

// takeStatus returns a status word of all ones: a spare one, or a new one
// set on the stream (ordered before the work that follows).
func (dc *DeviceCodebooks) takeStatus() (*cuda.Buffer, error) {
	dc.statusMu.Lock()
	if n := len(dc.spare); n > 0 {
		m := dc.spare[n-1]
		dc.spare = dc.spare[:n-1]
		dc.statusMu.Unlock()
		return m, nil
	}
	dc.statusMu.Unlock()
	m, err := dc.be.Malloc(8)
	if err != nil {
		return nil, err
	}
	if err := dc.be.Memset(m.Ptr(), 0xFF, 8); err != nil {
		_ = m.Free()
		return nil, err
	}
	return m, nil
}

// putStatus keeps m for the next Encode when it still holds all ones (read
// back after the work), else frees it.
func (dc *DeviceCodebooks) putStatus(m *cuda.Buffer, allOnes bool) {
	if !allOnes {
		_ = m.Free()
		return
	}
	dc.statusMu.Lock()
	dc.spare = append(dc.spare, m)
	dc.statusMu.Unlock()
}

// NewDeviceCodebooks uploads c (with its split) to be.
func NewDeviceCodebooks(be *cuda.Backend, c *Codebooks) (*DeviceCodebooks, error) {
	k, err := loadKernels(be)
	if err != nil {
		return nil, err
	}
	d := c.dim
	dp := (d + dimAlign - 1) / dimAlign * dimAlign
	rows := 0
	for _, st := range c.stages {
		rows += (st.k + rowAlign - 1) / rowAlign * rowAlign
	}
	words := make([]uint16, rows*dp)
	var words32 []float32
	if c.f32 {
		words32 = make([]float32, rows*dp)
	}
	hn := make([]float32, rows)
	meta := make([]int32, 4*len(c.stages))
	off := 0
	for q, st := range c.stages {
		kp := (st.k + rowAlign - 1) / rowAlign * rowAlign
		var cmax2 float32
		for e := 0; e < kp; e++ {
			hn[off+e] = padScore
			if e < st.k {
				copy(words[(off+e)*dp:(off+e)*dp+d], st.codeword(d, e))
				if words32 != nil {
					copy(words32[(off+e)*dp:(off+e)*dp+d], st.rows[e*d:(e+1)*d])
				}
				hn[off+e] = st.halfNorm[e]
				cmax2 = max(cmax2, 2*st.halfNorm[e])
			}
		}
		// max ||C_e||, rounded up so that the guard's bound is not lowered.
		cmax := math.Nextafter32(float32(math.Sqrt(float64(cmax2))), float32(math.Inf(1)))
		meta[4*q], meta[4*q+1], meta[4*q+2] = int32(off), int32(st.k), int32(math.Float32bits(cmax))
		off += kp
	}
	dc := &DeviceCodebooks{be: be, c: c, k: k, dp: dp, offsets: make([]int, len(c.stages))}
	for q := range dc.offsets {
		dc.offsets[q] = int(meta[4*q])
	}
	var ok bool
	defer func() {
		if !ok {
			dc.Free()
		}
	}()
	if dc.words, err = be.UploadBuffer(u16Bytes(words)); err != nil {
		return nil, err
	}
	if dc.hn, err = be.UploadBuffer(cuda.Bytes(hn)); err != nil {
		return nil, err
	}
	if dc.meta, err = be.UploadBuffer(cuda.Bytes(meta)); err != nil {
		return nil, err
	}
	if c.f32 {
		if k.f32 == nil {
			return nil, fmt.Errorf("rvq: fp32 codebooks need rvq_encode_f32, which the loaded fatbin lacks (rebuild it with kernels/build.sh)")
		}
		if dc.words32, err = be.UploadBuffer(cuda.Bytes(words32)); err != nil {
			return nil, err
		}
		ok = true
		return dc, nil // the tiles are the bf16 kernels' only
	}
	if dc.tiles, err = be.UploadBuffer(u16Bytes(swizzleTiles(words, dp))); err != nil {
		return nil, err
	}
	if k.hopper && dp == fragDp {
		if dc.fragTiles, err = be.UploadBuffer(u16Bytes(swizzleTiles(permuteRows(words, dp, fragDim), dp))); err != nil {
			return nil, err
		}
	}
	ok = true
	return dc, nil
}

// Codebooks is the host view the device codebooks were made from.
func (dc *DeviceCodebooks) Codebooks() *Codebooks { return dc.c }

// Free releases the device memory; freeing twice is a no-op.
func (dc *DeviceCodebooks) Free() {
	for _, b := range []*cuda.Buffer{dc.words, dc.hn, dc.meta, dc.tiles, dc.fragTiles, dc.words32} {
		if b != nil {
			_ = b.Free()
		}
	}
	dc.statusMu.Lock()
	for _, m := range dc.spare {
		_ = m.Free()
	}
	dc.spare = nil
	dc.statusMu.Unlock()
}

// Encode quantises x (device f32 [B, T, D], row-major, D = Dim()) into codes
// (device i32 [B, T, Q]) and quantized (device f32 [B, T, D]) with the
// contract of Codebooks.Encode: identical codes, bit-identical quantized.
// bt.Lengths (host) marks the valid frames. The input check (finite x,
// squared norms at most MaxSquaredNorm) runs on the device; its status is
// read back at the end, so Encode returns after the work is done. fp32
// codebooks take rvq_encode_f32 for every batch size (forcePath and the
// variants are the bf16 kernels' and do not apply).
func (dc *DeviceCodebooks) Encode(x cuda.DevicePtr, bt Batch, codes, quantized cuda.DevicePtr) error {
	if err := bt.check(); err != nil {
		return err
	}
	be, c := dc.be, dc.c
	d, rows := c.dim, bt.B*bt.T
	s := be.NewScratch()
	defer s.Free()
	lengths, valid, err := uploadLengths(s, bt)
	if err != nil {
		return err
	}
	status, err := dc.takeStatus()
	if err != nil {
		return err
	}
	st := []uint64{0}
	defer func() { dc.putStatus(status, st[0] == math.MaxUint64) }()
	res, err := s.Alloc(int64(scratchRows(rows)) * int64(dc.dp) * 4)
	if err != nil {
		return err
	}
	var acc cuda.DevicePtr
	if c.split > 0 {
		a, err := s.Alloc(int64(rows) * int64(dc.dp) * 4)
		if err != nil {
			return err
		}
		acc = a.Ptr()
	}
	var stats cuda.DevicePtr
	if dc.stats != nil {
		stats = dc.stats.Ptr()
	}
	path := dc.forcePath
	if dc.words32 != nil {
		path = "f32"
	}
	if path == "" {
		path = "fused"
		if valid <= smallRows {
			switch {
			case dc.k.clusters && dc.k.stream != nil:
				path = "stream"
			case dc.k.small != nil && dc.k.update != nil:
				path = "small"
			}
		}
	}
	if (path == "small" && (dc.k.small == nil || dc.k.update == nil)) || (path == "stream" && dc.k.stream == nil) {
		return fmt.Errorf("rvq: the %s path's kernels are not in the loaded fatbin", path)
	}
	if path != "fused" { // the fused kernel checks x itself
		if err := dc.k.check.Launch(cuda.Dim3{X: (rows + 7) / 8, Y: 1, Z: 1}, cuda.Dim3{X: 256, Y: 1, Z: 1}, 0, &kern.RvqCheckParams{
			X: uint64(x), Lengths: uint64(lengths), Rows: int64(rows), T: int64(bt.T), D: int64(d),
			Limit: float64(MaxSquaredNorm), Status: uint64(status.Ptr()),
		}); err != nil {
			return err
		}
	}
	switch path {
	case "small":
		err = dc.encodeSmall(s, x, bt, lengths, res.Ptr(), acc, codes, quantized)
	case "f32":
		err = dc.encodeF32(s, x, bt, lengths, res.Ptr(), codes, quantized)
	case "stream":
		if !dc.k.clusters {
			return fmt.Errorf("rvq: the stream path needs thread block clusters (compute capability 9.0 or newer)")
		}
		err = dc.encodeStream(s, x, bt, lengths, codes, quantized)
	default:
		var v variant
		var k *cuda.Kernel
		if v, k, err = dc.pick(); err == nil {
			err = dc.launchFused(v, k, x, bt, lengths, res.Ptr(), codes, quantized, stats, status.Ptr())
		}
	}
	if err != nil {
		return err
	}
	if err := be.DeviceToHost(cuda.Bytes(st), status.Ptr()); err != nil {
		return err
	}
	if st[0] != math.MaxUint64 {
		return dc.inputError(x, bt)
	}
	return nil
}

// validRows lists the row index b*T+t of every valid frame.
func validRows(bt Batch) []int32 {
	var list []int32
	for b := 0; b < bt.B; b++ {
		for t := 0; t < bt.valid(b); t++ {
			list = append(list, int32(b*bt.T+t))
		}
	}
	return list
}

// rowList queues rvq_pad_rows for the batch's padding and uploads the list
// of its valid frames (validRows) into s; n is their number (nothing is
// uploaded when it is 0).
func (dc *DeviceCodebooks) rowList(s *cuda.Scratch, bt Batch, lengths, codes, quantized cuda.DevicePtr) (list *cuda.Buffer, n int, err error) {
	if err := dc.padRows(bt, lengths, codes, quantized); err != nil {
		return nil, 0, err
	}
	rows := validRows(bt)
	if len(rows) == 0 {
		return nil, 0, nil
	}
	list, err = s.Upload(cuda.Bytes(rows))
	return list, len(rows), err
}

// encodeStream queues rvq_stream: one launch, a cluster of CTAs per valid
// frame splitting the codebook, exact scores.
func (dc *DeviceCodebooks) encodeStream(s *cuda.Scratch, x cuda.DevicePtr, bt Batch, lengths, codes, quantized cuda.DevicePtr) error {
	c := dc.c
	rowList, n, err := dc.rowList(s, bt, lengths, codes, quantized)
	if err != nil || n == 0 {
		return err
	}
	return dc.k.stream.Launch(cuda.Dim3{X: streamSplit * n, Y: 1, Z: 1}, cuda.Dim3{X: 256, Y: 1, Z: 1}, 0, &kern.RvqStreamParams{
		X: uint64(x), RowList: uint64(rowList.Ptr()), D: int64(c.dim), Dp: int64(dc.dp), Q: int64(len(c.stages)),
		Split: int64(c.split), Words: uint64(dc.words.Ptr()), Hn: uint64(dc.hn.Ptr()), Meta: uint64(dc.meta.Ptr()),
		Codes: uint64(codes), Out: uint64(quantized),
	})
}

// f32Rows is rvq_encode_f32's rows a CTA (kernels/rvq.cu's rvqf::kBM).
const f32Rows = 64

// encodeF32 queues rvq_encode_f32 over the valid frames (exact fp32
// scores, see kernels/rvq.cu) after rvq_pad_rows for the padding; res holds
// at least one row of Dp floats a valid frame.
func (dc *DeviceCodebooks) encodeF32(s *cuda.Scratch, x cuda.DevicePtr, bt Batch, lengths, res, codes, quantized cuda.DevicePtr) error {
	c := dc.c
	rowList, n, err := dc.rowList(s, bt, lengths, codes, quantized)
	if err != nil || n == 0 {
		return err
	}
	return dc.k.f32.Launch(cuda.Dim3{X: (n + f32Rows - 1) / f32Rows, Y: 1, Z: 1}, cuda.Dim3{X: 256, Y: 1, Z: 1}, 0, &kern.RvqEncodeF32Params{
		X: uint64(x), RowList: uint64(rowList.Ptr()), N: int64(n), D: int64(c.dim), Dp: int64(dc.dp),
		Q: int64(len(c.stages)), Split: int64(c.split), Words32: uint64(dc.words32.Ptr()), Hn: uint64(dc.hn.Ptr()),
		Meta: uint64(dc.meta.Ptr()), Codes: uint64(codes), Out: uint64(quantized), Res: uint64(res),
	})
}

// padRows queues rvq_pad_rows: code -1 and quantized 0 on the padding rows.
func (dc *DeviceCodebooks) padRows(bt Batch, lengths, codes, quantized cuda.DevicePtr) error {
	rows := bt.B * bt.T
	return dc.k.pad.Launch(cuda.Dim3{X: (rows + 7) / 8, Y: 1, Z: 1}, cuda.Dim3{X: 256, Y: 1, Z: 1}, 0, &kern.RvqPadRowsParams{
		Lengths: uint64(lengths), Rows: int64(rows), T: int64(bt.T), D: int64(dc.c.dim), Q: int64(len(dc.c.stages)),
		Codes: uint64(codes), Out: uint64(quantized),
	})
}

// scratchRows is the fp32 residual scratch's rows for rows frames, rounded up
// to 256: every row of the last CTA of the wa kernels (128 rows), whose
// update reads the rows that are not valid as well (zeros).
func scratchRows(rows int) int { return (rows + 255) / 256 * 256 }

// launchFused queues the fused encoder (res: scratchRows(rows) x dp floats);
// with status non-zero it also checks x as rvq_check does (the lowest
// flagged row into *status).
func (dc *DeviceCodebooks) launchFused(v variant, k *cuda.Kernel, x cuda.DevicePtr, bt Batch, lengths, res, codes, quantized, stats, status cuda.DevicePtr) error {
	c := dc.c
	rows := bt.B * bt.T
	// The f kernels take the tiles with permuted dimensions where those
	// exist (on Hopper, where fits allows f at Dp = fragDp only, and the
	// build is kernels/rvq.cu's kFrag); elsewhere f's build is the plain
	// one, which reads the tiles in the natural order.
	tiles := dc.tiles
	if v.update == frag && dc.fragTiles != nil {
		tiles = dc.fragTiles
	}
	return k.Launch(cuda.Dim3{X: v.grid(rows), Y: 1, Z: 1}, cuda.Dim3{X: v.threads(), Y: 1, Z: 1}, v.shared(dc.dp, dc.k.hopper), &kern.RvqEncodeParams{
		X: uint64(x), Lengths: uint64(lengths), Rows: int64(rows), T: int64(bt.T), D: int64(c.dim), Dp: int64(dc.dp),
		Q: int64(len(c.stages)), Split: int64(c.split), Words: uint64(dc.words.Ptr()), Tiles: uint64(tiles.Ptr()),
		Hn: uint64(dc.hn.Ptr()), Meta: uint64(dc.meta.Ptr()), Codes: uint64(codes), Out: uint64(quantized),
		Res: uint64(res), Stats: uint64(stats), Limit: float64(MaxSquaredNorm), Status: uint64(status),
	})
}

// encodeSmall queues the small-batch path: per stage, every entry of the
// codebook scored exactly by its own thread (CTAs over entry chunks x valid
// rows), the per-row (score, index) minimum merged with atomicMin, then the
// update.
func (dc *DeviceCodebooks) encodeSmall(s *cuda.Scratch, x cuda.DevicePtr, bt Batch, lengths, res, acc, codes, quantized cuda.DevicePtr) error {
	c := dc.c
	rowList, n, err := dc.rowList(s, bt, lengths, codes, quantized)
	if err != nil || n == 0 {
		return err
	}
	keys, err := s.Alloc(int64(8 * n))
	if err != nil {
		return err
	}
	if err := dc.be.Memset(keys.Ptr(), 0xFF, int64(8*n)); err != nil {
		return err
	}
	for ci, ch := range c.chains() {
		for q := ch[0]; q < ch[1]; q++ {
			off, k := dc.offsets[q], c.stages[q].k
			first := b2i(q == ch[0])
			if err := dc.k.small.Launch(cuda.Dim3{X: (k + 255) / 256, Y: n, Z: 1}, cuda.Dim3{X: 256, Y: 1, Z: 1}, 0, &kern.RvqSmallScoreParams{
				X: uint64(x), Res: uint64(res), First: int64(first), RowList: uint64(rowList.Ptr()), D: int64(c.dim),
				Dp: int64(dc.dp), Words: uint64(dc.words.Ptr()), Hn: uint64(dc.hn.Ptr()), Off: int64(off), K: int64(k),
				Keys: uint64(keys.Ptr()),
			}); err != nil {
				return err
			}
			if err := dc.k.update.Launch(cuda.Dim3{X: n, Y: 1, Z: 1}, cuda.Dim3{X: 128, Y: 1, Z: 1}, 0, &kern.RvqSmallUpdateParams{
				X: uint64(x), Res: uint64(res), Acc: uint64(acc), Out: uint64(quantized), Codes: uint64(codes),
				RowList: uint64(rowList.Ptr()), D: int64(c.dim), Dp: int64(dc.dp), Q: int64(len(c.stages)),
				Stage: int64(q), First: int64(first), SecondChain: int64(ci), Last: int64(b2i(q == ch[1]-1)),
				Words: uint64(dc.words.Ptr()), Off: int64(off), Keys: uint64(keys.Ptr()),
			}); err != nil {
				return err
			}
		}
	}
	return nil
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// inputError downloads x and returns the CPU op's error for its first bad
// valid frame (the device check flags candidates; the CPU rule decides).
func (dc *DeviceCodebooks) inputError(x cuda.DevicePtr, bt Batch) error {
	d := dc.c.dim
	host := make([]float32, bt.B*bt.T*d)
	if err := dc.be.DeviceToHost(cuda.Bytes(host), x); err != nil {
		return err
	}
	for _, bl := range bt.blocks(blockFrames) {
		row0 := bl.b*bt.T + bl.t0
		if err := checkFrames(host[row0*d:(row0+bl.t1-bl.t0)*d], d, bl); err != nil {
			return err
		}
	}
	return nil
}

// Decode writes quantized (device f32 [B, T, D]) from codes (device i32
// [B, T, Q]) with the contract of Codebooks.Decode: bit-identical to
// Encode's quantized, 0 on padded frames, an error naming the first code out
// of range on a valid frame. It reads 8 status bytes back.
func (dc *DeviceCodebooks) Decode(codes cuda.DevicePtr, bt Batch, quantized cuda.DevicePtr) error {
	if err := bt.check(); err != nil {
		return err
	}
	c := dc.c
	rows, q := bt.B*bt.T, len(c.stages)
	s := dc.be.NewScratch()
	defer s.Free()
	lengths, _, err := uploadLengths(s, bt)
	if err != nil {
		return err
	}
	status, err := s.Alloc(8)
	if err != nil {
		return err
	}
	if err := dc.be.Memset(status.Ptr(), 0xFF, 8); err != nil {
		return err
	}
	var words32 cuda.DevicePtr
	if dc.words32 != nil {
		words32 = dc.words32.Ptr()
	}
	if err := dc.k.dec.Launch(cuda.Dim3{X: (rows + 7) / 8, Y: 1, Z: 1}, cuda.Dim3{X: 256, Y: 1, Z: 1}, 0, &kern.RvqDecodeParams{
		Codes: uint64(codes), Lengths: uint64(lengths), Rows: int64(rows), T: int64(bt.T), D: int64(c.dim),
		Dp: int64(dc.dp), Q: int64(q), Split: int64(c.split), Words: uint64(dc.words.Ptr()), Meta: uint64(dc.meta.Ptr()),
		Out: uint64(quantized), Status: uint64(status.Ptr()), Words32: uint64(words32),
	}); err != nil {
		return err
	}
	st := make([]uint64, 1)
	if err := dc.be.DeviceToHost(cuda.Bytes(st), status.Ptr()); err != nil {
		return err
	}
	if st[0] == math.MaxUint64 {
		return nil
	}
	i := int(st[0])
	v := make([]int32, 1)
	if err := dc.be.DeviceToHost(cuda.Bytes(v), codes+cuda.DevicePtr(4*i)); err != nil {
		return err
	}
	row, stage := i/q, i%q
	k := c.stages[stage].k
	return fmt.Errorf("codes[%d, %d, %d] = %d, want 0..%d (codebook %d has K = %d entries)", row/bt.T, row%bt.T, stage, v[0], k-1, stage, k)
}

// uploadLengths uploads bt.Lengths as int32 into s (address 0: every frame
// valid) and returns the number of valid frames.
func uploadLengths(s *cuda.Scratch, bt Batch) (cuda.DevicePtr, int, error) {
	if bt.Lengths == nil {
		return 0, bt.B * bt.T, nil
	}
	l := make([]int32, bt.B)
	n := 0
	for b, v := range bt.Lengths {
		l[b] = int32(v)
		n += v
	}
	m, err := s.Upload(cuda.Bytes(l))
	if err != nil {
		return 0, 0, err
	}
	return m.Ptr(), n, nil
}
