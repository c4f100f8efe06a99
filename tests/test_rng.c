/* test_rng.c - the counter-based RNG: Philox4x32-10 known answers, the noise layout
   (counter = (group, group_hi | stream << 16, step, block), key = seed), grzo_noise_fill
   against grzo_noise_at (the bulk Gaussian path bit for bit), and distribution /
   independence statistics. */
#define _DEFAULT_SOURCE   /* mmap's MAP_ANONYMOUS (glibc): the guard page past a group list */
#define GRZO_IMPLEMENTATION
#include "grzo.h"
#include "backends/grzo_cpu.h"
#include "test_util.h"
#if defined(__unix__)
#include <sys/mman.h>
#include <unistd.h>
#if defined(__linux__) && !defined(MAP_ANONYMOUS)
#error "test_rng: no MAP_ANONYMOUS: the guard page past the group lists would be left out"
#endif
#endif

/* ---- an independent Philox4x32-10 (Salmon et al. 2011, Random123) -------------------- */
static void my_philox(const uint32_t ctr_in[4], const uint32_t key_in[2], uint32_t out[4])
{
    uint32_t c[4], k[2];
    int r;
    memcpy(c, ctr_in, sizeof c);
    memcpy(k, key_in, sizeof k);
    for (r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c[0];
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c[2];
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        uint32_t n0 = hi1 ^ c[1] ^ k[0], n1 = lo1, n2 = hi0 ^ c[3] ^ k[1], n3 = lo0;
        c[0] = n0; c[1] = n1; c[2] = n2; c[3] = n3;
        if (r < 9) {
            k[0] += 0x9E3779B9u;
            k[1] += 0xBB67AE85u;
        }
    }
    memcpy(out, c, sizeof c);
}

static void test_kat(void)
{
    static const uint32_t ctr[3][4] = {
        { 0u, 0u, 0u, 0u },
        { 0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu },
        { 0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u } };
    static const uint32_t key[3][2] = {
        { 0u, 0u }, { 0xffffffffu, 0xffffffffu }, { 0xa4093822u, 0x299f31d0u } };
    static const uint32_t want[3][4] = {
        { 0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u },
        { 0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu },
        { 0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u } };
    int t, i;
    for (t = 0; t < 3; t++) {
        uint32_t out[4], mine[4];
        grzo_philox4x32_10(ctr[t], key[t], out);
        my_philox(ctr[t], key[t], mine);
        for (i = 0; i < 4; i++) {
            CHECKF(out[i] == want[t][i], "KAT %d word %d: got %08x want %08x", t, i,
                   (unsigned)out[i], (unsigned)want[t][i]);
            CHECKF(mine[i] == want[t][i], "self-check of the test's Philox, KAT %d", t);
        }
    }
    /* random inputs against the independent implementation */
    {
        int bad = 0;
        for (t = 0; t < 2000; t++) {
            uint32_t c[4], k[2], a[4], b[4];
            for (i = 0; i < 4; i++) c[i] = (uint32_t)(tu_unif(1, (uint64_t)(6 * t + i), 0, 4294967296.0));
            for (i = 0; i < 2; i++) k[i] = (uint32_t)(tu_unif(1, (uint64_t)(6 * t + 4 + i), 0, 4294967296.0));
            grzo_philox4x32_10(c, k, a);
            my_philox(c, k, b);
            if (memcmp(a, b, sizeof a) != 0) bad++;
        }
        CHECKF(bad == 0, "%d of 2000 random Philox inputs differ from the reference", bad);
    }
}

static int popcount32(uint32_t x)
{
    int n = 0;
    while (x) { n += (int)(x & 1u); x >>= 1; }
    return n;
}

/* The Rademacher element `index` comes from Philox with counter (g, g_hi | stream << 16,
   step, block), g = index / 128, key = seed: the 128 bits of one Philox output give the 128
   elements of group g. The bit order is the implementation's choice, so check that the
   number of +1's in the group equals the popcount of the output (or 128 minus it). */
