/* Model loading and the forward pass.
 *
 * Loading maps the GGUF file, checks every tensor the architecture needs
 * against the shapes the metadata implies, converts the weights to the
 * storage type (f16 by default) and closes the file: after eng_model_load()
 * nothing refers to the mapping (Gemma 4's per-layer embedding table is
 * read from the file as tokens come: eng_model.ple_tok). The FFN is stored
 * neuron-major (see backend.h) so that selective loading and computation
 * can address neurons.
 *
 * Weights live in backend memory. For the CPU backend that is host memory
 * and conversions write straight into it; for a GPU each conversion job
 * writes a host staging buffer and uploads it, so the host never holds more
 * than one job's worth of converted weights per thread (on a Jetson, whose
 * GPU shares the host's memory, no second copy of the model remains).
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <sys/stat.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "gguf.h"
#include "model.h"
#include "quants.h"
#include "select.h"
#include "threadpool.h"

#define MAX_LAYERS 512
#define MAX_DIM (1 << 20)

eng_model_params eng_model_params_default(void)
{
    return (eng_model_params){ .storage = ENG_DTYPE_F16, .n_threads = 0 };
}

/* ---- ownership of model buffers ---- */

static void *model_alloc(eng_model *m, size_t size)
{
    if (m->n_allocs == m->cap_allocs) {
        size_t cap = m->cap_allocs ? 2 * m->cap_allocs : 64;
        void **a = realloc(m->allocs, cap * sizeof(*a));
        if (!a)
            return NULL;
        m->allocs = a;
        m->cap_allocs = cap;
    }
    /* 64-byte alignment: whole cache lines for the SIMD kernels */
    size_t rounded = (size + 63) & ~(size_t)63;
    void *p = aligned_alloc(64, rounded ? rounded : 64);
    if (!p)
        return NULL;
    m->allocs[m->n_allocs++] = p;
    return p;
}

/* Backend memory the model owns (weights). */
static void *weight_alloc(eng_model *m, size_t size)
{
    if (m->n_bufs == m->cap_bufs) {
        size_t cap = m->cap_bufs ? 2 * m->cap_bufs : 64;
        void **a = realloc(m->bufs, cap * sizeof(*a));
        if (!a)
            return NULL;
        m->bufs = a;
        m->cap_bufs = cap;
    }
    void *p;
    if (m->be->iface->alloc(m->be, size, &p) < 0)
        return NULL;
    m->bufs[m->n_bufs++] = p;
    return p;
}

static void weight_free_ptr(eng_model *m, const void *p)
{
    for (size_t i = m->n_bufs; i-- > 0;)
        if (m->bufs[i] == p) {
            m->be->iface->mem_free(m->be, m->bufs[i]);
            m->bufs[i] = m->bufs[--m->n_bufs];
            return;
        }
}

void eng_model_free(eng_model *m)
{
    if (!m)
        return;
    if (m->be) {
        for (size_t i = 0; i < m->n_bufs; i++)
            m->be->iface->mem_free(m->be, m->bufs[i]);
        m->be->iface->free(m->be);
    }
    free(m->bufs);
    if (m->ple_tok.open)
        close(m->ple_tok.fd);
    eng_vocab_free(m->vocab);
    free(m->path);
    for (size_t i = 0; i < m->n_allocs; i++)
        free(m->allocs[i]);
    free(m->allocs);
    free(m->layers);
    free(m->layer_sens);
    free(m);
}

/* ---- tensor fetch and conversion ---- */

struct conv_job;

typedef struct loader {
    const gguf_file *f;
    eng_model *m;
    eng_error *err;
    float *row; /* scratch: one dequantized row */
    size_t row_cap;
    uint8_t *stage; /* converted weights on their way to backend memory */
    size_t stage_cap;
    /* conversions deferred until every tensor is checked and allocated,
     * then run in parallel (run_jobs) */
    struct conv_job *jobs;
    size_t n_jobs, cap_jobs;
} loader;

/* Finds a tensor and checks its shape: ne0 is the row length. A missing
 * optional tensor returns 0 with *ret = NULL. */
static int get_tensor(loader *ld, const char *name, int n_dims, uint64_t ne0, uint64_t ne1,
                      bool required, const gguf_tensor **ret)
{
    const gguf_tensor *t = gguf_find_tensor(ld->f, name);
    *ret = NULL;
    if (!t) {
        return required ? eng__set_err(ld->err, -ENOENT, "tensor '%s' is missing", name) : 0;
    }
    uint64_t want[2] = { ne0, n_dims > 1 ? ne1 : 1 };
    uint64_t got1 = 1;
    for (uint32_t d = 1; d < t->n_dims; d++)
        got1 *= t->ne[d];
    if (t->ne[0] != want[0] || got1 != want[1] || (n_dims == 1 && t->n_dims != 1))
        return eng__set_err(ld->err, -EINVAL,
                            "tensor '%s' has shape [%llu, %llu], expected [%llu, %llu]", name,
                            (unsigned long long)t->ne[0], (unsigned long long)got1,
                            (unsigned long long)want[0], (unsigned long long)want[1]);
    if (!ggml_type_known(t->type) || !t->data)
        return eng__set_err(ld->err, -EINVAL, "tensor '%s' has unsupported type %s (%u)", name,
                            ggml_type_name(t->type), t->type);
    if (ggml_row_bytes(t->type, t->ne[0]) == 0)
        return eng__set_err(ld->err, -EINVAL,
                            "tensor '%s': row of %llu elements is not whole blocks of %s", name,
                            (unsigned long long)t->ne[0], ggml_type_name(t->type));
    *ret = t;
    return 0;
}

static int dequant_row(loader *ld, const gguf_tensor *t, uint64_t r, float *dst)
{
    size_t rb = ggml_row_bytes(t->type, t->ne[0]);
    const uint8_t *src = (const uint8_t *)t->data + r * rb;
    int e = eng_dequant_row_f32(t->type, src, dst, t->ne[0]);
    if (e < 0)
        return eng__set_err(ld->err, e, "tensor '%s': cannot convert type %s", t->name,
                            ggml_type_name(t->type));
    return 0;
}

/* The whole of tensor t's bytes leave the resident set (gguf_release). */
static void release_tensor(const loader *ld, const gguf_tensor *t)
{
    uint64_t rows = 1;
    for (uint32_t d = 1; d < t->n_dims; d++)
        rows *= t->ne[d];
    gguf_release(ld->f, t->data, (size_t)(rows * ggml_row_bytes(t->type, t->ne[0])));
}

static int ensure_row(loader *ld, size_t n)
{
    if (n <= ld->row_cap)
        return 0;
    float *p = realloc(ld->row, n * sizeof(float));
    if (!p)
        return eng__set_err(ld->err, -ENOMEM, "out of memory");
    ld->row = p;
    ld->row_cap = n;
    return 0;
}

static int ensure_stage(loader *ld, size_t bytes)
{
    if (bytes <= ld->stage_cap)
        return 0;
    void *p = realloc(ld->stage, bytes);
    if (!p)
        return eng__set_err(ld->err, -ENOMEM, "out of memory");
    ld->stage = p;
    ld->stage_cap = bytes;
    return 0;
}

/* Message for backend memory that is not there: a GPU says how much is free. */
static int oom_err(loader *ld, size_t bytes, const char *what)
{
    size_t avail = 0, total = 0;
    eng_backend *be = ld->m->be;
    be->iface->mem_info(be, &avail, &total);
    if (total)
        return eng__set_err(ld->err, -ENOMEM,
                            "out of %s memory loading %s: needs %zu more bytes, %zu of %zu free",
                            be->iface->name, what, bytes, avail, total);
    return eng__set_err(ld->err, -ENOMEM, "out of memory loading %s", what);
}

/* How a matrix is stored: a Q8_0 matrix of the file keeps its own bytes
 * (exactly; f16 would round d * q) where the backend computes on Q8_0 and
 * the storage is f16, and with q8_matrices any other is quantized to it;
 * so do Q4_K, Q5_K, Q6_K, Q4_1 and Q4_0 ones where the backend takes
 * them; anything else in the storage type. */
static eng_dtype mat_dtype(const eng_model *m, const gguf_tensor *t)
{
    const unsigned dts = m->be ? m->be->iface->dtypes : 0;
    if (m->info.storage != ENG_DTYPE_F16 || !t)
        return m->info.storage;
    /* a Q4_K, Q5_K, Q6_K, Q4_1 or Q4_0 file matrix keeps its blocks too:
     * exact, and 4.5, 5.5, 6.56, 5 or 4.5 bits a weight where Q8_0 would
     * take 8.5 and round the weights again (K_M files: Q6_K heads and some
     * attn_v; the default model's layers: Q4_1) */
    static const eng_dtype kept[] = { ENG_DTYPE_Q4_K, ENG_DTYPE_Q5_K, ENG_DTYPE_Q6_K,
                                      ENG_DTYPE_Q4_1, ENG_DTYPE_Q4_0 };
    for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
        if (t->type == ggml_type_of_dtype(kept[i]) && t->ne[0] % eng_dtype_block(kept[i]) == 0 &&
            (dts & 1u << kept[i]))
            return kept[i];
    if (t->ne[0] % 32 == 0 && (t->type == GGML_TYPE_Q8_0 || m->q8_matrices) &&
        (dts & 1u << ENG_DTYPE_Q8_0))
        return ENG_DTYPE_Q8_0;
    return m->info.storage;
}

/* Whether layer il's FFN is experts (not one of LFM2-MoE's first, dense
 * layers), and its neurons: n_ff, or those of its experts or of a dense
 * layer before them, where they differ. */
static bool has_experts(const eng_model *m, int il)
{
    /* (nemotron_h_moe: only its MLP layers, mlp_layer) */
    return m->n_ff_exp > 0 && il >= m->n_dense_lead && (!m->mlp_layer || m->mlp_layer[il]);
}

static int ffn_width(const eng_model *m, int il)
{
    if (has_experts(m, il)) /* (and a shared expert's neurons after theirs) */
        return m->info.n_expert * m->n_ff_exp + m->n_ff_shared;
    if (m->ffn_n) /* (gemma4: the file's width of each layer) */
        return m->ffn_n[il];
    return m->n_ff_dense ? m->n_ff_dense : m->info.n_ff;
}

/* Whether the gate rows are the first half of ffn_up (phi3's and glm4's
 * converters fuse them). */
static bool ffn_fused_up(const eng_model *m)
{
    return m->arch == ENG_ARCH_PHI3 || m->arch == ENG_ARCH_GLM4;
}

/* The file's tensor of layer il's gate rows (up: its up rows), of the
 * shared expert's where shared (gemma4: its dense MLP's), NULL where
 * there is none: phi3's gate rows are the first half of its ffn_up,
 * nemotron_h's (un-gated: none) its up rows, whose type stands for both,
 * gemma4's experts' may share one ffn_gate_up_exps with their up rows. */
static const gguf_tensor *ffn_rows_tensor(const eng_model *m, const gguf_file *f, int il, bool up,
                                          bool shared)
{
    const bool exps = has_experts(m, il) && !shared;
    char name[64];
    const gguf_tensor *t = NULL;
    if (exps && m->moe_mlp) {
        snprintf(name, sizeof(name), "blk.%d.ffn_gate_up_exps.weight", il);
        if ((t = gguf_find_tensor(f, name)))
            return t;
    }
    snprintf(name, sizeof(name), "blk.%d.ffn_%s%s.weight", il,
             up || ffn_fused_up(m) || m->one_block ? "up" : "gate",
             shared && !m->moe_mlp ? "_shexp" : exps ? "_exps" : "");
    return gguf_find_tensor(f, name);
}

/* Whether every layer's gate and up rows are of ggml type `type` in the
 * file (a shared expert's in its own tensors too). */
static bool ffn_file_all(const eng_model *m, const gguf_file *f, uint32_t type)
{
    for (int il = 0; il < m->info.n_layer; il++)
        for (int h = 0; h < 4 && ffn_width(m, il) > 0; h++) { /* (nemotron_h: FFN-less layers) */
            const bool sh = h >= 2;
            if (sh && !(has_experts(m, il) && m->n_ff_shared))
                continue;
            const gguf_tensor *t = ffn_rows_tensor(m, f, il, h % 2, sh);
            if (!t || t->type != type)
                return false;
        }
    return true;
}

/* How the FFN's slots are stored, all layers alike so that a plan prices
 * every neuron the same: with q8_matrices, Q4_K (Q5_K, Q4_1, Q4_0) where
 * every layer's gate and up rows are of that type in the file and the
 * backend takes them
 * (the file's blocks, as a matrix keeps them; down rows Q8_0,
 * eng_ffn_down_dtype: so only where Q8_0 is asked for, and without it the
 * FFN keeps the file's values in the storage); else Q8_0 under the same
 * rule as a matrix (the file's gate and up rows in Q8_0, or q8_matrices),
 * else the storage. A down column runs across the file's rows, so it is
 * requantized from the file's blocks in every case. */
static eng_dtype ffn_dtype(const eng_model *m, const gguf_file *f)
{
    const unsigned dts = m->be ? m->be->iface->dtypes : 0;
    if (m->info.n_embd % 32)
        return m->info.storage;
    static const eng_dtype kept[] = { ENG_DTYPE_Q4_K, ENG_DTYPE_Q5_K, ENG_DTYPE_Q4_1,
                                      ENG_DTYPE_Q4_0 };
    for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
        if (m->info.storage == ENG_DTYPE_F16 && m->q8_matrices &&
            m->info.n_embd % eng_dtype_block(kept[i]) == 0 &&
            (dts & 1u << kept[i]) && (dts & 1u << ENG_DTYPE_Q8_0) &&
            ffn_file_all(m, f, ggml_type_of_dtype(kept[i])))
            return kept[i];
    /* MXFP4 experts (gpt-oss's): their own blocks, 4.25 bits a weight, W_down
     * too, as the file's rows (eng_ffn_weights), where every layer's are
     * MXFP4 and nothing else shares the slots (no dense layers, no shared
     * expert); else Q8_0, which holds their values exactly (the doubled
     * levels under the power-of-two scale: eng_mxfp4_to_q8_0), 8.5 bits
     * where f16 would take 16 */
    const int il0 = m->n_dense_lead < m->info.n_layer ? m->n_dense_lead : 0;
    const gguf_tensor *t0 = ffn_rows_tensor(m, f, il0, false, false);
    bool mx = m->n_ff_exp > 0 && m->n_dense_lead == 0 && m->n_ff_shared == 0 &&
              m->n_ff_exp % 32 == 0 && (dts & 1u << ENG_DTYPE_MXFP4) &&
              ffn_file_all(m, f, GGML_TYPE_MXFP4);
    for (int il = 0; mx && il < m->info.n_layer; il++) {
        char name[64];
        snprintf(name, sizeof(name), "blk.%d.ffn_down_exps.weight", il);
        const gguf_tensor *td = gguf_find_tensor(f, name);
        mx = td && td->type == GGML_TYPE_MXFP4;
    }
    if (mx && m->info.storage == ENG_DTYPE_F16)
        return ENG_DTYPE_MXFP4;
    if (t0 && t0->type == GGML_TYPE_MXFP4 && m->info.storage == ENG_DTYPE_F16 &&
        (dts & 1u << ENG_DTYPE_Q8_0))
        return ENG_DTYPE_Q8_0;
    int il1 = 0; /* (the first layer with an FFN: nemotron_h's may have none) */
    while (il1 + 1 < m->info.n_layer && ffn_width(m, il1) == 0)
        il1++;
    const eng_dtype dt = mat_dtype(m, ffn_rows_tensor(m, f, il1, false, false));
    /* a Q4_K, Q5_K, Q4_1 or Q4_0 gate row kept apart from the rest (some
     * layers of another type, or no q8_matrices), or a Q6_K one (the FFN's
     * kernels take none): Q8_0 with q8_matrices, else the storage */
    if (dt != ENG_DTYPE_Q8_0 && eng_dtype_block(dt) > 1)
        return m->q8_matrices && (dts & 1u << ENG_DTYPE_Q8_0) ? ENG_DTYPE_Q8_0 : m->info.storage;
    return dt;
}

/* The FFN's activation where it is the model's, not a layer's (gemma3n's
 * cut layers are GELU_TOPK, ffn_alloc), and the rows of its slots: one
 * kind a model, nemotron_h's all un-gated (their up rows alone), every
 * other family's all gated. */
static eng_act ffn_act(const eng_model *m)
{
    return m->arch == ENG_ARCH_GEMMA || m->arch == ENG_ARCH_GEMMA2 || m->arch == ENG_ARCH_GEMMA3 ||
                   m->arch == ENG_ARCH_GEMMA4
               ? ENG_ACT_GELU
           : m->arch == ENG_ARCH_GPT_OSS ? ENG_ACT_SWIGLU_OAI
           : m->one_block                 ? ENG_ACT_RELU_SQR
                                          : ENG_ACT_SILU;
}

static int ffn_rows(const eng_model *m)
{
    return eng_ffn_act_rows(ffn_act(m));
}

/* Resident bytes of one FFN neuron: its gate row, up row and down column
 * (nemotron_h's un-gated neurons: the up row and down column). */
static size_t neuron_bytes(const eng_model *m)
{
    return eng_ffn_slot_bytes(m->info.ffn_dtype, m->info.n_embd, ffn_rows(m));
}

/* n values (a multiple of 32 for Q8_0) in type dt */
static void store_row(eng_dtype dt, const float *src, void *dst, size_t n)
{
    if (dt == ENG_DTYPE_F32)
        memcpy(dst, src, n * sizeof(float));
    else if (dt == ENG_DTYPE_Q8_0)
        eng_quant_row(GGML_TYPE_Q8_0, src, dst, n);
    else
        eng_f32_to_f16_row(src, dst, n);
}

#define MAT_JOB_ROWS 2048

/* One deferred conversion: rows [r0, r1) of matrix t into data, or (when L
 * is set) the neurons of one layer's FFN into its slots. */
/* A layer's FFN in the file: W_gate's rows from gate_row0, W_up's from
 * up_row0 (one fused tensor [gate; up] in phi3), W_down, whose rows are
 * down_cols long: n_ff, or with experts n_ff_exp, expert e's n_embd rows
 * from row e * n_embd (neuron e * n_ff_exp + j is column j there). The
 * tensors hold the layer's neurons from first on (a shared expert's:
 * n_expert * n_ff_exp). */
typedef struct ffn_tensors {
    const gguf_tensor *gate, *up, *down;
    uint64_t gate_row0, up_row0, down_cols, first;
    /* experts whose gate and up rows share a tensor (gemma4's
     * ffn_gate_up_exps): expert e's gate rows from row e * 2 * run, its
     * up rows after them (up_row0 = run); 0: neuron n is row n */
    uint64_t run;
    const float *down_scale; /* [n_expert] expert e's down columns times this, or NULL */
} ffn_tensors;

/* The row of the neuron nn (counted from t->first) in t's gate (up) tensor. */
static uint64_t ffn_src_row(const ffn_tensors *t, uint64_t nn, bool up)
{
    const uint64_t r = t->run ? nn / t->run * 2 * t->run + nn % t->run : nn;
    return (up ? t->up_row0 : t->gate_row0) + r;
}

typedef struct conv_job {
    const gguf_tensor *t;
    eng_dtype dt; /* of the matrix */
    uint8_t *data;
    uint64_t r0, r1, cols;
    uint64_t src_r0; /* the matrix's first row in t (a part of a fused tensor) */
    /* the matrix's rows in runs of run rows, one run every period rows of
     * t (qwen35's q heads, each beside its gate's); run 0: one run */
    uint64_t run, period;
    struct eng_layer *L;
    ffn_tensors ffn;
    const int32_t *neurons;
    int32_t *slots; /* owned by the job */
    int n;
    /* rows r with r % rot_period < rot_n times rot_scale (q's rotated
     * dimensions, q_rot_scale); rot_period 0: none */
    uint32_t rot_period, rot_n;
    float rot_scale;
} conv_job;

static int push_job(loader *ld, const conv_job *j)
{
    if (ld->n_jobs == ld->cap_jobs) {
        size_t cap = ld->cap_jobs ? 2 * ld->cap_jobs : 256;
        conv_job *p = realloc(ld->jobs, cap * sizeof(*p));
        if (!p)
            return eng__set_err(ld->err, -ENOMEM, "out of memory");
        ld->jobs = p;
        ld->cap_jobs = cap;
    }
    ld->jobs[ld->n_jobs++] = *j;
    return 0;
}

/* Does rotated-dimension scaling (see conv_job) apply to row or element i? */
static bool rot_scaled(uint32_t period, uint32_t n_rot, uint64_t i)
{
    return period > 0 && i % period < n_rot;
}

/* A float vector (norms, biases, rope factors); elements i with
 * rot_scaled(period, n_rot, i) times scale. */
static int load_vec_rot(loader *ld, const char *name, uint64_t n, bool required, uint32_t period,
                        uint32_t n_rot, float scale, float **ret)
{
    const gguf_tensor *t;
    int r = get_tensor(ld, name, 1, n, 1, required, &t);
    if (r < 0 || !t) {
        *ret = NULL;
        return r;
    }
    float *v = weight_alloc(ld->m, n * sizeof(float));
    if (!v)
        return oom_err(ld, n * sizeof(float), name);
    if ((r = ensure_row(ld, n)) < 0 || (r = dequant_row(ld, t, 0, ld->row)) < 0)
        return r;
    for (uint64_t i = 0; i < n; i++)
        if (rot_scaled(period, n_rot, i))
            ld->row[i] *= scale;
    ld->m->be->iface->upload(ld->m->be, v, ld->row, n * sizeof(float));
    *ret = v;
    return 0;
}

static int load_vec(loader *ld, const char *name, uint64_t n, bool required, float **ret)
{
    return load_vec_rot(ld, name, n, required, 0, 0, 1.0f, ret);
}

/* q's rotated dimensions times m->q_rot_scale in the conversion jobs of
 * matrix data (its rows; see conv_job). */
static void scale_rot_rows(loader *ld, const void *data)
{
    const eng_model *m = ld->m;
    for (size_t i = 0; i < ld->n_jobs; i++)
        if (ld->jobs[i].data == data && !ld->jobs[i].L) {
            ld->jobs[i].rot_period = (uint32_t)m->info.head_dim;
            ld->jobs[i].rot_n = (uint32_t)m->n_rot;
            ld->jobs[i].rot_scale = m->q_rot_scale;
        }
}

/* A matrix [rows][cols] in the storage type. */
/* Rows [row0, row0 + rows) of the [t_rows][cols] tensor name as a matrix
 * (phi3's fused attn_qkv holds q, k and v one after the other), or with
 * run > 0 runs of run rows, one every period rows from row0 (conv_job). */
/* (f32: in f32 whatever the storage, as a router's few rows, whose small
 * differences pick experts) */
static int load_mat_as(loader *ld, const char *name, uint64_t cols, uint64_t t_rows, uint64_t row0,
                       uint64_t run, uint64_t period, uint64_t rows, bool required, bool f32,
                       eng_weight *w)
{
    const gguf_tensor *t;
    int r = get_tensor(ld, name, 2, cols, t_rows, required, &t);
    if (r < 0 || !t)
        return r;
    const eng_dtype dt = f32 ? ENG_DTYPE_F32 : mat_dtype(ld->m, t);
    const size_t bytes = eng_dtype_bytes(dt, rows * cols);
    uint8_t *data = weight_alloc(ld->m, bytes);
    if (!data)
        return oom_err(ld, bytes, name);
    /* in chunks of rows, so that one big matrix (the embeddings) spreads
     * over the threads */
    for (uint64_t r0 = 0; r0 < rows; r0 += MAT_JOB_ROWS) {
        conv_job j = { .t = t, .dt = dt, .data = data, .r0 = r0,
                       .r1 = rows - r0 < MAT_JOB_ROWS ? rows : r0 + MAT_JOB_ROWS, .cols = cols,
                       .src_r0 = row0, .run = run, .period = period };
        if ((r = push_job(ld, &j)) < 0)
            return r;
    }
    *w = (eng_weight){ .dtype = dt, .rows = (int)rows, .cols = (int)cols, .data = data };
    ld->m->info.bytes_weights += bytes;
    return 0;
}

static int load_mat_part(loader *ld, const char *name, uint64_t cols, uint64_t t_rows,
                         uint64_t row0, uint64_t rows, bool required, eng_weight *w)
{
    return load_mat_as(ld, name, cols, t_rows, row0, 0, 0, rows, required, false, w);
}

static int load_mat(loader *ld, const char *name, uint64_t cols, uint64_t rows, bool required,
                    eng_weight *w)
{
    return load_mat_part(ld, name, cols, rows, 0, rows, required, w);
}

/* Rows of W_down dequantized per block when gathering neuron columns: the
 * scratch is DOWN_BLOCK x n_ff floats, far below one layer. A multiple of
 * 32: a Q8_0 column is stored a block at a time. */
#define DOWN_BLOCK 64

/* gemma4's experts (26B-A4B): each expert's scale, folded into its down
 * columns, where the file has them (ffn_down_exps.scale), and its gate
 * and up rows where they share one tensor (ffn_gate_up_exps: 1, with
 * t's gate, up and down; else 0 and the usual tensors). */
static int gemma4_experts(loader *ld, int il, ffn_tensors *t)
{
    eng_model *m = ld->m;
    const uint64_t E = (uint64_t)m->info.n_embd, NE = (uint64_t)m->info.n_expert;
    const uint64_t F = (uint64_t)m->n_ff_exp;
    char name[64];
    const gguf_tensor *st, *gu;
    int r;
    snprintf(name, sizeof(name), "blk.%d.ffn_down_exps.scale", il);
    if ((r = get_tensor(ld, name, 1, NE, 1, false, &st)) < 0)
        return r;
    if (st) {
        float *sc = model_alloc(m, NE * sizeof(float));
        if (!sc)
            return oom_err(ld, NE * sizeof(float), name);
        if ((r = dequant_row(ld, st, 0, sc)) < 0)
            return r;
        for (uint64_t e = 0; e < NE; e++)
            if (!isfinite(sc[e]))
                return eng__set_err(ld->err, -EINVAL, "tensor '%s'[%llu] is not finite", name,
                                    (unsigned long long)e);
        t->down_scale = sc;
    }
    snprintf(name, sizeof(name), "blk.%d.ffn_gate_up_exps.weight", il);
    if ((r = get_tensor(ld, name, 2, E, 2 * F * NE, false, &gu)) < 0 || !gu)
        return r;
    if (gu->n_dims != 3 || gu->ne[1] != 2 * F)
        return eng__set_err(ld->err, -EINVAL, "tensor '%s' is not [%llu, %llu, %llu]", name,
                            (unsigned long long)E, (unsigned long long)(2 * F),
                            (unsigned long long)NE);
    t->gate = t->up = gu;
    t->run = t->up_row0 = F;
    snprintf(name, sizeof(name), "blk.%d.ffn_down_exps.weight", il);
    if ((r = get_tensor(ld, name, 2, F, NE * E, true, &t->down)) < 0)
        return r;
    return 1;
}

static int ffn_tensors_get(loader *ld, int il, bool shared, ffn_tensors *t)
{
    const eng_model *m = ld->m;
    const int E = m->info.n_embd;
    const bool exps = has_experts(m, il);
    /* the tensors' neurons: the layer's, its experts', or (shared) the
     * shared expert's, whose own tensors follow the experts' neurons */
    const int n_exps = ffn_width(m, il) - (exps ? m->n_ff_shared : 0);
    const int F = shared ? m->n_ff_shared : n_exps;
    char name[64];
    int r;
    t->gate_row0 = t->up_row0 = t->run = 0;
    t->down_scale = NULL;
    t->first = shared ? (uint64_t)n_exps : 0;
    t->down_cols = (uint64_t)F;
    /* experts: [n_embd, n_ff_exp, n_expert] and [n_ff_exp, n_embd,
     * n_expert], the experts' gate and up rows one after another (F of
     * them), W_down's rows n_ff_exp long */
    const char *sfx = shared && !m->moe_mlp ? "_shexp" : exps && !shared ? "_exps" : "";
    if (exps && !shared)
        t->down_cols = (uint64_t)m->n_ff_exp;
    if (m->one_block) {
        /* nemotron_h's un-gated MLP (nemotron_h_moe's experts and shared
         * expert too): up rows alone (ENG_ACT_RELU_SQR, one row a slot:
         * load_neurons_host reads t->up only; gate names it too for the
         * users of its type) */
        snprintf(name, sizeof(name), "blk.%d.ffn_up%s.weight", il, sfx);
        if ((r = get_tensor(ld, name, 2, E, (uint64_t)F, true, &t->up)) < 0)
            return r;
        t->gate = t->up;
        snprintf(name, sizeof(name), "blk.%d.ffn_down%s.weight", il, sfx);
        return get_tensor(ld, name, 2, t->down_cols, (uint64_t)F / t->down_cols * E, true,
                          &t->down);
    }
    if (ffn_fused_up(m)) {
        snprintf(name, sizeof(name), "blk.%d.ffn_up.weight", il);
        if ((r = get_tensor(ld, name, 2, E, 2 * (uint64_t)F, true, &t->up)) < 0)
            return r;
        t->gate = t->up;
        t->up_row0 = (uint64_t)F;
        snprintf(name, sizeof(name), "blk.%d.ffn_down.weight", il);
        return get_tensor(ld, name, 2, F, E, true, &t->down);
    }
    if (exps && !shared && m->moe_mlp && (r = gemma4_experts(ld, il, t)) != 0)
        return r < 0 ? r : 0; /* (1: its gate and up rows in one tensor) */
    snprintf(name, sizeof(name), "blk.%d.ffn_gate%s.weight", il, sfx);
    if ((r = get_tensor(ld, name, 2, E, F, true, &t->gate)) < 0)
        return r;
    snprintf(name, sizeof(name), "blk.%d.ffn_up%s.weight", il, sfx);
    if ((r = get_tensor(ld, name, 2, E, F, true, &t->up)) < 0)
        return r;
    snprintf(name, sizeof(name), "blk.%d.ffn_down%s.weight", il, sfx);
    return get_tensor(ld, name, 2, t->down_cols, (uint64_t)F / t->down_cols * E, true, &t->down);
}

static void load_neurons_host(loader *ld, const ffn_tensors *t, uint8_t *gu, uint8_t *down,
                              eng_dtype dt, const int32_t *neurons, const int32_t *slots,
                              int count, uint64_t *bytes_read);

/* Converts neurons[i] of layer il into slot slots[i] of the layer's buffers.
 * Only those neurons' rows of W_gate and W_up are read; W_down is read in
 * blocks of rows (its columns are the neurons) and only the wanted columns
 * are kept. Backend memory that is not host memory gets the neurons packed
 * in ld->stage first, then uploaded into their slots. Cannot fail once
 * ffn_tensors_get() succeeded and the scratch is sized (ensure_row(ld,
 * DOWN_BLOCK * n_ff), and ensure_stage(ld, count * neuron_bytes(m))
 * for such a backend); a GPU's upload errors surface at the next sync. */
static void load_neurons(loader *ld, const ffn_tensors *t, eng_layer *L, const int32_t *neurons,
                         const int32_t *slots, int count, uint64_t *bytes_read)
{
    eng_backend *be = ld->m->be;
    const size_t rb = eng_ffn_row_bytes(L->ffn.dtype, L->ffn.n_embd);
    const size_t rd = eng_ffn_down_bytes(L->ffn.dtype, L->ffn.n_embd);
    for (int i = 0; i < count; i++)
        L->neuron_of_slot[slots[i]] = neurons[i];
    if (be->iface->host_memory) {
        load_neurons_host(ld, t, (uint8_t *)L->ffn.gate_up, (uint8_t *)L->ffn.down, L->ffn.dtype,
                          neurons, slots, count, bytes_read);
        return;
    }
    /* packed: slot i of the staging buffers is the i-th neuron */
    const size_t rg = (size_t)eng_ffn_rows(&L->ffn) * rb; /* its gate_up */
    uint8_t *gu = ld->stage, *down = ld->stage + (size_t)count * rg;
    load_neurons_host(ld, t, gu, down, L->ffn.dtype, neurons, NULL, count, bytes_read);
    be->iface->upload_rows(be, (void *)L->ffn.gate_up, slots, gu, count, rg);
    be->iface->upload_rows(be, (void *)L->ffn.down, slots, down, count, rd);
}

