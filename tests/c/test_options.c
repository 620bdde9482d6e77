/* The option table shared by the C programs (c/common/hm_options.c): every
 * kind stores what it should, the forms of an option on the command line,
 * every kind of bad input as one line, and --help printed from the table. */
#include <stdlib.h>
#include <string.h>

#include "hm_options.h"
#include "hm_test.h"

typedef struct opts {
    bool verbose, shuffle;
    const char *json;
    char sink[8];
    int64_t bytes;
    int rounds;
    double share;
    double budget_ns;
    int64_t period_ns;
    int mode;
    int calls;
    const char *last_call;
} opts;

static int count_call(void *base, const hm_option *opt, const char *value, hm_error *err)
{
    opts *o = base;
    if (strcmp(value, "bad") == 0)
        return hm_error_set(err, "--%s: '%s' is refused by the callback", opt->name, value);
    o->calls++;
    o->last_call = value;
    return 0;
}

static const hm_option rows[] = {
    {.kind = HM_OPT_HEADING, .help = "section one:"},
    {.name = "verbose", .letter = 'v', .kind = HM_OPT_SET, .offset = offsetof(opts, verbose),
     .help = "say more"},
    {.name = "in-order", .kind = HM_OPT_CLEAR, .offset = offsetof(opts, shuffle),
     .help = "do not shuffle"},
    {.name = "json", .kind = HM_OPT_STRING, .offset = offsetof(opts, json), .arg = "FILE|-",
     .help = "results as JSON"},
    {.name = "sink", .kind = HM_OPT_TEXT, .offset = offsetof(opts, sink),
     .size = sizeof(((opts *)0)->sink), .arg = "NAME", .choices = "spool|stdout|nats",
     .help = "where batches go"},
    {.name = "bytes", .letter = 'b', .kind = HM_OPT_INT64, .offset = offsetof(opts, bytes),
     .arg = "SIZE", .min = 1, .max = INT64_C(1) << 30, .suffixes = true,
     .help = "a size\nwith K, M, G"},
    {.name = "rounds", .kind = HM_OPT_INT, .offset = offsetof(opts, rounds), .arg = "N",
     .min = 1, .max = 1000, .help = "rounds"},
    {.name = "rounds-extra", .kind = HM_OPT_INT, .offset = offsetof(opts, rounds), .arg = "N",
     .min = 1, .max = 1000, .help = ""},
    {.name = "share", .kind = HM_OPT_DOUBLE, .offset = offsetof(opts, share), .arg = "X",
     .dmin = 0, .dmax = 1, .help = "a share"},
    {.name = "budget-ms", .kind = HM_OPT_DOUBLE, .offset = offsetof(opts, budget_ns),
     .arg = "MS", .dmin = 0, .dmax = 1e7, .scale = 1e6, .help = "a budget"},
    {.name = "period", .kind = HM_OPT_SCALED, .offset = offsetof(opts, period_ns), .arg = "SEC",
     .unit = "seconds", .dmin = 0.001, .dmax = 3600, .scale = 1e9, .help = "a period"},
    {.name = "mode", .kind = HM_OPT_CHOICE, .offset = offsetof(opts, mode), .arg = "MODE",
     .choices = "boundary|random|now", .help = "how to start"},
    {.name = "call", .kind = HM_OPT_CALL, .call = count_call, .arg = "X", .help = "a callback"},
    {.name = "help", .letter = 'h', .kind = HM_OPT_HELP, .help = "this text"},
};

static const hm_option_table table = HM_OPTION_TABLE(rows);

#define ARGV(...) (char *[]){"prog", __VA_ARGS__, NULL}
#define ARGC(...) ((int)(sizeof((char *[]){"prog", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(o, err, ...) hm_options_parse(&table, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), (o), (err))