static void test_rademacher_layout(void)
{
    static const uint64_t seeds[] = { 0ULL, 1ULL, 0x0123456789abcdefULL, 0xfffffffff0000001ULL };
    static const uint32_t steps[] = { 0u, 7u, 123456u };
    static const uint32_t blocks[] = { 0u, 3u, GRZO_USER_BLOCK };
    static const uint32_t streams[] = { 0u, 1u, 2u, 17u };
    static const uint64_t groups[] = { 0ULL, 1ULL, 77ULL, ((uint64_t)1 << 32) + 5ULL,
                                       ((uint64_t)1 << 40) + 3ULL };
    int match_lohi = 0, match_hilo = 0, total = 0;
    int map_hits[6] = { 0, 0, 0, 0, 0, 0 };
    size_t a, b, c, d, e;
    for (a = 0; a < 4; a++)
        for (b = 0; b < 3; b++)
            for (c = 0; c < 3; c++)
                for (d = 0; d < 4; d++)
                    for (e = 0; e < 5; e++) {
                        grzo_noise n = tu_noise(seeds[a], steps[b], blocks[c], streams[d],
                                                GRZO_NOISE_RADEMACHER);
                        uint64_t g = groups[e];
                        uint32_t ctr[4], k1[2], k2[2], o1[4], o2[4];
                        float v[128];
                        int plus = 0, i, pc1, pc2, m;
                        ctr[0] = (uint32_t)g;
                        ctr[1] = (uint32_t)(g >> 32) | (streams[d] << 16);
                        ctr[2] = steps[b];
                        ctr[3] = blocks[c];
                        k1[0] = (uint32_t)seeds[a]; k1[1] = (uint32_t)(seeds[a] >> 32);
                        k2[0] = k1[1]; k2[1] = k1[0];
                        grzo_philox4x32_10(ctr, k1, o1);
                        grzo_philox4x32_10(ctr, k2, o2);
                        for (i = 0; i < 128; i++) {
                            v[i] = grzo_noise_at(&n, g * 128 + (uint64_t)i);
                            if (v[i] == 1.0f) plus++;
                        }
                        pc1 = popcount32(o1[0]) + popcount32(o1[1]) + popcount32(o1[2]) + popcount32(o1[3]);
                        pc2 = popcount32(o2[0]) + popcount32(o2[1]) + popcount32(o2[2]) + popcount32(o2[3]);
                        total++;
                        if (plus == pc1 || plus == 128 - pc1) match_lohi++;
                        if (plus == pc2 || plus == 128 - pc2) match_hilo++;
                        /* informational: which natural bit order is used (key lo, hi) */
                        for (m = 0; m < 6; m++) {
                            int ok = 1;
                            for (i = 0; i < 128 && ok; i++) {
                                int bit;
                                switch (m / 2) {
                                case 0: bit = (int)((o1[i / 32] >> (i % 32)) & 1u); break;
                                case 1: bit = (int)((o1[i / 32] >> (31 - i % 32)) & 1u); break;
                                default: bit = (int)((o1[i % 4] >> (i / 4)) & 1u); break;
                                }
                                if ((m % 2 == 0) != ((v[i] == 1.0f) == (bit == 1))) ok = 0;
                            }
                            if (ok) map_hits[m]++;
                        }
                    }
    CHECKF(match_lohi == total || match_hilo == total,
           "Rademacher groups consistent with Philox(counter=(g, g_hi|stream<<16, step, block), "
           "key=seed): %d/%d (key lo,hi), %d/%d (key hi,lo)", match_lohi, total, match_hilo, total);
    {
        static const char *names[6] = { "word i/32, LSB first, bit 1 = +1", "word i/32, LSB first, bit 1 = -1",
                                        "word i/32, MSB first, bit 1 = +1", "word i/32, MSB first, bit 1 = -1",
                                        "word i%4, bit i/4, bit 1 = +1", "word i%4, bit i/4, bit 1 = -1" };
        int m, found = 0;
        for (m = 0; m < 6; m++)
            if (map_hits[m] == total) { printf("  Rademacher bit order: %s\n", names[m]); found = 1; }
        if (!found) printf("  Rademacher bit order: none of the common orders (popcount matches)\n");
    }
}

static void test_fill_matches_at(void)
{
    static const uint64_t firsts[] = { 0, 1, 3, 5, 127, 128, 129, 255, 1001,
                                       ((uint64_t)1 << 40) + 7, GRZO_MAX_INDEX - 300 };
    static const size_t counts[] = { 0, 1, 2, 3, 5, 7, 127, 128, 129, 131, 257, 1001 };
    float buf[1100];
    int dist, bad = 0, canary_bad = 0;
    size_t a, b, i;
    for (dist = GRZO_NOISE_RADEMACHER; dist <= GRZO_NOISE_GAUSSIAN; dist++) {
        grzo_noise n = tu_noise(0xabcdef12345ULL, 42, 2, 1, (uint32_t)dist);
        for (a = 0; a < sizeof firsts / sizeof firsts[0]; a++)
            for (b = 0; b < sizeof counts / sizeof counts[0]; b++) {
                size_t cnt = counts[b];
                int past_end = firsts[a] + cnt > GRZO_MAX_INDEX;   /* refused: nothing written */
                for (i = 0; i < cnt + 3; i++) buf[i] = -12345.0f;
                CHECK(grzo_noise_fill(&n, firsts[a], cnt, buf) == (past_end ? GRZO_ERR_INVALID_ARG : GRZO_OK));
                if (past_end) {
                    for (i = 0; i < cnt + 3; i++)
                        if (buf[i] != -12345.0f) canary_bad++;
                    continue;
                }
                for (i = 0; i < cnt; i++) {
                    float at = grzo_noise_at(&n, firsts[a] + i);
                    if (memcmp(&at, &buf[i], sizeof at) != 0) {
                        if (bad < 5)
                            fprintf(stderr, "  fill != at: dist %d first %llu i %u: %g vs %g\n", dist,
                                    (unsigned long long)firsts[a], (unsigned)i, buf[i], at);
                        bad++;
                    }
                }
                for (i = cnt; i < cnt + 3; i++)
                    if (buf[i] != -12345.0f) canary_bad++;
            }
    }
    CHECKF(bad == 0, "%d elements of grzo_noise_fill differ from grzo_noise_at", bad);
    CHECKF(canary_bad == 0, "grzo_noise_fill wrote %d floats past count", canary_bad);
    /* DEFAULT dist means Rademacher */
    {
        grzo_noise n0 = tu_noise(9, 1, 0, 0, GRZO_NOISE_DEFAULT);
        grzo_noise n1 = tu_noise(9, 1, 0, 0, GRZO_NOISE_RADEMACHER);
        int diff = 0;
        for (i = 0; i < 1000; i++)
            if (grzo_noise_at(&n0, i) != grzo_noise_at(&n1, i)) diff++;
        CHECKF(diff == 0, "GRZO_NOISE_DEFAULT differs from RADEMACHER at %d of 1000 elements", diff);
    }
}

