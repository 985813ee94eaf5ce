/* Decode's RMSNorm folded into the kernel that reads its output (the
 * "norm_fold" variant: k_gemv_norm for the attention's q/k/v, k_ffn_act
 * for the FFN). After the kernel's wait, while its first weight loads are
 * in flight, each block computes x + res, the sum of squares (in double)
 * and the normalized row into shared memory with k_rmsnorm's arithmetic,
 * and reads the row from there; the norm's own kernel, and its launch,
 * ramp and tail, are gone. No block may write x while another still reads
 * it, so the last block to have read it (a counter) writes x + res and the
 * normalized row back, and resets the counter. The sum's grouping is not
 * k_rmsnorm's (the block's threads, not a thread per float4), so the
 * scale may differ in its last bit. */
#ifndef SI_NORM_FOLD_CUH
#define SI_NORM_FOLD_CUH

#include "si-cuda-impl.cuh"

struct si_norm_in {
    float *x;         /* [n]; x += res at the end, by the last block */
    const float *res; /* [n], or NULL: none */
    const float *w;   /* [n], or NULL: 1 */
    float eps;
    float *xn;        /* [n]: the normalized row, written by the last block */
    unsigned *done;   /* the counter: 0 before a launch, 0 after */
    int n;            /* a multiple of 4; the pointers 16-byte aligned */
};

__device__ __forceinline__ float4 si_add4(float4 a, float4 b)
{
    return make_float4(__fadd_rn(a.x, b.x), __fadd_rn(a.y, b.y), __fadd_rn(a.z, b.z), __fadd_rn(a.w, b.w));
}

/* Every thread of the block, after the wait: sx (n floats of shared
 * memory) gets the normalized row, red is blockDim.x / 32 doubles of
 * shared memory, and *last (shared) whether this block is the last to
 * have read x, valid after the next barrier. Ends with a barrier. */
__device__ __forceinline__ void si_norm_stage(const si_norm_in &a, float4 *sx, double *red, bool *last)
{
    const int n4 = a.n / 4;
    const float4 *x4 = reinterpret_cast<const float4 *>(a.x);
    const float4 *r4 = reinterpret_cast<const float4 *>(a.res);
    double s = 0.0;
    for (int i = threadIdx.x; i < n4; i += blockDim.x) {
        float4 v = x4[i];
        if (a.res)
            v = si_add4(v, r4[i]);
        sx[i] = v;
        s += sq4(v);
    }
    s = block_sum_d(s, red); /* a barrier: sx complete */
    const float scale = 1.0f / sqrtf((float)(s / a.n) + a.eps);
    const float4 *w4 = reinterpret_cast<const float4 *>(a.w);
    for (int i = threadIdx.x; i < n4; i += blockDim.x) {
        const float4 v = sx[i], w = a.w ? w4[i] : make_float4(1.0f, 1.0f, 1.0f, 1.0f);
        sx[i] = make_float4(__fmul_rn(__fmul_rn(v.x, scale), w.x), __fmul_rn(__fmul_rn(v.y, scale), w.y),
                            __fmul_rn(__fmul_rn(v.z, scale), w.z), __fmul_rn(__fmul_rn(v.w, scale), w.w));
    }
    __syncthreads();
    /* every load of x by this block has returned (its values are in sx) */
    if (threadIdx.x == 0)
        *last = atomicAdd(a.done, 1u) == gridDim.x - 1;
}

/* Every thread of the last block, after a barrier past si_norm_stage: x
 * is still as every block read it. */
__device__ __forceinline__ void si_norm_finish(const si_norm_in &a, const float4 *sx)
{
    float4 *x4 = reinterpret_cast<float4 *>(a.x), *xn4 = reinterpret_cast<float4 *>(a.xn);
    const float4 *r4 = reinterpret_cast<const float4 *>(a.res);
    for (int i = threadIdx.x; i < a.n / 4; i += blockDim.x) {
        if (a.res)
            x4[i] = si_add4(x4[i], r4[i]);
        xn4[i] = sx[i];
    }
    if (threadIdx.x == 0)
        *a.done = 0;
}

/* Whether the fold takes this norm: n % 8 == 0 (the kernels' 16-byte
 * loads of 8 values), the row in shared memory beside the block's own few
 * bytes within the 48 KB a launch gets without opting in (up to 8192
 * values), 16-byte aligned pointers. */
static inline bool si_norm_foldable(const si_norm_in &a)
{
    return a.n % 8 == 0 && a.n > 0 && (size_t)a.n * sizeof(float) <= 32 * 1024 && (uintptr_t)a.x % 16 == 0 &&
           (uintptr_t)a.res % 16 == 0 && (uintptr_t)a.w % 16 == 0 && (uintptr_t)a.xn % 16 == 0;
}

/* Without the fold: the norm's own kernel (k_rmsnorm, with the residual
 * when there is one), for the unfolded kernel after it to read xn. */
static inline int si_norm_kernel(si_cuda *c, const si_norm_in &a)
{
    return a.res ? si_cuda_add_rmsnorm(c, a.x, a.res, a.w, a.xn, 1, a.n, a.eps)
                 : si_cuda_rmsnorm(c, a.x, a.w, a.xn, 1, a.n, a.eps);
}

#endif
