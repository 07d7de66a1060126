// Package wire holds what travels between staticpod's API and its clients: the JSON
// types of the API's answers that the runner produces (events, images, ConfigMaps and
// Secrets by name) and the frames of an exec stream. The daemon's runner and api
// packages and the api/client package share it, so that a client links neither the
// runner nor what the runner links.
//
// It imports nothing of staticpod's and nothing beyond the standard library and
// Kubernetes' apimachinery types: it is a leaf every side may use.
package wire

import (
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// Event is one event: what happened, to what, how often (GET /events).
type Event struct {
	UID       types.UID `json:"uid,omitempty"`
	Pod       string    `json:"pod,omitempty"` // namespace/name
	Container string    `json:"container,omitempty"`
	Type      string    `json:"type"`
	Reason    string    `json:"reason"`
	Message   string    `json:"message"`
	Source    string    `json:"source,omitempty"` // the manifest source it concerns
	First     time.Time `json:"firstTimestamp"`
	Last      time.Time `json:"lastTimestamp"`
	Count     int       `json:"count"`
}

// StoredImage is an image in the runtime.
type StoredImage struct {
	ID      string    `json:"id"`      // the config digest
	Names   []string  `json:"names"`   // its references, normalized
	Digests []string  `json:"digests"` // the manifest (or index) digests its names point to: a container's imageID
	Size    int64     `json:"size"`    // bytes of its content for this platform, as `ctr images ls` counts them
	Created time.Time `json:"created"` // when its newest name came (pulled, imported, updated)
	Pinned  bool      `json:"pinned"`  // an archive in the image dir brings it: never collected
}

// ImageUse is an image with what garbage collection weighs: whether a known pod needs
// it and when one last did (GET /images).
type ImageUse struct {
	StoredImage
	InUse    bool      `json:"inUse"`             // a pod the runner knows uses it, or wants it
	LastUsed time.Time `json:"lastUsed,omitzero"` // last seen in use; zero: not since staticpod started
}

// Object describes a ConfigMap or Secret a source provides, by name and keys only: a
// Secret's values never leave the runner this way (GET /configmaps, GET /secrets).
type Object struct {
	Kind      string   `json:"kind"` // ConfigMap or Secret
	Namespace string   `json:"namespace"`
	Name      string   `json:"name"`
	Source    string   `json:"source"` // file, http or api
	Type      string   `json:"type,omitempty"`
	Keys      []string `json:"keys"`
}

// TermSize is a terminal's size in characters.
type TermSize struct {
	Width  uint16 `json:"width"`
	Height uint16 `json:"height"`
}
