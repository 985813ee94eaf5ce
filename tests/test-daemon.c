/* Integration tests of selectinferd: each run starts the real daemon binary
 * on a temporary socket and drives it through the client library and sictl.
 *
 *     test-daemon DAEMON SICTL SCENARIO [fake | MAKE-PROFILE]
 *
 * With "fake", DAEMON is selectinferd-fake (tests/daemon-fake-engine.c:
 * exact token timing); otherwise it serves the default model (SI_MODEL or
 * the cache; exit 77 when absent). Scenarios: streaming, concurrent,
 * overload, cancel, disconnect, garbage, slow-reader, connections, admin,
 * lifecycle, prefill-cancel, socket-activation and slots (fake only), swap and task-refuse (SelectInfer: hot-swap of
 * task profiles, per-request phi; on the real model they need
 * MAKE-PROFILE, tests/daemon-make-profile.c, to write their profile).
 * Exit 0 pass, 1 fail, 77 skip. */
#include "selectinfer-client.h"
#include "si-frame.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <grp.h>
#include <pthread.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *daemon_bin, *sictl_bin, *mkprofile_bin;
static bool fake;
static char model[4096];
static int failures;

#define CHECK(cond)                                                            \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond); \
            failures++;                                                        \
        }                                                                      \
    } while (0)

#define REQUIRE(cond)                                                          \
    do {                                                                       \
        if (!(cond)) {                                                         \
            fprintf(stderr, "%s:%d: fatal: %s\n", __FILE__, __LINE__, #cond);  \
            failures++;                                                        \
            return;                                                            \
        }                                                                      \
    } while (0)

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Milliseconds from now to deadline (a now_s() time), at least 1: the
 * receive timeout of a loop that must end, pass or fail, by its deadline. */
static int ms_left(double deadline)
{
    double left = (deadline - now_s()) * 1000.0;
    return left < 1.0 ? 1 : left > 600000.0 ? 600000 : (int)left;
}

/* Says what a reply is, for the log of a failed check. */
static void describe_reply(const char *what, const Selectinfer__Response *r)
{
    fprintf(stderr, "%s: id %llu, body %d", what, (unsigned long long)r->id, (int)r->body_case);
    if (r->body_case == SELECTINFER__RESPONSE__BODY_ERROR)
        fprintf(stderr, ", error %d: %s", (int)r->error->code, r->error->message ? r->error->message : "");
    fprintf(stderr, "\n");
}

/* ---- the daemon process ---------------------------------------------------- */

typedef struct daemon_proc {
    pid_t pid;
    char dir[64];
    char sock[128];
    char log[128];
    char conf[128];
} daemon_proc;

static daemon_proc D;
static int activation_fd = -1; /* >= 0: handed to the daemon as systemd would */

static void daemon_start_env(daemon_proc *d, const char *const *extra, const char *const *env)
{
    snprintf(d->dir, sizeof(d->dir), "/tmp/si-daemon-test-XXXXXX");
    if (!mkdtemp(d->dir)) {
        perror("mkdtemp");
        exit(1);
    }
    chmod(d->dir, 0755); /* the admin scenario connects as another user */
    snprintf(d->sock, sizeof(d->sock), "%s/s.sock", d->dir);
    snprintf(d->log, sizeof(d->log), "%s/daemon.log", d->dir);
    snprintf(d->conf, sizeof(d->conf), "%s/selectinferd.conf", d->dir);
    const char *argv[64];
    int n = 0;
    argv[n++] = daemon_bin;
    argv[n++] = "--config";
    argv[n++] = "";
    argv[n++] = "--model";
    argv[n++] = model;
    argv[n++] = "--socket";
    argv[n++] = d->sock;
    argv[n++] = "--log-level";
    argv[n++] = "debug";
    argv[n++] = "--ctx-size";
    argv[n++] = "512";
    for (int i = 0; extra && extra[i] && n < 62; i++) {
        /* "--config" given by the scenario replaces ours */
        if (strcmp(extra[i], "--config") == 0) {
            argv[2] = extra[i + 1];
            i++;
            continue;
        }
        argv[n++] = extra[i];
    }
    argv[n] = NULL;
    pid_t parent = getpid();
    d->pid = fork();
    if (d->pid == 0) {
        /* the daemon dies with the test, however the test ends (a crash
         * included): no daemon outlives a failed run */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 || getppid() != parent)
            _exit(126);
        int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        /* stdout too: a daemon left behind by a failed run must not hold
         * the test runner's pipe open (meson waits for its EOF) */
        dup2(fd, 1);
        dup2(fd, 2);
        for (int i = 0; env && env[i]; i++)
            putenv((char *)env[i]);
        if (activation_fd >= 0) {
            /* sd_listen_fds(): fd 3 on, for this very process */
            char pid[32];
            snprintf(pid, sizeof(pid), "%d", (int)getpid());
            if (activation_fd != 3 && dup2(activation_fd, 3) < 0)
                _exit(126);
            setenv("LISTEN_FDS", "1", 1);
            setenv("LISTEN_PID", pid, 1);
        }
        execv(daemon_bin, (char **)argv);
        perror("execv");
        _exit(127);
    }
}

static void dump_log(const daemon_proc *d)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "tail -n 40 %s >&2", d->log);
    if (system(cmd) != 0)
        fprintf(stderr, "(no daemon log)\n");
}

/* Status through the client library; NULL on failure. */
static Selectinfer__Response *status(const char *sock)
{
    si_client *c;
    if (si_client_connect(sock, &c) < 0)
        return NULL;
    Selectinfer__StatusRequest sr = SELECTINFER__STATUS_REQUEST__INIT;
    Selectinfer__Request req = SELECTINFER__REQUEST__INIT;
    req.body_case = SELECTINFER__REQUEST__BODY_STATUS;
    req.status = &sr;
    Selectinfer__Response *r = NULL;
    if (si_client_call(c, &req, 10000, &r) < 0 || r->body_case != SELECTINFER__RESPONSE__BODY_STATUS) {
        si_response_free(r);
        r = NULL;
    }
    si_client_close(c);
    return r;
}

static int wait_ready(daemon_proc *d, double timeout_s)
{
    double t0 = now_s();
    while (now_s() - t0 < timeout_s) {
        int st;
        if (waitpid(d->pid, &st, WNOHANG) == d->pid) {
            fprintf(stderr, "daemon exited during start-up (status %d)\n", st);
            dump_log(d);
            d->pid = 0;
            return -1;
        }
        Selectinfer__Response *r = status(d->sock);
        int state = r ? (int)r->status->state : 0;
        si_response_free(r);
        if (state == SELECTINFER__DAEMON_STATE__STATE_READY)
            return 0;
        sleep_ms(50);
    }
    fprintf(stderr, "daemon not ready after %.0f s\n", timeout_s);
    dump_log(d);
    return -1;
}

static void daemon_start(const char *const *extra)
{
    daemon_start_env(&D, extra, NULL);
    if (wait_ready(&D, 120) < 0) {
        failures++;
        if (D.pid > 0)
            kill(D.pid, SIGKILL);
        exit(1);
    }
}

static const char *sictl_stdin; /* a file for run_sictl's stdin; NULL: the test's */

/* Runs sictl with args; stdout into out (may be NULL). Returns its exit status. */
static int count_lines(const char *s)
{
    int n = 0;
    for (const char *p = s; (p = strchr(p, '\n')); p++)
        n++;
    return n;
}

static int run_sictl(const char *const *args, char *out, size_t cap, const char *user_env)
{
    int pfd[2];
    if (pipe(pfd) < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        int in = sictl_stdin ? open(sictl_stdin, O_RDONLY) : -1;
        if (sictl_stdin && (in < 0 || dup2(in, 0) < 0))
            _exit(126);
        const char *argv[32];
        int n = 0;
        argv[n++] = sictl_bin;
        for (int i = 0; args[i] && n < 31; i++)
            argv[n++] = args[i];
        argv[n] = NULL;
        if (user_env)
            putenv((char *)user_env);
        execv(sictl_bin, (char **)argv);
        _exit(127);
    }
    close(pfd[1]);
    size_t len = 0;
    char buf[4096];
    ssize_t r;
    while ((r = read(pfd[0], buf, sizeof(buf))) > 0) {
        if (out && len + (size_t)r < cap) {
            memcpy(out + len, buf, (size_t)r);
            len += (size_t)r;
        }
    }
    if (out)
        out[len] = '\0';
    close(pfd[0]);
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Shuts the daemon down with sictl and expects a clean exit (status 0:
 * the loop closed every handle) within 60 s. */
static void daemon_stop(void)
{
    const char *args[] = {"--socket", D.sock, "shutdown", NULL};
    char out[256];
    int rc = run_sictl(args, out, sizeof(out), NULL);
    CHECK(rc == 0);
    double t0 = now_s();
    int st = 0;
    pid_t w = 0;
    while (now_s() - t0 < 60 && (w = waitpid(D.pid, &st, WNOHANG)) == 0)
        sleep_ms(20);
    if (w != D.pid) {
        fprintf(stderr, "daemon did not exit after shutdown\n");
        kill(D.pid, SIGKILL);
        waitpid(D.pid, &st, 0);
        failures++;
    } else {
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    }
    struct stat sb;
    CHECK(stat(D.sock, &sb) < 0); /* the socket is removed */
    if (failures)
        dump_log(&D);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", D.dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", D.dir);
}

/* ---- requests ---------------------------------------------------------------- */

typedef struct gen_result {
    char text[65536];
    size_t len;
    int n_chunks;
    Selectinfer__Response *end; /* done or error */
    double t_first, t_end;
} gen_result;

static void init_chat(Selectinfer__Generate *g, Selectinfer__ChatMessages *chat,
                      Selectinfer__ChatMessage *m, Selectinfer__ChatMessage **mp, const char *text)
{
    selectinfer__generate__init(g);
    selectinfer__chat_messages__init(chat);
    selectinfer__chat_message__init(m);
    m->role = "user";
    m->content = (char *)text;
    mp[0] = m;
    chat->n_messages = 1;
    chat->messages = mp;
    g->input_case = SELECTINFER__GENERATE__INPUT_CHAT;
    g->chat = chat;
}

static void init_raw(Selectinfer__Generate *g, const char *prompt, uint32_t max_tokens)
{
    selectinfer__generate__init(g);
    g->input_case = SELECTINFER__GENERATE__INPUT_PROMPT;
    g->prompt = (char *)prompt;
    g->has_max_tokens = true;
    g->max_tokens = max_tokens;
}

/* A generate request around g; the caller sets req.id. */
static Selectinfer__Request generate_request(Selectinfer__Generate *g)
{
    Selectinfer__Request req = SELECTINFER__REQUEST__INIT;
    req.body_case = SELECTINFER__REQUEST__BODY_GENERATE;
    req.generate = g;
    req.has_id = true;
    return req;
}

static int on_chunk_collect(void *ud, const char *text, size_t len)
{
    gen_result *r = ud;
    if (r->n_chunks == 0)
        r->t_first = now_s();
    r->n_chunks++;
    if (r->len + len < sizeof(r->text)) {
        memcpy(r->text + r->len, text, len);
        r->len += len;
        r->text[r->len] = '\0';
    }
    return 0;
}

static int generate(const char *sock, Selectinfer__Generate *g, gen_result *res)
{
    memset(res, 0, sizeof(*res));
    si_client *c;
    int rc = si_client_connect(sock, &c);
    if (rc < 0)
        return rc;
    rc = si_client_generate(c, g, on_chunk_collect, res, 300000, &res->end);
    res->t_end = now_s();
    si_client_close(c);
    return rc;
}

static bool is_done(const Selectinfer__Response *r)
{
    return r && r->body_case == SELECTINFER__RESPONSE__BODY_DONE;
}

static int error_code(const Selectinfer__Response *r)
{
    return r && r->body_case == SELECTINFER__RESPONSE__BODY_ERROR ? (int)r->error->code : -1;
}

static int send_raw(int fd, const void *buf, size_t len)
{
    size_t off = 0;
    while (off < len) {
        ssize_t w = send(fd, (const char *)buf + off, len - off, MSG_NOSIGNAL);
        if (w < 0)
            return -errno;
        off += (size_t)w;
    }
    return 0;
}

