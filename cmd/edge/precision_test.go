package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// --precision int8 runs the bundled model's model.int8.onnx (same words on
// the demo clip); a model without one, or another precision, is an error.
func TestTranscribePrecision(t *testing.T) {
	code, out, stderr := capture(t, "transcribe", "--model", bundledModel, "--precision", "int8", demoClip)
	require.Equal(t, 0, code, stderr)
	assert.Equal(t, demoText+"\n", out)

	sherpa := filepath.Join("..", "..", "models", "testdata", "sherpa")
	code, _, stderr = capture(t, "transcribe", "--model", sherpa, "--precision", "int8", demoClip)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "has no int8 encoder: "+filepath.Join(sherpa, "model.int8.onnx")+" does not exist")

	// The config key: EDGE_PRECISION.
	t.Setenv("EDGE_PRECISION", "int8")
	code, _, stderr = capture(t, "transcribe", "--model", sherpa, demoClip)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "has no int8 encoder")

	code, _, stderr = capture(t, "transcribe", "--model", bundledModel, "--precision", "fp16", demoClip)
	assert.NotEqual(t, 0, code)
	assert.Contains(t, stderr, `precision "fp16" is not fp32 or int8`)
}
