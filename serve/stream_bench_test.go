package serve

import (
	"context"
	"testing"

	"github.com/coder/websocket"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/asr"
)

// BenchmarkStreamServe compares a stream served over the WebSocket with
// the same asr.Stream driven directly: two utterances (10.2 s) in 20 ms
// frames, as fast as they go. With -count N the two alternate, so their
// ratio is measured under the same load. audio_s/s is RTFx.
//
//	go test -run '^$' -bench StreamServe -count 3 ./serve/
func BenchmarkStreamServe(b *testing.B) {
	r := realRecognizer(b)
	pcm := twoUtterances(b)
	sec := float64(len(pcm)) / 16000
	b.Run("direct", func(b *testing.B) {
		for b.Loop() {
			st, err := r.NewStream(asr.StreamOptions{})
			require.NoError(b, err)
			for i := 0; i < len(pcm); i += 320 {
				_, err := st.Write(context.Background(), pcm[i:min(i+320, len(pcm))])
				require.NoError(b, err)
			}
			_, err = st.Close(context.Background())
			require.NoError(b, err)
		}
		b.ReportMetric(sec*float64(b.N)/b.Elapsed().Seconds(), "audio_s/s")
	})
	b.Run("websocket", func(b *testing.B) {
		_, url := startServer(b, testConfig(b), r)
		data := s16le(pcm)
		for b.Loop() {
			ctx := context.Background()
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
		b.ReportMetric(sec*float64(b.N)/b.Elapsed().Seconds(), "audio_s/s")
	})
}