/* load_neurons into host buffers gu and down; slots NULL: slot i. */
static void load_neurons_host(loader *ld, const ffn_tensors *t, uint8_t *gu, uint8_t *down,
                              eng_dtype dt, const int32_t *neurons, const int32_t *slots,
                              int count, uint64_t *bytes_read)
{
    eng_model *m = ld->m;
    const int E = m->info.n_embd;
    const size_t sr = eng_ffn_row_bytes(dt, E); /* a slot's gate or up row */
    const eng_dtype ddt = eng_ffn_down_dtype(dt);
    const size_t sd = eng_ffn_down_bytes(dt, E); /* its down row */
    const int nr = ffn_rows(m); /* gate and up, or (un-gated) up alone */
    float *row = ld->row;
#define SLOT(i) ((size_t)(slots ? slots[i] : (i)))

    for (int i = 0; i < count; i++)
        for (int h = 0; h < nr; h++) {
            const bool up = h || nr == 1;
            const gguf_tensor *gt = up ? t->up : t->gate;
            const uint64_t src = ffn_src_row(t, (uint64_t)neurons[i] - t->first, up);
            uint8_t *dst = gu + (SLOT(i) * (size_t)nr + (size_t)h) * sr;
            if (eng_dtype_block(dt) > 1 && gt->type == ggml_type_of_dtype(dt)) {
                /* the file's own blocks, as for a matrix (ffn_dtype: a
                 * Q4_K, Q5_K, Q4_1 or Q4_0 FFN's gate and up rows are all
                 * of it) */
                memcpy(dst, (const uint8_t *)gt->data + src * sr, sr);
            } else if (dt == ENG_DTYPE_Q8_0 && gt->type == GGML_TYPE_MXFP4) {
                /* (gpt-oss's experts: the same values, not rounded again) */
                eng_mxfp4_to_q8_0((const uint8_t *)gt->data +
                                      src * ggml_row_bytes(GGML_TYPE_MXFP4, (uint64_t)E),
                                  dst, (size_t)E);
            } else {
                dequant_row(ld, gt, src, row);
                store_row(dt, row, dst, E);
            }
        }
    if (bytes_read)
        *bytes_read += (uint64_t)nr * count * ggml_row_bytes(t->gate->type, E);
    if (count == 0)
        return;

    /* neuron n is column n % DC of rows (n / DC) * E .. + E - 1 (DC = F
     * but with experts), n counted from the tensors' first */
    const uint32_t dtype = t->down->type;
    const uint64_t DC = t->down_cols, N0 = t->first;
    const size_t B = ggml_type_block_elems(dtype), BB = ggml_type_block_bytes(dtype);
    const size_t rb = ggml_row_bytes(dtype, DC);
    if (ddt == ENG_DTYPE_MXFP4) {
        /* (ffn_dtype: every neuron of each expert in order, its W_down
         * MXFP4: the expert's rows as the file has them) */
        for (int i0 = 0; i0 + (int)DC <= count; i0 += (int)DC) {
            const uint64_t g = ((uint64_t)neurons[i0] - N0) / DC;
            memcpy(down + SLOT(i0) * sd, (const uint8_t *)t->down->data + g * E * rb,
                   (size_t)E * rb);
        }
        if (bytes_read)
            *bytes_read += (uint64_t)count / DC * E * rb;
        return;
    }
    if ((size_t)count * B * 2 < (size_t)DC && B <= 256) {
        /* few neurons (a hot-swap): decode only the blocks of W_down that
         * hold their columns instead of whole rows */
        const uint8_t *data = t->down->data;
        float blk[256];
        for (int i = 0; i < count; i++) {
            const uint64_t nn = (uint64_t)neurons[i] - N0, r0 = nn / DC * E, c = nn % DC;
            const size_t b = c / B, k = c % B;
            const float sc = t->down_scale ? t->down_scale[nn / DC] : 1.0f;
            for (int e = 0; e < E; e++) {
                eng_dequant_row_f32(dtype, data + (r0 + e) * rb + b * BB, blk, B);
                row[e] = blk[k] * sc;
            }
            store_row(ddt, row, down + SLOT(i) * sd, E);
        }
        if (bytes_read)
            *bytes_read += (uint64_t)count * E * BB;
        return;
    }

    /* whole rows, DOWN_BLOCK at a time, for each run of neurons that
     * share them (one run without experts) */
    float tmp[DOWN_BLOCK];
    for (int i0 = 0, i1; i0 < count; i0 = i1) {
        const uint64_t g = ((uint64_t)neurons[i0] - N0) / DC;
        for (i1 = i0 + 1; i1 < count && ((uint64_t)neurons[i1] - N0) / DC == g;)
            i1++;
        const float sc = t->down_scale ? t->down_scale[g] : 1.0f; /* (expert g's) */
        for (int e0 = 0; e0 < E; e0 += DOWN_BLOCK) {
            int nb = E - e0 < DOWN_BLOCK ? E - e0 : DOWN_BLOCK;
            for (int b = 0; b < nb; b++)
                dequant_row(ld, t->down, g * E + (uint64_t)(e0 + b), row + (size_t)b * DC);
            for (int i = i0; i < i1; i++) {
                for (int b = 0; b < nb; b++)
                    tmp[b] = row[(size_t)b * DC + ((uint64_t)neurons[i] - N0) % DC] * sc;
                store_row(ddt, tmp, down + SLOT(i) * sd + eng_dtype_bytes(ddt, (size_t)e0), nb);
            }
        }
        if (bytes_read)
            *bytes_read += (uint64_t)E * rb;
    }
#undef SLOT
}

/* The L2 norm of every neuron's W_down column: what a unit activation of
 * the neuron adds to the residual stream (ENG_SCORE_CONTRIB, ENG_RANK_CONTRIB). */
static int down_norms(loader *ld)
{
    eng_model *m = ld->m;
    const int NL = m->info.n_layer, F = m->info.n_ff, E = m->info.n_embd;
    m->down_norm = model_alloc(m, (size_t)NL * F * sizeof(float));
    double *acc = malloc((size_t)F * sizeof(double));
    if (!m->down_norm || !acc || ensure_row(ld, (size_t)F) < 0) {
        free(acc);
        return eng__set_err(ld->err, -ENOMEM, "out of memory");
    }
    for (int il = 0; il < NL; il++) {
        ffn_tensors t;
        if (ffn_width(m, il) == 0) { /* (nemotron_h: no FFN in this layer) */
            memset(m->down_norm + (size_t)il * F, 0, (size_t)F * sizeof(float));
            continue;
        }
        int r = ffn_tensors_get(ld, il, false, &t);
        if (r < 0) {
            free(acc);
            return r;
        }
        const int FL = ffn_width(m, il); /* (gemma4: the layer's own; 0 past it) */
        memset(acc, 0, (size_t)F * sizeof(double));
        for (int e = 0; e < E; e++) {
            dequant_row(ld, t.down, (uint64_t)e, ld->row);
            for (int n = 0; n < FL; n++)
                acc[n] += (double)ld->row[n] * ld->row[n];
        }
        for (int n = 0; n < F; n++)
            m->down_norm[(size_t)il * F + n] = (float)sqrt(acc[n]);
        release_tensor(ld, t.down); /* (its jobs read it again, a layer at a time) */
    }
    free(acc);
    return 0;
}

/* ENG_PICK_TOKEN's sketch of a layer is built by the backend from the
 * slots themselves (build_sketch), so that a hot-swap's moves need no
 * bookkeeping: a layer whose slots changed has its sketch rebuilt. */
static bool wants_sketch(const eng_plan *plan, int il)
{
    return plan->info.sketch && plan->sparse[il];
}

/* A plan with a sketch needs a backend that builds it and picks by it,
 * and gated neurons: a sketch row pair is a gate and an up row (an
 * un-gated FFN's pick per token is not there yet). */
static int sketch_supported(const eng_model *m, const eng_plan *plan, eng_error *err)
{
    if (plan->info.sketch && ffn_rows(m) == 1)
        return eng__set_err(err, -ENOTSUP,
                            "%s's un-gated FFN neurons cannot be picked per token (no neuron "
                            "sketch for them; pick=exact can)", m->info.arch);
    if (!plan->info.sketch || (m->be->iface->ffn_pick && m->be->iface->build_sketch))
        return 0;
    return eng__set_err(err, -ENOTSUP,
                        "the %s backend cannot pick neurons per token (no neuron sketch there)",
                        m->be->iface->name);
}

/* Allocates layer il's FFN buffers (in L) for cap slots. */
static int ffn_alloc(eng_model *m, int il, eng_layer *L, int cap)
{
    const int E = m->info.n_embd;
    const size_t rb = eng_ffn_row_bytes(m->info.ffn_dtype, E);
    int c = cap > 0 ? cap : 1;
    void *gu = weight_alloc(m, (size_t)c * (size_t)ffn_rows(m) * rb);
    void *down = weight_alloc(m, (size_t)c * eng_ffn_down_bytes(m->info.ffn_dtype, E));
    int32_t *ids = model_alloc(m, (size_t)c * sizeof(int32_t));
    uint8_t *st = model_alloc(m, (size_t)c);
    if (!gu || !down || !ids || !st)
        return -ENOMEM;
    /* (gemma3n's first layers: their gate values cut) */
    const float cut = m->ffn_cut ? m->ffn_cut[il] : NAN;
    L->ffn = (eng_ffn_weights){ .dtype = m->info.ffn_dtype, .n_embd = E, .n_slots = 0,
                                .gate_up = gu, .down = down,
                                .act = isfinite(cut) ? ENG_ACT_GELU_TOPK : ffn_act(m),
                                .cut = isfinite(cut) ? cut : 0.0f };
    L->neuron_of_slot = ids;
    L->slot_static = st;
    L->slot_cap = c;
    return 0;
}

/* A tensor of n f32 values however the file shapes it ([n], [1, n] as
 * ssm_a, [n / g, g] as ssm_norm: ne0 x ne1), in backend memory; uncounted
 * in bytes_weights, as norms are. */
static int load_flat(loader *ld, const char *name, uint64_t ne0, uint64_t ne1, bool required,
                     const float **ret)
{
    const gguf_tensor *t;
    int r = get_tensor(ld, name, 2, ne0, ne1, required, &t);
    *ret = NULL;
    if (r < 0 || !t)
        return r;
    const uint64_t n = ne0 * ne1;
    float *v = weight_alloc(ld->m, n * sizeof(float)), *tmp = malloc(n * sizeof(float));
    if (!v || !tmp) {
        free(tmp);
        return oom_err(ld, n * sizeof(float), name);
    }
    for (uint64_t i = 0; i < ne1 && r >= 0; i++)
        r = dequant_row(ld, t, i, tmp + i * ne0);
    if (r >= 0)
        ld->m->be->iface->upload(ld->m->be, v, tmp, n * sizeof(float));
    free(tmp);
    if (r < 0)
        return r;
    *ret = v;
    return 0;
}

/* Layer il's experts: the router (f32), LFM2-MoE's and ERNIE 4.5's bias to pick by, and
 * how the picks are weighted (model-wide). */
static int load_router(loader *ld, int il, eng_layer *L)
{
    const eng_model *m = ld->m;
    const uint64_t ne = (uint64_t)m->info.n_expert;
    char name[64];
    int r;
    snprintf(name, sizeof(name), "blk.%d.ffn_gate_inp.weight", il);
    if ((r = load_mat_as(ld, name, (uint64_t)m->info.n_embd, ne, 0, 0, 0, ne, true, true,
                         &L->moe.router)) < 0)
        return r;
    float *bias = NULL;
    snprintf(name, sizeof(name), "blk.%d.exp_probs_b.bias", il);
    if (m->moe_bias &&
        (r = load_vec(ld, name, ne, m->arch == ENG_ARCH_LFM2 || m->one_block, &bias)) < 0)
        return r;
    L->moe.bias = bias;
    float *rb = NULL; /* (gpt-oss's: added to the logits) */
    snprintf(name, sizeof(name), "blk.%d.ffn_gate_inp.bias", il);
    if (m->arch == ENG_ARCH_GPT_OSS && (r = load_vec(ld, name, ne, true, &rb)) < 0)
        return r;
    L->moe.router_bias = rb;
    const float *sg = NULL; /* (Qwen2-MoE's shared expert's gate) */
    snprintf(name, sizeof(name), "blk.%d.ffn_gate_inp_shexp.weight", il);
    if (m->moe_shared_gate && (r = load_flat(ld, name, (uint64_t)m->info.n_embd, 1, true, &sg)) < 0)
        return r;
    L->moe.shared_gate = sg;
    /* gemma4: the router reads x's norm times its scale over sqrt(n_embd)
     * (every element scaled: period 1), the experts another norm of x,
     * and the dense MLP, not the moe op, takes the shared slots */
    static const char *const g4_norms[4] = { "ffn_gate_inp.scale", "pre_ffw_norm_2.weight",
                                             "post_ffw_norm_1.weight", "post_ffw_norm_2.weight" };
    float **g4_dst[4] = { &L->router_norm, &L->moe_norm, &L->mlp_post_norm, &L->moe_post_norm };
    for (int k = 0; m->moe_mlp && k < 4; k++) {
        snprintf(name, sizeof(name), "blk.%d.%s", il, g4_norms[k]);
        if ((r = load_vec_rot(ld, name, (uint64_t)m->info.n_embd, true, k == 0, 1,
                              1.0f / sqrtf((float)m->info.n_embd), g4_dst[k])) < 0)
            return r;
    }
    L->moe.n_ff_shared = m->moe_mlp ? 0 : m->n_ff_shared;
    L->moe.n_expert = m->info.n_expert;
    L->moe.n_used = m->info.n_expert_used;
    L->moe.n_ff_exp = m->n_ff_exp;
    L->moe.sigmoid = m->moe_sigmoid;
    L->moe.norm = m->moe_norm;
    L->moe.scale = m->moe_scale;
    return 0;
}

/* gpt-oss's experts' biases: gate's and up's of each slot ([n][2], as the
 * ffn op takes them; slot slots[i] holds neuron neurons[i]) and down's of
 * each expert ([n_expert][n_embd], the moe op's). The file's are [n_ff_exp,
 * n_expert] (neuron e * n_ff_exp + j at row e, column j) and [n_embd,
 * n_expert]. */
static int load_expert_biases(loader *ld, int il, eng_layer *L, const int32_t *neurons,
                              const int32_t *slots, int n)
{
    eng_model *m = ld->m;
    const uint64_t F = (uint64_t)m->n_ff_exp, NE = (uint64_t)m->info.n_expert;
    char name[64];
    const gguf_tensor *t[2];
    int r;
    for (int h = 0; h < 2; h++) {
        snprintf(name, sizeof(name), "blk.%d.ffn_%s_exps.bias", il, h ? "up" : "gate");
        if ((r = get_tensor(ld, name, 2, F, NE, true, &t[h])) < 0)
            return r;
    }
    float *flat = malloc(2 * F * NE * sizeof(float)), *b = malloc((size_t)n * 2 * sizeof(float));
    float *dev = weight_alloc(m, (size_t)(n > 0 ? n : 1) * 2 * sizeof(float));
    if (!flat || !b || !dev) {
        free(flat);
        free(b);
        return oom_err(ld, (size_t)n * 2 * sizeof(float), "the experts' biases");
    }
    for (int h = 0; h < 2; h++)
        for (uint64_t e = 0; e < NE && r >= 0; e++)
            r = dequant_row(ld, t[h], e, flat + h * F * NE + e * F);
    for (int i = 0; i < n && r >= 0; i++) {
        b[2 * slots[i]] = flat[neurons[i]];
        b[2 * slots[i] + 1] = flat[F * NE + (uint64_t)neurons[i]];
    }
    if (r >= 0)
        m->be->iface->upload(m->be, dev, b, (size_t)n * 2 * sizeof(float));
    free(flat);
    free(b);
    if (r < 0)
        return r;
    L->ffn.bias = dev;
    const float *db;
    snprintf(name, sizeof(name), "blk.%d.ffn_down_exps.bias", il);
    if ((r = load_flat(ld, name, (uint64_t)m->info.n_embd, NE, true, &db)) < 0)
        return r;
    L->moe.down_bias = db;
    return 0;
}

/* The FFN of layer il as the plan says: its loaded neurons in slots
 * 0..n-1, ascending by neuron id. */
static int load_ffn(loader *ld, int il, eng_layer *L, const eng_plan *plan)
{
    eng_model *m = ld->m;
    ffn_tensors t;
    int r;
    if (has_experts(m, il) && (r = load_router(ld, il, L)) < 0) /* experts: their router */
        return r;
    if (ffn_width(m, il) == 0) {
        /* nemotron_h's layers without an FFN: no slots (buffers for one,
         * so that plans and swaps need no case of their own) */
        if (ffn_alloc(m, il, L, 0) < 0)
            return oom_err(ld, neuron_bytes(m), "an empty FFN");
        L->no_ffn = true;
        L->sparse = plan->sparse[il];
        return 0;
    }
    if ((r = ffn_tensors_get(ld, il, false, &t)) < 0)
        return r;
    /* (experts: the dense plan's first neurons, as many as the layer has) */
    int n = m->n_ff_exp ? ffn_width(m, il) : plan->n_loaded[il];
    if (ffn_alloc(m, il, L, n) < 0) {
        char what[64];
        snprintf(what, sizeof(what), "the FFN of layer %d", il);
        return oom_err(ld, (size_t)n * neuron_bytes(m), what);
    }
    int32_t *slots = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    if (!slots)
        return eng__set_err(ld->err, -ENOMEM, "out of memory");
    /* static neurons first, then the others, each ascending: every decode
     * step computes the static ones, so they read as one contiguous run */
    const uint8_t *is_static = plan->is_static[il];
    int n_static = 0;
    for (int i = 0; i < n; i++)
        n_static += is_static[plan->loaded[il][i]];
    for (int i = 0, a = 0, b = n_static; i < n; i++)
        slots[i] = is_static[plan->loaded[il][i]] ? a++ : b++;
    /* (a shared expert's neurons come from its own tensors: a job of
     * their own, with its own copy of their slots) */
    const int n_sh = has_experts(m, il) ? m->n_ff_shared : 0;
    int32_t *slots_sh = n_sh ? malloc((size_t)n_sh * sizeof(int32_t)) : NULL;
    ffn_tensors ts;
    if (n_sh && (!slots_sh || (r = ffn_tensors_get(ld, il, true, &ts)) < 0)) {
        free(slots);
        free(slots_sh);
        return slots_sh ? r : eng__set_err(ld->err, -ENOMEM, "out of memory");
    }
    if (n_sh)
        memcpy(slots_sh, slots + n - n_sh, (size_t)n_sh * sizeof(int32_t));
    if (m->arch == ENG_ARCH_GPT_OSS && has_experts(m, il) &&
        (r = load_expert_biases(ld, il, L, plan->loaded[il], slots, n)) < 0) {
        free(slots);
        free(slots_sh);
        return r;
    }
    conv_job j = { .L = L, .ffn = t, .neurons = plan->loaded[il], .slots = slots, .n = n - n_sh };
    conv_job js = { .L = L, .ffn = ts, .neurons = plan->loaded[il] + n - n_sh, .slots = slots_sh,
                    .n = n_sh };
    if ((r = push_job(ld, &j)) < 0) {
        free(slots);
        free(slots_sh);
        return r;
    }
    if (n_sh && (r = push_job(ld, &js)) < 0) {
        free(slots_sh);
        return r;
    }
    L->ffn.n_slots = n;
    L->n_static = n_static;
    for (int j = 0; j < n; j++)
        L->slot_static[j] = j < n_static;
    if (n_sh && m->moe_mlp) {
        /* gemma4's dense MLP: a view of the shared slots (the dense plan
         * keeps slot and neuron one) */
        const size_t rb = eng_ffn_row_bytes(L->ffn.dtype, L->ffn.n_embd);
        const size_t rd = eng_ffn_down_bytes(L->ffn.dtype, L->ffn.n_embd);
        L->mlp = L->ffn;
        L->mlp.n_slots = n_sh;
        L->mlp.gate_up = (const uint8_t *)L->ffn.gate_up + (size_t)(n - n_sh) * ffn_rows(m) * rb;
        L->mlp.down = (const uint8_t *)L->ffn.down + (size_t)(n - n_sh) * rd;
    }
    L->sparse = plan->sparse[il];
    m->info.bytes_weights += (uint64_t)n * neuron_bytes(m);
    if (wants_sketch(plan, il)) {
        /* filled by the backend (build_sketch) once the slots are loaded */
        size_t sb = eng_sketch_slot_bytes(m->info.n_embd);
        int c = n > 0 ? n : 1;
        if (!(L->ffn.sketch = weight_alloc(m, (size_t)c * sb))) {
            char what[64];
            snprintf(what, sizeof(what), "the neuron sketch of layer %d", il);
            return oom_err(ld, (size_t)c * sb, what);
        }
        L->sketch_cap = c;
        m->info.bytes_weights += (uint64_t)n * sb;
    }
    return 0;
}

typedef struct jobs_run {
    loader *workers; /* one loader (own row scratch) per thread */
    conv_job *jobs;
    size_t n_jobs;
    _Atomic size_t next;
} jobs_run;

/* Host staging of all conversion threads together, for a backend whose
 * memory is not host memory (see run_jobs). */
#define STAGE_BUDGET ((size_t)512 << 20)

/* Bytes of staging a job needs when backend memory is not host memory. */
static size_t job_stage_bytes(const eng_model *m, const conv_job *j)
{
    if (j->L)
        return (size_t)j->n * neuron_bytes(m);
    return (size_t)(j->r1 - j->r0) * eng_dtype_bytes(j->dt, j->cols);
}

/* The row of j's tensor that row i of its matrix comes from. */
static uint64_t job_src_row(const conv_job *j, uint64_t i)
{
    return j->src_r0 + (j->run ? i / j->run * j->period + i % j->run : i);
}

/* Rows [r0, r1) of j as the file holds them (rb bytes a row) into dst. */
static void copy_rows(const conv_job *j, uint8_t *dst, size_t rb)
{
    const uint8_t *src = j->t->data;
    if (!j->run) {
        memcpy(dst, src + (j->src_r0 + j->r0) * rb, (j->r1 - j->r0) * rb);
        return;
    }
    for (uint64_t i = j->r0; i < j->r1; i++)
        memcpy(dst + (i - j->r0) * rb, src + job_src_row(j, i) * rb, rb);
}

/* A job's conversion, then the file's pages it read released: a load's
 * peak is the weights and the jobs in flight, not the weights and the
 * file. (A neighbour's page dropped too early is read again, no more.) */
static void run_job(loader *ld, const conv_job *j)
{
    if (j->L) {
        load_neurons(ld, &j->ffn, j->L, j->neurons, j->slots, j->n, NULL);
        release_tensor(ld, j->ffn.gate);
        if (j->ffn.up != j->ffn.gate)
            release_tensor(ld, j->ffn.up);
        release_tensor(ld, j->ffn.down);
        return;
    }
    eng_backend *be = ld->m->be;
    const size_t rb = eng_dtype_bytes(j->dt, j->cols);
    uint8_t *dst = be->iface->host_memory ? j->data + j->r0 * rb : ld->stage;
    if (j->dt == ENG_DTYPE_Q8_0 && j->t->type == GGML_TYPE_Q8_0 && j->rot_period == 0) {
        /* the file's own blocks: a Q8_0 row is rb bytes there too */
        copy_rows(j, dst, rb);
    } else if (j->dt != ENG_DTYPE_Q8_0 && eng_dtype_block(j->dt) > 1) {
        /* Q4_K, Q5_K, Q6_K, Q4_1, Q4_0: the file's own blocks (mat_dtype:
         * only a tensor of the type is); a scaled row scales every weight,
         * so its blocks' d (and dmin, m), rounded to f16 as the file holds
         * them */
        copy_rows(j, dst, rb);
        for (uint64_t i = j->r0; i < j->r1; i++) {
            if (!rot_scaled(j->rot_period, j->rot_n, i))
                continue;
            /* the types' scales are f16 fields of each block: Q6_K's d at
             * its end, Q4_K's and Q5_K's d and dmin, Q4_1's d and m and
             * Q4_0's d at its start */
            const bool q6 = j->dt == ENG_DTYPE_Q6_K;
            const int nf = q6 || j->dt == ENG_DTYPE_Q4_0 ? 1 : 2;
            const long bl = eng_dtype_block(j->dt);
            const size_t bb = eng_dtype_bytes(j->dt, (size_t)bl);
            uint8_t *b = dst + (i - j->r0) * rb + (q6 ? offsetof(eng_q6k_block, d) : 0);
            for (uint64_t k = 0; k < j->cols / (uint64_t)bl; k++, b += bb)
                for (int f = 0; f < nf; f++) {
                    uint16_t h;
                    memcpy(&h, b + 2 * f, 2);
                    h = eng_f32_to_f16(eng_f16_to_f32(h) * j->rot_scale);
                    memcpy(b + 2 * f, &h, 2);
                }
        }
    } else {
        for (uint64_t i = j->r0; i < j->r1; i++) {
            dequant_row(ld, j->t, job_src_row(j, i), ld->row);
            if (rot_scaled(j->rot_period, j->rot_n, i))
                for (uint64_t c = 0; c < j->cols; c++)
                    ld->row[c] *= j->rot_scale;
            store_row(j->dt, ld->row, dst + (i - j->r0) * rb, j->cols);
        }
    }
    if (!be->iface->host_memory)
        be->iface->upload(be, j->data + j->r0 * rb, ld->stage, (j->r1 - j->r0) * rb);
    const size_t frb = ggml_row_bytes(j->t->type, j->t->ne[0]);
    const uint64_t first = job_src_row(j, j->r0), last = job_src_row(j, j->r1 - 1);
    gguf_release(ld->f, (const uint8_t *)j->t->data + first * frb, (size_t)(last + 1 - first) * frb);
}

static void jobs_task(void *arg, int ith, int nth)
{
    jobs_run *jr = arg;
    (void)nth;
    for (;;) {
        size_t k = atomic_fetch_add(&jr->next, 1);
        if (k >= jr->n_jobs)
            break;
        run_job(&jr->workers[ith], &jr->jobs[k]);
    }
}

/* Runs the deferred conversions on n_threads threads. Every tensor was
 * checked when its job was made, so conversion itself cannot fail; only
 * the scratch allocations can. */
static int run_jobs(loader *ld, int n_threads)
{
    /* DOWN_BLOCK rows of W_down of each FFN job (n_ff long, or with
     * experts theirs, a shared expert's or a dense layer's), a matrix's
     * row */
    size_t scratch = 0, stage = 0;
    for (size_t k = 0; k < ld->n_jobs; k++) {
        const size_t need = ld->jobs[k].L ? (size_t)DOWN_BLOCK * ld->jobs[k].ffn.down_cols
                                          : ld->jobs[k].cols;
        if (need > scratch)
            scratch = need;
        size_t b = job_stage_bytes(ld->m, &ld->jobs[k]);
        if (!ld->m->be->iface->host_memory && b > stage)
            stage = b;
    }
    /* Each thread stages a whole job in host memory before uploading it; a
     * dense FFN layer of a 3B model is 150 MB, and on a Jetson host memory
     * is the GPU's too: fewer threads rather than more staging than
     * STAGE_BUDGET in all. */
    size_t nt = n_threads > 1 ? (size_t)n_threads : 1;
    if (stage > 0 && nt > STAGE_BUDGET / stage)
        nt = STAGE_BUDGET / stage > 1 ? STAGE_BUDGET / stage : 1;
    if (nt > ld->n_jobs)
        nt = ld->n_jobs > 0 ? ld->n_jobs : 1;
    n_threads = (int)nt;
    eng_threadpool *pool = NULL;
    if (n_threads > 1 && eng_threadpool_new(n_threads, &pool) < 0)
        n_threads = 1; /* fewer threads is slower, not wrong */
    jobs_run jr = { .jobs = ld->jobs, .n_jobs = ld->n_jobs };
    atomic_init(&jr.next, 0);
    jr.workers = calloc((size_t)n_threads, sizeof(*jr.workers));
    int r = jr.workers ? 0 : -ENOMEM;
    for (int i = 0; i < n_threads && r == 0; i++) {
        jr.workers[i] = (loader){ .f = ld->f, .m = ld->m, .err = ld->err };
        r = ensure_row(&jr.workers[i], scratch);
        if (r == 0)
            r = ensure_stage(&jr.workers[i], stage);
    }
    if (r == 0) {
        if (pool)
            eng_threadpool_run(pool, jobs_task, &jr);
        else
            jobs_task(&jr, 0, 1);
    } else {
        eng__set_err(ld->err, -ENOMEM, "out of memory converting the weights");
    }
    for (int i = 0; jr.workers && i < n_threads; i++) {
        free(jr.workers[i].row);
        free(jr.workers[i].stage);
    }
    free(jr.workers);
    eng_threadpool_free(pool);
    return r;
}

static void free_jobs(loader *ld)
{
    for (size_t k = 0; k < ld->n_jobs; k++)
        free(ld->jobs[k].slots);
    free(ld->jobs);
    ld->jobs = NULL;
    ld->n_jobs = ld->cap_jobs = 0;
}

/* ---- hyperparameters ---- */

static int get_u32_arch(const gguf_file *f, const char *arch, const char *suffix, bool required,
                        uint32_t def, uint32_t *ret, eng_error *err)
{
    char key[128];
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    int r = gguf_get_u32(f, key, ret);
    if (r == -ENOENT && !required) {
        *ret = def;
        return 0;
    }
    if (r < 0)
        return eng__set_err(err, r == -ENOENT ? -EINVAL : r, "metadata '%s' is %s", key,
                            r == -ENOENT ? "missing" : "not a valid unsigned integer");
    return 0;
}

/* A count that is one number, or (arr_ok: gemma4's FFN widths and KV
 * heads) one per layer: *ret the largest, *ret_arr the layers' (NULL for
 * one number). */
static int get_layer_u32(const gguf_file *f, const char *arch, const char *suffix, eng_model *m,
                         uint32_t n_layer, bool arr_ok, bool required, uint32_t def,
                         uint32_t *ret, int32_t **ret_arr, eng_error *err)
{
    char key[128];
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    enum gguf_type et;
    uint64_t len;
    *ret_arr = NULL;
    if (!arr_ok || gguf_get_arr_info(f, key, &et, &len) < 0)
        return get_u32_arch(f, arch, suffix, required, def, ret, err);
    if (len != n_layer || n_layer > MAX_LAYERS)
        return eng__set_err(err, -EINVAL, "metadata '%s' has %llu entries for %u layers", key,
                            (unsigned long long)len, n_layer);
    int32_t *a = model_alloc(m, (size_t)n_layer * sizeof(*a));
    if (!a)
        return eng__set_err(err, -ENOMEM, "out of memory");
    *ret = 0;
    for (uint32_t il = 0; il < n_layer; il++) {
        if (gguf_get_arr_i32(f, key, il, &a[il]) < 0 || a[il] <= 0 || a[il] > MAX_DIM)
            return eng__set_err(err, -EINVAL, "metadata '%s'[%u] is not a count in 1..%d", key,
                                il, MAX_DIM);
        if ((uint32_t)a[il] > *ret)
            *ret = (uint32_t)a[il];
    }
    *ret_arr = a;
    return 0;
}

static int get_f32_arch(const gguf_file *f, const char *arch, const char *suffix, float def,
                        float *ret, eng_error *err)
{
    char key[128];
    snprintf(key, sizeof(key), "%s.%s", arch, suffix);
    int r = gguf_get_f32(f, key, ret);
    if (r == -ENOENT) {
        *ret = def;
        return 0;
    }
    if (r < 0 || !isfinite(*ret))
        return eng__set_err(err, -EINVAL, "metadata '%s' is not a valid float", key);
    return 0;
}

/* Token id's text (special tokens too) in buf, NUL-terminated; empty when
 * there is no such token or it does not fit. */
static void special_text(const eng_vocab *v, int32_t id, char *buf, size_t cap)
{
    int k = id < 0 ? 0 : eng_vocab_token_to_piece(v, id, true, buf, cap - 1);
    buf[k > 0 && (size_t)k < cap ? k : 0] = '\0';
}

/* The multipliers of Granite's layers, as llama.cpp reads them for that
 * family: the token embeddings times embedding_scale, the attention's and
 * the FFN's outputs times residual_scale before they join x, the scores
 * times attention.scale (in place of 1/sqrt(head_dim)), the logits
 * divided by logit_scale (required); an absent or zero optional one is 1. MiniCPM
 * runs the same layers (llama.cpp: Granite's graph) with the first two
 * and the last only, absent ones MiniCPM's own: scale_emb 12, scale_depth
 * 1.4 / sqrt(n_layer), hidden_size / dim_model_base (256), the values its
 * converter writes. (llama.cpp's default for the last is the inverse,
 * 256 / n_embd, which scales the logits the other way; only files older
 * than the keys lack them.) */
static int branch_scales(const gguf_file *f, const char *arch, eng_model *m, float mscale,
                         eng_error *err)
{
    const bool cpm = m->arch == ENG_ARCH_MINICPM;
    const char *keys[] = { "embedding_scale", "residual_scale", "attention.scale", "logit_scale" };
    const float def[] = { cpm ? 12.0f : 0.0f, cpm ? 1.4f / sqrtf((float)m->info.n_layer) : 0.0f,
                          0.0f, cpm ? (float)m->info.n_embd / 256.0f : 0.0f };
    char key[128];
    float v[4];
    for (int i = 0; i < 4; i++) {
        v[i] = def[i];
        if (cpm && i == 2)
            continue; /* MiniCPM's scores: 1/sqrt(head_dim) whatever the file says */
        snprintf(key, sizeof(key), "%s.%s", arch, keys[i]);
        if (i == 3 && !cpm && gguf_find_key(f, key) < 0)
            return eng__set_err(err, -EINVAL, "metadata '%s' is missing", key);
        int r = get_f32_arch(f, arch, keys[i], def[i], &v[i], err);
        if (r < 0)
            return r;
        if (!(v[i] >= 0.0f && v[i] <= 1e6f) || (i == 3 && v[i] == 0.0f))
            return eng__set_err(err, -EINVAL, "metadata '%s' = %g is out of range", key, v[i]);
    }
    /* Granite's rope.scaling.finetuned false: no layer rotates (llama.cpp's
     * rope_pattern for that family); MiniCPM always rotates */
    bool rot = true;
    snprintf(key, sizeof(key), "%s.rope.scaling.finetuned", arch);
    const int r = cpm ? 0 : gguf_get_bool(f, key, &rot);
    if (r < 0 && r != -ENOENT)
        return eng__set_err(err, -EINVAL, "metadata '%s' is not a valid boolean", key);
    m->nope_step = rot ? 0 : 1;
    m->embd_scale = v[0];
    m->residual_scale = v[1];
    if (v[2] > 0.0f)
        m->attn_scale = mscale * mscale * v[2];
    m->logit_scale = v[3];
    return 0;
}

/* granitehybrid's Mamba-2 mixers (m->ssm_shape): their convolution's
 * taps, inner width, state size, heads and groups, as llama.cpp reads them;
 * qwen35's delta nets (delta) the same keys: value heads (time_step_rank)
 * of state_size, key heads (group_count) as wide. */
static int load_ssm_shape(const gguf_file *f, const char *arch, bool delta, eng_model *m,
                          eng_error *err)
{
    uint32_t v[5];
    static const char *const keys[5] = { "ssm.conv_kernel", "ssm.inner_size", "ssm.state_size",
                                         "ssm.time_step_rank", "ssm.group_count" };
    for (int i = 0; i < 5; i++) {
        int r = get_u32_arch(f, arch, keys[i], true, 0, &v[i], err);
        if (r < 0)
            return r;
    }
    const uint32_t conv = v[0], inner = v[1], state = v[2], heads = v[3], groups = v[4];
    if (conv < 2 || conv > 64 || inner == 0 || inner > MAX_DIM || state == 0 || state > 1024 ||
        heads == 0 || inner % heads || groups == 0 || heads % groups ||
        (uint64_t)inner + 2ull * groups * state > MAX_DIM || (delta && inner / heads != state))
        return eng__set_err(err, -EINVAL, "metadata %s.ssm.* (conv_kernel %u, inner_size %u, "
                            "state_size %u, time_step_rank %u, group_count %u) is not a valid "
                            "%s shape", arch, conv, inner, state, heads, groups,
                            delta ? "gated delta net" : "Mamba-2");
    m->ssm_shape = (eng_ssm){ .d_conv = (int)conv, .d_inner = (int)inner, .d_state = (int)state,
                              .n_head = (int)heads, .n_group = (int)groups, .delta = delta };
    m->info.bytes_ssm_state = (uint64_t)m->info.n_ssm * inner * state * sizeof(float);
    return 0;
}

