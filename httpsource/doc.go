// Package httpsource is the URL source of manifests (the kubelet's --manifest-url) and
// the push source behind the API. It fetches and decodes; it decides nothing about what
// runs. It imports manifests and nothing else of staticpod's.
//
// Both sources send full snapshots (Update) through an emit function, as the directory
// source does. URLSource polls one URL with conditional requests and keeps its last good
// snapshot through any failure; Push stores named manifests, one file each, written
// atomically, and loads them again at start. Push refuses, when it is given, a pod whose
// UID another pod holds, wanted or running, as the runner tells it (Push.Holder).
package httpsource
