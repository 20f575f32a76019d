#!/usr/bin/env bash
# A cluster of H "hosts" on this one machine, each a set of Linux namespaces that looks like a separate
# machine to braid, Open MPI and UCX. For the cross-host tests (tests/multihost/) and for trying multi-host
# jobs by hand (docs/DEPLOY.md). Needs root; exits 77 (skip) when not root or namespaces are not allowed.
#
#   netns_cluster.sh up [--hosts H] [--rate R] [--delay D] [--mtu M] [--shared-tmp]
#                                   make hosts 1..H (default 2, at most 4); idempotent: an existing cluster of
#                                   the same size is kept (its shaping set anew), another size is rebuilt
#   netns_cluster.sh down           remove everything `up` made (also a half-made cluster); idempotent
#   netns_cluster.sh exec [--cwd DIR] HOST CMD...
#                                   run CMD inside all of HOST's namespaces, environment kept, in DIR (default:
#                                   the caller's directory, which must exist there); HOST is bhN, N or 198.18.0.N
#   netns_cluster.sh status         the hosts, their addresses and shaping; exit 1 when no cluster is up
#   netns_cluster.sh shape --rate R [--delay D] | unshape     change the link shaping of a running cluster
#   netns_cluster.sh hostfile [SLOTS]   print the path of an Open MPI hostfile, SLOTS per host (default 2)
#   netns_cluster.sh env            print shell assignments to eval: BRAID_CLUSTER_{NAME,HOSTS,DIR,IFACE,ADDRS}
#
# What a host N is (N = 1..H; the name prefix is BRAID_CLUSTER_NAME, default "bcl", so that two clusters can
# coexist):
#   - network namespace  ${name}-hN: `lo` up, and `eth0` with 198.18.0.N/24, one end of a veth pair whose
#     other end (pN) sits in the bridge `br0` of namespace ${name}-br. The root namespace holds no address or
#     link of the cluster; nothing routes out of 198.18.0.0/24.
#   - UTS namespace      hostname bhN.
#   - mount namespace    /etc/hosts lists localhost and every host's name and address; /dev/shm and /tmp are
#     the host's own tmpfs (--shared-tmp keeps the machine's /tmp); /sys is a sysfs of the host's network
#     namespace (UCX and Open MPI list /sys/class/net); /proc/sys/kernel/random/boot_id reads the host's own
#     random id (braid's shared-memory host identity and UCX's system id include it; without it UCX would
#     take shared memory between "hosts").
#   - anchor process     `braid-cluster-${name}-hN infinity` (a sleep) inside the host's namespaces, until
#     `down`: `exec` enters the host through /proc/PID/ns/, which works from inside another host too (mpirun
#     on bh1 starting daemons on bh2 through scripts/netns_rsh_agent.sh).
#   No PID namespace: process ids are shared between hosts, so a process can see and signal another host's
#   processes (a real cluster cannot; UCX's shared-memory transports use /proc/PID links, which is why the
#   boot id above matters).
# Link shaping (--rate, --delay): a tbf of rate R on both ends of each host's veth, so that every host sends
# and receives at most R; a netem delay of D on the host's side, so one hop between two hosts takes D. R and D
# are tc's units: 1gbit, 8gbit (1 GB/s), 20us. A kernel without netem (CONFIG_NET_SCH_NETEM; this project's
# CI VM has none) refuses --delay with a message, before any link changes.
#
# Everything lives under /run/braid-cluster-${name}/: the namespace files (uts.N, mnt.N), anchor.N (PIDs),
# hosts, boot_id.N, hostfile.SLOTS and `size`. `down` removes the namespaces ${name}-* and that folder, and nothing else.
# Callers put `netns_cluster.sh down` in a trap; `up` itself undoes a half-made cluster when it fails.
set -euo pipefail

readonly EXIT_SKIP=77
readonly NAME=${BRAID_CLUSTER_NAME:-bcl}
readonly DIR=/run/braid-cluster-$NAME
readonly NET=198.18.0
readonly IFACE=eth0
readonly MAX_HOSTS=4

say() { echo "netns_cluster: $*" >&2; }
die() { say "$*"; exit 1; }
skip() { say "skipped: $*"; exit $EXIT_SKIP; }