static int raw_connect(const char *sock)
{
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%.107s", sock);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads replies on a client until EOF; returns the first error code seen
 * (-1 none) and whether EOF came within timeout. */
static int read_until_eof(si_client *c, int timeout_ms, bool *eof)
{
    int code = -1;
    *eof = false;
    for (;;) {
        Selectinfer__Response *r;
        int rc = si_client_recv(c, timeout_ms, &r);
        if (rc == -ECONNRESET) {
            *eof = true;
            break;
        }
        if (rc <= 0)
            break;
        if (code < 0 && r->body_case == SELECTINFER__RESPONSE__BODY_ERROR)
            code = (int)r->error->code;
        si_response_free(r);
    }
    return code;
}

/* The reference answer used by several scenarios: greedy, short. */
static const char *CHAT_PROMPT = "What is the capital of France?";
#define CHAT_TOKENS 12

static void reference(gen_result *ref)
{
    Selectinfer__Generate g;
    Selectinfer__ChatMessages chat;
    Selectinfer__ChatMessage m, *mp[1];
    init_chat(&g, &chat, &m, mp, CHAT_PROMPT);
    g.has_max_tokens = true;
    g.max_tokens = CHAT_TOKENS;
    int rc = generate(D.sock, &g, ref);
    CHECK(rc == 0);
    CHECK(is_done(ref->end));
}

/* ---- scenarios ---------------------------------------------------------------- */

static void scenario_streaming(void)
{
    daemon_start(NULL);
    gen_result *a = calloc(1, sizeof(*a)), *b = calloc(1, sizeof(*b));
    reference(a);
    REQUIRE(is_done(a->end));
    const Selectinfer__Done *d = a->end->done;
    CHECK(a->n_chunks >= 1 && a->len > 0);
    CHECK(d->prompt_tokens > 0);
    CHECK(d->generated_tokens > 0 && d->generated_tokens <= CHAT_TOKENS);
    CHECK(d->prefill_ns > 0 && d->decode_ns > 0);
    CHECK(d->stop_reason == SELECTINFER__STOP_REASON__STOP_LENGTH ||
          d->stop_reason == SELECTINFER__STOP_REASON__STOP_EOS);
    CHECK(d->ffn_share > 0.99f && d->ffn_share <= 1.0f);
    CHECK(d->profile && strcmp(d->profile, "dense") == 0);
    CHECK(!d->has_text);

    /* not streamed: the same text (greedy), in done.text, no chunks */
    Selectinfer__Generate g;
    Selectinfer__ChatMessages chat;
    Selectinfer__ChatMessage m, *mp[1];
    init_chat(&g, &chat, &m, mp, CHAT_PROMPT);
    g.has_max_tokens = true;
    g.max_tokens = CHAT_TOKENS;
    g.has_stream = true;
    g.stream = false;
    CHECK(generate(D.sock, &g, b) == 0);
    CHECK(is_done(b->end));
    if (is_done(b->end)) {
        CHECK(b->n_chunks == 0);
        CHECK(b->end->done->has_text && b->end->done->text.len == a->len &&
              memcmp(b->end->done->text.data, a->text, a->len) == 0);
    }

    /* sictl streams the same answer to stdout */
    char out[65536];
    char mt[16];
    snprintf(mt, sizeof(mt), "%d", CHAT_TOKENS);
    const char *args[] = {"--socket", D.sock, "generate", "--temperature", "0", "--max-tokens", mt, CHAT_PROMPT, NULL};
    CHECK(run_sictl(args, out, sizeof(out), NULL) == 0);
    CHECK(strlen(out) == a->len + 1 && strncmp(out, a->text, a->len) == 0);
    /* the socket from the environment, JSON lines out */
    char env[256];
    snprintf(env, sizeof(env), SI_SOCKET_ENV "=%s", D.sock);
    const char *jargs[] = {"--json", "generate", "--max-tokens", "3", "--raw", "Hello", NULL};
    CHECK(run_sictl(jargs, out, sizeof(out), env) == 0);
    CHECK(strstr(out, "{\"id\":1,\"done\":{\"stop_reason\":\"STOP_") != NULL);
    const char *pt = strstr(out, "\"prompt_tokens\":");
    const int hello_tokens = pt ? atoi(pt + strlen("\"prompt_tokens\":")) : -1;
    CHECK(hello_tokens > 0);
    const char *sargs[] = {"--json", "status", NULL};
    CHECK(run_sictl(sargs, out, sizeof(out), env) == 0);
    CHECK(strstr(out, "\"state\":\"STATE_READY\"") && strstr(out, "\"requests_served\":4"));
    const char *pargs[] = {"profiles", NULL};
    CHECK(run_sictl(pargs, out, sizeof(out), env) == 0 && strstr(out, "dense"));

    /* meaningful exit codes */
    const char *e1[] = {"generate", "--temperature", "-1", "x", NULL};
    CHECK(run_sictl(e1, NULL, 0, env) == 65);
    const char *e2[] = {"use", "qa", NULL};
    CHECK(run_sictl(e2, out, sizeof(out), env) == 1);
    const char *e3[] = {"--socket", "/nonexistent/x.sock", "status", NULL};
    CHECK(run_sictl(e3, NULL, 0, NULL) == 69);
    const char *e4[] = {"bogus", NULL};
    CHECK(run_sictl(e4, NULL, 0, env) == 64);
    /* the dense plan computes every neuron: phi < 1 is out of its range */
    const char *e5[] = {"generate", "--phi", "0.5", "x", NULL};
    CHECK(run_sictl(e5, NULL, 0, env) == 65);
    const char *e6[] = {"generate", "--presence-penalty", "2.5", "x", NULL};
    CHECK(run_sictl(e6, NULL, 0, env) == 65);
    /* an option sictl does not know is refused, not sent as text; after
     * "--" it is text; -n is --max-tokens */
    const char *e7[] = {"generate", "-x", "Hello", NULL};
    CHECK(run_sictl(e7, NULL, 0, env) == 64);
    const char *e8[] = {"--json", "generate", "-n", "2", "--raw", "--", "-x", "Hello", NULL};
    CHECK(run_sictl(e8, out, sizeof(out), env) == 0);
    pt = strstr(out, "\"prompt_tokens\":");
    CHECK(strstr(out, "\"generated_tokens\":2") && pt &&
          atoi(pt + strlen("\"prompt_tokens\":")) > hello_tokens); /* "-x Hello" */

    /* the daemon answers bad requests with stable codes */
    si_client *c;
    REQUIRE(si_client_connect(D.sock, &c) == 0);
    Selectinfer__Response *r;
    Selectinfer__Generate bad;
    init_raw(&bad, "x", 4);
    Selectinfer__Sampling s = SELECTINFER__SAMPLING__INIT;
    s.has_top_p = true;
    s.top_p = 0.0f;
    bad.sampling = &s;
    REQUIRE(si_client_generate(c, &bad, NULL, NULL, 60000, &r) == 0);
    CHECK(error_code(r) == SELECTINFER__ERROR_CODE__INVALID_ARGUMENT);
    si_response_free(r);
    selectinfer__generate__init(&bad); /* no input */
    REQUIRE(si_client_generate(c, &bad, NULL, NULL, 60000, &r) == 0);
    CHECK(error_code(r) == SELECTINFER__ERROR_CODE__INVALID_ARGUMENT);
    si_response_free(r);
    Selectinfer__ChatMessages chat2;
    Selectinfer__ChatMessage m2, *mp2[1];
    init_chat(&bad, &chat2, &m2, mp2, "hi");
    m2.role = "wizard";
    REQUIRE(si_client_generate(c, &bad, NULL, NULL, 60000, &r) == 0);
    CHECK(error_code(r) == SELECTINFER__ERROR_CODE__INVALID_ARGUMENT);
    si_response_free(r);
    /* a prompt longer than the context (512 tokens) */
    char *longp = malloc(20001);
    for (int i = 0; i < 20000; i++)
        longp[i] = (i % 5 == 4) ? ' ' : "abcd"[i % 5];
    longp[20000] = '\0';
    init_raw(&bad, longp, 4);
    REQUIRE(si_client_generate(c, &bad, NULL, NULL, 120000, &r) == 0);
    CHECK(error_code(r) == SELECTINFER__ERROR_CODE__PROMPT_TOO_LONG);
    si_response_free(r);
    free(longp);
    /* a request without an id */
    Selectinfer__StatusRequest sr = SELECTINFER__STATUS_REQUEST__INIT;
    Selectinfer__Request req = SELECTINFER__REQUEST__INIT;
    req.body_case = SELECTINFER__REQUEST__BODY_STATUS;
    req.status = &sr;
    CHECK(si_client_send(c, &req) == 0);
    REQUIRE(si_client_recv(c, 10000, &r) == 1);
    CHECK(error_code(r) == SELECTINFER__ERROR_CODE__INVALID_ARGUMENT && r->id == 0);
    si_response_free(r);
    si_client_close(c);

    Selectinfer__Response *st = status(D.sock);
    REQUIRE(st);
    CHECK(st->status->requests_served == 5); /* the four above and sictl -n 2 */
    CHECK(st->status->requests_failed >= 6);
    CHECK(st->status->generated_tokens >= 2 * d->generated_tokens);
    CHECK(st->status->rss_bytes > 0 && st->status->uptime_ns > 0);
    CHECK(st->status->model_arch && st->status->backend);
    /* the backend's decode-graph counters: the fake engine counts one step
     * per token; the CPU has no graphs and the status says nothing */
    if (fake)
        CHECK(st->status->decode_graphs && st->status->decode_graphs->enabled &&
              st->status->decode_graphs->steps >= st->status->generated_tokens &&
              st->status->decode_graphs->replayed == st->status->decode_graphs->steps / 2);
    else
        CHECK(!st->status->decode_graphs);
    si_response_free(st);

    /* sictl embed: a JSON array per input, of n_embd unit-length values;
     * "-" takes one input per non-empty line of stdin */
    const char *em1[] = {"embed", "Hello", "Hello there", NULL};
    CHECK(run_sictl(em1, out, sizeof(out), env) == 0);
    int n_lines = 0, n_vals = 0;
    double sq = 0.0;
    for (char *p = out, *end; *p; p = end) {
        end = strchr(p, '\n');
        if (!end)
            break;
        *end++ = 0;
        n_lines++;
        CHECK(p[0] == '[' && end[-2] == ']');
        for (char *q = p + 1; n_lines == 1 && *q && *q != ']'; q++) {
            double v = strtod(q, &q);
            sq += v * v;
            n_vals++;
            if (*q == ']')
                break;
        }
    }
    if (!(n_lines == 2 && n_vals == (fake ? 8 : 576) && fabs(sq - 1.0) < 1e-4)) {
        fprintf(stderr, "sictl embed: %d lines, %d values, sum of squares %g\n", n_lines, n_vals, sq);
        failures++;
    }
    char lines[] = "/tmp/si-embed-XXXXXX";
    int lfd = mkstemp(lines);
    CHECK(lfd >= 0 && write(lfd, "one\n\ntwo\nthree", 15) == 15);
    close(lfd);
    sictl_stdin = lines;
    const char *em2[] = {"embed", "--pooling", "last", "-", NULL};
    CHECK(run_sictl(em2, out, sizeof(out), env) == 0);
    CHECK(count_lines(out) == 3);
    sictl_stdin = NULL;
    unlink(lines);
    /* 29 lines on stdin and 28 arguments after them: sictl once wrote 27
     * pointers past its array here (glibc then aborted) */
    char many[] = "/tmp/si-embed-XXXXXX";
    lfd = mkstemp(many);
    for (int k = 0; lfd >= 0 && k < 29; k++)
        CHECK(write(lfd, "l\n", 2) == 2);
    close(lfd);
    const char *em6[31] = {"embed", "-"};
    for (int k = 2; k < 30; k++)
        em6[k] = "a";
    sictl_stdin = many;
    static char big[1 << 20];
    CHECK(run_sictl(em6, big, sizeof(big), env) == 0);
    CHECK(count_lines(big) == 57);
    sictl_stdin = NULL;
    unlink(many);
    const char *em3[] = {"embed", "--pooling", "cls", "x", NULL};
    CHECK(run_sictl(em3, NULL, 0, env) == 65);
    const char *em4[] = {"embed", NULL};
    CHECK(run_sictl(em4, NULL, 0, env) == 64);
    /* after "--" every argument is an input, "--pooling" too: two lines */
    const char *em5[] = {"embed", "--", "--pooling", "x", NULL};
    CHECK(run_sictl(em5, out, sizeof(out), env) == 0);
    CHECK(count_lines(out) == 2);

    si_response_free(a->end);
    si_response_free(b->end);
    free(a);
    free(b);
    daemon_stop();
}

typedef struct thread_arg {
    int index;
    gen_result res;
    int rc;
} thread_arg;

static void *concurrent_client(void *p)
{
    thread_arg *t = p;
    Selectinfer__Generate g;
    Selectinfer__ChatMessages chat;
    Selectinfer__ChatMessage m, *mp[1];
    init_chat(&g, &chat, &m, mp, CHAT_PROMPT);
    g.has_max_tokens = true;
    g.max_tokens = fake ? 10 : 4;
    t->rc = generate(D.sock, &g, &t->res);
    return NULL;
}

static void scenario_concurrent(void)
{
    enum { N = 16 };
    daemon_start(NULL);
    static thread_arg ref;
    concurrent_client(&ref);
    REQUIRE(ref.rc == 0 && is_done(ref.res.end));
    static thread_arg args[N];
    pthread_t th[N];
    for (int i = 0; i < N; i++) {
        args[i].index = i;
        pthread_create(&th[i], NULL, concurrent_client, &args[i]);
    }
    int complete = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        thread_arg *t = &args[i];
        CHECK(t->rc == 0);
        CHECK(is_done(t->res.end));
        if (t->rc == 0 && is_done(t->res.end)) {
            /* every response complete: the same greedy text and count */
            CHECK(t->res.end->done->generated_tokens == ref.res.end->done->generated_tokens);
            CHECK(t->res.len == ref.res.len && memcmp(t->res.text, ref.res.text, ref.res.len) == 0);
            complete += t->res.len == ref.res.len;
        }
        si_response_free(t->res.end);
    }
    CHECK(complete == N);

    /* one connection, several pipelined requests: each gets its own stream */
    si_client *c;
    REQUIRE(si_client_connect(D.sock, &c) == 0);
    Selectinfer__Generate g;
    init_raw(&g, "Once upon a time", 3);
    Selectinfer__Request req = generate_request(&g);
    for (uint64_t id = 101; id <= 103; id++) {
        req.id = id;
        CHECK(si_client_send(c, &req) == 0);
    }
    int done[3] = {0, 0, 0};
    double deadline = now_s() + (fake ? 60 : 300);
    for (int n = 0; n < 3;) {
        Selectinfer__Response *r;
        int rc = si_client_recv(c, ms_left(deadline), &r);
        REQUIRE(rc == 1);
        CHECK(r->id >= 101 && r->id <= 103);
        if (r->body_case == SELECTINFER__RESPONSE__BODY_DONE && r->id >= 101 && r->id <= 103) {
            done[r->id - 101]++;
            n++;
        }
        CHECK(r->body_case != SELECTINFER__RESPONSE__BODY_ERROR);
        if (r->body_case == SELECTINFER__RESPONSE__BODY_ERROR)
            n++;
        si_response_free(r);
    }
    CHECK(done[0] == 1 && done[1] == 1 && done[2] == 1);
    si_client_close(c);
    Selectinfer__Response *st = status(D.sock);
    REQUIRE(st);
    CHECK(st->status->requests_served == N + 1 + 3);
    si_response_free(st);
    si_response_free(ref.res.end);
    daemon_stop();
}

static void scenario_overload(void)
{
    const char *extra[] = {"--max-queue", "2", NULL};
    daemon_start(extra);
    si_client *c;
    REQUIRE(si_client_connect(D.sock, &c) == 0);
    Selectinfer__Generate g;
    init_raw(&g, "The numbers: 1, 2, 3,", fake ? 20 : 6);
    Selectinfer__Request req = generate_request(&g);
    enum { N = 8 };
    /* All N + 1 frames in one send, so that the daemon reads them in one
     * go: sent one by one, a client that the scheduler stalls between two
     * sends lets request 1 finish first, and the counts below change. */
    uint8_t batch[(N + 1) * 256];
    size_t blen = 0;
    for (uint64_t id = 1; id <= N + 1; id++) {
        req.id = id <= N ? id : 1; /* the last: id 1 again, still in flight */
        uint8_t *f;
        size_t flen;
        REQUIRE(si_frame_pack(&req.base, 256, &f, &flen) == 0);
        memcpy(batch + blen, f, flen);
        blen += flen;
        free(f);
    }
    CHECK(send_raw(si_client_fd(c), batch, blen) == 0);
    int terminal[N + 1] = {0}, n_done = 0, n_over = 0, n_dup = 0;
    double deadline = now_s() + (fake ? 60 : 300);
    for (int n = 0; n < N + 1;) {
        Selectinfer__Response *r;
        REQUIRE(si_client_recv(c, ms_left(deadline), &r) == 1);
        REQUIRE(r->id >= 1 && r->id <= N);
        if (r->body_case == SELECTINFER__RESPONSE__BODY_DONE) {
            n_done++;
            terminal[r->id]++;
            n++;
        } else if (r->body_case == SELECTINFER__RESPONSE__BODY_ERROR) {
            if (r->error->code == SELECTINFER__ERROR_CODE__OVERLOADED)
                n_over++, terminal[r->id]++;
            else if (r->error->code == SELECTINFER__ERROR_CODE__DUPLICATE_ID)
                n_dup++;
            else
                CHECK(!"unexpected error");
            n++;
        }
        si_response_free(r);
    }
    for (int i = 1; i <= N; i++)
        CHECK(terminal[i] == 1);
    CHECK(n_dup == 1);
    CHECK(n_done >= 2 && n_done <= 3);
    CHECK(n_over == N - n_done);
    si_client_close(c);
    Selectinfer__Response *st = status(D.sock);
    REQUIRE(st);
    CHECK(st->status->rejected_overloaded == (uint64_t)n_over);
    CHECK(st->status->queue_capacity == 2);
    si_response_free(st);
    daemon_stop();
}

static void scenario_cancel(void)
{
    daemon_start(fake ? (const char *const[]){"--max-tokens", "100000", NULL} : NULL);
    si_client *c;
    REQUIRE(si_client_connect(D.sock, &c) == 0);
    Selectinfer__Generate g;
    init_raw(&g, "1, 2, 3, 4, 5, 6, 7, 8,", 400);
    Selectinfer__Request req = generate_request(&g);
    req.id = si_client_next_id(c); /* 1 */
    CHECK(si_client_send(c, &req) == 0);
    req.id = si_client_next_id(c); /* 2, queued behind 1 */
    CHECK(si_client_send(c, &req) == 0);

    /* cancel 2 while it waits, then 1 once it streams. Every check that
     * would leave this loop waiting for replies that cannot come ends the
     * scenario (REQUIRE), and the whole loop has a deadline. */
    Selectinfer__Response *r;
    int chunks1 = 0, words1 = 0;
    bool acked2 = false, done2 = false;
    double t_cancel = 0, deadline = now_s() + (fake ? 60 : 300);
    bool sent1 = false, acked1 = false, done1 = false;
    uint32_t gen1 = 0;
    CHECK(si_client_cancel(c, 2) == 0); /* id 3 */
    while (!(done1 && done2 && acked1 && acked2)) {
        REQUIRE(now_s() < deadline);
        REQUIRE(si_client_recv(c, ms_left(deadline), &r) == 1);
        bool ok = true;
        if (r->id == 1 && r->body_case == SELECTINFER__RESPONSE__BODY_CHUNK) {
            chunks1++;
            for (size_t i = 0; i < r->chunk->text.len; i++)
                words1 += r->chunk->text.data[i] == ' ';
            if (!sent1 && chunks1 >= 2) {
                CHECK(si_client_cancel(c, 1) == 0); /* id 4 */
                t_cancel = now_s();
                sent1 = true;
            }
        } else if (r->id == 1 && r->body_case == SELECTINFER__RESPONSE__BODY_DONE) {
            done1 = true;
            ok = sent1; /* else the ack of 4 never comes */
            CHECK(r->done->stop_reason == SELECTINFER__STOP_REASON__STOP_CANCELLED);
            gen1 = r->done->generated_tokens;
            CHECK(gen1 < 400);
            /* Cancel to done, as this client sees it: a loaded machine
             * delays the client, the loop and the worker, so the bound is
             * loose; a cancel that is not acted on runs the 400 tokens
             * (8 s on the fake engine) and fails gen1 < 400 anyway. */
            double lat = now_s() - t_cancel;
            fprintf(stderr, "cancel: done %.3f s after the cancel, %u tokens, %d chunks\n", lat, gen1, chunks1);
            CHECK(lat < (fake ? 3.0 : 30.0));
        } else if (r->id == 2) {
            /* anything but its done: it ran although cancelled while queued */
            ok = r->body_case == SELECTINFER__RESPONSE__BODY_DONE;
            if (ok) {
                CHECK(r->done->stop_reason == SELECTINFER__STOP_REASON__STOP_CANCELLED);
                CHECK(r->done->generated_tokens == 0);
            }
            CHECK(acked2); /* the ack comes first */
            done2 = true;
        } else if (r->id == 3) {
            ok = r->body_case == SELECTINFER__RESPONSE__BODY_ACK;
            acked2 = true;
        } else if (r->id == 4) {
            ok = r->body_case == SELECTINFER__RESPONSE__BODY_ACK;
            acked1 = true;
        } else {
            ok = false;
        }
        if (!ok)
            describe_reply("cancel: unexpected reply", r);
        si_response_free(r);
        REQUIRE(ok);
    }
    CHECK(done1 && sent1);
    /* fake engine: one word per token, and the text of every token reaches
     * the client exactly once before the done, however the chunks were
     * merged on the way (a slow loop sends fewer, larger chunks) */
    if (fake)
        CHECK(gen1 == (uint32_t)words1);
    /* cancelling something unknown */
    CHECK(si_client_cancel(c, 77) == 0); /* id 5 */
    REQUIRE(si_client_recv(c, 10000, &r) == 1);
    CHECK(r->id == 5 && error_code(r) == SELECTINFER__ERROR_CODE__NOT_FOUND);
    si_response_free(r);

    /* sictl: Ctrl-C cancels and exits 130 */
    char out[65536];
    int pfd[2];
    REQUIRE(pipe(pfd) == 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(pfd[1], 1);
        close(pfd[0]);
        execl(sictl_bin, sictl_bin, "--socket", D.sock, "generate", "--raw", "--max-tokens", "400",
              "1, 2, 3, 4, 5, 6, 7, 8,", (char *)NULL);
        _exit(127);
    }
    close(pfd[1]);
    ssize_t n = read(pfd[0], out, sizeof(out)); /* the first streamed text */
    CHECK(n > 0);
    kill(pid, SIGINT);
    while (read(pfd[0], out, sizeof(out)) > 0)
        ;
    close(pfd[0]);
    int st;
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 130);
    si_client_close(c);

    Selectinfer__Response *s = status(D.sock);
    REQUIRE(s);
    CHECK(s->status->requests_cancelled == 3);
    CHECK(s->status->running == 0 && s->status->queue_length == 0);
    si_response_free(s);
    daemon_stop();
}

