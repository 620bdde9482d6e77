#include "lineproto.h"

#include "pytext.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(char *reason, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(char *reason, size_t cap, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, cap, fmt, ap);
    va_end(ap);
    return -1;
}

/* A reason with Python's repr of s[0..len) (at most max_chars), as the
 * store's parser writes it: prefix + repr + suffix. */
static int fail_repr(char *reason, size_t cap, const char *prefix, const char *s, size_t len,
                     size_t max_chars, const char *suffix)
{
    hm_text t = {reason, 0, cap};
    if (cap == 0)
        return -1;
    reason[0] = '\0';
    hm_text_add(&t, prefix, strlen(prefix));
    hm_py_repr(&t, s, len, max_chars);
    hm_text_add(&t, suffix, strlen(suffix));
    return -1;
}
#define FULL ((size_t)-1)

bool hm_lp_skippable(const char *line, size_t len)
{
    if (len > 0 && line[len - 1] == '\r')
        len--;
    return len == 0 || line[0] == '#';
}

bool hm_lp_str_eq(hm_lp_str a, const char *s)
{
    for (uint32_t i = 0; i < a.len; i++)
        if (s[i] == '\0' || s[i] != a.s[i])
            return false;
    return s[a.len] == '\0';
}

/* Python's _unescape: a backslash before one of `, =\"` is dropped. The
 * text is returned as is when it holds no backslash (the common case). */
static hm_lp_str unescape(const char *s, size_t len, char **scratch)
{
    if (memchr(s, '\\', len) == NULL)
        return (hm_lp_str){s, (uint32_t)len};
    char *out = *scratch, *o = out;
    for (size_t i = 0; i < len; i++) {
        if (s[i] == '\\' && i + 1 < len &&
            (s[i + 1] == ',' || s[i + 1] == ' ' || s[i + 1] == '=' || s[i + 1] == '\\' || s[i + 1] == '"'))
            i++;
        *o++ = s[i];
    }
    *scratch = o;
    return (hm_lp_str){out, (uint32_t)(o - out)};
}

/* Python's _split_escaped: the next unescaped separator (outside a quoted
 * string when quotes), or end. *in_string carries the quote state. */
static size_t next_sep(const char *s, size_t start, size_t len, char sep, bool quotes, bool *in_string)
{
    size_t i = start;
    while (i < len) {
        char c = s[i];
        if (c == '\\') {
            i += 2;
            continue;
        }
        if (quotes && c == '"')
            *in_string = !*in_string;
        else if (c == sep && !*in_string)
            return i;
        i++;
    }
    return len;
}

/* next_sep for text without backslashes or quotes (most lines): memchr. */
static size_t next_sep_simple(const char *s, size_t start, size_t len, char sep)
{
    const char *p = start < len ? memchr(s + start, sep, len - start) : NULL;
    return p ? (size_t)(p - s) : len;
}

#define NEXT_SEP(simple, s, start, len, sep, quotes, in_string)                                      \
    ((simple) ? next_sep_simple(s, start, len, sep) : next_sep(s, start, len, sep, quotes, in_string))

/* [+-]?digits, the whole text; the value as a double (correctly rounded,
 * like Python's float(int(text))) and, when it fits, as int64. */
static bool parse_integer(const char *s, size_t len, double *value, int64_t *ivalue, bool *fits)
{
    size_t i = 0;
    if (len == 0)
        return false;
    if (s[0] == '+' || s[0] == '-')
        i = 1;
    if (i == len)
        return false;
    uint64_t v = 0;
    bool overflow = false;
    for (size_t j = i; j < len; j++) {
        if (s[j] < '0' || s[j] > '9')
            return false;
        uint64_t d = (uint64_t)(s[j] - '0');
        if (v > (UINT64_MAX - d) / 10)
            overflow = true;
        else
            v = v * 10 + d;
    }
    bool neg = s[0] == '-';
    bool in_range = !overflow && (neg ? v <= (uint64_t)INT64_MAX + 1 : v <= (uint64_t)INT64_MAX);
    if (fits)
        *fits = in_range;
    if (in_range) {
        int64_t x = neg ? (int64_t)(0 - v) : (int64_t)v;
        if (ivalue)
            *ivalue = x;
        *value = (double)x; /* round to nearest, as Python's float(int) */
        return true;
    }
    /* Past 64 bits: only the double is wanted (a field value). */
    char buf[400];
    if (len >= sizeof buf)
        return false;
    memcpy(buf, s, len);
    buf[len] = '\0';
    *value = strtod(buf, NULL);
    return true;
}

