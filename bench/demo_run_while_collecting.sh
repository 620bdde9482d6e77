#!/bin/bash
# Issue 20's must-show on a 4-node NATS test bed (root; run it under
# flock /tmp/hushmon-bed.lock where others share the machine): a first
# `hushmon run -- srun -N 4 butterfly`, then a second one while `hushmon
# digest` of the first job runs in a loop and the lake's stored-batch count
# is logged every 0.5 s. The log (OUT/log.txt, printed at the end) shows
# the collector's pid before and after (the same: never stopped), the count
# growing while the second run waits for the collector and digests, when
# its digest.json was written, each digest of the first job with its exit
# code, and `hushmon transport status` read while the collector runs.
#
#     sudo bench/demo_run_while_collecting.sh [OUT]   (default OUT: /tmp/hmdemo)
set -u
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/hmdemo}
mkdir -p "$OUT"
H=.venv/bin/hushmon
D=/var/tmp/hm-demo4-$$
L=$OUT/log.txt
: > $L
cat /proc/loadavg | sed 's/^/load at start: /' >> $L
$H testbed up --nodes 4 --racks 2 --transport nats --data-dir $D >> $L 2>&1 || { echo "up failed" >> $L; exit 1; }
ARGS="build/bin/butterfly --cycles 2 --comm-ms 500 --compute-ms 500 --length 1M"
$H run --data-dir $D --json $OUT/run1.json -- srun -N 4 $ARGS >> $L 2>&1
J1=$(.venv/bin/python -c "import json;print(json.load(open('$OUT/run1.json'))['job'])")
echo "first job: $J1" >> $L
PID0=$(pgrep -f "hushmon.cli collect --url" | head -1); echo "collector pid before: $PID0" >> $L
( while true; do
    n=$(.venv/bin/python -c "
from hushmon.store.schema import open_store_readonly
c=open_store_readonly('$D/hushmon.lake');print(c.execute('select count(*) from transport_batches').fetchall()[0][0])" 2>&1)
    echo "$(date +%T.%N | cut -c1-12) stored batches: $n" >> $L; sleep 0.5; done ) &
LOGGER=$!
( while true; do s=$(date +%T); $H digest $J1 --data-dir $D > $OUT/dig.out 2>$OUT/dig.err; rc=$?; echo "digest of $J1 $s..$(date +%T) exit $rc" >> $L; done ) &
DIG=$!
echo "$(date +%T) second run starts" >> $L
$H run --data-dir $D --json $OUT/run2.json -- srun -N 4 $ARGS >> $OUT/run2.err 2>&1
rc=$?
echo "$(date +%T) second run ended, exit $rc" >> $L
grep -E "digest|job " $OUT/run2.err | head -5 >> $L
stat -c '%y run2 digest.json written' "$(.venv/bin/python -c "import json;print(json.load(open('$OUT/run2.json'))['digest']['json'])")" >> $L
sleep 3
kill $LOGGER $DIG; wait 2>/dev/null
PID1=$(pgrep -f "hushmon.cli collect --url" | head -1); echo "collector pid after: $PID1" >> $L
$H transport status --data-dir $D >> $L 2>&1
cat /proc/loadavg | sed 's/^/load at end: /' >> $L
$H testbed down >> $L 2>&1
rm -rf $D
cat $L
