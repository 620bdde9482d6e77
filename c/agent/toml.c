#include "toml.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct parser {
    const char *p;
    const char *source;
    int line;
    hm_error *err;
} parser;

static int fail(parser *ps, const char *what)
{
    return hm_error_set(ps->err, "%s:%d: %s", ps->source, ps->line, what);
}

static void skip_ws(parser *ps)
{
    while (*ps->p == ' ' || *ps->p == '\t')
        ps->p++;
}

/* After a value: only blanks and a comment may follow on the line. */
static int expect_eol(parser *ps)
{
    skip_ws(ps);
    if (*ps->p == '#')
        while (*ps->p && *ps->p != '\n')
            ps->p++;
    if (*ps->p == '\r')
        ps->p++;
    if (*ps->p != '\n' && *ps->p != '\0')
        return fail(ps, "unexpected text after value");
    return 0;
}

static bool is_bare(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           c == '_' || c == '-';
}

static int parse_name(parser *ps, char *out, size_t size, bool allow_dots)
{
    size_t n = 0;
    while (is_bare(*ps->p) || (allow_dots && *ps->p == '.')) {
        if (n + 1 >= size)
            return fail(ps, "name too long");
        out[n++] = *ps->p++;
    }
    out[n] = '\0';
    if (n == 0)
        return fail(ps, "expected a name");
    return 0;
}

static int parse_string(parser *ps, char *out, size_t size)
{
    ps->p++; /* opening quote */
    size_t n = 0;
    while (*ps->p != '"') {
        char c = *ps->p;
        if (c == '\0' || c == '\n')
            return fail(ps, "unterminated string");
        if (c == '\\') {
            ps->p++;
            switch (*ps->p) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case '"': c = '"'; break;
            case '\\': c = '\\'; break;
            default: return fail(ps, "unsupported escape in string");
            }
        }
        if (n + 1 >= size)
            return fail(ps, "string too long");
        out[n++] = c;
        ps->p++;
    }
    ps->p++;
    out[n] = '\0';
    return 0;
}

/* Integer or float; underscores between digits allowed as in TOML. */
static int parse_number(parser *ps, hm_toml_value *v)
{
    char buf[64] = "";
    size_t n = 0;
    bool is_float = false;
    while (*ps->p && strchr("+-0123456789_.eExabcdefABCDEF", *ps->p)) {
        if (*ps->p == '.' || ((*ps->p == 'e' || *ps->p == 'E') && strncmp(buf, "0x", 2) != 0))
            is_float = true;
        if (*ps->p != '_') {
            if (n + 1 >= sizeof buf)
                return fail(ps, "number too long");
            buf[n++] = *ps->p;
        }
        ps->p++;
        buf[n] = '\0';
    }
    buf[n] = '\0';
    if (n == 0)
        return fail(ps, "expected a value (string in quotes, number, true/false or [array])");
    char *end;
    errno = 0;
    if (is_float) {
        v->type = HM_TOML_FLOAT;
        v->f = strtod(buf, &end);
    } else {
        v->type = HM_TOML_INT;
        v->i = strtoll(buf, &end, 0);
        v->f = (double)v->i;
    }
    if (*end != '\0' || errno != 0) {
        char msg[128];
        snprintf(msg, sizeof msg, "bad number '%s'", buf);
        return fail(ps, msg);
    }
    return 0;
}

static int parse_array(parser *ps, hm_toml_value *v)
{
    ps->p++; /* [ */
    v->type = HM_TOML_ARRAY;
    v->n = 0;
    v->items = calloc(HM_TOML_ARRAY_MAX, sizeof *v->items);
    v->ints = calloc(HM_TOML_ARRAY_MAX, sizeof *v->ints);
    if (v->items == NULL || v->ints == NULL)
        return fail(ps, "out of memory");
    for (;;) {
        skip_ws(ps);
        if (*ps->p == ']') {
            ps->p++;
            return 0;
        }
        if (v->n == HM_TOML_ARRAY_MAX)
            return fail(ps, "array too long");
        hm_toml_type t;
        if (*ps->p == '"') {
            t = HM_TOML_STRING;
            if (parse_string(ps, v->items[v->n], HM_TOML_STR_MAX) < 0)
                return -1;
        } else {
            hm_toml_value num = {0};
            if (parse_number(ps, &num) < 0)
                return -1;
            if (num.type != HM_TOML_INT)
                return fail(ps, "arrays hold strings or integers");
            t = HM_TOML_INT;
            v->ints[v->n] = num.i;
            snprintf(v->items[v->n], HM_TOML_STR_MAX, "%lld", (long long)num.i);
        }
        if (v->n > 0 && t != v->item_type)
            return fail(ps, "array mixes strings and numbers");
        v->item_type = t;
        v->n++;
        skip_ws(ps);
        if (*ps->p == ',') {
            ps->p++;
            continue;
        }
        if (*ps->p != ']')
            return fail(ps, "expected ',' or ']' in array (arrays must be on one line)");
    }
}

