package onnx

// The bridge: what onnxruntime_go v1.27.0 lacks for a zero-copy GPU encoder,
// taken from the ONNX Runtime C API of the SAME loaded library. It adds
// plugin-EP device enumeration and selection for a session (GetEpDevices,
// SessionOptionsAppendExecutionProvider_V2), memory infos for device memory,
// OrtValues over memory we own (CreateTensorWithDataAsOrtValue: no copy),
// and IoBinding of those values (and of outputs left on a device).
//
// Unsafe assumptions about onnxruntime_go, each pinned by a test in
// bridge_test.go that fails loudly when the library changes:
//   - it loads the library with dlopen(path) (so dlopen(path, RTLD_NOLOAD)
//     finds the same one) and calls OrtGetApiBase()->GetApi(24);
//   - ORT's OrtEnv is a process singleton, so our CreateEnv returns the
//     environment onnxruntime_go created (same pointer on every call);
//   - ort.SessionOptions and ort.IoBinding are structs whose only field is
//     the C handle (*OrtSessionOptions, *OrtIoBinding) at offset 0.

/*
#cgo CFLAGS: -I${SRCDIR}/ortc
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include "onnxruntime_c_api.h"

static const OrtApi *edge_api;
static OrtEnv *edge_env;

// edge_msg returns a malloc'd copy of the status's message (NULL for
// success) and releases the status.
static char *edge_msg(OrtStatus *s) {
	if (s == NULL) return NULL;
	const char *m = edge_api->GetErrorMessage(s);
	char *out = strdup(m != NULL ? m : "unknown ONNX Runtime error");
	edge_api->ReleaseStatus(s);
	return out;
}

static char *edge_open(const char *path, const char **version) {
	void *h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);
	if (h == NULL) {
		const char *e = dlerror();
		return strdup(e != NULL ? e : "dlopen(RTLD_NOLOAD) failed");
	}
	typedef const OrtApiBase *(*base_fn)(void);
	base_fn f = (base_fn)dlsym(h, "OrtGetApiBase");
	if (f == NULL) return strdup("the library has no OrtGetApiBase");
	const OrtApiBase *b = f();
	*version = b->GetVersionString();
	edge_api = b->GetApi(ORT_API_VERSION);
	if (edge_api == NULL) return strdup("the library does not provide ONNX Runtime C API version 24");
	return edge_msg(edge_api->CreateEnv(ORT_LOGGING_LEVEL_FATAL, "edge", &edge_env));
}

static char *edge_env_again(OrtEnv **out) { return edge_msg(edge_api->CreateEnv(ORT_LOGGING_LEVEL_FATAL, "edge", out)); }
static void edge_release_env(OrtEnv *e) { edge_api->ReleaseEnv(e); }
static OrtEnv *edge_get_env(void) { return edge_env; }

static char *edge_register(const char *name, const char *path) {
	return edge_msg(edge_api->RegisterExecutionProviderLibrary(edge_env, name, path));
}
static char *edge_ep_devices(const OrtEpDevice *const **devs, size_t *n) {
	return edge_msg(edge_api->GetEpDevices(edge_env, devs, n));
}
static const OrtEpDevice *edge_ep_at(const OrtEpDevice *const *devs, size_t i) { return devs[i]; }
static const char *edge_ep_name(const OrtEpDevice *d) { return edge_api->EpDevice_EpName(d); }
static const char *edge_ep_vendor(const OrtEpDevice *d) { return edge_api->EpDevice_EpVendor(d); }
static int edge_hw_type(const OrtEpDevice *d) { return (int)edge_api->HardwareDevice_Type(edge_api->EpDevice_Device(d)); }
static const char *edge_hw_vendor(const OrtEpDevice *d) { return edge_api->HardwareDevice_Vendor(edge_api->EpDevice_Device(d)); }
static uint32_t edge_hw_vendor_id(const OrtEpDevice *d) { return edge_api->HardwareDevice_VendorId(edge_api->EpDevice_Device(d)); }
static uint32_t edge_hw_device_id(const OrtEpDevice *d) { return edge_api->HardwareDevice_DeviceId(edge_api->EpDevice_Device(d)); }
static const OrtMemoryInfo *edge_ep_meminfo(const OrtEpDevice *d) {
	return edge_api->EpDevice_MemoryInfo(d, OrtDeviceMemoryType_DEFAULT);
}

static char *edge_append_v2(OrtSessionOptions *so, const OrtEpDevice *dev, const char *const *keys,
                            const char *const *vals, size_t n) {
	const OrtEpDevice *devs[1] = {dev};
	return edge_msg(edge_api->SessionOptionsAppendExecutionProvider_V2(so, edge_env, devs, 1, keys, vals, n));
}
static char *edge_so_config(OrtSessionOptions *so, const char *k, const char *v) {
	return edge_msg(edge_api->AddSessionConfigEntry(so, k, v));
}

static char *edge_mem_info(const char *name, int id, OrtMemoryInfo **out) {
	return edge_msg(edge_api->CreateMemoryInfo(name, OrtDeviceAllocator, id, OrtMemTypeDefault, out));
}
static void edge_release_mem_info(OrtMemoryInfo *m) { edge_api->ReleaseMemoryInfo(m); }
static char *edge_mem_info_desc(const OrtMemoryInfo *m, const char **name, int *id, int *devtype) {
	char *e = edge_msg(edge_api->MemoryInfoGetName(m, name));
	if (e == NULL) e = edge_msg(edge_api->MemoryInfoGetId(m, id));
	if (e == NULL) {
		OrtMemoryInfoDeviceType t;
		edge_api->MemoryInfoGetDeviceType(m, &t);
		*devtype = (int)t;
	}
	return e;
}

static char *edge_tensor(const OrtMemoryInfo *info, uintptr_t addr, size_t bytes, const int64_t *shape, size_t rank,
                         int type, OrtValue **out) {
	return edge_msg(edge_api->CreateTensorWithDataAsOrtValue(info, (void *)addr, bytes, shape, rank,
	                                                         (ONNXTensorElementDataType)type, out));
}
static void edge_release_value(OrtValue *v) { edge_api->ReleaseValue(v); }

// edge_value_desc reads a tensor's data address, element type and up to
// maxrank dimensions.
static char *edge_value_desc(OrtValue *v, uintptr_t *addr, int *type, int64_t *dims, size_t maxrank, size_t *rank) {
	void *p = NULL;
	char *e = edge_msg(edge_api->GetTensorMutableData(v, &p));
	if (e != NULL) return e;
	*addr = (uintptr_t)p;
	OrtTensorTypeAndShapeInfo *info;
	if ((e = edge_msg(edge_api->GetTensorTypeAndShape(v, &info))) != NULL) return e;
	ONNXTensorElementDataType t;
	e = edge_msg(edge_api->GetTensorElementType(info, &t));
	if (e == NULL) e = edge_msg(edge_api->GetDimensionsCount(info, rank));
	if (e == NULL && *rank > maxrank) e = strdup("tensor rank exceeds 8");
	if (e == NULL) e = edge_msg(edge_api->GetDimensions(info, dims, *rank));
	*type = (int)t;
	edge_api->ReleaseTensorTypeAndShapeInfo(info);
	return e;
}

// edge_copy_out copies bytes bytes of a host-memory tensor's data to dst.
static char *edge_copy_out(OrtValue *v, void *dst, size_t bytes) {
	void *p = NULL;
	char *e = edge_msg(edge_api->GetTensorMutableData(v, &p));
	if (e == NULL && bytes > 0) memcpy(dst, p, bytes);
	return e;
}

static char *edge_bind_input(OrtIoBinding *b, const char *name, const OrtValue *v) {
	return edge_msg(edge_api->BindInput(b, name, v));
}
static char *edge_bind_output(OrtIoBinding *b, const char *name, const OrtValue *v) {
	return edge_msg(edge_api->BindOutput(b, name, v));
}
static char *edge_bind_output_to(OrtIoBinding *b, const char *name, const OrtMemoryInfo *m) {
	return edge_msg(edge_api->BindOutputToDevice(b, name, m));
}

// edge_bound_outputs returns the bound output values in binding order in a
// malloc'd array the caller frees (the values it releases one by one).
static char *edge_bound_outputs(OrtIoBinding *b, OrtValue ***out, size_t *n) {
	OrtAllocator *a;
	char *e = edge_msg(edge_api->GetAllocatorWithDefaultOptions(&a));
	if (e != NULL) return e;
	OrtValue **vals = NULL;
	if ((e = edge_msg(edge_api->GetBoundOutputValues(b, a, &vals, n))) != NULL) return e;
	*out = NULL;
	if (*n > 0) {
		*out = malloc(*n * sizeof(OrtValue *));
		memcpy(*out, vals, *n * sizeof(OrtValue *));
		a->Free(a, vals);
	}
	return NULL;
}
*/
import "C"

