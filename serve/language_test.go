package serve

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime/model"
)

// langRecognizer is fakeRecognizer with a manifest that states a language.
type langRecognizer struct {
	fakeRecognizer
	lang string
}

func (l *langRecognizer) Manifest() *model.Manifest {
	m := l.fakeRecognizer.Manifest()
	m.Language = l.lang
	return m
}

// TestManifestLanguage: the manifest's language is the default of
// serve.languages: a request naming another gets 400 as OpenAI answers,
// verbose_json reports it, and serve.languages overrides it.
func TestManifestLanguage(t *testing.T) {
	wav := silence(16000)
	_, url := startServer(t, testConfig(t), &langRecognizer{lang: "de"})
	tr := url + "/v1/audio/transcriptions"
	status, h, body := post(t, tr, file("a.wav", wav), field("language", "en"))
	e := requireError(t, 400, "unsupported_language", status, h, body)
	assert.Contains(t, e.Error.Message, "transcribes de")
	status, _, body = post(t, tr, file("a.wav", wav), field("language", "de"))
	require.Equal(t, 200, status, "%s", body)
	status, _, body = post(t, tr, file("a.wav", wav), field("response_format", "verbose_json"))
	require.Equal(t, 200, status, "%s", body)
	var v struct {
		Language string `json:"language"`
	}
	require.NoError(t, json.Unmarshal(body, &v))
	assert.Equal(t, "de", v.Language)

	cfg := testConfig(t)
	cfg.Languages = []string{"en"}
	_, url = startServer(t, cfg, &langRecognizer{lang: "de"})
	status, _, body = post(t, url+"/v1/audio/transcriptions", file("a.wav", wav), field("language", "en"))
	require.Equal(t, 200, status, "%s", body)
	status, h, body = post(t, url+"/v1/audio/transcriptions", file("a.wav", wav), field("language", "de"))
	requireError(t, 400, "unsupported_language", status, h, body)

	_, url = startServer(t, testConfig(t), &langRecognizer{})
	status, _, body = post(t, url+"/v1/audio/transcriptions", file("a.wav", wav), field("language", "fr"))
	require.Equal(t, 200, status, "unknown language: any code: %s", body)
}
