package kernels

// The Go mirrors of kernels/params.h: one struct a kernel family, each the
// single argument of its kernels' launches (runtime/cuda's Kernel.Launch
// takes a pointer to one). Field names are the C ones with the first letter
// in upper case; device addresses are uint64, long long int64, double
// float64, all 8 bytes, in the header's order (TestParamsLayout pins sizes
// and offsets to the C compiler's layout). The contracts of the fields
// (shapes, layouts, units) are the header's and the kernels'.

// DpxCheckParams is the argument of dpx_check (the NaN/Inf scan of one
// input of ctc_align, viterbi or dtw).
type DpxCheckParams struct {
	X           uint64 // device float*; the input's device address
	ItemStride  int64  // elements between items
	RowStride   int64  // elements between rows
	Dims        uint64 // device long long*; item b's (rows, cols) at dims[b*dimStride]
	DimStride   int64  // elements between items' dims
	AllowNegInf int64  // 0/1: -Inf is allowed
	Status      uint64 // device unsigned long long*; 3 words an item: ~bad index, max |x| bits, (unused)
}

// DpxQuantizeParams is the argument of dpx_quantize (int32 fixed point).
type DpxQuantizeParams struct {
	X     uint64  // device float*
	N     int64   // values
	Scale float64 // fixed-point quanta per unit
	Out   uint64  // device int*; n int32
	Maxq  uint64  // device int*; one int32, preset below every value
}

// DpxCtcParams is the argument of dpx_ctc_align_{f32,i32}_p* and
// dpx_ctc_warp_{f32,i32}_k* (ctc_align, one block an item).
type DpxCtcParams struct {
	Lp          uint64  // device float*; log-probs [B][T][C]
	T           int64   // frames of the padded batch
	C           int64   // classes
	Meta        uint64  // device long long*; per item {T_b, S, table offset, backpointer offset (words)}
	Table       uint64  // device int*; per item 3 runs of S words: label | skip << 30, first, end frame
	Bp          uint64  // device unsigned*; backpointer scratch (32-bit words)
	Blank       int64   // blank class id
	Star        float64 // log-prob of the star token (id C)
	Scale       float64 // int32 path: quanta per unit of log-prob
	Frames      int64   // F, frames per block of staged rows; warp kernels: bit 16 pipeline, bit 17 no pairs
	Alignment   uint64  // device int*; [B][T] int32
	FrameScores uint64  // device float*; [B][T]
	Score       uint64  // device float*; [B]
	Status      uint64  // device long long*; 3 words an item; word 2: no finite path
}

// DpxViterbiParams is the argument of dpx_viterbi_{f32,i32}.
type DpxViterbiParams struct {
	Em     uint64  // device float*; emissions [B][T][S]
	T      int64   // frames of the padded batch
	S      int64   // states
	Trans  uint64  // device void*; [S][S]: float (f32) or quantised int32 (i32)
	Priors uint64  // device void*; [S], same type as trans
	Lens   uint64  // device long long*; [B] frames an item
	Maxq   uint64  // device int*; i32: largest quantised transition, prior
	Bp     uint64  // device unsigned short*; [B][max(T-1,1)][S] argmax scratch
	Scale  float64 // int32 path: quanta per unit
	Path   uint64  // device int*; [B][T] int32
	Score  uint64  // device float*; [B]
}

// DpxDtwParams is the argument of dpx_dtw_{f32,i32}.
type DpxDtwParams struct {
	Cost    uint64  // device float*; [B][N][M]
	N       int64   // rows of the padded batch
	M       int64   // columns of the padded batch
	Dims    uint64  // device long long*; per item (n, m)
	Bp      uint64  // device unsigned*; [B][N+M-1][2][ceil(N/32)] choice planes
	Scale   float64 // int32 path: quanta per unit
	Path    uint64  // device int*; [B][N+M][2] int32, -1 padded
	PathLen uint64  // device int*; [B]
	Total   uint64  // device float*; [B]
}

// PipelineLogSoftmaxParams is the argument of pipeline_log_softmax (the
// encoder's log-softmax of its logits, row by row; x and y may alias).
type PipelineLogSoftmaxParams struct {
	X    uint64 // device float*; [rows][V]
	Y    uint64 // device float*; [rows][V]
	Rows int64
	V    int64 // values a row
}

// PipelineNormalizePCMParams is the argument of pipeline_normalize_pcm (the
// encoder's per-utterance normalisation).
type PipelineNormalizePCMParams struct {
	X       uint64 // device float*; pcm [B][N]
	Y       uint64 // device float*; [B][N], not aliasing x
	Lengths uint64 // device long long*; [B] valid samples, 1..N
	N       int64  // samples a row
}

// PipelineCtcArgmaxParams is the argument of pipeline_ctc_argmax (ctc_greedy:
// the best class of every frame).
type PipelineCtcArgmaxParams struct {
	Lp      uint64 // device float*; [B][T][C]
	Lengths uint64 // device long long*; [B] frames
	T       int64
	C       int64
	Labels  uint64 // device int*; [B][T] int32
	Status  uint64 // device unsigned long long*; [B] ~first bad flat index (0: none), zeroed by the caller
}

