// rvq.cu: greedy residual vector quantisation, the GPU side of the
// `rvq_encode` and `rvq_decode` ops (plugins/rvq, launched by
// plugins/rvq/device_cuda.go). The CPU op of plugins/rvq is the reference: codes
// are identical to it (exact), quantized bit-identical whenever the codes
// agree (same fp32 subtractions and additions in the same order).
//
// # Data layout (prepared once by the Go side, rvq.DeviceCodebooks)
//
//   words  bf16 [rowsPad][Dp]: stage q's K_q codewords start at row off_q;
//          every stage is padded with zero rows to a multiple of kRowAlign
//          and every row with zeros to Dp = roundup(D, 64) columns.
//   hn     f32  [rowsPad]: ||C_e||^2 / 2 exactly as the CPU computes it
//          (sequential fp32 sum of squares, halved), 2^120 on padding rows,
//          so a padding entry never wins.
//   meta   i32  [Q][4]: off_q (row), K_q, bits of cmax_q = max_e ||C_e||
//          (fp32, rounded up), unused.
//
// x f32 [B*T][D], codes i32 [B*T][Q], quantized f32 [B*T][D]; frame t of
// item b is row b*T+t and is valid when t < lengths[b] (lengths i32 [B], or
// null: every frame valid). Padding rows get code -1 and quantized 0.
// Each kernel takes one parameter struct of params.h (Rvq*Params), read in
// place from the parameter space (__grid_constant__).
//
// # The fused encoder (rvq_encode_*: mma.sync m16n8k16 bf16, fp32 accumulate)
//
// Grid: one CTA per BM consecutive rows; block: WM x WN warps. The CTA runs
// every stage of every chain for its rows. The fp32 residual rows live in
// shared memory (variants "r") or in the CTA's own global scratch rows
// (L2-resident, read and written once per stage by the same CTA).
//
//   * A operand: the residual rounded to bf16 (RN) in shared memory,
//     k-chunk-major [Dp/64][BM][64] with the 128-byte XOR swizzle
//     (conflict-free ldmatrix.x4), rebuilt in the update phase of every
//     stage.
//   * B operand: the stage's codebook streamed in N-tiles of BN codewords x
//     BK = 64 dimensions (128-byte rows, same swizzle) through an S-deep
//     cp.async ring; the ring runs over the flattened sequence of (stage,
//     N-tile, k-chunk) of the whole chain, so the next stage's tiles are in
//     flight while the current stage's argmin is decided (no refill bubble).
//     The N-tile's hn slice (BN floats) rides in the same ring slot.
//   * Warp tile: (BM/WM) x (BN/WN) = MT m16-tiles x NT n8-tiles, MT*NT*4
//     fp32 accumulators per thread; per k16 step MT + NT/2 ldmatrix.x4 feed
//     MT*NT mma.
//   * Epilogue per N-tile, in registers: s = hn_e - acc (the CPU's score,
//     ||C_e||^2/2 - dot, ordered like ||r - C_e||^2), folded into a running
//     (best | argbest in the low 12 bits, second) per row (struct Best): a
//     sub, one LOP3 (the entry's bits: a per-tile register and a constant
//     per accumulator, see Best::addAt) and three min/max a score.
//   * End of stage: merge the running pairs over the quad's lanes
//     (shuffles) and over the WN warps sharing a row (shared memory).
//     Near-tie guard: the bf16 A operand and the tensor-core accumulation
//     move each score away from the CPU's by at most
//        |r| |C_e| (2^-8 + 2 Dp 2^-23)
//     (bf16 RN of r: |bf16(r) - r| <= 2^-8 |r|, Cauchy-Schwarz; the fp32
//     sums of Dp terms on either side), so when
//        second - best > |r| cmax (2^-7 + Dp 2^-20) + Dp 2^-120
//                        + slack (|best| + |second|)
//     (two scores' bounds, the accumulation term with 2x slack, subnormal
//     flushing, the fp32 rounding of the scores and, for the packed
//     minimum, its truncation) the winner is the CPU's winner. Otherwise the row is re-scored exactly: one warp
//     computes every entry's score with the CPU's formula (dot: fmaf over
//     d = 0..D-1 from +0, score = hn - dot) and takes the lowest (score,
//     index): the CPU's answer bit for bit.
//   * Update: warp w owns rows [w*RW, (w+1)*RW) (RW = BM / warps): after
//     re-scoring its near ties it applies r -= C_j (fp32, elementwise, the
//     CPU's operation) to all its rows with 16-byte codeword chunks, kU per
//     lane in flight (2 kU with the residual in shared memory), writing r to
//     its residual rows and bf16(r) to the A tile, ||r||^2 by segmented
//     shuffles (addRowNorm; shared-memory atomics when a row's chunks do not
//     divide a warp); lane-parallel code stores.
//     (The AW kernels, whose row width is compiled in, issue a pass's
//     loads without branches and sum ||r||^2 by one reduce-scatter of
//     shuffles, rowSums: the stage end is a latency chain, not a
//     throughput one.)
//   * quantized is written once at the end from the codes (writeQuantized):
//     each chain's codewords summed in stage order from +0, the second
//     chain's sum added to the first's, as the CPU does.
//
// Shared memory: BM*Dp*2 (A) + S*(BN*64*2 + BN*4) (ring) + WN*BM*12
// (partials) + BM*12 (||r||, ||r||^2, decisions) + 16*S (ring barriers)
// [+ BM*Dp*4 (residual)] [+ kMaxQ*BM*2 + kMaxQ*8 + 512 (codes, stage
// table and gather barriers: the AW kernels only)]; e.g. 106 KiB for
// m128n128w24s4p at D = 128, 170 KiB with the residual (an r tiling).
// Registers: MT*NT*4 accumulators + 4*MT + 2*NT fragment registers + 2 or 3
// per running minimum (2*MT rows a thread); ptxas -v figures are in the
// fatbin's ptxas.log (see docs/bench/rvq_gpu.md).
//
// # The asynchronous variants (rvq_encode_wa_*_d<Dp>; sm_90a)
//
// Grid: one CTA per 128 rows; block: 384 threads = two compute warpgroups
// (warpgroup g owns rows [64g, 64g+64), warp w of it rows 16w..16w+15) and
// one producer warpgroup. One CTA an SM (shared memory: 32 KiB A + S x
// 16.5 KiB ring at D = 128, e.g. 142 KiB for s6, 206 KiB for s6pwra;
// registers: 384 threads start with 168 each, then setmaxnreg gives the
// producer warpgroup 40 and the compute warpgroups 232: the 2 x 64 fp32
// accumulators, the running minima and (a variants) the A fragments fit;
// ptxas.log has the figures).
//
//   * Producer: lane 0 of its first warp streams every (stage, N-tile,
//     k-chunk) load through the S-slot bulk-copy ring (full/empty
//     mbarriers), never waiting on decisions; the other warps exit.
//   * Compute: per stage, N-tile t's wgmma (m64n128k16 or m64n64k16, A =
//     the warpgroup's 64 bf16 residual rows, B = the ring slots, fp32
//     accumulate) goes into one of two accumulator sets while the warps
//     fold tile t-1's scores from the other (wgmma.wait_group 1): the
//     tensor cores and the epilogue overlap within a warpgroup, and the two
//     warpgroups interleave freely. A tile keeps its AK = Dp/64 slots from
//     its wgmma until its fold (hn rides in them): S >= 2 AK.
//   * What ptxas needs to keep the wgmma asynchronous (checked in
//     ptxas.log: no C7510-C7520 "serialized" remark for these kernels):
//     a tile's AK x 4 wgmma in one basic block (all its barrier waits
//     first; AK is compiled in, hence one kernel per padded width), its
//     first wgmma writing the accumulators without reading them (so they
//     are dead, not spilled, during the stage-end update), and no trap in
//     the compute path (it makes ptxas ignore the setmaxnreg budget).
//   * a variants: the warp's A fragments (16 rows x Dp, mma.sync's A
//     layout) are loaded once a stage into registers (ldmatrix) and the
//     wgmma read A from there: the tensor cores read only B from shared
//     memory.
//   * g variant (D = 256; the templates keep it, no kernel of it is
//     instantiated): no A tile. The stage end's update runs k-chunk
//     by k-chunk and puts each chunk's bf16 rows through a 2 KiB staging
//     tile a warp into the next stage's A fragments (ldmatrix); the
//     chain's first stage loads them from the fp32 residual in global
//     scratch. The 48 KiB saved let the ring hold 12 slots of 128
//     codewords (N-tiles of 128 at D = 256, a whole tile loading while two
//     are held): 226 KiB (231360 bytes) in all. The chain's last stage
//     skips the update (no later stage reads it) and stores its codes.
//   * f variant (D = 256): the fp32 residual itself is split bitwise: its
//     high halves (the bf16 truncation of r) are the A fragments in
//     registers, its low halves (64 KiB a CTA) in the CTA's global scratch
//     rows, and the tiles' dimensions are permuted (device_layout.go's fragDim)
//     so that each lane's fragment elements at a k16 step are four
//     consecutive dimensions of its two rows, and a lane's 16-byte pieces
//     of a row interleave with its quad's (a warp's load touches one line
//     a row). The chain start loads x straight into that layout (a lane's
//     32 loads in flight at once) and the update is in place: a lane's 16
//     codeword loads and 16 low-half loads in flight at once, no staging,
//     no conversion, and the stores are not waited for. No A tile and no
//     staging tiles: a ring of 13 slots (two tiles held, five slots
//     loading): 226 KiB (231888 bytes).
//     The guard's bf16 term is that of a truncation, 2^-7 |r| |C_e| a
//     score; an exact re-score reads the row, rejoined, from a warp's
//     scratch row after the low halves.
//   * Stage end, guard, exact re-score, update: as above (warp-local; a
//     warpgroup barrier before the next stage's wgmma).
//   * quantized (writeQuantizedGather): every stage's codes are kept in
//     shared memory; after the chains each warp brings its rows' codewords
//     stage by stage into buffers (A's, or g's and f's none, and the then
//     idle ring's shared memory) with bulk copies, several stages in flight,
//     and sums them as writeQuantized does. Scattered 16-byte loads through
//     the load/store unit reach only ~10 bytes a cycle an SM here (misses in
//     flight); the bulk copies need no registers and about halve that
//     phase. The sums leave the same way: staged as fp32 rows in the
//     warp's parts of two buffers, one bulk copy a row to quantized.
//   * Numerics: the other fused variants' (same running minima, same
//     guard; f's scores differ by its truncated A and its dimension order,
//     within its bound): codes equal to the CPU op.
//
// # The small-batch path (rvq_small_score / rvq_small_update)
//
// For a handful of frames (streaming) the fused kernel would occupy a few
// SMs; instead each stage is split across CTAs: rvq_small_score (grid:
// entry chunks x rows) scores every entry exactly (the CPU formula, fp32)
// and merges (score, index) into a per-row 64-bit key with atomicMin
// (order-preserving score bits << 32 | index: the lowest score, then the
// lowest index); rvq_small_update applies the winner. Exact by
// construction, no guard needed.
#include <cooperative_groups.h>
#include <cuda_bf16.h>
#include <stdint.h>

#include "params.h"

namespace rvqk {

constexpr int kBK = 64;        // k-chunk (dimensions) of one ring slot
constexpr int kU = 4;          // update: 16-byte chunks in flight per lane
constexpr unsigned kFull = 0xffffffffu;

// bf16x2 packs lo and hi rounded to bf16 (to nearest, even), lo in the low
// half: the A operand's element order.
__device__ __forceinline__ uint32_t bf16x2(float lo, float hi) {
  __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&h);
}

// hiHalves and loHalves split fp32 values a and b bitwise: their high 16
// bits (bf16 truncations, the f kernel's A operand) or their low 16 bits,
// a's in the low half either way. joinLo and joinHi put them back together:
// the fp32 value of the low (joinLo) or high (joinHi) halves of hi and lo.
__device__ __forceinline__ uint32_t hiHalves(float a, float b) {
  return __byte_perm(__float_as_uint(a), __float_as_uint(b), 0x7632);
}
__device__ __forceinline__ uint32_t loHalves(float a, float b) {
  return __byte_perm(__float_as_uint(a), __float_as_uint(b), 0x5410);
}
__device__ __forceinline__ float joinLo(uint32_t hi, uint32_t lo) { return __uint_as_float(__byte_perm(lo, hi, 0x5410)); }
__device__ __forceinline__ float joinHi(uint32_t hi, uint32_t lo) { return __uint_as_float(__byte_perm(lo, hi, 0x7632)); }

// fragDim0 is the first of the four consecutive dimensions that lane
// (g, t) of the f kernel holds at k16 step s (device_layout.go's fragDim): lane t
// has the 16-byte pieces t of every 64-byte group of a row, steps 2m and
// 2m + 1 in piece t of group m, so that a warp's loads of its rows touch
// one 128-byte line a row an instruction.
__device__ __forceinline__ constexpr int fragDim0(int s, int t) { return 32 * (s / 2) + 8 * t + 4 * (s % 2); }

__device__ __forceinline__ bool rowValid(long long row, long long T, const int* lengths) {
  if (lengths == nullptr) return true;
  long long b = row / T, t = row - b * T;
  return t < lengths[b];
}

// swz is the byte offset of 16-byte chunk c (8 bf16) of row r in a tile of
// 128-byte rows (64 bf16): chunks XOR-swizzled by r & 7 (the Hopper 128-byte
// swizzle: conflict-free ldmatrix, and the canonical layout of wgmma's
// shared-memory operands in 1024-byte aligned 8-row atoms).
__device__ __forceinline__ uint32_t swz(int r, int c) { return r * 128 + ((c ^ r) & 7) * 16; }

// aOff is the byte offset of chunk c (dimensions 8c..8c+7) of row r in the
// A tile: k-chunk-major, [Dp/64][BM][64] bf16, each k-chunk a swizzled tile.
template <int BM>
__device__ __forceinline__ uint32_t aOff(int r, int c) { return (c >> 3) * (BM * 128) + swz(r, c & 7); }

__device__ __forceinline__ uint32_t smemAddr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void cpAsync16(uint32_t dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(dst), "l"(src));
}
__device__ __forceinline__ void cpCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void cpWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

__device__ __forceinline__ void ldsm4(uint32_t addr, uint32_t& a, uint32_t& b, uint32_t& c, uint32_t& d) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(a), "=r"(b), "=r"(c), "=r"(d)
               : "r"(addr));
}

__device__ __forceinline__ void mma16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
      "{%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// namedBarrier synchronises the n threads (a multiple of 32) that use
// barrier id (1..15; 0 is __syncthreads).
__device__ __forceinline__ void namedBarrier(int id, int n) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory");
}

__device__ __forceinline__ float bf(uint16_t v) { return __uint_as_float(static_cast<uint32_t>(v) << 16); }

