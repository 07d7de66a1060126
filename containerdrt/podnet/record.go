package podnet

import "encoding/json"

// Record is what tearing down a sandbox's pod network needs, recorded when the
// sandbox is made: the pod's spec may be gone by the time it is torn down, and the
// configuration may have changed.
type Record struct {
	Conf      json.RawMessage `json:"conf,omitempty"` // the network configuration list it was set up with
	Ports     []PortMapping   `json:"ports,omitempty"`
	Namespace string          `json:"namespace"`
	Name      string          `json:"name"`
	UID       string          `json:"uid"`
}

// PortMapping is a hostPort as the portmap plugin takes it.
type PortMapping struct {
	HostPort      int32  `json:"hostPort"`
	ContainerPort int32  `json:"containerPort"`
	Protocol      string `json:"protocol"` // tcp, udp or sctp
	HostIP        string `json:"hostIP,omitempty"`
}

// Label is rec as the value of a label with room bytes for it: without the
// configuration if the whole would not fit (the pin directory's copy has it).
func (rec Record) Label(room int) string {
	data, _ := json.Marshal(rec)
	if len(data) > room {
		rec.Conf = nil
		data, _ = json.Marshal(rec)
	}
	return string(data)
}