/* Waits until the daemon runs nothing and queues nothing. */
static bool wait_idle(double timeout_s)
{
    double t0 = now_s();
    while (now_s() - t0 < timeout_s) {
        Selectinfer__Response *s = status(D.sock);
        bool idle = s && s->status->running == 0 && s->status->queue_length == 0;
        si_response_free(s);
        if (idle)
            return true;
        sleep_ms(20);
    }
    return false;
}

static void scenario_disconnect(void)
{
    daemon_start(NULL);
    gen_result *ref = calloc(1, sizeof(*ref));
    reference(ref);
    /* mid-stream: read one chunk, vanish */
    si_client *c;
    REQUIRE(si_client_connect(D.sock, &c) == 0);
    Selectinfer__Generate g;
    init_raw(&g, "1, 2, 3, 4, 5, 6, 7, 8,", 400);
    Selectinfer__Request req = generate_request(&g);
    req.id = 1;
    CHECK(si_client_send(c, &req) == 0);
    req.id = 2; /* and one still queued */
    CHECK(si_client_send(c, &req) == 0);
    Selectinfer__Response *r;
    REQUIRE(si_client_recv(c, 120000, &r) == 1);
    CHECK(r->body_case == SELECTINFER__RESPONSE__BODY_CHUNK);
    si_response_free(r);
    si_client_close(c);
    double t0 = now_s();
    /* the cancel lands within a token; the bound is for a loaded machine */
    CHECK(wait_idle(fake ? 10.0 : 30.0));
    fprintf(stderr, "idle %.3f s after the disconnect\n", now_s() - t0);
    Selectinfer__Response *s = status(D.sock);
    REQUIRE(s);
    CHECK(s->status->requests_cancelled == 2);
    CHECK(s->status->connections == 1); /* ours */
    si_response_free(s);

    /* a client that sends and leaves before any reply */
    for (int i = 0; i < 5; i++) {
        int fd = raw_connect(D.sock);
        REQUIRE(fd >= 0);
        REQUIRE(si_client_connect(D.sock, &c) == 0);
        req.id = 9;
        CHECK(si_client_send(c, &req) == 0);
        si_client_close(c);
        close(fd);
    }
    CHECK(wait_idle(fake ? 10.0 : 60.0));
    /* everyone else is still served, correctly */
    gen_result *after = calloc(1, sizeof(*after));
    reference(after);
    CHECK(after->len == ref->len && memcmp(after->text, ref->text, ref->len) == 0);
    si_response_free(ref->end);
    si_response_free(after->end);
    free(ref);
    free(after);
    daemon_stop();
}

/* A client that leaves while its prompt is being evaluated: the fake
 * engine's "LONG" prompt takes a minute unless the daemon's abort callback
 * stops it between chunks. */
static void scenario_prefill_cancel(void)
{
    daemon_start(NULL);
    si_client *c;
    REQUIRE(si_client_connect(D.sock, &c) == 0);
    Selectinfer__Generate g;
    init_raw(&g, "a LONG prompt", 5);
    Selectinfer__Request req = generate_request(&g);
    req.id = 1;
    CHECK(si_client_send(c, &req) == 0);
    usleep(300000); /* the prefill has begun */
    si_client_close(c);
    double t0 = now_s();
    CHECK(wait_idle(20.0)); /* well below the minute the prompt would take */
    fprintf(stderr, "idle %.3f s after leaving mid-prompt\n", now_s() - t0);
    Selectinfer__Response *s = status(D.sock);
    REQUIRE(s);
    CHECK(s->status->requests_cancelled == 1);
    si_response_free(s);
    /* and the next client is served */
    gen_result *after = calloc(1, sizeof(*after));
    reference(after);
    CHECK(after->len > 0);
    si_response_free(after->end);
    free(after);
    daemon_stop();
}

/* Socket activation as systemd does it (selectinferd.socket): the daemon
 * serves on the listening socket it is handed as fd 3, leaves its own
 * socket path alone, and does not remove the handed socket when it stops;
 * handed something that is not a listening Unix socket, it refuses to
 * start and says why. */