/* The public RNG entries refuse what names no tensor grzo defines, and write nothing then:
   a NULL array, a dist outside grzo_noise_dist, a stream past the counter's 16 bits (stream
   0x10000 would be stream 0), a range reaching past GRZO_MAX_INDEX or wrapping uint64_t. */
static void test_refusals(void)
{
    const grzo_noise ok = tu_noise(77, 3, 1, 0, GRZO_NOISE_RADEMACHER);
    grzo_noise bad_dist = ok, big_dist = ok, bad_stream = ok;
    const uint32_t ctr[4] = { 1, 2, 3, 4 }, key[2] = { 5, 6 };
    uint32_t w[4] = { 7, 7, 7, 7 };
    float buf[8], at;
    int i, touched = 0;
    bad_dist.dist = GRZO_NOISE_COUNT;
    big_dist.dist = 0xFFFFFFFFu;
    bad_stream.stream = 0x10000u;
    for (i = 0; i < 8; i++) buf[i] = -3.0f;
    CHECK(grzo_noise_fill(NULL, 0, 4, buf) == GRZO_ERR_INVALID_ARG);
    CHECK(grzo_noise_fill(&ok, 0, 4, NULL) == GRZO_ERR_INVALID_ARG);
    CHECK(grzo_noise_fill(&bad_dist, 0, 4, buf) == GRZO_ERR_INVALID_ARG);
    CHECK(grzo_noise_fill(&big_dist, 0, 4, buf) == GRZO_ERR_INVALID_ARG);
    CHECK(grzo_noise_fill(&bad_stream, 0, 4, buf) == GRZO_ERR_INVALID_ARG);
    CHECK(grzo_noise_fill(&ok, GRZO_MAX_INDEX - 3, 4, buf) == GRZO_ERR_INVALID_ARG);
    CHECK(grzo_noise_fill(&ok, GRZO_MAX_INDEX + 1, 0, buf) == GRZO_ERR_INVALID_ARG);
    CHECK(grzo_noise_fill(&ok, 5, SIZE_MAX, buf) == GRZO_ERR_INVALID_ARG);
    CHECK(grzo_noise_fill(&ok, UINT64_MAX, 2, buf) == GRZO_ERR_INVALID_ARG);
    for (i = 0; i < 8; i++)
        if (buf[i] != -3.0f) touched++;
    CHECKF(touched == 0, "a refused grzo_noise_fill wrote %d floats", touched);
    /* the last elements below the limit, and an empty range at it, are still served */
    CHECK(grzo_noise_fill(&ok, GRZO_MAX_INDEX, 0, buf) == GRZO_OK && buf[0] == -3.0f);
    CHECK(grzo_noise_fill(&ok, GRZO_MAX_INDEX - 4, 4, buf) == GRZO_OK);
    for (i = 0; i < 4; i++) {
        at = grzo_noise_at(&ok, GRZO_MAX_INDEX - 4 + (uint64_t)i);
        CHECK((at == 1.0f || at == -1.0f) && memcmp(&at, &buf[i], sizeof at) == 0);
    }
    CHECK(buf[4] == -3.0f);
    /* grzo_noise_at's 0 for the same cases (never a Rademacher element) */
    CHECK(grzo_noise_at(NULL, 0) == 0.0f);
    CHECK(grzo_noise_at(&bad_dist, 0) == 0.0f && grzo_noise_at(&big_dist, 0) == 0.0f);
    CHECK(grzo_noise_at(&bad_stream, 0) == 0.0f);
    CHECK(grzo_noise_at(&ok, GRZO_MAX_INDEX) == 0.0f && grzo_noise_at(&ok, UINT64_MAX) == 0.0f);
    CHECK(grzo_noise_at(&ok, GRZO_MAX_INDEX - 1) != 0.0f);
    CHECK(grzo_philox4x32_10(NULL, key, w) == GRZO_ERR_INVALID_ARG);
    CHECK(grzo_philox4x32_10(ctr, NULL, w) == GRZO_ERR_INVALID_ARG);
    CHECK(grzo_philox4x32_10(ctr, key, NULL) == GRZO_ERR_INVALID_ARG);
    CHECK(w[0] == 7 && w[1] == 7 && w[2] == 7 && w[3] == 7);
    CHECK(grzo_philox4x32_10(ctr, key, w) == GRZO_OK && !(w[0] == 7 && w[1] == 7 && w[2] == 7 && w[3] == 7));
}

#define NSTAT 1000000