static int parse_value(parser *ps, hm_toml_value *v)
{
    skip_ws(ps);
    if (*ps->p == '"') {
        v->type = HM_TOML_STRING;
        return parse_string(ps, v->str, sizeof v->str);
    }
    if (*ps->p == '[')
        return parse_array(ps, v);
    if (strncmp(ps->p, "true", 4) == 0 && !is_bare(ps->p[4])) {
        v->type = HM_TOML_BOOL;
        v->b = true;
        ps->p += 4;
        return 0;
    }
    if (strncmp(ps->p, "false", 5) == 0 && !is_bare(ps->p[5])) {
        v->type = HM_TOML_BOOL;
        v->b = false;
        ps->p += 5;
        return 0;
    }
    return parse_number(ps, v);
}

static void free_value(hm_toml_value *v)
{
    free(v->items);
    free(v->ints);
    v->items = NULL;
    v->ints = NULL;
}

int hm_toml_parse(hm_toml_doc *doc, const char *text, const char *source, hm_error *err)
{
    memset(doc, 0, sizeof *doc);
    snprintf(doc->source, sizeof doc->source, "%s", source);
    parser ps = {.p = text, .source = doc->source, .line = 1, .err = err};
    char table[HM_TOML_KEY_MAX] = "";
    for (;;) {
        skip_ws(&ps);
        if (*ps.p == '\0')
            return 0;
        if (*ps.p == '\n' || *ps.p == '\r' || *ps.p == '#') {
            while (*ps.p && *ps.p != '\n')
                ps.p++;
            if (*ps.p == '\n') {
                ps.p++;
                ps.line++;
            }
            continue;
        }
        if (*ps.p == '[') {
            ps.p++;
            skip_ws(&ps);
            if (parse_name(&ps, table, sizeof table, true) < 0)
                goto error;
            skip_ws(&ps);
            if (*ps.p != ']') {
                fail(&ps, "expected ']' after table name");
                goto error;
            }
            ps.p++;
            if (expect_eol(&ps) < 0)
                goto error;
            continue;
        }
        char key[HM_TOML_KEY_MAX];
        if (parse_name(&ps, key, sizeof key, false) < 0)
            goto error;
        skip_ws(&ps);
        if (*ps.p != '=') {
            fail(&ps, "expected '=' after key");
            goto error;
        }
        ps.p++;
        if (doc->count == doc->cap) {
            size_t cap = doc->cap ? doc->cap * 2 : 32;
            hm_toml_entry *e = realloc(doc->entries, cap * sizeof *e);
            if (e == NULL) {
                fail(&ps, "out of memory");
                goto error;
            }
            doc->entries = e;
            doc->cap = cap;
        }
        hm_toml_entry *e = &doc->entries[doc->count];
        memset(e, 0, sizeof *e);
        e->line = ps.line;
        int n = table[0] ? snprintf(e->key, sizeof e->key, "%s.%s", table, key)
                         : snprintf(e->key, sizeof e->key, "%s", key);
        if (n < 0 || (size_t)n >= sizeof e->key) {
            fail(&ps, "key too long");
            goto error;
        }
        for (size_t i = 0; i < doc->count; i++) {
            if (strcmp(doc->entries[i].key, e->key) == 0) {
                char msg[HM_TOML_KEY_MAX + 64];
                snprintf(msg, sizeof msg, "key '%s' defined twice", e->key);
                fail(&ps, msg);
                goto error;
            }
        }
        doc->count++; /* counted before parsing so free() releases arrays */
        if (parse_value(&ps, &e->value) < 0 || expect_eol(&ps) < 0)
            goto error;
    }
error:
    hm_toml_free(doc);
    return -1;
}

