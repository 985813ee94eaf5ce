/* Unit tests of the daemon's parts that need no model: framing, budgeted
 * unpacking (with a small fuzz of corrupted frames), the fair queue and the
 * configuration parser. */
#include "config.h"
#include "queue.h"
#include "selectinfer.pb-c.h"
#include "si-frame.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                        \
        }                                                                      \
    } while (0)

static uint8_t *pack_generate(const char *prompt, uint64_t id, size_t *len)
{
    Selectinfer__Generate g = SELECTINFER__GENERATE__INIT;
    g.input_case = SELECTINFER__GENERATE__INPUT_PROMPT;
    g.prompt = (char *)prompt;
    g.has_max_tokens = 1;
    g.max_tokens = 7;
    char *stops[2] = {"a", "bc"};
    g.n_stop = 2;
    g.stop = stops;
    Selectinfer__Request r = SELECTINFER__REQUEST__INIT;
    r.has_id = 1;
    r.id = id;
    r.body_case = SELECTINFER__REQUEST__BODY_GENERATE;
    r.generate = &g;
    uint8_t *buf;
    CHECK(si_frame_pack(&r.base, SI_FRAME_MAX_DEFAULT, &buf, len) == 0);
    return buf;
}

static void test_frames(void)
{
    size_t l1, l2;
    uint8_t *f1 = pack_generate("hello", 1, &l1);
    uint8_t *f2 = pack_generate("world, a longer prompt", 2, &l2);
    CHECK(l1 > 4 && f1[0] == l1 - 4 && f1[1] == 0);
    uint8_t both[512];
    memcpy(both, f1, l1);
    memcpy(both + l1, f2, l2);

    /* byte by byte: frames come out whole, in order, exactly once */
    si_frame_reader r;
    si_frame_reader_init(&r, SI_FRAME_MAX_DEFAULT);
    int got = 0;
    for (size_t i = 0; i < l1 + l2; i++) {
        CHECK(si_frame_reader_feed(&r, both + i, 1) == 0);
        const uint8_t *p;
        size_t n;
        int rc;
        while ((rc = si_frame_reader_next(&r, &p, &n)) == 1) {
            Selectinfer__Request *req = (Selectinfer__Request *)
                si_unpack(&selectinfer__request__descriptor, p, n, 0);
            CHECK(req != NULL);
            if (req) {
                got++;
                CHECK(req->id == (uint64_t)got);
                CHECK(req->body_case == SELECTINFER__REQUEST__BODY_GENERATE);
                CHECK(strcmp(req->generate->prompt, got == 1 ? "hello" : "world, a longer prompt") == 0);
                CHECK(req->generate->n_stop == 2 && strcmp(req->generate->stop[1], "bc") == 0);
                si_message_free(&req->base);
            }
        }
        CHECK(rc == 0);
    }
    CHECK(got == 2);
    CHECK(si_frame_reader_pending(&r) == 0);
    si_frame_reader_clear(&r);

    /* a header announcing more than the cap fails before any payload */
    si_frame_reader_init(&r, 1024);
    uint8_t big[4] = {0x01, 0x04, 0, 0}; /* 1025 */
    CHECK(si_frame_reader_feed(&r, big, 4) == 0);
    const uint8_t *p;
    size_t n;
    CHECK(si_frame_reader_next(&r, &p, &n) == -EMSGSIZE);
    si_frame_reader_clear(&r);
    uint8_t ok[4] = {0x00, 0x04, 0, 0}; /* exactly 1024: waits for the payload */
    si_frame_reader_init(&r, 1024);
    CHECK(si_frame_reader_feed(&r, ok, 4) == 0);
    CHECK(si_frame_reader_next(&r, &p, &n) == 0);
    si_frame_reader_clear(&r);

    /* an empty frame is an empty, valid Request (the daemon answers it) */
    Selectinfer__Request *empty = (Selectinfer__Request *)si_unpack(&selectinfer__request__descriptor, NULL, 0, 0);
    CHECK(empty && empty->body_case == SELECTINFER__REQUEST__BODY__NOT_SET && !empty->has_id);
    si_message_free(empty ? &empty->base : NULL);

    /* packing refuses a message over the cap */
    uint8_t *buf;
    size_t len;
    Selectinfer__Request big_req = SELECTINFER__REQUEST__INIT;
    Selectinfer__Generate g = SELECTINFER__GENERATE__INIT;
    char *long_prompt = malloc(5000);
    memset(long_prompt, 'x', 4999);
    long_prompt[4999] = '\0';
    g.input_case = SELECTINFER__GENERATE__INPUT_PROMPT;
    g.prompt = long_prompt;
    big_req.body_case = SELECTINFER__REQUEST__BODY_GENERATE;
    big_req.generate = &g;
    CHECK(si_frame_pack(&big_req.base, 4096, &buf, &len) == -EMSGSIZE);
    CHECK(si_frame_pack(&big_req.base, 8192, &buf, &len) == 0);
    free(buf);
    free(long_prompt);
    free(f1);
    free(f2);
}

