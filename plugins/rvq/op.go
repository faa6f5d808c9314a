package rvq

import (
	"context"
	"fmt"
	"math"

	"github.com/edgespeech/edge/runtime"
)

const codebooksDoc = "Q codebooks of K entries of width D, bfloat16: bf16 bit patterns (u16 or i16) or f32 values exactly representable in bf16. " +
	"With codebook_sizes: [Q, Kmax, D] uses the first K_q rows of stage q, [sum K_q, D] is the stages concatenated. Rank 2 without codebook_sizes is one stage."

var (
	codebooksInput = runtime.TensorSpec{Name: "codebooks", DTypes: []runtime.DType{runtime.U16, runtime.I16, runtime.F32},
		Dims: []string{"Q", "K", "D"}, BatchOptional: true, Doc: codebooksDoc}
	lengthsInput = runtime.TensorSpec{Name: "lengths", DTypes: []runtime.DType{runtime.I64, runtime.I32}, Dims: []string{"B"},
		Optional: true, Host: true, Doc: "valid frames per item (0..T); frames past it are padding (code -1, quantized 0)"}
	quantizedOutput = runtime.TensorSpec{Name: "quantized", DTypes: []runtime.DType{runtime.F32}, Dims: []string{"B", "T", "D"},
		Doc: "sum of the selected codewords (fp32, stage order; split: first chain's sum + second chain's)"}
	params = []runtime.ParamSpec{
		{Name: "codebook_sizes", Kind: runtime.Ints, Doc: "K_q per stage, for codebooks of different sizes (see the codebooks input)"},
		{Name: "fp32", Kind: runtime.Boolean, Default: false, Doc: "f32 codebooks hold any finite fp32 values, used exactly (published EnCodec/Mimi/DAC codebooks); codes equal the CPU's on both backends (CUDA: the exact fp32 kernel rvq_encode_f32)"},
		{Name: "split", Kind: runtime.Int, Default: 0, Doc: "Mimi split RVQ: the first `split` stages and the rest are two chains both fed x (Mimi: 1); 0 = one chain"},
	}
)

func init() {
	runtime.Register(runtime.OpSpec{
		Name: "rvq_encode",
		Doc: "Greedy residual vector quantisation (seed 001): per frame and stage, the nearest codeword " +
			"(squared L2, ties to the lowest index) is chosen and subtracted from the fp32 residual. " +
			"The codebooks are checked and packed on every call (about 4 ms for 8x1024x128); Go callers " +
			"that reuse them can hold an rvq.Codebooks instead.",
		Inputs: []runtime.TensorSpec{
			{Name: "x", DTypes: []runtime.DType{runtime.F32}, Dims: []string{"B", "T", "D"}, Doc: "latents, finite"},
			codebooksInput,
			lengthsInput,
		},
		Outputs: []runtime.TensorSpec{
			{Name: "codes", DTypes: []runtime.DType{runtime.I32}, Dims: []string{"B", "T", "Q"}, Doc: "chosen entry per stage; -1 on padded frames"},
			quantizedOutput,
		},
		Params: params,
		New:    newOp(encodeOp),
	})
	runtime.Register(runtime.OpSpec{
		Name: "rvq_decode",
		Doc:  "Sum of the codewords selected by RVQ codes, in rvq_encode's order (bit-identical to its quantized).",
		Inputs: []runtime.TensorSpec{
			{Name: "codes", DTypes: []runtime.DType{runtime.I32, runtime.I64}, Dims: []string{"B", "T", "Q"}, Doc: "entry per stage, 0..K_q-1 on valid frames"},
			codebooksInput,
			lengthsInput,
		},
		Outputs: []runtime.TensorSpec{quantizedOutput},
		Params:  params,
		New:     newOp(decodeOp),
	})
}

// op is rvq_encode or rvq_decode on the CPU backend.
type op struct {
	sizes []int
	split int
	fp32  bool
	run   func(ctx context.Context, c *Codebooks, in runtime.Tensors) (runtime.Tensors, error)
}

func newOp(run func(context.Context, *Codebooks, runtime.Tensors) (runtime.Tensors, error)) func(runtime.Params, runtime.Backend) (runtime.Op, error) {
	return func(p runtime.Params, b runtime.Backend) (runtime.Op, error) {
		if b.Name() != "cpu" {
			return nil, fmt.Errorf("no implementation for backend %q (available: cpu)", b.Name())
		}
		o := &op{sizes: p.IntList("codebook_sizes"), split: p.Int("split"), fp32: p.Bool("fp32")}
		if o.split < 0 || o.split >= MaxStages {
			return nil, fmt.Errorf("split = %d, want 0 (one chain) or 1..%d", o.split, MaxStages-1)
		}
		if err := checkSizes(o.sizes); err != nil {
			return nil, err
		}
		o.run = run
		return o, nil
	}
}

