/* evalkit prompt sets: every shipped set in profiles/tasks/ parses, has
 * both splits and the fields its task needs; the evaluation-only sets of
 * profiles/eval/ are all held out and share no source with their task's; the reader decodes escapes
 * and UTF-8 correctly; malformed input is rejected with its line number. */
#include "promptset.h"

#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int failures;

#define CHECK(cond, ...)                                                    \
    do {                                                                    \
        if (!(cond)) {                                                      \
            fprintf(stderr, "%s:%d: FAIL %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                   \
            fputc('\n', stderr);                                            \
            failures++;                                                     \
        }                                                                   \
    } while (0)

static const char *source_root(void) {
    const char *r = getenv("SI_SOURCE_ROOT");
    return r ? r : ".";
}

/* ---- shipped sets ------------------------------------------------------ */

static void check_shipped(const char *dir, const char *name) {
    char path[8192];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    ek_promptset *ps = NULL;
    ek_error err = {0};
    int r = ek_promptset_load(path, NULL, &ps, &err);
    CHECK(r == 0, "%s:%zu: %s", name, err.line, err.msg);
    if (r < 0) return;

    /* The task is the file name without ".jsonl". */
    char task[256];
    snprintf(task, sizeof(task), "%.*s", (int)(strlen(name) - 6), name);
    size_t n = ek_promptset_size(ps), np = ek_promptset_count(ps, EK_SPLIT_PROFILE),
           nh = ek_promptset_count(ps, EK_SPLIT_HELDOUT);
    CHECK(np > 0 && nh > 0, "%s: profile %zu heldout %zu", name, np, nh);
    CHECK(np + nh == n, "%s: splits %zu + %zu != %zu", name, np, nh, n);
    bool needs_refs = strcmp(task, "chat") != 0;
    size_t counted[2] = {0, 0};
    for (size_t i = 0; i < n; i++) {
        const ek_prompt *p = ek_promptset_get(ps, i);
        CHECK(strcmp(p->task, task) == 0, "%s:%zu: task '%s'", name, p->line, p->task);
        CHECK(p->prompt[0] != '\0' && p->id[0] != '\0', "%s:%zu: empty", name, p->line);
        CHECK(!needs_refs || p->n_references > 0, "%s:%zu: no reference", name, p->line);
        for (size_t j = 0; j < p->n_references; j++)
            CHECK(p->references[j] && p->references[j][0], "%s:%zu: empty reference", name,
                  p->line);
        CHECK(p->max_tokens > 0, "%s:%zu: max_tokens", name, p->line);
        CHECK(p->line == i + 1, "%s: record %zu on line %zu", name, i, p->line);
        counted[p->split]++;
    }
    CHECK(counted[0] == np && counted[1] == nh, "%s: counts disagree", name);
    CHECK(ek_promptset_get(ps, n) == NULL, "out of range get");
    printf("%-24s %4zu profile %4zu heldout\n", name, np, nh);
    ek_promptset_free(ps);
}

static void test_shipped(void) {
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/profiles/tasks", source_root());
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (!d) return;
    const char *expected[] = {"qa.jsonl", "translate-en-de.jsonl", "translate-en-ro.jsonl",
                              "summarize.jsonl", "chat.jsonl"};
    bool seen[5] = {false};
    struct dirent *e;
    size_t files = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l <= 6 || strcmp(e->d_name + l - 6, ".jsonl") != 0) continue;
        for (size_t i = 0; i < 5; i++)
            if (strcmp(e->d_name, expected[i]) == 0) seen[i] = true;
        check_shipped(dir, e->d_name);
        files++;
    }
    closedir(d);
    for (size_t i = 0; i < 5; i++) CHECK(seen[i], "missing %s", expected[i]);
    CHECK(files >= 5, "%zu sets", files);
}

/* profiles/eval/TASK-*.jsonl: evaluation-only sets, all held out, with
 * references, and sharing no source with the task's own set (whose
 * profile part made the shipped profile). */
static void test_eval_sets(void) {
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/profiles/eval", source_root());
    DIR *d = opendir(dir);
    CHECK(d != NULL, "cannot open %s", dir);
    if (!d) return;
    struct dirent *e;
    size_t files = 0;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        const char *dash = strchr(e->d_name, '-');
        if (l <= 6 || strcmp(e->d_name + l - 6, ".jsonl") != 0 || !dash) continue;
        char path[8192], task[256];
        snprintf(task, sizeof(task), "%.*s", (int)(dash - e->d_name), e->d_name);
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        ek_promptset *ps = NULL, *own = NULL;
        ek_error err = {0};
        CHECK(ek_promptset_load(path, NULL, &ps, &err) == 0, "%s:%zu: %s", e->d_name, err.line, err.msg);
        snprintf(path, sizeof(path), "%s/profiles/tasks/%s.jsonl", source_root(), task);
        CHECK(ek_promptset_load(path, NULL, &own, &err) == 0, "%s: %s", path, err.msg);
        if (!ps || !own) {
            ek_promptset_free(ps);
            ek_promptset_free(own);
            continue;
        }
        const size_t n = ek_promptset_size(ps);
        CHECK(n > 0 && ek_promptset_count(ps, EK_SPLIT_HELDOUT) == n, "%s: not all held out", e->d_name);
        for (size_t i = 0; i < n; i++) {
            const ek_prompt *p = ek_promptset_get(ps, i);
            CHECK(!strcmp(p->task, task) && p->n_references > 0 && p->max_tokens > 0 && p->source,
                  "%s:%zu: task, references or source", e->d_name, p->line);
            for (size_t j = 0; p->source && j < ek_promptset_size(own); j++) {
                const ek_prompt *q = ek_promptset_get(own, j);
                CHECK(!q->source || strcmp(p->source, q->source) != 0, "%s:%zu: %s is in %s.jsonl", e->d_name,
                      p->line, p->source, task);
            }
        }
        printf("%-24s %4zu heldout (evaluation only)\n", e->d_name, n);
        ek_promptset_free(ps);
        ek_promptset_free(own);
        files++;
    }
    closedir(d);
    CHECK(files >= 1, "no evaluation sets in %s", dir);
}

