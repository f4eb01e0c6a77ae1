/* dlperf clock probe (compiled at run time by dlperf.hardware.clock_probe with `cc -O2`).
 *
 * dlperf_fma:   FP32 fused multiply-adds on the widest vector unit the compiler was told about
 *               (-mavx512f, -mavx2 -mfma, NEON, -mavx or plain 128-bit vector extensions), ACC
 *               independent accumulators so that the FMA latency (4-5 cycles; 6-8 for a multiply
 *               then an add where there is no FMA) is covered on two units.
 * dlperf_chain: a dependent chain of register-register integer adds (latency 1 cycle on every
 *               x86 and Arm core): adds per second of the thread's CPU time = its scalar clock.
 * dlperf_fma_chain: one dependent chain of vector FMAs of the same ISA: FMAs per CPU second x the FMA
 *               latency in cycles (known per microarchitecture, looked up by the caller) = the clock
 *               under that ISA's load, which Intel's AVX2/AVX-512 frequency licences set below the
 *               scalar clock.
 * Both time themselves with the thread's CPU clock (a descheduled thread does not lower the rate)
 * and the monotonic clock, and return the work done (FLOPs, adds).
 */
#include <stdint.h>
#include <string.h>
#include <time.h>

#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 vec;
#define LANES 16
#define ACC 16
#define ISA "avx512f"
#define VSET(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps((a), (b), (c))
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 vec;
#define LANES 8
#define ACC 12
#define ISA "avx2+fma"
#define VSET(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps((a), (b), (c))
#elif defined(__ARM_NEON) && defined(__aarch64__)
#include <arm_neon.h>
typedef float32x4_t vec;
#define LANES 4
#define ACC 16
#define ISA "neon"
#define VSET(x) vdupq_n_f32(x)
#define VFMA(a, b, c) vfmaq_f32((c), (a), (b))
#elif defined(__AVX__)
typedef float vec __attribute__((vector_size(32)));
#define LANES 8
#define ACC 14
#define ISA "avx"
static inline vec VSET(float x) { vec v = {x, x, x, x, x, x, x, x}; return v; }
#define VFMA(a, b, c) ((a) * (b) + (c)) /* AVX without FMA: a multiply and an add, 2 FLOPs */
#else
typedef float vec __attribute__((vector_size(16)));
#define LANES 4
#define ACC 14
#define ISA "generic-128"
static inline vec VSET(float x) { vec v = {x, x, x, x}; return v; }
#define VFMA(a, b, c) ((a) * (b) + (c)) /* a multiply and an add where the ISA has no FMA: 2 FLOPs */
#endif

volatile float dlperf_sink;

static double seconds(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* 1 where this CPU (and its OS) runs the ISA compiled in: /proc/cpuinfo can be faked or wrong, an illegal
 * instruction cannot be caught. */
int dlperf_supported(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
#if defined(__AVX512F__)
    return __builtin_cpu_supports("avx512f");
#elif defined(__AVX2__) && defined(__FMA__)
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#elif defined(__AVX__)
    return __builtin_cpu_supports("avx");
#else
    return 1;
#endif
#else
    return 1;
#endif
}

int dlperf_lanes(void) { return LANES; }
int dlperf_accumulators(void) { return ACC; }
const char *dlperf_isa(void) { return ISA; }

double dlperf_fma(int64_t iters, double *wall_s, double *cpu_s) {
    volatile float mul = 0.999999f, add = 1e-7f; /* volatile: no constant folding */
    vec m = VSET(mul), a = VSET(add), acc[ACC];
    for (int j = 0; j < ACC; j++) acc[j] = VSET(1.0f + (float)j);
    double w0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_THREAD_CPUTIME_ID);
    for (int64_t i = 0; i < iters; i++) {
#pragma GCC unroll 16
        for (int j = 0; j < ACC; j++) acc[j] = VFMA(acc[j], m, a);
    }
    *cpu_s = seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
    *wall_s = seconds(CLOCK_MONOTONIC) - w0;
    float lanes[LANES], total = 0.0f;
    for (int j = 0; j < ACC; j++) {
        memcpy(lanes, &acc[j], sizeof lanes);
        for (int k = 0; k < LANES; k++) total += lanes[k];
    }
    dlperf_sink = total; /* the result is used: the loop cannot be dropped */
    return (double)iters * ACC * LANES * 2.0;
}

double dlperf_fma_chain(int64_t iters, double *wall_s, double *cpu_s) {
    volatile float mul = 0.999999f, add = 1e-7f;
    vec m = VSET(mul), a = VSET(add), x = VSET(1.0f);
    double w0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_THREAD_CPUTIME_ID);
    for (int64_t i = 0; i < iters; i++) {
#pragma GCC unroll 8
        for (int j = 0; j < 8; j++) x = VFMA(x, m, a); /* each FMA waits for the one before */
    }
    *cpu_s = seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
    *wall_s = seconds(CLOCK_MONOTONIC) - w0;
    float lanes[LANES], total = 0.0f;
    memcpy(lanes, &x, sizeof lanes);
    for (int k = 0; k < LANES; k++) total += lanes[k];
    dlperf_sink = total;
    return (double)iters * 8.0; /* FMAs (instructions) in the chain, not FLOPs */
}

double dlperf_chain(int64_t iters, double *wall_s, double *cpu_s) {
    uint64_t x = 0, y = 1;
    __asm__ volatile("" : "+r"(y)); /* y is unknown to the compiler: each add stays a register add */
    double w0 = seconds(CLOCK_MONOTONIC), c0 = seconds(CLOCK_THREAD_CPUTIME_ID);
    for (int64_t i = 0; i < iters; i++) {
#define STEP x += y; __asm__ volatile("" : "+r"(x));
        STEP STEP STEP STEP STEP STEP STEP STEP
#undef STEP
    }
    *cpu_s = seconds(CLOCK_THREAD_CPUTIME_ID) - c0;
    *wall_s = seconds(CLOCK_MONOTONIC) - w0;
    dlperf_sink = (float)x;
    return (double)iters * 8.0;
}
