#!/usr/bin/env bash
# Open MPI's remote-shell agent for the hosts of scripts/netns_cluster.sh: what ssh is on a real cluster.
#
#   mpirun --mca plm_rsh_agent scripts/netns_rsh_agent.sh --hostfile "$(scripts/netns_cluster.sh hostfile 2)" ...
#
# Open MPI calls it as `AGENT HOST WORD...`, the words being a shell command line (it starts orted that
# way), so it behaves like `ssh HOST WORD...`: the words are joined with spaces and run by `sh -c` inside
# the host, in / (ssh lands in $HOME; / exists on every host, while a folder under the host's private /tmp
# may not). Like ssh, it does not pass the caller's environment on, only PATH, HOME, USER, LOGNAME, SHELL,
# LANG and LD_LIBRARY_PATH: a variable that a rank on another host needs must travel by mpirun's
# `-x NAME`, as on a real cluster. BRAID_CLUSTER_NAME selects the cluster, as for netns_cluster.sh.
set -euo pipefail

[ $# -ge 2 ] || { echo "netns_rsh_agent: usage: $0 HOST COMMAND..." >&2; exit 2; }
host=$1
shift
keep=(PATH="${PATH:-/usr/local/bin:/usr/bin:/bin}" HOME="${HOME:-/root}" USER="${USER:-$(id -un)}"
      LOGNAME="${LOGNAME:-$(id -un)}" SHELL=/bin/sh LANG="${LANG:-C.UTF-8}")
[ -n "${LD_LIBRARY_PATH:-}" ] && keep+=(LD_LIBRARY_PATH="$LD_LIBRARY_PATH")
[ -n "${BRAID_CLUSTER_NAME:-}" ] && keep+=(BRAID_CLUSTER_NAME="$BRAID_CLUSTER_NAME")
exec "$(dirname "$(readlink -f "$0")")/netns_cluster.sh" exec --cwd / "$host" env -i "${keep[@]}" sh -c "$*"
