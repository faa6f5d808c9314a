package rvq

// kernelRows is the number of frames the micro-kernel handles per call.
const kernelRows = 12

// kernelFunc is the distance micro-kernel. For the kernelRows frames of res
// (row-major, row stride dim) and the panelWidth codewords of panel
// ([dim][panelWidth], dimension-major) it computes
//
//	s[i][l] = halfNorm[l] - dot(res[i], C_l)
//
// in float32 and folds it into the running per-lane minimum: where
// s[i][l] < best[i*panelWidth+l] (strictly), best takes s and bidx takes
// idx[l]. Panels are visited in increasing index order, so on ties each lane
// keeps its lowest index. res, best and bidx have exactly kernelRows rows.
type kernelFunc func(res []float32, dim int, panel, halfNorm, best []float32, bidx []int32, idx *[panelWidth]int32)

// kernel is the micro-kernel in use: kernelGo, or an assembly kernel chosen
// at init on CPUs that support it.
var kernel kernelFunc = kernelGo

// kernels lists every micro-kernel this CPU can run, by name, for tests and
// benchmarks.
var kernels = map[string]kernelFunc{"go": kernelGo}

// kernelGo is the portable micro-kernel: one frame and half a panel (8
// codewords, 8 scalar accumulators the compiler keeps in registers) at a
// time, dimensions summed in increasing order.
func kernelGo(res []float32, dim int, panel, halfNorm, best []float32, bidx []int32, idx *[panelWidth]int32) {
	const half = panelWidth / 2
	for i := 0; i < kernelRows; i++ {
		r := res[i*dim : (i+1)*dim]
		b := (*[panelWidth]float32)(best[i*panelWidth : (i+1)*panelWidth])
		bi := (*[panelWidth]int32)(bidx[i*panelWidth : (i+1)*panelWidth])
		for h := 0; h < panelWidth; h += half {
			var a0, a1, a2, a3, a4, a5, a6, a7 float32
			for d, v := range r {
				p := (*[half]float32)(panel[d*panelWidth+h : d*panelWidth+h+half])
				a0 += v * p[0]
				a1 += v * p[1]
				a2 += v * p[2]
				a3 += v * p[3]
				a4 += v * p[4]
				a5 += v * p[5]
				a6 += v * p[6]
				a7 += v * p[7]
			}
			for l, a := range [half]float32{a0, a1, a2, a3, a4, a5, a6, a7} {
				if s := halfNorm[h+l] - a; s < b[h+l] {
					b[h+l], bi[h+l] = s, idx[h+l]
				}
			}
		}
	}
}