static void scenario_socket_activation(void)
{
    char dir[] = "/tmp/si-activation-XXXXXX";
    REQUIRE(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof(path), "%s/activated.sock", dir);
    int ls = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(ls >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%.100s", path);
    REQUIRE(bind(ls, (struct sockaddr *)&sa, sizeof(sa)) == 0 && listen(ls, 16) == 0);
    int fl = fcntl(ls, F_GETFD);
    fcntl(ls, F_SETFD, fl & ~FD_CLOEXEC); /* through fork and exec, as systemd hands it */

    activation_fd = ls;
    daemon_start_env(&D, NULL, NULL);
    activation_fd = -1;
    char own[sizeof(D.sock)];
    snprintf(own, sizeof(own), "%s", D.sock);
    snprintf(D.sock, sizeof(D.sock), "%s", path); /* clients use the handed socket */
    if (wait_ready(&D, 60) < 0) {
        failures++;
        if (D.pid > 0)
            kill(D.pid, SIGKILL);
        exit(1);
    }
    struct stat sb;
    CHECK(stat(own, &sb) < 0); /* its configured path was never bound */
    gen_result *r = calloc(1, sizeof(*r));
    reference(r);
    CHECK(r->len > 0);
    si_response_free(r->end);
    free(r);

    const char *args[] = {"--socket", path, "shutdown", NULL};
    char out[256];
    CHECK(run_sictl(args, out, sizeof(out), NULL) == 0);
    int st = 0;
    double t0 = now_s();
    pid_t w = 0;
    while (now_s() - t0 < 30 && (w = waitpid(D.pid, &st, WNOHANG)) == 0)
        sleep_ms(20);
    CHECK(w == D.pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    if (w != D.pid)
        kill(D.pid, SIGKILL);
    CHECK(stat(path, &sb) == 0); /* systemd's socket stays */
    close(ls);
    if (failures)
        dump_log(&D);

    /* handed a pipe: no start, a clear reason */
    int p[2];
    REQUIRE(pipe(p) == 0);
    activation_fd = p[0];
    daemon_proc bad;
    daemon_start_env(&bad, NULL, NULL);
    activation_fd = -1;
    close(p[0]);
    close(p[1]);
    t0 = now_s();
    while (now_s() - t0 < 30 && (w = waitpid(bad.pid, &st, WNOHANG)) == 0)
        sleep_ms(20);
    CHECK(w == bad.pid && WIFEXITED(st) && WEXITSTATUS(st) != 0);
    if (w != bad.pid)
        kill(bad.pid, SIGKILL);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "grep -q 'not a listening Unix stream socket' %s", bad.log);
    CHECK(system(cmd) == 0);
    snprintf(cmd, sizeof(cmd), "rm -rf %s %s %s", D.dir, bad.dir, dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove the test directories\n");
}

typedef struct bg_gen {
    thread_arg t;
    pthread_t th;
} bg_gen;

static void scenario_garbage(void)
{
    const char *extra[] = {"--max-frame", "65536", NULL};
    daemon_start(extra);
    static thread_arg ref, during;
    concurrent_client(&ref);
    REQUIRE(ref.rc == 0 && is_done(ref.res.end));
    pthread_t th;
    pthread_create(&th, NULL, concurrent_client, &during);

    si_client *c;
    bool eof;
    /* a length over the cap: FRAME_TOO_LARGE, then closed */
    REQUIRE(si_client_connect(D.sock, &c) == 0);
    uint8_t huge[4] = {0xff, 0xff, 0xff, 0xff};
    CHECK(send_raw(si_client_fd(c), huge, 4) == 0);
    CHECK(read_until_eof(c, 10000, &eof) == SELECTINFER__ERROR_CODE__FRAME_TOO_LARGE && eof);
    si_client_close(c);
    /* a real request just over the cap */
    REQUIRE(si_client_connect(D.sock, &c) == 0);
    char *big = malloc(70001);
    memset(big, 'a', 70000);
    big[70000] = '\0';
    Selectinfer__Generate g;
    init_raw(&g, big, 1);
    Selectinfer__Request req = generate_request(&g);
    req.id = 1;
    si_client_send(c, &req); /* may fail half-way when the daemon closes */
    CHECK(read_until_eof(c, 10000, &eof) == SELECTINFER__ERROR_CODE__FRAME_TOO_LARGE && eof);
    si_client_close(c);
    free(big);
    /* bytes that are no Request: MALFORMED_FRAME, then closed */
    REQUIRE(si_client_connect(D.sock, &c) == 0);
    uint8_t junk[4 + 32];
    junk[0] = 32, junk[1] = junk[2] = junk[3] = 0;
    memset(junk + 4, 0xff, 32);
    CHECK(send_raw(si_client_fd(c), junk, sizeof(junk)) == 0);
    CHECK(read_until_eof(c, 10000, &eof) == SELECTINFER__ERROR_CODE__MALFORMED_FRAME && eof);
    si_client_close(c);
    /* an empty frame is an empty request: an error reply, the connection lives */
    REQUIRE(si_client_connect(D.sock, &c) == 0);
    uint8_t empty[4] = {0, 0, 0, 0};
    CHECK(send_raw(si_client_fd(c), empty, 4) == 0);
    Selectinfer__Response *r;
    REQUIRE(si_client_recv(c, 10000, &r) == 1);
    CHECK(error_code(r) == SELECTINFER__ERROR_CODE__INVALID_ARGUMENT);
    si_response_free(r);
    Selectinfer__StatusRequest sr = SELECTINFER__STATUS_REQUEST__INIT;
    Selectinfer__Request sreq = SELECTINFER__REQUEST__INIT;
    sreq.body_case = SELECTINFER__REQUEST__BODY_STATUS;
    sreq.status = &sr;
    REQUIRE(si_client_call(c, &sreq, 10000, &r) == 0);
    CHECK(r->body_case == SELECTINFER__RESPONSE__BODY_STATUS);
    si_response_free(r);
    si_client_close(c);
    /* random bytes from many clients, some cut mid-frame */
    uint64_t s = 12345;
    for (int i = 0; i < 40; i++) {
        int fd = raw_connect(D.sock);
        REQUIRE(fd >= 0);
        uint8_t buf[600];
        size_t len = 1 + (size_t)(i * 37 % 599);
        for (size_t k = 0; k < len; k++) {
            s ^= s << 13; s ^= s >> 7; s ^= s << 17;
            buf[k] = (uint8_t)s;
        }
        if (i % 2 == 0) { /* a plausible length prefix */
            uint32_t n = (uint32_t)(len - 4 + (i % 3));
            memcpy(buf, &n, 4);
        }
        send_raw(fd, buf, len);
        close(fd);
    }
    pthread_join(th, NULL);
    /* the generation that ran meanwhile is complete and correct */
    CHECK(during.rc == 0 && is_done(during.res.end));
    CHECK(during.res.len == ref.res.len && memcmp(during.res.text, ref.res.text, ref.res.len) == 0);
    Selectinfer__Response *st = status(D.sock);
    REQUIRE(st);
    CHECK(st->status->clients_dropped >= 3);
    CHECK(st->status->state == SELECTINFER__DAEMON_STATE__STATE_READY);
    si_response_free(st);
    si_response_free(ref.res.end);
    si_response_free(during.res.end);
    daemon_stop();
}

static void scenario_slow_reader(void)
{
    /* a small socket buffer and write queue, a short stall limit */
    const char *extra[] = {"--client-socket-buffer", "4096", "--client-write-buffer", "4096",
                           "--client-write-timeout-ms", "1000", "--max-tokens", "100000", NULL};
    daemon_start(extra);
    si_client *slow;
    REQUIRE(si_client_connect(D.sock, &slow) == 0);
    Selectinfer__Generate g;
    init_raw(&g, "1, 2, 3, 4, 5, 6, 7, 8,", fake ? 5000 : 300);
    Selectinfer__Request req = generate_request(&g);
    for (uint64_t id = 1; id <= 8; id++) {
        req.id = id;
        CHECK(si_client_send(slow, &req) == 0);
    }
    /* meanwhile another client is answered promptly, and is served */
    double t0 = now_s(), worst = 0;
    bool dropped = false;
    while (now_s() - t0 < (fake ? 30 : 240)) {
        double t = now_s();
        Selectinfer__Response *s = status(D.sock);
        REQUIRE(s);
        double lat = now_s() - t;
        worst = lat > worst ? lat : worst;
        dropped = s->status->clients_dropped >= 1;
        si_response_free(s);
        if (dropped)
            break;
        sleep_ms(100);
    }
    fprintf(stderr, "slow reader dropped after %.1f s; worst status latency %.3f s\n", now_s() - t0, worst);
    CHECK(dropped);
    /* a loop that waited on the slow client would not answer at all until
     * the drop; the bound leaves room for a loaded machine */
    CHECK(worst < 3.0);
    CHECK(wait_idle(fake ? 10.0 : 60.0));
    gen_result *after = calloc(1, sizeof(*after));
    init_raw(&g, "Hello", 3);
    CHECK(generate(D.sock, &g, after) == 0 && is_done(after->end));
    si_response_free(after->end);
    free(after);
    /* the slow client finds its connection closed after what was sent */
    bool eof;
    read_until_eof(slow, 10000, &eof);
    CHECK(eof);
    si_client_close(slow);
    daemon_stop();
}

static void scenario_connections(void)
{
    const char *extra[] = {"--max-connections", "3", NULL};
    daemon_start(extra);
    si_client *c[3], *extra_c;
    for (int i = 0; i < 3; i++)
        REQUIRE(si_client_connect(D.sock, &c[i]) == 0);
    sleep_ms(200); /* let the daemon accept them */
    REQUIRE(si_client_connect(D.sock, &extra_c) == 0);
    bool eof;
    CHECK(read_until_eof(extra_c, 10000, &eof) == SELECTINFER__ERROR_CODE__TOO_MANY_CONNECTIONS && eof);
    si_client_close(extra_c);
    si_client_close(c[0]);
    /* a slot is free again once the daemon has seen c[0] go: until then a
     * status connection is refused, however long a loaded machine takes */
    Selectinfer__Response *s = NULL;
    for (double t0 = now_s(); !s && now_s() - t0 < 30;) {
        sleep_ms(50);
        s = status(D.sock);
    }
    REQUIRE(s);
    CHECK(s->status->connections == 3);
    si_response_free(s);
    si_client_close(c[1]);
    si_client_close(c[2]);
    daemon_stop();
}

/* As user nobody with group gid: what it may do. expect_admin: reload
 * must succeed; otherwise admin operations must be refused. Exit 10: the
 * connection itself was refused (EACCES). */
static int as_nobody(const char *sock, bool expect_admin, int want_group)
{
    pid_t pid = fork();
    if (pid == 0) {
        struct passwd *pw = getpwnam("nobody");
        if (!pw || setgroups(0, NULL) < 0 || setgid((gid_t)want_group) < 0 || setuid(pw->pw_uid) < 0)
            _exit(3);
        si_client *c;
        int rc = si_client_connect(sock, &c);
        if (rc < 0)
            _exit(rc == -EACCES ? 10 : 4);
        Selectinfer__Response *r;
        Selectinfer__Request req = SELECTINFER__REQUEST__INIT;
        Selectinfer__StatusRequest sr = SELECTINFER__STATUS_REQUEST__INIT;
        req.body_case = SELECTINFER__REQUEST__BODY_STATUS;
        req.status = &sr;
        if (si_client_call(c, &req, 10000, &r) < 0 || r->body_case != SELECTINFER__RESPONSE__BODY_STATUS)
            _exit(5);
        si_response_free(r);
        Selectinfer__Reload rl = SELECTINFER__RELOAD__INIT;
        Selectinfer__Request rq = SELECTINFER__REQUEST__INIT;
        rq.body_case = SELECTINFER__REQUEST__BODY_RELOAD;
        rq.reload = &rl;
        if (si_client_call(c, &rq, 10000, &r) < 0)
            _exit(6);
        int got_admin = r->body_case == SELECTINFER__RESPONSE__BODY_ACK;
        int denied = error_code(r) == SELECTINFER__ERROR_CODE__PERMISSION_DENIED;
        si_response_free(r);
        if (!expect_admin) {
            Selectinfer__Shutdown sd = SELECTINFER__SHUTDOWN__INIT;
            Selectinfer__Request q2 = SELECTINFER__REQUEST__INIT;
            q2.body_case = SELECTINFER__REQUEST__BODY_SHUTDOWN;
            q2.shutdown = &sd;
            if (si_client_call(c, &q2, 10000, &r) < 0 || error_code(r) != SELECTINFER__ERROR_CODE__PERMISSION_DENIED)
                _exit(7);
            si_response_free(r);
            Selectinfer__UseProfile up = SELECTINFER__USE_PROFILE__INIT;
            up.name = "qa";
            q2.body_case = SELECTINFER__REQUEST__BODY_USE_PROFILE;
            q2.use_profile = &up;
            if (si_client_call(c, &q2, 10000, &r) < 0 || error_code(r) != SELECTINFER__ERROR_CODE__PERMISSION_DENIED)
                _exit(8);
            si_response_free(r);
        }
        si_client_close(c);
        _exit(expect_admin ? (got_admin ? 0 : 9) : (denied ? 0 : 9));
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100;
}

static void scenario_admin(void)
{
    if (geteuid() != 0) {
        fprintf(stderr, "admin: needs root to act as another user; skipped\n");
        exit(77);
    }
    struct group *gr = getgrnam("nogroup");
    struct passwd *pw = getpwnam("nobody");
    if (!gr || !pw) {
        fprintf(stderr, "admin: no nobody/nogroup; skipped\n");
        exit(77);
    }
    char conf[128], dir[64];
    snprintf(dir, sizeof(dir), "/tmp/si-admin-XXXXXX");
    REQUIRE(mkdtemp(dir));
    chmod(dir, 0755);
    snprintf(conf, sizeof(conf), "%s/d.conf", dir);
    FILE *f = fopen(conf, "w");
    REQUIRE(f);
    fprintf(f, "socket_group = nogroup\nmax_queue = 5\n");
    fclose(f);
    const char *extra[] = {"--config", conf, NULL};
    daemon_start(extra);
    struct stat sb;
    REQUIRE(stat(D.sock, &sb) == 0);
    CHECK((sb.st_mode & 0777) == 0660);
    CHECK(sb.st_gid == gr->gr_gid);
    /* in the socket's group: may use, may not administer */
    CHECK(as_nobody(D.sock, false, (int)gr->gr_gid) == 0);
    /* outside it: cannot even connect */
    CHECK(as_nobody(D.sock, false, gr->gr_gid == 1 ? 2 : 1) == 10);
    /* the admin group, added by a reload (root may reload) */
    f = fopen(conf, "w");
    REQUIRE(f);
    fprintf(f, "socket_group = nogroup\nmax_queue = 7\nadmin_group = nogroup\n");
    fclose(f);
    char env[256], out[4096];
    snprintf(env, sizeof(env), SI_SOCKET_ENV "=%s", D.sock);
    const char *rargs[] = {"reload", NULL};
    CHECK(run_sictl(rargs, out, sizeof(out), env) == 0);
    CHECK(as_nobody(D.sock, true, (int)gr->gr_gid) == 0);
    Selectinfer__Response *s = status(D.sock);
    REQUIRE(s);
    CHECK(s->status->queue_capacity == 7);
    CHECK(s->status->reloads == 2);
    si_response_free(s);
    /* a broken file: reload fails, the running configuration stays */
    f = fopen(conf, "w");
    REQUIRE(f);
    fprintf(f, "max_queue = many\n");
    fclose(f);
    CHECK(run_sictl(rargs, out, sizeof(out), env) == 65);
    s = status(D.sock);
    REQUIRE(s);
    CHECK(s->status->queue_capacity == 7);
    si_response_free(s);
    daemon_stop();
    remove(conf);
    rmdir(dir);
}

/* Fake engine only: loading state, requests queued while loading, a model
 * that fails to load, SIGTERM mid-generation, SIGHUP. */
static void scenario_lifecycle(void)
{
    const char *env[] = {"SI_FAKE_LOAD_MS=1500", "SI_FAKE_TOKEN_US=20000", NULL};
    daemon_start_env(&D, NULL, env);
    Selectinfer__Response *s = NULL;
    for (int i = 0; i < 100 && !s; i++) {
        sleep_ms(20);
        s = status(D.sock);
    }
    REQUIRE(s);
    CHECK(s->status->state == SELECTINFER__DAEMON_STATE__STATE_LOADING);
    si_response_free(s);
    /* a request sent while loading is served once ready */
    Selectinfer__Generate g;
    init_raw(&g, "hello", 3);
    gen_result *res = calloc(1, sizeof(*res));
    CHECK(generate(D.sock, &g, res) == 0 && is_done(res->end));
    si_response_free(res->end);
    CHECK(wait_ready(&D, 10) == 0);
    /* SIGHUP reloads */
    kill(D.pid, SIGHUP);
    uint64_t reloads = 0;
    for (double t1 = now_s(); reloads == 0 && now_s() - t1 < 30;) {
        sleep_ms(50); /* the signal is handled on the daemon's loop, later */
        s = status(D.sock);
        REQUIRE(s);
        reloads = s->status->reloads;
        si_response_free(s);
    }
    CHECK(reloads == 1);
    /* SIGTERM mid-stream: the running request ends cancelled, the queued
     * one with SHUTTING_DOWN, and the daemon exits 0 */
    si_client *c;
    REQUIRE(si_client_connect(D.sock, &c) == 0);
    init_raw(&g, "hello", 1000);
    Selectinfer__Request req = generate_request(&g);
    req.id = 1;
    CHECK(si_client_send(c, &req) == 0);
    req.id = 2;
    CHECK(si_client_send(c, &req) == 0);
    Selectinfer__Response *r;
    REQUIRE(si_client_recv(c, 10000, &r) == 1);
    si_response_free(r);
    kill(D.pid, SIGTERM);
    bool done1 = false, err2 = false;
    for (;;) {
        int rc = si_client_recv(c, 10000, &r);
        if (rc != 1)
            break;
        if (r->id == 1 && is_done(r))
            done1 = r->done->stop_reason == SELECTINFER__STOP_REASON__STOP_CANCELLED;
        if (r->id == 2)
            err2 = error_code(r) == SELECTINFER__ERROR_CODE__SHUTTING_DOWN;
        si_response_free(r);
    }
    CHECK(done1 && err2);
    si_client_close(c);
    int st;
    CHECK(waitpid(D.pid, &st, 0) == D.pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    struct stat sb;
    CHECK(stat(D.sock, &sb) < 0);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", D.dir);
    CHECK(system(cmd) == 0);

    /* a model that fails to load: queued requests get NOT_READY, exit 1 */
    snprintf(model, sizeof(model), "/nonexistent/model.gguf");
    const char *env2[] = {"SI_FAKE_LOAD_MS=800", NULL};
    daemon_start_env(&D, NULL, env2);
    c = NULL;
    for (int i = 0; i < 100 && si_client_connect(D.sock, &c) < 0; i++)
        sleep_ms(20);
    REQUIRE(c);
    init_raw(&g, "hello", 3);
    REQUIRE(si_client_generate(c, &g, NULL, NULL, 10000, &r) == 0);
    CHECK(error_code(r) == SELECTINFER__ERROR_CODE__NOT_READY);
    si_response_free(r);
    si_client_close(c);
    CHECK(waitpid(D.pid, &st, 0) == D.pid && WIFEXITED(st) && WEXITSTATUS(st) == 1);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", D.dir);
    CHECK(system(cmd) == 0);
    free(res);
}

/* ---- SelectInfer: hot-swap, task switches, phi ---------------------------- */

/* Writes a profile with the tasks "qa" and "translate" to path: a text file
 * for the fake engine, the real thing (daemon-make-profile) otherwise. */
static bool make_profile(const char *path)
{
    if (fake) {
        FILE *f = fopen(path, "w");
        if (!f)
            return false;
        fputs("fake-profile\nqa\ntranslate\n", f);
        return fclose(f) == 0;
    }
    if (!mkprofile_bin) {
        fprintf(stderr, "no profile maker given\n");
        return false;
    }
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), "'%s' '%s' '%s'", mkprofile_bin, model, path);
    return system(cmd) == 0;
}

static int copy_file(const char *from, const char *to)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", from, to);
    return system(cmd) == 0 ? 0 : -1;
}

/* Flips a byte in the middle of a file (a profile corrupted on disk). */
static bool corrupt(const char *path)
{
    FILE *f = fopen(path, "r+b");
    if (!f)
        return false;
    long off = 0;
    if (fseek(f, 0, SEEK_END) == 0)
        off = ftell(f) / 2;
    if (fake)
        off = 0; /* the magic line */
    fseek(f, off, SEEK_SET);
    int c = fgetc(f);
    fseek(f, off, SEEK_SET);
    fputc(c ^ 0x40, f);
    return fclose(f) == 0;
}

static Selectinfer__Response *use_profile_call(const char *sock, const char *name, const char *path)
{
    si_client *c;
    if (si_client_connect(sock, &c) < 0)
        return NULL;
    Selectinfer__UseProfile u = SELECTINFER__USE_PROFILE__INIT;
    u.name = (char *)name;
    u.path = (char *)path;
    Selectinfer__Request req = SELECTINFER__REQUEST__INIT;
    req.body_case = SELECTINFER__REQUEST__BODY_USE_PROFILE;
    req.use_profile = &u;
    Selectinfer__Response *r = NULL;
    if (si_client_call(c, &req, 300000, &r) < 0)
        r = NULL;
    si_client_close(c);
    return r;
}

static const char *active_name(const char *sock)
{
    static char name[64];
    Selectinfer__Response *s = status(sock);
    snprintf(name, sizeof(name), "%s", s && s->status->profile && s->status->profile->name ? s->status->profile->name : "?");
    si_response_free(s);
    return name;
}

/* A short greedy raw generation with an optional task and phi. */
static void gen_task(gen_result *res, const char *task, float phi, uint32_t max_tokens)
{
    Selectinfer__Generate g;
    init_raw(&g, "The capital of France is", max_tokens);
    g.task = (char *)task;
    if (phi > 0) {
        g.has_phi = true;
        g.phi = phi;
    }
    CHECK(generate(D.sock, &g, res) == 0);
}

typedef struct swap_client {
    gen_result res;
    int rc;
    uint32_t tokens;
} swap_client;

static void *swap_client_main(void *p)
{
    swap_client *t = p;
    Selectinfer__Generate g;
    init_raw(&g, "1, 2, 3, 4, 5, 6, 7, 8,", t->tokens);
    t->rc = generate(D.sock, &g, &t->res);
    return NULL;
}

static void scenario_swap(void)
{
    char prof[160], prof2[160], dir[64];
    snprintf(dir, sizeof(dir), "/tmp/si-swap-XXXXXX");
    REQUIRE(mkdtemp(dir));
    snprintf(prof, sizeof(prof), "%s/p.siprof", dir);
    snprintf(prof2, sizeof(prof2), "%s/p2.siprof", dir);
    REQUIRE(make_profile(prof));
    REQUIRE(copy_file(prof, prof2) == 0);
    const char *extra[] = {"--profile", prof, "--task", "qa", "--gamma", "0.5", "--delta", "0.2",
                           "--max-tokens", "100000", NULL};
    const char *env[] = {"SI_FAKE_TOKEN_US=20000", NULL};
    daemon_start_env(&D, extra, fake ? env : NULL);
    if (wait_ready(&D, 120) < 0) {
        failures++;
        return;
    }
    Selectinfer__Response *st = status(D.sock);
    REQUIRE(st && st->status->profile);
    CHECK(strcmp(st->status->profile->name, "qa") == 0);
    CHECK(strcmp(st->status->profile->mode, "selectinfer") == 0);
    CHECK(strcmp(st->status->profile->path, prof) == 0);
    CHECK(fabsf(st->status->profile->gamma - 0.5f) < 1e-6f && fabsf(st->status->profile->delta - 0.2f) < 1e-6f);
    CHECK(st->status->profile->neurons_loaded * 2 == st->status->profile->neurons_total);
    CHECK(st->status->swaps == 0 && st->status->load_ns > 0 && !st->status->last_swap);
    CHECK(st->status->task_switch && strcmp(st->status->task_switch, "swap") == 0);
    /* the KV cache in f16 by default: SmolLM2-135M's 30 layers of 3 KV
     * heads of 64 (K and V, 2 bytes a value) a position; the fake: 1 KiB */
    CHECK(st->status->kv_cache_type && strcmp(st->status->kv_cache_type, "f16") == 0);
    CHECK(st->status->has_kv_bytes && st->status->n_ctx > 0 &&
          st->status->kv_bytes == (uint64_t)st->status->n_ctx * (fake ? 1024 : 30 * 2 * 192 * 2));
    uint64_t weights = st->status->weight_bytes;
    si_response_free(st);
    char env_sock[256], out[8192];
    snprintf(env_sock, sizeof(env_sock), SI_SOCKET_ENV "=%s", D.sock);
    const char *pargs[] = {"profiles", NULL};
    CHECK(run_sictl(pargs, out, sizeof(out), env_sock) == 0);
    CHECK(strstr(out, "* qa") && strstr(out, "  translate"));

    /* phi: the share computed follows it; outside [delta, gamma] it is refused */
    gen_result *r = calloc(1, sizeof(*r));
    gen_task(r, NULL, 0, 4);
    CHECK(is_done(r->end) && fabsf(r->end->done->ffn_share - 0.5f) < 1e-3f);
    si_response_free(r->end);
    gen_task(r, NULL, 0.3f, 4);
    CHECK(is_done(r->end));
    if (is_done(r->end))
        CHECK(fabsf(r->end->done->ffn_share - 0.3f) < 1e-3f && fabsf(r->end->done->phi - 0.3f) < 1e-6f);
    si_response_free(r->end);
    /* phi below gamma: the slot keeps a copy of its dynamic neurons, and
     * status says how large (the fake: 1 KiB a prompt token) */
    st = status(D.sock);
    REQUIRE(st);
    CHECK(st->status->n_slot_copy_bytes == 1 && st->status->n_slot_tokens == 1);
    if (st->status->n_slot_copy_bytes == 1 && st->status->n_slot_tokens == 1) {
        uint64_t cb = st->status->slot_copy_bytes[0];
        if (fake)
            CHECK(cb == 1024u * st->status->slot_tokens[0]);
        else /* about (phi - delta) n_ff slots a layer (8 MB here); not the weights */
            CHECK(cb > (1u << 20) && cb < weights / 2);
    }
    si_response_free(st);
    const char *cargs[] = {"status", NULL};
    CHECK(run_sictl(cargs, out, sizeof(out), env_sock) == 0);
    CHECK(strstr(out, "dynamic copies:"));
    gen_task(r, NULL, 0.6f, 4);
    CHECK(error_code(r->end) == SELECTINFER__ERROR_CODE__INVALID_ARGUMENT);
    CHECK(r->end && r->end->error && strstr(r->end->error->message, "gamma"));
    si_response_free(r->end);
    gen_task(r, NULL, 0.1f, 4);
    CHECK(error_code(r->end) == SELECTINFER__ERROR_CODE__INVALID_ARGUMENT);
    CHECK(r->end && r->end->error && strstr(r->end->error->message, "delta"));
    si_response_free(r->end);
    const char *gargs[] = {"generate", "--raw", "--max-tokens", "2", "--phi", "0.25", "--alpha", "0.3", "--stats",
                           "Hello", NULL};
    CHECK(run_sictl(gargs, out, sizeof(out), env_sock) == 0);
    const char *gbad[] = {"generate", "--raw", "--phi", "0.9", "Hello", NULL};
    CHECK(run_sictl(gbad, NULL, 0, env_sock) == 65);
    gen_result *ref_qa = calloc(1, sizeof(*ref_qa));
    gen_task(ref_qa, NULL, 0, 8);
    REQUIRE(is_done(ref_qa->end) && strcmp(ref_qa->end->done->profile, "qa") == 0);

    /* hot-swap while three clients stream and queue: all complete, the one
     * running finishes on qa, the queued ones run on translate */
    enum { K = 3 };
    static swap_client cl[K];
    pthread_t th[K];
    for (int i = 0; i < K; i++) {
        memset(&cl[i], 0, sizeof(cl[i]));
        /* long enough that the running request cannot end before the swap
         * request arrives, even on a loaded machine */
        cl[i].tokens = fake ? 150 : 64;
        pthread_create(&th[i], NULL, swap_client_main, &cl[i]);
    }
    /* wait until one request runs and the others are queued */
    double t0 = now_s();
    bool streaming = false;
    while (!streaming && now_s() - t0 < 60) {
        Selectinfer__Response *q = status(D.sock);
        streaming = q && q->status->running == 1 && q->status->queue_length == K - 1;
        si_response_free(q);
        if (!streaming)
            sleep_ms(5);
    }
    CHECK(streaming);
    char jout[8192];
    const char *uargs[] = {"--json", "use", "translate", NULL};
    double tu = now_s();
    CHECK(run_sictl(uargs, jout, sizeof(jout), env_sock) == 0);
    fprintf(stderr, "use translate took %.3f s (waiting for the running request): %s", now_s() - tu, jout);
    CHECK(strstr(jout, "\"to_task\":\"translate\"") && strstr(jout, "\"neurons_in\":"));
    int n_qa = 0, n_tr = 0;
    for (int i = 0; i < K; i++) {
        pthread_join(th[i], NULL);
        CHECK(cl[i].rc == 0 && is_done(cl[i].res.end));
        if (is_done(cl[i].res.end)) {
            const Selectinfer__Done *d = cl[i].res.end->done;
            CHECK(d->generated_tokens == cl[i].tokens || d->stop_reason == SELECTINFER__STOP_REASON__STOP_EOS);
            n_qa += strcmp(d->profile, "qa") == 0;
            n_tr += strcmp(d->profile, "translate") == 0;
            if (fake) /* the fake engine writes the task into every word */
                CHECK(strstr(cl[i].res.text, strcmp(d->profile, "qa") == 0 ? "qa:w0 " : "translate:w0 "));
        }
        si_response_free(cl[i].res.end);
    }
    CHECK(n_qa == 1 && n_tr == K - 1);
    st = status(D.sock);
    REQUIRE(st && st->status->last_swap);
    CHECK(strcmp(st->status->profile->name, "translate") == 0 && st->status->swaps == 1);
    const Selectinfer__SwapStats *ls = st->status->last_swap;
    CHECK(strcmp(ls->from_task, "qa") == 0 && strcmp(ls->to_task, "translate") == 0);
    CHECK(ls->neurons_in > 0 && ls->neurons_in == ls->neurons_out);
    CHECK(ls->neurons_in < st->status->profile->neurons_loaded);
    CHECK(st->status->weight_bytes == weights);
    fprintf(stderr, "swap qa -> translate: %.2f ms, %llu neurons in, %llu out; cold start %.2f ms (%.1fx)\n",
            (double)ls->swap_ns / 1e6, (unsigned long long)ls->neurons_in, (unsigned long long)ls->neurons_out,
            (double)ls->load_ns / 1e6, ls->swap_ns ? (double)ls->load_ns / (double)ls->swap_ns : 0.0);
    /* (the times are printed, not compared: a loaded machine can make
     * either one slow; what a swap reads is fixed: its neurons' rows, a
     * fraction of the weights a cold start reads) */
    if (!fake)
        CHECK(ls->swap_ns > 0 && ls->load_ns > 0 && ls->bytes_read > 0 &&
              ls->bytes_read * 2 < st->status->weight_bytes);
    si_response_free(st);
    gen_result *tr = calloc(1, sizeof(*tr));
    gen_task(tr, NULL, 0, 8);
    REQUIRE(is_done(tr->end));
    CHECK(strcmp(tr->end->done->profile, "translate") == 0);
    fprintf(stderr, "qa: \"%s\"\ntranslate: \"%s\"\n", ref_qa->text, tr->text);

    /* no such task: NOT_FOUND, nothing changes */
    Selectinfer__Response *u = use_profile_call(D.sock, "summarize", NULL);
    CHECK(error_code(u) == SELECTINFER__ERROR_CODE__NOT_FOUND);
    si_response_free(u);
    /* the profile corrupted on disk: the swap fails, translate keeps serving */
    REQUIRE(corrupt(prof));
    u = use_profile_call(D.sock, "qa", NULL);
    CHECK(error_code(u) == SELECTINFER__ERROR_CODE__SWAP_FAILED);
    if (u && u->error)
        fprintf(stderr, "failed swap: %s\n", u->error->message);
    si_response_free(u);
    CHECK(strcmp(active_name(D.sock), "translate") == 0);
    gen_task(r, NULL, 0, 8);
    CHECK(is_done(r->end) && strcmp(r->end->done->profile, "translate") == 0);
    CHECK(r->len == tr->len && memcmp(r->text, tr->text, tr->len) == 0);
    si_response_free(r->end);
    st = status(D.sock);
    REQUIRE(st);
    CHECK(st->status->swaps == 1 && st->status->swaps_failed == 1);
    si_response_free(st);
    /* another file, named in the request: back to qa */
    const char *u2[] = {"use", "qa", "--profile", prof2, NULL};
    CHECK(run_sictl(u2, out, sizeof(out), env_sock) == 0);
    CHECK(strstr(out, "'qa' active"));
    st = status(D.sock);
    REQUIRE(st);
    CHECK(strcmp(st->status->profile->name, "qa") == 0 && strcmp(st->status->profile->path, prof2) == 0);
    CHECK(st->status->swaps == 2);
    si_response_free(st);

    /* a request naming the other task swaps to it first (task_switch = swap) */
    gen_task(r, "translate", 0, 8);
    CHECK(is_done(r->end));
    if (is_done(r->end)) {
        CHECK(strcmp(r->end->done->profile, "translate") == 0);
        CHECK(r->end->done->swap && strcmp(r->end->done->swap->to_task, "translate") == 0 &&
              r->end->done->swap->neurons_in > 0);
        /* the same neurons in other slots: only the summation order may
         * differ from the first translate plan, so this is not checked */
        if (r->len != tr->len || memcmp(r->text, tr->text, tr->len) != 0)
            fprintf(stderr, "note: translate after two swaps: \"%s\"\n", r->text);
    }
    si_response_free(r->end);
    gen_task(r, "translate", 0, 4); /* already active: no swap */
    CHECK(is_done(r->end) && !r->end->done->swap);
    si_response_free(r->end);
    gen_task(r, "summarize", 0, 4);
    CHECK(error_code(r->end) == SELECTINFER__ERROR_CODE__NOT_FOUND);
    si_response_free(r->end);
    st = status(D.sock);
    REQUIRE(st);
    CHECK(st->status->swaps == 3 && strcmp(st->status->profile->name, "translate") == 0);
    si_response_free(st);
    si_response_free(ref_qa->end);
    si_response_free(tr->end);
    free(ref_qa);
    free(tr);
    free(r);
    daemon_stop();
    remove(prof);
    remove(prof2);
    rmdir(dir);
}

/* task_switch = refuse: a request for another task gets TASK_MISMATCH and
 * nothing swaps; a daemon without a profile cannot swap at all. */
static void scenario_task_refuse(void)
{
    char prof[160], dir[64];
    snprintf(dir, sizeof(dir), "/tmp/si-refuse-XXXXXX");
    REQUIRE(mkdtemp(dir));
    snprintf(prof, sizeof(prof), "%s/p.siprof", dir);
    REQUIRE(make_profile(prof));
    const char *extra[] = {"--profile", prof, "--task", "qa", "--task-switch", "refuse", NULL};
    daemon_start(extra);
    gen_result *r = calloc(1, sizeof(*r));
    gen_task(r, "translate", 0, 4);
    CHECK(error_code(r->end) == SELECTINFER__ERROR_CODE__TASK_MISMATCH);
    CHECK(r->end && r->end->error && strstr(r->end->error->message, "refuse"));
    si_response_free(r->end);
    gen_task(r, "qa", 0, 4);
    CHECK(is_done(r->end) && strcmp(r->end->done->profile, "qa") == 0 && !r->end->done->swap);
    si_response_free(r->end);
    char env_sock[256];
    snprintf(env_sock, sizeof(env_sock), SI_SOCKET_ENV "=%s", D.sock);
    const char *gargs[] = {"generate", "--raw", "--task", "translate", "Hello", NULL};
    CHECK(run_sictl(gargs, NULL, 0, env_sock) == 1);
    Selectinfer__Response *st = status(D.sock);
    REQUIRE(st);
    CHECK(st->status->swaps == 0 && strcmp(st->status->task_switch, "refuse") == 0);
    CHECK(strcmp(st->status->profile->name, "qa") == 0);
    si_response_free(st);
    /* an admin still switches explicitly */
    Selectinfer__Response *u = use_profile_call(D.sock, "translate", NULL);
    CHECK(u && u->body_case == SELECTINFER__RESPONSE__BODY_ACK && u->ack->swap);
    si_response_free(u);
    gen_task(r, "translate", 0, 4);
    CHECK(is_done(r->end) && strcmp(r->end->done->profile, "translate") == 0);
    si_response_free(r->end);
    /* back to dense: every neuron, every task */
    u = use_profile_call(D.sock, "dense", NULL);
    CHECK(u && u->body_case == SELECTINFER__RESPONSE__BODY_ACK);
    si_response_free(u);
    gen_task(r, "qa", 0, 4);
    CHECK(is_done(r->end) && strcmp(r->end->done->profile, "dense") == 0 && r->end->done->ffn_share > 0.999f);
    si_response_free(r->end);
    free(r);
    daemon_stop();
    remove(prof);
    rmdir(dir);
}

/* pick = token: the plan keeps a sketch, every decode token picks its own
 * neurons; phi below delta is fine (nothing is static), above gamma not;
 * a swap carries the sketch along */
static void scenario_pick(void)
{
    char prof[160], dir[64];
    snprintf(dir, sizeof(dir), "/tmp/si-pick-XXXXXX");
    REQUIRE(mkdtemp(dir));
    snprintf(prof, sizeof(prof), "%s/p.siprof", dir);
    REQUIRE(make_profile(prof));
    const char *extra[] = {"--profile", prof, "--task", "qa", "--gamma", "0.5", "--delta", "0.2",
                           "--phi", "0.4", "--pick", "token", "--kv-cache-type", "q8_0", NULL};
    daemon_start(extra);
    Selectinfer__Response *st = status(D.sock);
    REQUIRE(st && st->status->profile);
    CHECK(st->status->profile->pick && strcmp(st->status->profile->pick, "token") == 0);
    /* a Q8_0 KV cache: 6 blocks of 34 bytes a position for K, as for V */
    CHECK(st->status->kv_cache_type && strcmp(st->status->kv_cache_type, "q8_0") == 0);
    CHECK(st->status->n_ctx > 0 && st->status->kv_bytes == (uint64_t)st->status->n_ctx * 30 * 2 * 6 * 34);
    si_response_free(st);
    char env_sock[256], out[8192];
    snprintf(env_sock, sizeof(env_sock), SI_SOCKET_ENV "=%s", D.sock);
    const char *sargs[] = {"status", NULL};
    CHECK(run_sictl(sargs, out, sizeof(out), env_sock) == 0);
    CHECK(strstr(out, "picked per token"));
    CHECK(strstr(out, "in q8_0 (1 slot of "));

    gen_result *r = calloc(1, sizeof(*r));
    gen_task(r, NULL, 0, 6);
    CHECK(is_done(r->end));
    if (is_done(r->end))
        CHECK(fabsf(r->end->done->ffn_share - 0.4f) < 0.02f);
    si_response_free(r->end);
    /* below delta: fewer picked, the sketch's charge the same (with the
     * default model's Q4_1 slots a sketch costs about half a neuron a slot,
     * so the share stays above phi) */
    gen_task(r, NULL, 0.15f, 4);
    CHECK(is_done(r->end));
    if (is_done(r->end))
        CHECK(r->end->done->ffn_share > 0.15f && r->end->done->ffn_share < 0.35f);
    si_response_free(r->end);
    gen_task(r, NULL, 0.6f, 4);
    CHECK(error_code(r->end) == SELECTINFER__ERROR_CODE__INVALID_ARGUMENT);
    si_response_free(r->end);
    gen_task(r, "translate", 0, 4); /* swaps, the sketch rebuilt */
    CHECK(is_done(r->end) && strcmp(r->end->done->profile, "translate") == 0 && r->end->done->swap);
    if (is_done(r->end))
        CHECK(fabsf(r->end->done->ffn_share - 0.4f) < 0.02f);
    si_response_free(r->end);
    free(r);
    /* picks change every token: nothing is copied */
    st = status(D.sock);
    REQUIRE(st);
    CHECK(st->status->n_slot_copy_bytes == 1 && st->status->slot_copy_bytes &&
          st->status->slot_copy_bytes[0] == 0);
    si_response_free(st);
    daemon_stop();
    remove(prof);
    rmdir(dir);
}

/* pick = exact: no sketch, every decode token computes every loaded
 * neuron's activation and adds the down rows of its largest; the share
 * counts all gate and up rows; a phi that cannot pay for them is refused
 * with a message that says so */
static void scenario_pick_exact(void)
{
    char prof[160], dir[64];
    snprintf(dir, sizeof(dir), "/tmp/si-exact-XXXXXX");
    REQUIRE(mkdtemp(dir));
    snprintf(prof, sizeof(prof), "%s/p.siprof", dir);
    REQUIRE(make_profile(prof));
    const char *extra[] = {"--profile", prof, "--task", "qa", "--gamma", "0.7", "--delta", "0.3",
                           "--phi", "0.5", "--pick", "exact", NULL};
    daemon_start(extra);
    Selectinfer__Response *st = status(D.sock);
    REQUIRE(st && st->status->profile);
    CHECK(st->status->profile->pick && strcmp(st->status->profile->pick, "exact") == 0);
    si_response_free(st);
    char env_sock[256], out[8192];
    snprintf(env_sock, sizeof(env_sock), SI_SOCKET_ENV "=%s", D.sock);
    const char *sargs[] = {"status", NULL};
    CHECK(run_sictl(sargs, out, sizeof(out), env_sock) == 0);
    CHECK(strstr(out, "picked per token (exact)"));

    gen_result *r = calloc(1, sizeof(*r));
    gen_task(r, NULL, 0, 6);
    CHECK(is_done(r->end));
    if (is_done(r->end))
        CHECK(r->end->done->ffn_share > 0.47f && r->end->done->ffn_share <= 0.501f);
    si_response_free(r->end);
    /* the default model's Q4_1 gate and up rows of 0.7 of the neurons
     * cost 0.38 of the FFN's bytes: phi 0.3 leaves nothing to pick */
    gen_task(r, NULL, 0.3f, 4);
    CHECK(error_code(r->end) == SELECTINFER__ERROR_CODE__INVALID_ARGUMENT);
    CHECK(r->end && r->end->error && strstr(r->end->error->message, "pick = exact"));
    si_response_free(r->end);
    gen_task(r, NULL, 0.6f, 4);
    CHECK(is_done(r->end));
    if (is_done(r->end))
        CHECK(r->end->done->ffn_share > 0.57f && r->end->done->ffn_share <= 0.601f);
    si_response_free(r->end);
    daemon_stop();

    /* candidates = 0.5: the pick among half the neurons, chosen per
     * request, reads fewer gate and up rows, so phi 0.3 runs (0.5 of the
     * Q4_1 rows cost 0.27 of the FFN's bytes) and reads what it says;
     * the non-candidates compensated (comp = mean) */
    const char *extra_c[] = {"--profile", prof, "--task", "qa", "--gamma", "0.7", "--delta", "0.3",
                             "--phi", "0.4", "--pick", "exact", "--candidates", "0.5",
                             "--comp", "mean", NULL};
    daemon_start(extra_c);
    st = status(D.sock);
    REQUIRE(st && st->status->profile);
    CHECK(st->status->profile->has_candidates && fabsf(st->status->profile->candidates - 0.5f) < 1e-6f);
    CHECK(st->status->profile->comp && strcmp(st->status->profile->comp, "mean") == 0);
    si_response_free(st);
    snprintf(env_sock, sizeof(env_sock), SI_SOCKET_ENV "=%s", D.sock);
    CHECK(run_sictl(sargs, out, sizeof(out), env_sock) == 0);
    CHECK(strstr(out, "exact pick among: 0.50 of the FFN neurons"));
    CHECK(strstr(out, "left out:         mean activation"));
    gen_task(r, NULL, 0, 6);
    CHECK(is_done(r->end));
    if (is_done(r->end))
        CHECK(r->end->done->ffn_share > 0.37f && r->end->done->ffn_share <= 0.401f);
    si_response_free(r->end);
    gen_task(r, NULL, 0.3f, 4);
    CHECK(is_done(r->end));
    if (is_done(r->end))
        CHECK(r->end->done->ffn_share > 0.27f && r->end->done->ffn_share <= 0.301f);
    si_response_free(r->end);
    daemon_stop();

    /* comp = linear with the per-request pick: its maps' bytes come off
     * phi's neurons, so the share is still phi's */
    const char *extra_l[] = {"--profile", prof, "--task", "qa", "--gamma", "0.7", "--delta", "0.3",
                             "--phi", "0.4", "--comp", "linear", NULL};
    daemon_start(extra_l);
    st = status(D.sock);
    REQUIRE(st && st->status->profile);
    CHECK(st->status->profile->comp && strcmp(st->status->profile->comp, "linear") == 0);
    si_response_free(st);
    snprintf(env_sock, sizeof(env_sock), SI_SOCKET_ENV "=%s", D.sock);
    CHECK(run_sictl(sargs, out, sizeof(out), env_sock) == 0);
    CHECK(strstr(out, "left out:         a linear map"));
    gen_task(r, NULL, 0, 6);
    CHECK(is_done(r->end));
    if (is_done(r->end))
        CHECK(r->end->done->ffn_share > 0.39f && r->end->done->ffn_share <= 0.401f);
    si_response_free(r->end);
    /* a prompt long enough (over 64 positions) for the map to be fitted */
    char longp[600] = "";
    for (int i = 1; i <= 80; i++)
        snprintf(longp + strlen(longp), sizeof(longp) - strlen(longp), "%d, ", i);
    Selectinfer__Generate gl;
    init_raw(&gl, longp, 6);
    memset(r, 0, sizeof(*r));
    CHECK(generate(D.sock, &gl, r) == 0);
    CHECK(is_done(r->end) && r->len > 0);
    if (is_done(r->end))
        CHECK(r->end->done->ffn_share > 0.39f && r->end->done->ffn_share <= 0.401f);
    si_response_free(r->end);
    free(r);
    daemon_stop();

    /* candidates without the exact pick, compensation of a pick that
     * leaves nothing out for a request: start-up errors that say so */
    const char *bad_cand[] = {"--profile", prof, "--task", "qa", "--phi", "0.4",
                              "--candidates", "0.5", NULL};
    const char *bad_comp[] = {"--profile", prof, "--task", "qa", "--phi", "0.5",
                              "--pick", "exact", "--comp", "mean", NULL};
    const char *bad_lin[] = {"--profile", prof, "--task", "qa", "--phi", "0.5",
                             "--pick", "exact", "--comp", "linear", NULL};
    const char *const *bad[] = {bad_cand, bad_comp, bad_lin};
    const char *said[] = {"set pick = exact", "comp = mean needs pick = request",
                          "comp = linear needs pick = request"};
    for (int i = 0; i < 3; i++) {
        daemon_start_env(&D, bad[i], NULL);
        int wst = 0;
        CHECK(waitpid(D.pid, &wst, 0) == D.pid && WIFEXITED(wst) && WEXITSTATUS(wst) == 1);
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "grep -q '%s' %s", said[i], D.log);
        CHECK(system(cmd) == 0);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", D.dir);
        CHECK(system(cmd) == 0);
        D.pid = 0;
    }
    remove(prof);
    rmdir(dir);
}

