//go:build cuda

// Package cudatest gives the tests and benchmarks of -tags cuda packages one
// CUDA backend per test binary (GPU 0), opened on first use and never closed,
// so every test shares its stream, pool and loaded modules, and the one
// statistic their device-time benchmarks report (MedianMicros).
package cudatest

import (
	"slices"
	"sync"
	"testing"
	"time"

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

// MedianMicros is the median of ds in microseconds (the upper middle value
// of an even count; ds must not be empty, as a benchmark's iterations are
// not): the device benchmarks report it, as the torch peers' scripts report
// the median of their CUDA-event times. ds is not reordered.
func MedianMicros(ds []time.Duration) float64 {
	s := slices.Clone(ds)
	slices.Sort(s)
	return float64(s[len(s)/2].Nanoseconds()) / 1e3
}
