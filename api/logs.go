package api

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/staticpod/staticpod/logs"
	"github.com/staticpod/staticpod/manifests"
	"github.com/staticpod/staticpod/runner"
)

// logQuery is what GET /containerLogs asks for, the kubelet's query parameters.
type logQuery struct {
	read     logs.ReadOptions
	previous bool
}

func parseLogQuery(q url.Values) (logQuery, error) {
	lq := logQuery{read: logs.ReadOptions{Tail: -1}}
	var err error
	if lq.read.Follow, err = boolParam(q, "follow"); err != nil {
		return lq, err
	}
	if lq.previous, err = boolParam(q, "previous"); err != nil {
		return lq, err
	}
	if lq.read.Timestamps, err = boolParam(q, "timestamps"); err != nil {
		return lq, err
	}
	if v := q.Get("tailLines"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return lq, fmt.Errorf("tailLines=%q: want a number of lines, 0 or more", v)
		}
		lq.read.Tail = n
	}
	switch v := q.Get("stream"); v {
	case "", "All":
	case string(logs.Stdout), string(logs.Stderr):
		lq.read.Stream = logs.Stream(v)
	default:
		return lq, fmt.Errorf("stream=%q: want stdout, stderr or All", v)
	}
	return lq, nil
}

// containerLogs prints a container's log as plain text: its current attempt, or with
// previous=true the one before. With follow=true it goes on until the client leaves. The
// file is found from the pod the runner knows, never from the request's path, so no
// request reaches a file outside the pod log directory.
func (s *Server) containerLogs(w http.ResponseWriter, r *http.Request) {
	lq, err := parseLogQuery(r.URL.Query())
	if err != nil {
		writeBadRequest(w, err.Error())
		return
	}
	container := r.PathValue("container")
	pod, ok := s.podContainer(w, r)
	if !ok {
		return
	}
	status := containerStatus(pod, container)
	attempt := int(status.RestartCount)
	if lq.previous {
		if attempt == 0 {
			writeBadRequest(w, fmt.Sprintf("previous terminated container %q in pod %q not found", container, podRef(pod)))
			return
		}
		attempt--
	}
	path := logs.ContainerPath(s.cfg.PodLogDir, pod.Namespace, pod.Name, string(pod.UID), container, attempt)
	if p, ok := s.logPathOf(status, lq.previous); ok {
		path = p // attempts may skip numbers (a start that failed): the container's own file
	}
	if _, err := os.Stat(path); err != nil {
		s.noLog(w, pod, status, attempt, err)
		return
	}
	s.copyLog(w, r, path, lq.read)
}

// noLog answers for a log file that cannot be read: the kubelet's 400 for a container
// still waiting to start, else 404.
func (s *Server) noLog(w http.ResponseWriter, pod *corev1.Pod, status corev1.ContainerStatus, attempt int, err error) {
	if !errors.Is(err, fs.ErrNotExist) {
		s.log.Error("container log", "pod", podRef(pod), "container", status.Name, "attempt", attempt, "err", err)
		writeInternal(w, fmt.Sprintf("container log: %v", err))
		return
	}
	if wait := status.State.Waiting; wait != nil && attempt == int(status.RestartCount) && status.LastTerminationState.Terminated == nil {
		writeBadRequest(w, fmt.Sprintf("container %q in pod %q is waiting to start: %s", status.Name, podRef(pod), wait.Reason))
		return
	}
	writeNotFoundMsg(w, "containers", status.Name, fmt.Sprintf("no log of attempt %d of container %q in pod %q", attempt, status.Name, podRef(pod)))
}

// copyLog streams the log file at path to the client.
func (s *Server) copyLog(w http.ResponseWriter, r *http.Request, path string, opts logs.ReadOptions) {
	ctx, cancel := s.stream(w, r)
	defer cancel()
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	var out io.Writer = w
	if opts.Follow {
		fw := newFlushWriter(w)
		w.WriteHeader(http.StatusOK)
		fw.Flush() // the client learns at once that the stream is open
		out = fw
	}
	if err := logs.Read(ctx, path, opts, out); err != nil && ctx.Err() == nil {
		s.log.Warn("read container log", "path", path, "err", err)
	}
}

func hasContainer(pod *corev1.Pod, name string) bool {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			if c.Name == name {
				return true
			}
		}
	}
	return false
}

// containerStatus returns the named container's status, init containers included; a
// container the runner has not reported yet is waiting at attempt 0.
func containerStatus(pod *corev1.Pod, name string) corev1.ContainerStatus {
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			if cs.Name == name {
				return cs
			}
		}
	}
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}}
}

// containerNames lists a pod's containers for an error message: "setup (init), web".
func containerNames(pod *corev1.Pod) string {
	var names []string
	for _, c := range pod.Spec.InitContainers {
		names = append(names, c.Name+" (init)")
	}
	for _, c := range pod.Spec.Containers {
		names = append(names, c.Name)
	}
	return strings.Join(names, ", ")
}

func podRef(pod *corev1.Pod) string { return manifests.Key(pod) }

// LogPather is what a Backend may offer to find a container's log by its runtime ID,
// as the kubelet does for lastState, rather than by restart count.
type LogPather interface {
	LogPath(containerID string) (string, bool)
}

// logPathOf is the log file of the container a status names (its last terminated one
// with previous), when the backend knows it and it lies under the pod log dir.
func (s *Server) logPathOf(status corev1.ContainerStatus, previous bool) (string, bool) {
	lp, ok := s.cfg.Backend.(LogPather)
	if !ok {
		return "", false
	}
	id := status.ContainerID
	if previous {
		if t := status.LastTerminationState.Terminated; t != nil {
			id = t.ContainerID
		} else {
			return "", false
		}
	}
	_, runtimeID, _ := runner.ParseContainerID(id)
	path, ok := lp.LogPath(runtimeID)
	root := filepath.Clean(s.cfg.PodLogDir) + string(filepath.Separator)
	if !ok || !strings.HasPrefix(filepath.Clean(path), root) {
		return "", false
	}
	return path, true
}

// podContainer finds the pod and container a request's path names ({namespace}, {name},
// {container}) among the pods the runner knows, answering 404 and reporting false when
// either is not there.
func (s *Server) podContainer(w http.ResponseWriter, r *http.Request) (*corev1.Pod, bool) {
	name, container := r.PathValue("name"), r.PathValue("container")
	pod := s.findPod(r.PathValue("namespace"), name)
	if pod == nil {
		writeNotFound(w, "pods", name)
		return nil, false
	}
	if !hasContainer(pod, container) {
		writeNotFoundMsg(w, "containers", container, fmt.Sprintf("container %q not found in pod %q; its containers are: %s",
			container, podRef(pod), containerNames(pod)))
		return nil, false
	}
	return pod, true
}
