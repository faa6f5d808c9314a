package dpx

import (
	"context"
	"fmt"
	"runtime"
	"sync"

	rt "github.com/edgespeech/edge/runtime"
)

// The ops wrap the plain functions above. Every op takes an optional batch
// dimension (outputs always have it), ragged items through optional
// lengths, and spreads the batch over all cores (GOMAXPROCS workers, one
// scratch per worker). Items beyond their length are padded with -1
// (labels, paths) and 0 (scores).

var precisionParams = []rt.ParamSpec{
	{Name: "precision", Kind: rt.String, Default: "f32", Enum: []string{"f32", "i32"},
		Doc: "f32: float32 recurrence (reference-exact); i32: fixed point, the DPX kernels' contract"},
	{Name: "scale", Kind: rt.Float, Default: float64(DefaultScale),
		Doc: "fixed-point quanta per unit of the log-domain inputs (precision=i32)"},
}

var lengthsSpec = rt.TensorSpec{Name: "lengths", DTypes: []rt.DType{rt.I64, rt.I32}, Dims: []string{"B"}, Optional: true, Host: true,
	Doc: "valid frames per item (default: all)"}

func init() {
	rt.Register(rt.OpSpec{
		Name: "ctc_align",
		Doc:  "CTC forced alignment (Viterbi over the 2L+1 blank-interleaved trellis), torchaudio forced_align semantics",
		Inputs: []rt.TensorSpec{
			{Name: "log_probs", DTypes: []rt.DType{rt.F32}, Dims: []string{"B", "T", "C"}, BatchOptional: true, Doc: "log-softmax emissions"},
			{Name: "targets", DTypes: []rt.DType{rt.I64, rt.I32}, Dims: []string{"B", "L"}, BatchOptional: true, Doc: "token ids, -1 padded at the end"},
			lengthsSpec,
		},
		Outputs: []rt.TensorSpec{
			{Name: "alignment", DTypes: []rt.DType{rt.I32}, Dims: []string{"B", "T"}, Doc: "token id per frame, blank included; -1 past the item's length"},
			{Name: "frame_scores", DTypes: []rt.DType{rt.F32}, Dims: []string{"B", "T"}, Doc: "log-prob of each frame's token"},
			{Name: "score", DTypes: []rt.DType{rt.F32}, Dims: []string{"B"}, Doc: "sum of frame_scores"},
		},
		Params: append([]rt.ParamSpec{
			{Name: "blank", Kind: rt.Int, Default: 0, Doc: "blank token id"},
			{Name: "star", Kind: rt.Boolean, Default: false, Doc: "add a wildcard column with id C that targets may use"},
			{Name: "star_logprob", Kind: rt.Float, Default: 0.0, Doc: "log-prob of the wildcard column on every frame"},
			{Name: "max_memory", Kind: rt.Int, Default: 0, Doc: "backtrace memory per item in bytes (0: 256 MiB); checkpointing keeps within it"},
		}, precisionParams...),
		New: newAlignOp,
	})
	rt.Register(rt.OpSpec{
		Name: "ctc_greedy",
		Doc:  "CTC best-path decoding: argmax per frame (ties to the lowest id), merge repeats, drop blanks",
		Inputs: []rt.TensorSpec{
			{Name: "log_probs", DTypes: []rt.DType{rt.F32}, Dims: []string{"B", "T", "C"}, BatchOptional: true, Doc: "emissions (log-probs or logits)"},
			lengthsSpec,
		},
		Outputs: []rt.TensorSpec{
			{Name: "tokens", DTypes: []rt.DType{rt.I64}, Dims: []string{"B", "N"}, Doc: "token ids, -1 padded"},
			{Name: "spans", DTypes: []rt.DType{rt.I32}, Dims: []string{"B", "N", "2"}, Doc: "frames [start, end) of each token, -1 padded"},
			{Name: "token_lengths", DTypes: []rt.DType{rt.I64}, Dims: []string{"B"}, Doc: "tokens per item"},
		},
		Params: []rt.ParamSpec{{Name: "blank", Kind: rt.Int, Default: 0, Doc: "blank token id"}},
		New:    newGreedyOp,
	})
	rt.Register(rt.OpSpec{
		Name: "viterbi",
		Doc:  "max-plus HMM decoding with backtrace; ties to the lowest state index",
		Inputs: []rt.TensorSpec{
			{Name: "emissions", DTypes: []rt.DType{rt.F32}, Dims: []string{"B", "T", "S"}, BatchOptional: true, Doc: "log-domain emission scores"},
			{Name: "transitions", DTypes: []rt.DType{rt.F32}, Dims: []string{"S", "S"}, Doc: "log-domain transitions [from, to]"},
			{Name: "priors", DTypes: []rt.DType{rt.F32}, Dims: []string{"S"}, Doc: "log-domain initial scores"},
			lengthsSpec,
		},
		Outputs: []rt.TensorSpec{
			{Name: "path", DTypes: []rt.DType{rt.I32}, Dims: []string{"B", "T"}, Doc: "best state per frame, -1 padded"},
			{Name: "score", DTypes: []rt.DType{rt.F32}, Dims: []string{"B"}, Doc: "score of the best path"},
		},
		Params: precisionParams,
		New:    newViterbiOp,
	})
	rt.Register(rt.OpSpec{
		Name: "dtw",
		Doc:  "min-plus dynamic time warping, steps diagonal / (i-1,j) / (i,j-1), backtrace ties in that order",
		Inputs: []rt.TensorSpec{
			{Name: "cost", DTypes: []rt.DType{rt.F32}, Dims: []string{"B", "N", "M"}, BatchOptional: true, Doc: "local costs (finite)"},
			{Name: "lengths", DTypes: []rt.DType{rt.I64, rt.I32}, Dims: []string{"B", "2"}, Optional: true, Host: true, Doc: "valid (n, m) per item"},
		},
		Outputs: []rt.TensorSpec{
			{Name: "path", DTypes: []rt.DType{rt.I32}, Dims: []string{"B", "N+M", "2"}, Doc: "(i, j) cells from (0,0) to (n-1,m-1), -1 padded"},
			{Name: "path_len", DTypes: []rt.DType{rt.I32}, Dims: []string{"B"}, Doc: "cells on each path"},
			{Name: "cost_total", DTypes: []rt.DType{rt.F32}, Dims: []string{"B"}, Doc: "total cost of each path"},
		},
		Params: precisionParams,
		New:    newDTWOp,
	})
}