static void test_budget(void)
{
    /* 20000 empty chat messages: 2 bytes each on the wire, far more in
     * memory; the default budget (16x + 64 KiB) refuses, a big one allows */
    size_t n_msgs = 20000;
    Selectinfer__ChatMessage **msgs = calloc(n_msgs, sizeof(*msgs));
    Selectinfer__ChatMessage m = SELECTINFER__CHAT_MESSAGE__INIT;
    for (size_t i = 0; i < n_msgs; i++)
        msgs[i] = &m;
    Selectinfer__ChatMessages chat = SELECTINFER__CHAT_MESSAGES__INIT;
    chat.n_messages = n_msgs;
    chat.messages = msgs;
    Selectinfer__Generate g = SELECTINFER__GENERATE__INIT;
    g.input_case = SELECTINFER__GENERATE__INPUT_CHAT;
    g.chat = &chat;
    Selectinfer__Request r = SELECTINFER__REQUEST__INIT;
    r.body_case = SELECTINFER__REQUEST__BODY_GENERATE;
    r.generate = &g;
    uint8_t *buf;
    size_t len;
    CHECK(si_frame_pack(&r.base, SI_FRAME_MAX_DEFAULT, &buf, &len) == 0);
    ProtobufCMessage *u = si_unpack(&selectinfer__request__descriptor, buf + 4, len - 4, 0);
    CHECK(u == NULL);
    u = si_unpack(&selectinfer__request__descriptor, buf + 4, len - 4, 64u << 20);
    CHECK(u != NULL);
    if (u)
        CHECK(((Selectinfer__Request *)u)->generate->chat->n_messages == n_msgs);
    si_message_free(u);
    free(buf);
    free(msgs);
}

static void test_fuzz(void)
{
    size_t len;
    uint8_t *frame = pack_generate("fuzz me, please", 9, &len);
    uint8_t *payload = frame + 4;
    size_t plen = len - 4;
    uint64_t s = 0x9E3779B97F4A7C15ull;
    int decoded = 0, refused = 0;
    for (int it = 0; it < 20000; it++) {
        uint8_t mut[256];
        memcpy(mut, payload, plen);
        int flips = 1 + (int)(s % 4);
        for (int k = 0; k < flips; k++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            mut[s % plen] = (uint8_t)(s >> 24);
        }
        size_t cut = (it % 3 == 0) ? (size_t)(s % (plen + 1)) : plen;
        ProtobufCMessage *m = si_unpack(&selectinfer__request__descriptor, mut, cut, 0);
        if (m) {
            decoded++;
            si_message_free(m);
        } else {
            refused++;
        }
    }
    /* both outcomes occur: the fuzz reaches past the first byte */
    CHECK(decoded > 0 && refused > 0);
    free(frame);
}

typedef struct item {
    sid_qitem q;
    int client, seq;
} item;

