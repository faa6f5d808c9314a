package audio

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	goruntime "runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata/parity", name))
	require.NoError(t, err)
	return b
}

func decodeBytes(t *testing.T, o Options, b []byte) (*Clip, error) {
	t.Helper()
	o.NoFFmpeg = true
	return o.Decode(bytes.NewReader(b), int64(len(b)))
}

// TestTruncatedFixtures cuts every parity fixture and checks that what is
// there decodes (lossless: exactly the start of the whole decode; lossy: no
// longer than it), that the cut is reported (with the missing duration where
// the headers give the length), and that strict decoding refuses it.
func TestTruncatedFixtures(t *testing.T) {
	files, err := filepath.Glob("testdata/parity/*.*")
	require.NoError(t, err)
	n := 0
	for _, p := range files {
		name := filepath.Base(p)
		if strings.HasSuffix(name, ".f32") || strings.HasSuffix(name, ".json") {
			continue
		}
		n++
		t.Run(name, func(t *testing.T) {
			b := readFixture(t, name)
			full, err := decodeBytes(t, Options{}, b)
			require.NoError(t, err)
			require.Nil(t, full.Truncated)
			lossless := !strings.HasPrefix(name, "mp3") && !strings.HasPrefix(name, "vorbis") && !strings.HasPrefix(name, "opus")
			for _, frac := range []float64{0.7, 0.93} {
				cut := b[:int(float64(len(b))*frac)]
				clip, err := decodeBytes(t, Options{}, cut)
				require.NoError(t, err, "cut at %.0f%%", frac*100)
				require.NotNil(t, clip.Truncated, "cut at %.0f%%", frac*100)
				assert.Less(t, clip.Frames(), full.Frames())
				ogg := strings.HasPrefix(name, "vorbis") || strings.HasPrefix(name, "opus")
				if !ogg { // an Ogg page cut short is lost whole; these have one or two
					assert.Greater(t, clip.Frames(), 0)
				}
				if lossless {
					assert.Equal(t, full.Samples[:len(clip.Samples)], clip.Samples)
				}
				if !ogg {
					// The headers say how long the audio is (Ogg's do not).
					assert.InDelta(t, full.Duration().Seconds(), (clip.Duration() + clip.Truncated.Missing).Seconds(), 0.08, "%s", clip.Truncated)
				}
				_, err = decodeBytes(t, Options{Strict: true}, cut)
				assert.ErrorIs(t, err, ErrTruncated)
			}
		})
	}
	assert.Equal(t, 14, n)
}

func TestMaxSamples(t *testing.T) {
	for _, name := range []string{"flac_s16_16k_mono.flac", "mp3_vbr_16k_mono_id3.mp3", "vorbis_16k_mono.ogg", "opus_16k_mono.opus", "wav_ima_16k_mono.wav", "aiff_s16_22k_stereo.aiff"} {
		_, err := decodeBytes(t, Options{MaxSamples: 1000}, readFixture(t, name))
		assert.ErrorContains(t, err, "decodes to more than 1000 samples (Options.MaxSamples)", name)
	}
}

// TestFFmpegRoute runs a stand-in ffmpeg (a shell script) to check how
// formats without a native decoder are handed over: a stream through a
// temporary file holding exactly its bytes, the float WAV ffmpeg writes read
// back, ffmpeg's own errors passed on, and a clear error without it.
func TestFFmpegRoute(t *testing.T) {
	dir := t.TempDir()
	m4a := []byte("\x00\x00\x00\x18ftypM4A \x00\x00\x02\x00isomiso2\x00\x00\x00\x08free" + strings.Repeat("x", 3000))
	want := filepath.Join(dir, "in.m4a")
	require.NoError(t, os.WriteFile(want, m4a, 0o644))
	wav := encodeWAV(float(32, 2), testSamples(64))
	wavPath := filepath.Join(dir, "out.wav")
	require.NoError(t, os.WriteFile(wavPath, wav, 0o644))
	script := filepath.Join(dir, "fake-ffmpeg")
	require.NoError(t, os.WriteFile(script, []byte(`#!/bin/sh
# args: -nostdin -hide_banner -loglevel error -i file:PATH -map 0:a:0 -vn -f wav -c:a pcm_f32le -
src=${6#file:}
[ "$5" = -i ] && [ "${14}" = - ] || { echo "unexpected arguments: $*" >&2; exit 2; }
cmp -s "$src" "`+want+`" || { echo "$src: Invalid data found when processing input" >&2; exit 1; }
cat "`+wavPath+`"
`), 0o755))
	wantClip, err := Decode(bytes.NewReader(wav), int64(len(wav)))
	require.NoError(t, err)

	o := Options{FFmpeg: script}
	clip, err := o.Decode(bytes.NewReader(m4a), -1) // a stream: spooled
	require.NoError(t, err)
	assert.Equal(t, wantClip.Samples, clip.Samples)
	assert.Equal(t, "MP4/M4A via ffmpeg", clip.Format)

	c2, err := o.Load(want, 16000) // a file: its path
	require.NoError(t, err)
	assert.Equal(t, 16000, c2.SampleRate)

	_, err = o.Decode(bytes.NewReader(m4a[:100]), -1)
	assert.ErrorContains(t, err, "ffmpeg could not decode this MP4/M4A:")
	assert.ErrorContains(t, err, "Invalid data found when processing input")

	_, err = Options{FFmpeg: filepath.Join(dir, "no-such-ffmpeg")}.Decode(bytes.NewReader(m4a), -1)
	assert.ErrorContains(t, err, "MP4/M4A needs ffmpeg, and")
	assert.ErrorContains(t, err, "install ffmpeg")

	// A WAV of a tag without a native decoder goes the same way.
	adpcm := encodeWAV(wavSpec{tag: 2, bits: 4, channels: 1, rate: 8000, blockOver: 256}, nil)
	_, err = Options{NoFFmpeg: true}.Decode(bytes.NewReader(adpcm), int64(len(adpcm)))
	assert.ErrorContains(t, err, "WAV with format tag 0x0002 (Microsoft ADPCM): no native decoder, and ffmpeg is turned off")

	_, err = Options{NoFFmpeg: true}.Decode(bytes.NewReader([]byte("hello, world")), 12)
	assert.ErrorContains(t, err, `unrecognised format: starts with "hello, w"`)
}

