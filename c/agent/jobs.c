#include "jobs.h"

#include <string.h>

bool hm_job_id_valid(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n >= HM_JOB_ID_MAX)
        return false;
    for (const char *p = id; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '.' || c == '-'))
            return false;
    }
    return true;
}

hm_job *hm_jobs_find(hm_jobs *jobs, const char *id)
{
    for (size_t i = 0; i < HM_JOBS_MAX; i++)
        if (jobs->job[i].used && strcmp(jobs->job[i].id, id) == 0)
            return &jobs->job[i];
    return NULL;
}

/* Does the cgroup path cg (cg_len bytes) lie in job cgroup jc or below? */
static bool cgroup_within(const char *cg, size_t cg_len, const char *jc, bool v2_line)
{
    while (cg_len > 0 && *cg == '/') {
        cg++;
        cg_len--;
    }
    while (*jc == '/')
        jc++;
    if (v2_line && strncmp(jc, "unified/", 8) == 0)
        jc += 8;
    size_t len = strlen(jc);
    return len > 0 && cg_len >= len && memcmp(cg, jc, len) == 0 &&
           (cg_len == len || cg[len] == '/');
}

int hm_jobs_of_proc_cgroup(const hm_jobs *jobs, const char *cgroup_text)
{
    for (const char *line = cgroup_text; line != NULL && *line != '\0';) {
        const char *nl = strchr(line, '\n');
        size_t len = nl != NULL ? (size_t)(nl - line) : strlen(line);
        const char *c1 = memchr(line, ':', len);
        const char *c2 = c1 != NULL ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - line)) : NULL;
        if (c2 != NULL) {
            const char *cg = c2 + 1;
            size_t cg_len = len - (size_t)(cg - line);
            for (int j = 0; j < HM_JOBS_MAX; j++) {
                const hm_job *job = &jobs->job[j];
                if (job->used && job->cgroup[0] != '\0' &&
                    cgroup_within(cg, cg_len, job->cgroup, c2 == c1 + 1))
                    return j;
            }
        }
        line = nl != NULL ? nl + 1 : NULL;
    }
    return -1;
}

int hm_jobs_begin(hm_jobs *jobs, const char *id, const char *cgroup, unsigned origin,
                  hm_error *err)
{
    if (!hm_job_id_valid(id))
        return hm_error_set(err, "bad job id '%s' (1-63 of A-Z a-z 0-9 _ . -)", id);
    if (cgroup == NULL)
        cgroup = "";
    if (strlen(cgroup) >= sizeof jobs->job[0].cgroup)
        return hm_error_set(err, "cgroup path too long");
    if (strstr(cgroup, "..") != NULL)
        return hm_error_set(err, "cgroup path must not contain '..'");
    while (*cgroup == '/')
        cgroup++;
    hm_job *j = hm_jobs_find(jobs, id);
    if (j == NULL) {
        /* The slot of the same job ending in this period, so that it has one
         * `job` line; else a free slot; else one whose job ended in this
         * period (it loses that line, rather than this job being refused). */
        for (int pass = 0; pass < 3 && j == NULL; pass++)
            for (size_t i = 0; i < HM_JOBS_MAX && j == NULL; i++) {
                const hm_job *o = &jobs->job[i];
                if (!o->used && (pass == 0   ? o->ending && strcmp(o->id, id) == 0
                                 : pass == 1 ? !o->ending
                                             : true))
                    j = &jobs->job[i];
            }
        if (j == NULL)
            return hm_error_set(err, "too many jobs on this node (max %d)", HM_JOBS_MAX);
        memset(j, 0, sizeof *j);
        j->used = true;
        strcpy(j->id, id);
        j->owner_uid = -1;
    }
    /* An explicit cgroup wins over an empty one; a second announcement with
     * a different cgroup replaces it. */
    if (cgroup[0] != '\0' && strcmp(j->cgroup, cgroup) != 0)
        strcpy(j->cgroup, cgroup);
    j->origin |= origin;
    jobs->generation++;
    return 0;
}

int hm_jobs_end(hm_jobs *jobs, const char *id, unsigned origin, hm_error *err)
{
    hm_job *j = hm_jobs_find(jobs, id);
    if (j == NULL)
        return hm_error_set(err, "job %s is not running on this node", id);
    j->origin &= ~origin;
    if (j->origin == 0) {
        j->used = false;
        j->ending = true;
    }
    jobs->generation++;
    return 0;
}

void hm_jobs_written(hm_jobs *jobs)
{
    for (size_t i = 0; i < HM_JOBS_MAX; i++)
        jobs->job[i].ending = false;
}

size_t hm_jobs_count(const hm_jobs *jobs)
{
    size_t n = 0;
    for (size_t i = 0; i < HM_JOBS_MAX; i++)
        n += jobs->job[i].used;
    return n;
}