/* qwen35: which layers are gated delta nets (m->ssm_layer), as llama.cpp
 * reads them: attention.recurrent_layers (a flag per block, the
 * multi-token-prediction blocks' too), else all but every
 * full_attention_interval-th (4 where absent). */
static int load_delta_layers(const gguf_file *f, const char *arch, eng_model *m, uint32_t blocks,
                             eng_error *err)
{
    char key[128];
    enum gguf_type et;
    uint64_t len;
    const int n = m->info.n_layer;
    uint8_t *rec = model_alloc(m, (size_t)n);
    if (!rec)
        return eng__set_err(err, -ENOMEM, "out of memory");
    snprintf(key, sizeof(key), "%s.attention.recurrent_layers", arch);
    if (gguf_get_arr_info(f, key, &et, &len) == 0) {
        if (len != blocks)
            return eng__set_err(err, -EINVAL, "metadata '%s' has %llu entries for %u blocks",
                                key, (unsigned long long)len, blocks);
        for (int il = 0; il < n; il++) {
            bool b;
            if (gguf_get_arr_bool(f, key, (uint64_t)il, &b) < 0)
                return eng__set_err(err, -EINVAL, "metadata '%s'[%d] is not a flag", key, il);
            rec[il] = b;
        }
    } else {
        uint32_t every;
        int r = get_u32_arch(f, arch, "full_attention_interval", false, 4, &every, err);
        if (r < 0)
            return r;
        if (every == 0 || every > MAX_LAYERS)
            return eng__set_err(err, -EINVAL, "metadata '%s.full_attention_interval' %u out of "
                                "range 1..%d", arch, every, MAX_LAYERS);
        for (int il = 0; il < n; il++)
            rec[il] = (il + 1) % every != 0;
    }
    m->ssm_layer = rec;
    for (int il = 0; il < n; il++)
        m->info.n_ssm += rec[il];
    return m->info.n_ssm ? load_ssm_shape(f, arch, true, m, err) : 0;
}

/* attention.head_count_kv: one number, or (lfm2, granitehybrid) one per
 * layer, 0 in a convolution layer (m->conv_layer) or a Mamba-2 one
 * (m->ssm_layer), the attention layers' all alike; with the taps
 * (shortconv.l_cache) or the mixers' shape. n_head where absent. */
static int load_kv_heads(const gguf_file *f, const char *arch, eng_model *m, uint32_t n_head,
                         uint32_t *ret, eng_error *err)
{
    char key[128];
    snprintf(key, sizeof(key), "%s.attention.head_count_kv", arch);
    enum gguf_type et;
    uint64_t len;
    const int n = m->info.n_layer;
    const bool hybrid = !strcmp(arch, "granitehybrid");
    if ((m->arch != ENG_ARCH_LFM2 && !hybrid) || gguf_get_arr_info(f, key, &et, &len) < 0)
        return get_u32_arch(f, arch, "attention.head_count_kv", false, n_head, ret, err);
    if (len != (uint64_t)n)
        return eng__set_err(err, -EINVAL, "metadata '%s' has %llu entries for %d layers", key,
                            (unsigned long long)len, n);
    uint8_t *rec = model_alloc(m, (size_t)n); /* 1: no attention in layer il */
    if (!rec)
        return eng__set_err(err, -ENOMEM, "out of memory");
    *ret = 0;
    for (int il = 0; il < n; il++) {
        int32_t v;
        if (gguf_get_arr_i32(f, key, (uint64_t)il, &v) < 0 || v < 0 ||
            (v > 0 && *ret > 0 && (uint32_t)v != *ret))
            return eng__set_err(err, -EINVAL, "metadata '%s'[%d] is not a head count like the "
                                "others", key, il);
        rec[il] = v == 0;
        if (v > 0)
            *ret = (uint32_t)v;
    }
    if (*ret == 0) /* no attention layer: nothing reads the count */
        *ret = n_head;
    if (hybrid) {
        m->ssm_layer = rec;
        for (int il = 0; il < n; il++)
            m->info.n_ssm += rec[il];
        return m->info.n_ssm ? load_ssm_shape(f, arch, false, m, err) : 0;
    }
    m->conv_layer = rec;
    uint32_t taps;
    int r = get_u32_arch(f, arch, "shortconv.l_cache", true, 0, &taps, err);
    if (r < 0)
        return r;
    if (taps < 2 || taps > 64)
        return eng__set_err(err, -EINVAL, "metadata '%s.shortconv.l_cache' %u out of range 2..64",
                            arch, taps);
    m->conv_len = (int)taps;
    return 0;
}

/* nemotron_h: which block each layer is, as llama.cpp tells them from
 * two arrays of a count per layer: attention.head_count_kv and
 * feed_forward_length both 0, a Mamba-2 mixer (m->ssm_layer); only the
 * first not, attention (its KV heads, the attention layers' all alike);
 * only the second not, an MLP of that many neurons (m->mlp_layer, its
 * width in m->ffn_n, 0 in the others; nemotron_h_moe: experts, an
 * expert's width); both, nothing llama.cpp runs: refused. The arrays
 * cover every block, n_all (nemotron_h_moe's trailing draft block too,
 * nextn_predict_layers, which is not run). *ret_ff the widest MLP,
 * *ret_kv the KV heads (n_head where no layer attends). */
static int load_one_block_layers(const gguf_file *f, const char *arch, eng_model *m,
                                 uint32_t n_all, uint32_t n_head, uint32_t *ret_ff,
                                 uint32_t *ret_kv, eng_error *err)
{
    const int n = m->info.n_layer;
    static const char *const keys[2] = { "attention.head_count_kv", "feed_forward_length" };
    int32_t *v[2];
    for (int k = 0; k < 2; k++) {
        char key[128];
        snprintf(key, sizeof(key), "%s.%s", arch, keys[k]);
        enum gguf_type et;
        uint64_t len;
        if (gguf_get_arr_info(f, key, &et, &len) < 0 || len != (uint64_t)n_all)
            return eng__set_err(err, -EINVAL, "metadata '%s' is not an array of a count per "
                                "layer (%u)", key, n_all);
        if (!(v[k] = model_alloc(m, (size_t)n * sizeof(int32_t))))
            return eng__set_err(err, -ENOMEM, "out of memory");
        for (int il = 0; il < n; il++)
            if (gguf_get_arr_i32(f, key, (uint64_t)il, &v[k][il]) < 0 || v[k][il] < 0 ||
                v[k][il] > MAX_DIM)
                return eng__set_err(err, -EINVAL, "metadata '%s'[%d] is not a count in 0..%d",
                                    key, il, MAX_DIM);
    }
    uint8_t *ssm = model_alloc(m, (size_t)n), *mlp = model_alloc(m, (size_t)n);
    if (!ssm || !mlp)
        return eng__set_err(err, -ENOMEM, "out of memory");
    uint32_t kv = 0, ff = 0;
    for (int il = 0; il < n; il++) {
        if (v[0][il] > 0 && v[1][il] > 0)
            return eng__set_err(err, -EINVAL, "layer %d has both attention (%d KV heads) and "
                                "an MLP (%d neurons): %s runs one block a layer", il, v[0][il],
                                v[1][il], arch);
        if (v[0][il] > 0 && kv > 0 && (uint32_t)v[0][il] != kv)
            return eng__set_err(err, -EINVAL, "metadata '%s.%s'[%d] is not a head count like "
                                "the others", arch, keys[0], il);
        if (v[0][il] > 0)
            kv = (uint32_t)v[0][il];
        if ((uint32_t)v[1][il] > ff)
            ff = (uint32_t)v[1][il];
        ssm[il] = v[0][il] == 0 && v[1][il] == 0;
        mlp[il] = v[1][il] > 0;
        m->info.n_ssm += ssm[il];
    }
    if (ff == 0)
        return eng__set_err(err, -EINVAL, "%s without an MLP layer (feed_forward_length all 0) "
                            "is not supported", arch);
    m->ssm_layer = ssm;
    m->mlp_layer = mlp;
    m->ffn_n = v[1];
    *ret_ff = ff;
    *ret_kv = kv ? kv : n_head; /* (no attention layer: nothing reads the count) */
    return m->info.n_ssm ? load_ssm_shape(f, arch, false, m, err) : 0;
}

/* Which layers are local (attend over the last n_swa positions), as
 * llama.cpp reads attention.sliding_window_pattern: flags per layer (an
 * array of bools or integers; layers past its end are global) or a period
 * p, layer il local when il % p < p - 1 (0: every layer local). */
static int load_swa_layers(const gguf_file *f, const char *arch, eng_model *m, uint32_t def,
                           eng_error *err)
{
    const int n = m->info.n_layer;
    if (!(m->swa_local = model_alloc(m, (size_t)n)))
        return eng__set_err(err, -ENOMEM, "out of memory");
    memset(m->swa_local, 0, (size_t)n);
    char key[128];
    snprintf(key, sizeof(key), "%s.attention.sliding_window_pattern", arch);
    enum gguf_type et;
    uint64_t len;
    if (gguf_get_arr_info(f, key, &et, &len) == 0) {
        if (len > (uint64_t)n)
            return eng__set_err(err, -EINVAL, "metadata '%s' has %llu entries for %d layers", key,
                                (unsigned long long)len, n);
        for (uint64_t i = 0; i < len; i++) {
            bool b;
            if (gguf_get_arr_bool(f, key, i, &b) < 0)
                return eng__set_err(err, -EINVAL, "metadata '%s'[%llu] is not a flag", key,
                                    (unsigned long long)i);
            m->swa_local[i] = b;
        }
        return 0;
    }
    uint32_t p;
    int r = get_u32_arch(f, arch, "attention.sliding_window_pattern", false, def, &p, err);
    if (r < 0)
        return r;
    for (int il = 0; il < n; il++)
        m->swa_local[il] = p == 0 || (uint32_t)il % p < p - 1;
    return 0;
}

/* Mixture of experts (Qwen3-MoE and Qwen3-VL-MoE's language model, OLMoE,
 * Granite MoE, LFM2-MoE, Gemma 4 26B-A4B, and Mixtral under llama): n_ff becomes all
 * experts' neurons
 * together, n_ff_exp each (slot e * n_ff_exp + j holds expert e's neuron
 * j); the picked experts' weights normalised to sum 1 but in OLMoE, as
 * llama.cpp has each family; LFM2-MoE's first layers dense (n_ff_dense
 * neurons each: n_ff is the widest layer's). Experts in another family
 * (ERNIE 4.5's name for its dense models too) are refused as such, not as
 * a missing FFN; so are shared experts and expert groups. */
static int load_experts(const gguf_file *f, const char *arch, eng_model *m, uint32_t *n_ff,
                        eng_error *err)
{
    const bool qwen = !strcmp(arch, "qwen3moe") || !strcmp(arch, "qwen3vlmoe");
    const bool lfm2 = !strcmp(arch, "lfm2moe"), q2 = !strcmp(arch, "qwen2moe");
    const bool q35 = !strcmp(arch, "qwen35moe"); /* (Qwen2-MoE's shared expert) */
    const bool granite = !strcmp(arch, "granitemoe") || !strcmp(arch, "granitehybrid");
    /* (ERNIE 4.5's MoE models: a dense first layer, a shared expert, a bias
     * to pick by; Llama's layers) */
    const bool ernie = !strcmp(arch, "ernie4_5-moe");
    /* (gpt-oss: experts in every layer, with biases; picked by their
     * logits plus a bias, weighed by a softmax over the picked: the
     * softmax over all, normalised over the picked) */
    const bool oss = !strcmp(arch, "gpt-oss");
    /* (nemotron_h_moe: un-gated experts and shared expert in its MLP
     * layers, picked by sigmoid plus a bias, weighed by the sigmoid,
     * normalised and scaled as the file says) */
    const bool nem = !strcmp(arch, "nemotron_h_moe");
    const bool named = qwen || lfm2 || q2 || q35 || ernie || oss || nem ||
                       !strcmp(arch, "granitemoe") || !strcmp(arch, "olmoe");
    /* (gemma4: E2B, E4B and 31B have none, 26B-A4B beside a dense MLP) */
    const bool g4 = !strcmp(arch, "gemma4");
    uint32_t ne, nu, fe, shared, shared_ff, groups, lead, gating = 1, step = 1;
    int r;
    if ((r = get_u32_arch(f, arch, "expert_count", named, 0, &ne, err)) < 0)
        return r;
    if (ne <= 1 && !named) /* (llama.cpp: one expert is a dense FFN) */
        return 0;
    if (!named && strcmp(arch, "llama") && strcmp(arch, "granite") && !granite && !g4)
        return eng__set_err(err, -ENOTSUP, "mixture of experts (%s.expert_count %u) is not "
                            "supported for %s", arch, ne, arch);
    if (ne < 2 || ne > 1024)
        return eng__set_err(err, -EINVAL, "%s.expert_count %u out of range 2..1024", arch, ne);
    if ((r = get_u32_arch(f, arch, "expert_used_count", true, 0, &nu, err)) < 0)
        return r;
    if (nu < 1 || nu > ne)
        return eng__set_err(err, -EINVAL, "%s.expert_used_count %u out of range 1..%u", arch, nu,
                            ne);
    /* Qwen3-MoE's and LFM2-MoE's experts have a length of their own
     * (Qwen3-MoE, as llama.cpp: else n_ff / n_used); the others' is
     * feed_forward_length; LFM2-MoE's gating is the file's (1 softmax, 2
     * sigmoid), the others' softmax */
    if ((r = get_u32_arch(f, arch, "expert_feed_forward_length", lfm2 || g4 || ernie || oss,
                          qwen || q2 || q35 || nem ? *n_ff / nu : *n_ff, &fe, err)) < 0 ||
        (lfm2 && (r = get_u32_arch(f, arch, "expert_gating_func", true, 1, &gating, err)) < 0) ||
        (r = get_u32_arch(f, arch, "expert_shared_count", false, 0, &shared, err)) < 0 ||
        (r = get_u32_arch(f, arch, "expert_shared_feed_forward_length", nem, 0, &shared_ff,
                          err)) < 0 ||
        (r = get_u32_arch(f, arch, "expert_group_count", false, 0, &groups, err)) < 0 ||
        (r = get_u32_arch(f, arch, "leading_dense_block_count", false, 0, &lead, err)) < 0 ||
        (ernie && (r = get_u32_arch(f, arch, "interleave_moe_layer_step", true, 1, &step,
                                    err)) < 0))
        return r;
    /* (ERNIE 4.5: experts in every step-th layer; the released models'
     * step is 1) */
    if (step != 1)
        return eng__set_err(err, -ENOTSUP, "%s.interleave_moe_layer_step %u is not supported "
                            "(experts in every layer after the dense ones are)", arch, step);
    /* one shared expert beside the routed ones, every token's: Granite
     * MoE's and Granite 4.0-H's where expert_shared_feed_forward_length
     * says, Qwen2-MoE's and Qwen3.5-MoE's always (of n_ff neurons where
     * that key is absent, weighed by the sigmoid of its own gate); not
     * elsewhere */
    if ((q2 || q35) && shared_ff == 0)
        shared_ff = *n_ff;
    /* gemma4's dense MLP beside the experts: feed_forward_length, one
     * width for every layer */
    if (g4 && m->ffn_n)
        return eng__set_err(err, -ENOTSUP, "%s.feed_forward_length per layer with experts is "
                            "not supported", arch);
    if (g4)
        shared_ff = *n_ff;
    if (shared > 1 ||
        ((shared > 0 || shared_ff > 0) && !granite && !q2 && !q35 && !g4 && !ernie && !nem))
        return eng__set_err(err, -ENOTSUP, "shared experts (%s.expert_shared_%s %u) are not "
                            "supported%s", arch, shared ? "count" : "feed_forward_length",
                            shared ? shared : shared_ff, shared > 1 ? " (one is)" : "");
    /* (leading dense layers: LFM2-MoE's and ERNIE 4.5's, of
     * feed_forward_length neurons) */
    if (groups > 1 || (lead > 0 && !lfm2 && !ernie))
        return eng__set_err(err, -ENOTSUP, "%s (%u) is not supported", groups > 1 ?
                            "expert_group_count" : "leading_dense_block_count",
                            groups > 1 ? groups : lead);
    if (lead >= (uint32_t)m->info.n_layer)
        return eng__set_err(err, -EINVAL, "leading_dense_block_count %u: no layer has experts",
                            lead);
    if (gating != 1 && gating != 2)
        return eng__set_err(err, -ENOTSUP, "%s.expert_gating_func %u is not supported (1 "
                            "softmax, 2 sigmoid)", arch, gating);
    /* nemotron_h_moe: the weights normalised and scaled as the file says
     * (llama.cpp: unscaled where the scale is 0); a latent space the
     * experts work in (Nemotron 3 Super's ffn_latent_down / up) is not
     * run here */
    bool wnorm = m->arch != ENG_ARCH_OLMOE && !q2; /* (as llama.cpp has the others) */
    float wscale = 1.0f;
    char key[128];
    if (nem) {
        wnorm = false; /* (llama.cpp's default) */
        snprintf(key, sizeof(key), "%s.expert_weights_norm", arch);
        if ((r = gguf_get_bool(f, key, &wnorm)) < 0 && r != -ENOENT)
            return eng__set_err(err, -EINVAL, "metadata '%s' is not a valid boolean", key);
        if ((r = get_f32_arch(f, arch, "expert_weights_scale", 1.0f, &wscale, err)) < 0)
            return r;
    }
    if (!(wscale >= 0.0f && wscale <= 1e6f))
        return eng__set_err(err, -EINVAL, "metadata '%s.expert_weights_scale' = %g is out of "
                            "range", arch, wscale);
    snprintf(key, sizeof(key), "%s.moe_latent_size", arch);
    if (nem && gguf_find_key(f, key) >= 0)
        return eng__set_err(err, -ENOTSUP, "experts in a latent space (%s) are not supported",
                            key);
    if (fe == 0 || (uint64_t)fe * ne + shared_ff > MAX_DIM)
        return eng__set_err(err, -EINVAL, "%u experts of %u neurons (and %u shared): out of range",
                            ne, fe, shared_ff);
    /* n_ff: the widest layer's (the dense plan loads every layer's all) */
    m->n_dense_lead = (int)lead;
    m->n_ff_dense = lead ? (int)*n_ff : 0;
    if (lead == 0 || fe * ne + shared_ff > *n_ff)
        *n_ff = fe * ne + shared_ff;
    m->n_ff_shared = (int)shared_ff;
    m->moe_shared_gate = q2 || q35;
    m->moe_mlp = g4;
    m->moe_bias = lfm2 || ernie || nem;
    m->moe_sigmoid = gating == 2 || nem;
    m->n_ff_exp = (int)fe;
    m->info.n_expert = (int)ne;
    m->info.n_expert_used = (int)nu;
    m->info.n_ff_shared = (int)shared_ff;
    m->moe_norm = wnorm;
    m->moe_scale = wscale > 0.0f ? wscale : 1.0f;
    /* nemotron_h_moe: each MLP layer's width all its experts' neurons */
    for (int il = 0; nem && il < m->info.n_layer; il++)
        m->ffn_n[il] = m->mlp_layer[il] ? (int32_t)*n_ff : 0;
    return 0;
}

/* Gemma 4's own keys, after load_hparams has read the global layers'
 * heads (attention.key_length) and which layers are local: the local
 * layers' heads, the layers that read an earlier layer's cache (the last
 * attention.shared_kv_layers: a local one the last local layer's before
 * them, a global one the last global layer's, as llama.cpp maps them),
 * the per-layer embeddings' width. */
static int load_gemma4(const gguf_file *f, const char *arch, eng_model *m, uint32_t n_layer,
                       eng_error *err)
{
    const int hd = m->info.head_dim, H = m->info.n_head;
    uint32_t vl, hs, vs, rs, shared, P;
    int r;
    char key[128];
    snprintf(key, sizeof(key), "%s.attention.sliding_window_pattern", arch);
    if (gguf_find_key(f, key) < 0 || !m->swa_local) /* (flags, or a period: load_swa_layers) */
        return eng__set_err(err, -EINVAL, "metadata '%s' is missing", key);
    if ((r = get_u32_arch(f, arch, "attention.value_length", false, (uint32_t)hd, &vl, err)) < 0 ||
        (r = get_u32_arch(f, arch, "attention.key_length_swa", false, (uint32_t)hd, &hs,
                          err)) < 0 ||
        (r = get_u32_arch(f, arch, "attention.value_length_swa", false, hs, &vs, err)) < 0 ||
        (r = get_u32_arch(f, arch, "rope.dimension_count_swa", false, (uint32_t)m->n_rot, &rs,
                          err)) < 0 ||
        (r = get_u32_arch(f, arch, "attention.shared_kv_layers", false, 0, &shared, err)) < 0 ||
        (r = get_u32_arch(f, arch, "embedding_length_per_layer_input", true, 0, &P, err)) < 0)
        return r;
    if (vl != (uint32_t)hd || vs != hs)
        return eng__set_err(err, -ENOTSUP, "%s with values of another width than keys (%u/%u, "
                            "%u/%u) is not supported", arch, vl, hd, vs, hs);
    if (hs == 0 || hs > 1024 || hs % 2 || rs == 0 || rs > hs || rs % 2)
        return eng__set_err(err, -EINVAL, "local heads of %u with %u rotating are not valid", hs,
                            rs);
    m->head_dim_swa = (int)hs;
    m->n_rot_swa = (int)rs;
    for (uint32_t il = 0; m->kv_heads && il < n_layer; il++)
        if (H % m->kv_heads[il])
            return eng__set_err(err, -EINVAL, "layer %u: %d KV heads for %d heads", il,
                                m->kv_heads[il], H);
    /* llama.cpp maps a shared layer to layer from - 2 (local) or from - 1
     * (global): refused where that is a layer of the other kind */
    if (shared >= n_layer || (shared > 0 && n_layer - shared < 2))
        return eng__set_err(err, -EINVAL, "%s.attention.shared_kv_layers %u of %u layers", arch,
                            shared, n_layer);
    m->n_kv_from = (int)(n_layer - shared);
    for (int il = m->n_kv_from; il < (int)n_layer; il++) {
        const int src = m->n_kv_from - (m->swa_local[il] ? 2 : 1);
        if (m->swa_local[src] != m->swa_local[il] ||
            (m->kv_heads && m->kv_heads[src] != m->kv_heads[il]))
            return eng__set_err(err, -EINVAL, "layer %d would attend over the cache of layer %d, "
                                "a layer of another kind", il, src);
    }
    if (P > 4096 || (uint64_t)P * n_layer > MAX_DIM)
        return eng__set_err(err, -EINVAL, "%s.embedding_length_per_layer_input %u out of range",
                            arch, P);
    m->n_embd_per_layer = (int)P;
    const int w = hd > (int)hs ? hd : (int)hs;
    if (!(m->ones = model_alloc(m, (size_t)w * sizeof(float))))
        return eng__set_err(err, -ENOMEM, "out of memory");
    for (int i = 0; i < w; i++)
        m->ones[i] = 1.0f;
    return 0;
}

/* Gemma 3n's own keys: AltUp's streams (altup.num_inputs), of which the
 * layers compute the first (altup.active_idx: llama.cpp's graph takes
 * stream 0 in places where it means that one, so others are refused),
 * and each layer's cut of its gate values in standard deviations
 * (activation_sparsity_scale: the converter's normal quantile of the
 * share cut, -inf for none; absent, llama.cpp's 1.6448533 (95 %) in the
 * first 10 layers, which it applies whatever the file says) */
static int load_gemma3n(const gguf_file *f, const char *arch, eng_model *m, uint32_t n_layer,
                        eng_error *err)
{
    uint32_t na, act;
    int r;
    if ((r = get_u32_arch(f, arch, "altup.num_inputs", true, 0, &na, err)) < 0 ||
        (r = get_u32_arch(f, arch, "altup.active_idx", false, 0, &act, err)) < 0)
        return r;
    if (na < 2 || na > 16)
        return eng__set_err(err, -EINVAL, "%s.altup.num_inputs %u out of range 2..16", arch, na);
    if (act != 0)
        return eng__set_err(err, -ENOTSUP, "%s.altup.active_idx %u is not supported (0 is)",
                            arch, act);
    m->n_altup = (int)na;
    if (!(m->ffn_cut = model_alloc(m, (size_t)n_layer * sizeof(float))))
        return eng__set_err(err, -ENOMEM, "out of memory");
    char key[128];
    snprintf(key, sizeof(key), "%s.activation_sparsity_scale", arch);
    enum gguf_type et;
    uint64_t len;
    if ((r = gguf_get_arr_info(f, key, &et, &len)) == -ENOENT) {
        for (uint32_t il = 0; il < n_layer; il++)
            m->ffn_cut[il] = il < 10 ? 1.6448533535003662f : -INFINITY;
        return 0;
    }
    if (r < 0 || len != n_layer)
        return eng__set_err(err, -EINVAL, "metadata '%s' is not an array of %u floats", key,
                            n_layer);
    for (uint32_t il = 0; il < n_layer; il++)
        if (gguf_get_arr_f32(f, key, il, &m->ffn_cut[il]) < 0 || isnan(m->ffn_cut[il]) ||
            m->ffn_cut[il] == INFINITY)
            return eng__set_err(err, -EINVAL, "metadata '%s'[%u] is not a valid float", key, il);
    return 0;
}

