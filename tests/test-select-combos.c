/* Selective loading and computation over seeded random combinations of
 * what a client and a configuration can ask for: tests/fuzz-select.c's
 * input handler, driven by a fixed sequence of inputs instead of libFuzzer
 * (so meson runs it, under ASan and UBSan in scripts/test-asan.sh and on
 * aarch64 too). Every mode, layer budget, dense-layer count, byte budget,
 * gamma/delta/phi/alpha/cand, rank, comp, pick, copy, KV type, batch,
 * context length, shift and hot-swap comes up; each combination the
 * engine accepts must give finite logits and a share in [0, 1] at every
 * eval, a hot-swapped session must refuse to go on before its reset, and
 * the default compute parameters must always be accepted (fuzz-select.c
 * aborts otherwise). On synthetic models of 4 layers: tiny in Q4_1 (the
 * exact pick's 4-bit rows, --q8's down rows) and in f16, tiny-k in Q4_1.
 *
 * Usage: test-select-combos SI_SYNTH [N (1000 inputs per tiny model, N/3 on tiny-k;
 *        or $SI_COMBOS_INPUTS)]
 */
#include "fuzz-select.c"

#include "test-util.h"

/* fuzz-select.c's header (its byte layout) as a configuration would be
 * written most of the time: delta below gamma, phi between them, cand
 * between phi and gamma for the exact pick, a task of the profile; the
 * rest of the bytes (and one input in four whole) uniform, which mostly
 * tries what the engine must refuse */
static void plausible_header(uint64_t *x, uint8_t *d)
{
    static const int modes[] = { 0, 1, 2, 3, 4, 4, 4, 3 }; /* selectinfer most */
    const int mode = modes[next(x) % 8], lb = (int)(next(x) % 3);
    d[0] = (uint8_t)(mode + 5 * lb + 64 * (next(x) % 2) + 128 * (next(x) % 2));
    const int g = 102 + (int)(next(x) % 154); /* gamma 0.4-1.0 */
    d[1] = (uint8_t)(g - 1);
    const int de = (int)(next(x) % (uint64_t)(g * 4 / 5)); /* delta below gamma */
    d[2] = (uint8_t)de;
    static const int tasks[] = { 0, 0, 1, 1, 2, 0, 1, 3 }; /* "a", "b", "*", none */
    const int df = next(x) % 3 == 0, dl = next(x) % 4 == 0; /* of 4 layers */
    d[3] = (uint8_t)(df | dl << 2 | (next(x) & 1) << 4 | (next(x) % 8 == 0) << 5 |
                     tasks[next(x) % 8] << 6);
    const int phi = next(x) % 6 == 0 ? 0 : de + 1 + (int)(next(x) % (uint64_t)(g - de));
    d[4] = (uint8_t)(phi > 255 ? 255 : phi);
    d[5] = (uint8_t)next(x);
    /* the per-token pick takes no comp, the exact one only with cand */
    const int pick = (int)(next(x) % 3);
    const int cand = pick == 2 && next(x) % 4 ? phi + (int)(next(x) % (uint64_t)(g - phi + 1)) : 0;
    const int comp = pick == 1 || (pick == 2 && !cand) ? 0 : (int)(next(x) % 3);
    d[6] = (uint8_t)(next(x) % 4 + 4 * comp + 12 * pick + 36 * (next(x) % 4 == 0));
    d[7] = (uint8_t)(cand > 255 ? 255 : cand);
}

int main(int argc, char **argv)
{
    CHECK(argc >= 2);
    /* SI_COMBOS_INPUTS: fewer under emulation (scripts/test-aarch64.sh:
     * qemu took 7.5 minutes for the 2333) */
    const char *env = getenv("SI_COMBOS_INPUTS");
    const int n = argc > 2 ? atoi(argv[2]) : env && *env ? atoi(env) : 1000;
    CHECK(n >= 3);
    const long least = n >= 1000 ? 5 : 1;
    /* tiny-k: n_embd 256 and n_ff 512, wider than the kernels' blocks of
     * 16 and 32 slots; a third of the inputs (its loads take longer) */
    static const struct { const char *shape, *type; int div; } models[] = {
        { "tiny", "q4_1", 1 }, { "tiny", "f16", 1 }, { "tiny-k", "q4_1", 3 } };
    for (int t = 0; t < 3; t++) {
        char path[32];
        test_synth_args(argv[1], models[t].shape, models[t].type, " --layers 4", path);
        CHECK(setenv("SI_FUZZ_MODEL", path, 1) == 0);
        LLVMFuzzerInitialize(NULL, NULL);
        uint64_t x = 0x9e3779b97f4a7c15ull + (uint64_t)t;
        next(&x);
        uint8_t buf[HEADER + 2 * 200];
        for (int i = 0; i < n / models[t].div; i++) {
            /* up to 200 tokens: past the longest context (127) sometimes */
            const size_t len = HEADER + 2 * (size_t)(next(&x) % 201);
            for (size_t b = 0; b < len; b++)
                buf[b] = (uint8_t)next(&x);
            if (i % 4)
                plausible_header(&x, buf);
            LLVMFuzzerTestOneInput(buf, len);
        }
        printf("%s %s: %ld models; selective sessions by pick (request, token, exact): "
               "%ld %ld %ld accepted, %ld %ld %ld decoded; by comp (none, mean, linear) "
               "%ld %ld %ld; %ld swaps, %ld shifts\n",
               models[t].shape, models[t].type, reached.loaded, reached.computed[0], reached.computed[1],
               reached.computed[2], reached.decoded[0], reached.decoded[1], reached.decoded[2],
               reached.comp[0], reached.comp[1], reached.comp[2], reached.swapped,
               reached.shifted);
        /* the sequence reaches every way (a change that made the engine
         * refuse one, or the harness skip it, would go unnoticed) */
        for (int k = 0; k < 3; k++)
            CHECKF(reached.decoded[k] >= least && reached.comp[k] >= least,
                   "pick/comp %d not reached", k);
        CHECK(reached.swapped >= least && reached.shifted >= least);
        memset(&reached, 0, sizeof(reached));
        eng_model_free(cached);
        cached = NULL;
        eng_profile_free(prof);
        prof = NULL;
        unlink(path);
    }
    printf("ok\n");
    return 0;
}
