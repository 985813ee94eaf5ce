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
#include "norm-fold.cuh"

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

/* Decode's attention norm folded into the q/k/v GEMV (norm-fold.cuh; the
 * "norm_fold" variant of si_cuda_norm_gemv): the rows walk the block's
 * normalized row in shared memory. */
template <int WPR>
__global__ void __launch_bounds__(GEMV_THREADS)
k_gemv_norm(const gemv_set set, int cols, const si_norm_in nm)
{
    extern __shared__ float4 sx[]; /* the normalized row: cols / 4 */
    __shared__ float red[GEMV_WARPS];
    __shared__ double redd[GEMV_WARPS];
    __shared__ bool last;
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    const long srow = (long)blockIdx.x * (GEMV_WARPS / WPR) + warp / WPR;
    const gemv_pick p = gemv_pick_row(set, srow);
    auto stage = [&]() { si_norm_stage(nm, sx, redd, &last); };
    const float acc = gemv_row_part<WPR, true, false>(p.w + (size_t)p.row * cols, srow < p.rows ? cols : 0,
                                                      reinterpret_cast<const float *>(sx), warp % WPR,
                                                      lane, stage);
    const float sum = gemv_row_sum<WPR>(acc, red, warp, lane);
    if (warp % WPR == 0 && lane == 0 && srow < p.rows)
        p.y[p.row] = sum + (p.bias ? p.bias[p.row] : 0.0f);
    __syncthreads(); /* `last` written */
    if (last)
        si_norm_finish(nm, sx);
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
static cudaError_t launch_norm_gemv(const si_cuda *c, const gemv_set &set, int cols, const si_norm_in &nm)
{
    const int rpb = GEMV_WARPS / WPR;
    unsigned grid = (unsigned)(((long)set.end[set.n - 1] + rpb - 1) / rpb);
    return si_launch(c, k_gemv_norm<WPR>, grid, GEMV_THREADS, (size_t)cols * sizeof(float), set, cols, nm);
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
    const si_norm_in nm = { x, res, nw, eps, xn, c->done + SI_CUDA_DONE_NORM, cols };
    bool vec = si_norm_foldable(nm);
    for (int m = 0; m < set.n; m++)
        vec = vec && (uintptr_t)set.w[m] % 16 == 0;
    if (!c->norm_fold || !vec || set.n == 0) {
        /* the two kernels */
        r = si_norm_kernel(c, nm);
        return r < 0 || set.n == 0 ? r : gemv_set_run(c, set, cols, xn);
    }
    const int wpr = gemv_wpr(set.end[set.n - 1], cols, c->n_sm);
    cudaError_t e;
    switch (wpr) {
    case 1:
        e = launch_norm_gemv<1>(c, set, cols, nm);
        break;
    case 2:
        e = launch_norm_gemv<2>(c, set, cols, nm);
        break;
    case 4:
        e = launch_norm_gemv<4>(c, set, cols, nm);
        break;
    default:
        e = launch_norm_gemv<8>(c, set, cols, nm);
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
