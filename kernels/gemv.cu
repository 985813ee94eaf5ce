/* Decode GEMV: y[r] = w[r] . x (+ bias[r]), f16 weights, f32 x and y.
 *
 * Bandwidth bound: every weight byte is read once, so the kernel keeps many
 * 16-byte loads in flight. A block of 256 threads (8 warps) covers 8 / WPR
 * rows; WPR warps share one row (gemv-row.cuh), then sum through shared
 * memory. WPR grows for short matrices (k/v projections) so that there are
 * enough blocks to fill the device. Each lane has GEMV_UNROLL independent
 * loads outstanding; the first of them are issued before the kernel waits
 * for the one before it (si_launch: programmatic dependent launch).
 * Weights are loaded with the streaming hint (read once), x through the
 * read-only cache (read by every row). Rows whose length is not a multiple
 * of 8, or unaligned pointers, take a scalar path.
 *
 * Up to three matrices of the same width go in one launch (si_cuda_gemv3:
 * decode's q, k and v), their rows stacked: k and v of a GQA model are
 * small (6 MB for Llama-3.2-3B), and on an H200 each ran as its own kernel
 * at 1.2 TB/s against 2 TB/s for q (the ramp and tail of a few-us kernel).
 */
#include "gemv-row.cuh"

/* Up to three matrices sharing x and cols, one launch (decode's q, k and
 * v): row r of the stack is row r - first[m] of matrix m. */
enum { GEMV_MAX_MATS = 3 };
struct gemv_set {
    const uint16_t *w[GEMV_MAX_MATS];
    const float *bias[GEMV_MAX_MATS];
    float *y[GEMV_MAX_MATS];
    int end[GEMV_MAX_MATS]; /* stacked rows up to and including matrix m */
    int n;
};

/* The matrix of stacked row srow, and the row in it. Only constant
 * indices into the set: a computed one (set.w[m]) makes the compiler copy
 * the parameter block into each thread's local memory, which cost the
 * output head a third of its bandwidth on an H200. */
struct gemv_pick {
    const uint16_t *w;
    const float *bias;
    float *y;
    long row;
    int rows; /* of the whole stack */
};

__device__ __forceinline__ gemv_pick gemv_pick_row(const gemv_set &set, long srow)
{
    gemv_pick p = { set.w[0], set.bias[0], set.y[0], srow,
                    set.n == 1 ? set.end[0] : set.n == 2 ? set.end[1] : set.end[2] };
#pragma unroll
    for (int i = 1; i < GEMV_MAX_MATS; i++) {
        if (i < set.n && srow >= set.end[i - 1]) {
            p.w = set.w[i];
            p.bias = set.bias[i];
            p.y = set.y[i];
            p.row = srow - set.end[i - 1];
        }
    }
    return p;
}

template <int WPR, bool VEC>
__global__ void __launch_bounds__(GEMV_THREADS)
k_gemv(const gemv_set set, int cols, const float *__restrict__ x)
{
    __shared__ float red[GEMV_WARPS];
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long srow = (long)blockIdx.x * (GEMV_WARPS / WPR) + warp / WPR;
    const gemv_pick p = gemv_pick_row(set, srow);
    const float acc = gemv_row_part<WPR, VEC>(p.w + (size_t)p.row * cols, srow < p.rows ? cols : 0, x,
                                              warp % WPR, lane);
    /* every thread reaches gemv_row_sum's barrier: no early return above */
    const float sum = gemv_row_sum<WPR>(acc, red, warp, lane);
    if (warp % WPR == 0 && lane == 0 && srow < p.rows)
        p.y[p.row] = sum + (p.bias ? p.bias[p.row] : 0.0f);
}

/* Decode's RMSNorm folded into the GEMV that reads its output (the
 * "norm_fold" variant of si_cuda_norm_gemv): after the wait, while its
 * first weight loads are in flight, each block computes x + res, its sum
 * of squares and the normalized row into shared memory with k_rmsnorm's
 * arithmetic (the sum in double; the same products and roundings), then
 * walks its rows against that row: the norm's kernel, and its launch,
 * ramp and tail, are gone. No block may write x while another still
 * reads it, so the last block to have read it (a counter in c->done)
 * writes x + res and the normalized row back, and resets the counter. The
 * sum's grouping differs from k_rmsnorm's (256 threads, not one per float4),
 * so the scale may differ in its last bit where the double sum rounds
 * differently. */
__device__ __forceinline__ float4 add4(float4 a, float4 b)
{
    return make_float4(__fadd_rn(a.x, b.x), __fadd_rn(a.y, b.y), __fadd_rn(a.z, b.z), __fadd_rn(a.w, b.w));
}

