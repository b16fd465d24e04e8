#!/bin/sh
# sitebench power sampler: runs in the job, on the node, around the benchmark.
#
#   sampler.sh sample rapl <sysfs_root>           print one RAPL sample
#   sampler.sh sample ipmi <command> [args...]    print one IPMI reading
#   sampler.sh loop <seconds> rapl|ipmi ...       print a sample every <seconds> until
#                                                 SIGTERM or until the job shell is gone
#
# A sample is a header "### sample <unix time>[ rc=<status>]" and its lines; each is
# written with one printf, so stopping the loop never leaves half a sample.
# Parsed by sitebench.run.energy.readers.
set -u

tab=$(printf '\t')

now() {
    date +%s.%N
}

sample_rapl() {
    root=$1
    block="### sample $(now)"
    found=0
    for zone in "$root"/intel-rapl:*; do
        [ -e "$zone/energy_uj" ] || continue
        found=1
        name=$(cat "$zone/name" 2>&1) || name="unreadable"
        # energy_uj is root-only on kernels with the CVE-2020-8694 fix: keep cat's reason.
        energy=$(cat "$zone/energy_uj" 2>&1) || energy="unreadable: $energy"
        range=$(cat "$zone/max_energy_range_uj" 2>&1) || range="unreadable: $range"
        block="$block
${zone##*/}${tab}${name}${tab}${energy}${tab}${range}"
    done
    if [ "$found" = 0 ]; then
        block="$block
no-zones${tab}${root}"
    fi
    printf '%s\n' "$block"
}

sample_ipmi() {
    when=$(now)
    out=$("$@" 2>&1)
    rc=$?
    printf '### sample %s rc=%s\n%s\n' "$when" "$rc" "$out"
}

sample() {
    kind=$1
    shift
    case "$kind" in
        rapl) sample_rapl "$@" ;;
        ipmi) sample_ipmi "$@" ;;
        *) echo "sampler.sh: unknown source '$kind'" >&2; exit 2 ;;
    esac
}

loop() {
    interval=$1
    shift
    parent=$PPID
    sleeper=""
    trap 'if [ -n "$sleeper" ]; then kill "$sleeper" 2>/dev/null; fi; exit 0' TERM INT
    while kill -0 "$parent" 2>/dev/null; do
        # wait, unlike a foreground sleep, returns as soon as SIGTERM arrives.
        sleep "$interval" &
        sleeper=$!
        wait "$sleeper"
        sleeper=""
        sample "$@"
    done
}

mode=${1:-}
[ $# -gt 0 ] && shift
case "$mode" in
    sample) sample "$@" ;;
    loop) loop "$@" ;;
    *) echo "usage: sampler.sh sample rapl|ipmi ... | loop <seconds> rapl|ipmi ..." >&2; exit 2 ;;
esac