func (o *op) Run(ctx context.Context, in runtime.Tensors) (runtime.Tensors, error) {
	c, err := codebooksFromTensor(in["codebooks"], o.sizes, o.fp32)
	if err != nil {
		return nil, fmt.Errorf("input \"codebooks\" %v: %w", in["codebooks"].Shape(), err)
	}
	if c, err = c.WithSplit(o.split); err != nil {
		return nil, err
	}
	return o.run(ctx, c, in)
}

func encodeOp(ctx context.Context, c *Codebooks, in runtime.Tensors) (runtime.Tensors, error) {
	x := in["x"]
	sh := x.Shape()
	if sh[2] != c.Dim() {
		return nil, fmt.Errorf("input \"x\" has shape %v (D = %d), but the codebooks have D = %d", sh, sh[2], c.Dim())
	}
	bt, err := batchOf("x", sh, in["lengths"])
	if err != nil {
		return nil, err
	}
	codes, err := runtime.NewTensor(runtime.I32, runtime.Shape{sh[0], sh[1], c.NumStages()})
	if err != nil {
		return nil, err
	}
	quantized, err := runtime.NewTensor(runtime.F32, sh)
	if err != nil {
		return nil, err
	}
	if err := c.Encode(ctx, x.F32(), bt, codes.I32(), quantized.F32()); err != nil {
		return nil, err
	}
	return runtime.Tensors{"codes": codes, "quantized": quantized}, nil
}

func decodeOp(ctx context.Context, c *Codebooks, in runtime.Tensors) (runtime.Tensors, error) {
	ct := in["codes"]
	sh := ct.Shape()
	if sh[2] != c.NumStages() {
		return nil, fmt.Errorf("input \"codes\" has shape %v (Q = %d), but there are %d codebooks", sh, sh[2], c.NumStages())
	}
	bt, err := batchOf("codes", sh, in["lengths"])
	if err != nil {
		return nil, err
	}
	codes, err := codesI32(ct)
	if err != nil {
		return nil, err
	}
	quantized, err := runtime.NewTensor(runtime.F32, runtime.Shape{sh[0], sh[1], c.Dim()})
	if err != nil {
		return nil, err
	}
	if err := c.Decode(ctx, codes, bt, quantized.F32()); err != nil {
		return nil, err
	}
	return runtime.Tensors{"quantized": quantized}, nil
}

// codesI32 returns the codes as int32, narrowing i64 codes; a value outside
// the int32 range is an error naming it.
func codesI32(t *runtime.Tensor) ([]int32, error) {
	if t.DType() == runtime.I32 {
		return t.I32(), nil
	}
	src := t.I64()
	out := make([]int32, len(src))
	for i, v := range src {
		if v < math.MinInt32 || v > math.MaxInt32 {
			sh := t.Shape()
			return nil, fmt.Errorf("codes[%d, %d, %d] = %d, want 0..K_q-1", i/(sh[1]*sh[2]), i/sh[2]%sh[1], i%sh[2], v)
		}
		out[i] = int32(v)
	}
	return out, nil
}

// batchOf builds the Batch of a [B, T, ...] input and the optional lengths.
func batchOf(name string, sh runtime.Shape, lengths *runtime.Tensor) (Batch, error) {
	bt := Batch{B: sh[0], T: sh[1]}
	if bt.B < 1 || bt.T < 1 {
		return bt, fmt.Errorf("input %q has shape %v: want at least one item and one frame", name, sh)
	}
	if lengths == nil {
		return bt, nil
	}
	if n := lengths.Shape()[0]; n != bt.B {
		return bt, fmt.Errorf("input \"lengths\" has shape %v, want [B] = [%d] (B of %q %v)", lengths.Shape(), bt.B, name, sh)
	}
	bt.Lengths = make([]int, bt.B)
	for b := range bt.Lengths {
		var n int64
		if lengths.DType() == runtime.I32 {
			n = int64(lengths.I32()[b])
		} else {
			n = lengths.I64()[b]
		}
		if n < 0 || n > int64(bt.T) {
			return bt, fmt.Errorf("input \"lengths\"[%d] = %d, want 0..T = 0..%d", b, n, bt.T)
		}
		bt.Lengths[b] = int(n)
	}
	return bt, nil
}

