package runtime

import "github.com/go-viper/mapstructure/v2"

// strictDecoder makes koanf unmarshalling reject keys the target struct does
// not declare, so a misspelt config key is an error rather than ignored.
func strictDecoder(out any) *mapstructure.DecoderConfig {
	return &mapstructure.DecoderConfig{
		DecodeHook:       mapstructure.ComposeDecodeHookFunc(mapstructure.StringToTimeDurationHookFunc(), mapstructure.TextUnmarshallerHookFunc()),
		Metadata:         nil,
		Result:           out,
		WeaklyTypedInput: true,
		ErrorUnused:      true,
		TagName:          "koanf",
	}
}