import (
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"
	"unsafe"

	ort "github.com/yalue/onnxruntime_go"
)

// bridge is the C API table of the loaded library, opened once after Init.
var bridge struct {
	once    sync.Once
	err     error
	version string
	mu      sync.Mutex
	eps     map[string]string // registered EP libraries: name -> path
}

// cError converts a C error string from the helpers above (nil: success)
// and frees it.
func cError(msg *C.char) error {
	if msg == nil {
		return nil
	}
	defer C.free(unsafe.Pointer(msg))
	return errors.New(C.GoString(msg))
}

// openBridge finds the C API of the library Init loaded. It is an error
// before Init.
func openBridge() error {
	lib := Library()
	if lib == "" {
		return errors.New("ONNX Runtime is not loaded (Init first)")
	}
	bridge.once.Do(func() {
		cPath := C.CString(lib)
		defer C.free(unsafe.Pointer(cPath))
		var version *C.char
		if err := cError(C.edge_open(cPath, &version)); err != nil {
			bridge.err = fmt.Errorf("ONNX Runtime bridge to %s: %w", lib, err)
			return
		}
		bridge.version = C.GoString(version)
		bridge.eps = map[string]string{}
	})
	return bridge.err
}

// Hardware device types of an EPDevice.
const (
	DeviceCPU = "cpu"
	DeviceGPU = "gpu"
	DeviceNPU = "npu"
)

