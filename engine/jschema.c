/* JSON Schema output (jschema.h): the schema's text parsed into a small
 * tree of JSON values, compiled into value nodes, and the recognizer that
 * walks them byte by byte. */
#include "jschema.h"
#include "utf8.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the schema's text as JSON values ---- */

enum { V_NULL, V_TRUE, V_FALSE, V_NUM, V_STR, V_ARR, V_OBJ };

#define V_MAX 8192      /* values in a schema */

/* A growing byte buffer: decoded strings, alternatives' texts. */
typedef struct jbuf {
    char *p;
    size_t n, cap;
} jbuf;

/* Appends bytes; *off (when not NULL) receives where they start. */
static int jbuf_put(jbuf *b, const char *bytes, size_t n, uint32_t *off)
{
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->n + n)
            cap *= 2;
        char *nb = realloc(b->p, cap);
        if (!nb)
            return -ENOMEM;
        b->p = nb;
        b->cap = cap;
    }
    memcpy(b->p + b->n, bytes, n);
    if (off)
        *off = (uint32_t)b->n;
    b->n += n;
    return 0;
}
#define V_DEPTH 64

typedef struct jv {
    uint8_t t;
    double num;
    uint32_t off, len;  /* V_STR: decoded bytes in the string arena */
    uint32_t koff, klen; /* a member of an object: its key */
    int kid, next;      /* V_ARR, V_OBJ: first element / member; the next sibling */
} jv;

typedef struct parser {
    const char *p, *end;
    jv *v;
    int n;
    jbuf sb;            /* decoded strings */
    char *msg;
    size_t cap;
} parser;

static int fail(parser *ps, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    if (ps->cap)
        vsnprintf(ps->msg, ps->cap, fmt, ap);
    va_end(ap);
    return err;
}

static void skip_ws(parser *ps)
{
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
        ps->p++;
}

/* The value of four hex digits at p, or -1 at the first that is not one
 * (a sentinel summed into v instead overflowed on two bad digits and could
 * come out as a positive "code point"). */