static void test_queue(void)
{
    sid_queue q;
    sid_queue_init(&q);
    item it[9];
    int keys[3];
    /* client 0 queues 5, then client 1 queues 2, then client 2 queues 2 */
    int plan[9] = {0, 0, 0, 0, 0, 1, 1, 2, 2};
    int seq[3] = {0, 0, 0};
    for (int i = 0; i < 9; i++) {
        it[i].client = plan[i];
        it[i].seq = seq[plan[i]]++;
        CHECK(sid_queue_push(&q, &keys[plan[i]], &it[i].q) == 0);
    }
    CHECK(sid_queue_len(&q) == 9);
    CHECK(sid_queue_lane_len(&q, &keys[0]) == 5);
    /* remove client 0's second request (cancelled while queued) */
    sid_queue_remove(&q, &it[1].q);
    CHECK(it[1].q.lane == NULL);
    CHECK(sid_queue_len(&q) == 8);
    sid_queue_remove(&q, &it[1].q); /* no-op */
    CHECK(sid_queue_len(&q) == 8);
    /* round-robin: 0,1,2,0,1,2,0,0 */
    int expect_client[8] = {0, 1, 2, 0, 1, 2, 0, 0};
    int expect_seq[8] = {0, 0, 0, 2, 1, 1, 3, 4};
    for (int i = 0; i < 8; i++) {
        item *x = (item *)sid_queue_pop(&q);
        CHECK(x != NULL);
        if (!x)
            break;
        CHECK(x->client == expect_client[i]);
        CHECK(x->seq == expect_seq[i]);
    }
    CHECK(sid_queue_pop(&q) == NULL);
    CHECK(sid_queue_len(&q) == 0);
    /* a removed lane's last item frees the lane; pushing again works */
    CHECK(sid_queue_push(&q, &keys[1], &it[0].q) == 0);
    sid_queue_remove(&q, &it[0].q);
    CHECK(q.head == NULL && q.tail == NULL);
    CHECK(sid_queue_push(&q, &keys[1], &it[0].q) == 0);
    CHECK(sid_queue_push(&q, &keys[2], &it[2].q) == 0);
    sid_queue_clear(&q);
    CHECK(sid_queue_len(&q) == 0 && it[0].q.lane == NULL);
}

