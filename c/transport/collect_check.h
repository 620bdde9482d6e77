/* The collector's checks of one raw message before its lines are read, as
 * python/hushmon/transport/wire.py (parse_batch_header) and
 * collect_store.py (_accept) make them, with the same reason texts:
 * subject hm.raw.<rack>.<host>, names, Hm-Host equal to the subject's
 * host, Hm-Epoch/Hm-Seq/Hm-Lines/Hm-Dropped decimal int64, size, empty. */
#ifndef HM_COLLECT_CHECK_H
#define HM_COLLECT_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "pytext.h"

/* A raw message's headers as received (NULL: absent). */
typedef struct hm_raw_headers {
    const char *host, *epoch, *seq, *lines, *dropped, *replay;
} hm_raw_headers;

typedef struct hm_batch_header {
    const char *rack, *host; /* slices of the subject (not NUL-terminated) */
    size_t rack_len, host_len;
    int64_t epoch, seq, lines, dropped;
    bool replay;
} hm_batch_header;

/* 0 with h filled, or -1 with the reason written to why. */
int hm_check_header(const char *subject, const hm_raw_headers *hd, hm_batch_header *h, hm_text *why);
/* The size and emptiness checks of an accepted header: 0, or -1 with why. */
int hm_check_body(const char *data, size_t len, int64_t max_bytes, hm_text *why);
/* Who sent a message, safe to store (collect_records.sender_of). */
void hm_sender_of(const char *subject, const char *header_host, hm_text *out);
/* Python's _NAME: [A-Za-z0-9_][A-Za-z0-9_+-]{0,127}. */
bool hm_is_name(const char *s, size_t len);

#endif
