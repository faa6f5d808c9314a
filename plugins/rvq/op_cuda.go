//go:build cuda

package rvq

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"sync"

	kern "github.com/edgespeech/edge/kernels"
	rt "github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/cuda"
)

// The cuda build gives rvq_encode and rvq_decode a CUDA implementation (the
// kernels of kernels/rvq.cu). This file's init runs after op.go's, which
// registers the ops.
//
// The CUDA ops take x / codes in device memory (host tensors are uploaded)
// and return device-resident outputs. The codebooks are checked and
// prepared on the host (the same checks as the CPU op, ||C_e||^2/2 computed
// by the CPU code so that it is bit-identical) and uploaded when they change
// (the op compares them with the last ones it prepared); Go callers can hold
// a DeviceCodebooks instead. One 8-byte status word comes back per Run (the
// input check), the only synchronising copy besides a device codebooks
// input, which is downloaded for that comparison.
func init() {
	rt.RegisterImplementation("rvq_encode", "cuda", cuda.Constructor(newCUDAOp(true)))
	rt.RegisterImplementation("rvq_decode", "cuda", cuda.Constructor(newCUDAOp(false)))
}

const (
	cudaModule = "edge"
	// rowAlign pads every stage of the device codebooks to a multiple of
	// this many rows (the largest N-tile), dimAlign every row to a multiple
	// of this many values (the kernel's k-chunk).
	rowAlign = 256
	dimAlign = 64
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
	// EnvVariant names the environment variable that forces a fused-kernel
	// variant (e.g. rvq_encode_m128n128w24s4), for sweeps.
	EnvVariant = "EDGE_RVQ_VARIANT"
)

// variant is one instantiation of the fused encoder (kernels/rvq.cu): BM
// rows a CTA, N-tiles of BN codewords, WM x WN warps, a ring of stage slots;
// rs: the fp32 residual lives in shared memory (else in global scratch).
type variant struct {
	name                  string
	bm, bn, wm, wn, stage int
	rs                    bool
	pw                    bool // one more warp: the ring's producer
	// awDp > 0: asynchronous N-tiles (two accumulator sets, the next
	// tile's wgmma in flight during the fold of the current one) and a
	// producer warpgroup; on Hopper that pipeline is compiled for rows of
	// awDp padded values and runs for those only, elsewhere the kernel runs
	// the plain loop for any width.
	awDp int
	// update: where the stage end's update leaves the next stage's A
	// operand on Hopper (kernels/rvq.cu's AR).
	update aUpdate
}

// aUpdate is how a fused kernel's stage-end update hands the next stage its
// bf16 A operand on Hopper; elsewhere every kernel writes the A tile.
type aUpdate int

const (
	// toTile: into the A tile in shared memory (BM x Dp bf16).
	toTile aUpdate = iota
	// staged (the g kernels): through a 2 KiB staging tile a warp into the
	// A fragments in registers; the kernel has those tiles instead of the
	// A tile.
	staged
	// frag (the f kernels): the fp32 residual is split between the A
	// fragments (high halves) and global scratch (low halves), no A tile,
	// and the kernel reads the codebook's fragTiles instead of its tiles.
	frag
)

// grid is its number of CTAs for rows rows.
func (v variant) grid(rows int) int { return (rows + v.bm - 1) / v.bm }

// aw reports whether v is an asynchronous-N-tile variant.
func (v variant) aw() bool { return v.awDp > 0 }

// threads is its block size.
func (v variant) threads() int {
	switch {
	case v.aw():
		return 32 * (v.wm*v.wn + 4)
	case v.pw:
		return 32 * (v.wm*v.wn + 1)
	}
	return 32 * v.wm * v.wn
}

