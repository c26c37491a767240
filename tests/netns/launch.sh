#!/bin/sh
# hydra's ssh launcher: "launch.sh [ssh options] HOST CMD...": run CMD in namespace HOST.
[ -n "$DAC_NETNS_LOG" ] && echo "$$ $*" >> "$DAC_NETNS_LOG"
while [ $# -gt 0 ]; do
  case "$1" in
    -x|-q|-T|-n|-t|-tt|-a|-A|-k|-K|-4|-6|-C|-f|-N|-Y) shift ;;
    -o|-p|-l|-i|-F|-c|-m|-b|-e|-J|-L|-R|-D|-S|-W|-w) shift 2 ;;
    -*) shift ;;
    *) break ;;
  esac
done
host="$1"; shift
# like ssh: the rest is one command line for a shell on the host
exec ip netns exec "$host" /bin/sh -c "$*"