static void test_moments(float *x)
{
    grzo_noise nr = tu_noise(0x1234ULL, 5, 1, 0, GRZO_NOISE_RADEMACHER);
    grzo_noise ng = tu_noise(0x1234ULL, 5, 1, 0, GRZO_NOISE_GAUSSIAN);
    double s1 = 0, s2 = 0, s4 = 0, tail = 0, maxabs = 0;
    long not_pm1 = 0, nonfinite = 0;
    size_t i;
    double N = NSTAT;

    grzo_noise_fill(&nr, 0, NSTAT, x);
    for (i = 0; i < NSTAT; i++) {
        if (x[i] != 1.0f && x[i] != -1.0f) not_pm1++;
        s1 += x[i];
    }
    CHECKF(not_pm1 == 0, "%ld Rademacher values are not exactly +-1", not_pm1);
    /* mean of 1e6 +-1: sd 1e-3; bound 5 sd */
    CHECKF(fabs(s1 / N) < 5.0 / sqrt(N), "Rademacher mean %g", s1 / N);

    grzo_noise_fill(&ng, 0, NSTAT, x);
    for (i = 0; i < NSTAT; i++) {
        double v = x[i];
        if (!isfinite(v)) { nonfinite++; continue; }
        s2 += v * v;
        s4 += v * v * v * v;
        if (fabs(v) > 3.0) tail += 1;
        if (fabs(v) > maxabs) maxabs = fabs(v);
    }
    s1 = 0;
    for (i = 0; i < NSTAT; i++)
        if (isfinite(x[i])) s1 += x[i];
    CHECKF(nonfinite == 0, "%ld Gaussian values are not finite", nonfinite);
    /* N(0,1): Var(x) = 1, Var(x^2) = 2, Var(x^4) = 96; bounds are 5 standard errors */
    CHECKF(fabs(s1 / N) < 5.0 * sqrt(1.0 / N), "Gaussian mean %g", s1 / N);
    CHECKF(fabs(s2 / N - 1.0) < 5.0 * sqrt(2.0 / N), "Gaussian variance %g", s2 / N);
    CHECKF(fabs(s4 / N - 3.0) < 5.0 * sqrt(96.0 / N), "Gaussian 4th moment %g", s4 / N);
    /* P(|x| > 3) = 0.0026998 */
    CHECKF(fabs(tail / N - 0.0026998) < 5.0 * sqrt(0.0027 / N), "Gaussian tail P(|x|>3) = %g", tail / N);
    CHECKF(maxabs < 7.0, "Gaussian max |x| = %g over 1e6 draws", maxabs);
    CHECKF(maxabs > 4.0, "Gaussian max |x| = %g over 1e6 draws (too light tails)", maxabs);
    printf("  gaussian: mean %.5f var %.5f m4 %.4f tail %.6f max %.3f\n", s1 / N, s2 / N, s4 / N,
           tail / N, maxabs);
}

/* correlation of two length-n sequences; 5/sqrt(n) is a 5-sigma bound under independence */
static double corr(const float *a, const float *b, size_t n)
{
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    size_t i;
    for (i = 0; i < n; i++) {
        sa += a[i]; sb += b[i];
        saa += (double)a[i] * a[i]; sbb += (double)b[i] * b[i]; sab += (double)a[i] * b[i];
    }
    sa /= (double)n; sb /= (double)n;
    return (sab / (double)n - sa * sb) / sqrt((saa / (double)n - sa * sa) * (sbb / (double)n - sb * sb));
}

#define NCORR 200000

static void test_independence(float *a, float *b)
{
    int dist;
    for (dist = GRZO_NOISE_RADEMACHER; dist <= GRZO_NOISE_GAUSSIAN; dist++) {
        grzo_noise base = tu_noise(0x00000007ffff0001ULL, 11, 4, 0, (uint32_t)dist);
        grzo_noise v[9];
        uint64_t off[9];
        const char *what[9] = { "step+1", "block+1", "stream 1", "stream 2", "stream 16",
                                "seed+1", "seed+2^32", "index+1 (lag)", "index+2^39 (group_hi)" };
        int t;
        size_t i;
        for (t = 0; t < 9; t++) { v[t] = base; off[t] = 0; }
        v[0].step++;
        v[1].block++;
        v[2].stream = 1;
        v[3].stream = 2;
        v[4].stream = 16;
        v[5].seed++;
        v[6].seed += (uint64_t)1 << 32;
        off[7] = 1;
        off[8] = (uint64_t)1 << 39;
        grzo_noise_fill(&base, 0, NCORR, a);
        for (t = 0; t < 9; t++) {
            double r;
            size_t same = 0;
            grzo_noise_fill(&v[t], off[t], NCORR, b);
            for (i = 0; i < NCORR; i++)
                if (a[i] == b[i]) same++;
            r = corr(a, b, NCORR);
            CHECKF(fabs(r) < 5.0 / sqrt((double)NCORR), "dist %d, %s: correlation %g", dist, what[t], r);
            if (dist == GRZO_NOISE_RADEMACHER)
                CHECKF(fabs((double)same / NCORR - 0.5) < 0.02, "dist %d, %s: %lu of %d equal", dist,
                       what[t], (unsigned long)same, NCORR);
            else
                CHECKF(same < NCORR / 100, "dist %d, %s: %lu of %d equal", dist, what[t],
                       (unsigned long)same, NCORR);
        }
        /* within a Gaussian group of 4 (and across the Box-Muller pair), the elements are
           uncorrelated too: compare element 4m+j with 4m+j' */
        if (dist == GRZO_NOISE_GAUSSIAN) {
            int j, jj;
            size_t m, n4 = NCORR / 4;
            for (j = 0; j < 4; j++)
                for (jj = j + 1; jj < 4; jj++) {
                    double r, s = 0, sq = 0;
                    for (m = 0; m < n4; m++) {
                        double p = (double)a[4 * m + (size_t)j] * a[4 * m + (size_t)jj];
                        s += p;
                        sq += p * p;
                    }
                    r = s / (double)n4;
                    CHECKF(fabs(r) < 5.0 * sqrt(sq / (double)n4) / sqrt((double)n4),
                           "Gaussian group elements %d,%d: E[x y] = %g", j, jj, r);
                    /* squares also independent: E[x^2 y^2] = 1 (Box-Muller pairs: also 1) */
                    s = 0;
                    for (m = 0; m < n4; m++) {
                        double p = (double)a[4 * m + (size_t)j] * a[4 * m + (size_t)j] *
                                   a[4 * m + (size_t)jj] * a[4 * m + (size_t)jj];
                        s += p;
                    }
                    CHECKF(fabs(s / (double)n4 - 1.0) < 5.0 * sqrt(8.0 / (double)n4),
                           "Gaussian group elements %d,%d: E[x^2 y^2] = %g", j, jj, s / (double)n4);
                }
        }
    }
}

