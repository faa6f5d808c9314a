//go:build cuda

package asr

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestCUDAEPOnCPUBackend: the CUDA EP with the CPU backend (host I/O, no
// CUDA context of edge's own: `edge transcribe --execution-provider cuda`)
// gives the CPU pipeline's text on the bundled clips.
func TestCUDAEPOnCPUBackend(t *testing.T) {
	cpu, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer cpu.Close()
	ep, err := Open(defaultModel, Options{Provider: "cuda"})
	require.NoError(t, err)
	defer ep.Close()
	require.NoError(t, ep.EncoderFallback())
	for _, name := range clipNames {
		pcm, _ := loadTruth(t, name)
		want, err := cpu.Transcribe(context.Background(), pcm)
		require.NoError(t, err, name)
		got, err := ep.Transcribe(context.Background(), pcm)
		require.NoError(t, err, name)
		assert.Equal(t, want.Text, got.Text, name)
	}
}
