/* One option table per C program: each row names a long option (and a
 * short letter), the kind of its value with its range or choices, where
 * the value goes in the program's options struct (an offset from the base
 * pointer given to the parser, or a callback), and its help text. The
 * parser and --help both read the table, so they cannot drift apart.
 *
 * Parsing is deterministic and needs no MPI: the MPI programs parse the
 * same argv on every rank and every rank reaches the same verdict, so bad
 * input stops all of them. Errors are one line ("--level: 200 is outside
 * [0, 100]"); the program prints it with its name and exits non-zero. */
#ifndef HM_OPTIONS_H
#define HM_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "hm_error.h"

typedef enum hm_opt_kind {
    HM_OPT_HEADING, /* no option: a heading line in --help (help is the text) */
    HM_OPT_HELP,    /* no value: parsing stops, hm_options_parse returns 1 */
    HM_OPT_SET,     /* no value: the bool at offset becomes true */
    HM_OPT_CLEAR,   /* no value: the bool at offset becomes false */
    HM_OPT_STRING,  /* const char * = the argument itself (argv's, not copied) */
    HM_OPT_TEXT,    /* copied into char[size] at offset; one of choices when set */
    HM_OPT_INT64,   /* int64_t in [min, max]; K/M/G (x1024) with suffixes */
    HM_OPT_INT,     /* int in [min, max] */
    HM_OPT_DOUBLE,  /* double in [dmin, dmax], stored times scale (1 when 0) */
    HM_OPT_SCALED,  /* double in [dmin, dmax], stored as int64_t round(v * scale) */
    HM_OPT_CHOICE,  /* one of choices "a|b|c": its index (0, 1, ...) stored as int */
    HM_OPT_CALL,    /* call() checks and stores (value NULL for an option without one) */
} hm_opt_kind;

typedef struct hm_option hm_option;
typedef int (*hm_opt_call)(void *base, const hm_option *opt, const char *value, hm_error *err);

struct hm_option {
    const char *name;    /* long name without "--" */
    char letter;         /* short form -x; 0 for none */
    hm_opt_kind kind;
    size_t offset;       /* of the value in the struct at base */
    size_t size;         /* HM_OPT_TEXT: the char array's size */
    const char *arg;     /* the value's name in --help ("N", "SEC", "FILE|-"); NULL: no value */
    const char *unit;    /* named in errors: "--period (seconds): ..."; NULL none */
    int64_t min, max;    /* HM_OPT_INT64, HM_OPT_INT */
    double dmin, dmax;   /* HM_OPT_DOUBLE, HM_OPT_SCALED */
    double scale;
    bool suffixes;       /* HM_OPT_INT64: K, M, G */
    const char *choices; /* HM_OPT_CHOICE, HM_OPT_TEXT: "a|b|c" */
    hm_opt_call call;    /* HM_OPT_CALL */
    const void *data;    /* for call (the agent: the option's TOML key) */
    const char *help;    /* '\n' starts another line; "" prints no help */
};

/* A whole table: its rows and how many. */
typedef struct hm_option_table {
    const hm_option *rows;
    size_t n;
} hm_option_table;

#define HM_OPTION_TABLE(rows) ((hm_option_table){(rows), sizeof(rows) / sizeof((rows)[0])})

/* Parses argv[1..argc-1] ("--name VALUE", "--name=VALUE", "-x VALUE",
 * "-xVALUE"; a unique prefix of a long name counts as the name, as with
 * getopt_long) into base. Later options override earlier ones; no
 * positional arguments. Returns 0, 1 at an HM_OPT_HELP option (nothing
 * after it is read), or -1 with err set to one line. */
int hm_options_parse(const hm_option_table *t, int argc, char **argv, void *base, hm_error *err);
/* Checks and stores one value as opt says (value NULL for kinds without
 * one): what the parser does per option, for values from elsewhere (the
 * agent's flags kept for reloads). Errors name the option as "--name". */
int hm_option_store(const hm_option *opt, void *base, const char *value, hm_error *err);
/* Whether value is one of choices ("a|b|c"); *index its place (0, 1, ...). */
bool hm_options_choice(const char *choices, const char *value, int *index);
/* The option whose long name is name (no "--"), or NULL. */
const hm_option *hm_options_find(const hm_option_table *t, const char *name);
/* One row of --help: "  -x, --name ARG   help" (continued lines aligned),
 * then suffix (e.g. "  [toml.key]") when not NULL. */
void hm_option_print(const hm_option *opt, const char *suffix, FILE *out);
/* Every row of the table. */
void hm_options_print_help(const hm_option_table *t, FILE *out);

#endif
