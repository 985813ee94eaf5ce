/* RMSNorm: one block per token. The sum of squares is kept in double, as
 * the CPU reference does (ggml_float), so both agree to float rounding. */
#include "si-cuda-impl.cuh"

enum { NORM_THREADS = 256 };

__device__ __forceinline__ double warp_sum_d(double v)
{
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* x and y may be the same buffer: every element is read before the block
 * barrier (first pass) or by the thread that then writes it (second pass).
 * With res (add_rmsnorm), the first pass also adds res into x and writes
 * x back; each element is then read again only by the thread that wrote
 * it, so x and y are the add's and the norm's own results. */
__global__ void k_rmsnorm(float *x, const float *__restrict__ res, const float *__restrict__ weight,
                          float *y, int n, float eps)
{
    __shared__ double red[NORM_THREADS / 32];
    float *xt = x + (size_t)blockIdx.x * n;
    float *yt = y + (size_t)blockIdx.x * n;
    const float *rt = res ? res + (size_t)blockIdx.x * n : NULL;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;

    double s = 0.0;
    for (int i = threadIdx.x; i < n; i += NORM_THREADS) {
        float v = xt[i];
        if (rt) {
            v = __fadd_rn(v, rt[i]);
            xt[i] = v;
        }
        s += (double)(v * v);
    }
    s = warp_sum_d(s);
    if (lane == 0)
        red[warp] = s;
    __syncthreads();
    if (warp == 0) {
        s = lane < NORM_THREADS / 32 ? red[lane] : 0.0;
        s = warp_sum_d(s);
        if (lane == 0)
            red[0] = s;
    }
    __syncthreads();
    float mean = (float)(red[0] / n);
    float scale = 1.0f / sqrtf(mean + eps);
    for (int i = threadIdx.x; i < n; i += NORM_THREADS)
        yt[i] = __fmul_rn(__fmul_rn(xt[i], scale), weight ? weight[i] : 1.0f);
}

extern "C" int si_cuda_rmsnorm(si_cuda *c, const float *x, const float *weight, float *y,
                               int n_tokens, int n, float eps)
{
    SI_ARG_CHECK(c && n_tokens >= 0 && n >= 0);
    if (n_tokens == 0 || n == 0)
        return 0;
    SI_ARG_CHECK(x && y);
    /* the kernel writes x only with a residual */
    k_rmsnorm<<<n_tokens, NORM_THREADS, 0, c->stream>>>((float *)x, nullptr, weight, y, n, eps);
    SI_LAUNCH_CHECK("k_rmsnorm");
    return 0;
}

extern "C" int si_cuda_add_rmsnorm(si_cuda *c, float *x, const float *res, const float *weight,
                                   float *y, int n_tokens, int n, float eps)
{
    SI_ARG_CHECK(c && n_tokens >= 0 && n >= 0);
    if (n_tokens == 0 || n == 0)
        return 0;
    SI_ARG_CHECK(x && res && y);
    k_rmsnorm<<<n_tokens, NORM_THREADS, 0, c->stream>>>(x, res, weight, y, n, eps);
    SI_LAUNCH_CHECK("k_rmsnorm");
    return 0;
}