/* Exact powers of ten as doubles (10^22 is the last one). */
static const double pow10_exact[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

/* Clinger's fast path: a mantissa below 2^53 times or divided by an exact
 * power of ten is one correctly rounded operation, so the result equals
 * strtod's. false when it does not apply (the caller uses strtod). */
static bool fast_decimal(const char *s, size_t len, double *value)
{
    size_t i = 0;
    bool neg = false;
    if (s[0] == '+' || s[0] == '-')
        neg = s[i++] == '-';
    uint64_t mant = 0;
    int digits = 0, frac = 0;
    bool point = false;
    for (; i < len; i++) {
        char c = s[i];
        if (c >= '0' && c <= '9') {
            if (mant == 0 && c == '0') {
                if (point)
                    frac++;
                continue; /* leading zeros do not count as digits */
            }
            if (++digits > 15)
                return false;
            mant = mant * 10 + (uint64_t)(c - '0');
            if (point)
                frac++;
        } else if (c == '.' && !point) {
            point = true;
        } else {
            return false; /* exponents and the rest: strtod */
        }
    }
    if (frac > 22)
        return false;
    double v = (double)mant / pow10_exact[frac];
    *value = neg ? -v : v;
    return true;
}

/* The value of a simple field read in the pass that finds its end: a
 * plain decimal (at most 15 significant digits; an exponent while the
 * power of ten it makes is exact, |k| <= 22) or an `i`
 * integer, ending at ',' or len. Gives exactly what parse_value gives for
 * such text (Clinger's fast path, as fast_decimal; an integer below 2^53
 * is exact); false for anything else (words, larger exponents, `u`, long
 * mantissas, bad text), which goes the general way. */
static bool fused_value(const char *s, size_t i, size_t len, double *value, size_t *end)
{
    bool neg = false;
    if (i < len && (s[i] == '-' || s[i] == '+'))
        neg = s[i++] == '-';
    uint64_t mant = 0;
    int sig = 0, frac = 0, digits = 0;
    bool point = false;
    for (; i < len; i++) {
        unsigned d = (unsigned)(unsigned char)s[i] - '0';
        if (d <= 9) {
            digits++;
            if (mant != 0 || d != 0) {
                if (++sig > 15)
                    return false;
                mant = mant * 10 + d;
            }
            frac += point;
        } else if (s[i] == '.' && !point) {
            point = true;
        } else {
            break;
        }
    }
    if (digits == 0)
        return false;
    int exp10 = 0;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        /* an exponent (the agent writes large values as 3.09238e+10):
         * still one correctly rounded operation while the power of ten
         * is exact (|frac - exp| <= 22) */
        size_t j = i + 1;
        bool eneg = false;
        if (j < len && (s[j] == '+' || s[j] == '-'))
            eneg = s[j++] == '-';
        int ed = 0;
        while (j < len && s[j] >= '0' && s[j] <= '9' && ed < 4)
            exp10 = exp10 * 10 + (s[j++] - '0'), ed++;
        if (ed == 0 || ed == 4 || (j < len && s[j] != ','))
            return false; /* no digits, a huge exponent, or 'i' after it: the general way */
        exp10 = eneg ? -exp10 : exp10;
        i = j;
    }
    if (i < len && s[i] != ',') {
        if (s[i] != 'i' || point || digits > 20 || (i + 1 < len && s[i + 1] != ','))
            return false;
        /* Python's float(int(text)): -0 is 0. */
        *value = mant == 0 ? 0.0 : neg ? -(double)mant : (double)mant;
        *end = i + 1;
        return true;
    }
    int k = exp10 - frac;
    if (k < -22 || k > 22)
        return false;
    double v = k < 0 ? (double)mant / pow10_exact[-k] : (double)mant * pow10_exact[k];
    *value = neg ? -v : v;
    *end = i;
    return true;
}

/* A decimal float as Python's float() reads it (no underscores): digits
 * with an optional point and exponent, or nan/inf words (rejected later as
 * non-finite by the caller). */
static bool parse_float(const char *s, size_t len, double *value, bool *is_word_out)
{
    char buf[128];
    if (len == 0 || len >= sizeof buf)
        return false;
    size_t i = 0, digits = 0;
    if (s[i] == '+' || s[i] == '-')
        i++;
    memcpy(buf, s, len);
    buf[len] = '\0';
    const char *word = buf + i;
    if ((*word == 'n' || *word == 'N' || *word == 'i' || *word == 'I') &&
        (strcasecmp(word, "nan") == 0 || strcasecmp(word, "inf") == 0 ||
         strcasecmp(word, "infinity") == 0)) {
        *value = strtod(buf, NULL);
        *is_word_out = true;
        return true;
    }
    while (i < len && s[i] >= '0' && s[i] <= '9')
        i++, digits++;
    if (i < len && s[i] == '.') {
        i++;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++, digits++;
    }
    if (digits == 0)
        return false;
    if (i < len && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < len && (s[i] == '+' || s[i] == '-'))
            i++;
        size_t exp_digits = 0;
        while (i < len && s[i] >= '0' && s[i] <= '9')
            i++, exp_digits++;
        if (exp_digits == 0)
            return false;
    }
    if (i != len)
        return false;
    if (!fast_decimal(s, len, value))
        *value = strtod(buf, NULL);
    return true;
}

