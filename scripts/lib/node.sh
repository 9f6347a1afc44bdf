# A real node beside the control plane of scripts/real-cluster: kubelet,
# kube-proxy (iptables) and kube-scheduler from the pinned Go modules,
# Debian's containerd and runc, and the CNI plugins bridge, host-local,
# loopback and portmap. Sourced by scripts/real-cluster, which defines
# $root, $module, $cache, $ldflags and the helpers log, start, running,
# wait_until and free_port.
#
# Network: the node owns one bridge, $node_bridge, whose gateway address
# $node_ip is the node's InternalIP and the API server's bind and advertise
# address, so that Pods reach the API server through the `kubernetes`
# Service. Every listener binds to that address or to loopback; nothing
# binds to the machine's other interfaces.
#
# The kubelet writes a few fixed paths whatever its flags, so one node runs
# on a machine at a time; $node_lock names the cluster directory that has it.

node_bridge=gantry-cni0
node_subnet=10.244.0.0/24
node_ip=10.244.0.1
node_name=gantry-node
node_lock=/run/gantry-node
cni_version=v1.9.1
node_bin="$cache/node-bin"
# Beside, not inside, the control plane's cache: a build of other pins clears that.
cni_bin="$HOME/.cache/gantry/cni-$cni_version"

# Paths the kubelet and containerd write outside their flags' reach.
node_fixed_paths=(/var/lib/kubelet /var/log/containers /var/log/pods /run/containerd)

# Sysctls the kubelet, kube-proxy or the bridge plugin may set; `down`
# writes back the values they had before `up`.
node_sysctls=(
  vm.overcommit_memory vm.panic_on_oom kernel.panic kernel.panic_on_oops
  kernel.keys.root_maxkeys kernel.keys.root_maxbytes
  net.ipv4.ip_forward net.ipv6.conf.all.forwarding net.ipv4.conf.all.route_localnet
  net.bridge.bridge-nf-call-iptables net.bridge.bridge-nf-call-ip6tables
  net.netfilter.nf_conntrack_max net.netfilter.nf_conntrack_tcp_timeout_established
  net.netfilter.nf_conntrack_tcp_timeout_close_wait
)

as_root() {
  if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

# Debian's containerd and runc, and the tools kubelet and kube-proxy call.
node_packages() {
  local missing=()
  command -v containerd >/dev/null || missing+=(containerd)
  command -v runc >/dev/null || missing+=(runc)
  command -v iptables >/dev/null || missing+=(iptables)
  command -v conntrack >/dev/null || missing+=(conntrack)
  command -v ethtool >/dev/null || missing+=(ethtool)
  command -v socat >/dev/null || missing+=(socat)
  command -v ip >/dev/null || missing+=(iproute2)
  if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]} from Debian"
    as_root apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
  fi
  # Debian's package may have started its own containerd on the default
  # socket; the node runs its own on a socket of its own, so that one is
  # left alone.
}

# kubelet, kube-proxy and kube-scheduler from the pinned module, and the CNI
# plugins from the module proxy; cached like the control plane's binaries.
build_node() {
  node_packages
  mkdir -p "$cache"
  exec 8>"$cache/.node-lock"
  flock 8
  if [ ! -x "$node_bin/kubelet" ]; then
    log "building kubelet, kube-proxy and kube-scheduler"
    local started=$SECONDS
    rm -rf "$cache/node-tmp"
    mkdir -p "$cache/node-tmp"
    (cd "$module" && GOFLAGS=-mod=readonly CGO_ENABLED=0 \
      go build -trimpath -ldflags "$ldflags" -o "$cache/node-tmp/" \
      ./kubelet ./kube-proxy ./kube-scheduler)
    mv "$cache/node-tmp" "$node_bin"
    log "built the node's binaries in $((SECONDS - started)) s"
  fi
  if [ ! -x "$cni_bin/portmap" ]; then
    log "building the CNI plugins $cni_version"
    local started=$SECONDS plugins=github.com/containernetworking/plugins/plugins
    rm -rf "$cni_bin.tmp"
    # `go install pkg@version` builds with the plugins' own go.mod and go.sum.
    GOBIN="$cni_bin.tmp" CGO_ENABLED=0 GOFLAGS=-mod=mod go install -trimpath -ldflags "-s -w" \
      "$plugins/main/bridge@$cni_version" "$plugins/main/loopback@$cni_version" \
      "$plugins/ipam/host-local@$cni_version" "$plugins/meta/portmap@$cni_version"
    mv "$cni_bin.tmp" "$cni_bin"
    log "built the CNI plugins in $((SECONDS - started)) s"
  fi
  flock -u 8
}

