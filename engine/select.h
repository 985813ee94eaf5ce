/* SelectInfer internals (private to the engine): loading plans, the
 * per-session dynamic neuron selection, and the hooks the forward pass calls.
 */
#ifndef ENGINE_SELECT_H
#define ENGINE_SELECT_H

#include <stdbool.h>
#include <stdint.h>

#include "engine.h"

struct eng_model;
struct eng_session;

/* Which neurons each layer loads, and which of them are static. */
typedef struct eng_plan {
    eng_plan_info info;
    float *layer_sens;   /* [n_layer] with ENG_BUDGET_SENS, else NULL */
    int n_layer, n_ff;
    bool *sparse;        /* [n_layer]: inside the sparsified range */
    int32_t **loaded;    /* [n_layer][n_loaded[l]] neuron ids, ascending */
    int *n_loaded;       /* [n_layer] */
    uint8_t **is_static; /* [n_layer][n_ff] by neuron id */
} eng_plan;

/* What the plan builder needs to know of the model before its FFN exists. */
typedef struct eng_plan_shape {
    int n_layer, n_ff, n_embd;
    size_t bytes_per_neuron; /* gate row + up row + down column in the storage type */
    size_t sketch_per_neuron; /* its ENG_PICK_TOKEN sketch; 0: n_embd allows none */
    uint64_t bytes_fixed;    /* every resident weight outside the FFN */
    uint64_t fingerprint;
    const char *arch;
    uint32_t n_vocab;
    const float *down_norm;  /* [n_layer][n_ff] ||W_down column||, by neuron */
    const int32_t *layer_ff; /* [n_layer] each layer's neurons (gemma4 E2B's FFNs of two
                              * widths; n_ff the widest), NULL: n_ff in every layer */
} eng_plan_shape;

/* Spreads `total` left-out neurons over the layers l with sparse[l]: layer
 * l gets min(max_drop, c / sens[l]) (which minimises sum_l sens_l drop_l^2),
 * whole neurons summing to total (max_drop per layer at most). */
void eng__split_drops(const float *sens, const bool *sparse, int n_layer, long total,
                      int max_drop, int *ret_drop);

int eng__plan_build(const eng_plan_shape *shape, const eng_load_plan_params *params,
                    eng_plan **ret_plan, eng_error *err);
void eng__plan_free(eng_plan *plan);

uint64_t eng__fnv1a(uint64_t h, const void *data, size_t n);
bool eng__profile_matches_shape(const eng_profile *p, const eng_plan_shape *shape, eng_error *err);

/* Session side: allocate per-layer selection state; called by eng_session_new. */
int eng__select_session_init(struct eng_session *s);
void eng__select_session_free(struct eng_session *s);
void eng__select_session_reset(struct eng_session *s);
/* For eng_session_reset_prefix: -1 when this context casts no votes (it
 * will not select per request), else how many leading positions the votes
 * the session holds cover, under its current settings (0: none usable). */
int eng__select_prefix_votes(const struct eng_session *s);
/* After a reset that kept a prefix of n_past <= eng__select_prefix_votes()
 * positions: the held votes count for the new context, and its positions
 * below them do not vote again. */
void eng__select_keep_votes(struct eng_session *s);
/* Whether this eval must hand activations to eng__select_observe. */
bool eng__select_wants_act(const struct eng_session *s);
/* After layer il's FFN ran over n tokens: act [n][n_sel] for slots sel
 * (NULL: all), x [n][n_embd] the FFN's input (host memory; NULL where the
 * backend's is not). */
void eng__select_observe(struct eng_session *s, int il, const float *act, int n,
                         const int32_t *sel, int n_sel, const float *x);
/* ENG_COMP_LINEAR's map after layer il's FFN: y [n][n_embd] += x P V^T
 * (host memory), where a fit exists. */
void eng__select_comp_apply(const struct eng_session *s, int il, const float *x, float *y, int n);
/* The same with act still in backend memory: true when the backend counted
 * the votes itself (its topk_count op), or there was nothing to count; false
 * when they are wanted on the host (host-memory backend, profiling sums,
 * rankings the backend does not count): download, then eng__select_observe. */
bool eng__select_observe_backend(struct eng_session *s, int il, const float *act, int n,
                                 const int32_t *sel, int n_sel);
/* At the end of an eval: the first one after a reset fixes the dynamic set
 * (after bringing the backend's votes home). 0, or the backend's error. */
int eng__select_end_eval(struct eng_session *s);

#endif
