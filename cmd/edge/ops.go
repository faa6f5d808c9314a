package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/edgespeech/edge/runtime"
	"github.com/edgespeech/edge/runtime/npy"
)

func init() {
	register(command{name: "ops", usage: "[--format text|json]", summary: "list registered ops with inputs, outputs and parameters", run: runOps})
	register(command{name: "op", usage: "NAME --in NAME=FILE.npy ... [--set KEY=VALUE ...] --out DIR", summary: "run one op on npy inputs, write DIR/<output>.npy", run: runOp})
}

type tensorJSON struct {
	Name      string   `json:"name"`
	Signature string   `json:"signature"`
	DTypes    []string `json:"dtypes"`
	Dims      []string `json:"dims"`
	Optional  bool     `json:"optional,omitempty"`
	Doc       string   `json:"doc"`
}

type paramJSON struct {
	Name    string   `json:"name"`
	Kind    string   `json:"kind"`
	Default any      `json:"default"`
	Enum    []string `json:"enum,omitempty"`
	Doc     string   `json:"doc"`
}

type opJSON struct {
	Name    string       `json:"name"`
	Doc     string       `json:"doc"`
	Inputs  []tensorJSON `json:"inputs"`
	Outputs []tensorJSON `json:"outputs"`
	Params  []paramJSON  `json:"params"`
}

func describeOp(s *runtime.OpSpec) opJSON {
	tensors := func(specs []runtime.TensorSpec) []tensorJSON {
		out := make([]tensorJSON, len(specs))
		for i, t := range specs {
			dts := make([]string, len(t.DTypes))
			for j, d := range t.DTypes {
				dts[j] = d.String()
			}
			out[i] = tensorJSON{Name: t.Name, Signature: t.Signature(), DTypes: dts, Dims: t.Dims, Optional: t.Optional, Doc: t.Doc}
		}
		return out
	}
	o := opJSON{Name: s.Name, Doc: s.Doc, Inputs: tensors(s.Inputs), Outputs: tensors(s.Outputs), Params: []paramJSON{}}
	for _, p := range s.Params {
		o.Params = append(o.Params, paramJSON{Name: p.Name, Kind: p.Kind.String(), Default: p.Default, Enum: p.Enum, Doc: p.Doc})
	}
	return o
}

func runOps(_ context.Context, args []string) error {
	fs := newFlags("ops", "[--format text|json]")
	format := fs.String("format", "text", "output format: text or json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var ops []opJSON
	for _, s := range runtime.List() {
		ops = append(ops, describeOp(s))
	}
	switch *format {
	case "json":
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(ops)
	case "text":
		writeOpsText(os.Stdout, ops)
		return nil
	}
	return fmt.Errorf("unknown --format %q (want text or json): %w", *format, errUsage)
}

func writeOpsText(w io.Writer, ops []opJSON) {
	for _, o := range ops {
		fmt.Fprintf(w, "%s\n  %s\n", o.Name, strings.ReplaceAll(o.Doc, "\n", "\n  "))
		for _, group := range []struct {
			title string
			ts    []tensorJSON
		}{{"inputs", o.Inputs}, {"outputs", o.Outputs}} {
			fmt.Fprintf(w, "  %s:\n", group.title)
			for _, t := range group.ts {
				opt := ""
				if t.Optional {
					opt = " (optional)"
				}
				fmt.Fprintf(w, "    %-14s %s%s  %s\n", t.Name, t.Signature, opt, t.Doc)
			}
		}
		if len(o.Params) > 0 {
			fmt.Fprintf(w, "  params:\n")
			for _, p := range o.Params {
				def := ""
				if p.Default != nil {
					def = fmt.Sprintf(" = %v", p.Default)
				}
				enum := ""
				if len(p.Enum) > 0 {
					enum = " {" + strings.Join(p.Enum, "|") + "}"
				}
				fmt.Fprintf(w, "    %-20s %s%s%s  %s\n", p.Name, p.Kind, def, enum, p.Doc)
			}
		}
		fmt.Fprintln(w)
	}
}

func runOp(ctx context.Context, args []string) error {
	const usage = "NAME --in NAME=FILE.npy ... [--set KEY=VALUE ...] --out DIR"
	fs := newFlags("op", usage)
	ins := fs.StringArray("in", nil, "input tensor as NAME=FILE.npy (repeatable)")
	sets := fs.StringArray("set", nil, "op parameter as KEY=VALUE (repeatable)")
	out := fs.String("out", "", "directory for <output>.npy files")
	addConfigFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 || *out == "" {
		return fmt.Errorf("need one op NAME and --out DIR: %w", errUsage)
	}
	name := fs.Arg(0)
	k, err := loadConfig(fs, nil)
	if err != nil {
		return err
	}
	params, err := opParams(k, name, *sets)
	if err != nil {
		return err
	}
	b, err := openBackend(k)
	if err != nil {
		return err
	}
	defer b.Close()
	inst, err := runtime.New(name, params, b)
	if err != nil {
		return err
	}
	inputs := runtime.Tensors{}
	for _, kv := range *ins {
		tname, file, ok := strings.Cut(kv, "=")
		if !ok || tname == "" || file == "" {
			return fmt.Errorf("--in %q: want NAME=FILE.npy: %w", kv, errUsage)
		}
		t, err := npy.ReadFile(file)
		if err != nil {
			return fmt.Errorf("input %s: %w", tname, err)
		}
		inputs[tname] = t
	}
	res, err := inst.Run(ctx, inputs)
	if err != nil {
		return err
	}
	defer res.Release()
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	names := make([]string, 0, len(res))
	for n := range res {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		t, err := b.Download(res[n])
		if err != nil {
			return fmt.Errorf("output %s: %w", n, err)
		}
		path := filepath.Join(*out, n+".npy")
		if err := npy.WriteFile(path, t); err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "wrote %s %v\n", path, t)
	}
	return nil
}