static bool find_model(void)
{
    const char *env = getenv("SI_MODEL");
    if (env && env[0]) {
        snprintf(model, sizeof(model), "%s", env);
    } else {
        const char *cache = getenv("XDG_CACHE_HOME");
        const char *home = getenv("HOME");
        if (cache && cache[0])
            snprintf(model, sizeof(model), "%s/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf", cache);
        else
            snprintf(model, sizeof(model), "%s/.cache/selectinfer/SmolLM2-135M-Instruct.Q4_1.gguf", home ? home : "");
    }
    return access(model, R_OK) == 0;
}

/* One raw prompt, 1 token, unstreamed; its done's slot and cached tokens
 * (-1 when it did not end with done). */
static void slot_gen(si_client *c, const char *prompt, bool cache, int *slot, int *cached)
{
    Selectinfer__Generate g;
    init_raw(&g, prompt, 1);
    g.has_stream = true;
    g.stream = false;
    g.has_cache_prompt = true;
    g.cache_prompt = cache;
    Selectinfer__Response *r = NULL;
    *slot = *cached = -1;
    if (si_client_generate(c, &g, NULL, NULL, 60000, &r) == 0 && is_done(r)) {
        *slot = r->done->has_slot ? (int)r->done->slot : -1;
        *cached = (int)r->done->cached_tokens;
    }
    si_response_free(r);
}

