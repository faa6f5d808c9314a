package serve

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sdk is the official OpenAI Go client pointed at a local server.
func sdk(url, key string) openai.Client {
	return openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// The OpenAI SDK transcribes the bundled clip in every response format, with
// an API key required.
func TestOpenAISDK(t *testing.T) {
	cfg := testConfig(t)
	cfg.APIKey = "sk-edge-test"
	cfg.Languages = []string{"en"}
	_, url := startServer(t, cfg, realRecognizer(t))
	client := sdk(url, cfg.APIKey)
	ctx := context.Background()
	wav, truth := readClip(t, "words_1")
	params := func(format openai.AudioResponseFormat, grains ...string) openai.AudioTranscriptionNewParams {
		return openai.AudioTranscriptionNewParams{
			File:                   openai.File(bytes.NewReader(wav), "words_1.wav", "audio/wav"),
			Model:                  openai.AudioModelWhisper1,
			Language:               openai.String("en"),
			ResponseFormat:         format,
			TimestampGranularities: grains,
		}
	}

	t.Run("json", func(t *testing.T) {
		res, err := client.Audio.Transcriptions.New(ctx, params(openai.AudioResponseFormatJSON))
		require.NoError(t, err)
		assert.Equal(t, truth, res.Text)
		tr := res.AsTranscription()
		assert.Equal(t, truth, tr.Text)
		assert.Contains(t, tr.RawJSON(), `"model":"edge-char-ctc"`)
	})
	t.Run("default format", func(t *testing.T) {
		p := params("")
		res, err := client.Audio.Transcriptions.New(ctx, p)
		require.NoError(t, err)
		assert.Equal(t, truth, res.Text)
	})
	t.Run("verbose_json", func(t *testing.T) {
		for _, grains := range [][]string{nil, {"segment"}, {"word"}, {"word", "segment"}} {
			res, err := client.Audio.Transcriptions.New(ctx, params(openai.AudioResponseFormatVerboseJSON, grains...))
			require.NoError(t, err, "%v", grains)
			v := res.AsTranscriptionVerbose()
			assert.Equal(t, truth, v.Text)
			assert.Equal(t, "en", v.Language)
			assert.InDelta(t, 2.81, v.Duration, 0.01)
			wantWords := strings.Contains(strings.Join(grains, ","), "word")
			wantSegments := grains == nil || strings.Contains(strings.Join(grains, ","), "segment")
			if wantWords {
				require.Len(t, v.Words, len(strings.Fields(truth)), "%v", grains)
				for i, w := range v.Words {
					assert.Equal(t, strings.Fields(truth)[i], w.Word)
					assert.Less(t, w.Start, w.End)
					assert.Contains(t, w.RawJSON(), `"confidence"`)
				}
			} else {
				assert.Empty(t, v.Words, "%v", grains)
			}
			if wantSegments {
				require.NotEmpty(t, v.Segments, "%v", grains)
				var texts []string
				for i, s := range v.Segments {
					assert.Equal(t, int64(i), s.ID)
					assert.Less(t, s.Start, s.End)
					assert.NotEmpty(t, s.Tokens)
					assert.LessOrEqual(t, s.AvgLogprob, 0.0)
					texts = append(texts, s.Text)
				}
				assert.Equal(t, truth, strings.Join(texts, " "))
			} else {
				assert.Empty(t, v.Segments, "%v", grains)
			}
		}
	})
	// text, srt and vtt are not JSON: the SDK's documented way is Client.Post
	// into a string.
	for _, tc := range []struct {
		format openai.AudioResponseFormat
		check  func(t *testing.T, body string)
	}{
		{openai.AudioResponseFormatText, func(t *testing.T, body string) { assert.Equal(t, truth+"\n", body) }},
		{openai.AudioResponseFormatSRT, func(t *testing.T, body string) {
			assert.Regexp(t, regexp.MustCompile(`^1\n\d\d:\d\d:\d\d,\d{3} --> \d\d:\d\d:\d\d,\d{3}\n`+truth+`\n\n$`), body)
		}},
		{openai.AudioResponseFormatVTT, func(t *testing.T, body string) {
			assert.Regexp(t, regexp.MustCompile(`^WEBVTT\n\n\d\d:\d\d:\d\d\.\d{3} --> \d\d:\d\d:\d\d\.\d{3}\n`+truth+`\n\n$`), body)
		}},
	} {
		t.Run(string(tc.format), func(t *testing.T) {
			var body string
			require.NoError(t, client.Post(ctx, "audio/transcriptions", params(tc.format), &body))
			tc.check(t, body)
		})
	}
	t.Run("alignment", func(t *testing.T) {
		p := params(openai.AudioResponseFormatVerboseJSON, "word")
		p.SetExtraFields(map[string]any{"text": truth})
		var v openai.TranscriptionVerbose
		require.NoError(t, client.Post(ctx, "audio/alignments", p, &v))
		assert.Equal(t, truth, v.Text)
		require.Len(t, v.Words, len(strings.Fields(truth)))
		var srt string
		p = params(openai.AudioResponseFormatSRT)
		p.SetExtraFields(map[string]any{"text": truth})
		require.NoError(t, client.Post(ctx, "audio/alignments", p, &srt))
		assert.Contains(t, srt, truth)
	})
	t.Run("granularities need verbose_json", func(t *testing.T) {
		_, err := client.Audio.Transcriptions.New(ctx, params(openai.AudioResponseFormatJSON, "word"))
		requireSDKError(t, err, http.StatusBadRequest, "timestamp_granularities[]")
	})
	t.Run("unsupported language", func(t *testing.T) {
		p := params(openai.AudioResponseFormatJSON)
		p.Language = openai.String("de")
		_, err := client.Audio.Transcriptions.New(ctx, p)
		requireSDKError(t, err, http.StatusBadRequest, "language")
	})
	t.Run("wrong key", func(t *testing.T) {
		wrong := sdk(url, "sk-wrong")
		_, err := wrong.Audio.Transcriptions.New(ctx, params(openai.AudioResponseFormatJSON))
		requireSDKError(t, err, http.StatusUnauthorized, "")
	})
}

func requireSDKError(t *testing.T, err error, status int, param string) {
	t.Helper()
	var apiErr *openai.Error
	require.True(t, errors.As(err, &apiErr), "want an API error, got %v", err)
	assert.Equal(t, status, apiErr.StatusCode)
	assert.NotEmpty(t, apiErr.Message)
	assert.NotEmpty(t, apiErr.Type)
	assert.Equal(t, param, apiErr.Param)
}
