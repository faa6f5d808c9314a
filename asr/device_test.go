package asr

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/asr/transcript"
	"github.com/edgespeech/edge/plugins/dpx"
	"github.com/edgespeech/edge/runtime"
)

// TestDeviceDecodeFlow runs the device backends' decoding flow (ctc_greedy
// and ctc_align as ops, words from the alignment and its frame scores) with
// the CPU ops and requires the host path's transcripts exactly: the flow's
// logic is checked here, the CUDA ops' parity with the CPU ops in
// plugins/dpx, and the whole on the GPU host by e2e_cuda_test.go.
func TestDeviceDecodeFlow(t *testing.T) {
	host, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer host.Close()
	flow, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer flow.Close()
	flow.dec, err = newDeviceDecoder(flow.manifest, runtime.CPU)
	require.NoError(t, err)
	ctx := context.Background()
	for _, name := range []string{"demo", "words_1", "words_3"} {
		pcm, truth := loadTruth(t, name)
		want, err := host.Transcribe(ctx, pcm)
		require.NoError(t, err)
		var st Stats
		got, err := flow.Transcribe(WithStats(ctx, &st), pcm)
		require.NoError(t, err)
		assert.Equal(t, want, got, name)
		assert.Contains(t, st.Stages, "greedy")
		assert.Contains(t, st.Stages, "align")
		// with a letter outside the vocabulary: the wildcard column
		text := truth.Text + " ñandú"
		_, stars, err := flow.tokenize(text)
		require.NoError(t, err)
		require.Positive(t, stars, "the text exercises the wildcard")
		want, errW := host.Align(ctx, pcm, text)
		got, errG := flow.Align(ctx, pcm, text)
		require.Equal(t, errW, errG)
		assert.Equal(t, want, got, name)
	}
	_, err = flow.Align(ctx, noise(16000/2, 3), "a very long text that half a second of audio cannot hold at all")
	var short *TooShortError
	assert.ErrorAs(t, err, &short)
}

// TestFromAlignment checks the transcript built from an alignment and its
// frame scores against transcript.AlignTokens over the full emissions, and
// its errors.
func TestFromAlignment(t *testing.T) {
	r, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	pcm, _ := loadTruth(t, "words_2")
	lp, T, err := r.Emissions(context.Background(), pcm)
	require.NoError(t, err)
	V := r.manifest.Vocab.Len()
	spans, err := dpx.Greedy(nil, lp, V, r.manifest.BlankID)
	require.NoError(t, err)
	tokens := make([]int, len(spans))
	for i, s := range spans {
		tokens[i] = int(s.Token)
	}
	want, err := transcript.AlignTokens(lp, V, tokens, r.words)
	require.NoError(t, err)
	ali, err := dpx.Align(lp, V, tokens, dpx.AlignOptions{Blank: r.manifest.BlankID})
	require.NoError(t, err)
	got, err := fromAlignment(ali.Labels, ali.FrameScores, float64(ali.Score), V, r.words)
	require.NoError(t, err)
	assert.Equal(t, want, got)
	assert.Len(t, ali.Labels, T)

	_, err = fromAlignment([]int32{0, 1}, []float32{0}, 0, V, r.words)
	assert.EqualError(t, err, "alignment has 2 frames, frame scores 1")
	_, err = fromAlignment([]int32{0, int32(V)}, []float32{0, 0}, 0, V, r.words)
	assert.EqualError(t, err, "alignment[1] = 29 is out of range for 29 classes")
}