static void test_uniform(void)
{
    double s = 0, s2 = 0, mn = 1, mx = 0;
    long fine = 0, not53 = 0, i, n = 200000;
    double r;
    for (i = 0; i < n; i++) {
        double u = grzo_uniform_at(77, 3, GRZO_USER_BLOCK, 5, (uint64_t)i);
        double scaled = ldexp(u, 53);
        s += u;
        s2 += u * u;
        if (u < mn) mn = u;
        if (u > mx) mx = u;
        if (scaled != floor(scaled)) not53++;
        if (ldexp(u, 32) != floor(ldexp(u, 32))) fine++;
    }
    CHECKF(mn >= 0.0 && mx < 1.0, "uniform range [%g, %g]", mn, mx);
    CHECKF(fabs(s / n - 0.5) < 5.0 * sqrt(1.0 / 12.0 / n), "uniform mean %g", s / n);
    CHECKF(fabs(s2 / n - s / n * (s / n) - 1.0 / 12.0) < 5.0 * sqrt(1.0 / 180.0 / n), "uniform var %g",
           s2 / n - s / n * (s / n));
    CHECKF(not53 == 0, "%ld uniforms are not multiples of 2^-53", not53);
    CHECKF(fine > n * 99 / 100, "only %ld of %ld uniforms use more than 32 bits", fine, n);
    /* every argument matters */
    {
        double u0 = grzo_uniform_at(77, 3, 9, 5, 1000);
        int diff = 0;
        diff += grzo_uniform_at(78, 3, 9, 5, 1000) != u0;
        diff += grzo_uniform_at(77 + ((uint64_t)1 << 32), 3, 9, 5, 1000) != u0;
        diff += grzo_uniform_at(77, 4, 9, 5, 1000) != u0;
        diff += grzo_uniform_at(77, 3, 10, 5, 1000) != u0;
        diff += grzo_uniform_at(77, 3, 9, 6, 1000) != u0;
        diff += grzo_uniform_at(77, 3, 9, 5, 1001) != u0;
        diff += grzo_uniform_at(77, 3, 9, 5, 1000 + ((uint64_t)1 << 32)) != u0;   /* the index's bits 32-47 */
        diff += grzo_uniform_at(77, 3, 9, 5, 1000 + ((uint64_t)1 << 47)) != u0;
        CHECKF(diff == 8, "only %d of 8 argument changes changed grzo_uniform_at", diff);
        CHECK(grzo_uniform_at(77, 3, 9, 5, 1000) == u0); /* pure function */
    }
    /* the layout grzo.h states: Philox words 0 and 1 at counter (index, index_hi | stream << 16,
       step, block) and key seed (grzo_philox4x32_10, whose known answers are test_kat's), as
       (w0 2^21 + floor(w1 / 2^11)) / 2^53 */
    {
        static const uint64_t idx[] = {0, 1000, ((uint64_t)1 << 32) - 1, (uint64_t)1 << 32,
                                       ((uint64_t)1 << 48) - 1, 0x0000ABCD12345678ull};
        int bad = 0, k;
        for (k = 0; k < 6; k++) {
            uint64_t seed = 0x0123456789ABCDEFull + (uint64_t)k;
            uint32_t step = 7u + (uint32_t)k, block = 0xFFFFFFFEu - (uint32_t)k, stream = 0xFFFFu - (uint32_t)k;
            uint32_t ctr[4], key[2], w[4];
            double want;
            ctr[0] = (uint32_t)(idx[k] & 0xFFFFFFFFu);
            ctr[1] = (uint32_t)(idx[k] >> 32) | (stream << 16);
            ctr[2] = step;
            ctr[3] = block;
            key[0] = (uint32_t)(seed & 0xFFFFFFFFu);
            key[1] = (uint32_t)(seed >> 32);
            grzo_philox4x32_10(ctr, key, w);
            want = ldexp((double)w[0], 21 - 53) + ldexp(floor(ldexp((double)w[1], -11)), -53);
            bad += grzo_uniform_at(seed, step, block, stream, idx[k]) != want;
        }
        CHECKF(bad == 0, "%d of 6 grzo_uniform_at values are not the stated Philox words", bad);
    }
    /* consecutive uniforms uncorrelated */
    {
        double sx = 0, sy = 0, sxy = 0;
        for (i = 0; i < n; i++) {
            double x = grzo_uniform_at(1, 0, GRZO_USER_BLOCK, 0, (uint64_t)i) - 0.5;
            double y = grzo_uniform_at(1, 0, GRZO_USER_BLOCK, 0, (uint64_t)i + 1) - 0.5;
            sx += x; sy += y; sxy += x * y;
        }
        r = (sxy / n - (sx / n) * (sy / n)) * 12.0;
        CHECKF(fabs(r) < 5.0 / sqrt((double)n), "uniform lag-1 correlation %g", r);
    }
}

