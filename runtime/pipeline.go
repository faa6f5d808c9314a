package runtime

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/knadh/koanf/v2"
)

// PipelineConfig describes a pipeline: named input tensors, an ordered list
// of steps wired by tensor names, and the tensors to return.
//
//	inputs:  [{name: pcm, dtype: f32, rank: 2}]
//	steps:
//	  - name: frontend
//	    op: fbank
//	    inputs:  {pcm: pcm}          # op input -> tensor name (default: same name;
//	                                 # optional inputs bind only when named here)
//	    outputs: {features: feats}   # op output -> tensor name (default: same name)
//	    params:  {preset: parakeet-128}
//	outputs: [feats]                 # default: every tensor the steps produce
type PipelineConfig struct {
	Inputs  []PipelineInput `koanf:"inputs"`
	Steps   []StepConfig    `koanf:"steps"`
	Outputs []string        `koanf:"outputs"`
}

// PipelineInput declares a tensor the caller supplies to Run.
type PipelineInput struct {
	Name  string `koanf:"name"`
	DType string `koanf:"dtype"`
	Rank  int    `koanf:"rank"`
}

// StepConfig is one op of a pipeline.
type StepConfig struct {
	// Name identifies the step in errors and statistics (default: the op name).
	Name    string            `koanf:"name"`
	Op      string            `koanf:"op"`
	Inputs  map[string]string `koanf:"inputs"`
	Outputs map[string]string `koanf:"outputs"`
	Params  map[string]any    `koanf:"params"`
}

// Pipeline is a validated, ready-to-run chain of op instances. It is safe
// for concurrent use: each Run keeps its tensors and statistics to itself,
// and each step's op runs one call at a time (see Instance), so concurrent
// Runs overlap in different steps.
type Pipeline struct {
	inputs  []PipelineInput
	steps   []pipelineStep
	outputs []string
}

type pipelineStep struct {
	name     string
	inst     *Instance
	inputs   map[string]string // op input -> tensor
	outputs  map[string]string // op output -> tensor
	optional map[string]bool   // op inputs that may be absent at run time
}

// PipelineStats reports where the time of a Run went and which copies it made.
type PipelineStats struct {
	Steps     []StepStats   `json:"steps"`
	Total     time.Duration `json:"total_ns"`
	Transfers TransferStats `json:"transfers"`
}

// StepStats is the wall time of one step.
type StepStats struct {
	Name     string        `json:"name"`
	Op       string        `json:"op"`
	Duration time.Duration `json:"duration_ns"`
}

// LoadPipelineConfig reads a PipelineConfig from the koanf sub-tree at path.
// Unknown keys are an error.
func LoadPipelineConfig(k *koanf.Koanf, path string) (PipelineConfig, error) {
	var cfg PipelineConfig
	err := k.UnmarshalWithConf(path, &cfg, koanf.UnmarshalConf{Tag: "koanf", DecoderConfig: strictDecoder(&cfg)})
	if err != nil {
		return cfg, fmt.Errorf("pipeline config %q: %w", path, err)
	}
	return cfg, nil
}

// symbol is what validation knows about a tensor before it exists.
type symbol struct {
	dtypes []DType
	ranks  []int
	from   string
}

// NewPipeline builds every step on backend b and validates the wiring:
// unknown ops or parameters, inputs no earlier step produces, dtype or rank
// mismatches and tensors produced twice are errors here, before any data flows.
func NewPipeline(cfg PipelineConfig, b Backend) (*Pipeline, error) {
	if len(cfg.Steps) == 0 {
		return nil, fmt.Errorf("pipeline has no steps")
	}
	syms := map[string]symbol{}
	for _, in := range cfg.Inputs {
		dt, err := ParseDType(in.DType)
		if err != nil {
			return nil, fmt.Errorf("pipeline input %q: %w", in.Name, err)
		}
		if in.Name == "" {
			return nil, fmt.Errorf("pipeline input without a name")
		}
		if _, dup := syms[in.Name]; dup {
			return nil, fmt.Errorf("pipeline input %q declared twice", in.Name)
		}
		syms[in.Name] = symbol{dtypes: []DType{dt}, ranks: []int{in.Rank}, from: "pipeline input"}
	}
	p := &Pipeline{inputs: cfg.Inputs}
	for i, sc := range cfg.Steps {
		st, err := buildStep(i, sc, b, syms)
		if err != nil {
			return nil, err
		}
		p.steps = append(p.steps, st)
	}
	for _, o := range cfg.Outputs {
		if _, ok := syms[o]; !ok {
			return nil, fmt.Errorf("pipeline output %q is not produced by any step (tensors: %s)", o, symNames(syms))
		}
	}
	p.outputs = cfg.Outputs
	return p, nil
}

