//go:build cuda

package cuda

// These tests run on a GPU host only (the binary is built with -tags cuda:
// make test-cuda-bin).

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/edgespeech/edge/runtime"
)

func openTest(t *testing.T) *Backend {
	t.Helper()
	b, err := Open(0)
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, b.Close()) })
	return b
}

func TestRoundTrip(t *testing.T) {
	rb, err := runtime.OpenBackend("cuda")
	require.NoError(t, err)
	defer rb.Close()
	require.NotEmpty(t, rb.Devices())
	t.Logf("devices: %+v", rb.Devices())
	for _, x := range []*runtime.Tensor{
		runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{2, 3}, []float32{1, 2, 3, 4, 5, -6})),
		runtime.Must(runtime.FromSlice(runtime.I64, runtime.Shape{2}, []int64{1 << 40, -1})),
		runtime.Must(runtime.FromSlice(runtime.U8, runtime.Shape{3}, []uint8{1, 2, 255})),
		runtime.Must(runtime.NewTensor(runtime.I32, runtime.Shape{0})),
	} {
		d, err := rb.Upload(x)
		require.NoError(t, err)
		assert.False(t, d.OnHost())
		assert.Equal(t, "cuda:0", d.Device())
		h, err := rb.Download(d)
		require.NoError(t, err)
		assert.Equal(t, x.Data(), h.Data())
		require.NoError(t, d.Buffer().Free())
		require.NoError(t, d.Buffer().Free(), "a second Free is a no-op")
	}
	z, err := rb.Alloc(runtime.F32, runtime.Shape{1024})
	require.NoError(t, err)
	h, err := rb.Download(z)
	require.NoError(t, err)
	assert.Equal(t, make([]float32, 1024), h.F32(), "Alloc zeroes memory")
	_, err = rb.Alloc(runtime.F32, runtime.Shape{-1})
	assert.ErrorContains(t, err, "negative dimension")
}

func TestSizeClass(t *testing.T) {
	for _, tc := range []struct{ n, want int64 }{
		{1, 256}, {256, 256}, {257, 512}, {1000, 1024}, {1 << 20, 1 << 20}, {1<<20 + 1, 2 << 20}, {5 << 20, 6 << 20},
	} {
		assert.Equal(t, tc.want, sizeClass(tc.n), "sizeClass(%d)", tc.n)
	}
}

func TestPoolReuse(t *testing.T) {
	b := openTest(t)
	a, err := b.Malloc(3000)
	require.NoError(t, err)
	p := a.Ptr()
	assert.Equal(t, PoolStats{InUse: 4096}, b.PoolStats())
	require.NoError(t, a.Free())
	assert.Equal(t, PoolStats{Cached: 4096}, b.PoolStats())
	c, err := b.Malloc(4000)
	require.NoError(t, err)
	assert.Equal(t, p, c.Ptr(), "a freed block of the same class is reused")
	require.NoError(t, c.Free())
	require.NoError(t, b.Trim())
	assert.Equal(t, PoolStats{}, b.PoolStats())
}

func TestStatsCountCopies(t *testing.T) {
	b := openTest(t)
	x := runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{4}, []float32{1, 2, 3, 4}))
	d, err := b.Upload(x)
	require.NoError(t, err)
	_, err = b.Download(d)
	require.NoError(t, err)
	assert.Equal(t, runtime.TransferStats{HostToDevice: 1, HostToDeviceBytes: 16, DeviceToHost: 1, DeviceToHostBytes: 16}, b.Stats())
	// A large copy grows the staging buffer.
	big := make([]float32, 3<<20)
	for i := range big {
		big[i] = float32(i)
	}
	bd, err := b.Upload(runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{len(big)}, big)))
	require.NoError(t, err)
	bh, err := b.Download(bd)
	require.NoError(t, err)
	assert.Equal(t, big, bh.F32())
}

