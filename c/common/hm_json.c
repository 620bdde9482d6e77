#include "hm_json.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>

#include "hm_digits.h"

void hm_json_init(hm_json *j, FILE *out, bool pretty)
{
    j->out = out;
    j->depth = 0;
    j->pretty = pretty;
    j->need_comma[0] = false;
    j->after_key = false;
    j->overflow = false;
}

static void indent(hm_json *j)
{
    if (!j->pretty)
        return;
    fputc('\n', j->out);
    for (int i = 0; i < j->depth; i++)
        fputs("  ", j->out);
}

/* Called before every value or key: writes the separator it needs. */
static void before_item(hm_json *j)
{
    if (j->after_key) {
        j->after_key = false;
        return;
    }
    if (j->depth > 0 && j->need_comma[j->depth])
        fputc(',', j->out);
    if (j->depth > 0)
        indent(j);
    j->need_comma[j->depth] = true;
}

static void open(hm_json *j, char c)
{
    before_item(j);
    fputc(c, j->out);
    if (j->depth + 1 >= HM_JSON_MAX_DEPTH) {
        j->overflow = true;
        return;
    }
    j->depth++;
    j->need_comma[j->depth] = false;
}

static void close(hm_json *j, char c)
{
    if (j->depth == 0) {
        j->overflow = true;
        return;
    }
    bool had_items = j->need_comma[j->depth];
    j->depth--;
    if (had_items)
        indent(j);
    fputc(c, j->out);
}

void hm_json_object_begin(hm_json *j) { open(j, '{'); }
void hm_json_object_end(hm_json *j) { close(j, '}'); }
void hm_json_array_begin(hm_json *j) { open(j, '['); }
void hm_json_array_end(hm_json *j) { close(j, ']'); }

static void write_escaped(FILE *out, const char *s)
{
    fputc('"', out);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        /* A run that needs no escape goes out in one write (summaries
         * write thousands of keys; a call per character shows). */
        const unsigned char *run = p;
        while (*run >= 0x20 && *run != '"' && *run != '\\')
            run++;
        if (run > p) {
            fwrite(p, 1, (size_t)(run - p), out);
            p = run;
            if (*p == '\0')
                break;
        }
        switch (*p) {
        case '"': fputs("\\\"", out); break;
        case '\\': fputs("\\\\", out); break;
        case '\n': fputs("\\n", out); break;
        case '\r': fputs("\\r", out); break;
        case '\t': fputs("\\t", out); break;
        default:
            if (*p < 0x20)
                fprintf(out, "\\u%04x", *p);
            else
                fputc(*p, out);
        }
    }
    fputc('"', out);
}

void hm_json_key(hm_json *j, const char *key)
{
    before_item(j);
    write_escaped(j->out, key);
    fputs(j->pretty ? ": " : ":", j->out);
    j->after_key = true;
}

void hm_json_string(hm_json *j, const char *s)
{
    before_item(j);
    if (s == NULL)
        fputs("null", j->out);
    else
        write_escaped(j->out, s);
}

/* The shortest %g form that reads back as the same double: 1.5e-06, not
 * 1.4999999999999999e-06, so files stay readable and exact. */
static void write_shortest(FILE *out, double v)
{
    char buf[32];
    for (int precision = 15; precision <= 17; precision++) {
        snprintf(buf, sizeof buf, "%.*g", precision, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, out);
}

void hm_json_double(hm_json *j, double v)
{
    before_item(j);
    if (isfinite(v))
        write_shortest(j->out, v);
    else
        fputs("null", j->out);
}

static void write_u64(FILE *out, uint64_t v, bool minus)
{
    char buf[1 + HM_U64_DIGITS_MAX];
    size_t n = 0;
    if (minus)
        buf[n++] = '-';
    n += hm_u64_digits(buf + n, v);
    fwrite(buf, 1, n, out);
}

void hm_json_int(hm_json *j, int64_t v)
{
    before_item(j);
    write_u64(j->out, v < 0 ? 0 - (uint64_t)v : (uint64_t)v, v < 0);
}

void hm_json_uint(hm_json *j, uint64_t v)
{
    before_item(j);
    write_u64(j->out, v, false);
}

void hm_json_bool(hm_json *j, bool v)
{
    before_item(j);
    fputs(v ? "true" : "false", j->out);
}

void hm_json_null(hm_json *j)
{
    before_item(j);
    fputs("null", j->out);
}

void hm_json_kv_string(hm_json *j, const char *key, const char *s) { hm_json_key(j, key); hm_json_string(j, s); }
void hm_json_kv_double(hm_json *j, const char *key, double v) { hm_json_key(j, key); hm_json_double(j, v); }
void hm_json_kv_int(hm_json *j, const char *key, int64_t v) { hm_json_key(j, key); hm_json_int(j, v); }
void hm_json_kv_uint(hm_json *j, const char *key, uint64_t v) { hm_json_key(j, key); hm_json_uint(j, v); }
void hm_json_kv_bool(hm_json *j, const char *key, bool v) { hm_json_key(j, key); hm_json_bool(j, v); }

int hm_json_finish(hm_json *j)
{
    fputc('\n', j->out);
    if (fflush(j->out) != 0 || ferror(j->out))
        return -1;
    return (j->depth == 0 && !j->overflow) ? 0 : -1;
}