func cpuOnly(b rt.Backend) error {
	if b.Name() != "cpu" {
		return fmt.Errorf("no %s implementation yet; use the cpu backend", b.Name())
	}
	return nil
}

func precisionOf(p rt.Params) (Precision, float64, error) {
	pr, err := ParsePrecision(p.Str("precision"))
	if err != nil {
		return 0, 0, err
	}
	if _, err := newQuantizer(p.Float("scale")); err != nil {
		return 0, 0, err
	}
	return pr, p.Float("scale"), nil
}

// batched returns (B, inner dims) of a BatchOptional input of full rank r.
func batched(t *rt.Tensor, r int) (int, rt.Shape) {
	if t.Rank() == r {
		return t.Shape()[0], t.Shape()[1:]
	}
	return 1, t.Shape()
}

// dtwLengths reads dtw's optional lengths input [B, 2] (host) into the
// (n, m) of each item, 1..N and 1..M; without it every item is N x M.
func dtwLengths(in rt.Tensors, B, N, M int) ([]int64, error) {
	dims := make([]int64, 2*B)
	lt := in["lengths"]
	if lt == nil {
		for b := range B {
			dims[2*b], dims[2*b+1] = int64(N), int64(M)
		}
		return dims, nil
	}
	if !lt.Shape().Equal(rt.Shape{B, 2}) {
		return nil, fmt.Errorf("input \"lengths\" has shape %v; want [%d, 2] (n, m per item)", lt.Shape(), B)
	}
	for b := range B {
		n, m := intAt(lt, 2*b), intAt(lt, 2*b+1)
		if n < 1 || n > int64(N) || m < 1 || m > int64(M) {
			return nil, fmt.Errorf("lengths[%d] = (%d, %d); want 1..%d and 1..%d", b, n, m, N, M)
		}
		dims[2*b], dims[2*b+1] = n, m
	}
	return dims, nil
}