/* ---- bulk Gaussian against the scalar reference ---------------------------------------
   grzo_noise_fill's Gaussian path (grzo__gauss_batch, built for the CPU's widest vectors)
   must give grzo__gauss4's bits exactly, -0.0 included. */
static int bits_differ(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof *a) != 0; }

/* grzo__gauss_pairs on crafted words against grzo__gauss4: u1 at 2^-32, 1, powers of two and
   the sqrt(2) switch of grzo__log_unit; u2 at the octant and quadrant edges of
   grzo__sincos_turn (t = k/8 exactly, and +-1, +-2 ulps of 2^-32 around) */
static void test_gauss_bulk_crafted(void)
{
    uint32_t u1w[340], u2w[40];
    int n1 = 0, n2 = 0, k, d, i, j, bad = 0, cases = 0;
    for (k = 0; k <= 32; k++) {          /* u1 = 2^-k and sqrt(2)/2 2^-k: words 2^(32-k) - 1 ... */
        double edge[2];
        edge[0] = ldexp(1.0, 32 - k);
        edge[1] = floor(ldexp(sqrt(0.5), 32 - k));
        for (j = 0; j < 2; j++)
            for (d = -2; d <= 2; d++) {
                double v = edge[j] - 1.0 + d;
                if (v >= 0.0 && v <= 4294967295.0) u1w[n1++] = (uint32_t)v;
            }
    }
    for (k = 0; k < 8; k++)              /* t = k/8 and its neighbours */
        for (d = -2; d <= 2; d++) u2w[n2++] = ((uint32_t)k << 29) + (uint32_t)d;   /* k = 0: wraps to 1 - 2^-32 */
    for (i = 0; i < n1; i += GRZO__PAIRS)
        for (j = 0; j < n2; j++) {
            uint32_t a[GRZO__PAIRS], b[GRZO__PAIRS];
            float bulk[2 * GRZO__PAIRS];
            int p;
            for (p = 0; p < GRZO__PAIRS; p++) {   /* every u1 of the block with u2w[j], u2w[j + p] */
                a[p] = u1w[(i + p) % n1];
                b[p] = u2w[(j + p) % n2];
            }
            grzo__gauss_pairs(a, b, bulk);
            for (p = 0; p < GRZO__PAIRS; p += 2) {
                uint32_t w[4] = { a[p], b[p], a[p + 1], b[p + 1] };
                float ref[4];
                grzo__gauss4(w, ref);
                cases++;
                if (bits_differ(ref, bulk + 2 * p, 4)) {
                    if (bad < 5)
                        fprintf(stderr, "  words %08x %08x %08x %08x: bulk %a %a %a %a, scalar %a %a %a %a\n",
                                (unsigned)w[0], (unsigned)w[1], (unsigned)w[2], (unsigned)w[3], bulk[2 * p],
                                bulk[2 * p + 1], bulk[2 * p + 2], bulk[2 * p + 3], ref[0], ref[1], ref[2], ref[3]);
                    bad++;
                }
            }
        }
    CHECKF(bad == 0, "%d of %d groups of crafted words: the bulk Box-Muller differs from grzo__gauss4", bad, cases);
    /* the double results before the rounding to float (which hides most last-bit slips): the
       flat forms of grzo__log_unit and grzo__sincos_turn, on the crafted words and more */
    bad = 0;
    for (i = 0; i < n1 + 100000; i++) {
        uint32_t word = i < n1 ? u1w[i] : (uint32_t)tu_unif(3, (uint64_t)i, 0, 4294967296.0);
        double u = ((double)word + 1.0) * (1.0 / 4294967296.0), ref = grzo__log_unit(u), flat = grzo__log_unit_flat(u);
        if (memcmp(&ref, &flat, sizeof ref) != 0 && bad++ < 5)
            fprintf(stderr, "  log of %a: flat %a, scalar %a\n", u, flat, ref);
    }
    for (i = 0; i < n2 + 100000; i++) {
        uint32_t word = i < n2 ? u2w[i] : (uint32_t)tu_unif(4, (uint64_t)i, 0, 4294967296.0);
        double t = (double)word * (1.0 / 4294967296.0), ref[2], flat[2];
        grzo__sincos_turn(t, &ref[0], &ref[1]);
        grzo__sincos_turn_flat(t, &flat[0], &flat[1]);
        if (memcmp(ref, flat, sizeof ref) != 0 && bad++ < 5)
            fprintf(stderr, "  sincos of %a: flat %a %a, scalar %a %a\n", t, flat[0], flat[1], ref[0], ref[1]);
    }
    CHECKF(bad == 0, "%d flat log / sincos results differ from the scalar ones", bad);
}

/* grzo_noise_fill over [first, first + count) against grzo_noise_at, element by element, and
   nothing written past the end */
