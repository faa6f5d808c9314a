//go:build cuda

// Package cudatest gives the tests and benchmarks of -tags cuda packages one
// CUDA backend per test binary (GPU 0), opened on first use and never closed,
// so every test shares its stream, pool and loaded modules.
package cudatest

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime/cuda"
)

var open = sync.OnceValues(func() (*cuda.Backend, error) { return cuda.Open(0) })

// Open returns the test binary's shared backend, or the error opening it.
func Open() (*cuda.Backend, error) { return open() }

// Backend returns the shared backend and fails tb when it cannot be opened.
func Backend(tb testing.TB) *cuda.Backend {
	tb.Helper()
	b, err := open()
	require.NoError(tb, err)
	return b
}
