/* libhushmon: an application's own measurements into the node's
 * hushmon-agent (docs/libhushmon.md).
 *
 * Every call returns at once: values are aggregated per name (count,
 * sum, min, max) in a per-thread batch that is sent as one message every
 * ~100 ms (while calls come) or when it holds 24 names, without ever
 * waiting for the agent. When the agent is absent, slow or stopped the
 * data is dropped and counted (hm_stats), never queued without bound.
 * Without a running agent every call is a cheap no-op. Thread- and
 * fork-safe; no MPI needed (rank and size come from the launcher's
 * environment). */
#ifndef HUSHMON_H
#define HUSHMON_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define HUSHMON_VERSION "1.0"
/* The library is built with hidden visibility: only these are exported. */
#define HUSHMON_API __attribute__((visibility("default")))

/* Connects to the agent (socket: $HUSHMON_APP_SOCKET, else
 * /run/hushmon/app.sock; $HUSHMON_APP=0 turns the library off).
 * Returns 0 when connected, 1 when no agent answers (every call is then
 * a no-op for the life of the process). Optional: the first call of any
 * other function opens the library. */
HUSHMON_API int hm_open(void);
/* Sends what the calling thread buffered and disconnects; later calls
 * are no-ops until hm_open. */
HUSHMON_API void hm_close(void);
/* Sends the calling thread's buffer now (never waits). */
HUSHMON_API void hm_flush(void);

/* A value (per iteration, per step...). The agent publishes per period
 * and rank: count, mean, min, max, sum. Put the unit in the name
 * ("iter_time_s"). Names longer than 63 bytes are cut. */
HUSHMON_API void hm_metric(const char *name, double value);
/* Something that happened (text up to 255 bytes): counted per period,
 * the last text kept. */
HUSHMON_API void hm_event(const char *name, const char *text);
/* A phase of the calling thread (nested up to 16 deep): its duration is
 * published like a metric of that name, in seconds. */
HUSHMON_API void hm_phase_begin(const char *name);
HUSHMON_API void hm_phase_end(const char *name);
/* n values at once, each as the metric "<prefix>.<names[i]>" (or
 * "<prefix>.<i>" when names is NULL): a per-region profile, the values
 * of one iteration. */
HUSHMON_API void hm_profile_dump(const char *prefix, const char *const *names, const double *values,
                     size_t n);

/* Rank and number of ranks from the launcher's environment
 * (OMPI_COMM_WORLD_*, PMI_*, PMIX_RANK, SLURM_PROCID/SLURM_NTASKS,
 * MV2_COMM_WORLD_*); -1 when not launched by one. */
HUSHMON_API int hm_rank(void);
HUSHMON_API int hm_size(void);

/* Control messages to the application (`hushmon ctl app NAME COMMAND
 * [ARGS] --job ID`, docs/libhushmon.md "Control"). fn is called with the
 * command's first word and the rest ("" when none) from hm_poll(), on the
 * thread that calls hm_poll, never from a thread of the library's or a
 * signal: the application chooses a point where acting is safe (between
 * iterations, outside MPI calls). Its return value (0 = done) goes back to
 * the sender with the acknowledgement. fn NULL stops delivery. Returns 0
 * when registered with a running agent, 1 when no agent answers. */
typedef int (*hm_control_fn)(const char *command, const char *args, void *user_data);
HUSHMON_API int hm_on_control(hm_control_fn fn, void *user_data);
/* Delivers the control messages that arrived (at most 16 a call) and
 * returns how many. Cheap enough for every iteration: without a callback
 * it is one load; with one it looks at the socket at most every 50 ms
 * (one non-blocking recv), else it reads a coarse clock. Any thread may
 * call it; one delivers at a time (a concurrent call returns 0). */
HUSHMON_API int hm_poll(void);

typedef struct hm_stats {
    uint64_t records;        /* values taken (counted when their batch is sent or dropped) */
    uint64_t sent_records;   /* values handed to the socket */
    uint64_t dropped_records;/* lost: socket full, agent gone, buffer full */
    uint64_t messages;       /* sends that succeeded */
    int connected;           /* 1 connected, 0 not (absent, gone, closed) */
} hm_stats;
/* This process's counters (all threads). */
HUSHMON_API void hm_stats_get(hm_stats *out);

#ifdef __cplusplus
}
#endif
#endif
