/* libselectinfer-client: talk to selectinferd from a local application.
 *
 * The messages are the protobuf-c types generated from selectinfer.proto
 * (selectinfer.pb-c.h); this library adds the socket, the framing and a few
 * blocking helpers. One si_client is one connection; it is not thread-safe
 * (use one per thread). Functions return 0 or a negative errno.
 *
 * Usage:
 *
 *     si_client *c;
 *     if (si_client_connect(NULL, &c) < 0) ...     // the default socket
 *     Selectinfer__Generate g = SELECTINFER__GENERATE__INIT;
 *     g.input_case = SELECTINFER__GENERATE__INPUT_PROMPT;
 *     g.prompt = "Once upon a time";
 *     Selectinfer__Response *end;
 *     si_client_generate(c, &g, print_chunk, NULL, -1, &end);
 *     if (end->body_case == SELECTINFER__RESPONSE__BODY_DONE) ...
 *     si_response_free(end);
 *     si_client_close(c);
 */
#ifndef SELECTINFER_CLIENT_H
#define SELECTINFER_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "selectinfer.pb-c.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SI_SOCKET_ENV "SELECTINFER_SOCKET"
#define SI_SOCKET_SYSTEM "/run/selectinfer/selectinfer.sock"
#define SI_CLIENT_MAX_REPLY (16u << 20)

typedef struct si_client si_client;

/* The socket to use when none is given: $SELECTINFER_SOCKET, else the
 * system socket when it exists or we are root, else
 * $XDG_RUNTIME_DIR/selectinfer.sock. -ENAMETOOLONG, -ENOENT (no candidate). */
int si_socket_default(char *buf, size_t cap);

/* Connects (path NULL: si_socket_default). -errno of connect(). */
int si_client_connect(const char *path, si_client **ret_client);
void si_client_close(si_client *client);
int si_client_fd(const si_client *client);

/* A fresh nonzero request id. */
uint64_t si_client_next_id(si_client *client);

/* Sends one request (its id must be set). -EPIPE when the daemon is gone. */
int si_client_send(si_client *client, const Selectinfer__Request *req);

/* Receives one reply. Returns 1 with *ret_resp set, 0 on timeout
 * (timeout_ms < 0: wait forever), -ECONNRESET when the daemon closed the
 * connection, -EPROTO for a reply that does not decode or is too large. */
int si_client_recv(si_client *client, int timeout_ms, Selectinfer__Response **ret_resp);
void si_response_free(Selectinfer__Response *resp);

/* Sends req (id assigned when 0) and waits for its terminal reply, skipping
 * replies to other requests. Returns 0 with *ret_resp set (an error reply is
 * also a success here: check body_case), or -errno (-ETIMEDOUT). */
int si_client_call(si_client *client, Selectinfer__Request *req, int timeout_ms,
                   Selectinfer__Response **ret_resp);

/* Called with each streamed piece of text. Return nonzero to cancel the
 * request: the rest still arrives (done with STOP_CANCELLED). */
typedef int (*si_chunk_cb)(void *userdata, const char *text, size_t len);

/* Runs one generate request, streaming chunks to on_chunk (may be NULL), and
 * returns its terminal reply (done or error) in *ret_end. timeout_ms bounds
 * each wait for a reply. */
int si_client_generate(si_client *client, Selectinfer__Generate *gen, si_chunk_cb on_chunk,
                       void *userdata, int timeout_ms, Selectinfer__Response **ret_end);

/* Sends a cancel for request_id (the ack arrives like any reply). */
int si_client_cancel(si_client *client, uint64_t request_id);

/* Names of the protocol's enums ("OVERLOADED", "STOP_EOS", "READY"). */
const char *si_error_code_name(int code);
const char *si_stop_reason_name(int reason);
const char *si_state_name(int state);

#ifdef __cplusplus
}
#endif

#endif
