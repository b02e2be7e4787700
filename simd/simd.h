/* simd: leaf kernels on caller buffers. No allocation, no I/O; the only
 * global is the dispatch table that simd_init() fills (simd_internal.h):
 * the simd_traits rows below, one a weight type, with the kernel set's
 * entries beside them.
 *
 * Weight types use ggml's numbering (the GGUF tensor type field), so a
 * tensor's type from a file indexes simd_traits directly. */
#ifndef NIBBLE_SIMD_H
#define NIBBLE_SIMD_H

#include <stddef.h>
#include <stdint.h>

enum simd_type {
    SIMD_F32 = 0,
    SIMD_F16 = 1,
    SIMD_Q4_0 = 2,
    SIMD_Q4_1 = 3,
    SIMD_Q5_0 = 6,
    SIMD_Q5_1 = 7,
    SIMD_Q8_0 = 8,
    SIMD_Q8_1 = 9,
    SIMD_Q2_K = 10,
    SIMD_Q3_K = 11,
    SIMD_Q4_K = 12,
    SIMD_Q5_K = 13,
    SIMD_Q6_K = 14,
    SIMD_Q8_K = 15,
    SIMD_IQ2_XXS = 16,
    SIMD_IQ2_XS = 17,
    SIMD_IQ3_XXS = 18,
    SIMD_IQ1_S = 19,
    SIMD_IQ4_NL = 20,
    SIMD_IQ3_S = 21,
    SIMD_IQ2_S = 22,
    SIMD_IQ4_XS = 23,
    SIMD_I8 = 24,
    SIMD_I16 = 25,
    SIMD_I32 = 26,
    SIMD_I64 = 27,
    SIMD_F64 = 28,
    SIMD_IQ1_M = 29,
    SIMD_BF16 = 30,
    SIMD_MXFP4 = 39,
    SIMD_TYPE_COUNT = 40
};

/* Activation formats the dot kernels take as their second operand. */
enum simd_act {
    SIMD_ACT_NONE = 0, /* type has no dot kernel yet */
    SIMD_ACT_F32,      /* plain floats (F32/F16/BF16 weights) */
    SIMD_ACT_Q8,       /* int8 blocks of 32, one float scale each */
    SIMD_ACT_Q8K,      /* int8 blocks of 256, one float scale + 16 partial sums (K-quants) */
};

#define SIMD_QK 32 /* block width of the 32-blocks */

/* ---- block layouts as stored in GGUF (ggml's layouts) ---- */

typedef uint16_t simd_f16;  /* IEEE binary16 bits */
typedef uint16_t simd_bf16; /* bfloat16 bits */

typedef struct {
    simd_f16 d;               /* scale */
    uint8_t qs[SIMD_QK / 2];  /* low nibble: x[j], high nibble: x[j+16]; value-8 */
} simd_block_q4_0;

typedef struct {
    simd_f16 d;              /* scale */
    simd_f16 m;              /* minimum */
    uint8_t qs[SIMD_QK / 2]; /* nibbles as q4_0, x = d*q + m */
} simd_block_q4_1;

typedef struct {
    simd_f16 d;
    uint8_t qh[4];           /* 5th bit of each of the 32 values */
    uint8_t qs[SIMD_QK / 2]; /* low 4 bits as q4_0; value-16 */
} simd_block_q5_0;

typedef struct {
    simd_f16 d;
    simd_f16 m;
    uint8_t qh[4];
    uint8_t qs[SIMD_QK / 2];
} simd_block_q5_1;

typedef struct {
    simd_f16 d;          /* scale */
    int8_t qs[SIMD_QK];  /* x = d*q */
} simd_block_q8_0;

/* Activation block: one token's values, 32 at a time, quantized to int8
 * with a float scale (finer than f16, so quantizing activations costs
 * less). sum is the sum of qs, for weight types with a minimum.
 * Kernels rely on what simd_act_quant guarantees: every qs is in
 * [-127, 127] and sum is exactly the sum of qs. Build q8a rows only with
 * simd_act_quant. */
typedef struct {
    float d;
    int32_t sum;
    int8_t qs[SIMD_QK];
} simd_block_q8a;

/* ---- K-quants: super-blocks of 256 values (ggml's layouts) ---- */

#define SIMD_QKK 256 /* values per K-quant super-block */