// EPDevice is one (execution provider, hardware device) pair ONNX Runtime
// offers for sessions: the built-in CPU EP on the CPU, and every registered
// plugin EP library on the devices it supports.
type EPDevice struct {
	// EP is the execution provider's name, e.g. "CUDAExecutionProvider".
	EP string `json:"ep"`
	// Vendor is the EP's vendor.
	Vendor string `json:"vendor"`
	// Type is DeviceCPU, DeviceGPU or DeviceNPU.
	Type string `json:"type"`
	// HardwareVendor, VendorID and DeviceID describe the device (PCI ids
	// for GPUs: VendorID 0x10de is NVIDIA).
	HardwareVendor string `json:"hardware_vendor"`
	VendorID       uint32 `json:"vendor_id"`
	DeviceID       uint32 `json:"device_id"`

	ptr *C.OrtEpDevice
}

// EPDevices lists the EP devices of the loaded ONNX Runtime, in its order.
// Init must have succeeded.
func EPDevices() ([]EPDevice, error) {
	if err := openBridge(); err != nil {
		return nil, err
	}
	var list **C.OrtEpDevice
	var n C.size_t
	if err := cError(C.edge_ep_devices(&list, &n)); err != nil {
		return nil, fmt.Errorf("GetEpDevices: %w", err)
	}
	out := make([]EPDevice, int(n))
	for i := range out {
		d := C.edge_ep_at(list, C.size_t(i))
		out[i] = EPDevice{
			EP: C.GoString(C.edge_ep_name(d)), Vendor: C.GoString(C.edge_ep_vendor(d)),
			Type:           map[C.int]string{0: DeviceCPU, 1: DeviceGPU, 2: DeviceNPU}[C.edge_hw_type(d)],
			HardwareVendor: C.GoString(C.edge_hw_vendor(d)),
			VendorID:       uint32(C.edge_hw_vendor_id(d)), DeviceID: uint32(C.edge_hw_device_id(d)),
			ptr: d,
		}
	}
	return out, nil
}

// RegisterEPLibrary registers a plugin execution-provider library (a shared
// library exporting CreateEpFactories) under name with the process's ONNX
// Runtime environment; its devices then appear in EPDevices. Registering
// the same name and path again does nothing; the same name with another
// path is an error.
func RegisterEPLibrary(name, path string) error {
	if err := openBridge(); err != nil {
		return err
	}
	bridge.mu.Lock()
	defer bridge.mu.Unlock()
	if prev, ok := bridge.eps[name]; ok {
		if prev == path || sameFile(prev, path) {
			return nil
		}
		return fmt.Errorf("execution provider library %q is already registered from %s; cannot also register %s", name, prev, path)
	}
	cName, cPath := C.CString(name), C.CString(path)
	defer C.free(unsafe.Pointer(cName))
	defer C.free(unsafe.Pointer(cPath))
	if err := cError(C.edge_register(cName, cPath)); err != nil {
		return err
	}
	bridge.eps[name] = path
	return nil
}

