package dpx

// ctcTables is the host side of the CUDA CTC kernel (kernels/dpx.cu,
// dpx_ctc_align_*), kept free of the cuda build tag so the kernels' host
// replay (kernels/dpx_emu.cpp, cuda_emu_test.go) builds the same tables.
type ctcTables struct {
	// meta holds {T_b, S = 2L+1, table offset, backpointer offset in
	// 32-bit words} per item.
	meta []int64
	// table holds, per item, label | skip<<30 for each trellis state (skip:
	// the s-2 -> s transition is allowed), then torchaudio's state window
	// (lo, hi) for each frame, both from the CPU Aligner's prepare.
	table []int32
	// bpWords is the backpointer memory of the batch in 32-bit words: two
	// bit planes of ceil(S/32) words per frame after the first.
	bpWords int64
	// maxS is the largest trellis of the batch.
	maxS int
}

// ctcTables builds the tables of a batch of validated targets; prep is an
// Aligner with the op's options, used for its prepare.
func newCTCTables(prep *Aligner, targets [][]int, lengths []int) ctcTables {
	var c ctcTables
	c.maxS = 1
	for b, tg := range targets {
		Tb, S := lengths[b], 2*len(tg)+1
		prep.prepare(Tb, tg)
		c.meta = append(c.meta, int64(Tb), int64(S), int64(len(c.table)), c.bpWords)
		for s := range S {
			v := prep.lab[s]
			if prep.penF[s] == 0 {
				v |= 1 << 30
			}
			c.table = append(c.table, v)
		}
		for t := range Tb {
			c.table = append(c.table, prep.lo[t], prep.hi[t])
		}
		c.bpWords += int64(Tb-1) * 2 * int64((S+31)/32)
		c.maxS = max(c.maxS, S)
	}
	return c
}
