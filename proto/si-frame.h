/* Framing of the SelectInfer wire protocol, shared by the daemon and the
 * client library.
 *
 * A frame is a 4-byte little-endian length N followed by N bytes of one
 * serialized protobuf message (see selectinfer.proto). The reader checks N
 * against a cap before it buffers the payload, and messages are unpacked
 * through an allocator with a byte budget, so a hostile peer can make us
 * spend at most a bounded amount of memory per frame.
 *
 * Usage (receiving):
 *
 *     si_frame_reader r;
 *     si_frame_reader_init(&r, SI_FRAME_MAX_DEFAULT);
 *     si_frame_reader_feed(&r, data, n);             // bytes off the socket
 *     const uint8_t *p; size_t len;
 *     while ((rc = si_frame_reader_next(&r, &p, &len)) == 1) {
 *         Selectinfer__Request *req = (Selectinfer__Request *)
 *             si_unpack(&selectinfer__request__descriptor, p, len, 0);
 *         ...
 *         si_message_free(&req->base);
 *     }
 *     if (rc < 0) ...                                 // -EMSGSIZE: close
 *     si_frame_reader_clear(&r);
 */
#ifndef SI_FRAME_H
#define SI_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SI_FRAME_HEADER 4u
#define SI_FRAME_MAX_DEFAULT (1u << 20) /* 1 MiB */
#define SI_FRAME_MAX_LIMIT (64u << 20)  /* the largest cap a daemon accepts */
#define SI_PROTOCOL_VERSION 1u

/* Packs msg into a new buffer holding the 4-byte length and the message.
 * -EMSGSIZE when the message exceeds max_frame, -ENOMEM. The caller frees
 * *ret_buf with free(). */
int si_frame_pack(const ProtobufCMessage *msg, size_t max_frame,
                  uint8_t **ret_buf, size_t *ret_len);

typedef struct si_frame_reader {
    uint8_t *buf;
    size_t len;      /* bytes buffered */
    size_t start;    /* first byte not yet handed out */
    size_t cap;      /* bytes allocated */
    size_t max_frame;
} si_frame_reader;

void si_frame_reader_init(si_frame_reader *r, size_t max_frame);
void si_frame_reader_clear(si_frame_reader *r);

/* Appends bytes received from the peer. -ENOMEM, or -EMSGSIZE when the
 * buffered bytes could never form frames within the cap. */
int si_frame_reader_feed(si_frame_reader *r, const void *data, size_t n);

/* Hands out the next complete frame's payload: returns 1 and sets
 * *ret_payload / *ret_len (valid until the next feed or next call), 0 when
 * more bytes are needed, -EMSGSIZE when the next frame announces more than
 * max_frame bytes (the stream cannot be resynchronised: close it). */
int si_frame_reader_next(si_frame_reader *r, const uint8_t **ret_payload, size_t *ret_len);

/* Bytes buffered that do not yet form a complete frame. */
size_t si_frame_reader_pending(const si_frame_reader *r);

/* Unpacks one message through an allocator with a byte budget: at most
 * budget bytes of heap (0: 16 bytes per payload byte plus 64 KiB, which a
 * well-formed message never needs). NULL when the payload does not decode
 * or would need more. Free the result with si_message_free(). */
ProtobufCMessage *si_unpack(const ProtobufCMessageDescriptor *desc,
                            const uint8_t *payload, size_t len, size_t budget);
void si_message_free(ProtobufCMessage *msg);

#ifdef __cplusplus
}
#endif

#endif /* SI_FRAME_H */