/* q4_k: 8 sub-blocks of 32; x = d*sc[j]*q - dmin*m[j], q in 0..15.
 * scales packs 8 six-bit scales and 8 six-bit mins: bytes 0-3 hold
 * sc[0..3] in their low 6 bits, bytes 4-7 m[0..3]; bytes 8-11 hold the
 * low 4 bits of sc[4..7] (low nibble) and m[4..7] (high nibble); the top
 * 2 bits of bytes 0-3 / 4-7 are the high bits of sc[4..7] / m[4..7].
 * qs: sub-blocks 2i and 2i+1 share 32 bytes (low / high nibbles). */
typedef struct {
    simd_f16 d, dmin;
    uint8_t scales[12];
    uint8_t qs[SIMD_QKK / 2];
} simd_block_q4_k;

/* q5_k: as q4_k with a 5th bit: bit 2i (sub-block 2i) and bit 2i+1
 * (sub-block 2i+1) of qh[l] for the l-th value of the pair; q in 0..31. */
typedef struct {
    simd_f16 d, dmin;
    uint8_t scales[12];
    uint8_t qh[SIMD_QKK / 8];
    uint8_t qs[SIMD_QKK / 2];
} simd_block_q5_k;

/* q6_k: 16 sub-blocks of 16, x = d*sc[j]*(q-32), q in 0..63: low 4 bits
 * in ql, high 2 bits in qh (see kquants.c for the interleave). */
typedef struct {
    uint8_t ql[SIMD_QKK / 2];
    uint8_t qh[SIMD_QKK / 4];
    int8_t scales[SIMD_QKK / 16];
    simd_f16 d;
} simd_block_q6_k;

/* q2_k: 16 sub-blocks of 16, x = d*sc[j]*q - dmin*m[j], q in 0..3.
 * scales[j]: sc[j] in the low nibble, m[j] in the high one. Value
 * v = 128h + 32k + 16s + l (h 0..1, k 0..3, s 0..1, l 0..15) is bits
 * 2k, 2k+1 of qs[32h + 16s + l]; its sub-block is v / 16. */
typedef struct {
    uint8_t scales[SIMD_QKK / 16];
    uint8_t qs[SIMD_QKK / 4];
    simd_f16 d, dmin;
} simd_block_q2_k;

/* q3_k: 16 sub-blocks of 16, x = d*(sc[j]-32)*q, q in -4..3: the low 2
 * bits as q2_k's (qs), and q = low - 4 unless bit 4h+k of hmask[v mod 32]
 * is set (then q = low). sc[j] (6 bits): its low 4 bits in scales[j]
 * (j < 8, low nibble) or scales[j-8] (high nibble), its top 2 bits at
 * bit 2*(j/4) of scales[8 + j%4]. */
typedef struct {
    uint8_t hmask[SIMD_QKK / 8];
    uint8_t qs[SIMD_QKK / 4];
    uint8_t scales[12];
    simd_f16 d;
} simd_block_q3_k;

/* iq4_nl: 32 values, x = d * simd_iq4nl_values[code], codes as q4_0's
 * nibbles (low nibble of qs[j]: x[j], high: x[j+16]). */
typedef struct {
    simd_f16 d;
    uint8_t qs[SIMD_QK / 2];
} simd_block_iq4_nl;

/* iq4_xs: 8 sub-blocks of 32, x = d*(ls[j]-32)*simd_iq4nl_values[code];
 * ls[j] (6 bits): low 4 bits in nibble j%2 of scales_l[j/2], top 2 bits
 * at bit 2j of scales_h; sub-block j's codes are the nibbles of
 * qs[16j .. 16j+15] as in iq4_nl. */
typedef struct {
    simd_f16 d;
    uint16_t scales_h;
    uint8_t scales_l[SIMD_QKK / 64];
    uint8_t qs[SIMD_QKK / 2];
} simd_block_iq4_xs;

/* ---- i-quants below 4 bits: super-blocks of 256 values (ggml's
 * layouts; the grids are in simd/iquants_grids.c). Values come in groups
 * of 8 whose magnitudes are one entry of a type's grid (an iq3 group: two
 * entries of 4); a sign byte says which of the 8 are negative (bit j:
 * value j), either stored whole or as 7 bits whose parity gives the 8th
 * (ggml's ksigns_iq2xs). Sub-block scales ls are odd, 2s+1 from a stored
 * s. Multi-byte fields are little-endian. ---- */

