package asr

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/plugins/vad"
	"github.com/edgespeech/edge/runtime/audio"
)

// withVAD opens the bundled model with a Silero VAD detector whose
// segments last at most maxSpeech.
func withVAD(t *testing.T, maxSpeech time.Duration, opt Options) *Recognizer {
	t.Helper()
	opt.VAD = defaultVADRules(maxSpeech)
	r, err := Open(defaultModel, opt)
	require.NoError(t, err)
	t.Cleanup(func() { _ = r.Close() })
	return r
}

// defaultVADRules are VAD options with Silero's rules and segments of at
// most maxSpeech.
func defaultVADRules(maxSpeech time.Duration) *vad.Options {
	rules := vad.DefaultRules()
	rules.MaxSpeech = maxSpeech
	return &vad.Options{Rules: &rules}
}

// TestSpeechNoWordsOnSilence: silence, digital zeros, noise and a tone give
// empty transcripts (without VAD the model invents words on them).
func TestSpeechNoWordsOnSilence(t *testing.T) {
	r := withVAD(t, 30*time.Second, Options{})
	for _, name := range []string{"silence", "zeros", "noise", "tone"} {
		pcm, err := audio.Load("../plugins/vad/testdata/"+name+".wav", 16000)
		require.NoError(t, err)
		tr, err := r.Transcribe(context.Background(), pcm)
		require.NoError(t, err, name)
		assert.Empty(t, tr.Words, name)
		assert.Equal(t, "", tr.Text, name)
		assert.InDelta(t, float64(len(pcm))/16000, tr.Duration.Seconds(), 0.02, name)
	}
}

// TestSpeechSegments: three utterances with pauses give the clips' texts and
// word times within one frame of each clip's own transcription, shifted to
// where it starts; Align on the same audio works through the silence.
func TestSpeechSegments(t *testing.T) {
	r := withVAD(t, 30*time.Second, Options{})
	plain, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer plain.Close()
	pcm, texts, starts := utterances(t)
	var st Stats
	tr, err := r.Transcribe(WithStats(context.Background(), &st), pcm)
	require.NoError(t, err)
	assert.Equal(t, strings.Join(texts, " "), tr.Text)
	assert.Equal(t, 3, st.Chunks, "one encoder run per utterance")
	k := 0
	for i, name := range []string{"demo", "words_1", "words_3"} {
		x, _ := loadTruth(t, name)
		own, err := plain.Transcribe(context.Background(), x)
		require.NoError(t, err)
		for _, w := range own.Words {
			require.Less(t, k, len(tr.Words))
			assert.Equal(t, w.Text, tr.Words[k].Text)
			assert.InDelta(t, (w.Start + starts[i]).Seconds(), tr.Words[k].Start.Seconds(), 0.021, "%s %s start", name, w.Text)
			assert.InDelta(t, (w.End + starts[i]).Seconds(), tr.Words[k].End.Seconds(), 0.021, "%s %s end", name, w.Text)
			k++
		}
	}
	al, err := r.Align(context.Background(), pcm, strings.Join(texts, " "))
	require.NoError(t, err)
	assert.Equal(t, tr.Text, al.Text)
}

// TestSpeechLongAudio: a long recording with pauses, cut at the pauses into
// segments of at most the maximum, is recognised far better than in fixed
// 30 s chunks (the model decodes worse with long silences inside its input).
func TestSpeechLongAudio(t *testing.T) {
	r := withVAD(t, 12*time.Second, Options{})
	plain, err := Open(defaultModel, Options{ChunkSeconds: 30})
	require.NoError(t, err)
	defer plain.Close()
	var pcm []float32
	var texts []string
	for range 3 {
		for _, name := range clipNames {
			x, truth := loadTruth(t, name)
			pcm = append(append(pcm, x...), make([]float32, 8000)...)
			texts = append(texts, truth.Text)
		}
	}
	ref := strings.Join(texts, " ")
	var st Stats
	tr, err := r.Transcribe(WithStats(context.Background(), &st), pcm)
	require.NoError(t, err)
	fixed, err := plain.Transcribe(context.Background(), pcm)
	require.NoError(t, err)
	withSpeech, withChunks := wordErrors(ref, tr.Text), wordErrors(ref, fixed.Text)
	t.Logf("word errors in %d words: %d with VAD segments, %d with fixed chunks", len(strings.Fields(ref)), withSpeech, withChunks)
	assert.LessOrEqual(t, withSpeech, 2)
	assert.Less(t, withSpeech, withChunks)
	assert.GreaterOrEqual(t, st.Chunks, len(pcm)/16000/12, "segments of at most 12 s")
}

// wordErrors is the word-level edit distance between ref and hyp.
func wordErrors(ref, hyp string) int {
	r, h := strings.Fields(ref), strings.Fields(hyp)
	prev, cur := make([]int, len(h)+1), make([]int, len(h)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := range r {
		cur[0] = i + 1
		for j := range h {
			sub := prev[j]
			if r[i] != h[j] {
				sub++
			}
			cur[j+1] = min(sub, prev[j+1]+1, cur[j]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(h)]
}

// TestProgress: a long call reports its progress chunk by chunk (or
// segment by segment), rising to the whole audio.
func TestProgress(t *testing.T) {
	var pcm []float32
	for range 4 {
		for _, name := range clipNames {
			x, _ := loadTruth(t, name)
			pcm = append(append(pcm, x...), make([]float32, 8000)...)
		}
	}
	total := time.Duration(len(pcm)) * time.Second / 16000
	for name, r := range map[string]*Recognizer{"chunks": nil, "vad": withVAD(t, 30*time.Second, Options{})} {
		if r == nil {
			var err error
			r, err = Open(defaultModel, Options{ChunkSeconds: 20})
			require.NoError(t, err)
			defer r.Close()
		}
		var seen []time.Duration
		_, err := r.Transcribe(WithProgress(context.Background(), func(done, all time.Duration) {
			assert.InDelta(t, total.Seconds(), all.Seconds(), 0.001, name)
			seen = append(seen, done)
		}), pcm)
		require.NoError(t, err)
		require.Greater(t, len(seen), 3, name)
		for i := 1; i < len(seen); i++ {
			assert.GreaterOrEqual(t, seen[i], seen[i-1], name)
		}
		assert.InDelta(t, total.Seconds(), seen[len(seen)-1].Seconds(), 0.001, name)
	}
}
