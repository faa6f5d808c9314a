package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"
	"strings"

	"github.com/edgespeech/edge/runtime"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); otherwise
// the module version or VCS revision from the build info is shown.
var version = ""

// revision is the VCS revision, set at link time by the Makefile
// (-ldflags "-X main.revision=..."), for builds the go command does not stamp.
var revision = ""

func init() {
	register(command{name: "devices", usage: "[--format text|json]", summary: "list backends and the devices they find", run: runDevices})
	register(command{name: "version", usage: "", summary: "print the version", run: runVersion})
}

type backendJSON struct {
	Backend string               `json:"backend"`
	Error   string               `json:"error,omitempty"`
	Devices []runtime.DeviceInfo `json:"devices"`
}

func runDevices(_ context.Context, args []string) error {
	fs := newFlags("devices", "[--format text|json]")
	format := fs.String("format", "text", "output format: text or json")
	if err := fs.Parse(args); err != nil {
		return err
	}
	var all []backendJSON
	for _, name := range runtime.Backends() {
		bj := backendJSON{Backend: name, Devices: []runtime.DeviceInfo{}}
		b, err := runtime.OpenBackend(name)
		if err != nil {
			bj.Error = err.Error()
		} else {
			bj.Devices = b.Devices()
			b.Close()
		}
		all = append(all, bj)
	}
	if *format == "json" {
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(all)
	}
	for _, b := range all {
		fmt.Printf("%s:\n", b.Backend)
		if b.Error != "" {
			fmt.Printf("  unavailable: %s\n", b.Error)
		}
		for _, d := range b.Devices {
			mem := ""
			if d.Memory > 0 {
				mem = fmt.Sprintf(", %.1f GiB", float64(d.Memory)/(1<<30))
			}
			fmt.Printf("  %s%s %s\n", d.Name, mem, d.Detail)
		}
	}
	return nil
}

func runVersion(_ context.Context, args []string) error {
	fmt.Println("edge", versionString())
	return nil
}

// versionString is "MODULE_VERSION rev REVISION[+dirty] GO_VERSION": the
// module version from the build info ("(devel)" for a source build) or the
// link-time version, and the VCS revision the go command stamped (git
// checkouts; not git worktrees, nor -buildvcs=false) or the Makefile linked
// in (main.revision).
func versionString() string {
	info, ok := debug.ReadBuildInfo()
	v := version
	if v == "" {
		v = "(unknown)"
		if ok && info.Main.Version != "" {
			v = info.Main.Version
		}
	}
	rev, dirty := revision, false
	if ok {
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
	}
	if rev != "" {
		if len(rev) > 12 && !strings.Contains(rev, "+") {
			rev = rev[:12]
		}
		if dirty {
			rev += "+dirty"
		}
		v += " rev " + rev
	} else {
		v += " (no VCS revision: build with make build)"
	}
	if ok {
		v += " " + info.GoVersion
	}
	return v
}