// shared is its dynamic shared memory for rows of dp values on a GPU that is
// Hopper or not: the bf16 A tile (staged on Hopper: the staging tiles, 64
// values a row; frag on Hopper: none), the ring (codewords and hn), the
// per-warp partial minima, three per-row words, the ring's two mbarriers a
// slot, with rs the fp32 residual rows, and for the aw kernels the
// quantized-gather region: every stage's uint16 code of every row, every
// stage's (codeword offset, K) as two int32 and gatherBars 8-byte mbarriers
// for each of up to 8 warps (kernels/rvq.cu's aTileBytes, sharedRows,
// stageCodes, stageMeta, gatherBar and its shared-memory comment).
func (v variant) shared(dp int, hopper bool) int {
	const gatherBars, maxWarps = 8, 8 // kernels/rvq.cu's kGatherBars and its 8 warps at most
	a := v.bm * dp * 2
	switch {
	case v.update == staged && hopper:
		a = v.bm * dimAlign * 2
	case v.update == frag && hopper:
		a = 0
	}
	n := a + v.stage*(v.bn*dimAlign*2+v.bn*4) + v.wn*v.bm*12 + v.bm*12 + v.stage*16
	if v.rs {
		n += v.bm * dp * 4
	}
	if v.aw() {
		n += v.bm*MaxStages*2 + MaxStages*2*4 + maxWarps*gatherBars*8
	}
	return n
}

// variants in order of preference after the preferred ones: Encode takes the
// first whose shared memory fits the device for the codebooks' D (the wg
// ones on Hopper only).
var variants = []variant{
	{"rvq_encode_wg_m128n128s3px2", 128, 128, 8, 1, 3, false, false, 0, toTile},
	{"rvq_encode_wg_m192n128s4p", 192, 128, 12, 1, 4, false, false, 0, toTile},
	{"rvq_encode_wg_m128n128s4p", 128, 128, 8, 1, 4, false, false, 0, toTile},
	{"rvq_encode_m128n128w24s4p", 128, 128, 2, 4, 4, false, false, 0, toTile},
	{"rvq_encode_m64n128w14s4p", 64, 128, 1, 4, 4, false, false, 0, toTile},
	{"rvq_encode_m128n128w24s4pr", 128, 128, 2, 4, 4, true, false, 0, toTile},
	{"rvq_encode_m128n256w24s3p", 128, 256, 2, 4, 3, false, false, 0, toTile},
	{"rvq_encode_m256n128w81s4p", 256, 128, 8, 1, 4, false, false, 0, toTile},
	{"rvq_encode_m128n128w41s4px2", 128, 128, 4, 1, 4, false, false, 0, toTile},
	{"rvq_encode_m128n128w41s4pwx2", 128, 128, 4, 1, 4, false, true, 0, toTile},
	// wg: wgmma on sm_90a (unless kernels/rvq.cu is built with
	// RVQ_NO_WGMMA), the same tiling on mma.sync elsewhere.
	{"rvq_encode_wg_m128n128s4pw", 128, 128, 8, 1, 4, false, true, 0, toTile},
	{"rvq_encode_wg_m128n128s6pw", 128, 128, 8, 1, 6, false, true, 0, toTile},
	{"rvq_encode_wg_m128n128s3pwx2", 128, 128, 8, 1, 3, false, true, 0, toTile},
	{"rvq_encode_wg_m192n128s4pw", 192, 128, 12, 1, 4, false, true, 0, toTile},
	{"rvq_encode_wg_m256n128s3p", 256, 128, 16, 1, 3, false, false, 0, toTile},
	// wa: wg with asynchronous N-tiles, a producer warpgroup and setmaxnreg
	// (sm_90a), the pipeline compiled for one padded width.
	{"rvq_encode_wa_m128n128s6pw_d128", 128, 128, 8, 1, 6, false, true, 128, toTile},
	{"rvq_encode_wa_m128n128s8pw_d128", 128, 128, 8, 1, 8, false, true, 128, toTile},
	{"rvq_encode_wa_m128n128s6pwr_d128", 128, 128, 8, 1, 6, true, true, 128, toTile},
	{"rvq_encode_wa_m128n64s16pw_d256", 128, 64, 8, 1, 16, false, true, 256, toTile},
	// a: the A operand (the bf16 residual) in registers for the stage.
	{"rvq_encode_wa_m128n128s6pwra_d128", 128, 128, 8, 1, 6, true, true, 128, toTile},
	{"rvq_encode_wa_m128n64s16pwa_d256", 128, 64, 8, 1, 16, false, true, 256, toTile},
	// g: the update hands the next stage its A fragments (no A tile on
	// Hopper: a ring of 12 slots of 128 codewords at D = 256).
	{"rvq_encode_wa_m128n128s12pwg_d256", 128, 128, 8, 1, 12, false, true, 256, staged},
	// f: the residual's high halves are the A fragments, its low halves in
	// global scratch (no A tile on Hopper: a ring of 13 slots at D = 256).
	{"rvq_encode_wa_m128n128s13pwf_d256", 128, 128, 8, 1, 13, false, true, 256, frag},
}

