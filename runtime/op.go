package runtime

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// Tensors maps tensor names to tensors, for op inputs and outputs.
type Tensors map[string]*Tensor

// TensorSpec declares one named input or output of an op.
type TensorSpec struct {
	Name string `json:"name"`
	// DTypes lists the accepted element types (outputs: the possible ones).
	DTypes []DType `json:"-"`
	// Dims names the dimensions symbolically, outermost first, e.g. {"B","T","C"}.
	Dims []string `json:"dims"`
	// BatchOptional means the leading dimension may be left out (rank len(Dims)-1).
	BatchOptional bool `json:"batch_optional,omitempty"`
	// Optional inputs may be absent.
	Optional bool `json:"optional,omitempty"`
	// Host means the tensor lives in host memory whatever the op's backend
	// (small metadata such as lengths); otherwise it lives on the op's backend.
	Host bool   `json:"host,omitempty"`
	Doc  string `json:"doc"`
}

// Ranks returns the ranks the spec accepts.
func (s TensorSpec) Ranks() []int {
	if s.BatchOptional {
		return []int{len(s.Dims) - 1, len(s.Dims)}
	}
	return []int{len(s.Dims)}
}

func (s TensorSpec) acceptsRank(r int) bool {
	for _, x := range s.Ranks() {
		if x == r {
			return true
		}
	}
	return false
}

func (s TensorSpec) acceptsDType(d DType) bool {
	for _, x := range s.DTypes {
		if x == d {
			return true
		}
	}
	return false
}

// Signature renders the spec as "f32|i32 [B?,T,C]".
func (s TensorSpec) Signature() string {
	dts := make([]string, len(s.DTypes))
	for i, d := range s.DTypes {
		dts[i] = d.String()
	}
	dims := append([]string(nil), s.Dims...)
	if s.BatchOptional && len(dims) > 0 {
		dims[0] += "?"
	}
	return strings.Join(dts, "|") + " [" + strings.Join(dims, ",") + "]"
}

// Op is a configured operation bound to one backend. Run receives inputs
// already checked against the op's declared specs (presence, dtype, rank,
// placement) and must return every non-optional declared output.
//
// Ownership: Run must not keep references to its inputs after it returns,
// nor free them. Every tensor it returns is new memory (or one of its
// inputs, returned as it is) that belongs to the caller from then on; on an
// error it returns nothing and frees what it allocated.
//
// Concurrency: Run is called from one goroutine at a time; Instance
// serialises the calls, so an op may keep scratch state between them.
type Op interface {
	Run(ctx context.Context, in Tensors) (Tensors, error)
}

// OpSpec declares an op: its contract and how to build it. Ops register an
// OpSpec in init() with Register.
type OpSpec struct {
	Name    string
	Doc     string
	Inputs  []TensorSpec
	Outputs []TensorSpec
	Params  []ParamSpec
	// New builds the op for a backend from resolved parameters. It returns an
	// error when the op has no implementation for that backend or the
	// parameters are inconsistent.
	New func(p Params, b Backend) (Op, error)
}

var (
	opsMu sync.RWMutex
	ops   = map[string]*OpSpec{}
	// impls holds backend-specific constructors: impls[op][backend].
	impls = map[string]map[string]func(Params, Backend) (Op, error){}
)

// RegisterImplementation adds a constructor of op for one backend (e.g. the
// CUDA launcher of an op family, registered in the init() of a -tags cuda
// file). New calls it instead of OpSpec.New when the op is built for that
// backend; the op's contract (OpSpec) stays the one registered with Register.
// It panics on empty names, a nil constructor or a duplicate (op, backend).
// The op itself may be registered before or after.
func RegisterImplementation(op, backend string, newOp func(Params, Backend) (Op, error)) {
	opsMu.Lock()
	defer opsMu.Unlock()
	if op == "" || backend == "" || newOp == nil {
		panic("edge: RegisterImplementation needs an op, a backend and a constructor")
	}
	if impls[op] == nil {
		impls[op] = map[string]func(Params, Backend) (Op, error){}
	}
	if _, dup := impls[op][backend]; dup {
		panic("edge: RegisterImplementation called twice for op " + op + " on backend " + backend)
	}
	impls[op][backend] = newOp
}