// aiffFile builds an AIFF(-C) file: COMM (channels, frames, bits, rate,
// compression), then SSND with data; ssndFirst puts SSND before COMM.
func aiffFile(aifc bool, comp string, channels, frames, bits int, rate float64, data []byte, ssndFirst bool) []byte {
	var comm bytes.Buffer
	_ = binary.Write(&comm, binary.BigEndian, int16(channels))
	_ = binary.Write(&comm, binary.BigEndian, uint32(frames))
	_ = binary.Write(&comm, binary.BigEndian, int16(bits))
	// 80-bit extended rate
	exp, mant := 0, uint64(0)
	if rate > 0 {
		fr, e := math.Frexp(rate)
		exp = e - 1 + 16383
		mant = uint64(fr * (1 << 64))
	}
	_ = binary.Write(&comm, binary.BigEndian, uint16(exp))
	_ = binary.Write(&comm, binary.BigEndian, mant)
	form := "AIFF"
	if aifc {
		form = "AIFC"
		comm.WriteString(comp)
		comm.Write([]byte{0, 0})
	}
	chunk := func(id string, body []byte) []byte {
		b := append([]byte(id), 0, 0, 0, 0)
		binary.BigEndian.PutUint32(b[4:], uint32(len(body)))
		b = append(b, body...)
		if len(body)%2 == 1 {
			b = append(b, 0)
		}
		return b
	}
	ssnd := chunk("SSND", append(make([]byte, 8), data...))
	c := chunk("COMM", comm.Bytes())
	body := append([]byte(form), append(c, ssnd...)...)
	if ssndFirst {
		body = append([]byte(form), append(ssnd, c...)...)
	}
	return append(append([]byte("FORM"), 0, 0, 0, 0), body...)
}

