package asr

import (
	"context"
	"testing"
	"time"
)

// BenchmarkTranscribe60s transcribes 60 s of speech (the demo sentence
// repeated) with the bundled model: real-time factor and the share of each
// stage. Run it pinned to two cores to match the target machine:
//
//	taskset -c 0,1 go test -run '^$' -bench Transcribe60s -cpu 2 ./asr/
func BenchmarkTranscribe60s(b *testing.B) {
	r, err := Open(defaultModel, Options{Threads: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer r.Close()
	x, _ := loadTruth(b, "demo")
	var pcm []float32
	for len(pcm) < 60*16000 {
		pcm = append(pcm, x...)
	}
	pcm = pcm[:60*16000]
	stages := map[string]time.Duration{}
	b.ResetTimer()
	for b.Loop() {
		var st Stats
		if _, err := r.Transcribe(WithStats(context.Background(), &st), pcm); err != nil {
			b.Fatal(err)
		}
		for k, v := range st.Stages {
			stages[k] += v
		}
	}
	per := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(per/60, "RTF")
	for k, v := range stages {
		b.ReportMetric(v.Seconds()/float64(b.N)*1000, k+"-ms")
	}
}