/* Context slots (slots = 2; the fake engine keeps each session's last
 * prompt, the engine's rule of at most n - 2 tokens reused): a prompt
 * goes to the slot that keeps most of it, unless that is under half of
 * the prompt and of what the slot holds; otherwise to the least recently
 * used slot. Status lists what each holds; a swap empties them. */
static void scenario_slots(void)
{
    char prof[160], dir[64];
    snprintf(dir, sizeof(dir), "/tmp/si-slots-XXXXXX");
    REQUIRE(mkdtemp(dir));
    snprintf(prof, sizeof(prof), "%s/p.siprof", dir);
    REQUIRE(make_profile(prof));
    const char *extra[] = {"--slots", "2", "--profile", prof, "--task", "qa",
                           "--kv-cache-type", "q8_0", NULL};
    daemon_start(extra);
    si_client *c;
    REQUIRE(si_client_connect(D.sock, &c) == 0);
    char A[] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA one"; /* 44 */
    char A2[] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA one two";
    char A3[] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA one two three";
    char B[] = "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB one";
    char B2[] = "BBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBBB one two";
    /* A's first 10 tokens, then 50 of its own */
    char AZ[] = "AAAAAAAAAAZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZZ";
    int slot, cached;
    slot_gen(c, A, true, &slot, &cached);
    CHECK(slot == 0 && cached == 0);
    slot_gen(c, B, true, &slot, &cached); /* nothing in common: the idle slot */
    CHECK(slot == 1 && cached == 0);
    slot_gen(c, A2, true, &slot, &cached); /* each conversation keeps its slot */
    CHECK(slot == 0 && cached == (int)strlen(A));
    slot_gen(c, B2, true, &slot, &cached);
    CHECK(slot == 1 && cached == (int)strlen(B));
    slot_gen(c, A3, true, &slot, &cached);
    CHECK(slot == 0 && cached == (int)strlen(A2));
    /* AZ shares 10 tokens with A3 (of its 60, of A3's 54): not worth A3,
     * so the least recently used slot, B's */
    slot_gen(c, AZ, true, &slot, &cached);
    CHECK(slot == 1 && cached == 0);
    /* A3 was still there */
    char A4[] = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA one two three four";
    slot_gen(c, A4, true, &slot, &cached);
    CHECK(slot == 0 && cached == (int)strlen(A3));
    /* a retry of most of a prompt: over half of it kept, though under half
     * of what the slot holds (the other slot is the least recently used) */
    char Aretry[24];
    snprintf(Aretry, sizeof(Aretry), "%.20s?", A3);
    slot_gen(c, Aretry, true, &slot, &cached);
    CHECK(slot == 0 && cached == 19);
    /* cache_prompt false: the least recently used slot, nothing kept */
    slot_gen(c, A3, false, &slot, &cached);
    CHECK(slot == 1 && cached == 0);
    Selectinfer__Response *st = status(D.sock);
    REQUIRE(st);
    CHECK(st->status->has_slots && st->status->slots == 2 && st->status->n_slot_tokens == 2);
    if (st->status->n_slot_tokens == 2)
        CHECK(st->status->slot_tokens[0] == strlen(Aretry) && st->status->slot_tokens[1] == strlen(A3));
    si_response_free(st);
    char env_sock[256], out[8192], want[64];
    snprintf(env_sock, sizeof(env_sock), SI_SOCKET_ENV "=%s", D.sock);
    const char *sargs[] = {"status", NULL};
    CHECK(run_sictl(sargs, out, sizeof(out), env_sock) == 0);
    snprintf(want, sizeof(want), "context slots:    2, holding %zu, %zu tokens", strlen(Aretry), strlen(A3));
    CHECK(strstr(out, want) != NULL);
    /* both slots' caches (the fake: 544 bytes a position in q8_0) */
    CHECK(strstr(out, "KV cache:         0.5 MiB in q8_0 (2 slots of 512 tokens)") != NULL);
    /* tokenize (the fake engine's tokens are bytes) */
    const char *targs[] = {"tokenize", "--raw", "abc", NULL};
    CHECK(run_sictl(targs, out, sizeof(out), env_sock) == 0);
    CHECK(strcmp(out, "3 tokens (context 512)\n97 98 99\n") == 0);
    const char *targs2[] = {"tokenize", "--raw", "--pieces", "ab", NULL};
    CHECK(run_sictl(targs2, out, sizeof(out), env_sock) == 0);
    CHECK(strcmp(out, "2 tokens (context 512)\n97\t\"a\"\n98\t\"b\"\n") == 0);
    /* after "--" an option's name is text: "--pieces" is 8 bytes */
    const char *targs6[] = {"tokenize", "--raw", "--", "--pieces", NULL};
    CHECK(run_sictl(targs6, out, sizeof(out), env_sock) == 0);
    CHECK(strcmp(out, "8 tokens (context 512)\n45 45 112 105 101 99 101 115\n") == 0);
    const char *targs7[] = {"tokenize", "--raw", "--bogus", "x", NULL};
    CHECK(run_sictl(targs7, NULL, 0, env_sock) == 64);
    const char *targs3[] = {"tokenize", NULL};
    CHECK(run_sictl(targs3, out, sizeof(out), env_sock) == 64);
    /* a chat ("user: hi\nassistant:\n"), and with the thinking switch off
     * (" <think></think>" more), as generate would evaluate them */
    const char *targs4[] = {"tokenize", "hi", NULL};
    CHECK(run_sictl(targs4, out, sizeof(out), env_sock) == 0 && strncmp(out, "20 tokens (", 11) == 0);
    const char *targs5[] = {"tokenize", "--no-think", "hi", NULL};
    CHECK(run_sictl(targs5, out, sizeof(out), env_sock) == 0 && strncmp(out, "36 tokens (", 11) == 0);
    /* a swap resets every slot */
    Selectinfer__Response *u = use_profile_call(D.sock, "translate", NULL);
    CHECK(u && u->body_case == SELECTINFER__RESPONSE__BODY_ACK);
    si_response_free(u);
    st = status(D.sock);
    REQUIRE(st);
    CHECK(st->status->n_slot_tokens == 2);
    if (st->status->n_slot_tokens == 2)
        CHECK(st->status->slot_tokens[0] == 0 && st->status->slot_tokens[1] == 0);
    si_response_free(st);
    slot_gen(c, A3, true, &slot, &cached);
    CHECK(slot == 0 && cached == 0);
    si_client_close(c);
    daemon_stop();
    unlink(prof);
    rmdir(dir);
}

/* The scenario's overall deadline (below meson's timeout): a scenario stuck
 * in a wait fails here, with its daemon killed, instead of hanging. */
static void on_watchdog(int sig)
{
    static const char msg[] = "test-daemon: the scenario ran past its deadline; killing the daemon\n";
    (void)sig;
    if (D.pid > 0)
        kill(D.pid, SIGKILL);
    if (write(2, msg, sizeof(msg) - 1) < 0)
        _exit(1);
    _exit(1);
}

/* A scenario that ended early (REQUIRE) leaves its daemon running: kill it,
 * so that no process outlives the test. */
static void kill_leftover_daemon(void)
{
    int st;
    if (D.pid <= 0 || waitpid(D.pid, &st, WNOHANG) != 0)
        return; /* none, or already reaped */
    fprintf(stderr, "the scenario ended with its daemon still running; killing it\n");
    failures++;
    kill(D.pid, SIGKILL);
    waitpid(D.pid, &st, 0);
    dump_log(&D);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", D.dir);
    if (system(cmd) != 0)
        fprintf(stderr, "cannot remove %s\n", D.dir);
}

/* A conversation through the client library: roles and contents alternate
 * user/assistant after an optional system message. */
typedef struct convo {
    Selectinfer__ChatMessage m[64], *mp[64];
    char text[64][64];
    Selectinfer__ChatMessages chat;
    size_t n;
} convo;

static void convo_add(convo *v, const char *role, char tag, int i)
{
    REQUIRE(v->n < 64);
    Selectinfer__ChatMessage *m = &v->m[v->n];
    selectinfer__chat_message__init(m);
    m->role = (char *)role;
    /* 40 bytes that differ from the first on: "u07 ..." */
    snprintf(v->text[v->n], sizeof(v->text[0]), "%c%02d %.36s", tag, i, "....................................");
    m->content = strcmp(role, "system") ? v->text[v->n] : "Be brief.";
    v->mp[v->n] = m;
    v->n++;
}

/* done.prompt_tokens, cached_tokens, dropped_messages; or the error code
 * as -code. max_tokens 64: a quarter of the context is 128, so the reply's
 * room is 64 tokens. */
static bool think_off; /* convo_gen sends think = false */

static int convo_gen(si_client *c, convo *v, bool truncate, int *cached, int *dropped, char *err, size_t cap)
{
    Selectinfer__Generate g;
    selectinfer__generate__init(&g);
    selectinfer__chat_messages__init(&v->chat);
    v->chat.n_messages = v->n;
    v->chat.messages = v->mp;
    g.input_case = SELECTINFER__GENERATE__INPUT_CHAT;
    g.chat = &v->chat;
    g.has_max_tokens = true;
    g.max_tokens = 64;
    g.has_stream = true;
    g.stream = false;
    if (!truncate) {
        g.has_truncate = true;
        g.truncate = false;
    }
    if (think_off) {
        g.has_think = true;
        g.think = false;
    }
    Selectinfer__Response *r = NULL;
    int ret = -1000;
    if (si_client_generate(c, &g, NULL, NULL, 60000, &r) == 0 && r) {
        if (is_done(r)) {
            ret = (int)r->done->prompt_tokens;
            *cached = (int)r->done->cached_tokens;
            *dropped = r->done->has_dropped_messages ? (int)r->done->dropped_messages : -1;
        } else if (r->body_case == SELECTINFER__RESPONSE__BODY_ERROR) {
            ret = -(int)r->error->code;
            snprintf(err, cap, "%s", r->error->message ? r->error->message : "");
        }
    }
    si_response_free(r);
    return ret;
}

/* A chat longer than the context (512 tokens; the fake engine's tokens are
 * bytes and its template "role: content\n" per message, then
 * "assistant:\n"): the oldest turns go, the system message stays, the cut
 * goes to half the context and stays there while the turns after it fit,
 * so those reuse the cached prompt. Here a system message is 18 tokens,
 * a user message 47, an assistant one 52: a prompt keeping the system
 * message and the last p pairs before a final user message has
 * 76 + 99 p tokens. */
static int extends_before_ready; /* EXTEND_TIMEOUT_USEC= seen before READY=1 */

/* Datagrams on the notify socket for `seconds`: how many said WATCHDOG=1;
 * *ready set when one said READY=1. */
static int count_pings(int fd, double seconds, bool *ready)
{
    int pings = 0;
    const double end = now_s() + seconds;
    for (double left; (left = end - now_s()) > 0;) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(left * 1000) + 1) <= 0)
            continue;
        char buf[512];
        ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
        if (n <= 0)
            continue;
        buf[n] = '\0';
        pings += strstr(buf, "WATCHDOG=1") != NULL;
        if (ready && strstr(buf, "EXTEND_TIMEOUT_USEC=") && !*ready)
            extends_before_ready++;
        if (ready && strstr(buf, "READY=1"))
            *ready = true;
    }
    return pings;
}

