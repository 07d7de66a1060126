#!/bin/bash
# The VM test, inside the guest (see hack/vm/test.sh, which boots the guest twice).
# First boot: staticpod installed by `make install` is enabled and started by its unit;
# the checks below run, each printing "VMTEST PASS <name>" or "VMTEST FAIL <name>:
# <why>" on the console; then the machine is powered off with a pod whose preStop hook
# writes to the disk. Second boot: that file and the first boot's journal are checked.
set -u
PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
here=/usr/local/lib/vm-test
state=/var/lib/vmtest # on the root disk, which outlives the boot
node=staticpod-vm

pass() { echo "VMTEST PASS $1"; }
fail() {
	echo "VMTEST FAIL $1: $2"
	failed=1
}
failed=0

# show CMD...: prints CMD and its output on the console, for the docs and for whoever
# reads a failure.
show() {
	echo "VMTEST SHOW \$ $*"
	"$@" 2>&1 | sed 's/^/VMTEST SHOW /'
}

# check NAME WANT GOT
check() {
	if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "got '$3', want '$2'"; fi
}

# await SECONDS CMD...: runs CMD every second until it succeeds; fails after SECONDS.
await() {
	local n=$1
	shift
	for _ in $(seq "$n"); do
		"$@" >/dev/null 2>&1 && return 0
		sleep 1
	done
	return 1
}

# pids lists every running task of staticpod's namespace with its PID, sorted.
pids() { ctr -n staticpod tasks ls | awk '$3 == "RUNNING" {print $1, $2}' | sort; }

# task_pid POD CONTAINER is the PID of the container's current task.
task_pid() { ctr -n staticpod tasks ls | awk -v p="^$1-${node}_$2_" '$1 ~ p && $3 == "RUNNING" {print $2}'; }

pod_status() { staticpod ps | awk -v p="$1-$node" '$1 == p {print $3}'; }

all_running() {
	for p in guaranteed burstable besteffort prestop podlevel userns; do
		[ "$(pod_status $p)" = Running ] || return 1
	done
}

