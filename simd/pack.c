/* Packed weight rows: groups of SIMD_PACK_ROWS rows interleaved block by
 * block (layout in simd.h). Plain C, no ISA flags: packing runs once per
 * tensor at load, and the copies are 4-byte moves the compiler handles
 * well on every target. */
#include "iquants.h"
#include "simd_internal.h"

#include <string.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

/* The fields of each type's block, in storage order, sizes in bytes;
 * a zero ends the list. Types without a list have no packed form. */
typedef struct {
    uint8_t f[6];
} pack_fields;

static const pack_fields fields[SIMD_TYPE_COUNT] = {
    [SIMD_Q4_0] = {{2, 16}},
    [SIMD_Q4_1] = {{2, 2, 16}},
    [SIMD_Q5_0] = {{2, 4, 16}},
    [SIMD_Q5_1] = {{2, 2, 4, 16}},
    [SIMD_Q8_0] = {{2, 32}},
    [SIMD_Q4_K] = {{2, 2, 12, 128}},
    [SIMD_Q5_K] = {{2, 2, 12, 32, 128}},
    [SIMD_Q6_K] = {{128, 64, 16, 2}},
    [SIMD_Q2_K] = {{16, 64, 2, 2}},
    [SIMD_Q3_K] = {{32, 64, 12, 2}},
    [SIMD_MXFP4] = {{1, 16}},
    [SIMD_IQ4_NL] = {{2, 16}},
    [SIMD_IQ4_XS] = {{2, 2, 4, 128}},
};

int simd_pack_has_layout(int type)
{
    return type == SIMD_IQ3_S || (type >= 0 && type < SIMD_TYPE_COUNT && fields[type].f[0] != 0);
}

size_t simd_pack_group_bytes(int type, size_t n)
{
    if (!simd_pack_has_layout(type))
        return 0;
    if (type == SIMD_IQ3_S)
        return n / SIMD_QKK * SIMD_PACK_IQ3S_BLOCK;
    return SIMD_PACK_ROWS * simd_row_bytes(type, n);
}

/* ---- iq3_s: grid entries looked up once, here (layout in simd.h) ----
 * Every iq3_s value is an odd level -15..15 (a grid magnitude 1..15 and
 * its sign), so u = (v + 15) / 2 is a nibble; the way back finds the
 * grid index of four magnitudes by a binary search of the grid, which is
 * sorted and has distinct entries (tests/simd/test_pack.c checks the
 * round trip). */

/* field offsets of a plain iq3_s block (simd_block_iq3_s), read as bytes
 * so a row stride needs no alignment */
#define IQ3S_QS 2
#define IQ3S_QH (IQ3S_QS + SIMD_QKK / 4)
#define IQ3S_SG (IQ3S_QH + SIMD_QKK / 32)
#define IQ3S_SC (IQ3S_SG + SIMD_QKK / 8)

/* The 256 values of plain block b as 4-bit levels (v + 15) / 2, each
 * grid entry looked up once for its four values. */
static void iq3s_levels(const unsigned char *b, uint8_t lv[SIMD_QKK])
{
    for (int v0 = 0; v0 < SIMD_QKK; v0 += 4) {
        int i = v0 / 32, m = (v0 % 32) / 4;
        unsigned idx = b[IQ3S_QS + 8 * i + m] | ((b[IQ3S_QH + i] >> m) & 1u) << 8;
        uint32_t g = simd_iq3s_grid[idx];
        for (int k = 0; k < 4; k++) {
            int v = v0 + k, mag = (int)(g >> (8 * k) & 0xff);
            int neg = (b[IQ3S_SG + v / 8] >> (v % 8)) & 1;
            lv[v] = (uint8_t)((neg ? 15 - mag : 15 + mag) / 2);
        }
    }
}

