package fbank

import "math"

// Device layouts of the mel filterbank for kernels/fbank.cu, kept out of the
// cuda build tag so that the CPU tests check them.

// melGroup is the number of filters mel4 runs side by side: lane l of a warp
// takes filters l, l+32, l+64, ..., so filters [32g, 32g+32) run together.
const melGroup = 32

// melBands lays out the filterbank for fbank_frame.cuh's mel4 with one band
// length per group of melGroup filters, so that the lanes of a warp run the
// same number of band positions (no divergence, no per-lane trip counts):
// filter m of group g = m/32 sums the L_g = (longest band of the group)
// bins start'[m] .. start'[m]+L_g-1, start'[m] = min(start[m], nFreq-L_g)
// (the band moved left where it would run past the last bin), with
// w[j·nMels + m] its weight for bin start'[m] + j: the bank's weight inside
// its band, 0 outside. bands[2m], bands[2m+1] = start'[m], L_g; pitch is
// the longest band (at least 1). The extra positions add exact zeros (0·P
// to a sum of non-negative terms), so the sums equal the bank's.
func melBands(bk *melBank) (bands []int32, w []float32, pitch int) {
	pitch = 1
	length := make([]int, bk.nMels)
	for g := 0; g < bk.nMels; g += melGroup {
		l := 1
		for m := g; m < min(g+melGroup, bk.nMels); m++ {
			l = max(l, bk.off[m+1]-bk.off[m])
		}
		for m := g; m < min(g+melGroup, bk.nMels); m++ {
			length[m] = l
		}
		pitch = max(pitch, l)
	}
	bands = make([]int32, 2*bk.nMels)
	w = make([]float32, pitch*bk.nMels)
	for m := range bk.nMels {
		l := length[m]
		start := max(0, min(bk.start[m], bk.nFreq-l))
		bands[2*m], bands[2*m+1] = int32(start), int32(l)
		for i, v := range bk.w[bk.off[m]:bk.off[m+1]] {
			w[(bk.start[m]-start+i)*bk.nMels+m] = float32(v)
		}
	}
	return bands, w, pitch
}

// Tensor-core layout of the mel filterbank for kernels/fbank.cu built with
// FBANK_MEL_TC=1: the mel projection as mma.sync m16n8k8 TF32 products
// (16 frames x 8 filters per tile, 8 bins per k-step) in 3xTF32 (hi·hi +
// hi·lo + lo·hi, about float32 accuracy). Only the k-steps a tile's bands
// touch are stored (block-sparse), so a Slaney bank costs ~1/8 of the dense
// product.

// tf32 rounds v to TF32 (10 mantissa bits) to nearest, ties away from zero,
// as cvt.rna.tf32.f32 does.
func tf32(v float32) float32 {
	b := math.Float32bits(v)
	if b&0x7f800000 == 0x7f800000 { // Inf, NaN
		return v
	}
	return math.Float32frombits((b + 0x1000) &^ 0x1fff)
}

// melTiles packs bank for the tensor-core mel. Tile j covers filters
// 8j..8j+7 (zero weights past nMels); its k-steps are the 8-bin steps
// [k0, k0+8) between its bands' first and last bin. For tile j,
// tiles[4j : 4j+3] = (first fragment, k-steps, first k0/8); fragment f of
// the tile's i-th step holds, for lane l (g = l/4, t = l%4),
// frags[(f·32 + l)·4 : +4] = (hi(w[k0+t][n]), hi(w[k0+t+4][n]),
// lo(w[k0+t][n]), lo(w[k0+t+4][n])), n = 8j + g, k0 = 8·(first k0/8 + i),
// the B fragment of mma.m16n8k8 (b0 = B[t][g], b1 = B[t+4][g]) split as
// w = hi + lo, hi = tf32(w), lo = tf32(w - hi).
func melTiles(bank *melBank) (frags []float32, tiles []int32) {
	weight := func(n, k int) float32 {
		if n >= bank.nMels {
			return 0
		}
		j := k - bank.start[n]
		if j < 0 || j >= bank.off[n+1]-bank.off[n] {
			return 0
		}
		return float32(bank.w[bank.off[n]+j])
	}
	nTiles := (bank.nMels + 7) / 8
	tiles = make([]int32, 4*nTiles)
	for j := range nTiles {
		lo, hi := bank.nFreq, 0
		for n := 8 * j; n < min(8*j+8, bank.nMels); n++ {
			if l := bank.off[n+1] - bank.off[n]; l > 0 {
				lo, hi = min(lo, bank.start[n]), max(hi, bank.start[n]+l)
			}
		}
		first, steps := len(frags)/128, 0
		s0 := 0
		if hi > lo {
			s0, steps = lo/8, ceilDiv(hi, 8)-lo/8
		}
		tiles[4*j], tiles[4*j+1], tiles[4*j+2] = int32(first), int32(steps), int32(s0)
		for s := range steps {
			k0 := 8 * (s0 + s)
			for l := range 32 {
				g, t := l/4, l%4
				w0, w1 := weight(8*j+g, k0+t), weight(8*j+g, k0+t+4)
				h0, h1 := tf32(w0), tf32(w1)
				frags = append(frags, h0, h1, tf32(w0-h0), tf32(w1-h1))
			}
		}
	}
	return frags, tiles
}

// melAffine packs fbank_logmel's mel_affine argument (fbank_frame.cuh's
// LogMel): a feature y = l·scale, l = log2(max(mel + guard, floor)), is
// stored as fmaf(l, as, c) = y·a + c with as = float32(scale)·a: (y + 4)/4
// (a = 1/4, c = 1) when the op clamps at the item's maximum (Whisper's
// normalisation, which then only clamps), else y itself. as is in bits
// 0-31 and c in bits 32-63, as float32 bit patterns.
func melAffine(scale float64, clamps bool) int64 {
	as, c := float32(scale), float32(0)
	if clamps {
		as, c = as/4, 1 // exact: a power of 2
	}
	return int64(math.Float32bits(as)) | int64(math.Float32bits(c))<<32
}
