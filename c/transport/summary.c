#include "summary.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* gamma = (1 + alpha) / (1 - alpha); the factor turns log(x) into a key. */
static double inv_log_gamma(void)
{
    static const double gamma = (1.0 + HM_SKETCH_ALPHA) / (1.0 - HM_SKETCH_ALPHA);
    return 1.0 / log(gamma);
}

double hm_sketch_gamma(void)
{
    return (1.0 + HM_SKETCH_ALPHA) / (1.0 - HM_SKETCH_ALPHA);
}

int32_t hm_sketch_key(double magnitude)
{
    return (int32_t)ceil(log(magnitude) * inv_log_gamma());
}

double hm_sketch_bucket_value(int32_t key)
{
    double gamma = hm_sketch_gamma();
    return 2.0 * pow(gamma, key) / (gamma + 1.0);
}

void hm_summary_init(hm_summary *s)
{
    memset(s, 0, sizeof *s);
    s->min = INFINITY;
    s->max = -INFINITY;
}

void hm_summary_free(hm_summary *s)
{
    free(s->sketch.pos.counts);
    free(s->sketch.neg.counts);
    s->sketch.pos.counts = s->sketch.neg.counts = NULL;
}

/* Makes key addressable in the store, growing it with slack on the side it
 * grows so a drifting sensor does not reallocate on every new bucket. */
static int store_reserve(hm_sketch_store *st, int32_t key, hm_error *err)
{
    if (st->len > 0 && key >= st->offset && key < st->offset + (int64_t)st->len)
        return 0;
    int64_t lo = st->len ? st->offset : key, hi = st->len ? st->offset + (int64_t)st->len : key + 1;
    if (key < lo)
        lo = key - (st->len ? (int64_t)st->len / 2 + 4 : 0);
    if (key >= hi)
        hi = key + 1 + (st->len ? (int64_t)st->len / 2 + 4 : 0);
    /* Keys are within +-40,000 for finite doubles: a larger span is a bug
     * (and this bound lets the compiler see the size is sane). */
    if (hi - lo <= 0 || hi - lo > (int64_t)1 << 20)
        return hm_error_set(err, "sketch span %" PRId64 " buckets out of range", hi - lo);
    size_t new_len = (size_t)(hi - lo);
    uint64_t *counts = calloc(new_len, sizeof *counts);
    if (counts == NULL)
        return hm_error_set(err, "out of memory for a sketch of %zu buckets", new_len);
    if (st->len)
        memcpy(counts + (st->offset - lo), st->counts, st->len * sizeof *counts);
    free(st->counts);
    st->counts = counts;
    st->offset = (int32_t)lo;
    st->len = (uint32_t)new_len;
    return 0;
}

int hm_sketch_add_count(hm_sketch *k, int sign, int32_t key, uint64_t n, hm_error *err)
{
    if (sign == 0) {
        k->zero += n;
        return 0;
    }
    hm_sketch_store *st = sign > 0 ? &k->pos : &k->neg;
    if (store_reserve(st, key, err) != 0)
        return -1;
    st->counts[key - st->offset] += n;
    return 0;
}

static int sketch_add(hm_sketch *k, double x, hm_error *err)
{
    if (x == 0.0)
        return hm_sketch_add_count(k, 0, 0, 1, err);
    if (x != k->last_x) { /* last_x starts at 0, never a key's value here */
        k->last_x = x;
        k->last_key = hm_sketch_key(fabs(x));
    }
    return hm_sketch_add_count(k, x > 0 ? 1 : -1, k->last_key, 1, err);
}

/* Shewchuk's grow-expansion (Python's msum): after it, the parts are
 * non-overlapping and their exact sum is the exact sum of all values. */
void hm_exact_sum_add(hm_exact_sum *e, double x)
{
    int i = 0;
    for (int j = 0; j < e->n; j++) {
        double y = e->part[j];
        if (fabs(x) < fabs(y)) {
            double t = x;
            x = y;
            y = t;
        }
        double hi = x + y;
        double lo = y - (hi - x);
        if (lo != 0.0)
            e->part[i++] = lo;
        x = hi;
    }
    if (i == HM_SUM_PARTS_MAX) {
        /* Unreachable for sensor data (see HM_SUM_PARTS_MAX). */
        e->part[1] += e->part[0];
        memmove(e->part, e->part + 1, (size_t)(i - 1) * sizeof e->part[0]);
        i--;
    }
    e->part[i++] = x;
    e->n = i;
}

