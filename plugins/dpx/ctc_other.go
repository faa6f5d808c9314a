//go:build !amd64

package dpx

var useAVX2 = false

func ctcStepF32AVX2(prev, pen *float32, lab *int32, e, cur *float32, plane1, plane2 *byte, n int) {
	panic("dpx: AVX2 kernel on a non-amd64 build")
}

func ctcStepI32AVX2(prev, mask, lab, e, cur *int32, plane1, plane2 *byte, n int, m int32) int32 {
	panic("dpx: AVX2 kernel on a non-amd64 build")
}
