/* Dynamic-neuron counting at prefill, and greedy argmax, on the device.
 *
 * Counting (engine/topk.c, the host's code for select.c and the CPU
 * backend): per token, thr = the k-th largest rank value; every index whose
 * rank value is >= thr gets one count. Rank values are
 * mapped to uint32 keys whose unsigned order is the float order (|a|: the
 * bits without the sign; a: the sign-flip map, with -0 folded onto +0 since
 * the CPU compares floats, where -0 == +0), and the k-th largest key is
 * found exactly by a 4-pass radix select (8 bits a pass, a 256-bin
 * histogram in shared memory, one block per token). A second kernel gives
 * each index its count over all tokens (one thread per index, a loop over
 * tokens): no atomics on the counts, so the result is deterministic.
 * NaN activations are not ranked like the CPU's quickselect would (its
 * order with NaN is undefined anyway).
 */
#include <math.h>

#include "si-cuda-impl.cuh"

enum { SEL_THREADS = 512, ARGMAX_THREADS = 1024 };

__device__ __forceinline__ uint32_t rank_key(float a, int signed_rank)
{
    uint32_t b = __float_as_uint(a);
    if (!signed_rank)
        return b & 0x7fffffffu;
    if (b == 0x80000000u)
        b = 0; /* -0 == +0 */
    return (b & 0x80000000u) ? ~b : (b | 0x80000000u);
}

/* Number of positive activations over all tokens (signed rank's k). */
__global__ void k_count_pos(const float *__restrict__ act, long n, unsigned long long *__restrict__ npos)
{
    unsigned long long c = 0;
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        c += act[i] > 0.0f;
    /* warp sum, then one atomic per warp: integer, so still deterministic */
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        c += __shfl_xor_sync(0xffffffffu, c, o);
    if (threadIdx.x % 32 == 0 && c)
        atomicAdd(npos, c);
}

/* thr[t] = the k-th largest key of token t. k_abs > 0: that k; else k from
 * the positives count (signed rank), as topk.c computes it. */