# The pause image and the stand-in images; the pause image's name (from its
# archive) is the sandbox image containerd is told to use.
node_images() {
  "$root/scripts/node-images"
}

archive_image_name() { # archive_image_name TAR
  tar -xOf "$1" index.json | python3 -c '
import json, sys
index = json.load(sys.stdin)
print(index["manifests"][0]["annotations"]["io.containerd.image.name"])'
}

# Certificates of the node's components, signed by the cluster's CA.
node_pki() {
  local pki="$1/pki"
  [ -f "$pki/node-done" ] && return
  (
    cd "$pki"
    sign() { # sign NAME SUBJECT EXTFILE
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 \
        -out "$1.crt" -extfile "$3" 2>/dev/null
    }
    printf 'subjectAltName=IP:%s,DNS:%s\nextendedKeyUsage=serverAuth\n' "$node_ip" "$node_name" >kubelet-serving.ext
    sign kubelet-serving "/CN=$node_name" kubelet-serving.ext
    sign kubelet "/O=system:nodes/CN=system:node:$node_name" client.ext
    sign kube-proxy "/CN=system:kube-proxy" client.ext
    sign kube-scheduler "/CN=system:kube-scheduler" client.ext
    sign apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" client.ext
    chmod 600 ./*.key
    touch node-done
  )
}

# The machine's state before the node changes it: sysctls, and which of the
# fixed paths existed.
save_host_state() {
  local state="$1/node/host"
  [ -f "$state/done" ] && return
  mkdir -p "$state"
  local key
  for key in "${node_sysctls[@]}"; do
    sysctl -n "$key" 2>/dev/null | sed "s|^|$key=|" || true
  done >"$state/sysctls"
  local path
  for path in "${node_fixed_paths[@]}"; do
    [ -e "$path" ] || echo "$path"
  done >"$state/created-paths"
  touch "$state/done"
}

restore_host_state() {
  local state="$1/node/host" line
  [ -f "$state/done" ] || return 0
  while IFS= read -r line; do
    [ -n "$line" ] || continue
    [ "$(sysctl -n "${line%%=*}" 2>/dev/null)" = "${line#*=}" ] && continue
    sysctl -q -w "$line" >/dev/null 2>&1 || log "could not restore sysctl $line"
  done <"$state/sysctls"
  while IFS= read -r line; do
    [ -n "$line" ] && rm -rf "$line"
  done <"$state/created-paths"
  rm -rf "$state"
}

# The bridge the CNI plugin attaches Pods to, made before the API server
# starts so that it can bind to the gateway address.
make_bridge() {
  if ! ip link show "$node_bridge" >/dev/null 2>&1; then
    ip link add "$node_bridge" type bridge
  fi
  ip addr replace "$node_ip/${node_subnet#*/}" dev "$node_bridge"
  ip link set "$node_bridge" up
}

write_node_config() {
  local dir=$1 node="$1/node" sandbox_image=$2
  mkdir -p "$node/cni" "$node/kubelet" "$node/containerd"
  cat >"$node/cni/10-gantry.conflist" <<EOF
{
  "cniVersion": "1.0.0",
  "name": "gantry",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "$node_bridge",
      "isGateway": true,
      "isDefaultGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "ranges": [[{"subnet": "$node_subnet", "gateway": "$node_ip"}]],
        "dataDir": "$node/cni-ipam"
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
EOF
  cat >"$node/containerd.toml" <<EOF
version = 2
root = "$node/containerd/root"
state = "$node/containerd/state"
[grpc]
  address = "$node/containerd.sock"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$sandbox_image"
  # Root here lacks CAP_SYS_RESOURCE: lowering a container's
  # oom_score_adj below containerd's own would fail every sandbox.
  restrict_oom_score_adj = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "$cni_bin"
    conf_dir = "$node/cni"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
EOF
  local healthz_port
  healthz_port=$(cat "$dir/ports/kubelet-healthz")
  cat >"$node/kubelet.yaml" <<EOF
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $node_ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: $healthz_port
tlsCertFile: $dir/pki/kubelet-serving.crt
tlsPrivateKeyFile: $dir/pki/kubelet-serving.key
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $dir/pki/ca.crt}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://$node/containerd.sock
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
clusterDomain: cluster.local
podLogsDir: /var/log/pods
# The images were imported here and cannot be pulled again.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: 100Mi
  nodefs.available: 256Mi
  nodefs.inodesFree: 1%
  imagefs.available: 256Mi
maxPods: 110
serializeImagePulls: false
EOF
  cat >"$node/kube-proxy.yaml" <<EOF
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
hostnameOverride: $node_name
bindAddress: $node_ip
healthzBindAddress: 127.0.0.1:$(cat "$dir/ports/kube-proxy-healthz")
metricsBindAddress: 127.0.0.1:$(cat "$dir/ports/kube-proxy-metrics")
clusterCIDR: $node_subnet
nodePortAddresses: ["$node_ip/32"]
clientConnection:
  kubeconfig: $dir/kube-proxy.kubeconfig
# Leave the machine's conntrack table size and timeouts as they are.
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
  udpTimeout: 0s
  udpStreamTimeout: 0s
# Node ports on 127.0.0.1 would need route_localnet.
iptables:
  localhostNodePorts: false
EOF
}

