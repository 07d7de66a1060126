package manifests

// The field contract of what a pod says of the node it runs on: the kubelet admits a
// static pod only on a node whose labels match its nodeSelector and required node
// affinity, and (staticpod, for pods of every source) whose NoExecute taints it
// tolerates (runner/node). What only a scheduler reads has no effect on one node.

const (
	proofFleet    = "e2e.TestFleetFromOneURLRunsEachNodeItsPods"
	proofMatching = "runner/node.TestFitsMatchesSelectorsAffinityAndTaintsAsTheKubelet"

	reasonOneNode = "a scheduler's preference among nodes or pods: a static pod runs on the node whose staticpod reads it, " +
		"so there is no other node to prefer or spread to, as on the kubelet"
)

var nodeRules = map[string]map[string]rule{
	"Affinity": {
		"nodeAffinity":    honoured(proofFleet),
		"podAffinity":     noEffect(reasonOneNode),
		"podAntiAffinity": noEffect(reasonOneNode),
	},
	"NodeAffinity": {
		"requiredDuringSchedulingIgnoredDuringExecution":  honouredNote(proofFleet, "decided once at admission: a pod refused is Failed (`NodeAffinity`); a running pod is never evicted, as on the kubelet"),
		"preferredDuringSchedulingIgnoredDuringExecution": noEffect(reasonOneNode),
	},
	"NodeSelector": {
		"nodeSelectorTerms": honoured(proofMatching),
	},
	"NodeSelectorTerm": {
		"matchExpressions": honoured(proofMatching),
		"matchFields":      honouredNote(proofMatching, "`metadata.name`, the node name, as on a cluster"),
	},
	"NodeSelectorRequirement": {
		"key":      honoured(proofMatching),
		"operator": honoured(proofMatching),
		"values":   honoured(proofMatching),
	},
	"Toleration": {
		"key":               honoured(proofMatching),
		"operator":          honoured(proofMatching),
		"value":             honoured(proofMatching),
		"effect":            honoured(proofMatching),
		"tolerationSeconds": noEffect("bounds how long a pod stays on a node tainted after it started; a node's taints are set when staticpod starts, and a running pod is never evicted"),
	},
}