/* Reads a streamed request's replies: whether they end with done. */
static bool ends_done(si_client *c)
{
    Selectinfer__Response *r = NULL;
    while (si_client_recv(c, 10000, &r) == 1 && r->body_case == SELECTINFER__RESPONSE__BODY_CHUNK) {
        si_response_free(r);
        r = NULL;
    }
    const bool done = r && r->body_case == SELECTINFER__RESPONSE__BODY_DONE;
    si_response_free(r);
    return done;
}

/* The systemd watchdog (WATCHDOG_USEC 0.4 s: a ping every 0.2 s): pings
 * while idle, while a request makes progress and while a profile swap
 * reports its layers, none while the inference thread is stuck in one call
 * (the fake engine's "HANG": 2 s without a callback, as a hung GPU call),
 * and pings again once it returns. A load that reports its layers extends
 * the start timeout (EXTEND_TIMEOUT_USEC) before READY=1. */
static void scenario_watchdog(void)
{
    char dir[] = "/tmp/si-watchdog-XXXXXX";
    REQUIRE(mkdtemp(dir));
    char path[128], env_sock[160];
    snprintf(path, sizeof(path), "%s/notify", dir);
    snprintf(env_sock, sizeof(env_sock), "NOTIFY_SOCKET=%s", path);
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%.100s", path);
    REQUIRE(bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0);
    char prof[160];
    snprintf(prof, sizeof(prof), "%s/p.siprof", dir);
    REQUIRE(make_profile(prof));
    const char *extra[] = {"--profile", prof, "--task", "qa", NULL};
    /* the load takes 0.6 + 1.6 s (its first plan is a swap), the swap 1.6 s */
    const char *env[] = {env_sock, "WATCHDOG_USEC=400000", "SI_FAKE_LOAD_MS=600", "SI_FAKE_SWAP_MS=1600", NULL};
    daemon_start_env(&D, extra, env);
    if (wait_ready(&D, 60) < 0) {
        failures++;
        if (D.pid > 0)
            kill(D.pid, SIGKILL);
        exit(1);
    }
    bool ready = false;
    int idle = count_pings(fd, 1.2, &ready);
    CHECK(ready && idle >= 3 && extends_before_ready >= 1);
    /* a swap that reports its layers: busy, and pinging */
    si_client *sc;
    REQUIRE(si_client_connect(D.sock, &sc) == 0);
    Selectinfer__UseProfile u = SELECTINFER__USE_PROFILE__INIT;
    u.name = "translate";
    Selectinfer__Request sreq = SELECTINFER__REQUEST__INIT;
    sreq.body_case = SELECTINFER__REQUEST__BODY_USE_PROFILE;
    sreq.use_profile = &u;
    sreq.has_id = true;
    sreq.id = 7;
    REQUIRE(si_client_send(sc, &sreq) == 0);
    int swapping = count_pings(fd, 1.2, NULL);
    CHECK(swapping >= 3);
    Selectinfer__Response *ack = NULL;
    CHECK(si_client_recv(sc, 10000, &ack) == 1 && ack && ack->body_case == SELECTINFER__RESPONSE__BODY_ACK);
    si_response_free(ack);
    si_client_close(sc);
    si_client *c;
    REQUIRE(si_client_connect(D.sock, &c) == 0);
    /* a request that makes progress: 60 tokens, 20 ms apart */
    Selectinfer__Generate g;
    init_raw(&g, "live", 60);
    Selectinfer__Request req = generate_request(&g);
    req.id = 1;
    REQUIRE(si_client_send(c, &req) == 0);
    int live = count_pings(fd, 1.0, NULL);
    CHECK(live >= 3);
    CHECK(ends_done(c));
    /* stuck for 2 s: after the last beat's 0.4 s, no ping */
    init_raw(&g, "HANG", 1);
    req = generate_request(&g);
    req.id = 2;
    REQUIRE(si_client_send(c, &req) == 0);
    count_pings(fd, 0.6, NULL);
    int stuck = count_pings(fd, 1.0, NULL);
    CHECK(stuck == 0);
    CHECK(ends_done(c));
    int after = count_pings(fd, 1.0, NULL);
    CHECK(after >= 3);
    fprintf(stderr, "watchdog pings: %d idle (1.2 s), %d swapping (1.2 s), %d live, %d stuck, %d after (1 s each); "
            "%d start-timeout extensions while loading\n", idle, swapping, live, stuck, after, extends_before_ready);
    si_client_close(c);
    /* the log says why the pings stopped */
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "grep -q 'watchdog pings withheld' %s", D.log);
    CHECK(system(cmd) == 0);
    daemon_stop();
    close(fd);
    unlink(path);
    unlink(prof);
    rmdir(dir);
}

static void scenario_truncate_real(void);

static void scenario_truncate(void)
{
    if (!fake) {
        scenario_truncate_real();
        return;
    }
    daemon_start(NULL);
    si_client *c;
    REQUIRE(si_client_connect(D.sock, &c) == 0);
    convo v;
    memset(&v, 0, sizeof(v));
    int cached, dropped;
    char err[512] = "";
    convo_add(&v, "system", 's', 0);
    convo_add(&v, "user", 'u', 1);
    /* fits: nothing left out, and done says so */
    CHECK(convo_gen(c, &v, true, &cached, &dropped, err, sizeof(err)) == 76 && dropped == 0);
    /* think = false reaches the template (the fake's switch adds
     * " <think></think>", 16 bytes) */
    think_off = true;
    CHECK(convo_gen(c, &v, true, &cached, &dropped, err, sizeof(err)) == 76 + 16);
    think_off = false;
    for (int i = 1; i <= 12; i++) {
        convo_add(&v, "assistant", 'a', i);
        convo_add(&v, "user", 'u', i + 1);
    }
    /* 12 pairs: 1264 tokens. Refused as a whole... */
    CHECK(convo_gen(c, &v, false, &cached, &dropped, err, sizeof(err)) == -SELECTINFER__ERROR_CODE__PROMPT_TOO_LONG);
    /* ...cut to half the context: the last pair (175 tokens; two pairs,
     * 274, are over 256), 22 messages left out */
    int n = convo_gen(c, &v, true, &cached, &dropped, err, sizeof(err));
    CHECK(n == 175 && dropped == 22);
    /* the next turns append to that cut while it fits with the reply's
     * room (448 tokens), reusing the prompt before (all of it but the
     * "\n" after "assistant:") */
    int want_n[] = {274, 373}, want_c[] = {174, 273};
    for (int t = 0; t < 2; t++) {
        convo_add(&v, "assistant", 'a', 13 + t);
        convo_add(&v, "user", 'u', 14 + t);
        n = convo_gen(c, &v, true, &cached, &dropped, err, sizeof(err));
        CHECK(n == want_n[t] && cached == want_c[t] && dropped == 22);
        if (n != want_n[t] || cached != want_c[t] || dropped != 22)
            fprintf(stderr, "turn %d: %d tokens, %d cached, %d dropped\n", t, n, cached, dropped);
    }
    /* then the cut moves: back to half the context, the system message
     * and "user: u1" (u15's first bytes, u12's before) all that is reused */
    convo_add(&v, "assistant", 'a', 15);
    convo_add(&v, "user", 'u', 16);
    n = convo_gen(c, &v, true, &cached, &dropped, err, sizeof(err));
    CHECK(n == 175 && dropped == 28 && cached == 26);
    if (n != 175 || dropped != 28 || cached != 26)
        fprintf(stderr, "moved cut: %d tokens, %d cached, %d dropped\n", n, cached, dropped);
    convo_add(&v, "assistant", 'a', 16);
    convo_add(&v, "user", 'u', 17);
    CHECK(convo_gen(c, &v, true, &cached, &dropped, err, sizeof(err)) == 274 && dropped == 28);
    /* a last message longer than the context cannot be cut to fit; the
     * slot keeps what it held, so the cut before still serves */
    static char big[600];
    memset(big, 'x', sizeof(big) - 1);
    v.m[v.n - 1].content = big;
    n = convo_gen(c, &v, true, &cached, &dropped, err, sizeof(err));
    CHECK(n == -SELECTINFER__ERROR_CODE__PROMPT_TOO_LONG && strstr(err, "the last message") != NULL);
    v.m[v.n - 1].content = v.text[v.n - 1];
    CHECK(convo_gen(c, &v, true, &cached, &dropped, err, sizeof(err)) == 274 && dropped == 28);
    /* 4 pairs (472 tokens) fit but leave under 64 for the reply:
     * truncate = false takes them whole, true cuts to half */
    convo w;
    memset(&w, 0, sizeof(w));
    convo_add(&w, "system", 's', 0);
    for (int i = 1; i <= 4; i++) {
        convo_add(&w, "user", 'u', i);
        convo_add(&w, "assistant", 'a', i);
    }
    convo_add(&w, "user", 'u', 5);
    CHECK(convo_gen(c, &w, false, &cached, &dropped, err, sizeof(err)) == 472 && dropped == 0);
    CHECK(convo_gen(c, &w, true, &cached, &dropped, err, sizeof(err)) == 175 && dropped == 6);
    si_client_close(c);

    /* an answer longer than the context's room: a context shift keeps the
     * system message and the next header ("system: Be brief.\nuser: ",
     * 24 bytes), a raw prompt nothing (no BOS); shift = false stops */
    Selectinfer__Generate g;
    Selectinfer__ChatMessages chat;
    Selectinfer__ChatMessage ms[2], *mp[2] = {&ms[0], &ms[1]};
    init_chat(&g, &chat, &ms[1], mp, "Hello");
    selectinfer__chat_message__init(&ms[0]);
    ms[0].role = "system";
    ms[0].content = "Be brief.";
    mp[0] = &ms[0];
    chat.n_messages = 2;
    g.has_max_tokens = true;
    g.max_tokens = 480;
    gen_result *res = calloc(1, sizeof(*res));
    REQUIRE(res);
    for (int k = 0; k < 3; k++) {
        Selectinfer__Generate r;
        init_raw(&r, "Hello", 510);
        if (k == 2) {
            g.has_shift = true;
            g.shift = false;
        }
        CHECK(generate(D.sock, k == 1 ? &r : &g, res) == 0 && is_done(res->end));
        if (!is_done(res->end))
            continue;
        const Selectinfer__Done *d = res->end->done;
        const char *want = k == 0 ? "keep24 " : k == 1 ? "keep0 " : "w0 ";
        CHECK(strncmp(res->text, want, strlen(want)) == 0 && d->context_shifts == (k < 2 ? 1u : 0u));
        if (k == 2) /* the room the prompt leaves: 512 less its 38 bytes */
            CHECK(d->generated_tokens == 512 - d->prompt_tokens);
        if (strncmp(res->text, want, strlen(want)) != 0)
            fprintf(stderr, "shift %d: '%.20s', %u shifts\n", k, res->text, d->context_shifts);
        si_response_free(res->end);
    }
    free(res);
    daemon_stop();
}

/* The same on the default model through `sictl --json chat`: 14 turns of
 * ~30 tokens with replies of 40 overrun the 512-token context. Every turn
 * is answered; a new cut leaves the prompt within half the context; the
 * turns that keep a cut reuse most of their prompt. */
static void scenario_truncate_real(void)
{
    daemon_start(NULL);
    char in[sizeof(D.dir) + 16];
    snprintf(in, sizeof(in), "%s/turns.txt", D.dir);
    FILE *f = fopen(in, "w");
    REQUIRE(f);
    for (int i = 1; i <= 14; i++)
        fprintf(f, "Tell me one fact about the number %d, in a sentence or two please.\n", i);
    fclose(f);
    static char out[1 << 20];
    const char *args[] = {"--socket", D.sock, "--json", "chat", "--max-tokens", "40", "--temperature", "0", NULL};
    sictl_stdin = in;
    CHECK(run_sictl(args, out, sizeof(out), NULL) == 0);
    sictl_stdin = NULL;
    int turns = 0, cuts = 0, reused = 0, prev_dropped = 0;
    for (const char *p = out; (p = strstr(p, "\"done\":{")) != NULL; p++) {
        const char *pt = strstr(p, "\"prompt_tokens\":"), *ct = strstr(p, "\"cached_tokens\":"),
                   *dm = strstr(p, "\"dropped_messages\":"), *end = strchr(p, '}');
        REQUIRE(pt && ct && dm && end && dm < end);
        int n = atoi(pt + 16), cached = atoi(ct + 16), dropped = atoi(dm + 19);
        turns++;
        CHECK(n + 40 <= 512 && dropped >= prev_dropped);
        if (dropped > prev_dropped) {
            cuts++;
            CHECK(n <= 256);
        } else if (dropped > 0) {
            reused++;
            CHECK(2 * cached >= n);
        }
        if (n + 40 > 512 || dropped < prev_dropped || (dropped > prev_dropped && n > 256) ||
            (dropped == prev_dropped && dropped > 0 && 2 * cached < n))
            fprintf(stderr, "turn %d: %d tokens, %d cached, %d dropped\n", turns, n, cached, dropped);
        prev_dropped = dropped;
    }
    CHECK(turns == 14 && strstr(out, "\"error\"") == NULL);
    CHECK(cuts >= 1 && reused >= 1);
    fprintf(stderr, "%d turns, %d cuts, %d turns kept a cut (%d messages left out at the end)\n", turns, cuts,
            reused, prev_dropped);
    /* sictl's --format json reaches the sampler: an object, where the
     * same question gets prose without it (test-json-output.py judges
     * such objects with Python's parser) */
    const char *jargs[] = {"--socket", D.sock, "generate", "--format", "json", "--max-tokens", "100",
                           "What is the capital of France?", NULL};
    CHECK(run_sictl(jargs, out, sizeof(out), NULL) == 0);
    const char *obj = out + strspn(out, " \t\r\n"); /* whitespace may lead */
    size_t len = strlen(obj);
    CHECK(len >= 3 && obj[0] == '{' && strcmp(obj + len - 2, "}\n") == 0);
    if (len < 3 || obj[0] != '{')
        fprintf(stderr, "format json answered: %s\n", out);
    const char *pargs[] = {"--socket", D.sock, "generate", "--max-tokens", "100", "What is the capital of France?",
                           NULL};
    CHECK(run_sictl(pargs, out, sizeof(out), NULL) == 0 && out[0] != '{');
    const char *bargs[] = {"--socket", D.sock, "generate", "--format", "yaml", "x", NULL};
    CHECK(run_sictl(bargs, out, sizeof(out), NULL) == 65);
    /* --logprobs N asks for the log-probabilities and N alternatives
     * (test-daemon-wire.py checks their values) */
    const char *largs[] = {"--socket", D.sock, "--json", "generate", "--logprobs", "2", "--max-tokens", "4", "Hi", NULL};
    CHECK(run_sictl(largs, out, sizeof(out), NULL) == 0);
    CHECK(strstr(out, "\"logprobs\":[{\"id\":") != NULL && strstr(out, "\"top\":[{") != NULL);
    const char *l21[] = {"--socket", D.sock, "generate", "--logprobs", "21", "x", NULL};
    CHECK(run_sictl(l21, out, sizeof(out), NULL) == 64);
    daemon_stop();
}

/* Tool calling through the daemon (fake engine: its template prints tools
 * as "tools: TOOLS" and calls as " call:NAME(ARGS)", and a prompt with
 * "CALLTOOL" is answered with two <tool_call> blocks read by the engine's
 * own reader): the calls in done, streamed or not; an answer cut short
 * has none; the history's calls and tool results reach the template;
 * refusals. */
/* chat_template and chat_template_file in place of the model's (the fake
 * heads its chats with "template: NAME" or "template: kind K"); a name not
 * known or a file in no known format fails the load, saying why. */
static void chat_template_fails(const char *key, const char *value, const char *why)
{
    const char *extra[] = {key, value, NULL};
    const char *env[] = {"SI_FAKE_LOAD_MS=800", NULL}; /* connected while it loads */
    daemon_start_env(&D, extra, env);
    si_client *c = NULL;
    for (int i = 0; i < 100 && si_client_connect(D.sock, &c) < 0; i++)
        sleep_ms(20);
    REQUIRE(c);
    Selectinfer__Generate g;
    init_raw(&g, "hello", 3);
    Selectinfer__Response *r = NULL;
    REQUIRE(si_client_generate(c, &g, NULL, NULL, 10000, &r) == 0);
    CHECK(error_code(r) == SELECTINFER__ERROR_CODE__NOT_READY);
    const bool said = r && r->body_case == SELECTINFER__RESPONSE__BODY_ERROR && r->error->message &&
                      strstr(r->error->message, why);
    if (!said)
        fprintf(stderr, "%s %s: %s\n", key, value,
                r && r->body_case == SELECTINFER__RESPONSE__BODY_ERROR ? r->error->message : "?");
    CHECK(said);
    si_response_free(r);
    si_client_close(c);
    int st;
    CHECK(waitpid(D.pid, &st, 0) == D.pid && WIFEXITED(st) && WEXITSTATUS(st) == 1);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", D.dir);
    CHECK(system(cmd) == 0);
}

