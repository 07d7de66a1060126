// Package stats reads what pods use from their cgroups, as the kubelet's cAdvisor does:
// CPU time, memory working set (usage less inactive file pages), RSS, page faults and,
// on cgroup v2, pressure (PSI), for the node, each pod and each container, on cgroup v1
// and v2 and either cgroup driver. The readers are pure functions of a cgroup
// directory; the Sampler reads every pod's when the figures are read and the latest
// sample is older than its period (the kubelet's housekeeping, 10 s), and once a minute
// while nobody reads them, and keeps the last two samples: a read gets figures at most
// a period old, and a CPU rate from the difference. The kubelet samples every period
// whatever is read, because its eviction manager needs the figures; staticpod's do not
// drive anything, so an idle daemon does not pay for them.
//
// The disks are measured apart and more slowly (disk.go, du.go): each pod's volumes,
// log directories, /etc/hosts and its containers' writable layers (through Disks,
// which the runtime implements), every DiskPeriod (the kubelet's volume stats period,
// a minute) and when a pod appears or a container of it restarts, walked as the
// kubelet's du walks them; the node's filesystem and the images' from statfs.
//
// It imports containerdrt/cgroups (where a pod's cgroups are) and manifests; the API
// reads its Summary, in the kubelet's stats/v1alpha1 shape, through an interface.
package stats
