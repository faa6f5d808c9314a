package dpx

// ctcTables is the host side of the CUDA CTC kernel (kernels/dpx.cu,
// dpx_ctc_align_*), kept free of the cuda build tag so the kernels' host
// replay (kernels/dpxemu/dpx_emu.cpp, cuda_emu_test.go) builds the same
// tables.
type ctcTables struct {
	// meta holds {T_b, S = 2L+1, table offset, backpointer offset in
	// 32-bit words} per item.
	meta []int64
	// table holds, per item, three runs of S words: label | skip<<30 for
	// each trellis state (skip: the s-2 -> s transition is allowed), the
	// first frame whose window contains the state, and the first frame
	// after its window (T_b for either when there is none), from the CPU
	// Aligner's prepare.
	table []int32
	// bpWords is the backpointer memory of the batch in 32-bit words: two
	// bit planes of ceil(S/32) words per frame after the first.
	bpWords int64
	// maxS is the largest trellis of the batch.
	maxS int
}

// newCTCTables builds the tables of a batch of validated targets; prep is
// an Aligner with the op's options, used for its prepare.
//
// torchaudio's state window [lo(t), hi(t)) only moves forward (prepare's
// start and end never decrease), so state s is inside it exactly for the
// frames t with hi(t) > s and lo(t) <= s: the range [first_s, end_s) with
// first_s the first frame where hi exceeds s and end_s the first where lo
// does. The kernel tests that range instead of reading a window per frame.
func newCTCTables(prep *Aligner, targets [][]int, lengths []int) ctcTables {
	var c ctcTables
	c.maxS = 1
	for b, tg := range targets {
		Tb, S := lengths[b], 2*len(tg)+1
		prep.prepare(Tb, tg)
		off := len(c.table)
		c.meta = append(c.meta, int64(Tb), int64(S), int64(off), c.bpWords)
		c.table = append(c.table, make([]int32, 3*S)...)
		lab, first, end := c.table[off:off+S], c.table[off+S:off+2*S], c.table[off+2*S:off+3*S]
		for s := range S {
			lab[s] = prep.lab[s]
			if prep.penF[s] == 0 {
				lab[s] |= 1 << 30
			}
			first[s], end[s] = int32(Tb), int32(Tb)
		}
		h, l := 0, 0
		for t := range Tb {
			for ; h < min(int(prep.hi[t]), S); h++ {
				first[h] = int32(t)
			}
			for ; l < min(int(prep.lo[t]), S); l++ {
				end[l] = int32(t)
			}
		}
		c.bpWords += int64(Tb-1) * 2 * int64((S+31)/32)
		c.maxS = max(c.maxS, S)
	}
	return c
}
