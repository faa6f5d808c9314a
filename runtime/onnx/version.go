package onnx

// The version check that runs before onnxruntime_go loads a library: it
// reads the library's version string through OrtGetApiBase (present in every
// ONNX Runtime release) so that an older library is refused with an error
// that names its version and the minimum, not onnxruntime_go's "Error
// setting ORT API base".

/*
#cgo CFLAGS: -I${SRCDIR}/ortc
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include "onnxruntime_c_api.h"

// edge_probe opens path (RTLD_LAZY, as onnxruntime_go does, so its own
// dlopen later finds this handle) and reports its version string and
// whether it serves C API version ORT_API_VERSION. On a refusal the caller
// closes the handle with edge_probe_close.
static char *edge_probe(const char *path, void **handle, const char **version, int *api) {
	void *h = dlopen(path, RTLD_LAZY);
	if (h == NULL) {
		const char *e = dlerror();
		return strdup(e != NULL ? e : "dlopen failed");
	}
	*handle = h;
	typedef const OrtApiBase *(*base_fn)(void);
	base_fn f = (base_fn)dlsym(h, "OrtGetApiBase");
	if (f == NULL) return strdup("the library has no OrtGetApiBase: it is not ONNX Runtime");
	const OrtApiBase *b = f();
	*version = b->GetVersionString();
	*api = b->GetApi(ORT_API_VERSION) != NULL;
	return NULL;
}
static void edge_probe_close(void *h) { if (h != NULL) dlclose(h); }
static int edge_api_version(void) { return ORT_API_VERSION; }
*/
import "C"

import (
	"fmt"
	"strconv"
	"strings"
	"unsafe"
)

// MinVersion is the oldest ONNX Runtime release edge runs with:
// onnxruntime_go v1.27.0 (and this package's bridge) ask for C API version
// APIVersion, which ONNX Runtime serves from 1.24 on. Older libraries (the
// JetPack 6 wheels of jetson-ai-lab are 1.22 and 1.23) are refused by Init
// with an error naming both versions; docs/jetson.md says how a JetPack 6
// user gets a newer one.
const MinVersion = "1.24.0"

// APIVersion is the ONNX Runtime C API version edge is compiled against.
var APIVersion = int(C.edge_api_version())

// ErrTooOld is wrapped by Init's error for a library older than MinVersion.
var ErrTooOld = fmt.Errorf("ONNX Runtime is older than %s", MinVersion)

// parseVersion reads "major.minor.patch" (anything after a '-' or '+' is
// ignored; a missing patch is 0).
func parseVersion(v string) ([3]int, error) {
	var out [3]int
	core, _, _ := strings.Cut(v, "-")
	core, _, _ = strings.Cut(core, "+")
	parts := strings.Split(strings.TrimSpace(core), ".")
	if len(parts) < 2 || len(parts) > 3 {
		return out, fmt.Errorf("version %q is not major.minor.patch", v)
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return out, fmt.Errorf("version %q is not major.minor.patch", v)
		}
		out[i] = n
	}
	return out, nil
}

// versionLess reports whether a < b for versions parseVersion reads.
func versionLess(a, b [3]int) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// checkVersion is the decision Init makes for a library of version v that
// does (api) or does not serve C API version APIVersion.
func checkVersion(path, v string, api bool) error {
	got, err := parseVersion(v)
	minimum, _ := parseVersion(MinVersion)
	if err == nil && versionLess(got, minimum) || !api {
		return fmt.Errorf("%w: %s is ONNX Runtime %s; edge needs ONNX Runtime >= %s (C API version %d, for onnxruntime_go v1.27.0). "+
			"Run %s for the tested CPU build, or point %s at a newer GPU build "+
			"(on JetPack 6 the jetson-ai-lab 1.22/1.23 wheels are too old: build ONNX Runtime >= %s from source, docs/jetson.md)",
			ErrTooOld, path, v, MinVersion, APIVersion, FetchCommand, EnvLibrary, MinVersion)
	}
	return nil
}

// LibraryVersion opens the ONNX Runtime library at path and checks it:
// its version string, and an error wrapping ErrTooOld when it is older than
// MinVersion or lacks C API version APIVersion. A library that is accepted
// stays loaded (Init loads it next); a refused one is closed again.
func LibraryVersion(path string) (string, error) {
	cPath := C.CString(path)
	defer C.free(unsafe.Pointer(cPath))
	var h unsafe.Pointer
	var version *C.char
	var api C.int
	if err := cError(C.edge_probe(cPath, &h, &version, &api)); err != nil {
		C.edge_probe_close(h)
		return "", fmt.Errorf("loading ONNX Runtime library %s: %w", path, err)
	}
	v := C.GoString(version)
	if err := checkVersion(path, v, api != 0); err != nil {
		C.edge_probe_close(h)
		return v, err
	}
	return v, nil
}