/* ---- what the reader accepts ------------------------------------------- */

static ek_promptset *parse_ok(const char *text) {
    ek_promptset *ps = NULL;
    ek_error err = {0};
    int r = ek_promptset_parse(text, strlen(text), NULL, &ps, &err);
    CHECK(r == 0, "parse failed: %d line %zu: %s\n  input: %s", r, err.line, err.msg, text);
    return r == 0 ? ps : NULL;
}

static void test_accept(void) {
    /* Escapes: \u00e9, a surrogate pair, the short escapes, raw UTF-8. */
    const char *text =
        "{\"task\":\"qa\",\"id\":\"a\",\"split\":\"profile\","
        "\"prompt\":\"caf\\u00e9 \\ud83d\\ude00 \\\"q\\\" \\\\ \\/ \\b\\f\\n\\r\\t \xc3\xbc\","
        "\"references\":[\"x\",\"\\u20AC\"],\"max_tokens\":32}\n";
    ek_promptset *ps = parse_ok(text);
    if (ps) {
        const ek_prompt *p = ek_promptset_get(ps, 0);
        CHECK(strcmp(p->prompt, "caf\xc3\xa9 \xf0\x9f\x98\x80 \"q\" \\ / \b\f\n\r\t \xc3\xbc") == 0,
              "decoded '%s'", p->prompt);
        CHECK(p->n_references == 2 && strcmp(p->references[1], "\xe2\x82\xac") == 0, "refs");
        CHECK(p->max_tokens == 32 && p->split == EK_SPLIT_PROFILE, "fields");
        CHECK(p->system[0] == '\0' && p->source[0] == '\0', "optional defaults");
        ek_promptset_free(ps);
    }

    /* Blank lines, CRLF, whitespace, unknown keys of every allowed type,
     * key order free, no references, system and source. */
    text = "\n"
           "  { \"split\" : \"heldout\" , \"id\":\"b\", \"task\":\"chat\", \"prompt\":\"hi\","
           " \"extra\": -1.5e+3, \"flag\": true, \"none\": null, \"tags\": [\"a\", \"b\"],"
           " \"note\": \"n\", \"empty\": [], \"zero\": 0 }\r\n"
           "\r\n"
           "{\"task\":\"chat\",\"id\":\"c\",\"split\":\"profile\",\"prompt\":\"p\","
           "\"system\":\"be brief\",\"source\":\"unit test\",\"references\":[]}";
    ps = parse_ok(text);
    if (ps) {
        CHECK(ek_promptset_size(ps) == 2, "size %zu", ek_promptset_size(ps));
        const ek_prompt *p = ek_promptset_get(ps, 0);
        CHECK(p->line == 2 && p->split == EK_SPLIT_HELDOUT && p->n_references == 0 &&
                  p->max_tokens == 0,
              "first record");
        p = ek_promptset_get(ps, 1);
        CHECK(p->line == 4 && strcmp(p->system, "be brief") == 0 &&
                  strcmp(p->source, "unit test") == 0,
              "second record");
        CHECK(ek_promptset_count(ps, EK_SPLIT_PROFILE) == 1 &&
                  ek_promptset_count(ps, EK_SPLIT_HELDOUT) == 1,
              "counts");
        ek_promptset_free(ps);
    }

    /* An empty input is an empty set. */
    ps = parse_ok("");
    if (ps) {
        CHECK(ek_promptset_size(ps) == 0, "empty");
        ek_promptset_free(ps);
    }
}

