#include "json_read.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_DEPTH 32

typedef struct reader {
    const char *p, *end;
    hm_arena *arena; /* the document's */
    hm_error *err;
    int depth;
} reader;

static void *alloc(reader *r, size_t n)
{
    return hm_arena_alloc(r->arena, n);
}

static void skip_ws(reader *r)
{
    while (r->p < r->end && (*r->p == ' ' || *r->p == '\n' || *r->p == '\r' || *r->p == '\t'))
        r->p++;
}

static int bad(reader *r, const char *what)
{
    return hm_error_set(r->err, "bad JSON: %s", what);
}

static int hex4(const char *p, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

static int read_string(reader *r, char **out, size_t *out_len)
{
    r->p++; /* opening quote */
    const char *start = r->p;
    while (r->p < r->end && *r->p != '"') {
        if (*r->p == '\\')
            r->p++;
        r->p++;
    }
    if (r->p >= r->end)
        return bad(r, "unterminated string");
    size_t raw = (size_t)(r->p - start);
    char *s = alloc(r, raw + 1), *o = s;
    if (s == NULL)
        return hm_error_set(r->err, "out of memory reading JSON");
    for (const char *q = start; q < r->p; q++) {
        if (*q != '\\') {
            *o++ = *q;
            continue;
        }
        q++;
        switch (*q) {
        case 'n': *o++ = '\n'; break;
        case 't': *o++ = '\t'; break;
        case 'r': *o++ = '\r'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'u': {
            unsigned cp;
            if (r->p - q < 5 || hex4(q + 1, &cp) != 0)
                return bad(r, "bad \\u escape");
            q += 4;
            /* Surrogate pairs are not expected in hushmon names; a lone
             * one is written as is (3 bytes), like other code points. */
            if (cp < 0x80) {
                *o++ = (char)cp;
            } else if (cp < 0x800) {
                *o++ = (char)(0xC0 | (cp >> 6));
                *o++ = (char)(0x80 | (cp & 0x3F));
            } else {
                *o++ = (char)(0xE0 | (cp >> 12));
                *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                *o++ = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: *o++ = *q; break; /* \" \\ \/ */
        }
    }
    *o = '\0';
    *out = s;
    *out_len = (size_t)(o - s);
    r->p++; /* closing quote */
    return 0;
}

static int read_value(reader *r, hm_jnode **out);

static int read_container(reader *r, hm_jnode *node, char close)
{
    size_t cap = 0;
    r->p++;
    skip_ws(r);
    if (r->p < r->end && *r->p == close) {
        r->p++;
        return 0;
    }
    for (;;) {
        char *key = NULL;
        size_t key_len;
        skip_ws(r);
        if (close == '}') {
            if (r->p >= r->end || *r->p != '"')
                return bad(r, "expected a key");
            if (read_string(r, &key, &key_len) != 0)
                return -1;
            skip_ws(r);
            if (r->p >= r->end || *r->p != ':')
                return bad(r, "expected ':'");
            r->p++;
        }
        hm_jnode *child;
        if (read_value(r, &child) != 0)
            return -1;
        child->key = key;
        if (node->n == cap) {
            size_t ncap = cap ? cap * 2 : 8;
            hm_jnode **items = alloc(r, ncap * sizeof *items);
            if (items == NULL)
                return hm_error_set(r->err, "out of memory reading JSON");
            if (node->n)
                memcpy(items, node->items, node->n * sizeof *items);
            node->items = items;
            cap = ncap;
        }
        node->items[node->n++] = child;
        skip_ws(r);
        if (r->p < r->end && *r->p == ',') {
            r->p++;
            continue;
        }
        if (r->p < r->end && *r->p == close) {
            r->p++;
            return 0;
        }
        return bad(r, close == '}' ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int read_number(reader *r, hm_jnode *node)
{
    const char *start = r->p;
    bool integer = true;
    while (r->p < r->end && strchr("+-0123456789.eE", *r->p) != NULL && *r->p != '\0') {
        if (*r->p == '.' || *r->p == 'e' || *r->p == 'E')
            integer = false;
        r->p++;
    }
    char buf[64];
    size_t n = (size_t)(r->p - start);
    if (n == 0 || n >= sizeof buf)
        return bad(r, "bad number");
    memcpy(buf, start, n);
    buf[n] = '\0';
    char *end;
    node->type = HM_JNUM;
    node->d = strtod(buf, &end);
    if (*end != '\0')
        return bad(r, "bad number");
    if (integer) {
        errno = 0;
        long long v = strtoll(buf, &end, 10);
        node->is_int = errno == 0 && *end == '\0';
        node->i = (int64_t)v;
    }
    return 0;
}

static int read_value(reader *r, hm_jnode **out)
{
    skip_ws(r);
    if (r->p >= r->end)
        return bad(r, "unexpected end");
    hm_jnode *node = alloc(r, sizeof *node);
    if (node == NULL)
        return hm_error_set(r->err, "out of memory reading JSON");
    memset(node, 0, sizeof *node);
    *out = node;
    char c = *r->p;
    if (c == '{' || c == '[') {
        if (++r->depth > MAX_DEPTH)
            return bad(r, "nested too deep");
        node->type = c == '{' ? HM_JOBJ : HM_JARR;
        int rc = read_container(r, node, c == '{' ? '}' : ']');
        r->depth--;
        return rc;
    }
    if (c == '"') {
        node->type = HM_JSTR;
        return read_string(r, &node->s, &node->slen);
    }
    static const struct { const char *word; hm_jtype type; double d; } words[] = {
        {"true", HM_JBOOL, 1}, {"false", HM_JBOOL, 0}, {"null", HM_JNULL, 0}};
    for (size_t i = 0; i < 3; i++) {
        size_t n = strlen(words[i].word);
        if ((size_t)(r->end - r->p) >= n && memcmp(r->p, words[i].word, n) == 0) {
            node->type = words[i].type;
            node->d = words[i].d;
            r->p += n;
            return 0;
        }
    }
    return read_number(r, node);
}

int hm_json_read(const char *text, size_t len, hm_jdoc *doc, hm_error *err)
{
    *doc = (hm_jdoc){0};
    reader r = {.p = text, .end = text + len, .arena = &doc->arena, .err = err, .depth = 0};
    int rc = read_value(&r, &doc->root);
    if (rc == 0) {
        skip_ws(&r);
        if (r.p != r.end)
            rc = bad(&r, "text after the value");
    }
    if (rc != 0) {
        hm_jdoc_free(doc);
        return -1;
    }
    return 0;
}

void hm_jdoc_free(hm_jdoc *doc)
{
    hm_arena_free(&doc->arena);
    doc->root = NULL;
}

const hm_jnode *hm_jget(const hm_jnode *obj, const char *key)
{
    if (obj == NULL || obj->type != HM_JOBJ)
        return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (strcmp(obj->items[i]->key, key) == 0)
            return obj->items[i];
    return NULL;
}
