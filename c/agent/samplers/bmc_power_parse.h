/* bmc_power's parsers, apart from its thread so the unit tests call them
 * on fixture answers: a Redfish resource's JSON, ipmitool's DCMI power
 * reading, and the credentials file (its mode checked). */
#ifndef HM_BMC_POWER_PARSE_H
#define HM_BMC_POWER_PARSE_H

#include <stddef.h>

#include "hm_error.h"

/* Node power in watts from one Redfish resource:
 *   EnvironmentMetrics  {"PowerWatts": {"Reading": W}}
 *   Power (deprecated)  {"PowerControl": [{"PowerConsumedWatts": W}, ...]}
 *                       (the first member: the chassis' total on the
 *                       BMCs whose answers we have seen)
 *   a Sensor            {"ReadingType": "Power", "Reading": W}
 * Returns 0 with *watts, or -1 saying why (not JSON, no reading, a null
 * reading: the BMC has none, e.g. host powered off). */
int hm_bmc_parse_redfish(const char *body, size_t len, double *watts, hm_error *err);

/* Node power in watts from `ipmitool dcmi power reading` output: its
 * "Instantaneous power reading: N Watts" line. A reading the BMC marks
 * not active ("Power reading state is: deactivated") or output with no
 * reading (an error, "not available", no DCMI) is -1 with the output's
 * first line in the message. */
int hm_bmc_parse_dcmi(const char *text, size_t len, double *watts, hm_error *err);

/* "user:password" from the first line of path (the password may hold
 * ':'). The file must be a regular file owned by the agent's effective
 * user with no group or other permission bits (0600 or 0400): anything
 * else is -1 naming its mode, and nothing is read. */
int hm_bmc_read_credentials(const char *path, char *user, size_t user_size, char *password,
                            size_t password_size, hm_error *err);

#endif
