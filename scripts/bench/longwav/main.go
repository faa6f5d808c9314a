// Command longwav writes a long 16 kHz mono 16-bit WAV for memory and speed
// measurements: the bundled clips (models/default/testdata) in turn, each
// followed by a seeded pause of 0.3-3 s, until the file lasts -minutes. It
// writes as it goes (memory does not grow with the length).
//
//	go run ./scripts/bench/longwav -minutes 60 -out /tmp/hour.wav
package main

import (
	"bufio"
	"encoding/binary"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"

	"github.com/edgespeech/edge/runtime/audio"
)

func main() {
	minutes := flag.Float64("minutes", 60, "length of the file")
	out := flag.String("out", "", "output WAV path")
	seed := flag.Uint64("seed", 1, "seed of the pauses")
	dir := flag.String("clips", "models/default/testdata", "directory of the clips")
	flag.Parse()
	if *out == "" || *minutes <= 0 {
		fmt.Fprintln(os.Stderr, "usage: longwav -minutes M -out FILE.wav")
		os.Exit(2)
	}
	if err := run(*minutes, *out, *seed, *dir); err != nil {
		fmt.Fprintln(os.Stderr, "longwav:", err)
		os.Exit(1)
	}
}

func run(minutes float64, out string, seed uint64, dir string) error {
	const rate = 16000
	var clips [][]float32
	for _, name := range []string{"demo", "words_1", "words_2", "words_3", "words_4"} {
		x, err := audio.Load(dir+"/"+name+".wav", rate)
		if err != nil {
			return err
		}
		clips = append(clips, x)
	}
	total := int(minutes * 60 * rate)
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<20)
	le := binary.LittleEndian
	w.WriteString("RIFF")
	_ = binary.Write(w, le, uint32(36+2*total))
	w.WriteString("WAVEfmt ")
	for _, v := range []any{uint32(16), uint16(1), uint16(1), uint32(rate), uint32(2 * rate), uint16(2), uint16(16)} {
		_ = binary.Write(w, le, v)
	}
	w.WriteString("data")
	_ = binary.Write(w, le, uint32(2*total))
	rng := rand.New(rand.NewPCG(seed, 0))
	var b [2]byte
	put := func(v float32) {
		le.PutUint16(b[:], uint16(int16(math.Round(float64(max(-1, min(v, 32767.0/32768)))*32768))))
		w.Write(b[:])
	}
	for n, i := 0, 0; n < total; i++ {
		for _, v := range clips[i%len(clips)] {
			if n == total {
				break
			}
			put(v)
			n++
		}
		for k := int((0.3 + 2.7*rng.Float64()) * rate); k > 0 && n < total; k-- {
			put(0)
			n++
		}
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}
