package audio

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	goruntime "runtime"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// testSamples is n interleaved samples in [-1, 1] with the extremes included.
func testSamples(n int) []float64 {
	rng := rand.New(rand.NewPCG(1, 2))
	x := make([]float64, n)
	for i := range x {
		x[i] = 2*rng.Float64() - 1
	}
	copy(x, []float64{0, 1, -1, 0.5, -0.5, 1e-9})
	return x[:n]
}

func pcm(bits, channels int) wavSpec {
	return wavSpec{tag: tagPCM, bits: bits, channels: channels, rate: 16000}
}

func float(bits, channels int) wavSpec {
	return wavSpec{tag: tagFloat, bits: bits, channels: channels, rate: 16000}
}

func TestDecodeFormats(t *testing.T) {
	for _, base := range []wavSpec{pcm(8, 1), pcm(16, 1), pcm(24, 1), pcm(32, 1), float(32, 1), float(64, 1)} {
		for _, channels := range []int{1, 2, 3} {
			for _, ext := range []bool{false, true} {
				s := base
				s.channels, s.extensible, s.rate = channels, ext, 22050
				name := fmt.Sprintf("tag%d/%dbit/%dch/ext=%v", s.tag, s.bits, channels, ext)
				t.Run(name, func(t *testing.T) {
					x := testSamples(channels * 101)
					b := encodeWAV(s, x)
					clip, err := Decode(bytes.NewReader(b), int64(len(b)))
					require.NoError(t, err)
					assert.Equal(t, 22050, clip.SampleRate)
					assert.Equal(t, channels, clip.Channels)
					assert.Equal(t, 101, clip.Frames())
					assert.Equal(t, decodedPCM(s, x), clip.Samples)
				})
			}
		}
	}
}

// TestDecodeScale pins the integer scale: full-scale codes map to -1 and
// 1 - 2^-(bits-1), zero to 0.
func TestDecodeScale(t *testing.T) {
	for _, bits := range []int{8, 16, 24, 32} {
		s := pcm(bits, 1)
		b := encodeWAV(s, []float64{-1, 0, 1})
		clip, err := Decode(bytes.NewReader(b), int64(len(b)))
		require.NoError(t, err)
		top := float32(1 - math.Ldexp(1, 1-bits))
		assert.Equal(t, []float32{-1, 0, top}, clip.Samples, "%d bits", bits)
	}
}

