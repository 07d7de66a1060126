// Package userns allocates the user namespace mappings of pods with hostUsers: false,
// as the kubelet's user namespace manager does: each such pod gets 65536 IDs of the
// host's, one block of 65536 above the first (which stays the host's), container IDs
// 0..65535 mapped to host IDs base..base+65535, the same for users and groups. The
// mapping of a pod is kept in a file of its pod directory (<pods>/<uid>/userns, the
// kubelet's file and format), so that a restarted staticpod re-adopts running pods with
// their mappings, and reads every pod's file before it hands out a block, so that no
// block ever goes to two pods. A pod's block is freed when its directory goes.
//
// It touches only the files it names, and imports nothing of staticpod's nor
// containerd's.
package userns