// bf8 unpacks 8 bf16 (16 bytes of a codeword row: the low half of w.x
// first) into f[0..7], exactly.
__device__ __forceinline__ void bf8(uint4 w, float (&f)[8]) {
  const uint32_t w4[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
  for (int v = 0; v < 4; v++) {
    f[2 * v] = __uint_as_float(w4[v] << 16);
    f[2 * v + 1] = __uint_as_float(w4[v] & 0xffff0000u);
  }
}

// subChunk is one 16-byte chunk of the update: r = rv - C (cw: the chunk of
// the codeword, 8 bf16), h = r's bf16 pairs (bf16x2); it returns the
// chunk's ||r||^2 as (s0 + s1) + (s2 + s3), s_v = r_2v^2 + r_2v+1^2.
__device__ __forceinline__ float subChunk(const float (&rv)[8], uint4 cw, float (&r)[8], uint32_t (&h)[4]) {
  float cv[8], s2[4];
  bf8(cw, cv);
#pragma unroll
  for (int v = 0; v < 4; v++) {
    r[2 * v] = rv[2 * v] - cv[2 * v];
    r[2 * v + 1] = rv[2 * v + 1] - cv[2 * v + 1];
    s2[v] = r[2 * v] * r[2 * v] + r[2 * v + 1] * r[2 * v + 1];
    h[v] = bf16x2(r[2 * v], r[2 * v + 1]);
  }
  return (s2[0] + s2[1]) + (s2[2] + s2[3]);
}

// RVQ_HAVE_WGMMA: the wg variants issue wgmma (sm_90a; -DRVQ_NO_WGMMA
// builds them on mma.sync, for comparisons).
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) && !defined(RVQ_NO_WGMMA)
#define RVQ_HAVE_WGMMA 1
#else
#define RVQ_HAVE_WGMMA 0
#endif

// RVQ_BULK: Hopper builds stream the codebook with bulk async copies
// (cp.async.bulk, completing on mbarriers) from a pre-swizzled tile layout,
// and the ring needs no block-wide barrier per step; other targets (nvcc
// < 12, which cannot assemble them, and -DRVQ_NO_BULK builds) use the
// cp.async ring.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && __CUDA_ARCH__ < 1000 && !defined(RVQ_NO_BULK) && \
    (defined(RVQ_FORCE_BULK) || __CUDACC_VER_MAJOR__ >= 12)
#define RVQ_BULK 1
#else
#define RVQ_BULK 0
#endif

#if RVQ_BULK
__device__ __forceinline__ void mbarInit(uint32_t a, int count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;\n" ::"r"(a), "r"(count) : "memory");
}
__device__ __forceinline__ void mbarExpectTx(uint32_t a, int bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;\n" ::"r"(a), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbarArrive(uint32_t a) {
  asm volatile("mbarrier.arrive.shared.b64 _, [%0];\n" ::"r"(a) : "memory");
}
// mbarWait spins until the barrier's phase with the given parity completed.
__device__ __forceinline__ void mbarWait(uint32_t a, int parity) {
  asm volatile(
      "{\n.reg .pred P1;\nLAB_WAIT:\n"
      "mbarrier.try_wait.parity.shared.b64 P1, [%0], %1;\n"
      "@P1 bra DONE;\nbra LAB_WAIT;\nDONE:\n}\n" ::"r"(a),
      "r"(parity)
      : "memory");
}
// bulkCopy copies bytes (a multiple of 16, both addresses 16-byte aligned)
// from global memory to shared memory, completing on the mbarrier.
__device__ __forceinline__ void bulkCopy(uint32_t dst, const void* src, int bytes, uint32_t mbar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(mbar)
               : "memory");
}
// bulkStore copies bytes (a multiple of 16; both addresses 16-byte aligned)
// from shared memory to global memory in the background (a bulk group of
// the calling thread); bulkStoreRead waits until the thread's bulk stores
// have read their shared memory (which may then be reused, or the CTA end).
__device__ __forceinline__ void bulkStore(void* dst, uint32_t src, int bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(dst), "r"(src), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
__device__ __forceinline__ void bulkStoreRead() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ __forceinline__ void stShared4(uint32_t a, float x, float y, float z, float w) {
  asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"r"(a), "f"(x), "f"(y), "f"(z), "f"(w) : "memory");
}
#endif

#if RVQ_BULK
// releaseSlot: the warp is done with the ring slot whose empty mbarrier is
// at a (its lane 0 calls this).
__device__ __forceinline__ void releaseSlot(uint32_t a) { mbarArrive(a); }
#endif

// Pipe counts the ring's loads across the chains of a launch: cons is the
// next load the CTA consumes (slot cons % S, mbarrier parity (cons / S) & 1),
// prod the next load thread 0 issues (bulk path).
struct Pipe {
  int cons = 0, prod = 0;
};

// wgDesc is the wgmma shared-memory matrix descriptor of a K-major tile of
// 128-byte rows with the 128-byte swizzle (8-row atoms of 1024 bytes, atom
// stride 1024 B) starting at shared address saddr: start >> 4 in bits 0-13,
// leading byte offset (unused for swizzled K-major: 1) in 16-29, stride byte
// offset >> 4 in 32-45, layout SWIZZLE_128B (1) in 62-63. Advancing k by 16
// bf16 inside the 128-byte row adds 32 bytes to the start address.
__device__ __forceinline__ uint64_t wgDesc(uint32_t saddr) {
  return static_cast<uint64_t>((saddr & 0x3FFFF) >> 4) | (static_cast<uint64_t>(1) << 16) |
         (static_cast<uint64_t>(1024 >> 4) << 32) | (static_cast<uint64_t>(1) << 62);
}

#if RVQ_HAVE_WGMMA
// RVQ_ACC<n> lists the accumulator operands d[0..n/4-1][0..3] of a wgmma
// with constraint C ("+f": accumulate into d, "=f": overwrite d).
#define RVQ_ACC4(C, d, n) C(d[n][0]), C(d[n][1]), C(d[n][2]), C(d[n][3])
#define RVQ_ACC32(C, d, b)                                                                                   \
  RVQ_ACC4(C, d, b + 0), RVQ_ACC4(C, d, b + 1), RVQ_ACC4(C, d, b + 2), RVQ_ACC4(C, d, b + 3),               \
      RVQ_ACC4(C, d, b + 4), RVQ_ACC4(C, d, b + 5), RVQ_ACC4(C, d, b + 6), RVQ_ACC4(C, d, b + 7)
#define RVQ_REGS32                                                                                           \
  "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, " \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31"
#define RVQ_REGS64                                                                                            \
  RVQ_REGS32 ", %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, " \
             "%51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
// wgmma64x128 issues D(64x128, f32) = A(64x16, bf16, smem) * B(16x128, bf16,
// smem K-major) + (scaleD ? D : 0) for the calling warpgroup. d[n][v] is the
// mma.sync m16n8 accumulator layout of n8 tile n for the warp's 16 rows.
// wgmma64x128z is the same with scaleD = 0 and d an output only, so that
// the accumulators are dead (free registers) between a fold and the next
// tile's first wgmma.
__device__ __forceinline__ void wgmma64x128(float (&d)[16][4], uint64_t da, uint64_t db, int scaleD) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" RVQ_REGS64 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
               : RVQ_ACC32("+f", d, 0), RVQ_ACC32("+f", d, 8)
               : "l"(da), "l"(db), "r"(scaleD));
}
__device__ __forceinline__ void wgmma64x128z(float (&d)[16][4], uint64_t da, uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" RVQ_REGS64 "}, %64, %65, p, 1, 1, 0, 0;\n}\n"
               : RVQ_ACC32("=f", d, 0), RVQ_ACC32("=f", d, 8)
               : "l"(da), "l"(db), "r"(0));
}
// wgmma64x64[z]: the same for 64 codewords (B 16x64).
__device__ __forceinline__ void wgmma64x64(float (&d)[8][4], uint64_t da, uint64_t db, int scaleD) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" RVQ_REGS32 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
               : RVQ_ACC32("+f", d, 0)
               : "l"(da), "l"(db), "r"(scaleD));
}
__device__ __forceinline__ void wgmma64x64z(float (&d)[8][4], uint64_t da, uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" RVQ_REGS32 "}, %32, %33, p, 1, 1, 0, 0;\n}\n"
               : RVQ_ACC32("=f", d, 0)
               : "l"(da), "l"(db), "r"(0));
}
// wgmma64x128r[z] / wgmma64x64r[z]: A from registers (a: the warp's m16k16
// fragment in mma.sync's A layout, 4 x bf16x2), B from its descriptor.
__device__ __forceinline__ void wgmma64x128r(float (&d)[16][4], const uint32_t (&a)[4], uint64_t db, int scaleD) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" RVQ_REGS64 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
               : RVQ_ACC32("+f", d, 0), RVQ_ACC32("+f", d, 8)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scaleD));
}
__device__ __forceinline__ void wgmma64x128rz(float (&d)[16][4], const uint32_t (&a)[4], uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {" RVQ_REGS64 "}, {%64, %65, %66, %67}, %68, p, 1, 1, 0;\n}\n"
               : RVQ_ACC32("=f", d, 0), RVQ_ACC32("=f", d, 8)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(0));
}
__device__ __forceinline__ void wgmma64x64r(float (&d)[8][4], const uint32_t (&a)[4], uint64_t db, int scaleD) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" RVQ_REGS32 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
               : RVQ_ACC32("+f", d, 0)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(scaleD));
}
__device__ __forceinline__ void wgmma64x64rz(float (&d)[8][4], const uint32_t (&a)[4], uint64_t db) {
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {" RVQ_REGS32 "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n}\n"
               : RVQ_ACC32("=f", d, 0)
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(0));
}
template <int BN>
__device__ __forceinline__ void wgmmaTileR(float (&d)[BN / 8][4], const uint32_t (&a)[4], uint64_t db, int scaleD) {
  if constexpr (BN == 128)
    wgmma64x128r(d, a, db, scaleD);
  else
    wgmma64x64r(d, a, db, scaleD);
}
template <int BN>
__device__ __forceinline__ void wgmmaTileRZ(float (&d)[BN / 8][4], const uint32_t (&a)[4], uint64_t db) {
  if constexpr (BN == 128)
    wgmma64x128rz(d, a, db);
  else
    wgmma64x64rz(d, a, db);
}

// wgmmaTile issues the BN-codeword wgmma (BN = 64 or 128) of one k16 step;
// wgmmaTileZ the first one of a tile (overwrites d).
template <int BN>
__device__ __forceinline__ void wgmmaTile(float (&d)[BN / 8][4], uint64_t da, uint64_t db, int scaleD) {
  if constexpr (BN == 128)
    wgmma64x128(d, da, db, scaleD);
  else
    wgmma64x64(d, da, db, scaleD);
}
template <int BN>
__device__ __forceinline__ void wgmmaTileZ(float (&d)[BN / 8][4], uint64_t da, uint64_t db) {
  if constexpr (BN == 128)
    wgmma64x128z(d, da, db);
  else
    wgmma64x64z(d, da, db);
}
__device__ __forceinline__ void wgFence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgCommit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgWait0() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
__device__ __forceinline__ void wgWait1() { asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory"); }
__device__ __forceinline__ void proxyFence() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
// regsDec / regsInc set the calling warpgroup's registers a thread
// (setmaxnreg; a multiple of 8 in 24..256; every warp of the warpgroup
// executes it). kProducerRegs + 2 * kComputeRegs = 504 registers a thread
// across one producer and two compute warpgroups: the 168 x 3 they start
// with (__launch_bounds__(384, 1)).
constexpr int kProducerRegs = 40, kComputeRegs = 232;
template <int N>
__device__ __forceinline__ void regsDec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N));
}
template <int N>
__device__ __forceinline__ void regsInc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N));
}
// fenceAcc pins the accumulators of an asynchronous wgmma in program order:
// the compiler may not move their reads or writes across it (no
// instruction is emitted).
template <int M, int N>
__device__ __forceinline__ void fenceAcc(float (&d)[M][N][4]) {
#pragma unroll
  for (int m = 0; m < M; m++)
#pragma unroll
    for (int n = 0; n < N; n++)
#pragma unroll
      for (int v = 0; v < 4; v++) asm volatile("" : "+f"(d[m][n][v])::"memory");
}
#endif

// Best is a running (best, second) pair of scores with the best one's entry
// index in its low 12 bits (K <= 4096): 5 instructions a score (sub, or-in
// the index, three min/max) instead of a compare and selects. Truncating 12
// of the 23 mantissa bits moves a score by less than 2^-10 of its magnitude,
// which the guard adds to its bound (kSlack, together with the fp32 rounding
// of hn - dot on either side); equal packed scores cannot occur, and a
// near or exact tie is always re-scored exactly.
struct Best {
  float b1, b2;
  static constexpr float kSlack = 0x1p-9f + 0x1p-22f;  // truncation (2x slack) + fp32 rounding
  __device__ __forceinline__ void init() {
    b1 = INFINITY;
    b2 = INFINITY;
  }
  // addAt adds score s of entry e = hi | lo, where hi (the N-tile's and the
  // lane's part) and lo (the register's part, a constant after unrolling)
  // have no bit in common and e < 4096: one LOP3 packs s with e, given
  // hiM = hi | 0xFFFFF000 and loM = lo | 0xFFFFF000 (bitwise: where both
  // are 1, the score's bit; elsewhere hi | lo).
  __device__ __forceinline__ void addAt(float s, uint32_t hiM, uint32_t loM) {
    uint32_t sp;
    asm("lop3.b32 %0, %1, %2, %3, 0xE6;" : "=r"(sp) : "r"(__float_as_uint(s)), "r"(loM), "r"(hiM));
    addPacked(__uint_as_float(sp));
  }
  __device__ __forceinline__ void addPacked(float sp) {
    b2 = fminf(b2, fmaxf(sp, b1));
    b1 = fminf(b1, sp);
  }
  __device__ __forceinline__ void merge(float o1, float o2, int) {
    b2 = fminf(fminf(b2, o2), fmaxf(b1, o1));
    b1 = fminf(b1, o1);
  }
  __device__ __forceinline__ int idx() const { return __float_as_int(b1) & 0xFFF; }
};

// addRowNorm adds the lanes' partial squared norms ss to rnorm2[i] for the
// row i of each lane's 8-value chunk c = base + lane (base a multiple of 32,
// cpr chunks a row, rows starting at multiples of cpr): a segmented shuffle
// sum when cpr divides 32 or 32 divides cpr (rows never straddle a segment;
// each row is owned by one warp, so a plain add by the segment's first lane
// is safe), shared atomics otherwise. All lanes must call it (ss = 0 and
// i < 0 for lanes without a chunk).
__device__ __forceinline__ void addRowNorm(float* rnorm2, int i, float ss, int cpr, int lane) {
  if (cpr % 32 == 0 || 32 % cpr == 0) {
    const int seg = cpr < 32 ? cpr : 32;
    for (int o = 1; o < seg; o <<= 1) ss += __shfl_xor_sync(kFull, ss, o);
    if (lane % seg == 0 && i >= 0) rnorm2[i] += ss;
  } else if (i >= 0) {
    atomicAdd(&rnorm2[i], ss);
  }
}

// rowSums reduce-scatters N per-lane partial sums over segments of SEG
// lanes (N <= SEG, both powers of two): v[u] is this lane's part of row
// group u; each halving round keeps half of the groups and adds the
// partner's half, the last rounds add whole sums. A lane returns the whole
// segment's sum of group u (set here); the SEG/N lanes of a segment whose
// low bits differ hold the same one. log2(SEG) rounds of N - 1 +
// log2(SEG/N) shuffles in all, instead of N log2(SEG) for N plain sums.
template <int N, int SEG>
__device__ __forceinline__ float rowSums(float (&v)[N], int lane, int& u) {
  static_assert(N <= SEG && SEG <= 32 && (N & (N - 1)) == 0 && (SEG & (SEG - 1)) == 0, "rowSums shape");
  u = 0;
#pragma unroll
  for (int o = SEG / 2, n = N; o >= 1; o >>= 1) {
    if (n > 1) {
      const int h = n / 2;
      const bool up = (lane & o) != 0;
#pragma unroll
      for (int j = 0; j < h; j++) {
        const float send = up ? v[j] : v[j + h], keep = up ? v[j + h] : v[j];
        v[j] = keep + __shfl_xor_sync(kFull, send, o);
      }
      if (up) u += h;
      n = h;
    } else {
      v[0] += __shfl_xor_sync(kFull, v[0], o);
    }
  }
  return v[0];
}