__global__ void __launch_bounds__(SEL_THREADS)
k_topk_threshold(const float *__restrict__ act, int n_tokens, int n_sel, int k_abs, float alpha,
                 int signed_rank, const unsigned long long *__restrict__ npos, uint32_t *__restrict__ thr)
{
    __shared__ unsigned hist[256];
    __shared__ uint32_t s_prefix;
    __shared__ int s_k;
    const float *a = act + (size_t)blockIdx.x * n_sel;

    int k = k_abs;
    if (k <= 0) {
        double mean_pos = (double)*npos / n_tokens;
        k = (int)llround((double)alpha * mean_pos);
    }
    if (k < 1)
        k = 1;
    if (k > n_sel)
        k = n_sel;

    uint32_t prefix = 0, mask = 0;
    for (int shift = 24; shift >= 0; shift -= 8) {
        for (int i = threadIdx.x; i < 256; i += SEL_THREADS)
            hist[i] = 0;
        __syncthreads();
        for (int j = threadIdx.x; j < n_sel; j += SEL_THREADS) {
            uint32_t key = rank_key(a[j], signed_rank);
            if ((key & mask) == prefix)
                atomicAdd(&hist[(key >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            /* from the top digit down: the digit where the count of keys
             * above reaches k; keys of that digit stay candidates */
            unsigned cum = 0;
            int d = 255;
            for (; d > 0; d--) {
                if (cum + hist[d] >= (unsigned)k)
                    break;
                cum += hist[d];
            }
            s_prefix = prefix | ((uint32_t)d << shift);
            s_k = k - (int)cum;
        }
        __syncthreads();
        prefix = s_prefix;
        k = s_k;
        mask |= 255u << shift;
        /* hist is cleared at the top of the next pass, after this barrier */
        __syncthreads();
    }
    if (threadIdx.x == 0)
        thr[blockIdx.x] = prefix;
}

__global__ void k_topk_count(const float *__restrict__ act, int n_tokens, int n_sel, int signed_rank,
                             const uint32_t *__restrict__ thr, uint32_t *__restrict__ counts)
{
    for (long j = (long)blockIdx.x * blockDim.x + threadIdx.x; j < n_sel; j += (long)gridDim.x * blockDim.x) {
        uint32_t c = 0;
        for (int t = 0; t < n_tokens; t++)
            c += rank_key(act[(size_t)t * n_sel + j], signed_rank) >= thr[t];
        counts[j] += c;
    }
}

extern "C" int si_cuda_topk_count(si_cuda *c, const float *act, int n_tokens, int n_sel, float alpha,
                                  bool signed_rank, uint32_t *counts)
{
    SI_ARG_CHECK(c && n_tokens >= 0 && n_sel >= 0);
    if (n_tokens == 0 || n_sel == 0)
        return 0;
    SI_ARG_CHECK(act && counts);
    SI_ARG_CHECK(alpha > 0.0f && alpha <= 1.0f);
    size_t thr_b = si_align256((size_t)n_tokens * sizeof(uint32_t));
    void *p;
    int r = si_cuda__scratch(c, thr_b + 256, &p);
    if (r < 0)
        return r;
    uint32_t *thr = (uint32_t *)p;
    unsigned long long *npos = (unsigned long long *)((char *)p + thr_b);
    int k_abs = 0;
    if (signed_rank) {
        SI_CUDA_CHECK(cudaMemsetAsync(npos, 0, sizeof(*npos), c->stream));
        long n = (long)n_tokens * n_sel;
        k_count_pos<<<si_grid(n, 256, 1024), 256, 0, c->stream>>>(act, n, npos);
        SI_LAUNCH_CHECK("k_count_pos");
    } else {
        /* the same float expression as topk.c: (int)lround(alpha * n_sel) */
        k_abs = (int)lround(alpha * n_sel);
        if (k_abs < 1)
            k_abs = 1;
    }
    k_topk_threshold<<<n_tokens, SEL_THREADS, 0, c->stream>>>(act, n_tokens, n_sel, k_abs, alpha,
                                                             signed_rank ? 1 : 0, npos, thr);
    SI_LAUNCH_CHECK("k_topk_threshold");
    k_topk_count<<<si_grid(n_sel, 256, 4096), 256, 0, c->stream>>>(act, n_tokens, n_sel,
                                                                   signed_rank ? 1 : 0, thr, counts);
    SI_LAUNCH_CHECK("k_topk_count");
    return 0;
}

/* ---- greedy ---- */

__device__ __forceinline__ bool better(float v, int i, float bv, int bi)
{
    if (isnan(v))
        return false;
    if (bi < 0)
        return true;
    return v > bv || (v == bv && i < bi);
}

__global__ void __launch_bounds__(ARGMAX_THREADS)
k_argmax(const float *__restrict__ x, int n, int32_t *__restrict__ ret)
{
    __shared__ float sv[ARGMAX_THREADS / 32];
    __shared__ int si[ARGMAX_THREADS / 32];
    float bv = 0.0f;
    int bi = -1;
    for (int i = threadIdx.x; i < n; i += ARGMAX_THREADS) {
        float v = x[i];
        if (better(v, i, bv, bi)) {
            bv = v;
            bi = i;
        }
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
        float ov = __shfl_xor_sync(0xffffffffu, bv, o);
        int oi = __shfl_xor_sync(0xffffffffu, bi, o);
        if (oi >= 0 && better(ov, oi, bv, bi)) {
            bv = ov;
            bi = oi;
        }
    }
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    if (lane == 0) {
        sv[warp] = bv;
        si[warp] = bi;
    }
    __syncthreads();
    if (warp == 0) {
        bv = sv[lane];
        bi = si[lane]; /* ARGMAX_THREADS / 32 == 32 entries */
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) {
            float ov = __shfl_xor_sync(0xffffffffu, bv, o);
            int oi = __shfl_xor_sync(0xffffffffu, bi, o);
            if (oi >= 0 && better(ov, oi, bv, bi)) {
                bv = ov;
                bi = oi;
            }
        }
        if (lane == 0)
            *ret = bi;
    }
}

extern "C" int si_cuda_argmax(si_cuda *c, const float *logits, int n, int32_t *ret_id)
{
    SI_ARG_CHECK(c && n >= 0 && ret_id);
    SI_ARG_CHECK(n == 0 || logits);
    k_argmax<<<1, ARGMAX_THREADS, 0, c->stream>>>(logits, n, ret_id);
    SI_LAUNCH_CHECK("k_argmax");
    return 0;
}