func TestDecodeValidBits(t *testing.T) {
	// 20 valid bits left-justified in a 24-bit container decode at container scale.
	s := pcm(24, 2)
	s.extensible, s.validBits = true, 20
	x := testSamples(20)
	b := encodeWAV(s, x)
	clip, err := Decode(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	assert.Equal(t, decodedPCM(s, x), clip.Samples)
}

func TestDecodeChunks(t *testing.T) {
	x := testSamples(40)
	odd := chunk{"odd ", []byte{1, 2, 3}} // odd size: pad byte follows
	list := chunk{"LIST", append([]byte("INFOISFT"), 5, 0, 0, 0, 's', 'o', 'x', 0, 0, 0)}
	cases := []struct {
		name string
		mod  func(*wavSpec)
	}{
		{"plain", func(*wavSpec) {}},
		{"list before fmt", func(s *wavSpec) { s.before = []chunk{list} }},
		{"odd chunk before fmt", func(s *wavSpec) { s.before = []chunk{odd} }},
		{"odd chunk and fact between fmt and data", func(s *wavSpec) {
			s.between = []chunk{odd, {"fact", []byte{20, 0, 0, 0}}, {"JUNK", nil}}
		}},
		{"chunks after data are not read", func(s *wavSpec) {
			s.after = []chunk{{"LIST", make([]byte, 1000)}}
			s.tail = []byte("garbage")
		}},
		{"fmt with cbSize 0", func(s *wavSpec) { s.fmtExtra = []byte{0, 0} }},
		{"fmt with odd extra bytes", func(s *wavSpec) { s.fmtExtra = []byte{1, 0, 7} }},
		{"riff size 0", func(s *wavSpec) { s.riffSize = u32(0) }},
		{"riff size too large", func(s *wavSpec) { s.riffSize = u32(0xFFFFFFFF) }},
		{"riff size too small", func(s *wavSpec) { s.riffSize = u32(4) }},
		{"rf64 with ds64", func(s *wavSpec) {
			s.riffID, s.riffSize, s.dataSize, s.ds64Data = "RF64", u32(0xFFFFFFFF), u32(0xFFFFFFFF), u64(80)
		}},
		{"bw64 with ds64", func(s *wavSpec) {
			s.riffID, s.dataSize, s.ds64Data = "BW64", u32(0xFFFFFFFF), u64(80)
		}},
		{"rf64 with real data size", func(s *wavSpec) { s.riffID = "RF64" }},
		{"streamed: data size 0xFFFFFFFF", func(s *wavSpec) { s.dataSize, s.riffSize = u32(0xFFFFFFFF), u32(0xFFFFFFFF) }},
		{"streamed: partial final frame dropped", func(s *wavSpec) {
			s.dataSize, s.tail = u32(0xFFFFFFFF), []byte{9, 9, 9}
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			s := pcm(16, 2)
			c.mod(&s)
			b := encodeWAV(s, x)
			for _, size := range []int64{int64(len(b)), -1} {
				clip, err := Decode(bytes.NewReader(b), size)
				require.NoError(t, err, "size %d", size)
				assert.Equal(t, decodedPCM(s, x), clip.Samples, "size %d", size)
			}
		})
	}
}

// strict decodes as --strict does, without ffmpeg.
var strict = Options{Strict: true, NoFFmpeg: true}

func TestDecodeErrors(t *testing.T) {
	x := testSamples(8)
	good := encodeWAV(pcm(16, 2), x)
	nan := encodeWAV(float(32, 1), []float64{0, math.NaN()})
	inf := encodeWAV(float(32, 2), []float64{0, 0.5, math.Inf(-1), 0})
	huge := encodeWAV(float(64, 1), []float64{1e300})
	enc := func(mod func(*wavSpec)) []byte {
		s := pcm(16, 2)
		mod(&s)
		return encodeWAV(s, x)
	}
	cases := []struct {
		name      string
		in        []byte
		want      string
		truncated bool
	}{
		{"empty", nil, "audio: empty input", false},
		{"short header", []byte("RIFF\x00\x00"), "RIFF header at offset 0 needs 12 bytes but only 6 remain", true},
		{"not riff", []byte("ABCD\x00\x00\x00\x00WAVEfmt "), `unrecognised format: starts with "ABCD`, false},
		{"rifx", []byte("RIFX\x00\x00\x00\x00WAVE"), "big-endian WAV (RIFX): no native decoder", false},
		{"not wave", []byte("RIFF\x04\x00\x00\x00XYZW"), `RIFF form type is "XYZW"`, false},
		{"avi", []byte("RIFF\x04\x00\x00\x00AVI "), "AVI: no native decoder, and ffmpeg is turned off", false},
		{"no chunks", []byte("RIFF\x04\x00\x00\x00WAVE"), "no fmt chunk", false},
		{"no data", enc(func(s *wavSpec) { s.noData = true }), "no data chunk", false},
		{"data before fmt", enc(func(s *wavSpec) { s.noFmt = true }), "data chunk at offset 12 comes before any fmt chunk", false},
		{"second fmt", enc(func(s *wavSpec) { s.between = []chunk{{"fmt ", good[20:36]}} }), "second fmt chunk at offset 36", false},
		{"fmt too short", []byte("RIFF\x00\x00\x00\x00WAVEfmt \x0e\x00\x00\x00" + "\x01\x00\x01\x00\x80\x3e\x00\x00\x00\x7d\x00\x00\x02\x00"), "fmt chunk has 14 bytes, want >= 16", false},
		{"fmt truncated", good[:30], "fmt chunk at offset 20 needs 16 bytes but only 10 remain", true},
		{"zero channels", enc(func(s *wavSpec) { s.channels, s.blockOver = 0, 2 }), "fmt chunk says 0 channels", false},
		{"zero rate", enc(func(s *wavSpec) { s.rate = 0 }), "sample rate 0 Hz", false},
		{"block align", enc(func(s *wavSpec) { s.channels, s.blockOver = 3, 4 }), "wav: fmt chunk says 3 channels of 16 bits but block align is 4, want 6", false},
		{"adpcm", enc(func(s *wavSpec) { s.tag = 2 }), "WAV with format tag 0x0002 (Microsoft ADPCM): no native decoder, and ffmpeg is turned off", false},
		{"mu-law 16 bit", enc(func(s *wavSpec) { s.tag = 7 }), "wav: mu-law with 16 bits per sample; want 8", false},
		{"float16", enc(func(s *wavSpec) { s.tag, s.bits, s.blockOver = tagFloat, 16, 4 }), "IEEE float with 16 bits per sample is not supported", false},
		{"pcm 40 bit", enc(func(s *wavSpec) { s.bits, s.blockOver = 40, 10 }), "PCM with 40 bits per sample is not supported", false},
		{"pcm 0 bit", enc(func(s *wavSpec) { s.bits, s.blockOver = 0, 2 }), "PCM with 0 bits per sample", false},
		{"extensible bad guid", enc(func(s *wavSpec) { s.extensible, s.guid = true, make([]byte, 16) }), "sub-format GUID 00 00", false},
		{"extensible valid bits", enc(func(s *wavSpec) { s.extensible, s.validBits = true, 20 }), "20 valid bits in a 16-bit container", false},
		{"extensible short fmt", []byte("RIFF\x00\x00\x00\x00WAVEfmt \x12\x00\x00\x00\xfe\xff\x01\x00\x80\x3e\x00\x00\x00\x7d\x00\x00\x02\x00\x10\x00\x00\x00"), "WAVE_FORMAT_EXTENSIBLE fmt chunk has 18 bytes, want 40", false},
		{"data claims more", enc(func(s *wavSpec) { s.dataSize = u32(1 << 30) }), "wav: data chunk at offset 36 claims 1073741824 bytes, the input ends after 16 (4h39m37.216s of audio missing): input ends early", true},
		{"data cut short", good[:len(good)-6], "wav: data chunk at offset 36 claims 16 bytes, the input ends after 10 (125µs of audio missing): input ends early", true},
		{"unknown chunk past end", append(append([]byte{}, good[:12]...), "LIST\xff\xff\xff\x7fxx"...), `"LIST" chunk at offset 20 claims 2147483647 bytes but only 2 remain`, true},
		{"ds64 in riff", enc(func(s *wavSpec) { s.ds64Data = u64(8) }), "ds64 chunk at offset 12 in a RIFF (not RF64) file", false},
		{"rf64 without ds64", enc(func(s *wavSpec) { s.riffID, s.dataSize = "RF64", u32(0xFFFFFFFF) }), "RF64 data chunk at offset 36 defers its size to a ds64 chunk, but there is none", false},
		{"rf64 ds64 lies", enc(func(s *wavSpec) {
			s.riffID, s.dataSize, s.ds64Data = "RF64", u32(0xFFFFFFFF), u64(1<<40)
		}), "claims 1099511627776 bytes, the input ends after 16", true},
		{"rf64 ds64 negative", enc(func(s *wavSpec) {
			s.riffID, s.dataSize, s.ds64Data = "RF64", u32(0xFFFFFFFF), u64(1<<63)
		}), "ds64 data size 9223372036854775808 does not fit", false},
		{"nan", nan, "wav: sample 1 (frame 1, channel 0) is NaN; want a finite float32 value", false},
		{"inf", inf, "sample 2 (frame 1, channel 0) is -Inf", false},
		{"float64 beyond float32", huge, "sample 0 (frame 0, channel 0) is 1e+300", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := strict.Decode(bytes.NewReader(c.in), int64(len(c.in)))
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			assert.Equal(t, c.truncated, errors.Is(err, ErrTruncated), "errors.Is(err, ErrTruncated) for %v", err)
		})
	}
}