# Start the node's components that are not running. The control plane is
# up already, bound to $node_ip.
start_node() {
  local dir=$1 sandbox_image=$2
  # What containerd and the kubelet create (image roots, volumes) must be
  # readable by non-root containers whatever umask this script was given.
  umask 022
  for p in kubelet-healthz kube-proxy-healthz kube-proxy-metrics; do
    [ -f "$dir/ports/$p" ] || free_port >"$dir/ports/$p"
  done
  kubeconfig "$dir" kubelet "$dir/kubelet.kubeconfig"
  kubeconfig "$dir" kube-proxy "$dir/kube-proxy.kubeconfig"
  kubeconfig "$dir" kube-scheduler "$dir/kube-scheduler.kubeconfig"
  write_node_config "$dir" "$sandbox_image"
  local node="$dir/node"

  if ! running "$dir" containerd; then
    setsid containerd --config "$node/containerd.toml" >>"$dir/containerd.log" 2>&1 </dev/null 7>&- &
    echo $! >"$dir/containerd.pid"
    wait_until 30 "$dir" containerd ctr --address "$node/containerd.sock" version ||
      { tail -20 "$dir/containerd.log" >&2; return 1; }
  fi
  local image
  for image in $(node_images); do
    load "$dir" "$image" >/dev/null
  done
  if ! running "$dir" kube-scheduler; then
    start "$dir" kube-scheduler --kubeconfig "$dir/kube-scheduler.kubeconfig" \
      --authentication-kubeconfig "$dir/kube-scheduler.kubeconfig" \
      --authorization-kubeconfig "$dir/kube-scheduler.kubeconfig" \
      --leader-elect=false --bind-address 127.0.0.1 --secure-port 0 --v 1
  fi
  if ! running "$dir" kube-proxy; then
    start "$dir" kube-proxy --config "$node/kube-proxy.yaml" --v 1
  fi
  if ! running "$dir" kubelet; then
    start "$dir" kubelet --config "$node/kubelet.yaml" \
      --kubeconfig "$dir/kubelet.kubeconfig" --root-dir "$node/kubelet" \
      --hostname-override "$node_name" --node-ip "$node_ip" --v 1
  fi
  wait_until 90 "$dir" kubelet node_ready "$dir" ||
    { tail -30 "$dir/kubelet.log" >&2; return 1; }
}