// exactScore is the CPU's score of codeword w (bf16 [D]) for residual r:
// hn - dot, dot summed with fmaf over d = 0..D-1 from +0.
__device__ __forceinline__ float exactScore(const float* r, const uint16_t* w, int D, float hn) {
  float acc = 0.f;
  for (int d = 0; d < D; d++) acc = fmaf(r[d], bf(w[d]), acc);
  return hn - acc;
}

// orderKey maps (score, index) to a 64-bit key whose unsigned order is the
// lexicographic (score, index) order.
__device__ __forceinline__ unsigned long long orderKey(float s, int e) {
  uint32_t u = __float_as_uint(s);
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  return (static_cast<unsigned long long>(u) << 32) | static_cast<uint32_t>(e);
}

// SlotCopy is the bulk copies that fill a ring slot of BN codewords x kBK
// values from the pre-swizzled tiles (128-row blocks, see tiles below):
// BN / 128 whole blocks, or for BN = 64 half of one (rows 64h..64h+63 of a
// block keep the block's swizzle, row & 7).
template <int BN>
struct SlotCopy {
  static constexpr int kCopies = BN >= 128 ? BN / 128 : 1;
  static constexpr int kRows = BN >= 128 ? 128 : BN;  // codeword rows a copy
  static constexpr int kBytes = kRows * kBK * 2;
  // src is copy t of N-tile nt, k-chunk kc of the stage starting at
  // codeword row off (a multiple of 128), with kcs k-chunks a row.
  __device__ static const uint16_t* src(const uint16_t* tiles, int off, int nt, int kc, int t, int kcs) {
    const int row = off + nt * BN + t * kRows;
    return tiles + (size_t(row / 128) * kcs + kc) * (128 * kBK) + (row % 128) * kBK;
  }
};

// Params is the fused encoder's parameter struct (params.h). tiles: words
// pre-swizzled as [tile][128][64] bf16 (bulk path). res: scratch [rows
// rounded up to 256][Dp] (the kWhole kernels read every row of their CTA).
// stats[0]: rows re-scored exactly (counted with atomicAdd). The input
// check (rvq_check's, fused): a valid row whose fp32 squared norm (this
// kernel's order) is not <= limit (non-finite values included) sets
// *status to the lowest such row (atomicMin); the host re-checks it with
// the CPU's rule. status null: no check.
using Params = RvqEncodeParams;

template <int BM, int BN, int WM, int WN, int S>
struct Cfg {
  static constexpr int kThreads = WM * WN * 32;
  static constexpr int kWarps = WM * WN;
  static constexpr int MT = BM / WM / 16;
  static constexpr int NT = BN / WN / 8;
  static constexpr int kSlotB = BN * kBK * 2;            // bytes of codewords per ring slot (1024-aligned)
  static constexpr int kSlot = kSlotB + BN * 4;          // + hn (kept in a ring of its own)
  static constexpr int kChunksPerSlot = kSlot / 16;      // 16-byte cp.async per slot
  static_assert(NT % 2 == 0, "NT must be even (ldmatrix.x4 loads two n8 tiles)");
  static_assert(BM % (WM * 16) == 0 && BN % (WN * 16) == 0, "tile shape");

};

// kMaxQ is the most stages a codebook set has (the op's contract).
constexpr int kMaxQ = 32;

// AR, the A operand's source in the AW pipeline: 0 the bf16 A tile in
// shared memory (wgmma reads it there); 1 (a) the A tile loaded into
// registers once a stage; 2 (g) registers that the stage end's update
// fills for the next stage (a k-chunk at a time through a 2 KiB staging
// tile a warp; the chain's first stage loads them from the fp32 residual
// in global scratch), so that there is no A tile where that pipeline is
// compiled (sm_90a): its BM·Dp·2 bytes go to the ring; 3 (f) registers
// that hold the high halves of the fp32 residual (its bf16 truncation),
// whose low halves are in global scratch (kFrag in encodeChain): no A
// tile and no staging tiles there. kNoATile<AR> says whether this build
// has no A tile; aTileBytes is the size of the A tile, g's staging tiles
// or f's nothing.
template <int AR>
constexpr bool kNoATile = (AR == 2 || AR == 3) && RVQ_HAVE_WGMMA && RVQ_BULK;
template <int BM, int AR>
__host__ __device__ constexpr size_t aTileBytes(int Dp) {
  return !kNoATile<AR> ? size_t(BM) * Dp * 2 : AR == 2 ? size_t(BM) * kBK * 2 : 0;
}

// The fused kernels' shared memory after their ring barriers (the layout
// of encodeChain's first lines; variants_cuda.go's variant.shared sizes it):
// sharedRows, the fp32 residual rows ([BM][Dp], RS only); stageCodes, the
// [kMaxQ][BM] uint16 table of every stage's code of every row; stageMeta,
// [kMaxQ][2] ints (each stage's codeword offset and K); gatherBar, the
// writeQuantizedGather mbarriers. The last three are used by the AW
// kernels only.
template <int BM, int S, int AR>
__device__ __forceinline__ float* sharedRows(char* smem, int Dp, int BN, int WN) {
  return reinterpret_cast<float*>(smem + aTileBytes<BM, AR>(Dp) + size_t(S) * BN * kBK * 2 +
                                  4 * (S * BN + WN * BM * 3 + 3 * BM) + 16 * S);
}
template <int BM, int S, int AR>
__device__ __forceinline__ uint16_t* stageCodes(char* smem, int Dp, int BN, int WN, bool RS) {
  return reinterpret_cast<uint16_t*>(sharedRows<BM, S, AR>(smem, Dp, BN, WN) + (RS ? size_t(BM) * Dp : 0));
}

template <int BM, int S, int AR>
__device__ __forceinline__ int* stageMeta(char* smem, int Dp, int BN, int WN, bool RS) {
  return reinterpret_cast<int*>(stageCodes<BM, S, AR>(smem, Dp, BN, WN, RS) + kMaxQ * BM);
}

// kGatherBars mbarriers a warp (8 warps at most), one a buffer.
constexpr int kGatherBars = 8;
template <int BM, int S, int AR>
__device__ __forceinline__ uint32_t gatherBar(char* smem, int Dp, int BN, int WN, bool RS, int warp, int i) {
  return smemAddr(stageMeta<BM, S, AR>(smem, Dp, BN, WN, RS) + 2 * kMaxQ) + 8 * (warp * kGatherBars + i);
}

// ---- The f kernel's residual (kFrag in encodeChain; Dp = 256, 8 compute
// warps of 16 rows, 256 threads). Lane (g, t) of warp w holds, for its rows
// i = 16w + g + 8h (h = 0, 1), the residual's four dimensions
// d + {0, 1, 2, 3}, d = fragDim0(s, t), of each k16 step s < kFragSteps:
// the mma A-fragment registers aF[s/4][s%4][h] (d, d + 1) and [h + 2]
// (d + 2, d + 3) hold their high halves (the bf16 truncation of r, the
// tensor cores' A operand), lo[s·256 + tid] the low halves of the four
// registers in the same order (in the CTA's global scratch: each thread
// reads back only what it wrote, coalesced 16-byte words). r = high | low
// is the exact fp32 residual.
constexpr int kFragSteps = 16;
constexpr int kFragLoFloats = kFragSteps * 256 * 4;  // the low halves' floats (64 KiB)
using FragA = uint32_t[4][4][4];

// The helpers take the compute thread's index tid (< 256).
// fragStart is f's chain start: r = x (0 for rows that are not valid and
// past D) into aF and lo; rnorm[i] = ||x_i|| (-1: not valid); the input
// check of the chain's first stage (rvq_check's rule on the fp32 squared
// norm, this order) into p.status.
__device__ __forceinline__ void fragStart(const Params& p, long long row0, int q0, int tid, FragA& aF, uint4* lo,
                                          float* rnorm) {
  const int lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3;
  const int D = static_cast<int>(p.D);
  const bool vec = D % 4 == 0 && (reinterpret_cast<uintptr_t>(p.x) & 15) == 0;
  float ss[2];
  bool ok[2];
  const float* xr[2];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const long long row = row0 + 16 * warp + g + 8 * h;
    ok[h] = row < p.rows && rowValid(row, p.T, p.lengths);
    xr[h] = p.x + (ok[h] ? row : 0) * D;
    ss[h] = 0.f;
  }
  // put takes step s's values of x: v[h][e] is dimension fragDim0(s, t) + e
  // of row h (0 past D and for rows that are not valid).
  auto put = [&](int s, const float (&v)[2][4]) {
#pragma unroll
    for (int h = 0; h < 2; h++)
#pragma unroll
      for (int e = 0; e < 4; e++) ss[h] += v[h][e] * v[h][e];
    aF[s / 4][s % 4][0] = hiHalves(v[0][0], v[0][1]);
    aF[s / 4][s % 4][1] = hiHalves(v[1][0], v[1][1]);
    aF[s / 4][s % 4][2] = hiHalves(v[0][2], v[0][3]);
    aF[s / 4][s % 4][3] = hiHalves(v[1][2], v[1][3]);
    lo[s * 256 + tid] = make_uint4(loHalves(v[0][0], v[0][1]), loHalves(v[1][0], v[1][1]), loHalves(v[0][2], v[0][3]),
                                   loHalves(v[1][2], v[1][3]));
  };
  if (vec) {
    // Every 16-byte load is issued before the first is used (the address
    // of a piece that is not read is x's first, a safe one; its values are
    // then replaced by 0): one round trip to memory a chain start, not one
    // a step.
    float4 xv[kFragSteps][2];
#pragma unroll
    for (int s = 0; s < kFragSteps; s++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int d0 = fragDim0(s, t);
        xv[s][h] = __ldg(reinterpret_cast<const float4*>(ok[h] && d0 < D ? xr[h] + d0 : p.x));
      }
#pragma unroll
    for (int s = 0; s < kFragSteps; s++) {
      float v[2][4];
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const bool in = ok[h] && fragDim0(s, t) < D;
        v[h][0] = in ? xv[s][h].x : 0.f, v[h][1] = in ? xv[s][h].y : 0.f;
        v[h][2] = in ? xv[s][h].z : 0.f, v[h][3] = in ? xv[s][h].w : 0.f;
      }
      put(s, v);
    }
  } else {
#pragma unroll
    for (int s = 0; s < kFragSteps; s++) {
      float v[2][4];
#pragma unroll
      for (int h = 0; h < 2; h++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
          const int d = fragDim0(s, t) + e;
          v[h][e] = ok[h] && d < D ? xr[h][d] : 0.f;
        }
      put(s, v);
    }
  }
#pragma unroll
  for (int h = 0; h < 2; h++) {
    ss[h] += __shfl_xor_sync(kFull, ss[h], 1);
    ss[h] += __shfl_xor_sync(kFull, ss[h], 2);
    const long long row = row0 + 16 * warp + g + 8 * h;
    if (t == 0) {
      rnorm[16 * warp + g + 8 * h] = ok[h] ? sqrtf(ss[h]) : -1.f;
      if (ok[h] && q0 == 0 && p.status != nullptr && !(ss[h] <= static_cast<float>(p.limit)))
        atomicMin(p.status, static_cast<unsigned long long>(row));
    }
  }
  __syncwarp();  // each warp reads only its own rows' rnorm
}

// fragRow writes row il (< 16) of the calling warp, rejoined in fp32 and in
// the natural dimension order, to rowS ([256], the warp's scratch row) for
// an exact re-score; the row's owner lanes (g = il % 8) write, then the
// warp synchronises. All lanes must call it.
__device__ __forceinline__ void fragRow(int il, int tid, const FragA& aF, const uint4* lo, float* rowS) {
  const int lane = tid & 31, h = il >> 3;
  if ((lane >> 2) == (il & 7)) {
    float4* dst = reinterpret_cast<float4*>(rowS);
#pragma unroll
    for (int s = 0; s < kFragSteps; s++) {
      const uint4 l = lo[s * 256 + tid];
      const uint32_t a0 = h ? aF[s / 4][s % 4][1] : aF[s / 4][s % 4][0];
      const uint32_t a1 = h ? aF[s / 4][s % 4][3] : aF[s / 4][s % 4][2];
      const uint32_t l0 = h ? l.y : l.x, l1 = h ? l.w : l.z;
      dst[fragDim0(s, lane & 3) / 4] = make_float4(joinLo(a0, l0), joinHi(a0, l0), joinLo(a1, l1), joinHi(a1, l1));
    }
  }
  __syncwarp();
}

// fragUpdate is f's stage-end update of the calling warp's rows i0..i0+15:
// r -= C_j (fp32, the CPU's operation) with j = -1 - sel[i] from the
// stage's codewords words ([K][256] bf16), in place in aF and lo; rnorm[i]
// = ||r|| for the valid rows (a row that is not valid subtracts zeros and
// stays 0). A lane's 16 codeword loads (16-byte pieces: fragDim0 makes a
// warp's load one line a row) and its 16 low-half loads are all in flight
// before the first is used.
__device__ __forceinline__ void fragUpdate(const uint16_t* words, int K, int i0, int tid, const int* sel, float* rnorm,
                                           FragA& aF, uint4* lo) {
  const int lane = tid & 31, g = lane >> 2, t = lane & 3;
  __syncwarp();  // lane 0's re-score decisions are in sel
  bool act[2];
  uint4 cw[2][8], los[kFragSteps];
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int i = i0 + g + 8 * h;
    act[h] = !(rnorm[i] < 0.f);
    int jj = -1 - sel[i];
    jj = (jj < 0 || jj >= K) ? 0 : jj;
    const uint4* src = reinterpret_cast<const uint4*>(words + size_t(jj) * 256);
#pragma unroll
    for (int m = 0; m < 8; m++) cw[h][m] = __ldg(src + fragDim0(2 * m, t) / 8);
  }
#pragma unroll
  for (int s = 0; s < kFragSteps; s++) los[s] = lo[s * 256 + tid];
  __syncwarp();  // every lane has read rnorm before the owners write it
  float ss[2] = {0.f, 0.f};
#pragma unroll
  for (int s = 0; s < kFragSteps; s++) {
    const uint4 l4 = los[s];
    uint32_t nl[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {  // register j: row h = j % 2, dimensions fragDim0(s, t) + 2(j / 2) + {0, 1}
      const int h = j & 1;
      const uint4 c4 = cw[h][s / 2];
      uint32_t c = (s & 1) ? (j < 2 ? c4.z : c4.w) : (j < 2 ? c4.x : c4.y);
      c = act[h] ? c : 0u;
      const uint32_t l = j == 0 ? l4.x : j == 1 ? l4.y : j == 2 ? l4.z : l4.w;
      uint32_t& a = aF[s / 4][s % 4][j];
      const float ra = joinLo(a, l) - __uint_as_float(c << 16);
      const float rb = joinHi(a, l) - __uint_as_float(c & 0xFFFF0000u);
      ss[h] += ra * ra + rb * rb;
      a = hiHalves(ra, rb);
      nl[j] = loHalves(ra, rb);
    }
    lo[s * 256 + tid] = make_uint4(nl[0], nl[1], nl[2], nl[3]);
  }
#pragma unroll
  for (int h = 0; h < 2; h++) {
    ss[h] += __shfl_xor_sync(kFull, ss[h], 1);
    ss[h] += __shfl_xor_sync(kFull, ss[h], 2);
    if (t == 0 && act[h]) rnorm[i0 + g + 8 * h] = sqrtf(ss[h]);
  }
}

