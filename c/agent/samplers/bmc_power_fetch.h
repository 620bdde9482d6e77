/* bmc_power's reads of the BMC, one per call, made on its poller thread
 * (never on the sampling path): Redfish over HTTPS with libcurl, or
 * `ipmitool dcmi power reading` as a child process. Each read gives up
 * after bmc.timeout_ms, and sooner when stop_fd becomes readable (the
 * source is closing: a hung BMC must not hold up a reload or a stop). */
#ifndef HM_BMC_POWER_FETCH_H
#define HM_BMC_POWER_FETCH_H

#include "config.h"
#include "hm_error.h"

typedef struct hm_bmc_fetch hm_bmc_fetch;

/* Checks the settings (credentials file and its mode, libcurl built in)
 * and keeps what the reads need; -1 says why the backend cannot run. */
int hm_bmc_fetch_open(hm_bmc_fetch **out, const hm_agent_config *cfg, int stop_fd, hm_error *err);
/* One reading of node power, W: 0, or -1 saying why not. */
int hm_bmc_fetch_read(hm_bmc_fetch *f, double *watts, hm_error *err);
void hm_bmc_fetch_close(hm_bmc_fetch *f);

#endif