static int hex4(const char *p)
{
    int v = 0;
    for (int i = 0; i < 4; i++) {
        const char c = p[i];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* A string at ps->p ('"'), decoded into the arena: *off, *len. */
static int parse_str(parser *ps, uint32_t *off, uint32_t *len)
{
    ps->p++;
    const size_t start = ps->sb.n;
    for (;;) {
        if (ps->p >= ps->end)
            return fail(ps, -EINVAL, "the schema ends inside a string");
        unsigned char c = (unsigned char)*ps->p++;
        int r = 0;
        if (c == '"')
            break;
        if (c < 0x20)
            return fail(ps, -EINVAL, "a control byte in a string of the schema");
        if (c != '\\') {
            r = jbuf_put(&ps->sb, (const char *)&c, 1, NULL);
        } else {
            if (ps->p >= ps->end)
                return fail(ps, -EINVAL, "the schema ends inside a string");
            const char e = *ps->p++;
            const char *simple = strchr("\"\\/bfnrt", e);
            if (e && simple) {
                static const char out[] = "\"\\/\b\f\n\r\t";
                r = jbuf_put(&ps->sb, &out[simple - "\"\\/bfnrt"], 1, NULL);
            } else if (e == 'u' && ps->end - ps->p >= 4 && hex4(ps->p) >= 0) {
                unsigned cp = (unsigned)hex4(ps->p);
                ps->p += 4;
                /* a surrogate pair makes one character */
                if (cp >= 0xd800 && cp < 0xdc00 && ps->end - ps->p >= 6 && ps->p[0] == '\\' &&
                    ps->p[1] == 'u' && hex4(ps->p + 2) >= 0xdc00 && hex4(ps->p + 2) < 0xe000) {
                    cp = 0x10000 + ((cp - 0xd800) << 10) + ((unsigned)hex4(ps->p + 2) - 0xdc00);
                    ps->p += 6;
                }
                char u[4];
                const size_t n = eng__utf8_encode(cp, u);
                r = jbuf_put(&ps->sb, u, n, NULL);
            } else {
                return fail(ps, -EINVAL, "a bad escape in a string of the schema");
            }
        }
        if (r < 0)
            return r;
    }
    *off = (uint32_t)start;
    *len = (uint32_t)(ps->sb.n - start);
    return 0;
}

static int parse_value(parser *ps, int depth);

/* Appends a value and returns its index. */
static int new_value(parser *ps, uint8_t t)
{
    if (ps->n == V_MAX)
        return fail(ps, -ENOTSUP, "the schema has more than %d values", V_MAX);
    jv *v = &ps->v[ps->n];
    memset(v, 0, sizeof(*v));
    v->t = t;
    v->kid = v->next = -1;
    return ps->n++;
}

static int parse_value(parser *ps, int depth)
{
    skip_ws(ps);
    if (ps->p >= ps->end)
        return fail(ps, -EINVAL, "the schema ends where a value is due");
    if (depth > V_DEPTH)
        return fail(ps, -ENOTSUP, "the schema nests deeper than %d", V_DEPTH);
    const char c = *ps->p;
    int i, r;
    if (c == '{' || c == '[') {
        const bool obj = c == '{';
        if ((i = new_value(ps, obj ? V_OBJ : V_ARR)) < 0)
            return i;
        ps->p++;
        skip_ws(ps);
        if (ps->p < ps->end && *ps->p == (obj ? '}' : ']')) {
            ps->p++;
            return i;
        }
        int last = -1;
        for (;;) {
            uint32_t koff = 0, klen = 0;
            if (obj) {
                skip_ws(ps);
                if (ps->p >= ps->end || *ps->p != '"')
                    return fail(ps, -EINVAL, "a key is due in an object of the schema");
                if ((r = parse_str(ps, &koff, &klen)) < 0)
                    return r;
                skip_ws(ps);
                if (ps->p >= ps->end || *ps->p++ != ':')
                    return fail(ps, -EINVAL, "':' is due after a key of the schema");
            }
            int k = parse_value(ps, depth + 1);
            if (k < 0)
                return k;
            ps->v[k].koff = koff;
            ps->v[k].klen = klen;
            if (last < 0)
                ps->v[i].kid = k;
            else
                ps->v[last].next = k;
            last = k;
            skip_ws(ps);
            if (ps->p < ps->end && *ps->p == ',') {
                ps->p++;
                continue;
            }
            if (ps->p < ps->end && *ps->p == (obj ? '}' : ']')) {
                ps->p++;
                return i;
            }
            return fail(ps, -EINVAL, "',' or '%c' is due in the schema", obj ? '}' : ']');
        }
    }
    if (c == '"') {
        if ((i = new_value(ps, V_STR)) < 0)
            return i;
        uint32_t off, len;
        if ((r = parse_str(ps, &off, &len)) < 0)
            return r;
        ps->v[i].off = off;
        ps->v[i].len = len;
        return i;
    }
    static const char *const lits[3] = {"true", "false", "null"};
    static const uint8_t lit_t[3] = {V_TRUE, V_FALSE, V_NULL};
    for (int l = 0; l < 3; l++) {
        const size_t n = strlen(lits[l]);
        if ((size_t)(ps->end - ps->p) >= n && !memcmp(ps->p, lits[l], n)) {
            ps->p += n;
            return new_value(ps, lit_t[l]);
        }
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
        char buf[64];
        size_t n = 0;
        while (ps->p + n < ps->end && n < sizeof(buf) - 1 && strchr("+-.0123456789eE", ps->p[n]))
            n++;
        memcpy(buf, ps->p, n);
        buf[n] = 0;
        char *e;
        const double d = strtod(buf, &e);
        if (e != buf + n)
            return fail(ps, -EINVAL, "a bad number in the schema");
        ps->p += n;
        if ((i = new_value(ps, V_NUM)) < 0)
            return i;
        ps->v[i].num = d;
        return i;
    }
    return fail(ps, -EINVAL, "the schema is not JSON");
}

/* The member of object o named key, or -1. */
static int member(const parser *ps, int o, const char *key)
{
    if (o < 0 || ps->v[o].t != V_OBJ)
        return -1;
    const size_t n = strlen(key);
    for (int k = ps->v[o].kid; k >= 0; k = ps->v[k].next)
        if (ps->v[k].klen == n && !memcmp(ps->sb.p + ps->v[k].koff, key, n))
            return k;
    return -1;
}

/* ---- compiled nodes ---- */

enum { N_STRING, N_NUMBER, N_INTEGER, N_LIT, N_OBJECT, N_ARRAY, N_UNION };

#define NODE_MAX 2048
#define ALT_MAX 8192

/* The classes of a value's first byte: alternatives of a union must not
 * share one. */
enum { C_STR = 1, C_NUM = 2, C_OBJ = 4, C_ARR = 8, C_BOOL = 16, C_NULL = 32 };

typedef struct js_node {
    uint8_t type;
    uint8_t cls;          /* first-byte classes */
    uint16_t items;       /* N_ARRAY */
    uint32_t first, n;    /* N_OBJECT, N_LIT: alternatives; N_UNION: kids */
    uint32_t min_items, max_items;
} js_node;

/* An object's property (key: its JSON text, quotes included) or a literal
 * of N_LIT (its JSON text). */
typedef struct js_alt {
    uint32_t off, len;
    uint16_t node;
    bool required;
} js_alt;

struct eng__jschema {
    js_node node[NODE_MAX];
    js_alt alt[ALT_MAX];
    uint16_t kid[NODE_MAX];
    int n_node, n_alt, n_kid;
    jbuf text;            /* alternatives' bytes */
    uint16_t root;
};

typedef struct compiler {
    parser *ps;
    eng__jschema *s;
    int root;             /* the schema's root value (for $ref) */
} compiler;

static int text_put(compiler *c, const char *b, size_t n, uint32_t *off)
{
    return jbuf_put(&c->s->text, b, n, off);
}

/* A string's JSON text as a model must write it: quoted, '"' '\' and
 * control bytes escaped the short way where there is one. */
static int put_json_string(compiler *c, const char *b, size_t n, uint32_t *off, uint32_t *len)
{
    const size_t start = c->s->text.n;
    uint32_t o;
    int r = text_put(c, "\"", 1, off);
    for (size_t i = 0; r == 0 && i < n; i++) {
        const unsigned char ch = (unsigned char)b[i];
        char esc[8];
        if (ch == '"' || ch == '\\')
            r = text_put(c, (char[2]){'\\', (char)ch}, 2, &o);
        else if (ch == '\n' || ch == '\t' || ch == '\r' || ch == '\b' || ch == '\f')
            r = text_put(c, (char[2]){'\\', ch == '\n' ? 'n' : ch == '\t' ? 't' : ch == '\r' ? 'r' : ch == '\b' ? 'b' : 'f'},
                         2, &o);
        else if (ch < 0x20)
            r = text_put(c, esc, (size_t)snprintf(esc, sizeof(esc), "\\u%04x", ch), &o);
        else
            r = text_put(c, (const char *)&ch, 1, &o);
    }
    if (r == 0)
        r = text_put(c, "\"", 1, &o);
    *len = (uint32_t)(c->s->text.n - start);
    return r;
}

static int new_node(compiler *c, uint8_t type, uint8_t cls)
{
    if (c->s->n_node == NODE_MAX)
        return fail(c->ps, -ENOTSUP, "the schema makes more than %d nodes", NODE_MAX);
    js_node *n = &c->s->node[c->s->n_node];
    memset(n, 0, sizeof(*n));
    n->type = type;
    n->cls = cls;
    return c->s->n_node++;
}

static int new_alt(compiler *c)
{
    if (c->s->n_alt == ALT_MAX)
        return fail(c->ps, -ENOTSUP, "the schema has more than %d keys and values", ALT_MAX);
    memset(&c->s->alt[c->s->n_alt], 0, sizeof(js_alt));
    return c->s->n_alt++;
}

static int compile(compiler *c, int v, int depth);

/* enum / const values: their JSON texts as literal alternatives. */
static int compile_lits(compiler *c, const int *vals, int n)
{
    parser *ps = c->ps;
    if (n == 0)
        return fail(ps, -EINVAL, "an empty enum");
    if (n > ENG__JS_ALT_MAX)
        return fail(ps, -ENOTSUP, "an enum of more than %d values", ENG__JS_ALT_MAX);
    int node = new_node(c, N_LIT, 0);
    if (node < 0)
        return node;
    c->s->node[node].first = (uint32_t)c->s->n_alt;
    c->s->node[node].n = (uint32_t)n;
    for (int i = 0; i < n; i++) {
        const jv *x = &ps->v[vals[i]];
        int a = new_alt(c), r = 0;
        if (a < 0)
            return a;
        js_alt *al = &c->s->alt[a];
        if (x->t == V_STR) {
            r = put_json_string(c, ps->sb.p + x->off, x->len, &al->off, &al->len);
            c->s->node[node].cls |= C_STR;
        } else if (x->t == V_TRUE || x->t == V_FALSE || x->t == V_NULL) {
            const char *t = x->t == V_TRUE ? "true" : x->t == V_FALSE ? "false" : "null";
            al->len = (uint32_t)strlen(t);
            r = text_put(c, t, al->len, &al->off);
            c->s->node[node].cls |= x->t == V_NULL ? C_NULL : C_BOOL;
        } else {
            return fail(ps, -ENOTSUP, "enum and const values must be strings, true, false or null");
        }
        if (r < 0)
            return r;
    }
    return node;
}

/* A union of kids whose first bytes differ. */
static int make_union(compiler *c, const int *kids, int n)
{
    if (n == 1)
        return kids[0];
    int node = new_node(c, N_UNION, 0);
    if (node < 0)
        return node;
    if (c->s->n_kid + n > NODE_MAX)
        return fail(c->ps, -ENOTSUP, "the schema has too many alternatives");
    js_node *u = &c->s->node[node];
    u->first = (uint32_t)c->s->n_kid;
    u->n = (uint32_t)n;
    for (int i = 0; i < n; i++) {
        const uint8_t k = c->s->node[kids[i]].cls;
        if (u->cls & k)
            return fail(c->ps, -ENOTSUP,
                        "anyOf or type alternatives that begin alike (two strings, two numbers, two "
                        "objects, ...) are not supported");
        u->cls |= k;
        c->s->kid[c->s->n_kid++] = (uint16_t)kids[i];
    }
    return node;
}

/* A non-negative integer member of schema v, or def. */
static int count_member(compiler *c, int v, const char *key, uint32_t def, uint32_t *ret)
{
    const int m = member(c->ps, v, key);
    *ret = def;
    if (m < 0)
        return 0;
    const double d = c->ps->v[m].num;
    /* the range first: converting a double past UINT32_MAX is undefined */
    if (c->ps->v[m].t != V_NUM || !(d >= 0 && d <= (double)UINT32_MAX) || d != (double)(uint32_t)d)
        return fail(c->ps, -EINVAL, "%s must be a non-negative integer", key);
    *ret = (uint32_t)d;
    return 0;
}

/* Schema v read as one type (its "type", or one entry of a list). */
static int compile_type(compiler *c, int v, const char *type, int depth)
{
    parser *ps = c->ps;
    if (!strcmp(type, "string"))
        return new_node(c, N_STRING, C_STR);
    if (!strcmp(type, "number"))
        return new_node(c, N_NUMBER, C_NUM);
    if (!strcmp(type, "integer"))
        return new_node(c, N_INTEGER, C_NUM);
    if (!strcmp(type, "boolean") || !strcmp(type, "null")) {
        /* their values as literals, as an enum of them would be */
        const bool b = type[0] == 'b';
        int lits[2];
        for (int i = 0; i < (b ? 2 : 1); i++)
            if ((lits[i] = new_value(ps, b ? (i == 0 ? V_TRUE : V_FALSE) : V_NULL)) < 0)
                return lits[i];
        return compile_lits(c, lits, b ? 2 : 1);
    }
    if (!strcmp(type, "array")) {
        const int items = member(ps, v, "items");
        if (items < 0 || ps->v[items].t != V_OBJ)
            return fail(ps, -ENOTSUP, "an array needs an items schema");
        int node = new_node(c, N_ARRAY, C_ARR);
        if (node < 0)
            return node;
        uint32_t mn, mx;
        int r = count_member(c, v, "minItems", 0, &mn);
        if (r == 0)
            r = count_member(c, v, "maxItems", UINT16_MAX, &mx);
        if (r < 0)
            return r;
        if (mx > UINT16_MAX || mn > mx)
            return fail(ps, -ENOTSUP, "minItems %u and maxItems %u: at most %u items", mn, mx, UINT16_MAX);
        const int k = compile(c, items, depth + 1);
        if (k < 0)
            return k;
        js_node *n = &c->s->node[node];
        n->items = (uint16_t)k;
        n->min_items = mn;
        n->max_items = mx;
        return node;
    }
    if (!strcmp(type, "object")) {
        const int props = member(ps, v, "properties"), req = member(ps, v, "required"),
                  add = member(ps, v, "additionalProperties");
        if (props < 0 || ps->v[props].t != V_OBJ)
            return fail(ps, -ENOTSUP, "an object needs properties (any object is not supported)");
        if (add >= 0 && ps->v[add].t != V_FALSE)
            return fail(ps, -ENOTSUP, "additionalProperties other than false");
        if (req >= 0 && ps->v[req].t != V_ARR)
            return fail(ps, -EINVAL, "required must be an array");
        int np = 0;
        for (int k = ps->v[props].kid; k >= 0; k = ps->v[k].next)
            np++;
        if (np > ENG__JS_ALT_MAX)
            return fail(ps, -ENOTSUP, "an object of more than %d properties", ENG__JS_ALT_MAX);
        /* every required name is a property */
        for (int q = req >= 0 ? ps->v[req].kid : -1; q >= 0; q = ps->v[q].next) {
            bool found = false;
            for (int k = ps->v[props].kid; k >= 0 && !found; k = ps->v[k].next)
                found = ps->v[q].t == V_STR && ps->v[k].klen == ps->v[q].len &&
                        !memcmp(ps->sb.p + ps->v[k].koff, ps->sb.p + ps->v[q].off, ps->v[q].len);
            if (!found)
                return fail(ps, -ENOTSUP, "a required name that is not among the properties");
        }
        int node = new_node(c, N_OBJECT, C_OBJ);
        if (node < 0)
            return node;
        /* the alternatives first, contiguous; then the children */
        const uint32_t first = (uint32_t)c->s->n_alt;
        for (int k = ps->v[props].kid; k >= 0; k = ps->v[k].next) {
            int a = new_alt(c);
            if (a < 0)
                return a;
            js_alt *al = &c->s->alt[a];
            int r = put_json_string(c, ps->sb.p + ps->v[k].koff, ps->v[k].klen, &al->off, &al->len);
            if (r < 0)
                return r;
            for (int q = req >= 0 ? ps->v[req].kid : -1; q >= 0; q = ps->v[q].next)
                al->required |= ps->v[q].len == ps->v[k].klen &&
                                !memcmp(ps->sb.p + ps->v[q].off, ps->sb.p + ps->v[k].koff, ps->v[k].klen);
        }
        c->s->node[node].first = first;
        c->s->node[node].n = (uint32_t)np;
        uint32_t a = first;
        for (int k = ps->v[props].kid; k >= 0; k = ps->v[k].next, a++) {
            if (ps->v[k].t != V_OBJ)
                return fail(ps, -ENOTSUP, "a property's schema must be an object");
            const int kn = compile(c, k, depth + 1);
            if (kn < 0)
                return kn;
            c->s->alt[a].node = (uint16_t)kn;
        }
        return node;
    }
    return fail(ps, -EINVAL, "unknown type \"%s\"", type);
}

static int compile(compiler *c, int v, int depth)
{
    parser *ps = c->ps;
    if (depth > ENG__JSON_DEPTH)
        return fail(ps, -ENOTSUP, "the schema nests deeper than %d (or refers to itself)", ENG__JSON_DEPTH);
    if (ps->v[v].t != V_OBJ)
        return fail(ps, -ENOTSUP, "a schema must be an object (true and false are not supported)");
    static const char *const refused[] = {"allOf", "not", "if", "then", "else", "patternProperties",
                                          "prefixItems", "contains", "dependentRequired",
                                          "dependentSchemas", "unevaluatedProperties",
                                          "unevaluatedItems", "propertyNames", "additionalItems"};
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++)
        if (member(ps, v, refused[i]) >= 0)
            return fail(ps, -ENOTSUP, "the keyword %s is not supported", refused[i]);
    const int ref = member(ps, v, "$ref");
    if (ref >= 0) {
        const char *const prefixes[2] = {"#/$defs/", "#/definitions/"}, *const keys[2] = {"$defs", "definitions"};
        for (int i = 0; i < 2 && ps->v[ref].t == V_STR; i++) {
            const size_t pl = strlen(prefixes[i]);
            if (ps->v[ref].len <= pl || memcmp(ps->sb.p + ps->v[ref].off, prefixes[i], pl))
                continue;
            const int defs = member(ps, c->root, keys[i]);
            char name[256];
            const size_t nl = ps->v[ref].len - pl;
            if (nl >= sizeof(name))
                break;
            memcpy(name, ps->sb.p + ps->v[ref].off + pl, nl);
            name[nl] = 0;
            const int target = member(ps, defs, name);
            if (target < 0)
                return fail(ps, -EINVAL, "$ref %s: no such definition", name);
            return compile(c, target, depth + 1);
        }
        return fail(ps, -ENOTSUP, "$ref other than #/$defs/NAME or #/definitions/NAME");
    }
    int vals[ENG__JS_ALT_MAX + 1], n = 0;
    const int en = member(ps, v, "enum"), cn = member(ps, v, "const");
    if (en >= 0) {
        if (ps->v[en].t != V_ARR)
            return fail(ps, -EINVAL, "enum must be an array");
        for (int k = ps->v[en].kid; k >= 0 && n <= ENG__JS_ALT_MAX; k = ps->v[k].next)
            vals[n++] = k;
        return compile_lits(c, vals, n);
    }
    if (cn >= 0)
        return compile_lits(c, &cn, 1);
    const int any = member(ps, v, "anyOf") >= 0 ? member(ps, v, "anyOf") : member(ps, v, "oneOf");
    if (any >= 0) {
        if (ps->v[any].t != V_ARR || ps->v[any].kid < 0)
            return fail(ps, -EINVAL, "anyOf and oneOf take a non-empty array");
        int kids[8];
        for (int k = ps->v[any].kid; k >= 0; k = ps->v[k].next) {
            if (n == 8)
                return fail(ps, -ENOTSUP, "more than 8 alternatives");
            if ((kids[n++] = compile(c, k, depth + 1)) < 0)
                return kids[n - 1];
        }
        return make_union(c, kids, n);
    }
    const int type = member(ps, v, "type");
    if (type < 0)
        return fail(ps, -ENOTSUP, "a schema without type, enum, const, anyOf or $ref (any value) "
                                  "is not supported");
    char tname[32];
    if (ps->v[type].t == V_STR) {
        snprintf(tname, sizeof(tname), "%.*s", (int)ps->v[type].len, ps->sb.p + ps->v[type].off);
        return compile_type(c, v, tname, depth);
    }
    if (ps->v[type].t != V_ARR || ps->v[type].kid < 0)
        return fail(ps, -EINVAL, "type must be a name or a non-empty array of names");
    int kids[8];
    for (int k = ps->v[type].kid; k >= 0; k = ps->v[k].next) {
        if (n == 8 || ps->v[k].t != V_STR)
            return fail(ps, -EINVAL, "type must be a name or an array of at most 8 names");
        snprintf(tname, sizeof(tname), "%.*s", (int)ps->v[k].len, ps->sb.p + ps->v[k].off);
        if ((kids[n++] = compile_type(c, v, tname, depth)) < 0)
            return kids[n - 1];
    }
    return make_union(c, kids, n);
}

int eng__jschema_compile(const char *text, size_t len, eng__jschema **ret, char *msg, size_t cap)
{
    if (cap)
        msg[0] = 0;
    *ret = NULL;
    parser ps = {.p = text, .end = text + len, .msg = msg, .cap = cap};
    if (!text || len > ENG__JS_TEXT_MAX)
        return fail(&ps, -EINVAL, "a schema of at most %u bytes", ENG__JS_TEXT_MAX);
    eng__jschema *s = calloc(1, sizeof(*s));
    ps.v = malloc(V_MAX * sizeof(jv));
    int r = s && ps.v ? 0 : -ENOMEM;
    int root = r == 0 ? parse_value(&ps, 0) : r;
    if (root >= 0) {
        skip_ws(&ps);
        if (ps.p != ps.end)
            root = fail(&ps, -EINVAL, "bytes after the schema");
    }
    if (root >= 0) {
        compiler c = {.ps = &ps, .s = s, .root = root};
        r = compile(&c, root, 0);
        if (r >= 0 && s->node[r].type != N_OBJECT && s->node[r].type != N_ARRAY)
            r = fail(&ps, -ENOTSUP, "the schema's root must be an object or an array");
        if (r >= 0)
            s->root = (uint16_t)r;
    } else {
        r = root;
    }
    free(ps.v);
    free(ps.sb.p);
    if (r < 0) {
        eng__jschema_free(s);
        return r;
    }
    *ret = s;
    return 0;
}

void eng__jschema_free(eng__jschema *s)
{
    if (s)
        free(s->text.p);
    free(s);
}

/* ---- the recognizer ---- */

enum {
    S_VALUE,     /* a value of r->node: whitespace, its first byte */
    S_OBJ_FIRST, /* after '{': a key or '}' */
    S_OBJ_KEY,   /* after ',' in an object: a key */
    S_KEY,       /* in a key: r->alive over properties from r->base */
    S_COLON,     /* after a key: ':' */
    S_ARR_FIRST, /* after '[': an item or ']' */
    S_AFTER,     /* after a value in a container: ',' or its closer */
    S_STR, S_ESC, S_HEX,
    S_MINUS, S_ZERO, S_INT, S_FRAC0, S_FRAC, S_EXP0, S_EXPS, S_EXP,
    S_LIT,       /* in an enum value or literal: r->alive over r->base.. */
    S_DONE,
};

void eng__jsr_init(eng__jsr *r, const eng__jschema *s)
{
    memset(r, 0, sizeof(*r));
    r->s = s;
    r->st = S_VALUE;
    r->node = s->root;
}

bool eng__jsr_done(const eng__jsr *r)
{
    return r->st == S_DONE;
}

static bool ws_byte(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static uint8_t class_of(unsigned char c)
{
    return c == '"' ? C_STR : c == '-' || digit(c) ? C_NUM : c == '{' ? C_OBJ : c == '[' ? C_ARR
           : c == 't' || c == 'f' ? C_BOOL : c == 'n' ? C_NULL : 0;
}

/* A value ended: the container's turn, or the end of the document. */
static void value_end(eng__jsr *r)
{
    r->st = r->depth == 0 ? S_DONE : S_AFTER;
}

/* Alternatives [first, first + n) of the schema whose next byte (at pos)
 * is c, among alive (bit i: first + i). */
static uint64_t match(const eng__jschema *s, uint32_t first, uint64_t alive, uint16_t pos, unsigned char c,
                      bool *complete)
{
    uint64_t out = 0;
    *complete = false;
    for (int i = 0; i < 64 && alive >> i; i++) {
        if (!(alive >> i & 1))
            continue;
        const js_alt *a = &s->alt[first + (uint32_t)i];
        if (pos < a->len && (unsigned char)s->text.p[a->off + pos] == c) {
            out |= (uint64_t)1 << i;
            *complete |= pos + 1u == a->len;
        }
    }
    return out;
}

static int value_start(eng__jsr *r, unsigned char c)
{
    const eng__jschema *s = r->s;
    const js_node *n = &s->node[r->node];
    while (n->type == N_UNION) {
        const uint8_t k = class_of(c);
        uint32_t i = 0;
        while (i < n->n && !(s->node[s->kid[n->first + i]].cls & k))
            i++;
        if (i == n->n)
            return -EILSEQ;
        r->node = s->kid[n->first + i];
        n = &s->node[r->node];
    }
    switch (n->type) {
    case N_STRING:
        if (c != '"')
            return -EILSEQ;
        r->st = S_STR;
        return 0;
    case N_NUMBER:
    case N_INTEGER:
        if (c == '-')
            r->st = S_MINUS;
        else if (c == '0')
            r->st = S_ZERO;
        else if (digit(c))
            r->st = S_INT;
        else
            return -EILSEQ;
        return 0;
    case N_LIT: {
        bool complete;
        r->base = n->first;
        r->alive = match(s, n->first, n->n == 64 ? ~(uint64_t)0 : ((uint64_t)1 << n->n) - 1, 0, c, &complete);
        r->pos = 1;
        r->st = S_LIT;
        return r->alive ? 0 : -EILSEQ;
    }
    case N_OBJECT:
    case N_ARRAY:
        if (c != (n->type == N_OBJECT ? '{' : '[') || r->depth == ENG__JSON_DEPTH)
            return -EILSEQ;
        r->fr[r->depth].node = r->node;
        r->fr[r->depth].idx = 0;
        r->depth++;
        r->st = n->type == N_OBJECT ? S_OBJ_FIRST : S_ARR_FIRST;
        return 0;
    }
    return -EILSEQ;
}

/* Whether an object may close with its next property at idx: none of
 * those left is required. */
static bool may_close(const eng__jschema *s, const js_node *n, uint32_t idx)
{
    for (uint32_t i = idx; i < n->n; i++)
        if (s->alt[n->first + i].required)
            return false;
    return true;
}

/* The start of a key: the properties from idx up to the first required
 * one may come (the order is the schema's; a required one cannot be
 * skipped). */
static int key_start(eng__jsr *r, const js_node *n, uint32_t idx)
{
    if (idx >= n->n)
        return -EILSEQ;
    uint64_t alive = 0;
    for (uint32_t i = idx; i < n->n; i++) {
        alive |= (uint64_t)1 << (i - idx);
        if (r->s->alt[n->first + i].required)
            break;
    }
    bool complete;
    r->base = n->first + idx;
    r->alive = match(r->s, r->base, alive, 0, '"', &complete);
    r->pos = 1;
    r->st = S_KEY;
    return r->alive ? 0 : -EILSEQ;
}

/* A number's byte; a byte that ends it is handed back (*again). */
static int number_byte(eng__jsr *r, unsigned char c, bool *again)
{
    const bool integer = r->s->node[r->node].type == N_INTEGER;
    *again = false;
    switch (r->st) {
    case S_MINUS:
        if (c == '0')
            r->st = S_ZERO;
        else if (digit(c))
            r->st = S_INT;
        else
            return -EILSEQ;
        return 0;
    case S_ZERO:
    case S_INT:
        if (digit(c) && r->st == S_INT)
            return 0;
        if (!integer && c == '.') {
            r->st = S_FRAC0;
            return 0;
        }
        if (!integer && (c == 'e' || c == 'E')) {
            r->st = S_EXP0;
            return 0;
        }
        break;
    case S_FRAC0:
        if (!digit(c))
            return -EILSEQ;
        r->st = S_FRAC;
        return 0;
    case S_FRAC:
        if (digit(c))
            return 0;
        if (c == 'e' || c == 'E') {
            r->st = S_EXP0;
            return 0;
        }
        break;
    case S_EXP0:
        if (c == '+' || c == '-') {
            r->st = S_EXPS;
            return 0;
        }
        /* fall through */
    case S_EXPS:
        if (!digit(c))
            return -EILSEQ;
        r->st = S_EXP;
        return 0;
    case S_EXP:
        if (digit(c))
            return 0;
        break;
    }
    /* a complete number ends at this byte, which belongs to what follows */
    value_end(r);
    *again = true;
    return 0;
}

static int feed_byte(eng__jsr *r, unsigned char c)
{
    const eng__jschema *s = r->s;
    if (ws_byte(c) && (r->st == S_VALUE || r->st == S_OBJ_FIRST || r->st == S_OBJ_KEY ||
                       r->st == S_COLON || r->st == S_ARR_FIRST || r->st == S_AFTER)) {
        return ++r->ws > ENG__JSON_WS ? -EILSEQ : 0;
    }
    r->ws = 0;
    const js_node *top = r->depth ? &s->node[r->fr[r->depth - 1].node] : NULL;
    uint16_t *idx = r->depth ? &r->fr[r->depth - 1].idx : NULL;
    bool complete, again;
    int e;
    switch (r->st) {
    case S_VALUE:
        return value_start(r, c);
    case S_OBJ_FIRST:
    case S_OBJ_KEY:
        if (c == '}' && r->st == S_OBJ_FIRST && may_close(s, top, 0)) {
            r->depth--;
            value_end(r);
            return 0;
        }
        return c == '"' ? key_start(r, top, *idx) : -EILSEQ;
    case S_KEY: {
        r->alive = match(s, r->base, r->alive, r->pos, c, &complete);
        r->pos++;
        if (!r->alive)
            return -EILSEQ;
        if (complete) {
            /* keys are quoted: no key is a prefix of another */
            int i = 0;
            while (!(r->alive >> i & 1) || s->alt[r->base + (uint32_t)i].len != r->pos)
                i++;
            const uint32_t a = r->base + (uint32_t)i;
            *idx = (uint16_t)(a - top->first + 1);
            r->node = s->alt[a].node;
            r->st = S_COLON;
        }
        return 0;
    }
    case S_COLON:
        if (c != ':')
            return -EILSEQ;
        r->st = S_VALUE;
        return 0;
    case S_ARR_FIRST:
        if (c == ']' && top->min_items == 0) {
            r->depth--;
            value_end(r);
            return 0;
        }
        if (top->max_items == 0)
            return -EILSEQ;
        *idx = 1;
        r->node = top->items;
        return value_start(r, c);
    case S_AFTER:
        if (top->type == N_OBJECT) {
            if (c == ',' && *idx < top->n) {
                r->st = S_OBJ_KEY;
                return 0;
            }
            if (c == '}' && may_close(s, top, *idx)) {
                r->depth--;
                value_end(r);
                return 0;
            }
            return -EILSEQ;
        }
        if (c == ',' && *idx < top->max_items) {
            (*idx)++;
            r->node = top->items;
            r->st = S_VALUE;
            return 0;
        }
        if (c == ']' && *idx >= top->min_items) {
            r->depth--;
            value_end(r);
            return 0;
        }
        return -EILSEQ;
    case S_STR:
        if (c == '"')
            value_end(r);
        else if (c == '\\')
            r->st = S_ESC;
        else if (c < 0x20)
            return -EILSEQ;
        return 0;
    case S_ESC:
        if (c == 'u') {
            r->st = S_HEX;
            r->hex = 4;
            return 0;
        }
        if (!strchr("\"\\/bfnrt", c) || c == 0)
            return -EILSEQ;
        r->st = S_STR;
        return 0;
    case S_HEX:
        if (!(digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')))
            return -EILSEQ;
        if (--r->hex == 0)
            r->st = S_STR;
        return 0;
    case S_LIT:
        r->alive = match(s, r->base, r->alive, r->pos, c, &complete);
        r->pos++;
        if (!r->alive)
            return -EILSEQ;
        /* strings are quoted and true/false/null differ at their first
         * byte: a complete value is the only one left */
        if (complete)
            value_end(r);
        return 0;
    case S_DONE:
        return -EILSEQ;
    default: /* numbers */
        if ((e = number_byte(r, c, &again)) < 0 || !again)
            return e;
        return feed_byte(r, c);
    }
}

int eng__jsr_feed(eng__jsr *r, const char *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (feed_byte(r, (unsigned char)bytes[i]) < 0)
            return -EILSEQ;
    return 0;
}
