#include "pytext.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

void hm_text_add(hm_text *t, const char *s, size_t n)
{
    if (t->cap == 0)
        return;
    size_t room = t->cap - 1 - t->len;
    if (n > room)
        n = room;
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

void hm_text_addf(hm_text *t, const char *fmt, ...)
{
    if (t->cap == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(t->s + t->len, t->cap - t->len, fmt, ap);
    va_end(ap);
    if (n > 0)
        t->len += (size_t)n < t->cap - t->len ? (size_t)n : t->cap - 1 - t->len;
}

/* The code point at s[*i] (advancing *i); an invalid sequence is one
 * U+FFFD with *bad set, over its maximal valid prefix as Python's
 * errors="replace" (Unicode's "maximal subpart") reads it. */
static uint32_t next_cp(const unsigned char *s, size_t len, size_t *i, bool *bad)
{
    unsigned char c = s[*i];
    *bad = false;
    if (c < 0x80) {
        (*i)++;
        return c;
    }
    size_t n = c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (n == 0) {
        *bad = true;
        (*i)++;
        return 0xfffd;
    }
    /* the second byte's range depends on the lead (no overlong forms,
     * surrogates or code points past U+10FFFF) */
    unsigned char lo = 0x80, hi = 0xbf;
    if (c == 0xe0)
        lo = 0xa0;
    else if (c == 0xed)
        hi = 0x9f;
    else if (c == 0xf0)
        lo = 0x90;
    else if (c == 0xf4)
        hi = 0x8f;
    uint32_t cp = c & (n == 2 ? 0x1f : n == 3 ? 0x0f : 0x07);
    size_t k = 1;
    for (; k < n; k++) {
        if (*i + k >= len)
            break;
        unsigned char d = s[*i + k];
        if (k == 1 ? (d < lo || d > hi) : (d & 0xc0) != 0x80)
            break;
        cp = cp << 6 | (d & 0x3f);
    }
    *i += k;
    if (k < n) {
        *bad = true;
        return 0xfffd;
    }
    return cp;
}

void hm_utf8_replace(hm_text *t, const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    bool bad;
    while (i < len) {
        size_t at = i;
        next_cp(u, len, &i, &bad);
        if (bad)
            hm_text_add(t, "\xef\xbf\xbd", 3);
        else
            hm_text_add(t, s + at, i - at);
    }
}

bool hm_utf8_valid(const char *s, size_t len)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < len) {
        /* ASCII 8 bytes at a time: nearly every batch is all ASCII */
        if (i + 8 <= len) {
            uint64_t w;
            memcpy(&w, u + i, 8);
            if ((w & 0x8080808080808080ull) == 0) {
                i += 8;
                continue;
            }
        }
        if (u[i] < 0x80) {
            i++;
            continue;
        }
        bool bad;
        next_cp(u, len, &i, &bad);
        if (bad)
            return false;
    }
    return true;
}

static bool printable(uint32_t cp)
{
    if (cp < 0x20 || (cp >= 0x7f && cp <= 0xa0) || cp == 0xad)
        return false;
    if (cp < 0x370)
        return true;
    static const uint32_t not_printable[][2] = {
        {0x600, 0x605},     {0x61c, 0x61c},     {0x6dd, 0x6dd},     {0x70f, 0x70f},
        {0x1680, 0x1680},   {0x180e, 0x180e},   {0x2000, 0x200f},   {0x2028, 0x202f},
        {0x205f, 0x2064},   {0x2066, 0x206f},   {0x3000, 0x3000},   {0xd800, 0xf8ff},
        {0xfdd0, 0xfdef},   {0xfeff, 0xfeff},   {0xfff9, 0xfffb},   {0xfffe, 0xffff},
        {0xe0001, 0xe0001}, {0xe0020, 0xe007f}, {0xf0000, 0x10ffff},
    };
    for (size_t k = 0; k < sizeof not_printable / sizeof not_printable[0]; k++)
        if (cp >= not_printable[k][0] && cp <= not_printable[k][1])
            return false;
    return true;
}

