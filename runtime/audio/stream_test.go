package audio

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// streamWAV encodes n frames of a mono test signal (a sweep of square-ish
// values) as WAV at 16 kHz; bits 16 is PCM, 32 float; bad, when >= 0, is a
// frame set to +Inf (float only).
func streamWAV(n, bits, bad int) []byte {
	x := make([]float64, n)
	for i := range x {
		x[i] = float64((i*7919)%2001-1000) / 1001
	}
	tag := uint16(tagPCM)
	if bits == 32 {
		tag = tagFloat
	}
	if bad >= 0 {
		x[bad] = math.Inf(1)
	}
	return encodeWAV(wavSpec{tag: tag, bits: bits, channels: 1, rate: 16000}, x)
}

// readStream reads s to its end in pieces of n samples.
func readStream(s *Stream, n int) ([]float32, error) {
	var out []float32
	buf := make([]float32, n)
	for {
		k, err := s.Read(buf)
		out = append(out, buf[:k]...)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
	}
}

// TestStreamEqualsLoad: every parity fixture (each native format) streamed
// to 16 kHz and to 8 kHz in odd pieces gives Load's samples bit for bit,
// and the same format and truncation report.
func TestStreamEqualsLoad(t *testing.T) {
	files, err := filepath.Glob("testdata/parity/*")
	require.NoError(t, err)
	n := 0
	for _, path := range files {
		if strings.HasSuffix(path, ".f32") || strings.HasSuffix(path, ".json") {
			continue
		}
		n++
		for _, rate := range []int{16000, 8000} {
			want, err := Options{NoFFmpeg: true}.Load(path, rate)
			require.NoError(t, err, path)
			s, err := Options{NoFFmpeg: true}.Open(path, rate)
			require.NoError(t, err)
			got, err := readStream(s, 1237)
			require.NoError(t, err, path)
			require.NoError(t, s.Close())
			require.Equal(t, want.Samples, got, "%s at %d Hz", path, rate)
			require.Equal(t, want.Format, s.Format())
			require.Equal(t, want.Truncated, s.Truncated())
		}
	}
	require.Greater(t, n, 10)
}

// TestStreamResamplerLong: a signal longer than the parallel threshold,
// pushed in uneven pieces, resamples exactly as Resample does, for
// downsampling and upsampling pairs.
func TestStreamResamplerLong(t *testing.T) {
	x := make([]float32, 300000)
	for i := range x {
		x[i] = float32((i*7919)%2001-1000) / 1000
	}
	for _, pair := range [][2]int{{44100, 16000}, {48000, 16000}, {8000, 16000}, {22050, 16000}} {
		want, err := Resample(x, pair[0], pair[1])
		require.NoError(t, err)
		r, err := cachedResampler(pair[0], pair[1])
		require.NoError(t, err)
		s := &streamResampler{r: r}
		var got []float32
		for i, step := 0, 1; i < len(x); step = step*3%9001 + 1 {
			j := min(len(x), i+step)
			got = s.push(got, x[i:j])
			i = j
		}
		got = s.finish(got)
		require.Equal(t, want, got, "%v", pair)
		require.Less(t, len(s.buf), 1<<15, "the resampler keeps little input")
	}
}

// TestStreamTruncatedWAV: a WAV cut mid-data streams what is there and
// reports the truncation at the end; strict decoding streams the samples,
// then fails with ErrTruncated.
func TestStreamTruncatedWAV(t *testing.T) {
	data := streamWAV(40000, 16, -1)
	cut := data[:len(data)/2]
	s, err := Options{}.OpenReader(bytes.NewReader(cut), int64(len(cut)), "cut.wav", 16000)
	require.NoError(t, err)
	got, err := readStream(s, 4096)
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NotNil(t, s.Truncated())
	require.Greater(t, len(got), 15000)

	s, err = Options{Strict: true}.OpenReader(bytes.NewReader(cut), int64(len(cut)), "cut.wav", 16000)
	require.NoError(t, err)
	got2, err := readStream(s, 4096)
	require.ErrorIs(t, err, ErrTruncated)
	require.Contains(t, err.Error(), "cut.wav")
	require.Equal(t, got, got2, "the samples before the error are delivered")
	_, err = s.Read(make([]float32, 10))
	require.ErrorIs(t, err, ErrTruncated, "the error sticks")
	require.NoError(t, s.Close())
}

// TestStreamGarbageMidStream: float WAV data that turns non-finite half way
// gives the samples before it, then an error naming the sample.
func TestStreamGarbageMidStream(t *testing.T) {
	data := streamWAV(200000, 32, 150000)
	s, err := Options{}.OpenReader(bytes.NewReader(data), -1, "bad.wav", 16000)
	require.NoError(t, err)
	got, err := readStream(s, 10000)
	require.Error(t, err)
	require.Contains(t, err.Error(), "bad.wav")
	require.Contains(t, err.Error(), "sample 150000")
	require.Greater(t, len(got), 100000)
	require.LessOrEqual(t, len(got), 150000)
	require.NoError(t, s.Close())
}

// TestStreamCloseEarly: closing a stream before its end stops the decoder
// goroutine (no leak), for a file and for a reader.
func TestStreamCloseEarly(t *testing.T) {
	data := streamWAV(1<<20, 16, -1)
	path := filepath.Join(t.TempDir(), "long.wav")
	require.NoError(t, os.WriteFile(path, data, 0o644))
	before := runtime.NumGoroutine()
	for range 20 {
		s, err := Options{}.Open(path, 8000)
		require.NoError(t, err)
		_, err = s.Read(make([]float32, 100))
		require.NoError(t, err)
		require.NoError(t, s.Close())
		require.NoError(t, s.Close())
		s, err = Options{}.OpenReader(bytes.NewReader(data), -1, "r", 16000)
		require.NoError(t, err)
		require.NoError(t, s.Close())
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before)
}

// TestStreamNoSamples: a well-formed file without samples is ErrNoSamples,
// as for Load.
func TestStreamNoSamples(t *testing.T) {
	data := streamWAV(0, 16, -1)
	s, err := Options{}.OpenReader(bytes.NewReader(data), int64(len(data)), "empty.wav", 16000)
	require.NoError(t, err)
	_, err = readStream(s, 10)
	require.ErrorIs(t, err, ErrNoSamples)
	require.NoError(t, s.Close())
}

// FuzzStream: for any input, streaming to 16 kHz gives exactly what
// LoadReader gives (the same samples, or an error where LoadReader fails,
// after at most the samples it would have returned), and never panics. Its
// seeds are FuzzDecode's and a few of the other formats'.
func FuzzStream(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		want, werr := fuzzOptions.LoadReader(bytes.NewReader(data), int64(len(data)), "in", 16000)
		s, err := fuzzOptions.OpenReader(bytes.NewReader(data), int64(len(data)), "in", 16000)
		require.NoError(t, err)
		defer s.Close()
		got, gerr := readStream(s, 777)
		if werr != nil {
			require.Error(t, gerr, "LoadReader: %v", werr)
			require.True(t, errors.Is(gerr, ErrNoSamples) == errors.Is(werr, ErrNoSamples), "%v / %v", gerr, werr)
			return
		}
		require.NoError(t, gerr)
		require.Equal(t, want.Samples, got)
		require.Equal(t, want.Truncated, s.Truncated())
	})
}