// fits returns why variant v cannot encode rows of d values (dp padded) on
// this GPU, or nil: its shared memory, and on Hopper (where the aw variants
// run their two-tile pipeline, compiled without another loop) its ring.
func (k *cudaKernels) fits(v variant, d, dp int) error {
	if need := v.shared(dp, k.hopper); need > k.maxShared[v.name] {
		return fmt.Errorf("rvq: variant %s needs %d B of shared memory for D = %d; the device allows %d B", v.name, need, d, k.maxShared[v.name])
	}
	if k.hopper && v.aw() && v.awDp != dp {
		return fmt.Errorf("rvq: variant %s is compiled for rows of %d padded values on this GPU; D = %d pads to %d", v.name, v.awDp, d, dp)
	}
	return nil
}

// cudaKernels is the loaded kernel set of a backend.
type cudaKernels struct {
	fused                          map[string]*cuda.Kernel
	maxShared                      map[string]int // dynamic shared memory a block of each fused kernel may use
	hopper                         bool           // compute capability 9.x: the wg (wgmma) variants are preferred
	clusters                       bool           // compute capability >= 9.0: rvq_stream can run
	stream                         *cuda.Kernel
	small, update, pad, check, dec *cuda.Kernel
}

func loadKernels(b *cuda.Backend) (*cudaKernels, error) {
	image, _, err := kern.Fatbin()
	if err != nil {
		return nil, err
	}
	mod, err := b.Module(cudaModule, image)
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
	return k, nil
}