static int load_hparams(const gguf_file *f, eng_model *m, eng_error *err)
{
    const char *s;
    size_t len;
    if (gguf_get_str(f, "general.architecture", &s, &len) < 0)
        return eng__set_err(err, -EINVAL, "metadata 'general.architecture' is missing");
    char arch[32];
    if (len >= sizeof(arch))
        return eng__set_err(err, -ENOTSUP, "unsupported architecture (name too long)");
    memcpy(arch, s, len);
    arch[len] = 0;
    /* ERNIE 4.5's dense models are Llama's layers (llama.cpp: the same
     * graph, consecutive RoPE pairs) */
    if (!strcmp(arch, "llama") || !strcmp(arch, "ernie4_5"))
        m->arch = ENG_ARCH_LLAMA;
    else if (!strcmp(arch, "qwen2"))
        m->arch = ENG_ARCH_QWEN2;
    else if (!strcmp(arch, "qwen3"))
        m->arch = ENG_ARCH_QWEN3;
    /* Qwen2-VL / Qwen2.5-VL and Qwen3-VL: their language models, whose
     * multi-section RoPE gives a text token one position in every section
     * (llama.cpp broadcasts it), which is NEOX RoPE; Qwen3-VL's deepstack
     * inputs are zeros for text tokens */
    else if (!strcmp(arch, "qwen2vl"))
        m->arch = ENG_ARCH_QWEN2;
    else if (!strcmp(arch, "qwen3vl"))
        m->arch = ENG_ARCH_QWEN3;
    else if (!strcmp(arch, "phi3"))
        m->arch = ENG_ARCH_PHI3;
    else if (!strcmp(arch, "glm4"))
        m->arch = ENG_ARCH_GLM4;
    else if (!strcmp(arch, "gpt-oss"))
        m->arch = ENG_ARCH_GPT_OSS;
    else if (!strcmp(arch, "gemma"))
        m->arch = ENG_ARCH_GEMMA;
    else if (!strcmp(arch, "gemma2"))
        m->arch = ENG_ARCH_GEMMA2;
    else if (!strcmp(arch, "gemma3"))
        m->arch = ENG_ARCH_GEMMA3;
    else if (!strcmp(arch, "gemma4") || !strcmp(arch, "gemma3n")) /* (3n: with AltUp) */
        m->arch = ENG_ARCH_GEMMA4;
    else if (!strcmp(arch, "smollm3"))
        m->arch = ENG_ARCH_SMOLLM3;
    else if (!strcmp(arch, "granite"))
        m->arch = ENG_ARCH_GRANITE;
    else if (!strcmp(arch, "exaone"))
        m->arch = ENG_ARCH_EXAONE;
    else if (!strcmp(arch, "minicpm"))
        m->arch = ENG_ARCH_MINICPM;
    else if (!strcmp(arch, "olmo2"))
        m->arch = ENG_ARCH_OLMO2;
    else if (!strcmp(arch, "exaone4"))
        m->arch = ENG_ARCH_EXAONE4;
    else if (!strcmp(arch, "mistral3"))
        m->arch = ENG_ARCH_MISTRAL3;
    else if (!strcmp(arch, "hunyuan-dense"))
        m->arch = ENG_ARCH_HUNYUAN;
    else if (!strcmp(arch, "lfm2") || !strcmp(arch, "lfm2moe"))
        m->arch = ENG_ARCH_LFM2;
    else if (!strcmp(arch, "ernie4_5-moe")) /* (ERNIE 4.5 21B-A3B: with experts) */
        m->arch = ENG_ARCH_LLAMA;
    /* mixture-of-experts families whose attention is one here already
     * (Qwen3-MoE: Qwen3's; Granite MoE: Granite's multipliers) */
    else if (!strcmp(arch, "qwen3moe") || !strcmp(arch, "qwen3vlmoe"))
        m->arch = ENG_ARCH_QWEN3;
    else if (!strcmp(arch, "granitemoe"))
        m->arch = ENG_ARCH_GRANITE;
    else if (!strcmp(arch, "qwen2moe")) /* (Qwen1.5-MoE, Qwen2-MoE: Qwen2's attention) */
        m->arch = ENG_ARCH_QWEN2;
    /* Granite 4.0-H: Granite's layers, Mamba-2 mixers in place of
     * attention in most (load_kv_heads) */
    else if (!strcmp(arch, "granitehybrid"))
        m->arch = ENG_ARCH_GRANITE;
    else if (!strcmp(arch, "olmoe"))
        m->arch = ENG_ARCH_OLMOE;
    /* Falcon-H1: llama's layers (NEOX RoPE), a Mamba-2 mixer beside
     * attention in each (its multipliers folded into the weights by the
     * converter) */
    else if (!strcmp(arch, "falcon-h1")) {
        m->arch = ENG_ARCH_LLAMA;
        m->ssm_beside = true;
    }
    /* Nemotron-H: one block a layer, a Mamba-2 mixer (with groups), attention
     * without RoPE or an un-gated MLP (load_one_block_layers) */
    else if (!strcmp(arch, "nemotron_h") || !strcmp(arch, "nemotron_h_moe")) {
        m->arch = ENG_ARCH_LLAMA; /* (nemotron_h_moe: experts in place of the MLPs) */
        m->one_block = true;
    }
    /* Qwen3.5's dense models: Qwen3's attention (NEOX over a quarter of
     * each head: multi-section RoPE, one position for text) with an output
     * gate, gated delta nets in place of attention in most layers */
    else if (!strcmp(arch, "qwen35") || !strcmp(arch, "qwen35moe")) {
        m->arch = ENG_ARCH_QWEN3; /* (qwen35moe: with Qwen2-MoE's experts, normalised) */
        m->attn_gate = true;
    } else
        return eng__set_err(err, -ENOTSUP,
                            "unsupported architecture '%s' (supported: llama, ernie4_5, qwen2, "
                            "qwen3, qwen2vl, qwen3vl, phi3, gemma, gemma2, gemma3, gemma3n, "
                            "gemma4, glm4, gpt-oss, smollm3, "
                            "granite, exaone, minicpm, olmo2, exaone4, mistral3, hunyuan-dense, "
                            "lfm2, lfm2moe, ernie4_5-moe, qwen3moe, qwen3vlmoe, granitemoe, "
                            "olmoe, granitehybrid, qwen2moe, qwen35, qwen35moe, falcon-h1, "
                            "nemotron_h, nemotron_h_moe; text only for the vl ones)",
                            arch);
    /* the vl families' sections, which llama.cpp requires (an array of at
     * most 4 or one number): only their presence matters for text */
    if (!strcmp(arch, "qwen2vl") || !strcmp(arch, "qwen3vl") || !strcmp(arch, "qwen3vlmoe") ||
        m->attn_gate) {
        char skey[64];
        snprintf(skey, sizeof(skey), "%s.rope.dimension_sections", arch);
        enum gguf_type et;
        uint64_t ns;
        uint32_t one;
        const bool arr = gguf_get_arr_info(f, skey, &et, &ns) == 0;
        if (arr ? ns > 4 : gguf_get_u32(f, skey, &one) < 0)
            return eng__set_err(err, -EINVAL, "metadata '%s' is %s", skey,
                                arr ? "longer than 4" : "missing or not a number");
    }
    /* what every Gemma has (GeGLU, scaled embeddings, NEOX), and what
     * Gemma 2, 3 and 4 add (local layers, norms after attention and FFN) */
    const bool g4 = m->arch == ENG_ARCH_GEMMA4;
    const bool g23 = m->arch == ENG_ARCH_GEMMA2 || m->arch == ENG_ARCH_GEMMA3 || g4;
    const bool gemma = g23 || m->arch == ENG_ARCH_GEMMA;
    snprintf(m->info.arch, sizeof(m->info.arch), "%s", arch);
    if (gguf_get_str(f, "general.name", &s, &len) == 0)
        snprintf(m->info.name, sizeof(m->info.name), "%.*s",
                 (int)(len < sizeof(m->info.name) ? len : sizeof(m->info.name) - 1), s);

    uint32_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_rot, n_ctx;
    int r;
    if ((r = get_u32_arch(f, arch, "block_count", true, 0, &n_layer, err)) < 0 ||
        (r = get_u32_arch(f, arch, "embedding_length", true, 0, &n_embd, err)) < 0 ||
        (!m->one_block && (r = get_layer_u32(f, arch, "feed_forward_length", m, n_layer, g4,
                                             true, 0, &n_ff, &m->ffn_n, err)) < 0) ||
        (r = get_u32_arch(f, arch, "attention.head_count", true, 0, &n_head, err)) < 0 ||
        (r = get_u32_arch(f, arch, "context_length", false, 2048, &n_ctx, err)) < 0)
        return r;
    if (n_layer == 0 || n_layer > MAX_LAYERS)
        return eng__set_err(err, -EINVAL, "block_count %u out of range 1..%d", n_layer, MAX_LAYERS);
    /* qwen35, glm4: the last nextn_predict_layers blocks predict further
     * tokens (speculative decoding); generation runs without them */
    uint32_t nextn = 0;
    if ((m->attn_gate || m->arch == ENG_ARCH_GLM4 || m->one_block) &&
        (r = get_u32_arch(f, arch, "nextn_predict_layers", false, 0, &nextn, err)) < 0)
        return r;
    if (nextn >= n_layer)
        return eng__set_err(err, -EINVAL, "nextn_predict_layers %u of %u blocks leaves no layer",
                            nextn, n_layer);
    m->info.n_layer = (int)(n_layer - nextn);
    /* (nemotron_h_moe's experts: after its layers' kinds, which say where
     * they are) */
    if (!m->one_block && (r = load_experts(f, arch, m, &n_ff, err)) < 0)
        return r;
    if ((r = g4 ? get_layer_u32(f, arch, "attention.head_count_kv", m, n_layer, true, false,
                                n_head, &n_head_kv, &m->kv_heads, err)
             : m->one_block ? load_one_block_layers(f, arch, m, n_layer, n_head, &n_ff,
                                                    &n_head_kv, err)
                            : load_kv_heads(f, arch, m, n_head, &n_head_kv, err)) < 0 ||
        (m->attn_gate && (r = load_delta_layers(f, arch, m, n_layer, err)) < 0) ||
        (m->one_block && (r = load_experts(f, arch, m, &n_ff, err)) < 0))
        return r;
    if (m->ssm_beside) { /* (a mixer in every layer) */
        m->info.n_ssm = m->info.n_layer;
        if ((r = load_ssm_shape(f, arch, false, m, err)) < 0)
            return r;
    }
    if (n_embd == 0 || n_embd > MAX_DIM || n_ff == 0 || n_ff > MAX_DIM)
        return eng__set_err(err, -EINVAL, "embedding_length %u / feed_forward_length %u out of range",
                            n_embd, n_ff);
    if (n_head == 0 || n_head > 4096 || n_head_kv == 0 || n_head % n_head_kv)
        return eng__set_err(err, -EINVAL, "head counts %u/%u are not valid grouped-query attention",
                            n_head, n_head_kv);
    if ((r = get_u32_arch(f, arch, "attention.key_length", false, n_embd / n_head, &head_dim,
                          err)) < 0)
        return r;
    if (head_dim == 0 || head_dim > 1024 || head_dim % 2)
        return eng__set_err(err, -EINVAL, "head dimension %u is not valid", head_dim);
    if ((r = get_u32_arch(f, arch, "rope.dimension_count", false, head_dim, &n_rot, err)) < 0)
        return r;
    if (n_rot == 0 || n_rot > head_dim || n_rot % 2)
        return eng__set_err(err, -EINVAL, "rope dimension %u is not valid for head dimension %u",
                            n_rot, head_dim);
    float eps_default = gemma ? 1e-6f : 1e-5f;
    /* (nemotron_h: llama.cpp takes attention.layer_norm_epsilon where the
     * RMS one is absent, as its converter writes it) */
    if (m->one_block && (r = get_f32_arch(f, arch, "attention.layer_norm_epsilon", eps_default,
                                          &eps_default, err)) < 0)
        return r;
    if ((r = get_f32_arch(f, arch, "rope.freq_base", 10000.0f, &m->rope_freq_base, err)) < 0 ||
        (r = get_f32_arch(f, arch, "attention.layer_norm_rms_epsilon", eps_default, &m->rms_eps,
                          err)) < 0)
        return r;
    if (m->rope_freq_base <= 0 || m->rms_eps <= 0)
        return eng__set_err(err, -EINVAL, "rope.freq_base and rms epsilon must be positive");

    m->info.n_embd = n_embd;
    m->info.n_ff = n_ff;
    m->info.n_head = n_head;
    m->info.n_head_kv = n_head_kv;
    m->info.head_dim = head_dim;
    m->info.n_ctx_train = n_ctx ? (int)(n_ctx > (1u << 24) ? (1u << 24) : n_ctx) : 2048;
    m->n_rot = n_rot;
    /* olmo2 and exaone4: no pre-norms (their norms follow attention and
     * the FFN), so nothing would scale q's rotated part: llama.cpp asserts
     * that every dimension rotates */
    const bool olmo = m->arch == ENG_ARCH_OLMO2, ex4 = m->arch == ENG_ARCH_EXAONE4;
    if ((olmo || ex4) && n_rot != head_dim)
        return eng__set_err(err, -ENOTSUP, "%s with %u of %u dimensions rotating is not supported",
                            arch, n_rot, head_dim);
    const bool hy = m->arch == ENG_ARCH_HUNYUAN, oss = m->arch == ENG_ARCH_GPT_OSS;
    /* (glm4: consecutive pairs, but GLM-4.1V's multi-section RoPE, which
     * gives text one position in every section as Qwen2-VL's: NEOX) */
    char sec[64];
    snprintf(sec, sizeof(sec), "%s.rope.dimension_sections", arch);
    const bool glm4v = m->arch == ENG_ARCH_GLM4 && gguf_find_key(f, sec) >= 0;
    m->rope_neox = m->arch == ENG_ARCH_QWEN2 || m->arch == ENG_ARCH_QWEN3 ||
                   m->arch == ENG_ARCH_PHI3 || m->arch == ENG_ARCH_EXAONE || gemma || olmo || ex4 ||
                   hy || m->arch == ENG_ARCH_LFM2 || m->arch == ENG_ARCH_OLMOE || glm4v ||
                   oss || m->ssm_beside;
    /* Hunyuan: q and k normalised after RoPE; its NTK "alpha" raises the
     * base by alpha^(d / (d - 2)) where a file keeps it apart (its
     * converter folds it into freq_base) */
    m->qk_norm_after_rope = hy;
    float alpha = 0.0f;
    if (hy && (r = get_f32_arch(f, arch, "rope.scaling.alpha", 0.0f, &alpha, err)) < 0)
        return r;
    if (alpha < 0.0f || alpha > 1e6f || head_dim < 4)
        return eng__set_err(err, -EINVAL, "rope.scaling.alpha %g out of range", alpha);
    if (alpha > 0.0f)
        m->rope_freq_base *= powf(alpha, (float)head_dim / (float)(head_dim - 2));
    m->qk_norm_full = olmo || m->arch == ENG_ARCH_OLMOE;
    /* RoPE scaling as llama.cpp reads it: the factor divides positions for
     * every type but none (linear, the type a file that names none has,
     * and longrope); yarn ramps between that and no scaling (Qwen's long
     * contexts); another type is refused rather than run unscaled */
    m->rope_linear = 1.0f;
    char key[128];
    snprintf(key, sizeof(key), "%s.rope.scaling.type", arch);
    const bool typed = gguf_get_str(f, key, &s, &len) == 0;
#define TYPE_IS(lit) (len == sizeof(lit) - 1 && !memcmp(s, lit, sizeof(lit) - 1))
    const bool none = typed && TYPE_IS("none");
    m->rope_yarn = typed && TYPE_IS("yarn");
    if (typed && !none && !m->rope_yarn && !TYPE_IS("linear") && !TYPE_IS("longrope"))
        return eng__set_err(err, -ENOTSUP, "rope.scaling.type '%.*s' is not supported", (int)(len < 32 ? len : 32), s);
#undef TYPE_IS
    float factor;
    if ((r = get_f32_arch(f, arch, "rope.scaling.factor", 0.0f, &factor, err)) < 0)
        return r;
    if (factor == 0.0f && (r = get_f32_arch(f, arch, "rope.scale_linear", 0.0f, &factor, err)) < 0)
        return r;
    if (factor < 0.0f || factor > 1e6f || (factor > 0.0f && factor < 1e-3f))
        return eng__set_err(err, -EINVAL, "rope scaling factor %g out of range", factor);
    if (!none && factor > 0.0f)
        m->rope_linear = factor;
    /* YaRN's ramp between interpolated and extrapolated frequencies, with
     * llama.cpp's values for these families (ext_factor 1, beta_fast 32,
     * beta_slow 1), which it reads from the file for mistral3 only, with
     * its log multiplier (below); Gemma's local layers would not scale: not
     * done */
    m->yarn_ext = 1.0f;
    m->yarn_beta_fast = 32.0f;
    m->yarn_beta_slow = 1.0f;
    float log_mul = 0.0f;
    const bool mis3 = m->arch == ENG_ARCH_MISTRAL3;
    if (mis3 &&
        ((r = get_f32_arch(f, arch, "rope.scaling.yarn_beta_fast", 32.0f, &m->yarn_beta_fast,
                           err)) < 0 ||
         (r = get_f32_arch(f, arch, "rope.scaling.yarn_beta_slow", 1.0f, &m->yarn_beta_slow,
                           err)) < 0 ||
         (r = get_f32_arch(f, arch, "rope.scaling.yarn_log_multiplier", 0.0f, &log_mul, err)) < 0 ||
         (r = get_f32_arch(f, arch, "attention.temperature_scale", 0.0f, &m->attn_temp_scale,
                           err)) < 0))
        return r;
    if (!(m->yarn_beta_fast > 0.0f && m->yarn_beta_fast < 1e4f && m->yarn_beta_slow > 0.0f &&
          m->yarn_beta_slow < 1e4f && fabsf(log_mul) < 100.0f &&
          fabsf(m->attn_temp_scale) < 100.0f))
        return eng__set_err(err, -EINVAL, "yarn_beta_fast %g, yarn_beta_slow %g, "
                            "yarn_log_multiplier %g or attention.temperature_scale %g out of range",
                            m->yarn_beta_fast, m->yarn_beta_slow, log_mul, m->attn_temp_scale);
    if (m->rope_yarn && gemma)
        return eng__set_err(err, -ENOTSUP, "YaRN on %s (local layers unscaled) is not supported", arch);
    /* rope.scaling.attn_factor multiplies RoPE's cos and sin, of q and of
     * k (llama.cpp's mscale; Phi-3's LongRoPE sets it), so the scores'
     * rotated part by its square: all of a score where every dimension
     * rotates (attn_scale), else (Phi-4-mini: 96 of 128) q's rotated
     * dimensions, through its weights at load (q_rot_scale) */
    float mscale;
    uint32_t orig;
    if ((r = get_f32_arch(f, arch, "rope.scaling.attn_factor", 1.0f, &mscale, err)) < 0 ||
        (r = get_u32_arch(f, arch, "rope.scaling.original_context_length", false,
                          n_ctx ? n_ctx : 2048, &orig, err)) < 0)
        return r;
    /* mistral3's temperature on q grows every original context of
     * positions (llama.cpp's floor scale, which must not be 0) */
    if (m->attn_temp_scale != 0.0f && orig == 0)
        return eng__set_err(err, -EINVAL, "attention.temperature_scale needs a "
                            "rope.scaling.original_context_length");
    m->attn_temp_floor = orig > (1u << 30) ? 1 << 30 : (int)orig;
    if (orig == 0 && m->rope_yarn) /* llama.cpp: the training context */
        orig = n_ctx ? n_ctx : 2048;
    if (!(mscale > 0.0f && mscale <= 16.0f))
        return eng__set_err(err, -EINVAL, "rope.scaling.attn_factor %g out of range", mscale);
    /* YaRN raises cos and sin by 1 + 0.1 ln(factor) where it ramps, or with
     * a log multiplier k (mistral3) by that over 1 + 0.1 k ln(factor), as
     * llama.cpp's yarn_attn_factor (1 for a factor of at most 1) */
    if (m->rope_yarn && m->yarn_ext != 0.0f && m->rope_linear > 1.0f) {
        const float lf = logf(m->rope_linear);
        mscale *= (1.0f + 0.1f * lf) / (log_mul != 0.0f ? 1.0f + 0.1f * log_mul * lf : 1.0f);
    }
    m->q_rot_scale = 1.0f;
    if (n_rot != head_dim) {
        m->q_rot_scale = mscale * mscale;
        mscale = 1.0f;
    }
    m->n_ctx_orig = orig > (1u << 24) ? 1 << 24 : (int)orig;
    /* Phi-3's sliding window over every layer (a bound on the context),
     * and local layers: Gemma 2's every other layer, Gemma 3's five of
     * six, OLMo 3's three of four (where its file has a window), EXAONE
     * 4's three of four in the 32B model (64 layers) only, LFM2's every
     * attention layer (where its file has a window), as llama.cpp (other
     * families' GGUFs may carry a window it does not use either) */
    const bool ex4_swa = ex4 && n_layer == 64, lfm2 = m->arch == ENG_ARCH_LFM2;
    uint32_t n_swa = 0;
    if ((m->arch == ENG_ARCH_PHI3 || g23 || olmo || ex4_swa || lfm2 || oss) &&
        (r = get_u32_arch(f, arch, "attention.sliding_window", g4 || oss,
                          m->arch == ENG_ARCH_GEMMA2 || ex4_swa ? 4096 : 0, &n_swa, err)) < 0)
        return r;
    m->n_swa = n_swa > (1u << 24) ? 1 << 24 : (int)n_swa; /* beyond any context: no cut */
    if ((m->n_swa > 0 || g4) && m->arch != ENG_ARCH_PHI3 &&
        (r = load_swa_layers(f, arch, m,
                             m->arch == ENG_ARCH_GEMMA2 || oss ? 2 : g23 ? 6 : lfm2 ? 0 : 4,
                             err)) < 0)
        return r;
    /* Gemma's local layers' RoPE base, as llama.cpp sets it or as the
     * file says (OLMo 3's and EXAONE 4's layers all take rope.freq_base) */
    m->rope_base_swa = m->arch == ENG_ARCH_GEMMA3 || g4 ? 10000.0f : m->rope_freq_base;
    if ((g23 || oss) && (r = get_f32_arch(f, arch, "rope.freq_base_swa", m->rope_base_swa,
                                          &m->rope_base_swa, err)) < 0)
        return r;
    if (!(m->rope_base_swa > 0.0f))
        return eng__set_err(err, -EINVAL, "rope.freq_base_swa %g is not positive",
                            m->rope_base_swa);
    /* Gemma: scores scaled by 1/sqrt(head_dim), but the 27B models'
     * (Gemma 2: 46 layers, Gemma 3: 62) by 1/sqrt(n_embd / n_head), as
     * Google's reference and llama.cpp */
    m->attn_scale = mscale * mscale / sqrtf((float)head_dim);
    if ((m->arch == ENG_ARCH_GEMMA2 && n_layer == 46) || (m->arch == ENG_ARCH_GEMMA3 && n_layer == 62))
        m->attn_scale = mscale * mscale / sqrtf((float)(n_embd / n_head));
    if (g4) /* (q and k normalised: Gemma 4's scores are not scaled) */
        m->attn_scale = mscale * mscale;
    m->embd_scale = gemma ? sqrtf((float)n_embd) : 0.0f;
    m->nope_step = m->arch == ENG_ARCH_SMOLLM3 ? 4 : 0; /* as llama.cpp, not from the file */
    if (m->one_block) {
        /* nemotron_h: no layer rotates; scores times attention.scale where
         * the file has one (not 0), as llama.cpp */
        float sc;
        m->nope_step = 1;
        if ((r = get_f32_arch(f, arch, "attention.scale", 0.0f, &sc, err)) < 0)
            return r;
        if (!(sc >= 0.0f && sc <= 1e6f))
            return eng__set_err(err, -EINVAL, "metadata '%s.attention.scale' = %g is out of range",
                                arch, sc);
        if (sc > 0.0f)
            m->attn_scale = sc;
    }
    if ((m->arch == ENG_ARCH_GRANITE || m->arch == ENG_ARCH_MINICPM) &&
        (r = branch_scales(f, arch, m, mscale, err)) < 0)
        return r;
    /* soft-capping: Gemma 2's (50 for scores, 30 for logits when its file
     * names none, as llama.cpp), Gemma 3 derivatives' logits (Rnj-1);
     * refused elsewhere rather than ignored */
    const char *caps[] = { "attn_logit_softcapping", "final_logit_softcapping" };
    float *capv[] = { &m->attn_softcap, &m->final_softcap };
    const bool g2 = m->arch == ENG_ARCH_GEMMA2;
    for (int i = 0; i < 2; i++) {
        const float def = g2 ? (i ? 30.0f : 50.0f) : g4 && i ? 30.0f : 0.0f;
        if ((r = get_f32_arch(f, arch, caps[i], def, capv[i], err)) < 0)
            return r;
        if (*capv[i] < 0.0f)
            return eng__set_err(err, -EINVAL, "%s.%s = %g is negative", arch, caps[i], *capv[i]);
        if (*capv[i] != 0.0f && !g2 &&
            !(i == 1 && (m->arch == ENG_ARCH_GEMMA3 || g4)))
            return eng__set_err(err, -ENOTSUP, "%s.%s = %g (soft-capping) is not supported here",
                                arch, caps[i], *capv[i]);
    }
    if (g4 && (r = load_gemma4(f, arch, m, n_layer, err)) < 0)
        return r;
    return !strcmp(arch, "gemma3n") ? load_gemma3n(f, arch, m, n_layer, err) : 0;
}

/* ---- load ---- */

/* The table load_vec just read (ld->row): RoPE divisors, finite and
 * positive, or a 0 would make every angle NaN. */
static int check_divisors(loader *ld, const char *name, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (!(isfinite(ld->row[i]) && ld->row[i] > 0.0f))
            return eng__set_err(ld->err, -EINVAL, "%s[%llu] = %g is not a positive divisor", name,
                                (unsigned long long)i, ld->row[i]);
    return 0;
}

/* YaRN's ramp for frequency i of n_rot / 2 (ggml's rope_yarn_corr_dims
 * and rope_yarn_ramp): 1 extrapolates (the highest frequencies), 0
 * interpolates, over the dimensions whose wavelengths fit beta_fast to
 * beta_slow times in the original context. */
static float yarn_ramp(const eng_model *m, int i)
{
    const float n = (float)m->n_rot, base = m->rope_freq_base, orig = (float)m->n_ctx_orig;
    const float lo = floorf(n * logf(orig / (m->yarn_beta_fast * 2.0f * (float)M_PI)) / (2.0f * logf(base)));
    const float hi = ceilf(n * logf(orig / (m->yarn_beta_slow * 2.0f * (float)M_PI)) / (2.0f * logf(base)));
    const float a = lo > 0.0f ? lo : 0.0f, b = hi < n - 1.0f ? hi : n - 1.0f;
    float y = ((float)i - a) / (b - a > 0.001f ? b - a : 0.001f);
    y = y < 0.0f ? 0.0f : y > 1.0f ? 1.0f : y;
    return 1.0f - y;
}

/* RoPE scaling as divisors: rope_freqs (1 without them) times the linear
 * factor, or YaRN's mix of 1 and the factor, for the layers that scale
 * (Gemma 3: the global ones). */
static int load_rope_scaled(loader *ld)
{
    eng_model *m = ld->m;
    const uint64_t n = (uint64_t)m->n_rot / 2;
    const gguf_tensor *t;
    int r = get_tensor(ld, "rope_freqs.weight", 1, n, 1, false, &t);
    if (r < 0 || (r = ensure_row(ld, n)) < 0)
        return r;
    if (t && (r = dequant_row(ld, t, 0, ld->row)) < 0)
        return r;
    for (uint64_t i = 0; i < n; i++) {
        /* YaRN: theta = theta_extrap (fs (1 - mix) + mix), fs = 1 / factor */
        const float mix = m->rope_yarn ? yarn_ramp(m, (int)i) * m->yarn_ext : 0.0f;
        const float d = m->rope_yarn ? 1.0f / ((1.0f - mix) / m->rope_linear + mix) : m->rope_linear;
        ld->row[i] = (t ? ld->row[i] : 1.0f) * d;
    }
    if (!(m->rope_freqs_scaled = weight_alloc(m, n * sizeof(float))))
        return oom_err(ld, n * sizeof(float), "rope scaling");
    m->be->iface->upload(m->be, m->rope_freqs_scaled, ld->row, n * sizeof(float));
    return 0;
}

/* lfm2's convolution block (see eng_layer.conv): in_proj [3 n_embd][n_embd]
 * as its three parts, out_proj, the taps [n_embd][conv_len] in f32. */
static int load_conv_block(loader *ld, int il, eng_layer *L)
{
    eng_model *m = ld->m;
    const uint64_t E = (uint64_t)m->info.n_embd, K = (uint64_t)m->conv_len;
    char name[96];
    int r;
    if (!m->be->iface->shortconv)
        return eng__set_err(ld->err, -ENOTSUP, "the %s backend has no short convolution (lfm2)",
                            m->be->iface->name);
    snprintf(name, sizeof(name), "blk.%d.shortconv.in_proj.weight", il);
    if ((r = load_mat_part(ld, name, E, 3 * E, 0, E, true, &L->wq)) < 0 ||
        (r = load_mat_part(ld, name, E, 3 * E, E, E, true, &L->wk)) < 0 ||
        (r = load_mat_part(ld, name, E, 3 * E, 2 * E, E, true, &L->wv)) < 0)
        return r;
    snprintf(name, sizeof(name), "blk.%d.shortconv.out_proj.weight", il);
    if ((r = load_mat(ld, name, E, E, true, &L->wo)) < 0)
        return r;
    const gguf_tensor *t;
    snprintf(name, sizeof(name), "blk.%d.shortconv.conv.weight", il);
    if ((r = get_tensor(ld, name, 2, K, E, true, &t)) < 0)
        return r;
    float *taps = malloc(E * K * sizeof(float));
    if (!taps || !(L->conv = weight_alloc(m, E * K * sizeof(float)))) {
        free(taps);
        return oom_err(ld, E * K * sizeof(float), name);
    }
    for (uint64_t i = 0; i < E && r >= 0; i++)
        r = dequant_row(ld, t, i, taps + i * K);
    if (r >= 0)
        m->be->iface->upload(m->be, L->conv, taps, E * K * sizeof(float));
    free(taps);
    if (r < 0)
        return r;
    m->info.bytes_weights += E * K * sizeof(float);
    L->window = m->conv_len; /* the positions a token reads (its ring keeps them) */
    L->conv_ch = (int)E;
    return 0;
}

/* Two [rows][cols] tensors one above the other as one matrix in f32
 * (qwen35's beta and alpha: a few rows, decode's one fused projection
 * with the others). */
static int load_mat_pair_f32(loader *ld, const char *name0, const char *name1, uint64_t cols,
                             uint64_t rows, eng_weight *w)
{
    const gguf_tensor *t[2];
    int r;
    if ((r = get_tensor(ld, name0, 2, cols, rows, true, &t[0])) < 0 ||
        (r = get_tensor(ld, name1, 2, cols, rows, true, &t[1])) < 0)
        return r;
    const size_t part = (size_t)(rows * cols) * sizeof(float);
    uint8_t *data = weight_alloc(ld->m, 2 * part);
    if (!data)
        return oom_err(ld, 2 * part, name0);
    for (int k = 0; k < 2; k++) {
        conv_job j = { .t = t[k], .dt = ENG_DTYPE_F32, .data = data + k * part, .r0 = 0,
                       .r1 = rows, .cols = cols };
        if ((r = push_job(ld, &j)) < 0)
            return r;
    }
    *w = (eng_weight){ .dtype = ENG_DTYPE_F32, .rows = (int)(2 * rows), .cols = (int)cols,
                       .data = data };
    ld->m->info.bytes_weights += 2 * part;
    return 0;
}

/* granitehybrid's Mamba-2 mixer (see eng_layer.ssm): ssm_in [z; xBC;
 * dt][n_embd] as its three parts, ssm_out, and the f32 rest; qwen35's
 * gated delta net: attn_gate (z), attn_qkv, ssm_beta and ssm_alpha (in f32
 * one above the other), ssm_out and its f32 rest. */
static int load_ssm_block(loader *ld, int il, eng_layer *L)
{
    eng_model *m = ld->m;
    eng_ssm *w = &L->ssm;
    *w = m->ssm_shape;
    w->eps = m->rms_eps;
    const uint64_t E = (uint64_t)m->info.n_embd, D = (uint64_t)w->d_inner;
    const uint64_t NC = (uint64_t)eng_ssm_conv_ch(w), NH = (uint64_t)w->n_head;
    const uint64_t K = (uint64_t)w->d_conv, G = (uint64_t)w->n_group, all = D + NC + NH;
    /* its matrices: the layer's own (a mixer in place of attention), or
     * (falcon-h1, beside attention) the four of eng_layer.sz.., whose
     * output may have no norm */
    const bool beside = m->ssm_beside;
    eng_weight *wz = beside ? &L->sz : &L->wq, *wxbc = beside ? &L->sxbc : &L->wk;
    eng_weight *wdt = beside ? &L->sdt : &L->wv, *wout = beside ? &L->sout : &L->wo;
    char name[96], name1[96];
    int r;
    if (!m->be->iface->ssm)
        return eng__set_err(ld->err, -ENOTSUP, "the %s backend has no %s (%s)",
                            m->be->iface->name, w->delta ? "gated delta net" : "Mamba-2 mixer",
                            m->info.arch);
#define NAME(suffix) (snprintf(name, sizeof(name), "blk.%d." suffix, il), name)
    if (w->delta) {
        snprintf(name1, sizeof(name1), "blk.%d.ssm_alpha.weight", il);
        if ((r = load_mat(ld, NAME("attn_gate.weight"), E, D, true, &L->wq)) < 0 ||
            (r = load_mat(ld, NAME("attn_qkv.weight"), E, NC, true, &L->wk)) < 0 ||
            (r = load_mat_pair_f32(ld, NAME("ssm_beta.weight"), name1, E, NH, &L->wv)) < 0 ||
            (r = load_mat(ld, NAME("ssm_out.weight"), D, E, true, &L->wo)) < 0 ||
            (r = load_flat(ld, NAME("ssm_conv1d.weight"), K, NC, true, &w->conv)) < 0 ||
            (r = load_flat(ld, NAME("ssm_dt.bias"), NH, 1, true, &w->dt_b)) < 0 ||
            (r = load_flat(ld, NAME("ssm_a"), NH, 1, true, &w->a)) < 0 ||
            (r = load_flat(ld, NAME("ssm_norm.weight"), D / NH, 1, true, &w->norm)) < 0)
            return r;
    } else if ((r = load_mat_part(ld, NAME("ssm_in.weight"), E, all, 0, D, true, wz)) < 0 ||
        (r = load_mat_part(ld, NAME("ssm_in.weight"), E, all, D, NC, true, wxbc)) < 0 ||
        (r = load_mat_part(ld, NAME("ssm_in.weight"), E, all, D + NC, NH, true, wdt)) < 0 ||
        (r = load_mat(ld, NAME("ssm_out.weight"), D, E, true, wout)) < 0 ||
        (r = load_flat(ld, NAME("ssm_conv1d.weight"), K, NC, true, &w->conv)) < 0 ||
        (r = load_flat(ld, NAME("ssm_conv1d.bias"), NC, 1, false, &w->conv_b)) < 0 ||
        (r = load_flat(ld, NAME("ssm_dt.bias"), NH, 1, true, &w->dt_b)) < 0 ||
        (r = load_flat(ld, NAME("ssm_a"), 1, NH, true, &w->a)) < 0 ||
        (r = load_flat(ld, NAME("ssm_d"), 1, NH, true, &w->d)) < 0 ||
        (r = load_flat(ld, NAME("ssm_norm.weight"), D / G, G, !beside, &w->norm)) < 0)
        return r;
#undef NAME
    m->info.bytes_weights += K * NC * sizeof(float); /* (the taps: counted as lfm2's are) */
    if (beside) /* (attention's window and cache rows stay attention's) */
        return 0;
    L->window = w->d_conv; /* the positions a token's convolution reads */
    L->conv_ch = (int)NC;
    return 0;
}

/* gemma4's per-layer embeddings: the projection and its norm converted,
 * the token table left in the file (eng_model.ple_tok) after a check that
 * its rows convert. */
static int load_ple(loader *ld)
{
    eng_model *m = ld->m;
    const uint64_t P = (uint64_t)m->n_embd_per_layer, LP = P * (uint64_t)m->info.n_layer;
    const gguf_tensor *t;
    int r;
    if ((r = load_mat(ld, "per_layer_model_proj.weight", (uint64_t)m->info.n_embd, LP, true,
                      &m->ple_model_proj)) < 0 ||
        (r = load_vec(ld, "per_layer_proj_norm.weight", P, true, &m->ple_proj_norm)) < 0 ||
        (r = get_tensor(ld, "per_layer_token_embd.weight", 2, LP, (uint64_t)m->info.n_vocab, true,
                        &t)) < 0 ||
        (r = ensure_row(ld, LP)) < 0 || (r = dequant_row(ld, t, 0, ld->row)) < 0)
        return r;
    const uint8_t *base = gguf_file_data(ld->f);
    m->ple_tok.offset = (uint64_t)((const uint8_t *)t->data - base);
    m->ple_tok.type = t->type;
    m->ple_tok.row_bytes = ggml_row_bytes(t->type, LP);
    if ((m->ple_tok.fd = open(m->path, O_RDONLY | O_CLOEXEC)) < 0)
        return eng__set_err(ld->err, -errno, "%s: %s", m->path, strerror(errno));
    m->ple_tok.open = true;
    /* (the file opened again: the one being loaded, not one put in its
     * place since) */
    struct stat st;
    if (fstat(m->ple_tok.fd, &st) < 0 || (uint64_t)st.st_size != gguf_file_size(ld->f))
        return eng__set_err(ld->err, -EMEDIUMTYPE, "%s changed while loading", m->path);
    return 0;
}

/* gemma3n's Laurel branch (of the file's rank) and AltUp's router and
 * coefficients in layer il */
static int load_gemma3n_layer(loader *ld, int il, eng_layer *L)
{
    eng_model *m = ld->m;
    const uint64_t E = (uint64_t)m->info.n_embd, NA = (uint64_t)m->n_altup;
    char name[96];
    int r;
    snprintf(name, sizeof(name), "blk.%d.laurel_l.weight", il);
    const gguf_tensor *t = gguf_find_tensor(ld->f, name);
    const uint64_t rank = t && t->n_dims == 2 ? t->ne[1] : 0;
    if (t && (rank == 0 || rank > E))
        return eng__set_err(ld->err, -EINVAL, "tensor '%s' has a rank out of range 1..%llu", name,
                            (unsigned long long)E);
    if ((r = load_mat(ld, name, E, rank, true, &L->laurel_l)) < 0)
        return r;
    snprintf(name, sizeof(name), "blk.%d.laurel_r.weight", il);
    if ((r = load_mat(ld, name, rank, E, true, &L->laurel_r)) < 0)
        return r;
    if ((int)rank > m->laurel_rank)
        m->laurel_rank = (int)rank;
    snprintf(name, sizeof(name), "blk.%d.altup_router.weight", il);
    if ((r = load_mat_as(ld, name, E, NA, 0, 0, 0, NA, true, true, &L->altup_router)) < 0)
        return r;
    snprintf(name, sizeof(name), "blk.%d.altup_predict_coef.weight", il);
    if ((r = load_flat(ld, name, NA, NA * NA, true, &L->altup_pred)) < 0)
        return r;
    snprintf(name, sizeof(name), "blk.%d.altup_correct_coef.weight", il);
    if ((r = load_flat(ld, name, NA, NA, true, &L->altup_corr)) < 0)
        return r;
    const char *vec[3] = { "laurel_post_norm", "altup_router_norm", "altup_correct_scale" };
    float **dst[3] = { &L->laurel_norm, &L->altup_router_norm, &L->altup_scale };
    for (int k = 0; k < 3; k++) {
        snprintf(name, sizeof(name), "blk.%d.%s.weight", il, vec[k]);
        if ((r = load_vec(ld, name, E, true, dst[k])) < 0)
            return r;
    }
    return 0;
}

/* gemma4's own tensors in layer il: its output scale, its per-layer
 * embedding block (gemma3n: with its own above). */
static int load_gemma4_layer(loader *ld, int il, eng_layer *L)
{
    eng_model *m = ld->m;
    const uint64_t E = (uint64_t)m->info.n_embd, P = (uint64_t)m->n_embd_per_layer;
    char name[96];
    float *scale = NULL;
    int r;
    snprintf(name, sizeof(name), "blk.%d.layer_output_scale.weight", il);
    if ((r = load_vec(ld, name, 1, false, &scale)) < 0)
        return r;
    if (scale && !isfinite(ld->row[0]))
        return eng__set_err(ld->err, -EINVAL, "tensor '%s' is not finite", name);
    L->out_scaled = scale != NULL; /* (its value is the row load_vec just read) */
    L->out_scale = scale ? ld->row[0] : 1.0f;
    if (m->n_altup && (r = load_gemma3n_layer(ld, il, L)) < 0)
        return r;
    if (!P)
        return 0;
    snprintf(name, sizeof(name), "blk.%d.inp_gate.weight", il);
    if ((r = load_mat(ld, name, E, P, true, &L->ple_gate)) < 0)
        return r;
    snprintf(name, sizeof(name), "blk.%d.proj.weight", il);
    if ((r = load_mat(ld, name, P, E, true, &L->ple_proj)) < 0)
        return r;
    snprintf(name, sizeof(name), "blk.%d.post_norm.weight", il);
    return load_vec(ld, name, E, true, &L->ple_norm);
}

