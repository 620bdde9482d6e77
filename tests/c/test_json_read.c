/* The top reducer's JSON reader (c/transport/json_read.c) on the shared
 * arena (arena.c): values, exact integers past 2^53, escapes, errors, and
 * documents larger than one 64 KiB chunk (many small pieces, and one
 * string larger than a chunk). The sanitizer build checks that every
 * piece is inside its chunk and that one free releases all. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hm_test.h"
#include "json_read.h"

static void check_values(hm_test_counts *c)
{
    const char *text = "{\"time_ns\": 1795430036000000001, \"x\": -2.5e3, \"ok\": true,"
                       " \"none\": null, \"name\": \"a\\\"b\\u00e9\\n\", \"list\": [1, [], {}]}";
    hm_jdoc doc;
    hm_error err;
    CHECK(c, hm_json_read(text, strlen(text), &doc, &err) == 0);
    const hm_jnode *t = hm_jget(doc.root, "time_ns");
    CHECK(c, t != NULL && t->is_int && t->i == INT64_C(1795430036000000001));
    const hm_jnode *x = hm_jget(doc.root, "x");
    CHECK(c, x != NULL && !x->is_int && x->d == -2500.0);
    CHECK(c, hm_jget(doc.root, "ok") != NULL && hm_jget(doc.root, "ok")->d == 1);
    CHECK(c, hm_jget(doc.root, "none") != NULL && hm_jget(doc.root, "none")->type == HM_JNULL);
    const hm_jnode *name = hm_jget(doc.root, "name");
    CHECK(c, name != NULL && name->slen == 6 && memcmp(name->s, "a\"b\xc3\xa9\n", 6) == 0);
    const hm_jnode *list = hm_jget(doc.root, "list");
    CHECK(c, list != NULL && list->type == HM_JARR && list->n == 3 &&
                 list->items[1]->type == HM_JARR && list->items[1]->n == 0 &&
                 list->items[2]->type == HM_JOBJ);
    CHECK(c, hm_jget(doc.root, "missing") == NULL);
    hm_jdoc_free(&doc);
    CHECK(c, doc.root == NULL && doc.arena.head == NULL);
}

static void check_errors(hm_test_counts *c)
{
    const char *bad[] = {"{\"a\": 1", "[1, 2] x", "\"open", "{\"a\" 1}", "[1,,2]", "", "-"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        hm_jdoc doc;
        hm_error err = {0};
        CHECK(c, hm_json_read(bad[i], strlen(bad[i]), &doc, &err) != 0 &&
                     strncmp(err.msg, "bad JSON: ", 10) == 0);
        CHECK(c, doc.root == NULL && doc.arena.head == NULL); /* freed on error */
    }
    char deep[80];
    memset(deep, '[', 40);
    memset(deep + 40, ']', 40);
    hm_jdoc doc;
    hm_error err;
    CHECK(c, hm_json_read(deep, sizeof deep, &doc, &err) != 0 &&
                 strstr(err.msg, "nested too deep") != NULL);
}

/* 20,000 members (nodes, keys and item arrays well past one chunk) and one
 * 100 KiB string (a chunk of its own). */
static void check_large(hm_test_counts *c)
{
    size_t cap = 2 << 20, len = 0;
    char *text = malloc(cap);
    CHECK(c, text != NULL);
    if (text == NULL)
        return;
    len += (size_t)snprintf(text + len, cap - len, "{\"big\": \"");
    memset(text + len, 'q', 100000);
    len += 100000;
    len += (size_t)snprintf(text + len, cap - len, "\"");
    for (int i = 0; i < 20000; i++)
        len += (size_t)snprintf(text + len, cap - len, ", \"k%d\": [%d, \"v%d\"]", i, i, i);
    len += (size_t)snprintf(text + len, cap - len, "}");
    hm_jdoc doc;
    hm_error err;
    CHECK(c, hm_json_read(text, len, &doc, &err) == 0);
    CHECK(c, doc.root != NULL && doc.root->n == 20001);
    const hm_jnode *big = hm_jget(doc.root, "big");
    CHECK(c, big != NULL && big->slen == 100000 && big->s[0] == 'q' && big->s[99999] == 'q' &&
                 big->s[100000] == '\0');
    const hm_jnode *last = hm_jget(doc.root, "k19999");
    CHECK(c, last != NULL && last->n == 2 && last->items[0]->i == 19999 &&
                 strcmp(last->items[1]->s, "v19999") == 0);
    hm_jdoc_free(&doc);
    free(text);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    check_values(&c);
    check_errors(&c);
    check_large(&c);
    return hm_test_finish("test_json_read", &c);
}