// constructor returns the backend-specific constructor of op for b, or the
// spec's own.
func constructor(spec *OpSpec, b Backend) func(Params, Backend) (Op, error) {
	opsMu.RLock()
	defer opsMu.RUnlock()
	if f, ok := impls[spec.Name][b.Name()]; ok {
		return f
	}
	return spec.New
}

// Register makes an op available by name. It panics on an empty name, a nil
// constructor, a duplicate name, or a parameter whose default does not have
// its kind's Go type (see ParamSpec.Default), like database/sql's Register:
// these are programming errors found at start-up.
func Register(spec OpSpec) {
	opsMu.Lock()
	defer opsMu.Unlock()
	if spec.Name == "" {
		panic("edge: Register needs an op name")
	}
	if spec.New == nil {
		panic("edge: Register needs a constructor for op " + spec.Name)
	}
	for _, p := range spec.Params {
		if err := p.checkDefault(); err != nil {
			panic("edge: Register: op " + spec.Name + ": " + err.Error())
		}
	}
	if _, dup := ops[spec.Name]; dup {
		panic("edge: Register called twice for op " + spec.Name)
	}
	s := spec
	ops[spec.Name] = &s
}

// Lookup returns the spec of a registered op.
func Lookup(name string) (*OpSpec, error) {
	opsMu.RLock()
	defer opsMu.RUnlock()
	s, ok := ops[name]
	if !ok {
		names := make([]string, 0, len(ops))
		for n := range ops {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("unknown op %q (registered: %s)", name, strings.Join(names, ", "))
	}
	return s, nil
}

// List returns the registered op specs sorted by name.
func List() []*OpSpec {
	opsMu.RLock()
	defer opsMu.RUnlock()
	out := make([]*OpSpec, 0, len(ops))
	for _, s := range ops {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Instance is an op built from its spec, parameters and backend. Its Run
// checks inputs against the spec, moves them where the op wants them and
// checks the outputs. An Instance is safe for concurrent use: calls of the
// op itself are serialised (see Op), checking and copying inputs is not.
type Instance struct {
	Spec    *OpSpec
	Params  Params
	Backend Backend
	op      Op
	turn    chan struct{} // holds a token while the op runs
}

// TransferStats counts copies between host and device memory.
type TransferStats struct {
	HostToDevice      int   `json:"host_to_device"`
	HostToDeviceBytes int64 `json:"host_to_device_bytes"`
	DeviceToHost      int   `json:"device_to_host"`
	DeviceToHostBytes int64 `json:"device_to_host_bytes"`
}

// Add accumulates another count.
func (s *TransferStats) Add(o TransferStats) {
	s.HostToDevice += o.HostToDevice
	s.HostToDeviceBytes += o.HostToDeviceBytes
	s.DeviceToHost += o.DeviceToHost
	s.DeviceToHostBytes += o.DeviceToHostBytes
}

// Since returns the copies counted after the snapshot before was taken.
func (s TransferStats) Since(before TransferStats) TransferStats {
	return TransferStats{
		HostToDevice:      s.HostToDevice - before.HostToDevice,
		HostToDeviceBytes: s.HostToDeviceBytes - before.HostToDeviceBytes,
		DeviceToHost:      s.DeviceToHost - before.DeviceToHost,
		DeviceToHostBytes: s.DeviceToHostBytes - before.DeviceToHostBytes,
	}
}

// New builds a registered op. cfg holds its parameters as a flat or nested
// map (keys use "." for nesting); unknown keys are an error.
func New(name string, cfg map[string]any, b Backend) (*Instance, error) {
	spec, err := Lookup(name)
	if err != nil {
		return nil, err
	}
	p, err := ResolveParams(spec.Name, spec.Params, cfg)
	if err != nil {
		return nil, err
	}
	if b == nil {
		b = CPU
	}
	op, err := constructor(spec, b)(p, b)
	if err != nil {
		return nil, fmt.Errorf("op %s: %w", spec.Name, err)
	}
	return &Instance{Spec: spec, Params: p, Backend: b, op: op, turn: make(chan struct{}, 1)}, nil
}

// Run checks the inputs, moves them to where the op wants them, runs the op
// and checks that it produced every declared output.
//
// The inputs stay the caller's: the copies Run makes to place them (an
// upload to the op's device, a download to the host) are released before
// it returns. The outputs belong to the caller, who releases device ones
// with Tensors.Release. A call waiting for its turn returns ctx.Err() when
// ctx is done first.
func (in *Instance) Run(ctx context.Context, inputs Tensors) (Tensors, error) {
	out, _, err := in.RunStats(ctx, inputs)
	return out, err
}

// RunStats is Run that also reports the host<->device copies it made to
// place the inputs.
func (in *Instance) RunStats(ctx context.Context, inputs Tensors) (out Tensors, copies TransferStats, err error) {
	args := make(Tensors, len(in.Spec.Inputs))
	var placed []*Tensor // copies made here; released before returning
	defer func() {
		for _, t := range placed {
			if !out.holds(t) {
				_ = t.Release()
			}
		}
	}()
	for _, s := range in.Spec.Inputs {
		t, ok := inputs[s.Name]
		if !ok || t == nil {
			if s.Optional {
				continue
			}
			return nil, copies, fmt.Errorf("op %s: missing input %q (%s)", in.Spec.Name, s.Name, s.Signature())
		}
		if !s.acceptsDType(t.DType()) {
			return nil, copies, fmt.Errorf("op %s: input %q is %v, want %s", in.Spec.Name, s.Name, t.DType(), s.Signature())
		}
		if !s.acceptsRank(t.Rank()) {
			return nil, copies, fmt.Errorf("op %s: input %q has shape %v (rank %d), want %s", in.Spec.Name, s.Name, t.Shape(), t.Rank(), s.Signature())
		}
		moved, err := in.place(t, s.Host, &copies)
		if err != nil {
			return nil, copies, fmt.Errorf("op %s: input %q: %w", in.Spec.Name, s.Name, err)
		}
		if moved != t {
			placed = append(placed, moved)
		}
		args[s.Name] = moved
	}
	for name := range inputs {
		if !in.hasInput(name) {
			return nil, copies, fmt.Errorf("op %s: unexpected input %q (inputs: %s)", in.Spec.Name, name, in.inputNames())
		}
	}
	select {
	case in.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, copies, ctx.Err()
	}
	out, err = in.op.Run(ctx, args)
	<-in.turn
	if err != nil {
		return nil, copies, fmt.Errorf("op %s: %w", in.Spec.Name, err)
	}
	for _, s := range in.Spec.Outputs {
		if out[s.Name] == nil && !s.Optional {
			_ = out.Release()
			return nil, copies, fmt.Errorf("op %s: produced no output %q (a bug in the op)", in.Spec.Name, s.Name)
		}
	}
	return out, copies, nil
}

// place returns t in the memory the op expects: host memory for host specs
// and for CPU ops, the op backend's memory otherwise. Copies are counted in
// copies.
func (in *Instance) place(t *Tensor, host bool, copies *TransferStats) (*Tensor, error) {
	wantHost := host || in.Backend.Name() == "cpu"
	switch {
	case wantHost && !t.OnHost():
		if in.Backend.Name() == "cpu" {
			return nil, fmt.Errorf("tensor %v is in device memory; a cpu op wants it on the host", t)
		}
		copies.DeviceToHost++
		copies.DeviceToHostBytes += t.Bytes()
		return in.Backend.Download(t)
	case !wantHost && t.OnHost():
		copies.HostToDevice++
		copies.HostToDeviceBytes += t.Bytes()
		return in.Backend.Upload(t)
	}
	return t, nil
}

func (in *Instance) hasInput(name string) bool {
	for _, s := range in.Spec.Inputs {
		if s.Name == name {
			return true
		}
	}
	return false
}

func (in *Instance) inputNames() string {
	names := make([]string, len(in.Spec.Inputs))
	for i, s := range in.Spec.Inputs {
		names[i] = s.Name
	}
	return strings.Join(names, ", ")
}