func TestAIFFEncodings(t *testing.T) {
	be16 := []byte{0x80, 0x00, 0x40, 0x00, 0x7F, 0xFF, 0xFF, 0xFF}
	f64 := make([]byte, 16)
	binary.BigEndian.PutUint64(f64, math.Float64bits(0.25))
	binary.BigEndian.PutUint64(f64[8:], math.Float64bits(-1.5))
	for _, c := range []struct {
		name string
		file []byte
		want []float32
		fmt  string
	}{
		{"16-bit", aiffFile(false, "", 2, 2, 16, 44100, be16, false), []float32{-1, 0.5, 32767.0 / 32768, -1.0 / 32768}, "AIFF (PCM 16-bit)"},
		{"SSND before COMM", aiffFile(false, "", 1, 4, 16, 8000, be16, true), []float32{-1, 0.5, 32767.0 / 32768, -1.0 / 32768}, "AIFF (PCM 16-bit)"},
		{"8-bit signed", aiffFile(false, "", 1, 3, 8, 8000, []byte{0x80, 0x00, 0x40}, false), []float32{-1, 0, 0.5}, "AIFF (PCM 8-bit)"},
		{"12-bit in 16", aiffFile(false, "", 1, 1, 12, 8000, []byte{0x40, 0x00}, false), []float32{0.5}, "AIFF (PCM 12-bit)"},
		{"sowt", aiffFile(true, "sowt", 1, 2, 16, 8000, []byte{0x00, 0x80, 0x00, 0x40}, false), []float32{-1, 0.5}, "AIFF-C (PCM little-endian 16-bit)"},
		{"fl64", aiffFile(true, "fl64", 1, 2, 64, 8000, f64, false), []float32{0.25, -1.5}, "AIFF-C (float 64-bit)"},
		{"ulaw", aiffFile(true, "ulaw", 1, 2, 16, 8000, []byte{0x00, 0xFF}, false), []float32{float32(muLaw[0]) / 32768, 0}, "AIFF-C (µ-law)"},
		{"alaw", aiffFile(true, "alaw", 1, 1, 16, 8000, []byte{0xD5}, false), []float32{float32(aLaw[0xD5]) / 32768}, "AIFF-C (A-law)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			clip, err := decodeBytes(t, Options{Strict: true}, c.file)
			require.NoError(t, err)
			assert.Equal(t, c.want, clip.Samples)
			assert.Equal(t, c.fmt, clip.Format)
		})
	}
	for _, c := range []struct {
		name, want string
		file       []byte
	}{
		{"ima4", "AIFF-C with compression type \"ima4\": no native decoder", aiffFile(true, "ima4", 1, 1, 16, 8000, nil, false)},
		{"zero rate", "sample rate", aiffFile(false, "", 1, 1, 16, 0, []byte{0, 0}, false)},
		{"no COMM", "no COMM chunk", []byte("FORM\x00\x00\x00\x04AIFF")},
		{"NaN", "NaN; want a finite value", aiffFile(true, "fl32", 1, 1, 32, 8000, []byte{0x7F, 0xC0, 0, 0}, false)},
	} {
		_, err := decodeBytes(t, Options{}, c.file)
		assert.ErrorContains(t, err, c.want, c.name)
	}
}

func TestRaw(t *testing.T) {
	s16 := []byte{0x00, 0x80, 0x00, 0x40, 0xFF, 0x7F, 0x01}
	clip, err := Options{Raw: &RawFormat{Encoding: "s16le", Rate: 8000, Channels: 1}}.Decode(bytes.NewReader(s16), -1)
	require.NoError(t, err)
	assert.Equal(t, []float32{-1, 0.5, 32767.0 / 32768}, clip.Samples)
	require.NotNil(t, clip.Truncated, "a partial frame at the end")
	f32 := make([]byte, 8)
	binary.LittleEndian.PutUint32(f32, math.Float32bits(0.75))
	binary.LittleEndian.PutUint32(f32[4:], math.Float32bits(-2))
	clip, err = Options{Raw: &RawFormat{Encoding: "f32le", Rate: 48000, Channels: 2}}.Decode(bytes.NewReader(f32), 8)
	require.NoError(t, err)
	assert.Equal(t, []float32{0.75, -2}, clip.Samples)
	assert.Equal(t, 1, clip.Frames())
	assert.Nil(t, clip.Truncated)
	for _, f := range []RawFormat{{"s24le", 8000, 1}, {"s16le", 0, 1}, {"f32le", 8000, 0}} {
		assert.Error(t, f.Check(), "%+v", f)
	}
}

func TestID3(t *testing.T) {
	flac := readFixture(t, "flac_s16_16k_mono.flac")
	tag := append([]byte("ID3\x04\x00\x00\x00\x00\x00\x0a"), make([]byte, 10)...)
	clip, err := decodeBytes(t, Options{}, append(tag, flac...))
	require.NoError(t, err, "an ID3v2 tag before FLAC is skipped")
	assert.Equal(t, "FLAC 16-bit", clip.Format)
	lying := []byte("ID3\x04\x00\x00\x7f\x7f\x7f\x7f" + "abc")
	_, err = decodeBytes(t, Options{}, lying)
	assert.ErrorIs(t, err, ErrTruncated)
	assert.ErrorContains(t, err, "ID3v2 tag at offset 0 claims 268435465 bytes but only 13 remain")
}

// TestOggDamage: a page with a wrong checksum is skipped, the rest decodes;
// a stream cut before its end-of-stream page is reported as truncated.
func TestOggDamage(t *testing.T) {
	b := readFixture(t, "vorbis_16k_stereo.ogg")
	full, err := decodeBytes(t, Options{}, b)
	require.NoError(t, err)
	pages := []int{}
	for i := 0; i+4 <= len(b); i++ {
		if string(b[i:i+4]) == "OggS" {
			pages = append(pages, i)
		}
	}
	require.GreaterOrEqual(t, len(pages), 4)
	bad := bytes.Clone(b)
	bad[pages[2]+40] ^= 0xFF // inside the first audio page
	clip, err := decodeBytes(t, Options{}, bad)
	require.NoError(t, err)
	assert.Less(t, clip.Frames(), full.Frames())
	assert.Nil(t, clip.Truncated)

	clip, err = decodeBytes(t, Options{}, b[:pages[len(pages)-1]])
	require.NoError(t, err)
	require.NotNil(t, clip.Truncated)
	assert.Contains(t, clip.Truncated.String(), "ogg: the input ends without the end-of-stream page (missing duration unknown)")
}