/* The correctly rounded value of the parts (Python's math.fsum ending,
 * round-half-even included), so C and Python agree bit for bit. */
double hm_exact_sum_value(const hm_exact_sum *e)
{
    int n = e->n;
    double hi = 0.0, lo = 0.0;
    if (n == 0)
        return 0.0;
    hi = e->part[--n];
    while (n > 0) {
        double x = hi, y = e->part[--n];
        hi = x + y;
        double yr = hi - x;
        lo = y - yr;
        if (lo != 0.0)
            break;
    }
    if (n > 0 && ((lo < 0.0 && e->part[n - 1] < 0.0) || (lo > 0.0 && e->part[n - 1] > 0.0))) {
        double y = lo * 2.0;
        double x = hi + y;
        double yr = x - hi;
        if (y == yr)
            hi = x;
    }
    return hi;
}

double hm_summary_sum(const hm_summary *s)
{
    return hm_exact_sum_value(&s->sum);
}

int hm_summary_add(hm_summary *s, double x, hm_error *err)
{
    if (sketch_add(&s->sketch, x, err) != 0)
        return -1;
    s->count++;
    double delta = x - s->mean;
    s->mean += delta / (double)s->count;
    s->m2 += delta * (x - s->mean);
    if (x < s->min)
        s->min = x;
    if (x > s->max)
        s->max = x;
    hm_exact_sum_add(&s->sum, x);
    return 0;
}

static int store_merge(hm_sketch *into, int sign, const hm_sketch_store *from, hm_error *err)
{
    if (from->len == 0)
        return 0;
    hm_sketch_store *st = sign > 0 ? &into->pos : &into->neg;
    /* Reserve both ends first so the copy below touches no reallocation. */
    if (store_reserve(st, from->offset, err) != 0 ||
        store_reserve(st, from->offset + (int32_t)from->len - 1, err) != 0)
        return -1;
    for (uint32_t i = 0; i < from->len; i++)
        st->counts[from->offset + (int32_t)i - st->offset] += from->counts[i];
    return 0;
}

int hm_summary_merge(hm_summary *into, const hm_summary *from, hm_error *err)
{
    if (from->count == 0)
        return 0;
    if (store_merge(&into->sketch, 1, &from->sketch.pos, err) != 0 ||
        store_merge(&into->sketch, -1, &from->sketch.neg, err) != 0)
        return -1;
    into->sketch.zero += from->sketch.zero;
    if (into->count == 0) {
        into->mean = from->mean;
        into->m2 = from->m2;
    } else {
        /* Chan, Golub and LeVeque's pairwise update. */
        double na = (double)into->count, nb = (double)from->count, n = na + nb;
        double delta = from->mean - into->mean;
        into->mean += delta * (nb / n);
        into->m2 += from->m2 + delta * delta * (na * nb / n);
    }
    into->count += from->count;
    if (from->min < into->min)
        into->min = from->min;
    if (from->max > into->max)
        into->max = from->max;
    for (int i = 0; i < from->sum.n; i++)
        hm_exact_sum_add(&into->sum, from->sum.part[i]);
    return 0;
}

uint64_t hm_sketch_count(const hm_sketch *k)
{
    uint64_t n = k->zero;
    for (uint32_t i = 0; i < k->pos.len; i++)
        n += k->pos.counts[i];
    for (uint32_t i = 0; i < k->neg.len; i++)
        n += k->neg.counts[i];
    return n;
}

double hm_sketch_quantile(const hm_sketch *k, double q)
{
    uint64_t n = hm_sketch_count(k);
    if (n == 0 || !(q >= 0.0 && q <= 1.0))
        return NAN;
    uint64_t rank = (uint64_t)floor(q * (double)(n - 1));
    uint64_t seen = 0;
    /* Most negative first: the largest key of the negative store. */
    for (uint32_t i = k->neg.len; i-- > 0;) {
        seen += k->neg.counts[i];
        if (seen > rank)
            return -hm_sketch_bucket_value(k->neg.offset + (int32_t)i);
    }
    seen += k->zero;
    if (seen > rank)
        return 0.0;
    for (uint32_t i = 0; i < k->pos.len; i++) {
        seen += k->pos.counts[i];
        if (seen > rank)
            return hm_sketch_bucket_value(k->pos.offset + (int32_t)i);
    }
    return NAN; /* unreachable: the counts add up to n */
}