// lengthsOf reads the optional per-item lengths, each in [1, max].
func lengthsOf(in rt.Tensors, B, maxLen int) ([]int, error) {
	out := make([]int, B)
	t := in["lengths"]
	if t == nil {
		for i := range out {
			out[i] = maxLen
		}
		return out, nil
	}
	if t.Shape()[0] != B {
		return nil, fmt.Errorf("input \"lengths\" has shape %v; want [%d] (one per item)", t.Shape(), B)
	}
	for i := range out {
		v := intAt(t, i)
		if v < 1 || v > int64(maxLen) {
			return nil, fmt.Errorf("lengths[%d] = %d; want 1..%d", i, v, maxLen)
		}
		out[i] = int(v)
	}
	return out, nil
}

// intAt reads element i of an I64 or I32 tensor.
func intAt(t *rt.Tensor, i int) int64 {
	if t.DType() == rt.I32 {
		return int64(t.I32()[i])
	}
	return t.I64()[i]
}

// parallel runs fn for items 0..n-1 on up to GOMAXPROCS workers; fn gets
// its worker index for per-worker scratch. It returns the error of the
// lowest failing item and stops handing out items after a failure or when
// ctx is done.
func parallel(ctx context.Context, n int, fn func(worker, item int) error) error {
	workers := max(1, min(n, runtime.GOMAXPROCS(0)))
	errs := make([]error, n)
	var (
		mu   sync.Mutex
		next int
		stop bool
		wg   sync.WaitGroup
	)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				quit := stop || i >= n
				mu.Unlock()
				if quit {
					return
				}
				if err := ctx.Err(); err != nil {
					errs[i] = err
				} else {
					errs[i] = fn(w, i)
				}
				if errs[i] != nil {
					mu.Lock()
					stop = true
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

type alignOp struct {
	opt AlignOptions
	// workers keeps one Aligner (and its scratch) per worker across runs;
	// ops run from one goroutine at a time.
	workers []*Aligner
}

func newAlignOp(p rt.Params, b rt.Backend) (rt.Op, error) {
	if err := cpuOnly(b); err != nil {
		return nil, err
	}
	pr, scale, err := precisionOf(p)
	if err != nil {
		return nil, err
	}
	opt := AlignOptions{
		Blank: p.Int("blank"), Star: p.Bool("star"), StarLogProb: float32(p.Float("star_logprob")),
		Precision: pr, Scale: scale, MaxMemory: int64(p.Int("max_memory")),
	}
	if _, err := NewAligner(opt); err != nil {
		return nil, err
	}
	return &alignOp{opt: opt}, nil
}

func (o *alignOp) Run(ctx context.Context, in rt.Tensors) (rt.Tensors, error) {
	lp, tg := in["log_probs"], in["targets"]
	B, tc := batched(lp, 3)
	T, C := tc[0], tc[1]
	tB, tl := batched(tg, 2)
	if tB != B || (lp.Rank() == 2 && tg.Rank() == 2 && tB != 1) {
		return nil, fmt.Errorf("input \"targets\" has shape %v; want [%d, L] to match log_probs %v", tg.Shape(), B, lp.Shape())
	}
	if T == 0 || C == 0 {
		return nil, fmt.Errorf("input \"log_probs\" has shape %v; want T >= 1 frames and C >= 1 columns", lp.Shape())
	}
	L := tl[0]
	lengths, err := lengthsOf(in, B, T)
	if err != nil {
		return nil, err
	}
	targets := make([][]int, B)
	for b := range B {
		if targets[b], err = itemTargets(tg, b, L, C); err != nil {
			return nil, err
		}
	}
	ali := rt.Must(rt.NewTensor(rt.I32, rt.Shape{B, T}))
	fs := rt.Must(rt.NewTensor(rt.F32, rt.Shape{B, T}))
	sc := rt.Must(rt.NewTensor(rt.F32, rt.Shape{B}))
	for len(o.workers) < runtime.GOMAXPROCS(0) {
		a, err := NewAligner(o.opt)
		if err != nil {
			return nil, err
		}
		o.workers = append(o.workers, a)
	}
	workers := o.workers
	err = parallel(ctx, B, func(w, b int) error {
		n := lengths[b]
		res := Alignment{Labels: ali.I32()[b*T : b*T+n], FrameScores: fs.F32()[b*T : b*T+n]}
		if err := workers[w].Align(&res, lp.F32()[b*T*C:(b*T+n)*C], C, targets[b]); err != nil {
			return fmt.Errorf("item %d: %w", b, err)
		}
		for t := n; t < T; t++ {
			ali.I32()[b*T+t] = -1
		}
		sc.F32()[b] = res.Score
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rt.Tensors{"alignment": ali, "frame_scores": fs, "score": sc}, nil
}

type greedyOp struct{ blank int }

func newGreedyOp(p rt.Params, b rt.Backend) (rt.Op, error) {
	if err := cpuOnly(b); err != nil {
		return nil, err
	}
	if p.Int("blank") < 0 {
		return nil, fmt.Errorf("blank id %d: want >= 0", p.Int("blank"))
	}
	return &greedyOp{blank: p.Int("blank")}, nil
}

func (o *greedyOp) Run(ctx context.Context, in rt.Tensors) (rt.Tensors, error) {
	lp := in["log_probs"]
	B, tc := batched(lp, 3)
	T, C := tc[0], tc[1]
	if T == 0 || C == 0 {
		return nil, fmt.Errorf("input \"log_probs\" has shape %v; want T >= 1 frames and C >= 1 columns", lp.Shape())
	}
	lengths, err := lengthsOf(in, B, T)
	if err != nil {
		return nil, err
	}
	spans := make([][]Span, B)
	err = parallel(ctx, B, func(_, b int) error {
		s, err := Greedy(nil, lp.F32()[b*T*C:(b*T+lengths[b])*C], C, o.blank)
		if err != nil {
			return fmt.Errorf("item %d: %w", b, err)
		}
		spans[b] = s
		return nil
	})
	if err != nil {
		return nil, err
	}
	N := 0
	for _, s := range spans {
		N = max(N, len(s))
	}
	tok := rt.Must(rt.NewTensor(rt.I64, rt.Shape{B, N}))
	sp := rt.Must(rt.NewTensor(rt.I32, rt.Shape{B, N, 2}))
	nt := rt.Must(rt.NewTensor(rt.I64, rt.Shape{B}))
	for b, s := range spans {
		nt.I64()[b] = int64(len(s))
		for i := range N {
			k, st, en := int64(-1), int32(-1), int32(-1)
			if i < len(s) {
				k, st, en = int64(s[i].Token), s[i].Start, s[i].End
			}
			tok.I64()[b*N+i] = k
			sp.I32()[(b*N+i)*2], sp.I32()[(b*N+i)*2+1] = st, en
		}
	}
	return rt.Tensors{"tokens": tok, "spans": sp, "token_lengths": nt}, nil
}

type viterbiOp struct {
	precision Precision
	scale     float64
}

func newViterbiOp(p rt.Params, b rt.Backend) (rt.Op, error) {
	if err := cpuOnly(b); err != nil {
		return nil, err
	}
	pr, scale, err := precisionOf(p)
	if err != nil {
		return nil, err
	}
	return &viterbiOp{precision: pr, scale: scale}, nil
}

func (o *viterbiOp) Run(ctx context.Context, in rt.Tensors) (rt.Tensors, error) {
	em, tr, pr := in["emissions"], in["transitions"], in["priors"]
	B, ts := batched(em, 3)
	T, S := ts[0], ts[1]
	if T == 0 || S == 0 {
		return nil, fmt.Errorf("input \"emissions\" has shape %v; want T >= 1 frames and S >= 1 states", em.Shape())
	}
	if !tr.Shape().Equal(rt.Shape{S, S}) || !pr.Shape().Equal(rt.Shape{S}) {
		return nil, fmt.Errorf("inputs \"transitions\" %v and \"priors\" %v; want [%d,%d] and [%d] for S=%d states", tr.Shape(), pr.Shape(), S, S, S, S)
	}
	h, err := NewHMM(tr.F32(), pr.F32(), S, o.precision, o.scale)
	if err != nil {
		return nil, err
	}
	lengths, err := lengthsOf(in, B, T)
	if err != nil {
		return nil, err
	}
	path := rt.Must(rt.NewTensor(rt.I32, rt.Shape{B, T}))
	sc := rt.Must(rt.NewTensor(rt.F32, rt.Shape{B}))
	err = parallel(ctx, B, func(_, b int) error {
		n := lengths[b]
		row := path.I32()[b*T : (b+1)*T]
		_, s, err := h.Decode(row[:n], em.F32()[b*T*S:(b*T+n)*S])
		if err != nil {
			return fmt.Errorf("item %d: %w", b, err)
		}
		for t := n; t < T; t++ {
			row[t] = -1
		}
		sc.F32()[b] = s
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rt.Tensors{"path": path, "score": sc}, nil
}

type dtwOp struct {
	precision Precision
	scale     float64
}

func newDTWOp(p rt.Params, b rt.Backend) (rt.Op, error) {
	if err := cpuOnly(b); err != nil {
		return nil, err
	}
	pr, scale, err := precisionOf(p)
	if err != nil {
		return nil, err
	}
	return &dtwOp{precision: pr, scale: scale}, nil
}

func (o *dtwOp) Run(ctx context.Context, in rt.Tensors) (rt.Tensors, error) {
	cost := in["cost"]
	B, nm := batched(cost, 3)
	N, M := nm[0], nm[1]
	if N == 0 || M == 0 {
		return nil, fmt.Errorf("input \"cost\" has shape %v; want N >= 1 and M >= 1", cost.Shape())
	}
	dims, err := dtwLengths(in, B, N, M)
	if err != nil {
		return nil, err
	}
	K := N + M
	path := rt.Must(rt.NewTensor(rt.I32, rt.Shape{B, K, 2}))
	pl := rt.Must(rt.NewTensor(rt.I32, rt.Shape{B}))
	tot := rt.Must(rt.NewTensor(rt.F32, rt.Shape{B}))
	err = parallel(ctx, B, func(_, b int) error {
		n, m := int(dims[2*b]), int(dims[2*b+1])
		item := cost.F32()[b*N*M : (b+1)*N*M]
		if m < M || n < N {
			sub := make([]float32, 0, n*m)
			for i := range n {
				sub = append(sub, item[i*M:i*M+m]...)
			}
			item = sub
		}
		res, err := DTW(item, n, m, o.precision, o.scale)
		if err != nil {
			return fmt.Errorf("item %d: %w", b, err)
		}
		out := path.I32()[b*K*2 : (b+1)*K*2]
		for i := range out {
			out[i] = -1
		}
		for k, p := range res.Path {
			out[2*k], out[2*k+1] = p[0], p[1]
		}
		pl.I32()[b] = int32(len(res.Path))
		tot.F32()[b] = res.Total
		return nil
	})
	if err != nil {
		return nil, err
	}
	return rt.Tensors{"path": path, "path_len": pl, "cost_total": tot}, nil
}

// itemTargets returns item b's targets from tg ([B, L], -1 padded): the ids
// before the first -1, which must be trailing. Ids are range-checked against
// [0, C] only to keep the conversion to int safe; the aligner checks them
// precisely (C itself is the star).
func itemTargets(tg *rt.Tensor, b, L, C int) ([]int, error) {
	var out []int
	for i := range L {
		v := intAt(tg, b*L+i)
		if v == -1 {
			for j := i + 1; j < L; j++ {
				if intAt(tg, b*L+j) != -1 {
					return nil, fmt.Errorf("targets[%d] has -1 padding at %d followed by token %d at %d; padding must be trailing", b, i, intAt(tg, b*L+j), j)
				}
			}
			break
		}
		if v < 0 || v > int64(C) {
			return nil, fmt.Errorf("targets[%d][%d] = %d is out of range for C=%d columns", b, i, v, C)
		}
		out = append(out, int(v))
	}
	return out, nil
}