host_ns() { echo "$NAME-h$1"; }
bridge_ns() { echo "$NAME-br"; }
host_name() { echo "bh$1"; }
cluster_size() { cat "$DIR/size" 2>/dev/null || echo 0; }

# Root, the tools, and a kernel that lets us make the namespaces; exit 77 otherwise, saying which.
preflight() {
  [ "$(id -u)" -eq 0 ] || skip "needs root (network, UTS and mount namespaces, veth links); running as uid $(id -u)"
  local t
  for t in ip tc nsenter unshare mount flock; do
    command -v "$t" >/dev/null || skip "'$t' is not installed"
  done
  local why
  if ! why=$(unshare --net --uts --mount --propagation private true 2>&1); then
    skip "this machine does not allow new network/UTS/mount namespaces: ${why:-unshare failed}"
  fi
}

# Serialises up/down/shape of one cluster (two ctest runs, a person and a test).
lock() {
  mkdir -p /run/lock
  exec 9>"/run/lock/braid-cluster-$NAME.lock"
  flock 9
}

resolve_host() {
  local h=$1 n
  case "$h" in
    bh[0-9]*) n=${h#bh} ;;
    "$NET".[0-9]*) n=${h##*.} ;;
    [0-9]*) n=$h ;;
    *) die "unknown host '$h': use bhN, N or $NET.N" ;;
  esac
  [[ "$n" =~ ^[0-9]+$ ]] && [ "$n" -ge 1 ] && [ "$n" -le "$(cluster_size)" ] ||
    die "no host '$h' in cluster '$NAME' (hosts 1..$(cluster_size); is it up?)"
  echo "$n"
}

# tbf's bucket: 1 ms worth of the rate, at least 128 KiB (a veth hands tc up to 64 KiB GSO packets).
tbf_burst() {
  local bits
  bits=$(tc_rate_bits "$1")
  local b=$((bits / 8 / 1000))
  [ "$b" -lt 131072 ] && b=131072
  echo "$b"
}

tc_rate_bits() {
  local r=$1 num unit
  num=${r%%[a-zA-Z]*}
  unit=${r#"$num"}
  [[ "$num" =~ ^[0-9]+$ ]] || die "--rate '$r': expected a number and a tc unit (1gbit, 500mbit, 8gbit)"
  case "$unit" in
    gbit) echo $((num * 1000000000)) ;;
    mbit) echo $((num * 1000000)) ;;
    kbit) echo $((num * 1000)) ;;
    bit | "") echo "$num" ;;
    *) die "--rate '$r': unit '$unit' not understood (use bit, kbit, mbit or gbit)" ;;
  esac
}

apply_shaping() {
  local rate=$1 delay=$2 n ns dev
  # Probe first, on the bridge namespace's lo, so that a kernel without netem fails before any link changes.
  if [ -n "$delay" ]; then
    if ! ip netns exec "$(bridge_ns)" tc qdisc add dev lo root handle 10: netem delay "$delay" 2>/dev/null; then
      die "--delay $delay: this kernel has no netem qdisc (CONFIG_NET_SCH_NETEM), so delay cannot be emulated; shape with --rate alone"
    fi
    ip netns exec "$(bridge_ns)" tc qdisc del dev lo root
  fi
  for n in $(seq 1 "$(cluster_size)"); do
    for side in host bridge; do
      if [ $side = host ]; then ns=$(host_ns "$n"); dev=$IFACE; else ns=$(bridge_ns); dev=p$n; fi
      ip netns exec "$ns" tc qdisc del dev "$dev" root 2>/dev/null || true
      local d=""
      [ $side = host ] && d=$delay
      if [ -n "$rate" ]; then
        ip netns exec "$ns" tc qdisc add dev "$dev" root handle 1: tbf rate "$rate" burst "$(tbf_burst "$rate")" latency 50ms
        [ -n "$d" ] && ip netns exec "$ns" tc qdisc add dev "$dev" parent 1:1 handle 10: netem delay "$d" limit 100000
      elif [ -n "$d" ]; then
        ip netns exec "$ns" tc qdisc add dev "$dev" root handle 10: netem delay "$d" limit 100000
      fi
    done
  done
  printf 'rate=%s\ndelay=%s\n' "$rate" "$delay" >"$DIR/shaping"
}