static int fill_differs(const grzo_noise *n, uint64_t first, size_t count, float *buf)
{
    size_t i;
    int bad = 0;
    for (i = 0; i < count + 3; i++) buf[i] = -12345.0f;
    grzo_noise_fill(n, first, count, buf);
    for (i = 0; i < count; i++) {
        float at = grzo_noise_at(n, first + i);
        if (bits_differ(&at, &buf[i], 1)) {
            if (bad < 3)
                fprintf(stderr, "  seed %llx stream %u step %u block %u: element %llu: fill %a, at %a\n",
                        (unsigned long long)n->seed, (unsigned)n->stream, (unsigned)n->step, (unsigned)n->block,
                        (unsigned long long)(first + i), buf[i], at);
            bad++;
        }
    }
    for (i = count; i < count + 3; i++)
        if (buf[i] != -12345.0f) bad++;
    return bad;
}

static void test_bulk(uint32_t dist)
{
    enum { LONG = 100003 };
    static const uint64_t bases[] = { 0, 60, 1000, ((uint64_t)1 << 34) - 130, GRZO_MAX_INDEX - 300 };
    float *buf = (float *)malloc((LONG + 3) * sizeof(float));
    int cfg, bad = 0;
    size_t b, off, len;
    REQUIRE(buf);
    if (dist == GRZO_NOISE_GAUSSIAN) test_gauss_bulk_crafted();
    for (cfg = 0; cfg < 6; cfg++) {   /* seeds, streams, steps and blocks, GRZO_USER_BLOCK among them */
        grzo_noise n = tu_noise(0x9E3779B97F4A7C15ull * (uint64_t)(cfg + 1), (uint32_t)(cfg * 977),
                                cfg == 5 ? GRZO_USER_BLOCK : (uint32_t)cfg, cfg == 4 ? GRZO_STREAM_LOWRANK_U : (uint32_t)cfg,
                                dist);
        for (b = 0; b < sizeof bases / sizeof bases[0]; b++)
            for (off = 0; off < 8; off++)          /* starts on and off group and batch edges */
                for (len = 0; len <= 200; len++) bad += fill_differs(&n, bases[b] + off * 9, len, buf);
        bad += fill_differs(&n, (uint64_t)cfg * 7, LONG, buf);   /* whole batches straight into out */
    }
    {   /* the 2^32-group boundary inside one long range */
        grzo_noise n = tu_noise(5, 1, 2, 0, dist);
        bad += fill_differs(&n, (dist == GRZO_NOISE_GAUSSIAN ? (uint64_t)1 << 34 : (uint64_t)1 << 39) - 50001, LONG, buf);
    }
    CHECKF(bad == 0, "%d elements of the bulk %s grzo_noise_fill differ from grzo_noise_at", bad,
           dist == GRZO_NOISE_GAUSSIAN ? "Gaussian" : "Rademacher");
    free(buf);
}

/* `count` group numbers at the very end of a page whose next page is not mapped (where the
   system has mmap), so that reading one group past them faults: grzo__philox_lanes loads 16
   lanes with the lanes past `count` masked off, which must not touch their memory (a caller
   such as the CPU backend passes exactly `count` groups). Elsewhere, plain memory. */
