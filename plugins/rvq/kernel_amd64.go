package rvq

import "golang.org/x/sys/cpu"

func init() {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		kernel = kernelAVX2
		kernels["avx2"] = kernelAVX2
	}
}

// kernelAVX2 is kernelGo in AVX2+FMA assembly: 6 frames x 16 codewords held
// in twelve 8-lane accumulators, each dimension one broadcast of the frame
// value times two panel vectors, fused multiply-add (one rounding per step).
func kernelAVX2(res []float32, dim int, panel, halfNorm, best []float32, bidx []int32, idx *[panelWidth]int32) {
	_ = res[kernelRows*dim-1]
	_ = panel[dim*panelWidth-1]
	_ = halfNorm[panelWidth-1]
	_ = best[kernelRows*panelWidth-1]
	_ = bidx[kernelRows*panelWidth-1]
	dot6x16(&res[0], dim, &panel[0], &halfNorm[0], &best[0], &bidx[0], idx)
}

// dot6x16 is implemented in kernel_amd64.s. dim >= 1.
//
//go:noescape
func dot6x16(res *float32, dim int, panel, halfNorm, best *float32, bidx *int32, idx *[panelWidth]int32)