static void test_kinds(hm_test_counts *c)
{
    opts o = {.shuffle = true};
    hm_error err = {{0}};
    CHECK(c, PARSE(&o, &err, "-v", "--in-order", "--json", "-", "--sink=nats", "-b", "64K",
                   "--rounds", "7", "--share", "0.25", "--budget-ms", "2.5", "--period", "0.05",
                   "--mode", "now", "--call", "x", "--call=y") == 0);
    CHECK(c, o.verbose && !o.shuffle && strcmp(o.json, "-") == 0 && strcmp(o.sink, "nats") == 0);
    CHECK(c, o.bytes == 65536 && o.rounds == 7 && o.mode == 2);
    CHECK_NEAR(c, o.share, 0.25, 0);
    CHECK_NEAR(c, o.budget_ns, 2.5e6, 1e-9);
    CHECK(c, o.period_ns == 50000000);
    CHECK(c, o.calls == 2 && strcmp(o.last_call, "y") == 0);
    /* -xVALUE, a unique prefix, and the last of a repeated option */
    CHECK(c, PARSE(&o, &err, "-b1M", "--verb", "--rounds", "3", "--rounds", "4") == 0);
    CHECK(c, o.bytes == 1048576 && o.rounds == 4);
    CHECK(c, PARSE(&o, &err, "--period", "1e-3") == 0 && o.period_ns == 1000000);
    /* a value that starts with '-' is still the value */
    CHECK(c, PARSE(&o, &err, "--json", "--verbose") == 0 && strcmp(o.json, "--verbose") == 0);
}

static void expect_error(hm_test_counts *c, int argc, char **argv, const char *needle)
{
    opts o = {0};
    hm_error err = {{0}};
    CHECK(c, hm_options_parse(&table, argc, argv, &o, &err) == -1);
    if (strstr(err.msg, needle) == NULL) {
        c->failed++;
        fprintf(stderr, "message '%s' lacks '%s'\n", err.msg, needle);
    } else {
        c->passed++;
    }
    CHECK(c, strchr(err.msg, '\n') == NULL);
}

#define EXPECT_ERROR(c, needle, ...) expect_error(c, ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), needle)

static void test_bad_input(hm_test_counts *c)
{
    EXPECT_ERROR(c, "unknown option '--frobnicate' (see --help)", "--frobnicate");
    EXPECT_ERROR(c, "unknown option '-q'", "-q");
    EXPECT_ERROR(c, "missing value for '--rounds'", "--rounds");
    EXPECT_ERROR(c, "unexpected argument 'stray'", "-v", "stray");
    EXPECT_ERROR(c, "option '--verbose' takes no value", "--verbose=1");
    EXPECT_ERROR(c, "ambiguous option '--round'", "--round", "3");
    EXPECT_ERROR(c, "--rounds: ", "--rounds", "0");
    EXPECT_ERROR(c, "--rounds: ", "--rounds", "ten");
    EXPECT_ERROR(c, "--bytes: ", "--bytes", "2G");
    EXPECT_ERROR(c, "--share: ", "--share", "1.5");
    EXPECT_ERROR(c, "--share: ", "--share", "nan");
    EXPECT_ERROR(c, "--period (seconds): ", "--period", "0");
    EXPECT_ERROR(c, "--mode: 'later' is not one of boundary,random,now", "--mode", "later");
    EXPECT_ERROR(c, "--sink: 'disk' is not one of spool|stdout|nats", "--sink", "disk");
    EXPECT_ERROR(c, "refused by the callback", "--call", "bad");
}

static void test_help(hm_test_counts *c)
{
    opts o = {0};
    hm_error err = {{0}};
    /* --help stops the parse: what follows is not read */
    CHECK(c, PARSE(&o, &err, "-v", "--help", "--frobnicate") == 1 && o.verbose);
    CHECK(c, PARSE(&o, &err, "-h") == 1);
    CHECK(c, hm_options_find(&table, "period") == &rows[10]);
    CHECK(c, hm_options_find(&table, "perio") == NULL);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    hm_options_print_help(&table, f);
    fclose(f);
    CHECK(c, strstr(text, "\nsection one:\n") != NULL);
    CHECK(c, strstr(text, "  -v, --verbose           say more\n") != NULL);
    CHECK(c, strstr(text, "  -b, --bytes SIZE        a size\n                          with K, M, G\n") != NULL);
    CHECK(c, strstr(text, "  --json FILE|-           results as JSON\n") != NULL);
    CHECK(c, strstr(text, "  --rounds-extra N\n") != NULL); /* no help: no padding */
    /* every option of the table is in --help */
    for (size_t i = 0; i < table.n; i++) {
        char name[64];
        snprintf(name, sizeof name, "--%s", rows[i].name ? rows[i].name : "");
        CHECK(c, rows[i].kind == HM_OPT_HEADING || strstr(text, name) != NULL);
    }
    free(text);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_kinds(&c);
    test_bad_input(&c);
    test_help(&c);
    return hm_test_finish("test_options", &c);
}