func buildStep(i int, sc StepConfig, b Backend, syms map[string]symbol) (pipelineStep, error) {
	name := sc.Name
	if name == "" {
		name = sc.Op
	}
	where := fmt.Sprintf("step %d (%s)", i+1, name)
	if sc.Op == "" {
		return pipelineStep{}, fmt.Errorf("%s: no op given", where)
	}
	inst, err := New(sc.Op, sc.Params, b)
	if err != nil {
		return pipelineStep{}, fmt.Errorf("%s: %w", where, err)
	}
	st := pipelineStep{name: name, inst: inst, inputs: map[string]string{}, outputs: map[string]string{}, optional: map[string]bool{}}
	if err := checkBindings(where, "input", sc.Inputs, inst.Spec.Inputs); err != nil {
		return st, err
	}
	if err := checkBindings(where, "output", sc.Outputs, inst.Spec.Outputs); err != nil {
		return st, err
	}
	for _, s := range inst.Spec.Inputs {
		tensor, bound := sc.Inputs[s.Name]
		if !bound {
			tensor = s.Name
		}
		if s.Optional && !bound {
			continue // optional inputs bind only when the config names a tensor
		}
		sym, ok := syms[tensor]
		if !ok {
			return st, fmt.Errorf("%s: input %q needs tensor %q, which no pipeline input or earlier step produces (tensors: %s)", where, s.Name, tensor, symNames(syms))
		}
		if !overlaps(sym.dtypes, s.DTypes) {
			return st, fmt.Errorf("%s: input %q wants %s but tensor %q (from %s) is %v", where, s.Name, s.Signature(), tensor, sym.from, sym.dtypes)
		}
		if !overlaps(sym.ranks, s.Ranks()) {
			return st, fmt.Errorf("%s: input %q wants rank %v (%s) but tensor %q (from %s) has rank %v", where, s.Name, s.Ranks(), s.Signature(), tensor, sym.from, sym.ranks)
		}
		st.inputs[s.Name] = tensor
		st.optional[s.Name] = s.Optional
	}
	for _, s := range inst.Spec.Outputs {
		tensor := sc.Outputs[s.Name]
		if tensor == "" {
			tensor = s.Name
		}
		if prev, dup := syms[tensor]; dup {
			return st, fmt.Errorf("%s: output %q would overwrite tensor %q from %s; rename it under outputs:", where, s.Name, tensor, prev.from)
		}
		syms[tensor] = symbol{dtypes: s.DTypes, ranks: s.Ranks(), from: where}
		st.outputs[s.Name] = tensor
	}
	return st, nil
}

func checkBindings(where, kind string, bound map[string]string, specs []TensorSpec) error {
	for name := range bound {
		if !slices.ContainsFunc(specs, func(s TensorSpec) bool { return s.Name == name }) {
			names := make([]string, len(specs))
			for i, s := range specs {
				names[i] = s.Name
			}
			return fmt.Errorf("%s: op has no %s %q (%ss: %s)", where, kind, name, kind, strings.Join(names, ", "))
		}
	}
	return nil
}

func overlaps[T comparable](a, b []T) bool {
	for _, x := range a {
		if slices.Contains(b, x) {
			return true
		}
	}
	return false
}

func symNames(syms map[string]symbol) string {
	names := make([]string, 0, len(syms))
	for n := range syms {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// Run feeds inputs through every step in order and returns the configured
// outputs (every produced tensor when none are configured). Each pipeline
// input must be present with its declared dtype and rank.
//
// Ownership: the inputs stay the caller's and are never freed. Everything
// else Run allocates (uploads, intermediates no output names) is released
// before it returns, also on an error; the returned tensors belong to the
// caller, who releases them with Tensors.Release (a no-op for host
// tensors).
func (p *Pipeline) Run(ctx context.Context, inputs Tensors) (Tensors, error) {
	out, _, err := p.RunStats(ctx, inputs)
	return out, err
}

// RunStats is Run that also reports where the call's time went and which
// copies it made.
func (p *Pipeline) RunStats(ctx context.Context, inputs Tensors) (res Tensors, stats PipelineStats, err error) {
	start := time.Now()
	env := Tensors{}
	for _, in := range p.inputs {
		t, ok := inputs[in.Name]
		if !ok || t == nil {
			return nil, stats, fmt.Errorf("pipeline input %q missing", in.Name)
		}
		if t.DType().String() != in.DType || t.Rank() != in.Rank {
			return nil, stats, fmt.Errorf("pipeline input %q is %v, declared %s of rank %d", in.Name, t, in.DType, in.Rank)
		}
		env[in.Name] = t
	}
	callers := maps.Clone(env)
	produced := Tensors{}
	var stray []*Tensor // outputs an op returned but does not declare
	defer func() {
		// Release what the steps made and the caller does not get (an op
		// may return one of its inputs: the caller's memory stays).
		drop := Tensors{}
		for name, t := range produced {
			drop[name] = t
		}
		for i, t := range stray {
			drop[fmt.Sprint("stray ", i)] = t
		}
		for name, t := range drop {
			if res.holds(t) || callers.holds(t) {
				delete(drop, name)
			}
		}
		_ = drop.Release()
	}()
	for _, st := range p.steps {
		if err := ctx.Err(); err != nil {
			return nil, stats, err
		}
		args := Tensors{}
		for opName, tensor := range st.inputs {
			if t, ok := env[tensor]; ok {
				args[opName] = t
			}
		}
		t0 := time.Now()
		out, copies, err := st.inst.RunStats(ctx, args)
		if err != nil {
			return nil, stats, fmt.Errorf("step %s: %w", st.name, err)
		}
		stats.Steps = append(stats.Steps, StepStats{Name: st.name, Op: st.inst.Spec.Name, Duration: time.Since(t0)})
		stats.Transfers.Add(copies)
		for opName, t := range out {
			tensor, bound := st.outputs[opName]
			if !bound || t == nil {
				stray = append(stray, t)
				continue
			}
			env[tensor] = t
			produced[tensor] = t
		}
	}
	stats.Total = time.Since(start)
	if len(p.outputs) == 0 {
		return maps.Clone(produced), stats, nil
	}
	res = Tensors{}
	for _, o := range p.outputs {
		res[o] = env[o]
	}
	return res, stats, nil
}

// Close releases every step's resources (see Instance.Close) and returns the
// first error.
func (p *Pipeline) Close() error {
	var first error
	for _, st := range p.steps {
		if err := st.inst.Close(); err != nil && first == nil {
			first = fmt.Errorf("step %s: %w", st.name, err)
		}
	}
	return first
}
