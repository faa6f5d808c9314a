package main

import (
	"fmt"
	"strings"

	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"

	"github.com/edgespeech/edge/runtime"
)

// configKeys are the top-level keys an edge config file, EDGE_* variable or
// flag may set. Op parameters live under ops.<op name>.
var configKeys = []string{
	"backend", "config", "ops", "pipeline", "model", "models_dir", "ort_lib", "threads", "precision",
	"format", "out", "in", "set", "preset", "device", "text", "text_file", "stats",
	"chunk_seconds", "execution_provider", "ort_cuda_ep", "cudnn_conv_algo_search", "cuda_tf32", "cudnn_conv1d_nc1d", "ort_profile", "fallback", "bind", "progress",
	"strict", "raw", "rate", "channels", "quiet",
	"stream_chunk", "stream_left", "stream_look_ahead", "partials",
	"vad", "max_segment", "vad_threshold",
	"batch", "batch_wait", "pad_to",
	"kernels_fatbin", // EDGE_KERNELS_FATBIN, read by package kernels
	"vad_model",      // EDGE_VAD_MODEL, read by package plugins/vad
}

// addConfigFlags adds the flags every data command shares.
func addConfigFlags(fs *pflag.FlagSet) {
	fs.String("config", "", "YAML config file (layered: defaults < file < EDGE_* env < flags)")
	fs.String("backend", "cpu", "backend to run ops on: "+strings.Join(runtime.Backends(), ", "))
}

// loadConfig layers defaults, the --config file, EDGE_* variables and the
// flags the user set.
func loadConfig(fs *pflag.FlagSet, defaults map[string]any) (*koanf.Koanf, error) {
	file, _ := fs.GetString("config")
	return runtime.LoadConfig(runtime.ConfigSources{
		Defaults: defaults,
		File:     file,
		Flags:    fs,
		Known:    configKeys,
	})
}

// opParams returns the parameters of op name: ops.<name>.* from the config
// layers, overridden by --set KEY=VALUE pairs.
func opParams(k *koanf.Koanf, name string, sets []string) (map[string]any, error) {
	params := map[string]any{}
	if sub := k.Cut("ops." + name); sub != nil {
		for key, v := range sub.All() {
			params[key] = v
		}
	}
	for _, kv := range sets {
		key, value, ok := strings.Cut(kv, "=")
		if !ok || key == "" {
			return nil, fmt.Errorf("--set %q: want KEY=VALUE: %w", kv, errUsage)
		}
		params[key] = value
	}
	return params, nil
}

// openBackend opens the backend named by the "backend" config key.
func openBackend(k *koanf.Koanf) (runtime.Backend, error) {
	name := k.String("backend")
	if name == "" {
		name = "cpu"
	}
	return runtime.OpenBackend(name)
}
