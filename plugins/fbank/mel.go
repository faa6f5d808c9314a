package fbank

import (
	"fmt"
	"math"
)

// Slaney mel scale (librosa/HF default, htk=False): linear below 1 kHz at
// 3 mels per 200 Hz, logarithmic above with 27 mels per factor 6.4.
const (
	slaneyMinLogHz  = 1000.0
	slaneyMinLogMel = 15.0 // slaneyMinLogHz / (200/3)
)

var slaneyLogStep = math.Log(6.4) / 27

func hzToMel(f float64) float64 {
	if f >= slaneyMinLogHz {
		return slaneyMinLogMel + math.Log(f/slaneyMinLogHz)/slaneyLogStep
	}
	return 3 * f / 200
}

func melToHz(m float64) float64 {
	if m >= slaneyMinLogMel {
		return slaneyMinLogHz * math.Exp(slaneyLogStep*(m-slaneyMinLogMel))
	}
	return 200 * m / 3
}

// slaneyFilterbank returns the dense [nMels][nFFT/2+1] triangular filterbank
// of librosa.filters.mel(norm="slaney") and HF's
// audio_utils.mel_filter_bank(norm="slaney", mel_scale="slaney"), in float64:
// nMels+2 edges equally spaced on the Slaney mel scale between fMin and fMax,
// triangles over the bin centre frequencies k·sr/nFFT, each scaled by
// 2/(f[i+2]-f[i]) so that every filter has the same area.
func slaneyFilterbank(sampleRate, nFFT, nMels int, fMin, fMax float64) [][]float64 {
	nFreq := nFFT/2 + 1
	lo, hi := hzToMel(fMin), hzToMel(fMax)
	edges := make([]float64, nMels+2)
	for i := range edges {
		edges[i] = melToHz(lo + (hi-lo)*float64(i)/float64(nMels+1))
	}
	bank := make([][]float64, nMels)
	for i := range bank {
		row := make([]float64, nFreq)
		left, centre, right := edges[i], edges[i+1], edges[i+2]
		norm := 2 / (right - left)
		for k := range row {
			f := float64(k) * float64(sampleRate) / float64(nFFT)
			up := (f - left) / (centre - left)
			down := (right - f) / (right - centre)
			if w := math.Min(up, down); w > 0 {
				row[k] = w * norm
			}
		}
		bank[i] = row
	}
	return bank
}

// melBank is a filterbank stored sparsely: filter i has the weights
// w[off[i]:off[i+1]] for the bins start[i], start[i]+1, ... Only the band
// between a filter's first and last non-zero weight is kept, so applying a
// Slaney bank costs about two multiply-adds per frequency bin instead of
// nMels per bin.
type melBank struct {
	nMels, nFreq int
	start, off   []int
	w            []float64
}

// newMelBank compresses a dense [nMels][nFreq] bank.
func newMelBank(dense [][]float64) melBank {
	b := melBank{nMels: len(dense), off: make([]int, 1, len(dense)+1), start: make([]int, len(dense))}
	if len(dense) > 0 {
		b.nFreq = len(dense[0])
	}
	for i, row := range dense {
		first, last := 0, -1
		for k, v := range row {
			if v != 0 {
				if last < 0 {
					first = k
				}
				last = k
			}
		}
		if last >= 0 {
			b.w = append(b.w, row[first:last+1]...)
		}
		b.start[i] = first
		b.off = append(b.off, len(b.w))
	}
	return b
}

// denseFromFlat checks a checkpoint filterbank given as a row-major
// [nMels, nFreq] array and returns it as rows.
func denseFromFlat(fb []float64, nMels, nFreq int) ([][]float64, error) {
	if len(fb) != nMels*nFreq {
		return nil, fmt.Errorf("filterbank has %d values, want num_mels x (n_fft/2+1) = %d x %d", len(fb), nMels, nFreq)
	}
	rows := make([][]float64, nMels)
	for i := range rows {
		rows[i] = fb[i*nFreq : (i+1)*nFreq]
		for k, v := range rows[i] {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("filterbank[%d,%d] is %v, want a finite weight", i, k, v)
			}
		}
	}
	return rows, nil
}

// apply writes mel[i] = Σ_k w_i[k]·power[k]; it allocates nothing.
func (b *melBank) apply(power, mel []float64) {
	for i := range mel[:b.nMels] {
		w := b.w[b.off[i]:b.off[i+1]]
		p := power[b.start[i] : b.start[i]+len(w)]
		var s0, s1 float64
		k := 0
		for ; k+1 < len(w); k += 2 {
			s0 += w[k] * p[k]
			s1 += w[k+1] * p[k+1]
		}
		if k < len(w) {
			s0 += w[k] * p[k]
		}
		mel[i] = s0 + s1
	}
}