first_boot() {
	mkdir -p "$state" /etc/kubernetes/manifests
	cp "$here"/pods/*.yaml /etc/kubernetes/manifests/
	local t0
	t0=$(date +%s)
	if systemctl enable --now staticpod; then
		pass "systemctl enable --now staticpod returned once READY=1 ($(($(date +%s) - t0)) s)"
	else
		fail "start" "systemctl enable --now staticpod failed"
		journalctl -u staticpod --no-pager | tail -30
		return
	fi
	check "unit is active" active "$(systemctl is-active staticpod)"
	echo "VMTEST INFO status: $(systemctl show -p StatusText --value staticpod)"
	if await 300 all_running; then pass "pods running"; else
		fail "pods running" "$(staticpod ps 2>&1)"
	fi
	echo "VMTEST INFO status: $(systemctl show -p StatusText --value staticpod)"
	staticpod ps

	check_cgroups
	check_pod_level_resources
	check_oom_scores
	check_oom_kill
	check_stats
	check_userns
	check_apparmor
	check_mismatch
	show ctr -n staticpod tasks ls
	check_restart "systemctl restart staticpod" systemctl restart staticpod
	show ctr -n staticpod tasks ls
	check_restart "systemctl stop, then start" sh -c 'systemctl stop staticpod && sleep 3 && systemctl start staticpod'
	check_watchdog
	check_journal
	check_shim_killed
	show systemctl status staticpod --no-pager --lines 4
	show systemd-cgls --no-pager -u staticpod.slice
	show systemd-inhibit --list --no-pager
	echo "VMTEST INFO pids before power-off:"
	pids
	echo first-boot-done >"$state/phase"
	sync
	echo "VMTEST POWEROFF"
	systemctl poweroff
}

check_cgroups() {
	local pid cg uidre='[0-9a-f_]+'
	pid=$(task_pid guaranteed app)
	cg=$(sed -n 's/^0:://p' "/proc/$pid/cgroup")
	echo "VMTEST INFO guaranteed app: pid $pid, cgroup $cg"
	if [[ $cg =~ ^/staticpod\.slice/staticpod-pod${uidre}\.slice/staticpod-guaranteed-${node}_app_0_[0-9a-f]+\.scope$ ]]; then
		pass "Guaranteed pod in staticpod.slice/staticpod-pod<uid>.slice, container in its scope"
	else
		fail "Guaranteed pod cgroup" "$cg"
	fi
	check "memory.max outside the container" 33554432 "$(cat "/sys/fs/cgroup$cg/memory.max")"
	check "memory.max inside the container (own cgroup namespace)" 33554432 \
		"$(staticpod exec "guaranteed-$node" -- cat /sys/fs/cgroup/memory.max)"
	check "the container's cgroup namespace: /proc/self/cgroup" "0::/" \
		"$(staticpod exec "guaranteed-$node" -- cat /proc/self/cgroup)"
	check "cpu.max of 100m" "10000 100000" "$(cat "/sys/fs/cgroup$cg/cpu.max")"
	check "cpu.weight of 100m (cpu.shares 102)" 4 "$(cat "/sys/fs/cgroup$cg/cpu.weight")"
	local slice
	slice=$(dirname "$cg")
	check "the pod slice's memory.max (the sum of its containers' limits)" 33554432 "$(cat "/sys/fs/cgroup$slice/memory.max")"
	check "the pod slice's cpu.max" "10000 100000" "$(cat "/sys/fs/cgroup$slice/cpu.max")"
	check "the pod slice's pids.max (--pod-max-pids 256)" 256 "$(cat "/sys/fs/cgroup$slice/pids.max")"
	show cat "/proc/$pid/cgroup"
	show cat "/sys/fs/cgroup$slice/memory.max"
	show cat "/sys/fs/cgroup$cg/memory.max"
	show staticpod exec "guaranteed-$node" -- sh -c 'cat /proc/self/cgroup /sys/fs/cgroup/memory.max'
	for q in burstable besteffort; do
		pid=$(task_pid $q app)
		cg=$(sed -n 's/^0:://p' "/proc/$pid/cgroup")
		echo "VMTEST INFO $q app: pid $pid, cgroup $cg"
		if [[ $cg =~ ^/staticpod\.slice/staticpod-$q\.slice/staticpod-$q-pod${uidre}\.slice/staticpod-$q-${node}_app_0_[0-9a-f]+\.scope$ ]]; then
			pass "$q pod in staticpod.slice/staticpod-$q.slice"
		else
			fail "$q pod cgroup" "$cg"
		fi
	done
	check "systemd knows the guaranteed pod's slice" active \
		"$(systemctl is-active "$(basename "$(dirname "$(sed -n 's/^0:://p' "/proc/$(task_pid guaranteed app)/cgroup")")")")"
}

# top_mi is the working set of the burstable pod's app in MiB, as top prints it.
top_mi() { staticpod top --containers --no-headers "burstable-$node" | awk '$2 == "app" {sub(/Mi$/, "", $4); print $4}'; }
holds_16mi() { [ "$(top_mi)" -ge 16 ]; }

# The API over the loopback TCP listener with the token (test.sh's
# /etc/default/staticpod): busybox's wget is the guest's only HTTP client (no curl, and
# busybox's nc cannot reach the unix socket), and it sends the token as a header.
api_get() { busybox wget -q -O - --header "Authorization: Bearer $(cat /etc/staticpod/api-token)" "http://127.0.0.1:10250$1"; }

# summary_ws WHOSE: the working set of the burstable pod (WHOSE=pod) or of its app
# container (WHOSE=app) in /stats/summary. The JSON is one line and the guest has no
# jq: the pod's part runs from its podRef to the next; a container's memory follows its
# name, the pod's own follows its containers' list.
summary_ws() {
	local part
	part=$(api_get /stats/summary | sed 's/"podRef":/\n&/g' | grep "^\"podRef\":{\"name\":\"burstable-$node\"")
	case $1 in
	app) part=$(echo "$part" | sed 's/.*{"name":"app",//') ;;
	pod) part=$(echo "$part" | sed 's/.*\],"cpu"/"cpu"/') ;;
	esac
	echo "$part" | grep -o '"workingSetBytes":[0-9]*' | head -1 | cut -d: -f2
}

# resource_ws METRIC: METRIC's sample for the burstable pod (its app container for the
# container_ metric) in /metrics/resource, in bytes.
resource_ws() {
	api_get /metrics/resource | awk -v m="$1" -v p="pod=\"burstable-$node\"" \
		'index($1, m "{") == 1 && index($1, p) && (m !~ /^container/ || index($1, "container=\"app\"")) {printf "%d\n", $2}'
}
summary_holds_16mi() { [ "$(summary_ws app)" -ge 16777216 ] && [ "$(summary_ws pod)" -ge 16777216 ]; }

# within NAME BYTES CGROUP: BYTES is at least 16 MiB and no more than CGROUP's
# memory.current (read after, give or take 1 MiB the container did since the sample).
within() {
	local current
	current=$(cat "/sys/fs/cgroup$3/memory.current")
	if [ -n "$2" ] && [ "$2" -ge 16777216 ] && [ "$2" -le $((current + (1 << 20))) ]; then
		pass "$1 ($2) holds the 16 MiB, within memory.current of $3 ($current)"
	else
		fail "$1" "working set '$2', memory.current of $3 $current"
	fi
}

# What pods use, on cgroup v2 with the systemd driver: the burstable pod's app holds 16
# MiB in /dev/shm (charged to its scope); within two sampling periods (10 s each) top,
# /stats/summary and /metrics/resource show a working set of at least that for the
# container and the pod, no more than the scope's (the pod slice's) memory.current.
check_stats() {
	local pid cg current mi
	staticpod exec "burstable-$node" -- sh -c 'head -c 16777216 /dev/zero >/dev/shm/vmtest' ||
		fail "fill /dev/shm" "staticpod exec failed"
	if await 30 holds_16mi; then
		pass "top shows the 16 MiB the container holds"
	else
		fail "top" "$(staticpod top --containers 2>&1)"
	fi
	show staticpod top --containers
	pid=$(task_pid burstable app)
	cg=$(sed -n 's/^0:://p' "/proc/$pid/cgroup")
	current=$(cat "/sys/fs/cgroup$cg/memory.current")
	mi=$(top_mi)
	if [ -n "$mi" ] && [ "$mi" -ge 16 ] && [ "$mi" -le $(((current >> 20) + 1)) ]; then
		pass "top's working set (${mi}Mi) is within the scope's memory.current ($current)"
	else
		fail "working set vs memory.current" "top ${mi}Mi, memory.current $current"
	fi
	show sh -c "staticpod describe burstable-$node | grep -A2 '^Usage:'"
	if await 30 summary_holds_16mi; then
		pass "/stats/summary over TCP with the token shows the 16 MiB in the container and the pod"
	else
		fail "/stats/summary" "$(api_get /stats/summary 2>&1 | head -c 2000)"
	fi
	within "/stats/summary's container workingSetBytes" "$(summary_ws app)" "$cg"
	within "/stats/summary's pod workingSetBytes" "$(summary_ws pod)" "$(dirname "$cg")"
	within "/metrics/resource's container_memory_working_set_bytes" "$(resource_ws container_memory_working_set_bytes)" "$cg"
	within "/metrics/resource's pod_memory_working_set_bytes" "$(resource_ws pod_memory_working_set_bytes)" "$(dirname "$cg")"
	show sh -c "busybox wget -q -O - --header \"Authorization: Bearer \$(cat /etc/staticpod/api-token)\" http://127.0.0.1:10250/metrics/resource | grep burstable"
	staticpod exec "burstable-$node" -- rm -f /dev/shm/vmtest
}

# A pod with hostUsers: false on cgroup v2 and systemd: its container's root is mapped
# to a block of 65536 host IDs above the host's own (uid_map "0 <base> 65536"), its
# process runs as that base on the host, it is root inside and owns the emptyDir it
# wrote, and its scope sits in the BestEffort slice like any pod's.
check_userns() {
	local map base pid uid cg
	map=$(staticpod exec "userns-$node" -- cat /proc/self/uid_map | awk '{print $1, $2, $3}')
	base=${map#0 }
	base=${base% 65536}
	if [[ $map =~ ^0\ [0-9]+\ 65536$ ]] && [ "$base" -ge 65536 ]; then
		pass "hostUsers: false maps the pod's root to host ID $base (uid_map '$map')"
	else
		fail "hostUsers: false uid_map" "'$map'"
		return
	fi
	check "root inside the user namespace" 0 "$(staticpod exec "userns-$node" -- id -u)"
	check "the emptyDir the pod wrote is root's inside" "0 hello" "$(staticpod exec "userns-$node" -- sh -c 'echo $(stat -c %u /scratch/file) $(cat /scratch/file)')"
	pid=$(task_pid userns app)
	uid=$(awk '/^Uid:/ {print $2}' "/proc/$pid/status")
	check "the pod's process runs as the mapped base on the host" "$base" "$uid"
	cg=$(sed -n 's/^0:://p' "/proc/$pid/cgroup")
	if [[ $cg =~ ^/staticpod\.slice/staticpod-besteffort\.slice/ ]]; then
		pass "the user-namespaced pod's scope is in staticpod-besteffort.slice"
	else
		fail "user-namespaced pod cgroup" "$cg"
	fi
	show staticpod exec "userns-$node" -- cat /proc/self/uid_map
}

# The pod slice of a pod with spec.resources has the pod-level limits (64Mi, 300m), not
# the sum of its containers' (app's 16Mi and 100m; helper has none), and cpu.weight from
# the pod-level CPU request (200m: cpu.shares 204); helper gets the pod's limits.
check_pod_level_resources() {
	local cg slice
	cg=$(sed -n 's/^0:://p' "/proc/$(task_pid podlevel helper)/cgroup")
	slice=$(dirname "$cg")
	echo "VMTEST INFO podlevel helper: cgroup $cg"
	if [[ $slice =~ ^/staticpod\.slice/staticpod-burstable\.slice/staticpod-burstable-pod[0-9a-f_]+\.slice$ ]]; then
		pass "pod with pod-level resources in staticpod-burstable.slice"
	else
		fail "pod-level resources pod cgroup" "$slice"
	fi
	check "the pod slice's memory.max (spec.resources.limits)" 67108864 "$(cat "/sys/fs/cgroup$slice/memory.max")"
	check "the pod slice's cpu.max (spec.resources.limits)" "30000 100000" "$(cat "/sys/fs/cgroup$slice/cpu.max")"
	check "the pod slice's cpu.weight (spec.resources.requests 200m: cpu.shares 204)" 8 "$(cat "/sys/fs/cgroup$slice/cpu.weight")"
	check "memory.max of a container without a limit: the pod's" 67108864 "$(cat "/sys/fs/cgroup$cg/memory.max")"
	check "cpu.max of a container without a limit: the pod's" "30000 100000" "$(cat "/sys/fs/cgroup$cg/cpu.max")"
	check "downward API limits.memory of a container without a limit" 67108864 \
		"$(staticpod exec "podlevel-$node" -c helper -- sh -c 'echo $MEMORY')"
	check "describe's Pod Limits" "cpu=300m, memory=64Mi" \
		"$(staticpod describe "podlevel-$node" | sed -n 's/^Pod Limits: *//p')"
	show cat "/sys/fs/cgroup$slice/memory.max" "/sys/fs/cgroup$slice/cpu.max"
}

