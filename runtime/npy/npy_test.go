package npy

import (
	"bytes"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
)

func TestRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		dt   runtime.DType
		data any
	}{
		{runtime.F32, []float32{1, -2.5, 3, 4, 5, 6}},
		{runtime.F64, []float64{1, 2, 3, 4, 5, 6}},
		{runtime.I16, []int16{-1, 2, 3, 4, 5, 6}},
		{runtime.U16, []uint16{1, 2, 3, 4, 5, 65535}},
		{runtime.I32, []int32{-1, 2, 3, 4, 5, 6}},
		{runtime.I64, []int64{-1, 2, 3, 4, 5, 1 << 40}},
		{runtime.U8, []uint8{0, 1, 2, 3, 4, 255}},
		{runtime.Bool, []bool{true, false, true, true, false, false}},
	} {
		t.Run(tc.dt.String(), func(t *testing.T) {
			in := runtime.Must(runtime.FromSlice(tc.dt, runtime.Shape{2, 3}, tc.data))
			path := filepath.Join(t.TempDir(), "x.npy")
			require.NoError(t, WriteFile(path, in))
			out, err := ReadFile(path)
			require.NoError(t, err)
			assert.Equal(t, in.DType(), out.DType())
			assert.Equal(t, in.Shape(), out.Shape())
			assert.Equal(t, in.Data(), out.Data())
		})
	}
}

// numpyHeader builds a v1.0 preamble+header as numpy writes it.
func numpyHeader(dict string) []byte {
	h := dict + "\n"
	b := append([]byte("\x93NUMPY\x01\x00"), byte(len(h)), byte(len(h)>>8))
	return append(b, h...)
}

func TestReadNumpyLayouts(t *testing.T) {
	// Big-endian int32 [2] and a scalar (shape ()).
	be := append(numpyHeader("{'descr': '>i4', 'fortran_order': False, 'shape': (2,), }"), 0, 0, 0, 1, 0, 0, 1, 0)
	x, err := Read(bytes.NewReader(be), int64(len(be)))
	require.NoError(t, err)
	assert.Equal(t, []int32{1, 256}, x.I32())
	sc := append(numpyHeader("{'descr': '<f8', 'fortran_order': False, 'shape': (), }"), 0, 0, 0, 0, 0, 0, 0xf0, 0x3f)
	x, err = Read(bytes.NewReader(sc), int64(len(sc)))
	require.NoError(t, err)
	assert.Equal(t, []float64{1}, x.F64())
	assert.Equal(t, 0, x.Rank())

	// Fortran (column-major) order: a[i, j] = 3i + j of shape (2, 3) is stored
	// a[0,0] a[1,0] a[0,1] ...; a[i, j, k] = 4i + 2j + k of (2, 2, 2) at i + 2j + 4k.
	f2 := append(numpyHeader("{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3), }"), 0, 3, 1, 4, 2, 5)
	x, err = Read(bytes.NewReader(f2), int64(len(f2)))
	require.NoError(t, err)
	assert.Equal(t, runtime.Shape{2, 3}, x.Shape())
	assert.Equal(t, []uint8{0, 1, 2, 3, 4, 5}, x.U8())
	f3 := numpyHeader("{'descr': '<i2', 'fortran_order': True, 'shape': (2, 2, 2), }")
	data := make([]byte, 16)
	for i := range 2 {
		for j := range 2 {
			for k := range 2 {
				data[2*(i+2*j+4*k)] = byte(4*i + 2*j + k)
			}
		}
	}
	f3 = append(f3, data...)
	x, err = Read(bytes.NewReader(f3), int64(len(f3)))
	require.NoError(t, err)
	assert.Equal(t, []int16{0, 1, 2, 3, 4, 5, 6, 7}, x.I16())
}

func TestReadErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "truncated preamble"},
		{"magic", []byte("PK\x03\x04zipfile"), "bad magic"},
		{"version", []byte("\x93NUMPY\x09\x00\x00\x00"), "unsupported format version 9"},
		{"header length", []byte("\x93NUMPY\x01\x00\xff\x7f{"), "header length 32767 exceeds the file"},
		{"dtype", numpyHeader("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }"), `unsupported dtype "<c8"`},
		{"fortran truncated", append(numpyHeader("{'descr': '|u1', 'fortran_order': True, 'shape': (2, 3), }"), 0, 3), "needs 6 data bytes, the file has 2"},
		{"shape", numpyHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (a,), }"), "malformed shape"},
		{"lying shape", numpyHeader("{'descr': '<f4', 'fortran_order': False, 'shape': (1000000000, 1000000000), }"), "needs 4000000000000000000 data bytes, the file has 0"},
		{"overflow", numpyHeader("{'descr': '<f8', 'fortran_order': False, 'shape': (4611686018427387904, 4), }"), "invalid shape"},
		{"no dict", numpyHeader("hello"), "malformed header"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(bytes.NewReader(tc.data), int64(len(tc.data)))
			assert.ErrorContains(t, err, tc.want)
		})
	}
}

func FuzzRead(f *testing.F) {
	var buf bytes.Buffer
	require.NoError(f, Write(&buf, runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{2}, []float32{1, 2}))))
	f.Add(buf.Bytes())
	f.Add(numpyHeader("{'descr': '<i8', 'fortran_order': False, 'shape': (3, 0), }"))
	f.Add(append(numpyHeader("{'descr': '|b1', 'fortran_order': False, 'shape': (2,), }"), 1, 0))
	f.Fuzz(func(t *testing.T, data []byte) {
		x, err := Read(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		if x.Bytes() > int64(len(data)) {
			t.Fatalf("decoded %d bytes from a %d byte file", x.Bytes(), len(data))
		}
		var out bytes.Buffer
		if err := Write(&out, x); err != nil {
			t.Fatal(err)
		}
		y, err := Read(bytes.NewReader(out.Bytes()), int64(out.Len()))
		if err != nil {
			t.Fatalf("re-reading our own output: %v", err)
		}
		assert.Equal(t, x.Data(), y.Data())
	})
}
