/* selectinferd: the SelectInfer inference daemon. Parses the command line,
 * builds the configuration and hands over to sid_daemon_run() (server.c). */
#include "config.h"
#include "daemon.h"
#include "log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f)
{
    fprintf(f,
        "Usage: selectinferd [--config FILE] [--KEY VALUE]...\n"
        "\n"
        "Serves a model over a local Unix socket (protocol: proto/selectinfer.proto).\n"
        "\n"
        "  --config FILE      configuration file (default " SID_DEFAULT_CONFIG " if present;\n"
        "                     \"\" for none); flags override the file\n"
        "  --model PATH       GGUF model to serve\n"
        "  --socket PATH      Unix socket (default " SID_DEFAULT_SOCKET " for root,\n"
        "                     $XDG_RUNTIME_DIR/selectinfer.sock otherwise)\n"
        "  --log-level LEVEL  err, warning, info (default), debug\n"
        "  --print-config     print the resulting configuration and exit\n"
        "  --version, --help\n"
        "\n"
        "Every key of the configuration file is also a flag: socket-group, admin-group,\n"
        "max-frame, max-queue, max-pending, max-connections, max-tokens, ctx-size, slots, matrices,\n"
        "prefill-q8, kv-cache-type, swa-full, threads, backend, device, client-write-buffer,\n"
        "client-write-timeout-ms, client-socket-buffer,\n"
        "profile, profile-dir, task, mode, gamma, delta, dense-first, dense-last,\n"
        "layer-budget, budget,\n"
        "seed, phi, alpha, rank, pick, candidates, comp, copy-dynamic, task-switch.\n"
        "See daemon/selectinferd.conf.example.\n");
}

static void print_line(void *ud, const char *line)
{
    fprintf(ud, "%s\n", line);
}

int main(int argc, char **argv)
{
    const char *config_file = NULL;
    bool print_config = false;
    sid_override *ov = calloc((size_t)argc + 1, sizeof(*ov));
    size_t n_ov = 0;
    if (!ov)
        return 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            free(ov);
            return 0;
        }
        if (strcmp(a, "--version") == 0) {
            printf("selectinferd %s (protocol %u)\n", SID_VERSION, SI_PROTOCOL_VERSION);
            free(ov);
            return 0;
        }
        if (strcmp(a, "--print-config") == 0) {
            print_config = true;
            continue;
        }
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "selectinferd: unexpected argument '%s'\n", a);
            usage(stderr);
            free(ov);
            return 2;
        }
        /* --key=value or --key value; the key is kept in argv's storage */
        char *key = argv[i] + 2;
        const char *value;
        char *eq = strchr(key, '=');
        if (eq) {
            *eq = '\0';
            value = eq + 1;
        } else if (i + 1 < argc) {
            value = argv[++i];
        } else {
            fprintf(stderr, "selectinferd: --%s needs a value\n", key);
            free(ov);
            return 2;
        }
        if (strcmp(key, "config") == 0) {
            config_file = value;
            continue;
        }
        if (!sid_config_is_key(key)) {
            fprintf(stderr, "selectinferd: unknown option --%s\n", key);
            usage(stderr);
            free(ov);
            return 2;
        }
        ov[n_ov].key = key;
        ov[n_ov].value = value;
        n_ov++;
    }
    if (!config_file && access(SID_DEFAULT_CONFIG, F_OK) == 0)
        config_file = SID_DEFAULT_CONFIG;

    sid_config cfg;
    char err[1024];
    if (sid_config_build(&cfg, config_file, ov, n_ov, err, sizeof(err)) < 0) {
        sid_err("%s", err);
        free(ov);
        return 2;
    }
    if (print_config) {
        sid_config_print(&cfg, print_line, stdout);
        free(ov);
        return 0;
    }
    if (!cfg.model[0]) {
        sid_err("No model: set model = ... in the configuration file or pass --model");
        free(ov);
        return 2;
    }
    int rc = sid_daemon_run(&cfg, config_file, ov, n_ov);
    free(ov);
    return rc;
}