make_host() {
  local n=$1 ns
  ns=$(host_ns "$n")
  ip netns add "$ns"
  # IPv4 only: no link-local or loopback IPv6 address, so that 198.18.0.N and 127.0.0.1 are all there is.
  ip netns exec "$ns" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  ip -n "$ns" link set lo up
  # Both ends are created straight inside their namespaces: the root namespace never holds them.
  ip link add "$IFACE" netns "$ns" mtu "$MTU" type veth peer name "p$n" netns "$(bridge_ns)" mtu "$MTU"
  ip -n "$ns" addr add "$NET.$n/24" dev "$IFACE"
  ip -n "$ns" link set "$IFACE" up
  ip -n "$(bridge_ns)" link set "p$n" master br0 up
  cat /proc/sys/kernel/random/uuid >"$DIR/boot_id.$n"
  touch "$DIR/uts.$n" "$DIR/mnt.$n"
  local tmp_mount="mount -t tmpfs -o mode=1777 tmpfs /tmp"
  [ "$SHARED_TMP" = 1 ] && tmp_mount=true
  # unshare makes the UTS and mount namespaces persistent by bind-mounting them on the files above (their
  # folder is a private mount, which that needs). Inside: the host's own name, hosts file, /dev/shm, /tmp,
  # sysfs (of this network namespace: only lo and eth0 in /sys/class/net) and boot id.
  nsenter --net="/run/netns/$ns" unshare --uts="$DIR/uts.$n" --mount="$DIR/mnt.$n" --propagation private \
    sh -euc "hostname $(host_name "$n")
             mount --bind '$DIR/hosts' /etc/hosts
             mount -t tmpfs -o mode=1777 tmpfs /dev/shm
             $tmp_mount
             umount -l /sys
             mount -t sysfs sysfs /sys
             mount --bind '$DIR/boot_id.$n' /proc/sys/kernel/random/boot_id"
  start_anchor "$n"
}

# A process that sits in host N's namespaces until `down`: `exec` enters the host through /proc/PID/ns/,
# which every host sees. The files under $DIR do not do for that: a host's mount namespace is a private copy
# made before the later hosts' namespace files were bound there (and the kernel refuses to bind an older
# mount namespace's file into a newer one), so from inside host 1 (mpirun, the rsh agent) they are empty.
# Its argv[0] names the cluster and host, so that `down` and `exec` never take a recycled PID for it. It
# must not inherit the lock's descriptor (fd 9): it would hold the lock for its whole life.
start_anchor() {
  local n=$1
  setsid nsenter --net="/run/netns/$(host_ns "$n")" --uts="$DIR/uts.$n" --mount="$DIR/mnt.$n" --wd=/ -- \
    bash -c "exec -a $(anchor_tag "$n") sleep infinity" </dev/null >/dev/null 2>&1 9>&- &
  echo $! >"$DIR/anchor.$n"
  local i
  for i in $(seq 1 100); do
    anchor_pid "$n" >/dev/null && return 0
    sleep 0.05
  done
  die "up: host $n's anchor process ($(cat "$DIR/anchor.$n")) did not start"
}

anchor_tag() { echo "braid-cluster-$NAME-h$1"; }

# The anchor's PID, when it is alive and is the anchor; fails otherwise.
anchor_pid() {
  local pid
  pid=$(cat "$DIR/anchor.$1" 2>/dev/null) || return 1
  [ "$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null)" = "$(anchor_tag "$1") infinity " ] || return 1
  echo "$pid"
}

