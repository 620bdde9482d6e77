/* A program's --json document: one JSON object written to a file or, for
 * "-", to stdout (the text report then goes to stderr). Opening names the
 * program first; closing reports a failed write or close in one message.
 * Shared by the programs whose --json FILE|- writes one object. */
#ifndef HM_JSON_DOC_H
#define HM_JSON_DOC_H

#include "hm_error.h"
#include "hm_json.h"

/* Opens path ("-": stdout), begins the pretty-printed top object and writes
 * "program": program. Returns 0, or -1 with err set (nothing opened). */
int hm_json_doc_open(hm_json *j, const char *path, const char *program, hm_error *err);

/* Ends the top object, finishes the document and closes the file (flushes
 * stdout). Returns 0, or -1 with err naming path when any of it failed. */
int hm_json_doc_close(hm_json *j, const char *path, hm_error *err);

#endif
