package asr

import (
	"fmt"

	"github.com/edgespeech/edge/runtime"
)

// stitcher collects the kept frames [lo, hi) of each chunk's log-probs
// [1, T', V] into one [1, T, V] tensor.
type stitcher interface {
	// add takes lp (and frees it when it is device memory).
	add(lp *runtime.Tensor, lo, hi int) error
	frames() int
	// result is the stitched tensor; the stitcher no longer owns it.
	result() (*runtime.Tensor, error)
	// discard frees what the stitcher still holds.
	discard()
}

// hostStitcher stitches in host memory; chunks in device memory are
// downloaded (counted copies).
type hostStitcher struct {
	backend runtime.Backend
	V       int
	out     []float32
}

func (s *hostStitcher) add(lp *runtime.Tensor, lo, hi int) error {
	if !lp.OnHost() {
		h, err := s.backend.Download(lp)
		_ = lp.Release()
		if err != nil {
			return err
		}
		lp = h
	}
	s.out = append(s.out, lp.F32()[lo*s.V:hi*s.V]...)
	return nil
}

func (s *hostStitcher) frames() int { return len(s.out) / s.V }

func (s *hostStitcher) result() (*runtime.Tensor, error) {
	return runtime.FromSlice(runtime.F32, runtime.Shape{1, s.frames(), s.V}, s.out)
}

func (s *hostStitcher) discard() {}

// deviceCopier is a backend that copies between its own tensors on the
// device (cuda.Backend.CopyDevice).
type deviceCopier interface {
	runtime.Backend
	CopyDevice(dst *runtime.Tensor, dstOff int64, src *runtime.Tensor, srcOff, n int64) error
}

// deviceStitcher keeps the chunks on the device and concatenates their kept
// frames with device-to-device copies: long audio stays on the device too.
type deviceStitcher struct {
	backend deviceCopier
	V       int
	pieces  []piece
	n       int
}

type piece struct {
	t      *runtime.Tensor
	lo, hi int
}

func (s *deviceStitcher) add(lp *runtime.Tensor, lo, hi int) error {
	s.pieces = append(s.pieces, piece{lp, lo, hi})
	s.n += hi - lo
	return nil
}

func (s *deviceStitcher) frames() int { return s.n }

func (s *deviceStitcher) result() (*runtime.Tensor, error) {
	out, err := s.backend.Alloc(runtime.F32, runtime.Shape{1, s.n, s.V})
	if err != nil {
		return nil, err
	}
	row := int64(4 * s.V)
	off := int64(0)
	for _, p := range s.pieces {
		n := int64(p.hi-p.lo) * row
		if err := s.backend.CopyDevice(out, off, p.t, int64(p.lo)*row, n); err != nil {
			_ = out.Release()
			return nil, fmt.Errorf("stitching chunks on the device: %w", err)
		}
		off += n
	}
	return out, nil
}

func (s *deviceStitcher) discard() {
	for _, p := range s.pieces {
		_ = p.t.Release()
	}
	s.pieces = nil
}