# Every check that makes a "host" look like a machine of its own; fails loudly naming what does not hold.
verify() {
  local n h ids="" addrs
  for n in $(seq 1 "$(cluster_size)"); do
    h=$(host_name "$n")
    [ "$(in_host "$n" hostname)" = "$h" ] || die "verify: host $n's hostname is not $h"
    local boot
    boot=$(in_host "$n" cat /proc/sys/kernel/random/boot_id)
    [ "$boot" = "$(cat "$DIR/boot_id.$n")" ] || die "verify: $h's boot_id reads '$boot', not its own"
    case " $ids " in *" $boot "*) die "verify: two hosts share boot_id $boot" ;; esac
    ids="$ids $boot"
    [ "$(in_host "$n" getent hosts "$(host_name 1)" | awk '{print $1}')" = "$NET.1" ] ||
      die "verify: $h does not resolve $(host_name 1) to $NET.1 (/etc/hosts)"
    in_host "$n" sh -c "[ \"\$(stat -c %d /dev/shm)\" != \"$(stat -c %d /dev/shm)\" ]" ||
      die "verify: $h's /dev/shm is the machine's, not its own"
    [ "$(in_host "$n" ls /sys/class/net | tr '\n' ' ')" = "$IFACE lo " ] ||
      die "verify: $h's /sys/class/net lists '$(in_host "$n" ls /sys/class/net | tr '\n' ' ')', not '$IFACE lo'"
    # Addresses: loopback and this host's one address of 198.18.0.0/24, nothing else.
    addrs=$(ip -n "$(host_ns "$n")" -4 -o addr show | awk '{print $4}' | sort | tr '\n' ' ')
    [ "$addrs" = "127.0.0.1/8 $NET.$n/24 " ] || die "verify: $h has addresses '$addrs'"
    [ -z "$(ip -n "$(host_ns "$n")" -6 -o addr show)" ] || die "verify: $h has an IPv6 address"
  done
  [ -z "$(ip -n "$(bridge_ns)" -o addr show | grep -v ' lo ')" ] || die "verify: the bridge namespace has an address"
  ! ip -o addr show | grep -q " $NET\." || die "verify: the root namespace holds an address of $NET.0/24"
}

in_host() {
  local n=$1
  shift
  nsenter --target "$(anchor_pid "$n")" --net --uts --mount --wd=/ -- "$@"
}

cmd_down() {
  local f pid
  for f in "$DIR"/anchor.*; do
    [ -e "$f" ] || continue
    pid=$(anchor_pid "${f##*.}") && kill "$pid" 2>/dev/null || true
  done
  # The namespace files first (a bind mount keeps a namespace alive), then the netns, then the folder.
  if [ -d "$DIR" ]; then
    for f in "$DIR"/uts.* "$DIR"/mnt.*; do
      [ -e "$f" ] || continue
      umount "$f" 2>/dev/null || umount -l "$f" 2>/dev/null || true
    done
  fi
  local ns
  for ns in $(ip netns list | awk '{print $1}' | grep -E "^$NAME-(h[0-9]+|br)\$" || true); do
    ip netns del "$ns" || die "down: cannot delete network namespace $ns"
  done
  if [ -d "$DIR" ]; then
    grep -q " $DIR " /proc/mounts && { umount "$DIR" || umount -l "$DIR"; }
    rm -rf "$DIR"
  fi
}

cmd_up() {
  local hosts=2 rate="" delay=""
  MTU=1500 SHARED_TMP=0
  while [ $# -gt 0 ]; do
    case "$1" in
      --hosts) hosts=${2:?--hosts needs a number}; shift 2 ;;
      --rate) rate=${2:?--rate needs a value}; shift 2 ;;
      --delay) delay=${2:?--delay needs a value}; shift 2 ;;
      --mtu) MTU=${2:?--mtu needs a value}; shift 2 ;;
      --shared-tmp) SHARED_TMP=1; shift ;;
      *) die "up: unknown option '$1'" ;;
    esac
  done
  [[ "$hosts" =~ ^[0-9]+$ ]] && [ "$hosts" -ge 1 ] && [ "$hosts" -le $MAX_HOSTS ] ||
    die "up: --hosts $hosts: between 1 and $MAX_HOSTS"
  [ -z "$rate" ] || tc_rate_bits "$rate" >/dev/null
  if [ "$(cluster_size)" = "$hosts" ] && [ -f "$DIR/options" ] && [ "$(cat "$DIR/options")" = "$MTU $SHARED_TMP" ] &&
     (verify) 2>/dev/null; then
    apply_shaping "$rate" "$delay"
    say "cluster '$NAME' of $hosts hosts is up (kept)"
    return 0
  fi
  cmd_down
  # On any way out but success (a failed command, or die in verify), nothing stays half-made.
  trap 'rc=$?; if [ $rc -ne 0 ]; then say "up failed (exit $rc); removing what it made"; cmd_down; fi' EXIT
  mkdir -p "$DIR"
  mount --bind "$DIR" "$DIR"
  mount --make-private "$DIR"
  {
    echo "127.0.0.1 localhost"
    for n in $(seq 1 "$hosts"); do echo "$NET.$n $(host_name "$n")"; done
  } >"$DIR/hosts"
  echo "$MTU $SHARED_TMP" >"$DIR/options"
  ip netns add "$(bridge_ns)"
  ip netns exec "$(bridge_ns)" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
  ip -n "$(bridge_ns)" link set lo up
  ip -n "$(bridge_ns)" link add br0 type bridge
  ip -n "$(bridge_ns)" link set br0 up
  echo "$hosts" >"$DIR/size"
  local n
  for n in $(seq 1 "$hosts"); do make_host "$n"; done
  apply_shaping "$rate" "$delay"
  verify
  trap - EXIT
  say "cluster '$NAME' is up: $(for n in $(seq 1 "$hosts"); do printf '%s=%s.%s ' "$(host_name "$n")" $NET "$n"; done)"
}

