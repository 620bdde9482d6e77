/* The reducer's line protocol parser (c/transport/lineproto.c) accepts and
 * rejects lines as python/hushmon/store/lineproto.py does. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hm_test.h"
#include "lineproto.h"

static hm_lp_line line;
static char scratch[4096];
static char reason[256];

static int parse(const char *text)
{
    reason[0] = '\0';
    return hm_lp_parse_line(text, strlen(text), &line, scratch, reason, sizeof reason);
}

static bool str_is(hm_lp_str s, const char *want)
{
    return hm_lp_str_eq(s, want);
}

static void check_plain(hm_test_counts *c)
{
    CHECK(c, parse("cpu,host=n1,cpu=total user_pct=12.5,system_pct=1.25 1732270000000000000") == 0);
    CHECK(c, str_is(line.measurement, "cpu"));
    CHECK(c, line.ntags == 2 && str_is(line.tag_key[0], "host") && str_is(line.tag_value[0], "n1"));
    CHECK(c, str_is(line.tag_key[1], "cpu") && str_is(line.tag_value[1], "total"));
    CHECK(c, line.nfields == 2 && str_is(line.field_name[0], "user_pct"));
    CHECK(c, line.field_value[0] == 12.5 && line.field_value[1] == 1.25);
    CHECK(c, line.time_ns == 1732270000000000000LL);
    /* No tags, a trailing carriage return. */
    CHECK(c, parse("load load1=0.5 7\r") == 0);
    CHECK(c, line.ntags == 0 && line.nfields == 1 && line.time_ns == 7);
}

static void check_escapes(hm_test_counts *c)
{
    CHECK(c, parse("my\\ meas,tag\\,k=v\\=x,t2=a\\\\b f\\ 1=1.5,f\\,2=2 123") == 0);
    CHECK(c, str_is(line.measurement, "my meas"));
    CHECK(c, str_is(line.tag_key[0], "tag,k") && str_is(line.tag_value[0], "v=x"));
    CHECK(c, str_is(line.tag_value[1], "a\\b"));
    CHECK(c, str_is(line.field_name[0], "f 1") && line.field_value[0] == 1.5);
    CHECK(c, str_is(line.field_name[1], "f,2") && line.field_value[1] == 2.0);
    /* A backslash before another character stays. */
    CHECK(c, parse("m\\x f=1 1") == 0 && str_is(line.measurement, "m\\x"));
}

static void check_values(hm_test_counts *c)
{
    CHECK(c, parse("m a=5i,b=-3i,c=7u,d=12345678901234567890i,e=t,f=FALSE,g=1e3,h=.5,k=-2. 1") == 0);
    CHECK(c, line.nfields == 9);
    CHECK(c, line.field_value[0] == 5.0 && line.field_value[1] == -3.0 && line.field_value[2] == 7.0);
    CHECK(c, line.field_value[3] == 12345678901234567890.0);
    CHECK(c, line.field_value[4] == 1.0 && line.field_value[5] == 0.0);
    CHECK(c, line.field_value[6] == 1000.0 && line.field_value[7] == 0.5 && line.field_value[8] == -2.0);
    /* Strings: spaces, commas and '=' inside quotes; escaped quote. */
    CHECK(c, parse("m s=\"a b, c=d \\\" e\",v=2 100") == 0);
    CHECK(c, line.nfields == 2 && line.field_is_string[0] && !line.field_is_string[1]);
    CHECK(c, line.field_value[1] == 2.0 && line.time_ns == 100);
    /* Negative timestamps are integers too. */
    CHECK(c, parse("m v=1 -5") == 0 && line.time_ns == -5);
}

static void check_bad(hm_test_counts *c)
{
    static const char *const bad[] = {
        "m v=1",                 /* no timestamp */
        "m v=1 1 2",             /* four sections */
        "m  v=1 1",              /* empty section */
        ",a=b v=1 1",            /* empty measurement */
        "m,a v=1 1",             /* tag without value */
        "m,a=b=c v=1 1",         /* two '=' in a tag */
        "m,=b v=1 1",            /* empty tag key */
        "m,a= v=1 1",            /* empty tag value */
        "m v 1",                 /* field without '=' */
        "m =1 1",                /* empty field name */
        "m v= 1",                /* empty value */
        "m v=abc 1",             /* not a number */
        "m v=1x 1",              /* trailing garbage */
        "m v=0x10 1",            /* hex floats are not line protocol */
        "m v=nan 1",             /* non-finite */
        "m v=1e999 1",           /* overflows to inf */
        "m v=-1u 1",             /* negative unsigned */
        "m v=1.5i 1",            /* integer with a point */
        "m v=\"abc 1",           /* unterminated string */
        "m v=1 12a",             /* bad timestamp */
        "m v=1 99999999999999999999", /* timestamp past 64 bits */
        "m v=1,w 1",             /* second field without value */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = parse(bad[i]);
        if (rc == 0)
            fprintf(stderr, "accepted bad line: %s\n", bad[i]);
        CHECK(c, rc == -1 && reason[0] != '\0');
    }
    CHECK(c, parse("m v=1") == -1 && strstr(reason, "no timestamp") != NULL);
}

/* Numbers read in the same pass as the field split (simple lines) equal
 * strtod's (floats) and the integer's double, bit for bit, also next to
 * the texts that must go the general way (exponents, long mantissas, `u`,
 * words) and in a line with escapes (the general path). */
