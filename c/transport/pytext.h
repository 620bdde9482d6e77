/* Python's way of showing text, so C code that checks what Python checks
 * gives the same reason strings (the collector's events are read by
 * `hushmon transport status` whichever path stored them):
 *   repr(s[:max_chars])                      hm_py_repr
 *   repr(s[:max_chars].encode("unicode_escape").decode("ascii"))   hm_py_shown
 * Bytes are read as UTF-8, an invalid sequence as one U+FFFD over its
 * maximal valid prefix (Python's errors="replace"). Which
 * characters repr escapes follows str.isprintable by ranges: control,
 * format, separator (but space), surrogate, private-use and the
 * noncharacters listed in pytext.c. */
#ifndef HM_PYTEXT_H
#define HM_PYTEXT_H

#include <stdbool.h>
#include <stddef.h>

/* A text being written: never overflows, always NUL-terminated. */
typedef struct hm_text {
    char *s;
    size_t len, cap;
} hm_text;

void hm_text_add(hm_text *t, const char *s, size_t n);
void hm_text_addf(hm_text *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void hm_py_repr(hm_text *t, const char *s, size_t len, size_t max_chars);
void hm_py_shown(hm_text *t, const char *s, size_t len, size_t max_chars);
/* s[:max_chars].encode("unicode_escape").decode("ascii") */
void hm_py_escape(hm_text *t, const char *s, size_t len, size_t max_chars);
/* s[0..len) as Python's decode("utf-8", errors="replace") gives it, in UTF-8. */
void hm_utf8_replace(hm_text *t, const char *s, size_t len);
/* Whether s[0..len) is valid UTF-8 (as Python's strict decoder). */
bool hm_utf8_valid(const char *s, size_t len);

#endif
