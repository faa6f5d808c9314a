//go:build !kernels_external

package kernels

import (
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestManifest is the CI guard: every kernel source must hash to what the
// manifest recorded when the fatbin was built, the manifest must list no
// source that is gone, and the embedded fatbin must be the one it describes.
func TestManifest(t *testing.T) {
	m, err := ReadManifest()
	require.NoError(t, err)
	require.NotEmpty(t, m.NVCC)
	var sources []string
	for _, pat := range []string{"*.cu", "*.cuh", "*.h"} {
		got, err := filepath.Glob(pat)
		require.NoError(t, err)
		sources = append(sources, got...)
	}
	sort.Strings(sources)
	require.NotEmpty(t, sources)
	listed := make([]string, 0, len(m.Sources))
	for name := range m.Sources {
		listed = append(listed, name)
	}
	sort.Strings(listed)
	assert.Equal(t, sources, listed, "kernel sources differ from manifest.json: run kernels/build.sh on the GPU host")
	for _, name := range sources {
		b, err := os.ReadFile(name)
		require.NoError(t, err)
		assert.Equal(t, m.Sources[name], sha256Hex(b),
			"%s changed since edge.fatbin was built: run kernels/build.sh on the GPU host and commit edge.fatbin and manifest.json", name)
	}
	assert.Equal(t, m.Fatbin, sha256Hex(fatbin), "edge.fatbin does not match manifest.json")
}

func TestFatbinOverride(t *testing.T) {
	t.Setenv(EnvFatbin, "")
	img, src, err := Fatbin()
	require.NoError(t, err)
	assert.Equal(t, fatbin, img)
	assert.Contains(t, src, "embedded")

	p := filepath.Join(t.TempDir(), "x.fatbin")
	require.NoError(t, os.WriteFile(p, []byte{1, 2, 3}, 0o644))
	t.Setenv(EnvFatbin, p)
	img, src, err = Fatbin()
	require.NoError(t, err)
	assert.Equal(t, []byte{1, 2, 3}, img)
	assert.Equal(t, p, src)

	for _, bad := range []string{filepath.Join(t.TempDir(), "missing"), writeEmpty(t)} {
		t.Setenv(EnvFatbin, bad)
		_, _, err = Fatbin()
		assert.ErrorContains(t, err, EnvFatbin)
	}
}

func writeEmpty(t *testing.T) string {
	p := filepath.Join(t.TempDir(), "empty.fatbin")
	require.NoError(t, os.WriteFile(p, nil, 0o644))
	return p
}

// TestFrameStagesOnHost replays the per-frame FFT/power/mel stages of
// fbank.cu on the CPU (hosttest/run.sh) against a float64 DFT.
func TestFrameStagesOnHost(t *testing.T) {
	if _, err := exec.LookPath("g++"); err != nil {
		t.Fatal("g++ not found: the host replay of fbank_frame.cuh needs a C++17 compiler (Debian: apt-get install g++)")
	}
	out, err := exec.Command("hosttest/run.sh").CombinedOutput()
	t.Logf("%s", out)
	require.NoError(t, err)
}

func TestFatbinStale(t *testing.T) {
	t.Setenv(EnvFatbin, "")
	saved := fatbin
	t.Cleanup(func() { fatbin = saved })
	fatbin = append([]byte(nil), saved...)
	fatbin[len(fatbin)/2] ^= 1
	_, _, err := Fatbin()
	assert.ErrorContains(t, err, "does not match manifest.json", "a fatbin that is not the manifest's is refused")
}
