package runtime

import (
	"fmt"
	"os"
	"strings"

	"github.com/knadh/koanf/parsers/yaml"
	"github.com/knadh/koanf/providers/confmap"
	"github.com/knadh/koanf/providers/env/v2"
	"github.com/knadh/koanf/providers/file"
	"github.com/knadh/koanf/providers/posflag"
	"github.com/knadh/koanf/v2"
	"github.com/spf13/pflag"
)

// EnvPrefix starts every environment variable edge reads.
const EnvPrefix = "EDGE_"

// ConfigSources lists the layers of a configuration, lowest precedence first:
// Defaults, then the YAML File, then EDGE_* environment variables, then the
// flags the user actually set.
type ConfigSources struct {
	// Defaults are nested maps (or flat keys joined with ".").
	Defaults map[string]any
	// File is an optional YAML file; "" skips it.
	File string
	// Environ returns "KEY=value" pairs; nil means os.Environ. A variable
	// EDGE_A__B_C sets key "a.b_c": the prefix is dropped, the rest lower-cased,
	// and "__" separates nesting levels.
	Environ func() []string
	// Flags, when non-nil, contributes every flag the user changed. A flag
	// named "ort-lib" sets key "ort_lib"; dots in flag names nest.
	Flags *pflag.FlagSet
	// Known, when non-nil, lists every accepted top-level key; any other key
	// from the file, the environment or the flags is an error. (Op parameters
	// are checked separately against each op's declared parameters.)
	Known []string
}

// LoadConfig merges the layers of src into one koanf instance.
func LoadConfig(src ConfigSources) (*koanf.Koanf, error) {
	k := koanf.New(".")
	if src.Defaults != nil {
		if err := k.Load(confmap.Provider(src.Defaults, "."), nil); err != nil {
			return nil, fmt.Errorf("config defaults: %w", err)
		}
	}
	if src.File != "" {
		if _, err := os.Stat(src.File); err != nil {
			return nil, fmt.Errorf("config file: %w", err)
		}
		if err := k.Load(file.Provider(src.File), yaml.Parser()); err != nil {
			return nil, fmt.Errorf("config file %s: %w", src.File, err)
		}
	}
	fromEnv := map[string]string{} // key -> the variable that set it, for errors
	envp := env.Provider(".", env.Opt{
		Prefix:      EnvPrefix,
		EnvironFunc: src.Environ,
		TransformFunc: func(name, value string) (string, any) {
			key, v := envKey(name, value)
			fromEnv[key] = name
			return key, v
		},
	})
	if err := k.Load(envp, nil); err != nil {
		return nil, fmt.Errorf("config environment: %w", err)
	}
	if src.Flags != nil {
		fp := posflag.ProviderWithFlag(src.Flags, ".", k, func(f *pflag.Flag) (string, any) {
			return strings.ReplaceAll(f.Name, "-", "_"), posflag.FlagVal(src.Flags, f)
		})
		if err := k.Load(fp, nil); err != nil {
			return nil, fmt.Errorf("config flags: %w", err)
		}
	}
	if src.Known != nil {
		if err := checkKnownKeys(k, src.Known, fromEnv); err != nil {
			return nil, err
		}
	}
	return k, nil
}

// envKey maps EDGE_ENCODER__THREADS=4 to ("encoder.threads", "4").
func envKey(name, value string) (string, any) {
	key := strings.ToLower(strings.TrimPrefix(name, EnvPrefix))
	return strings.ReplaceAll(key, "__", "."), value
}

// checkKnownKeys fails on the first key whose top level is not in known,
// naming the environment variable that set it when one did (fromEnv).
func checkKnownKeys(k *koanf.Koanf, known []string, fromEnv map[string]string) error {
	ok := map[string]bool{}
	for _, n := range known {
		ok[n] = true
	}
	for _, key := range k.Keys() {
		top, _, _ := strings.Cut(key, ".")
		if ok[top] {
			continue
		}
		if name, isEnv := fromEnv[key]; isEnv {
			return fmt.Errorf("unknown config key %q, set by the environment variable %s (every %s* variable is configuration; known keys: %s)", key, name, EnvPrefix, strings.Join(known, ", "))
		}
		return fmt.Errorf("unknown config key %q (known: %s; environment variables start with %s)", key, strings.Join(known, ", "), EnvPrefix)
	}
	return nil
}