check_oom_scores() {
	local mem want
	mem=$(awk '/^MemTotal:/ {print $2 * 1024}' /proc/meminfo)
	want=$((1000 - 1000 * 67108864 / mem))
	[ $want -lt 3 ] && want=3
	[ $want -gt 999 ] && want=999
	check "oom_score_adj of staticpod (OOMScoreAdjust)" -999 "$(cat /proc/"$(systemctl show -p MainPID --value staticpod)"/oom_score_adj)"
	check "oom_score_adj Guaranteed" -997 "$(cat "/proc/$(task_pid guaranteed app)/oom_score_adj")"
	check "oom_score_adj Burstable (64Mi of $mem bytes)" $want "$(cat "/proc/$(task_pid burstable app)/oom_score_adj")"
	check "oom_score_adj BestEffort" 1000 "$(cat "/proc/$(task_pid besteffort app)/oom_score_adj")"
}

check_oom_kill() {
	if await 120 sh -c "staticpod ps | grep -q '^oom-$node .*OOMKilled'"; then
		pass "over-limit container reported OOMKilled"
	else
		fail "OOMKilled" "$(staticpod ps 2>&1 | grep oom)"
		show sh -c "ctr -n staticpod containers info \$(ctr -n staticpod containers ls -q | grep '^oom-') | grep -i 'oom\|reason\|exit'"
		show sh -c "cat /sys/fs/cgroup/staticpod.slice/staticpod-burstable.slice/staticpod-burstable-pod*.slice/memory.events"
	fi
	check "its exit code" 137 "$(staticpod describe "oom-$node" | awk '/Exit Code:/ {print $3; exit}')"
}

