#include "hm_json_doc.h"

#include <stdio.h>
#include <string.h>

int hm_json_doc_open(hm_json *j, const char *path, const char *program, hm_error *err)
{
    FILE *f = strcmp(path, "-") == 0 ? stdout : fopen(path, "w");
    if (f == NULL)
        return hm_error_errno(err, "opening %s", path);
    hm_json_init(j, f, true);
    hm_json_object_begin(j);
    hm_json_kv_string(j, "program", program);
    return 0;
}

int hm_json_doc_close(hm_json *j, const char *path, hm_error *err)
{
    hm_json_object_end(j);
    int rc = hm_json_finish(j);
    /* stdout stays open for the rest of the program's output */
    if (j->out != stdout ? fclose(j->out) != 0 : fflush(stdout) != 0)
        rc = -1;
    return rc != 0 ? hm_error_set(err, "writing JSON to %s failed", path) : 0;
}
