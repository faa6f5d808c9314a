/* params.h: the parameter struct of every kernel in kernels/ *.cu, defined
 * once for the CUDA sources, the host replay (kernels/dpxemu) and the Go
 * launchers. Each __global__ function takes exactly one of these structs by
 * value (const __grid_constant__: the kernel reads it in place from the
 * parameter space); the Go side fills its mirror (package kernels, params.go)
 * and passes a pointer to it as the launch's single argument, and
 * runtime/cuda checks the size against the driver's parameter info.
 * kernels/params_test.go pins the mirror's size and every field's offset to
 * this header (through kernels/internal/cabi, which compiles it as C).
 *
 * Layout rules, so that C on the host and CUDA agree byte for byte:
 *   - every field is 8 bytes: a device address, a long long or a double, in
 *     declaration order, so no struct has implicit padding (a narrower field
 *     would need an explicit pad to the next 8 bytes);
 *   - long long and double are 64-bit (checked below). int64_t is not used:
 *     on LP64 hosts it is long, a different C++ type from the kernels' long
 *     long, whose pointers the kernels pass on;
 *   - a device address is a typed pointer in CUDA (and in a host replay that
 *     defines EDGE_PARAMS_HOST_POINTERS), an unsigned long long elsewhere;
 *     pointers are 64-bit there (checked below). Element types that are CUDA
 *     vector types or kernel-private structs are declared by their scalar
 *     element type and cast by the kernel (noted at the field).
 *
 * Field names are the Go mirror's with the first letter in lower case. Units
 * are elements unless a field says bytes. Shapes and layouts are the
 * kernels' (see each .cu file's comment at the kernel); a field documented
 * "0/1" is a flag.
 */
#ifndef EDGE_KERNELS_PARAMS_H
#define EDGE_KERNELS_PARAMS_H

#include <stdint.h>

#if defined(__CUDACC__) || defined(EDGE_PARAMS_HOST_POINTERS)
#define EDGE_PTR(T) T*
#define EDGE_PARAMS_TYPED 1
#else
#define EDGE_PTR(T) unsigned long long
#define EDGE_PARAMS_TYPED 0
#endif

#ifdef __cplusplus
#define EDGE_PARAMS_ASSERT(c, m) static_assert(c, m)
#else
#define EDGE_PARAMS_ASSERT(c, m) _Static_assert(c, m)
#endif
EDGE_PARAMS_ASSERT(sizeof(long long) == 8 && sizeof(unsigned long long) == 8, "long long must be 64-bit");
EDGE_PARAMS_ASSERT(sizeof(double) == 8, "double must be 64-bit");
#if EDGE_PARAMS_TYPED
EDGE_PARAMS_ASSERT(sizeof(void*) == 8, "device addresses are 64-bit");
#endif

/* ------------------------------------------------------------------------
 * dpx.cu: ctc_align, viterbi and dtw. */

/* dpx_check: NaN/Inf scan of item blockIdx.y's [rows, cols] block of x. */
typedef struct DpxCheckParams {
  EDGE_PTR(const float) x;               /* the input's device address */
  long long itemStride;                  /* elements between items */
  long long rowStride;                   /* elements between rows */
  EDGE_PTR(const long long) dims;        /* item b's (rows, cols) at dims[b*dimStride] */
  long long dimStride;                   /* elements between items' dims */
  long long allowNegInf;                 /* 0/1: -Inf is allowed */
  EDGE_PTR(unsigned long long) status;   /* 3 words an item: ~bad index, max |x| bits, (unused) */
} DpxCheckParams;

/* dpx_quantize: out[k] = quant(x[k], scale), k < n; the largest into *maxq. */
typedef struct DpxQuantizeParams {
  EDGE_PTR(const float) x;
  long long n;                           /* values */
  double scale;                          /* fixed-point quanta per unit */
  EDGE_PTR(int) out;                     /* n int32 */
  EDGE_PTR(int) maxq;                    /* one int32, preset below every value */
} DpxQuantizeParams;

