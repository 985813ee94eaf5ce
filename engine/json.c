/* The JSON recognizer of json.h: one state per kind of byte that may come
 * next; containers on a stack. */
#include "json.h"

#include <errno.h>
#include <string.h>

enum {
    J_START,     /* before the object: whitespace, '{' */
    J_OBJ_FIRST, /* after '{': a key or '}' */
    J_OBJ_KEY,   /* after ',' in an object: a key */
    J_COLON,     /* after a key: ':' */
    J_VALUE,     /* after ':', or ',' in an array: a value */
    J_ARR_FIRST, /* after '[': a value or ']' */
    J_AFTER,     /* after a value: ',' or the container's closer */
    J_STR,       /* in a string */
    J_ESC,       /* after '\' in a string */
    J_HEX,       /* in \uXXXX */
    J_MINUS,     /* a number: after '-' */
    J_ZERO,      /* a leading 0: no more digits before '.' or 'e' */
    J_INT,       /* integer digits */
    J_FRAC0,     /* after '.': a digit is due */
    J_FRAC,      /* fraction digits */
    J_EXP0,      /* after 'e': a sign or a digit */
    J_EXPS,      /* after the exponent's sign: a digit is due */
    J_EXP,       /* exponent digits */
    J_LIT,       /* in true, false or null */
    J_DONE,      /* the object closed */
};

static const char *const literals[3] = {"true", "false", "null"};

void eng__json_init(eng__json *j)
{
    memset(j, 0, sizeof(*j));
    j->state = J_START;
}

bool eng__json_done(const eng__json *j)
{
    return j->state == J_DONE;
}

static bool is_ws(unsigned char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}

static bool is_digit(unsigned char c)
{
    return c >= '0' && c <= '9';
}

static bool is_hex(unsigned char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int push(eng__json *j, char open)
{
    if (j->depth == ENG__JSON_DEPTH)
        return -EILSEQ;
    j->stack[j->depth++] = open;
    j->state = open == '{' ? J_OBJ_FIRST : J_ARR_FIRST;
    return 0;
}

/* A closer for the innermost container; the last one completes the
 * document. */
static int pop(eng__json *j, unsigned char c)
{
    if (j->depth == 0 || j->stack[j->depth - 1] != (c == '}' ? '{' : '['))
        return -EILSEQ;
    j->depth--;
    j->state = j->depth == 0 ? J_DONE : J_AFTER;
    return 0;
}

/* The first byte of a value. */
static int value_start(eng__json *j, unsigned char c)
{
    switch (c) {
    case '"': j->state = J_STR; j->key = false; return 0;
    case '{': return push(j, '{');
    case '[': return push(j, '[');
    case '-': j->state = J_MINUS; return 0;
    case '0': j->state = J_ZERO; return 0;
    case 't': case 'f': case 'n':
        j->lit = c == 't' ? 0 : c == 'f' ? 1 : 2;
        j->lit_pos = 1;
        j->state = J_LIT;
        return 0;
    default:
        if (c >= '1' && c <= '9') {
            j->state = J_INT;
            return 0;
        }
        return -EILSEQ;
    }
}

/* After a value: whitespace, ',' or a closer. Also where a number ends. */
static int after_value(eng__json *j, unsigned char c)
{
    j->state = J_AFTER;
    if (is_ws(c))
        return 0; /* counted by the caller */
    if (c == ',') {
        j->state = j->stack[j->depth - 1] == '{' ? J_OBJ_KEY : J_VALUE;
        return 0;
    }
    if (c == '}' || c == ']')
        return pop(j, c);
    return -EILSEQ;
}

static int step(eng__json *j, unsigned char c)
{
    /* whitespace between tokens, bounded */
    switch (j->state) {
    case J_START: case J_OBJ_FIRST: case J_OBJ_KEY: case J_COLON: case J_VALUE:
    case J_ARR_FIRST: case J_AFTER: case J_ZERO: case J_INT: case J_FRAC: case J_EXP:
        if (is_ws(c)) {
            if (++j->ws > ENG__JSON_WS)
                return -EILSEQ;
            if (j->state >= J_ZERO)
                j->state = J_AFTER; /* the number ended */
            return 0;
        }
        j->ws = 0;
        break;
    default:
        break;
    }
    switch (j->state) {
    case J_START:
        return c == '{' ? push(j, '{') : -EILSEQ;
    case J_OBJ_FIRST:
        if (c == '}')
            return pop(j, c);
        /* fall through */
    case J_OBJ_KEY:
        if (c != '"')
            return -EILSEQ;
        j->state = J_STR;
        j->key = true;
        return 0;
    case J_COLON:
        if (c != ':')
            return -EILSEQ;
        j->state = J_VALUE;
        return 0;
    case J_ARR_FIRST:
        if (c == ']')
            return pop(j, c);
        /* fall through */
    case J_VALUE:
        return value_start(j, c);
    case J_AFTER:
        return after_value(j, c);
    case J_STR:
        if (c == '"')
            j->state = j->key ? J_COLON : J_AFTER;
        else if (c == '\\')
            j->state = J_ESC;
        else if (c < 0x20)
            return -EILSEQ;
        return 0;
    case J_ESC:
        if (c == 'u') {
            j->state = J_HEX;
            j->hex = 4;
            return 0;
        }
        if (!strchr("\"\\/bfnrt", c) || c == '\0')
            return -EILSEQ;
        j->state = J_STR;
        return 0;
    case J_HEX:
        if (!is_hex(c))
            return -EILSEQ;
        if (--j->hex == 0)
            j->state = J_STR;
        return 0;
    case J_MINUS:
        if (c == '0')
            j->state = J_ZERO;
        else if (c >= '1' && c <= '9')
            j->state = J_INT;
        else
            return -EILSEQ;
        return 0;
    case J_ZERO:
    case J_INT:
        if (is_digit(c) && j->state == J_INT)
            return 0;
        if (c == '.') {
            j->state = J_FRAC0;
            return 0;
        }
        if (c == 'e' || c == 'E') {
            j->state = J_EXP0;
            return 0;
        }
        return after_value(j, c);
    case J_FRAC0:
        if (!is_digit(c))
            return -EILSEQ;
        j->state = J_FRAC;
        return 0;
    case J_FRAC:
        if (is_digit(c))
            return 0;
        if (c == 'e' || c == 'E') {
            j->state = J_EXP0;
            return 0;
        }
        return after_value(j, c);
    case J_EXP0:
        if (c == '+' || c == '-') {
            j->state = J_EXPS;
            return 0;
        }
        /* fall through */
    case J_EXPS:
        if (!is_digit(c))
            return -EILSEQ;
        j->state = J_EXP;
        return 0;
    case J_EXP:
        if (is_digit(c))
            return 0;
        return after_value(j, c);
    case J_LIT: {
        const char *lit = literals[j->lit];
        if ((unsigned char)lit[j->lit_pos] != c)
            return -EILSEQ;
        if (lit[++j->lit_pos] == '\0')
            j->state = J_AFTER;
        return 0;
    }
    default: /* J_DONE */
        return -EILSEQ;
    }
}

int eng__json_feed(eng__json *j, const char *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        int r = step(j, (unsigned char)bytes[i]);
        if (r < 0)
            return r;
    }
    return 0;
}
