package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime/debug"

	"github.com/edgespeech/edge/runtime"
)

// version is set at link time (-ldflags "-X main.version=v1.2.3"); otherwise
// the module version or VCS revision from the build info is shown.
var version = ""

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

func versionString() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := info.Main.Version
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" && len(s.Value) >= 12 {
			v += " " + s.Value[:12]
		}
	}
	return v + " " + info.GoVersion
}
