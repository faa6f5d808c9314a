//go:build !(goexperiment.simd && amd64)

package fbank

// Without GOEXPERIMENT=simd on amd64 there is no batch path: newBatchPlan
// returns nil and the frontend runs the scalar code (see simd_amd64.go).

// lanes is how many frames the batch path computes per call.
const lanes = 4

type batchPlan struct{}

type batchScratch struct{}

func newBatchPlan(*Frontend) *batchPlan { return nil }

func (*batchPlan) newScratch() *batchScratch { return nil }

// input and logMel are never called: Frontend only uses a non-nil batchPlan.
func (*batchPlan) input(*batchScratch) ([]float64, frameLayout) {
	panic("fbank: batch path called without GOEXPERIMENT=simd")
}

func (*batchPlan) fill(*Frontend, []float32, geometry, int, *batchScratch) bool {
	panic("fbank: batch path called without GOEXPERIMENT=simd")
}

func (*batchPlan) logMel(groupOut, *batchScratch) float64 {
	panic("fbank: batch path called without GOEXPERIMENT=simd")
}
