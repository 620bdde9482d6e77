/* hushmon-probe: a node's two roofline ceilings, memory bandwidth (a
 * STREAM-like triad) and peak double-precision FLOP rate (FMA chains), on
 * every CPU the process may use. `hushmon probe` runs it once per node type
 * and stores the figures for the digest's roofline factor. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hm_error.h"
#include "hm_json_doc.h"
#include "hm_options.h"
#include "probe_kernels.h"
#include "probe_node.h"
#include "probe_team.h"

#define PROGRAM "hushmon-probe"

typedef struct probe_options {
    double seconds;         /* per kernel */
    int64_t array_mib;      /* each array, all threads together; 0 = from the LLC */
    int threads;            /* 0 = every allowed CPU */
    int kernel;             /* 0 both, 1 triad, 2 fma */
    const char *json_path;
} probe_options;

#define AT(field) .offset = offsetof(probe_options, field)
static const hm_option option_rows[] = {
    {.name = "seconds", .kind = HM_OPT_DOUBLE, AT(seconds), .arg = "SEC", .unit = "seconds",
     .dmin = 0.01, .dmax = 600, .help = "time for each kernel; the best repetition counts [2]"},
    {.name = "array-mib", .kind = HM_OPT_INT64, AT(array_mib), .arg = "MIB", .min = 1,
     .max = INT64_C(1) << 30,
     .help = "size of each of the triad's 3 arrays, all threads together\n"
             "[4 x the last-level cache, at most 1/8 of the available memory]"},
    {.name = "threads", .kind = HM_OPT_INT, AT(threads), .arg = "N", .min = 1,
     .max = HM_PROBE_CPUS_MAX, .help = "run on the first N allowed CPUs [all of them]"},
    {.name = "kernel", .kind = HM_OPT_CHOICE, AT(kernel), .arg = "K",
     .choices = "both|triad|fma", .help = "which ceiling to measure [both]"},
    {.name = "json", .kind = HM_OPT_STRING, AT(json_path), .arg = "FILE|-",
     .help = "the figures as JSON (- = stdout; the text goes to stderr)"},
    {.name = "help", .kind = HM_OPT_HELP, .help = "this text"},
};
#undef AT
static const hm_option_table options = HM_OPTION_TABLE(option_rows);

static void usage(FILE *out)
{
    fprintf(out, "usage: " PROGRAM " [options]\n"
                 "A node's roofline ceilings: memory bandwidth (STREAM-like triad, GB/s) and\n"
                 "peak double-precision FLOP rate (independent FMA chains, GFLOP/s), one\n"
                 "thread pinned to each CPU this process may use.\n\n");
    hm_options_print_help(&options, out);
}

/* Default array size: STREAM's rule (each array at least 4 x the caches)
 * over the largest cache, but no more than 1/8 of the available memory
 * per array so the probe cannot push a node into swap. */
static int64_t default_array_bytes(const hm_probe_node *node)
{
    int64_t want = node->llc_bytes > 0 ? 4 * node->llc_bytes : INT64_C(256) << 20;
    if (want < (INT64_C(64) << 20))
        want = INT64_C(64) << 20;
    if (node->mem_available_bytes > 0 && want > node->mem_available_bytes / 8)
        want = node->mem_available_bytes / 8;
    return want;
}

static void write_timing(hm_json *j, const hm_probe_timing *t)
{
    hm_json_kv_uint(j, "reps", t->reps);
    hm_json_kv_double(j, "best_s", t->best_s);
    hm_json_kv_double(j, "median_s", t->median_s);
}