template <int WPR>
__global__ void __launch_bounds__(GEMV_THREADS)
k_gemv_norm(const gemv_set set, int cols, float *x, const float *__restrict__ res,
            const float *__restrict__ nw, float eps, float *__restrict__ xn, unsigned *done)
{
    extern __shared__ float4 sx[]; /* the normalized row: cols / 4 */
    __shared__ float red[GEMV_WARPS];
    __shared__ double redd[GEMV_WARPS];
    __shared__ bool last;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long srow = (long)blockIdx.x * (GEMV_WARPS / WPR) + warp / WPR;
    const gemv_pick p = gemv_pick_row(set, srow);
    const int n4 = cols / 4;
    float4 *x4 = reinterpret_cast<float4 *>(x);
    const float4 *r4 = reinterpret_cast<const float4 *>(res);
    auto stage = [&]() {
        double s = 0.0;
        for (int i = threadIdx.x; i < n4; i += GEMV_THREADS) {
            float4 v = x4[i];
            if (res)
                v = add4(v, r4[i]);
            sx[i] = v;
            s += sq4(v);
        }
        s = block_sum_d(s, redd); /* a barrier: sx complete */
        const float scale = 1.0f / sqrtf((float)(s / cols) + eps);
        const float4 *w4 = reinterpret_cast<const float4 *>(nw);
        for (int i = threadIdx.x; i < n4; i += GEMV_THREADS) {
            const float4 v = sx[i], w = nw ? w4[i] : make_float4(1.0f, 1.0f, 1.0f, 1.0f);
            sx[i] = make_float4(__fmul_rn(__fmul_rn(v.x, scale), w.x), __fmul_rn(__fmul_rn(v.y, scale), w.y),
                                __fmul_rn(__fmul_rn(v.z, scale), w.z), __fmul_rn(__fmul_rn(v.w, scale), w.w));
        }
        __syncthreads();
        /* every load of x by this block has returned (its values are in sx) */
        if (threadIdx.x == 0)
            last = atomicAdd(done, 1u) == gridDim.x - 1;
    };
    const float acc = gemv_row_part<WPR, true, false>(p.w + (size_t)p.row * cols, srow < p.rows ? cols : 0,
                                                      reinterpret_cast<const float *>(sx), warp % WPR,
                                                      lane, stage);
    const float sum = gemv_row_sum<WPR>(acc, red, warp, lane);
    if (warp % WPR == 0 && lane == 0 && srow < p.rows)
        p.y[p.row] = sum + (p.bias ? p.bias[p.row] : 0.0f);
    __syncthreads(); /* `last` written */
    if (!last)
        return;
    float4 *xn4 = reinterpret_cast<float4 *>(xn);
    for (int i = threadIdx.x; i < n4; i += GEMV_THREADS) {
        if (res)
            x4[i] = add4(x4[i], r4[i]); /* x is as every block read it */
        xn4[i] = sx[i];
    }
    if (threadIdx.x == 0)
        *done = 0;
}

template <int WPR>
static cudaError_t launch(const si_cuda *c, bool vec, const gemv_set &set, int cols, const float *x)
{
    const int rpb = GEMV_WARPS / WPR;
    unsigned grid = (unsigned)(((long)set.end[set.n - 1] + rpb - 1) / rpb);
    if (vec)
        return si_launch(c, k_gemv<WPR, true>, grid, GEMV_THREADS, 0, set, cols, x);
    return si_launch(c, k_gemv<WPR, false>, grid, GEMV_THREADS, 0, set, cols, x);
}

/* The set's GEMVs in one launch; rows of the stack below 2^31. */
static int gemv_set_run(si_cuda *c, const gemv_set &set, int cols, const float *x)
{
    const long rows = set.end[set.n - 1];
    bool vec = cols % 8 == 0 && (uintptr_t)x % 16 == 0;
    for (int m = 0; m < set.n; m++)
        vec = vec && (uintptr_t)set.w[m] % 16 == 0;
    const int wpr = gemv_wpr(rows, cols, c->n_sm);
    cudaError_t e;
    switch (wpr) {
    case 1:
        e = launch<1>(c, vec, set, cols, x);
        break;
    case 2:
        e = launch<2>(c, vec, set, cols, x);
        break;
    case 4:
        e = launch<4>(c, vec, set, cols, x);
        break;
    default:
        e = launch<8>(c, vec, set, cols, x);
        break;
    }
    if (e != cudaSuccess)
        return si_cuda__fail_cuda(e, "launch of k_gemv", __FILE__, __LINE__);
    return 0;
}

/* The n matrices with rows (y untouched for those of none, as a GEMV of
 * no rows) stacked into *set; rows of the stack below 2^31. */
static int gemv_set_make(const uint16_t *const *w, const int *rows, int n, const float *const *bias,
                         float *const *y, gemv_set *set)
{
    *set = gemv_set{};
    long total = 0;
    for (int i = 0; i < n; i++) {
        SI_ARG_CHECK(rows[i] >= 0);
        if (rows[i] == 0)
            continue;
        SI_ARG_CHECK(w[i] && y[i]);
        total += rows[i];
        SI_ARG_CHECK(total <= INT32_MAX);
        set->w[set->n] = w[i];
        set->bias[set->n] = bias ? bias[i] : NULL;
        set->y[set->n] = y[i];
        set->end[set->n] = (int)total;
        set->n++;
    }
    return 0;
}

