/* The application channel: libhushmon clients (c/libhushmon) connect to a
 * SOCK_SEQPACKET socket beside the control socket (<dir>/app.sock) and
 * send batches of metrics, phase durations and events. Once per period
 * the agent accepts, reads what is queued (without waiting), attributes
 * each client to a job by its peer credentials, and writes per-period
 * aggregates into the batch (docs/formats.md, `app*` measurements).
 *
 * Reading once per period keeps the agent's wake-ups on its period (an
 * application calling every microsecond does not wake it); the kernel's
 * socket buffers hold what arrives in between, and a client whose buffer
 * is full drops and counts on its side. Memory is fixed: a client table
 * and a series table sized at open. */
#ifndef HM_APP_CHANNEL_H
#define HM_APP_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <poll.h>
#include <stdint.h>
#include <sys/types.h>

#include "hm_app_wire.h"
#include "hm_error.h"
#include "jobs.h"
#include "lp.h"
#include "refusals.h"

#define HM_APP_CLIENTS_MAX 512
#define HM_APP_SERIES_MAX 2048      /* (job, rank, kind, name) per period */
#define HM_APP_EVENT_TEXT_MAX 128   /* the last text of an event kept per period */
#define HM_APP_READS_PER_PERIOD 64  /* messages read per client per period */
#define HM_APP_MUTED_MAX 32         /* names the control channel unsubscribed */

/* Defaults of the per-user limits (config.c, app.*). */
#define HM_APP_CLIENTS_PER_UID 128
#define HM_APP_IDLE_MS 300000
#define HM_APP_SERIES_PER_JOB 512
/* A libhushmon client sends at most 24 records a message, and the agent
 * reads 64 messages a client a period: a budget above 1536 never cuts a
 * real client, and bounds one that packs 496 into each. */
#define HM_APP_RECORDS_PER_CLIENT 4096

/* A control message sent to applications (`app send`), until its
 * acknowledgements are asked for (`app acks ID`); the oldest is reused. */
#define HM_APP_CTL_PENDING 16

typedef struct hm_app_client {
    int fd;
    int pidfd;                /* the connecting process (pidfd_open): its end is the client's */
    bool ended_at_accept;     /* it had ended before the agent accepted (pidfd_open: ESRCH) */
    pid_t pid;
    long uid;
    int job;                  /* slot in hm_jobs, -1 unattributed */
    char job_id[HM_JOB_ID_MAX];
    char first_job_id[HM_JOB_ID_MAX]; /* the first job it was attributed to: never another */
    int64_t last_message_ns;  /* for app.idle_ms */
    uint64_t records_this_period; /* for app.records_per_client */
    uint32_t awaiting[HM_APP_CTL_PENDING]; /* control message ids sent to it, not yet acked */
    uint64_t jobs_generation; /* of the attribution; re-done when jobs change */
    bool attributed_once;
    char claim[HM_APP_JOB_MAX];
    uint64_t lib_dropped;     /* the client's last reported dropped_total */
    bool listens;             /* it registered a control callback (hm_on_control) */
    char comm[16];            /* its program's name (/proc/PID/comm), for `app send` */
} hm_app_client;

/* A control message sent (`app send`), kept until newer ones take its slot. */
typedef struct hm_app_ctl_pending {
    uint32_t id;              /* 0 = free */
    uint32_t sent, acked, failed;
} hm_app_ctl_pending;

typedef struct hm_app_series {
    uint8_t kind;             /* HM_APP_METRIC/PHASE/EVENT; 0 = free */
    int32_t rank;
    char job[HM_JOB_ID_MAX];
    char name[HM_APP_NAME_MAX + 1];
    uint64_t count;
    double sum, min, max;
    char text[HM_APP_EVENT_TEXT_MAX];
} hm_app_series;

/* Totals since the agent started (the app_channel line; docs/formats.md,
 * docs/security.md for the refusals). Records dropped are counted in
 * records (values), clients and acks one each. */
typedef struct hm_app_counters {
    uint64_t connections, messages, records, malformed, unattributed, rejected_claims,
        series_full, lib_dropped, clients_refused;
    uint64_t clients_refused_uid; /* its uid held app.clients_per_uid connections */
    uint64_t clients_idle;        /* dropped after app.idle_ms of silence */
    uint64_t clients_pid_gone;    /* its process ended (or was gone at connect): dropped */
    uint64_t series_quota;        /* records past the job's app.series_per_job */
    uint64_t records_over_budget; /* records past the client's app.records_per_client */
    uint64_t job_moves_refused;   /* re-attributions to another job than its first */
    uint64_t acks_refused;        /* acks of a message id not sent to that client */
    uint64_t records_malformed;   /* records skipped in a well-framed message (no name...) */
} hm_app_counters;

