#include <math.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <unistd.h>

#include "hm_array.h"
#include "hm_json.h"
#include "hm_json_doc.h"
#include "hm_parse.h"
#include "hm_test.h"

static char *render(void (*build)(hm_json *), int *finish_rc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    hm_json j;
    hm_json_init(&j, f, false);
    build(&j);
    *finish_rc = hm_json_finish(&j);
    fclose(f);
    return buf;
}

static void build_nested(hm_json *j)
{
    hm_json_object_begin(j);
    hm_json_kv_string(j, "op", "bcast \"x\"\n");
    hm_json_kv_double(j, "mean", 1.5e-6);
    hm_json_kv_double(j, "nan", NAN);
    hm_json_key(j, "sizes");
    hm_json_array_begin(j);
    hm_json_int(j, 1);
    hm_json_int(j, -2);
    hm_json_int(j, INT64_MIN);
    hm_json_int(j, 0);
    hm_json_uint(j, UINT64_MAX);
    hm_json_array_end(j);
    hm_json_key(j, "empty");
    hm_json_object_begin(j);
    hm_json_object_end(j);
    hm_json_kv_bool(j, "ok", true);
    hm_json_object_end(j);
}

static void build_unbalanced(hm_json *j)
{
    hm_json_array_begin(j);
}

static void test_json(hm_test_counts *c)
{
    int rc;
    char *s = render(build_nested, &rc);
    CHECK(c, rc == 0);
    CHECK(c, strcmp(s, "{\"op\":\"bcast \\\"x\\\"\\n\",\"mean\":1.5e-06,\"nan\":null,"
                       "\"sizes\":[1,-2,-9223372036854775808,0,18446744073709551615],\"empty\":{},\"ok\":true}\n") == 0);
    free(s);
    s = render(build_unbalanced, &rc);
    CHECK(c, rc == -1);
    free(s);
}

/* A --json document to a file: the program named first, the file closed;
 * a folder that is not there and a full device fail with the path named. */
static void test_json_doc(hm_test_counts *c)
{
    char path[] = "/tmp/hm_test_json_doc_XXXXXX";
    int fd = mkstemp(path);
    CHECK(c, fd >= 0);
    close(fd);
    hm_error err = {{0}};
    hm_json j;
    CHECK(c, hm_json_doc_open(&j, path, "hushmon-x", &err) == 0);
    hm_json_kv_int(&j, "n", 3);
    CHECK(c, hm_json_doc_close(&j, path, &err) == 0);
    char buf[128] = {0};
    FILE *f = fopen(path, "r");
    size_t got = f != NULL ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f != NULL)
        fclose(f);
    buf[got] = '\0';
    CHECK(c, strcmp(buf, "{\n  \"program\": \"hushmon-x\",\n  \"n\": 3\n}\n") == 0);
    unlink(path);

    CHECK(c, hm_json_doc_open(&j, "/nonexistent-dir/x.json", "hushmon-x", &err) == -1);
    CHECK(c, strstr(err.msg, "opening /nonexistent-dir/x.json") != NULL);
    if (access("/dev/full", W_OK) == 0) {
        CHECK(c, hm_json_doc_open(&j, "/dev/full", "hushmon-x", &err) == 0);
        CHECK(c, hm_json_doc_close(&j, "/dev/full", &err) == -1);
        CHECK(c, strcmp(err.msg, "writing JSON to /dev/full failed") == 0);
    }
}

static void test_parse(hm_test_counts *c)
{
    hm_error err;
    int64_t v;
    CHECK(c, hm_parse_int64("64K", 0, 1 << 30, 1, &v, &err) == 0 && v == 65536);
    CHECK(c, hm_parse_int64("64K", 0, 1 << 30, 0, &v, &err) == -1);
    CHECK(c, hm_parse_int64("-5", 0, 10, 1, &v, &err) == -1);
    CHECK(c, hm_parse_int64("12abc", 0, 100, 1, &v, &err) == -1);
    CHECK(c, hm_parse_int64("", 0, 100, 1, &v, &err) == -1);
    double d;
    CHECK(c, hm_parse_double("0.25", 0, 1, &d, &err) == 0 && d == 0.25);
    CHECK(c, hm_parse_double("nan", 0, 1, &d, &err) == -1);
    CHECK(c, hm_parse_double("2", 0, 1, &d, &err) == -1);

    int64_t *sizes;
    size_t n;
    CHECK(c, hm_parse_size_list("0:8:x2", &sizes, &n, &err) == 0 && n == 5 && sizes[0] == 0 &&
                 sizes[1] == 1 && sizes[4] == 8);
    free(sizes);
    CHECK(c, hm_parse_size_list("1K,0:100:+50,3", &sizes, &n, &err) == 0 && n == 5 &&
                 sizes[0] == 1024 && sizes[3] == 100 && sizes[4] == 3);
    free(sizes);
    CHECK(c, hm_parse_size_list("1:1M:x2", &sizes, &n, &err) == 0 && n == 21 && sizes[20] == 1048576);
    free(sizes);
    CHECK(c, hm_parse_size_list("-1", &sizes, &n, &err) == -1);
    CHECK(c, hm_parse_size_list("8:1", &sizes, &n, &err) == -1);
    CHECK(c, hm_parse_size_list("1:8:x1", &sizes, &n, &err) == -1);
    CHECK(c, hm_parse_size_list("1:8", &sizes, &n, &err) == -1);
    CHECK(c, hm_parse_size_list(",", &sizes, &n, &err) == -1);
    CHECK(c, hm_parse_size_list("abc", &sizes, &n, &err) == -1 && strstr(err.msg, "abc") != NULL);
}

static void test_array_grow(hm_test_counts *c)
{
    hm_error err;
    size_t cap = 0;
    int *items = hm_array_grow(NULL, &cap, sizeof *items, 4, 8, "items", &err);
    CHECK(c, items != NULL && cap == 4);
    int *grown = hm_array_grow(items, &cap, sizeof *items, 4, 8, "items", &err);
    CHECK(c, grown != NULL && cap == 8);
    items = grown;
    /* Past the limit: refused, array and capacity untouched. */
    CHECK(c, hm_array_grow(items, &cap, sizeof *items, 4, 8, "items", &err) == NULL);
    CHECK(c, cap == 8 && strstr(err.msg, "more than 8 items") != NULL);
    free(items);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    test_json(&c);
    test_json_doc(&c);
    test_parse(&c);
    test_array_grow(&c);
    return hm_test_finish("test_json", &c);
}