// axpyPTX is y[i] += (float)a·x[i] for i < n, generated with
// nvcc -ptx -arch=compute_80 (the driver JIT-compiles it for any newer GPU):
//
//	struct AxpyParams { float* y; const float* x; long long n; double a; };
//	extern "C" __global__ void axpy(const __grid_constant__ AxpyParams p)
const axpyPTX = `.version 7.8
.target sm_80
.address_size 64
	// .globl	axpy
.visible .entry axpy(
	.param .align 8 .b8 axpy_param_0[32]
)
{
	.reg .pred 	%p<2>;
	.reg .f32 	%f<5>;
	.reg .b32 	%r<4>;
	.reg .f64 	%fd<2>;
	.reg .b64 	%rd<14>;
	mov.b64 	%rd3, axpy_param_0;
	mov.u64 	%rd2, %rd3;
	mov.u32 	%r1, %ctaid.x;
	mov.u32 	%r2, %ntid.x;
	mul.wide.u32 	%rd4, %r1, %r2;
	mov.u32 	%r3, %tid.x;
	cvt.u64.u32 	%rd5, %r3;
	add.s64 	%rd1, %rd4, %rd5;
	ld.param.u64 	%rd6, [axpy_param_0+16];
	setp.ge.s64 	%p1, %rd1, %rd6;
	@%p1 bra 	$L__BB0_2;
	ld.param.f64 	%fd1, [%rd2+24];
	cvt.rn.f32.f64 	%f1, %fd1;
	ld.param.u64 	%rd7, [%rd2+8];
	cvta.to.global.u64 	%rd8, %rd7;
	shl.b64 	%rd9, %rd1, 2;
	add.s64 	%rd10, %rd8, %rd9;
	ld.global.f32 	%f2, [%rd10];
	ld.param.u64 	%rd11, [%rd2];
	cvta.to.global.u64 	%rd12, %rd11;
	add.s64 	%rd13, %rd12, %rd9;
	ld.global.f32 	%f3, [%rd13];
	fma.rn.f32 	%f4, %f2, %f1, %f3;
	st.global.f32 	[%rd13], %f4;
$L__BB0_2:
	ret;
}
`

// axpyKernel loads axpyPTX on b and returns its kernel.
func axpyKernel(t *testing.T, b *Backend) *Kernel {
	t.Helper()
	m, err := b.Module("axpy", []byte(axpyPTX))
	require.NoError(t, err)
	k, err := m.Kernel("axpy")
	require.NoError(t, err)
	return k
}

// axpyParams mirrors the C struct AxpyParams of axpyPTX.
type axpyParams struct {
	Y, X uint64
	N    int64
	A    float64
}

func TestKernelLaunch(t *testing.T) {
	b := openTest(t)
	m, err := b.Module("axpy", []byte(axpyPTX))
	require.NoError(t, err)
	m2, err := b.Module("axpy", nil)
	require.NoError(t, err)
	assert.Same(t, m, m2, "modules are cached by name")
	k, err := m.Kernel("axpy")
	require.NoError(t, err)
	_, err = m.Kernel("nope")
	assert.ErrorContains(t, err, "kernel nope")

	const n = 1000
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(i), 1
	}
	xd, err := b.Upload(runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{n}, x)))
	require.NoError(t, err)
	yd, err := b.Upload(runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{n}, y)))
	require.NoError(t, err)
	yp, _ := Ptr(yd)
	xp, _ := Ptr(xd)
	p := &axpyParams{Y: uint64(yp), X: uint64(xp), N: n, A: 0.5}
	elapsed, err := b.Time(func() error { return k.Launch(Dim3{(n + 127) / 128, 1, 1}, Dim3{128, 1, 1}, 0, p) })
	require.NoError(t, err)
	assert.Positive(t, elapsed)
	got, err := b.Download(yd)
	require.NoError(t, err)
	for i, v := range got.F32() {
		require.Equal(t, 1+0.5*float32(i), v, "y[%d]", i)
	}

	assert.ErrorContains(t, k.Launch(Dim3{0, 1, 1}, Dim3{1, 1, 1}, 0, p), "every dimension must be >= 1")
	assert.ErrorContains(t, k.Launch(Dim3{1, 1, 1}, Dim3{4096, 1, 1}, 0, p), "launching axpy")
	_, err = b.Module("garbage", []byte("not a module"))
	assert.ErrorContains(t, err, "loading module garbage")
}

// TestConcurrentUse runs uploads, kernels and downloads from many
// goroutines at once (run with -race).
func TestConcurrentUse(t *testing.T) {
	b := openTest(t)
	k := axpyKernel(t, b)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for g := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range 20 {
				n := 100 + 37*g + it
				x := make([]float32, n)
				for i := range x {
					x[i] = float32(g*1000 + i)
				}
				d, err := b.Upload(runtime.Must(runtime.FromSlice(runtime.F32, runtime.Shape{n}, x)))
				if err != nil {
					errs[g] = err
					return
				}
				p, _ := Ptr(d)
				ap := &axpyParams{Y: uint64(p), X: uint64(p), N: int64(n), A: 1}
				if err := k.Launch(Dim3{(n + 127) / 128, 1, 1}, Dim3{128, 1, 1}, 0, ap); err != nil {
					errs[g] = err
					return
				}
				h, err := b.Download(d)
				if err != nil {
					errs[g] = err
					return
				}
				for i, v := range h.F32() {
					if v != 2*x[i] {
						errs[g] = fmt.Errorf("goroutine %d iteration %d: y[%d] = %v, want %v", g, it, i, v, 2*x[i])
						return
					}
				}
				_ = d.Buffer().Free()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		require.NoError(t, err)
	}
}
