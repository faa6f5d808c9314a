//go:build !cuda

package serve

import "github.com/edgespeech/edge/runtime"

// deviceMemory is nil: the CPU backend's memory is the process's (see the
// process collector's process_resident_memory_bytes).
func deviceMemory(runtime.Backend) func() []memorySample { return nil }