template <int WPR>
static cudaError_t launch_norm_gemv(const si_cuda *c, const gemv_set &set, int cols, float *x, const float *res,
                                    const float *nw, float eps, float *xn)
{
    const int rpb = GEMV_WARPS / WPR;
    unsigned grid = (unsigned)(((long)set.end[set.n - 1] + rpb - 1) / rpb);
    return si_launch(c, k_gemv_norm<WPR>, grid, GEMV_THREADS, (size_t)cols * sizeof(float), set, cols, x, res,
                     nw, eps, xn, c->done + SI_CUDA_DONE_NORM);
}

extern "C" int si_cuda_norm_gemv(si_cuda *c, float *x, const float *res, const float *nw, float eps,
                                 float *xn, const uint16_t *const *w, const int *rows, int n_w, int cols,
                                 const float *const *bias, float *const *y)
{
    SI_ARG_CHECK(c && x && xn && w && rows && y && n_w >= 1 && n_w <= GEMV_MAX_MATS && cols > 0);
    gemv_set set;
    int r = gemv_set_make(w, rows, n_w, bias, y, &set);
    if (r < 0)
        return r;
    /* the row in shared memory, beside the block's own few bytes, within
     * the 48 KB a launch gets without opting in: up to 8192 columns */
    bool vec = cols % 8 == 0 && (size_t)cols * sizeof(float) <= 32 * 1024 && (uintptr_t)x % 16 == 0 &&
               (uintptr_t)res % 16 == 0 && (uintptr_t)nw % 16 == 0 && (uintptr_t)xn % 16 == 0;
    for (int m = 0; m < set.n; m++)
        vec = vec && (uintptr_t)set.w[m] % 16 == 0;
    if (!c->norm_fold || !vec || set.n == 0) {
        /* the two kernels */
        r = res ? si_cuda_add_rmsnorm(c, x, res, nw, xn, 1, cols, eps) : si_cuda_rmsnorm(c, x, nw, xn, 1, cols, eps);
        return r < 0 || set.n == 0 ? r : gemv_set_run(c, set, cols, xn);
    }
    const int wpr = gemv_wpr(set.end[set.n - 1], cols, c->n_sm);
    cudaError_t e;
    switch (wpr) {
    case 1:
        e = launch_norm_gemv<1>(c, set, cols, x, res, nw, eps, xn);
        break;
    case 2:
        e = launch_norm_gemv<2>(c, set, cols, x, res, nw, eps, xn);
        break;
    case 4:
        e = launch_norm_gemv<4>(c, set, cols, x, res, nw, eps, xn);
        break;
    default:
        e = launch_norm_gemv<8>(c, set, cols, x, res, nw, eps, xn);
        break;
    }
    if (e != cudaSuccess)
        return si_cuda__fail_cuda(e, "launch of k_gemv_norm", __FILE__, __LINE__);
    return 0;
}

/* Also used by matmul for one token. */
extern "C" int si_cuda_gemv(si_cuda *c, const uint16_t *w, int rows, int cols, const float *x,
                            const float *bias, float *y)
{
    SI_ARG_CHECK(c && rows >= 0 && cols >= 0);
    if (rows == 0 || cols == 0)
        return 0; /* as the CPU reference: y untouched */
    SI_ARG_CHECK(w && x && y);
    gemv_set set = {};
    set.w[0] = w;
    set.bias[0] = bias;
    set.y[0] = y;
    set.end[0] = rows;
    set.n = 1;
    return gemv_set_run(c, set, cols, x);
}

extern "C" int si_cuda_gemv3(si_cuda *c, const uint16_t *const w[3], const int rows[3], int cols,
                             const float *x, const float *const bias[3], float *const y[3])
{
    SI_ARG_CHECK(c && w && rows && y && cols >= 0);
    if (cols == 0)
        return 0;
    SI_ARG_CHECK(x);
    gemv_set set;
    int r = gemv_set_make(w, rows, 3, bias, y, &set);
    return r < 0 || set.n == 0 ? r : gemv_set_run(c, set, cols, x);
}

extern "C" int si_cuda_matmul3(si_cuda *c, const uint16_t *const w[3], const int rows[3], int cols,
                               const float *const bias[3], const float *x, float *const y[3],
                               int n_tokens)
{
    SI_ARG_CHECK(c && w && rows && y && n_tokens >= 0);
    if (n_tokens == 1)
        return si_cuda_gemv3(c, w, rows, cols, x, bias, y);
    for (int i = 0; i < 3; i++) {
        int r = si_cuda_matmul(c, w[i], rows[i], cols, bias ? bias[i] : NULL, x, y[i], n_tokens);
        if (r < 0)
            return r;
    }
    return 0;
}