/* iq2_xxs (2.06 bpw): per 32 values, 8 bytes of qs: bytes 0-3 the
 * iq2xxs grid indices of its 4 groups, bytes 4-7 a 32-bit u with the
 * 7-bit sign indices of group l at bits 7l and s at bits 28-31;
 * x = d * (2s+1)/8 * grid value * sign. */
typedef struct {
    simd_f16 d;
    uint16_t qs[SIMD_QKK / 8];
} simd_block_iq2_xxs;

/* iq2_xs (2.31 bpw): qs[4i + l] for group l of the 32 values i: low 9
 * bits an iq2xs grid index, top 7 the sign index; scales[i] the s of
 * values 0-15 (low nibble) and 16-31 (high); x = d * (2s+1)/8 * ... */
typedef struct {
    simd_f16 d;
    uint16_t qs[SIMD_QKK / 8];
    uint8_t scales[SIMD_QKK / 32];
} simd_block_iq2_xs;

/* iq2_s (2.56 bpw): group l of the 32 values i: 10-bit iq2s grid index
 * qs[4i + l] | bits 2l, 2l+1 of qh[i] as bits 8-9; its sign byte
 * qs[32 + 4i + l] whole; scales as iq2_xs; x = d * (2s+1)/8 * ... */
typedef struct {
    simd_f16 d;
    uint8_t qs[SIMD_QKK / 4];
    uint8_t qh[SIMD_QKK / 32];
    uint8_t scales[SIMD_QKK / 32];
} simd_block_iq2_s;

/* iq3_xxs (3.06 bpw): 64 bytes of iq3xxs grid indices (8 per 32 values,
 * groups of 4), then per 32 values a 32-bit u as iq2_xxs's bytes 4-7
 * (group l of 8: indices 2l, 2l+1); x = d * (2s+1)/4 * ... */
typedef struct {
    simd_f16 d;
    uint8_t qs[3 * SIMD_QKK / 8];
} simd_block_iq3_xxs;

/* iq3_s (3.44 bpw): group l of the 32 values i takes iq3s grid indices
 * qs[8i + 2l] | bit 2l of qh[i] as bit 8 and qs[8i + 2l + 1] | bit
 * 2l+1 of qh[i], its whole sign byte signs[4i + l]; the s of values i
 * is nibble i%2 of scales[i/2]; x = d * (2s+1) * ... */
typedef struct {
    simd_f16 d;
    uint8_t qs[SIMD_QKK / 4];
    uint8_t qh[SIMD_QKK / 32];
    uint8_t signs[SIMD_QKK / 8];
    uint8_t scales[SIMD_QKK / 64];
} simd_block_iq3_s;

/* iq1_s (1.56 bpw): group l of the 32 values i: 11-bit iq1s grid index
 * qs[4i + l] | bits 3l..3l+2 of qh[i] as bits 8-10 (grid bytes are int8
 * -1, 0, 1, no signs); s bits 12-14 of qh[i], delta -1/8 if bit 15 is
 * set else +1/8; x = d * (2s+1) * (grid value + delta). */
typedef struct {
    simd_f16 d;
    uint8_t qs[SIMD_QKK / 8];
    uint16_t qh[SIMD_QKK / 32];
} simd_block_iq1_s;

/* iq1_m (1.75 bpw): no d field; read as 4 uint16 sc[0..3], the f16 d is
 * the top nibbles of sc[0..3] (sc[0]'s lowest). Group l of the 32 values
 * i: 11-bit index qs[4i + l] | bits 0-2 (l even) or 4-6 (l odd) of
 * qh[2i + l/2] as bits 8-10, delta -1/8 if bit 3 (l even) or 7 (l odd)
 * is set else +1/8; 3-bit s at bits 6(i%2) (values 0-15) and 6(i%2)+3
 * (16-31) of sc[i/2]; x = d * (2s+1) * (grid value + delta). */
typedef struct {
    uint8_t qs[SIMD_QKK / 8];
    uint8_t qh[SIMD_QKK / 16];
    uint8_t scales[SIMD_QKK / 32];
} simd_block_iq1_m;

