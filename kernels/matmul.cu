/* Prefill matmul: y[t][r] = w[r] . x[t] (+ bias[r]) through cuBLAS.
 *
 * cuBLAS multiplies f16 by f16 (tensor cores) with f32 accumulation and an
 * f32 result; mixed f16 x f32 inputs do not exist, so x is rounded to f16
 * into scratch first (what llama.cpp does too): the relative error grows
 * from f32 rounding to about 2^-11 of sum |w x|. One token goes to the
 * hand-written GEMV, which reads x in f32.
 *
 * Layout: cuBLAS is column-major. Row-major w [rows][cols] is the
 * column-major cols x rows matrix, x [n][cols] is cols x n, and y [n][rows]
 * is rows x n, so y = op(w)^T x: transa = T, transb = N, m = rows, n =
 * n_tokens, k = cols, lda = ldb = cols, ldc = rows.
 */
#include "si-cuda-impl.cuh"

enum { MM_THREADS = 256 };

__global__ void k_f32_to_f16(const float *__restrict__ src, __half *__restrict__ dst, long n)
{
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        dst[i] = __float2half_rn(src[i]);
}

__global__ void k_add_bias(float *__restrict__ y, const float *__restrict__ bias, int rows, long n)
{
    for (long i = (long)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (long)gridDim.x * blockDim.x)
        y[i] += bias[i % rows];
}

/* Internal: also used by the FFN. x16 f16 [n][k] already on the device.
 * C (f32, ldc) = alpha * op(A) op(B) + beta * C with the layouts above. */
int si_cuda__gemm_f16(si_cuda *c, bool trans_a, int m, int n, int k, const __half *a, int lda,
                      const __half *b, int ldb, float beta, float *y, int ldc)
{
    const float alpha = 1.0f;
    SI_CUBLAS_CHECK(cublasGemmEx(c->blas, trans_a ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, m, n, k,
                                 &alpha, a, CUDA_R_16F, lda, b, CUDA_R_16F, ldb, &beta, y,
                                 CUDA_R_32F, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return 0;
}

int si_cuda__to_f16(si_cuda *c, const float *src, __half *dst, long n)
{
    if (n <= 0)
        return 0;
    k_f32_to_f16<<<si_grid(n, MM_THREADS, 4 * 65535), MM_THREADS, 0, c->stream>>>(src, dst, n);
    SI_LAUNCH_CHECK("k_f32_to_f16");
    return 0;
}

extern "C" size_t si_cuda_matmul_scratch(int rows, int cols, int n_tokens)
{
    (void)rows;
    if (n_tokens <= 1 || cols <= 0)
        return 0;
    return si_align256((size_t)n_tokens * cols * sizeof(__half));
}

extern "C" int si_cuda_matmul(si_cuda *c, const uint16_t *w, int rows, int cols, const float *bias,
                              const float *x, float *y, int n_tokens)
{
    SI_ARG_CHECK(c && rows >= 0 && cols >= 0 && n_tokens >= 0);
    if (rows == 0 || n_tokens == 0)
        return 0;
    SI_ARG_CHECK(w && x && y);
    if (cols == 0)
        return 0; /* as the CPU reference: y untouched */
    if (n_tokens == 1)
        return si_cuda_gemv(c, w, rows, cols, x, bias, y);
    {
        void *scr;
        int r = si_cuda__scratch(c, si_cuda_matmul_scratch(rows, cols, n_tokens), &scr);
        if (r < 0)
            return r;
        __half *x16 = (__half *)scr;
        if ((r = si_cuda__to_f16(c, x, x16, (long)n_tokens * cols)) < 0)
            return r;
        r = si_cuda__gemm_f16(c, true, rows, n_tokens, cols, (const __half *)w, cols, x16, cols,
                              0.0f, y, rows);
        if (r < 0)
            return r;
    }
    if (bias) {
        long n = (long)n_tokens * rows;
        k_add_bias<<<si_grid(n, MM_THREADS, 4 * 65535), MM_THREADS, 0, c->stream>>>(y, bias, rows, n);
        SI_LAUNCH_CHECK("k_add_bias");
    }
    return 0;
}
