/* Writes a small two-task profile ("qa", "translate") of the default model
 * for the daemon's hot-swap tests, through the engine's profiling API (the
 * same collection si-profile does, on three prompts per task), so the tests
 * do not depend on a shipped profile.
 *
 *     daemon-make-profile MODEL OUT.siprof
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"

static const char *qa[] = {
    "What is the capital of France? The capital of France is Paris.",
    "Who wrote Hamlet? William Shakespeare wrote Hamlet around 1600.",
    "How many legs does a spider have? A spider has eight legs.",
};
static const char *translate[] = {
    "Translate to German: The house is small. Das Haus ist klein.",
    "Translate to German: I like to read books. Ich lese gern Buecher.",
    "Translate to German: Where is the station? Wo ist der Bahnhof?",
};

static int add(eng_model *m, eng_profile *p, const char *task, const char **texts, int n, size_t cells)
{
    eng_session *s;
    if (eng_session_new(m, NULL, &s) < 0)
        return -1;
    double *sums = malloc(cells * sizeof(double));
    int rc = sums ? 0 : -1;
    for (int i = 0; i < n && rc == 0; i++) {
        int32_t toks[256];
        size_t nt;
        memset(sums, 0, cells * sizeof(double));
        eng_session_reset(s);
        if (eng_tokenize(m, texts[i], strlen(texts[i]), 0, toks, 256, &nt) < 0 ||
            eng_session_observe_ffn(s, sums) < 0 || eng_session_eval(s, toks, nt, 0) < 0 ||
            eng_session_observe_ffn(s, NULL) < 0 || eng_profile_add_prompt(p, task, sums, nt) < 0)
            rc = -1;
    }
    free(sums);
    eng_session_free(s);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: daemon-make-profile MODEL OUT.siprof\n");
        return 2;
    }
    eng_model_params mp = eng_model_params_default();
    eng_model *m;
    eng_error err;
    if (eng_model_load(argv[1], &mp, &m, &err) < 0) {
        fprintf(stderr, "cannot load '%s': %s\n", argv[1], err.msg);
        return 1;
    }
    eng_model_info info;
    eng_model_get_info(m, &info);
    size_t cells = (size_t)info.n_layer * (size_t)info.n_ff;
    eng_profile *p = NULL;
    int rc = eng_profile_new(m, &p) < 0 ? 1 : 0;
    if (rc == 0 && (add(m, p, "qa", qa, 3, cells) < 0 || add(m, p, "translate", translate, 3, cells) < 0 ||
                    eng_profile_save(p, argv[2]) < 0)) {
        fprintf(stderr, "cannot make the profile '%s'\n", argv[2]);
        rc = 1;
    }
    eng_profile_free(p);
    eng_model_free(m);
    return rc;
}
