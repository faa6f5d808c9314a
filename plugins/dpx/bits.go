package dpx

// bits2 is a matrix of 2-bit values (backpointers 0, 1 or 2), rows of
// words uint64 each: element s of a row lives in word s/32 at bit 2*(s%32).
type bits2 struct {
	words int
	data  []uint64
}

// reset shapes m to rows x width, reusing its memory when large enough.
// Contents are unspecified; writers fill what readers read.
func (m *bits2) reset(rows, width int) {
	m.words = (width + 31) / 32
	n := rows * m.words
	if cap(m.data) < n {
		m.data = make([]uint64, n)
	}
	m.data = m.data[:n]
}

// row returns row r.
func (m *bits2) row(r int) []uint64 { return m.data[r*m.words : (r+1)*m.words] }

// get2 returns element s of a row.
func get2(row []uint64, s int) int { return int(row[s>>5]>>(uint(s&31)*2)) & 3 }

// set2 stores v (0..3) as element s of a row.
func set2(row []uint64, s int, v uint64) {
	sh := uint(s&31) * 2
	w := &row[s>>5]
	*w = *w&^(3<<sh) | v<<sh
}

// planes is a matrix of 2-bit values stored as two bit planes per row
// (the layout the AVX2 kernel writes with one VMOVMSKPS per plane and
// 8 states): bit s%8 of byte s/8 of plane 0 is bit 0 of element s, plane 1
// holds bit 1. A row is plane 0 then plane 1, nb bytes each.
type planes struct {
	nb   int
	data []byte
}

// reset shapes m to rows x width (plus 8 states of padding for the vector
// kernel's last block), reusing its memory when large enough.
func (m *planes) reset(rows, width int) {
	m.nb = (width+8)/8 + 1
	n := rows * 2 * m.nb
	if cap(m.data) < n {
		m.data = make([]byte, n)
	}
	m.data = m.data[:n]
}

// row returns row r (both planes).
func (m *planes) row(r int) []byte { return m.data[r*2*m.nb : (r+1)*2*m.nb] }

// get returns element s of a row.
func (m *planes) get(row []byte, s int) int {
	sh := uint(s & 7)
	return int(row[s>>3]>>sh&1 | (row[m.nb+s>>3]>>sh&1)<<1)
}

// planesRowBytes is the memory of one row of width states.
func planesRowBytes(width int) int64 { return int64(2 * ((width+8)/8 + 1)) }