typedef struct hm_app_limits {
    int64_t clients_per_uid;
    int64_t idle_ms;              /* 0: never */
    int64_t series_per_job;
    int64_t records_per_client;
} hm_app_limits;

/* Application names left out of the batches (`set apps=-NAME`, the
 * control channel): their values still arrive and are aggregated, and are
 * then dropped instead of written. */
typedef struct hm_app_muted {
    size_t n;
    char name[HM_APP_MUTED_MAX][HM_APP_NAME_MAX + 1];
} hm_app_muted;

typedef struct hm_app {
    int listen_fd;
    char path[108];
    char proc_root[256];      /* where /proc/PID/cgroup is read ("" = the real /proc) */
    hm_app_client *client;
    size_t nclients;
    hm_app_series *series;
    uint32_t *used;           /* indices of series filled this period */
    size_t nused;
    hm_app_counters total;
    uint64_t lib_dropped_closed; /* reported by clients that have gone */
    unsigned char *msg;       /* one message, HM_APP_MSG_MAX */
    hm_app_muted muted;
    hm_app_ctl_pending ctl[HM_APP_CTL_PENDING];
    uint32_t ctl_next_id;
    hm_app_limits limits;
    uint32_t job_series[HM_JOBS_MAX]; /* series each job slot filled this period */
    struct pollfd *pidpoll;   /* one per client: whose process has ended */
    hm_refusal_log log;
} hm_app;

/* Nothing open; hm_app_collect and hm_app_close are no-ops; the default
 * limits. */
void hm_app_init(hm_app *app);
/* Listens on <directory of control_path>/app.sock ("" control path: no
 * channel). A live agent already there is an error; a stale file is
 * replaced. The socket is 0666: any local user's program may connect;
 * what it sends is attributed by its credentials, not by the message, and
 * each uid, job and client gets a bounded share (app.limits). */
int hm_app_open(hm_app *app, const char *control_path, hm_error *err);
void hm_app_close(hm_app *app);
/* Accepts, reads what is queued, writes this period's lines. */
void hm_app_collect(hm_app *app, hm_jobs *jobs, hm_lp *out);
/* Accepts and reads what is queued into this period's series, attributed
 * under the jobs as they are now: called before a job's end takes effect,
 * so what a program sent just before it exited (its last phase, flushed at
 * its end) still goes to its job instead of being read, unattributed,
 * after the job's end (the period's lines come at the next collect). */
void hm_app_read(hm_app *app, hm_jobs *jobs);

/* Sends text ("COMMAND [ARGS]") to the clients of job whose program is
 * name ("*": every program of the job) that take control messages; reads
 * the clients first, so one that registered since the last period counts.
 * *id: to ask for the acknowledgements; *sent: how many it went to. */
int hm_app_control_send(hm_app *app, hm_jobs *jobs, const char *job, const char *name,
                        const char *text, uint32_t *id, unsigned *sent, hm_error *err);
/* The acknowledgements of id so far (reads the clients first): acked =
 * delivered to the callback, failed = of those, the callback returned
 * non-zero. */
int hm_app_control_acks(hm_app *app, hm_jobs *jobs, uint32_t id, hm_app_ctl_pending *out,
                        hm_error *err);

/* Applies "-a,+b" to m: -NAME unsubscribes (muted), +NAME subscribes
 * again. On error m is as it was. */
int hm_app_muted_edit(hm_app_muted *m, const char *edit, hm_error *err);
bool hm_app_is_muted(const hm_app_muted *m, const char *name);

/* Which job a client belongs to. cgroup_text: the content of the
 * client's /proc/PID/cgroup ("" if unreadable). Rules, in order: a job
 * whose cgroup holds the process (the kernel says so; a claim of another
 * job is rejected); else the claimed job if the process's uid owns it
 * (announced it) or is root, and the job has no cgroup; else none.
 * Returns the job's slot or -1; *rejected says a claim was refused. */
int hm_app_attribute(const hm_jobs *jobs, const char *cgroup_text, const char *claim, long uid,
                     bool *rejected);

#endif
