package serve

import (
	"context"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/asr"
)

// BenchmarkStreamServe compares a stream served over the WebSocket with
// the same asr.Stream driven directly: two utterances (10.2 s) in 20 ms
// frames, as fast as they go. Each iteration runs both, one after the
// other, so their ratio is measured under the same load; audio_s/s is
// RTFx, ws/direct the WebSocket's share of the time.
//
//	go test -run '^$' -bench StreamServe -benchtime 5x ./serve/
func BenchmarkStreamServe(b *testing.B) {
	r := realRecognizer(b)
	pcm := twoUtterances(b)
	data := s16le(pcm)
	sec := float64(len(pcm)) / 16000
	_, url := startServer(b, testConfig(b), r)
	ctx := context.Background()
	direct := func() {
		st, err := r.NewStream(asr.StreamOptions{})
		require.NoError(b, err)
		for i := 0; i < len(pcm); i += 320 {
			_, err := st.Write(ctx, pcm[i:min(i+320, len(pcm))])
			require.NoError(b, err)
		}
		_, err = st.Close(ctx)
		require.NoError(b, err)
	}
	served := func() {
		c, _, err := websocket.Dial(ctx, wsURL(url, ""), nil)
		require.NoError(b, err)
		done := make(chan error, 1)
		go func() {
			for {
				if _, _, err := c.Read(ctx); err != nil {
					if websocket.CloseStatus(err) == websocket.StatusNormalClosure {
						err = nil
					}
					done <- err
					return
				}
			}
		}()
		for i := 0; i < len(data); i += 640 {
			require.NoError(b, c.Write(ctx, websocket.MessageBinary, data[i:min(i+640, len(data))]))
		}
		require.NoError(b, c.Write(ctx, websocket.MessageText, []byte(`{"type":"end"}`)))
		require.NoError(b, <-done)
	}
	var td, tw time.Duration
	for b.Loop() {
		t0 := time.Now()
		direct()
		t1 := time.Now()
		served()
		td, tw = td+t1.Sub(t0), tw+time.Since(t1)
	}
	b.ReportMetric(sec*float64(b.N)/td.Seconds(), "direct_audio_s/s")
	b.ReportMetric(sec*float64(b.N)/tw.Seconds(), "ws_audio_s/s")
	b.ReportMetric(tw.Seconds()/td.Seconds(), "ws/direct")
}
