package audio

import "fmt"

// muLaw and aLaw expand G.711 codes to 16-bit values: the tables of
// ffmpeg's pcm_mulaw/pcm_alaw decoders (and of the reference g711.c), so the
// decoded samples equal ffmpeg's bit for bit.
var muLaw, aLaw [256]int16

func init() {
	for i := range 256 {
		muLaw[i] = ulaw2linear(uint8(i))
		aLaw[i] = alaw2linear(uint8(i))
	}
}

func ulaw2linear(u uint8) int16 {
	const bias = 0x84
	u = ^u
	t := (int(u&0x0F) << 3) + bias
	t <<= (u & 0x70) >> 4
	if u&0x80 != 0 {
		return int16(bias - t)
	}
	return int16(t - bias)
}

func alaw2linear(a uint8) int16 {
	a ^= 0x55
	t := int(a & 0x0F)
	seg := int(a&0x70) >> 4
	if seg != 0 {
		t = (t + t + 1 + 32) << (seg + 2)
	} else {
		t = (t + t + 1) << 3
	}
	if a&0x80 != 0 {
		return int16(t)
	}
	return int16(-t)
}

// IMA ADPCM: the IMA/DVI tables, expanded as ffmpeg's adpcm_ima_wav does.
var imaIndex = [16]int{-1, -1, -1, -1, 2, 4, 6, 8, -1, -1, -1, -1, 2, 4, 6, 8}

var imaStep = [89]int{
	7, 8, 9, 10, 11, 12, 13, 14, 16, 17, 19, 21, 23, 25, 28, 31, 34, 37, 41, 45,
	50, 55, 60, 66, 73, 80, 88, 97, 107, 118, 130, 143, 157, 173, 190, 209, 230,
	253, 279, 307, 337, 371, 408, 449, 494, 544, 598, 658, 724, 796, 876, 963,
	1060, 1166, 1282, 1411, 1552, 1707, 1878, 2066, 2272, 2499, 2749, 3024, 3327,
	3660, 4026, 4428, 4871, 5358, 5894, 6484, 7132, 7845, 8630, 9493, 10442,
	11487, 12635, 13899, 15289, 16818, 18500, 20350, 22385, 24623, 27086, 29794,
	32767,
}

type imaState struct {
	predictor int
	index     int
}

func (s *imaState) expand(nibble byte) int16 {
	step := imaStep[s.index]
	s.index = min(88, max(0, s.index+imaIndex[nibble]))
	// ffmpeg's direct form, ((2*delta + 1) * step) >> 3, not the reference
	// shift-and-add series (they differ in rounding).
	diff := (2*int(nibble&7) + 1) * step >> 3
	if nibble&8 != 0 {
		s.predictor -= diff
	} else {
		s.predictor += diff
	}
	s.predictor = min(32767, max(-32768, s.predictor))
	return int16(s.predictor)
}

// decodeIMABlock appends the frames of one WAV IMA ADPCM block b (len(b) >=
// 4*channels): per channel a 4-byte header (the first sample, the step
// index and a zero byte), then 4 bytes (8 codes, low nibble first) of each
// channel in turn. A short block yields the whole 8-sample groups it holds.
func decodeIMABlock(dst []float32, b []byte, channels int) ([]float32, error) {
	frames := int(imaBlockFrames(len(b), channels))
	base := len(dst)
	dst = append(dst, make([]float32, frames*channels)...)
	out := dst[base:]
	st := make([]imaState, channels)
	for c := range channels {
		h := b[4*c:]
		idx := int(int16(uint16(h[2]) | uint16(h[3])<<8))
		if idx < 0 || idx > 88 {
			return nil, fmt.Errorf("wav: IMA ADPCM block header of channel %d has step index %d; want 0..88", c, idx)
		}
		st[c] = imaState{predictor: int(int16(uint16(h[0]) | uint16(h[1])<<8)), index: idx}
		out[c] = float32(st[c].predictor) / (1 << 15)
	}
	p := 4 * channels
	for g := 0; g < (frames-1)/8; g++ {
		for c := range channels {
			for m := 0; m < 8; m += 2 {
				v := b[p]
				p++
				f := 1 + g*8 + m
				out[f*channels+c] = float32(st[c].expand(v&0x0F)) / (1 << 15)
				out[(f+1)*channels+c] = float32(st[c].expand(v>>4)) / (1 << 15)
			}
		}
	}
	return dst, nil
}