// sessionOptionsHandle is the OrtSessionOptions of so: ort.SessionOptions's
// only field (pinned by TestBridgeOnnxruntimeGoLayout).
func sessionOptionsHandle(so *ort.SessionOptions) *C.OrtSessionOptions {
	return *(**C.OrtSessionOptions)(unsafe.Pointer(so))
}

// appendEP selects dev's execution provider for sessions made with so,
// with EP options (provider option names, e.g. "device_id").
func appendEP(so *ort.SessionOptions, dev EPDevice, options map[string]string) error {
	if err := openBridge(); err != nil {
		return err
	}
	if dev.ptr == nil {
		return errors.New("EP device not from EPDevices")
	}
	n := len(options)
	size := C.size_t(max(n, 1)) * C.size_t(unsafe.Sizeof(uintptr(0)))
	keys, vals := (**C.char)(C.malloc(size)), (**C.char)(C.malloc(size))
	defer C.free(unsafe.Pointer(keys))
	defer C.free(unsafe.Pointer(vals))
	ks, vs := unsafe.Slice(keys, max(n, 1)), unsafe.Slice(vals, max(n, 1))
	i := 0
	for k, v := range options {
		ks[i], vs[i] = C.CString(k), C.CString(v)
		defer C.free(unsafe.Pointer(ks[i]))
		defer C.free(unsafe.Pointer(vs[i]))
		i++
	}
	if err := cError(C.edge_append_v2(sessionOptionsHandle(so), dev.ptr, keys, vals, C.size_t(n))); err != nil {
		return fmt.Errorf("selecting %s (%s device) for the session: %w", dev.EP, dev.Type, err)
	}
	return nil
}

// addSessionConfig adds a session config entry through the C handle of so.
func addSessionConfig(so *ort.SessionOptions, key, value string) error {
	if err := openBridge(); err != nil {
		return err
	}
	cKey, cValue := C.CString(key), C.CString(value)
	defer C.free(unsafe.Pointer(cKey))
	defer C.free(unsafe.Pointer(cValue))
	return cError(C.edge_so_config(sessionOptionsHandle(so), cKey, cValue))
}

// envIsShared reports whether ONNX Runtime's CreateEnv hands out the
// environment the bridge holds (the process singleton onnxruntime_go
// created first); it releases the reference it takes.
func envIsShared() (bool, error) {
	if err := openBridge(); err != nil {
		return false, err
	}
	var again *C.OrtEnv
	if err := cError(C.edge_env_again(&again)); err != nil {
		return false, err
	}
	defer C.edge_release_env(again)
	return again == C.edge_get_env(), nil
}

// memoryInfo says where an OrtValue's memory lives.
type memoryInfo struct {
	p     *C.OrtMemoryInfo
	owned bool // created here (released by release), else owned by ORT
}

// newMemoryInfo creates a memory info for a device allocator: name "Cpu"
// for host memory, "Cuda" for CUDA device memory of GPU ordinal id.
func newMemoryInfo(name string, id int) (*memoryInfo, error) {
	if err := openBridge(); err != nil {
		return nil, err
	}
	cName := C.CString(name)
	defer C.free(unsafe.Pointer(cName))
	var p *C.OrtMemoryInfo
	if err := cError(C.edge_mem_info(cName, C.int(id), &p)); err != nil {
		return nil, fmt.Errorf("memory info %s:%d: %w", name, id, err)
	}
	return &memoryInfo{p: p, owned: true}, nil
}

// epMemoryInfo is the memory info of dev's default device memory (ORT owns
// it), or nil when the EP uses host memory.
func epMemoryInfo(dev EPDevice) *memoryInfo {
	if dev.ptr == nil {
		return nil
	}
	p := C.edge_ep_meminfo(dev.ptr)
	if p == nil {
		return nil
	}
	return &memoryInfo{p: (*C.OrtMemoryInfo)(unsafe.Pointer(p))}
}

// describe returns the allocator name, device id and device type
// (0 CPU, 1 GPU, 2 FPGA, 3 NPU) of the memory info.
func (m *memoryInfo) describe() (name string, id, devType int, err error) {
	var cName *C.char
	var cID, cType C.int
	if err := cError(C.edge_mem_info_desc(m.p, &cName, &cID, &cType)); err != nil {
		return "", 0, 0, err
	}
	return C.GoString(cName), int(cID), int(cType), nil
}

