/* rng.h - the one pseudo-random generator of the randomised unit tests
 * (test_agg_random.c, test_tracker_random.c): SplitMix64, small, fast and
 * the same on every platform and compiler, so a seed printed by a failing
 * run replays the same trace anywhere.
 *
 * Each test program is one translation unit with one stream: the state is
 * file-static. Seed it per trace with test_rng_seed(seed, stream); the
 * stream constant keeps two tests given the same seed from drawing the same
 * numbers. */
#ifndef CW_TEST_RNG_H
#define CW_TEST_RNG_H

#include <stdint.h>

#define TEST_RNG_GAMMA 0x9E3779B97F4A7C15ull

static uint64_t test_rng_state;

static inline void test_rng_seed(uint64_t seed, uint64_t stream)
{
    test_rng_state = seed * TEST_RNG_GAMMA + stream;
}

/* The next 64 random bits. */
static inline uint64_t test_rng_next(void)
{
    uint64_t z = (test_rng_state += TEST_RNG_GAMMA);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* A number in [0, n); n > 0. (The modulo bias is far below what a test
 * could notice for the small n used here.) */
static inline uint32_t test_rng_below(uint32_t n)
{
    return (uint32_t)(test_rng_next() % n);
}

#endif