/* Row r of one packed block p (16 rows) from / to a plain block b. */
static void iq3s_pack_row(const unsigned char *b, unsigned char *p, size_t r)
{
    uint8_t lv[SIMD_QKK];
    iq3s_levels(b, lv);
    memcpy(p + 2 * r, b, 2);
    memcpy(p + 32 + 4 * r, b + IQ3S_SC, 4);
    for (int c = 0; c < 32; c++)
        for (int k = 0; k < 4; k++) {
            int v = 32 * (c / 4) + 4 * (c % 4) + k;
            p[96 + 64 * c + 4 * r + k] = (uint8_t)(lv[v] | lv[v + 16] << 4);
        }
}

static void iq3s_unpack_row(const unsigned char *p, size_t r, unsigned char *b)
{
    memcpy(b, p + 2 * r, 2);
    memcpy(b + IQ3S_SC, p + 32 + 4 * r, 4);
    memset(b + IQ3S_QH, 0, IQ3S_SC - IQ3S_QH); /* qh and signs are ORed into */
    for (int v0 = 0; v0 < SIMD_QKK; v0 += 4) {
        uint32_t key = 0;
        for (int k = 0; k < 4; k++) {
            int v = v0 + k, c = 4 * (v / 32) + (v % 16) / 4;
            int u = (p[96 + 64 * c + 4 * r + v % 4] >> (v % 32 >= 16 ? 4 : 0)) & 0x0f;
            int lv = 2 * u - 15;
            key |= (uint32_t)(lv < 0 ? -lv : lv) << (8 * k);
            b[IQ3S_SG + v / 8] |= (uint8_t)((lv < 0) << (v % 8));
        }
        int lo = 0, hi = 511;
        while (lo < hi) {
            int mid = (lo + hi) / 2;
            if (simd_iq3s_grid[mid] < key)
                lo = mid + 1;
            else
                hi = mid;
        }
        int i = v0 / 32, m = (v0 % 32) / 4;
        b[IQ3S_QS + 8 * i + m] = (uint8_t)lo;
        b[IQ3S_QH + i] |= (uint8_t)((lo >> 8) << m);
    }
}

static void iq3s_move(size_t n, unsigned char *w, size_t ws, size_t ng, unsigned char *p, int dir)
{
    for (size_t g = 0; g < ng; g++)
        for (size_t b = 0; b < n / SIMD_QKK; b++, p += SIMD_PACK_IQ3S_BLOCK)
            for (size_t r = 0; r < SIMD_PACK_ROWS; r++) {
                unsigned char *blk = w + (g * SIMD_PACK_ROWS + r) * ws + b * sizeof(simd_block_iq3_s);
                if (dir == 0)
                    iq3s_pack_row(blk, p, r);
                else
                    iq3s_unpack_row(p, r, blk);
            }
}

/* One block of 16 rows: plain (row r's block at src + r*ws) <-> packed
 * (16 * bs bytes at p). dir 0 packs, 1 unpacks. */