func (m *memoryInfo) release() {
	if m != nil && m.owned && m.p != nil {
		C.edge_release_mem_info(m.p)
		m.p = nil
	}
}

// value is an OrtValue over memory the caller owns (no copy): device memory
// by address, or a Go slice pinned until release.
type value struct {
	p   *C.OrtValue
	pin goruntime.Pinner
}

// elemSize is the byte size of the element types the encoder binds.
var elemSize = map[ort.TensorElementDataType]int64{
	ort.TensorElementDataTypeFloat: 4, ort.TensorElementDataTypeInt64: 8,
	ort.TensorElementDataTypeInt32: 4, ort.TensorElementDataTypeBool: 1,
	ort.TensorElementDataTypeFloat16: 2,
}

// newValue wraps bytes bytes at addr (in the memory info's memory) as a
// tensor of shape and element type t. The memory must outlive the value.
func newValue(info *memoryInfo, addr uintptr, bytes int64, shape []int64, t ort.TensorElementDataType) (*value, error) {
	size, ok := elemSize[t]
	if !ok {
		return nil, fmt.Errorf("element type %v is not supported by the bridge", t)
	}
	n := int64(1)
	for _, d := range shape {
		if d < 0 {
			return nil, fmt.Errorf("shape %v has a negative dimension", shape)
		}
		n *= d
	}
	if n*size != bytes {
		return nil, fmt.Errorf("shape %v of %v needs %d bytes; the buffer has %d", shape, t, n*size, bytes)
	}
	if addr == 0 && bytes > 0 {
		return nil, errors.New("nil buffer")
	}
	dims := (*C.int64_t)(C.malloc(C.size_t(8 * max(len(shape), 1))))
	defer C.free(unsafe.Pointer(dims))
	for i, d := range shape {
		unsafe.Slice(dims, len(shape))[i] = C.int64_t(d)
	}
	v := &value{}
	err := cError(C.edge_tensor(info.p, C.uintptr_t(addr), C.size_t(bytes), dims, C.size_t(len(shape)), C.int(t), &v.p))
	if err != nil {
		return nil, fmt.Errorf("wrapping %d bytes as a %v tensor %v: %w", bytes, t, shape, err)
	}
	return v, nil
}

// hostValue wraps a Go slice (pinned until release) as a CPU tensor.
func hostValue[T float32 | int64 | int32 | bool | uint16](info *memoryInfo, data []T, shape []int64, t ort.TensorElementDataType) (*value, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("empty %v tensor %v", t, shape)
	}
	var pin goruntime.Pinner
	pin.Pin(&data[0])
	v, err := newValue(info, uintptr(unsafe.Pointer(&data[0])), int64(len(data))*int64(unsafe.Sizeof(data[0])), shape, t)
	if err != nil {
		pin.Unpin()
		return nil, err
	}
	v.pin = pin
	return v, nil
}

func (v *value) release() {
	if v != nil && v.p != nil {
		C.edge_release_value(v.p)
		v.p = nil
		v.pin.Unpin()
	}
}

// tensorDesc describes an OrtValue tensor: where its data is, its element
// type and shape.
type tensorDesc struct {
	addr  uintptr
	elem  ort.TensorElementDataType
	shape []int64
}

func describeValue(p *C.OrtValue) (tensorDesc, error) {
	var addr C.uintptr_t
	var typ C.int
	var rank C.size_t
	dims := (*C.int64_t)(C.malloc(8 * 8))
	defer C.free(unsafe.Pointer(dims))
	if err := cError(C.edge_value_desc(p, &addr, &typ, dims, 8, &rank)); err != nil {
		return tensorDesc{}, err
	}
	d := tensorDesc{addr: uintptr(addr), elem: ort.TensorElementDataType(typ), shape: make([]int64, int(rank))}
	for i := range d.shape {
		d.shape[i] = int64(unsafe.Slice(dims, 8)[i])
	}
	return d, nil
}

// ioBindingHandle is the OrtIoBinding of b: ort.IoBinding's only field
// (pinned by TestBridgeOnnxruntimeGoLayout).
func ioBindingHandle(b *ort.IoBinding) *C.OrtIoBinding {
	return *(**C.OrtIoBinding)(unsafe.Pointer(b))
}

// binding binds a session's inputs and outputs to values (onnxruntime_go's
// IoBinding, driven through its C handle so that any OrtValue binds).
type binding struct {
	b *ort.IoBinding
}