static int load_weights(loader *ld, const eng_plan *plan)
{
    eng_model *m = ld->m;
    const gguf_file *f = ld->f;
    const int E = m->info.n_embd, H = m->info.n_head, V = m->info.n_vocab;
    const bool g4 = m->arch == ENG_ARCH_GEMMA4, oss = m->arch == ENG_ARCH_GPT_OSS;
    int r;

    /* nemotron_h: its MLPs' un-gated slots (ENG_ACT_RELU_SQR) are the
     * CPU's alone, as the mixers are: refused up front, whatever its
     * layers hold */
    if (m->one_block && !m->be->iface->host_memory)
        return eng__set_err(ld->err, -ENOTSUP, "the %s backend cannot run %s (no Mamba-2 mixer, "
                            "no squared-ReLU FFN; the cpu backend can)", m->be->iface->name,
                            m->info.arch);
    if ((r = load_mat(ld, "token_embd.weight", E, V, true, &m->tok_embd)) < 0)
        return r;
    /* (lfm2's final norm has the name llama.cpp gives it) */
    const char *out_norm =
        m->arch == ENG_ARCH_LFM2 ? "token_embd_norm.weight" : "output_norm.weight";
    if ((r = load_vec(ld, out_norm, E, true, &m->output_norm)) < 0)
        return r;
    if ((r = load_mat(ld, "output.weight", E, V, false, &m->output)) < 0)
        return r;
    if (gguf_find_tensor(f, "output.bias")) /* (qwen2vl may carry one: none seen) */
        return eng__set_err(ld->err, -ENOTSUP, "tensor 'output.bias' (a bias) is not supported");
    if (!m->output.data)
        m->output = m->tok_embd; /* tied embeddings */
    if ((r = load_vec(ld, "rope_freqs.weight", m->n_rot / 2, false, &m->rope_freqs)) < 0 ||
        (m->rope_freqs && (r = check_divisors(ld, "rope_freqs.weight", m->n_rot / 2)) < 0))
        return r;
    /* LongRoPE (phi3 only, as in llama.cpp): both tables, on their own
     * (no rope_freqs, no scaling factor) */
    if ((r = load_vec(ld, "rope_factors_long.weight", m->n_rot / 2, false, &m->rope_long)) < 0 ||
        (m->rope_long && (r = check_divisors(ld, "rope_factors_long.weight", m->n_rot / 2)) < 0) ||
        (r = load_vec(ld, "rope_factors_short.weight", m->n_rot / 2, false, &m->rope_short)) < 0 ||
        (m->rope_short && (r = check_divisors(ld, "rope_factors_short.weight", m->n_rot / 2)) < 0))
        return r;
    if ((m->rope_long || m->rope_short) &&
        (m->arch != ENG_ARCH_PHI3 || !m->rope_long || !m->rope_short || m->rope_freqs || m->rope_linear != 1.0f))
        return eng__set_err(ld->err, -ENOTSUP, "LongRoPE (rope_factors_long/_short) needs both tables, a phi3 "
                            "model, and neither rope_freqs nor a scaling factor");
    if (m->rope_linear != 1.0f && (r = load_rope_scaled(ld)) < 0)
        return r;
    if (m->n_embd_per_layer && (r = load_ple(ld)) < 0)
        return r;
    /* gemma3n: AltUp's projections of the embedding and to the output */
    const uint64_t alt_rows = (uint64_t)(m->n_altup - 1) * E;
    if (m->n_altup && ((r = load_mat(ld, "altup_proj.weight", E, alt_rows, true,
                                     &m->altup_proj)) < 0 ||
                       (r = load_mat(ld, "altup_unembd_proj.weight", E, alt_rows, true,
                                     &m->altup_unembd)) < 0))
        return r;

    m->layers = calloc(m->info.n_layer, sizeof(*m->layers));
    if (!m->layers)
        return eng__set_err(ld->err, -ENOMEM, "out of memory");
    for (int il = 0; il < m->info.n_layer; il++) {
        eng_layer *L = &m->layers[il];
        char name[96];
#define NAME(suffix) (snprintf(name, sizeof(name), "blk.%d." suffix, il), name)
        /* this layer's heads (gemma4's local ones narrower, its KV heads
         * per layer), and whether it has keys and values of its own
         * (gemma4's last layers attend over an earlier layer's cache) */
        const bool local = m->swa_local && m->swa_local[il];
        const int hd = g4 && local ? m->head_dim_swa : m->info.head_dim;
        const int Hkv = m->kv_heads ? m->kv_heads[il] : m->info.n_head_kv;
        const bool own_kv = !g4 || il < m->n_kv_from;
        L->head_dim = hd;
        L->n_head_kv = Hkv;
        L->n_rot = g4 && local ? m->n_rot_swa : m->n_rot;
        L->kv_src = own_kv ? il : m->n_kv_from - (local ? 2 : 1);
        L->v_norm = g4;
        /* olmo2 and exaone4 normalise after each block, not before */
        const bool post_only = m->arch == ENG_ARCH_OLMO2 || m->arch == ENG_ARCH_EXAONE4;
        /* (qwen35's and gpt-oss's FFN norm under the name llama.cpp gives
         * it; falcon-h1's as its converter writes it, without ".weight") */
        const bool bare_norm = m->ssm_beside && gguf_find_tensor(f, NAME("ffn_norm"));
        /* nemotron_h: one norm a layer (attn_norm), an MLP's its FFN's */
        if (m->one_block &&
            (r = load_vec(ld, NAME("attn_norm.weight"), E, true, &L->attn_norm)) < 0)
            return r;
        if (!post_only && !m->one_block &&
            ((r = load_vec(ld, NAME("attn_norm.weight"), E, true, &L->attn_norm)) < 0 ||
             (r = load_vec(ld, m->attn_gate || oss ? NAME("post_attention_norm.weight")
                               : bare_norm         ? NAME("ffn_norm")
                                                   : NAME("ffn_norm.weight"),
                           E, true, &L->ffn_norm)) < 0))
            return r;
        /* biases no family here has (gpt-oss all but a dense FFN's):
         * refused rather than left out */
        static const char *const no_bias[] = { "attn_output",   "ffn_gate",     "ffn_up",
                                               "ffn_down",      "ffn_gate_inp", "ffn_gate_exps",
                                               "ffn_up_exps",   "ffn_down_exps", "exp_probs_b" };
        for (size_t i = 0; i < sizeof(no_bias) / sizeof(no_bias[0]); i++) {
            /* (LFM2-MoE's and ERNIE 4.5's bias to pick experts by: load_router) */
            if ((m->moe_bias && !strcmp(no_bias[i], "exp_probs_b")) ||
                (oss && (!strcmp(no_bias[i], "attn_output") || strstr(no_bias[i], "_exps") ||
                         !strcmp(no_bias[i], "ffn_gate_inp"))))
                continue;
            snprintf(name, sizeof(name), "blk.%d.%s.bias", il, no_bias[i]);
            if (gguf_find_tensor(f, name))
                return eng__set_err(ld->err, -ENOTSUP, "tensor '%s' (a bias) is not supported",
                                    name);
        }
        const bool conv = m->conv_layer && m->conv_layer[il];
        if (m->mlp_layer && m->mlp_layer[il]) {
            L->mlp_only = true;
            L->ffn_norm = L->attn_norm;
            L->attn_norm = NULL;
            if ((r = load_ffn(ld, il, L, plan)) < 0)
                return r;
            if (m->progress)
                m->progress(m->progress_data, il + 1, m->info.n_layer);
            continue;
        }
        if (conv || (m->ssm_layer && m->ssm_layer[il])) {
            if ((r = conv ? load_conv_block(ld, il, L) : load_ssm_block(ld, il, L)) < 0 ||
                (r = load_ffn(ld, il, L, plan)) < 0)
                return r;
            if (m->progress)
                m->progress(m->progress_data, il + 1, m->info.n_layer);
            continue;
        }
        const uint64_t qd = (uint64_t)H * hd, hd64 = (uint64_t)hd;
        if (m->arch == ENG_ARCH_PHI3) {
            /* one [q; k; v] tensor, split into the three matrices */
            const uint64_t q = (uint64_t)H * hd, kv = (uint64_t)Hkv * hd;
            if ((r = load_mat_part(ld, NAME("attn_qkv.weight"), E, q + 2 * kv, 0, q, true, &L->wq)) < 0 ||
                (r = load_mat_part(ld, NAME("attn_qkv.weight"), E, q + 2 * kv, q, kv, true, &L->wk)) < 0 ||
                (r = load_mat_part(ld, NAME("attn_qkv.weight"), E, q + 2 * kv, q + kv, kv, true, &L->wv)) < 0 ||
                (r = load_mat(ld, NAME("attn_output.weight"), q, E, true, &L->wo)) < 0)
                return r;
        } else if (g4 && (!m->be->iface->gelu_mul || !m->be->iface->host_memory)) {
            /* (its per-layer inputs and v's norm are host memory) */
            return eng__set_err(ld->err, -ENOTSUP, "the %s backend cannot run %s layers "
                                "(the cpu backend can)", m->be->iface->name, m->info.arch);
        } else if (m->attn_gate && !m->be->iface->mul_sigmoid) {
            return eng__set_err(ld->err, -ENOTSUP, "the %s backend has no gated attention "
                                "(qwen35)", m->be->iface->name);
        } else if (m->attn_gate &&
                   /* qwen35: each head's q rows, then its gate's */
                   ((r = load_mat_as(ld, NAME("attn_q.weight"), E, 2 * qd, 0, hd, 2 * hd64, qd,
                                     true, false, &L->wq)) < 0 ||
                    (r = load_mat_as(ld, NAME("attn_q.weight"), E, 2 * qd, hd, hd, 2 * hd64, qd,
                                     true, false, &L->wg)) < 0)) {
            return r;
        } else if ((!m->attn_gate &&
                    (r = load_mat(ld, NAME("attn_q.weight"), E, qd, true, &L->wq)) < 0) ||
                   (own_kv && (r = load_mat(ld, NAME("attn_k.weight"), E, (uint64_t)Hkv * hd,
                                            true, &L->wk)) < 0) ||
                   (own_kv && (r = load_mat(ld, NAME("attn_v.weight"), E, (uint64_t)Hkv * hd,
                                            !g4, &L->wv)) < 0) ||
                   (r = load_mat(ld, NAME("attn_output.weight"), (uint64_t)H * hd, E, true, &L->wo)) < 0) {
            return r;
        }
        /* gemma4 without attn_v (31B's global layers): the values are the
         * keys' projection, normalised without a weight and not rotated */
        if (own_kv && !L->wv.data)
            L->wv = L->wk;
        /* partial rotation under an attn_factor: q's rotated dimensions
         * scaled by its square, in q's norm where it has one (the norm
         * would undo a scaled row), else in W_q's rows and q's bias */
        const bool qk_norm = m->arch == ENG_ARCH_QWEN3 || m->arch == ENG_ARCH_GEMMA3 ||
                             m->arch == ENG_ARCH_EXAONE4 || m->arch == ENG_ARCH_HUNYUAN ||
                             m->arch == ENG_ARCH_LFM2 || g4;
        const float qs = m->q_rot_scale;
        const uint32_t rot_p = qs != 1.0f ? (uint32_t)hd : 0, rot_n = (uint32_t)L->n_rot;
        if (qs != 1.0f && !qk_norm)
            scale_rot_rows(ld, L->wq.data);
        bool need_bias = m->arch == ENG_ARCH_QWEN2 || oss;
        if ((r = load_vec_rot(ld, NAME("attn_q.bias"), (uint64_t)H * hd, need_bias, qk_norm ? 0 : rot_p,
                              rot_n, qs, &L->bq)) < 0 ||
            (r = load_vec(ld, NAME("attn_k.bias"), (uint64_t)Hkv * hd, need_bias, &L->bk)) < 0 ||
            (r = load_vec(ld, NAME("attn_v.bias"), (uint64_t)Hkv * hd, need_bias, &L->bv)) < 0 ||
            /* gpt-oss: the output's bias, each head's sink */
            (oss && (r = load_vec(ld, NAME("attn_output.bias"), E, true, &L->bo)) < 0) ||
            (oss && (r = load_vec(ld, NAME("attn_sinks.weight"), (uint64_t)H, true,
                                  &L->sinks)) < 0))
            return r;
        const bool g23 = m->arch == ENG_ARCH_GEMMA2 || m->arch == ENG_ARCH_GEMMA3 || g4;
        /* olmo2: one norm over all of q, one over all of k */
        if (m->qk_norm_full &&
            ((r = load_vec(ld, NAME("attn_q_norm.weight"), (uint64_t)H * hd, true,
                           &L->q_norm)) < 0 ||
             (r = load_vec(ld, NAME("attn_k_norm.weight"), (uint64_t)Hkv * hd, true,
                           &L->k_norm)) < 0))
            return r;
        if (qk_norm &&
            ((r = load_vec_rot(ld, NAME("attn_q_norm.weight"), (uint64_t)hd, true, rot_p, rot_n, qs,
                               &L->q_norm)) < 0 ||
             (own_kv &&
              (r = load_vec(ld, NAME("attn_k_norm.weight"), (uint64_t)hd, true, &L->k_norm)) < 0)))
            return r;
        if ((g23 || post_only || m->arch == ENG_ARCH_GLM4) &&
            ((r = load_vec(ld, NAME("post_attention_norm.weight"), E, true, &L->attn_post_norm)) < 0 ||
             (r = load_vec(ld, NAME("post_ffw_norm.weight"), E, true, &L->ffn_post_norm)) < 0))
            return r;
        /* local layers (a window): Gemma 2's and 3's, whose RoPE base may
         * differ; Gemma 3's and OLMo 3's rotate unscaled (OLMo 3's without
         * YaRN's mscale too); EXAONE 4's global layers do not rotate */
        const bool unscaled = local && (m->arch == ENG_ARCH_GEMMA3 || m->arch == ENG_ARCH_OLMO2 ||
                                        g4);
        L->window = local ? m->n_swa : 0;
        L->nope = (m->nope_step > 0 && (il + 1) % m->nope_step == 0) ||
                  (m->arch == ENG_ARCH_EXAONE4 && m->swa_local && !local);
        L->rope_base = local ? m->rope_base_swa : m->rope_freq_base;
        L->attn_scale = local && m->arch == ENG_ARCH_OLMO2 ? 1.0f / sqrtf((float)hd)
                                                           : m->attn_scale;
        L->rope_freqs = unscaled ? NULL : m->rope_freqs_scaled ? m->rope_freqs_scaled
                                       : m->rope_short      ? m->rope_short /* sessions may take long */
                                                            : m->rope_freqs;
        if (g4 && (r = load_gemma4_layer(ld, il, L)) < 0)
            return r;
        if (m->ssm_beside && (r = load_ssm_block(ld, il, L)) < 0)
            return r;
#undef NAME
        if ((r = load_ffn(ld, il, L, plan)) < 0)
            return r;
        if (m->progress)
            m->progress(m->progress_data, il + 1, m->info.n_layer);
    }
    (void)f;
    return 0;
}

static uint64_t count_params(const gguf_file *f)
{
    uint64_t n = 0;
    for (size_t i = 0; i < gguf_n_tensors(f); i++) {
        const gguf_tensor *t = gguf_get_tensor(f, i);
        uint64_t p = 1;
        for (uint32_t d = 0; d < t->n_dims; d++)
            p *= t->ne[d];
        n += p;
    }
    return n;
}

/* a matrix's bytes in its storage type */
static size_t weight_bytes(const eng_weight *w)
{
    return eng_dtype_bytes(w->dtype, (size_t)w->rows * (size_t)w->cols);
}

/* The matrices of layer L outside its FFN, each read once a step (data
 * NULL: none), for the step's bytes and a plan's price */
enum { N_LAYER_MATS = 15 };
static void layer_mats(const eng_layer *L, const eng_weight *w[N_LAYER_MATS])
{
    const eng_weight *const all[N_LAYER_MATS] = {
        &L->wq, &L->wk, &L->wv, &L->wo, &L->moe.router, &L->wg, &L->ple_gate, &L->ple_proj,
        &L->laurel_l, &L->laurel_r, &L->altup_router, &L->sz, &L->sxbc, &L->sdt, &L->sout
    };
    memcpy(w, all, sizeof(all));
}

static uint64_t bytes_per_token(const eng_model *m)
{
    /* A decode step reads every matrix once; the embedding only one row;
     * of the experts the n_used it picks */
    uint64_t b = 0;
    for (int il = 0; il < m->info.n_layer; il++) {
        const eng_layer *L = &m->layers[il];
        const eng_weight *w[N_LAYER_MATS];
        layer_mats(L, w);
        for (int i = 0; i < N_LAYER_MATS; i++)
            b += weight_bytes(w[i]);
        const uint64_t slots = L->moe.router.data ? (uint64_t)L->moe.n_used * L->moe.n_ff_exp +
                                                        (uint64_t)L->moe.n_ff_shared +
                                                        (uint64_t)L->mlp.n_slots
                                                  : (uint64_t)L->ffn.n_slots;
        if (L->ffn.act == ENG_ACT_GELU_TOPK) {
            /* gemma3n's cut layers: every gate row, and the up and down
             * rows of the neurons that pass, as many as a normal
             * distribution of gate values puts above the cut (5 % at
             * 1.645: the statistics' premise; a step's count varies) */
            const double pass = 0.5 * erfc((double)L->ffn.cut / sqrt(2.0));
            const uint64_t live = (uint64_t)ceil((double)slots * pass);
            const size_t rb = eng_ffn_row_bytes(m->info.ffn_dtype, m->info.n_embd);
            b += slots * rb + (live < slots ? live : slots) *
                                  (rb + eng_ffn_down_bytes(m->info.ffn_dtype, m->info.n_embd));
            continue;
        }
        b += slots * neuron_bytes(m);
    }
    b += weight_bytes(&m->output);
    /* (gemma4: a token's row of the per-layer table, and its projection) */
    b += m->ple_tok.row_bytes + weight_bytes(&m->ple_model_proj);
    /* (gemma3n: AltUp's projections in and out) */
    b += weight_bytes(&m->altup_proj) + weight_bytes(&m->altup_unembd);
    return b;
}

/* Ties profiles to the model: architecture, shapes, and the leading bytes
 * of a few tensors as stored in the file. */
static uint64_t fingerprint(const gguf_file *f, const eng_model *m)
{
    uint64_t h = 0xcbf29ce484222325ull;
    const eng_model_info *i = &m->info;
    int32_t dims[7] = { i->n_layer, i->n_embd, i->n_ff, i->n_head, i->n_head_kv, i->head_dim,
                        i->n_vocab };
    h = eng__fnv1a(h, i->arch, strlen(i->arch));
    h = eng__fnv1a(h, dims, sizeof(dims));
    char last[64];
    snprintf(last, sizeof(last), "blk.%d.ffn_down.weight", i->n_layer - 1);
    const char *names[] = { "token_embd.weight", "blk.0.ffn_gate.weight", "blk.0.ffn_up.weight",
                            last, "output_norm.weight" };
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        const gguf_tensor *t = gguf_find_tensor(f, names[k]);
        if (t && t->data) {
            h = eng__fnv1a(h, &t->type, sizeof(t->type));
            h = eng__fnv1a(h, t->data, t->nbytes < 65536 ? t->nbytes : 65536);
        }
    }
    return h;
}

/* What the plan builder needs before the FFN is loaded. */
static void plan_shape(const gguf_file *f, const eng_model *m, eng_plan_shape *sh)
{
    const eng_model_info *i = &m->info;
    const bool g4 = m->arch == ENG_ARCH_GEMMA4;
    const uint64_t qd = (uint64_t)i->n_head * i->head_dim, kvd = (uint64_t)i->n_head_kv * i->head_dim;
    const uint64_t VE = (uint64_t)i->n_vocab * i->n_embd, E = (uint64_t)i->n_embd;
    /* the matrices, each in its storage (mat_dtype; a loaded model's own) */
    uint64_t fixed = 0;
    if (f) {
        const gguf_tensor *out = gguf_find_tensor(f, "output.weight");
        fixed = eng_dtype_bytes(mat_dtype(m, gguf_find_tensor(f, "token_embd.weight")), VE);
        if (out)
            fixed += eng_dtype_bytes(mat_dtype(m, out), VE);
        static const char *const att[2][4] = { { "attn_q", "attn_k", "attn_v", "attn_output" },
                                               { "attn_qkv", "attn_qkv", "attn_qkv", "attn_output" } };
        const uint64_t n[4] = { qd * E, kvd * E, kvd * E, qd * E };
        for (int il = 0; il < i->n_layer; il++) {
            char name[96];
            if (m->conv_layer && m->conv_layer[il]) {
                /* lfm2's convolution block: in_proj as three matrices,
                 * out_proj, the taps in f32 (load_conv_block) */
                snprintf(name, sizeof(name), "blk.%d.shortconv.in_proj.weight", il);
                fixed += 3 * eng_dtype_bytes(mat_dtype(m, gguf_find_tensor(f, name)), E * E);
                snprintf(name, sizeof(name), "blk.%d.shortconv.out_proj.weight", il);
                fixed += eng_dtype_bytes(mat_dtype(m, gguf_find_tensor(f, name)), E * E);
                fixed += E * (uint64_t)m->conv_len * sizeof(float);
                continue;
            }
            if (m->ssm_layer && m->ssm_layer[il]) {
                /* a Mamba-2 mixer: ssm_in as three matrices (of all its
                 * rows together), ssm_out, the taps in f32 (load_ssm_block);
                 * a delta net: z, the convolution's input, beta and alpha
                 * in f32 */
                const eng_ssm *w = &m->ssm_shape;
                const uint64_t NC = (uint64_t)eng_ssm_conv_ch(w), D = (uint64_t)w->d_inner;
                const uint64_t NH = (uint64_t)w->n_head;
                if (w->delta) {
                    snprintf(name, sizeof(name), "blk.%d.attn_gate.weight", il);
                    fixed += eng_dtype_bytes(mat_dtype(m, gguf_find_tensor(f, name)), D * E);
                    snprintf(name, sizeof(name), "blk.%d.attn_qkv.weight", il);
                    fixed += eng_dtype_bytes(mat_dtype(m, gguf_find_tensor(f, name)), NC * E);
                    fixed += 2 * NH * E * sizeof(float);
                } else {
                    snprintf(name, sizeof(name), "blk.%d.ssm_in.weight", il);
                    fixed += eng_dtype_bytes(mat_dtype(m, gguf_find_tensor(f, name)),
                                             (D + NC + NH) * E);
                }
                snprintf(name, sizeof(name), "blk.%d.ssm_out.weight", il);
                fixed += eng_dtype_bytes(mat_dtype(m, gguf_find_tensor(f, name)), D * E);
                fixed += NC * (uint64_t)w->d_conv * sizeof(float);
                continue;
            }
            if (m->mlp_layer && m->mlp_layer[il]) /* (nemotron_h: an MLP alone) */
                continue;
            for (int k = 0; k < 4; k++) {
                snprintf(name, sizeof(name), "blk.%d.%s.weight", il, att[m->arch == ENG_ARCH_PHI3][k]);
                const gguf_tensor *t = gguf_find_tensor(f, name);
                /* (qwen35's attn_q: q and its gate; gemma4's layers: their
                 * own heads, no keys and values loaded in the last ones, the
                 * values the keys' where it has no attn_v) */
                if (g4 && (k == 1 || k == 2) && il >= m->n_kv_from)
                    continue;
                fixed += g4 ? (t ? eng_dtype_bytes(mat_dtype(m, t), t->ne[0] * t->ne[1]) : 0)
                            : eng_dtype_bytes(mat_dtype(m, t),
                                              n[k] * (k == 0 && m->attn_gate ? 2 : 1));
            }
            if (m->ssm_beside) { /* falcon-h1: the mixer beside attention */
                const eng_ssm *w = &m->ssm_shape;
                const uint64_t NC = (uint64_t)eng_ssm_conv_ch(w), D = (uint64_t)w->d_inner;
                snprintf(name, sizeof(name), "blk.%d.ssm_in.weight", il);
                fixed += eng_dtype_bytes(mat_dtype(m, gguf_find_tensor(f, name)),
                                         (D + NC + (uint64_t)w->n_head) * E);
                snprintf(name, sizeof(name), "blk.%d.ssm_out.weight", il);
                fixed += eng_dtype_bytes(mat_dtype(m, gguf_find_tensor(f, name)), D * E);
                fixed += NC * (uint64_t)w->d_conv * sizeof(float);
            }
            /* gemma4's per-layer embedding block, gemma3n's Laurel and
             * AltUp's router (f32) */
            static const char *const g4m[5] = { "inp_gate", "proj", "laurel_l", "laurel_r",
                                                "altup_router" };
            for (int k = 0; g4 && k < 5; k++) {
                snprintf(name, sizeof(name), "blk.%d.%s.weight", il, g4m[k]);
                const gguf_tensor *t = gguf_find_tensor(f, name);
                if (t && t->n_dims == 2)
                    fixed += eng_dtype_bytes(k == 4 ? ENG_DTYPE_F32 : mat_dtype(m, t),
                                             t->ne[0] * t->ne[1]);
            }
        }
        static const char *const g4g[3] = { "per_layer_model_proj", "altup_proj",
                                            "altup_unembd_proj" };
        for (int k = 0; g4 && k < 3; k++) {
            char name[64];
            snprintf(name, sizeof(name), "%s.weight", g4g[k]);
            const gguf_tensor *t = gguf_find_tensor(f, name);
            if (t && t->n_dims >= 2) /* (AltUp's: 3 dimensions) */
                fixed += eng_dtype_bytes(mat_dtype(m, t), t->ne[0] * t->ne[1] *
                                                              (t->n_dims > 2 ? t->ne[2] : 1));
        }
        /* the routers, f32, in the layers with experts */
        for (int il = 0; il < i->n_layer; il++)
            fixed += has_experts(m, il) ? (uint64_t)i->n_expert * E * sizeof(float) : 0;
    } else {
        const eng_weight *tw[2] = { &m->tok_embd, &m->output };
        for (int k = 0; k < (m->output.data != m->tok_embd.data ? 2 : 1); k++)
            fixed += eng_dtype_bytes(tw[k]->dtype, (size_t)tw[k]->rows * tw[k]->cols);
        fixed += weight_bytes(&m->ple_model_proj) + weight_bytes(&m->altup_proj) +
                 weight_bytes(&m->altup_unembd);
        for (int il = 0; il < i->n_layer; il++) {
            const eng_layer *L = &m->layers[il];
            const eng_weight *w[N_LAYER_MATS];
            layer_mats(L, w);
            /* (gemma4's values the keys' projection: its bytes once) */
            for (int k = 0; k < N_LAYER_MATS; k++)
                fixed += k == 2 && L->wv.data == L->wk.data ? 0 : weight_bytes(w[k]);
            if (L->conv) /* (lfm2's taps) */
                fixed += E * (uint64_t)m->conv_len * sizeof(float);
            if (L->ssm.a) /* (a Mamba-2 mixer's, a delta net's) */
                fixed += (uint64_t)eng_ssm_conv_ch(&L->ssm) * (uint64_t)L->ssm.d_conv *
                         sizeof(float);
        }
    }
    *sh = (eng_plan_shape){ .n_layer = i->n_layer, .n_ff = i->n_ff, .n_embd = i->n_embd,
                            .bytes_per_neuron = neuron_bytes(m), .bytes_fixed = fixed,
                            .sketch_per_neuron = i->n_embd % 32 ? 0 : eng_sketch_slot_bytes(i->n_embd),
                            .fingerprint = i->fingerprint, .arch = i->arch,
                            .n_vocab = (uint32_t)i->n_vocab, .down_norm = m->down_norm,
                            .layer_ff = m->ffn_n };
}

/* The backend the weights will live in. */
static int backend_start(eng_model *m, const eng_model_params *p, eng_error *err)
{
    int r;
    /* (auto: experts, Mamba-2 mixers, delta nets and gated attention run
     * on the CPU only, so far) */
    const bool cpu_only = m->n_ff_exp || m->info.n_ssm || m->attn_gate ||
                          m->arch == ENG_ARCH_GEMMA4;
    if (p->backend != ENG_BACKEND_CPU && !(p->backend == ENG_BACKEND_AUTO && cpu_only)) {
        eng_error e = { { 0 } };
        r = eng_backend_cuda_new(p->device, &m->be, &e);
        if (r < 0 && p->backend == ENG_BACKEND_CUDA)
            return eng__set_err(err, r, "%s", e.msg);
        if (r == 0)
            return 0;
        /* auto: no usable GPU, the CPU it is */
    }
    if ((r = eng_backend_cpu_new(p->n_threads, &m->be)) < 0)
        return eng__set_err(err, r, "cannot start the CPU backend: %s", strerror(-r));
    eng_backend_cpu_set_prefill_q8(m->be, p->prefill_q8);
    return 0;
}

int eng_model_load(const char *path, const eng_model_params *params, eng_model **ret_model,
                   eng_error *err)
{
    return eng__model_load_backend(path, params, NULL, ret_model, err);
}

/* The markers of LFM2's calls (and its reasoning) are control tokens:
 * answers print them, so that the calls can be read back (as llama.cpp
 * keeps the tokens a chat format names). */
static int show_markers(eng_model *m)
{
    static const char *const marks[] = { "<|tool_call_start|>", "<|tool_call_end|>", "<think>",
                                         "</think>" };
    for (size_t i = 0; m->chat.lfm2_calls && i < sizeof(marks) / sizeof(marks[0]); i++)
        if (eng_vocab_show(m->vocab, marks[i]) == -ENOMEM)
            return -ENOMEM;
    /* Nemotron Nano v2: its reasoning's end and its call blocks print
     * whatever type the converter gave their tokens (llama.cpp preserves
     * them), and <SPECIAL_12>, which closes each of its turns, ends an
     * answer whatever eos_token_id the file names */
    static const char *const nem[] = { "<think>", "</think>", "<TOOLCALL>", "</TOOLCALL>" };
    for (size_t i = 0; m->chat.kind == ENG_CHAT_NEMOTRON && i < sizeof(nem) / sizeof(nem[0]); i++)
        if (eng_vocab_show(m->vocab, nem[i]) == -ENOMEM)
            return -ENOMEM;
    if (m->chat.kind == ENG_CHAT_NEMOTRON)
        eng_vocab_mark_eog(m->vocab, "<SPECIAL_12>");
    /* Nemotron 3 Nano: the same for its reasoning's end and its calls'
     * blocks (llama.cpp's preserved tokens for it); <|im_end|> ends its
     * turns, an end of generation in every vocabulary */
    static const char *const nem3[] = { "<think>", "</think>", "<tool_call>", "</tool_call>" };
    for (size_t i = 0; m->chat.nemotron3 && i < sizeof(nem3) / sizeof(nem3[0]); i++)
        if (eng_vocab_show(m->vocab, nem3[i]) == -ENOMEM)
            return -ENOMEM;
    return 0;
}

int eng__model_load_backend(const char *path, const eng_model_params *params, eng_backend *be,
                            eng_model **ret_model, eng_error *err)
{
    eng_plan *plan = NULL;
    eng_model_params p = params ? *params : eng_model_params_default();
    if (err)
        err->msg[0] = 0;
    if (!path || !ret_model) {
        if (be)
            be->iface->free(be);
        return eng__set_err(err, -EINVAL, "no model path given");
    }
    if (p.storage != ENG_DTYPE_F16 && p.storage != ENG_DTYPE_F32)
        return eng__set_err(err, -EINVAL, "unknown storage type %d", (int)p.storage);
    if (p.backend != ENG_BACKEND_CPU && p.backend != ENG_BACKEND_CUDA &&
        p.backend != ENG_BACKEND_AUTO)
        return eng__set_err(err, -EINVAL, "unknown backend %d", (int)p.backend);

    gguf_file *f = NULL;
    eng_model *m = NULL;
    int r = gguf_open(path, &f, err);
    if (r == 0 && !(m = calloc(1, sizeof(*m))))
        r = eng__set_err(err, -ENOMEM, "out of memory");
    if (r < 0) {
        if (be)
            be->iface->free(be);
        gguf_close(f);
        return r;
    }
    m->be = be; /* owned from here on */
    loader ld = { .f = f, .m = m, .err = err };
    m->info.storage = p.storage;
    m->q8_matrices = p.q8_matrices;
    m->progress = p.progress;
    m->progress_data = p.progress_data;
    if ((r = load_hparams(f, m, err)) < 0)
        goto fail;
    if ((r = eng_vocab_load(f, &m->vocab, err)) < 0)
        goto fail;
    m->info.n_vocab = eng_vocab_n_tokens(m->vocab);

    const char *tmpl = NULL;
    size_t tlen = 0;
    if (gguf_get_str(f, "tokenizer.chat_template", &tmpl, &tlen) < 0)
        tmpl = NULL, tlen = 0;
    eng_chat_detect(tmpl, tlen, &m->chat);
    /* the special tokens the template prints, as text that tokenizes back
     * to them; a template that needs one the vocabulary lacks prints none */
    special_text(m->vocab, eng_vocab_bos(m->vocab), m->chat.bos, sizeof(m->chat.bos));
    special_text(m->vocab, eng_vocab_eos(m->vocab), m->chat.eos, sizeof(m->chat.eos));
    if ((r = show_markers(m)) < 0) {
        eng__set_err(err, r, "out of memory");
        goto fail;
    }

    m->info.fingerprint = fingerprint(f, m);
    m->path = strdup(path);
    if (!m->path) {
        r = eng__set_err(err, -ENOMEM, "out of memory");
        goto fail;
    }
    /* (experts: no plan ranks their neurons, and the pass would read all
     * of them) */
    if (!m->n_ff_exp && (r = down_norms(&ld)) < 0)
        goto fail;
    /* the backend first: which matrices it stores in Q8_0 decides the
     * bytes a plan (a memory budget) works with */
    if (!m->be && (r = backend_start(m, &p, err)) < 0)
        goto fail;
    /* experts: every neuron of every expert, computed as the router picks
     * (SelectInfer's choices are per dense FFN, so far) */
    if (m->n_ff_exp && p.plan && p.plan->mode != ENG_SELECT_DENSE) {
        r = eng__set_err(err, -ENOTSUP, "mode %s: neuron selection in mixture-of-experts "
                         "layers is not supported (mode dense only)",
                         eng_select_mode_name(p.plan->mode));
        goto fail;
    }
    if (m->n_ff_exp && !m->be->iface->moe) {
        r = eng__set_err(err, -ENOTSUP, "the %s backend cannot run mixture-of-experts layers "
                         "(the cpu backend can)", m->be->iface->name);
        goto fail;
    }
    m->info.ffn_dtype = ffn_dtype(m, f);
    eng_plan_shape shape;
    plan_shape(f, m, &shape);
    m->bytes_fixed = shape.bytes_fixed;
    if ((r = eng__plan_build(&shape, p.plan, &plan, err)) < 0)
        goto fail;
    m->plan = plan->info;
    m->layer_sens = plan->layer_sens; /* owned by the model from here */
    plan->layer_sens = NULL;

    if (!(m->be->iface->dtypes & 1u << m->info.storage)) {
        r = eng__set_err(err, -EINVAL, "the %s backend does not store weights in %s",
                         m->be->iface->name, m->info.storage == ENG_DTYPE_F32 ? "f32" : "f16");
        goto fail;
    }
    {
        /* a GPU says up front whether the plan fits */
        size_t avail = 0, total = 0;
        m->be->iface->mem_info(m->be, &avail, &total);
        uint64_t need = shape.bytes_fixed + plan->info.bytes_ffn;
        if (total && need > avail) {
            r = eng__set_err(err, -ENOMEM,
                             "the model does not fit in %s memory: needs %llu bytes, %zu of %zu free",
                             m->be->iface->name, (unsigned long long)need, avail, total);
            goto fail;
        }
    }
    if ((r = sketch_supported(m, plan, err)) < 0)
        goto fail;
    if ((r = load_weights(&ld, plan)) < 0)
        goto fail;
    {
        int nt = p.n_threads > 0 ? p.n_threads : (int)sysconf(_SC_NPROCESSORS_ONLN);
        nt = nt < 1 ? 1 : nt > 64 ? 64 : nt;
        if ((r = run_jobs(&ld, nt)) < 0)
            goto fail;
        for (int il = 0; il < m->info.n_layer; il++)
            if (m->layers[il].ffn.sketch)
                m->be->iface->build_sketch(m->be, &m->layers[il].ffn);
        /* the CPU backend's pool, or the threads that convert for a GPU */
        int bt = eng_backend_cpu_n_threads(m->be);
        m->info.n_threads = bt > 0 ? bt : nt;
    }
    if ((r = m->be->iface->sync(m->be)) < 0) {
        eng__set_err(err, r, "uploading the weights failed: %s", m->be->iface->error(m->be));
        goto fail;
    }
    m->info.n_params = count_params(f);
    m->info.bytes_per_token = bytes_per_token(m);
    m->info.n_kv_shared = m->arch == ENG_ARCH_GEMMA4 ? m->info.n_layer - m->n_kv_from : 0;
    m->info.n_embd_per_layer = m->n_embd_per_layer;
    m->info.bytes_ple_table = (uint64_t)m->ple_tok.row_bytes * (uint64_t)m->info.n_vocab;
    if (m->n_dense_lead) {
        /* (the plan counted n_ff, the widest layer's, in every layer) */
        m->plan.neurons_loaded = m->plan.neurons_total = 0;
        for (int il = 0; il < m->info.n_layer; il++)
            m->plan.neurons_loaded += (uint64_t)m->layers[il].ffn.n_slots;
        m->plan.neurons_total = m->plan.neurons_loaded;
        m->plan.bytes_ffn = m->plan.neurons_loaded * neuron_bytes(m);
    }

    free(ld.row);
    free_jobs(&ld);
    eng__plan_free(plan);
    gguf_close(f);
    *ret_model = m;
    return 0;

fail:
    free(ld.row);
    free_jobs(&ld);
    eng__plan_free(plan);
    eng_model_free(m);
    gguf_close(f);
    return r;
}