// CodebooksFromTensor prepares codebooks from a host tensor: u16 or i16 bf16
// bit patterns, or f32 values exactly representable in bf16. Shapes:
// [Q, K, D] (sizes nil: every stage has K entries; sizes of length Q: stage q
// uses its first sizes[q] <= K rows), or [N, D] (sizes nil: one stage of N
// entries; otherwise the stages concatenated, sum(sizes) = N).
func CodebooksFromTensor(t *runtime.Tensor, sizes []int) (*Codebooks, error) {
	return codebooksFromTensor(t, sizes, false)
}

// CodebooksFromTensorF32 is CodebooksFromTensor for f32 codebooks of any
// finite values (NewCodebooksF32); bf16 bit patterns are refused.
func CodebooksFromTensorF32(t *runtime.Tensor, sizes []int) (*Codebooks, error) {
	if t.DType() != runtime.F32 {
		return nil, fmt.Errorf("dtype %v, want f32 codebooks (fp32 = true)", t.DType())
	}
	return codebooksFromTensor(t, sizes, true)
}

func codebooksFromTensor(t *runtime.Tensor, sizes []int, fp32 bool) (*Codebooks, error) {
	if fp32 && t.DType() != runtime.F32 {
		return nil, fmt.Errorf("dtype %v, want f32 codebooks (fp32 = true)", t.DType())
	}
	sh := t.Shape()
	if err := checkSizes(sizes); err != nil {
		return nil, err
	}
	var rows, stride, dim int // rows per stage slot, rows between stage starts
	switch len(sh) {
	case 3:
		rows, stride, dim = sh[1], sh[1], sh[2]
		if sizes == nil {
			sizes = make([]int, sh[0])
			for q := range sizes {
				sizes[q] = rows
			}
		}
		if len(sizes) != sh[0] {
			return nil, fmt.Errorf("codebook_sizes has %d entries, want Q = %d", len(sizes), sh[0])
		}
		for q, k := range sizes {
			if k > rows {
				return nil, fmt.Errorf("codebook_sizes[%d] = %d exceeds the %d rows of each codebook", q, k, rows)
			}
		}
	case 2:
		dim = sh[1]
		if sizes == nil {
			sizes = []int{sh[0]}
		}
		total := 0
		for _, k := range sizes {
			total += k
		}
		if total != sh[0] {
			return nil, fmt.Errorf("codebook_sizes %v sum to %d, want the %d rows of the concatenated codebooks", sizes, total, sh[0])
		}
	default:
		return nil, fmt.Errorf("want rank 3 [Q, K, D] or rank 2 [K, D], got rank %d", len(sh))
	}
	if dim < 1 || dim > MaxDim {
		return nil, fmt.Errorf("codebook width D = %d, want 1..%d", dim, MaxDim)
	}
	if len(sizes) < 1 || len(sizes) > MaxStages {
		return nil, fmt.Errorf("%d codebooks (stages), want 1..%d", len(sizes), MaxStages)
	}
	// lo returns the first value of stage q.
	lo := func(q int) int {
		if stride > 0 {
			return q * stride * dim
		}
		n := 0
		for _, k := range sizes[:q] {
			n += k
		}
		return n * dim
	}
	switch t.DType() {
	case runtime.F32:
		if fp32 {
			return NewCodebooksF32(dim, stageSlices(t.F32(), sizes, dim, lo)...)
		}
		return NewCodebooks(dim, stageSlices(t.F32(), sizes, dim, lo)...)
	case runtime.U16:
		return NewCodebooksBF16(dim, stageSlices(t.U16(), sizes, dim, lo)...)
	case runtime.I16:
		src := t.I16()
		bits := make([]uint16, len(src))
		for i, v := range src {
			bits[i] = uint16(v)
		}
		return NewCodebooksBF16(dim, stageSlices(bits, sizes, dim, lo)...)
	}
	return nil, fmt.Errorf("dtype %v, want u16 or i16 (bf16 bit patterns) or f32", t.DType())
}

// checkSizes checks an optional codebook_sizes list.
func checkSizes(sizes []int) error {
	if sizes == nil {
		return nil
	}
	if len(sizes) < 1 || len(sizes) > MaxStages {
		return fmt.Errorf("codebook_sizes has %d entries, want 1..%d", len(sizes), MaxStages)
	}
	for q, k := range sizes {
		if k < 1 || k > MaxEntries {
			return fmt.Errorf("codebook_sizes[%d] = %d, want 1..%d", q, k, MaxEntries)
		}
	}
	return nil
}

func stageSlices[E any](data []E, sizes []int, dim int, lo func(int) int) [][]E {
	out := make([][]E, len(sizes))
	for q, k := range sizes {
		out[q] = data[lo(q) : lo(q)+k*dim]
	}
	return out
}