func newBinding(s *ort.DynamicAdvancedSession) (*binding, error) {
	if err := openBridge(); err != nil {
		return nil, err
	}
	b, err := s.CreateIoBinding()
	if err != nil {
		return nil, fmt.Errorf("creating an IoBinding: %w", err)
	}
	return &binding{b: b}, nil
}

func (b *binding) input(name string, v *value) error {
	cName := C.CString(name)
	defer C.free(unsafe.Pointer(cName))
	if err := cError(C.edge_bind_input(ioBindingHandle(b.b), cName, v.p)); err != nil {
		return fmt.Errorf("binding input %s: %w", name, err)
	}
	return nil
}

func (b *binding) output(name string, v *value) error {
	cName := C.CString(name)
	defer C.free(unsafe.Pointer(cName))
	if err := cError(C.edge_bind_output(ioBindingHandle(b.b), cName, v.p)); err != nil {
		return fmt.Errorf("binding output %s: %w", name, err)
	}
	return nil
}

// outputTo lets ONNX Runtime allocate output name in the memory of info.
func (b *binding) outputTo(name string, info *memoryInfo) error {
	cName := C.CString(name)
	defer C.free(unsafe.Pointer(cName))
	if err := cError(C.edge_bind_output_to(ioBindingHandle(b.b), cName, info.p)); err != nil {
		return fmt.Errorf("binding output %s to a device: %w", name, err)
	}
	return nil
}

// boundOutput is an output value after a run; release it when its memory
// is no longer read.
type boundOutput struct {
	tensorDesc
	p *C.OrtValue
}

// elements is the number of elements of the output's shape.
func (o *boundOutput) elements() int64 {
	n := int64(1)
	for _, d := range o.shape {
		n *= d
	}
	return n
}

// copyTo copies a host-memory output's data into dst, which must hold
// exactly its elements of its element type (float32, int64, int32, or
// float16 as uint16 bits).
func (o *boundOutput) copyTo(dst any) error {
	var p unsafe.Pointer
	var n int
	var want ort.TensorElementDataType
	switch d := dst.(type) {
	case []float32:
		p, n, want = unsafe.Pointer(unsafe.SliceData(d)), 4*len(d), ort.TensorElementDataTypeFloat
	case []int64:
		p, n, want = unsafe.Pointer(unsafe.SliceData(d)), 8*len(d), ort.TensorElementDataTypeInt64
	case []int32:
		p, n, want = unsafe.Pointer(unsafe.SliceData(d)), 4*len(d), ort.TensorElementDataTypeInt32
	case []uint16: // float16 bits
		p, n, want = unsafe.Pointer(unsafe.SliceData(d)), 2*len(d), ort.TensorElementDataTypeFloat16
	default:
		return fmt.Errorf("cannot copy an output into a %T", dst)
	}
	if o.elem != want || int64(n) != o.elements()*elemSize[want] {
		return fmt.Errorf("output is %v %v; cannot copy it into a %T of %d elements", o.elem, o.shape, dst, n/int(elemSize[want]))
	}
	return cError(C.edge_copy_out(o.p, p, C.size_t(n)))
}

func (o *boundOutput) release() {
	if o != nil && o.p != nil {
		C.edge_release_value(o.p)
		o.p = nil
	}
}

// outputs returns the bound outputs of the last run, in binding order. On
// error nothing needs releasing.
func (b *binding) outputs() ([]*boundOutput, error) {
	var arr **C.OrtValue
	var n C.size_t
	if err := cError(C.edge_bound_outputs(ioBindingHandle(b.b), &arr, &n)); err != nil {
		return nil, fmt.Errorf("reading the bound outputs: %w", err)
	}
	if n == 0 {
		return nil, nil
	}
	defer C.free(unsafe.Pointer(arr))
	vals := unsafe.Slice(arr, int(n))
	out := make([]*boundOutput, int(n))
	var err error
	for i, p := range vals {
		out[i] = &boundOutput{p: p}
		if err == nil {
			out[i].tensorDesc, err = describeValue(p)
		}
	}
	if err != nil {
		for _, o := range out {
			o.release()
		}
		return nil, fmt.Errorf("reading the bound outputs: %w", err)
	}
	return out, nil
}

func (b *binding) clear() {
	b.b.ClearBoundInputs()
	b.b.ClearBoundOutputs()
}

func (b *binding) destroy() {
	if b != nil && b.b != nil {
		_ = b.b.Destroy()
		b.b = nil
	}
}
