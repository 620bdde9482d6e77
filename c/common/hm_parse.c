#include "hm_parse.h"

#include "hm_array.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int hm_parse_int64(const char *s, int64_t min, int64_t max, int allow_suffix,
                   int64_t *out, hm_error *err)
{
    if (s == NULL || *s == '\0')
        return hm_error_set(err, "empty value where a number was expected");
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (end == s)
        return hm_error_set(err, "'%s' is not a number", s);
    if (errno == ERANGE)
        return hm_error_set(err, "'%s' is out of range", s);
    long long mult = 1;
    if (allow_suffix && *end != '\0' && end[1] == '\0') {
        switch (*end) {
        case 'k': case 'K': mult = 1024LL; end++; break;
        case 'm': case 'M': mult = 1024LL * 1024; end++; break;
        case 'g': case 'G': mult = 1024LL * 1024 * 1024; end++; break;
        default: break;
        }
    }
    if (*end != '\0')
        return hm_error_set(err, "'%s' is not a whole number", s);
    if (v != 0 && (v > INT64_MAX / mult || v < INT64_MIN / mult))
        return hm_error_set(err, "'%s' is out of range", s);
    v *= mult;
    if (v < min || v > max)
        return hm_error_set(err, "%s is outside [%lld, %lld]", s, (long long)min, (long long)max);
    *out = v;
    return 0;
}

int hm_parse_double(const char *s, double min, double max, double *out, hm_error *err)
{
    if (s == NULL || *s == '\0')
        return hm_error_set(err, "empty value where a number was expected");
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || *end != '\0')
        return hm_error_set(err, "'%s' is not a number", s);
    if (errno == ERANGE || !isfinite(v))
        return hm_error_set(err, "'%s' is out of range", s);
    if (v < min || v > max)
        return hm_error_set(err, "%s is outside [%g, %g]", s, min, max);
    *out = v;
    return 0;
}

typedef struct size_vec {
    int64_t *v;
    size_t n, cap;
} size_vec;

static int push(size_vec *sv, int64_t x, hm_error *err)
{
    if (sv->n == sv->cap) {
        int64_t *v = hm_array_grow(sv->v, &sv->cap, sizeof *v, 16, 1 << 20, "sizes in a list", err);
        if (v == NULL)
            return -1;
        sv->v = v;
    }
    sv->v[sv->n++] = x;
    return 0;
}

/* One comma-separated item: a single size or first:last:step. */
static int parse_item(char *item, size_vec *sv, hm_error *err)
{
    const int64_t max = INT64_C(1) << 40;
    char *first_colon = strchr(item, ':');
    if (first_colon == NULL) {
        int64_t v;
        if (hm_parse_int64(item, 0, max, 1, &v, err) != 0)
            return hm_error_wrap(err, "size list item '%s'", item);
        return push(sv, v, err);
    }
    char *second_colon = strchr(first_colon + 1, ':');
    if (second_colon == NULL || strchr(second_colon + 1, ':') != NULL)
        return hm_error_set(err, "size range '%s' must be FIRST:LAST:xFACTOR or FIRST:LAST:+STEP", item);
    *first_colon = '\0';
    *second_colon = '\0';
    const char *step = second_colon + 1;
    int64_t first, last, amount;
    if (hm_parse_int64(item, 0, max, 1, &first, err) != 0 ||
        hm_parse_int64(first_colon + 1, 0, max, 1, &last, err) != 0)
        return hm_error_wrap(err, "size range");
    if (last < first)
        return hm_error_set(err, "size range goes from %lld down to %lld", (long long)first, (long long)last);
    if (step[0] != 'x' && step[0] != '+')
        return hm_error_set(err, "size range step '%s' must start with x (multiply) or + (add)", step);
    if (hm_parse_int64(step + 1, 1, max, 1, &amount, err) != 0)
        return hm_error_wrap(err, "size range step");
    if (step[0] == 'x') {
        if (amount < 2)
            return hm_error_set(err, "size range factor must be at least 2");
        if (first == 0) {
            /* 0 x anything stays 0: emit 0, then carry on from 1. */
            if (push(sv, 0, err) != 0)
                return -1;
            first = 1;
        }
        for (int64_t v = first; v <= last; v *= amount) {
            if (push(sv, v, err) != 0)
                return -1;
            if (v > last / amount)
                break;
        }
    } else {
        for (int64_t v = first; v <= last; v += amount)
            if (push(sv, v, err) != 0)
                return -1;
    }
    return 0;
}

int hm_parse_size_list(const char *s, int64_t **out, size_t *count, hm_error *err)
{
    if (s == NULL || *s == '\0')
        return hm_error_set(err, "empty size list");
    char *copy = strdup(s);
    if (copy == NULL)
        return hm_error_set(err, "out of memory");
    size_vec sv = {0};
    int rc = 0;
    char *save = NULL;
    size_t items = 0;
    for (char *tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        items++;
        if ((rc = parse_item(tok, &sv, err)) != 0)
            break;
    }
    free(copy);
    if (rc == 0 && (items == 0 || sv.n == 0))
        rc = hm_error_set(err, "size list '%s' has no sizes", s);
    if (rc != 0) {
        free(sv.v);
        return -1;
    }
    *out = sv.v;
    *count = sv.n;
    return 0;
}

int hm_split_list(char *text, char **items, int max)
{
    int n = 0;
    char *save = NULL;
    for (char *t = strtok_r(text, ", ", &save); t != NULL; t = strtok_r(NULL, ", ", &save)) {
        if (n == max)
            return -1;
        items[n++] = t;
    }
    return n;
}
