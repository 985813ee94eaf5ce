/* The device context: stream, cuBLAS handle, scratch, device facts; error
 * strings; device memory with clear out-of-memory messages; row uploads for
 * selective loading; CUDA graphs. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "si-cuda-impl.cuh"

/* ---- errors ---------------------------------------------------------------- */

static thread_local char last_error[512];

extern "C" const char *si_cuda_last_error(void)
{
    return last_error;
}

int si_cuda__fail(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    return code;
}

int si_cuda__fail_cuda(cudaError_t e, const char *stmt, const char *file, int line)
{
    int code = -EIO;
    if (e == cudaErrorMemoryAllocation)
        code = -ENOMEM;
    else if (e == cudaErrorNoDevice || e == cudaErrorInsufficientDriver ||
             e == cudaErrorInvalidDevice)
        code = -ENODEV;
    return si_cuda__fail(code, "%s at %s:%d: %s (%s)", stmt, file, line, cudaGetErrorString(e),
                         cudaGetErrorName(e));
}

int si_cuda__fail_blas(cublasStatus_t s, const char *stmt, const char *file, int line)
{
    int code = s == CUBLAS_STATUS_ALLOC_FAILED ? -ENOMEM : -EIO;
    return si_cuda__fail(code, "%s at %s:%d: %s (%s)", stmt, file, line,
                         cublasGetStatusString(s), cublasGetStatusName(s));
}

/* MemAvailable of /proc/meminfo in bytes, 0 when unknown. */
static size_t host_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f)
        return 0;
    char line[128];
    unsigned long long kb = 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return kb > (unsigned long long)(SIZE_MAX >> 10) ? SIZE_MAX : (size_t)kb << 10;
}

/* Free device memory. An integrated GPU (Jetson) allocates from the host's
 * memory, and cudaMemGetInfo there leaves out what the kernel can reclaim
 * (page cache: the GGUF file just read, or read by the last run), so it can
 * refuse a model that fits: take MemAvailable when it says more, as
 * NVIDIA's Jetson notes advise. */
static cudaError_t mem_get_info(const si_cuda *c, size_t *ret_free, size_t *ret_total)
{
    cudaError_t e = cudaMemGetInfo(ret_free, ret_total);
    if (e == cudaSuccess && c->integrated) {
        size_t avail = host_available();
        if (avail > *ret_total)
            avail = *ret_total;
        if (avail > *ret_free)
            *ret_free = avail;
    }
    return e;
}

/* ---- devices and context ------------------------------------------------------ */

extern "C" int si_cuda_device_count(void)
{
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        si_cuda__fail_cuda(e, "cudaGetDeviceCount(&n)", __FILE__, __LINE__);
        (void)cudaGetLastError(); /* not sticky: clear it for later calls */
        return 0;
    }
    if (n <= 0)
        si_cuda__fail(-ENODEV, "no CUDA device");
    return n > 0 ? n : 0;
}

extern "C" void si_cuda_free(si_cuda *c)
{
    if (!c)
        return;
    /* Destruction must not fail loudly: errors here are recorded only. */
    if (cudaSetDevice(c->device) == cudaSuccess) {
        if (c->own_stream)
            (void)cudaStreamSynchronize(c->own_stream);
        if (c->scratch)
            (void)cudaFree(c->scratch);
        if (c->done)
            (void)cudaFree(c->done);
        if (c->argmax_v)
            (void)cudaFree(c->argmax_v);
        if (c->argmax_i)
            (void)cudaFree(c->argmax_i);
        if (c->blas)
            (void)cublasDestroy(c->blas);
        if (c->own_stream)
            (void)cudaStreamDestroy(c->own_stream);
    }
    (void)cudaGetLastError();
    free(c);
}

