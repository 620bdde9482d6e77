#!/usr/bin/env bash
# The whole NATS path at a cluster's size on a machine of many cores that
# has Python 3.12 with numpy, scipy, matplotlib and pyarrow but neither this
# project's build nor its other packages (the device machine: docs/device-check.md).
#
#   bench/device_load.sh --pack DIR     here: put in DIR what travels (the
#       cp312 wheels of DuckDB, its two extensions, nats-py and orjson; the C
#       daemons and libhushmon_collect; libnats and libprotobuf-c; nats-server,
#       compressed): about 50 MB
#   bench/device_load.sh DIR AGENTS MINUTES [bench_transport_load.py args]
#       there: install the wheels under /tmp, start the bench with them
#       (output also to $OUT/load.log and $OUT/load.json when $OUT is set)
#
# e.g. bench/device_load.sh .devcarry 10000 4 --racks 4 --collectors 2 \
#          --warmup-s 90 --drain-s 60 --digest-nice 19   (docs/transport.md)
set -uo pipefail
cd "$(dirname "$0")/.."

if [ "${1:-}" = "--pack" ]; then
    D="${2:?--pack needs a folder}"
    mkdir -p "$D/whl" "$D/build/bin" "$D/build/lib" "$D/libs" || exit 2
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
        --platform manylinux2014_x86_64 -d "$D/whl" \
        "$(grep -o 'duckdb==[0-9.]*' pyproject.toml)" \
        "$(grep -o 'duckdb-extension-ducklake==[0-9.]*' pyproject.toml)" \
        "$(grep -o 'duckdb-extension-sqlite-scanner==[0-9.]*' pyproject.toml)" \
        nats-py orjson || exit 2
    cp build/bin/hushmon-reduce build/bin/hushmon-loadgen "$D/build/bin/" || exit 2
    cp build/lib/libhushmon_collect.so "$D/build/lib/" || exit 2
    ldd build/lib/libhushmon_collect.so build/bin/hushmon-reduce | awk '$3 ~ /^\// {print $3}' \
        | grep -E '/lib(nats|protobuf-c)\.so' | sort -u | while read -r lib; do cp -L "$lib" "$D/libs/"; done
    nats="$(command -v nats-server)" || { echo "device_load: no nats-server here" >&2; exit 2; }
    xz -T1 -6 -c "$nats" > "$D/nats-server.xz" || exit 2
    echo "device_load: $(du -sh "$D" | cut -f1) in $D"
    exit 0
fi

D="$(cd "${1:?usage: device_load.sh --pack DIR | DIR AGENTS MINUTES [args]}" && pwd)" || exit 2
AGENTS="${2:?agents}"; MINUTES="${3:?minutes}"; shift 3
OUTDIR="${OUT:-/tmp/device-load}"; mkdir -p "$OUTDIR" || exit 2
SITE=/tmp/hm-site; TOOLS=/tmp/hm-tools; LIBS=/tmp/hm-libs
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" \
    "$D"/whl/*.whl || { echo "device_load: the wheels do not install here" >&2; exit 2; }
export PYTHONPATH="$SITE:$PWD/python:$PWD/bench"
mkdir -p "$TOOLS" "$LIBS" || exit 2
xz -dc "$D/nats-server.xz" > "$TOOLS/nats-server" && chmod +x "$TOOLS/nats-server" || exit 2
export PATH="$TOOLS:$PATH"
# only the libraries this machine's loader lacks (its own OpenSSL stays first)
KNOWN="$(ldconfig -p | awk 'NR > 1 {print $1}')"
for lib in "$D"/libs/*; do
    grep -qxF "$(basename "$lib")" <<<"$KNOWN" || ln -sf "$lib" "$LIBS/"
done
export LD_LIBRARY_PATH="$LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export HUSHMON_BIN="$D/build/bin" PYTHONUNBUFFERED=1
# the bench starts .venv/bin/hushmon: here, this Python with the tree's package
PY3="$(command -v python3)"
mkdir -p .venv/bin || exit 2
ln -sf "$PY3" .venv/bin/python
printf '#!/bin/sh\nexec %s -c "import sys; from hushmon.cli import main; sys.exit(main())" "$@"\n' \
    "$PY3" > .venv/bin/hushmon && chmod +x .venv/bin/hushmon || exit 2
.venv/bin/hushmon collect --help > /dev/null || { echo "device_load: hushmon collect does not start" >&2; exit 2; }
echo "# $(nproc) cores, $(free -g | awk '/Mem/ {print $2}') GiB; $(python3 --version); $(nats-server --version)"
python3 bench/bench_transport_load.py --agents "$AGENTS" --minutes "$MINUTES" --engine c \
    --json "$OUTDIR/load.json" "$@" 2>&1 | tee "$OUTDIR/load.log"
rc=${PIPESTATUS[0]}
echo "# bench exit $rc; loadavg $(cat /proc/loadavg)"
exit "$rc"
