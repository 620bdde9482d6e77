#include "collect_check.h"

#include <string.h>

#define NAME_MAX_CHARS 128
#define INT64_MAX_TEXT "9223372036854775807"

static bool name_char(char c, bool first)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' ||
           (!first && (c == '+' || c == '-'));
}

bool hm_is_name(const char *s, size_t len)
{
    if (len == 0 || len > NAME_MAX_CHARS)
        return false;
    for (size_t i = 0; i < len; i++)
        if (!name_char(s[i], i == 0))
            return false;
    return true;
}

static int bad_name(const char *what, const char *s, size_t len, hm_text *why)
{
    if (hm_is_name(s, len))
        return 0;
    hm_text_addf(why, "%s ", what);
    hm_py_shown(why, s, len, 40);
    hm_text_addf(why, " is not a name ([A-Za-z0-9_+-], at most %d)", NAME_MAX_CHARS);
    return -1;
}

/* wire._count: a decimal of 1 to 19 ASCII digits in [minimum, 2^63-1]. */
static int count(const char *name, const char *raw, int64_t minimum, int64_t *out, hm_text *why)
{
    if (raw == NULL) {
        hm_text_addf(why, "header %s missing", name);
        return -1;
    }
    size_t len = strlen(raw);
    bool decimal = len >= 1 && len <= 19;
    for (size_t i = 0; decimal && i < len; i++)
        decimal = raw[i] >= '0' && raw[i] <= '9';
    if (!decimal) {
        hm_text_addf(why, "header %s=", name);
        hm_py_shown(why, raw, len, 40);
        hm_text_addf(why, " is not a decimal integer below 2^63");
        return -1;
    }
    while (len > 1 && raw[0] == '0') /* int() drops leading zeros: shown without them */
        raw++, len--;
    bool above = len == 19 && strcmp(raw, INT64_MAX_TEXT) > 0;
    uint64_t v = 0;
    for (size_t i = 0; i < len; i++)
        v = v * 10 + (uint64_t)(raw[i] - '0');
    if (above || (int64_t)v < minimum) {
        hm_text_addf(why, "header %s=%s outside [%lld, 2^63-1]", name, raw, (long long)minimum);
        return -1;
    }
    *out = (int64_t)v;
    return 0;
}

int hm_check_header(const char *subject, const hm_raw_headers *hd, hm_batch_header *h, hm_text *why)
{
    memset(h, 0, sizeof *h);
    size_t slen = strlen(subject);
    const char *dot[4];
    size_t ndots = 0;
    for (const char *p = subject; (p = memchr(p, '.', (size_t)(subject + slen - p))) != NULL; p++)
        if (ndots < 4)
            dot[ndots++] = p;
        else
            ndots++;
    if (ndots != 3 || strncmp(subject, "hm.raw.", 7) != 0) {
        hm_text_add(why, "subject ", 8);
        hm_py_shown(why, subject, slen, 80);
        hm_text_addf(why, " is not hm.raw.<rack>.<host>");
        return -1;
    }
    h->rack = dot[1] + 1;
    h->rack_len = (size_t)(dot[2] - h->rack);
    h->host = dot[2] + 1;
    h->host_len = (size_t)(subject + slen - h->host);
    if (bad_name("the subject's rack", h->rack, h->rack_len, why) != 0 ||
        bad_name("the subject's host", h->host, h->host_len, why) != 0)
        return -1;
    const char *host = hd->host != NULL ? hd->host : "";
    if (*host == '\0') {
        hm_text_addf(why, "header Hm-Host missing");
        return -1;
    }
    if (strlen(host) != h->host_len || memcmp(host, h->host, h->host_len) != 0) {
        hm_text_addf(why, "header Hm-Host=");
        hm_py_repr(why, host, strlen(host), 40);
        hm_text_addf(why, " but subject names host %.*s", (int)h->host_len, h->host);
        return -1;
    }
    if (count("Hm-Epoch", hd->epoch, 0, &h->epoch, why) != 0 ||
        count("Hm-Seq", hd->seq, 1, &h->seq, why) != 0 ||
        count("Hm-Lines", hd->lines, 0, &h->lines, why) != 0 ||
        count("Hm-Dropped", hd->dropped != NULL ? hd->dropped : "0", 0, &h->dropped, why) != 0)
        return -1;
    h->replay = hd->replay != NULL && strcmp(hd->replay, "1") == 0;
    return 0;
}

int hm_check_body(const char *data, size_t len, int64_t max_bytes, hm_text *why)
{
    if ((int64_t)len > max_bytes) {
        hm_text_addf(why, "oversized: %zu bytes > %lld", len, (long long)max_bytes);
        return -1;
    }
    /* bytes.isspace(): ASCII whitespace only, and not for b"" */
    bool space = true;
    for (size_t i = 0; space && i < len; i++)
        space = data[i] == ' ' || (data[i] >= '\t' && data[i] <= '\r');
    if (space) {
        hm_text_addf(why, "empty batch");
        return -1;
    }
    return 0;
}

void hm_sender_of(const char *subject, const char *header_host, hm_text *out)
{
    size_t slen = strlen(subject);
    const char *last = strrchr(subject, '.');
    size_t ndots = 0;
    for (size_t i = 0; i < slen; i++)
        ndots += subject[i] == '.';
    const char *host = "";
    size_t hlen = 0;
    if (ndots == 3 && strncmp(subject, "hm.raw.", 7) == 0) {
        host = last + 1;
        hlen = strlen(host);
    }
    if (hlen == 0 && header_host != NULL && *header_host != '\0')
        host = header_host, hlen = strlen(header_host);
    if (hlen == 0)
        host = last != NULL ? last + 1 : subject, hlen = strlen(host);
    if (hm_is_name(host, hlen)) {
        hm_text_add(out, host, hlen);
        return;
    }
    /* host[:40].encode("unicode_escape").decode("ascii") or "?" */
    size_t before = out->len;
    hm_py_escape(out, host, hlen, 40);
    if (out->len == before)
        hm_text_add(out, "?", 1);
}