cmd_exec() {
  local cwd=$PWD
  if [ "${1:-}" = --cwd ]; then cwd=${2:?--cwd needs a folder}; shift 2; fi
  [ $# -ge 2 ] || die "usage: exec [--cwd DIR] HOST CMD..."
  local n
  n=$(resolve_host "$1")
  shift
  local pid
  pid=$(anchor_pid "$n") || die "exec: host $(host_name "$n")'s anchor process is gone; run 'netns_cluster.sh up' again"
  # exec: the command replaces this shell (the caller's PID is the command's, signals reach it directly, and
  # no shell stays behind to read this file again when the command ends).
  exec nsenter --target "$pid" --net --uts --mount --wd="$cwd" -- "$@"
}

cmd_status() {
  local size
  size=$(cluster_size)
  [ "$size" -gt 0 ] || { echo "cluster '$NAME': down"; return 1; }
  echo "cluster '$NAME': $size hosts, $(tr '\n' ' ' <"$DIR/shaping" 2>/dev/null)"
  local n
  for n in $(seq 1 "$size"); do
    printf '  %s  %s.%s  netns %s  %s\n' "$(host_name "$n")" "$NET" "$n" "$(host_ns "$n")" \
      "$(ip netns exec "$(host_ns "$n")" tc qdisc show dev $IFACE | tr '\n' ';')"
  done
}

cmd_hostfile() {
  local slots=${1:-2} n
  [ "$(cluster_size)" -gt 0 ] || die "hostfile: cluster '$NAME' is not up"
  for n in $(seq 1 "$(cluster_size)"); do echo "$(host_name "$n") slots=$slots"; done >"$DIR/hostfile.$slots"
  echo "$DIR/hostfile.$slots"
}

cmd_env() {
  [ "$(cluster_size)" -gt 0 ] || die "env: cluster '$NAME' is not up"
  local n names="" addrs=""
  for n in $(seq 1 "$(cluster_size)"); do names="$names $(host_name "$n")"; addrs="$addrs $NET.$n"; done
  printf 'BRAID_CLUSTER_NAME=%s\nBRAID_CLUSTER_DIR=%s\nBRAID_CLUSTER_HOSTS="%s"\nBRAID_CLUSTER_ADDRS="%s"\nBRAID_CLUSTER_IFACE=%s\n' \
    "$NAME" "$DIR" "${names# }" "${addrs# }" "$IFACE"
}

main() {
  local cmd=${1:-}
  [ $# -gt 0 ] && shift
  case "$cmd" in
    up) preflight; lock; cmd_up "$@" ;;
    down) [ "$(id -u)" -eq 0 ] || skip "needs root"; lock; cmd_down; say "cluster '$NAME' is down" ;;
    exec) cmd_exec "$@" ;;
    status) cmd_status ;;
    shape)
      lock
      local rate="" delay=""
      while [ $# -gt 0 ]; do
        case "$1" in
          --rate) rate=${2:?}; shift 2 ;;
          --delay) delay=${2:?}; shift 2 ;;
          *) die "shape: unknown option '$1'" ;;
        esac
      done
      [ "$(cluster_size)" -gt 0 ] || die "shape: cluster '$NAME' is not up"
      [ -z "$rate" ] || tc_rate_bits "$rate" >/dev/null
      apply_shaping "$rate" "$delay" ;;
    unshape) lock; [ "$(cluster_size)" -gt 0 ] || die "unshape: cluster '$NAME' is not up"; apply_shaping "" "" ;;
    hostfile) cmd_hostfile "$@" ;;
    env) cmd_env ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; [ -z "$cmd" ] || [ "$cmd" = help ] || exit 2 ;;
  esac
}

main "$@"
