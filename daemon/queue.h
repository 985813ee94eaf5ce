/* The fair request queue: one FIFO lane per client, served round-robin, so a
 * client that queues many requests delays each other client by at most one
 * of its requests. Not thread-safe: the server guards it with its mutex.
 * Items are intrusive (embed a sid_qitem); the queue never owns them. */
#ifndef SID_QUEUE_H
#define SID_QUEUE_H

#include <stddef.h>

typedef struct sid_lane sid_lane;

typedef struct sid_qitem {
    struct sid_qitem *next;
    sid_lane *lane; /* NULL when not queued */
} sid_qitem;

struct sid_lane {
    const void *key;
    sid_qitem *head, *tail;
    size_t n;
    sid_lane *next;
};

typedef struct sid_queue {
    sid_lane *head, *tail; /* lanes with at least one item, in serving order */
    size_t n;              /* items in all lanes */
} sid_queue;

void sid_queue_init(sid_queue *q);
/* Frees the lanes; the items are the caller's. */
void sid_queue_clear(sid_queue *q);
/* Appends item to key's lane (a new lane joins at the back). -ENOMEM. */
int sid_queue_push(sid_queue *q, const void *key, sid_qitem *item);
/* Takes the first item of the front lane, which then moves to the back. */
sid_qitem *sid_queue_pop(sid_queue *q);
/* Removes a queued item; no-op when it is not queued. */
void sid_queue_remove(sid_queue *q, sid_qitem *item);
size_t sid_queue_len(const sid_queue *q);
size_t sid_queue_lane_len(const sid_queue *q, const void *key);

#endif