void eng_model_get_info(const eng_model *m, eng_model_info *ret)
{
    *ret = m->info;
}

const char *eng_backend_name(const eng_model *m)
{
    return m->be->iface->name;
}

int eng_model_backend_info(const eng_model *m, eng_backend_info *ret)
{
    if (!m || !ret)
        return -EINVAL;
    memset(ret, 0, sizeof(*ret));
    snprintf(ret->name, sizeof(ret->name), "%s", m->be->iface->name);
    if (strcmp(ret->name, "cuda") != 0) {
        const char *k = eng__backend_cpu_kernels(m->be);
        snprintf(ret->kernels, sizeof(ret->kernels), "%s", k ? k : "");
        ret->prefill_q8 = eng__backend_cpu_prefill_q8(m->be, ENG_DTYPE_Q8_0);
        return 0;
    }
    int r = eng_backend_cuda_describe(m->be, ret->device, sizeof(ret->device), &ret->integrated,
                                      &ret->peak_gbps);
    if (r < 0)
        return r;
    return eng__backend_graph_stats(m->be, &ret->graphs);
}

/* ---- tokenizer and chat: thin wrappers over vocab.c and chat.c ---- */

int eng_tokenize(const eng_model *m, const char *text, size_t len, unsigned flags,
                 int32_t *tokens, size_t cap, size_t *ret_n)
{
    return eng_vocab_tokenize(m->vocab, text, len, flags, tokens, cap, ret_n);
}

int eng_token_to_piece(const eng_model *m, int32_t token, bool special, char *buf, size_t cap)
{
    return eng_vocab_token_to_piece(m->vocab, token, special, buf, cap);
}

int32_t eng_token_bos(const eng_model *m)
{
    return eng_vocab_bos(m->vocab);
}

int32_t eng_token_eos(const eng_model *m)
{
    return eng_vocab_eos(m->vocab);
}

bool eng_token_is_eog(const eng_model *m, int32_t token)
{
    return eng_vocab_is_eog(m->vocab, token);
}

eng_chat_template eng_model_chat_template(const eng_model *m)
{
    return m->chat.kind;
}

/* a recognised template in place of the model's, keeping the texts of its
 * vocabulary's bos and eos */
static int set_chat(eng_model *m, eng_chat_info *c)
{
    if (c->kind == ENG_CHAT_NONE)
        return -ENOTSUP;
    memcpy(c->bos, m->chat.bos, sizeof(c->bos));
    memcpy(c->eos, m->chat.eos, sizeof(c->eos));
    m->chat = *c;
    return show_markers(m);
}

int eng_model_set_chat_template(eng_model *m, const char *name)
{
    if (!m || !name)
        return -EINVAL;
    eng_chat_info c;
    eng_chat_named(name, &c);
    return set_chat(m, &c);
}

int eng_model_set_chat_template_text(eng_model *m, const char *jinja, size_t len)
{
    if (!m || (!jinja && len))
        return -EINVAL;
    eng_chat_info c;
    eng_chat_detect(jinja, len, &c);
    return set_chat(m, &c);
}

bool eng_model_chat_can_think(const eng_model *m)
{
    return m->chat.think_switch;
}

int eng_chat_apply(const eng_model *m, const eng_chat_msg *msgs, size_t n_msgs,
                   unsigned flags, char *buf, size_t cap)
{
    return eng_chat_apply_tools(m, msgs, n_msgs, NULL, flags, buf, cap);
}

bool eng_model_chat_can_call_tools(const eng_model *m)
{
    return m->chat.tools;
}

int eng_chat_apply_tools(const eng_model *m, const eng_chat_msg *msgs, size_t n_msgs,
                         const char *tools, unsigned flags, char *buf, size_t cap)
{
    if (m->chat.kind == ENG_CHAT_NONE)
        return -ENOTSUP;
    return eng_chat_render(&m->chat, msgs, n_msgs, tools, flags, buf, cap);
}

int eng_chat_reasoning(const eng_model *m, const char *text, size_t len, size_t *ret_think_off,
                       size_t *ret_think_len, size_t *ret_content_off)
{
    return eng_chat_split_reasoning(&m->chat, text, len, ret_think_off, ret_think_len, ret_content_off);
}

int eng_chat_tool_calls(const eng_model *m, const char *text, size_t len,
                        eng_tool_call **ret_calls, size_t *ret_n, size_t *ret_content_len)
{
    return eng_chat_parse_calls(&m->chat, text, len, ret_calls, ret_n, ret_content_len);
}

/* ---- sessions ---- */

eng_session_params eng_session_params_default(void)
{
    return (eng_session_params){ .n_ctx = 0, .n_batch = 0, .kv_type = ENG_KV_F16 };
}

int eng_kv_type_parse(const char *name, eng_kv_type *ret)
{
    if (!name || !ret)
        return -EINVAL;
    if (!strcmp(name, "f16"))
        *ret = ENG_KV_F16;
    else if (!strcmp(name, "q8_0"))
        *ret = ENG_KV_Q8_0;
    else
        return -EINVAL;
    return 0;
}

const char *eng_dtype_name(eng_dtype dt)
{
    return dt == ENG_DTYPE_Q8_0    ? "q8_0"
           : dt == ENG_DTYPE_Q4_K  ? "q4_k"
           : dt == ENG_DTYPE_Q6_K  ? "q6_k"
           : dt == ENG_DTYPE_Q5_K  ? "q5_k"
           : dt == ENG_DTYPE_Q4_1  ? "q4_1"
           : dt == ENG_DTYPE_Q4_0  ? "q4_0"
           : dt == ENG_DTYPE_MXFP4 ? "mxfp4"
           : dt == ENG_DTYPE_F32   ? "f32"
                                   : "f16";
}

const char *eng_kv_type_name(eng_kv_type type)
{
    return type == ENG_KV_Q8_0 ? "q8_0" : type == ENG_KV_F16 ? "f16" : "?";
}

/* One position's row in layer il's cache (K or V; a convolution's). */
static size_t cache_row_bytes(const eng_session *s, int il)
{
    const eng_layer *L = &s->model->layers[il];
    const size_t kvd = (size_t)L->n_head_kv * L->head_dim;
    if (L->conv_ch)
        return (size_t)L->conv_ch * sizeof(float);
    return s->kv_type == ENG_KV_Q8_0 ? kvd / 32 * sizeof(eng_q8_block) : kvd * sizeof(uint16_t);
}

/* Whether layer il attends over another layer's cache (gemma4's last
 * layers): it has none of its own, and what its source does to the rows
 * (rings, shifts) holds for it. */
static bool kv_borrowed(const eng_session *s, int il)
{
    return s->model->layers[il].kv_src != il;
}

/* The bytes of layer il's K (or V) buffer: its kv_rows, and a
 * convolution's window - 1 rows to stage a shift's moves where there is no
 * conv_stage (conv_shift). */
static size_t cache_bytes(const eng_session *s, int il)
{
    const eng_layer *L = &s->model->layers[il];
    const int stage = L->conv_ch && !s->conv_stage ? L->window - 1 : 0;
    return (size_t)(s->kv_rows[il] + stage) * cache_row_bytes(s, il);
}

/* The bytes of falcon-h1's convolution ring beside layer il's attention:
 * ring_rows rows of its channels, as a convolution layer's (with the
 * window - 1 staging rows where there is no conv_stage) */
static size_t ring_bytes(const eng_session *s, int il)
{
    const eng_ssm *w = &s->model->layers[il].ssm;
    const int stage = s->conv_stage ? 0 : w->d_conv - 1;
    return (size_t)(s->ring_rows + stage) * (size_t)eng_ssm_conv_ch(w) * sizeof(float);
}

/* Layer il's convolution rows at the checkpoint (conv_ckpt): a ring as its
 * live one, kv_rows (falcon-h1: ring_rows) rows of its channels; 0: none. */
static size_t conv_ckpt_bytes(const eng_session *s, int il)
{
    const eng_layer *L = &s->model->layers[il];
    if (!s->conv_stage || kv_borrowed(s, il))
        return 0;
    if (L->conv_ch)
        return (size_t)s->kv_rows[il] * (size_t)L->conv_ch * sizeof(float);
    if (L->sout.data)
        return (size_t)s->ring_rows * (size_t)eng_ssm_conv_ch(&L->ssm) * sizeof(float);
    return 0;
}

void eng_session_free(eng_session *s)
{
    if (!s)
        return;
    eng_backend *be = s->model->be;
    void (*bfree)(eng_backend *, void *) = be->iface->mem_free;
    eng__select_session_free(s);
    for (int il = 0; il < s->model->info.n_layer; il++) {
        if (s->k_cache && !kv_borrowed(s, il))
            bfree(be, s->k_cache[il]);
        if (s->v_cache && !kv_borrowed(s, il))
            bfree(be, s->v_cache[il]);
        if (s->ffn_sel_dev)
            bfree(be, s->ffn_sel_dev[il]);
        if (s->ssm_state)
            bfree(be, s->ssm_state[il]);
        if (s->ssm_ckpt)
            bfree(be, s->ssm_ckpt[il]);
        if (s->ring)
            bfree(be, s->ring[il]);
        if (s->conv_ckpt)
            bfree(be, s->conv_ckpt[il]);
    }
    bfree(be, s->conv_stage);
    free(s->conv_ckpt);
    free(s->ssm_state);
    free(s->ssm_ckpt);
    free(s->ring);
    free(s->ring_lo);
    free(s->k_cache);
    free(s->v_cache);
    free(s->kv_rows);
    free(s->kv_base);
    free(s->kv_lo);
    free(s->ffn_sel);
    free(s->ffn_sel_dev);
    free(s->ffn_n_sel);
    float *bufs[] = { s->x,  s->xn,         s->q,        s->k,    s->v,      s->att, s->o,
                      s->ff, s->logits_dev, s->moe_work, s->gate, s->ple_in, s->ple_g,
                      s->ple_proj, s->moe_out, s->alt, s->alt_pred, s->laurel, s->laurel_r,
                      s->alt_mod };
    for (size_t i = 0; i < sizeof(bufs) / sizeof(bufs[0]); i++)
        bfree(be, bufs[i]);
    bfree(be, s->tokens);
    bfree(be, s->argmax_dev);
    bfree(be, s->cand_dev);
    free(s->cand_host);
    free(s->ple_raw);
    free(s->logits);
    free(s->ctx_tokens);
    free(s);
}

static float *falloc(size_t n)
{
    return aligned_alloc(64, ((n * sizeof(float)) + 63) & ~(size_t)63);
}

/* Backend memory for a session; NULL when it does not fit. */
void *eng__session_alloc(const eng_session *s, size_t bytes)
{
    void *p;
    eng_backend *be = s->model->be;
    return be->iface->alloc(be, bytes, &p) < 0 ? NULL : p;
}

int eng_session_new(const eng_model *m, const eng_session_params *params, eng_session **ret)
{
    eng_session_params p = params ? *params : eng_session_params_default();
    if (!m || !ret)
        return -EINVAL;
    int n_ctx = p.n_ctx > 0 ? p.n_ctx : (m->info.n_ctx_train < 2048 ? m->info.n_ctx_train : 2048);
    /* a sliding-window model attends to its last n_swa positions: a
     * context that long sees everything, so attention stays exact */
    if (m->arch == ENG_ARCH_PHI3 && m->n_swa > 0 && n_ctx > m->n_swa)
        n_ctx = m->n_swa;
    if (n_ctx > m->info.n_ctx_train && p.n_ctx > 0 && n_ctx > (1 << 20))
        return -EINVAL;
    int n_batch = p.n_batch > 0 ? p.n_batch : 256;
    if (n_batch > n_ctx)
        n_batch = n_ctx;
    const eng_backend_iface *ops = m->be->iface;
    if (p.kv_type != ENG_KV_F16 && p.kv_type != ENG_KV_Q8_0)
        return -EINVAL;
    bool hd32 = true; /* (every layer's heads whole Q8_0 blocks) */
    for (int il = 0; il < m->info.n_layer; il++)
        hd32 = hd32 && m->layers[il].head_dim % 32 == 0;
    if (p.kv_type == ENG_KV_Q8_0 && (!ops->store_kv_q8 || !ops->attention_q8 || !hd32))
        return -ENOTSUP;

    eng_session *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->model = m;
    s->n_ctx = n_ctx;
    /* LongRoPE, as llama.cpp picks it: long divisors for a context past
     * the original one */
    s->rope_long = m->rope_long && n_ctx > m->n_ctx_orig;
    s->n_batch = n_batch;
    s->kv_type = p.kv_type;
    s->graph_temp = 1.0f;
    eng__session_changed(s);

    const int L = m->info.n_layer, E = m->info.n_embd, F = m->info.n_ff;
    /* (a convolution block's b, c and x go where q, k and v do, its output
     * where attention's; gemma4's layers' heads differ: the widest) */
    size_t qd = 0, kvd = 0;
    for (int il = 0; il < L; il++) {
        const eng_layer *Ll = &m->layers[il];
        const size_t q = (size_t)m->info.n_head * Ll->head_dim;
        const size_t kv = (size_t)Ll->n_head_kv * Ll->head_dim;
        qd = q > qd ? q : qd;
        kvd = kv > kvd ? kv : kvd;
    }
    size_t qd_scratch = m->conv_layer && qd < (size_t)E ? (size_t)E : qd;
    size_t kvd_scratch = m->conv_layer && kvd < (size_t)E ? (size_t)E : kvd;
    /* (a Mamba-2 mixer's z and its output where q and attention's go, xBC
     * where k does and dt where v does; a delta net's beta and alpha) */
    if (m->info.n_ssm) {
        const size_t D = (size_t)m->ssm_shape.d_inner, NC = (size_t)eng_ssm_conv_ch(&m->ssm_shape);
        const size_t NH = (size_t)m->ssm_shape.n_head * (m->ssm_shape.delta ? 2 : 1);
        qd_scratch = qd_scratch > D ? qd_scratch : D;
        kvd_scratch = kvd_scratch > NC ? kvd_scratch : NC;
        kvd_scratch = kvd_scratch > NH ? kvd_scratch : NH;
    }
    /* (the widest layer's: every layer's where all have the model's heads) */
    s->kv_row_bytes = s->kv_type == ENG_KV_Q8_0 ? kvd / 32 * sizeof(eng_q8_block)
                                                : kvd * sizeof(uint16_t);
    s->k_cache = calloc(L, sizeof(*s->k_cache));
    s->v_cache = calloc(L, sizeof(*s->v_cache));
    s->kv_rows = calloc(L, sizeof(*s->kv_rows));
    s->kv_base = calloc(L, sizeof(*s->kv_base));
    s->kv_lo = calloc(L, sizeof(*s->kv_lo));
    s->ffn_sel = calloc(L, sizeof(*s->ffn_sel));
    s->ffn_sel_dev = calloc(L, sizeof(*s->ffn_sel_dev));
    s->ffn_n_sel = calloc(L, sizeof(*s->ffn_n_sel));
    s->ssm_state = m->info.n_ssm ? calloc(L, sizeof(*s->ssm_state)) : NULL;
    s->ssm_ckpt = m->info.n_ssm ? calloc(L, sizeof(*s->ssm_ckpt)) : NULL;
    s->ssm_pos = s->ckpt_pos = -1;
    /* Convolution rows (lfm2's layers, the Mamba-2 mixers') in host memory
     * keep only what the next token reads, and a batch runs in one staging
     * buffer for all layers: the widest window's and channels' (a GPU's
     * decode graph copies nothing, so there each ring holds a batch; swa_full
     * keeps every position) */
    int conv_w = 0, conv_nc = 0;
    for (int il = 0; il < L; il++) {
        const eng_layer *Ll = &m->layers[il];
        const int w = Ll->conv_ch ? Ll->window : Ll->sout.data ? Ll->ssm.d_conv : 0;
        const int nc = Ll->conv_ch ? Ll->conv_ch : Ll->sout.data ? eng_ssm_conv_ch(&Ll->ssm) : 0;
        conv_w = w > conv_w ? w : conv_w;
        conv_nc = nc > conv_nc ? nc : conv_nc;
    }
    if (conv_nc > 0 && !p.swa_full && ops->host_memory) {
        s->conv_stage_rows = conv_w - 1 + n_batch;
        s->conv_stage = eng__session_alloc(s, (size_t)s->conv_stage_rows * conv_nc * sizeof(float));
        s->conv_ckpt = calloc(L, sizeof(*s->conv_ckpt));
        if (!s->conv_stage || !s->conv_ckpt)
            goto oom;
    }
    if (m->ssm_beside) { /* falcon-h1: rows as a convolution layer's (below) */
        const int w = m->ssm_shape.d_conv;
        s->ring_rows = p.swa_full ? n_ctx + w - 1 : s->conv_stage ? w : w - 1 + n_batch;
        s->ring = calloc(L, sizeof(*s->ring));
        s->ring_lo = calloc(L, sizeof(*s->ring_lo));
        if (!s->ring || !s->ring_lo)
            goto oom;
    }
    if (!s->k_cache || !s->v_cache || !s->kv_rows || !s->kv_base || !s->kv_lo || !s->ffn_sel ||
        !s->ffn_sel_dev || !s->ffn_n_sel || (m->info.n_ssm && (!s->ssm_state || !s->ssm_ckpt)))
        goto oom;
    const size_t f4 = sizeof(float);
    for (int il = 0; il < L; il++) {
        /* a sliding-window layer needs its window's rows and the batch's;
         * the ring moves rows with memmove, so host memory only (a GPU's
         * replayed decode graph also holds its cache rows) */
        const int w = m->layers[il].window;
        const bool conv = m->layers[il].conv_ch > 0;
        /* the host list is the ops' list when backend memory is host memory */
        if (!m->be->iface->host_memory &&
            !(s->ffn_sel_dev[il] = eng__session_alloc(s, (size_t)F * sizeof(int32_t))))
            goto oom;
        if (m->layers[il].mlp_only) { /* (nemotron_h: an MLP alone keeps no cache) */
            s->kv_rows[il] = n_ctx;
            continue;
        }
        if (kv_borrowed(s, il)) { /* (its source's cache, allocated before it) */
            const int src = m->layers[il].kv_src;
            s->kv_rows[il] = s->kv_rows[src];
            s->k_cache[il] = s->k_cache[src];
            s->v_cache[il] = s->v_cache[src];
            continue;
        }
        const bool ring = !p.swa_full && ops->host_memory && w > 0 && w - 1 + n_batch < n_ctx;
        s->kv_rows[il] = ring ? w - 1 + n_batch : n_ctx;
        /* a convolution's ring, on every backend: position p in row p %
         * kv_rows, no rows moved while evaluating; the w - 1 positions the
         * next token reads and its own (conv_stage), or a batch and the w -
         * 1 before it, or every position (swa_full); see eng_session */
        if (conv)
            s->kv_rows[il] = p.swa_full ? n_ctx + w - 1 : s->conv_stage ? w : w - 1 + n_batch;
        s->k_cache[il] = eng__session_alloc(s, cache_bytes(s, il));
        if (!conv)
            s->v_cache[il] = eng__session_alloc(s, cache_bytes(s, il));
        if (!s->k_cache[il] || (!conv && !s->v_cache[il]))
            goto oom;
        /* (the mixers run on host-memory backends only: the checkpoint is
         * copied with memcpy) */
        const eng_ssm *sw = &m->layers[il].ssm;
        const size_t sb = (size_t)sw->d_inner * sw->d_state * sizeof(float);
        if (sw->a && (!ops->host_memory || !(s->ssm_state[il] = eng__session_alloc(s, sb)) ||
                      !(s->ssm_ckpt[il] = eng__session_alloc(s, sb))))
            goto oom;
        if (m->layers[il].sout.data && !(s->ring[il] = eng__session_alloc(s, ring_bytes(s, il))))
            goto oom;
        const size_t cb = conv_ckpt_bytes(s, il);
        if (cb && !(s->conv_ckpt[il] = eng__session_alloc(s, cb)))
            goto oom;
    }
    s->x = eng__session_alloc(s, (size_t)n_batch * E * f4);
    s->xn = eng__session_alloc(s, (size_t)n_batch * E * f4);
    s->q = eng__session_alloc(s, (size_t)n_batch * qd_scratch * f4);
    s->k = eng__session_alloc(s, (size_t)n_batch * kvd_scratch * f4);
    s->v = eng__session_alloc(s, (size_t)n_batch * kvd_scratch * f4);
    s->att = eng__session_alloc(s, (size_t)n_batch * qd_scratch * f4);
    if (m->attn_gate && !(s->gate = eng__session_alloc(s, (size_t)n_batch * qd * f4)))
        goto oom;
    if (m->n_embd_per_layer) { /* gemma4's per-layer inputs */
        const size_t P = (size_t)m->n_embd_per_layer;
        if (!(s->ple_in = eng__session_alloc(s, (size_t)n_batch * L * P * f4)) ||
            !(s->ple_proj = eng__session_alloc(s, (size_t)n_batch * L * P * f4)) ||
            !(s->ple_g = eng__session_alloc(s, (size_t)n_batch * P * f4)) ||
            !(s->ple_raw = malloc(m->ple_tok.row_bytes)))
            goto oom;
    }
    if (m->n_altup) { /* gemma3n's streams */
        const size_t NA = (size_t)m->n_altup, R = (size_t)m->laurel_rank;
        if (!(s->alt = eng__session_alloc(s, (size_t)n_batch * NA * E * f4)) ||
            !(s->alt_pred = eng__session_alloc(s, (size_t)n_batch * NA * E * f4)) ||
            !(s->laurel = eng__session_alloc(s, (size_t)n_batch * E * f4)) ||
            !(s->laurel_r = eng__session_alloc(s, (size_t)n_batch * (R ? R : 1) * f4)) ||
            !(s->alt_mod = eng__session_alloc(s, (size_t)n_batch * NA * f4)))
            goto oom;
    }
    s->o = eng__session_alloc(s, (size_t)n_batch * E * f4);
    s->ff = eng__session_alloc(s, (size_t)n_batch * E * f4);
    s->tokens = eng__session_alloc(s, (size_t)n_batch * sizeof(int32_t));
    s->logits = falloc((size_t)m->info.n_vocab);
    s->logits_cap = 1;
    s->ctx_tokens = malloc((size_t)n_ctx * sizeof(int32_t));
    if (!s->x || !s->xn || !s->q || !s->k || !s->v || !s->att || !s->o || !s->ff || !s->tokens ||
        !s->logits || !s->ctx_tokens)
        goto oom;
    /* (the first layer with experts: after LFM2-MoE's dense ones, among
     * nemotron_h_moe's mixers and attention) */
    int il_moe = m->n_dense_lead;
    while (m->n_ff_exp && il_moe + 1 < m->info.n_layer && !m->layers[il_moe].moe.router.data)
        il_moe++;
    if (m->n_ff_exp &&
        !(s->moe_work = eng__session_alloc(
              s, eng_moe_work_floats(&m->layers[il_moe].moe, n_batch, E) * sizeof(float))))
        goto oom;
    if (m->moe_mlp && !(s->moe_out = eng__session_alloc(s, (size_t)n_batch * E * sizeof(float))))
        goto oom;
    /* greedy on the backend (ENG_EVAL_ARGMAX): host memory reads the logits */
    if (!m->be->iface->host_memory && m->be->iface->argmax &&
        !(s->argmax_dev = eng__session_alloc(s, sizeof(int32_t))))
        goto oom;
    if (eng__select_session_init(s) < 0)
        goto oom;
    *ret = s;
    return 0;
oom:
    eng_session_free(s);
    return -ENOMEM;
}

void eng_session_set_abort(eng_session *s, eng_abort_cb cb, void *userdata)
{
    s->abort_cb = cb;
    s->abort_data = userdata;
}

void eng__session_changed(eng_session *s)
{
    /* unique over every session of the process: a backend keeps one graph
     * for whichever session ran last */
    static _Atomic uint64_t next_key = 1;
    s->graph_key = atomic_fetch_add(&next_key, 1);
}

void eng_session_reset(eng_session *s)
{
    s->n_past = 0;
    s->n_logits = 0;
    s->argmax_only = false;
    s->cands_only = false;
    eng__select_session_reset(s);
}

/* lfm2's convolution rows (eng_layer.conv) about to take positions pos0
 * .. pos0 + n - 1, at rows p % kv_rows: a row keeps its position until
 * one kv_rows higher is written, so positions below pos0 + n - kv_rows
 * are no longer held (kv_lo; also after an evaluation that went further
 * before a prefix was kept, since each write raised it so). Idempotent: a
 * decode step may be issued twice. */
static void held_room(int *lo, int rows, int pos0, int n)
{
    if (pos0 == 0)
        *lo = 0;
    if (pos0 + n - rows > *lo)
        *lo = pos0 + n - rows;
}

/* Rows of positions [from, to) (from clamped to 0) of the ring src (src_rows
 * rows of nc channels, position p in row p % src_rows) into the ring dst of
 * dst_rows. */
static void conv_copy(eng_session *s, float *dst, int dst_rows, const float *src, int src_rows,
                      int from, int to, int nc)
{
    eng_backend *be = s->model->be;
    for (int q = from > 0 ? from : 0; q < to; q++)
        be->iface->copy(be, dst + (size_t)(q % dst_rows) * nc, src + (size_t)(q % src_rows) * nc,
                        (size_t)nc * sizeof(float));
}

/* A convolution's rows (ring: rows rows of nc channels, held from *lo,
 * window w) about to take positions pos0 .. pos0 + n - 1. Where the batch
 * and the w - 1 positions before it fit in the ring, the op runs there;
 * else (conv_stage: a ring of w rows, a batch of more than one) those w - 1
 * positions go to the session's staging rows and the op runs on them.
 * Returns the ring the op takes and its rows (*ret_rows); conv_end() after
 * the op. */
static float *conv_begin(eng_session *s, float *ring, int rows, int *lo, int w, int nc, int pos0,
                         int n, int *ret_rows)
{
    held_room(lo, rows, pos0, n);
    if (w - 1 + n <= rows) {
        *ret_rows = rows;
        return ring;
    }
    conv_copy(s, s->conv_stage, s->conv_stage_rows, ring, rows, pos0 - w + 1, pos0, nc);
    *ret_rows = s->conv_stage_rows;
    return s->conv_stage;
}

/* After the op over buf (conv_begin's): the ring takes its last rows
 * positions back from the staging rows, and layer il's checkpoint
 * (conv_ckpt, at ckpt_at) the rows positions before it, as the ring would
 * hold them had the evaluation stopped there. */
static void conv_end(eng_session *s, int il, float *ring, int rows, const float *buf, int buf_rows,
                     int nc, int pos0, int n)
{
    if (buf != ring)
        conv_copy(s, ring, rows, buf, buf_rows, pos0 + n - rows, pos0 + n, nc);
    if (s->ckpt_at && s->conv_ckpt && s->conv_ckpt[il]) {
        const int at = pos0 + s->ckpt_at;
        conv_copy(s, s->conv_ckpt[il], rows, buf, buf_rows, at - rows, at, nc);
    }
}

/* Whether layer il's cache is a sliding window's ring (see eng_session). */
static bool is_ring(const eng_session *s, int il)
{
    return s->kv_rows[il] != s->n_ctx;
}

/* A ring (sliding-window layer, see eng_session) about to take positions
 * pos0 .. pos0 + n - 1: from position 0 it starts over; when they would
 * run past its rows, the window's last positions before pos0 (all the
 * chunk's first token attends to) move to its first rows. Returns the
 * row of pos0. */
static int ring_room(eng_session *s, int il, int pos0, int n)
{
    if (!is_ring(s, il))
        return pos0;
    if (pos0 == 0)
        s->kv_base[il] = s->kv_lo[il] = 0;
    if (pos0 + n - s->kv_base[il] > s->kv_rows[il]) {
        /* more than the window lies below pos0 (kv_rows is window - 1 +
         * n_batch): nb > kv_base */
        const int nb = pos0 - s->model->layers[il].window + 1;
        const size_t rb = cache_row_bytes(s, il), from = (size_t)(nb - s->kv_base[il]) * rb;
        const size_t bytes = (size_t)(pos0 - nb) * rb;
        memmove(s->k_cache[il], (char *)s->k_cache[il] + from, bytes);
        memmove(s->v_cache[il], (char *)s->v_cache[il] + from, bytes);
        s->kv_base[il] = nb;
        if (s->kv_lo[il] < nb)
            s->kv_lo[il] = nb;
    }
    return pos0 - s->kv_base[il];
}

/* Whether every ring still holds what a token at position pos attends to
 * (positions pos - window + 1 .. pos - 1); ckpt: where pos is the
 * checkpoint's, a convolution's rows count as held where its checkpoint
 * (conv_ckpt) keeps them. */
static bool rings_hold(const eng_session *s, int pos, bool ckpt)
{
    for (int il = 0; il < s->model->info.n_layer && pos > 0; il++) {
        const bool saved = ckpt && s->conv_ckpt && s->conv_ckpt[il];
        /* (falcon-h1: the convolution's rows beside attention's) */
        const int from = pos - s->model->ssm_shape.d_conv + 1;
        if (s->ring && s->ring[il] && !saved && (from > 0 ? from : 0) < s->ring_lo[il])
            return false;
        if ((!is_ring(s, il) && !s->model->layers[il].conv_ch) || kv_borrowed(s, il) ||
            (saved && s->model->layers[il].conv_ch))
            continue;
        const int lo = pos - s->model->layers[il].window + 1;
        if ((lo > 0 ? lo : 0) < s->kv_lo[il])
            return false;
    }
    return true;
}

/* What eng_session_reset_prefix(s, tokens, n) keeps, in *ret_votes
 * eng__select_prefix_votes(s) (-1 when no votes are needed), and in
 * *ret_ckpt whether the checkpoint's states and rows are what it keeps. */
static size_t prefix_keep(const eng_session *s, const int32_t *tokens, size_t n, int *ret_votes,
                          bool *ret_ckpt)
{
    size_t p = 0;
    if (tokens && s->kv_generation == s->model->generation)
        while (p < (size_t)s->n_reusable && p < n && s->ctx_tokens[p] == tokens[p])
            p++;
    /* at least two tokens are left to evaluate: the prefill's kernels then
     * compute them, as they would in a fresh prefill of the whole prompt
     * (one token would take the decode step's, which sum in another order) */
    size_t keep = n < 2 ? 0 : p < n - 2 ? p : n - 2;
    /* a sliding window's ring may no longer hold what follows the prefix
     * attends to (where there is a checkpoint, below) */
    const bool ckpt_model = s->model->info.n_ssm || s->conv_ckpt;
    if (keep > 0 && !ckpt_model && !rings_hold(s, (int)keep, false))
        keep = 0;
    /* a context that will select per request needs the votes of every
     * position it keeps, and they are held for one prefix only: the whole
     * prompt of the context before */
    const int votes = eng__select_prefix_votes(s);
    if (votes == 0 || (votes > 0 && p < (size_t)votes))
        keep = 0;
    else if (votes > 0 && keep > (size_t)votes)
        keep = (size_t)votes;
    /* Mamba-2 states hold the past of one position: the live states'
     * (ssm_pos) or the checkpoint's (ckpt_pos); convolution rows that
     * keep only what the next token reads (conv_stage), those of the
     * positions the rings hold or of the checkpoint's. The latest the
     * prefix reaches, and no other where its votes are kept. */
    bool from_ckpt = false;
    if (keep > 0 && ckpt_model) {
        size_t best = 0;
        if (s->model->info.n_ssm ? s->ssm_pos > 0 && (size_t)s->ssm_pos <= keep &&
                                       rings_hold(s, s->ssm_pos, false)
                                 : rings_hold(s, (int)keep, false))
            best = s->model->info.n_ssm ? (size_t)s->ssm_pos : keep;
        if (s->ckpt_pos > (int)best && (size_t)s->ckpt_pos <= keep &&
            rings_hold(s, s->ckpt_pos, true)) {
            best = (size_t)s->ckpt_pos;
            from_ckpt = true;
        }
        keep = votes > 0 && best != keep ? 0 : best;
    }
    *ret_votes = votes;
    *ret_ckpt = from_ckpt && keep > 0;
    return keep;
}

/* The Mamba-2 states back from their checkpoint (eng_session.ssm_ckpt,
 * which the ssm op writes), with the position it holds, and the
 * convolutions' rows from theirs (conv_ckpt, a copy of each ring). */
