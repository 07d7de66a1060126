// Package watcher is the directory source of manifests: it lists a manifest directory
// (or one file) with the ignore rules of static pods, and will watch it with fsnotify
// plus a periodic rescan, emitting a full snapshot of its pods, and of the ConfigMaps and
// Secrets they read, on each change.
//
// It decides nothing about what runs. It imports manifests and nothing else of
// staticpod's.
package watcher
