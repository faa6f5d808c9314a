package rvq

import (
	"fmt"
	"math"
)

// Limits of the contract, shared with the CUDA kernel.
const (
	MaxStages  = 32   // Q: codebooks in total (over both chains of a split)
	MaxEntries = 4096 // K_q: entries per codebook
	MaxDim     = 1024 // D: latent width
)

// MaxSquaredNorm bounds the squared L2 norm of every codeword and every frame
// of x (2^100). With Q <= 32 stages the residual's squared norm then stays
// below 2^111 and every fp32 distance and dot product stays finite.
const MaxSquaredNorm = 0x1p100

// panelWidth is the number of codewords in one packed panel: the micro-kernel
// computes panelWidth distances per frame at a time.
const panelWidth = 16

// stage is one prepared codebook.
type stage struct {
	k int
	// panels holds ceil(k/panelWidth) panels of [dim][panelWidth] float32:
	// codeword p*panelWidth+l, dimension d is panels[(p*dim+d)*panelWidth+l].
	// Entries past k are zero.
	panels []float32
	// halfNorm[e] = ||C_e||^2 / 2 for e < k and +Inf for the padding, so a
	// padded entry never wins.
	halfNorm []float32
	// words holds the codewords row-major as bf16 bit patterns ([k][dim],
	// exact), for the contiguous gathers of the residual update and Decode.
	words []uint16
	// rows, for fp32 codebooks (NewCodebooksF32) only, holds the codewords
	// row-major in float32 ([k][dim]); the gathers then read it instead of
	// words, which holds the values rounded to bf16 (nearest even).
	rows []float32
}

// codeword returns entry e as bf16 bit patterns (widen with BF16ToFloat32).
func (s *stage) codeword(dim, e int) []uint16 { return s.words[e*dim : (e+1)*dim] }

// Codebooks is a prepared, immutable set of RVQ codebooks of one latent width
// D: Q stages of K_q entries each, held as float32 panels for the distance
// kernel plus bf16 rows for gathers (6 bytes per codebook value). It is safe
// for concurrent use.
type Codebooks struct {
	dim    int
	stages []stage
	// split is the number of stages in the first chain (Mimi's semantic
	// quantiser); 0 means a single chain.
	split int
	// bounds holds the chains' stage ranges [lo, hi).
	bounds [][2]int
	// f32 is set for codebooks made by NewCodebooksF32.
	f32 bool
}

// NewCodebooksF32 prepares float32 codebooks of width dim as published
// codecs store them (EnCodec, Mimi, DAC): one row-major [K_q, dim] slice per
// stage, any finite values, each codeword's squared norm at most
// MaxSquaredNorm. Distances, residuals and sums are float32 as in
// NewCodebooks; the codewords are used exactly as given, not rounded.
//
// F32 reports such codebooks: device paths that hold bf16 images of the
// codewords must not score them (DeviceCodebooks runs them on its exact
// fp32 kernel).
func NewCodebooksF32(dim int, stages ...[]float32) (*Codebooks, error) {
	c, err := newCodebooks(dim, stages, func(dst, src []float32) (int, error) {
		for i, v := range src {
			if math.Float32bits(v)&0x7F800000 == 0x7F800000 {
				return i, fmt.Errorf("value %v is not finite", v)
			}
			dst[i] = v
		}
		return 0, nil
	})
	if err != nil {
		return nil, err
	}
	c.f32 = true
	for q, s := range stages {
		c.stages[q].rows = append([]float32(nil), s...)
	}
	return c, nil
}

// F32 reports whether c holds fp32 codewords (NewCodebooksF32) rather than
// bf16 ones.
func (c *Codebooks) F32() bool { return c.f32 }

// nearestBF16 rounds v to the nearest bf16 pattern (ties to even); v finite.
func nearestBF16(v float32) uint16 {
	b := math.Float32bits(v)
	return uint16((b + 0x7FFF + (b>>16)&1) >> 16)
}

// NewCodebooks prepares float32 codebooks of width dim: one row-major
// [K_q, dim] slice per stage. Every value must be finite and exactly
// representable in bfloat16, and every codeword's squared norm at most
// MaxSquaredNorm.
func NewCodebooks(dim int, stages ...[]float32) (*Codebooks, error) {
	return newCodebooks(dim, stages, func(dst, src []float32) (int, error) {
		for i, v := range src {
			bits := math.Float32bits(v)
			if bits&0x7F800000 == 0x7F800000 {
				return i, fmt.Errorf("value %v is not finite", v)
			}
			if bits&0xFFFF != 0 {
				return i, fmt.Errorf("value %v is not exactly representable in bfloat16 (codebooks must hold bf16 values; round them explicitly if that is intended)", v)
			}
			dst[i] = v
		}
		return 0, nil
	})
}