typedef struct guarded_groups {
    void *map;
    size_t map_bytes;
    uint64_t *g;   /* room for 16 groups, ending where the memory ends */
} guarded_groups;
static int guarded_groups_make(guarded_groups *gg)
{
#if defined(__unix__) && defined(MAP_ANONYMOUS)
    long page = sysconf(_SC_PAGESIZE);
    gg->map_bytes = 2 * (size_t)page;
    gg->map = mmap(NULL, gg->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (gg->map == MAP_FAILED) return 0;
    if (mprotect((char *)gg->map + page, (size_t)page, PROT_NONE) != 0) return 0;
    gg->g = (uint64_t *)((char *)gg->map + page) - 16;
#else
    gg->map = malloc(16 * sizeof(uint64_t));
    gg->map_bytes = 0;
    gg->g = (uint64_t *)gg->map;
#endif
    return gg->map != NULL;
}
static void guarded_groups_free(guarded_groups *gg)
{
#if defined(__unix__) && defined(MAP_ANONYMOUS)
    munmap(gg->map, gg->map_bytes);
#else
    free(gg->map);
#endif
}

/* grzo__philox_lanes (AVX-512, GCC's x86-64 Linux builds) against grzo__noise_group, the
   portable Philox: random seeds, streams, steps, blocks and groups (over 2^32 too), every
   count 1-16, the groups ending where readable memory ends (guarded_groups), and nothing
   written past the count's words. Where the build or the CPU has no such path,
   grzo__philox_batch must decline, so that the portable loop runs. */
static void test_kat_lanes(void)
{
    grzo_noise n0 = tu_noise(1, 0, 0, 0, GRZO_NOISE_RADEMACHER);
    uint32_t probe[4];
#if GRZO__PHILOX_LANES
    if (GRZO__PHILOX_LANES_HERE()) {
        int t, count, i, q, bad = 0, spill = 0;
        guarded_groups gg;
        REQUIRE(guarded_groups_make(&gg));
        for (t = 0; t < 400; t++) {
            grzo_noise n = n0;
            uint64_t g[16];
            uint32_t w[4 * 16 + 4], want[4];
            n.seed = (uint64_t)tu_unif(2, (uint64_t)(8 * t), 0, 4294967296.0) << 32 |
                     (uint64_t)tu_unif(2, (uint64_t)(8 * t + 1), 0, 4294967296.0);
            n.stream = (uint32_t)tu_unif(2, (uint64_t)(8 * t + 2), 0, 65536.0);
            n.step = (uint32_t)tu_unif(2, (uint64_t)(8 * t + 3), 0, 4294967296.0);
            n.block = (uint32_t)tu_unif(2, (uint64_t)(8 * t + 4), 0, 4294967296.0);
            for (i = 0; i < 16; i++)   /* groups up to 2^48, some across the 2^32 boundary */
                g[i] = (t % 4 == 0 ? ((uint64_t)1 << 32) - 8 + (uint64_t)i
                                   : (uint64_t)tu_unif(3, (uint64_t)(16 * t + i), 0, 281474976710656.0));
            for (count = 1; count <= 16; count++) {
                for (i = 0; i < 4 * 16 + 4; i++) w[i] = 0xDEADBEEFu;
                memcpy(gg.g + (16 - count), g, (size_t)count * sizeof *g);   /* ending at unreadable memory */
                grzo__philox_lanes(&n, gg.g + (16 - count), count, w);
                for (i = 0; i < count; i++) {
                    grzo__noise_group(&n, g[i], want);
                    for (q = 0; q < 4; q++) bad += w[4 * i + q] != want[q];
                }
                for (i = 4 * count; i < 4 * 16 + 4; i++) spill += w[i] != 0xDEADBEEFu;
            }
        }
        guarded_groups_free(&gg);
        CHECKF(bad == 0, "%d words of grzo__philox_lanes differ from grzo__noise_group", bad);
        CHECKF(spill == 0, "grzo__philox_lanes wrote %d words past its count", spill);
        CHECK(grzo__philox_batch(&n0, 0, 1, probe) == 1);
        return;
    }
#endif
    printf("kat_lanes: no AVX-512 Philox in this build or on this CPU: checking that the batches decline\n");
    CHECK(grzo__philox_batch(&n0, 0, 1, probe) == 0);
}

/* grzo__noise_words_at (the words the CPU backend's loops over U's sign bits read: any groups,
   not only consecutive ones) against grzo__noise_group, for 1..16 groups up to 2^48 that end
   where readable memory ends, and nothing written past 4 count words. Run in every build: the
   AVX-512 lanes where the CPU has them, the portable loop in the builds without them
   (rng_words_at_v3, _baseline). */
static void test_words_at(void)
{
    guarded_groups gg;
    int t, count, i, q, bad = 0, spill = 0;
    REQUIRE(guarded_groups_make(&gg));
    for (t = 0; t < 200; t++) {
        grzo_noise n = tu_noise(1, 0, 0, 0, GRZO_NOISE_RADEMACHER);
        uint32_t w[4 * 16 + 4], want[4];
        n.seed = (uint64_t)tu_unif(4, (uint64_t)(8 * t), 0, 4294967296.0) << 32 |
                 (uint64_t)tu_unif(4, (uint64_t)(8 * t + 1), 0, 4294967296.0);
        n.stream = (uint32_t)tu_unif(4, (uint64_t)(8 * t + 2), 0, 65536.0);
        n.step = (uint32_t)tu_unif(4, (uint64_t)(8 * t + 3), 0, 4294967296.0);
        n.block = (uint32_t)tu_unif(4, (uint64_t)(8 * t + 4), 0, 4294967296.0);
        for (count = 1; count <= 16; count++) {
            uint64_t *g = gg.g + (16 - count);   /* the last `count` slots */
            for (i = 0; i < count; i++)
                g[i] = (t % 4 == 0 ? ((uint64_t)1 << 32) - 4 + (uint64_t)i
                                   : (uint64_t)tu_unif(5, (uint64_t)(16 * t + i), 0, 281474976710656.0));
            for (i = 0; i < 4 * 16 + 4; i++) w[i] = 0xDEADBEEFu;
            grzo__noise_words_at(&n, g, count, w);
            for (i = 0; i < count; i++) {
                grzo__noise_group(&n, g[i], want);
                for (q = 0; q < 4; q++) bad += w[4 * i + q] != want[q];
            }
            for (i = 4 * count; i < 4 * 16 + 4; i++) spill += w[i] != 0xDEADBEEFu;
        }
    }
    guarded_groups_free(&gg);
    CHECKF(bad == 0, "%d words of grzo__noise_words_at differ from grzo__noise_group", bad);
    CHECKF(spill == 0, "grzo__noise_words_at wrote %d words past its count", spill);
}

int main(int argc, char **argv)
{
    tu_args(argc, argv);
    float *a = (float *)malloc(NSTAT * sizeof(float));
    float *b = (float *)malloc(NCORR * sizeof(float));
    REQUIRE(a && b);
    if (tu_case("kat")) test_kat();
    if (tu_case("kat_lanes")) test_kat_lanes();
    if (tu_case("layout")) test_rademacher_layout();
    if (tu_case("fill")) test_fill_matches_at();
    if (tu_case("gauss_bulk")) test_bulk(GRZO_NOISE_GAUSSIAN);
    if (tu_case("rademacher_bulk")) test_bulk(GRZO_NOISE_RADEMACHER);
    if (tu_case("moments")) test_moments(a);
    if (tu_case("independence")) test_independence(a, b);
    if (tu_case("uniform")) test_uniform();
    if (tu_case("words_at")) test_words_at();
    if (tu_case("refusals")) test_refusals();
    free(a);
    free(b);
    return tu_finish("test_rng");
}
