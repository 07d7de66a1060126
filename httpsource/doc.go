// Package httpsource is the URL source of manifests (the kubelet's --manifest-url) and
// the push source behind the API. It fetches and decodes; it decides nothing about what
// runs. It imports manifests and nothing else of staticpod's.
package httpsource
