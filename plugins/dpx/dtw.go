package dpx

import (
	"fmt"
	"math"
)

// DTW choices, in backtrace tie order.
const (
	dtwDiag = 0 // from (i-1, j-1)
	dtwUp   = 1 // from (i-1, j)
	dtwLeft = 2 // from (i, j-1)
)

// DTWResult is a warping path and its total cost.
type DTWResult struct {
	// Path lists the matched (i, j) cells from (0, 0) to (N-1, M-1); each
	// step is diagonal, (i-1, j) -> (i, j) or (i, j-1) -> (i, j).
	Path [][2]int32
	// Total is D[N-1][M-1], the sum of the costs along Path.
	Total float32
}

// DTW aligns two sequences by min-plus dynamic time warping over cost, a
// row-major [N, M] matrix: D[0][0] = cost[0][0], D[i][j] = cost[i][j] +
// min(D[i-1][j-1], D[i-1][j], D[i][j-1]) over the cells that exist, each sum
// rounded to float32 as written. Ties go to the diagonal, then (i-1, j),
// then (i, j-1) — the forward pass records that choice in 2 bits per cell
// and the backtrace follows it, which is the same path as comparing the D
// values while backtracking. Costs must be finite.
//
// Int32 precision quantises the costs (see Int32) and accumulates in int32
// with the same tie order; it refuses inputs where max|q| * (N+M-1) could
// overflow int32, so no renormalisation is needed. Total is the integer
// total divided by the scale.
func DTW(cost []float32, N, M int, precision Precision, scale float64) (*DTWResult, error) {
	if N < 1 || M < 1 || len(cost) != N*M {
		return nil, fmt.Errorf("dtw: cost has %d values for N=%d, M=%d; want N*M >= 1", len(cost), N, M)
	}
	if err := checkFinite("cost", cost, M, false); err != nil {
		return nil, err
	}
	var bp bits2
	bp.reset(N, M)
	var total float32
	if precision == Int32 {
		q, err := newQuantizer(scale)
		if err != nil {
			return nil, err
		}
		cq := make([]int32, len(cost))
		q.row(cq, cost)
		var mx int64
		for _, v := range cq {
			mx = max(mx, int64(v), -int64(v))
		}
		if mx*int64(N+M-1) > math.MaxInt32 {
			return nil, fmt.Errorf("dtw: int32 path: max |cost| %d quanta * (N+M-1) = %d overflows int32; lower the scale (%v)", mx, mx*int64(N+M-1), q.scale)
		}
		total = float32(float64(dtwForward(cq, N, M, &bp)) / q.scale)
	} else {
		total = dtwForward(cost, N, M, &bp)
	}
	n := N + M - 1
	path := make([][2]int32, n)
	i, j := N-1, M-1
	for {
		n--
		path[n] = [2]int32{int32(i), int32(j)}
		if i == 0 && j == 0 {
			break
		}
		switch get2(bp.row(i), j) {
		case dtwDiag:
			i, j = i-1, j-1
		case dtwUp:
			i--
		default:
			j--
		}
	}
	return &DTWResult{Path: path[n:], Total: total}, nil
}

// dtwForward fills the choices and returns D[N-1][M-1], keeping two rows.
func dtwForward[V int32 | float32](c []V, N, M int, bp *bits2) V {
	prev, cur := make([]V, M), make([]V, M)
	cur[0] = c[0]
	row := bp.row(0)
	for j := 1; j < M; j++ {
		cur[j] = c[j] + cur[j-1]
		set2(row, j, dtwLeft)
	}
	for i := 1; i < N; i++ {
		prev, cur = cur, prev
		ci := c[i*M : (i+1)*M]
		row = bp.row(i)
		cur[0] = ci[0] + prev[0]
		set2(row, 0, dtwUp)
		for j := 1; j < M; j++ {
			ul, up, left := prev[j-1], prev[j], cur[j-1]
			m, k := left, uint64(dtwLeft)
			if up <= left {
				m, k = up, dtwUp
			}
			if ul <= up && ul <= left {
				m, k = ul, dtwDiag
			}
			cur[j] = ci[j] + m
			set2(row, j, k)
		}
	}
	return cur[M-1]
}
