/* Packed weight rows: groups of SIMD_PACK_ROWS rows interleaved block by
 * block (layout in simd.h). Plain C, no ISA flags: packing runs once per
 * tensor at load, and the copies are 4-byte moves the compiler handles
 * well on every target. */
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
    [SIMD_IQ3_S] = {{2, 64, 8, 32, 4}},
};

int simd_pack_has_layout(int type)
{
    return type >= 0 && type < SIMD_TYPE_COUNT && fields[type].f[0] != 0;
}

size_t simd_pack_group_bytes(int type, size_t n)
{
    if (!simd_pack_has_layout(type))
        return 0;
    return SIMD_PACK_ROWS * simd_row_bytes(type, n);
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
    if (simd_pack_has_layout(type))
        move_groups(type, n, (unsigned char *)(uintptr_t)w, wstride, ng, dst, 0);
}

void simd_unpack(int type, size_t n, const void *p, size_t ng, void *w, size_t wstride)
{
    if (simd_pack_has_layout(type))
        move_groups(type, n, w, wstride, ng, (unsigned char *)(uintptr_t)p, 1);
}

void simd_unpack_row(int type, size_t n, const void *p, size_t r, void *row)
{
    if (!simd_pack_has_layout(type) || r >= SIMD_PACK_ROWS)
        return;
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