// PipelineCtcCollapseParams is the argument of pipeline_ctc_collapse
// (ctc_greedy: frame labels to tokens and spans).
type PipelineCtcCollapseParams struct {
	Labels       uint64 // device int*; [B][T] from pipeline_ctc_argmax
	T            int64
	N            int64 // token slots an item, >= T
	Blank        int64
	Tokens       uint64 // device long long*; [B][N], -1 past the count
	Spans        uint64 // device int*; [B][N][2] frames [start, end), -1 past the count
	TokenLengths uint64 // device long long*; [B]
}

// FbankStatsParams is the argument of fbank_stats (per-feature moments
// from fbank_logmel's partials). Items point to B rows of {n, real,
// computed}.
type FbankStatsParams struct {
	Items   uint64 // device long long*; [B][3] (struct Item)
	Partial uint64 // device double*; [B][groups][nMels][2] (Σy, Σy²)
	Groups  int64  // G, tiles an item
	NMels   int64
	Eps     float64 // added to the std
	Moments uint64  // device double*; [B][nMels][2] (mean, 1/(std + eps))
}

// FbankNormalizeParams is the argument of fbank_normalize (the separate
// normalisation launch, in place).
type FbankNormalizeParams struct {
	Out        uint64 // device float*; features, layout per `layout`
	Items      uint64 // device long long*; [B][3] (struct Item)
	NMels      int64
	Frames     int64   // T of the output
	Layout     int64   // 0: mel_time [B][M][T]; 1: time_mel [B][T][M]
	Stats      int64   // 1: max (Whisper clamp); 2: moments
	Tile       int64   // frames a tile
	Partial    uint64  // device float*; stats 1: [2][B][G] (max, min) a tile
	FixedFloor float64 // stats 1: the global floor, NaN for the item's
	Result     uint64  // device void*; stats 1: float [B] floors; 2: double [B][M][2] moments
}

// FbankLogmelParams is the argument of fbank_logmel_n{400,512} and their
// _wide and _tabs forms (framing, FFT, mel, log, partial statistics and,
// fused, the normalisation tiles).
type FbankLogmelParams struct {
	Pcm        uint64 // device float*; [B][pcmStride]
	PcmStride  int64  // samples between items
	Items      uint64 // device long long*; [B][3] (struct Item)
	Window     uint64 // device float*; n_fft, placed in the frame
	TwN        uint64 // device float*; float2 [n_fft]: e^{-2πik/N}
	ColTw      uint64 // device float*; float2 [n_fft/2]: column twiddles
	Bands      uint64 // device int*; [nMels][2] (start, len) (fbank::Band)
	Weights    uint64 // device float*; [pitch][nMels] band weights
	SharedW    int64  // weights copied to shared memory (0: none)
	NMels      int64
	Frames     int64   // T of the output
	Hop        int64   // samples between frames
	Pad        int64   // samples of left padding
	Reflect    int64   // 0/1: reflect (else zero) padding
	Preemph    float64 // pre-emphasis coefficient (0: none)
	Guard      float64 // y = log2(max(mel + guard, melFloor)) scale
	MelFloor   float64
	Scale      float64
	Layout     int64   // 0: mel_time; 1: time_mel
	Steps      int64   // rounds of 4 frames a warp does
	Out        uint64  // device float*; features
	Partial    uint64  // device void*; per-tile statistics (see fbank.cu)
	Stats      int64   // 0: none; 1: max; 2: moments
	Bad        uint64  // device unsigned long long*; [B] smallest bad sample index (preset all ones)
	MelFrag    uint64  // device float*; float4 fragments of the tensor-core mel (FBANK_MEL_TC)
	MelTiles   uint64  // device int*; int4 tiles of the tensor-core mel (FBANK_MEL_TC)
	Tickets    uint64  // device unsigned long long*; [B] in-kernel reduction tickets (null: none)
	Clamp      float64 // stats 1: floor = max - clamp
	Eps        float64 // stats 2: added to the std
	Result     uint64  // device void*; reduced statistics, as FbankNormalizeParams.result
	Fused      int64   // 0: transform only; 1, 2: with the normalisation tiles
	Counters   uint64  // device unsigned long long*; fused: block ticket and finished-block counters
	Ready      uint64  // device long long*; fused: [B] epoch of the item's finished statistics
	Epoch      int64   // this launch's number
	Tile       int64   // frames a tile
	FixedFloor float64 // as FbankNormalizeParams.fixedFloor
	Lag        int64   // fused: items between a transform and its normalisation
	Stages     int64   // 1 or 2 staging buffers
	MelAffine  int64   // bits(a scale) | bits(c) << 32, float32 patterns
}

