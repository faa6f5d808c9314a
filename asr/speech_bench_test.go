package asr

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/edgespeech/edge/runtime/model"
)

// BenchmarkSpeechHour: an hour of the bundled clips with pauses of 0.3-3 s
// (seeded), transcribed with VAD segments and with fixed 30 s chunks, in
// one run, and with VAD segments through the int8 encoder. Metrics: WER against the clips' texts, the encoder's time and
// the wall time of each.
//
//	go test -run '^$' -bench SpeechHour -benchtime 1x -timeout 30m ./asr
func BenchmarkSpeechHour(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	var pcm []float32
	var texts []string
	for len(pcm) < 3600*16000 {
		name := clipNames[rng.IntN(len(clipNames))]
		x, truth := loadTruth(b, name)
		pcm = append(append(pcm, x...), make([]float32, 4800+rng.IntN(43200))...)
		texts = append(texts, truth.Text)
	}
	ref := strings.Join(texts, " ")
	words := len(strings.Fields(ref))
	rules := defaultVADRules(30 * time.Second)
	for _, tc := range []struct {
		name string
		opt  Options
	}{{"vad", Options{VAD: rules}}, {"vad-int8", Options{VAD: rules, Precision: model.PrecisionInt8}}, {"fixed-30s", Options{ChunkSeconds: 30}}} {
		b.Run(tc.name, func(b *testing.B) {
			r, err := Open(defaultModel, tc.opt)
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			var st Stats
			var text string
			for b.Loop() {
				tr, err := r.Transcribe(WithStats(context.Background(), &st), pcm)
				if err != nil {
					b.Fatal(err)
				}
				text = tr.Text
			}
			b.ReportMetric(100*float64(wordErrors(ref, text))/float64(words), "WER-%")
			b.ReportMetric(st.Stages["encoder"].Seconds(), "encoder-s")
			b.ReportMetric(float64(st.Chunks), "encoder-runs")
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N), "wall-s")
			fmt.Printf("%s: %.1f min of audio, %d words\n", tc.name, float64(len(pcm))/16000/60, words)
		})
	}
}