static void add_cp_utf8(hm_text *t, uint32_t cp)
{
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp, n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xc0 | cp >> 6), b[1] = (char)(0x80 | (cp & 0x3f)), n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xe0 | cp >> 12), b[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        b[2] = (char)(0x80 | (cp & 0x3f)), n = 3;
    } else {
        b[0] = (char)(0xf0 | cp >> 18), b[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3f)), b[3] = (char)(0x80 | (cp & 0x3f)), n = 4;
    }
    hm_text_add(t, b, n);
}

/* repr of the code points of s[0..len) (at most max_chars), read with
 * replacement: one pass for the quote, one to write. */
static void repr_bytes(hm_text *t, const char *s, size_t len, size_t max_chars)
{
    const unsigned char *u = (const unsigned char *)s;
    bool single = false, dbl = false, bad;
    size_t i = 0, n = 0;
    while (i < len && n++ < max_chars) {
        uint32_t c = next_cp(u, len, &i, &bad);
        single |= c == '\'', dbl |= c == '"';
    }
    char quote = single && !dbl ? '"' : '\'';
    hm_text_add(t, &quote, 1);
    i = n = 0;
    while (i < len && n++ < max_chars) {
        uint32_t c = next_cp(u, len, &i, &bad);
        if (c == (uint32_t)quote || c == '\\') {
            char e[2] = {'\\', (char)c};
            hm_text_add(t, e, 2);
        } else if (c == '\t' || c == '\n' || c == '\r') {
            hm_text_add(t, c == '\t' ? "\\t" : c == '\n' ? "\\n" : "\\r", 2);
        } else if (c < 0x7f && c >= 0x20) {
            char ch = (char)c;
            hm_text_add(t, &ch, 1);
        } else if (printable(c)) {
            add_cp_utf8(t, c);
        } else if (c <= 0xff) {
            hm_text_addf(t, "\\x%02x", c);
        } else if (c <= 0xffff) {
            hm_text_addf(t, "\\u%04x", c);
        } else {
            hm_text_addf(t, "\\U%08x", c);
        }
    }
    hm_text_add(t, &quote, 1);
}

void hm_py_repr(hm_text *t, const char *s, size_t len, size_t max_chars)
{
    repr_bytes(t, s, len, max_chars);
}

/* Each code point escaped takes at most 10 bytes (\\UXXXXXXXX). */
#define SHOWN_MAX_CHARS 400

void hm_py_escape(hm_text *e, const char *s, size_t len, size_t max_chars)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, n = 0;
    bool bad;
    while (i < len && n++ < max_chars) {
        uint32_t c = next_cp(u, len, &i, &bad);
        if (c == '\\')
            hm_text_add(e, "\\\\", 2);
        else if (c == '\t' || c == '\n' || c == '\r')
            hm_text_add(e, c == '\t' ? "\\t" : c == '\n' ? "\\n" : "\\r", 2);
        else if (c >= 0x20 && c < 0x7f) {
            char ch = (char)c;
            hm_text_add(e, &ch, 1);
        } else if (c <= 0xff)
            hm_text_addf(e, "\\x%02x", c);
        else if (c <= 0xffff)
            hm_text_addf(e, "\\u%04x", c);
        else
            hm_text_addf(e, "\\U%08x", c);
    }
}

void hm_py_shown(hm_text *t, const char *s, size_t len, size_t max_chars)
{
    char esc[SHOWN_MAX_CHARS * 10 + 1];
    hm_text e = {esc, 0, sizeof esc};
    esc[0] = '\0';
    hm_py_escape(&e, s, len, max_chars > SHOWN_MAX_CHARS ? SHOWN_MAX_CHARS : max_chars);
    repr_bytes(t, e.s, e.len, e.len);
}
