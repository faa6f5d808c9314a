//go:build cuda

package cuda

/*
#include <cuda.h>
*/
import "C"

import (
	"fmt"
	"unsafe"

	"gorgonia.org/cu"
)

// rawFunction returns the driver handle inside a gorgonia.org/cu Function,
// whose only field is the unexported C.CUfunction. TestRawFunctionLayout pins
// that assumption: it fails if cu.Function changes shape.
func rawFunction(fn cu.Function) C.CUfunction {
	return *(*C.CUfunction)(unsafe.Pointer(&fn))
}

// SetMaxDynamicShared lets launches of the kernel ask for up to bytes of
// dynamic shared memory. Without it a launch may use at most 48 KiB; with it,
// up to the device's opt-in limit (227 KiB on Hopper, 163 KiB on sm_87).
// Asking for more than the device allows is an error naming both numbers.
func (k *Kernel) SetMaxDynamicShared(bytes int) error {
	return k.m.b.Do(func() error {
		limit, static, err := k.sharedLimits()
		if err != nil {
			return err
		}
		if bytes < 0 || bytes+static > limit {
			return fmt.Errorf("cuda: kernel %s wants %d B of dynamic shared memory (+%d B static); %s allows %d B a block", k.name, bytes, static, k.m.b.name, limit)
		}
		r := C.cuFuncSetAttribute(rawFunction(k.fn), C.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, C.int(bytes))
		if r != C.CUDA_SUCCESS {
			return fmt.Errorf("cuda: cuFuncSetAttribute(%s, max dynamic shared = %d B): CUresult %d", k.name, bytes, int(r))
		}
		return nil
	})
}

// MaxDynamicShared is the largest dynamic shared memory (bytes) a block of
// this kernel may use on its device after SetMaxDynamicShared: the opt-in
// limit less the kernel's static shared memory.
func (k *Kernel) MaxDynamicShared() (int, error) {
	var n int
	err := k.m.b.Do(func() error {
		limit, static, err := k.sharedLimits()
		n = limit - static
		return err
	})
	return n, err
}

// sharedLimits returns the device's opt-in shared memory per block and the
// kernel's static shared memory. It must run inside Backend.Do.
func (k *Kernel) sharedLimits() (limit, static int, err error) {
	var v C.int
	if r := C.cuDeviceGetAttribute(&v, C.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, C.CUdevice(k.m.b.dev)); r != C.CUDA_SUCCESS {
		return 0, 0, fmt.Errorf("cuda: opt-in shared memory limit of %s: CUresult %d", k.m.b.name, int(r))
	}
	static, err = k.fn.Attribute(cu.SharedSizeBytes)
	if err != nil {
		return 0, 0, fmt.Errorf("cuda: static shared memory of %s: %w", k.name, err)
	}
	return int(v), static, nil
}