// RvqEncodeParams is the argument of the fused encoders rvq_encode_*.
// Rows are frames b*T + t; Lengths (int32 [B], or 0: every frame valid)
// marks the valid ones, here and in the other rvq structs.
type RvqEncodeParams struct {
	X       uint64 // device float*; [rows][D]
	Lengths uint64 // device int*; [B] or null
	Rows    int64  // B*T
	T       int64
	D       int64
	Dp      int64   // D rounded up to 64
	Q       int64   // stages
	Split   int64   // first stage of the second chain (0: one chain)
	Words   uint64  // device uint16_t*; bf16 codewords [rowsPad][Dp]
	Tiles   uint64  // device uint16_t*; words pre-swizzled [tile][128][64] (bulk path)
	Hn      uint64  // device float*; [rowsPad] ||C_e||^2 / 2
	Meta    uint64  // device int*; [Q][4] (offset, K, bits of max ||C_e||, 0)
	Codes   uint64  // device int*; [rows][Q]
	Out     uint64  // device float*; quantized [rows][D]
	Res     uint64  // device float*; scratch [rows rounded up to 256][Dp]
	Stats   uint64  // device int*; [0]: rows re-scored exactly (null: not counted)
	Limit   float64 // the input check's bound on ||x||^2
	Status  uint64  // device unsigned long long*; lowest flagged row (atomicMin; null: no check)
}

// RvqSmallScoreParams is the argument of rvq_small_score (a stage's exact
// scores on the small-batch path).
type RvqSmallScoreParams struct {
	X       uint64 // device float*; [rows][D]
	Res     uint64 // device float*; residual [rows][Dp]
	First   int64  // 0/1: the chain's first stage (reads x)
	RowList uint64 // device int*; the valid rows
	D       int64
	Dp      int64
	Words   uint64 // device uint16_t*
	Hn      uint64 // device float*
	Off     int64  // the stage's first codeword row
	K       int64  // the stage's entries
	Keys    uint64 // device unsigned long long*; per listed row: min (score bits << 32 | index)
}

// RvqSmallUpdateParams is the argument of rvq_small_update (a stage's
// winners applied on the small-batch path).
type RvqSmallUpdateParams struct {
	X           uint64 // device float*
	Res         uint64 // device float*
	Acc         uint64 // device float*; the second chain's sum [rows][Dp]
	Out         uint64 // device float*; quantized [rows][D]
	Codes       uint64 // device int*; [rows][Q]
	RowList     uint64 // device int*
	D           int64
	Dp          int64
	Q           int64
	Stage       int64  // q, the stage being applied
	First       int64  // 0/1: the chain's first stage
	SecondChain int64  // 0/1
	Last        int64  // 0/1: the chain's last stage
	Words       uint64 // device uint16_t*
	Off         int64
	Keys        uint64 // device unsigned long long*; reset to all ones
}

// RvqStreamParams is the argument of rvq_stream (the whole encode of a
// few frames, a cluster of CTAs a frame).
type RvqStreamParams struct {
	X       uint64 // device float*
	RowList uint64 // device int*
	D       int64
	Dp      int64
	Q       int64
	Split   int64
	Words   uint64 // device uint16_t*
	Hn      uint64 // device float*
	Meta    uint64 // device int*
	Codes   uint64 // device int*
	Out     uint64 // device float*
}

// RvqPadRowsParams is the argument of rvq_pad_rows (code -1 and quantized
// 0 on padding rows).
type RvqPadRowsParams struct {
	Lengths uint64 // device int*
	Rows    int64
	T       int64
	D       int64
	Q       int64
	Codes   uint64 // device int*; null: quantized only
	Out     uint64 // device float*
}

// RvqCheckParams is the argument of rvq_check (non-finite or too large
// valid rows of x).
type RvqCheckParams struct {
	X       uint64 // device float*
	Lengths uint64 // device int*
	Rows    int64
	T       int64
	D       int64
	Limit   float64 // bound on ||x||^2
	Status  uint64  // device unsigned long long*; lowest flagged row (atomicMin; preset all ones)
}

// RvqDecodeParams is the argument of rvq_decode.
type RvqDecodeParams struct {
	Codes   uint64 // device int*; [rows][Q]
	Lengths uint64 // device int*
	Rows    int64
	T       int64
	D       int64
	Dp      int64
	Q       int64
	Split   int64
	Words   uint64 // device uint16_t*
	Meta    uint64 // device int*
	Out     uint64 // device float*
	Status  uint64 // device unsigned long long*; lowest row*Q + q of a bad code (preset all ones)
	Words32 uint64 // device float*; fp32 codewords [rowsPad][Dp], read instead of Words (0: bf16)
}

// RvqEncodeF32Params is the argument of rvq_encode_f32 (the exact
// fp32-codebook encoder).
type RvqEncodeF32Params struct {
	X       uint64 // device float*; [rows][D]
	RowList uint64 // device int*; the valid rows, N of them
	N       int64  // listed rows
	D       int64
	Dp      int64 // D rounded up to 64
	Q       int64
	Split   int64  // first stage of the second chain (0: one chain)
	Words32 uint64 // device float*; fp32 codewords [rowsPad][Dp], zero padded
	Hn      uint64 // device float*; [rowsPad] ||C_e||^2 / 2 (2^120 on padding)
	Meta    uint64 // device int*; [Q][4] (offset, K, unused, unused)
	Codes   uint64 // device int*; [rows][Q]
	Out     uint64 // device float*; quantized [rows][D]
	Res     uint64 // device float*; scratch residual [N][Dp], by list position
}
