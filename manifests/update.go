package manifests

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Update is what one source (SourceFile, SourceHTTP, SourceAPI) sends the runner: the
// complete set of pods it wants, and what it could not use. The runner merges the pods
// with the other sources', and records the failures as events and metrics; sources
// log, and decide nothing about what runs.
type Update struct {
	Source string
	// Pods are every pod the source wants, decoded, defaulted, validated and identified;
	// none means none. The pods of a manifest that failed are there with their last
	// good spec.
	Pods []*corev1.Pod
	// Objects are the ConfigMaps and Secrets the source's pods read, those of a
	// manifest that failed with their last good content. Sources send them with every
	// snapshot; an update without any has none.
	Objects Objects
	// Failures are what the source could not use as it is, the same ones again in each
	// update for as long as they last; none means the source is fine.
	Failures []Failure
	// Unchanged says the source could not be read (a URL that does not answer, a body
	// that does not validate): Pods is not a snapshot, and the last one stays in force.
	// Such an update carries only Failures, and does not count as the source's first
	// snapshot.
	Unchanged bool
}

// Failure is a manifest, or a whole source, that could not be used as it is.
type Failure struct {
	Location string      // the file, URL or pushed name
	Problems []string    // each located: file, document, field path
	Invalid  bool        // read but not valid (counted as a manifest error); else unreadable
	Kept     []types.UID // the pods kept running on their last good spec
}