// DeviceCodebooks is a Codebooks uploaded to a CUDA backend in the layout of
// kernels/rvq.cu: bf16 rows padded to Dp = roundup(D, 64) values, every
// stage padded to a multiple of 256 rows, ||C_e||^2/2 per row (padScore on
// padding) and per-stage (offset, K_q, max ||C_e||). Free releases it.
type DeviceCodebooks struct {
	be        *cuda.Backend
	c         *Codebooks
	k         *cudaKernels
	dp        int
	words, hn *cuda.Buffer
	meta      *cuda.Buffer
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
	if dc.words, err = upload(be, u16Bytes(words)); err != nil {
		return nil, err
	}
	if dc.hn, err = upload(be, cuda.Bytes(hn)); err != nil {
		return nil, err
	}
	if dc.meta, err = upload(be, cuda.Bytes(meta)); err != nil {
		return nil, err
	}
	if dc.tiles, err = upload(be, u16Bytes(swizzleTiles(words, dp))); err != nil {
		return nil, err
	}
	if k.hopper && dp == fragDp {
		if dc.fragTiles, err = upload(be, u16Bytes(swizzleTiles(permuteRows(words, dp, fragDim), dp))); err != nil {
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
	for _, b := range []*cuda.Buffer{dc.words, dc.hn, dc.meta, dc.tiles, dc.fragTiles} {
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

// swizzleTiles lays out row-major [rows][dp] bf16 words (rows a multiple of
// 128, dp of 64) as kernels/rvq.cu's bulk path reads them: block (b, kc) =
// rows 128b..128b+127, values 64kc..64kc+63 is 16 KiB at
// ((b*dp/64 + kc)*128*64), row n of it at n*64, its 16-byte chunk c at
// ((c ^ n) & 7)*8: the 128-byte swizzle of the shared-memory tile.
func swizzleTiles(words []uint16, dp int) []uint16 {
	rows, kcs := len(words)/dp, dp/dimAlign
	out := make([]uint16, len(words))
	for b := 0; b < rows/128; b++ {
		for kc := 0; kc < kcs; kc++ {
			blk := out[(b*kcs+kc)*128*dimAlign:]
			for n := 0; n < 128; n++ {
				src := words[(b*128+n)*dp+kc*dimAlign:]
				for c := 0; c < 8; c++ {
					copy(blk[n*dimAlign+((c^n)&7)*8:n*dimAlign+((c^n)&7)*8+8], src[c*8:c*8+8])
				}
			}
		}
	}
	return out
}

// fragDp is the padded width the f kernels are compiled for.
const fragDp = 256

// fragDim is the f kernels' dimension order: the tensor cores' column c =
// 16s + w of k16 step s (w < 16) is dimension 32(s/2) + 8t + 4(s%2) + e with
// t = (w%8)/2 and e = 2(w/8) + w%2, so that the A-fragment elements a lane
// holds (mma's columns 2t, 2t+1, 2t+8 and 2t+9 of every step) are four
// consecutive dimensions of its rows, and lane t's are the 16-byte pieces t
// of every 64-byte group of a bf16 row (kernels/rvq.cu, kFrag and fragDim0).
func fragDim(c int) int {
	s, w := c/16, c%16
	return 32*(s/2) + 8*((w%8)/2) + 4*(s%2) + 2*(w/8) + w%2
}

// permuteRows returns words ([rows][dp]) with row n's value perm(c) at
// column c.
func permuteRows(words []uint16, dp int, perm func(int) int) []uint16 {
	out := make([]uint16, len(words))
	for n := 0; n < len(words)/dp; n++ {
		for c := 0; c < dp; c++ {
			out[n*dp+c] = words[n*dp+perm(c)]
		}
	}
	return out
}

func upload(be *cuda.Backend, b []byte) (*cuda.Buffer, error) {
	m, err := be.Malloc(int64(max(len(b), 8)))
	if err != nil {
		return nil, err
	}
	if err := be.HostToDevice(m.Ptr(), b); err != nil {
		_ = m.Free()
		return nil, err
	}
	return m, nil
}

func u16Bytes(v []uint16) []byte {
	if len(v) == 0 {
		return nil
	}
	b := make([]byte, 2*len(v))
	for i, w := range v {
		b[2*i], b[2*i+1] = byte(w), byte(w>>8)
	}
	return b
}

// preferred lists, per padded width Dp, the variants measured fastest on the
// H200 (docs/bench/rvq_gpu.md), tried before the rest of variants: the wa
// kernels where one is compiled for Dp (Hopper only; fits skips the others),
// then the wg ones.
var preferred = []struct {
	maxDp int
	names []string
}{
	{128, []string{"rvq_encode_wa_m128n128s6pwra_d128", "rvq_encode_wa_m128n128s6pwr_d128", "rvq_encode_wa_m128n128s6pw_d128", "rvq_encode_wa_m128n128s8pw_d128",
		"rvq_encode_wg_m128n128s3pwx2", "rvq_encode_wg_m128n128s3px2", "rvq_encode_wg_m192n128s4pw"}},
	{256, []string{"rvq_encode_wa_m128n128s13pwf_d256", "rvq_encode_wa_m128n128s12pwg_d256", "rvq_encode_wa_m128n64s16pwa_d256", "rvq_encode_wa_m128n64s16pw_d256", "rvq_encode_wg_m256n128s3p", "rvq_encode_wg_m192n128s4pw"}},
	{1024, []string{"rvq_encode_wg_m256n128s3p", "rvq_encode_wg_m192n128s4pw"}},
}

// autoOrder is variants with the preferred ones for dp first.
func autoOrder(dp int) []variant {
	var names []string
	for _, p := range preferred {
		if dp <= p.maxDp {
			names = p.names
			break
		}
	}
	out := make([]variant, 0, len(variants))
	for _, n := range names {
		for _, v := range variants {
			if v.name == n {
				out = append(out, v)
			}
		}
	}
	for _, v := range variants {
		if !slices.Contains(names, v.name) {
			out = append(out, v)
		}
	}
	return out
}

// pick returns the fused variant for these codebooks: $EDGE_RVQ_VARIANT or
// dc.variant when set, else the first of autoOrder that fits (fits: shared
// memory, and a wa pipeline compiled for this width), skipping the wg and wa
// variants on GPUs other than Hopper.
func (dc *DeviceCodebooks) pick() (variant, *cuda.Kernel, error) {
	want := dc.variant
	if want == "" {
		want = os.Getenv(EnvVariant)
	}
	for _, v := range autoOrder(dc.dp) {
		if want != "" && v.name != want {
			continue
		}
		if dc.k.fused[v.name] == nil {
			if want != "" {
				return v, nil, fmt.Errorf("rvq: variant %s is not in the loaded fatbin", v.name)
			}
			continue
		}
		if want == "" && !dc.k.hopper && (strings.HasPrefix(v.name, "rvq_encode_wg_") || v.aw()) {
			continue // without wgmma the wg tilings are the slower mma.sync ones
		}
		if err := dc.k.fits(v, dc.c.dim, dc.dp); err != nil {
			if want != "" {
				return v, nil, err
			}
			continue
		}
		return v, dc.k.fused[v.name], nil
	}
	if want != "" {
		return variant{}, nil, fmt.Errorf("rvq: $%s = %q names no fused variant", EnvVariant, want)
	}
	return variant{}, nil, fmt.Errorf("rvq: no fused variant fits D = %d", dc.c.dim)
}

// Encode quantises x (device f32 [B, T, D], row-major, D = Dim()) into codes
// (device i32 [B, T, Q]) and quantized (device f32 [B, T, D]) with the
// contract of Codebooks.Encode: identical codes, bit-identical quantized.
// bt.Lengths (host) marks the valid frames. The input check (finite x,
// squared norms at most MaxSquaredNorm) runs on the device; its status is
// read back at the end, so Encode returns after the work is done.
func (dc *DeviceCodebooks) Encode(x cuda.DevicePtr, bt Batch, codes, quantized cuda.DevicePtr) error {
	if err := bt.check(); err != nil {
		return err
	}
	be, c := dc.be, dc.c
	d, rows := c.dim, bt.B*bt.T
	s := &devScratch{be: be}
	defer s.free()
	lengths, valid, err := s.lengths(bt)
	if err != nil {
		return err
	}
	status, err := dc.takeStatus()
	if err != nil {
		return err
	}
	st := []uint64{0}
	defer func() { dc.putStatus(status, st[0] == math.MaxUint64) }()
	res, err := s.alloc(int64(scratchRows(rows)) * int64(dc.dp) * 4)
	if err != nil {
		return err
	}
	var acc cuda.DevicePtr
	if c.split > 0 {
		a, err := s.alloc(int64(rows) * int64(dc.dp) * 4)
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
		if err := dc.k.check.Launch(cuda.Dim3{X: (rows + 7) / 8, Y: 1, Z: 1}, cuda.Dim3{X: 256, Y: 1, Z: 1}, 0,
			x, lengths, rows, bt.T, d, float64(MaxSquaredNorm), status); err != nil {
			return err
		}
	}
	switch path {
	case "small":
		err = dc.encodeSmall(s, x, bt, lengths, res.Ptr(), acc, codes, quantized)
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

// encodeStream queues rvq_stream: one launch, a cluster of CTAs per valid
// frame splitting the codebook, exact scores.
func (dc *DeviceCodebooks) encodeStream(s *devScratch, x cuda.DevicePtr, bt Batch, lengths, codes, quantized cuda.DevicePtr) error {
	c := dc.c
	rows := bt.B * bt.T
	if err := dc.k.pad.Launch(cuda.Dim3{X: (rows + 7) / 8, Y: 1, Z: 1}, cuda.Dim3{X: 256, Y: 1, Z: 1}, 0,
		lengths, rows, bt.T, c.dim, len(c.stages), codes, quantized); err != nil {
		return err
	}
	list := validRows(bt)
	if len(list) == 0 {
		return nil
	}
	rowList, err := s.upload(cuda.Bytes(list))
	if err != nil {
		return err
	}
	return dc.k.stream.Launch(cuda.Dim3{X: streamSplit * len(list), Y: 1, Z: 1}, cuda.Dim3{X: 256, Y: 1, Z: 1}, 0,
		x, rowList, c.dim, dc.dp, len(c.stages), c.split, dc.words, dc.hn, dc.meta, codes, quantized)
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
	return k.Launch(cuda.Dim3{X: v.grid(rows), Y: 1, Z: 1}, cuda.Dim3{X: v.threads(), Y: 1, Z: 1}, v.shared(dc.dp, dc.k.hopper),
		x, lengths, rows, bt.T, c.dim, dc.dp, len(c.stages), c.split, dc.words, tiles, dc.hn, dc.meta, codes, quantized, res, stats,
		float64(MaxSquaredNorm), status)
}

// encodeSmall queues the small-batch path: per stage, every entry of the
// codebook scored exactly by its own thread (CTAs over entry chunks x valid
// rows), the per-row (score, index) minimum merged with atomicMin, then the
// update.
func (dc *DeviceCodebooks) encodeSmall(s *devScratch, x cuda.DevicePtr, bt Batch, lengths, res, acc, codes, quantized cuda.DevicePtr) error {
	c := dc.c
	rows := bt.B * bt.T
	list := validRows(bt)
	if err := dc.k.pad.Launch(cuda.Dim3{X: (rows + 7) / 8, Y: 1, Z: 1}, cuda.Dim3{X: 256, Y: 1, Z: 1}, 0,
		lengths, rows, bt.T, c.dim, len(c.stages), codes, quantized); err != nil {
		return err
	}
	if len(list) == 0 {
		return nil
	}
	rowList, err := s.upload(cuda.Bytes(list))
	if err != nil {
		return err
	}
	keys, err := s.alloc(int64(8 * len(list)))
	if err != nil {
		return err
	}
	if err := dc.be.Memset(keys.Ptr(), 0xFF, int64(8*len(list))); err != nil {
		return err
	}
	for ci, ch := range c.chains() {
		for q := ch[0]; q < ch[1]; q++ {
			off, k := dc.offsets[q], c.stages[q].k
			first := b2i(q == ch[0])
			if err := dc.k.small.Launch(cuda.Dim3{X: (k + 255) / 256, Y: len(list), Z: 1}, cuda.Dim3{X: 256, Y: 1, Z: 1}, 0,
				x, res, first, rowList, c.dim, dc.dp, dc.words, dc.hn, off, k, keys); err != nil {
				return err
			}
			if err := dc.k.update.Launch(cuda.Dim3{X: len(list), Y: 1, Z: 1}, cuda.Dim3{X: 128, Y: 1, Z: 1}, 0,
				x, res, acc, quantized, codes, rowList, c.dim, dc.dp, len(c.stages), q, first, ci, b2i(q == ch[1]-1),
				dc.words, off, keys); err != nil {
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
	s := &devScratch{be: dc.be}
	defer s.free()
	lengths, _, err := s.lengths(bt)
	if err != nil {
		return err
	}
	status, err := s.alloc(8)
	if err != nil {
		return err
	}
	if err := dc.be.Memset(status.Ptr(), 0xFF, 8); err != nil {
		return err
	}
	if err := dc.k.dec.Launch(cuda.Dim3{X: (rows + 7) / 8, Y: 1, Z: 1}, cuda.Dim3{X: 256, Y: 1, Z: 1}, 0,
		codes, lengths, rows, bt.T, c.dim, dc.dp, q, c.split, dc.words, dc.meta, quantized, status); err != nil {
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

// devScratch collects the pool buffers of one call; free returns them (stream
// order makes that safe right after the launches).
type devScratch struct {
	be   *cuda.Backend
	bufs []*cuda.Buffer
}

func (s *devScratch) alloc(bytes int64) (*cuda.Buffer, error) {
	m, err := s.be.Malloc(max(bytes, 8))
	if err == nil {
		s.bufs = append(s.bufs, m)
	}
	return m, err
}

func (s *devScratch) upload(b []byte) (*cuda.Buffer, error) {
	m, err := s.alloc(int64(len(b)))
	if err != nil {
		return nil, err
	}
	return m, s.be.HostToDevice(m.Ptr(), b)
}

// lengths uploads bt.Lengths as int32 (0: every frame valid) and returns the
// number of valid frames.
func (s *devScratch) lengths(bt Batch) (cuda.DevicePtr, int, error) {
	if bt.Lengths == nil {
		return 0, bt.B * bt.T, nil
	}
	l := make([]int32, bt.B)
	n := 0
	for b, v := range bt.Lengths {
		l[b] = int32(v)
		n += v
	}
	m, err := s.upload(cuda.Bytes(l))
	if err != nil {
		return 0, 0, err
	}
	return m.Ptr(), n, nil
}

func (s *devScratch) free() {
	for _, m := range s.bufs {
		_ = m.Free()
	}
}

// cudaOp is rvq_encode or rvq_decode on the CUDA backend. It keeps the
// device codebooks of the last Run and reuses them while the codebooks
// input holds the same bytes (shape, dtype and every value compared), so a
// pipeline pays for checking and uploading them once. Close frees them.
type cudaOp struct {
	be     *cuda.Backend
	sizes  []int
	split  int
	encode bool

	mu     sync.Mutex
	cached *sharedBooks // the last prepared codebooks
}

// sharedBooks is a DeviceCodebooks with the input bytes it was made from
// and a count of the Runs using it; it is freed when it is neither cached
// nor in use.
type sharedBooks struct {
	dc     *DeviceCodebooks
	key    []byte // dtype, shape and bytes of the codebooks input
	refs   int
	cached bool
}

// Close frees the cached device codebooks (once no Run uses them).
func (o *cudaOp) Close() error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cached != nil {
		o.cached.cached = false
		o.drop(o.cached)
		o.cached = nil
	}
	return nil
}

// drop frees sb when nothing holds it; o.mu is held.
func (o *cudaOp) drop(sb *sharedBooks) {
	if sb.refs == 0 && !sb.cached {
		sb.dc.Free()
	}
}

// codebooks returns device codebooks for the input (cached while its bytes
// are unchanged) and the function that ends this Run's use of them.
func (o *cudaOp) codebooks(t *rt.Tensor) (*DeviceCodebooks, func(), error) {
	h, err := o.be.Download(t)
	if err != nil {
		return nil, nil, err
	}
	key := append([]byte(fmt.Sprintf("%v %v:", h.DType(), h.Shape())), tensorBytes(h)...)
	o.mu.Lock()
	sb := o.cached
	if sb == nil || !bytes.Equal(sb.key, key) {
		o.mu.Unlock()
		c, err := CodebooksFromTensor(h, o.sizes)
		if err != nil {
			return nil, nil, fmt.Errorf("input \"codebooks\" %v: %w", h.Shape(), err)
		}
		if c, err = c.WithSplit(o.split); err != nil {
			return nil, nil, err
		}
		dc, err := NewDeviceCodebooks(o.be, c)
		if err != nil {
			return nil, nil, err
		}
		o.mu.Lock()
		if o.cached != nil {
			o.cached.cached = false
			o.drop(o.cached)
		}
		sb = &sharedBooks{dc: dc, key: key, cached: true}
		o.cached = sb
	}
	sb.refs++
	o.mu.Unlock()
	return sb.dc, func() {
		o.mu.Lock()
		defer o.mu.Unlock()
		sb.refs--
		o.drop(sb)
	}, nil
}

// tensorBytes views a host tensor's values as bytes.
func tensorBytes(t *rt.Tensor) []byte {
	switch t.DType() {
	case rt.F32:
		return cuda.Bytes(t.F32())
	case rt.U16:
		return u16Bytes(t.U16())
	case rt.I16:
		v := t.I16()
		u := make([]uint16, len(v))
		for i, x := range v {
			u[i] = uint16(x)
		}
		return u16Bytes(u)
	}
	return nil
}

func newCUDAOp(encode bool) func(rt.Params, *cuda.Backend) (rt.Op, error) {
	return func(p rt.Params, b *cuda.Backend) (rt.Op, error) {
		o := &cudaOp{be: b, sizes: p.IntList("codebook_sizes"), split: p.Int("split"), encode: encode}
		if o.split < 0 || o.split >= MaxStages {
			return nil, fmt.Errorf("split = %d, want 0 (one chain) or 1..%d", o.split, MaxStages-1)
		}
		if err := checkSizes(o.sizes); err != nil {
			return nil, err
		}
		if _, err := loadKernels(b); err != nil {
			return nil, err
		}
		return o, nil
	}
}

// Run checks and uploads the codebooks, then encodes or decodes on the
// device. Outputs are device tensors of o.be.
func (o *cudaOp) Run(ctx context.Context, in rt.Tensors) (rt.Tensors, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	dc, release, err := o.codebooks(in["codebooks"])
	if err != nil {
		return nil, err
	}
	defer release()
	if o.encode {
		return o.runEncode(dc, in)
	}
	return o.runDecode(dc, in)
}

func (o *cudaOp) runEncode(dc *DeviceCodebooks, in rt.Tensors) (rt.Tensors, error) {
	sh := in["x"].Shape()
	if sh[2] != dc.c.Dim() {
		return nil, fmt.Errorf("input \"x\" has shape %v (D = %d), but the codebooks have D = %d", sh, sh[2], dc.c.Dim())
	}
	bt, err := batchOf("x", sh, in["lengths"])
	if err != nil {
		return nil, err
	}
	x, err := o.be.Upload(in["x"])
	if err != nil {
		return nil, err
	}
	if x != in["x"] {
		defer x.Buffer().Free()
	}
	var outs cuda.Outputs
	codes := outs.Empty(o.be, rt.I32, rt.Shape{sh[0], sh[1], dc.c.NumStages()})
	quantized := outs.Empty(o.be, rt.F32, sh)
	if outs.Err() != nil {
		outs.Release()
		return nil, outs.Err()
	}
	p, err := devPtrs(x, codes, quantized)
	if err == nil {
		err = dc.Encode(p[0], bt, p[1], p[2])
	}
	if err != nil {
		outs.Release()
		return nil, err
	}
	return rt.Tensors{"codes": codes, "quantized": quantized}, nil
}

func (o *cudaOp) runDecode(dc *DeviceCodebooks, in rt.Tensors) (rt.Tensors, error) {
	ct := in["codes"]
	sh := ct.Shape()
	if sh[2] != dc.c.NumStages() {
		return nil, fmt.Errorf("input \"codes\" has shape %v (Q = %d), but there are %d codebooks", sh, sh[2], dc.c.NumStages())
	}
	bt, err := batchOf("codes", sh, in["lengths"])
	if err != nil {
		return nil, err
	}
	if ct.DType() == rt.I64 { // narrow on the host (errors name the code)
		h, err := o.be.Download(ct)
		if err != nil {
			return nil, err
		}
		c32, err := codesI32(h)
		if err != nil {
			return nil, err
		}
		if ct, err = rt.FromSlice(rt.I32, sh, c32); err != nil {
			return nil, err
		}
	}
	dev, err := o.be.Upload(ct)
	if err != nil {
		return nil, err
	}
	if dev != in["codes"] {
		defer dev.Buffer().Free()
	}
	var outs cuda.Outputs
	quantized := outs.Empty(o.be, rt.F32, rt.Shape{sh[0], sh[1], dc.c.Dim()})
	if outs.Err() != nil {
		return nil, outs.Err()
	}
	p, err := devPtrs(dev, quantized)
	if err == nil {
		err = dc.Decode(p[0], bt, p[1])
	}
	if err != nil {
		outs.Release()
		return nil, err
	}
	return rt.Tensors{"quantized": quantized}, nil
}

// devPtrs returns the device addresses of tensors of the cuda backend.
func devPtrs(ts ...*rt.Tensor) ([]cuda.DevicePtr, error) {
	out := make([]cuda.DevicePtr, len(ts))
	for i, t := range ts {
		p, err := cuda.Ptr(t)
		if err != nil {
			return nil, err
		}
		out[i] = p
	}
	return out, nil
}
