package asr

import (
	"context"
	"errors"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/asr/transcript"
)

// sliceReader yields pcm in pieces of n samples; with fail set, it fails
// after failAt samples instead of ending.
type sliceReader struct {
	pcm    []float32
	n      int
	failAt int
	fail   error
}

func (s *sliceReader) Read(p []float32) (int, error) {
	if len(s.pcm) == 0 {
		return 0, io.EOF
	}
	if s.fail != nil && s.failAt <= 0 {
		return 0, s.fail
	}
	k := min(len(p), s.n, len(s.pcm))
	if s.fail != nil {
		k = min(k, s.failAt)
		s.failAt -= k
	}
	copy(p, s.pcm[:k])
	s.pcm = s.pcm[k:]
	return k, nil
}

// longAudio concatenates the bundled clips with pauses of 0.3 to 2.5 s
// (some shorter than the alignment's cut gap, some longer) until it lasts
// at least d.
func longAudio(t *testing.T, d time.Duration) []float32 {
	var pcm []float32
	names := []string{"demo", "words_1", "words_2", "words_3", "words_4"}
	pauses := []float64{0.3, 2.5, 0.45, 1.2, 0.8, 2.0, 0.6}
	for i := 0; time.Duration(len(pcm))*time.Second/16000 < d; i++ {
		x, _ := loadTruth(t, names[i%len(names)])
		pcm = append(pcm, x...)
		pcm = append(pcm, make([]float32, int(pauses[i%len(pauses)]*16000))...)
	}
	return pcm
}

// streamed runs TranscribeReader over pcm in pieces of n samples and
// checks that the words handed out as they became final are the
// transcript's.
func streamed(t *testing.T, r *Recognizer, pcm []float32, n int) *transcript.Transcript {
	t.Helper()
	var got []transcript.Word
	tr, err := r.TranscribeReader(context.Background(), &sliceReader{pcm: pcm, n: n}, ReaderOptions{
		Words: func(w []transcript.Word) error { got = append(got, w...); return nil },
	})
	require.NoError(t, err)
	require.Equal(t, tr.Words, got, "the words handed out are the transcript's")
	d, err := r.TranscribeReader(context.Background(), &sliceReader{pcm: pcm, n: n}, ReaderOptions{Discard: true})
	require.NoError(t, err)
	require.Empty(t, d.Words)
	require.Equal(t, tr.Score, d.Score)
	return tr
}

// TestTranscribeReaderEqualsTranscribe: with VAD and without, on each
// bundled clip and on a few minutes of them with pauses, fed in pieces of
// odd sizes, the streamed transcript equals Transcribe's on the whole audio
// exactly (words, tokens, times, confidences, score, duration).
func TestTranscribeReaderEqualsTranscribe(t *testing.T) {
	long := longAudio(t, 3*time.Minute)
	for _, mode := range []string{"vad", "chunks"} {
		var r *Recognizer
		if mode == "vad" {
			r = withVAD(t, 30*time.Second, Options{})
		} else {
			var err error
			r, err = Open(defaultModel, Options{Workers: 2})
			require.NoError(t, err)
			defer r.Close()
		}
		inputs := map[string][]float32{"long": long}
		for _, name := range []string{"demo", "words_1", "words_2", "words_3", "words_4"} {
			inputs[name], _ = loadTruth(t, name)
		}
		for name, pcm := range inputs {
			want, err := r.Transcribe(context.Background(), pcm)
			require.NoError(t, err)
			n := 1000
			if name == "long" {
				n = 3*16000 + 17
				require.Greater(t, len(want.Words), 250)
			}
			got := streamed(t, r, pcm, n)
			require.Equal(t, want, got, "%s %s in pieces of %d", mode, name, n)
		}
	}
}

// TestTranscribeReaderReadError: input failing half way ends the call with
// that error; the words handed out before it are the offline transcript's
// first words; no goroutine is left behind.
func TestTranscribeReaderReadError(t *testing.T) {
	pcm := longAudio(t, time.Minute)
	boom := errors.New("disk on fire")
	before := runtime.NumGoroutine()
	for _, opt := range []Options{{Workers: 2}, {VAD: defaultVADRules(30 * time.Second)}} {
		r, err := Open(defaultModel, opt)
		require.NoError(t, err)
		want, err := r.Transcribe(context.Background(), pcm)
		require.NoError(t, err)
		var got []transcript.Word
		_, err = r.TranscribeReader(context.Background(), &sliceReader{pcm: pcm, n: 4000, failAt: len(pcm) / 2, fail: boom},
			ReaderOptions{Words: func(w []transcript.Word) error { got = append(got, w...); return nil }})
		require.ErrorIs(t, err, boom)
		require.NotEmpty(t, got)
		require.Less(t, len(got), len(want.Words))
		require.Equal(t, want.Words[:len(got)], got)

		// A consumer that fails stops the call with its error.
		stop := errors.New("enough")
		_, err = r.TranscribeReader(context.Background(), &sliceReader{pcm: pcm, n: 4000},
			ReaderOptions{Words: func([]transcript.Word) error { return stop }})
		require.ErrorIs(t, err, stop)
		require.NoError(t, r.Close())
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before)
}

// TestTranscribeReaderTooShort: audio shorter than four frames is
// ErrTooShort, as for Transcribe.
func TestTranscribeReaderTooShort(t *testing.T) {
	r, err := Open(defaultModel, Options{})
	require.NoError(t, err)
	defer r.Close()
	_, err = r.TranscribeReader(context.Background(), &sliceReader{pcm: make([]float32, 100), n: 10}, ReaderOptions{})
	require.ErrorIs(t, err, ErrTooShort)
}