static void test_config(void)
{
    sid_config c;
    char err[512];
    sid_config_defaults(&c);
    CHECK(c.max_frame == 1u << 20 && c.max_queue == 64 && c.profile[0] == '\0');
    CHECK(c.mode == SID_MODE_AUTO && c.gamma == 0.7f && c.delta == 0.3f && c.phi == 0.0f &&
          c.alpha == 0.2f && c.rank == SID_RANK_ABS && c.task_switch == SID_TASK_SWITCH_SWAP);
    const char *text =
        "# comment\n"
        "model = /models/x.gguf\n"
        "  max-queue=8   \n"
        "max_frame = 64k\n"
        "\n"
        "socket = \"/tmp/a b.sock\"\n"
        "log_level = debug\r\n";
    CHECK(sid_config_parse(&c, text, strlen(text), "t.conf", err, sizeof(err)) == 0);
    CHECK(strcmp(c.model, "/models/x.gguf") == 0);
    CHECK(c.max_queue == 8 && c.max_frame == 65536);
    CHECK(strcmp(c.socket, "/tmp/a b.sock") == 0);
    CHECK(c.log_level == 7);

    /* the defaults that won the evaluation: layer 0 dense, budget by sensitivity */
    sid_config dflt;
    sid_config_defaults(&dflt);
    CHECK(dflt.dense_first == 1 && dflt.layer_budget == SID_LAYER_BUDGET_SENS);
    CHECK(dflt.backend == SID_BACKEND_CPU && dflt.device == 0);
    CHECK(dflt.copy_dynamic == 1);
    CHECK(dflt.prefill_q8 == 0);

    /* the SelectInfer keys: floats, enums, a 64-bit size */
    const char *sel =
        "profile = smollm2.siprof\n"
        "task = qa\n"
        "mode = load-only\n"
        "gamma = 0.5\n"
        "delta = 0.25\n"
        "dense-first = 2\n"
        "budget = 6G\n"
        "phi = 0.4\n"
        "alpha = 1\n"
        "rank = signed\n"
        "task_switch = refuse\n"
        "layer_budget = uniform\n"
        "backend = auto\n"
        "device = 1\n"
        "copy-dynamic = no\n"
        "prefill-q8 = yes\n";
    CHECK(sid_config_parse(&c, sel, strlen(sel), "s.conf", err, sizeof(err)) == 0);
    CHECK(strcmp(c.profile, "smollm2.siprof") == 0 && strcmp(c.task, "qa") == 0);
    CHECK(strcmp(sid_mode_names[c.mode], "load-only") == 0);
    CHECK(c.gamma == 0.5f && c.delta == 0.25f && c.dense_first == 2 && c.dense_last == 0);
    CHECK(c.budget == 6ull << 30 && c.phi == 0.4f && c.alpha == 1.0f);
    CHECK(c.rank == SID_RANK_SIGNED && c.task_switch == SID_TASK_SWITCH_REFUSE);
    CHECK(c.layer_budget == SID_LAYER_BUDGET_UNIFORM && c.backend == SID_BACKEND_AUTO && c.device == 1);
    CHECK(c.copy_dynamic == 0 && c.prefill_q8 == 1);

    const char *bad[] = {"max_queue = 0\n", "max_queue = -1\n", "max_queue = 12x\n", "nonsense = 1\n",
                         "no equals sign\n", "log_level = loud\n", "max_frame = 99999999999\n",
                         "gamma = 0\n", "gamma = 1.5\n", "gamma = nan\n", "phi = -0.1\n", "alpha = 0\n",
                         "mode = sparse\n", "rank = up\n", "task_switch = maybe\n", "delta = x\n",
                         "layer_budget = even\n", "backend = tpu\n", "copy_dynamic = 1\n",
                         "prefill_q8 = 1\n"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sid_config d;
        sid_config_defaults(&d);
        err[0] = '\0';
        CHECK(sid_config_parse(&d, bad[i], strlen(bad[i]), "bad.conf", err, sizeof(err)) == -EINVAL);
        CHECK(strncmp(err, "bad.conf:1:", 11) == 0);
    }

    /* flags win over the file; reload keeps what cannot change */
    FILE *f = fopen("test-daemon-units.conf", "w");
    CHECK(f != NULL);
    if (!f)
        return;
    fputs("model = /a.gguf\nmax_queue = 3\nthreads = 2\n", f);
    fclose(f);
    sid_override ov[] = {{"max-queue", "5"}};
    CHECK(sid_config_build(&c, "test-daemon-units.conf", ov, 1, err, sizeof(err)) == 0);
    CHECK(c.max_queue == 5 && c.threads == 2 && strcmp(c.model, "/a.gguf") == 0);
    CHECK(sid_config_build(&c, "/nonexistent/x.conf", NULL, 0, err, sizeof(err)) == -ENOENT);
    sid_config running = c, next = c;
    next.max_tokens = 99;
    next.threads = 7;
    const char *fixed;
    sid_config_apply_reload(&running, &next, &fixed);
    CHECK(running.max_tokens == 99);
    CHECK(running.threads == 2);
    CHECK(fixed && strcmp(fixed, "threads") == 0);
    /* the plan changes through use_profile, not a reload; task_switch may */
    next = running;
    next.gamma = 0.9f;
    next.task_switch = SID_TASK_SWITCH_REFUSE;
    sid_config_apply_reload(&running, &next, &fixed);
    CHECK(running.gamma == 0.7f && running.task_switch == SID_TASK_SWITCH_REFUSE);
    CHECK(fixed && strcmp(fixed, "gamma") == 0);
    remove("test-daemon-units.conf");
}

int main(void)
{
    test_frames();
    test_budget();
    test_fuzz();
    test_queue();
    test_config();
    if (failures) {
        fprintf(stderr, "%d checks failed\n", failures);
        return 1;
    }
    printf("all daemon unit checks passed\n");
    return 0;
}