// Cursor walks the flattened (stage, N-tile, k-chunk) sequence of a chain.
struct Cursor {
  int q, nt, kc;
};

template <int BM, int BN, int WM, int WN, int S, bool WG, class B, bool RS, bool PW, int AK, int AR>
__device__ __forceinline__ void encodeChain(const Params& p, int q0, int q1, long long row0, char* smem, Pipe& pipe) {
  using C = Cfg<BM, BN, WM, WN, S>;
  constexpr bool AW = AK > 0;  // the asynchronous N-tile pipeline, for Dp = 64 AK
  static_assert(!AW || S >= 2 * AK, "the AW ring holds two N-tiles of AK slots");
  // kWG: this instantiation issues wgmma (sm_90a builds);
  // otherwise the same tiling runs on mma.sync.
  constexpr bool kWG = WG && RVQ_HAVE_WGMMA;
  static_assert(!WG || (WN == 1 && (BN == 128 || BN == 64) && BM == 16 * WM && WM % 4 == 0),
                "wgmma tiling: a warpgroup per 64 rows, N = 64 or 128");
  static_assert(!AW || (WG && PW && BM == 128), "the asynchronous N-tile pipeline: wgmma, a producer warpgroup, two compute warpgroups");
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp / WN, wn = warp % WN;
  // cbar synchronises the compute warps (not the producer warp of PW).
  auto cbar = [] {
    if constexpr (PW)
      namedBarrier(15, C::kThreads);
    else
      __syncthreads();
  };
  // The AW pipeline is compiled for Dp = 64 AK (encode traps otherwise):
  // a constant row width there, so the update's index math folds.
  constexpr bool kFixedDp = AW && WG && RVQ_HAVE_WGMMA && RVQ_BULK;
  const int Dp = kFixedDp ? AK * kBK : static_cast<int>(p.Dp), D = static_cast<int>(p.D), KC = Dp / kBK;
  // kWhole (those fixed widths, cpr = 16 or 32 chunks a row): each group
  // of 32 consecutive chunks is whole rows, which the chain start and the
  // update use to sum row norms without shared-memory partials.
  constexpr bool kWhole = kFixedDp && (AK == 2 || AK == 4);
  constexpr int kSeg = AK == 2 ? 16 : 32;  // kWhole: a row's chunks (lanes)
  char* sA = smem;  // the A tile, or (kNoATile) g's staging tiles or f's nothing
  char* ring = sA + aTileBytes<BM, AR>(Dp);
  float* hnRing = reinterpret_cast<float*>(ring + size_t(S) * C::kSlotB);  // [S][BN]
  float* part = hnRing + S * BN;                                          // [WN][BM][3]
  float* rnorm = part + WN * BM * 3;                                     // [BM] ||r||, -1: invalid row
  float* rnorm2 = rnorm + BM;                                            // [BM] ||r||^2 partial sums
  int* sel = reinterpret_cast<int*>(rnorm2 + BM);                        // [BM]
  uint64_t* bars = reinterpret_cast<uint64_t*>(sel + BM);               // [2][S] full, empty (bulk path)
  // The fp32 residual rows: in shared memory after the barriers (RS) or the
  // CTA's scratch rows of p.res, [BM][Dp] either way.
  float* const res = RS ? sharedRows<BM, S, AR>(smem, Dp, BN, WN) : p.res + row0 * Dp;
  // [kMaxQ][BM] every stage's code of every row, for writeQuantizedGather.
  uint16_t* const codesS = stageCodes<BM, S, AR>(smem, Dp, BN, WN, RS);

  // ---- chain start: r = x for the valid rows (0 elsewhere and past D);
  // A = bf16(r); ||r|| (-1 marks a row that is not valid). Thread per
  // 8-value chunk.
  const int cpr = Dp / 8;  // 16-byte bf16 chunks per row
  // kFrag (the f kernel on sm_90a): the residual lives in the A fragments
  // (high halves) and global scratch (low halves); its chain start is
  // below, where the fragments are declared.
  constexpr bool kFrag = AR == 3 && AW && WG && PW && RVQ_HAVE_WGMMA && RVQ_BULK;
  if constexpr (!kFrag) {
    for (int i = tid; i < BM; i += C::kThreads) rnorm2[i] = 0.f;
    cbar();
    // Warp w takes the chunks of rows [w*RW, (w+1)*RW), so that each row's
    // squared norm is summed by one warp; kCS chunks a lane are loaded before
    // any is used (x comes from DRAM: one latency for them all).
    constexpr int RW = BM / C::kWarps;
    constexpr int kCS = kWhole ? 8 : 4;
    // vec: whole 16-byte-aligned float4 pairs (D a multiple of 8).
    const bool vec = D % 8 == 0 && (reinterpret_cast<uintptr_t>(p.x) & 15) == 0;
    for (int c0 = warp * RW * cpr; c0 < (warp + 1) * RW * cpr; c0 += 32 * kCS) {
      float v[kCS][8], ss[kCS];
#pragma unroll
      for (int u = 0; u < kCS; u++) {
        const int c = c0 + u * 32 + lane, i = c / cpr, k = c % cpr;
        const long long row = row0 + i;
        const bool ok = c < (warp + 1) * RW * cpr && row < p.rows && rowValid(row, p.T, p.lengths);
        if (vec && ok && k * 8 < D) {
          const float4* src = reinterpret_cast<const float4*>(p.x + row * D + k * 8);
          const float4 a = __ldg(src), b = __ldg(src + 1);
          v[u][0] = a.x, v[u][1] = a.y, v[u][2] = a.z, v[u][3] = a.w;
          v[u][4] = b.x, v[u][5] = b.y, v[u][6] = b.z, v[u][7] = b.w;
        } else {
#pragma unroll
          for (int j = 0; j < 8; j++) v[u][j] = (!vec && ok && k * 8 + j < D) ? p.x[row * D + k * 8 + j] : 0.f;
        }
      }
#pragma unroll
      for (int u = 0; u < kCS; u++) {
        const int c = c0 + u * 32 + lane, i = c / cpr, k = c % cpr;
        const long long row = row0 + i;
        const bool in = c < (warp + 1) * RW * cpr;
        const bool ok = in && row < p.rows && rowValid(row, p.T, p.lengths);
        // The kWhole updates read the rows that are not valid too (and g
        // builds the chain's first A fragments from these rows): zeros for
        // those (the launcher's scratch has every row of the last CTA).
        if (ok || ((RS || kWhole) && in)) {
          float4* rr = reinterpret_cast<float4*>(res + size_t(i) * Dp) + 2 * k;
          rr[0] = make_float4(v[u][0], v[u][1], v[u][2], v[u][3]);
          rr[1] = make_float4(v[u][4], v[u][5], v[u][6], v[u][7]);
        }
        uint32_t h[4];
        ss[u] = 0.f;
#pragma unroll
        for (int j = 0; j < 4; j++) {
          h[j] = bf16x2(v[u][2 * j], v[u][2 * j + 1]);
          ss[u] += v[u][2 * j] * v[u][2 * j] + v[u][2 * j + 1] * v[u][2 * j + 1];
        }
        if (in && !kNoATile<AR>) *reinterpret_cast<uint4*>(sA + aOff<BM>(i, k)) = make_uint4(h[0], h[1], h[2], h[3]);
        if constexpr (!kWhole) addRowNorm(rnorm2, in ? i : -1, ss[u], cpr, lane);
      }
      if constexpr (kWhole) {
        int u;
        const float s2 = rowSums<kCS, kSeg>(ss, lane, u);
        if (lane % (kSeg / kCS) == 0) rnorm2[(c0 + u * 32 + lane) / cpr] = s2;
      }
    }
    cbar();
    for (int i = tid; i < BM; i += C::kThreads) {
      const long long row = row0 + i;
      const bool valid = row < p.rows && rowValid(row, p.T, p.lengths);
      rnorm[i] = valid ? sqrtf(rnorm2[i]) : -1.f;
      if (valid && q0 == 0 && p.status != nullptr && !(rnorm2[i] <= static_cast<float>(p.limit)))
        atomicMin(p.status, static_cast<unsigned long long>(row));
    }
    cbar();  // rnorm[i] is read by row i's owner warp, in another warpgroup for some rows
  }

#if RVQ_HAVE_WGMMA
  // wgmma descriptors assume 1024-byte aligned swizzle atoms.
  if constexpr (kWG)
    if (smemAddr(smem) & 1023) __trap();
#endif

  // ---- producer: ring slot loads of the flattened sequence.
  const uint32_t ringAddr = smemAddr(ring);
  Cursor prod{q0, 0, 0};
  auto advance = [&](Cursor& c) {
    if (++c.kc == KC) {
      c.kc = 0;
      int K = p.meta[c.q * 4 + 1];
      if (++c.nt * BN >= K) {
        c.nt = 0;
        c.q++;
      }
    }
  };
  auto issue = [&](int slot) {
    if (prod.q < q1) {
      const int off = p.meta[prod.q * 4];
      const char* gw = reinterpret_cast<const char*>(p.words) + (size_t(off) + size_t(prod.nt) * BN) * Dp * 2 + prod.kc * kBK * 2;
      const char* gh = reinterpret_cast<const char*>(p.hn + off + prod.nt * BN);
      char* s = ring + size_t(slot) * C::kSlotB;
      for (int c = tid; c < C::kChunksPerSlot; c += C::kThreads) {
        if (c < C::kSlotB / 16) {
          int n = c / 8, k = c % 8;
          cpAsync16(smemAddr(s + swz(n, k)), gw + size_t(n) * Dp * 2 + k * 16);
        } else {
          int h = c - C::kSlotB / 16;
          cpAsync16(smemAddr(hnRing + slot * BN + h * 4), gh + h * 16);
        }
      }
      advance(prod);
    }
    cpCommit();
  };
#if RVQ_BULK
  // Bulk path: thread 0 (or, with PW, the producer warp: produceAll) keeps
  // S-1 loads in flight; load L fills slot L % S after every compute warp
  // released that slot's previous load (empty[slot]), and completes
  // full[slot] with its bytes. encode() initialised the barriers.
  const uint32_t fullA = smemAddr(bars), emptyA = fullA + 8 * S;
  int chainLoads = 0;
  for (int q = q0; q < q1; q++) chainLoads += (p.meta[q * 4 + 1] + BN - 1) / BN * KC;
  const int end = pipe.cons + chainLoads;
  auto produce = [&]() {
    const int L = pipe.prod, s = L % S;
    if (L >= S) mbarWait(emptyA + 8 * s, ((L / S) - 1) & 1);
    mbarExpectTx(fullA + 8 * s, C::kSlot);
    const int off = p.meta[prod.q * 4];
    using SC = SlotCopy<BN>;
#pragma unroll
    for (int t = 0; t < SC::kCopies; t++)
      bulkCopy(ringAddr + s * C::kSlotB + t * SC::kBytes, SC::src(p.tiles, off, prod.nt, prod.kc, t, KC), SC::kBytes,
               fullA + 8 * s);
    bulkCopy(smemAddr(hnRing + s * BN), p.hn + off + prod.nt * BN, BN * 4, fullA + 8 * s);
    advance(prod);
    pipe.prod++;
  };
  if (!PW && tid == 0)
    while (pipe.prod < end && pipe.prod < pipe.cons + S - 1) produce();
#else
  for (int s = 0; s < S - 1; s++) issue(s);
#endif

  // ldmatrix lane addresses: A rows wm*(BM/WM) + m*16 + (lane & 15); B rows
  // (codewords) wn*(BN/WN) + n*8 + (lane >> 4)*8 + (lane & 7).
  const uint32_t aBase = smemAddr(sA) + (wm * (BM / WM) + (lane & 15)) * 128;
  constexpr uint32_t aStep = 16 * 128;
  const uint32_t bBase = (wn * (BN / WN) + (lane >> 4) * 8 + (lane & 7)) * (kBK * 2);
  float accum[C::MT][C::NT][4];
  // kG independent running minima per row (n-tiles interleaved) shorten the
  // min/max dependency chains of the epilogue where registers allow.
  constexpr int kG = C::MT == 1 ? 2 : 1;
  B best[C::MT][2][kG];
  // fold adds N-tile nt's scores (acc: its dot products; sh: its BN
  // values of hn) to the running minima: s = hn_e - dot, 5 instructions a
  // score.
  auto fold = [&](const float (&acc)[C::MT][C::NT][4], int nt, const float* sh) {
    // Entry e = nt*BN + wn*(BN/WN) + (lane&3)*2 + n*8 + j: the first three
    // terms (hi) and n*8 + j (lo, n < NT = BN/WN/8, j < 2) occupy disjoint
    // bits, so addAt packs each score with one LOP3 (no per-score add).
    const uint32_t hiM = 0xFFFFF000u | uint32_t(nt * BN + wn * (BN / WN) + (lane & 3) * 2);
#pragma unroll
    for (int n = 0; n < C::NT; n++) {
      const int col = wn * (BN / WN) + n * 8 + (lane & 3) * 2;
      const float2 h = *reinterpret_cast<const float2*>(sh + col);
      const uint32_t lo0 = 0xFFFFF000u | uint32_t(n * 8), lo1 = lo0 | 1u;
#pragma unroll
      for (int m = 0; m < C::MT; m++) {
        best[m][0][n % kG].addAt(h.x - acc[m][n][0], hiM, lo0);
        best[m][0][n % kG].addAt(h.y - acc[m][n][1], hiM, lo1);
        best[m][1][n % kG].addAt(h.x - acc[m][n][2], hiM, lo0);
        best[m][1][n % kG].addAt(h.y - acc[m][n][3], hiM, lo1);
      }
    }
  };
  // AR: the warp's A fragments (its 16 rows, every k16 step of Dp) for the
  // stage, mma.sync's A layout, which wgmma's register A uses too: lane
  // (g, t) = (lane / 4, lane % 4) holds rows g and g + 8, columns 2t, 2t + 1
  // and 2t + 8, 2t + 9 of each step. g and f fill them at the stage end for
  // the next stage.
  uint32_t aF[AR ? AK : 1][kBK / 16][4];
  // kStaged: this build runs g's update (the fragments by staging tiles).
  constexpr bool kStaged = AR == 2 && kNoATile<AR> && AW && WG && PW;
  // ---- kFrag chain start (fragStart: the layout). The f kernel's tiles
  // (p.tiles) hold every codeword with its dimensions permuted (device_layout.go's
  // fragTiles) to match: the tensor cores' column 16s + 2t + {0, 1, 8, 9}
  // of k16 step s is dimension fragDim0(s, t) + {0, 1, 2, 3}. The CTA's
  // scratch rows hold the low halves (loS, 64 KiB of its 128) and a warp's
  // fp32 row for an exact re-score (rowS, fragRow).
  uint4* const loS = reinterpret_cast<uint4*>(res);  // [kFragSteps][256] (kFrag)
  float* const rowS = res + kFragLoFloats + warp * Dp;
  if constexpr (kFrag) fragStart(p, row0, q0, tid, aF, loS, rnorm);
  int slot = 0;
  for (int q = q0; q < q1; q++) {
    const int off = p.meta[q * 4], K = p.meta[q * 4 + 1];
    const int ntiles = (K + BN - 1) / BN;
#pragma unroll
    for (int m = 0; m < C::MT; m++) {
#pragma unroll
      for (int g = 0; g < kG; g++) {
        best[m][0][g].init();
        best[m][1][g].init();
      }
    }
#if RVQ_HAVE_WGMMA
    if constexpr (kWG) proxyFence();  // A tile stores (generic proxy) -> wgmma
#endif
    // The A tile of this stage is written: with WN == 1 each warp wrote the
    // rows it multiplies (wgmma: its warpgroup's 64 rows), else any.
    if constexpr (WN == 1) {
      if constexpr (kWG)
        namedBarrier(1 + warp / 4, 128);
      else
        __syncwarp();
    } else {
      cbar();
    }
    // kPiped: the stage's N-tiles go through the AW pipeline (sm_90a);
    // the plain loop below is then not compiled at all, so that ptxas sees
    // only the pipeline's wgmma pattern (one hazard anywhere in a function
    // serialises all of its wgmma).
    constexpr bool kPiped = kWG && AW && RVQ_BULK;
#if RVQ_HAVE_WGMMA && RVQ_BULK
    if constexpr (kPiped) {
      // Two accumulator sets: tile nt+1's wgmma runs on the tensor cores
      // while the warps fold tile nt's scores (wgmma.wait_group 1). A tile
      // holds its AK ring slots from its wgmma until its fold (hn rides in
      // them), so the next tile's loads need S >= 2 AK (static_assert).
      float accB[C::MT][C::NT][4];
      const uint32_t aW = smemAddr(sA) + (warp >> 2) * 64 * 128;
      const uint64_t descA = wgDesc(aW);
      // AR: the A fragments in registers for the whole stage: the tensor
      // cores then read only B from shared memory. a loads them once a
      // stage from the A tile (ldmatrix); g, at the chain's first stage,
      // from the fp32 residual rows in global scratch (every row of the
      // CTA), rounded as the A tile's stores round; later stages have them
      // from the update.
      if constexpr (AR == 2) {
        if (q == q0) {
          const float* r0p = res + size_t(16 * warp + (lane >> 2)) * Dp + 2 * (lane & 3);
          const float* r1p = r0p + 8 * Dp;
#pragma unroll
          for (int kc = 0; kc < AK; kc++)
#pragma unroll
            for (int ks = 0; ks < kBK / 16; ks++) {
              const int k0 = kc * kBK + ks * 16;
              const float2 v0 = *reinterpret_cast<const float2*>(r0p + k0),
                           v1 = *reinterpret_cast<const float2*>(r1p + k0),
                           v2 = *reinterpret_cast<const float2*>(r0p + k0 + 8),
                           v3 = *reinterpret_cast<const float2*>(r1p + k0 + 8);
              aF[kc][ks][0] = bf16x2(v0.x, v0.y);
              aF[kc][ks][1] = bf16x2(v1.x, v1.y);
              aF[kc][ks][2] = bf16x2(v2.x, v2.y);
              aF[kc][ks][3] = bf16x2(v3.x, v3.y);
            }
        }
      } else if constexpr (AR == 1) {
#pragma unroll
        for (int kc = 0; kc < AK; kc++)
#pragma unroll
          for (int ks = 0; ks < kBK / 16; ks++)
            ldsm4(aBase + kc * (BM * 128) + ((ks * 2 + (lane >> 4)) ^ (lane & 7)) * 16, aF[kc][ks][0], aF[kc][ks][1],
                  aF[kc][ks][2], aF[kc][ks][3]);
      }
      // issueTile queues the tile's wgmma as one straight run: first the
      // AK k-chunks' full barriers, then one fence, the AK x 4 wgmma (the
      // first overwrites d: wgmmaTileZ, so d is dead from the last fold
      // until here) and one commit. No branch between the wgmma: ptxas
      // ends a scoreboard group at every basic block, and a tile of
      // several groups makes wgmma.wait_group 1 wait for the tile just
      // issued as well. Hence AK, the k-chunks a row, is compiled in.
      auto issueTile = [&](float (&d)[C::MT][C::NT][4]) {
#pragma unroll
        for (int kc = 0; kc < AK; kc++) {
          const int L = pipe.cons + kc;
          mbarWait(fullA + 8 * (L % S), (L / S) & 1);
        }
        wgFence();
        // Descriptors by addition: +32 bytes (k16) is +2 in the start
        // field, +1024 bytes (an 8-row atom) +64; shared addresses stay
        // under 2^18, so the 14-bit field never carries.
#pragma unroll
        for (int kc = 0; kc < AK; kc++) {
          const uint64_t da = descA + uint64_t(kc * (BM * 128) / 16);
          const uint64_t db = wgDesc(ringAddr + ((pipe.cons + kc) % S) * C::kSlotB);
#pragma unroll
          for (int ks = 0; ks < kBK / 16; ks++) {
            if constexpr (AR) {
              if (kc == 0 && ks == 0)
                wgmmaTileRZ<BN>(d[0], aF[kc][ks], db);
              else
                wgmmaTileR<BN>(d[0], aF[kc][ks], db + 2 * ks, 1);
            } else {
              if (kc == 0 && ks == 0)
                wgmmaTileZ<BN>(d[0], da, db);
              else
                wgmmaTile<BN>(d[0], da + 2 * ks, db + 2 * ks, 1);
            }
          }
        }
        wgCommit();
        pipe.cons += AK;
      };
      // foldTile folds tile nt (its wgmma complete: call after the wait)
      // whose first load was first, then releases its AK slots.
      auto foldTile = [&](float (&d)[C::MT][C::NT][4], int nt, int first) {
        fenceAcc(d);  // the reads below stay after the wait
        fold(d, nt, hnRing + ((first + AK - 1) % S) * BN);
        __syncwarp();
        if (lane == 0)
#pragma unroll
          for (int kc = 0; kc < AK; kc++) releaseSlot(emptyA + 8 * ((first + kc) % S));
      };
      // Even tiles accumulate in accum, odd ones in accB.
      int first = pipe.cons, nt = 1;
      issueTile(accum);
      for (; nt + 1 < ntiles; nt += 2) {
        int f = pipe.cons;
        issueTile(accB);
        wgWait1();
        foldTile(accum, nt - 1, first);
        first = f, f = pipe.cons;
        issueTile(accum);
        wgWait1();
        foldTile(accB, nt, first);
        first = f;
      }
      if (nt < ntiles) {  // tile nt - 1 in accum, one more (odd) tile
        const int f = pipe.cons;
        issueTile(accB);
        wgWait1();
        foldTile(accum, nt - 1, first);
        wgWait0();
        foldTile(accB, nt, f);
      } else {
        wgWait0();
        foldTile(accum, nt - 1, first);
      }
    }
#endif
    for (int nt = 0; nt < (kPiped ? 0 : ntiles); nt++) {
#pragma unroll
      for (int m = 0; m < C::MT; m++)
#pragma unroll
        for (int n = 0; n < C::NT; n++)
#pragma unroll
          for (int v = 0; v < 4; v++) accum[m][n][v] = 0.f;
      for (int kc = 0; kc < KC; kc++) {
#if RVQ_BULK
        slot = pipe.cons % S;
        mbarWait(fullA + 8 * slot, (pipe.cons / S) & 1);
#else
        cpWait<S - 2>();
#if RVQ_HAVE_WGMMA
        if constexpr (kWG) proxyFence();  // cp.async (generic proxy) -> wgmma (async proxy)
#endif
        cbar();
        issue((slot + S - 1) % S);
#endif
#if RVQ_HAVE_WGMMA
        if constexpr (kWG) {
          // warpgroup g multiplies rows [64g, 64g+64) by the slot's 128 codewords
          const uint32_t a0 = smemAddr(sA) + kc * (BM * 128) + (warp >> 2) * 64 * 128;
          const uint32_t b0 = ringAddr + slot * C::kSlotB;
          wgFence();
#pragma unroll
          for (int ks = 0; ks < kBK / 16; ks++)
            wgmmaTile<BN>(accum[0], wgDesc(a0 + ks * 32), wgDesc(b0 + ks * 32), (kc | ks) != 0);
          wgCommit();
#if RVQ_BULK
          // Keep this k-chunk's wgmma in flight while releasing the previous
          // slot; the N-tile's last one is waited for before the epilogue.
          if (kc < KC - 1)
            wgWait1();
          else
            wgWait0();
          if (kc > 0) {
            __syncwarp();
            if (lane == 0) releaseSlot(emptyA + 8 * ((pipe.cons + S - 1) % S));
          }
#else
          wgWait0();
#endif
        }
#endif
        const uint32_t aAddr = aBase + kc * (BM * 128), bAddr = ringAddr + slot * C::kSlotB + bBase;
#pragma unroll
        for (int ks = 0; ks < (kWG ? 0 : kBK / 16); ks++) {
          // chunk (ks*2 + half) of the row, XOR-swizzled by the row's low 3
          // bits, which are lane & 7 for both operands.
          const uint32_t aK = ((ks * 2 + (lane >> 4)) ^ (lane & 7)) * 16;
          const uint32_t bK = ((ks * 2 + ((lane >> 3) & 1)) ^ (lane & 7)) * 16;
          uint32_t a[C::MT][4];
#pragma unroll
          for (int m = 0; m < C::MT; m++) ldsm4(aAddr + m * aStep + aK, a[m][0], a[m][1], a[m][2], a[m][3]);
#pragma unroll
          for (int n = 0; n < C::NT; n += 2) {
            uint32_t b0, b1, b2, b3;
            ldsm4(bAddr + n * 8 * (kBK * 2) + bK, b0, b1, b2, b3);
#pragma unroll
            for (int m = 0; m < C::MT; m++) {
              mma16816(accum[m][n], a[m], b0, b1);
              mma16816(accum[m][n + 1], a[m], b2, b3);
            }
          }
        }
        if (kc == KC - 1) fold(accum, nt, hnRing + slot * BN);  // epilogue of this N-tile
#if RVQ_BULK
        // The warp is done with the slot (ldmatrix results consumed; wgmma:
        // released here only after the N-tile's last k-chunk, see above).
        if (!kWG || kc == KC - 1) {
          __syncwarp();
          if (lane == 0) releaseSlot(emptyA + 8 * slot);
        }
        pipe.cons++;
        if (!PW && tid == 0 && pipe.prod < end) produce();
#else
        slot = (slot + 1) % S;
#endif
      }
    }
    // ---- end of stage: merge the running minima of the quad, then of the
    // WN warps sharing each row, and decide: sel[r] = -1 - j (decided j),
    // j >= 0 (near tie: re-score; j is the tensor-core winner), -1 for a
    // row that is not valid.
    const float cmax = __int_as_float(p.meta[q * 4 + 2]);
    auto decide = [&](int r, const B& b) {
      // (kFrag's A is r truncated to bf16: 2^-7 |r| |C_e| a score, not 2^-8.)
      constexpr float kA = kFrag ? 0x1p-6f : 0x1p-7f;
      const float bound = rnorm[r] * cmax * (kA + float(Dp) * 0x1p-20f) + float(Dp) * 0x1p-120f +
                          B::kSlack * (fabsf(b.b1) + fabsf(b.b2));
      sel[r] = (rnorm[r] < 0.f) ? -1 : (b.b2 - b.b1 > bound ? -1 - b.idx() : b.idx());
    };
#pragma unroll
    for (int m = 0; m < C::MT; m++)
#pragma unroll
      for (int h = 0; h < 2; h++) {
        B& b = best[m][h][0];
#pragma unroll
        for (int g = 1; g < kG; g++) b.merge(best[m][h][g].b1, best[m][h][g].b2, best[m][h][g].idx());
#pragma unroll
        for (int o = 1; o < 4; o <<= 1) {
          float o1 = __shfl_xor_sync(kFull, b.b1, o), o2 = __shfl_xor_sync(kFull, b.b2, o);
          int oi = __shfl_xor_sync(kFull, b.idx(), o);
          b.merge(o1, o2, oi);
        }
        if ((lane & 3) == 0) {
          const int r = wm * (BM / WM) + m * 16 + h * 8 + (lane >> 2);
          if constexpr (WN == 1) {
            decide(r, b);  // the warp holds all of its rows' scores
          } else {
            float* pp = part + (wn * BM + r) * 3;
            pp[0] = b.b1;
            pp[1] = b.b2;
            pp[2] = __int_as_float(b.idx());
          }
        }
      }
    if constexpr (WN == 1) {
      // Warp w decided rows [16w, 16w+16), the ones it updates below: no
      // block barrier, so the other warps keep the tensor cores busy.
      __syncwarp();
    } else {
      cbar();
      for (int r = tid; r < BM; r += C::kThreads) {
        B b;
        b.init();
        for (int w = 0; w < WN; w++) {
          const float* pp = part + (w * BM + r) * 3;
          b.merge(pp[0], pp[1], __float_as_int(pp[2]));
        }
        decide(r, b);
      }
      cbar();
    }
    // ---- update. Warp w owns rows [w*RW, (w+1)*RW): first the exact
    // re-score of its near ties, then r -= C_j for all its rows at once,
    // 8 values (16 bytes of codeword) per lane and kUp chunks in flight.
    // g: the chain's last stage only writes its codes; nothing reads that
    // residual, its norms or A (quantized is summed from the codes, and a
    // second chain starts from x). (The same skip in the other kernels'
    // update makes ptxas spill in s6pwra_d128.)
    const bool lastStage = q + 1 == q1;
    constexpr int RW = BM / C::kWarps;
    static_assert(RW <= 32, "a warp's rows fit one ballot");
    const int i0 = warp * RW;
    // The rows to re-score (sel >= 0), one ballot: usually none.
    for (unsigned ties = __ballot_sync(kFull, lane < RW && sel[i0 + lane] >= 0); ties != 0; ties &= ties - 1) {
      const int i = i0 + __ffs(ties) - 1;
      if constexpr (kFrag) fragRow(i - i0, tid, aF, loS, rowS);
      const float* src = kFrag ? rowS : res + size_t(i) * Dp;
      float bs = INFINITY;
      int bj = 0x7fffffff;
      for (int e = lane; e < K; e += 32) {
        float sc = exactScore(src, p.words + size_t(off + e) * Dp, D, p.hn[off + e]);
        if (sc < bs) {
          bs = sc;
          bj = e;
        }
      }
      for (int o = 16; o > 0; o >>= 1) {
        float os = __shfl_xor_sync(kFull, bs, o);
        int oj = __shfl_xor_sync(kFull, bj, o);
        if (os < bs || (os == bs && oj < bj)) {
          bs = os;
          bj = oj;
        }
      }
      // Non-finite x (reported by rvq_check and the host) can leave no
      // winner: keep the gather in bounds.
      if (bj < 0 || bj >= K) bj = 0;
      __syncwarp();  // every lane has read sel (the ballot) before lane 0 writes it
      if (lane == 0) {
        sel[i] = -1 - bj;
        if (p.stats) atomicAdd(p.stats, 1);
      }
    }
    // With kWhole a pass's row norms come out of one reduce-scatter of its
    // sums (rowSums: a lane ends with one row's ||r||^2) and rnorm is
    // written there, one sqrt a lane; and the chunks' loads take no branch
    // (a row that is not valid reads its own zero row and stores nothing),
    // so that the loads of a pass are all in flight before the first is
    // used.
    constexpr int kUp = AW && RS ? 2 * kU : kU;
    if constexpr (!kWhole)
      for (int ii = lane; ii < RW; ii += 32) rnorm2[i0 + ii] = 0.f;
    auto loadRes = [&](float (&rv)[8], int i, int k) {
      const float4* rr = reinterpret_cast<const float4*>(res + size_t(i) * Dp) + 2 * k;
      float4 a = rr[0], b = rr[1];
      rv[0] = a.x, rv[1] = a.y, rv[2] = a.z, rv[3] = a.w;
      rv[4] = b.x, rv[5] = b.y, rv[6] = b.z, rv[7] = b.w;
    };
#if RVQ_HAVE_WGMMA && RVQ_BULK
    if constexpr (kStaged) {
      if (!lastStage) {
        // g's update (the residual in global scratch, every row of the CTA
        // there), k-chunk by k-chunk: pass kc takes dimensions
        // [64kc, 64kc + 64) of the warp's 16 rows, lane the 16-byte chunk
        // lane % 8 of rows lane / 8 + 4u (u < 4); r -= C_j in global scratch
        // as below, bf16(r) into the warp's staging tile (16 rows x 128
        // bytes, swizzled as an A k-chunk; invalid rows 0), then ldmatrix
        // into the next stage's aF[kc]. Each lane keeps its 4 rows' partial
        // ||r||^2, summed over the passes and then over the 8 lanes of a row.
        static_assert(RW == 16 && kBK == 64, "g: 16 rows a warp, 64-dimension k-chunks");
        __syncwarp();
        char* const stg = sA + warp * (16 * kBK * 2);
        float nrm[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int kc = 0; kc < AK; kc++) {
          uint4 cw[4];
          float rv[4][8];
          bool act[4];
#pragma unroll
          for (int u = 0; u < 4; u++) {
            const int i = i0 + 4 * u + (lane >> 3), k = kc * 8 + (lane & 7);
            act[u] = !(rnorm[i] < 0.f);
            // A row that is not valid (sel -1: codeword 0) reads its own zero
            // residual and stores nothing: no branch, so that the pass's
            // loads all fly at once, and no other warp's rows.
            int jj = -1 - sel[i];
            jj = (jj < 0 || jj >= K) ? 0 : jj;
            cw[u] = __ldg(reinterpret_cast<const uint4*>(p.words + (size_t(off) + jj) * Dp) + k);
            loadRes(rv[u], i, k);
          }
#pragma unroll
          for (int u = 0; u < 4; u++) {
            const int il = 4 * u + (lane >> 3), i = i0 + il, k = kc * 8 + (lane & 7);
            float r[8];
            uint32_t h[4];
            const float s2 = subChunk(rv[u], cw[u], r, h);
            if (act[u]) {
              nrm[u] += s2;
              float4* rr = reinterpret_cast<float4*>(res + size_t(i) * Dp) + 2 * k;
              rr[0] = make_float4(r[0], r[1], r[2], r[3]);
              rr[1] = make_float4(r[4], r[5], r[6], r[7]);
            }
            const uint4 hv = act[u] ? make_uint4(h[0], h[1], h[2], h[3]) : make_uint4(0u, 0u, 0u, 0u);
            *reinterpret_cast<uint4*>(stg + swz(il, lane & 7)) = hv;
          }
          __syncwarp();
#pragma unroll
          for (int ks = 0; ks < kBK / 16; ks++)
            ldsm4(smemAddr(stg) + (lane & 15) * 128 + ((ks * 2 + (lane >> 4)) ^ (lane & 7)) * 16, aF[kc][ks][0],
                  aF[kc][ks][1], aF[kc][ks][2], aF[kc][ks][3]);
          __syncwarp();  // the tile is read before the next pass overwrites it
        }
#pragma unroll
        for (int u = 0; u < 4; u++) {
          float s2 = nrm[u];
          s2 += __shfl_xor_sync(kFull, s2, 1);
          s2 += __shfl_xor_sync(kFull, s2, 2);
          s2 += __shfl_xor_sync(kFull, s2, 4);
          const int i = i0 + 4 * u + (lane >> 3);
          if ((lane & 7) == 0 && !(rnorm[i] < 0.f)) rnorm[i] = sqrtf(s2);
        }
      }
    }
#endif
    if constexpr (kFrag)
      if (!lastStage) fragUpdate(p.words + size_t(off) * Dp, K, i0, tid, sel, rnorm, aF, loS);
    __syncwarp();
    for (int base = 0; base < (kStaged || kFrag ? 0 : RW * cpr); base += 32 * kUp) {
      uint4 cw[kUp];
      float rv[kUp][8], ss[kUp];
      bool act[kUp];
#pragma unroll
      for (int u = 0; u < kUp; u++) {
        const int c = base + u * 32 + lane, i = i0 + c / cpr, k = c % cpr;
        act[u] = c < RW * cpr && !(rnorm[i] < 0.f);
        if (kWhole || act[u]) {
          // kWhole: every chunk of a pass is a row of this warp's; one that
          // is not valid (sel -1: codeword 0) reads its own row (shared
          // memory, or the launcher's scratch, which has every row of the
          // CTA) and stores nothing: no branch, and no other warp's rows.
          int jj = -1 - sel[i];
          jj = (jj < 0 || jj >= K) ? 0 : jj;
          cw[u] = __ldg(reinterpret_cast<const uint4*>(p.words + (size_t(off) + jj) * Dp) + k);
          if constexpr (!RS) loadRes(rv[u], i, k);
        }
      }
#pragma unroll
      for (int u = 0; u < kUp; u++) {
        const int c = base + u * 32 + lane, i = i0 + c / cpr, k = c % cpr;
        ss[u] = 0.f;
        if (kWhole || act[u]) {
          // With RS the residual is read here, from shared memory, so that
          // only the codeword chunks hold registers while the loads fly.
          if constexpr (RS) loadRes(rv[u], i, k);
          float r[8];
          uint32_t h[4];
          const float s2 = subChunk(rv[u], cw[u], r, h);
          if (act[u]) {
            ss[u] = s2;
            float4* rr = reinterpret_cast<float4*>(res + size_t(i) * Dp) + 2 * k;
            rr[0] = make_float4(r[0], r[1], r[2], r[3]);
            rr[1] = make_float4(r[4], r[5], r[6], r[7]);
            if constexpr (!kNoATile<AR>) *reinterpret_cast<uint4*>(sA + aOff<BM>(i, k)) = make_uint4(h[0], h[1], h[2], h[3]);
          }
        }
        if constexpr (!kWhole) addRowNorm(rnorm2, act[u] ? i : -1, ss[u], cpr, lane);
      }
      if constexpr (kWhole) {
        int u;
        const float s2 = rowSums<kUp, kSeg>(ss, lane, u);
        const int c = base + u * 32 + lane, i = i0 + c / cpr;
        if (lane % (kSeg / kUp) == 0 && !(rnorm[i] < 0.f)) rnorm[i] = sqrtf(s2);
      }
    }
    __syncwarp();
    for (int ii = lane; ii < RW; ii += 32) {
      const int i = i0 + ii;
      if (!(rnorm[i] < 0.f)) {  // valid (NaN from a non-finite x included)
        if constexpr (!kWhole) rnorm[i] = sqrtf(rnorm2[i]);
        p.codes[(row0 + i) * p.Q + q] = -1 - sel[i];
        if constexpr (AW) codesS[q * BM + i] = static_cast<uint16_t>(-1 - sel[i]);
      }
    }
  }
#if !RVQ_BULK
  cpWait<0>();
#endif
  cbar();
}

