module github.com/edgespeech/edge

go 1.26

require (
	github.com/go-viper/mapstructure/v2 v2.4.0
	github.com/hajimehoshi/go-mp3 v0.3.4
	github.com/jfreymuth/vorbis v1.0.2
	github.com/knadh/koanf/maps v0.1.2
	github.com/knadh/koanf/parsers/yaml v1.1.1
	github.com/knadh/koanf/providers/confmap v1.0.1
	github.com/knadh/koanf/providers/env/v2 v2.0.2
	github.com/knadh/koanf/providers/file v1.2.1
	github.com/knadh/koanf/providers/posflag v1.0.2
	github.com/knadh/koanf/v2 v2.4.1
	github.com/mewkiz/flac v1.0.14
	github.com/spf13/pflag v1.1.0
	github.com/stretchr/testify v1.12.1
	github.com/thesyncim/gopus v0.1.1
	github.com/yalue/onnxruntime_go v1.27.0
	go.yaml.in/yaml/v3 v3.0.5
	golang.org/x/sys v0.32.0
	gorgonia.org/cu v0.9.6
)

require (
	github.com/fsnotify/fsnotify v1.9.0 // indirect
	github.com/google/uuid v1.1.1 // indirect
	github.com/icza/bitio v1.1.0 // indirect
	github.com/mewkiz/pkg v0.0.0-20250417130911-3f050ff8c56d // indirect
	github.com/mewpkg/term v0.0.0-20241026122259-37a80af23985 // indirect
	github.com/mitchellh/copystructure v1.2.0 // indirect
	github.com/mitchellh/reflectwalk v1.0.2 // indirect
	github.com/pkg/errors v0.9.1 // indirect
)
