#include "queue.h"

#include <errno.h>
#include <stdlib.h>

void sid_queue_init(sid_queue *q)
{
    q->head = q->tail = NULL;
    q->n = 0;
}

void sid_queue_clear(sid_queue *q)
{
    sid_lane *l = q->head;
    while (l) {
        sid_lane *next = l->next;
        for (sid_qitem *it = l->head; it; it = it->next)
            it->lane = NULL;
        free(l);
        l = next;
    }
    sid_queue_init(q);
}

static sid_lane *find_lane(const sid_queue *q, const void *key)
{
    for (sid_lane *l = q->head; l; l = l->next)
        if (l->key == key)
            return l;
    return NULL;
}

int sid_queue_push(sid_queue *q, const void *key, sid_qitem *item)
{
    sid_lane *l = find_lane(q, key);
    if (!l) {
        l = calloc(1, sizeof(*l));
        if (!l)
            return -ENOMEM;
        l->key = key;
        if (q->tail)
            q->tail->next = l;
        else
            q->head = l;
        q->tail = l;
    }
    item->next = NULL;
    item->lane = l;
    if (l->tail)
        l->tail->next = item;
    else
        l->head = item;
    l->tail = item;
    l->n++;
    q->n++;
    return 0;
}

/* Unlinks lane l (whose predecessor is prev) from the ring. */
static void unlink_lane(sid_queue *q, sid_lane *prev, sid_lane *l)
{
    if (prev)
        prev->next = l->next;
    else
        q->head = l->next;
    if (q->tail == l)
        q->tail = prev;
    l->next = NULL;
}

sid_qitem *sid_queue_pop(sid_queue *q)
{
    sid_lane *l = q->head;
    if (!l)
        return NULL;
    sid_qitem *it = l->head;
    l->head = it->next;
    if (!l->head)
        l->tail = NULL;
    l->n--;
    q->n--;
    it->next = NULL;
    it->lane = NULL;
    unlink_lane(q, NULL, l);
    if (l->n == 0) {
        free(l);
    } else { /* served once: to the back of the line */
        if (q->tail)
            q->tail->next = l;
        else
            q->head = l;
        q->tail = l;
    }
    return it;
}

void sid_queue_remove(sid_queue *q, sid_qitem *item)
{
    sid_lane *l = item->lane;
    if (!l)
        return;
    sid_qitem *prev = NULL;
    for (sid_qitem *it = l->head; it; prev = it, it = it->next) {
        if (it != item)
            continue;
        if (prev)
            prev->next = it->next;
        else
            l->head = it->next;
        if (l->tail == it)
            l->tail = prev;
        l->n--;
        q->n--;
        break;
    }
    item->next = NULL;
    item->lane = NULL;
    if (l->n == 0) {
        sid_lane *pl = NULL;
        for (sid_lane *x = q->head; x && x != l; x = x->next)
            pl = x;
        unlink_lane(q, pl, l);
        free(l);
    }
}

size_t sid_queue_len(const sid_queue *q)
{
    return q->n;
}

size_t sid_queue_lane_len(const sid_queue *q, const void *key)
{
    const sid_lane *l = find_lane(q, key);
    return l ? l->n : 0;
}