_Static_assert(sizeof(simd_block_iq2_xxs) == 66, "iq2_xxs block");
_Static_assert(sizeof(simd_block_iq2_xs) == 74, "iq2_xs block");
_Static_assert(sizeof(simd_block_iq2_s) == 82, "iq2_s block");
_Static_assert(sizeof(simd_block_iq3_xxs) == 98, "iq3_xxs block");
_Static_assert(sizeof(simd_block_iq3_s) == 110, "iq3_s block");
_Static_assert(sizeof(simd_block_iq1_s) == 50, "iq1_s block");
_Static_assert(sizeof(simd_block_iq1_m) == 56, "iq1_m block");

/* The 16 levels of iq4_nl and iq4_xs (ggml's kvalues_iq4nl). */
extern const int8_t simd_iq4nl_values[16];

/* Activation block for K-quant dots: 256 values as int8 with one float
 * scale; bsums[i] is the exact sum of qs[16i .. 16i+15] (for the mins).
 * Built only by simd_act_quant(SIMD_ACT_Q8K, ...): |qs| <= 127. */
typedef struct {
    float d;
    int8_t qs[SIMD_QKK];
    int16_t bsums[SIMD_QKK / 16];
} simd_block_q8k;

/* mxfp4 (OCP Microscaling FP4, ggml's layout): 32 values sharing one
 * power-of-two scale. e is an E8M0 exponent; each 4-bit code is an E2M1
 * float (sign, 2 exponent bits, 1 mantissa bit: 0 0.5 1 1.5 2 3 4 6),
 * low nibble of qs[j] for x[j], high nibble for x[j+16] (as q4_0).
 * x = 2^(e-127) * E2M1(code); see simd/mxfp4.h for e = 0 and 255. */
typedef struct {
    uint8_t e;
    uint8_t qs[SIMD_QK / 2];
} simd_block_mxfp4;

_Static_assert(sizeof(simd_block_mxfp4) == 17, "mxfp4 block");
_Static_assert(sizeof(simd_block_q4_k) == 144, "q4_k block");
_Static_assert(sizeof(simd_block_q2_k) == 84, "q2_k block");
_Static_assert(sizeof(simd_block_q3_k) == 110, "q3_k block");
_Static_assert(sizeof(simd_block_iq4_nl) == 18, "iq4_nl block");
_Static_assert(sizeof(simd_block_iq4_xs) == 136, "iq4_xs block");
_Static_assert(sizeof(simd_block_q5_k) == 176, "q5_k block");
_Static_assert(sizeof(simd_block_q6_k) == 210, "q6_k block");
_Static_assert(sizeof(simd_block_q8k) == 292, "q8k block");

_Static_assert(sizeof(simd_block_q4_0) == 18, "q4_0 block");
_Static_assert(sizeof(simd_block_q4_1) == 20, "q4_1 block");
_Static_assert(sizeof(simd_block_q5_0) == 22, "q5_0 block");
_Static_assert(sizeof(simd_block_q5_1) == 24, "q5_1 block");
_Static_assert(sizeof(simd_block_q8_0) == 34, "q8_0 block");
_Static_assert(sizeof(simd_block_q8a) == 40, "q8a block");

/* dot(n, w, a): one weight row of n values against one activation row in
 * the type's partner format; returns the float result. n is a multiple of
 * the type's block size. */
typedef float (*simd_dot_fn)(size_t n, const void *w, const void *a);
/* dot of one weight row against `nt` activation rows (stride astride
 * bytes), writing out[t*ostride]. The batched form lets a set keep a
 * weight block in registers across tokens. */
typedef void (*simd_dot_batch_fn)(size_t n, const void *w, const void *a, size_t astride,
                                  size_t nt, float *out, size_t ostride);
/* nr consecutive weight rows (row r at w + r*wstride bytes) against nt
 * activation rows (stride astride bytes), writing row r, token t to
 * out[t*ostride + r]: what dot_batch gives called once per row, in one
 * call, so a set can share activation work across rows and skip the
 * per-row setup. Results are those of dot, bit for bit. */
typedef void (*simd_dot_rows_fn)(size_t n, const void *w, size_t wstride, size_t nr, const void *a,
                                 size_t astride, size_t nt, float *out, size_t ostride);

