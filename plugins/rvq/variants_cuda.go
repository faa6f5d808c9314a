//go:build cuda

package rvq

import (
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/edgespeech/edge/runtime/cuda"
)

// The fused encoder's variants (kernels/rvq.cu's RVQ_VARIANT instances):
// their geometry, shared memory and the choice among them for a codebook
// width and GPU. The table holds exactly the variants the choice can make
// on the GPUs the fatbin targets; kernels/rvq.cu instantiates no others.

// EnvVariant names the environment variable that forces a fused-kernel
// variant (e.g. rvq_encode_m128n128w24s4p), for sweeps.
const EnvVariant = "EDGE_RVQ_VARIANT"

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
// Hopper or not: the bf16 A tile (frag on Hopper: none), the ring (codewords and hn), the
// per-warp partial minima, three per-row words, the ring's two mbarriers a
// slot, with rs the fp32 residual rows, and for the aw kernels the
// quantized-gather region: every stage's uint16 code of every row, every
// stage's (codeword offset, K) as two int32 and gatherBars 8-byte mbarriers
// for each of up to 8 warps (kernels/rvq.cu's aTileBytes, sharedRows,
// stageCodes, stageMeta, gatherBar and its shared-memory comment).
func (v variant) shared(dp int, hopper bool) int {
	const gatherBars, maxWarps = 8, 8 // kernels/rvq.cu's kGatherBars and its 8 warps at most
	a := v.bm * dp * 2
	if v.update == frag && hopper {
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
// and wa ones on Hopper only). These are the variants that choice makes on
// the GPUs of the fatbin (Hopper: 227 KiB of shared memory a block; Orin
// and Thor, and consumer GPUs through the PTX, mma.sync only): at D <= 64
// wg_m128n128s3pwx2, at 128 wa_m128n128s6pwra_d128, at 192 and 320
// wg_m256n128s3p, at 256 wa_m128n128s13pwf_d256, at 384 wg_m192n128s4pw,
// up to 640 wg_m128n128s3px2 and above m64n128w14s4p on Hopper; elsewhere
// m128n128w24s4p where it fits, else m64n128w14s4p.
var variants = []variant{
	{"rvq_encode_wg_m128n128s3px2", 128, 128, 8, 1, 3, false, false, 0, toTile},
	{"rvq_encode_m128n128w24s4p", 128, 128, 2, 4, 4, false, false, 0, toTile},
	{"rvq_encode_m64n128w14s4p", 64, 128, 1, 4, 4, false, false, 0, toTile},
	// wg: wgmma on sm_90a (unless kernels/rvq.cu is built with
	// RVQ_NO_WGMMA), the same tiling on mma.sync elsewhere.
	{"rvq_encode_wg_m128n128s3pwx2", 128, 128, 8, 1, 3, false, true, 0, toTile},
	{"rvq_encode_wg_m192n128s4pw", 192, 128, 12, 1, 4, false, true, 0, toTile},
	{"rvq_encode_wg_m256n128s3p", 256, 128, 16, 1, 3, false, false, 0, toTile},
	// wa: wg with asynchronous N-tiles, a producer warpgroup and setmaxnreg
	// (sm_90a), the pipeline compiled for one padded width; a: the A
	// operand (the bf16 residual) in registers for the stage.
	{"rvq_encode_wa_m128n128s6pwra_d128", 128, 128, 8, 1, 6, true, true, 128, toTile},
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

// preferred lists, per padded width Dp, the variants measured fastest on the
// H200 (docs/bench/rvq_gpu.md), tried before the rest of variants: the wa
// kernels where one is compiled for Dp (Hopper only; fits skips the others),
// then the wg ones.
var preferred = []struct {
	maxDp int
	names []string
}{
	{128, []string{"rvq_encode_wa_m128n128s6pwra_d128", "rvq_encode_wg_m128n128s3pwx2", "rvq_encode_wg_m128n128s3px2",
		"rvq_encode_wg_m192n128s4pw"}},
	{256, []string{"rvq_encode_wa_m128n128s13pwf_d256", "rvq_encode_wg_m256n128s3p", "rvq_encode_wg_m192n128s4pw"}},
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
