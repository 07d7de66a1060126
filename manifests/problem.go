package manifests

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
)

// Problem is one error or warning found in a manifest, located by file, document and
// field path, for example `etcd.yaml: spec.containers[0].volumeMounts[1].name: Not
// found: "certs"`.
type Problem struct {
	Location string // file path, URL or pushed manifest name; "" when not known
	Doc      int    // 1-based YAML document; 0 when the problem concerns the whole file
	Docs     int    // how many documents the file has; the document is named only when > 1
	Err      *field.Error
}

// Field is the problem's field path, "" for a problem with the whole document.
func (p Problem) Field() string {
	if p.Err == nil {
		return ""
	}
	return p.Err.Field
}

// Message is the problem without its location: the field error's body.
func (p Problem) Message() string {
	if p.Err == nil {
		return ""
	}
	return p.Err.ErrorBody()
}

func (p Problem) Error() string {
	var b strings.Builder
	if p.Location != "" {
		b.WriteString(p.Location)
		if p.Doc > 0 && p.Docs > 1 {
			fmt.Fprintf(&b, " (document %d)", p.Doc)
		}
		b.WriteString(": ")
	}
	if f := p.Field(); f != "" {
		b.WriteString(f)
		b.WriteString(": ")
	}
	b.WriteString(p.Message())
	return b.String()
}

// inDocument sets the document index of each problem.
func inDocument(ps []Problem, doc int) []Problem {
	for i := range ps {
		ps[i].Doc = doc
	}
	return ps
}

// fromFieldErrors turns a field.ErrorList found in one pod into problems, prefixing each
// field path with where the pod sits in its document ("items[2]").
func fromFieldErrors(errs field.ErrorList, d Decoded) []Problem {
	ps := make([]Problem, 0, len(errs))
	for _, e := range errs {
		if d.Path != "" {
			e = copyWithPrefix(e, d.Path)
		}
		ps = append(ps, Problem{Doc: d.Doc, Err: e})
	}
	return ps
}

func copyWithPrefix(e *field.Error, prefix string) *field.Error {
	c := *e
	if c.Field == "" || c.Field == "<nil>" {
		c.Field = prefix
	} else {
		c.Field = prefix + "." + c.Field
	}
	return &c
}

// MaxReported is how many problems of one manifest a source reports (in logs, events
// and failures): a hostile file can hold thousands, and one event must stay readable.
// validate and the push API's answer still list every one.
const MaxReported = 20

// maxReportedBytes bounds one reported problem: a field error quotes the value, which
// may be megabytes long.
const maxReportedBytes = 1024

// Messages are the problems' messages, the first MaxReported of them, each cut to
// maxReportedBytes, then a line that counts the rest.
func Messages(ps []Problem) []string {
	n := min(len(ps), MaxReported)
	out := make([]string, 0, n+1)
	for _, p := range ps[:n] {
		msg := p.Error()
		if len(msg) > maxReportedBytes {
			cut := strings.ToValidUTF8(msg[:maxReportedBytes], "")
			msg = fmt.Sprintf("%s... (%d bytes more)", cut, len(msg)-len(cut))
		}
		out = append(out, msg)
	}
	if more := len(ps) - n; more > 0 {
		where := ps[n].Location
		if where != "" {
			where += ": "
		}
		out = append(out, fmt.Sprintf("%s%d more problems not shown (staticpod validate lists them all)", where, more))
	}
	return out
}
