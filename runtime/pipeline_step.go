package runtime

// Step returns the instance of the step named name (its StepConfig.Name,
// default the op name), or nil when the pipeline has none: for callers that
// ask a step's op about itself (e.g. an encoder about its provider).
func (p *Pipeline) Step(name string) *Instance {
	for _, st := range p.steps {
		if st.name == name {
			return st.inst
		}
	}
	return nil
}

// Op is the op the instance runs (its concrete type is the op's own).
func (in *Instance) Op() Op { return in.op }
