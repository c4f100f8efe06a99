/* ab_linear.c - the driver of bench/ab_linear.py: two builds of bench_linear in one process,
   run in alternation, so that a change's effect is measured against the code before it on a
   machine whose speed swings from one minute to the next (README "Measuring a change").

   ab_linear.py compiles bench_linear.c twice, once from a git ref (A) and once from the
   working tree (B), each with its own copy of grzo's header (GRZO_STATIC: every function
   private to its file), its main renamed ab_main_a and ab_main_b, and links them with this
   file. After a warm-up round, each round runs A's and B's bench_linear once (which first,
   alternating), every run with its own state (backend, weights, activations), and reads the
   best call time each prints. The ratio B / A is taken per round: the two runs of a
   round see the same machine, where two separate processes minutes apart need not.

   Run:  ab_linear ROUNDS A_ARGS... [-- B_ARGS...]   (B_ARGS default: A_ARGS; both are
   bench_linear's options) */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_stats.h"   /* bench_quantile: the medians and percentiles bench_mlp and bench_llm print */

int ab_main_a(int argc, char **argv);
int ab_main_b(int argc, char **argv);
void ab_reexec_a(char **argv);   /* cpu_env_reexec of A's file (the GEMM kernels of this CPU) */

typedef int (*bench_main)(int argc, char **argv);

enum { MAX_ROUNDS = 10000 };

/* Runs one bench_linear with its standard output captured, and reads the "best X ms" its
   report line gives into *best_ms. Returns 0, or 1 (said on stderr) when the run failed or
   printed no such line. */
static int run_one(bench_main fn, const char *name, int argc, char **argv, double *best_ms) {
    char line[1024];
    const char *at;
    FILE *out = tmpfile();
    int saved, rc, found = 0;
    if (!out) { fprintf(stderr, "ab_linear: no temporary file for %s's output\n", name); return 1; }
    fflush(stdout);
    saved = dup(STDOUT_FILENO);
    if (saved < 0 || dup2(fileno(out), STDOUT_FILENO) < 0) {
        fprintf(stderr, "ab_linear: cannot redirect %s's output\n", name);
        fclose(out);
        return 1;
    }
    rc = fn(argc, argv);
    fflush(stdout);
    dup2(saved, STDOUT_FILENO);
    close(saved);
    rewind(out);
    while (fgets(line, sizeof line, out))
        if ((at = strstr(line, ": best ")) != NULL && sscanf(at, ": best %lf ms", best_ms) == 1) found = 1;
    fclose(out);
    if (rc != 0 || !found) {
        fprintf(stderr, "ab_linear: %s's bench_linear %s\n", name, rc != 0 ? "failed (its error is above)"
                                                                          : "printed no 'best ... ms' line");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    static double ratio[MAX_ROUNDS];
    double best_a = 1e30, best_b = 1e30, ta, tb;
    char **args_a, **args_b, *end;
    int n_a, n_b, i, r;
    long rounds;
    if (argc < 2 || (rounds = strtol(argv[1], &end, 10), *end != '\0') || rounds < 1 || rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: %s ROUNDS (1..%d) A_ARGS... [-- B_ARGS...] (bench/ab_linear.py runs it)\n", argv[0],
                MAX_ROUNDS);
        return 2;
    }
    ab_reexec_a(argv);   /* before any BLAS starts: the kernel variables are read once */
    /* argv[1] becomes each side's argv[0] (bench_linear reads its options from argv[1] on) */
    argv[1] = argv[0];
    args_a = argv + 1;
    n_a = argc - 1;
    args_b = args_a;
    n_b = n_a;
    for (i = 2; i < argc; i++)
        if (strcmp(argv[i], "--") == 0) {
            n_a = i - 1;
            argv[i] = argv[0];
            args_b = argv + i;
            n_b = argc - i;
            if (n_b == 1) { args_b = args_a; n_b = n_a; }   /* a "--" with nothing after it */
            break;
        }
    /* a round first that is not counted: the process's first run pays for starting OpenMP's
       threads, BLIS's context and the libraries' pages, whichever side it is */
    if (run_one(ab_main_a, "A", n_a, args_a, &ta) || run_one(ab_main_b, "B", n_b, args_b, &tb)) return 1;
    for (r = 0; r < rounds; r++) {
        int first_a = r % 2 == 0, fail;
        fail = first_a ? run_one(ab_main_a, "A", n_a, args_a, &ta) || run_one(ab_main_b, "B", n_b, args_b, &tb)
                       : run_one(ab_main_b, "B", n_b, args_b, &tb) || run_one(ab_main_a, "A", n_a, args_a, &ta);
        if (fail) return 1;
        if (ta < best_a) best_a = ta;
        if (tb < best_b) best_b = tb;
        ratio[r] = tb / ta;
        fprintf(stderr, "ab_linear: round %d of %ld: A %.3f ms, B %.3f ms, B / A %.4f\n", r + 1, rounds, ta, tb, ratio[r]);
    }
    printf("ab_linear: %ld rounds; best call A %.3f ms, B %.3f ms (B / A %.4f); per-round B / A median %.4f "
           "[p10 %.4f, p90 %.4f]\n",
           rounds, best_a, best_b, best_b / best_a, bench_quantile(ratio, (int)rounds, 0.5),
           bench_quantile(ratio, (int)rounds, 0.1), bench_quantile(ratio, (int)rounds, 0.9));
    return 0;
}
