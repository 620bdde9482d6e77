/* Rates from monotonically increasing kernel counters.
 *
 * A counter can wrap (32-bit counters in some drivers and in legacy
 * InfiniBand data counters) or restart from zero (driver reload, device
 * re-created, cgroup re-made). A wrap is taken as such only when the
 * counter is narrow and the drop looks like crossing its top; anything
 * else is a reset, and the rate for that interval is unknown (absent),
 * never a huge or negative number. */
#ifndef HM_COUNTER_H
#define HM_COUNTER_H

#include <stdbool.h>
#include <stdint.h>

/* Sets *delta and returns true if prev -> cur is a valid increase for a
 * counter width_bits wide (32 or 64); false on a reset. */
bool hm_counter_delta(uint64_t prev, uint64_t cur, unsigned width_bits, uint64_t *delta);

/* Rate per second of prev -> cur over dt_s; NaN on reset or dt_s <= 0. */
double hm_counter_rate(uint64_t prev, uint64_t cur, unsigned width_bits, double dt_s);

#endif
