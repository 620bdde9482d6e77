/* libhushmon's control path against the agent's application channel, in
 * one process: no callback = hm_poll does nothing; a registered process
 * is sent to by job and program name and acknowledges with its callback's
 * return; hm_poll looks at the socket at most every 50 ms; threads polling
 * at once deliver each message once; a forked child takes messages on its
 * own connection; no agent = registration says so. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "app_channel.h"
#include "hm_test.h"
#include "hushmon.h"

static hm_test_counts tc;

typedef struct seen {
    _Atomic int calls;
    char command[64], args[128];
} seen;

static int on_control(const char *command, const char *args, void *user)
{
    seen *s = user;
    snprintf(s->command, sizeof s->command, "%s", command);
    snprintf(s->args, sizeof s->args, "%s", args);
    atomic_fetch_add(&s->calls, 1);
    return strcmp(command, "fail") == 0 ? 3 : 0;
}

static void sleep_ms(int ms)
{
    struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&t, NULL);
}

static seen threads_seen;
static _Atomic int threads_delivered;

static void *thread_poll(void *arg)
{
    (void)arg;
    for (int i = 0; i < 400 && atomic_load(&threads_delivered) < 10; i++) {
        atomic_fetch_add(&threads_delivered, hm_poll());
        sleep_ms(5);
    }
    return NULL;
}

static hm_app_ctl_pending acks(hm_app *app, hm_jobs *jobs, uint32_t id)
{
    hm_app_ctl_pending p = {0};
    hm_error err;
    CHECK(&tc, hm_app_control_acks(app, jobs, id, &p, &err) == 0);
    return p;
}

static char comm[16];

int main(void)
{
    FILE *f = fopen("/proc/self/comm", "r");
    CHECK(&tc, f != NULL && fgets(comm, sizeof comm, f) != NULL);
    if (f != NULL)
        fclose(f);
    comm[strcspn(comm, "\n")] = '\0';

    /* Nothing registered: hm_poll is a no-op, before and after opening. */
    CHECK(&tc, hm_poll() == 0);
    char dir[] = "/tmp/hm_ctltest_XXXXXX";
    CHECK(&tc, mkdtemp(dir) != NULL);
    char ctl[96], sock[96];
    snprintf(ctl, sizeof ctl, "%s/agent.sock", dir);
    snprintf(sock, sizeof sock, "%s/app.sock", dir);
    setenv("HUSHMON_APP_SOCKET", sock, 1);
    setenv("HUSHMON_JOB", "j1", 1);
    seen s;
    memset(&s, 0, sizeof s);
    CHECK(&tc, hm_on_control(on_control, &s) == 1); /* no agent */
    CHECK(&tc, hm_poll() == 0);

    hm_app app;
    hm_error err;
    CHECK(&tc, hm_app_open(&app, ctl, &err) == 0);
    hm_jobs jobs;
    memset(&jobs, 0, sizeof jobs);
    CHECK(&tc, hm_jobs_begin(&jobs, "j1", NULL, HM_JOB_ANNOUNCED, &err) == 0);
    hm_jobs_find(&jobs, "j1")->owner_uid = (long)getuid();
    CHECK(&tc, hm_on_control(NULL, NULL) == 1);
    CHECK(&tc, hm_open() == 0);
    hm_metric("before", 1.0);
    hm_flush();

    /* Not registered: the agent sends to nobody. */
    uint32_t id;
    unsigned sent = 99;
    CHECK(&tc, hm_app_control_send(&app, &jobs, "j1", "*", "dump-profile", &id, &sent, &err) == 0);
    CHECK(&tc, sent == 0 && app.nclients == 1 && !app.client[0].listens);
    CHECK(&tc, hm_poll() == 0);

    /* Registered: by job and program name; others are not sent to. */
    CHECK(&tc, hm_on_control(on_control, &s) == 0);
    CHECK(&tc, hm_app_control_send(&app, &jobs, "j1", "nosuch", "x", &id, &sent, &err) == 0 &&
                   sent == 0);
    CHECK(&tc, hm_app_control_send(&app, &jobs, "j2", "*", "x", &id, &sent, &err) == 0 &&
                   sent == 0);
    CHECK(&tc, hm_app_control_send(&app, &jobs, "j1", comm, "dump-profile  now please", &id,
                                   &sent, &err) == 0 &&
                   sent == 1);
    CHECK(&tc, acks(&app, &jobs, id).acked == 0);
    CHECK(&tc, hm_poll() == 1);
    CHECK(&tc, atomic_load(&s.calls) == 1 && strcmp(s.command, "dump-profile") == 0 &&
                   strcmp(s.args, "now please") == 0);
    hm_app_ctl_pending p = acks(&app, &jobs, id);
    CHECK(&tc, p.sent == 1 && p.acked == 1 && p.failed == 0);

    /* Within 50 ms of a look at the socket hm_poll does not look again. */
    CHECK(&tc, hm_app_control_send(&app, &jobs, "j1", "*", "fail", &id, &sent, &err) == 0 &&
                   sent == 1);
    CHECK(&tc, hm_poll() == 0);
    sleep_ms(60);
    CHECK(&tc, hm_poll() == 1 && strcmp(s.command, "fail") == 0 && s.args[0] == '\0');
    p = acks(&app, &jobs, id);
    CHECK(&tc, p.acked == 1 && p.failed == 1);
    CHECK(&tc, hm_app_control_acks(&app, &jobs, 9999, &p, &err) < 0 &&
                   strstr(err.msg, "no control message 9999") != NULL);

    /* Four threads polling at once: each message delivered once. */
    CHECK(&tc, hm_on_control(on_control, &threads_seen) == 0);
    uint32_t ids[10];
    for (int i = 0; i < 10; i++)
        CHECK(&tc, hm_app_control_send(&app, &jobs, "j1", "*", "step", &ids[i], &sent, &err) == 0 &&
                       sent == 1);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        CHECK(&tc, pthread_create(&t[i], NULL, thread_poll, NULL) == 0);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    CHECK(&tc, atomic_load(&threads_delivered) == 10 && atomic_load(&threads_seen.calls) == 10);
    for (int i = 0; i < 10; i++)
        CHECK(&tc, acks(&app, &jobs, ids[i]).acked == 1);

    /* A forked child: its own connection, registered by inheritance. */
    pid_t pid = fork();
    if (pid == 0) {
        seen c;
        memset(&c, 0, sizeof c);
        hm_on_control(on_control, &c);
        for (int i = 0; i < 100 && atomic_load(&c.calls) == 0; i++) {
            hm_poll();
            sleep_ms(20);
        }
        _exit(atomic_load(&c.calls) == 1 && strcmp(c.command, "child") == 0 ? 0 : 1);
    }
    CHECK(&tc, pid > 0);
    int listening = 0;
    for (int i = 0; i < 200 && listening < 2; i++) {
        sleep_ms(10);
        acks(&app, &jobs, ids[9]); /* reads the clients */
        listening = 0;
        for (size_t k = 0; k < app.nclients; k++)
            listening += app.client[k].listens;
    }
    CHECK(&tc, listening == 2);
    CHECK(&tc, hm_app_control_send(&app, &jobs, "j1", "*", "child", &id, &sent, &err) == 0 &&
                   sent == 2);
    int status = -1;
    CHECK(&tc, waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
    sleep_ms(60);
    CHECK(&tc, hm_poll() == 1);
    p = acks(&app, &jobs, id);
    CHECK(&tc, p.sent == 2 && p.acked == 2 && p.failed == 0);

    /* Unregistered: nothing delivered, nothing acknowledged. */
    CHECK(&tc, hm_on_control(NULL, NULL) == 0);
    CHECK(&tc, hm_app_control_send(&app, &jobs, "j1", "*", "late", &id, &sent, &err) == 0);
    sleep_ms(60);
    CHECK(&tc, hm_poll() == 0);

    hm_close();
    hm_app_close(&app);
    rmdir(dir);
    return hm_test_finish("test_libhushmon_control", &tc);
}