static int write_json(const char *path, const hm_probe_node *node, const int *cpus, size_t n,
                      const hm_probe_triad *triad, const hm_probe_fma *fma, hm_error *err)
{
    hm_json j;
    if (hm_json_doc_open(&j, path, PROGRAM, err) != 0)
        return -1;
    hm_json_kv_string(&j, "host", node->host);
    hm_json_kv_string(&j, "cpu_model", node->cpu_model);
    hm_json_kv_int(&j, "online_cpus", node->online_cpus);
    hm_json_kv_int(&j, "llc_bytes", node->llc_bytes);
    hm_json_kv_uint(&j, "threads", n);
    hm_json_key(&j, "cpus");
    hm_json_array_begin(&j);
    for (size_t i = 0; i < n; i++)
        hm_json_int(&j, cpus[i]);
    hm_json_array_end(&j);
    hm_json_key(&j, "triad");
    if (triad == NULL) {
        hm_json_null(&j);
    } else {
        hm_json_object_begin(&j);
        hm_json_kv_double(&j, "gb_per_s", triad->gb_per_s);
        hm_json_kv_double(&j, "median_gb_per_s", triad->median_gb_per_s);
        hm_json_kv_int(&j, "array_bytes", triad->array_bytes);
        hm_json_kv_bool(&j, "beyond_llc", node->llc_bytes > 0 &&
                                              triad->array_bytes >= 4 * node->llc_bytes);
        hm_json_kv_int(&j, "passes_per_rep", triad->passes_per_rep);
        hm_json_kv_double(&j, "bytes_per_rep", triad->bytes_per_rep);
        write_timing(&j, &triad->timing);
        hm_json_object_end(&j);
    }
    hm_json_key(&j, "fma");
    if (fma == NULL) {
        hm_json_null(&j);
    } else {
        hm_json_object_begin(&j);
        hm_json_kv_double(&j, "gflop_per_s", fma->gflop_per_s);
        hm_json_kv_double(&j, "median_gflop_per_s", fma->median_gflop_per_s);
        hm_json_kv_string(&j, "isa", fma->isa);
        hm_json_kv_int(&j, "lanes", fma->lanes);
        hm_json_kv_int(&j, "chains", fma->chains);
        hm_json_kv_int(&j, "iterations", fma->iterations);
        hm_json_kv_double(&j, "flop_per_rep", fma->flop_per_rep);
        write_timing(&j, &fma->timing);
        hm_json_object_end(&j);
    }
    return hm_json_doc_close(&j, path, err);
}

int main(int argc, char **argv)
{
    hm_error err = {{0}};
    probe_options o = {.seconds = 2.0};
    int rc = hm_options_parse(&options, argc, argv, &o, &err);
    if (rc == 1) {
        usage(stdout);
        return 0;
    }
    if (rc != 0) {
        hm_error_print(PROGRAM, &err);
        return 2;
    }
    static int cpus[HM_PROBE_CPUS_MAX];
    size_t n = hm_probe_allowed_cpus(cpus, HM_PROBE_CPUS_MAX);
    if (n == 0) {
        fprintf(stderr, PROGRAM ": cannot read this process's CPU affinity\n");
        return 1;
    }
    if (o.threads > 0) {
        if ((size_t)o.threads > n) {
            fprintf(stderr, PROGRAM ": --threads %d: this process may use %zu CPUs\n", o.threads,
                    n);
            return 2;
        }
        n = (size_t)o.threads;
    }
    hm_probe_node node;
    hm_probe_node_read(&node, "/");
    int64_t array_bytes = o.array_mib > 0 ? o.array_mib << 20 : default_array_bytes(&node);
    FILE *text = o.json_path != NULL && strcmp(o.json_path, "-") == 0 ? stderr : stdout;
    hm_probe_triad triad;
    hm_probe_fma fma;
    bool do_triad = o.kernel != 2, do_fma = o.kernel != 1;
    if (do_triad) {
        if (hm_probe_triad_run(cpus, n, array_bytes, o.seconds, &triad, &err) < 0) {
            hm_error_print(PROGRAM, &err);
            return 1;
        }
        fprintf(text, "triad: %.2f GB/s (best of %zu; median %.2f), 3 arrays of %.1f MiB, "
                      "%zu threads\n", triad.gb_per_s, triad.timing.reps, triad.median_gb_per_s,
                (double)triad.array_bytes / 1048576.0, n);
    }
    if (do_fma) {
        if (hm_probe_fma_run(cpus, n, o.seconds, &fma, &err) < 0) {
            hm_error_print(PROGRAM, &err);
            return 1;
        }
        fprintf(text, "fma:   %.2f GFLOP/s (best of %zu; median %.2f), %s, %d chains of %d "
                      "doubles, %zu threads\n", fma.gflop_per_s, fma.timing.reps,
                fma.median_gflop_per_s, fma.isa, fma.chains, fma.lanes, n);
    }
    if (o.json_path != NULL &&
        write_json(o.json_path, &node, cpus, n, do_triad ? &triad : NULL,
                   do_fma ? &fma : NULL, &err) < 0) {
        hm_error_print(PROGRAM, &err);
        return 1;
    }
    return 0;
}