// writeQuantized writes the CTA's valid rows of quantized from their codes:
// each chain's codewords summed in stage order from +0, then the second
// chain's sum added to the first's: the CPU's operations in its order.
// Thread per 8-value chunk of a row.
template <int BM, int NTH>
__device__ __forceinline__ void writeQuantized(const Params& p, long long row0) {
  const int Dp = static_cast<int>(p.Dp), D = static_cast<int>(p.D), Q = static_cast<int>(p.Q);
  const int split = static_cast<int>(p.split), cpr = Dp / 8;
  for (int c = threadIdx.x; c < BM * cpr; c += NTH) {
    const int i = c / cpr, k = c % cpr;
    const long long row = row0 + i;
    if (row >= p.rows || !rowValid(row, p.T, p.lengths)) continue;
    float tot[8], a[8];
    for (int ch = 0; ch < (split > 0 ? 2 : 1); ch++) {
      const int lo = ch == 0 ? 0 : split, hi = (ch == 0 && split > 0) ? split : Q;
#pragma unroll
      for (int v = 0; v < 8; v++) a[v] = 0.f;
#pragma unroll 4
      for (int q = lo; q < hi; q++) {
        int j = p.codes[row * Q + q];
        j = (j < 0 || j >= p.meta[q * 4 + 1]) ? 0 : j;  // only after a non-finite x
        float cv[8];
        bf8(__ldg(reinterpret_cast<const uint4*>(p.words + (size_t(p.meta[q * 4]) + j) * Dp) + k), cv);
#pragma unroll
        for (int e = 0; e < 8; e++) a[e] += cv[e];
      }
#pragma unroll
      for (int v = 0; v < 8; v++) tot[v] = ch == 0 ? a[v] : tot[v] + a[v];
    }
    float* o = p.out + row * D + k * 8;
#pragma unroll
    for (int v = 0; v < 8; v++)
      if (k * 8 + v < D) o[v] = tot[v];
  }
}