/* dpx_ctc_align_{f32,i32}_p<MP> and dpx_ctc_warp_{f32,i32}_k<K>: one block
 * an item (grid B). */
typedef struct DpxCtcParams {
  EDGE_PTR(const float) lp;              /* log-probs [B][T][C] */
  long long T;                           /* frames of the padded batch */
  long long C;                           /* classes */
  EDGE_PTR(const long long) meta;        /* per item {T_b, S, table offset, backpointer offset (words)} */
  EDGE_PTR(const int) table;             /* per item 3 runs of S words: label | skip << 30, first, end frame */
  EDGE_PTR(unsigned) bp;                 /* backpointer scratch (32-bit words) */
  long long blank;                       /* blank class id */
  double star;                           /* log-prob of the star token (id C) */
  double scale;                          /* int32 path: quanta per unit of log-prob */
  long long frames;                      /* F, frames per block of staged rows; warp kernels: bit 16 pipeline, bit 17 no pairs */
  EDGE_PTR(int) alignment;               /* [B][T] int32 */
  EDGE_PTR(float) frameScores;           /* [B][T] */
  EDGE_PTR(float) score;                 /* [B] */
  EDGE_PTR(long long) status;            /* 3 words an item; word 2: no finite path */
} DpxCtcParams;

/* dpx_viterbi_{f32,i32}: one block an item (grid B). */
typedef struct DpxViterbiParams {
  EDGE_PTR(const float) em;              /* emissions [B][T][S] */
  long long T;                           /* frames of the padded batch */
  long long S;                           /* states */
  EDGE_PTR(const void) trans;            /* [S][S]: float (f32) or quantised int32 (i32) */
  EDGE_PTR(const void) priors;           /* [S], same type as trans */
  EDGE_PTR(const long long) lens;        /* [B] frames an item */
  EDGE_PTR(const int) maxq;              /* i32: largest quantised transition, prior */
  EDGE_PTR(unsigned short) bp;           /* [B][max(T-1,1)][S] argmax scratch */
  double scale;                          /* int32 path: quanta per unit */
  EDGE_PTR(int) path;                    /* [B][T] int32 */
  EDGE_PTR(float) score;                 /* [B] */
} DpxViterbiParams;

/* dpx_dtw_{f32,i32}: one block an item (grid B). */
typedef struct DpxDtwParams {
  EDGE_PTR(const float) cost;            /* [B][N][M] */
  long long N;                           /* rows of the padded batch */
  long long M;                           /* columns of the padded batch */
  EDGE_PTR(const long long) dims;        /* per item (n, m) */
  EDGE_PTR(unsigned) bp;                 /* [B][N+M-1][2][ceil(N/32)] choice planes */
  double scale;                          /* int32 path: quanta per unit */
  EDGE_PTR(int) path;                    /* [B][N+M][2] int32, -1 padded */
  EDGE_PTR(int) pathLen;                 /* [B] */
  EDGE_PTR(float) total;                 /* [B] */
} DpxDtwParams;

/* ------------------------------------------------------------------------
 * pipeline.cu: the encoder's normalisation and log-softmax, ctc_greedy. */

/* pipeline_log_softmax: y = log_softmax(x) row by row (x and y may alias). */
typedef struct PipelineLogSoftmaxParams {
  EDGE_PTR(const float) x;               /* [rows][V] */
  EDGE_PTR(float) y;                     /* [rows][V] */
  long long rows;
  long long V;                           /* values a row */
} PipelineLogSoftmaxParams;

/* pipeline_normalize_pcm: per-utterance zero mean, unit variance. */
typedef struct PipelineNormalizePCMParams {
  EDGE_PTR(const float) x;               /* pcm [B][N] */
  EDGE_PTR(float) y;                     /* [B][N], not aliasing x */
  EDGE_PTR(const long long) lengths;     /* [B] valid samples, 1..N */
  long long N;                           /* samples a row */
} PipelineNormalizePCMParams;

