package main

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/asr"
	"github.com/edgespeech/edge/runtime/audio"
	"github.com/edgespeech/edge/serve"
)

// The README's client against a real edge serve: the demo clip's final
// text comes out on stdout, partials on the log.
func TestStreamClient(t *testing.T) {
	rec, err := asr.Open("../../models/default", asr.Options{})
	require.NoError(t, err)
	defer rec.Close()
	cfg := serve.DefaultConfig()
	cfg.Listen = "127.0.0.1:0"
	cfg.APIKey = "k"
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s, err := serve.New(cfg)
	require.NoError(t, err)
	ln, err := net.Listen("tcp", cfg.Listen)
	require.NoError(t, err)
	go func() { _ = s.Serve(ln) }()
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		require.NoError(t, s.Shutdown(ctx))
	}()
	s.Ready(rec, nil)

	pcm, err := audio.Load("../../models/default/testdata/demo.wav", 16000)
	require.NoError(t, err)
	b, err := os.ReadFile("../../models/default/testdata/demo.json")
	require.NoError(t, err)
	var truth struct {
		Text string `json:"text"`
	}
	require.NoError(t, json.Unmarshal(b, &truth))
	var out, log bytes.Buffer
	url := "ws://" + ln.Addr().String() + "/v1/audio/stream"
	require.NoError(t, stream(context.Background(), options{URL: url, Key: "k", Rate: 16000}, &pcmReader{pcm: pcm}, &out, &log))
	assert.Equal(t, truth.Text+"\n", out.String())
	assert.Contains(t, log.String(), "partial: ")

	err = stream(context.Background(), options{URL: url, Key: "wrong", Rate: 16000}, &pcmReader{pcm: pcm}, &out, &log)
	require.Error(t, err)
	assert.True(t, strings.Contains(err.Error(), "401"), "%v", err)
}