/* ---- packed weights ----
 * A kernel set may read weight rows in a packed form: groups of
 * SIMD_PACK_ROWS consecutive rows interleaved block by block, so a pass
 * over a group reads one sequential stream while the kernel keeps each
 * row in its own vector lane (no horizontal sums). The layout of one
 * group, for a type whose block's fields are listed in simd/pack.c
 * (e.g. q4_0: d 2 bytes, qs 16 bytes):
 *   for each block b = 0 .. n/block-1, in order,
 *     for each field of the block, in storage order,
 *       a field of s < 4 bytes: rows 0..15, s bytes each (16*s bytes);
 *       a field of s >= 4 bytes (a multiple of 4): s/4 chunks in order,
 *         chunk c = rows 0..15, each its bytes 4c..4c+3 (64 bytes).
 * So block b of a group starts at 16*b*bytes, and field bytes keep their
 * meaning (f16 scales, nibble order): only their places change. A group
 * takes exactly as many bytes as its 16 rows.
 *
 * iq3_s alone is packed decoded: its grid is looked up at pack time, and
 * each value, an odd level v in -15..15, is stored as the nibble
 * u = (v + 15) / 2. A block of 16 rows (SIMD_PACK_IQ3S_BLOCK bytes, 1.22x
 * the rows' 1760): d (16 f16, 32 bytes), scales (one chunk: row r's 4
 * scale bytes at 32 + 4r), qs (32 chunks at 96): chunk 4j + i holds 4
 * bytes of each row whose low nibbles are u of values 32j + 4i .. +3 and
 * high nibbles of values 32j + 16 + 4i .. +3 (iq4_xs's order). */
#define SIMD_PACK_ROWS 16
#define SIMD_PACK_IQ3S_BLOCK (32 + 64 + 32 * 64)

/* dot_packed: ng groups (16*ng rows) of a packed matrix starting at p,
 * against nt activation rows (stride astride bytes), writing row r (0 ..
 * 16*ng-1, counted from p), token t to out[t*ostride + r]. Results equal
 * dot_rows on the same rows unpacked, bit for bit. */
typedef void (*simd_dot_packed_fn)(size_t n, const void *p, size_t ng, const void *a, size_t astride,
                                   size_t nt, float *out, size_t ostride);

/* 1 if the type has a packed layout. */
int simd_pack_has_layout(int type);
/* Bytes of one packed group of rows of n values; 0 without a layout. */
size_t simd_pack_group_bytes(int type, size_t n);
/* Pack ng groups of rows (row r at w + r*wstride) into dst
 * (ng * simd_pack_group_bytes bytes). */
void simd_pack(int type, size_t n, const void *w, size_t wstride, size_t ng, void *dst);
/* The inverse: ng packed groups at p back to rows at w + r*wstride. */
void simd_unpack(int type, size_t n, const void *p, size_t ng, void *w, size_t wstride);
/* Row r (0 .. SIMD_PACK_ROWS-1) of the packed group at p, as a plain row
 * at row. */
void simd_unpack_row(int type, size_t n, const void *p, size_t r, void *row);

typedef struct simd_traits {
    const char *name;        /* "q4_0" ... ; NULL for unknown ids */
    uint32_t block;          /* values per block */
    uint32_t bytes;          /* bytes per block */
    enum simd_act act;       /* partner activation format of dot */
    /* n values (multiple of block) from blocks to floats */
    void (*dequant)(const void *src, float *dst, size_t n);
    /* reference round-to-nearest quantization of n floats; NULL if the
     * type cannot be written yet */
    void (*quant)(const float *src, void *dst, size_t n);
    /* quantization that minimises an importance-weighted squared error:
     * imp holds one importance per value (an importance matrix's column
     * importances for this row, never NULL); the scale searches minimise
     * sum imp[i] * sqrt(sigma2 + x[i]^2) * err[i]^2, sigma2 twice the
     * block's mean square (llama.cpp's weighting). NULL for the types
     * without one (float types, mxfp4): use quant. */
    void (*quant_imp)(const float *src, void *dst, size_t n, const float *imp);
    simd_dot_fn dot;
    simd_dot_batch_fn dot_batch;
    simd_dot_rows_fn dot_rows; /* non-NULL whenever dot is */
    /* the current set's kernel for packed rows; NULL when the set reads
     * this type only as plain rows (then there is no point packing) */
    simd_dot_packed_fn dot_packed;
} simd_traits;

/* The dispatch table's row for a type (enum simd_type); NULL for unknown
 * ids. The pointer stays valid; its kernel slots change with
 * simd_kernel_select. */
const simd_traits *simd_type_traits(int type);
/* Name of a type or "?" */
const char *simd_type_name(int type);
/* Bytes of a row of n values (n must be a multiple of the block), 0 if
 * the type is unknown or n does not fit the block. */
