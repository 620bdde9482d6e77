#include "probe_node.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static FILE *open_under(const char *root, const char *path)
{
    char full[4096];
    snprintf(full, sizeof full, "%s%s", strcmp(root, "/") == 0 ? "" : root, path);
    return fopen(full, "r");
}

static void read_model(hm_probe_node *n, const char *root)
{
    snprintf(n->cpu_model, sizeof n->cpu_model, "unknown");
    FILE *f = open_under(root, "/proc/cpuinfo");
    if (f == NULL)
        return;
    char line[1024];
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "model name", 10) != 0)
            continue;
        const char *v = strchr(line, ':');
        if (v == NULL)
            continue;
        v++;
        while (*v == ' ' || *v == '\t')
            v++;
        size_t len = strcspn(v, "\n");
        while (len > 0 && (v[len - 1] == ' ' || v[len - 1] == '\t'))
            len--; /* some models end in spaces: not part of the name */
        /* snprintf's "%.*s": the model without its newline */
        snprintf(n->cpu_model, sizeof n->cpu_model, "%.*s", (int)len, v);
        break;
    }
    fclose(f);
}

/* "300M", "48K", "1024K" as sysfs writes cache sizes. */
static int64_t cache_size(const char *text)
{
    char *end = NULL;
    long long v = strtoll(text, &end, 10);
    if (end == text || v <= 0)
        return 0;
    if (*end == 'K')
        return (int64_t)v * 1024;
    if (*end == 'M')
        return (int64_t)v * 1024 * 1024;
    return (int64_t)v;
}

static void read_llc(hm_probe_node *n, const char *root)
{
    n->llc_bytes = 0;
    for (int i = 0; i < 16; i++) {
        char path[256], type[32] = "", size[32] = "";
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/type", i);
        FILE *f = open_under(root, path);
        if (f == NULL)
            break;
        bool ok = fgets(type, sizeof type, f) != NULL;
        fclose(f);
        if (!ok || strncmp(type, "Instruction", 11) == 0)
            continue;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        f = open_under(root, path);
        if (f == NULL)
            continue;
        if (fgets(size, sizeof size, f) != NULL) {
            int64_t b = cache_size(size);
            if (b > n->llc_bytes)
                n->llc_bytes = b;
        }
        fclose(f);
    }
}

static void read_mem(hm_probe_node *n, const char *root)
{
    n->mem_available_bytes = 0;
    FILE *f = open_under(root, "/proc/meminfo");
    if (f == NULL)
        return;
    char line[256];
    long long kib;
    while (fgets(line, sizeof line, f) != NULL)
        if (sscanf(line, "MemAvailable: %lld kB", &kib) == 1)
            n->mem_available_bytes = (int64_t)kib * 1024;
    fclose(f);
}

void hm_probe_node_read(hm_probe_node *n, const char *root)
{
    if (gethostname(n->host, sizeof n->host) != 0)
        snprintf(n->host, sizeof n->host, "unknown");
    n->host[sizeof n->host - 1] = '\0';
    read_model(n, root);
    n->online_cpus = sysconf(_SC_NPROCESSORS_ONLN);
    read_llc(n, root);
    read_mem(n, root);
}