// writeQuantizedGather is writeQuantized for the AW kernels (Dp = 64 AK
// compiled in), after the chains: warp w sums its own rows, RP at a time,
// each stage's codeword rows brought by bulk copies into one of NB buffers
// (sA, then the free ring), NB stages in flight, into the same per-chunk
// sums in the same order; the sums leave through shared memory by bulk
// copies (16-byte-aligned rows, no split), else by the lanes' stores.
template <int BM, int NTH, int S, int BN, int WN, bool RS, int AK, int AR>
__device__ __forceinline__ void writeQuantizedGather(const Params& p, long long row0, char* smem,
                                                     const uint16_t* codesS, const int* metaS) {
#if RVQ_BULK
  constexpr int Dp = AK * kBK, cpr = Dp / 8, kRowB = Dp * 2, RW = BM / (NTH / 32);
  // One pass: a lane sums kPC chunks of the warp's RW rows (8 at D = 128,
  // 16 at D = 256: the accumulators are free after the chains), so each
  // stage's copies are one latency for all of the warp's rows.
  constexpr int kPC = RW * cpr / 32, RP = RW;  // chunks a lane, rows a pass
  constexpr int kBufB = BM * kRowB;
  // The buffers: the A tile and the ring's bytes (kNoATile: the ring's).
  constexpr bool kNoA = kNoATile<AR>;
  constexpr int NB = (kNoA ? 0 : 1) + S * BN * kBK * 2 / kBufB;
  static_assert(RW % RP == 0 && NB <= kGatherBars, "writeQuantizedGather tiling");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, i0 = warp * RW;
  const int Q = static_cast<int>(p.Q), split = static_cast<int>(p.split), D = static_cast<int>(p.D);
  const bool vec = D % 4 == 0 && (reinterpret_cast<uintptr_t>(p.out) & 15) == 0;
  auto buf = [&](int b) {
    if constexpr (kNoA) return uint32_t(smemAddr(smem) + aTileBytes<BM, AR>(Dp) + b * kBufB);
    return smemAddr(smem) + (b == 0 ? 0 : BM * Dp * 2 + (b - 1) * kBufB);
  };
  int g = 0;  // stage loads issued by this warp: buffer g % NB, parity (g / NB) & 1
  for (int r0 = i0; r0 < i0 + RW; r0 += RP) {
    const long long rowL = row0 + r0 + (lane % RP);
    const unsigned valid = __ballot_sync(kFull, lane < RP && rowL < p.rows && rowValid(rowL, p.T, p.lengths));
    auto issue = [&](int qq, int gg) {
      const uint32_t bar = gatherBar<BM, S, AR>(smem, Dp, BN, WN, RS, warp, gg % NB);
      if (lane == 0) mbarExpectTx(bar, __popc(valid) * kRowB);
      for (int t = lane; t < RP; t += 32)
        if ((valid >> t) & 1) {
          int j = codesS[qq * BM + r0 + t];
          j = j >= metaS[2 * qq + 1] ? 0 : j;  // only after a non-finite x
          bulkCopy(buf(gg % NB) + (r0 + t) * kRowB, p.words + (size_t(metaS[2 * qq]) + j) * Dp, kRowB, bar);
        }
    };
    proxyFence();  // generic accesses of the buffers before the copies
    for (int qq = 0; qq < NB && qq < Q; qq++) issue(qq, g + qq);
    float a[kPC][8];
#pragma unroll
    for (int u = 0; u < kPC; u++)
#pragma unroll
      for (int v = 0; v < 8; v++) a[u][v] = 0.f;
    for (int qq = 0; qq < Q; qq++, g++) {
      mbarWait(gatherBar<BM, S, AR>(smem, Dp, BN, WN, RS, warp, g % NB), (g / NB) & 1);
#pragma unroll
      for (int u = 0; u < kPC; u++) {
        const int c = u * 32 + lane, i = r0 + c / cpr, k = c % cpr;
        uint4 w;
        asm volatile("ld.shared.v4.u32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(w.x), "=r"(w.y), "=r"(w.z), "=r"(w.w)
                     : "r"(buf(g % NB) + i * kRowB + k * 16));
        float cv[8];
        bf8(w, cv);
#pragma unroll
        for (int e = 0; e < 8; e++) a[u][e] += cv[e];
      }
      if (qq == split - 1) {  // the first chain's sum is complete (split > 0): parked in out
#pragma unroll
        for (int u = 0; u < kPC; u++) {
          const int c = u * 32 + lane, i = r0 + c / cpr, k = c % cpr;
          if ((valid >> (i - r0)) & 1)
#pragma unroll
            for (int v = 0; v < 8; v++)
              if (k * 8 + v < D) p.out[(row0 + i) * D + k * 8 + v] = a[u][v];
#pragma unroll
          for (int v = 0; v < 8; v++) a[u][v] = 0.f;
        }
      }
      __syncwarp();  // every lane read the buffer before it is refilled
      proxyFence();
      if (qq + NB < Q) issue(qq + NB, g + NB);
    }
    if (vec && split == 0) {
      // The pass's sums leave by bulk copies: the lanes stage them as fp32
      // rows in the warp's parts of buffers 0 and 1 (every copy into those
      // has been waited for and read; a row of D <= Dp floats takes two
      // rows of codewords there), then lane t copies row r0 + t when it is
      // valid. The stores then drain from the SM in the background instead
      // of holding the lanes' registers (2 kPC 16-byte stores a lane).
      static_assert(NB >= 2 && RW % 2 == 0, "writeQuantizedGather staging");
      auto staged = [&](int t) { return buf(2 * t / RW) + (r0 + 2 * (t % (RW / 2))) * kRowB; };
#pragma unroll
      for (int u = 0; u < kPC; u++) {
        const int c = u * 32 + lane, t = c / cpr, k = c % cpr;
        const uint32_t dst = staged(t) + k * 32;
        // (D % 8 == 4: a row's last chunk is half of one)
        if (k * 8 + 4 <= D) stShared4(dst, a[u][0], a[u][1], a[u][2], a[u][3]);
        if (k * 8 + 8 <= D) stShared4(dst + 16, a[u][4], a[u][5], a[u][6], a[u][7]);
      }
      proxyFence();  // the stores above before the bulk copies read them
      __syncwarp();
      if (lane < RW && ((valid >> lane) & 1)) {
        bulkStore(p.out + (row0 + r0 + lane) * D, staged(lane), D * 4);
        bulkStoreRead();
      }
    } else {
#pragma unroll
      for (int u = 0; u < kPC; u++) {
        const int c = u * 32 + lane, i = r0 + c / cpr, k = c % cpr;
        if (!((valid >> (i - r0)) & 1)) continue;
        float o8[8];
        float* o = p.out + (row0 + i) * D + k * 8;
#pragma unroll
        for (int v = 0; v < 8; v++) o8[v] = split > 0 && k * 8 + v < D ? o[v] + a[u][v] : a[u][v];
        if (vec && k * 8 + 8 <= D) {
          reinterpret_cast<float4*>(o)[0] = make_float4(o8[0], o8[1], o8[2], o8[3]);
          reinterpret_cast<float4*>(o)[1] = make_float4(o8[4], o8[5], o8[6], o8[7]);
        } else {
#pragma unroll
          for (int v = 0; v < 8; v++)
            if (k * 8 + v < D) o[v] = o8[v];
        }
      }
    }
  }
#endif
}

