/* libselectinfer-client; see selectinfer-client.h. */
#include "selectinfer-client.h"
#include "si-frame.h"

#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

struct si_client {
    int fd;
    uint64_t next_id;
    si_frame_reader rd;
    bool eof;
};

int si_socket_default(char *buf, size_t cap)
{
    const char *env = getenv(SI_SOCKET_ENV);
    const char *path = NULL;
    char tmp[256];
    struct stat st;
    if (env && env[0]) {
        path = env;
    } else if (stat(SI_SOCKET_SYSTEM, &st) == 0 || geteuid() == 0) {
        path = SI_SOCKET_SYSTEM;
    } else {
        const char *xdg = getenv("XDG_RUNTIME_DIR");
        if (!xdg || !xdg[0])
            return -ENOENT;
        if ((size_t)snprintf(tmp, sizeof(tmp), "%s/selectinfer.sock", xdg) >= sizeof(tmp))
            return -ENAMETOOLONG;
        path = tmp;
    }
    if (strlen(path) >= cap)
        return -ENAMETOOLONG;
    memcpy(buf, path, strlen(path) + 1);
    return 0;
}

int si_client_connect(const char *path, si_client **ret_client)
{
    char def[256];
    if (!path) {
        int rc = si_socket_default(def, sizeof(def));
        if (rc < 0)
            return rc;
        path = def;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sa.sun_path))
        return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    si_client *c = calloc(1, sizeof(*c));
    if (!c) {
        close(fd);
        return -ENOMEM;
    }
    c->fd = fd;
    c->next_id = 1;
    si_frame_reader_init(&c->rd, SI_CLIENT_MAX_REPLY);
    *ret_client = c;
    return 0;
}

void si_client_close(si_client *c)
{
    if (!c)
        return;
    close(c->fd);
    si_frame_reader_clear(&c->rd);
    free(c);
}

int si_client_fd(const si_client *c)
{
    return c->fd;
}

uint64_t si_client_next_id(si_client *c)
{
    return c->next_id++;
}

int si_client_send(si_client *c, const Selectinfer__Request *req)
{
    uint8_t *buf;
    size_t len;
    int rc = si_frame_pack(&req->base, SI_FRAME_MAX_LIMIT, &buf, &len);
    if (rc < 0)
        return rc;
    size_t off = 0;
    while (off < len) {
        ssize_t w = send(c->fd, buf + off, len - off, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0) {
            rc = -errno;
            break;
        }
        off += (size_t)w;
    }
    free(buf);
    return rc;
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

int si_client_recv(si_client *c, int timeout_ms, Selectinfer__Response **ret_resp)
{
    uint64_t deadline = timeout_ms >= 0 ? mono_ms() + (uint64_t)timeout_ms : 0;
    for (;;) {
        const uint8_t *p;
        size_t len;
        int rc = si_frame_reader_next(&c->rd, &p, &len);
        if (rc < 0)
            return -EPROTO;
        if (rc == 1) {
            Selectinfer__Response *r = (Selectinfer__Response *)
                si_unpack(&selectinfer__response__descriptor, p, len, 0);
            if (!r)
                return -EPROTO;
            *ret_resp = r;
            return 1;
        }
        if (c->eof)
            return -ECONNRESET;
        int wait = -1;
        if (timeout_ms >= 0) {
            uint64_t now = mono_ms();
            if (now >= deadline)
                return 0;
            wait = (int)(deadline - now);
        }
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int pr = poll(&pfd, 1, wait);
        if (pr < 0 && errno == EINTR)
            return -EINTR;
        if (pr < 0)
            return -errno;
        if (pr == 0)
            return 0;
        char buf[65536];
        ssize_t n = recv(c->fd, buf, sizeof(buf), 0);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n < 0) {
            if (errno == ECONNRESET) {
                c->eof = true;
                continue;
            }
            return -errno;
        }
        if (n == 0) {
            c->eof = true;
            continue;
        }
        if (si_frame_reader_feed(&c->rd, buf, (size_t)n) < 0)
            return -EPROTO;
    }
}

void si_response_free(Selectinfer__Response *r)
{
    si_message_free(r ? &r->base : NULL);
}

static bool is_terminal(const Selectinfer__Response *r)
{
    return r->body_case != SELECTINFER__RESPONSE__BODY_CHUNK;
}

int si_client_call(si_client *c, Selectinfer__Request *req, int timeout_ms,
                   Selectinfer__Response **ret_resp)
{
    if (!req->has_id || req->id == 0) {
        req->has_id = true;
        req->id = si_client_next_id(c);
    }
    int rc = si_client_send(c, req);
    if (rc < 0)
        return rc;
    for (;;) {
        Selectinfer__Response *r;
        rc = si_client_recv(c, timeout_ms, &r);
        if (rc == 0)
            return -ETIMEDOUT;
        if (rc < 0)
            return rc;
        /* id 0: the daemon is closing the connection on us */
        if ((r->id == req->id || r->id == 0) && is_terminal(r)) {
            *ret_resp = r;
            return 0;
        }
        si_response_free(r);
    }
}

int si_client_cancel(si_client *c, uint64_t request_id)
{
    Selectinfer__Cancel m = SELECTINFER__CANCEL__INIT;
    m.has_request_id = true;
    m.request_id = request_id;
    Selectinfer__Request req = SELECTINFER__REQUEST__INIT;
    req.has_id = true;
    req.id = si_client_next_id(c);
    req.body_case = SELECTINFER__REQUEST__BODY_CANCEL;
    req.cancel = &m;
    return si_client_send(c, &req);
}

int si_client_generate(si_client *c, Selectinfer__Generate *gen, si_chunk_cb on_chunk,
                       void *userdata, int timeout_ms, Selectinfer__Response **ret_end)
{
    Selectinfer__Request req = SELECTINFER__REQUEST__INIT;
    req.has_id = true;
    req.id = si_client_next_id(c);
    req.body_case = SELECTINFER__REQUEST__BODY_GENERATE;
    req.generate = gen;
    int rc = si_client_send(c, &req);
    if (rc < 0)
        return rc;
    bool cancelled = false;
    for (;;) {
        Selectinfer__Response *r;
        rc = si_client_recv(c, timeout_ms, &r);
        if (rc == 0)
            return -ETIMEDOUT;
        if (rc < 0)
            return rc;
        if (r->id == req.id && r->body_case == SELECTINFER__RESPONSE__BODY_CHUNK) {
            const ProtobufCBinaryData *t = &r->chunk->text;
            if (on_chunk && !cancelled && on_chunk(userdata, (const char *)t->data, t->len)) {
                cancelled = true;
                rc = si_client_cancel(c, req.id);
                if (rc < 0) {
                    si_response_free(r);
                    return rc;
                }
            }
            si_response_free(r);
            continue;
        }
        if ((r->id == req.id || r->id == 0) && is_terminal(r)) {
            *ret_end = r;
            return 0;
        }
        si_response_free(r); /* the ack of our cancel, or another request's */
    }
}

const char *si_error_code_name(int code)
{
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value(&selectinfer__error_code__descriptor, code);
    return v ? v->name : "UNKNOWN";
}

const char *si_stop_reason_name(int reason)
{
    const ProtobufCEnumValue *v =
        protobuf_c_enum_descriptor_get_value(&selectinfer__stop_reason__descriptor, reason);
    return v ? v->name : "UNKNOWN";
}

const char *si_state_name(int state)
{
    static const char *names[] = {"unknown", "loading", "ready", "stopping", "failed"};
    return state >= 0 && state < 5 ? names[state] : "unknown";
}
