#!/bin/sh
# Hydra's "ssh" launcher for network namespaces used as hosts.
#
# Hydra (HYDRA_LAUNCHER=ssh, HYDRA_LAUNCHER_EXEC=this file) calls
#     launch.sh -x HOST "/path/hydra_pmi_proxy" --control-port ADDR:PORT ...
# like ssh: options first, then the host, then the remote command as words that a
# shell on the host joins and parses again (the proxy's path comes quoted). This runs
# that command line with /bin/sh inside the network namespace HOST (`ip netns exec`),
# keeping the environment (hydra sends the processes' environment itself anyway).
# With DAC_NETNS_LOG set, each call appends "PID ARGS..." to that file.
[ -n "$DAC_NETNS_LOG" ] && echo "$$ $*" >> "$DAC_NETNS_LOG"
while [ $# -gt 0 ]; do
  case "$1" in
    # ssh options without a value
    -x|-X|-q|-T|-n|-t|-tt|-a|-A|-k|-K|-4|-6|-C|-f|-N|-Y|-v) shift ;;
    # ssh options with a value
    -o|-p|-l|-i|-F|-c|-m|-b|-e|-J|-L|-R|-D|-S|-W|-w|-E|-B|-I|-O|-Q) shift 2 ;;
    --) shift; break ;;
    -*) shift ;;
    *) break ;;
  esac
done
if [ $# -lt 2 ]; then
  echo "launch.sh: usage: launch.sh [ssh options] NAMESPACE COMMAND..." >&2
  exit 255
fi
host="$1"; shift
PATH="$PATH:/usr/sbin:/sbin"
exec ip netns exec "$host" /bin/sh -c "$*"
