package validate

import (
	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/runner/node"
)

// The node's flags, with the kubelet's names and syntax.
const (
	flagNodeLabels     = "node-labels"
	flagTaints         = "register-with-taints"
	flagSystemReserved = "system-reserved"
	flagKubeReserved   = "kube-reserved"
)

// NodeFlags are the flags that describe the node to admit pods on (runner/node): its
// labels and taints, shared by run and validate.
func NodeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: flagNodeLabels, EnvVars: spcli.Env(flagNodeLabels),
			Usage: "`key=value` labels of the node, beside kubernetes.io/hostname, kubernetes.io/os and kubernetes.io/arch; pods whose nodeSelector or required node affinity they do not match are refused (repeatable or comma-separated)"},
		&cli.StringSliceFlag{Name: flagTaints, EnvVars: spcli.Env(flagTaints),
			Usage: "`key=value:Effect` taints of the node; pods that do not tolerate its NoExecute taints are refused (repeatable or comma-separated)"},
	}
}

// ReservedFlags are run's flags of what the node keeps for itself, taken off its
// capacity to give what pods may request (its allocatable).
func ReservedFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringSliceFlag{Name: flagSystemReserved, EnvVars: spcli.Env(flagSystemReserved),
			Usage: "`cpu=200m,memory=500Mi`: CPU and memory reserved for the system, off what pods may request"},
		&cli.StringSliceFlag{Name: flagKubeReserved, EnvVars: spcli.Env(flagKubeReserved),
			Usage: "`cpu=100m,memory=100Mi`: CPU and memory reserved for staticpod and containerd, off what pods may request"},
	}
}

// Node is the node named name that the flags describe. With probe it has this
// machine's capacity less the reservations; without (validate, which checks
// manifests for another machine) it has none, and no pod is refused for its requests.
func Node(c *cli.Context, name string, probe bool) (*corev1.Node, error) {
	labels, err := node.ParseLabels(c.StringSlice(flagNodeLabels))
	if err != nil {
		return nil, err
	}
	taints, err := node.ParseTaints(c.StringSlice(flagTaints))
	if err != nil {
		return nil, err
	}
	cfg := node.Config{Name: name, Labels: labels, Taints: taints}
	if !probe {
		cfg.Capacity = corev1.ResourceList{}
		return node.New(cfg)
	}
	if cfg.SystemReserved, err = node.ParseReserved(flagSystemReserved, c.StringSlice(flagSystemReserved)); err != nil {
		return nil, err
	}
	if cfg.KubeReserved, err = node.ParseReserved(flagKubeReserved, c.StringSlice(flagKubeReserved)); err != nil {
		return nil, err
	}
	return node.New(cfg)
}

// nodeNameFlag is --hostname-override, also spelled --node-name for validate: the
// node whose pods are checked.
func nodeNameFlag() cli.Flag {
	f := spcli.NodeNameFlag().(*cli.StringFlag)
	f.Aliases = append(f.Aliases, "node-name")
	return f
}

// forNode is the node validate checks for when the node's flags are given, nil when
// they are not (the report then says nothing of a node).
func forNode(c *cli.Context, self *corev1.Node) *corev1.Node {
	for _, f := range []string{flagNodeLabels, flagTaints} {
		if c.IsSet(f) {
			return self
		}
	}
	return nil
}