static int ctx_init(si_cuda *c, int device)
{
    int n = 0;
    SI_CUDA_CHECK(cudaGetDeviceCount(&n));
    if (device < 0 || device >= n)
        return si_cuda__fail(-ENODEV, "CUDA device %d does not exist (%d devices)", device, n);
    c->device = device;
    SI_CUDA_CHECK(cudaSetDevice(device));
    int integrated = 0;
    SI_CUDA_CHECK(cudaDeviceGetAttribute(&c->n_sm, cudaDevAttrMultiProcessorCount, device));
    SI_CUDA_CHECK(cudaDeviceGetAttribute(&integrated, cudaDevAttrIntegrated, device));
    c->integrated = integrated != 0;
    int major = 0;
    SI_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
    c->pdl_ok = major >= 9;
    c->pdl = c->pdl_ok;
    c->ffn_act_unroll = 4;
    c->ffn_fused_bps = 1;
    int l2 = 0;
    SI_CUDA_CHECK(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device));
    c->l2_bytes = l2 > 0 ? (size_t)l2 : 0;
    SI_CUDA_CHECK(cudaMalloc((void **)&c->done, SI_CUDA_DONE_ALL * sizeof(unsigned)));
    SI_CUDA_CHECK(cudaMemset(c->done, 0, SI_CUDA_DONE_ALL * sizeof(unsigned)));
    SI_CUDA_CHECK(cudaMalloc((void **)&c->argmax_v, ARGMAX_BLOCKS * sizeof(float)));
    SI_CUDA_CHECK(cudaMalloc((void **)&c->argmax_i, ARGMAX_BLOCKS * sizeof(int)));
    SI_CUDA_CHECK(cudaStreamCreateWithFlags(&c->own_stream, cudaStreamNonBlocking));
    c->stream = c->own_stream;
    SI_CUBLAS_CHECK(cublasCreate(&c->blas));
    SI_CUBLAS_CHECK(cublasSetStream(c->blas, c->stream));
    /* f16 inputs, f32 accumulate: tensor cores are allowed, the result type
     * stays f32. */
    SI_CUBLAS_CHECK(cublasSetMathMode(c->blas, CUBLAS_DEFAULT_MATH));
    return 0;
}

extern "C" int si_cuda_new(int device, si_cuda **ret)
{
    if (!ret)
        return si_cuda__fail(-EINVAL, "si_cuda_new: ret is NULL");
    si_cuda *c = (si_cuda *)calloc(1, sizeof(*c));
    if (!c)
        return si_cuda__fail(-ENOMEM, "si_cuda_new: out of host memory");
    int r = ctx_init(c, device);
    if (r < 0) {
        char keep[sizeof(last_error)];
        memcpy(keep, last_error, sizeof(keep)); /* si_cuda_free may overwrite nothing, but be sure */
        si_cuda_free(c);
        memcpy(last_error, keep, sizeof(keep));
        return r;
    }
    *ret = c;
    return 0;
}

extern "C" int si_cuda_get_info(si_cuda *c, si_cuda_info *ret)
{
    SI_ARG_CHECK(c && ret);
    si_cuda_info in;
    memset(&in, 0, sizeof(in));
    cudaDeviceProp p;
    SI_CUDA_CHECK(cudaGetDeviceProperties(&p, c->device));
    snprintf(in.name, sizeof(in.name), "%s", p.name);
    in.device = c->device;
    in.cc_major = p.major;
    in.cc_minor = p.minor;
    in.n_sm = c->n_sm;
    in.integrated = c->integrated;
    SI_CUDA_CHECK(cudaSetDevice(c->device));
    SI_CUDA_CHECK(mem_get_info(c, &in.mem_free, &in.mem_total));
    int clock_khz = 0, bus_bits = 0;
    /* Not every platform reports these (0 then); they are only for the
     * roofline in benchmarks. */
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, c->device) != cudaSuccess)
        clock_khz = 0;
    if (cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, c->device) !=
        cudaSuccess)
        bus_bits = 0;
    (void)cudaGetLastError();
    in.peak_gbps = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
    *ret = in;
    return 0;
}

extern "C" bool si_cuda_set_pdl(si_cuda *c, bool on)
{
    if (!c)
        return false;
    c->pdl = on && c->pdl_ok;
    return c->pdl;
}