// TestDecodeUnknownSize: with size < 0 the same lies are caught by the end of
// the stream.
func TestDecodeUnknownSize(t *testing.T) {
	s := pcm(16, 1)
	s.dataSize = u32(1 << 30)
	x := testSamples(10)
	b := encodeWAV(s, x)
	_, err := strict.Decode(bytes.NewReader(b), -1)
	require.ErrorIs(t, err, ErrTruncated)
	assert.Contains(t, err.Error(), "wav: data chunk at offset 36 claims 1073741824 bytes, the input ends after 20")

	clip, err := Decode(bytes.NewReader(b), -1)
	require.NoError(t, err)
	assert.Equal(t, decodedPCM(s, x), clip.Samples)
	require.NotNil(t, clip.Truncated)
	assert.Equal(t, frameDuration(1<<29-10, 16000), clip.Truncated.Missing)

	_, err = Decode(bytes.NewReader(b[:30]), -1)
	require.ErrorIs(t, err, ErrTruncated)
	assert.Contains(t, err.Error(), "fmt chunk at offset 20: input ends after 10 of 16 bytes")
}

// TestDecodeTruncatedWAV: a WAV cut anywhere inside its data chunk decodes
// to the whole frames before the cut, as sox and ffmpeg do, and says how
// much is missing; strict decoding refuses it. Known and unknown sizes agree.
func TestDecodeTruncatedWAV(t *testing.T) {
	for _, s := range []wavSpec{pcm(16, 2), pcm(24, 1), float(32, 3), {tag: tagMuLaw, bits: 8, channels: 1, rate: 8000}} {
		x := testSamples(s.channels * 100)
		b := encodeWAV(s, x)
		full, err := Decode(bytes.NewReader(b), int64(len(b)))
		require.NoError(t, err)
		require.Nil(t, full.Truncated)
		ba := s.channels * s.bits / 8
		for _, cut := range []int{44, 45, 44 + ba, 44 + 37*ba + 1, len(b) - 1} {
			for _, size := range []int64{int64(cut), -1} {
				clip, err := Decode(bytes.NewReader(b[:cut]), size)
				require.NoError(t, err, "cut %d", cut)
				frames := (cut - 44) / ba
				assert.Equal(t, full.Samples[:frames*s.channels], clip.Samples, "cut %d", cut)
				require.NotNil(t, clip.Truncated, "cut %d", cut)
				assert.Equal(t, frameDuration(int64(100-frames), s.rate), clip.Truncated.Missing)
				_, err = strict.Decode(bytes.NewReader(b[:cut]), size)
				assert.ErrorIs(t, err, ErrTruncated)
			}
		}
	}
	// A data size that is not whole frames: the partial frame is dropped.
	s := pcm(16, 2)
	s.dataSize = u32(14)
	x := testSamples(8)
	b := encodeWAV(s, x)
	clip, err := strict.Decode(bytes.NewReader(b), int64(len(b)))
	require.NoError(t, err)
	assert.Equal(t, decodedPCM(s, x)[:6], clip.Samples)
}