static void move_block(const pack_fields *pf, const unsigned char *src, size_t ws, unsigned char *p, int dir)
{
    size_t off = 0;
    for (int i = 0; i < (int)sizeof pf->f && pf->f[i]; i++) {
        size_t s = pf->f[i];
        if (s < 4) {
            for (int r = 0; r < SIMD_PACK_ROWS; r++) {
                unsigned char *row = (unsigned char *)src + (size_t)r * ws + off;
                if (dir == 0)
                    memcpy(p + (size_t)r * s, row, s);
                else
                    memcpy(row, p + (size_t)r * s, s);
            }
        } else {
            size_t c = 0;
#if defined(__SSE2__)
            /* SSE2 is x86-64's baseline: 4 rows x 4 chunks at a time,
             * a 4x4 transpose of 32-bit words */
            if (dir == 0)
                for (; c + 4 <= s / 4; c += 4)
                    for (int r = 0; r < SIMD_PACK_ROWS; r += 4) {
                        const unsigned char *row = src + (size_t)r * ws + off + 4 * c;
                        __m128i x0 = _mm_loadu_si128((const __m128i *)row);
                        __m128i x1 = _mm_loadu_si128((const __m128i *)(row + ws));
                        __m128i x2 = _mm_loadu_si128((const __m128i *)(row + 2 * ws));
                        __m128i x3 = _mm_loadu_si128((const __m128i *)(row + 3 * ws));
                        __m128i t0 = _mm_unpacklo_epi32(x0, x1), t1 = _mm_unpackhi_epi32(x0, x1);
                        __m128i t2 = _mm_unpacklo_epi32(x2, x3), t3 = _mm_unpackhi_epi32(x2, x3);
                        unsigned char *q = p + c * 4 * SIMD_PACK_ROWS + (size_t)r * 4;
                        _mm_storeu_si128((__m128i *)q, _mm_unpacklo_epi64(t0, t2));
                        _mm_storeu_si128((__m128i *)(q + 64), _mm_unpackhi_epi64(t0, t2));
                        _mm_storeu_si128((__m128i *)(q + 128), _mm_unpacklo_epi64(t1, t3));
                        _mm_storeu_si128((__m128i *)(q + 192), _mm_unpackhi_epi64(t1, t3));
                    }
#endif
            for (; c < s / 4; c++)
                for (int r = 0; r < SIMD_PACK_ROWS; r++) {
                    unsigned char *row = (unsigned char *)src + (size_t)r * ws + off + 4 * c;
                    unsigned char *q = p + c * 4 * SIMD_PACK_ROWS + (size_t)r * 4;
                    if (dir == 0)
                        memcpy(q, row, 4);
                    else
                        memcpy(row, q, 4);
                }
        }
        p += s * SIMD_PACK_ROWS;
        off += s;
    }
}

static void move_groups(int type, size_t n, unsigned char *w, size_t ws, size_t ng, unsigned char *p, int dir)
{
    const simd_traits *t = simd_type_traits(type);
    const pack_fields *pf = &fields[type];
    size_t nb = n / t->block, bs = t->bytes;
    for (size_t g = 0; g < ng; g++) {
        unsigned char *rows = w + g * SIMD_PACK_ROWS * ws;
        for (size_t b = 0; b < nb; b++, p += SIMD_PACK_ROWS * bs)
            move_block(pf, rows + b * bs, ws, p, dir);
    }
}

void simd_pack(int type, size_t n, const void *w, size_t wstride, size_t ng, void *dst)
{
    if (type == SIMD_IQ3_S)
        iq3s_move(n, (unsigned char *)(uintptr_t)w, wstride, ng, dst, 0);
    else if (simd_pack_has_layout(type))
        move_groups(type, n, (unsigned char *)(uintptr_t)w, wstride, ng, dst, 0);
}

void simd_unpack(int type, size_t n, const void *p, size_t ng, void *w, size_t wstride)
{
    if (type == SIMD_IQ3_S)
        iq3s_move(n, w, wstride, ng, (unsigned char *)(uintptr_t)p, 1);
    else if (simd_pack_has_layout(type))
        move_groups(type, n, w, wstride, ng, (unsigned char *)(uintptr_t)p, 1);
}

void simd_unpack_row(int type, size_t n, const void *p, size_t r, void *row)
{
    if (!simd_pack_has_layout(type) || r >= SIMD_PACK_ROWS)
        return;
    if (type == SIMD_IQ3_S) {
        for (size_t b = 0; b < n / SIMD_QKK; b++)
            iq3s_unpack_row((const unsigned char *)p + b * SIMD_PACK_IQ3S_BLOCK, r,
                            (unsigned char *)row + b * sizeof(simd_block_iq3_s));
        return;
    }
    const simd_traits *t = simd_type_traits(type);
    const pack_fields *pf = &fields[type];
    const unsigned char *q = p;
    unsigned char *out = row;
    for (size_t b = 0; b < n / t->block; b++)
        for (int i = 0; i < (int)sizeof pf->f && pf->f[i]; i++) {
            size_t s = pf->f[i];
            if (s < 4) {
                memcpy(out, q + r * s, s);
            } else {
                for (size_t c = 0; c < s / 4; c++)
                    memcpy(out + 4 * c, q + c * 4 * SIMD_PACK_ROWS + r * 4, 4);
            }
            out += s;
            q += s * SIMD_PACK_ROWS;
        }
}
