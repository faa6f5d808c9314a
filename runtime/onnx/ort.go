// Package onnx runs ONNX models with ONNX Runtime (through
// github.com/yalue/onnxruntime_go) and registers the "encoder" op: a CTC
// acoustic model that maps features (or raw waveform) to log-probabilities.
//
// ONNX Runtime is a shared library loaded at run time, once per process. It
// is found, in order, at the path the caller configures (the config key
// ort_lib), at $EDGE_ORT_LIB, at ../lib/libonnxruntime.so beside the
// executable (the make dist layout), or in the cache that scripts/fetch-ort.sh
// fills: ${XDG_CACHE_HOME:-~/.cache}/edge/onnxruntime/<ORTVersion>/linux-<arch>/libonnxruntime.so.
// onnxruntime_go v1.27.0 needs ONNX Runtime >= 1.24 (C API version 24,
// MinVersion): Init refuses an older library with an error naming its version.
package onnx

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"

	ort "github.com/yalue/onnxruntime_go"
)

// ORTVersion is the ONNX Runtime release scripts/fetch-ort.sh provisions.
const ORTVersion = "1.30.0"

// EnvLibrary names the environment variable holding a library path.
const EnvLibrary = "EDGE_ORT_LIB"

// FetchCommand is what a user runs, from the repository root, to provision
// the library into the cache.
const FetchCommand = "scripts/fetch-ort.sh"

// ErrLibraryNotFound is wrapped by FindLibrary's error when no library is
// configured and the cache is empty.
var ErrLibraryNotFound = errors.New("ONNX Runtime library not found")

// CachedLibraryPath is where scripts/fetch-ort.sh installs the library for
// this machine (whether or not it is there).
func CachedLibraryPath() (string, error) {
	arch, ok := map[string]string{"amd64": "x64", "arm64": "arm64"}[runtime.GOARCH]
	if !ok || runtime.GOOS != "linux" {
		return "", fmt.Errorf("no provisioned ONNX Runtime for %s/%s (linux amd64 and arm64 only); set %s to a libonnxruntime of version >= 1.24", runtime.GOOS, runtime.GOARCH, EnvLibrary)
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cannot locate the ONNX Runtime cache: %w (set XDG_CACHE_HOME or %s)", err, EnvLibrary)
		}
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "edge", "onnxruntime", ORTVersion, "linux-"+arch, "libonnxruntime.so"), nil
}

// FindLibrary returns the ONNX Runtime library to load: configured when it
// is not empty, else $EDGE_ORT_LIB, else ../lib/libonnxruntime.so beside the
// executable (a make dist tarball), else the cache. A configured or
// environment path that does not exist is an error (there is no silent
// fallback); an empty cache gives an error wrapping ErrLibraryNotFound that
// says what to run.
func FindLibrary(configured string) (string, error) {
	check := func(p, source string) (string, error) {
		st, err := os.Stat(p)
		if err != nil {
			return "", fmt.Errorf("ONNX Runtime library %s (from %s): %w", p, source, err)
		}
		if st.IsDir() {
			return "", fmt.Errorf("ONNX Runtime library %s (from %s) is a directory; want the libonnxruntime.so file", p, source)
		}
		return p, nil
	}
	if configured != "" {
		return check(configured, "config key ort_lib")
	}
	if env := os.Getenv(EnvLibrary); env != "" {
		return check(env, "$"+EnvLibrary)
	}
	if beside := besideExecutable(); beside != "" {
		return beside, nil
	}
	cached, err := CachedLibraryPath()
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(cached); err != nil {
		return "", fmt.Errorf("%w: the config key ort_lib and $%s are not set, and %s does not exist.\n"+
			"Run %s (from the edge repository) to fetch ONNX Runtime %s into that cache,\n"+
			"or set %s to a libonnxruntime.so of ONNX Runtime >= 1.24",
			ErrLibraryNotFound, EnvLibrary, cached, FetchCommand, ORTVersion, EnvLibrary)
	}
	return cached, nil
}

// besideExecutable is ../lib/libonnxruntime.so relative to the running
// binary when that file exists (the layout of the make dist tarballs:
// bin/edge, lib/libonnxruntime.so), else "".
func besideExecutable() string {
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	if real, err := filepath.EvalSymlinks(exe); err == nil {
		exe = real
	}
	p := filepath.Join(filepath.Dir(exe), "..", "lib", "libonnxruntime.so")
	if st, err := os.Stat(p); err == nil && !st.IsDir() {
		return filepath.Clean(p)
	}
	return ""
}

var env struct {
	sync.Mutex
	library string // the loaded library; "" until Init succeeds
}

// Init loads the ONNX Runtime library and creates the process-wide ONNX
// Runtime environment. library "" means FindLibrary(""). Init is safe for
// concurrent use; once it has succeeded, later calls return nil when they
// name no library or the same one, and an error when they name another (a
// process loads one ONNX Runtime). The environment lives until the process ends.
func Init(library string) error {
	env.Lock()
	defer env.Unlock()
	if env.library != "" {
		if library != "" && !sameFile(library, env.library) {
			return fmt.Errorf("ONNX Runtime is already loaded from %s; cannot also load %s in this process", env.library, library)
		}
		return nil
	}
	path, err := FindLibrary(library)
	if err != nil {
		return err
	}
	if _, err := LibraryVersion(path); err != nil {
		return err
	}
	ort.SetSharedLibraryPath(path)
	// Errors reach the caller through the API; ORT's own log stays quiet.
	if err := ort.InitializeEnvironment(ort.WithLogLevelFatal()); err != nil {
		return fmt.Errorf("loading ONNX Runtime library %s: %w", path, err)
	}
	env.library = path
	return nil
}

// Library is the path of the loaded library ("" before Init).
func Library() string {
	env.Lock()
	defer env.Unlock()
	return env.library
}

// Version is the loaded ONNX Runtime's version ("" before Init).
func Version() string {
	if Library() == "" {
		return ""
	}
	return ort.GetVersion()
}

func sameFile(a, b string) bool {
	if a == b {
		return true
	}
	sa, err1 := os.Stat(a)
	sb, err2 := os.Stat(b)
	return err1 == nil && err2 == nil && os.SameFile(sa, sb)
}
