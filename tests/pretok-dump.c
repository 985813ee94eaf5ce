/* Prints our pre-tokenizer's splits, for tests/test-pretok.py.
 *
 * Usage: pretok-dump PRE_NAME CASES_FILE
 *
 * CASES_FILE has one case per line in the escaped form of
 * tests/data/tokenizer-corpus.txt (\\ \n \r \t \xHH; '#' starts a comment
 * line). For each case prints one line: the pieces as lowercase hex, separated
 * by single spaces (an empty line when there are none).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "vocab.h"

static long unescape(const char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        if (s[i] != '\\') {
            out[o++] = s[i++];
            continue;
        }
        if (i + 1 >= n)
            return -1;
        char c = s[i + 1];
        if (c == 'n') out[o++] = '\n';
        else if (c == 'r') out[o++] = '\r';
        else if (c == 't') out[o++] = '\t';
        else if (c == '\\') out[o++] = '\\';
        else if (c == 'x' && i + 3 < n) {
            char hex[3] = { s[i + 2], s[i + 3], 0 }, *end;
            long v = strtol(hex, &end, 16);
            if (*end)
                return -1;
            out[o++] = (char)v;
            i += 2;
        } else
            return -1;
        i += 2;
    }
    return (long)o;
}

static void print_piece(void *ud, const char *piece, size_t len) {
    int *first = ud;
    if (!*first)
        putchar(' ');
    *first = 0;
    for (size_t i = 0; i < len; i++)
        printf("%02x", (unsigned char)piece[i]);
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s PRE_NAME CASES_FILE\n", argv[0]);
        return 2;
    }
    FILE *f = fopen(argv[2], "r");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", argv[2]);
        return 2;
    }
    char *line = NULL, *text = NULL;
    size_t cap = 0;
    ssize_t l;
    int lineno = 0;
    while ((l = getline(&line, &cap, f)) >= 0) {
        lineno++;
        if (l && line[l - 1] == '\n')
            line[--l] = '\0';
        if (line[0] == '#')
            continue;
        text = realloc(text, (size_t)l + 1);
        long n = unescape(line, (size_t)l, text);
        if (n < 0) {
            fprintf(stderr, "%s:%d: bad escape\n", argv[2], lineno);
            return 2;
        }
        int first = 1;
        int r = eng_pretokenize(argv[1], text, (size_t)n, print_piece, &first);
        if (r < 0) {
            fprintf(stderr, "%s:%d: eng_pretokenize(%s): %s\n", argv[2], lineno, argv[1], strerror(-r));
            return 1;
        }
        putchar('\n');
    }
    free(line);
    free(text);
    fclose(f);
    return 0;
}
