//go:build cuda

package cuda

// Scratch collects the pool buffers that one op call uses for its own work
// (tables, scratch rows, status words) and frees them together. Freeing
// right after the call's launches are queued is safe: the pool hands a
// block out again only to work queued after them (package doc, Ordering).
// A Scratch is for one goroutine at a time; make one with
// Backend.NewScratch.
type Scratch struct {
	b    *Backend
	bufs []*Buffer
}

// NewScratch returns an empty Scratch of b.
func (b *Backend) NewScratch() *Scratch { return &Scratch{b: b} }

// Alloc returns an uninitialised buffer of at least bytes bytes, and of 8
// at least, so that an empty part still has an address.
func (s *Scratch) Alloc(bytes int64) (*Buffer, error) {
	m, err := s.b.Malloc(max(bytes, 8))
	if err == nil {
		s.bufs = append(s.bufs, m)
	}
	return m, err
}

// Upload queues a copy of src into a new buffer (see UploadBuffer).
func (s *Scratch) Upload(src []byte) (*Buffer, error) {
	m, err := s.b.UploadBuffer(src)
	if err == nil {
		s.bufs = append(s.bufs, m)
	}
	return m, err
}

// UploadParts copies the parts, each padded to a multiple of 8 bytes, into
// one new buffer with one host-to-device copy and returns the device
// address of each part.
func (s *Scratch) UploadParts(parts ...[]byte) ([]DevicePtr, error) {
	var all []byte
	offs := make([]int, len(parts))
	for i, p := range parts {
		offs[i] = len(all)
		all = append(all, p...)
		all = append(all, make([]byte, (8-len(all)%8)%8)...)
	}
	m, err := s.Upload(all)
	if err != nil {
		return nil, err
	}
	ptrs := make([]DevicePtr, len(parts))
	for i, off := range offs {
		ptrs[i] = m.Ptr() + DevicePtr(off)
	}
	return ptrs, nil
}

// Free returns every buffer to the pool; the Scratch is empty again.
func (s *Scratch) Free() {
	for _, m := range s.bufs {
		_ = m.Free()
	}
	s.bufs = nil
}

// UploadBuffer queues a copy of src into a new pool buffer of at least
// max(len(src), 8) bytes, which the caller owns (Free). src may be reused
// when it returns (HostToDevice).
func (b *Backend) UploadBuffer(src []byte) (*Buffer, error) {
	m, err := b.Malloc(int64(max(len(src), 8)))
	if err != nil {
		return nil, err
	}
	if err := b.HostToDevice(m.Ptr(), src); err != nil {
		_ = m.Free()
		return nil, err
	}
	return m, nil
}
