#include "lp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hm_digits.h"

int hm_lp_init(hm_lp *lp, size_t capacity_bytes, const char *host, hm_error *err)
{
    memset(lp, 0, sizeof *lp);
    lp->buf = malloc(capacity_bytes);
    if (lp->buf == NULL)
        return hm_error_set(err, "out of memory for a %zu-byte batch buffer", capacity_bytes);
    lp->cap = capacity_bytes;
    /* The host tag is the same on every line: escape it once. */
    char *p = lp->host_tag;
    const char *prefix = ",host=";
    size_t room = sizeof lp->host_tag - 1;
    size_t n = 0;
    for (const char *q = prefix; *q && n < room; q++)
        p[n++] = *q;
    for (const char *q = host; *q; q++) {
        bool esc = (*q == ',' || *q == ' ' || *q == '=');
        if (n + 2 > room)
            return hm_error_set(err, "host name '%s' too long", host);
        if (esc)
            p[n++] = '\\';
        p[n++] = *q;
    }
    p[n] = '\0';
    lp->host_tag_len = n;
    hm_lp_reset(lp, 0); /* lines before the first reset are stamped 0 */
    return 0;
}

void hm_lp_free(hm_lp *lp)
{
    free(lp->buf);
    lp->buf = NULL;
}


void hm_lp_reset(hm_lp *lp, int64_t ts_ns)
{
    lp->len = 0;
    lp->lines = 0;
    lp->lines_dropped = 0;
    lp->in_line = false;
    lp->ts_ns = ts_ns;
    /* Every line of a batch ends with the same timestamp: its text once
     * here, not per line (192 CPU lines made it a tenth of the batch). */
    size_t n = 0;
    lp->ts_text[n++] = ' ';
    if (ts_ns < 0)
        lp->ts_text[n++] = '-';
    n += hm_u64_digits(lp->ts_text + n, ts_ns < 0 ? (uint64_t)0 - (uint64_t)ts_ns : (uint64_t)ts_ns);
    lp->ts_text[n++] = '\n';
    lp->ts_text_len = n;
}

static void put(hm_lp *lp, const char *s, size_t n)
{
    if (lp->line_overflow)
        return;
    if (lp->len + n > lp->cap) {
        lp->line_overflow = true;
        return;
    }
    memcpy(lp->buf + lp->len, s, n);
    lp->len += n;
}

static void put_char(hm_lp *lp, char c)
{
    put(lp, &c, 1);
}

/* Tag keys/values and measurement names: escape comma, space, equals. */
static void put_escaped(hm_lp *lp, const char *s, bool escape_equals)
{
    /* Names and most values need no escaping: copy them in one go. */
    size_t n = strcspn(s, escape_equals ? ", =" : ", ");
    if (s[n] == '\0') {
        put(lp, s, n);
        return;
    }
    for (; *s; s++) {
        if (*s == ',' || *s == ' ' || (escape_equals && *s == '='))
            put_char(lp, '\\');
        put_char(lp, *s);
    }
}

void hm_lp_set_scope(hm_lp *lp, const char *value)
{
    lp->scope_tag_len = 0;
    lp->scope_tag[0] = '\0';
    /* Values come from the code ("host"): short identifiers, no escaping. */
    if (value == NULL || value[0] == '\0')
        return;
    int n = snprintf(lp->scope_tag, sizeof lp->scope_tag, ",scope=%s", value);
    if (n > 0 && (size_t)n < sizeof lp->scope_tag)
        lp->scope_tag_len = (size_t)n;
}

void hm_lp_begin(hm_lp *lp, const char *measurement)
{
    lp->line_start = lp->len;
    lp->fields_in_line = 0;
    lp->line_overflow = false;
    lp->in_line = true;
    put_escaped(lp, measurement, false);
    put(lp, lp->host_tag, lp->host_tag_len);
}

void hm_lp_tag(hm_lp *lp, const char *key, const char *value)
{
    if (value[0] == '\0')
        return; /* line protocol has no empty tag values */
    put_char(lp, ',');
    put_escaped(lp, key, true);
    put_char(lp, '=');
    put_escaped(lp, value, true);
}

