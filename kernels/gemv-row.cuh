/* The decode GEMV's row walk, shared by k_gemv (gemv.cu) and the FFN's
 * gate/up rows (ffn.cu, k_ffn_gu): a block of GEMV_THREADS covers
 * GEMV_WARPS / WPR rows, WPR warps a row, each taking every WPR-th
 * 256-element chunk (32 lanes x 8 halves, one uint4 per lane). Each lane
 * has GEMV_UNROLL loads outstanding; the first ones are issued before the
 * kernel's wait (si_launch), so they overlap the kernel before. */
#ifndef SI_GEMV_ROW_CUH
#define SI_GEMV_ROW_CUH

#include "si-cuda-impl.cuh"

enum { GEMV_THREADS = 256, GEMV_WARPS = GEMV_THREADS / 32, GEMV_UNROLL = 8 };

/* Nothing to do between the wait and the row walk. */
struct gemv_no_pre {
    __device__ void operator()() const {}
};

/* This lane's part of wr . x over n elements (n = 0: a row that does not
 * exist, still through the wait), before the warp's sum. VEC: n % 8 == 0
 * and 16-byte aligned wr and x. pre() runs after the wait, before the
 * first use of x, in every thread of the block (k_gemv_norm writes x
 * there, in shared memory: then !LDG, x is not read through the read-only
 * cache). */
template <int WPR, bool VEC, bool LDG = true, typename Pre = gemv_no_pre>
__device__ __forceinline__ float gemv_row_part(const uint16_t *wr, int n, const float *__restrict__ x,
                                               int part, int lane, Pre pre = Pre())
{
    if (VEC) {
        /* GEMV_UNROLL predicated loads issued before any is used: a lane's
         * share of the row takes ceil(share / GEMV_UNROLL) memory
         * latencies, with no serial remainder */
        const uint4 *w4 = reinterpret_cast<const uint4 *>(wr);
        const float4 *x4 = reinterpret_cast<const float4 *>(x);
        const int n8 = n / 8, step = 32 * WPR;
        float a[4] = { 0.0f, 0.0f, 0.0f, 0.0f };
        int c = part * 32 + lane;
        uint4 v[GEMV_UNROLL];
#pragma unroll
        for (int u = 0; u < GEMV_UNROLL; u++)
            v[u] = c + u * step < n8 ? __ldcs(w4 + c + u * step) : make_uint4(0, 0, 0, 0);
        si_pdl_enter();
        pre();
        for (; c < n8; c += GEMV_UNROLL * step) {
#pragma unroll
            for (int u = 0; u < GEMV_UNROLL; u++) {
                const int cc = c + u * step;
                if (cc < n8)
                    a[u % 4] = LDG ? si_dot8(v[u], __ldg(x4 + 2 * cc), __ldg(x4 + 2 * cc + 1), a[u % 4])
                                   : si_dot8(v[u], x4[2 * cc], x4[2 * cc + 1], a[u % 4]);
            }
            const int cn = c + GEMV_UNROLL * step;
            if (cn < n8) {
#pragma unroll
                for (int u = 0; u < GEMV_UNROLL; u++)
                    v[u] = cn + u * step < n8 ? __ldcs(w4 + cn + u * step) : make_uint4(0, 0, 0, 0);
            }
        }
        return (a[0] + a[1]) + (a[2] + a[3]);
    }
    si_pdl_enter();
    pre();
    float acc = 0.0f;
    for (int k = part * 32 + lane; k < n; k += 32 * WPR)
        acc = fmaf(si_h2f(wr[k]), LDG ? __ldg(x + k) : x[k], acc);
    return acc;
}

/* The row's sum from its WPR warps' parts, valid in lane 0 of the row's
 * first warp (part 0). Every thread of the block calls it (a barrier when
 * WPR > 1); red holds GEMV_WARPS floats. */
template <int WPR>
__device__ __forceinline__ float gemv_row_sum(float acc, float *red, int warp, int lane)
{
    acc = si_warp_sum(acc);
    if (WPR == 1)
        return acc;
    if (lane == 0)
        red[warp] = acc;
    __syncthreads();
    float s = 0.0f;
    if (warp % WPR == 0 && lane == 0) {
#pragma unroll
        for (int p = 0; p < WPR; p++)
            s += red[warp + p];
    }
    return s;
}

/* Smallest WPR that gives ~8 blocks per SM (a full SM of 256-thread
 * blocks), while each warp part keeps at least one 256-element chunk of
 * its row. */
static inline int gemv_wpr(long rows, int cols, int n_sm)
{
    long chunks = ((long)cols + 255) / 256;
    int wpr = 1;
    while (wpr < GEMV_WARPS && rows * wpr / GEMV_WARPS < 8L * n_sm && chunks >= 2 * wpr)
        wpr *= 2;
    return wpr;
}

#endif