// NewCodebooksBF16 prepares codebooks given as bfloat16 bit patterns, one
// row-major [K_q, dim] slice per stage. NaN and infinite patterns are an error.
func NewCodebooksBF16(dim int, stages ...[]uint16) (*Codebooks, error) {
	return newCodebooks(dim, stages, func(dst []float32, src []uint16) (int, error) {
		for i, b := range src {
			if b&0x7F80 == 0x7F80 {
				return i, fmt.Errorf("bf16 pattern %#04x is not finite", b)
			}
			dst[i] = BF16ToFloat32(b)
		}
		return 0, nil
	})
}

// BF16ToFloat32 widens a bfloat16 bit pattern to float32 (exact).
func BF16ToFloat32(b uint16) float32 { return math.Float32frombits(uint32(b) << 16) }

// newCodebooks checks the shapes, converts each codeword with widen (which
// checks its values and returns the index of a bad one with its error) and
// packs the panels.
func newCodebooks[E any](dim int, stages [][]E, widen func(dst []float32, src []E) (int, error)) (*Codebooks, error) {
	if dim < 1 || dim > MaxDim {
		return nil, fmt.Errorf("codebook width D = %d, want 1..%d", dim, MaxDim)
	}
	if len(stages) < 1 || len(stages) > MaxStages {
		return nil, fmt.Errorf("%d codebooks (stages), want 1..%d", len(stages), MaxStages)
	}
	c := &Codebooks{dim: dim, stages: make([]stage, len(stages))}
	row := make([]float32, dim)
	for q, s := range stages {
		if len(s) == 0 || len(s)%dim != 0 {
			return nil, fmt.Errorf("codebook %d has %d values, want K*%d with K >= 1", q, len(s), dim)
		}
		k := len(s) / dim
		if k > MaxEntries {
			return nil, fmt.Errorf("codebook %d has K = %d entries, want at most %d", q, k, MaxEntries)
		}
		np := (k + panelWidth - 1) / panelWidth
		st := stage{k: k, panels: make([]float32, np*dim*panelWidth), halfNorm: make([]float32, np*panelWidth),
			words: make([]uint16, k*dim)}
		for e := range st.halfNorm {
			st.halfNorm[e] = float32(math.Inf(1))
		}
		for e := 0; e < k; e++ {
			if d, err := widen(row, s[e*dim:(e+1)*dim]); err != nil {
				return nil, fmt.Errorf("codebook %d entry %d dim %d: %w", q, e, d, err)
			}
			var norm float32
			panel := st.panels[e/panelWidth*dim*panelWidth+e%panelWidth:]
			word := st.words[e*dim : (e+1)*dim]
			for d, v := range row {
				panel[d*panelWidth] = v
				word[d] = nearestBF16(v)
				norm += v * v
			}
			if !(norm <= MaxSquaredNorm) {
				return nil, fmt.Errorf("codebook %d entry %d has squared norm %g, want at most %g (fp32 distances would overflow)", q, e, norm, MaxSquaredNorm)
			}
			st.halfNorm[e] = norm / 2
		}
		c.stages[q] = st
	}
	c.bounds = chainBounds(len(stages), 0)
	return c, nil
}

// WithSplit returns a view of c whose first n stages form one chain (Mimi's
// semantic quantiser, n = 1) and whose remaining stages form a second chain;
// both chains quantise x itself (see the package doc). n = 0 restores a
// single chain. It shares c's memory.
func (c *Codebooks) WithSplit(n int) (*Codebooks, error) {
	if n < 0 || n >= len(c.stages) {
		return nil, fmt.Errorf("split = %d, want 0 (one chain) or 1..%d (stages in the first chain, of %d)", n, len(c.stages)-1, len(c.stages))
	}
	v := *c
	v.split, v.bounds = n, chainBounds(len(c.stages), n)
	return &v, nil
}

// Dim is the latent width D.
func (c *Codebooks) Dim() int { return c.dim }

// NumStages is Q, the number of codebooks (over both chains of a split).
func (c *Codebooks) NumStages() int { return len(c.stages) }

// Size returns K_q, the number of entries of codebook q.
func (c *Codebooks) Size(q int) int { return c.stages[q].k }

// Split is the number of stages in the first chain (0: a single chain).
func (c *Codebooks) Split() int { return c.split }

// chains returns the stage ranges [lo, hi) of the chains, in order.
func (c *Codebooks) chains() [][2]int { return c.bounds }

// chainBounds computes the chain ranges of q stages split after the first n
// (n = 0: one chain).
func chainBounds(q, n int) [][2]int {
	if n == 0 {
		return [][2]int{{0, q}}
	}
	return [][2]int{{0, n}, {n, q}}
}