static const char *const true_words[] = {"t", "T", "true", "True", "TRUE"};
static const char *const false_words[] = {"f", "F", "false", "False", "FALSE"};

static bool is_word(const char *s, size_t len, const char *const *words, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strlen(words[i]) == len && memcmp(words[i], s, len) == 0)
            return true;
    return false;
}

/* Python's parse_value. */
static int parse_value(const char *raw, size_t len, hm_lp_line *out, uint32_t k, char *reason,
                       size_t cap)
{
    out->field_is_string[k] = false;
    out->field_value[k] = 0.0;
    if (len == 0)
        return fail(reason, cap, "empty field value");
    if (raw[0] == '"') {
        if (len < 2 || raw[len - 1] != '"')
            return fail_repr(reason, cap, "unterminated string value ", raw, len, FULL, "");
        /* Strings are not summarized: the value is not kept. */
        out->field_is_string[k] = true;
        return 0;
    }
    bool maybe_word = raw[0] == 't' || raw[0] == 'T' || raw[0] == 'f' || raw[0] == 'F';
    if (maybe_word && is_word(raw, len, true_words, 5)) {
        out->field_value[k] = 1.0;
        return 0;
    }
    if (maybe_word && is_word(raw, len, false_words, 5)) {
        out->field_value[k] = 0.0;
        return 0;
    }
    char last = raw[len - 1];
    double v;
    bool word = false;
    if (last == 'i' || last == 'u') {
        /* Python's [+-]?[0-9]{1,20} */
        size_t sign = raw[0] == '+' || raw[0] == '-';
        if (len - 1 - sign > 20 || !parse_integer(raw, len - 1, &v, NULL, NULL))
            return fail_repr(reason, cap, "bad number ", raw, len, 40, "");
        if (last == 'u' && v < 0)
            return fail_repr(reason, cap, "negative unsigned value ", raw, len, FULL, "");
    } else if (!parse_float(raw, len, &v, &word)) {
        return fail_repr(reason, cap, "bad number ", raw, len, 40, "");
    }
    if (!isfinite(v)) /* a nan/inf word fails Python's pattern: shown cut at 40 */
        return fail_repr(reason, cap, "non-finite value ", raw, len, word ? 40 : FULL, "");
    out->field_value[k] = v;
    return 0;
}

static int parse_key(const char *s, size_t len, hm_lp_line *out, char **scratch, char *reason,
                     size_t cap, bool simple)
{
    bool no_quotes = false;
    size_t end = NEXT_SEP(simple, s, 0, len, ',', false, &no_quotes);
    out->measurement = unescape(s, end, scratch);
    if (out->measurement.len == 0)
        return fail(reason, cap, "empty measurement name");
    out->ntags = 0;
    while (end < len) {
        size_t start = end + 1;
        end = NEXT_SEP(simple, s, start, len, ',', false, &no_quotes);
        size_t eq = NEXT_SEP(simple, s, start, end, '=', false, &no_quotes);
        size_t eq2 = eq < end ? NEXT_SEP(simple, s, eq + 1, end, '=', false, &no_quotes) : end;
        if (eq == end || eq2 != end || eq == start || eq + 1 == end)
            return fail_repr(reason, cap, "bad tag ", s + start, end - start, FULL,
                             " (expected key=value)");
        if (out->ntags == HM_LP_MAX_TAGS)
            return fail(reason, cap, "more than %d tags", HM_LP_MAX_TAGS);
        out->tag_key[out->ntags] = unescape(s + start, eq - start, scratch);
        out->tag_value[out->ntags] = unescape(s + eq + 1, end - eq - 1, scratch);
        out->ntags++;
    }
    return 0;
}