static void check_number_paths(hm_test_counts *c)
{
    static const char *const floats[] = {"0", "-0", "+0.0", "1.", ".5", "-.25", "007.50",
                                         "123456789012345", "1234567890123456", "0.000000000000000000001",
                                         "0.1234567890123456789012", "99.99e1", "-1E-3", "4503599627370497",
                                         "3.141592653589793", "-17.625", "0.30000000000000004"};
    char text[256];
    for (size_t i = 0; i < sizeof floats / sizeof floats[0]; i++) {
        double want = strtod(floats[i], NULL);
        snprintf(text, sizeof text, "m a=%s,b=%s 1", floats[i], floats[i]);
        bool ok = parse(text) == 0 && line.nfields == 2 && !line.field_is_string[0];
        CHECK(c, ok && memcmp(&line.field_value[0], &want, sizeof want) == 0 &&
                     memcmp(&line.field_value[1], &want, sizeof want) == 0);
        snprintf(text, sizeof text, "m\\x a=%s 1", floats[i]); /* escapes: the general path */
        CHECK(c, parse(text) == 0 && memcmp(&line.field_value[0], &want, sizeof want) == 0);
    }
    /* Random decimals: the fast path against strtod. */
    srand(12345);
    for (int n = 0; n < 20000; n++) {
        int digits = 1 + rand() % 18, point = rand() % (digits + 1);
        size_t k = 0;
        if (rand() % 3 == 0)
            text[k++] = '-';
        char num[64];
        size_t nk = 0;
        for (int d = 0; d < digits; d++) {
            if (d == point && rand() % 2)
                num[nk++] = '.';
            num[nk++] = (char)('0' + rand() % 10);
        }
        num[nk] = '\0';
        char full[128];
        snprintf(full, sizeof full, "%.*s%s", (int)k, "-", num);
        double want = strtod(full, NULL);
        snprintf(text, sizeof text, "m v=%s,w=12i 1", full);
        CHECK(c, parse(text) == 0 && memcmp(&line.field_value[0], &want, sizeof want) == 0 &&
                     line.field_value[1] == 12.0);
    }
    /* Integers: the double of the int64 (-0 is 0), `u` and words the general way. */
    CHECK(c, parse("m a=-0i,b=-5i,c=9007199254740993i,d=+7i,e=3u,f=true,g=-4 1") == 0);
    CHECK(c, line.nfields == 7 && line.field_value[0] == 0.0 && !signbit(line.field_value[0]));
    CHECK(c, line.field_value[1] == -5.0 && line.field_value[2] == 9007199254740992.0);
    CHECK(c, line.field_value[3] == 7.0 && line.field_value[4] == 3.0 && line.field_value[5] == 1.0);
    CHECK(c, line.field_value[6] == -4.0);
    CHECK(c, parse("m a=-0 1") == 0 && signbit(line.field_value[0]));
    /* Bad texts the fast path must not take. */
    static const char *const bad[] = {"m a=1.5i 1", "m a=1..5 1", "m a=12i5 1", "m a=- 1", "m a=. 1",
                                      "m a=1,b= 1", "m a=1, 1", "m a=-3u 1", "m =1 1", "m a=1x 1"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(c, parse(bad[i]) != 0);
}

/* Timestamps repeat from line to line (remembered by their text): each
 * line still gets its own, and a bad one is refused after a good one. */
static void check_timestamps(hm_test_counts *c)
{
    CHECK(c, parse("m a=1 1732270000000000000") == 0 && line.time_ns == 1732270000000000000LL);
    CHECK(c, parse("m a=1 1732270000000000000") == 0 && line.time_ns == 1732270000000000000LL);
    CHECK(c, parse("m a=1 1732270001000000000") == 0 && line.time_ns == 1732270001000000000LL);
    CHECK(c, parse("m a=1 17322700010000000001") != 0);
    CHECK(c, parse("m a=1 -5") == 0 && line.time_ns == -5);
    CHECK(c, parse("m a=1 1732270001000000000") == 0 && line.time_ns == 1732270001000000000LL);
}

static void check_skippable(hm_test_counts *c)
{
    CHECK(c, hm_lp_skippable("", 0));
    CHECK(c, hm_lp_skippable("\r", 1));
    CHECK(c, hm_lp_skippable("# comment", 9));
    CHECK(c, !hm_lp_skippable("m v=1 1", 7));
}

/* Every line of a real agent batch parses. */
static void check_fixture(hm_test_counts *c)
{
    FILE *f = fopen("tests/fixtures/spool/testbed-4n2r/n1-3.lp", "r");
    CHECK(c, f != NULL);
    if (f == NULL)
        return;
    char buf[8192];
    int lines = 0, ok = 0;
    while (fgets(buf, sizeof buf, f)) {
        size_t n = strlen(buf);
        if (n && buf[n - 1] == '\n')
            buf[--n] = '\0';
        if (hm_lp_skippable(buf, n))
            continue;
        lines++;
        if (hm_lp_parse_line(buf, n, &line, scratch, reason, sizeof reason) == 0)
            ok++;
        else
            fprintf(stderr, "fixture line rejected: %s: %s\n", reason, buf);
    }
    fclose(f);
    CHECK(c, lines > 100 && ok == lines);
}

int main(void)
{
    hm_test_counts c = {0, 0};
    check_plain(&c);
    check_escapes(&c);
    check_values(&c);
    check_bad(&c);
    check_number_paths(&c);
    check_timestamps(&c);
    check_skippable(&c);
    check_fixture(&c);
    return hm_test_finish("test_lineproto", &c);
}