/* ---- what it rejects ---------------------------------------------------- */

#define GOOD "{\"task\":\"qa\",\"id\":\"g1\",\"split\":\"profile\",\"prompt\":\"p\"}\n"

static void reject(const char *what, const char *text, size_t len, const ek_promptset_limits *lim,
                   int want_rc, size_t want_line) {
    ek_promptset *ps = (ek_promptset *)&failures; /* must stay untouched */
    ek_error err = {0};
    int r = ek_promptset_parse(text, len, lim, &ps, &err);
    CHECK(r == want_rc && err.line == want_line && err.msg[0] != '\0',
          "%s: rc %d (want %d) line %zu (want %zu): %s", what, r, want_rc, err.line, want_line,
          err.msg);
    CHECK(ps == (ek_promptset *)&failures, "%s: ret_set written on failure", what);
    if (r == 0) ek_promptset_free(ps);
    if (getenv("VERBOSE")) printf("%-28s line %zu: %s\n", what, err.line, err.msg);
}

static void reject_line2(const char *what, const char *bad_line) {
    char buf[8192];
    int n = snprintf(buf, sizeof(buf), GOOD "%s\n" GOOD, bad_line);
    /* The third line repeats id g1: only reached if line 2 is accepted, so
     * the line number tells which error fired. */
    reject(what, buf, (size_t)n, NULL, -EINVAL, 2);
}