static void scenario_chat_template(void)
{
    char env_sock[256], out[512];
    /* "template: tulu\n" (15 bytes) and "user: hi\nassistant:\n" (20) */
    const char *named[] = {"--chat-template", "tulu", NULL};
    daemon_start(named);
    snprintf(env_sock, sizeof(env_sock), SI_SOCKET_ENV "=%s", D.sock);
    const char *targs[] = {"tokenize", "hi", NULL};
    CHECK(run_sictl(targs, out, sizeof(out), env_sock) == 0 && strncmp(out, "35 tokens (", 11) == 0);
    daemon_stop();
    /* OLMo 2's template from a file: "template: kind 12\n" (ENG_CHAT_TULU) */
    const char *src = getenv("SI_SOURCE_ROOT");
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/data/chat-template-olmo2.jinja", src ? src : ".");
    const char *file[] = {"--chat-template-file", path, NULL};
    daemon_start(file);
    snprintf(env_sock, sizeof(env_sock), SI_SOCKET_ENV "=%s", D.sock);
    CHECK(run_sictl(targs, out, sizeof(out), env_sock) == 0 && strncmp(out, "38 tokens (", 11) == 0);
    daemon_stop();
    chat_template_fails("--chat-template", "bogus", "chat_template 'bogus' is not one of: chatml");
    chat_template_fails("--chat-template-file", "/nonexistent/t.jinja", "cannot read it");
    snprintf(path, sizeof(path), "%s/tests/data/ppl-text.txt", src ? src : "."); /* prose */
    chat_template_fails("--chat-template-file", path, "not a chat template format");
}

static void scenario_tools(void)
{
    daemon_start(NULL);
    static const char tools[] = "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\"}}]";
    Selectinfer__Generate g;
    Selectinfer__ChatMessages chat;
    Selectinfer__ChatMessage m[4], *mp[4];
    gen_result res;
    for (int stream = 1; stream >= 0; stream--) {
        init_chat(&g, &chat, &m[0], mp, "CALLTOOL please");
        g.tools = (char *)tools;
        g.has_stream = true;
        g.stream = stream;
        g.has_max_tokens = true;
        g.max_tokens = 100; /* within the context: no shift */
        CHECK(generate(D.sock, &g, &res) == 0 && is_done(res.end));
        if (!is_done(res.end)) {
            describe_reply("tools", res.end);
            continue;
        }
        const Selectinfer__Done *d = res.end->done;
        CHECK(d->stop_reason == SELECTINFER__STOP_REASON__STOP_EOS && d->n_tool_calls == 2);
        if (d->n_tool_calls == 2) {
            CHECK(!strcmp(d->tool_calls[0]->name, "get_weather") &&
                  !strcmp(d->tool_calls[0]->arguments, "{\"city\": \"Paris\"}"));
            CHECK(!strcmp(d->tool_calls[1]->name, "now") && !strcmp(d->tool_calls[1]->arguments, "{}"));
        }
        /* the text is the answer whole, blocks included */
        const char *text = stream ? res.text : (const char *)d->text.data;
        const size_t len = stream ? res.len : d->text.len;
        CHECK(len > 20 && !memcmp(text, "Checking.\n<tool_call>", 21));
        /* the content to send back with the calls: the text before them */
        CHECK(d->has_content && d->content.len == 9 && !memcmp(d->content.data, "Checking.", 9));
        CHECK(stream ? res.n_chunks > 1 : d->has_text);
        si_response_free(res.end);
    }
    /* a reasoning model's answer (the fake's template splits as Qwen3's):
     * the reasoning in done.thinking, the answer after it in content */
    init_chat(&g, &chat, &m[0], mp, "THINK first");
    g.has_max_tokens = true;
    g.max_tokens = 100;
    CHECK(generate(D.sock, &g, &res) == 0 && is_done(res.end));
    if (is_done(res.end)) {
        const Selectinfer__Done *d = res.end->done;
        CHECK(d->has_thinking && d->thinking.len == 11 && !memcmp(d->thinking.data, "weighing it", 11));
        CHECK(d->has_content && d->content.len == 11 && !memcmp(d->content.data, "The answer.", 11));
        CHECK(d->n_tool_calls == 0 && res.len == strlen("<think>\nweighing it\n</think>\n\nThe answer."));
    }
    si_response_free(res.end);
    /* a plain answer has neither */
    init_chat(&g, &chat, &m[0], mp, "EOS");
    CHECK(generate(D.sock, &g, &res) == 0 && is_done(res.end) && !res.end->done->has_thinking &&
          !res.end->done->has_content);
    si_response_free(res.end);
    /* cut short by max_tokens: no calls, the text as it came */
    init_chat(&g, &chat, &m[0], mp, "CALLTOOL please");
    g.tools = (char *)tools;
    g.has_max_tokens = true;
    g.max_tokens = 5;
    CHECK(generate(D.sock, &g, &res) == 0 && is_done(res.end) && res.end->done->n_tool_calls == 0 &&
          res.len == 40);
    si_response_free(res.end);
    /* a context shift keeps the tools with the start of the prompt (the
     * fake answers "keepN " first when its answer would overrun) */
    init_chat(&g, &chat, &m[0], mp, "a question");
    g.tools = (char *)tools;
    g.has_max_tokens = true;
    g.max_tokens = 600;
    char keep[64];
    snprintf(keep, sizeof keep, "keep%zu ", strlen("tools: \nuser: ") + strlen(tools));
    CHECK(generate(D.sock, &g, &res) == 0 && is_done(res.end) && !strncmp(res.text, keep, strlen(keep)));
    si_response_free(res.end);
    /* without tools the answer's blocks are only text */
    init_chat(&g, &chat, &m[0], mp, "CALLTOOL please");
    CHECK(generate(D.sock, &g, &res) == 0 && is_done(res.end) && res.end->done->n_tool_calls == 0);
    si_response_free(res.end);

    /* the history: an assistant's call and the tool's result, with tools,
     * as the template renders them (tokenize's pieces: the fake's tokens
     * are bytes) */
    Selectinfer__ToolCall call = SELECTINFER__TOOL_CALL__INIT, *callp = &call;
    call.name = "get_weather";
    call.arguments = "{\"city\": \"Paris\"}";
    init_chat(&g, &chat, &m[0], mp, "Weather?");
    selectinfer__chat_message__init(&m[1]);
    m[1].role = "assistant";
    m[1].content = "";
    m[1].n_tool_calls = 1;
    m[1].tool_calls = &callp;
    selectinfer__chat_message__init(&m[2]);
    m[2].role = "tool";
    m[2].content = "21 C";
    mp[1] = &m[1];
    mp[2] = &m[2];
    chat.n_messages = 3;
    Selectinfer__Tokenize t = SELECTINFER__TOKENIZE__INIT;
    t.input_case = SELECTINFER__TOKENIZE__INPUT_CHAT;
    t.chat = &chat;
    t.tools = (char *)tools;
    t.has_pieces = t.pieces = true;
    Selectinfer__Request req = SELECTINFER__REQUEST__INIT;
    req.has_id = true;
    req.id = 7;
    req.body_case = SELECTINFER__REQUEST__BODY_TOKENIZE;
    req.tokenize = &t;
    si_client *c;
    REQUIRE(si_client_connect(D.sock, &c) == 0);
    Selectinfer__Response *r = NULL;
    CHECK(si_client_call(c, &req, 10000, &r) == 0 && r && r->body_case == SELECTINFER__RESPONSE__BODY_TOKENS);
    if (r && r->body_case == SELECTINFER__RESPONSE__BODY_TOKENS) {
        char text[1024];
        size_t n = 0;
        for (size_t i = 0; i < r->tokens->n_pieces && n + r->tokens->pieces[i].len < sizeof(text); i++) {
            memcpy(text + n, r->tokens->pieces[i].data, r->tokens->pieces[i].len);
            n += r->tokens->pieces[i].len;
        }
        text[n] = '\0';
        char want[512];
        snprintf(want, sizeof want, "tools: %s\nuser: Weather?\nassistant:  call:get_weather({\"city\": \"Paris\"})\n"
                 "tool: 21 C\nassistant:\n", tools);
        CHECK(!strcmp(text, want));
        if (strcmp(text, want))
            fprintf(stderr, "tokenize with tools: [%s]\n", text);
    }
    si_response_free(r);
    /* tools with a raw prompt: refused, as for generate */
    t.input_case = SELECTINFER__TOKENIZE__INPUT_PROMPT;
    t.prompt = "x";
    req.id = 8;
    r = NULL;
    CHECK(si_client_call(c, &req, 10000, &r) == 0 && error_code(r) == SELECTINFER__ERROR_CODE__INVALID_ARGUMENT);
    si_response_free(r);
    t.input_case = SELECTINFER__TOKENIZE__INPUT_CHAT;
    /* ...and a generate over that history runs */
    g.tools = (char *)tools;
    CHECK(generate(D.sock, &g, &res) == 0 && is_done(res.end));
    si_response_free(res.end);

    /* refusals: tools with a raw prompt, tools that are not an array, a
     * call without a name, too many calls, an unknown role */
    struct {
        const char *what;
        int code;
        const char *msg;
    } bad[] = {
        {"raw", SELECTINFER__ERROR_CODE__INVALID_ARGUMENT, "tools need chat input"},
        {"object", SELECTINFER__ERROR_CODE__INVALID_ARGUMENT, "tools must be a JSON array"},
        {"noname", SELECTINFER__ERROR_CODE__INVALID_ARGUMENT, "has no name"},
        {"many", SELECTINFER__ERROR_CODE__INVALID_ARGUMENT, "at most 64"},
        {"role", SELECTINFER__ERROR_CODE__INVALID_ARGUMENT, "assistant or tool"},
    };
    static Selectinfer__ToolCall *many[65];
    for (int i = 0; i < 65; i++)
        many[i] = &call;
    for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
        init_chat(&g, &chat, &m[0], mp, "x");
        g.tools = (char *)tools;
        if (!strcmp(bad[k].what, "raw")) {
            init_raw(&g, "x", 4);
            g.tools = (char *)tools;
        } else if (!strcmp(bad[k].what, "object")) {
            g.tools = "{\"type\": \"function\"}";
        } else if (!strcmp(bad[k].what, "noname")) {
            static Selectinfer__ToolCall nameless = SELECTINFER__TOOL_CALL__INIT, *np = &nameless;
            m[0].n_tool_calls = 1;
            m[0].tool_calls = &np;
        } else if (!strcmp(bad[k].what, "many")) {
            m[0].n_tool_calls = 65;
            m[0].tool_calls = many;
        } else {
            m[0].role = "function";
        }
        CHECK(generate(D.sock, &g, &res) == 0 && error_code(res.end) == bad[k].code &&
              strstr(res.end->error->message, bad[k].msg) != NULL);
        if (error_code(res.end) != bad[k].code || !strstr(res.end->error->message, bad[k].msg))
            describe_reply(bad[k].what, res.end);
        si_response_free(res.end);
    }
    /* sictl: --tools, and each call printed after the answer */
    char out[4096];
    const char *args[] = {"--socket", D.sock, "generate", "-n", "100", "--tools", tools, "CALLTOOL", NULL};
    CHECK(run_sictl(args, out, sizeof(out), NULL) == 0 &&
          strstr(out, "</tool_call>\ntool call: get_weather {\"city\": \"Paris\"}\ntool call: now {}\n") != NULL);
    const char *jargs[] = {"--socket", D.sock, "--json", "generate", "-n", "100", "--tools", tools, "CALLTOOL", NULL};
    CHECK(run_sictl(jargs, out, sizeof(out), NULL) == 0 &&
          strstr(out, "\"tool_calls\":[{\"name\":\"get_weather\",\"arguments\":\"{\\\"city\\\": \\\"Paris\\\"}\"}") != NULL);
    /* sictl chat --tools: the calls' results are asked for in turn, and
     * the model goes on with the turn and the results in the history:
     * the second request's prompt is exactly the fake template's
     * rendering of them (its tokens are bytes) */
    char in_path[] = "/tmp/si-chat-in-XXXXXX";
    int fd = mkstemp(in_path);
    static const char lines[] = "CALLTOOL please\n21 C\nnoon\n";
    CHECK(fd >= 0 && write(fd, lines, sizeof(lines) - 1) == (ssize_t)(sizeof(lines) - 1));
    close(fd);
    sictl_stdin = in_path;
    const char *cargs[] = {"--socket", D.sock, "--json", "chat", "-n", "100", "--tools", tools, NULL};
    static char cout[65536];
    CHECK(run_sictl(cargs, cout, sizeof(cout), NULL) == 0);
    sictl_stdin = NULL;
    unlink(in_path);
    char hist[1024];
    snprintf(hist, sizeof hist,
             "tools: %s\nuser: CALLTOOL please\nassistant: Checking. call:get_weather({\"city\": \"Paris\"}) "
             "call:now({})\ntool: 21 C\ntool: noon\nassistant:\n", tools);
    char want[64];
    snprintf(want, sizeof want, "\"prompt_tokens\":%zu,", strlen(hist));
    const char *first = strstr(cout, "\"prompt_tokens\":");
    CHECK(first && strstr(first + 1, want) != NULL);
    if (!first || !strstr(first + 1, want))
        fprintf(stderr, "sictl chat --tools: no second turn of %zu tokens:\n%.2000s\n", strlen(hist), cout);
    si_client_close(c);
    daemon_stop();
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: test-daemon DAEMON SICTL SCENARIO [fake]\n");
        return 1;
    }
    daemon_bin = argv[1];
    sictl_bin = argv[2];
    const char *sc = argv[3];
    fake = argc > 4 && strcmp(argv[4], "fake") == 0;
    mkprofile_bin = argc > 4 && !fake ? argv[4] : NULL;
    signal(SIGPIPE, SIG_IGN);
    if (fake) {
        snprintf(model, sizeof(model), "%s", argv[0]); /* any readable file */
        setenv("SI_FAKE_TOKEN_US", !strcmp(sc, "slow-reader") ? "200" : !strcmp(sc, "tools") ? "2000" : "20000", 0);
    } else if (!find_model()) {
        fprintf(stderr, "default model not found (%s); run scripts/fetch-model.sh\n", model);
        return 77;
    }
    signal(SIGALRM, on_watchdog);
    alarm(fake ? 110 : 570); /* meson: 120 s, 600 s */
    double t0 = now_s();
    if (!strcmp(sc, "streaming")) scenario_streaming();
    else if (!strcmp(sc, "concurrent")) scenario_concurrent();
    else if (!strcmp(sc, "overload")) scenario_overload();
    else if (!strcmp(sc, "cancel")) scenario_cancel();
    else if (!strcmp(sc, "disconnect")) scenario_disconnect();
    else if (!strcmp(sc, "garbage")) scenario_garbage();
    else if (!strcmp(sc, "slow-reader")) scenario_slow_reader();
    else if (!strcmp(sc, "connections")) scenario_connections();
    else if (!strcmp(sc, "admin")) scenario_admin();
    else if (!strcmp(sc, "lifecycle") && fake) scenario_lifecycle();
    else if (!strcmp(sc, "prefill-cancel") && fake) scenario_prefill_cancel();
    else if (!strcmp(sc, "slots") && fake) scenario_slots();
    else if (!strcmp(sc, "truncate")) scenario_truncate();
    else if (!strcmp(sc, "watchdog") && fake) scenario_watchdog();
    else if (!strcmp(sc, "tools") && fake) scenario_tools();
    else if (!strcmp(sc, "chat-template") && fake) scenario_chat_template();
    else if (!strcmp(sc, "socket-activation") && fake) scenario_socket_activation();
    else if (!strcmp(sc, "swap")) scenario_swap();
    else if (!strcmp(sc, "task-refuse")) scenario_task_refuse();
    else if (!strcmp(sc, "pick") && !fake) scenario_pick();
    else if (!strcmp(sc, "pick-exact") && !fake) scenario_pick_exact();
    else {
        fprintf(stderr, "unknown scenario '%s'\n", sc);
        return 1;
    }
    kill_leftover_daemon();
    fprintf(stderr, "%s%s: %s in %.1f s\n", sc, fake ? " (fake engine)" : "",
            failures ? "FAILED" : "passed", now_s() - t0);
    return failures ? 1 : 0;
}
