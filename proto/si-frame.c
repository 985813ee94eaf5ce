/* Framing and budgeted unpacking; see si-frame.h. */
#include "si-frame.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static void put_le32(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int si_frame_pack(const ProtobufCMessage *msg, size_t max_frame,
                  uint8_t **ret_buf, size_t *ret_len)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    if (n > max_frame || n > UINT32_MAX)
        return -EMSGSIZE;
    uint8_t *buf = malloc(SI_FRAME_HEADER + n);
    if (!buf)
        return -ENOMEM;
    put_le32(buf, (uint32_t)n);
    size_t w = protobuf_c_message_pack(msg, buf + SI_FRAME_HEADER);
    if (w != n) { /* cannot happen with a well-formed message */
        free(buf);
        return -EINVAL;
    }
    *ret_buf = buf;
    *ret_len = SI_FRAME_HEADER + n;
    return 0;
}

void si_frame_reader_init(si_frame_reader *r, size_t max_frame)
{
    memset(r, 0, sizeof(*r));
    r->max_frame = max_frame;
}

void si_frame_reader_clear(si_frame_reader *r)
{
    free(r->buf);
    si_frame_reader_init(r, r->max_frame);
}

size_t si_frame_reader_pending(const si_frame_reader *r)
{
    return r->len - r->start;
}

int si_frame_reader_feed(si_frame_reader *r, const void *data, size_t n)
{
    if (n == 0)
        return 0;
    /* Drop what was handed out before growing. */
    if (r->start > 0) {
        memmove(r->buf, r->buf + r->start, r->len - r->start);
        r->len -= r->start;
        r->start = 0;
    }
    /* The buffer holds at most one partial frame plus what one feed brings;
     * bound it so a peer cannot make it grow without limit. */
    size_t limit = SI_FRAME_HEADER + r->max_frame;
    if (n > SIZE_MAX - r->len || r->len + n > limit + (size_t)(4u << 20))
        return -EMSGSIZE;
    if (r->len + n > r->cap) {
        size_t cap = r->cap ? r->cap : 4096;
        while (cap < r->len + n)
            cap *= 2;
        uint8_t *nb = realloc(r->buf, cap);
        if (!nb)
            return -ENOMEM;
        r->buf = nb;
        r->cap = cap;
    }
    memcpy(r->buf + r->len, data, n);
    r->len += n;
    return 0;
}

int si_frame_reader_next(si_frame_reader *r, const uint8_t **ret_payload, size_t *ret_len)
{
    size_t avail = r->len - r->start;
    if (avail < SI_FRAME_HEADER)
        return 0;
    uint32_t n = get_le32(r->buf + r->start);
    if (n > r->max_frame)
        return -EMSGSIZE;
    if (avail - SI_FRAME_HEADER < n)
        return 0;
    *ret_payload = r->buf + r->start + SI_FRAME_HEADER;
    *ret_len = n;
    r->start += SI_FRAME_HEADER + n;
    return 1;
}

/* ---- the budgeted allocator ---------------------------------------------
 * Each block carries its size in a header so that the budget can be charged
 * and the block freed without the allocator's state (free_unpacked runs
 * long after unpack, with a stateless allocator). */

typedef struct budget {
    size_t left;
} budget;

typedef union block_hdr {
    size_t size;
    max_align_t align;
} block_hdr;

static void *budget_alloc(void *data, size_t size)
{
    budget *b = data;
    if (size > SIZE_MAX - sizeof(block_hdr))
        return NULL;
    size_t total = sizeof(block_hdr) + size;
    if (b && total > b->left)
        return NULL;
    block_hdr *h = malloc(total);
    if (!h)
        return NULL;
    h->size = total;
    if (b)
        b->left -= total;
    return h + 1;
}

static void budget_free(void *data, void *ptr)
{
    if (!ptr)
        return;
    block_hdr *h = (block_hdr *)ptr - 1;
    budget *b = data;
    if (b)
        b->left += h->size;
    free(h);
}

ProtobufCMessage *si_unpack(const ProtobufCMessageDescriptor *desc,
                            const uint8_t *payload, size_t len, size_t limit)
{
    if (limit == 0)
        limit = (len > (SIZE_MAX - 65536) / 16) ? SIZE_MAX : 16 * len + 65536;
    budget b = {.left = limit};
    ProtobufCAllocator a = {.alloc = budget_alloc, .free = budget_free, .allocator_data = &b};
    /* protobuf-c wants a non-NULL pointer even for an empty message */
    static const uint8_t empty[1];
    return protobuf_c_message_unpack(desc, &a, len, len ? payload : empty);
}

void si_message_free(ProtobufCMessage *msg)
{
    ProtobufCAllocator a = {.alloc = budget_alloc, .free = budget_free, .allocator_data = NULL};
    if (msg)
        protobuf_c_message_free_unpacked(msg, &a);
}