static void ckpt_restore(eng_session *s)
{
    const eng_model *m = s->model;
    const int lo = s->ckpt_pos;
    for (int il = 0; il < m->info.n_layer; il++) {
        if (s->ssm_ckpt && s->ssm_ckpt[il])
            memcpy(s->ssm_state[il], s->ssm_ckpt[il],
                   (size_t)m->layers[il].ssm.d_inner * m->layers[il].ssm.d_state * sizeof(float));
        if (!s->conv_ckpt || !s->conv_ckpt[il])
            continue;
        const size_t bytes = conv_ckpt_bytes(s, il);
        if (m->layers[il].conv_ch) {
            memcpy(s->k_cache[il], s->conv_ckpt[il], bytes);
            s->kv_lo[il] = lo - s->kv_rows[il] > 0 ? lo - s->kv_rows[il] : 0;
        } else {
            memcpy(s->ring[il], s->conv_ckpt[il], bytes);
            s->ring_lo[il] = lo - s->ring_rows > 0 ? lo - s->ring_rows : 0;
        }
    }
    if (m->info.n_ssm)
        s->ssm_pos = s->ckpt_pos;
}

int eng_session_reset_prefix(eng_session *s, const int32_t *tokens, size_t n)
{
    int votes;
    bool ckpt;
    const size_t keep = prefix_keep(s, tokens, n, &votes, &ckpt);
    eng_session_reset(s);
    if (ckpt)
        ckpt_restore(s);
    if (keep > 0) {
        s->n_past = (int)keep;
        if (votes > 0)
            eng__select_keep_votes(s);
    }
    return (int)keep;
}

int eng_session_prefix_len(const eng_session *s, const int32_t *tokens, size_t n)
{
    int votes;
    bool ckpt;
    return (int)prefix_keep(s, tokens, n, &votes, &ckpt);
}

/* Layer il's keys of rows src .. src + n - 1 rotated by -drop and stored
 * at rows dst .., n_batch rows at a time through the K scratch: read as
 * f32, rotated (all of a chunk's rows are one "token" of n * Hkv heads, so
 * one position, -drop, rotates them all), stored. With dst <= src, in
 * ascending order a chunk only writes rows below the ones later chunks
 * read, and it reads its own rows before it writes. ids: n_batch ints. */
static void rotate_keys(eng_session *s, int il, int src, int dst, int n, int drop, int32_t *ids)
{
    const eng_model *m = s->model;
    eng_backend *be = m->be;
    const eng_backend_iface *op = be->iface;
    const eng_layer *L = &m->layers[il];
    const int Hkv = L->n_head_kv, hd = L->head_dim, kvd = Hkv * hd;
    const bool q8 = s->kv_type == ENG_KV_Q8_0;
    const eng_weight kc = { .dtype = q8 ? ENG_DTYPE_Q8_0 : ENG_DTYPE_F16, .rows = s->kv_rows[il],
                            .cols = kvd, .data = s->k_cache[il] };
    for (int done = 0; done < n;) {
        const int c = n - done < s->n_batch ? n - done : s->n_batch;
        for (int i = 0; i < c; i++)
            ids[i] = src + done + i;
        op->upload(be, s->tokens, ids, (size_t)c * sizeof(*ids));
        op->get_rows(be, &kc, s->tokens, c, s->k);
        op->rope(be, s->k, 1, c * Hkv, hd, L->n_rot, -drop, L->rope_base,
                 s->rope_long ? m->rope_long : L->rope_freqs, m->rope_neox);
        if (q8)
            op->store_kv_q8(be, s->k, s->k_cache[il], (long)kvd, dst + done, c);
        else
            op->store_kv(be, s->k, s->k_cache[il], (long)kvd, dst + done, c);
        done += c;
    }
}

/* The first position a convolution layer reads after a shift of drop
 * positions: its window's w - 1 before the next one. */
static int conv_from(const eng_session *s, int il, int drop)
{
    const int from = s->n_past - drop - s->model->layers[il].window + 1;
    return from > 0 ? from : 0;
}

/* A convolution layer's rows after eng_session_shift(s, keep, drop): only
 * the positions the next token reads move (each to row p % kv_rows of its
 * new position p), through staging rows (conv_stage, else those past the
 * ring), since a move's target may be another's source; nothing below
 * them counts as held. */
static void conv_shift(eng_session *s, int il, int keep, int drop)
{
    eng_backend *be = s->model->be;
    const int rows = s->kv_rows[il], from = conv_from(s, il, drop), to = s->n_past - drop;
    const size_t rb = cache_row_bytes(s, il);
    char *c = s->k_cache[il];
    char *tmp = s->conv_stage ? (char *)s->conv_stage : c + (size_t)rows * rb;
    for (int q = from; q < to; q++)
        be->iface->copy(be, tmp + (size_t)(q - from) * rb,
                        c + (size_t)((q < keep ? q : q + drop) % rows) * rb, rb);
    for (int q = from; q < to; q++)
        be->iface->copy(be, c + (size_t)(q % rows) * rb, tmp + (size_t)(q - from) * rb, rb);
    s->kv_lo[il] = from;
}

int eng_session_shift(eng_session *s, int keep, int drop)
{
    const eng_model *m = s->model;
    eng_backend *be = m->be;
    const eng_backend_iface *op = be->iface;
    if (keep < 0 || drop < 0 || keep > s->n_past || drop > s->n_past - keep)
        return -EINVAL;
    if (s->generation != m->generation && s->n_past > 0)
        return -ESTALE; /* as eval would say: the context was built on other neurons */
    /* a Mamba-2 state cannot forget the dropped positions: the caller
     * evaluates what is left again (as llama.cpp's recurrent memory) */
    if (m->info.n_ssm && drop > 0)
        return -ENOTSUP;
    const bool q8 = s->kv_type == ENG_KV_Q8_0;
    if (q8 && !(op->dtypes & (1u << ENG_DTYPE_Q8_0)))
        return -ENOTSUP; /* get_rows cannot read the cache's blocks */
    if (drop == 0)
        return 0;
    const int first = keep + drop, n_move = s->n_past - first;
    /* A ring keeps its rows and relabels them drop positions lower; the
     * rows below first (dropped or kept) then stand for nothing valid, so
     * the window of the next position must lie above them: a window that
     * reaches back into the kept start is not in the ring (-ENOTSUP: the
     * caller evaluates again) */
    for (int il = 0; il < m->info.n_layer; il++) {
        if (kv_borrowed(s, il) || !s->k_cache[il]) /* (its source's rows move; no cache) */
            continue;
        if (m->layers[il].conv) {
            /* a convolution's ring holds the positions it reads next (those
             * at or past keep come from drop positions higher)? */
            for (int q = conv_from(s, il, drop); q < s->n_past - drop; q++)
                if ((q < keep ? q : q + drop) < s->kv_lo[il])
                    return -ENOTSUP;
            continue;
        }
        if (!is_ring(s, il))
            continue;
        const int lo = s->kv_lo[il] > first ? s->kv_lo[il] : first;
        const int want = s->n_past - drop - m->layers[il].window + 1;
        if ((want > 0 ? want : 0) < lo - drop)
            return -ENOTSUP;
    }
    int32_t *ids = malloc((size_t)s->n_batch * sizeof(*ids));
    if (!ids)
        return -ENOMEM;
    for (int il = 0; il < m->info.n_layer; il++) {
        const size_t rb = cache_row_bytes(s, il);
        if (kv_borrowed(s, il) || !s->k_cache[il])
            continue;
        if (m->layers[il].conv) {
            conv_shift(s, il, keep, drop);
            continue;
        }
        if (is_ring(s, il)) {
            /* a ring: its keys from first on rotated by -drop in place */
            const int base = s->kv_base[il], lo = s->kv_lo[il] > first ? s->kv_lo[il] : first;
            if (!m->layers[il].nope)
                rotate_keys(s, il, lo - base, lo - base, s->n_past - lo, drop, ids);
            s->kv_base[il] = base - drop;
            s->kv_lo[il] = lo - drop;
            continue;
        }
        /* keys drop rows lower, rotated back; values as they are: copies
         * of at most drop rows never overlap (source and destination lie
         * drop rows apart) */
        if (!m->layers[il].nope)
            rotate_keys(s, il, first, keep, n_move, drop, ids);
        /* (a NoPE layer's keys hold no position: they move as values do) */
        for (int kv = m->layers[il].nope ? 0 : 1; kv < 2; kv++) {
            char *c = kv ? s->v_cache[il] : s->k_cache[il];
            for (int done = 0; done < n_move;) {
                const int n = n_move - done < drop ? n_move - done : drop;
                op->copy(be, c + (size_t)(keep + done) * rb, c + (size_t)(first + done) * rb,
                         (size_t)n * rb);
                done += n;
            }
        }
    }
    free(ids);
    const int r = op->sync(be);
    if (r < 0) {
        /* a GPU failed halfway: the cache holds neither context */
        eng_session_reset(s);
        s->n_reusable = 0;
        return r;
    }
    s->n_past -= drop;
    /* (a checkpoint past keep was of positions that moved) */
    if (s->ckpt_pos > keep)
        s->ckpt_pos = -1;
    memmove(s->ctx_tokens + keep, s->ctx_tokens + first, (size_t)n_move * sizeof(int32_t));
    /* what moved was computed in the longer context: not what an
     * evaluation of the new one leaves, so not reusable */
    if (s->n_reusable > keep)
        s->n_reusable = keep;
    s->n_logits = 0;
    s->argmax_only = false;
    s->cands_only = false;
    return 0;
}

int eng_session_n_cached(const eng_session *s)
{
    return s->kv_generation == s->model->generation ? s->n_reusable : 0;
}

int eng_session_n_past(const eng_session *s)
{
    return s->n_past;
}

const eng_model *eng_session_model(const eng_session *s)
{
    return s->model;
}

int eng_session_n_ctx(const eng_session *s)
{
    return s->n_ctx;
}

eng_kv_type eng_session_kv_type(const eng_session *s)
{
    return s->kv_type;
}

size_t eng_session_kv_bytes(const eng_session *s)
{
    size_t bytes = 0;
    for (int il = 0; il < s->model->info.n_layer; il++)
        if (!kv_borrowed(s, il) && s->k_cache[il]) /* (nemotron_h's MLPs: none) */
            bytes += cache_bytes(s, il) * (s->v_cache[il] ? 2 : 1);
    for (int il = 0; s->ring && il < s->model->info.n_layer; il++) /* (falcon-h1's) */
        if (s->ring[il])
            bytes += ring_bytes(s, il);
    for (int il = 0; il < s->model->info.n_layer; il++) /* (the rings' checkpoint) */
        bytes += conv_ckpt_bytes(s, il);
    return bytes + 2 * s->model->info.bytes_ssm_state; /* (and their checkpoint) */
}

const float *eng_session_logits(const eng_session *s, int i)
{
    if (s->n_logits == 0)
        return NULL;
    if (i < 0)
        i = s->n_last_eval + i;
    int row = i - s->logits_first;
    if (row < 0 || row >= s->n_logits)
        return NULL;
    return s->logits + (size_t)row * s->model->info.n_vocab;
}

int32_t eng_session_argmax(const eng_session *s)
{
    int32_t best = -1;
    if (s->argmax_only) {
        best = s->argmax;
    } else {
        const float *l = eng_session_logits(s, -1);
        if (!l)
            return -ENODATA;
        /* the rule of the backends' argmax (backend.h), so that a token
         * does not depend on where it was picked */
        for (int i = 0; i < s->model->info.n_vocab; i++)
            if (!isnan(l[i]) && (best < 0 || l[i] > l[best]))
                best = i;
    }
    return best < 0 ? -EDOM : best;
}

int eng_session_set_candidates(eng_session *s, int k)
{
    const eng_model *m = s ? s->model : NULL;
    if (!s || k < 1 || k > ENG_CAND_MAX)
        return -EINVAL;
    if (m->be->iface->host_memory || !m->be->iface->top_cands)
        return -ENOTSUP;
    const size_t n = eng_candidates_size(m->info.n_vocab, k);
    if (n > s->cand_cap) {
        /* a graph that wrote into the old buffer must not run again */
        eng__session_changed(s);
        if (s->cand_dev)
            m->be->iface->mem_free(m->be, s->cand_dev);
        free(s->cand_host);
        s->cand_dev = s->cand_host = NULL;
        s->cand_cap = 0;
        s->cand_k = 0;
        s->cands_only = false;
        s->cand_dev = eng__session_alloc(s, n * 8);
        s->cand_host = malloc(n * 8);
        if (!s->cand_dev || !s->cand_host)
            return -ENOMEM;
        s->cand_cap = n;
    }
    if (k != s->cand_k)
        s->cands_only = false; /* what the last eval kept was for another k */
    s->cand_k = k;
    s->n_cand = n;
    return 0;
}

long eng_session_candidates(const eng_session *s, const float **vals, const int32_t **ids)
{
    if (!s || !vals || !ids)
        return -EINVAL;
    if (!s->cands_only)
        return -ENODATA;
    *vals = (const float *)s->cand_host;
    *ids = (const int32_t *)((const float *)s->cand_host + s->n_cand);
    return (long)s->n_cand;
}

/* ---- the forward pass ---- */

/* Decode's hints to the backend (backend.h prefetch): after the rope, the
 * attention's output matrix and the FFN's rows that the step computes
 * (its slots as the ffn op gets them; none when the step picks them
 * itself); after the FFN, the next layer's q, k and v (and gate), or the
 * output head.
 * Between those points run a layer's short kernels (rope, attention,
 * norms), which on a GPU leave its memory idle. */
static void prefetch_wo_ffn(eng_session *s, int il, const int32_t *sel, int n_sel, bool no_slots)
{
    const eng_model *m = s->model;
    const eng_layer *L = &m->layers[il];
    const eng_span sp = { L->wo.data, weight_bytes(&L->wo) };
    m->be->iface->prefetch(m->be, &sp, 1, no_slots ? NULL : &L->ffn, sel, n_sel);
}

static void prefetch_next(eng_session *s, int il, bool logits)
{
    const eng_model *m = s->model;
    if (il + 1 < m->info.n_layer) {
        const eng_layer *L = &m->layers[il + 1];
        const eng_span sp[4] = {
            { L->wq.data, weight_bytes(&L->wq) },
            { L->wk.data, weight_bytes(&L->wk) },
            { L->wv.data, weight_bytes(&L->wv) },
            { L->wg.data, weight_bytes(&L->wg) }, /* (qwen35's gate) */
        };
        m->be->iface->prefetch(m->be, sp, L->wg.data ? 4 : 3, NULL, NULL, 0);
    } else if (logits) {
        const eng_span sp = { m->output.data, weight_bytes(&m->output) };
        m->be->iface->prefetch(m->be, &sp, 1, NULL, NULL, 0);
    }
}

/* mistral3's temperature on q at position pos: 1 + c ln(floor(pos / n) +
 * 1), 1 within the original context n. */
static float attn_temp(const eng_model *m, int pos)
{
    return 1.0f + m->attn_temp_scale * logf(floorf((float)pos / (float)m->attn_temp_floor) + 1.0f);
}

/* gemma3n's AltUp, on the host (gemma4's layers load on the CPU only).
 * Stream j of the n tokens: rows [n][n_embd] at base + j n_batch n_embd. */
static float *alt_stream(const eng_session *s, float *base, int j)
{
    return base + (size_t)j * (size_t)s->n_batch * (size_t)s->model->info.n_embd;
}

/* rows [r0, r0 + rows) of w */
static eng_weight weight_rows(const eng_weight *w, int r0, int rows)
{
    return (eng_weight){ w->dtype, rows, w->cols,
                         (const uint8_t *)w->data + eng_dtype_bytes(w->dtype,
                                                                    (size_t)r0 * w->cols) };
}

static double row_norm(const float *x, int E)
{
    double sq = 0.0;
    for (int e = 0; e < E; e++)
        sq += (double)x[e] * x[e];
    return sqrt(sq);
}

/* rows xs [n][E] times magnitude / its own each (the magnitude a row's
 * square root of its sum of squares, as llama.cpp's) */
static void scale_to(float *xs, const float *like, int n, int E)
{
    for (int t = 0; t < n; t++) {
        const float c = (float)(row_norm(like + (size_t)t * E, E) /
                                row_norm(xs + (size_t)t * E, E));
        for (int e = 0; e < E; e++)
            xs[(size_t)t * E + e] *= c;
    }
}

/* The modalities of rows xs [n][E], tanh(W_router norm(xs) / n_embd), in
 * s->alt_mod [n][NA] (s->xn the scratch) */
static void altup_modalities(eng_session *s, const eng_layer *L, const float *xs, int n)
{
    const eng_model *m = s->model;
    const eng_backend_iface *op = m->be->iface;
    const int E = m->info.n_embd;
    op->rmsnorm(m->be, xs, L->altup_router_norm, s->xn, n, E, m->rms_eps);
    op->scale(m->be, s->xn, 1.0f / (float)E, (long)n * E);
    op->matmul(m->be, &L->altup_router, NULL, s->xn, s->alt_mod, n);
    for (long i = 0; i < (long)n * m->n_altup; i++)
        s->alt_mod[i] = tanhf(s->alt_mod[i]);
}

/* The streams of the embeddings x: x, and its projections scaled to its
 * magnitude */
static void altup_init(eng_session *s, int n)
{
    const eng_model *m = s->model;
    const int E = m->info.n_embd;
    memcpy(alt_stream(s, s->alt, 0), s->x, (size_t)n * E * sizeof(float));
    for (int j = 1; j < m->n_altup; j++) {
        const eng_weight w = weight_rows(&m->altup_proj, (j - 1) * E, E);
        float *a = alt_stream(s, s->alt, j);
        m->be->iface->matmul(m->be, &w, NULL, s->x, a, n);
        scale_to(a, s->x, n, E);
    }
}

/* Each stream's prediction: itself plus a mix of all, the mix's weights
 * the prediction's coefficients times the first stream's modalities; the
 * first's into x, which the layer computes */
static void altup_predict(eng_session *s, const eng_layer *L, int n)
{
    const eng_model *m = s->model;
    const int E = m->info.n_embd, NA = m->n_altup;
    altup_modalities(s, L, alt_stream(s, s->alt, 0), n);
    const float *a[16];
    for (int k = 0; k < NA; k++)
        a[k] = alt_stream(s, s->alt, k);
    for (int t = 0; t < n; t++) {
        const size_t r = (size_t)t * E;
        float c[16 * 16];
        for (int i = 0; i < NA * NA; i++) {
            c[i] = 0.0f;
            for (int k = 0; k < NA; k++)
                c[i] += L->altup_pred[i * NA + k] * s->alt_mod[t * NA + k];
        }
        for (int j = 0; j < NA; j++) {
            float *p = alt_stream(s, s->alt_pred, j) + r;
            for (int e = 0; e < E; e++) {
                float v = 0.0f;
                for (int k = 0; k < NA; k++)
                    v += c[j * NA + k] * a[k][r + e];
                p[e] = a[j][r + e] + v;
            }
        }
    }
    memcpy(s->x, alt_stream(s, s->alt_pred, 0), (size_t)n * E * sizeof(float));
}

/* The streams corrected by how far the layer's output x moved from the
 * first's prediction (each by 1 + its correction coefficients times x's
 * modalities), then the per-layer input's block, of the first stream
 * times its scale, added to the others */
static void altup_correct(eng_session *s, const eng_layer *L, int il, int n)
{
    const eng_model *m = s->model;
    eng_backend *be = m->be;
    const eng_backend_iface *op = be->iface;
    const int E = m->info.n_embd, NA = m->n_altup, P = m->n_embd_per_layer;
    altup_modalities(s, L, s->x, n);
    for (int t = 0; t < n; t++) {
        const size_t r = (size_t)t * E;
        const float *p0 = alt_stream(s, s->alt_pred, 0) + r;
        for (int j = 0; j < NA; j++) {
            float c = 0.0f;
            for (int k = 0; k < NA; k++)
                c += L->altup_corr[j * NA + k] * s->alt_mod[t * NA + k];
            c += 1.0f;
            const float *p = alt_stream(s, s->alt_pred, j) + r;
            float *a = alt_stream(s, s->alt, j) + r;
            for (int e = 0; e < E; e++)
                a[e] = (s->x[r + e] - p0[e]) * c + p[e];
        }
        for (int e = 0; e < E; e++)
            s->xn[r + e] = alt_stream(s, s->alt, 0)[r + e] * L->altup_scale[e];
    }
    if (!P)
        return;
    op->matmul(be, &L->ple_gate, NULL, s->xn, s->ple_g, n);
    op->gelu_mul(be, s->ple_g, s->ple_in + (size_t)il * P, n, P, (long)P * m->info.n_layer);
    op->matmul(be, &L->ple_proj, NULL, s->ple_g, s->o, n);
    op->rmsnorm(be, s->o, L->ple_norm, s->o, n, E, m->rms_eps);
    for (int j = 1; j < NA; j++)
        op->add(be, alt_stream(s, s->alt, j), s->o, (long)n * E);
}

/* The output's x: the mean of the first stream and the others'
 * projections, each scaled to the first's magnitude */
static void altup_merge(eng_session *s, int n)
{
    const eng_model *m = s->model;
    const int E = m->info.n_embd, NA = m->n_altup;
    const float *a0 = alt_stream(s, s->alt, 0);
    memcpy(s->x, a0, (size_t)n * E * sizeof(float));
    for (int j = 1; j < NA; j++) {
        const eng_weight w = weight_rows(&m->altup_unembd, (j - 1) * E, E);
        float *u = alt_stream(s, s->alt_pred, j);
        m->be->iface->matmul(m->be, &w, NULL, alt_stream(s, s->alt, j), u, n);
        scale_to(u, a0, n, E);
        m->be->iface->add(m->be, s->x, u, (long)n * E);
    }
    m->be->iface->scale(m->be, s->x, 1.0f / (float)NA, (long)n * E);
}

/* The ops of one forward pass over n tokens at positions n_past ..: the
 * tokens are in s->tokens already; the logits of rows first .. n-1 go to
 * `out` (backend memory) when out is not NULL, and the argmax of the last
 * one to `argmax` (backend memory) when that is not NULL either. Nothing
 * here changes the session on the host except what the prefill's neuron
 * vote observes, so a decode step can be issued twice (see graphs in
 * eng__forward). hidden (embeddings; out NULL): the last hidden states of
 * all n rows, after the output norm, are left in s->xn. */
static void forward_ops(eng_session *s, int n, int first, float *out, int32_t *argmax, bool cands,
                        bool hidden)
{
    const eng_model *m = s->model;
    eng_backend *be = m->be;
    const eng_backend_iface *op = be->iface;
    const int E = m->info.n_embd, H = m->info.n_head;
    const int pos0 = s->n_past;
    const bool want_act = eng__select_wants_act(s);
    const bool host = op->host_memory;
    const bool pf = n == 1 && op->prefetch; /* decode: hint what comes */

    /* x [n][E]: token embeddings */
    op->get_rows(be, &m->tok_embd, s->tokens, n, s->x);
    if (m->embd_scale > 0.0f)
        op->scale(be, s->x, m->embd_scale, (long)n * E);
    /* gemma4: each token's per-layer inputs [n_layer][P], of its table row
     * (ple_in, read by ple_rows) and its embedding's projection */
    const int P = m->n_embd_per_layer;
    const long LP = (long)P * m->info.n_layer;
    if (P) {
        op->matmul(be, &m->ple_model_proj, NULL, s->x, s->ple_proj, n);
        op->scale(be, s->ple_proj, 1.0f / sqrtf((float)E), (long)n * LP);
        op->rmsnorm(be, s->ple_proj, m->ple_proj_norm, s->ple_proj, n * m->info.n_layer, P,
                    m->rms_eps);
        op->scale(be, s->ple_in, sqrtf((float)P), (long)n * LP);
        op->add(be, s->ple_in, s->ple_proj, (long)n * LP);
        op->scale(be, s->ple_in, 1.0f / sqrtf(2.0f), (long)n * LP);
    }
    if (m->n_altup)
        altup_init(s, n);
    /* a residual not yet added to x: the next norm adds it (add_rmsnorm,
     * one kernel on a GPU) */
    const float *pending = NULL;

    for (int il = 0; il < m->info.n_layer; il++) {
        const eng_layer *L = &m->layers[il];
        /* the layer's heads; gemma4's last layers attend over an earlier
         * layer's cache, with no keys or values of their own */
        const int hd = L->head_dim, Hkv = L->n_head_kv;
        const size_t kvd = (size_t)Hkv * hd;
        const bool own_kv = L->kv_src == il;
        if (m->n_altup) /* gemma3n: x the first stream's prediction */
            altup_predict(s, L, n);

        /* attention block: xn = norm(x); q,k,v = xn W^T; rope; cache; attend
         * (lfm2's convolution block: b, c, x = xn W^T; cache; convolve) */
        const eng_weight *w3[3] = { &L->wq, &L->wk, &L->wv };
        const float *b3[3] = { L->bq, L->bk, L->bv };
        float *y3[3] = { s->q, s->k, s->v };
        const bool same = L->wk.cols == L->wq.cols && L->wv.cols == L->wq.cols;
        /* the residual the FFN block adds to x before its norm: the block's
         * output o, or (an MLP alone: nemotron_h) the one still pending,
         * NULL: none */
        const float *res = s->o;
        if (L->mlp_only) {
            res = pending; /* (q, k, v, att and o untouched: no block) */
        } else if (L->attn_norm && n == 1 && op->norm_matmul3 && same) {
            /* decode: the norm and q, k, v in one call (a GPU: one kernel) */
            op->norm_matmul3(be, s->x, pending, L->attn_norm, m->rms_eps, s->xn, w3, b3, y3);
        } else {
            /* the block's input: x normalised, or (olmo2, exaone4: no norm
             * before a block) x as it is */
            const float *in = L->attn_norm ? s->xn : s->x;
            if (!L->attn_norm && pending)
                op->add(be, s->x, pending, (long)n * E);
            else if (pending)
                op->add_rmsnorm(be, s->x, pending, L->attn_norm, s->xn, n, E, m->rms_eps);
            else if (L->attn_norm)
                op->rmsnorm(be, s->x, L->attn_norm, s->xn, n, E, m->rms_eps);
            if (op->matmul3 && same) {
                /* one call (a GPU: one kernel for decode) */
                op->matmul3(be, w3, b3, in, y3, n);
            } else {
                op->matmul(be, &L->wq, L->bq, in, s->q, n);     /* q [n][H*hd]   */
                if (own_kv) {
                    op->matmul(be, &L->wk, L->bk, in, s->k, n); /* k [n][Hkv*hd] */
                    op->matmul(be, &L->wv, L->bv, in, s->v, n); /* v [n][Hkv*hd] */
                }
            }
        }
        pending = NULL;
        if (L->laurel_l.data) { /* gemma3n: Laurel's branch of xn */
            op->matmul(be, &L->laurel_l, NULL, s->xn, s->laurel_r, n);
            op->matmul(be, &L->laurel_r, NULL, s->laurel_r, s->laurel, n);
            op->rmsnorm(be, s->laurel, L->laurel_norm, s->laurel, n, E, m->rms_eps);
            op->add(be, s->laurel, s->xn, (long)n * E);
        }
        if (L->wg.data) /* qwen35: attention's output gate, of the normalised x */
            op->matmul(be, &L->wg, NULL, s->xn, s->gate, n);
        /* the FFN's slots and how it computes them (the ffn ops below) */
        const int32_t *sel = s->selected ? s->ffn_sel[il] : NULL; /* host list */
        const int32_t *sel_be = sel && !host ? s->ffn_sel_dev[il] : sel;
        const int n_sel = sel ? s->ffn_n_sel[il] : L->ffn.n_slots;
        /* (gemma3n's cut activations: the ffn op only, over what sel says;
         * select.c's dyn_copy copies nothing for them) */
        const bool cut = L->ffn.act == ENG_ACT_GELU_TOPK;
        const int pick = s->selected && !want_act && !cut ? s->pick_k[il] : 0;
        const bool runs = !pick && sel && n == 1 && !want_act && !cut && s->dyn &&
                          s->dyn[il].w.n_slots > 0;
        /* (slots the step chooses itself, not hinted: a pick's, the router's) */
        const bool own_slots = pick > 0 || runs || L->moe.router.data;
        if (L->conv_ch) {
            /* lfm2: att = c * conv(b * x) over the ring's rows (or the
             * staging rows: conv_begin); granitehybrid: Mamba-2's mixer of
             * z, xBC and dt, its convolution over them likewise, its state
             * the session's */
            int rows;
            float *ring = s->k_cache[il];
            float *cr = conv_begin(s, ring, s->kv_rows[il], &s->kv_lo[il], L->window, L->conv_ch,
                                   pos0, n, &rows);
            if (pf)
                prefetch_wo_ffn(s, il, sel_be, n_sel, own_slots);
            if (L->conv)
                op->shortconv(be, s->q, s->k, s->v, L->conv, m->conv_len, cr, pos0, rows, n, E,
                              s->att);
            else
                op->ssm(be, &L->ssm, s->q, s->k, s->v, cr, pos0, rows, s->ssm_state[il],
                        s->ckpt_at ? s->ssm_ckpt[il] : NULL, s->ckpt_at, n, s->att);
            conv_end(s, il, ring, s->kv_rows[il], cr, rows, L->conv_ch, pos0, n);
        } else if (L->mlp_only) {
            /* nemotron_h: the FFN block below is the layer */
        } else {
            /* the cache row of pos0: pos0, or in a ring its row (the keys are
             * rotated for their positions, so attention needs only the rows) */
            const int row0 = own_kv ? ring_room(s, il, pos0, n) : pos0 - s->kv_base[L->kv_src];
            if (L->q_norm && m->qk_norm_full) {
                /* olmo2: each token's q and k RMS-normalised whole */
                op->rmsnorm(be, s->q, L->q_norm, s->q, n, H * hd, m->rms_eps);
                op->rmsnorm(be, s->k, L->k_norm, s->k, n, Hkv * hd, m->rms_eps);
            } else if (L->q_norm && !m->qk_norm_after_rope) {
                /* qwen3, gemma3: each head of q and k RMS-normalised (rows of hd) */
                op->rmsnorm(be, s->q, L->q_norm, s->q, n * H, hd, m->rms_eps);
                if (own_kv)
                    op->rmsnorm(be, s->k, L->k_norm, s->k, n * Hkv, hd, m->rms_eps);
            }
            if (L->v_norm && own_kv) /* gemma4: each head of v, without a weight */
                op->rmsnorm(be, s->v, m->ones, s->v, n * Hkv, hd, m->rms_eps);
            /* RoPE's divisors: the layer's, or LongRoPE's long ones for this session */
            const float *ff = s->rope_long ? m->rope_long : L->rope_freqs;
            if (!own_kv) {
                op->rope(be, s->q, n, H, hd, L->n_rot, pos0, L->rope_base, ff, m->rope_neox);
            } else if (op->rope_store && s->kv_type == ENG_KV_F16 && row0 == pos0 && !L->nope &&
                       !m->qk_norm_after_rope) {
                op->rope_store(be, s->q, s->k, s->v, n, H, Hkv, hd, L->n_rot, pos0, L->rope_base,
                               ff, m->rope_neox, s->k_cache[il], s->v_cache[il]);
            } else {
                if (!L->nope) { /* (smollm3's NoPE layers store q and k as they are) */
                    op->rope(be, s->q, n, H, hd, L->n_rot, pos0, L->rope_base, ff, m->rope_neox);
                    op->rope(be, s->k, n, Hkv, hd, L->n_rot, pos0, L->rope_base, ff, m->rope_neox);
                }
                if (L->q_norm && m->qk_norm_after_rope) { /* hunyuan: per head, after RoPE */
                    op->rmsnorm(be, s->q, L->q_norm, s->q, n * H, hd, m->rms_eps);
                    op->rmsnorm(be, s->k, L->k_norm, s->k, n * Hkv, hd, m->rms_eps);
                }
                if (s->kv_type == ENG_KV_Q8_0) {
                    op->store_kv_q8(be, s->k, s->k_cache[il], (long)kvd, row0, n);
                    op->store_kv_q8(be, s->v, s->v_cache[il], (long)kvd, row0, n);
                } else {
                    op->store_kv(be, s->k, s->k_cache[il], (long)kvd, row0, n);
                    op->store_kv(be, s->v, s->v_cache[il], (long)kvd, row0, n);
                }
            }
            /* mistral3: q's temperature from the original context on
             * (llama.cpp's scale after RoPE) */
            for (int t = 0; m->attn_temp_scale != 0.0f && t < n; t++) {
                const float c = attn_temp(m, pos0 + t);
                if (c != 1.0f)
                    op->scale(be, s->q + (size_t)t * H * hd, c, (long)H * hd);
            }
            if (pf)
                prefetch_wo_ffn(s, il, sel_be, n_sel, own_slots);
            if (s->kv_type == ENG_KV_Q8_0)
                op->attention_q8(be, s->q, s->k_cache[il], s->v_cache[il], s->att, n, row0, H,
                                 Hkv, hd, L->attn_scale, L->window, m->attn_softcap, L->sinks);
            else /* att [n][H*hd] */
                op->attention(be, s->q, s->k_cache[il], s->v_cache[il], s->att, n, row0, H, Hkv,
                              hd, L->attn_scale, L->window, m->attn_softcap, L->sinks);
            if (L->wg.data)
                op->mul_sigmoid(be, s->att, s->gate, (long)n * H * hd);
        }
        if (!L->mlp_only)
            op->matmul(be, &L->wo, L->bo, s->att, s->o, n);      /* o [n][E]      */
        if (L->sout.data) {
            /* falcon-h1: Mamba-2's mixer of the same xn beside attention,
             * its output added to attention's (q, k, v and att are free
             * again; ff too, once the block's norm took the pending
             * residual) */
            const eng_weight *m3[3] = { &L->sz, &L->sxbc, &L->sdt };
            float *z3[3] = { s->q, s->k, s->v };
            if (op->matmul3) { /* (one x for the three, as attention's q, k, v) */
                op->matmul3(be, m3, NULL, s->xn, z3, n);
            } else {
                for (int i = 0; i < 3; i++)
                    op->matmul(be, m3[i], NULL, s->xn, z3[i], n);
            }
            const int nc = eng_ssm_conv_ch(&L->ssm);
            int rows;
            float *cr = conv_begin(s, s->ring[il], s->ring_rows, &s->ring_lo[il], L->ssm.d_conv,
                                   nc, pos0, n, &rows);
            op->ssm(be, &L->ssm, s->q, s->k, s->v, cr, pos0, rows, s->ssm_state[il],
                    s->ckpt_at ? s->ssm_ckpt[il] : NULL, s->ckpt_at, n, s->att);
            conv_end(s, il, s->ring[il], s->ring_rows, cr, rows, nc, pos0, n);
            op->matmul(be, &L->sout, NULL, s->att, s->ff, n);
            op->add(be, s->o, s->ff, (long)n * E);
        }
        if (L->attn_post_norm) /* gemma3: the output normalised before it joins x */
            op->rmsnorm(be, s->o, L->attn_post_norm, s->o, n, E, m->rms_eps);
        if (m->residual_scale > 0.0f) /* granite: each branch scaled before it joins x */
            op->scale(be, s->o, m->residual_scale, (long)n * E);
        if (L->laurel_l.data) {
            /* gemma3n: (x + o + Laurel's) / sqrt(2) where o joins x below */
            op->add(be, s->o, s->laurel, (long)n * E);
            op->scale(be, s->o, 1.0f / sqrtf(2.0f), (long)n * E);
            op->scale(be, s->x, 1.0f / sqrtf(2.0f), (long)n * E);
        }

        if (L->no_ffn) {
            /* nemotron_h: attention or a mixer alone; o joins x as an
             * FFN's output would (added by the next norm) */
            if (pf)
                prefetch_next(s, il, out != NULL);
            if (op->add_rmsnorm) {
                pending = s->o;
                continue;
            }
            op->add(be, s->x, s->o, (long)n * E);
            continue;
        }

        /* FFN block over the session's selected neurons (NULL: all loaded);
         * prefill with selective computation, and profiling, also keep the
         * activations a [n][n_sel] */
        const float *xin = L->ffn_norm ? s->xn : s->x; /* the FFN's input */
        if (n == 1 && op->norm_ffn && !pick && !runs && !want_act && L->ffn_norm &&
            !L->moe.router.data && !cut && res == s->o) {
            /* decode: the norm and the FFN in one call (a GPU: the norm in
             * the FFN's first kernel) */
            op->norm_ffn(be, s->x, s->o, L->ffn_norm, m->rms_eps, s->xn, &L->ffn, sel_be, n_sel,
                         s->ff);
        } else {
            if (!L->ffn_norm) {
                op->add(be, s->x, s->o, (long)n * E);
            } else if (!res) {
                op->rmsnorm(be, s->x, L->ffn_norm, s->xn, n, E, m->rms_eps);
            } else if (op->add_rmsnorm) {
                op->add_rmsnorm(be, s->x, res, L->ffn_norm, s->xn, n, E, m->rms_eps);
            } else {
                op->add(be, s->x, res, (long)n * E);
                op->rmsnorm(be, s->x, L->ffn_norm, s->xn, n, E, m->rms_eps);
            }
            if (L->moe_post_norm) {
                /* gemma4's experts beside a dense MLP: the MLP over xn,
                 * normalised; the experts over x's norm of their own, the
                 * router over x's plain norm times its scale (in o, which
                 * x holds now), normalised; both joined in ff */
                op->ffn(be, &L->mlp, NULL, L->mlp.n_slots, s->xn, s->ff, n, NULL);
                op->rmsnorm(be, s->ff, L->mlp_post_norm, s->ff, n, E, m->rms_eps);
                op->rmsnorm(be, s->x, L->moe_norm, s->xn, n, E, m->rms_eps);
                op->rmsnorm(be, s->x, L->router_norm, s->o, n, E, m->rms_eps);
                op->moe(be, &L->ffn, &L->moe, s->xn, s->o, s->moe_out, n, s->moe_work);
                op->rmsnorm(be, s->moe_out, L->moe_post_norm, s->moe_out, n, E, m->rms_eps);
                op->add(be, s->ff, s->moe_out, (long)n * E);
            } else if (L->moe.router.data) { /* experts: the router's n_used a token */
                op->moe(be, &L->ffn, &L->moe, xin, NULL, s->ff, n, s->moe_work);
            }
            else if (pick > 0 && s->compute.pick == ENG_PICK_EXACT) {
                /* each token the pick slots of its largest activations,
                 * among every loaded slot (n_sel) or the request's
                 * candidates: the static run in place and the session's
                 * copy of the others (select.c), or one run */
                const eng_dyn_copy *d = sel && s->dyn ? &s->dyn[il] : NULL;
                const bool copied = d && d->w.n_slots > 0;
                op->ffn_top(be, &L->ffn, copied ? d->from : n_sel, copied ? &d->w : NULL,
                            copied ? d->w.n_slots : 0, pick, xin, s->ff, n);
            } else if (pick > 0) /* ENG_PICK_TOKEN: each token its own best pick slots */
                op->ffn_pick(be, &L->ffn, pick, xin, s->ff, n);
            else if (runs)
                /* the same slots, the dynamic ones from the session's copy */
                op->ffn_runs(be, &L->ffn, s->dyn[il].from, &s->dyn[il].w, s->dyn[il].w.n_slots,
                             xin, s->ff);
            else
                op->ffn(be, &L->ffn, sel_be, n_sel, xin, s->ff, n, want_act ? s->act : NULL);
        }
        if (pf)
            prefetch_next(s, il, out != NULL);
        /* a backend that counts the prefill votes itself keeps a (select.c) */
        if (want_act && !eng__select_observe_backend(s, il, s->act, n, sel, n_sel)) {
            const float *a = s->act;
            if (!host) {
                op->download(be, s->act_host, s->act, (size_t)n * n_sel * sizeof(float));
                a = s->act_host;
            }
            eng__select_observe(s, il, a, n, sel, n_sel, host ? xin : NULL);
        }
        /* what the neurons not computed would add: ENG_COMP_LINEAR's map of
         * the FFN's input (host memory) */
        if (s->lin && host)
            eng__select_comp_apply(s, il, xin, s->ff, n);
        /* and as a constant (select.c), which joins the FFN's output:
         * before gemma3's norm of it or granite's scale, else into x */
        const float *bias = s->ffn_bias[il];
        if (L->ffn_post_norm || m->residual_scale > 0.0f) {
            for (int t = 0; bias && t < n; t++)
                op->add(be, s->ff + (size_t)t * E, bias, E);
            bias = NULL;
            if (L->ffn_post_norm)
                op->rmsnorm(be, s->ff, L->ffn_post_norm, s->ff, n, E, m->rms_eps);
            if (m->residual_scale > 0.0f)
                op->scale(be, s->ff, m->residual_scale, (long)n * E);
        }
        if (op->add_rmsnorm && !bias && !L->ple_gate.data && !L->out_scaled && !m->n_altup) {
            pending = s->ff; /* added by the next norm, before ff is written again */
            continue;
        }
        op->add(be, s->x, s->ff, (long)n * E);
        for (int t = 0; bias && t < n; t++)
            op->add(be, s->x + (size_t)t * E, bias, E);
        if (m->n_altup) {
            altup_correct(s, L, il, n);
        } else if (L->ple_gate.data) {
            /* gemma4: x += norm(W_proj (gelu(W_gate x) * its per-layer input)) */
            op->matmul(be, &L->ple_gate, NULL, s->x, s->ple_g, n);
            op->gelu_mul(be, s->ple_g, s->ple_in + (size_t)il * P, n, P, LP);
            op->matmul(be, &L->ple_proj, NULL, s->ple_g, s->o, n);
            op->rmsnorm(be, s->o, L->ple_norm, s->o, n, E, m->rms_eps);
            op->add(be, s->x, s->o, (long)n * E);
        }
        if (L->out_scaled) /* gemma4: the whole of x */
            op->scale(be, s->x, L->out_scale, (long)n * E);
    }

    if (m->n_altup)
        altup_merge(s, n);
    if (hidden)
        first = 0;
    if (out || hidden) {
        /* logits of rows first .. n-1 (x is not read after this pass, so
         * the rows before first need no pending residual) */
        if (pending)
            op->add_rmsnorm(be, s->x + (size_t)first * E, pending + (size_t)first * E,
                            m->output_norm, s->xn, n - first, E, m->rms_eps);
        else
            op->rmsnorm(be, s->x + (size_t)first * E, m->output_norm, s->xn, n - first, E,
                        m->rms_eps);
        if (!out)
            return;
        op->matmul(be, &m->output, NULL, s->xn, out, n - first); /* logits [rows][V] */
        if (m->final_softcap > 0.0f) /* gemma2 */
            op->softcap(be, out, m->final_softcap, (long)(n - first) * m->info.n_vocab);
        if (m->logit_scale > 0.0f) /* granite */
            op->scale(be, out, 1.0f / m->logit_scale, (long)(n - first) * m->info.n_vocab);
        /* greedy: the last row's argmax [1] (backend), inside a decode graph */
        if (argmax)
            op->argmax(be, out + (size_t)(n - first - 1) * m->info.n_vocab, m->info.n_vocab,
                       argmax);
        /* sampling: the last row's candidates (backend), inside the graph too */
        if (cands)
            op->top_cands(be, out + (size_t)(n - first - 1) * m->info.n_vocab, m->info.n_vocab,
                          s->cand_k, (float *)s->cand_dev,
                          (int32_t *)((float *)s->cand_dev + s->n_cand));
    }
}

