package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime/model"
	"github.com/edgespeech/edge/runtime/npy"
)

const testModels = "../../models/testdata"

// `edge models inspect` prints a model.yaml that, saved in the directory,
// loads to the manifest detection made.
func TestModelsInspectRoundTrip(t *testing.T) {
	for _, dir := range []string{"w2v", "parakeet", "nemo", "sherpa"} {
		t.Run(dir, func(t *testing.T) {
			src := filepath.Join(testModels, dir)
			code, out, stderr := capture(t, "models", "inspect", src)
			require.Equal(t, 0, code, stderr)
			assert.Contains(t, out, "# from ")
			detected, err := model.Load(src)
			require.NoError(t, err)
			cp := t.TempDir()
			copyTree(t, src, cp)
			require.NoError(t, os.WriteFile(filepath.Join(cp, model.FileName), []byte(out), 0o644))
			saved, err := model.Load(cp)
			require.NoError(t, err, out)
			assert.Equal(t, model.FormatManifest, saved.Format)
			for _, m := range []*model.Manifest{detected, saved} {
				m.Dir, m.Format, m.Sources, m.Notes, m.Tok = "", "", nil, nil, nil
			}
			assert.Equal(t, detected, saved)
		})
	}
	code, _, stderr := capture(t, "models", "inspect", t.TempDir())
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "no model.yaml and no model export")
	code, _, _ = capture(t, "models", "list")
	assert.Equal(t, 2, code)
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	require.NoError(t, filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if info.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	}))
}

// `edge emissions` writes the log-probs the framework golden holds.
func TestEmissionsCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "lp.npy")
	code, _, stderr := capture(t, "emissions", "--model", filepath.Join(testModels, "w2v"), "--threads", "1", "--out", out,
		filepath.Join("..", "..", "models", "default", "testdata", "words_1.wav"))
	require.Equal(t, 0, code, stderr)
	assert.Contains(t, stderr, "log-probs [140, 32]")
	got, err := npy.ReadFile(out)
	require.NoError(t, err)
	want, err := npy.ReadFile(filepath.Join(testModels, "golden", "w2v__words_1.npy"))
	require.NoError(t, err)
	require.Equal(t, want.Shape(), got.Shape())
	for i, v := range want.F32() {
		require.InDelta(t, v, got.F32()[i], 1e-4, "index %d", i)
	}
	code, _, stderr = capture(t, "emissions", "--model", filepath.Join(testModels, "w2v"), "x.wav")
	assert.Equal(t, 2, code)
	assert.Contains(t, stderr, "--out FILE.npy is required")
}

// A binary outside the checkout finds its default model in the data
// directories make install fills.
func TestDefaultModelSearch(t *testing.T) {
	t.Chdir(t.TempDir()) // no models/default here
	t.Setenv("EDGE_MODELS_DIR", "")
	data := t.TempDir()
	t.Setenv("XDG_DATA_HOME", data)
	if _, err := os.Stat("/usr/local/share/edge/models/default/model.yaml"); err != nil {
		_, err := findDefaultModel()
		require.Error(t, err)
		assert.Contains(t, err.Error(), "make install")
	}
	def := filepath.Join(data, "edge", "models", "default")
	require.NoError(t, os.MkdirAll(def, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(def, model.FileName), []byte("name: x\n"), 0o644))
	got, err := findDefaultModel()
	require.NoError(t, err)
	assert.Equal(t, def, got)
	mine := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(mine, "default"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(mine, "default", model.FileName), []byte("name: x\n"), 0o644))
	t.Setenv("EDGE_MODELS_DIR", mine)
	got, err = findDefaultModel()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(mine, "default"), got)
	d, err := modelDir("")
	require.NoError(t, err)
	assert.True(t, strings.HasSuffix(d, "default"))
}
