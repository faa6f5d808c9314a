package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/edgespeech/edge/runtime/model"
)

const modelsUsage = "inspect DIR"

func init() {
	register(command{name: "models", usage: modelsUsage,
		summary: "inspect DIR: what edge detects in a model export, as a model.yaml to save and edit", run: runModels})
}

func runModels(_ context.Context, args []string) error {
	fs := newFlags("models", modelsUsage)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 || fs.Arg(0) != "inspect" {
		return fmt.Errorf("want 'inspect DIR': %w", errUsage)
	}
	dir := fs.Arg(1)
	m, err := model.Load(dir)
	if err != nil {
		return err
	}
	y, err := m.YAML()
	if err != nil {
		return err
	}
	var b strings.Builder
	if m.Format == model.FormatManifest {
		fmt.Fprintf(&b, "# %s: read from its %s.\n", dir, model.FileName)
	} else {
		fmt.Fprintf(&b, "# %s: detected a %s export (no %s).\n", dir, m.Format, model.FileName)
		fmt.Fprintf(&b, "# Save this as %s to override detection; each comment names the file and key a value came from.\n",
			filepath.Join(dir, model.FileName))
	}
	fmt.Fprintf(&b, "# %d tokens", m.Vocab.Len())
	if specials := m.Specials(); len(specials) > 0 {
		var names []string
		for id, s := range m.Vocab.Tokens() {
			if specials[id] {
				names = append(names, s)
			}
		}
		fmt.Fprintf(&b, "; never in output text: %s", strings.Join(names, " "))
	}
	b.WriteString(".\n")
	if m.Tok != nil {
		fmt.Fprintf(&b, "# align encodes text with %s %s.\n", m.Tok.Algo, m.Tok.Source)
	}
	for _, n := range m.Notes {
		fmt.Fprintf(&b, "# Note: %s.\n", n)
	}
	b.Write(y)
	_, err = os.Stdout.WriteString(b.String())
	return err
}

// defaultModelDirs are where a binary looks for its default model, in
// order: $EDGE_MODELS_DIR/default, models/default in the working
// directory, beside the binary (bin/edge -> models/default), the data
// directory `make install` fills (PREFIX/share/edge/models/default, PREFIX
// the binary's parent's parent), and $XDG_DATA_HOME/edge/models/default
// (~/.local/share by default), then /usr/local/share/edge and
// /usr/share/edge, so that a copy of an installed binary finds its model.
func defaultModelDirs() []string {
	var dirs []string
	if d := os.Getenv("EDGE_MODELS_DIR"); d != "" {
		dirs = append(dirs, filepath.Join(d, "default"))
	}
	dirs = append(dirs, filepath.Join("models", "default"))
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		bin := filepath.Dir(exe)
		dirs = append(dirs, filepath.Join(bin, "..", "models", "default"),
			filepath.Join(bin, "..", "share", "edge", "models", "default"))
	}
	data := os.Getenv("XDG_DATA_HOME")
	if data == "" {
		if home, err := os.UserHomeDir(); err == nil {
			data = filepath.Join(home, ".local", "share")
		}
	}
	if data != "" {
		dirs = append(dirs, filepath.Join(data, "edge", "models", "default"))
	}
	// A copy of the binary elsewhere still finds an installed model.
	return append(dirs, "/usr/local/share/edge/models/default", "/usr/share/edge/models/default")
}

// findDefaultModel returns the first default model directory that exists,
// or an error listing where it looked.
func findDefaultModel() (string, error) {
	dirs := defaultModelDirs()
	for _, d := range dirs {
		if st, err := os.Stat(filepath.Join(d, model.FileName)); err == nil && !st.IsDir() {
			return d, nil
		}
	}
	return "", errors.New("no default model: looked in " + strings.Join(dirs, ", ") +
		" (run make install, set EDGE_MODELS_DIR, or give --model DIR)")
}