/* gemma4: the n tokens' rows of the per-layer embedding table, read from
 * the file into s->ple_in as f32 (host memory: load_weights refuses other
 * backends). A row that cannot be read whole (the file cut short since)
 * is -EIO. */
static int ple_rows(eng_session *s, const int32_t *tokens, int n)
{
    const eng_model *m = s->model;
    const size_t LP = (size_t)m->n_embd_per_layer * m->info.n_layer, rb = m->ple_tok.row_bytes;
    for (int t = 0; t < n; t++) {
        const uint64_t off = m->ple_tok.offset + (uint64_t)tokens[t] * rb;
        size_t got = 0;
        while (got < rb) {
            const ssize_t k = pread(m->ple_tok.fd, (char *)s->ple_raw + got, rb - got,
                                    (off_t)(off + got));
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0)
                return -EIO;
            got += (size_t)k;
        }
        if (eng_dequant_row_f32(m->ple_tok.type, s->ple_raw, s->ple_in + (size_t)t * LP, LP) < 0)
            return -EIO;
    }
    return 0;
}

int eng__forward(eng_session *s, const int32_t *tokens, int n, bool all_logits, float *logits,
                 int32_t *argmax, bool cands, float *hidden)
{
    const eng_model *m = s->model;
    eng_backend *be = m->be;
    const eng_backend_iface *op = be->iface;
    const int V = m->info.n_vocab;
    const bool host = op->host_memory;

    /* logits of the rows asked for: all, or only the last; a backend that
     * is not host memory writes them to its own buffer first */
    int first = all_logits ? 0 : n - 1;
    int rows = n - first;
    float *out = logits;
    if ((logits || argmax || cands) && !host) {
        if (rows > s->logits_dev_cap) {
            eng__session_changed(s);
            op->mem_free(be, s->logits_dev);
            s->logits_dev_cap = 0;
            if (!(s->logits_dev = eng__session_alloc(s, (size_t)rows * V * sizeof(float))))
                return -ENOMEM;
            s->logits_dev_cap = rows;
        }
        out = s->logits_dev;
    }

    op->upload(be, s->tokens, tokens, (size_t)n * sizeof(int32_t));
    if (m->n_embd_per_layer) {
        const int r = ple_rows(s, tokens, n);
        if (r < 0)
            return r;
    }
    /* A decode step (one token, nothing to observe on the host) goes to the
     * backend as one graph when it offers them: replayed at this position
     * when the session's key is the one recorded, else recorded now. When
     * the graph does not come about, nothing of it ran and the ops go again
     * one by one. */
    int32_t *am = argmax ? s->argmax_dev : NULL;
    const int tail = am ? 1 : cands ? 2 + s->cand_k : 0;
    if (tail != s->graph_tail) {
        s->graph_tail = tail; /* the step's ops end differently */
        eng__session_changed(s);
    }
    /* a decode graph holds q's temperature as a constant (mistral3): a
     * step past a multiple of the original context records another */
    const float temp = m->attn_temp_scale != 0.0f ? attn_temp(m, s->n_past) : 1.0f;
    if (temp != s->graph_temp) {
        s->graph_temp = temp;
        eng__session_changed(s);
    }
    int g = -1;
    if (n == 1 && !hidden && !eng__select_wants_act(s) && op->graph_begin) {
        /* A graph's attention is split for its largest position: the next
         * power of two (at least 256) rather than n_ctx, so that a short
         * context does not pay for a long one; each doubling makes another
         * graph. */
        int max_pos = 255;
        while (max_pos < s->n_past && max_pos < s->n_ctx - 1)
            max_pos = max_pos * 2 + 1;
        if (max_pos > s->n_ctx - 1)
            max_pos = s->n_ctx - 1;
        eng_graph_step st = { .key = s->graph_key, .pos = s->n_past, .max_pos = max_pos };
        g = op->graph_begin(be, &st);
        if (g == 0) {
            forward_ops(s, n, first, out, am, cands, false);
            g = op->graph_end(be) == 0 ? 1 : -1;
        }
    }
    if (g != 1)
        forward_ops(s, n, first, out, am, cands, hidden != NULL);
    const int pos0 = s->n_past;
    s->n_past += n;

    if (argmax) /* 4 bytes instead of the row of logits */
        op->download(be, argmax, am, sizeof(int32_t));
    else if (cands) /* values and ids in one copy */
        op->download(be, s->cand_host, s->cand_dev, s->n_cand * 8);
    else if (hidden)
        op->download(be, hidden, s->xn, (size_t)n * m->info.n_embd * sizeof(float));
    else if (logits && !host)
        op->download(be, logits, out, (size_t)rows * V * sizeof(float));
    /* a GPU's first failure since the last sync, if any */
    int r = op->sync(be);
    /* the position the Mamba-2 states have reached (none after a
     * failure); positions rewritten below the checkpoint's end it */
    if (m->info.n_ssm)
        s->ssm_pos = r == 0 ? s->n_past : -1;
    if (pos0 < s->ckpt_pos)
        s->ckpt_pos = -1;
    /* what the KV cache now holds, for eng_session_reset_prefix: positions
     * computed over every loaded neuron extend the reusable run */
    if (s->kv_generation != m->generation) {
        s->kv_generation = m->generation;
        s->n_reusable = 0;
    }
    if (pos0 < s->n_reusable)
        s->n_reusable = pos0;
    if (r == 0 && !s->partial && pos0 == s->n_reusable) {
        memcpy(s->ctx_tokens + pos0, tokens, (size_t)n * sizeof(int32_t));
        s->n_reusable = pos0 + n;
    }
    return r;
}

int eng_session_eval(eng_session *s, const int32_t *tokens, size_t n, unsigned flags)
{
    const eng_model *m = s->model;
    if (n == 0)
        return -EINVAL;
    if (n > (size_t)(s->n_ctx - s->n_past))
        return -ENOSPC;
    if (s->generation != m->generation) {
        /* the model was hot-swapped: a context built on the old neurons is stale */
        if (s->n_past > 0)
            return -ESTALE;
        eng__select_session_reset(s);
    }
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->info.n_vocab)
            return -EINVAL;
    /* Mamba-2 states that are not the context's (a failed evaluation left
     * them behind): the context is gone, as after a swap */
    if (m->info.n_ssm && s->n_past > 0 && s->ssm_pos != s->n_past)
        return -ESTALE;

    bool all = flags & ENG_EVAL_ALL_LOGITS;
    size_t rows = all ? n : 1;
    /* greedy on the backend: only the argmax of the last row comes back */
    bool dev_argmax = (flags & ENG_EVAL_ARGMAX) && !all && s->argmax_dev;
    /* sampling on the backend: only the last row's candidates come back */
    bool dev_cands = (flags & ENG_EVAL_CANDIDATES) && !all && !dev_argmax && s->cand_k > 0;
    if (rows > (size_t)s->logits_cap) {
        /* grow the logits buffer only when a caller keeps all of them */
        float *p = falloc(rows * (size_t)m->info.n_vocab);
        if (!p)
            return -ENOMEM;
        free(s->logits);
        s->logits = p;
        s->logits_cap = (int)rows;
    }
    s->n_logits = 0;
    if (n > 1)
        eng__session_changed(s); /* a prefill: what decode computes is chosen anew */
    s->argmax_only = false;
    s->cands_only = false;
    /* Mamba-2 states and convolution rows that keep only what the next
     * token reads (conv_ckpt): a checkpoint of them two tokens before the
     * end, taken by the ssm op and conv_end in the chunk that holds that
     * position */
    const size_t ckpt = (m->info.n_ssm || s->conv_ckpt) && n >= 3 ? n - 2 : 0;
    for (size_t done = 0; done < n;) {
        if (done > 0 && s->abort_cb && s->abort_cb(s->abort_data))
            return -ECANCELED;
        int chunk = (int)(n - done < (size_t)s->n_batch ? n - done : (size_t)s->n_batch);
        s->ckpt_at = ckpt > done && ckpt <= done + (size_t)chunk ? (int)(ckpt - done) : 0;
        if (s->ckpt_at) /* (being overwritten) */
            s->ckpt_pos = -1;
        bool last = done + chunk == n;
        float *out = all ? s->logits + done * (size_t)m->info.n_vocab : s->logits;
        int r = eng__forward(s, tokens + done, chunk, all,
                             (all || last) && !dev_argmax && !dev_cands ? out : NULL,
                             last && dev_argmax ? &s->argmax : NULL, last && dev_cands, NULL);
        if (r == 0 && s->ckpt_at)
            s->ckpt_pos = s->n_past - chunk + s->ckpt_at;
        s->ckpt_at = 0;
        if (r < 0)
            return r;
        done += chunk;
    }
    s->n_logits = dev_argmax || dev_cands ? 0 : (int)rows;
    s->argmax_only = dev_argmax;
    s->cands_only = dev_cands;
    s->logits_first = all ? 0 : (int)n - 1;
    s->n_last_eval = (int)n;
    return eng__select_end_eval(s);
}

/* ---- embeddings ---- */

int eng_pooling_parse(const char *name, eng_pooling *ret)
{
    if (!name || !ret)
        return -EINVAL;
    if (!strcmp(name, "mean"))
        *ret = ENG_POOL_MEAN;
    else if (!strcmp(name, "last"))
        *ret = ENG_POOL_LAST;
    else
        return -EINVAL;
    return 0;
}

int eng_embed(eng_session *s, const int32_t *tokens, size_t n, eng_pooling pool, bool normalize,
              float *out)
{
    const eng_model *m = s->model;
    const int E = m->info.n_embd;
    if (n == 0 || !tokens || !out || (unsigned)pool > ENG_POOL_LAST)
        return -EINVAL;
    if (n > (size_t)s->n_ctx)
        return -ENOSPC;
    for (size_t i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->info.n_vocab)
            return -EINVAL;
    /* one chunk's rows, and the mean's sums in double: a long text adds
     * thousands of rows */
    float *h = malloc((size_t)s->n_batch * E * sizeof(float));
    double *sum = calloc((size_t)E, sizeof(double));
    if (!h || !sum) {
        free(h);
        free(sum);
        return -ENOMEM;
    }
    /* every loaded neuron, as a prefill computes: phi 0 casts no votes and
     * selects nothing; the session's own phi comes back after */
    const float phi = s->compute.phi;
    s->compute.phi = 0.0f;
    eng_session_reset(s);
    s->n_reusable = 0;
    int r = 0;
    for (size_t done = 0; done < n && r == 0;) {
        if (done > 0 && s->abort_cb && s->abort_cb(s->abort_data)) {
            r = -ECANCELED;
            break;
        }
        const int chunk = (int)(n - done < (size_t)s->n_batch ? n - done : (size_t)s->n_batch);
        r = eng__forward(s, tokens + done, chunk, false, NULL, NULL, false, h);
        if (r < 0)
            break;
        done += chunk;
        if (pool == ENG_POOL_LAST && done == n)
            for (int j = 0; j < E; j++)
                sum[j] = h[(size_t)(chunk - 1) * E + j];
        for (int t = 0; pool == ENG_POOL_MEAN && t < chunk; t++)
            for (int j = 0; j < E; j++)
                sum[j] += h[(size_t)t * E + j];
    }
    /* nothing of this context is reused (a generate after it starts anew),
     * and the next eval selects under the session's own phi */
    s->compute.phi = phi;
    eng_session_reset(s);
    s->n_reusable = 0;
    if (r == 0) {
        const double div = pool == ENG_POOL_MEAN ? (double)n : 1.0;
        double norm = 0.0;
        for (int j = 0; j < E; j++) {
            sum[j] /= div;
            norm += sum[j] * sum[j];
        }
        norm = normalize && norm > 0.0 ? 1.0 / sqrt(norm) : 1.0;
        for (int j = 0; j < E; j++)
            out[j] = (float)(sum[j] * norm);
    }
    free(h);
    free(sum);
    return r < 0 ? r : 0;
}

/* ---- hot-swap ---- */

static void model_free_ptr(eng_model *m, void *p)
{
    for (size_t i = m->n_allocs; i-- > 0;)
        if (m->allocs[i] == p) {
            free(p);
            m->allocs[i] = m->allocs[--m->n_allocs];
            return;
        }
}

/* Copies slot `from` of layer A into slot `to` of layer B's buffers (B may
 * be A: compaction after neurons left), in backend memory. */
static void copy_slot(eng_backend *be, const eng_layer *A, int from, eng_layer *B, int to)
{
    /* (its gate_up: eng_ffn_rows rows, B's as A's: one layer's, or T's) */
    const size_t rg =
        (size_t)eng_ffn_rows(&A->ffn) * eng_ffn_row_bytes(A->ffn.dtype, A->ffn.n_embd);
    const size_t rd = eng_ffn_down_bytes(A->ffn.dtype, A->ffn.n_embd);
    const uint8_t *gu = A->ffn.gate_up, *down = A->ffn.down;
    be->iface->copy(be, (uint8_t *)B->ffn.gate_up + (size_t)to * rg, gu + (size_t)from * rg, rg);
    be->iface->copy(be, (uint8_t *)B->ffn.down + (size_t)to * rd, down + (size_t)from * rd, rd);
    B->neuron_of_slot[to] = A->neuron_of_slot[from];
}

/* Static slots first, as load_ffn lays them out: every decode step
 * computes them, and one contiguous run of slots reads about 1.3x faster
 * than the same slots scattered (docs/benchmark.md). A swap fills holes
 * wherever they are; this moves each static slot found behind a dynamic
 * one to the front, the pair exchanged through T's one slot. Returns how
 * many pairs moved. */
static int statics_first(eng_backend *be, eng_layer *L, const uint8_t *is_static, eng_layer *T)
{
    int a = 0, b = L->ffn.n_slots - 1, moved = 0;
    for (;;) {
        while (a < b && is_static[L->neuron_of_slot[a]])
            a++;
        while (a < b && !is_static[L->neuron_of_slot[b]])
            b--;
        if (a >= b)
            return moved;
        copy_slot(be, L, a, T, 0);
        copy_slot(be, L, b, L, a);
        copy_slot(be, T, 0, L, b);
        a++;
        b--;
        moved++;
    }
}

int eng_model_swap(eng_model *m, const eng_load_plan_params *pp, eng_swap_stats *ret_stats,
                   eng_error *err)
{
    uint64_t t0 = eng_time_ns();
    if (err)
        err->msg[0] = 0;
    const int NL = m->info.n_layer, F = m->info.n_ff;
    eng_plan_shape shape;
    plan_shape(NULL, m, &shape);
    eng_plan *plan = NULL;
    gguf_file *f = NULL;
    eng_layer *grown = NULL; /* new buffers of layers whose slot count grows */
    void **sketch = NULL;    /* new sketch buffers, where one is wanted and too small */
    int32_t *slot_of = NULL, *enter = NULL, *holes = NULL, *dst = NULL;
    uint8_t *is_hole = NULL;
    void *tmp_slot = NULL; /* statics_first's exchange slot (backend memory) */
    int32_t tmp_nid = 0;
    loader ld = { .m = m, .err = err };
    eng_swap_stats st = { 0 };
    /* (experts load whole: the dense plan is the one they have, and
     * nothing moves) */
    const eng_select_mode mode = pp ? pp->mode : ENG_SELECT_DENSE;
    if (m->n_ff_exp && mode != ENG_SELECT_DENSE)
        return eng__set_err(err, -ENOTSUP, "mode %s: neuron selection in mixture-of-experts "
                            "layers is not supported (mode dense only)",
                            eng_select_mode_name(mode));
    if (m->n_ff_exp) {
        if (ret_stats)
            *ret_stats = (eng_swap_stats){ .ns = eng_time_ns() - t0 };
        return 0;
    }
    int r = eng__plan_build(&shape, pp, &plan, err);
    if (r < 0)
        return r;

    /* phase 1, which may fail: re-open the file, check it is still the same
     * model, validate every tensor and allocate whatever grows */
    if ((r = gguf_open(m->path, &f, err)) < 0)
        goto out;
    ld.f = f;
    if (fingerprint(f, m) != m->info.fingerprint) {
        r = eng__set_err(err, -EMEDIUMTYPE, "the model file '%s' changed on disk since it was loaded",
                         m->path);
        goto out;
    }
    if ((r = sketch_supported(m, plan, err)) < 0)
        goto out;
    grown = calloc(NL, sizeof(*grown));
    sketch = calloc(NL, sizeof(*sketch));
    slot_of = malloc((size_t)F * sizeof(int32_t));
    enter = malloc((size_t)F * sizeof(int32_t));
    holes = malloc((size_t)F * sizeof(int32_t));
    dst = malloc((size_t)F * sizeof(int32_t));
    is_hole = malloc((size_t)F);
    if (!grown || !sketch || !slot_of || !enter || !holes || !dst || !is_hole ||
        m->be->iface->alloc(m->be, neuron_bytes(m), &tmp_slot) < 0 ||
        ensure_row(&ld, (size_t)DOWN_BLOCK * F) < 0) {
        r = eng__set_err(err, -ENOMEM, "out of memory");
        goto out;
    }
    for (int il = 0; il < NL; il++) {
        ffn_tensors t;
        if (m->layers[il].no_ffn) /* (nemotron_h: nothing to swap in this layer) */
            continue;
        if ((r = ffn_tensors_get(&ld, il, false, &t)) < 0)
            goto out;
        if (plan->n_loaded[il] > m->layers[il].slot_cap &&
            ffn_alloc(m, il, &grown[il], plan->n_loaded[il]) < 0) {
            char what[64];
            snprintf(what, sizeof(what), "the FFN of layer %d", il);
            r = oom_err(&ld, (size_t)plan->n_loaded[il] * shape.bytes_per_neuron, what);
            goto out;
        }
        if (wants_sketch(plan, il) && plan->n_loaded[il] > m->layers[il].sketch_cap) {
            size_t bytes = (size_t)(plan->n_loaded[il] > 0 ? plan->n_loaded[il] : 1) *
                           shape.sketch_per_neuron;
            if (!(sketch[il] = weight_alloc(m, bytes))) {
                char what[64];
                snprintf(what, sizeof(what), "the neuron sketch of layer %d", il);
                r = oom_err(&ld, bytes, what);
                goto out;
            }
        }
        /* staging for the neurons that enter (at most all of the plan's) */
        if (!m->be->iface->host_memory &&
            ensure_stage(&ld, (size_t)plan->n_loaded[il] * shape.bytes_per_neuron) < 0) {
            r = -ENOMEM;
            goto out;
        }
    }

    /* phase 2 cannot fail: per layer, the neurons that enter take the slots
     * of those that leave; the rest stay where they are */
    for (int il = 0; il < NL; il++) {
        eng_layer *L = &m->layers[il];
        if (m->progress)
            m->progress(m->progress_data, il, NL);
        if (L->no_ffn)
            continue;
        ffn_tensors t;
        ffn_tensors_get(&ld, il, false, &t);
        for (int n = 0; n < F; n++)
            slot_of[n] = -1;
        for (int j = 0; j < L->ffn.n_slots; j++)
            slot_of[L->neuron_of_slot[j]] = j;
        const int32_t *want = plan->loaded[il];
        int n_want = plan->n_loaded[il], n_enter = 0, n_holes = 0;
        /* slots whose neuron leaves */
        for (int j = 0; j < L->ffn.n_slots; j++) {
            int32_t nid = L->neuron_of_slot[j];
            /* binary search in the ascending plan list */
            int lo = 0, hi = n_want - 1, found = 0;
            while (lo <= hi) {
                int mid = (lo + hi) / 2;
                if (want[mid] == nid) {
                    found = 1;
                    break;
                }
                if (want[mid] < nid)
                    lo = mid + 1;
                else
                    hi = mid - 1;
            }
            if (!found)
                holes[n_holes++] = j;
        }
        for (int i = 0; i < n_want; i++)
            if (slot_of[want[i]] < 0)
                enter[n_enter++] = want[i];
        st.neurons_in += n_enter;
        st.neurons_out += n_holes;

        memset(is_hole, 0, (size_t)F);
        for (int h = 0; h < n_holes; h++)
            is_hole[holes[h]] = 1;

        if (grown[il].slot_cap) {
            /* copy the staying neurons into the bigger buffers, then load */
            eng_layer *G = &grown[il];
            int k = 0;
            for (int j = 0; j < L->ffn.n_slots; j++)
                if (!is_hole[j])
                    copy_slot(m->be, L, j, G, k++);
            for (int i = 0; i < n_enter; i++)
                dst[i] = k + i;
            G->ffn.n_slots = n_want;
            load_neurons(&ld, &t, G, enter, dst, n_enter, &st.bytes_read);
            weight_free_ptr(m, L->ffn.gate_up);
            weight_free_ptr(m, L->ffn.down);
            model_free_ptr(m, L->neuron_of_slot);
            model_free_ptr(m, L->slot_static);
            G->ffn.sketch = L->ffn.sketch; /* replaced below, as every layer's */
            L->ffn = G->ffn;
            L->neuron_of_slot = G->neuron_of_slot;
            L->slot_static = G->slot_static;
            L->slot_cap = G->slot_cap;
        } else {
            /* entering neurons go into the holes first, then past the end
             * when more enter than leave (the capacity suffices) */
            int n_old = L->ffn.n_slots;
            int reuse = n_enter < n_holes ? n_enter : n_holes;
            for (int i = 0; i < n_enter; i++)
                dst[i] = i < reuse ? holes[i] : n_old + (i - reuse);
            load_neurons(&ld, &t, L, enter, dst, n_enter, &st.bytes_read);
            for (int i = 0; i < reuse; i++)
                is_hole[holes[i]] = 0;
            /* more left than entered: fill the remaining holes below the new
             * end with the last slots that are not holes */
            int n_new = n_old - n_holes + n_enter;
            int last = n_old - 1;
            for (int h = reuse; h < n_holes; h++) {
                int hole = holes[h];
                if (hole >= n_new)
                    break;
                while (is_hole[last])
                    last--;
                copy_slot(m->be, L, last, L, hole);
                is_hole[hole] = 0;
                is_hole[last] = 1;
                last--;
            }
            L->ffn.n_slots = n_new;
        }
        const size_t rg = (size_t)eng_ffn_rows(&L->ffn) *
                          eng_ffn_row_bytes(L->ffn.dtype, L->ffn.n_embd);
        eng_layer T = { .ffn = { .dtype = L->ffn.dtype, .n_embd = L->ffn.n_embd, .n_slots = 1,
                                 .gate_up = tmp_slot, .down = (uint8_t *)tmp_slot + rg,
                                 .act = L->ffn.act },
                        .neuron_of_slot = &tmp_nid };
        const bool moved = statics_first(m->be, L, plan->is_static[il], &T) > 0;
        L->n_static = 0;
        for (int j = 0; j < L->ffn.n_slots; j++) {
            L->slot_static[j] = plan->is_static[il][L->neuron_of_slot[j]];
            L->n_static += L->slot_static[j];
        }
        L->sparse = plan->sparse[il];
        /* the sketch follows the slots: a layer whose slots changed (or
         * whose sketch is new) has it rebuilt whole, ~10 ms for SmolLM2 */
        bool stale = n_enter > 0 || n_holes > 0 || moved;
        if (sketch[il]) {
            weight_free_ptr(m, L->ffn.sketch);
            L->ffn.sketch = sketch[il];
            L->sketch_cap = plan->n_loaded[il] > 0 ? plan->n_loaded[il] : 1;
            sketch[il] = NULL;
            stale = true;
        } else if (!wants_sketch(plan, il) && L->ffn.sketch) {
            weight_free_ptr(m, L->ffn.sketch);
            L->ffn.sketch = NULL;
            L->sketch_cap = 0;
        }
        if (L->ffn.sketch && stale)
            m->be->iface->build_sketch(m->be, &L->ffn);
    }
    m->info.bytes_weights = 0;
    {
        /* recount: fixed weights plus the FFN as it is now */
        uint64_t ffn = 0;
        for (int il = 0; il < NL; il++)
            ffn += (uint64_t)m->layers[il].ffn.n_slots *
                   (shape.bytes_per_neuron + (m->layers[il].ffn.sketch ? shape.sketch_per_neuron : 0));
        m->info.bytes_weights = m->bytes_fixed + ffn;
    }
    m->info.bytes_per_token = bytes_per_token(m);
    m->plan = plan->info;
    free(m->layer_sens);
    m->layer_sens = plan->layer_sens;
    plan->layer_sens = NULL;
    m->generation++;
    if ((r = m->be->iface->sync(m->be)) < 0) {
        /* the slots' contents are undefined now; sessions start over anyway */
        eng__set_err(err, r, "the swap's uploads failed: %s", m->be->iface->error(m->be));
        goto out;
    }
    st.ns = eng_time_ns() - t0;
    if (ret_stats)
        *ret_stats = st;
    r = 0;
out:
    if (r < 0 && grown)
        for (int il = 0; il < NL; il++)
            if (grown[il].slot_cap) {
                weight_free_ptr(m, grown[il].ffn.gate_up);
                weight_free_ptr(m, grown[il].ffn.down);
                model_free_ptr(m, grown[il].neuron_of_slot);
                model_free_ptr(m, grown[il].slot_static);
            }
    for (int il = 0; sketch && il < NL; il++)
        if (sketch[il])
            weight_free_ptr(m, sketch[il]);
    free(sketch);
    free(grown);
    free(slot_of);
    free(enter);
    free(holes);
    free(dst);
    free(is_hole);
    if (tmp_slot && m->be->iface->mem_free)
        m->be->iface->mem_free(m->be, tmp_slot);
    free(ld.row);
    free(ld.stage);
    gguf_close(f);
    eng__plan_free(plan);
    return r;
}