// writePadding gives the CTA's padding rows code -1 and quantized 0.
__device__ __forceinline__ void writePadding(const Params& p, long long row0, int BM, int nth) {
  for (int i = threadIdx.x >> 5; i < BM; i += nth >> 5) {
    long long row = row0 + i;
    if (row >= p.rows || rowValid(row, p.T, p.lengths)) continue;
    for (int d = threadIdx.x & 31; d < p.D; d += 32) p.out[row * p.D + d] = 0.f;
    for (int q = threadIdx.x & 31; q < p.Q; q += 32) p.codes[row * p.Q + q] = -1;
  }
}

// produceAll is the producer warp of the PW variants (lane 0 works): it
// streams every (stage, N-tile, k-chunk) load of every chain through the
// ring, waiting on each slot's empty barrier, never on the compute warps'
// decisions (the sequence of codebook tiles does not depend on them).
template <int BM, int BN, int WN, int S, int NW, int AR>
__device__ __forceinline__ void produceAll(const Params& p, char* smem) {
#if RVQ_BULK
  using C = Cfg<BM, BN, 1, WN, S>;
  if ((threadIdx.x & 31) != 0) return;
  const int Dp = static_cast<int>(p.Dp), KC = Dp / kBK, Q = static_cast<int>(p.Q);
  char* ring = smem + aTileBytes<BM, AR>(Dp);
  float* hnRing = reinterpret_cast<float*>(ring + size_t(S) * C::kSlotB);
  const uint32_t fullA = smemAddr(hnRing + S * BN + WN * BM * 3 + 3 * BM), emptyA = fullA + 8 * S;
  const uint32_t ringAddr = smemAddr(ring);
  int L = 0;
  for (int q = 0; q < Q; q++) {  // the chains' stages in order: 0..Q-1
    const int off = p.meta[q * 4], K = p.meta[q * 4 + 1];
    for (int nt = 0; nt * BN < K; nt++)
      for (int kc = 0; kc < KC; kc++, L++) {
        const int s = L % S;
        if (L >= S) mbarWait(emptyA + 8 * s, ((L / S) - 1) & 1);
        mbarExpectTx(fullA + 8 * s, C::kSlot);
        {
          using SC = SlotCopy<BN>;
#pragma unroll
          for (int t = 0; t < SC::kCopies; t++)
            bulkCopy(ringAddr + s * C::kSlotB + t * SC::kBytes, SC::src(p.tiles, off, nt, kc, t, KC), SC::kBytes,
                     fullA + 8 * s);
          bulkCopy(smemAddr(hnRing + s * BN), p.hn + off + nt * BN, BN * 4, fullA + 8 * s);
        }
      }
  }
#endif
}

template <int BM, int BN, int WM, int WN, int S, bool WG, class B, bool RS, bool PW, int AK, int AR>
__device__ __forceinline__ void encode(const Params& p) {
  using C = Cfg<BM, BN, WM, WN, S>;
  constexpr bool AW = AK > 0;
  extern __shared__ __align__(1024) char rvqSmem[];
  long long row0 = static_cast<long long>(blockIdx.x) * BM;
  // The AW pipeline is compiled for Dp = 64 AK (the launcher runs it for
  // that width only). Checked here, before the roles split: a trap inside
  // the compute path makes ptxas drop its setmaxnreg register budget.
  if constexpr (AK > 0 && RVQ_HAVE_WGMMA && RVQ_BULK)
    if (p.Dp != AK * kBK) __trap();
#if RVQ_BULK
  {  // the ring's barriers: full (one arrival + bytes), empty (every compute warp)
    const int Dp = static_cast<int>(p.Dp);
    const uint32_t fullA = smemAddr(rvqSmem + aTileBytes<BM, AR>(Dp) + size_t(S) * C::kSlotB) +
                           4 * (S * BN + WN * BM * 3 + 3 * BM),
                   emptyA = fullA + 8 * S;
    if (threadIdx.x == 0) {
      for (int s = 0; s < S; s++) {
        mbarInit(fullA + 8 * s, 1);
        mbarInit(emptyA + 8 * s, C::kWarps);
      }
      if constexpr (AW)
        for (int b = 0; b < C::kWarps * kGatherBars; b++)
          mbarInit(gatherBar<BM, S, AR>(rvqSmem, Dp, BN, WN, RS, 0, b), 1);
    }
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    __syncthreads();
  }
#endif
  // The role is warp-uniform by construction (a shuffle from lane 0), so
  // that ptxas sees one branch per warpgroup role and applies the
  // setmaxnreg budgets to its register allocation.
  const int wgIdx = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
  if (PW && (AW ? wgIdx == C::kWarps / 4 : threadIdx.x >= C::kThreads)) {
    // The producer warp (AW: warpgroup, whose first warp produces and which
    // hands registers to the compute warpgroups: setmaxnreg).
#if RVQ_HAVE_WGMMA
    if constexpr (AW) regsDec<kProducerRegs>();
#endif
    if (threadIdx.x < C::kThreads + 32) produceAll<BM, BN, WN, S, C::kWarps, AR>(p, rvqSmem);
    // The producer returns here: the roles never rejoin.
    return;
  }
#if RVQ_HAVE_WGMMA
  if constexpr (AW) regsInc<kComputeRegs>();
#endif
  writePadding(p, row0, BM, C::kThreads);
  int split = static_cast<int>(p.split), Q = static_cast<int>(p.Q);
  // Read by writeQuantizedGather only, after the chains' barriers.
  int* const metaS = stageMeta<BM, S, AR>(rvqSmem, static_cast<int>(p.Dp), BN, WN, RS);
  if constexpr (AW)
    for (int i = threadIdx.x; i < 2 * Q; i += C::kThreads) metaS[i] = p.meta[(i >> 1) * 4 + (i & 1)];
  Pipe pipe;
  // One or two chains (a split), through one copy of encodeChain: the
  // kernel's code is large and instruction-cache misses cost.
  for (int ch = 0; ch < (split > 0 ? 2 : 1); ch++)
    encodeChain<BM, BN, WM, WN, S, WG, B, RS, PW, AK, AR>(p, ch == 0 ? 0 : split, ch == 0 && split > 0 ? split : Q, row0,
                                                          rvqSmem, pipe);
  // encodeChain ended with a compute-thread barrier: every stage's codes
  // are in codesS.
#if RVQ_HAVE_WGMMA && RVQ_BULK
  if constexpr (AW) {
    writeQuantizedGather<BM, C::kThreads, S, BN, WN, RS, AK, AR>(
        p, row0, rvqSmem, stageCodes<BM, S, AR>(rvqSmem, static_cast<int>(p.Dp), BN, WN, RS), metaS);
    return;
  }
#endif
  writeQuantized<BM, C::kThreads>(p, row0);
}

}  // namespace rvqk

// Variants (BM, BN, WM x WN warps, ring depth S); the Go launcher picks one
// per D (shared memory) and $EDGE_RVQ_VARIANT overrides it for sweeps.
// AR (AK > 0 only): 1 (the a suffix) the A operand in registers, loaded
// from the A tile; 2 (g; no variant of it is instantiated) handed to the
// next stage by the update; 3 (f) the residual's high halves.
#define RVQ_VARIANT(name, BM, BN, WM, WN, S, MINB, WG, B, RS, PW, AK, AR)                                    \
  extern "C" __global__ void __launch_bounds__(WM * WN * 32 + (AK > 0 ? 128 : PW ? 32 : 0), MINB)                \
      name(const __grid_constant__ RvqEncodeParams p) {                                                          \
    static_assert(!(AR) || (AK) > 0, "A in registers needs the AW pipeline");                                 \
    rvqk::encode<BM, BN, WM, WN, S, WG, rvqk::B, RS, PW, AK, AR>(p);                                          \
  }
// name: m<BM> n<BN> w<WM><WN> (warps) s<ring depth>, p: packed running
// minimum (all), r: fp32 residual in shared memory, x2: two CTAs an SM,
// w: a producer warp (one more warp in the block) streams the ring, a: the
// A operand in registers, f: the fp32 residual in the A registers (high
// halves) and global scratch (low halves). Only the variants the launcher
// (plugins/rvq/variants_cuda.go) can pick are instantiated.
// mma.sync, the choice off Hopper (and on Hopper for the widest rows).
RVQ_VARIANT(rvq_encode_m128n128w24s4p, 128, 128, 2, 4, 4, 1, false, Best, false, false, 0, 0)
RVQ_VARIANT(rvq_encode_m64n128w14s4p, 64, 128, 1, 4, 4, 1, false, Best, false, false, 0, 0)
// Hopper: wgmma m64n128k16 from shared memory, a warpgroup per 64 rows (the
// mma.sync tiling WM x 1 warps, 16 rows x 128 codewords a warp, elsewhere).
RVQ_VARIANT(rvq_encode_wg_m128n128s3px2, 128, 128, 8, 1, 3, 2, true, Best, false, false, 0, 0)
RVQ_VARIANT(rvq_encode_wg_m128n128s3pwx2, 128, 128, 8, 1, 3, 2, true, Best, false, true, 0, 0)
RVQ_VARIANT(rvq_encode_wg_m192n128s4pw, 192, 128, 12, 1, 4, 1, true, Best, false, true, 0, 0)
RVQ_VARIANT(rvq_encode_wg_m256n128s3p, 256, 128, 16, 1, 3, 1, true, Best, false, false, 0, 0)
// Hopper, asynchronous N-tiles (wa): two accumulator sets per warpgroup, the
// next N-tile's wgmma in flight while the warps fold the current one's
// scores; a producer warpgroup and setmaxnreg (384 threads, one CTA an SM).
// The pipeline is compiled for one padded width (the _d<Dp> suffix, AK =
// Dp / 64 k-chunks a tile, S >= 2 AK ring slots); elsewhere than sm_90a the
// same kernels run the plain loop for any D.
RVQ_VARIANT(rvq_encode_wa_m128n128s6pwra_d128, 128, 128, 8, 1, 6, 1, true, Best, true, true, 2, 1)
// f: the fp32 residual split between the A fragments (high halves) and
// global scratch (low halves), updated in place: at D = 256 a ring of 13
// slots, the op's choice there.
RVQ_VARIANT(rvq_encode_wa_m128n128s13pwf_d256, 128, 128, 8, 1, 13, 1, true, Best, false, true, 4, 3)

// rvq_small_score: stage q of the small-batch path. Grid (ceil(K/256),
// nrows), block 256: thread e scores entry e exactly (CPU formula) for the
// row rows[blockIdx.y] (residual src: x for the chain's first stage, else
// res) and the CTA's lowest (score, index) goes to keys[blockIdx.y] with
// atomicMin. D <= 1024: the residual row is staged in shared memory.
extern "C" __global__ void __launch_bounds__(256) rvq_small_score(const __grid_constant__ RvqSmallScoreParams p) {
  const float* x = p.x;
  const float* res = p.res;
  const int* rowList = p.rowList;
  const long long first = p.first, D = p.D, Dp = p.Dp, off = p.off, K = p.K;
  const uint16_t* words = p.words;
  const float* hn = p.hn;
  unsigned long long* keys = p.keys;
  __shared__ float r[1024];
  __shared__ unsigned long long wk[8];
  const long long row = rowList[blockIdx.y];
  const float* src = first ? x + row * D : res + row * Dp;
  for (int d = threadIdx.x; d < D; d += blockDim.x) r[d] = src[d];
  __syncthreads();
  const long long e = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x;
  unsigned long long key = ~0ull;
  if (e < K) key = rvqk::orderKey(rvqk::exactScore(r, words + (off + e) * Dp, static_cast<int>(D), hn[off + e]), static_cast<int>(e));
  for (int o = 16; o > 0; o >>= 1) key = min(key, __shfl_xor_sync(rvqk::kFull, key, o));
  if ((threadIdx.x & 31) == 0) wk[threadIdx.x >> 5] = key;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < (blockDim.x >> 5); w++) key = min(key, wk[w]);
    atomicMin(keys + blockIdx.y, key);
  }
}

// rvq_small_update applies stage q's winners: grid nrows, block 128. For row
// rows[i]: j = keys[i] & 0xffffffff; codes[row][q] = j; res = src - C_j;
// chain sum (out for the first chain, acc for the second) += C_j (= C_j on
// the chain's first stage); on the second chain's last stage out += acc.
// keys[i] is reset to all ones for the next stage.
extern "C" __global__ void __launch_bounds__(128) rvq_small_update(const __grid_constant__ RvqSmallUpdateParams p) {
  const float* x = p.x;
  float* res = p.res;
  float* acc = p.acc;
  float* out = p.out;
  int* codes = p.codes;
  const int* rowList = p.rowList;
  const long long D = p.D, Dp = p.Dp, Q = p.Q, q = p.stage, first = p.first, secondChain = p.secondChain,
                  last = p.last, off = p.off;
  const uint16_t* words = p.words;
  unsigned long long* keys = p.keys;
  const long long row = rowList[blockIdx.x];
  const int j = static_cast<int>(keys[blockIdx.x] & 0xffffffffu);
  const float* src = first ? x + row * D : res + row * Dp;
  float* sum = secondChain ? acc + row * Dp : out + row * D;
  const uint16_t* w = words + (off + j) * Dp;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    float v = rvqk::bf(w[d]);
    float r = src[d] - v;
    float a = (first ? 0.f : sum[d]) + v;
    res[row * Dp + d] = r;
    sum[d] = a;
    if (secondChain && last) out[row * D + d] += a;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    codes[row * Q + q] = j;
    keys[blockIdx.x] = ~0ull;
  }
}