/* pipeline_ctc_argmax: the best class of every frame (-1 past lengths). */
typedef struct PipelineCtcArgmaxParams {
  EDGE_PTR(const float) lp;              /* [B][T][C] */
  EDGE_PTR(const long long) lengths;     /* [B] frames */
  long long T;
  long long C;
  EDGE_PTR(int) labels;                  /* [B][T] int32 */
  EDGE_PTR(unsigned long long) status;   /* [B] ~first bad flat index (0: none), zeroed by the caller */
} PipelineCtcArgmaxParams;

/* pipeline_ctc_collapse: frame labels to CTC tokens and spans. */
typedef struct PipelineCtcCollapseParams {
  EDGE_PTR(const int) labels;            /* [B][T] from pipeline_ctc_argmax */
  long long T;
  long long N;                           /* token slots an item, >= T */
  long long blank;
  EDGE_PTR(long long) tokens;            /* [B][N], -1 past the count */
  EDGE_PTR(int) spans;                   /* [B][N][2] frames [start, end), -1 past the count */
  EDGE_PTR(long long) tokenLengths;      /* [B] */
} PipelineCtcCollapseParams;

/* ------------------------------------------------------------------------
 * fbank.cu: log-mel features. items points to B rows of three long longs
 * {n, real, computed} (fbank.cu's struct Item). */

/* fbank_stats: per-feature moments from fbank_logmel's partials. */
typedef struct FbankStatsParams {
  EDGE_PTR(const long long) items;       /* [B][3] (struct Item) */
  EDGE_PTR(const double) partial;        /* [B][groups][nMels][2] (Σy, Σy²) */
  long long groups;                      /* G, tiles an item */
  long long nMels;
  double eps;                            /* added to the std */
  EDGE_PTR(double) moments;              /* [B][nMels][2] (mean, 1/(std + eps)) */
} FbankStatsParams;

/* fbank_normalize: the separate normalisation launch (in place). */
typedef struct FbankNormalizeParams {
  EDGE_PTR(float) out;                   /* features, layout per `layout` */
  EDGE_PTR(const long long) items;       /* [B][3] (struct Item) */
  long long nMels;
  long long frames;                      /* T of the output */
  long long layout;                      /* 0: mel_time [B][M][T]; 1: time_mel [B][T][M] */
  long long stats;                       /* 1: max (Whisper clamp); 2: moments */
  long long tile;                        /* frames a tile */
  EDGE_PTR(const float) partial;         /* stats 1: [2][B][G] (max, min) a tile */
  double fixedFloor;                     /* stats 1: the global floor, NaN for the item's */
  EDGE_PTR(const void) result;           /* stats 1: float [B] floors; 2: double [B][M][2] moments */
} FbankNormalizeParams;

/* fbank_logmel_n{400,512}[_wide|_tabs]: framing, FFT, mel, log, partial
 * statistics and (fused) the normalisation tiles. */
