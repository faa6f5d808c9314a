package audio

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// fuzzOptions decode without ffmpeg and with a sample cap, so that a
// compressed stream of a few bytes cannot claim gigabytes.
var fuzzOptions = Options{NoFFmpeg: true, MaxSamples: 1 << 22}

// decodeAs decodes data with the named codec, skipping the sniffing, as the
// per-format fuzz targets do.
func decodeAs(name string, data []byte, size int64, o Options) (*Clip, error) {
	for _, c := range codecs {
		if c.name == name {
			in := newInput(bytes.NewReader(data), size)
			return o.run(func() (*Clip, error) { return c.decode(in, o) })
		}
	}
	panic("no codec " + name)
}

// checkDecode runs decode with the input size known and unknown, strict and
// not, and checks the invariants every decoder keeps: no panic; a decoded
// clip is consistent (channels and rate >= 1, whole frames, finite
// samples, at most perByte samples per input byte when perByte > 0, never
// more than the cap); the result does not depend on whether the size is
// known; strict decoding fails exactly when the clip is truncated.
func checkDecode(t *testing.T, data []byte, perByte int, decode func(data []byte, size int64, o Options) (*Clip, error)) {
	clip, err := decode(data, int64(len(data)), fuzzOptions)
	clip2, err2 := decode(data, -1, fuzzOptions)
	require.Equal(t, err == nil, err2 == nil, "known size: %v; unknown size: %v", err, err2)
	strictOpts := fuzzOptions
	strictOpts.Strict = true
	clip3, err3 := decode(data, int64(len(data)), strictOpts)
	if err != nil {
		require.Error(t, err3)
		require.NotEmpty(t, err.Error())
		return
	}
	require.Equal(t, clip.Samples, clip2.Samples)
	require.Equal(t, clip.Truncated == nil, clip2.Truncated == nil)
	if clip.Truncated != nil {
		require.Equal(t, clip.Truncated.Missing, clip2.Truncated.Missing)
		require.ErrorIs(t, err3, ErrTruncated)
	} else {
		require.NoError(t, err3)
		require.Equal(t, clip.Samples, clip3.Samples)
	}
	require.GreaterOrEqual(t, clip.Channels, 1)
	require.GreaterOrEqual(t, clip.SampleRate, 1)
	require.Zero(t, len(clip.Samples)%clip.Channels)
	require.LessOrEqual(t, int64(len(clip.Samples)), fuzzOptions.MaxSamples)
	if perByte > 0 {
		require.LessOrEqual(t, len(clip.Samples), perByte*len(data))
	}
	for i, v := range clip.Samples {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("sample %d is %v", i, v)
		}
	}
	require.Len(t, clip.Mono(), clip.Frames())
}

// FuzzDecode feeds arbitrary bytes to Decode, which picks the decoder by
// content. Its seed corpus, testdata/fuzz/FuzzDecode (WAV variants from
// encodeWAV and sox, valid and lying, and a start of each other format),
// runs in every plain `go test`; `go test -fuzz FuzzDecode ./runtime/audio`
// explores from there. The per-format targets below skip the sniffing.
func FuzzDecode(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data, 0, func(d []byte, size int64, o Options) (*Clip, error) {
			return o.Decode(bytes.NewReader(d), size)
		})
	})
}

func fuzzCodec(f *testing.F, name string, perByte int) {
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data, perByte, func(d []byte, size int64, o Options) (*Clip, error) {
			return decodeAs(name, d, size, o)
		})
	})
}

// FuzzWAV: every WAV encoding (PCM, float, µ-law, A-law, IMA ADPCM); at
// most 2 samples per input byte (4-bit ADPCM).
func FuzzWAV(f *testing.F) { fuzzCodec(f, "wav", 2) }

// FuzzAIFF: AIFF and AIFF-C; at most one sample per input byte.
func FuzzAIFF(f *testing.F) { fuzzCodec(f, "aiff", 1) }

// FuzzFLAC: FLAC streams (github.com/mewkiz/flac).
func FuzzFLAC(f *testing.F) { fuzzCodec(f, "flac", 0) }

// FuzzMP3: MP3 frame walking, Xing/LAME parsing, go-mp3.
func FuzzMP3(f *testing.F) { fuzzCodec(f, "mp3", 0) }

// FuzzOgg: Ogg demuxing, Vorbis (jfreymuth/vorbis) and Opus (gopus).
func FuzzOgg(f *testing.F) { fuzzCodec(f, "ogg", 0) }

// FuzzRaw: headerless PCM of any layout; one sample per 2 bytes at most.
func FuzzRaw(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5}, uint8(0), uint8(2))
	f.Add([]byte{0, 0, 0x80, 0x7f, 0, 0, 0x80, 0x3f}, uint8(1), uint8(1))
	f.Fuzz(func(t *testing.T, data []byte, enc, channels uint8) {
		rf := RawFormat{Encoding: RawEncodings()[int(enc)%2], Rate: 16000, Channels: int(channels%4) + 1}
		checkDecode(t, data, 1, func(d []byte, size int64, o Options) (*Clip, error) {
			o.Raw = &rf
			return o.Decode(bytes.NewReader(d), size)
		})
	})
}

// TestWriteFuzzSeeds regenerates the seed corpora of the per-format fuzz
// targets from the parity fixtures (whole, cut short, with size fields
// that lie) when EDGE_WRITE_FUZZ_SEEDS=1.
func TestWriteFuzzSeeds(t *testing.T) {
	if os.Getenv("EDGE_WRITE_FUZZ_SEEDS") != "1" {
		t.Skip("set EDGE_WRITE_FUZZ_SEEDS=1 to regenerate testdata/fuzz/Fuzz{WAV,AIFF,FLAC,MP3,Ogg}")
	}
	write := func(target, name string, data []byte) {
		dir := filepath.Join("testdata/fuzz", target)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", data)
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644))
	}
	targets := map[string]string{".wav": "FuzzWAV", ".aiff": "FuzzAIFF", ".aifc": "FuzzAIFF", ".flac": "FuzzFLAC", ".mp3": "FuzzMP3", ".ogg": "FuzzOgg", ".opus": "FuzzOgg"}
	files, err := filepath.Glob("testdata/parity/*.*")
	require.NoError(t, err)
	for _, p := range files {
		target, ok := targets[filepath.Ext(p)]
		if !ok {
			continue
		}
		b, err := os.ReadFile(p)
		require.NoError(t, err)
		stem := strings.ReplaceAll(strings.TrimSuffix(filepath.Base(p), filepath.Ext(p)), "_", "-")
		head := b[:min(len(b), 6000)]
		write(target, stem+"_head", head)
		write(target, stem+"_cut", head[:len(head)*2/3])
		// Size fields that lie: bytes 4..8 hold the RIFF/FORM size, a FLAC
		// block header, an Ogg flag/granule or an MP3 header's tail.
		lie := bytes.Clone(head[:min(len(head), 3000)])
		for i := 4; i < min(len(lie), 48); i += 7 {
			lie[i] ^= 0xFF
		}
		write(target, stem+"_lies", lie)
		if filepath.Ext(p) != ".wav" {
			write("FuzzDecode", stem+"_head", b[:min(len(b), 2000)])
		}
	}
}
