/* The wire format between libhushmon and the agent's application channel
 * (docs/libhushmon.md, "Wire format"). One SOCK_SEQPACKET message = one
 * header + records, all little-endian host order (same machine). The
 * agent reads fields with memcpy: nothing is aligned on purpose, so the
 * library appends records without padding. */
#ifndef HM_APP_WIRE_H
#define HM_APP_WIRE_H

#include <stdint.h>

#define HM_APP_MAGIC 0x31414d48u /* "HMA1" */
#define HM_APP_VERSION 2
#define HM_APP_NAME_MAX 63       /* bytes of a metric / phase / event name */
#define HM_APP_TEXT_MAX 255      /* bytes of an event's text */
#define HM_APP_JOB_MAX 64
#define HM_APP_MSG_MAX 16384     /* one message (one thread's batch) */
#define HM_APP_SOCKET_DEFAULT "/run/hushmon/app.sock"

/* HM_APP_CONTROL: the library's side of the control path, a record
 * whose name is a control id in decimal: "0" = this process takes control
 * messages (hm_on_control; sent on each new connection), any other id =
 * that message was delivered, sum = what the callback returned. */
enum { HM_APP_METRIC = 1, HM_APP_EVENT = 2, HM_APP_PHASE = 3, HM_APP_CONTROL = 4 };

typedef struct hm_app_header {
    uint32_t magic;
    uint16_t version;
    uint16_t records;
    int32_t rank, size;          /* -1 when not run under a launcher */
    uint64_t dropped_total;      /* records the library lost so far (this process) */
    char job_claim[HM_APP_JOB_MAX]; /* HUSHMON_JOB or SLURM_JOB_ID; checked by the agent */
} hm_app_header;

/* A record: one name's values in the batch (the library aggregates):
 * type u8, name_len u8, text_len u16, count u32, sum f64, min f64, max f64,
 * name bytes, text bytes (an event's last text). Values are the metric,
 * or a phase's duration in seconds. */
#define HM_APP_REC_FIXED 32

/* The other way, agent -> library (hushmon ctl app): one message
 * = this header + text_len bytes of text ("COMMAND [ARGS]"), delivered
 * by hm_poll() to the callback and acknowledged with an HM_APP_CONTROL
 * record. */
#define HM_APP_CTL_MAGIC 0x31434d48u /* "HMC1" */
#define HM_APP_CTL_TEXT_MAX 255
typedef struct hm_app_ctl_header {
    uint32_t magic;
    uint16_t version;        /* HM_APP_VERSION */
    uint16_t text_len;
    uint32_t id;             /* > 0, the agent's, echoed in the acknowledgement */
} hm_app_ctl_header;

#endif