node_ready() { # node_ready DIR
  [ "$("$bin/kubectl" --kubeconfig "$1/kubeconfig" get node "$node_name" \
    -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

# Import an OCI image archive into the node's containerd.
load() { # load DIR IMAGE.tar
  local dir=$1 image=$2
  [ -S "$dir/node/containerd.sock" ] || { log "no node in $dir"; return 1; }
  ctr --address "$dir/node/containerd.sock" -n k8s.io images import --no-unpack=false \
    "$image" >/dev/null
  archive_image_name "$image"
}

# Take the machine-wide node slot for DIR, bringing down a node whose
# cluster is gone.
claim_node() {
  local dir=$1 other
  if [ -f "$node_lock" ]; then
    other=$(cat "$node_lock")
    if [ "$other" != "$dir" ]; then
      # Its owner may have just ended, and its watcher be bringing it down.
      local waited=0
      while [ -d "$other" ] && running "$other" kubelet && [ "$waited" -lt 90 ]; do
        sleep 1
        waited=$((waited + 1))
      done
      if [ -d "$other" ] && running "$other" kubelet; then
        log "a node already runs for $other (one node per machine)"
        return 1
      fi
      log "cleaning up the node left by $other"
      down_node "$other"
    fi
  fi
  echo "$dir" >"$node_lock"
}

# Every process of the node's Pods: the tasks of each container (in the
# kubepods cgroups) and their containerd shims.
kill_pods() {
  local dir=$1 pids
  pids=$(cat /sys/fs/cgroup/*/kubepods*/cgroup.procs /sys/fs/cgroup/*/kubepods*/*/cgroup.procs \
    /sys/fs/cgroup/*/kubepods*/*/*/cgroup.procs /sys/fs/cgroup/*/kubepods*/*/*/*/cgroup.procs \
    2>/dev/null | sort -u || true)
  # shellcheck disable=SC2086
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  pids=$(pgrep -f "containerd-shim-runc-v2 .*-address $dir/node/containerd.sock" || true)
  # shellcheck disable=SC2086
  [ -n "$pids" ] && kill -KILL $pids 2>/dev/null
  return 0
}

# Remove the kubepods cgroups, innermost first.
remove_cgroups() {
  local hierarchy
  for hierarchy in /sys/fs/cgroup/*/; do
    find "$hierarchy" -depth -type d -path '*kubepods*' -exec rmdir {} + 2>/dev/null || true
  done
}

# Unmount everything under the node's directories and the kubelet's fixed
# paths, deepest first, in passes: the kubelet bind-mounts its root onto
# itself at each start, so mounts can be stacked.
unmount_node() {
  local dir=$1 pattern pass targets
  pattern="^($dir/node/|/run/containerd/|/var/lib/kubelet/|/run/netns/cni-)"
  for pass in 1 2 3 4 5 6 7 8; do
    targets=$(awk '{print $2}' /proc/self/mounts | grep -E "$pattern" | sort -r) || return 0
    [ -n "$targets" ] || return 0
    while read -r target; do
      umount -l "$target" 2>/dev/null || true
    done <<<"$targets"
  done
  log "still mounted after $pass passes: $targets"
}

# Delete the iptables chains the node's components made (KUBE-*, CNI-*) and
# the rules that jump to them, in every table, for IPv4 and IPv6.
remove_chains() {
  local tool table
  for tool in iptables ip6tables; do
    command -v "$tool" >/dev/null || continue
    for table in filter nat mangle raw; do
      "$tool-save" -t "$table" 2>/dev/null | python3 -c '
import re, sys
table = sys.argv[1]
lines = sys.stdin.read().splitlines()
ours = re.compile(r"^(KUBE-|CNI-)")
chains = [l[1:].split()[0] for l in lines if l.startswith(":") and ours.match(l[1:])]
jumps = [l for l in lines if l.startswith("-A ") and not ours.match(l.split()[1])
         and re.search(r"-[jg] (KUBE-|CNI-)", l)]
if chains or jumps:
    print("*" + table)
    for l in jumps:
        print("-D" + l[2:])
    for c in chains:
        print("-F " + c)
    for c in chains:
        print("-X " + c)
    print("COMMIT")
' "$table" | "$tool-restore" --noflush 2>/dev/null || true
    done
  done
}

down_node() {
  local dir=$1
  [ -d "$dir/node" ] || return 0
  local name
  for name in kubelet kube-proxy kube-scheduler; do
    stop_component "$dir" "$name"
  done
  if [ -f "$node_lock" ] && [ "$(cat "$node_lock")" != "$dir" ]; then
    # The machine's node is another directory's now: stop what is this
    # one's and leave the shared state (bridge, chains, sysctls) to it.
    pkill -KILL -f "containerd-shim-runc-v2 .*-address $dir/node/containerd.sock" || true
    stop_component "$dir" containerd
    unmount_node "$dir"
    return 0
  fi
  kill_pods "$dir"
  stop_component "$dir" containerd
  unmount_node "$dir"
  local netns
  for netns in /run/netns/cni-*; do
    [ -e "$netns" ] && ip netns delete "$(basename "$netns")" 2>/dev/null
  done
  ip link delete "$node_bridge" 2>/dev/null || true
  remove_chains
  remove_cgroups
  restore_host_state "$dir"
  rm -rf "$dir/node/containerd" "$dir/node/kubelet"
  if [ "$(cat "$node_lock" 2>/dev/null)" = "$dir" ]; then rm -f "$node_lock"; fi
}
