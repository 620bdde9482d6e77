/* A small JSON reader for the summaries the top reducer consumes: the
 * document becomes a tree of nodes in one arena. Numbers keep their double
 * value and, when written as integers that fit, their exact int64 (time_ns
 * passes 2^53). Strings are unescaped (\uXXXX to UTF-8). */
#ifndef HM_JSON_READ_H
#define HM_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "hm_error.h"

typedef enum { HM_JNULL, HM_JBOOL, HM_JNUM, HM_JSTR, HM_JARR, HM_JOBJ } hm_jtype;

typedef struct hm_jnode hm_jnode;
struct hm_jnode {
    hm_jtype type;
    bool is_int;       /* HM_JNUM written without point or exponent, in int64 range */
    int64_t i;
    double d;          /* HM_JNUM, HM_JBOOL (0/1) */
    char *s;           /* HM_JSTR; also the key when this node is an object member */
    size_t slen;
    char *key;
    size_t n;          /* HM_JARR / HM_JOBJ: children */
    hm_jnode **items;
};

typedef struct hm_jdoc {
    hm_jnode *root;
    hm_arena arena;    /* every node and string: nodes never move, one free releases all */
} hm_jdoc;

int hm_json_read(const char *text, size_t len, hm_jdoc *doc, hm_error *err);
void hm_jdoc_free(hm_jdoc *doc);
/* Member of an object, or NULL. */
const hm_jnode *hm_jget(const hm_jnode *obj, const char *key);

#endif
