// Package watcher is the directory source of manifests: it lists a manifest directory
// (or one file) with the ignore rules of static pods, reads each file (10 MiB at most),
// and watches it with fsnotify plus a periodic rescan, emitting a full snapshot of its
// pods, and of the ConfigMaps and Secrets they read, on each change. Scan is the one
// loader of manifest files: the source scans its one path, and validate and once the
// paths they are given.
//
// It decides nothing about what runs. It imports manifests and nothing else of
// staticpod's.
package watcher