// rvq_stream: the whole encode of a few frames (streaming) in one launch.
// Grid: (valid rows) x kStreamSplit CTAs in clusters of kStreamSplit (one
// cluster per frame, rows[blockIdx.x / kStreamSplit]); block 256. Each CTA
// of a cluster keeps the frame's fp32 residual in shared memory and, per
// stage, scores its 1/kStreamSplit of the codebook exactly (the CPU formula:
// exact, no guard), reduces to the lowest (score, index) key, and the
// cluster merges the CTAs' keys through distributed shared memory; every CTA
// then applies the same winner to its residual copy (identical fp32
// operations), and rank 0 writes the code and, at the end, quantized (the
// CPU's sums in its order). D <= 1024. Hopper and newer (clusters); the
// launcher uses rvq_small_score/rvq_small_update elsewhere.
#define RVQ_STREAM_SPLIT 8
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define RVQ_STREAM_CLUSTER __cluster_dims__(RVQ_STREAM_SPLIT, 1, 1)
#else
#define RVQ_STREAM_CLUSTER
#endif
extern "C" __global__ void RVQ_STREAM_CLUSTER __launch_bounds__(256)
    rvq_stream(const __grid_constant__ RvqStreamParams p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const float* x = p.x;
  const int* rowList = p.rowList;
  const long long D = p.D, Dp = p.Dp, Q = p.Q, split = p.split;
  const uint16_t* words = p.words;
  const float* hn = p.hn;
  const int* meta = p.meta;
  int* codes = p.codes;
  float* out = p.out;
  namespace cg = cooperative_groups;
  cg::cluster_group cluster = cg::this_cluster();
  __shared__ float r[1024];
  __shared__ unsigned long long warpKey[8];
  __shared__ unsigned long long ctaKey[2];  // double-buffered by stage parity
  const int g = static_cast<int>(cluster.block_rank()), G = RVQ_STREAM_SPLIT;
  const long long row = rowList[blockIdx.x / G];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int nq = static_cast<int>(Q), sp = static_cast<int>(split), d = static_cast<int>(D);
  for (int ch = 0; ch < (sp > 0 ? 2 : 1); ch++) {
    const int q0 = ch == 0 ? 0 : sp, q1 = (ch == 0 && sp > 0) ? sp : nq;
    for (int k = tid; k < d; k += blockDim.x) r[k] = x[row * D + k];
    __syncthreads();
    for (int q = q0; q < q1; q++) {
      const int off = meta[q * 4], K = meta[q * 4 + 1];
      const int chunk = (K + G - 1) / G, lo = g * chunk, hi = min(K, lo + chunk);
      unsigned long long key = ~0ull;
      for (int e = lo + tid; e < hi; e += blockDim.x)
        key = min(key, rvqk::orderKey(rvqk::exactScore(r, words + (size_t(off) + e) * Dp, d, hn[off + e]), e));
      for (int o = 16; o > 0; o >>= 1) key = min(key, __shfl_xor_sync(rvqk::kFull, key, o));
      if (lane == 0) warpKey[warp] = key;
      __syncthreads();
      if (tid == 0) {
        for (int w = 1; w < static_cast<int>(blockDim.x >> 5); w++) key = min(key, warpKey[w]);
        ctaKey[q & 1] = key;
      }
      cluster.sync();  // every CTA's key for this stage is written
      unsigned long long best = ~0ull;
      for (int c = 0; c < G; c++) best = min(best, *cluster.map_shared_rank(&ctaKey[q & 1], c));
      // (ctaKey[q & 1] is rewritten two stages later, after the next
      // cluster.sync, so no second barrier is needed here.)
      int j = static_cast<int>(best & 0xffffffffu);
      j = (j < 0 || j >= K) ? 0 : j;  // only after a non-finite x
      const uint16_t* w = words + (size_t(off) + j) * Dp;
      for (int k = tid; k < d; k += blockDim.x) r[k] -= rvqk::bf(w[k]);
      if (g == 0 && tid == 0) codes[row * Q + q] = j;
      __syncthreads();
    }
  }
  cluster.sync();  // keep every CTA's shared memory alive until all have read it
  if (g == 0) {
    __syncthreads();
    for (int k = tid; k < d; k += blockDim.x) {
      float tot = 0.f;
      for (int ch = 0; ch < (sp > 0 ? 2 : 1); ch++) {
        const int q0 = ch == 0 ? 0 : sp, q1 = (ch == 0 && sp > 0) ? sp : nq;
        float a = 0.f;
        for (int q = q0; q < q1; q++) a += rvqk::bf(words[(size_t(meta[q * 4]) + codes[row * Q + q]) * Dp + k]);
        tot = ch == 0 ? a : tot + a;
      }
      out[row * D + k] = tot;
    }
  }
#else
  __trap();  // clusters need sm_90
#endif
}

// rvq_pad_rows gives padding rows (t >= lengths[b]) code -1 and quantized 0.
// Grid ceil(rows/8), block 256: a warp per row.
extern "C" __global__ void __launch_bounds__(256) rvq_pad_rows(const __grid_constant__ RvqPadRowsParams p) {
  const int* lengths = p.lengths;
  const long long rows = p.rows, T = p.T, D = p.D, Q = p.Q;
  int* codes = p.codes;
  float* out = p.out;
  long long row = static_cast<long long>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (row >= rows || rvqk::rowValid(row, T, lengths)) return;
  for (int d = threadIdx.x & 31; d < D; d += 32) out[row * D + d] = 0.f;
  if (codes != nullptr)
    for (int q = threadIdx.x & 31; q < Q; q += 32) codes[row * Q + q] = -1;
}

// rvq_check flags the valid rows of x whose values are not finite or whose
// squared norm (any summation order) may exceed limit: status[0] = the
// lowest such row (atomicMin; the host sets it to all ones first).
// Grid ceil(rows/8), block 256: a warp per row. The host re-checks the
// flagged row with the CPU's exact rule and message.
extern "C" __global__ void __launch_bounds__(256) rvq_check(const __grid_constant__ RvqCheckParams p) {
  const float* x = p.x;
  const int* lengths = p.lengths;
  const long long rows = p.rows, T = p.T, D = p.D;
  const double limit = p.limit;
  unsigned long long* status = p.status;
  long long row = static_cast<long long>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  if (row >= rows || !rvqk::rowValid(row, T, lengths)) return;
  float ss = 0.f;
  bool bad = false;
  for (int d = threadIdx.x & 31; d < D; d += 32) {
    float v = x[row * D + d];
    bad |= !isfinite(v);
    ss += v * v;
  }
  for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(rvqk::kFull, ss, o);
  bad = __any_sync(rvqk::kFull, bad) || !(ss <= static_cast<float>(limit));
  if (bad && (threadIdx.x & 31) == 0) atomicMin(status, static_cast<unsigned long long>(row));
}

// rvq_decode: quantized = the codewords that codes select, summed chain by
// chain in rvq_encode's order (bit-identical to its quantized; with words32
// set, the fp32 codewords, bit-identical to rvq_encode_f32's). Grid
// ceil(rows/8), block 256: a warp per row, lanes over dimensions. A code
// outside 0..K_q-1 on a valid row sets status[0] = min(row*Q + q) (atomicMin;
// the host formats the error) and the row is left as it is. Padding rows get
// 0.
extern "C" __global__ void __launch_bounds__(256) rvq_decode(const __grid_constant__ RvqDecodeParams p) {
  const int* codes = p.codes;
  const int* lengths = p.lengths;
  const long long rows = p.rows, T = p.T, D = p.D, Dp = p.Dp, Q = p.Q, split = p.split;
  const uint16_t* words = p.words;
  const float* words32 = p.words32;
  const int* meta = p.meta;
  float* out = p.out;
  unsigned long long* status = p.status;
  long long row = static_cast<long long>(blockIdx.x) * 8 + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= rows) return;
  if (!rvqk::rowValid(row, T, lengths)) {
    for (int d = lane; d < D; d += 32) out[row * D + d] = 0.f;
    return;
  }
  const int* c = codes + row * Q;
  for (int q = lane; q < Q; q += 32) {
    if (c[q] < 0 || c[q] >= meta[q * 4 + 1]) atomicMin(status, static_cast<unsigned long long>(row * Q + q));
  }
  for (int q = 0; q < Q; q++)
    if (c[q] < 0 || c[q] >= meta[q * 4 + 1]) return;
  const int chains = split > 0 ? 2 : 1;
  for (int d = lane; d < D; d += 32) {
    float total = 0.f;
    for (int ch = 0; ch < chains; ch++) {
      int lo = ch == 0 ? 0 : static_cast<int>(split), hi = (ch == 0 && split > 0) ? static_cast<int>(split) : static_cast<int>(Q);
      float a = 0.f;
      for (int q = lo; q < hi; q++) {
        const long long at = (static_cast<long long>(meta[q * 4]) + c[q]) * Dp + d;
        a += words32 != nullptr ? words32[at] : rvqk::bf(words[at]);
      }
      total = ch == 0 ? a : total + a;
    }
    out[row * D + d] = total;
  }
}

// rvq_encode_f32: greedy RVQ with fp32 codebooks (published EnCodec, Mimi,
// DAC checkpoints), exact: every score is the CPU op's bit for bit, so the
// codes are the CPU's (ties: the lowest index) and quantized is
// bit-identical. No near-tie guard is needed: nothing is rounded to a
// narrower type.
//
// Grid: ceil(n / 64) CTAs, CTA c owning list positions [64c, 64c + 64) of
// rowList (the valid rows); block 256 = 16 x 16 threads (ty = tid / 16,
// tx = tid % 16). Per chain the CTA copies its rows of x into its residual
// rows res[pos][0..Dp) (zeros past D), then per stage scores the whole
// codebook as a register-blocked SGEMM: N-tiles of 128 codewords, k-chunks
// of 32 dimensions staged in shared memory (A: 64 residual rows, B: 128
// codewords, both dimension-major), thread (ty, tx) accumulating rows
// 4ty..4ty+3 against codewords 4tx..4tx+3 and 64+4tx..64+4tx+3 of the
// tile. Each accumulator is the CPU kernels' dot: fmaf over d = 0..Dp-1 in
// increasing order from +0 (the zero padding adds +0 products, which leave
// it unchanged), and the score hn_e - dot is theirs. The per-row minimum is
// the lowest (score, index) key (orderKey), folded over a thread's entries,
// then over the 16 threads of a half-warp that share a row (shuffles). The
// update (a warp per row, lanes over dimensions) writes the code and
// applies r -= C_j in fp32, the CPU's operation; quantized is written at
// the end from the codes, each chain's codewords summed in stage order from
// +0 and the second chain's sum added to the first's, as the CPU does.
// Padding codebook rows (hn = 2^120, zero words) never win.
//
// Shapes: D <= 1024 (Dp = roundup(D, 64)), Q <= 32, K_q <= 4096, every stage
// padded to a multiple of 256 rows (so an N-tile never leaves its stage).
// Shared memory: 8.5 KiB (A) + 16.5 KiB (B) + 512 B (keys), static. The
// input check is rvq_check's, launched before; padding rows are
// rvq_pad_rows'.
namespace rvqf {
constexpr int kBM = 64, kBN = 128, kBK = 32, kPad = 4;
}  // namespace rvqf

extern "C" __global__ void __launch_bounds__(256) rvq_encode_f32(const __grid_constant__ RvqEncodeF32Params p) {
  constexpr int kBM = rvqf::kBM, kBN = rvqf::kBN, kBK = rvqf::kBK, kPad = rvqf::kPad;
  const float* x = p.x;
  const int* rowList = p.rowList;
  const long long n = p.n, D = p.D, Dp = p.Dp, Q = p.Q, split = p.split;
  const float* words = p.words32;
  const float* hn = p.hn;
  const int* meta = p.meta;
  int* codes = p.codes;
  float* out = p.out;
  float* res = p.res;
  __shared__ __align__(16) float As[kBK][kBM + kPad];
  __shared__ __align__(16) float Bs[kBK][kBN + kPad];
  __shared__ unsigned long long rowKey[kBM];
  const int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4, lane = tid & 31, warp = tid >> 5;
  const long long base = static_cast<long long>(blockIdx.x) * kBM;
  const int nq = static_cast<int>(Q), sp = static_cast<int>(split);
  const int kcs = static_cast<int>(Dp / kBK);
  for (int ch = 0; ch < (sp > 0 ? 2 : 1); ch++) {
    const int q0 = ch == 0 ? 0 : sp, q1 = (ch == 0 && sp > 0) ? sp : nq;
    // The chain starts from x: res = x, zero padded to Dp.
    for (int m = warp; m < kBM; m += 8) {
      const long long pos = base + m;
      if (pos >= n) break;
      const long long row = rowList[pos];
      for (long long d = lane; d < Dp; d += 32) res[pos * Dp + d] = d < D ? x[row * D + d] : 0.f;
    }
    __syncthreads();
    for (int q = q0; q < q1; q++) {
      const long long off = meta[q * 4];
      const int K = meta[q * 4 + 1];
      unsigned long long key[4] = {~0ull, ~0ull, ~0ull, ~0ull};
      for (int nt = 0; nt * kBN < K; nt++) {
        float acc[4][8];
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
          for (int j = 0; j < 8; j++) acc[i][j] = 0.f;
        for (int kc = 0; kc < kcs; kc++) {
          // A: 64 rows x 32 dims, two float4 a thread; B: 128 codewords x
          // 32 dims, four float4 a thread; both stored dimension-major.
#pragma unroll
          for (int i = 0; i < 2; i++) {
            const int idx = tid + 256 * i, m = idx >> 3, k4 = (idx & 7) * 4;
            float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
            if (base + m < n) v = *reinterpret_cast<const float4*>(res + (base + m) * Dp + kc * kBK + k4);
            As[k4][m] = v.x;
            As[k4 + 1][m] = v.y;
            As[k4 + 2][m] = v.z;
            As[k4 + 3][m] = v.w;
          }
#pragma unroll
          for (int i = 0; i < 4; i++) {
            const int idx = tid + 256 * i, e = idx >> 3, k4 = (idx & 7) * 4;
            const float4 v = *reinterpret_cast<const float4*>(words + (off + nt * kBN + e) * Dp + kc * kBK + k4);
            Bs[k4][e] = v.x;
            Bs[k4 + 1][e] = v.y;
            Bs[k4 + 2][e] = v.z;
            Bs[k4 + 3][e] = v.w;
          }
          __syncthreads();
#pragma unroll 8
          for (int k = 0; k < kBK; k++) {
            const float4 a = *reinterpret_cast<const float4*>(&As[k][ty * 4]);
            const float4 b0 = *reinterpret_cast<const float4*>(&Bs[k][tx * 4]);
            const float4 b1 = *reinterpret_cast<const float4*>(&Bs[k][64 + tx * 4]);
            const float av[4] = {a.x, a.y, a.z, a.w};
            const float bv[8] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
              for (int j = 0; j < 8; j++) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
          }
          __syncthreads();
        }
#pragma unroll
        for (int j = 0; j < 8; j++) {
          const int e = nt * kBN + (j < 4 ? tx * 4 + j : 64 + tx * 4 + j - 4);
          const float h = hn[off + e];
#pragma unroll
          for (int i = 0; i < 4; i++) key[i] = min(key[i], rvqk::orderKey(h - acc[i][j], e));
        }
      }
#pragma unroll
      for (int i = 0; i < 4; i++) {
        for (int o = 8; o > 0; o >>= 1) key[i] = min(key[i], __shfl_xor_sync(rvqk::kFull, key[i], o));
        if (tx == 0) rowKey[ty * 4 + i] = key[i];
      }
      __syncthreads();
      for (int m = warp; m < kBM; m += 8) {
        const long long pos = base + m;
        if (pos >= n) break;
        int j = static_cast<int>(rowKey[m] & 0xffffffffu);
        j = (j < 0 || j >= K) ? 0 : j;  // only after a non-finite x
        if (lane == 0) codes[static_cast<long long>(rowList[pos]) * Q + q] = j;
        const float* w = words + (off + j) * Dp;
        for (long long d = lane; d < D; d += 32) res[pos * Dp + d] -= w[d];
      }
      __syncthreads();
    }
  }
  for (int m = warp; m < kBM; m += 8) {
    const long long pos = base + m;
    if (pos >= n) break;
    const long long row = rowList[pos];
    for (long long d = lane; d < D; d += 32) {
      float tot = 0.f;
      for (int ch = 0; ch < (sp > 0 ? 2 : 1); ch++) {
        const int q0 = ch == 0 ? 0 : sp, q1 = (ch == 0 && sp > 0) ? sp : nq;
        float a = 0.f;
        for (int q = q0; q < q1; q++) a += words[(static_cast<long long>(meta[q * 4]) + codes[row * Q + q]) * Dp + d];
        tot = ch == 0 ? a : tot + a;
      }
      out[row * D + d] = tot;
    }
  }
}