extern "C" int si_cuda_set_variant(si_cuda *c, const char *name, int value)
{
    SI_ARG_CHECK(c && name);
    if (!strcmp(name, "ffn_act_unroll") && (value == 4 || value == 8))
        c->ffn_act_unroll = value;
    else if (!strcmp(name, "ffn_decode") && value >= SI_FFN_DECODE_WARP && value <= SI_FFN_DECODE_FUSED)
        c->ffn_decode = value;
    else if (!strcmp(name, "ffn_fused_bps") && (value == 1 || value == 2))
        c->ffn_fused_bps = value;
    else if (!strcmp(name, "attn_combine") && (value == 0 || value == 1))
        c->attn_combine = value;
    else if (!strcmp(name, "l2_prefetch") && value >= 0 && value <= 100)
        c->l2_prefetch = value;
    else if (!strcmp(name, "norm_fold") && (value == 0 || value == 1))
        c->norm_fold = value;
    else
        return si_cuda__fail(-EINVAL, "no kernel variant %s=%d", name, value);
    return 0;
}

extern "C" int si_cuda_bind(si_cuda *c)
{
    SI_ARG_CHECK(c);
    int cur = -1;
    SI_CUDA_CHECK(cudaGetDevice(&cur));
    if (cur != c->device)
        SI_CUDA_CHECK(cudaSetDevice(c->device));
    return 0;
}

extern "C" int si_cuda_mem_info(si_cuda *c, size_t *ret_free, size_t *ret_total)
{
    SI_ARG_CHECK(c && ret_free && ret_total);
    SI_CUDA_CHECK(cudaSetDevice(c->device));
    SI_CUDA_CHECK(mem_get_info(c, ret_free, ret_total));
    return 0;
}

extern "C" cudaStream_t si_cuda_stream(const si_cuda *c)
{
    return c ? c->stream : NULL;
}

extern "C" void si_cuda_set_stream(si_cuda *c, cudaStream_t stream)
{
    if (!c)
        return;
    c->stream = stream ? stream : c->own_stream;
    (void)cublasSetStream(c->blas, c->stream);
}

extern "C" int si_cuda_sync(si_cuda *c)
{
    SI_ARG_CHECK(c);
    SI_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    return 0;
}

/* ---- memory --------------------------------------------------------------------- */

extern "C" int si_cuda_alloc(si_cuda *c, size_t bytes, void **ret)
{
    SI_ARG_CHECK(c && ret);
    if (bytes == 0)
        bytes = 1;
    SI_CUDA_CHECK(cudaSetDevice(c->device));
    size_t free_b = 0, total_b = 0;
    SI_CUDA_CHECK(mem_get_info(c, &free_b, &total_b));
    /* The allocator rounds up and keeps some memory for itself; checking
     * first turns the common case into a message with both numbers. */
    if (bytes > free_b)
        return si_cuda__fail(-ENOMEM,
                             "out of device memory: needs %zu bytes, %zu free (of %zu) on device %d",
                             bytes, free_b, total_b, c->device);
    void *p = NULL;
    cudaError_t e = cudaMalloc(&p, bytes);
    if (e == cudaErrorMemoryAllocation) {
        (void)cudaGetLastError();
        return si_cuda__fail(-ENOMEM,
                             "out of device memory: cudaMalloc of %zu bytes failed, %zu were free",
                             bytes, free_b);
    }
    SI_CUDA_CHECK(e);
    *ret = p;
    return 0;
}

extern "C" void si_cuda_dev_free(si_cuda *c, void *p)
{
    if (!c || !p)
        return;
    (void)cudaFree(p);
    (void)cudaGetLastError();
}

extern "C" int si_cuda_upload(si_cuda *c, void *dst, const void *src, size_t bytes)
{
    SI_ARG_CHECK(c && (bytes == 0 || (dst && src)));
    if (bytes)
        SI_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream));
    return 0;
}

extern "C" int si_cuda_download(si_cuda *c, void *dst, const void *src, size_t bytes)
{
    SI_ARG_CHECK(c && (bytes == 0 || (dst && src)));
    if (bytes)
        SI_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream));
    return 0;
}

extern "C" int si_cuda_copy(si_cuda *c, void *dst, const void *src, size_t bytes)
{
    SI_ARG_CHECK(c && (bytes == 0 || (dst && src)));
    if (bytes)
        SI_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, c->stream));
    return 0;
}

