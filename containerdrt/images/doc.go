// Package images is staticpod's image store on containerd: pulls (Ensure, with the pull
// policy of a pod's container), the resolver (containerd's hosts.toml, plain HTTP for
// loopback and insecure registries), registry credentials (a pod's image pull secrets
// before the node's: docker config files, docker credential helpers, the kubelet's
// credential provider plugins), the imports of
// --image-dir and the pins of its archives, and the store's side of image garbage
// collection (the image filesystem, the images with their sizes, removals). It answers
// what is present by asking containerd each time; what a present image holds (its
// config and layers, named by digest) it reads once (Facts), and its /etc/passwd and
// /etc/group, which containers' users are looked up in, it copies once (UserFiles).
//
// It decides nothing: which image to pull is the runner's plan, and which images may go
// is the runner's image GC policy; containerdrt's Runtime gives each call its namespace
// and timeout and classes its containerd errors for the runner. It imports containerd's
// client, which it wraps, and of staticpod's packages only runner, for the types it
// returns (Image, StoredImage, FSUsage) and the classes of a failed pull (ErrImagePull,
// ErrImageNeverPull). It must not import containerdrt nor any other package of its
// seams: they share no state with the images.
package images