# apparmor_pod NAME SPEC-LINES [METADATA-LINES]: writes a pod "NAME" whose container
# "app" sleeps, with the lines given added to its spec and its metadata.
apparmor_pod() {
	cat >"/etc/kubernetes/manifests/$1.yaml" <<EOF
apiVersion: v1
kind: Pod
metadata:
  name: $1
${3:-}spec:
$2  containers:
  - name: app
    image: localhost/busybox:static
    command: ["sleep", "100000"]
EOF
}

# attr_current POD: the AppArmor label of the pod's app container, as the kernel shows
# it ("<profile> (enforce)", or "unconfined").
attr_current() { cat "/proc/$(task_pid "$1" app)/attr/current" 2>&1; }

# The guest's kernel has AppArmor and the apparmor package's apparmor_parser: a pod that
# asks for RuntimeDefault, and one that asks for nothing, run under containerd's default
# profile, loaded by staticpod; Localhost, in the field or in the deprecated annotation,
# under the profile named, which denies writes here; Unconfined under none; a Localhost
# profile that is not loaded keeps its container from starting, in containerd's words.
check_apparmor() {
	local profile=k8s-vmtest-deny-write p
	show cat /sys/module/apparmor/parameters/enabled
	cat >/tmp/$profile <<EOF
#include <tunables/global>
profile $profile flags=(attach_disconnected) {
  #include <abstractions/base>
  file,
  deny /** w,
}
EOF
	if apparmor_parser -r /tmp/$profile; then pass "apparmor_parser loaded $profile"; else fail "load $profile" "apparmor_parser failed"; fi
	apparmor_pod aa-default "  securityContext: {appArmorProfile: {type: RuntimeDefault}}
"
	apparmor_pod aa-localhost "  securityContext: {appArmorProfile: {type: Localhost, localhostProfile: $profile}}
"
	apparmor_pod aa-annotated "" "  annotations: {container.apparmor.security.beta.kubernetes.io/app: localhost/$profile}
"
	apparmor_pod aa-unconfined "  securityContext: {appArmorProfile: {type: Unconfined}}
"
	apparmor_pod aa-missing "  securityContext: {appArmorProfile: {type: Localhost, localhostProfile: k8s-vmtest-not-loaded}}
"
	for p in aa-default aa-localhost aa-annotated aa-unconfined; do
		await 120 sh -c "[ \"\$(staticpod ps | awk -v p=$p-$node '\$1 == p {print \$3}')\" = Running ]" ||
			fail "$p running" "$(staticpod ps 2>&1 | grep "$p")"
	done
	check "RuntimeDefault: containerd's default profile" "cri-containerd.apparmor.d (enforce)" "$(attr_current aa-default)"
	check "no profile asked for: containerd's default profile, as on the kubelet" "cri-containerd.apparmor.d (enforce)" "$(attr_current besteffort)"
	check "Localhost: the profile named" "$profile (enforce)" "$(attr_current aa-localhost)"
	check "the deprecated annotation localhost/<profile>" "$profile (enforce)" "$(attr_current aa-annotated)"
	check "Unconfined" "unconfined" "$(attr_current aa-unconfined)"
	if staticpod exec "aa-localhost-$node" -- touch /tmp/x >/dev/null 2>&1; then
		fail "the Localhost profile is enforced" "touch /tmp/x succeeded under $profile"
	else
		pass "the Localhost profile is enforced: a write is denied"
	fi
	if await 60 sh -c "staticpod describe aa-missing-$node | grep -q 'apparmor profile not found k8s-vmtest-not-loaded'"; then
		pass "a Localhost profile that is not loaded: the container does not start, and says why"
	else
		fail "profile not loaded" "$(staticpod describe "aa-missing-$node" 2>&1 | grep -i -m3 'reason\|message\|apparmor')"
	fi
	show sh -c "staticpod describe aa-missing-$node | grep -A2 Waiting"
	rm -f /etc/kubernetes/manifests/aa-*.yaml
	await 60 sh -c "! ctr -n staticpod tasks ls | grep -q '^aa-'" || fail "aa- pods removed" "$(ctr -n staticpod tasks ls | grep '^aa-')"
}

# A --cgroup-driver that contradicts containerd's SystemdCgroup stops staticpod at start,
# before it touches anything, with the fix in the message. It gets a root dir and a pod
# log dir of its own: on the service's, the service's lock would stop it first.
check_mismatch() {
	local out
	out=$(staticpod run --cgroup-driver cgroupfs --root-dir /tmp/mismatch --pod-log-dir /tmp/mismatch/log --api-socket /tmp/mismatch/sp.sock 2>&1)
	local code=$?
	echo "$out" | sed 's/^/VMTEST SHOW /'
	if [ $code -ne 0 ] && echo "$out" | grep -q "start staticpod with --cgroup-driver systemd, or set SystemdCgroup = false"; then
		pass "--cgroup-driver cgroupfs against containerd's SystemdCgroup = true: refused at start (exit $code)"
	else
		fail "cgroup driver mismatch" "exit $code: $out"
	fi
}

# check_restart NAME CMD...: CMD leaves every container's PID as it was.
check_restart() {
	local name=$1 before after t0
	shift
	before=$(pids)
	t0=$(date +%s)
	if ! "$@"; then
		fail "$name" "failed"
		return
	fi
	await 60 all_running
	after=$(pids)
	echo "VMTEST INFO $name: back in $(($(date +%s) - t0)) s"
	if [ -n "$before" ] && [ "$before" = "$after" ]; then
		pass "$name: every container's PID unchanged ($(echo "$before" | wc -l) tasks)"
	else
		fail "$name" "PIDs before: $(echo $before) after: $(echo $after)"
	fi
}

check_watchdog() {
	local old new before after t0
	before=$(pids)
	old=$(systemctl show -p MainPID --value staticpod)
	t0=$(date +%s)
	kill -STOP "$old"
	if await 180 sh -c "n=\$(systemctl show -p MainPID --value staticpod); [ \"\$n\" != $old ] && [ \"\$n\" != 0 ] && [ \"\$(systemctl is-active staticpod)\" = active ]"; then
		new=$(systemctl show -p MainPID --value staticpod)
		pass "staticpod frozen with SIGSTOP was restarted by the watchdog (pid $old -> $new, $(($(date +%s) - t0)) s)"
	else
		fail "watchdog" "staticpod pid $old not replaced: $(systemctl status staticpod --no-pager 2>&1 | head -5)"
		kill -CONT "$old"
		return
	fi
	if journalctl -u staticpod --no-pager | grep -q "Watchdog timeout"; then
		pass "the journal says: Watchdog timeout"
	else
		fail "watchdog journal" "no 'Watchdog timeout' line"
	fi
	await 60 all_running
	after=$(pids)
	if [ "$before" = "$after" ]; then
		pass "after the watchdog restart every container's PID is unchanged (adopted)"
	else
		fail "watchdog adoption" "PIDs before: $(echo $before) after: $(echo $after)"
	fi
}

# A container whose shim is killed is no longer containerd's: what still runs in its
# cgroup (its scope) must go, and the container start again, once.
check_shim_killed() {
	local pid shim new
	pid=$(task_pid besteffort app)
	shim=$(ps -o ppid= -p "$pid" | tr -d ' ')
	echo "VMTEST INFO besteffort app: pid $pid, shim $shim ($(ps -o comm= -p "$shim"))"
	kill -KILL "$shim"
	if await 120 sh -c "! kill -0 $pid 2>/dev/null && [ -n \"\$(ctr -n staticpod tasks ls | awk '/^besteffort-${node}_app_1_/ && \$3 == \"RUNNING\"')\" ]"; then
		new=$(task_pid besteffort app)
		pass "shim killed: the old process is gone and the container runs again (pid $pid -> $new, attempt 1)"
	else
		fail "shim killed" "old pid $pid $(kill -0 "$pid" 2>/dev/null && echo alive || echo gone); $(ctr -n staticpod tasks ls | grep besteffort)"
	fi
}

check_journal() {
	local lines
	lines=$(journalctl -u staticpod -o cat --no-pager)
	if echo "$lines" | grep -q 'msg="staticpod started".*cgroup-driver=systemd cgroup-root=staticpod.slice'; then
		pass "journal has staticpod's logs (started, systemd driver, staticpod.slice)"
	else
		fail "journal" "no 'staticpod started' line with the systemd driver"
	fi
	if echo "$lines" | grep -q '^time='; then
		fail "journal lines without timestamps" "$(echo "$lines" | grep -m1 '^time=')"
	else
		pass "journal lines carry no timestamp of their own"
	fi
	if echo "$lines" | grep -q 'graceful node shutdown: holding logind'; then
		pass "staticpod holds logind's shutdown inhibitor lock"
	else
		fail "inhibitor" "no 'holding logind' line"
	fi
	echo "VMTEST INFO $(systemd-inhibit --list --no-pager 2>&1 | grep -i staticpod)"
}

second_boot() {
	local prestop=0 term
	if [ -f "$state/prestop" ]; then
		prestop=$(cat "$state/prestop")
		pass "the preStop hook ran at power-off (file on disk)"
	else
		fail "preStop at power-off" "no $state/prestop"
	fi
	if [ -f "$state/term" ]; then
		term=$(cat "$state/term")
		pass "the container got SIGTERM after its hook ($((term - prestop)) s later)"
	else
		fail "SIGTERM at power-off" "no $state/term"
	fi
	local prev
	prev=$(journalctl -b -1 -u staticpod -o cat --no-pager)
	show journalctl -b -1 -u staticpod -o short-monotonic --no-pager --lines 12
	if echo "$prev" | grep -q "the machine is shutting down: stopping the pods" &&
		echo "$prev" | grep -q "pods stopped for the shutdown; released logind's inhibitor lock"; then
		pass "previous boot's journal: staticpod stopped the pods and released its lock"
	else
		fail "shutdown journal" "no shutdown lines from staticpod"
	fi
	# The lock held the shutdown: staticpod let go before systemd began stopping it,
	# not logind's delay running out first.
	local released stopping
	released=$(journalctl -b -1 -u staticpod -o short-monotonic --no-pager | grep "released logind's inhibitor lock" | tail -1 | sed 's/^\[ *\([0-9]*\).*/\1/')
	stopping=$(journalctl -b -1 -u staticpod -o short-monotonic --no-pager | grep "Stopping staticpod.service" | tail -1 | sed 's/^\[ *\([0-9]*\).*/\1/')
	if [ -n "$released" ] && [ -n "$stopping" ] && [ "$released" -le "$stopping" ]; then
		pass "the lock was released (at ${released} s) before systemd stopped staticpod (at ${stopping} s)"
	else
		fail "lock held the shutdown" "released at '${released}', staticpod stopped at '${stopping}'"
	fi
	if journalctl -b -1 --no-pager | grep -q "stop-sigterm' timed out\|Killing process .* with signal SIGKILL"; then
		fail "no stop timeout at power-off" "$(journalctl -b -1 --no-pager | grep -m3 "timed out\|SIGKILL")"
	else
		pass "no unit timed out stopping at power-off"
	fi
	echo done >"$state/phase"
}

case $(cat "$state/phase" 2>/dev/null) in
first-boot-done)
	second_boot
	echo "VMTEST END failed=$failed"
	systemctl poweroff
	;;
*)
	first_boot
	if [ $failed -ne 0 ]; then
		echo "VMTEST END failed=$failed"
		systemctl poweroff
	fi
	;;
esac