// TestDecodeReaderError: I/O errors other than EOF surface as such.
func TestDecodeReaderError(t *testing.T) {
	b := encodeWAV(pcm(16, 1), testSamples(100))
	boom := errors.New("disk on fire")
	for _, n := range []int{5, 30, 100} {
		r := io.MultiReader(bytes.NewReader(b[:n]), iotest.ErrReader(boom))
		_, err := Decode(r, int64(len(b)))
		require.ErrorIs(t, err, boom, "cut at %d", n)
	}
	// One byte at a time still decodes.
	clip, err := Decode(iotest.OneByteReader(bytes.NewReader(b)), int64(len(b)))
	require.NoError(t, err)
	assert.Equal(t, 100, clip.Frames())
}

// TestDecodeAllocationBound: a header claiming gigabytes costs nothing when
// the input is small, whether its size is known or not.
func TestDecodeAllocationBound(t *testing.T) {
	s := pcm(8, 1)
	s.dataSize = u32(0xFFFFFFF0)
	b := encodeWAV(s, testSamples(64))
	for _, c := range []struct {
		size  int64
		bound uint64
	}{
		{int64(len(b)), 160 << 10},       // read buffers, no buffer for the claim
		{-1, 4*unknownCap + (256 << 10)}, // one capped buffer and one block
	} {
		var before, after goruntime.MemStats
		goruntime.GC()
		goruntime.ReadMemStats(&before)
		_, err := strict.Decode(bytes.NewReader(b), c.size)
		goruntime.ReadMemStats(&after)
		require.ErrorIs(t, err, ErrTruncated)
		assert.Less(t, after.TotalAlloc-before.TotalAlloc, c.bound, "size %d", c.size)
	}
}
