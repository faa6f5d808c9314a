package onnx

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFindLibrary(t *testing.T) {
	dir := t.TempDir()
	lib := filepath.Join(dir, "libonnxruntime.so")
	require.NoError(t, os.WriteFile(lib, []byte("x"), 0o644))
	const cached = "<cache>" // stands for CachedLibraryPath() in want and wantErr
	tests := []struct {
		name       string
		configured string
		env        string
		fillCache  bool
		want       string
		wantErr    []string
	}{
		{name: "configured wins", configured: lib, env: "/nope", fillCache: true, want: lib},
		{name: "configured missing is an error", configured: filepath.Join(dir, "gone.so"), fillCache: true,
			wantErr: []string{"gone.so (from config key ort_lib)", "no such file"}},
		{name: "configured directory", configured: dir, wantErr: []string{"is a directory"}},
		{name: "env", env: lib, fillCache: true, want: lib},
		{name: "env missing is an error", env: filepath.Join(dir, "gone.so"), fillCache: true,
			wantErr: []string{"gone.so (from $EDGE_ORT_LIB)"}},
		{name: "cache", fillCache: true, want: cached},
		{name: "nothing", wantErr: []string{"ONNX Runtime library not found", "ort_lib and $EDGE_ORT_LIB are not set",
			cached + " does not exist", "Run scripts/fetch-ort.sh", ORTVersion}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			xdg := t.TempDir()
			t.Setenv("XDG_CACHE_HOME", xdg)
			t.Setenv(EnvLibrary, tc.env)
			cachePath, err := CachedLibraryPath()
			require.NoError(t, err)
			require.True(t, strings.HasPrefix(cachePath, filepath.Join(xdg, "edge", "onnxruntime", ORTVersion, "linux-")), cachePath)
			if tc.fillCache {
				require.NoError(t, os.MkdirAll(filepath.Dir(cachePath), 0o755))
				require.NoError(t, os.WriteFile(cachePath, []byte("x"), 0o644))
			}
			got, err := FindLibrary(tc.configured)
			if tc.wantErr != nil {
				require.Error(t, err)
				for _, w := range tc.wantErr {
					assert.Contains(t, err.Error(), strings.ReplaceAll(w, cached, cachePath))
				}
				return
			}
			require.NoError(t, err)
			assert.Equal(t, strings.ReplaceAll(tc.want, cached, cachePath), got)
		})
	}
}

func TestNotFoundIsSentinel(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	t.Setenv(EnvLibrary, "")
	_, err := FindLibrary("")
	assert.True(t, errors.Is(err, ErrLibraryNotFound))
}

func TestInitAgain(t *testing.T) {
	lib := Library()
	require.NotEmpty(t, lib)
	assert.NoError(t, Init(""))
	assert.NoError(t, Init(lib))
	err := Init(filepath.Join(t.TempDir(), "other.so"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "ONNX Runtime is already loaded from "+lib)
	assert.NotEmpty(t, Version())
}

// A process without a library fails with the instruction: this runs the test
// binary itself with an empty cache, so its TestMain's Init fails.
func TestMissingLibraryFailsWithInstruction(t *testing.T) {
	if os.Getenv("EDGE_ONNX_CHILD") != "" {
		return
	}
	empty := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestMissingLibraryFailsWithInstruction$")
	cmd.Env = append(os.Environ(), "EDGE_ONNX_CHILD=1", "XDG_CACHE_HOME="+empty, EnvLibrary+"=")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the child must fail, output:\n%s", out)
	assert.Equal(t, 1, exit.ExitCode())
	assert.Contains(t, string(out), "FAIL runtime/onnx: ONNX Runtime library not found")
	assert.Contains(t, string(out), "Run scripts/fetch-ort.sh (from the edge repository)")
	assert.Contains(t, string(out), "or set EDGE_ORT_LIB")
}

// The provisioning script and the cache lookup must agree on the version.
func TestFetchScriptVersion(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", FetchCommand))
	require.NoError(t, err)
	assert.Contains(t, string(b), "\nORT_VERSION="+ORTVersion+"\n")
	assert.Contains(t, string(b), `/edge/onnxruntime/${ORT_VERSION}/linux-${arch}"`)
}

func TestCheckVersion(t *testing.T) {
	for _, tc := range []struct {
		v    string
		api  bool
		fail bool
	}{
		{"1.24.0", true, false}, {"1.24.1", true, false}, {"1.30.0", true, false}, {"2.0.0", true, false},
		{"1.25.0-dev", true, false},
		{"1.23.2", true, true}, {"1.22.0", false, true}, {"1.9.0", false, true},
		{"1.30.0", false, true}, // a library that does not serve API 24 is refused whatever it says
	} {
		err := checkVersion("/x/libonnxruntime.so", tc.v, tc.api)
		if !tc.fail {
			assert.NoError(t, err, tc.v)
			continue
		}
		require.Error(t, err, tc.v)
		assert.ErrorIs(t, err, ErrTooOld)
		assert.Contains(t, err.Error(), "/x/libonnxruntime.so is ONNX Runtime "+tc.v)
		assert.Contains(t, err.Error(), "edge needs ONNX Runtime >= "+MinVersion)
		assert.Contains(t, err.Error(), "docs/jetson.md")
	}
	assert.Equal(t, 24, APIVersion, "MinVersion and the docs assume C API version 24 (onnxruntime_go v1.27.0)")
}

func TestLoadedVersionAtLeastMinimum(t *testing.T) {
	v, err := LibraryVersion(Library())
	require.NoError(t, err)
	assert.Equal(t, Version(), v)
	got, err := parseVersion(v)
	require.NoError(t, err)
	minimum, _ := parseVersion(MinVersion)
	assert.False(t, versionLess(got, minimum))
}

// An older library (the 1.22 and 1.23 builds JetPack 6 users have) fails
// Init with its version and the minimum. EDGE_ORT_OLD_LIB names one (the
// ORT range target, scripts/ort-range.sh, sets it to the npm 1.23.2 and
// 1.22.0 builds); without it the test is skipped. The child process loads it,
// so this process keeps its own library.
func TestOlderLibraryRefused(t *testing.T) {
	if os.Getenv("EDGE_ONNX_CHILD") != "" {
		return
	}
	old := os.Getenv("EDGE_ORT_OLD_LIB")
	if old == "" {
		t.Skip("EDGE_ORT_OLD_LIB is not set (scripts/ort-range.sh sets it to ONNX Runtime 1.23.2 and 1.22.0)")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestOlderLibraryRefused$")
	cmd.Env = append(os.Environ(), "EDGE_ONNX_CHILD=1", EnvLibrary+"="+old)
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	require.ErrorAs(t, err, &exit, "the child must fail, output:\n%s", out)
	assert.Contains(t, string(out), "FAIL runtime/onnx: ONNX Runtime is older than "+MinVersion+": "+old+" is ONNX Runtime 1.2")
	assert.Contains(t, string(out), "edge needs ONNX Runtime >= "+MinVersion+" (C API version 24")
}