static void test_reject(void) {
#define REC(extra) "{\"task\":\"qa\",\"id\":\"x\",\"split\":\"profile\",\"prompt\":\"p\"" extra "}"
    reject_line2("truncated object", "{\"task\":\"qa\",\"id\":\"x\"");
    reject_line2("truncated string", "{\"task\":\"qa\",\"id\":\"x");
    reject_line2("truncated array", REC(",\"references\":[\"a\""));
    reject_line2("not an object", "[\"task\"]");
    reject_line2("bad escape", REC(",\"source\":\"a\\x41\""));
    reject_line2("bad hex", REC(",\"source\":\"\\u12G4\""));
    reject_line2("short \\u", REC(",\"source\":\"\\u12\""));
    reject_line2("lone low surrogate", REC(",\"source\":\"\\udc00\""));
    reject_line2("high surrogate alone", REC(",\"source\":\"\\ud800x\""));
    reject_line2("high + non-low", REC(",\"source\":\"\\ud800\\u0041\""));
    reject_line2("\\u0000", REC(",\"source\":\"a\\u0000b\""));
    reject_line2("raw 0xff", REC(",\"source\":\"\xff\""));
    reject_line2("overlong slash", REC(",\"source\":\"\xc0\xaf\""));
    reject_line2("overlong 3-byte", REC(",\"source\":\"\xe0\x80\xaf\""));
    reject_line2("raw surrogate", REC(",\"source\":\"\xed\xa0\x80\""));
    reject_line2("above U+10FFFF", REC(",\"source\":\"\xf4\x90\x80\x80\""));
    reject_line2("truncated UTF-8", REC(",\"source\":\"\xe2\x82\""));
    reject_line2("raw control char", REC(",\"source\":\"a\x01 b\""));
    reject_line2("raw tab in string", REC(",\"source\":\"a\tb\""));
    reject_line2("missing task", "{\"id\":\"x\",\"split\":\"profile\",\"prompt\":\"p\"}");
    reject_line2("missing id", "{\"task\":\"qa\",\"split\":\"profile\",\"prompt\":\"p\"}");
    reject_line2("missing split", "{\"task\":\"qa\",\"id\":\"x\",\"prompt\":\"p\"}");
    reject_line2("missing prompt", "{\"task\":\"qa\",\"id\":\"x\",\"split\":\"profile\"}");
    reject_line2("empty object", "{}");
    reject_line2("empty prompt", "{\"task\":\"qa\",\"id\":\"x\",\"split\":\"profile\",\"prompt\":\"\"}");
    reject_line2("bad split", "{\"task\":\"qa\",\"id\":\"x\",\"split\":\"train\",\"prompt\":\"p\"}");
    reject_line2("task with space", "{\"task\":\"q a\",\"id\":\"x\",\"split\":\"profile\",\"prompt\":\"p\"}");
    reject_line2("id with newline", "{\"task\":\"qa\",\"id\":\"x\\ny\",\"split\":\"profile\",\"prompt\":\"p\"}");
    reject_line2("task not a string", "{\"task\":5,\"id\":\"x\",\"split\":\"profile\",\"prompt\":\"p\"}");
    reject_line2("duplicate key", REC(",\"prompt\":\"q\""));
    reject_line2("duplicate unknown key", REC(",\"z\":1,\"z\":2"));
    reject_line2("nested object", REC(",\"meta\":{}"));
    reject_line2("number in references", REC(",\"references\":[1]"));
    reject_line2("nested array", REC(",\"tags\":[[\"a\"]]"));
    reject_line2("references not an array", REC(",\"references\":\"a\""));
    reject_line2("max_tokens string", REC(",\"max_tokens\":\"5\""));
    reject_line2("max_tokens fraction", REC(",\"max_tokens\":5.5"));
    reject_line2("max_tokens zero", REC(",\"max_tokens\":0"));
    reject_line2("max_tokens negative", REC(",\"max_tokens\":-4"));
    reject_line2("max_tokens huge", REC(",\"max_tokens\":99999999999999999999999"));
    reject_line2("leading zero", REC(",\"n\":01"));
    reject_line2("bad exponent", REC(",\"n\":1e"));
    reject_line2("bad literal", REC(",\"n\":nul"));
    reject_line2("trailing comma", REC(","));
    reject_line2("trailing garbage", REC("") " x");
    reject_line2("two objects", REC("") REC(""));
    reject_line2("single quotes", "{'task':'qa'}");

    /* Duplicate id: reported on the second occurrence. */
    const char *dup = GOOD "\n" GOOD;
    reject("duplicate id", dup, strlen(dup), NULL, -EINVAL, 3);

    /* An embedded NUL byte in a line is not JSON. */
    static const char nul[] = GOOD "{\"task\":\"qa\",\"id\":\"n\",\"split\":\"profile\",\"prompt\":\"a\0b\"}\n";
    reject("NUL byte", nul, sizeof(nul) - 1, NULL, -EINVAL, 2);

    /* Caps: line length, record count, references, total size. */
    ek_promptset_limits lim = ek_promptset_limits_default();
    lim.max_line_bytes = 80;
    const char *longl = GOOD REC(",\"source\":\"0123456789012345678901234567890123456789\"") "\n";
    reject("line over a small cap", longl, strlen(longl), &lim, -E2BIG, 2);

    /* The default cap: a 64 KiB + 1 line, even one that is valid JSON. */
    size_t big = ek_promptset_limits_default().max_line_bytes + 1;
    char *huge = malloc(big + 256);
    int n = snprintf(huge, 256, GOOD "{\"task\":\"qa\",\"id\":\"h\",\"split\":\"profile\",\"prompt\":\"");
    size_t len = (size_t)n;
    while (len < strlen(GOOD) + big - 2) huge[len++] = 'a';
    huge[len++] = '"';
    huge[len++] = '}';
    huge[len] = '\0';
    reject("line over the default cap", huge, len, NULL, -E2BIG, 2);
    /* One byte shorter is accepted. */
    huge[len - 3] = '"';
    huge[len - 2] = '}';
    huge[len - 1] = '\0';
    ek_promptset *ps = parse_ok(huge);
    ek_promptset_free(ps);
    free(huge);

    lim = ek_promptset_limits_default();
    lim.max_records = 2;
    const char *three = REC("") "\n" "{\"task\":\"qa\",\"id\":\"y\",\"split\":\"profile\",\"prompt\":\"p\"}\n"
                        "{\"task\":\"qa\",\"id\":\"z\",\"split\":\"profile\",\"prompt\":\"p\"}\n";
    reject("too many records", three, strlen(three), &lim, -E2BIG, 3);

    lim = ek_promptset_limits_default();
    lim.max_references = 2;
    const char *refs = GOOD REC(",\"references\":[\"a\",\"b\",\"c\"]") "\n";
    reject("too many references", refs, strlen(refs), &lim, -E2BIG, 2);

    lim = ek_promptset_limits_default();
    lim.max_total_bytes = 10;
    reject("input over the size cap", GOOD, strlen(GOOD), &lim, -E2BIG, 0);

    /* Files. */
    ek_error err = {0};
    ps = NULL;
    CHECK(ek_promptset_load("/nonexistent/x.jsonl", NULL, &ps, &err) == -ENOENT && ps == NULL,
          "missing file");
    char dir[4096];
    snprintf(dir, sizeof(dir), "%s/profiles/tasks", source_root());
    CHECK(ek_promptset_load(dir, NULL, &ps, &err) == -EINVAL && ps == NULL, "directory");
    char path[4096];
    snprintf(path, sizeof(path), "%s/profiles/tasks/qa.jsonl", source_root());
    lim = ek_promptset_limits_default();
    lim.max_total_bytes = 100;
    CHECK(ek_promptset_load(path, &lim, &ps, &err) == -E2BIG && ps == NULL, "file over cap");
#undef REC
}

int main(void) {
    test_shipped();
    test_eval_sets();
    test_accept();
    test_reject();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("test-promptset: all checks passed\n");
    return 0;
}
