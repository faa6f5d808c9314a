package audio_test

import (
	"bytes"
	"fmt"
	"log"
	"math"
	"os"

	"github.com/edgespeech/edge/runtime/audio"
)

func ExampleLoad() {
	// 50 ms of 44.1 kHz stereo (sox-written), as 16 kHz mono.
	x, err := audio.Load("testdata/sox/s16_44k_stereo.wav", 16000)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(len(x), "samples")
	// Output: 800 samples
}

func ExampleDecode() {
	f, err := os.Open("testdata/sox/s16_16k_3ch.wav")
	if err != nil {
		log.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		log.Fatal(err)
	}
	clip, err := audio.Decode(f, st.Size())
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(clip.SampleRate, "Hz,", clip.Channels, "channels,", clip.Duration())
	// Output: 16000 Hz, 3 channels, 50ms
}

func ExampleOptions_Load() {
	// The decoder is chosen by content: this is FLAC whatever its name.
	clip, err := audio.Options{}.Load("testdata/parity/flac_s16_16k_mono.flac", 16000)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(clip.Format, clip.SampleRate, "Hz,", clip.Duration(), "truncated:", clip.Truncated != nil)

	// Cut short, it still decodes what is there, and says what is missing.
	b, _ := os.ReadFile("testdata/parity/flac_s16_16k_mono.flac")
	cut, err := audio.Decode(bytes.NewReader(b[:len(b)*3/4]), -1)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cut.Truncated.Missing > 0)
	// Output:
	// FLAC 16-bit 16000 Hz, 1s truncated: false
	// true
}

func ExampleResample() {
	// One second of a 1 kHz tone at 48 kHz becomes 16000 samples at 16 kHz.
	x := make([]float32, 48000)
	for i := range x {
		x[i] = float32(0.5 * math.Sin(2*math.Pi*1000*float64(i)/48000))
	}
	y, err := audio.Resample(x, 48000, 16000)
	if err != nil {
		log.Fatal(err)
	}
	// 16 samples per cycle: sample 4004 is a crest, 4012 a trough.
	fmt.Printf("%d samples, y[4004] = %.4f, y[4012] = %.4f\n", len(y), y[4004], y[4012])
	// Output: 16000 samples, y[4004] = 0.5000, y[4012] = -0.5000
}
