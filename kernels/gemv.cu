/* Decode GEMV: y[r] = w[r] . x (+ bias[r]), f16 weights, f32 x and y.
 *
 * Bandwidth bound: every weight byte is read once, so the kernel keeps many
 * 16-byte loads in flight. A block of 256 threads (8 warps) covers 8 / WPR
 * rows; WPR warps share one row, each taking every WPR-th 256-element chunk
 * (32 lanes x 8 halves, one uint4 per lane), then summing through shared
 * memory. WPR grows for short matrices (k/v projections) so that there are
 * enough blocks to fill the device. The loop is unrolled by 4 so each lane
 * has 4 independent loads outstanding. Weights are loaded with the
 * streaming hint (read once), x through the read-only cache (read by every
 * row). Rows whose length is not a multiple of 8, or unaligned pointers,
 * take a scalar path.
 */
#include "si-cuda-impl.cuh"

enum { GEMV_THREADS = 256, GEMV_WARPS = GEMV_THREADS / 32 };

template <int WPR, bool VEC>
__global__ void __launch_bounds__(GEMV_THREADS)
k_gemv(const uint16_t *__restrict__ w, int rows, int cols, const float *__restrict__ x,
       const float *__restrict__ bias, float *__restrict__ y)
{
    __shared__ float red[GEMV_WARPS];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const int rsub = warp / WPR, part = warp % WPR;
    const long row = (long)blockIdx.x * (GEMV_WARPS / WPR) + rsub;
    float acc = 0.0f;
    if (row < rows) {
        const uint16_t *wr = w + (size_t)row * cols;
        if (VEC) {
            const uint4 *w4 = reinterpret_cast<const uint4 *>(wr);
            const float4 *x4 = reinterpret_cast<const float4 *>(x);
            const int n8 = cols / 8, step = 32 * WPR;
            int c = part * 32 + lane;
            float a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
            for (; c + 3 * step < n8; c += 4 * step) {
                uint4 v0 = __ldcs(w4 + c), v1 = __ldcs(w4 + c + step);
                uint4 v2 = __ldcs(w4 + c + 2 * step), v3 = __ldcs(w4 + c + 3 * step);
                acc = si_dot8(v0, __ldg(x4 + 2 * c), __ldg(x4 + 2 * c + 1), acc);
                a1 = si_dot8(v1, __ldg(x4 + 2 * (c + step)), __ldg(x4 + 2 * (c + step) + 1), a1);
                a2 = si_dot8(v2, __ldg(x4 + 2 * (c + 2 * step)), __ldg(x4 + 2 * (c + 2 * step) + 1), a2);
                a3 = si_dot8(v3, __ldg(x4 + 2 * (c + 3 * step)), __ldg(x4 + 2 * (c + 3 * step) + 1), a3);
            }
            for (; c < n8; c += step)
                acc = si_dot8(__ldcs(w4 + c), __ldg(x4 + 2 * c), __ldg(x4 + 2 * c + 1), acc);
            acc += (a1 + a2) + a3;
        } else {
            for (int k = part * 32 + lane; k < cols; k += 32 * WPR)
                acc = fmaf(si_h2f(wr[k]), __ldg(x + k), acc);
        }
    }
    acc = si_warp_sum(acc);
    if (WPR == 1) {
        if (lane == 0 && row < rows)
            y[row] = acc + (bias ? bias[row] : 0.0f);
        return;
    }
    /* every thread reaches the barrier: no early return above for WPR > 1 */
    if (lane == 0)
        red[warp] = acc;
    __syncthreads();
    if (part == 0 && lane == 0 && row < rows) {
        float s = 0.0f;
#pragma unroll
        for (int p = 0; p < WPR; p++)
            s += red[rsub * WPR + p];
        y[row] = s + (bias ? bias[row] : 0.0f);
    }
}

template <int WPR>
static void launch(cudaStream_t st, bool vec, const uint16_t *w, int rows, int cols,
                   const float *x, const float *bias, float *y)
{
    const int rpb = GEMV_WARPS / WPR;
    unsigned grid = (unsigned)(((long)rows + rpb - 1) / rpb);
    if (vec)
        k_gemv<WPR, true><<<grid, GEMV_THREADS, 0, st>>>(w, rows, cols, x, bias, y);
    else
        k_gemv<WPR, false><<<grid, GEMV_THREADS, 0, st>>>(w, rows, cols, x, bias, y);
}

/* Also used by matmul for one token. */
extern "C" int si_cuda_gemv(si_cuda *c, const uint16_t *w, int rows, int cols, const float *x,
                            const float *bias, float *y)
{
    SI_ARG_CHECK(c && rows >= 0 && cols >= 0);
    if (rows == 0 || cols == 0)
        return 0; /* as the CPU reference: y untouched */
    SI_ARG_CHECK(w && x && y);
    /* rows are at most 2^31 - 1, so the grid (rows / rpb) always fits */
    bool vec = cols % 8 == 0 && (uintptr_t)w % 16 == 0 && (uintptr_t)x % 16 == 0;
    /* Smallest WPR that gives ~4 blocks per SM, while each warp part keeps at
     * least one 256-element chunk of its row. */
    long chunks = (cols + 255) / 256;
    int wpr = 1;
    while (wpr < GEMV_WARPS && (long)rows * wpr / GEMV_WARPS < 4L * c->n_sm && chunks >= 2 * wpr)
        wpr *= 2;
    switch (wpr) {
    case 1:
        launch<1>(c->stream, vec, w, rows, cols, x, bias, y);
        break;
    case 2:
        launch<2>(c->stream, vec, w, rows, cols, x, bias, y);
        break;
    case 4:
        launch<4>(c->stream, vec, w, rows, cols, x, bias, y);
        break;
    default:
        launch<8>(c->stream, vec, w, rows, cols, x, bias, y);
        break;
    }
    SI_LAUNCH_CHECK("k_gemv");
    return 0;
}