size_t simd_row_bytes(int type, uint64_t n);

/* Bytes of one activation row of n values in format `act`. */
size_t simd_act_row_bytes(enum simd_act act, size_t n);
/* Convert one row of n floats into activation format `act`. */
void simd_act_quant(enum simd_act act, const float *x, void *dst, size_t n);

/* ---- kernel sets ---- */

enum simd_kernel {
    SIMD_K_SCALAR = 0,
    SIMD_K_AVX2,
    SIMD_K_AVXVNNI,
    SIMD_K_AVX512VNNI,
    SIMD_K_AVXVNNIINT8,
    SIMD_K_NEON,
    SIMD_K_NEON_DOTPROD,
    SIMD_K_COUNT
};

/* Detect the CPU and install the best kernel set. Idempotent. */
void simd_init(void);
/* Name of a set ("scalar", "avx2", ...). */
const char *simd_kernel_name(enum simd_kernel k);
/* Look a set up by name; -1 if no set has that name. */
int simd_kernel_find(const char *name);
/* 1 if this CPU (and OS) runs set k; else 0 and, if why is given, a short
 * reason naming the missing feature. */
int simd_kernel_supported(enum simd_kernel k, const char **why);
/* Install set k if this CPU runs it; returns 0, or -1 (nothing changes).
 * Not thread-safe: call while no kernel is running. */
int simd_kernel_select(enum simd_kernel k);
enum simd_kernel simd_kernel_current(void);
/* The installed set's int8 multiply-add instruction (vpdpbusd, sdot,
 * maddubs+madd, ...) issued iters times in independent chains on values
 * in registers (simd/peak.c); returns the multiply-adds done, for a rate
 * to measure prefill against. *sink takes a value of the results. */
uint64_t simd_int8_peak_run(long iters, int32_t *sink);
/* The same for the float multiply-add attention's sums are built on
 * (vfmadd on 512 bits for avx512vnni, 256 for the other x86 sets, fmla
 * on NEON, plain C for scalar). */
uint64_t simd_fma_peak_run(long iters, float *sink);

/* One line naming the CPU and the features the kernel sets care about
 * (present, or prefixed '-' when absent), for `nibble info --cpu`.
 * Always NUL-terminates buf (n > 0); truncates if n is too small
 * (160 bytes is plenty). */
void simd_cpu_describe(char *buf, size_t n);

/* ---- scalar helpers shared by every set ---- */

float simd_f16_to_f32(simd_f16 h);
simd_f16 simd_f32_to_f16(float f);
/* dst[i] = simd_f32_to_f16(src[i]), i < n */
void simd_f32_to_f16_row(const float *src, simd_f16 *dst, size_t n);
/* n values (a multiple of 32) of SIMD_Q8_0 or SIMD_Q4_0 blocks as halves:
 * each the float product d * q (exact) through simd_f32_to_f16 (the KV
 * cache's quantized half of a pair, read by the f16 attention kernels) */
void simd_deq_f16_row(int type, const void *blocks, size_t n, simd_f16 *dst);
float simd_bf16_to_f32(simd_bf16 h);
simd_bf16 simd_f32_to_bf16(float f);

/* float dot of n values, summed in the fixed order every set follows:
 * 8 lanes (lane = index mod 8), lanes combined pairwise at the end. */
float simd_dot_f32(size_t n, const float *a, const float *b);


/* ---- attention (simd/attn.c) ----
 * Causal attention of one query token for the query heads that share one
 * key/value head (grouped-query attention), over positions 0..n-1 of a
 * cache of f16 rows (converted to float exactly as they are read), in a
 * fixed order every kernel set follows, so the output
 * is bit-identical across sets. Positions go in chunks of
 * SIMD_ATTN_CHUNK (chunk c = positions 64c .. 64c+63), so that one
 * token's attention can be split over threads without changing a bit.
 *
 * simd_attn_chunk, for each head h and the chunk's positions p (s is
 * scratch + h*n):
 *   s[p]   = dot(q_h, k_p) * scale      (dot: 8 lanes, lane = d mod 8,
 *            each lane l = fma(q[d], k_p[d], l) for its d in order, then
 *            simd_reduce8; fma(x, y, z) is x*y + z rounded once)
 *   s[p]   = softcap * tanh(s[p] / softcap), when softcap > 0
 *   m      = max of s[p] (NaN scores are passed over)
 *   s[p]   = exp(s[p] - m)               (the exp of simd/attn.h)
 *   sum    = sum of s[p], 8 lanes (lane = p mod 8), simd_reduce8
 *   acc[d] = fma(s[p], v_p[d], acc[d]) for p increasing, from 0
 * and writes the row {m, sum, acc[0..hd-1]} to part + h*pstride.
 * simd_attn_merge then combines one head's chunk rows, c increasing:
 *   M = max m_c;  f_c = exp(m_c - M);  S = sum of sum_c * f_c;
 *   out[d] = (sum of acc_c[d] * f_c) * (1 / S)
 * (one chunk: f = 1 exactly, out = acc * (1/sum)). hd is any size (the
 * SIMD forms want a multiple of 8 and otherwise take the reference). */
