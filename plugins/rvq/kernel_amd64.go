package rvq

import "golang.org/x/sys/cpu"

func init() {
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		kernel = kernelAVX2
		kernels["avx2"] = kernelAVX2
	}
	if cpu.X86.HasAVX512F {
		kernel = kernelAVX512
		kernels["avx512"] = kernelAVX512
	}
}

// checkKernelArgs makes the assembly kernels' reads and writes provably in
// bounds (a short slice panics here, in Go, instead of corrupting memory).
func checkKernelArgs(res []float32, dim int, panel, halfNorm, best []float32, bidx []int32) {
	_ = res[kernelRows*dim-1]
	_ = panel[dim*panelWidth-1]
	_ = halfNorm[panelWidth-1]
	_ = best[kernelRows*panelWidth-1]
	_ = bidx[kernelRows*panelWidth-1]
}

// kernelAVX2 is kernelGo in AVX2+FMA assembly, six frames per call of
// dot6x16: 6 frames x 16 codewords in twelve 8-lane accumulators; each
// dimension is one broadcast of a frame value times two panel vectors, fused
// multiply-add (one rounding per step), dimensions in increasing order.
func kernelAVX2(res []float32, dim int, panel, halfNorm, best []float32, bidx []int32, idx *[panelWidth]int32) {
	checkKernelArgs(res, dim, panel, halfNorm, best, bidx)
	for r := 0; r < kernelRows; r += 6 {
		dot6x16(&res[r*dim], dim, &panel[0], &halfNorm[0], &best[r*panelWidth], &bidx[r*panelWidth], idx)
	}
}

// kernelAVX512 is kernelGo in AVX-512 assembly (dot12x16): 12 frames x 16
// codewords in twelve 16-lane accumulators, each dimension one panel vector
// times an embedded broadcast of each frame's value, fused multiply-add,
// dimensions in increasing order; the running minimum is updated with masked
// stores.
func kernelAVX512(res []float32, dim int, panel, halfNorm, best []float32, bidx []int32, idx *[panelWidth]int32) {
	checkKernelArgs(res, dim, panel, halfNorm, best, bidx)
	dot12x16(&res[0], dim, &panel[0], &halfNorm[0], &best[0], &bidx[0], idx)
}

// dot6x16 and dot12x16 are implemented in kernel_amd64.s; dim >= 1.
//
//go:noescape
func dot6x16(res *float32, dim int, panel, halfNorm, best *float32, bidx *int32, idx *[panelWidth]int32)

//go:noescape
func dot12x16(res *float32, dim int, panel, halfNorm, best *float32, bidx *int32, idx *[panelWidth]int32)
