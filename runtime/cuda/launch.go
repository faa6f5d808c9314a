//go:build cuda

package cuda

/*
#include <cuda.h>

// cuFuncGetParamInfo exists in drivers for CUDA >= 12.4; the build's cuda.h
// (11.8) lacks it, so it is looked up at run time (edgeResolveParamInfo,
// called once).
typedef CUresult (*edgeFuncGetParamInfo)(CUfunction, size_t, size_t*, size_t*);
static edgeFuncGetParamInfo edgeParamInfoFn;

static int edgeResolveParamInfo(void) {
	void* fn = 0;
	if (cuGetProcAddress("cuFuncGetParamInfo", &fn, 12040, CU_GET_PROC_ADDRESS_DEFAULT) != CUDA_SUCCESS) return 0;
	edgeParamInfoFn = (edgeFuncGetParamInfo)fn;
	return fn != 0;
}

static CUresult edgeParamInfo(CUfunction f, size_t i, size_t* offset, size_t* size) {
	return edgeParamInfoFn(f, i, offset, size);
}

// edgeLaunch launches f with one parameter, the bytes at params (the
// driver copies them before it returns).
static CUresult edgeLaunch(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                           unsigned bz, unsigned shared, CUstream s, void* params) {
	void* args[1] = {params};
	return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, args, 0);
}
*/
import "C"

import (
	"fmt"
	"reflect"
	"sync"
	"unsafe"
)

// Dim3 is a grid or block size.
type Dim3 struct{ X, Y, Z int }

// Launch queues the kernel on the backend's stream with params as its one
// argument. params must be a non-nil pointer to a struct of fixed-size
// fields only (numbers, arrays and structs of them: no Go pointers,
// strings, slices, maps, interfaces): the Go mirror of the kernel's C
// parameter struct (package kernels mirrors kernels/params.h). Its bytes
// are copied when the launch is queued, so the struct may be reused as soon
// as Launch returns.
//
// Where the driver reports a kernel's parameters (cuFuncGetParamInfo,
// drivers for CUDA 12.4 and newer; looked up once a kernel and cached), a
// kernel that does not take exactly one parameter of the struct's size is
// an error naming the kernel and both layouts, and nothing is launched; with
// older drivers the check is skipped. Grid and block dimensions must be >= 1.
// Launch is safe for concurrent use.
func (k *Kernel) Launch(grid, block Dim3, sharedBytes int, params any) error {
	ptr, size, err := paramBytes(params)
	if err != nil {
		return fmt.Errorf("cuda: kernel %s: %w", k.name, err)
	}
	for _, d := range []int{grid.X, grid.Y, grid.Z, block.X, block.Y, block.Z} {
		if d < 1 {
			return fmt.Errorf("cuda: kernel %s launch grid %v block %v: every dimension must be >= 1", k.name, grid, block)
		}
	}
	if sharedBytes < 0 {
		return fmt.Errorf("cuda: kernel %s: %d bytes of dynamic shared memory", k.name, sharedBytes)
	}
	err = k.m.b.Do(func() error {
		if err := k.checkParams(params, size); err != nil {
			return err
		}
		r := C.edgeLaunch(rawFunction(k.fn), C.uint(grid.X), C.uint(grid.Y), C.uint(grid.Z),
			C.uint(block.X), C.uint(block.Y), C.uint(block.Z), C.uint(sharedBytes),
			C.CUstream(unsafe.Pointer(k.m.b.stream.C())), ptr)
		if r != C.CUDA_SUCCESS {
			return fmt.Errorf("CUresult %d", int(r))
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cuda: launching %s (grid %v, block %v, %d B shared): %w", k.name, grid, block, sharedBytes, err)
	}
	return nil
}

// paramInfo is a kernel's parameter list as the driver reports it.
type paramInfo struct {
	known bool      // the driver reported it (cuFuncGetParamInfo)
	sizes []uintptr // bytes of each parameter, in order
}

// checkParams compares a launch's one parameter of size bytes with the
// kernel's parameter list. It runs inside Backend.Do.
func (k *Kernel) checkParams(params any, size uintptr) error {
	k.paramOnce.Do(func() { k.params = k.queryParams() })
	if !k.params.known {
		return nil
	}
	if len(k.params.sizes) != 1 || k.params.sizes[0] != size {
		return fmt.Errorf("cuda: kernel %s takes %d parameter(s) of %v bytes; the launch passes one %T of %d bytes",
			k.name, len(k.params.sizes), k.params.sizes, params, size)
	}
	return nil
}

// paramInfoAvailable reports whether the driver has cuFuncGetParamInfo.
var paramInfoAvailable = sync.OnceValue(func() bool { return C.edgeResolveParamInfo() != 0 })

// queryParams asks the driver for the kernel's parameter sizes: indexes
// from 0 until the driver answers CUDA_ERROR_INVALID_VALUE (past the last
// parameter). Any other answer leaves the list unknown.
func (k *Kernel) queryParams() paramInfo {
	if !paramInfoAvailable() {
		return paramInfo{}
	}
	const maxParams = 1 << 12 // a kernel's parameters fill at most 32 KiB
	var info paramInfo
	for i := range maxParams {
		var off, size C.size_t
		switch r := C.edgeParamInfo(rawFunction(k.fn), C.size_t(i), &off, &size); r {
		case C.CUDA_SUCCESS:
			info.sizes = append(info.sizes, uintptr(size))
		case C.CUDA_ERROR_INVALID_VALUE:
			info.known = true
			return info
		default:
			return paramInfo{}
		}
	}
	return paramInfo{}
}

// paramBytes returns the address and size of the struct params points to,
// or why it cannot be a kernel's parameter.
func paramBytes(params any) (unsafe.Pointer, uintptr, error) {
	v := reflect.ValueOf(params)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil, 0, fmt.Errorf("parameters are %T; want a non-nil pointer to a parameter struct", params)
	}
	t := v.Elem().Type()
	if err := plainLayout(t); err != nil {
		return nil, 0, err
	}
	if t.Size() == 0 {
		return nil, 0, fmt.Errorf("parameter struct %v is empty", t)
	}
	return v.UnsafePointer(), t.Size(), nil
}

// plainTypes caches plainLayout's verdict per type.
var plainTypes sync.Map // reflect.Type -> error (nil: plain)

// plainLayout checks that t holds fixed-size numbers only (through arrays
// and structs): bytes that C may copy and that hold no Go pointer.
func plainLayout(t reflect.Type) error {
	if v, ok := plainTypes.Load(t); ok {
		err, _ := v.(error)
		return err
	}
	var err error
	switch t.Kind() {
	case reflect.Bool, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64, reflect.Uint8, reflect.Uint16,
		reflect.Uint32, reflect.Uint64, reflect.Uintptr, reflect.Float32, reflect.Float64:
	case reflect.Array:
		err = plainLayout(t.Elem())
	case reflect.Struct:
		for i := range t.NumField() {
			if err = plainLayout(t.Field(i).Type); err != nil {
				break
			}
		}
	default:
		err = fmt.Errorf("parameter type %v holds a %v; want fixed-size numbers only", t, t.Kind())
	}
	plainTypes.Store(t, err)
	return err
}