#define SIMD_ATTN_CHUNK 64
typedef struct simd_attn_args {
    size_t hd, nq, n;    /* head size, query heads, positions (1..SIMD_ATTN_CHUNK) */
    const float *q;      /* nq rows of hd, qstride floats apart */
    size_t qstride;
    const simd_f16 *k, *v; /* n rows of hd (the chunk's first position first), kvstride halves apart;
                            * for simd_attn_tile, k is K transposed (below) */
    size_t kvstride;
    float scale;
    float *part;         /* nq rows of hd+2 floats, pstride apart: m, sum, acc */
    size_t pstride;
    float *scratch;      /* nq*n floats, caller's; overwritten */
    float softcap;       /* > 0: s[p] = softcap * tanh(s[p] / softcap) after the
                          * scale (Gemma 2; attn_softcap in attn.h); 0: none */
    size_t ktstride;     /* simd_attn_tile: halves from K's row d to row d+1; 0: K as rows */
} simd_attn_args;
typedef void (*simd_attn_fn)(const simd_attn_args *a);
/* The active set's chunk (n >= 1, nq >= 1). */
void simd_attn_chunk(const simd_attn_args *a);
/* Many tokens over one chunk (prefill, and each chunk of a decode step:
 * the engine's f16 K takes this order only): for nt tokens whose
 * queries see the same n positions, token i's nq query rows at
 * q + i*qtstride and its chunk rows at part + i*ptstride (scratch as for
 * one token), the rows simd_attn_chunk would give but for the score,
 * whose order is the tile's own (one sum, one rounding per fused term,
 * d in order):
 *   s[p]   = fma(q[hd-1], k_p[hd-1], ... fma(q[1], k_p[1], fma(q[0], k_p[0], 0))) * scale
 * the rest (softcap, m, exp, sum, acc) as simd_attn_chunk. So a tile's
 * rows are not bit for bit those of simd_attn_chunk (they differ by the
 * float rounding of the dot), but are the same on every set
 * (simd_attn_merge takes either). K comes transposed, as the f16 cache
 * keeps it: position p's value d at k[d*ktstride + p] (p < n), or with
 * ktstride 0 as rows kvstride apart (a quantized cache's halves); V as
 * rows, kvstride apart. On SIMD this is positions in lanes with no
 * reduction, each K vector read once for several query rows (tokens x
 * heads). A transposed K is read as halves where it lies, each K row d
 * from position 0 to n rounded up to 16 (the values past n are not
 * used, but the caller keeps them readable: after the last row too);
 * K as rows, or a head size not a multiple of 16, is converted to float
 * once into kvbuf (SIMD_ATTN_TILE_BUF(hd) floats of the caller's,
 * overwritten). Any hd. */
#define SIMD_ATTN_TILE_BUF(hd) (2 * (size_t)SIMD_ATTN_CHUNK * (hd))
typedef void (*simd_attn_tile_fn)(const simd_attn_args *a, size_t nt, size_t qtstride, size_t ptstride,
                                  float *kvbuf);
void simd_attn_tile(const simd_attn_args *a, size_t nt, size_t qtstride, size_t ptstride, float *kvbuf);
/* One head's output (hd floats) from its nchunks chunk rows (chunk c's
 * row at part + c*cstride); the same bits on every set. */
void simd_attn_merge(size_t hd, size_t nchunks, const float *part, size_t cstride, float *out);
/* A set's merge: sink NULL for simd_attn_merge, else simd_attn_merge_sink's. */
typedef void (*simd_attn_merge_fn)(size_t hd, size_t nchunks, const float *part, size_t cstride, const float *sink,
                                   float *out);
