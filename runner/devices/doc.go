// Package devices is the kubelet's device manager for staticpod: it serves the device
// plugin Registration API (k8s.io/kubelet's deviceplugin v1beta1) on kubelet.sock in
// the device plugin directory, follows each registered plugin's ListAndWatch, assigns
// healthy free devices to the containers whose resources.limits name a plugin's
// resource (asking the plugin's preference, then its Allocate), and keeps those
// assignments in a checkpoint so that a restart neither loses nor doubles them.
//
// It decides nothing else of a pod: the runner asks it at admission (Admit), frees the
// devices of pods that are gone (Release) and reads a container's allocation before it
// creates it (Container), which the runtime applies to the container's spec. It must
// not import the runner or containerd.
package devices