int hm_toml_load(hm_toml_doc *doc, const char *path, hm_error *err)
{
    memset(doc, 0, sizeof *doc);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return hm_error_errno(err, "opening config %s", path);
    char *text = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            if (cap > (1u << 20)) {
                free(text);
                fclose(f);
                return hm_error_set(err, "%s: larger than 1 MiB, not a config file", path);
            }
            char *t = realloc(text, cap);
            if (t == NULL) {
                free(text);
                fclose(f);
                return hm_error_set(err, "out of memory reading %s", path);
            }
            text = t;
        }
        size_t n = fread(text + len, 1, 4096, f);
        len += n;
        if (n < 4096)
            break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(text);
        return hm_error_set(err, "reading %s failed", path);
    }
    text[len] = '\0';
    if (strlen(text) != len) {
        free(text);
        return hm_error_set(err, "%s: contains a NUL byte, not a text file", path);
    }
    int rc = hm_toml_parse(doc, text, path, err);
    free(text);
    return rc;
}

void hm_toml_free(hm_toml_doc *doc)
{
    for (size_t i = 0; i < doc->count; i++)
        free_value(&doc->entries[i].value);
    free(doc->entries);
    doc->entries = NULL;
    doc->count = doc->cap = 0;
}

hm_toml_entry *hm_toml_get(hm_toml_doc *doc, const char *key)
{
    for (size_t i = 0; i < doc->count; i++) {
        if (strcmp(doc->entries[i].key, key) == 0) {
            doc->entries[i].used = true;
            return &doc->entries[i];
        }
    }
    return NULL;
}

static int wrong_type(hm_toml_doc *doc, const hm_toml_entry *e, const char *want, hm_error *err)
{
    return hm_error_set(err, "%s:%d: '%s' must be %s", doc->source, e->line, e->key, want);
}

int hm_toml_get_string(hm_toml_doc *doc, const char *key, char *out, size_t size, hm_error *err)
{
    hm_toml_entry *e = hm_toml_get(doc, key);
    if (e == NULL)
        return 0;
    if (e->value.type != HM_TOML_STRING)
        return wrong_type(doc, e, "a string in quotes", err);
    if (strlen(e->value.str) >= size)
        return hm_error_set(err, "%s:%d: '%s' is too long", doc->source, e->line, key);
    strcpy(out, e->value.str);
    return 1;
}

int hm_toml_get_int(hm_toml_doc *doc, const char *key, int64_t *out, hm_error *err)
{
    hm_toml_entry *e = hm_toml_get(doc, key);
    if (e == NULL)
        return 0;
    if (e->value.type != HM_TOML_INT)
        return wrong_type(doc, e, "an integer", err);
    *out = e->value.i;
    return 1;
}

int hm_toml_get_double(hm_toml_doc *doc, const char *key, double *out, hm_error *err)
{
    hm_toml_entry *e = hm_toml_get(doc, key);
    if (e == NULL)
        return 0;
    if (e->value.type != HM_TOML_INT && e->value.type != HM_TOML_FLOAT)
        return wrong_type(doc, e, "a number", err);
    *out = e->value.f;
    return 1;
}

int hm_toml_get_bool(hm_toml_doc *doc, const char *key, bool *out, hm_error *err)
{
    hm_toml_entry *e = hm_toml_get(doc, key);
    if (e == NULL)
        return 0;
    if (e->value.type != HM_TOML_BOOL)
        return wrong_type(doc, e, "true or false", err);
    *out = e->value.b;
    return 1;
}

const hm_toml_entry *hm_toml_first_unused(const hm_toml_doc *doc, const char *prefix)
{
    size_t pl = prefix ? strlen(prefix) : 0;
    for (size_t i = 0; i < doc->count; i++)
        if (!doc->entries[i].used && (pl == 0 || strncmp(doc->entries[i].key, prefix, pl) == 0))
            return &doc->entries[i];
    return NULL;
}
