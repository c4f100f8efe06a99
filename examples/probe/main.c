/* grzo-probe - measures what the GRZO paper's theory predicts, one table per subcommand.

   Build (from the repository root; meson builds the same program as grzo-probe):
     cc -std=c99 -O2 -fopenmp -DGRZO_USE_OPENBLAS -I. -Iexamples/common \
        -I/usr/include/x86_64-linux-gnu/openblas-openmp examples/probe/[a-z]*.c examples/common/cli_args.c \
        -L/usr/lib/x86_64-linux-gnu/openblas-openmp \
        -Wl,-rpath,/usr/lib/x86_64-linux-gnu/openblas-openmp -lopenblas -lm -o grzo-probe
   Run:   ./grzo-probe cosine           (see --help; each default run takes under 2 minutes)
          ./grzo-probe all --quick --check

   This file holds the command line and the one copy of grzo's implementation. */
#define _POSIX_C_SOURCE 200809L

#define GRZO_IMPLEMENTATION
#include "probe.h"
#include "cli_args.h"

#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct subcommand {
    const char *name;
    int (*run)(const probe_opts *o);
    const char *what;
} subcommand;

static const subcommand SUBCOMMANDS[] = {
    {"variance", probe_variance, "Var(MeZO)/Var(canonical) against B_eff = cB + 1 - c"},
    {"cosine", probe_cosine, "cosine of one estimate with the exact gradient, GRZO vs MeZO"},
    {"quant", probe_quant, "update norm without and with W4 fake quantization"},
    {"batch", probe_batch, "GRZO training loss for B = 4, 8, 16, 32"},
    {"ablation", probe_ablation, "GRZO vs no group normalization vs no per-example perturbation"},
    {"alignment", probe_alignment, "forward-only B_eff (will GRZO help?) vs the exact one from backprop"},
    {"variants", probe_variants, "sparse, low-rank, int8, int4 perturbations: MeZO+X vs GRZO+X"},
};
enum { N_SUBCOMMANDS = (int)(sizeof SUBCOMMANDS / sizeof SUBCOMMANDS[0]) };

static void usage(FILE *f) {
    int i;
    fprintf(f,
            "usage: grzo-probe <subcommand> [options]\n"
            "\n"
            "Checks the GRZO paper's theory on a small MLP whose exact per-example gradients\n"
            "the probe computes by backpropagation; every estimate comes from grzo's forward-only\n"
            "steps. Each subcommand prints a markdown table and writes a CSV (and a PNG where a\n"
            "curve says more) into the output folder.\n"
            "\n"
            "subcommands:\n");
    for (i = 0; i < N_SUBCOMMANDS; i++) fprintf(f, "  %-9s %s\n", SUBCOMMANDS[i].name, SUBCOMMANDS[i].what);
    fprintf(f,
            "  all       every subcommand in turn\n"
            "\n"
            "options:\n"
            "  --quick       small trial counts (seconds; what the tests run)\n"
            "  --check       assert the qualitative claims; exit 1 with a message if one fails\n"
            "  --seed N      run seed (default 1); every result is a pure function of it\n"
            "  --threads N   work units run in parallel (default: all cores); results do not\n"
            "                depend on it\n"
            "  --out DIR     folder for the CSV, gnuplot script and PNG (default probe-out)\n"
            "  --no-plot     do not run gnuplot\n"
            "  --sabotage    run MeZO wherever GRZO or canonical is named, to show that --check\n"
            "                catches a wrong estimator (variance, cosine, quant, variants); alignment:\n"
            "                each \"-\" copy reads the next example (a mislaid copy layout)\n"
            "  --help        this text\n"
            "\n"
            "exit status: 0 ok, 1 a --check claim failed, 2 bad arguments, 3 runtime error\n");
}

/* one line on stderr */
static int bad_usage(const char *fmt, const char *arg) {
    fprintf(stderr, "grzo-probe: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (try grzo-probe --help)\n");
    return PROBE_EXIT_USAGE;
}

static int default_threads(void) {
#ifdef _OPENMP
    return omp_get_max_threads();
#else
    return 1;
#endif
}

/* Parses argv into opts and the subcommand index (-1: all). 0 ok, 1 help shown, else exit code. */
static int parse_args(int argc, char **argv, probe_opts *o, int *sub) {
    int i, have_sub = 0;
    memset(o, 0, sizeof *o);
    o->seed = 1;
    o->plot = 1;
    o->threads = default_threads();
    strcpy(o->out_dir, "probe-out");
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        int64_t threads;
        char err[256];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); return 1; }
        else if (!strcmp(a, "--quick")) o->quick = 1;
        else if (!strcmp(a, "--check")) o->check = 1;
        else if (!strcmp(a, "--no-plot")) o->plot = 0;
        else if (!strcmp(a, "--sabotage")) o->sabotage = 1;
        else if (!strcmp(a, "--seed") || !strcmp(a, "--threads") || !strcmp(a, "--out")) {
            const char *val = i + 1 < argc ? argv[i + 1] : NULL;
            if (!val) return bad_usage("%s needs a value", a);
            i++;
            if (!strcmp(a, "--out")) {
                if (!*val || strlen(val) >= sizeof o->out_dir) return bad_usage("--out: bad folder name '%s'", val);
                strcpy(o->out_dir, val);
            } else if (!strcmp(a, "--seed")) {
                if (cli_parse_u64(a, val, &o->seed, err, sizeof err) != 0) return bad_usage("%s", err);
            } else {
                if (cli_parse_int(a, val, 1, 256, &threads, err, sizeof err) != 0) return bad_usage("%s", err);
                o->threads = (int)threads;
            }
        } else if (a[0] == '-') {
            return bad_usage("unknown option '%s'", a);
        } else if (have_sub) {
            return bad_usage("unexpected argument '%s' (one subcommand at a time, or 'all')", a);
        } else {
            int k;
            have_sub = 1;
            *sub = -2;
            if (!strcmp(a, "all")) *sub = -1;
            for (k = 0; k < N_SUBCOMMANDS; k++) if (!strcmp(a, SUBCOMMANDS[k].name)) *sub = k;
            if (*sub == -2) return bad_usage("unknown subcommand '%s'", a);
        }
    }
    if (!have_sub) return bad_usage("%s", "no subcommand given (variance, cosine, quant, batch, ablation, alignment, variants or all)");
    return 0;
}

int main(int argc, char **argv) {
    probe_opts o;
    int sub = -2, rc = parse_args(argc, argv, &o, &sub), k, worst = PROBE_EXIT_OK;
    if (rc == 1) return PROBE_EXIT_OK;
    if (rc != 0) return rc;
    if (out_prepare(&o) != 0) return PROBE_EXIT_ERROR;   /* before minutes of work, not after */
    for (k = 0; k < N_SUBCOMMANDS; k++) {
        if (sub != -1 && sub != k) continue;
        rc = SUBCOMMANDS[k].run(&o);
        if (rc > worst) worst = rc;   /* a runtime error (3) outranks a failed claim (1) */
        if (rc == PROBE_EXIT_ERROR) break;
    }
    return worst;
}
