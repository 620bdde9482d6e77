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
        for (size_t i = 0; i < HM_JOBS_MAX && j == NULL; i++)
            if (!jobs->job[i].used)
                j = &jobs->job[i];
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
    if (j->origin == 0)
        j->used = false;
    jobs->generation++;
    return 0;
}

size_t hm_jobs_count(const hm_jobs *jobs)
{
    size_t n = 0;
    for (size_t i = 0; i < HM_JOBS_MAX; i++)
        n += jobs->job[i].used;
    return n;
}
