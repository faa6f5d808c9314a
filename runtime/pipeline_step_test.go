package runtime

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestPipelineStep(t *testing.T) {
	p, err := NewPipeline(PipelineConfig{
		Inputs: []PipelineInput{{Name: "x", DType: "f32", Rank: 2}},
		Steps:  []StepConfig{{Name: "first", Op: "test.scale"}},
	}, CPU)
	require.NoError(t, err)
	st := p.Step("first")
	require.NotNil(t, st)
	assert.Equal(t, "test.scale", st.Spec.Name)
	assert.NotNil(t, st.Op())
	assert.Nil(t, p.Step("second"))
}