typedef struct FbankLogmelParams {
  EDGE_PTR(const float) pcm;             /* [B][pcmStride] */
  long long pcmStride;                   /* samples between items */
  EDGE_PTR(const long long) items;       /* [B][3] (struct Item) */
  EDGE_PTR(const float) window;          /* n_fft, placed in the frame */
  EDGE_PTR(const float) twN;             /* float2 [n_fft]: e^{-2πik/N} */
  EDGE_PTR(const float) colTw;           /* float2 [n_fft/2]: column twiddles */
  EDGE_PTR(const int) bands;             /* [nMels][2] (start, len) (fbank::Band) */
  EDGE_PTR(const float) weights;         /* [pitch][nMels] band weights */
  long long sharedW;                     /* weights copied to shared memory (0: none) */
  long long nMels;
  long long frames;                      /* T of the output */
  long long hop;                         /* samples between frames */
  long long pad;                         /* samples of left padding */
  long long reflect;                     /* 0/1: reflect (else zero) padding */
  double preemph;                        /* pre-emphasis coefficient (0: none) */
  double guard;                          /* y = log2(max(mel + guard, melFloor)) * scale */
  double melFloor;
  double scale;
  long long layout;                      /* 0: mel_time; 1: time_mel */
  long long steps;                       /* rounds of 4 frames a warp does */
  EDGE_PTR(float) out;                   /* features */
  EDGE_PTR(void) partial;                /* per-tile statistics (see fbank.cu) */
  long long stats;                       /* 0: none; 1: max; 2: moments */
  EDGE_PTR(unsigned long long) bad;      /* [B] smallest bad sample index (preset all ones) */
  EDGE_PTR(const float) melFrag;         /* float4 fragments of the tensor-core mel (FBANK_MEL_TC) */
  EDGE_PTR(const int) melTiles;          /* int4 tiles of the tensor-core mel (FBANK_MEL_TC) */
  EDGE_PTR(unsigned long long) tickets;  /* [B] in-kernel reduction tickets (null: none) */
  double clamp;                          /* stats 1: floor = max - clamp */
  double eps;                            /* stats 2: added to the std */
  EDGE_PTR(void) result;                 /* reduced statistics, as FbankNormalizeParams.result */
  long long fused;                       /* 0: transform only; 1, 2: with the normalisation tiles */
  EDGE_PTR(unsigned long long) counters; /* fused: block ticket and finished-block counters */
  EDGE_PTR(long long) ready;             /* fused: [B] epoch of the item's finished statistics */
  long long epoch;                       /* this launch's number */
  long long tile;                        /* frames a tile */
  double fixedFloor;                     /* as FbankNormalizeParams.fixedFloor */
  long long lag;                         /* fused: items between a transform and its normalisation */
  long long stages;                      /* 1 or 2 staging buffers */
  long long melAffine;                   /* bits(a * scale) | bits(c) << 32, float32 patterns */
} FbankLogmelParams;

/* ------------------------------------------------------------------------
 * rvq.cu: residual vector quantisation. Rows are frames b*T + t; lengths
 * (int32 [B], or 0: every frame valid) marks the valid ones. */

/* rvq_encode_*: the fused encoder (one CTA per BM rows). */
typedef struct RvqEncodeParams {
  EDGE_PTR(const float) x;               /* [rows][D] */
  EDGE_PTR(const int) lengths;           /* [B] or null */
  long long rows;                        /* B*T */
  long long T;
  long long D;
  long long Dp;                          /* D rounded up to 64 */
  long long Q;                           /* stages */
  long long split;                       /* first stage of the second chain (0: one chain) */
  EDGE_PTR(const uint16_t) words;        /* bf16 codewords [rowsPad][Dp] */
  EDGE_PTR(const uint16_t) tiles;        /* words pre-swizzled [tile][128][64] (bulk path) */
  EDGE_PTR(const float) hn;              /* [rowsPad] ||C_e||^2 / 2 */
  EDGE_PTR(const int) meta;              /* [Q][4] (offset, K, bits of max ||C_e||, 0) */
  EDGE_PTR(int) codes;                   /* [rows][Q] */
  EDGE_PTR(float) out;                   /* quantized [rows][D] */
  EDGE_PTR(float) res;                   /* scratch [rows rounded up to 256][Dp] */
  EDGE_PTR(int) stats;                   /* [0]: rows re-scored exactly (null: not counted) */
  double limit;                          /* the input check's bound on ||x||^2 */
  EDGE_PTR(unsigned long long) status;   /* lowest flagged row (atomicMin; null: no check) */
} RvqEncodeParams;

/* rvq_small_score: stage scores of the small-batch path. */
typedef struct RvqSmallScoreParams {
  EDGE_PTR(const float) x;               /* [rows][D] */
  EDGE_PTR(const float) res;             /* residual [rows][Dp] */
  long long first;                       /* 0/1: the chain's first stage (reads x) */
  EDGE_PTR(const int) rowList;           /* the valid rows */
  long long D;
  long long Dp;
  EDGE_PTR(const uint16_t) words;
  EDGE_PTR(const float) hn;
  long long off;                         /* the stage's first codeword row */
  long long K;                           /* the stage's entries */
  EDGE_PTR(unsigned long long) keys;     /* per listed row: min (score bits << 32 | index) */
} RvqSmallScoreParams;