extern "C" int si_cuda_upload_rows(si_cuda *c, void *dst, const int32_t *dst_rows, const void *src,
                                   const int32_t *src_rows, int n, size_t row_bytes)
{
    SI_ARG_CHECK(c && n >= 0 && (n == 0 || (dst && dst_rows && src && src_rows)));
    for (int i = 0; i < n;) {
        SI_ARG_CHECK(dst_rows[i] >= 0 && src_rows[i] >= 0);
        int j = i + 1;
        while (j < n && dst_rows[j] == dst_rows[j - 1] + 1 && src_rows[j] == src_rows[j - 1] + 1)
            j++;
        char *d = (char *)dst + (size_t)dst_rows[i] * row_bytes;
        const char *s = (const char *)src + (size_t)src_rows[i] * row_bytes;
        SI_CUDA_CHECK(cudaMemcpyAsync(d, s, (size_t)(j - i) * row_bytes, cudaMemcpyHostToDevice,
                                      c->stream));
        i = j;
    }
    return 0;
}

/* ---- scratch ---------------------------------------------------------------------- */

extern "C" int si_cuda_reserve(si_cuda *c, size_t bytes)
{
    SI_ARG_CHECK(c);
    if (bytes <= c->scratch_size)
        return 0;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    SI_CUDA_CHECK(cudaStreamIsCapturing(c->stream, &cs));
    if (cs != cudaStreamCaptureStatusNone)
        return si_cuda__fail(-EINVAL,
                             "scratch must grow to %zu bytes during graph capture: call "
                             "si_cuda_reserve before capturing",
                             bytes);
    if (c->n_graphs > 0)
        return si_cuda__fail(-EBUSY,
                             "scratch must grow to %zu bytes while %d graph(s) use the old one: "
                             "call si_cuda_reserve before capturing",
                             bytes, c->n_graphs);
    /* The old scratch may still be in use by queued kernels. */
    SI_CUDA_CHECK(cudaStreamSynchronize(c->stream));
    if (c->scratch) {
        SI_CUDA_CHECK(cudaFree(c->scratch));
        c->scratch = NULL;
        c->scratch_size = 0;
    }
    size_t want = si_align256(bytes);
    int r = si_cuda_alloc(c, want, &c->scratch);
    if (r < 0) {
        c->scratch = NULL;
        return r;
    }
    c->scratch_size = want;
    return 0;
}

int si_cuda__scratch(si_cuda *c, size_t bytes, void **ret)
{
    int r = si_cuda_reserve(c, bytes);
    if (r < 0)
        return r;
    *ret = c->scratch;
    return 0;
}

/* ---- graphs ----------------------------------------------------------------------- */

struct si_cuda_graph {
    si_cuda *c;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
};

extern "C" int si_cuda_graph_begin(si_cuda *c)
{
    SI_ARG_CHECK(c);
    /* Thread-local mode: only this thread's unsafe calls (cudaMalloc...)
     * invalidate the capture, other threads keep using the runtime. */
    SI_CUDA_CHECK(cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal));
    return 0;
}

extern "C" int si_cuda_graph_end(si_cuda *c, si_cuda_graph **ret)
{
    SI_ARG_CHECK(c && ret);
    cudaGraph_t g = NULL;
    SI_CUDA_CHECK(cudaStreamEndCapture(c->stream, &g));
    si_cuda_graph *sg = (si_cuda_graph *)calloc(1, sizeof(*sg));
    if (!sg) {
        (void)cudaGraphDestroy(g);
        return si_cuda__fail(-ENOMEM, "si_cuda_graph_end: out of host memory");
    }
    sg->graph = g;
    cudaError_t e = cudaGraphInstantiate(&sg->exec, g, 0);
    if (e != cudaSuccess) {
        (void)cudaGraphDestroy(g);
        free(sg);
        return si_cuda__fail_cuda(e, "cudaGraphInstantiate(&exec, g, 0)", __FILE__, __LINE__);
    }
    sg->c = c;
    c->n_graphs++;
    *ret = sg;
    return 0;
}