/* Field keys are names from the code or from profile files (bare TOML
 * keys: letters, digits, '_' and '-'), so they never need escaping. */
static void field_key(hm_lp *lp, const char *key)
{
    /* The first field closes the tag set: the scope tag goes last. */
    if (lp->fields_in_line == 0 && lp->scope_tag_len > 0)
        put(lp, lp->scope_tag, lp->scope_tag_len);
    char sep = lp->fields_in_line == 0 ? ' ' : ',';
    size_t kl = strlen(key);
    if (!lp->line_overflow && lp->len + kl + 2 <= lp->cap) {
        char *dst = lp->buf + lp->len;
        dst[0] = sep;
        memcpy(dst + 1, key, kl);
        dst[kl + 1] = '=';
        lp->len += kl + 2;
    } else {
        lp->line_overflow = true;
    }
    lp->fields_in_line++;
}

size_t hm_lp_format_double(char *out, double v)
{
    if (v == 0.0) {
        out[0] = '0';
        return 1;
    }
    double a = fabs(v);
    /* Outside this range (or for tiny values) the general form is needed;
     * rare for the rates and percentages the agent publishes. */
    if (!(a < 1e15) || a < 1e-6) {
        int n = snprintf(out, 32, "%.9g", v);
        return n > 0 ? (size_t)n : 0;
    }
    /* Six decimals below 1 (IPC, small rates), three above: precise to
     * better than the sensors themselves. Divisions by constants only (the
     * compiler makes them multiplications): 192 CPU lines of 8 shares made
     * this function half of a batch's cost with divisions by a variable. */
    bool small = a < 1.0;
    int decimals = small ? 6 : 3;
    uint64_t scaled, ip, fp;
    if (small) {
        scaled = (uint64_t)(a * 1e6 + 0.5);
        ip = scaled / 1000000;
        fp = scaled % 1000000;
    } else {
        scaled = (uint64_t)(a * 1e3 + 0.5);
        ip = scaled / 1000;
        fp = scaled % 1000;
    }
    size_t n = 0;
    if (v < 0 && scaled != 0)
        out[n++] = '-';
    n += hm_u64_digits(out + n, ip);
    if (fp != 0) {
        char frac[6];
        for (int d = decimals - 1; d >= 0; d--) {
            frac[d] = (char)('0' + fp % 10);
            fp /= 10;
        }
        while (frac[decimals - 1] == '0') /* no trailing zeros */
            decimals--;
        out[n++] = '.';
        memcpy(out + n, frac, (size_t)decimals);
        n += (size_t)decimals;
    }
    return n;
}

void hm_lp_field_f64(hm_lp *lp, const char *key, double value)
{
    if (!isfinite(value))
        return;
    field_key(lp, key);
    char num[32];
    put(lp, num, hm_lp_format_double(num, value));
}

void hm_lp_field_i64(hm_lp *lp, const char *key, int64_t value)
{
    field_key(lp, key);
    char num[32];
    size_t n = 0;
    if (value < 0) {
        num[n++] = '-';
        n += hm_u64_digits(num + n, (uint64_t)0 - (uint64_t)value);
    } else {
        n += hm_u64_digits(num + n, (uint64_t)value);
    }
    num[n++] = 'i';
    put(lp, num, n);
}

void hm_lp_field_str(hm_lp *lp, const char *key, const char *value)
{
    field_key(lp, key);
    put_char(lp, '"');
    for (const char *p = value; *p != '\0'; p++) {
        char c = *p;
        if (c == '"' || c == '\\')
            put_char(lp, '\\');
        /* A line is one line: control characters become spaces. */
        put_char(lp, (unsigned char)c < 0x20 || c == 0x7f ? ' ' : c);
    }
    put_char(lp, '"');
}

void hm_lp_end(hm_lp *lp)
{
    if (!lp->in_line)
        return;
    lp->in_line = false;
    if (lp->fields_in_line == 0) {
        lp->len = lp->line_start; /* a line with no field is not valid */
        return;
    }
    put(lp, lp->ts_text, lp->ts_text_len);
    if (lp->line_overflow) {
        lp->len = lp->line_start;
        lp->lines_dropped++;
        return;
    }
    lp->lines++;
}
