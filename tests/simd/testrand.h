/* Random test data for the simd tests: splitmix64 from a fixed seed, so a
 * run sees the same numbers every time. Each test file has its own state:
 * define TR_SEED before including. */
#ifndef NIBBLE_TESTRAND_H
#define NIBBLE_TESTRAND_H

#include <stdint.h>
#include <string.h>

#ifndef TR_SEED
#error define TR_SEED, the seed of the file, before including testrand.h
#endif

static uint64_t tr_state = TR_SEED;

static inline uint64_t rnd(void)
{
    uint64_t z = (tr_state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static inline float unif(void) { return (float)((double)(rnd() >> 11) / 9007199254740992.0 * 2.0 - 1.0); }
/* bell-shaped in (-4, 4): the sum of four uniforms */
static inline float gauss(void) { return unif() + unif() + unif() + unif(); }
/* uniform in 0 .. n-1 */
static inline unsigned rndn(unsigned n) { return (unsigned)(rnd() % n); }

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}
static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

#endif