// TestHeaderClaimsCostNothing: headers that claim gigabytes of audio over a
// small input allocate in proportion to the input, not the claim, and the
// claim shows up only as a truncation report.
func TestHeaderClaimsCostNothing(t *testing.T) {
	patch := func(name string, edit func(b []byte) []byte) []byte {
		return edit(bytes.Clone(readFixture(t, name)))
	}
	for _, c := range []struct {
		name string
		in   []byte
	}{
		{"FLAC STREAMINFO sample count", patch("flac_s16_16k_mono.flac", func(b []byte) []byte {
			b[21] |= 0x0F
			copy(b[22:26], []byte{0xFF, 0xFF, 0xFF, 0xFF})
			return b
		})},
		{"MP3 Xing frame count", patch("mp3_cbr_32k_stereo.mp3", func(b []byte) []byte {
			require.Equal(t, "Info", string(b[36:40]))
			copy(b[44:48], []byte{0xFF, 0xFF, 0xFF, 0xFF})
			return b
		})},
		{"AIFF COMM frames and SSND size", patch("aiff_s16_22k_stereo.aiff", func(b []byte) []byte {
			i := bytes.Index(b, []byte("COMM"))
			copy(b[i+10:i+14], []byte{0xFF, 0xFF, 0xFF, 0xFF})
			j := bytes.Index(b, []byte("SSND"))
			copy(b[j+4:j+8], []byte{0x7F, 0xFF, 0xFF, 0xF0})
			return b
		})},
		{"WAV IMA ADPCM data size", patch("wav_ima_16k_mono.wav", func(b []byte) []byte {
			i := bytes.Index(b, []byte("data"))
			copy(b[i+4:i+8], []byte{0xF0, 0xFF, 0xFF, 0xFF})
			return b
		})},
	} {
		t.Run(c.name, func(t *testing.T) {
			var before, after goruntime.MemStats
			goruntime.GC()
			goruntime.ReadMemStats(&before)
			clip, err := decodeBytes(t, Options{}, c.in)
			goruntime.ReadMemStats(&after)
			require.NoError(t, err)
			require.NotNil(t, clip.Truncated)
			assert.Greater(t, clip.Truncated.Missing.Hours(), 1.0, "%s", clip.Truncated)
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(8<<20+64*len(c.in)))
		})
	}
}

// TestVorbisSetupBounds: codebook counts that the setup header cannot back
// are refused before jfreymuth/vorbis allocates for them.
func TestVorbisSetupBounds(t *testing.T) {
	type field struct {
		v    uint64
		bits uint
	}
	setup := func(fields ...field) []byte {
		b := []byte("\x05vorbis")
		var acc uint64
		var n uint
		for _, f := range fields {
			for i := range f.bits {
				acc |= (f.v >> i & 1) << n
				n++
				if n == 8 {
					b, acc, n = append(b, byte(acc)), 0, 0
				}
			}
		}
		if n > 0 {
			b = append(b, byte(acc))
		}
		return b
	}
	book := func(dims, entries uint64) []field {
		return []field{{0x564342, 24}, {dims, 16}, {entries, 24}}
	}
	for _, c := range []struct {
		name string
		p    []byte
		want string
	}{
		{"no entries", setup(append([]field{{0, 8}}, book(1, 0)...)...), "0 entries of 1 dimensions"},
		{"16M entries", setup(append([]field{{0, 8}}, book(1, 1<<24-1)...)...), "16777215 entries"},
		{"lengths missing", setup(append([]field{{0, 8}}, append(book(2, 5000), field{0, 1}, field{0, 1})...)...), "5000 entry lengths, but the header ends"},
		{"ordered run past the end", setup(append([]field{{0, 8}}, append(book(1, 1000), field{1, 1}, field{3, 5}, field{1023, 10})...)...), "ordered entry lengths run past"},
		{"no sync", setup(field{0, 8}, field{0x123456, 24}), "no sync pattern"},
	} {
		assert.ErrorContains(t, checkVorbisSetup(c.p), c.want, c.name)
	}
	for _, name := range []string{"vorbis_16k_mono.ogg", "vorbis_16k_stereo.ogg"} {
		s, err := demuxOgg(readFixture(t, name))
		require.NoError(t, err)
		assert.NoError(t, checkVorbisSetup(s.packets[2].data), name)
	}
}