static int parse_fields(const char *s, size_t len, hm_lp_line *out, char **scratch, char *reason,
                        size_t cap, bool simple)
{
    out->nfields = 0;
    bool in_string = false;
    size_t start = 0;
    for (;;) {
        size_t end;
        const char *part = s + start, *eq = NULL;
        if (simple) {
            /* Most fields: the name to its '=' (no escapes here), the
             * number read on the way to the ','. */
            size_t i = start;
            while (i < len && s[i] != '=' && s[i] != ',')
                i++;
            double v;
            if (i < len && s[i] == '=' && i > start && out->nfields < HM_LP_MAX_FIELDS &&
                fused_value(s, i + 1, len, &v, &end)) {
                uint32_t k = out->nfields++;
                out->field_name[k] = (hm_lp_str){part, (uint32_t)(i - start)};
                out->field_is_string[k] = false;
                out->field_value[k] = v;
                if (end >= len)
                    return 0;
                start = end + 1;
                continue;
            }
            /* One pass finds the '=' and the ',' (fields are short: a
             * loop beats two memchr calls). */
            end = start;
            while (end < len && s[end] != ',') {
                if (eq == NULL && s[end] == '=')
                    eq = s + end;
                end++;
            }
        } else {
            end = next_sep(s, start, len, ',', true, &in_string);
            eq = memchr(part, '=', end - start);
        }
        size_t plen = end - start;
        if (eq == NULL || eq == part)
            return fail_repr(reason, cap, "bad field ", part, plen, FULL, " (expected name=value)");
        if (out->nfields == HM_LP_MAX_FIELDS)
            return fail(reason, cap, "more than %d fields", HM_LP_MAX_FIELDS);
        uint32_t k = out->nfields++;
        out->field_name[k] = unescape(part, (size_t)(eq - part), scratch);
        if (parse_value(eq + 1, plen - (size_t)(eq + 1 - part), out, k, reason, cap) != 0)
            return -1;
        if (end >= len)
            return in_string ? fail(reason, cap, "unterminated string value") : 0;
        start = end + 1;
    }
}

int hm_lp_sections(const char *line, size_t len, hm_lp_cut *cut, char *reason, size_t reason_cap)
{
    if (len > 0 && line[len - 1] == '\r')
        len--;
    /* Sections: key, fields, timestamp. The quote state runs over the
     * whole line, as in the Python splitter. */
    size_t ends[3];
    size_t nsections = 0, start = 0;
    bool in_string = false;
    bool simple = memchr(line, '\\', len) == NULL && memchr(line, '"', len) == NULL;
    cut->simple = simple;
    for (;;) {
        size_t end = NEXT_SEP(simple, line, start, len, ' ', true, &in_string);
        if (nsections < 3)
            ends[nsections] = end;
        nsections++;
        if (end >= len)
            break;
        start = end + 1;
    }
    if (in_string)
        return fail(reason, reason_cap, "unterminated string value");
    if (nsections == 2)
        return fail(reason, reason_cap,
                    "no timestamp (spool lines carry the scheduled sampling time)");
    if (nsections != 3)
        return fail(reason, reason_cap,
                    "expected 'measurement,tags fields timestamp', found %zu sections", nsections);
    cut->len = len;
    cut->key_end = ends[0];
    cut->fields_end = ends[1];
    return 0;
}

int hm_lp_parse_key(const char *line, const hm_lp_cut *cut, hm_lp_line *out, char *scratch,
                    char *reason, size_t reason_cap)
{
    char *scratch_at = scratch;
    return parse_key(line, cut->key_end, out, &scratch_at, reason, reason_cap, cut->simple);
}

int hm_lp_parse_rest(const char *line, const hm_lp_cut *cut, hm_lp_line *out, char *scratch,
                     char *reason, size_t reason_cap)
{
    double ignored;
    bool fits = false;
    const char *ts = line + cut->fields_end + 1;
    size_t ts_len = cut->len - cut->fields_end - 1;
    if (ts_len != 0 && ts_len == out->last_ts_len && memcmp(ts, out->last_ts, ts_len) == 0) {
        out->time_ns = out->last_ts_ns;
    } else {
        if (!parse_integer(ts, ts_len, &ignored, &out->time_ns, &fits) || !fits)
            return fail_repr(reason, reason_cap, "bad timestamp ", ts, ts_len, 40,
                             " (ns since 1970, below 2^63)");
        if (ts_len <= sizeof out->last_ts) {
            memcpy(out->last_ts, ts, ts_len);
            out->last_ts_len = (uint32_t)ts_len;
            out->last_ts_ns = out->time_ns;
        }
    }
    /* Past the key's share of the scratch: both may be in use at once. */
    char *scratch_at = scratch + cut->key_end;
    return parse_fields(line + cut->key_end + 1, cut->fields_end - cut->key_end - 1, out, &scratch_at,
                        reason, reason_cap, cut->simple);
}

int hm_lp_parse_line(const char *line, size_t len, hm_lp_line *out, char *scratch, char *reason,
                     size_t reason_cap)
{
    hm_lp_cut cut;
    if (hm_lp_sections(line, len, &cut, reason, reason_cap) != 0 ||
        hm_lp_parse_key(line, &cut, out, scratch, reason, reason_cap) != 0)
        return -1;
    return hm_lp_parse_rest(line, &cut, out, scratch, reason, reason_cap);
}