/* rvq_small_update: applies a stage's winners. */
typedef struct RvqSmallUpdateParams {
  EDGE_PTR(const float) x;
  EDGE_PTR(float) res;
  EDGE_PTR(float) acc;                   /* the second chain's sum [rows][Dp] */
  EDGE_PTR(float) out;                   /* quantized [rows][D] */
  EDGE_PTR(int) codes;                   /* [rows][Q] */
  EDGE_PTR(const int) rowList;
  long long D;
  long long Dp;
  long long Q;
  long long stage;                       /* q, the stage being applied */
  long long first;                       /* 0/1: the chain's first stage */
  long long secondChain;                 /* 0/1 */
  long long last;                        /* 0/1: the chain's last stage */
  EDGE_PTR(const uint16_t) words;
  long long off;
  EDGE_PTR(unsigned long long) keys;     /* reset to all ones */
} RvqSmallUpdateParams;

/* rvq_stream: a whole encode of a few frames, a cluster a frame. */
typedef struct RvqStreamParams {
  EDGE_PTR(const float) x;
  EDGE_PTR(const int) rowList;
  long long D;
  long long Dp;
  long long Q;
  long long split;
  EDGE_PTR(const uint16_t) words;
  EDGE_PTR(const float) hn;
  EDGE_PTR(const int) meta;
  EDGE_PTR(int) codes;
  EDGE_PTR(float) out;
} RvqStreamParams;

/* rvq_pad_rows: code -1 and quantized 0 on padding rows. */
typedef struct RvqPadRowsParams {
  EDGE_PTR(const int) lengths;
  long long rows;
  long long T;
  long long D;
  long long Q;
  EDGE_PTR(int) codes;                   /* null: quantized only */
  EDGE_PTR(float) out;
} RvqPadRowsParams;

/* rvq_check: non-finite or too large valid rows. */
typedef struct RvqCheckParams {
  EDGE_PTR(const float) x;
  EDGE_PTR(const int) lengths;
  long long rows;
  long long T;
  long long D;
  double limit;                          /* bound on ||x||^2 */
  EDGE_PTR(unsigned long long) status;   /* lowest flagged row (atomicMin; preset all ones) */
} RvqCheckParams;

/* rvq_decode: quantized from codes. */
typedef struct RvqDecodeParams {
  EDGE_PTR(const int) codes;             /* [rows][Q] */
  EDGE_PTR(const int) lengths;
  long long rows;
  long long T;
  long long D;
  long long Dp;
  long long Q;
  long long split;
  EDGE_PTR(const uint16_t) words;
  EDGE_PTR(const int) meta;
  EDGE_PTR(float) out;
  EDGE_PTR(unsigned long long) status;   /* lowest row*Q + q of a bad code (preset all ones) */
  EDGE_PTR(const float) words32;         /* fp32 codewords [rowsPad][Dp], read instead of words (null: bf16) */
} RvqDecodeParams;

/* rvq_encode_f32: the exact fp32-codebook encoder (one CTA per 64 listed rows). */
typedef struct RvqEncodeF32Params {
  EDGE_PTR(const float) x;               /* [rows][D] */
  EDGE_PTR(const int) rowList;           /* the valid rows, n of them */
  long long n;                           /* listed rows */
  long long D;
  long long Dp;                          /* D rounded up to 64 */
  long long Q;
  long long split;                       /* first stage of the second chain (0: one chain) */
  EDGE_PTR(const float) words32;         /* fp32 codewords [rowsPad][Dp], zero padded */
  EDGE_PTR(const float) hn;              /* [rowsPad] ||C_e||^2 / 2 (2^120 on padding) */
  EDGE_PTR(const int) meta;              /* [Q][4] (offset, K, unused, unused) */
  EDGE_PTR(int) codes;                   /* [rows][Q] */
  EDGE_PTR(float) out;                   /* quantized [rows][D] */
  EDGE_PTR(float) res;                   /* scratch residual [n][Dp], by list position */
} RvqEncodeF32Params;

#endif /* EDGE_KERNELS_PARAMS_H */
