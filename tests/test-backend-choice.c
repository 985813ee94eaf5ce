/* Choosing the backend (eng_model_params.backend) on any machine: what a
 * build without CUDA, a machine without a GPU and a machine with one each
 * answer.
 *
 *   - eng_backend_cuda_new: -ENOTSUP "built without CUDA support (meson
 *     -Dcuda=enabled)" without CUDA, -ENODEV with the reason without a
 *     usable GPU, 0 with one;
 *   - eng_model_load with ENG_BACKEND_CUDA fails the same way (and says
 *     why), ENG_BACKEND_AUTO falls back to the CPU, an unknown kind is
 *     -EINVAL; with a GPU, f32 storage is refused (-EINVAL: f16 only) and
 *     a bad device number is -ENODEV;
 *   - with CUDA built, the backend is a module opened when first asked
 *     for: cuBLAS is not in the process before that, nor after an attempt
 *     that found no GPU (the module closed again); a module that cannot
 *     be opened is -ENOENT, one that is not this build's -ENOEXEC, each
 *     with the reason, and auto then takes the CPU.
 *
 * usage: test-backend-choice SI_SYNTH
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend.h"
#include "engine.h"
#include "test-util.h"

/* Whether a library whose name holds `name` is mapped into this process. */
static bool mapped(const char *name)
{
    FILE *f = fopen("/proc/self/maps", "r");
    char line[4096];
    bool found = false;
    while (f && !found && fgets(line, sizeof(line), f))
        found = strstr(line, name) != NULL;
    if (f)
        fclose(f);
    return found;
}

static int load(const char *path, eng_backend_kind kind, int device, eng_dtype storage,
                eng_model **ret, eng_error *err)
{
    eng_model_params mp = eng_model_params_default();
    mp.n_threads = 1;
    mp.backend = kind;
    mp.device = device;
    mp.storage = storage;
    *ret = NULL;
    memset(err, 0, sizeof(*err));
    return eng_model_load(path, &mp, ret, err);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: test-backend-choice SI_SYNTH\n");
        return 2;
    }
    char path[32];
    test_synth(argv[1], "tiny", path);

    eng_backend *be = NULL;
    eng_error e = { { 0 } };
    CHECKF(!mapped("libcublas"), "cuBLAS mapped before any CUDA backend was asked for");
    int r = eng_backend_cuda_new(0, &be, &e);
    if (r < 0)
        CHECKF(!mapped("libcublas") && !mapped("libselectinfer-cuda"),
               "the CUDA module left open after %d", r);
    const char *what = r == 0 ? "a GPU" : r == -ENODEV ? "no usable GPU" : "no CUDA";
    printf("eng_backend_cuda_new: %d (%s)%s%s\n", r, what, r ? ": " : "", r ? e.msg : "");
    CHECKF(r == 0 || r == -ENODEV || r == -ENOTSUP, "unexpected %d: %s", r, e.msg);
#ifdef ENG_HAVE_CUDA
    CHECK(r != -ENOTSUP);
#else
    CHECK(r == -ENOTSUP && !strcmp(e.msg, "built without CUDA support (meson -Dcuda=enabled)"));
#endif
    CHECK(r == 0 ? be != NULL : be == NULL);
    if (r < 0)
        CHECK(e.msg[0] != 0);
    if (be) {
        char name[256];
        CHECK(eng_backend_cuda_describe(be, name, sizeof(name), NULL, NULL) == 0);
        printf("GPU: %s\n", name);
        be->iface->free(be);
    }

    eng_model *m;
    eng_error err;
    /* CUDA asked for: the same answer as the backend's */
    int lr = load(path, ENG_BACKEND_CUDA, 0, ENG_DTYPE_F16, &m, &err);
    if (r < 0) {
        CHECKF(lr == r && m == NULL && strstr(err.msg, e.msg), "cuda load: %d '%s'", lr, err.msg);
    } else {
        CHECKF(lr == 0 && !strcmp(eng_backend_name(m), "cuda"), "cuda load: %d '%s'", lr,
               err.msg);
        eng_model_free(m);
        /* f16 only on a GPU; a device that is not there */
        lr = load(path, ENG_BACKEND_CUDA, 0, ENG_DTYPE_F32, &m, &err);
        CHECKF(lr == -EINVAL && m == NULL && strstr(err.msg, "f32"), "f32 on cuda: %d '%s'", lr,
               err.msg);
        lr = load(path, ENG_BACKEND_CUDA, 999, ENG_DTYPE_F16, &m, &err);
        CHECKF(lr == -ENODEV && m == NULL && strstr(err.msg, "999"), "device 999: %d '%s'", lr,
               err.msg);
    }

    /* auto: the GPU when usable, else the CPU */
    lr = load(path, ENG_BACKEND_AUTO, 0, ENG_DTYPE_F16, &m, &err);
    CHECKF(lr == 0, "auto load: %d '%s'", lr, err.msg);
    printf("auto: %s backend\n", eng_backend_name(m));
    CHECK(!strcmp(eng_backend_name(m), r == 0 ? "cuda" : "cpu"));
    eng_model_free(m);

    /* the default stays the CPU; unknown kinds are refused */
    lr = load(path, ENG_BACKEND_CPU, 0, ENG_DTYPE_F16, &m, &err);
    CHECK(lr == 0 && !strcmp(eng_backend_name(m), "cpu"));
    eng_model_free(m);
    lr = load(path, (eng_backend_kind)7, 0, ENG_DTYPE_F16, &m, &err);
    CHECKF(lr == -EINVAL && m == NULL, "backend 7: %d '%s'", lr, err.msg);
#ifdef ENG_HAVE_CUDA
    /* no module where SI_CUDA_MODULE says, or a library that is not one
     * (libm): -ENOENT or -ENOEXEC saying so; auto then loads on the CPU.
     * (With a GPU the module opened above stays open, and these paths are
     * not taken.) */
    static const struct {
        const char *path, *says;
        int code;
    } bad[] = { { "/nonexistent/libselectinfer-cuda.so", "cannot open the CUDA backend module",
                  -ENOENT },
                { "libm.so.6", "is not this build's CUDA backend module", -ENOEXEC } };
    for (size_t i = 0; r < 0 && i < sizeof(bad) / sizeof(bad[0]); i++) {
        setenv("SI_CUDA_MODULE", bad[i].path, 1);
        be = NULL;
        memset(&e, 0, sizeof(e));
        const int rb = eng_backend_cuda_new(0, &be, &e);
        CHECKF(rb == bad[i].code && !be && strstr(e.msg, bad[i].says), "%s: %d '%s'",
               bad[i].path, rb, e.msg);
        lr = load(path, ENG_BACKEND_AUTO, 0, ENG_DTYPE_F16, &m, &err);
        CHECKF(lr == 0 && !strcmp(eng_backend_name(m), "cpu"), "auto without a module: %d '%s'",
               lr, err.msg);
        eng_model_free(m);
        CHECK(!mapped("libcublas"));
    }
    unsetenv("SI_CUDA_MODULE");
#endif

    unlink(path);
    printf("ok\n");
    return 0;
}