extern "C" int si_cuda_graph_end_update(si_cuda *c, si_cuda_graph **g, bool *ret_updated)
{
    SI_ARG_CHECK(c && g);
    if (ret_updated)
        *ret_updated = false;
    if (!*g)
        return si_cuda_graph_end(c, g);
    si_cuda_graph *sg = *g;
    cudaGraph_t ng = NULL;
    cudaError_t e = cudaStreamEndCapture(c->stream, &ng);
    if (e != cudaSuccess) {
        si_cuda_graph_free(sg);
        *g = NULL;
        return si_cuda__fail_cuda(e, "cudaStreamEndCapture(c->stream, &ng)", __FILE__, __LINE__);
    }
    cudaGraphExecUpdateResultInfo info;
    e = cudaGraphExecUpdate(sg->exec, ng, &info);
    if (e == cudaSuccess) {
        /* the executable now runs ng's parameters; keep ng as its source */
        (void)cudaGraphDestroy(sg->graph);
        sg->graph = ng;
        if (ret_updated)
            *ret_updated = true;
        return 0;
    }
    /* Another topology: not an error, the update just does not apply.
     * CUDA leaves the error set; clear it and instantiate. */
    (void)cudaGetLastError();
    cudaGraphExec_t ex = NULL;
    e = cudaGraphInstantiate(&ex, ng, 0);
    if (e != cudaSuccess) {
        (void)cudaGraphDestroy(ng);
        si_cuda_graph_free(sg);
        *g = NULL;
        return si_cuda__fail_cuda(e, "cudaGraphInstantiate(&ex, ng, 0)", __FILE__, __LINE__);
    }
    (void)cudaGraphExecDestroy(sg->exec);
    (void)cudaGraphDestroy(sg->graph);
    sg->exec = ex;
    sg->graph = ng;
    return 0;
}

extern "C" void si_cuda_graph_abort(si_cuda *c)
{
    if (!c)
        return;
    cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
    if (cudaStreamIsCapturing(c->stream, &cs) == cudaSuccess && cs != cudaStreamCaptureStatusNone) {
        cudaGraph_t ng = NULL;
        /* an invalidated capture ends with an error and maybe no graph */
        if (cudaStreamEndCapture(c->stream, &ng) == cudaSuccess && ng)
            (void)cudaGraphDestroy(ng);
    }
    (void)cudaGetLastError();
}

extern "C" int si_cuda_graph_launch(si_cuda *c, si_cuda_graph *g)
{
    SI_ARG_CHECK(c && g);
    SI_CUDA_CHECK(cudaGraphLaunch(g->exec, c->stream));
    return 0;
}

extern "C" int si_cuda_graph_edges(const si_cuda_graph *g, int *ret_edges, int *ret_programmatic)
{
    SI_ARG_CHECK(g && ret_edges && ret_programmatic);
    size_t n = 0;
    SI_CUDA_CHECK(cudaGraphGetEdges(g->graph, NULL, NULL, NULL, &n));
    *ret_edges = (int)n;
    *ret_programmatic = 0;
    if (n == 0)
        return 0;
    cudaGraphNode_t *from = (cudaGraphNode_t *)calloc(n, sizeof(*from));
    cudaGraphNode_t *to = (cudaGraphNode_t *)calloc(n, sizeof(*to));
    cudaGraphEdgeData *data = (cudaGraphEdgeData *)calloc(n, sizeof(*data));
    cudaError_t e = from && to && data ? cudaGraphGetEdges(g->graph, from, to, data, &n)
                                       : cudaErrorMemoryAllocation;
    for (size_t i = 0; e == cudaSuccess && i < n; i++)
        *ret_programmatic += data[i].type == cudaGraphDependencyTypeProgrammatic;
    free(from);
    free(to);
    free(data);
    SI_CUDA_CHECK(e);
    return 0;
}

extern "C" void si_cuda_graph_free(si_cuda_graph *g)
{
    if (!g)
        return;
    if (g->exec)
        (void)cudaGraphExecDestroy(g->exec);
    if (g->graph)
        (void)cudaGraphDestroy(g->graph);
    (void)cudaGetLastError();
    if (g->c)
        g->c->n_graphs--;
    free(g);
}
