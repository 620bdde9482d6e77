#include "hm_options.h"

#include <math.h>
#include <string.h>

#include "hm_parse.h"

/* Help text starts in this column; a longer option name pushes it right. */
#define HELP_COLUMN 26

static bool takes_value(const hm_option *o)
{
    return o->arg != NULL;
}

const hm_option *hm_options_find(const hm_option_table *t, const char *name)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->rows[i].kind != HM_OPT_HEADING && strcmp(t->rows[i].name, name) == 0)
            return &t->rows[i];
    return NULL;
}

/* The exact name, else the one long name that starts with it (getopt_long's
 * rule). *ambiguous is set when several do. */
static const hm_option *find_long(const hm_option_table *t, const char *name, size_t len,
                                  bool *ambiguous)
{
    const hm_option *prefix = NULL;
    *ambiguous = false;
    for (size_t i = 0; i < t->n; i++) {
        const hm_option *o = &t->rows[i];
        if (o->kind == HM_OPT_HEADING || strncmp(o->name, name, len) != 0)
            continue;
        if (o->name[len] == '\0')
            return o;
        *ambiguous = prefix != NULL;
        prefix = o;
    }
    return *ambiguous ? NULL : prefix;
}

static const hm_option *find_letter(const hm_option_table *t, char letter)
{
    for (size_t i = 0; i < t->n; i++)
        if (t->rows[i].kind != HM_OPT_HEADING && t->rows[i].letter == letter)
            return &t->rows[i];
    return NULL;
}

bool hm_options_choice(const char *choices, const char *value, int *index)
{
    size_t len = strlen(value);
    int i = 0;
    for (const char *p = choices; *p != '\0'; i++) {
        size_t item = strcspn(p, "|");
        if (item == len && strncmp(p, value, len) == 0) {
            *index = i;
            return true;
        }
        p += item;
        if (*p == '|')
            p++;
    }
    return false;
}

/* "--name" or "--name (unit)": how errors name the option. */
static int fail(const hm_option *o, hm_error *err)
{
    if (o->unit != NULL)
        return hm_error_wrap(err, "--%s (%s)", o->name, o->unit);
    return hm_error_wrap(err, "--%s", o->name);
}

int hm_option_store(const hm_option *o, void *base, const char *value, hm_error *err)
{
    char *at = (char *)base + o->offset;
    int64_t v;
    double d;
    int index;
    switch (o->kind) {
    case HM_OPT_HEADING:
    case HM_OPT_HELP:
        return 0;
    case HM_OPT_SET:
    case HM_OPT_CLEAR:
        *(bool *)at = o->kind == HM_OPT_SET;
        return 0;
    case HM_OPT_STRING:
        *(const char **)at = value;
        return 0;
    case HM_OPT_TEXT:
        if (o->choices != NULL && !hm_options_choice(o->choices, value, &index))
            return hm_error_set(err, "--%s: '%s' is not one of %s", o->name, value, o->choices);
        if (strlen(value) >= o->size)
            return hm_error_set(err, "--%s: value too long (max %zu characters)", o->name,
                                o->size - 1);
        memcpy(at, value, strlen(value) + 1);
        return 0;
    case HM_OPT_INT64:
    case HM_OPT_INT:
        if (hm_parse_int64(value, o->min, o->max, o->suffixes, &v, err) != 0)
            return fail(o, err);
        if (o->kind == HM_OPT_INT)
            *(int *)at = (int)v;
        else
            *(int64_t *)at = v;
        return 0;
    case HM_OPT_DOUBLE:
    case HM_OPT_SCALED:
        if (hm_parse_double(value, o->dmin, o->dmax, &d, err) != 0)
            return fail(o, err);
        d *= o->scale != 0 ? o->scale : 1;
        if (o->kind == HM_OPT_SCALED)
            *(int64_t *)at = (int64_t)llround(d);
        else
            *(double *)at = d;
        return 0;
    case HM_OPT_CHOICE:
        if (!hm_options_choice(o->choices, value, &index)) {
            char list[256];
            snprintf(list, sizeof list, "%s", o->choices);
            for (char *p = list; *p != '\0'; p++)
                if (*p == '|')
                    *p = ',';
            return hm_error_set(err, "--%s: '%s' is not one of %s", o->name, value, list);
        }
        *(int *)at = index;
        return 0;
    case HM_OPT_CALL:
        return o->call(base, o, value, err);
    }
    return hm_error_set(err, "--%s: internal: unknown option kind", o->name);
}

int hm_options_parse(const hm_option_table *t, int argc, char **argv, void *base, hm_error *err)
{
    for (int i = 1; i < argc; i++) {
        const char *word = argv[i];
        const hm_option *o = NULL;
        const char *value = NULL; /* given in the same word */
        if (word[0] == '-' && word[1] == '-' && word[2] != '\0') {
            const char *name = word + 2;
            const char *eq = strchr(name, '=');
            size_t len = eq != NULL ? (size_t)(eq - name) : strlen(name);
            bool ambiguous;
            o = find_long(t, name, len, &ambiguous);
            if (ambiguous)
                return hm_error_set(err, "ambiguous option '%.*s' (see --help)", (int)(len + 2),
                                    word);
            if (o != NULL && eq != NULL) {
                if (!takes_value(o))
                    return hm_error_set(err, "option '--%s' takes no value", o->name);
                value = eq + 1;
            }
        } else if (word[0] == '-' && word[1] != '\0' && word[1] != '-') {
            o = find_letter(t, word[1]);
            if (o != NULL && word[2] != '\0') {
                if (!takes_value(o))
                    return hm_error_set(err, "option '-%c' takes no value", word[1]);
                value = word + 2;
            }
        } else {
            return hm_error_set(err, "unexpected argument '%s' (see --help)", word);
        }
        if (o == NULL)
            return hm_error_set(err, "unknown option '%s' (see --help)", word);
        if (o->kind == HM_OPT_HELP)
            return 1;
        if (takes_value(o) && value == NULL) {
            if (i + 1 >= argc)
                return hm_error_set(err, "missing value for '%s' (see --help)", word);
            value = argv[++i];
        }
        if (hm_option_store(o, base, value, err) != 0)
            return -1;
    }
    return 0;
}

void hm_option_print(const hm_option *o, const char *suffix, FILE *out)
{
    if (o->kind == HM_OPT_HEADING) {
        fprintf(out, "\n%s\n", o->help);
        return;
    }
    char left[128];
    int n;
    if (o->letter != 0)
        n = snprintf(left, sizeof left, "  -%c, --%s%s%s", o->letter, o->name, o->arg ? " " : "",
                     o->arg ? o->arg : "");
    else
        n = snprintf(left, sizeof left, "  --%s%s%s", o->name, o->arg ? " " : "",
                     o->arg ? o->arg : "");
    fputs(left, out);
    if (o->help[0] == '\0' && suffix == NULL) {
        fputc('\n', out);
        return;
    }
    int column = n < HELP_COLUMN - 1 ? HELP_COLUMN : n + 2;
    fprintf(out, "%*s", column - n, "");
    for (const char *p = o->help; *p != '\0'; p++) {
        fputc(*p, out);
        if (*p == '\n')
            fprintf(out, "%*s", column, "");
    }
    fprintf(out, "%s\n", suffix != NULL ? suffix : "");
}

void hm_options_print_help(const hm_option_table *t, FILE *out)
{
    for (size_t i = 0; i < t->n; i++)
        hm_option_print(&t->rows[i], NULL, out);
}