/* The exp attention uses (e^x for x <= 0; +0 below -87 and for NaN). */
float simd_attn_exp(float x);

/* ---- attention over a quantized cache (simd/attn_q.c) ----
 * The same attention as simd_attn_chunk (one token's query heads that
 * share a kv head, over one chunk of n <= SIMD_ATTN_CHUNK positions, the
 * same chunk rows {m, sum, acc} for simd_attn_merge), read from q8_0 or
 * q4_0 rows of the cache as they are stored, with integer dot products.
 * hd must be a multiple of 32, so a head's values are whole blocks; nb =
 * hd/32. Each query row is given quantized: nb simd_block_q8a blocks
 * (simd_act_quant's SIMD_ACT_Q8). For each head h (s is scratch + h*n):
 *   s[p]   = 0; for b = 0..nb-1:
 *              s[p] = fma((float)isum(q_h[b], k_p[b]), dk_p[b] * q_h[b].d, s[p])
 *            (isum: the exact integer dot of the 32 int8 codes, dk the
 *            block's f16 scale as float); s[p] = s[p] * scale
 *   softcap, m, exp, sum: as simd_attn_chunk
 *   acc[32b+j] = fma(s[p], dv_p[b] * (float)cv_p[b][j], acc[32b+j]), p increasing
 *            (cv the V block's code: qs[j] for q8_0, nibble - 8 for q4_0;
 *            dv * cv, V's value, is exact in float)
 * Every set gives these bits. */
typedef struct simd_attn_q_args {
    size_t hd, nq, n;            /* head size (a multiple of 32), query heads, positions */
    const simd_block_q8a *q;     /* nq rows of hd/32 blocks, qstride blocks apart */
    size_t qstride;
    int ktype, vtype;            /* SIMD_Q8_0 or SIMD_Q4_0 each */
    const void *k, *v;           /* the chunk's first position: the head's first block */
    size_t kstride, vstride;     /* bytes from one position's row to the next */
    float scale, softcap;        /* as simd_attn_args */
    float *part;                 /* nq rows of hd+2 floats, pstride apart */
    size_t pstride;
    float *scratch;              /* nq*n floats, caller's; overwritten */
    void *buf;                   /* SIMD_ATTN_Q_BUF(hd) bytes, caller's, 4-byte aligned; overwritten:
                                  * the chunk's codes and scales, unpacked once for every token */
} simd_attn_q_args;
#define SIMD_ATTN_Q_BUF(hd) ((size_t)SIMD_ATTN_CHUNK * ((hd) / 32 * 4 + 5 * (hd)))
/* nt tokens over the same chunk: token i's query blocks at q + i*qtstride
 * (blocks), its rows at part + i*ptstride (floats); the chunk is unpacked
 * once. nt = 1 is one token (qtstride, ptstride unused). */
typedef void (*simd_attn_q_fn)(const simd_attn_q_args *a, size_t nt, size_t qtstride, size_t ptstride);
void simd_attn_q_tile(const simd_attn_q_args *a, size_t nt, size_t qtstride, size_t ptstride);

/* g[i] = silu(g[i]) * u[i] (the gated FFN), silu(x) = x / (1 + e^-x) with
 * attention's exp; g and u do not overlap. Plain C, the same bits on every
 * set and vector width. */
void simd_silu_mul(float *g, const float *u, size_t n);
/* g[i] = gelu(g[i]), the tanh form (GPT-2), computed as x * sigmoid(2y)
 * with the same exp; the same bits on every set and vector width. */
void simd_gelu(float *g, size_t n);
/* gpt-oss's clamped SwiGLU: x = min(g[i], limit), y = u[i] clamped to
 * [-limit, limit], g[i] = x * sigmoid(alpha x) * (y + 1), with the same
 * exp; the same bits on every set and vector width. */
void simd_swiglu_oai(float *g, const float *u, size_t n, float alpha, float limit);
/* simd_attn_merge with an attention sink: one more logit `sink` in the
 * softmax's denominator that adds no value (gpt-oss); the result is
 * simd_attn_merge's scaled by sum / (sum + e^(sink - max)). */
void simd_attn_merge_sink(size_t hd, size_t nchunks, const float *part, size_t cstride, float sink, float *out);

#endif
