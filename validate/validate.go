// Package validate owns `staticpod validate`: it checks manifests without a daemon, as
// the daemon would load and admit them (the directory source's reading, the runner's
// merge of UIDs and its admission under the restriction flags), and reports every
// problem by file and field. It also holds the restriction flags, which run shares.
//
// It runs the daemon's own checks, so it imports watcher, manifests and runner, and
// cli for the flags and counts it shares with the other commands; it must not import
// containerd.
package validate

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	spcli "github.com/staticpod/staticpod/cli"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
	"github.com/staticpod/staticpod/runner/restrict"
	"github.com/staticpod/staticpod/watcher"
)

// Command is the validate command: exit 0 when every manifest is valid, 1 otherwise.
func Command() *cli.Command {
	return &cli.Command{
		Name:      "validate",
		Usage:     "check manifests: exit 0 when every one is valid, 1 when any is not",
		ArgsUsage: "PATH...",
		Flags: append([]cli.Flag{
			&cli.BoolFlag{Name: "strict", Usage: "treat unknown and duplicate fields as errors"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json"},
			nodeNameFlag(),
		}, append(NodeFlags(), RestrictionFlags()...)...),
		Action: runValidate,
	}
}

// Validation is the report of validate, also its JSON form.
type Validation struct {
	Valid bool             `json:"valid"`
	Files []FileValidation `json:"files"`
}

// FileValidation is what validate found in one file.
type FileValidation struct {
	Path     string    `json:"path"`
	Pods     []string  `json:"pods"`
	Objects  []string  `json:"objects,omitempty"` // "ConfigMap namespace/name", "Secret namespace/name"
	Errors   []Problem `json:"errors"`
	Warnings []Problem `json:"warnings"`
	// Refused are the pods of the file that are not for the node: their nodeSelector,
	// node affinity or tolerations do not fit its labels and taints. Not an error: a
	// fleet's URL serves pods for other nodes too.
	Refused []Problem `json:"refused,omitempty"`
}

// Problem is one error or warning, located by document and field path.
type Problem struct {
	Document int    `json:"document,omitempty"`
	Field    string `json:"field,omitempty"`
	Message  string `json:"message"`
	Text     string `json:"text"` // the whole located message, as printed in text mode
}

func runValidate(c *cli.Context) error {
	if c.NArg() == 0 {
		return cli.Exit("validate needs at least one PATH (a manifest file or directory)", spcli.ExitUsage)
	}
	format := c.String("output")
	if format != "text" && format != "json" {
		return cli.Exit(fmt.Sprintf("-o %q: use text or json", format), spcli.ExitUsage)
	}
	node, err := spcli.NodeName(c)
	if err != nil {
		return cli.Exit(fmt.Sprintf("node name: %v", err), spcli.ExitUsage)
	}
	restrict, err := Restrictions(c)
	if err != nil {
		return cli.Exit(err.Error(), spcli.ExitUsage)
	}
	self, err := Node(c, node, false)
	if err != nil {
		return cli.Exit(err.Error(), spcli.ExitUsage)
	}
	// The paths load as the files of one directory of the daemon would (watcher.Scan):
	// their pods may read the ConfigMaps and Secrets of every path, and a pod or object
	// defined twice is an error in the later file.
	for _, path := range c.Args().Slice() {
		if _, err := os.Stat(path); err != nil {
			return cli.Exit(fmt.Sprintf("validate: %v", err), spcli.ExitUsage)
		}
	}
	snap, err := watcher.Scan(c.Args().Slice(), node)
	if err != nil {
		return cli.Exit(fmt.Sprintf("validate: %v", err), spcli.ExitUsage)
	}
	report := Validation{Valid: true}
	report.add(snap, c.Bool("strict"))
	var pods []*corev1.Pod
	for _, f := range snap.Files {
		pods = append(pods, f.Result.Pods...)
	}
	pods = report.merge(pods)
	report.admit(pods, restrict, self)
	if format == "json" {
		err = writeJSONReport(c.App.Writer, report)
	} else {
		err = writeTextReport(c.App.Writer, report, forNode(c, self))
	}
	if err != nil {
		return err
	}
	if !report.Valid {
		return cli.Exit("", spcli.ExitInvalid)
	}
	return nil
}

func (v *Validation) add(snap watcher.Snapshot, strict bool) {
	start := len(v.Files)
	for _, f := range snap.Files {
		fv := FileValidation{Path: f.Path, Pods: []string{}, Errors: []Problem{}, Warnings: []Problem{}}
		if f.ReadErr != nil {
			fv.Errors = append(fv.Errors, Problem{Message: f.ReadErr.Error(), Text: f.ReadErr.Error()})
		}
		for _, p := range f.Result.Pods {
			fv.Pods = append(fv.Pods, manifests.Key(p))
		}
		for _, cm := range f.Result.ConfigMaps {
			fv.Objects = append(fv.Objects, manifests.ObjectRef{Kind: manifests.KindConfigMap, Namespace: cm.Namespace, Name: cm.Name}.String())
		}
		for _, s := range f.Result.Secrets {
			fv.Objects = append(fv.Objects, manifests.ObjectRef{Kind: manifests.KindSecret, Namespace: s.Namespace, Name: s.Name}.String())
		}
		fv.Errors = append(fv.Errors, toProblems(f.Result.Errors)...)
		if strict {
			fv.Errors = append(fv.Errors, toProblems(f.Result.Warnings)...)
		} else {
			fv.Warnings = append(fv.Warnings, toProblems(f.Result.Warnings)...)
		}
		v.Files = append(v.Files, fv)
	}
	for _, c := range snap.Conflicts {
		for i := start; i < len(v.Files); i++ {
			if v.Files[i].Path == c.Dropped {
				v.Files[i].Errors = append(v.Files[i].Errors, Problem{Field: "metadata.name", Message: c.Error(), Text: c.Error()})
			}
		}
	}
	for _, f := range v.Files[start:] {
		if len(f.Errors) > 0 {
			v.Valid = false
		}
	}
}

// merge reports the pods that the daemon would refuse for a UID that another pod has
// (runner.Config), each on the file of the refused pod, and returns the others. Pods
// that share a name across files are reported already (watcher.Scan drops them).
func (v *Validation) merge(pods []*corev1.Pod) []*corev1.Pod {
	desired, conflicts := runner.NewConfig().Apply(manifests.Update{Source: manifests.SourceFile, Pods: pods})
	for _, c := range conflicts {
		for i := range v.Files {
			if v.Files[i].Path == c.Location {
				v.Files[i].Errors = append(v.Files[i].Errors, Problem{Field: c.Err.Field, Message: c.Err.ErrorBody(), Text: c.Error()})
				v.Valid = false
			}
		}
	}
	kept := pods[:0:0]
	for _, p := range pods {
		if desired[p.UID] == p {
			kept = append(kept, p)
		}
	}
	return kept
}

// admit reports the pods the daemon would refuse (runner.Admit): those the restriction
// flags forbid to the file source, and those whose host port is another pod's, across
// files, as errors; those not for the node as refused; each on the file of the pod.
func (v *Validation) admit(pods []*corev1.Pod, restrict restrict.Restrictions, self *corev1.Node) {
	desired := map[types.UID]*corev1.Pod{}
	for _, p := range pods {
		desired[p.UID] = p
	}
	rejected := runner.Admit(desired, restrict, runner.Host{Node: self}, func(types.UID) bool { return false }, nil)
	for _, pod := range pods {
		rej, ok := rejected[pod.UID]
		if !ok {
			continue
		}
		path := pod.Annotations[manifests.AnnotationLocation]
		if rej.Node != nil {
			msg := manifests.Key(pod) + ": " + rej.Node.Reason + ": " + rej.Node.Message
			v.addTo(path, func(f *FileValidation) {
				f.Refused = append(f.Refused, Problem{Message: msg, Text: path + ": " + msg})
			})
			continue
		}
		var field, msg string
		if f := rej.Forbidden; f != nil {
			field, msg = f.Field.String(), f.Detail(pod)
		} else {
			field = rej.Port.Field.String()
			msg = fmt.Sprintf("hostPort %s is already used by pod %s in %s", rej.Port, manifests.Key(rej.Holder), rej.Holder.Annotations[manifests.AnnotationLocation])
		}
		v.addTo(path, func(f *FileValidation) {
			f.Errors = append(f.Errors, Problem{Field: field, Message: msg, Text: path + ": " + field + ": " + msg})
			v.Valid = false
		})
	}
}

// addTo applies add to the report of the file at path.
func (v *Validation) addTo(path string, add func(*FileValidation)) {
	for i := range v.Files {
		if v.Files[i].Path == path {
			add(&v.Files[i])
		}
	}
}

func toProblems(ps []manifests.Problem) []Problem {
	out := make([]Problem, 0, len(ps))
	for _, p := range ps {
		out = append(out, Problem{Document: p.Doc, Field: p.Field(), Message: p.Message(), Text: p.Error()})
	}
	return out
}

func writeJSONReport(w io.Writer, v Validation) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// writeTextReport prints one line per problem, then a summary line. For a node
// (forNode) it also prints the pods that node refuses, and a line of what it runs.
func writeTextReport(w io.Writer, v Validation, self *corev1.Node) error {
	var pods, objs, bad, errs, warns, refused int
	for _, f := range v.Files {
		objs += len(f.Objects)
		for _, p := range f.Errors {
			fmt.Fprintf(w, "error: %s\n", p.Text)
		}
		for _, p := range f.Warnings {
			fmt.Fprintf(w, "warning: %s\n", p.Text)
		}
		for _, p := range f.Refused {
			fmt.Fprintf(w, "refused: %s\n", p.Text)
		}
		refused += len(f.Refused)
		pods += len(f.Pods)
		errs += len(f.Errors)
		warns += len(f.Warnings)
		if len(f.Errors) > 0 {
			bad++
		}
	}
	loaded := spcli.Count(pods, "pod")
	if objs > 0 {
		loaded += " and " + spcli.Count(objs, "object")
	}
	_, err := fmt.Fprintf(w, "checked %s: %s valid, %s invalid; %s, %s\n", spcli.Count(len(v.Files), "file"),
		loaded, spcli.Count(bad, "file"), spcli.Count(errs, "error"), spcli.Count(warns, "warning"))
	if err == nil && self != nil {
		_, err = fmt.Fprintf(w, "node %s refuses %s of %s\n", self.Name, spcli.Count(refused, "pod"), spcli.Count(pods, "pod"))
	}
	return err
}
