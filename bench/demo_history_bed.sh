#!/bin/bash
# Issue 22's job history on a 4-node NATS test bed (root; it holds
# /tmp/hushmon-bed.lock while the bed is up, not longer): three real
# Slurm jobs through `hushmon run` -- butterfly and snake as root, snake
# with an imbalance as the user `nobody` (srun --uid: Slurm runs it as
# them) -- into the bed's lake, each leaving its job record (the owner from
# slurmctld: the bed keeps no accounting). The bed goes down, then
# `hushmon serve` on that lake: the jobs each user's token sees, the
# operator's, and a job of root's asked with nobody's token; headless
# Chromium screenshots of the jobs page, nobody's view and the comparison
# of the two root jobs go to OUT.
#
#     sudo bench/demo_history_bed.sh [OUT]   (default OUT: /tmp/hmhistory)
set -u
cd "$(dirname "$0")/.."
OUT=${1:-/tmp/hmhistory}
mkdir -p "$OUT"
H=.venv/bin/hushmon
D=/var/tmp/hm-history-$$
L=$OUT/log.txt
: > $L
cat /proc/loadavg | sed 's/^/load at start: /' >> $L
exec 9> /tmp/hushmon-bed.lock
flock 9
$H testbed up --nodes 4 --racks 2 --transport nats --data-dir $D >> $L 2>&1 || { echo "up failed" >> $L; cat $L; exit 1; }
ARGS="--cycles 3 --comm-ms 1500 --compute-ms 1500 --length 1M"
run() {  # NAME SRUN-OPTIONS PROGRAM-OPTIONS...
    local name=$1 srun_opts=$2; shift 2
    $H run --data-dir $D --json $OUT/run-$name.json -- srun $srun_opts -N 4 "$@" >> $L 2>&1
    echo "run $name: exit $?" >> $L
}
run butterfly-root "" build/bin/butterfly $ARGS
run snake-root "" build/bin/snake $ARGS
run snake-nobody "--uid=nobody" build/bin/snake $ARGS --imbalance 1.5
cat /proc/loadavg | sed 's/^/load before the bed goes down: /' >> $L
$H testbed down >> $L 2>&1
flock -u 9  # the rest reads the lake the bed left in $D
.venv/bin/python - "$D" >> $L <<'PY'
import sys
from hushmon.history.query import JobQuery, search
from hushmon.store.schema import open_store_readonly
con = open_store_readonly(sys.argv[1] + "/hushmon.lake")
for r in search(con, JobQuery(sort="job", descending=False)).records:
    print(f"record: job {r.job} owner {r.owner} name {r.name} state {r.state} nodes {r.nodes} "
          f"worst {r.worst or '-'} findings{r.findings.rstrip()} source {r.source}")
PY
TOK=$OUT/tokens
rm -rf $TOK
$H serve token --user root --tokens-dir $TOK > $OUT/root.token 2>/dev/null
$H serve token --user nobody --tokens-dir $TOK > $OUT/nobody.token 2>/dev/null
echo "operator-token-for-the-history-demo-0123" > $OUT/admin.token; chmod 600 $OUT/admin.token
$H serve --data-dir $D --port 0 --token-file $OUT/admin.token --tokens-dir $TOK 2> $OUT/serve.err &
SERVE=$!
for _ in $(seq 100); do grep -q "http://" $OUT/serve.err && break; sleep 0.2; done
PORT=$(grep -o '127.0.0.1:[0-9]*' $OUT/serve.err | head -1 | cut -d: -f2)
B=http://127.0.0.1:$PORT
jobs() { curl -s -H "Authorization: Bearer $1" "$B/jobs.json" | .venv/bin/python -c "
import json, sys; d = json.load(sys.stdin); print(d['viewer']['user'] or 'operator', 'sees', [(j['job'], j['owner']) for j in d['jobs']])"; }
jobs "$(cat $OUT/admin.token)" >> $L
jobs "$(cat $OUT/root.token)" >> $L
jobs "$(cat $OUT/nobody.token)" >> $L
ROOTJOBS=$(curl -s -H "Authorization: Bearer $(cat $OUT/root.token)" "$B/jobs.json?sort=job&order=asc" | .venv/bin/python -c "import json,sys; print(' '.join(j['job'] for j in json.load(sys.stdin)['jobs']))")
set -- $ROOTJOBS
A=${1:-none}; C=${2:-none}
echo "nobody asks for root's job $A: HTTP $(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat $OUT/nobody.token)" $B/job/$A)" >> $L
echo "root asks for its job $A: HTTP $(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $(cat $OUT/root.token)" $B/job/$A)" >> $L
/usr/bin/time -f "compare $A $C: %e s" curl -s -o $OUT/compare.html -H "Authorization: Bearer $(cat $OUT/root.token)" "$B/compare?job=$A&job=$C" 2>> $L
shot() {
    P=$(mktemp -d)
    chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --no-first-run \
        --user-data-dir=$P --window-size=$2 --screenshot=$OUT/$1.png "$B$3" 2>/dev/null
    rm -rf $P
}
shot bed-jobs 1250,560 "/jobs?token=$(cat $OUT/admin.token)"
shot bed-nobody 1250,420 "/jobs?token=$(cat $OUT/nobody.token)"
shot bed-compare 1250,1500 "/compare?token=$(cat $OUT/root.token)&job=$A&job=$C"
kill -TERM $SERVE; wait $SERVE  # a background job of a script ignores SIGINT
cat /proc/loadavg | sed 's/^/load at end: /' >> $L
rm -rf $D
ls -la $OUT/*.png >> $L
cat $L
