/* RMSNorm: one block per token. The sum of squares is kept in double, as
 * the CPU reference does (ggml_float), so both agree to float rounding. */
#include "si-cuda-impl.cuh"

/* A block per token, of a warp per 128 elements (float4 a thread) up to
 * 1024 threads: 768 for n_embd 3072, 32 for a head of 128 (the per-head
 * q/k norms run one block per head). Where the row is float4-aligned and
 * short enough (up to 1024 * 4 * NORM_VEC = 8192), each thread loads its
 * elements (and the residual's) into registers at once, so a token takes
 * two memory latencies, not one per element in turn: a decode norm of 256
 * threads walking 3072 elements took 8 us on an H200, its loads
 * serialized by the possible aliasing of x and y. */
enum { NORM_THREADS = 1024, NORM_WARPS = NORM_THREADS / 32, NORM_VEC = 2 };

/* x and y may be the same buffer: every element is read before the block
 * barrier (first pass) or by the thread that then writes it (second pass).
 * With res (add_rmsnorm), the first pass also adds res into x and writes
 * x back; each element is then read again only by the thread that wrote
 * it, so x and y are the add's and the norm's own results. */
template <bool VEC>
__global__ void __launch_bounds__(NORM_THREADS)
k_rmsnorm(float *x, const float *__restrict__ res, const float *__restrict__ weight, float *y,
          int n, float eps)
{
    __shared__ double red[NORM_WARPS];
    float *xt = x + (size_t)blockIdx.x * n;
    float *yt = y + (size_t)blockIdx.x * n;
    const float *rt = res ? res + (size_t)blockIdx.x * n : NULL;
    const int nt = blockDim.x;
    si_pdl_enter();

    if (VEC) {
        float4 *x4 = reinterpret_cast<float4 *>(xt);
        float4 *y4 = reinterpret_cast<float4 *>(yt);
        const int n4 = n / 4;
        float4 v[NORM_VEC];
#pragma unroll
        for (int u = 0; u < NORM_VEC; u++) {
            const int i = threadIdx.x + u * nt;
            v[u] = i < n4 ? x4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
        if (rt) {
            const float4 *r4 = reinterpret_cast<const float4 *>(rt);
            float4 r[NORM_VEC];
#pragma unroll
            for (int u = 0; u < NORM_VEC; u++) {
                const int i = threadIdx.x + u * nt;
                r[u] = i < n4 ? r4[i] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
#pragma unroll
            for (int u = 0; u < NORM_VEC; u++) {
                const int i = threadIdx.x + u * nt;
                v[u].x = __fadd_rn(v[u].x, r[u].x);
                v[u].y = __fadd_rn(v[u].y, r[u].y);
                v[u].z = __fadd_rn(v[u].z, r[u].z);
                v[u].w = __fadd_rn(v[u].w, r[u].w);
                if (i < n4)
                    x4[i] = v[u];
            }
        }
        double s = 0.0;
#pragma unroll
        for (int u = 0; u < NORM_VEC; u++)
            s += sq4(v[u]); /* zeros beyond the row */
        s = block_sum_d(s, red);
        const float scale = 1.0f / sqrtf((float)(s / n) + eps);
        const float4 *w4 = reinterpret_cast<const float4 *>(weight);
#pragma unroll
        for (int u = 0; u < NORM_VEC; u++) {
            const int i = threadIdx.x + u * nt;
            if (i >= n4)
                continue;
            const float4 w = weight ? w4[i] : make_float4(1.0f, 1.0f, 1.0f, 1.0f);
            y4[i] = make_float4(__fmul_rn(__fmul_rn(v[u].x, scale), w.x),
                                __fmul_rn(__fmul_rn(v[u].y, scale), w.y),
                                __fmul_rn(__fmul_rn(v[u].z, scale), w.z),
                                __fmul_rn(__fmul_rn(v[u].w, scale), w.w));
        }
        return;
    }

    double s = 0.0;
    for (int i = threadIdx.x; i < n; i += nt) {
        float v = xt[i];
        if (rt) {
            v = __fadd_rn(v, rt[i]);
            xt[i] = v;
        }
        s += (double)(v * v);
    }
    s = block_sum_d(s, red);
    float mean = (float)(s / n);
    float scale = 1.0f / sqrtf(mean + eps);
    for (int i = threadIdx.x; i < n; i += nt)
        yt[i] = __fmul_rn(__fmul_rn(xt[i], scale), weight ? weight[i] : 1.0f);
}

static cudaError_t launch_norm(si_cuda *c, float *x, const float *res, const float *weight, float *y,
                               int n_tokens, int n, float eps)
{
    const bool vec = n % 4 == 0 && n <= NORM_THREADS * 4 * NORM_VEC && (uintptr_t)x % 16 == 0 &&
                     (uintptr_t)y % 16 == 0 && (uintptr_t)res % 16 == 0 &&
                     (uintptr_t)weight % 16 == 0;
    /* a warp per 128 elements, 1024 threads at most */
    long nt = ((long)n + 127) / 128 * 32;
    if (nt > NORM_THREADS)
        nt = NORM_THREADS;
    if (vec)
        return si_launch(c, k_rmsnorm<true>, n_tokens, (unsigned)nt, 0, x, res, weight, y, n, eps);
    return si_launch(c, k_rmsnorm<false>, n_tokens, (unsigned)nt, 0, x, res, weight, y, n, eps);
}

extern "C" int si_cuda_rmsnorm(si_cuda *c, const float *x, const float *weight, float *y,
                               int n_tokens, int n, float eps)
{
    SI_ARG_CHECK(c && n_tokens >= 0 && n >= 0);
    if (n_tokens == 0 || n == 0)
        return 0;
    SI_ARG_CHECK(x && y);
    /* the kernel writes x only with a residual */
    cudaError_t e = launch_norm(c, (float *)x, nullptr, weight, y, n_tokens, n, eps);
    if (e != cudaSuccess)
        return si_cuda__fail_cuda(e, "launch of k_rmsnorm", __FILE__, __LINE__);
    return 0;
}

extern "C" int si_cuda_add_rmsnorm(si_cuda *c, float *x, const float *res, const float *weight,
                                   float *y, int n_tokens, int n, float eps)
{
    SI_ARG_CHECK(c && n_tokens >= 0 && n >= 0);
    if (n_tokens == 0 || n == 0)
        return 0;
    SI_ARG_CHECK(x && res && y);
    cudaError_t e = launch_norm(c, x, res, weight, y, n_tokens, n, eps);
    if (e != cudaSuccess)
        return si_cuda__fail_cuda(e, "launch of k_rmsnorm", __FILE__, __LINE__);
    return 0;
}
